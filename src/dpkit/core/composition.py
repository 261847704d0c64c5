"""Composition theorems beyond basic sequential composition, and group privacy.

- :func:`advanced_composition` — k-fold adaptive composition of (ε, δ)-DP mechanisms is
  (ε√(2k ln(1/δ′)) + kε(e^ε − 1), kδ + δ′)-DP (Dwork, Rothblum & Vadhan 2010;
  Dwork & Roth Thm 3.20).
- :func:`optimal_composition` — the exact privacy region of k-fold composition of
  homogeneous (ε, δ)-DP mechanisms (Kairouz, Oh & Viswanath 2015, Thm 3.3): for each
  i ∈ {0, …, ⌊k/2⌋} it is ((k − 2i)ε, 1 − (1 − δ)^k (1 − δᵢ))-DP with
  δᵢ = Σ_{ℓ<i} C(k, ℓ)(e^{(k−ℓ)ε} − e^{(k−2i+ℓ)ε}) / (1 + e^ε)^k; the smallest such ε meeting
  the target δ is returned.
- :func:`group_privacy` — a loss at distance 1 scaled to k-record neighbours:
  pure kε; approximate (kε, k e^{(k−1)ε} δ) (Dwork & Roth Thm 2.2 and its (ε, δ) form);
  zCDP k²ρ (Bun & Steinke 2016 Prop. 1.9); RDP is not covered (needs order scaling).
- :func:`parallel_composition` — measurements on disjoint parts of a dataset: the loss is the
  maximum of the parts' losses (McSherry 2009, PINQ Thm 4).

Every bound is computed with directed rounding, so the returned loss is never smaller than
the theorem's value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.core.numbers import (
    Number,
    dyadic_up,
    exp_down,
    exp_up,
    fraction_down,
    integer,
    log_up,
    sqrt_up,
)
from dpkit.errors import DomainError, MeasureError

__all__ = ["advanced_composition", "optimal_composition", "group_privacy",
           "parallel_composition"]

_BITS = 256  # precision kept by intermediate directed roundings


def _check(epsilon: Fraction, delta: Fraction, k: int) -> None:
    if epsilon < 0 or not 0 <= delta <= 1:
        raise DomainError("need ε ≥ 0 and δ ∈ [0, 1]")
    integer(k, "k", minimum=1)


def advanced_composition(loss: PureDP | ApproxDP, k: int, delta_slack: Number) -> ApproxDP:
    """k-fold composition by the advanced composition theorem (D&R Thm 3.20).

    Returns the better of it and basic composition (kε, kδ), spending the slack δ′ only
    when the advanced bound is the smaller ε.
    """
    approx = loss.to_approx()
    eps, dlt = approx.epsilon, approx.delta
    slack = fraction_down(delta_slack)
    _check(eps, dlt, k)
    if not 0 < slack < 1:
        raise DomainError("delta_slack must be in (0, 1)")
    adv_eps = eps * sqrt_up(2 * k * log_up(1 / slack)) + k * eps * (exp_up(eps) - 1)
    basic = ApproxDP(k * eps, min(Fraction(1), k * dlt))
    advanced = ApproxDP(adv_eps, min(Fraction(1), k * dlt + slack))
    return advanced if advanced.epsilon < basic.epsilon else basic


def optimal_composition(loss: PureDP | ApproxDP, k: int, delta_target: Number) -> ApproxDP:
    """Tight k-fold composition of one (ε, δ) mechanism (Kairouz, Oh & Viswanath 2015 Thm 3.3).

    Returns the smallest corner (k − 2i)ε whose δ bound meets ``delta_target``.

    Raises
    ------
    DomainError
        If even ε_total = kε cannot meet ``delta_target`` (δ_target < 1 − (1 − δ)^k).
    """
    approx = loss.to_approx()
    eps, dlt = approx.epsilon, approx.delta
    target = fraction_down(delta_target)
    _check(eps, dlt, k)
    base = 1 - (1 - dlt) ** k  # δ of corner i = 0, exactly
    if base > target:
        raise DomainError("delta_target is below 1 − (1 − δ)^k: no composition meets it")
    if eps == 0:
        return ApproxDP(0, base)
    up = {j: dyadic_up(exp_up(j * eps), _BITS) for j in range(0, k + 1)}
    down = {j: Fraction(math.floor(exp_down(j * eps) * (1 << _BITS)), 1 << _BITS)
            for j in range(-k, k + 1)}
    denom = (1 + down[1]) ** k  # a lower bound of (1 + e^ε)^k

    def total(i: int) -> Fraction:  # upper bound on the δ of corner i
        num = sum((math.comb(k, ell) * (up[k - ell] - down[k - 2 * i + ell])
                   for ell in range(i)), Fraction(0))
        delta_i = min(Fraction(1), dyadic_up(num / denom, _BITS))
        return 1 - (1 - dlt) ** k * (1 - delta_i)

    lo, hi = 0, k // 2  # δ_i grows with i: the largest i within the target, by bisection
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if total(mid) <= target:
            lo = mid
        else:
            hi = mid - 1
    return ApproxDP((k - 2 * lo) * eps, total(lo) if lo else base)


def group_privacy(loss: PrivacyLoss, k: int) -> PrivacyLoss:
    """The loss for neighbours k records apart, from the loss at distance 1."""
    k = integer(k, "k", minimum=1)
    if isinstance(loss, PureDP):
        return PureDP(k * loss.epsilon)
    if isinstance(loss, ZCDP):
        return ZCDP(k * k * loss.rho)
    if isinstance(loss, ApproxDP):
        delta = min(Fraction(1), k * exp_up((k - 1) * loss.epsilon) * loss.delta)
        return ApproxDP(k * loss.epsilon, delta)
    raise MeasureError(f"group privacy for {type(loss).__name__} is not implemented")


def parallel_composition(losses: Sequence[PrivacyLoss]) -> PrivacyLoss:
    """Loss of measurements on disjoint parts: the maximum (all in one measure)."""
    if not losses:
        raise DomainError("nothing to compose")
    kind = type(losses[0])
    if any(type(x) is not kind for x in losses):
        raise MeasureError("parallel composition needs losses of one measure")
    if kind is PureDP:
        return PureDP(max(x.epsilon for x in losses))  # type: ignore[attr-defined]
    if kind is ZCDP:
        return ZCDP(max(x.rho for x in losses))  # type: ignore[attr-defined]
    if kind is ApproxDP:
        return ApproxDP(max(x.epsilon for x in losses),  # type: ignore[attr-defined]
                        max(x.delta for x in losses))  # type: ignore[attr-defined]
    raise MeasureError(f"parallel composition of {kind.__name__} is not implemented")
