"""Choosing a frequency oracle: the rule of Wang, Blocki, Li & Jha (USENIX Security 2017,
§4.5): GRR's Var* (e^ε + k − 2)/(e^ε − 1)² is below OLH's 4e^ε/(e^ε − 1)² exactly when
k < 3e^ε + 2."""

from __future__ import annotations

from dpkit.core.numbers import Number, exp_down, exp_up
from dpkit.local.base import FrequencyOracle, check_k_epsilon
from dpkit.local.grr import GRR
from dpkit.local.hashing import OLH, PRIME
from dpkit.local.unary import OUE

__all__ = ["auto"]


def auto(k: int, epsilon: Number, fallback: int = 0) -> FrequencyOracle:
    """The lower-variance oracle for k values at ε: :class:`GRR` if k < 3e^ε + 2, else
    :class:`OLH` (or :class:`OUE` when k > 65521, beyond OLH's hash family; OUE has the
    same Var*).

    Raises
    ------
    DomainError
        If k < 2 or ε ≤ 0.
    """
    size, eps = check_k_epsilon(k, epsilon)
    if size < 3 * exp_down(eps) + 2:
        return GRR(size, eps, fallback)
    if size >= 3 * exp_up(eps) + 2:
        return OLH(size, eps, fallback) if size <= PRIME else OUE(size, eps, fallback)
    return GRR(size, eps, fallback)  # k within the rounding of 3e^ε + 2: a tie
