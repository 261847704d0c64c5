"""Generalised randomized response (GRR, k-RR; "direct encoding" in Wang et al. 2017).

Sources: Warner, "Randomized response", JASA 1965 (k = 2); Kairouz, Oh & Viswanath,
"Extremal mechanisms for local differential privacy", JMLR 2016 (k-RR); Wang, Blocki, Li &
Jha, USENIX Security 2017, §4.1 (direct encoding, its estimator and variance).
"""

from __future__ import annotations

import numpy as np

from dpkit.core import rng
from dpkit.core.numbers import Number
from dpkit.local.base import (
    FrequencyOracle,
    audit_cases,
    dyadic_down,
    exp_lower,
)
from dpkit.mechanisms.randomized_response import response_coins
from dpkit.mechanisms.registry import register

__all__ = ["GRR"]


@register(audit=lambda: audit_cases(GRR, "grr"))
class GRR(FrequencyOracle):
    """Generalised randomized response over {0, …, k − 1}.

    Exact output law: P[y = x] = p, P[y = v] = q = (1 − p)/(k − 1) for each v ≠ x, with
    p = e^ε/(e^ε + k − 1) rounded down to a multiple of 2^-32 (so p/q ≤ e^ε). A report
    supports the one value it names: p* = p, q* = q; the estimator is
    f̂(v) = (ŷ(v) − q)/(p − q) with ŷ(v) the share of reports equal to v, and

        Var[f̂(v)] = (e^ε + k − 2)/(n (e^ε − 1)²) + f(v)(1 − p − q)/(n (p − q))

    (Wang et al. 2017, §4.1; the first term is their Var*, the variance at f(v) → 0).
    For k = 2 this is Warner's randomized response.

    Parameters
    ----------
    k, epsilon, fallback :
        See :class:`~dpkit.local.base.FrequencyOracle`.

    Raises
    ------
    DomainError
        If k < 2 or ε ≤ 0.
    """

    name = "grr"

    def __init__(self, k: int, epsilon: Number, fallback: int = 0) -> None:
        super().__init__(k, epsilon, fallback)
        e = exp_lower(self.epsilon)
        self.p = dyadic_down(e / (e + self.k - 1))
        self.q = (1 - self.p) / (self.k - 1)

    def _randomize(self, idx: np.ndarray) -> np.ndarray:
        keep = response_coins(self.p, idx.size)
        other = rng.uniform_below(self.k - 1, idx.size).astype(np.int64)
        other += other >= idx  # uniform over the k − 1 values other than the input
        return np.where(keep, idx, other)

    def support(self, reports: np.ndarray) -> np.ndarray:
        return np.bincount(np.asarray(reports, dtype=np.int64), minlength=self.k)[: self.k]

    def supports(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports)[:, None] == np.arange(self.k)[None, :]

    def output_law(self, x: int) -> np.ndarray:
        """P[y = v | x] for v = 0 … k − 1 (exact Fractions)."""
        law = np.full(self.k, self.q, dtype=object)
        law[x] = self.p
        return law
