"""Privacy amplification by shuffling: the central (ε, δ) of n shuffled ε0-LDP reports.

Source: Feldman, McMillan & Talwar, "Hiding Among the Clones: A Simple and Nearly Optimal
Analysis of Privacy Amplification by Shuffling", FOCS 2021 (arXiv:2012.12803): Theorem 3.1
(closed form) and Theorem 3.2 with its numerical evaluation (§4). Both hold for any
ε0-LDP randomizer applied by each of n users (GRR, OLH, … reports), the reports shuffled
(the collector sees the multiset), for neighbouring datasets differing in one user's value.

A shuffled collection is also a post-processing of n ε0-LDP reports, so (ε0, 0) always
holds: every function here returns at most ε0.

Numerics and rounding.

- e^{ε0} is replaced by a rational r0 ≥ e^{ε0} (an ε0-LDP randomizer is ln(r0)-LDP, and
  both bounds grow with ε0), δ by a rational ≤ δ, and every step of the closed form rounds
  up (:mod:`dpkit.core.numbers`); its ε is exact-conservative.
- The numerical bound evaluates the hockey-stick divergence of Theorem 3.2's pair (P, Q)
  with binomial tails in float64 (SciPy's incomplete beta), adding to each term an error
  allowance of 1e-12 relative to the magnitudes that are summed and the binomial mass
  outside the evaluated range (clone counts in blocks, each bounded by its first count:
  see :func:`_terms`); ε is found by bisection on a grid of 2^-24 and the upper
  end returned. The allowance assumes SciPy's binomial functions are accurate to 1e-12
  relative, far above their documented ~1e-14; tests compare with an exact rational
  evaluation for small n.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from scipy import stats

from dpkit.core.measures import ApproxDP
from dpkit.core.numbers import (
    Number,
    exp_down,
    exp_up,
    fraction_down,
    integer,
    log_up,
    positive,
    sqrt_up,
)
from dpkit.errors import DomainError

__all__ = ["shuffle_closed_form", "shuffle_numerical", "shuffle_delta", "shuffled"]

_ETA = 1e-12  # relative error allowance of the float evaluation (module docstring)
_STEPS = 24  # bisection steps: ε on a grid of ε0·2^-24
_BLOCKS = 512  # clone-count blocks per evaluation of δ(ε)


def _check(epsilon0: Number, n: Any, delta: Number) -> tuple[Fraction, int, Fraction]:
    eps0 = positive(epsilon0, "epsilon0")  # rounded up: a larger ε0 is conservative
    users = integer(n, "n", minimum=1)
    dlt = fraction_down(delta)
    if not 0 < dlt < 1:
        raise DomainError(f"delta must be in (0, 1), got {delta!r}")
    return eps0, users, dlt


def shuffle_closed_form(epsilon0: Number, n: int, delta: Number) -> ApproxDP:
    """Theorem 3.1 of Feldman, McMillan & Talwar 2021: if ε0 ≤ ln(n/(16 ln(2/δ))), the
    shuffled reports of n ε0-LDP randomizers are (ε, δ)-DP with

        ε = ln(1 + (e^{ε0} − 1)/(e^{ε0} + 1)·(8√(e^{ε0} ln(4/δ))/√n + 8e^{ε0}/n)),

    computed with r0 ≥ e^{ε0} and every operation rounded up; otherwise (or if larger) ε0.

    Parameters
    ----------
    epsilon0 : number
        The local ε0 > 0 of each report (nats).
    n : int
        Number of users (≥ 1).
    delta : number
        δ ∈ (0, 1).

    Returns
    -------
    ApproxDP
        The central (ε, δ).

    Raises
    ------
    DomainError
        If ε0 ≤ 0, n < 1 or δ ∉ (0, 1).
    """
    eps0, users, dlt = _check(epsilon0, n, delta)
    r0 = exp_up(eps0)
    # condition: ε0 ≤ ln(n/(16 ln(2/δ))) ⟺ r0' ≤ n/(16 ln(2/δ)); checked with r0 ≥ e^{ε0}
    if r0 * 16 * log_up(2 / dlt) > users:
        return ApproxDP(eps0, dlt)
    ratio = (r0 - 1) / (r0 + 1)  # increasing in r0
    inner = 8 * sqrt_up(r0 * log_up(4 / dlt) / users) + 8 * r0 / users
    eps = log_up(1 + ratio * inner)
    return ApproxDP(min(eps, eps0), dlt)


def _terms(r0: float, r: float, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Per block of clone counts [c_j, c_{j+1}): (weight P[c_j ≤ C < c_{j+1}], an upper
    bound on D_r(P_c ‖ Q_c) for every c in the block) and the mass of C outside the blocks.

    D_r(P_c ‖ Q_c) does not increase with c: P_{c+1}, Q_{c+1} are P_c, Q_c passed through
    one and the same kernel (one more clone, a fair coin added to one side), and the
    hockey-stick divergence obeys data processing. So the block's first c bounds it; at
    most 512 blocks are evaluated (one per c when the range is smaller)."""
    p_clone = 1 / r0
    dist = stats.binom(n - 1, p_clone)
    lo, hi = (int(v) for v in dist.ppf([1e-30, 1 - 1e-30]))
    lo, hi = max(lo - 1, 0), min(hi + 1, n - 1)
    starts = np.unique(np.linspace(lo, hi + 1, _BLOCKS + 1).astype(np.int64))
    c = starts[:-1]
    cdf = dist.cdf(starts - 1)
    weight = np.maximum(np.diff(cdf), 0.0) + _ETA * cdf[1:]
    outside = float(dist.cdf(lo - 1) + dist.sf(hi)) if n > 1 else 0.0
    p = r0 / (r0 + 1)  # Δ ~ Bernoulli(e^{ε0}/(e^{ε0} + 1))
    coef1, coef2 = p - r * (1 - p), (1 - p) - r * p  # D(a) = coef1·B(a − 1) + coef2·B(a)
    t = (c + 1) * (r * p - (1 - p)) / ((2 * p - 1) * (1 + r))
    a_star = np.clip(np.floor(t).astype(np.int64) + 1, 0, c + 2)
    s1 = stats.binom.sf(a_star - 2, c, 0.5)  # P[Bin(c, 1/2) ≥ a* − 1]
    s2 = stats.binom.sf(a_star - 1, c, 0.5)  # P[Bin(c, 1/2) ≥ a*]
    value = coef1 * s1 + coef2 * s2
    allowance = _ETA * (abs(coef1) * s1 + abs(coef2) * s2)
    return weight, np.minimum(np.maximum(value, 0.0) + allowance, 1.0), outside


def shuffle_delta(epsilon0: Number, n: int, epsilon: Number) -> float:
    """Theorem 3.2's δ(ε) = D_{e^ε}(P ‖ Q), an upper bound (float) for n shuffled ε0-LDP
    reports: C ~ Bin(n − 1, e^{−ε0}), A ~ Bin(C, 1/2), Δ ~ Bernoulli(e^{ε0}/(e^{ε0} + 1)),
    P = (A + Δ, C − A + 1 − Δ), Q = (A + 1 − Δ, C − A + Δ). For each c the set where
    P > e^ε Q is a tail a ≥ a*(c) (the ratio increases with a), so the divergence is a sum
    of binomial tails (module docstring for the numerics; e^{ε0} rounded up, e^ε down).

    Raises
    ------
    DomainError
        If ε0 ≤ 0, n < 1 or ε < 0.
    """
    eps0 = positive(epsilon0, "epsilon0")
    users = integer(n, "n", minimum=1)
    eps = fraction_down(epsilon)
    if eps < 0:
        raise DomainError("epsilon must be ≥ 0")
    if eps >= eps0:
        return 0.0
    r0 = float(exp_up(eps0)) * (1 + 1e-15)
    r = float(exp_down(eps)) * (1 - 1e-15)
    weight, div, outside = _terms(r0, r, users)
    return min(1.0, float((weight * div).sum()) * (1 + _ETA) + outside * (1 + _ETA))


def shuffle_numerical(epsilon0: Number, n: int, delta: Number) -> ApproxDP:
    """The smallest ε (on a grid of ε0·2^-24, rounded up) with :func:`shuffle_delta` ≤ δ:
    the numerical bound of Feldman, McMillan & Talwar 2021 (§4), never above ε0.

    Raises
    ------
    DomainError
        If ε0 ≤ 0, n < 1 or δ ∉ (0, 1).
    """
    eps0, users, dlt = _check(epsilon0, n, delta)
    target = float(dlt) * (1 - 1e-15)
    lo, hi = 0, 1 << _STEPS  # ε = ε0·j/2^24; j = 2^24 (ε0) always holds
    if shuffle_delta(eps0, users, 0) <= target:
        return ApproxDP(0, dlt)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if shuffle_delta(eps0, users, eps0 * Fraction(mid, 1 << _STEPS)) <= target:
            hi = mid
        else:
            lo = mid
    return ApproxDP(eps0 * Fraction(hi, 1 << _STEPS), dlt)


def shuffled(epsilon0: Number, n: int, delta: Number) -> ApproxDP:
    """The better (smaller ε) of :func:`shuffle_numerical` and :func:`shuffle_closed_form`
    at the same δ: the central guarantee of n shuffled ε0-LDP reports (e.g. GRR's, with
    ``epsilon0 = GRR(k, ε0).epsilon``).

    Raises
    ------
    DomainError
        If ε0 ≤ 0, n < 1 or δ ∉ (0, 1).
    """
    a, b = shuffle_numerical(epsilon0, n, delta), shuffle_closed_form(epsilon0, n, delta)
    return a if a.epsilon <= b.epsilon else b
