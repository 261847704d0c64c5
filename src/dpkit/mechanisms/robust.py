"""Data-dependent mechanisms: propose-test-release and sample-and-aggregate.

- :func:`make_ptr_median` — propose-test-release for the median (Dwork & Lei 2009; Dwork &
  Roth §7.3, Thm 7.4): propose a sensitivity bound b; compute the distance d(x) to the nearest
  dataset whose local sensitivity exceeds b (via A^(k), Nissim, Raskhodnikova & Smith 2007
  §3.1); if d(x) + Lap(1/ε) > ln(1/δ)/ε release median + Lap(b/ε), else refuse (⊥). The whole
  is (2ε, δ)-DP for substitution neighbours.
- :func:`make_sample_and_aggregate` — sample-and-aggregate (Nissim, Raskhodnikova & Smith
  2007 §4): split the records uniformly at random into m blocks, run any function on each,
  clamp the m results to declared bounds and release their mean with Laplace noise. One record
  lies in one block, so the mean moves by at most (U − L)/m (substitution or add/remove).

Noise is exact: the distance test uses discrete Laplace on an integer, and releases use the
grid Laplace mechanism (:func:`~dpkit.mechanisms.make_laplace`) at public scales.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import rng, samplers
from dpkit.core.component import Measurement
from dpkit.core.domains import AnyDomain, VectorDomain
from dpkit.core.measures import ApproxDP, PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import (
    Number,
    fraction_down,
    fraction_up,
    integer,
    log_up,
    non_negative,
    positive,
)
from dpkit.errors import BoundsError, DomainError
from dpkit.mechanisms._common import VALUES
from dpkit.mechanisms.calibrated import CalibratedNoise, make_noise
from dpkit.mechanisms.laplace import make_laplace
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["make_ptr_median", "make_sample_and_aggregate", "median_instability_distance"]

_REFUSED = -1e9  # the audit's code for PTR's ⊥ (any fixed value: post-processing)


def _audit_ptr() -> list[AuditCase]:
    """Bounds (0, 1), b = 1, ε = 1/2 per step, δ = 10^-6 (claim (1, 10^-6)) on the tables
    (0, 0, 1) and (0, 1, 1), one substitution apart, whose medians are 0 and 1 (b = U − L:
    the test always passes, so the release's noise is what is audited). Broken: 4ε."""
    def sampler(epsilon: Fraction) -> Sampler:
        release = _ptr_median((0, 1), 1, epsilon, Fraction(1, 10**6))[1]
        return lambda x, n: np.nan_to_num(release(x, n), nan=_REFUSED)

    return [AuditCase("ptr_median", make_ptr_median((0, 1), 1, Fraction(1, 2),
                                                    Fraction(1, 10**6)),
                      sampler(Fraction(1, 2)), sampler(Fraction(2)),
                      np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0]))]


def _audit_sample_and_aggregate() -> list[AuditCase]:
    """The block maximum, m = 2 blocks, bounds (0, 1), ε = 1/2, on the tables (0, 0, 0, 0)
    and (1, 0, 0, 0): the mean of the block results moves by (U − L)/m whatever the
    partition. Broken: 4ε."""
    def sampler(epsilon: Fraction) -> Sampler:
        return _sample_and_aggregate(np.max, 2, (0, 1), epsilon)[1]

    return [AuditCase("sample_and_aggregate",
                      make_sample_and_aggregate(np.max, 2, (0, 1), Fraction(1, 2)),
                      sampler(Fraction(1, 2)), sampler(Fraction(2)),
                      np.zeros(4), np.array([1.0, 0.0, 0.0, 0.0]))]


def _grid_noise(noise: CalibratedNoise, n: int) -> Callable[[Any], Any]:
    """``noise`` itself for one value; for n values, the grid Laplace mechanism on the same
    grid and scale (the same law per coordinate), n at a time."""
    if n == 1:
        return noise
    return make_laplace(noise.scale, max_size=n, k=noise.grid)


def _bounds(bounds: Any) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise BoundsError("bounds must be (lower, upper)") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise BoundsError("bounds must be finite with lower < upper")
    return lo, hi


def _clean(x: Any, lo: float, hi: float) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64).reshape(-1)
    # rule: NaN counts as the lower bound (n stays fixed under substitution), then clamp
    return np.sort(np.clip(np.nan_to_num(arr, nan=lo), lo, hi))


def median_instability_distance(x: np.ndarray, lo: float, hi: float, b: float, cap: int
                                ) -> int:
    """min{k : A^(k)(x) > b}, capped at ``cap`` (still 1-Lipschitz under substitution).

    A^(k)(x) = max_{0 ≤ t ≤ k+1} (x_{m+t} − x_{m+t−k−1}) for sorted x padded with ``lo`` below
    and ``hi`` above, m the (lower) median's position: the largest local sensitivity of the
    median over datasets within k substitutions (NRS07 §3.1).
    """
    n = x.size
    m = (n + 1) // 2  # 1-based lower median
    padded = np.concatenate([np.full(cap + 2, lo), x, np.full(cap + 2, hi)])
    off = cap + 2 - 1  # padded[off + i] = x_i (1-based)
    for k in range(cap):
        t = np.arange(k + 2)
        if (padded[off + m + t] - padded[off + m + t - k - 1]).max() > b:
            return k
    return cap


@register(audit=_audit_ptr)
def make_ptr_median(bounds: tuple[Number, Number], proposed_sensitivity: Number,
                    epsilon: Number, delta: Number) -> Measurement:
    """Propose-test-release for the median of values clamped to ``bounds``.

    Parameters
    ----------
    bounds : (lower, upper)
        Declared data range; values are clamped and NaN counts as the lower bound.
    proposed_sensitivity : number
        b > 0, the proposed bound on the median's local sensitivity.
    epsilon, delta : number
        ε > 0 for each of the test and the release; δ ∈ (0, 1).

    Returns
    -------
    Measurement
        Input: a 1-D array (one value per individual; input domain: a vector of numbers,
        NaN allowed) under :class:`HammingDistance`; output the noisy median (float) or
        ``None`` (the test refused). Privacy map:
        d_in = 1 ↦ ApproxDP(2ε, δ) (Dwork & Roth Thm 7.4); larger d_in is refused.
    """
    return _ptr_median(bounds, proposed_sensitivity, epsilon, delta)[0]


def _ptr_median(bounds: tuple[Number, Number], proposed_sensitivity: Number, epsilon: Number,
                delta: Number) -> tuple[Measurement, Callable[[Any, int], np.ndarray]]:
    """The measurement and ``releases(x, n)``: n independent runs on the same data (NaN for
    a refusal), sharing the data-dependent distance."""
    lo, hi = _bounds(bounds)
    b = positive(proposed_sensitivity, "proposed_sensitivity")
    eps = positive(epsilon, "epsilon", up=False)
    dlt = fraction_down(delta)
    if not 0 < dlt < 1:
        raise DomainError("delta must be in (0, 1)")
    threshold = log_up(1 / dlt) / eps
    cap = math.ceil(threshold + 60 / eps)  # P(Lap(1/ε) < −60/ε) = e^{-60}/2: cap is harmless
    test_scale = 1 / eps
    release = make_noise(b, epsilon=eps, output="grid", size=1)  # grid Laplace, map-checked

    def releases(x: Any, n: int) -> np.ndarray:
        out = np.full(n, np.nan)
        data = _clean(x, lo, hi)
        if data.size == 0:
            return out
        d = median_instability_distance(data, lo, hi, float(fraction_up(b)), cap)
        # d + Z > threshold, exactly: d + Z is an integer
        passed = d + samplers.discrete_laplace(test_scale, n) > math.floor(threshold)
        if not passed.any():
            return out
        median = float(data[(data.size + 1) // 2 - 1])
        noisy = np.asarray(_grid_noise(release, n)(np.full(n, median) if n > 1 else median),
                           dtype=np.float64).reshape(n)
        out[passed] = noisy[passed]
        return out

    def function(x: Any) -> float | None:
        value = float(releases(x, 1)[0])
        return None if math.isnan(value) else value

    def privacy_map(d_in: Any) -> ApproxDP:
        if non_negative(d_in, "d_in") > 1:
            raise DomainError("PTR's guarantee is stated for one substitution (d_in = 1)")
        return ApproxDP(2 * eps, dlt)

    return Measurement(function, HammingDistance(), ApproxDP, privacy_map,
                       f"ptr_median(b={float(b):g}, ε={float(eps):g})",
                       input_domain=VALUES), releases


@register(audit=_audit_sample_and_aggregate)
def make_sample_and_aggregate(function: Callable[[np.ndarray], float], blocks: int,
                              bounds: tuple[Number, Number], epsilon: Number) -> Measurement:
    """Sample-and-aggregate any function of a dataset (NRS07 §4), aggregated by a DP mean.

    Parameters
    ----------
    function : callable
        Any function of a block of records (a NumPy array of rows) returning a number; it is
        never trusted: NaN or errors count as the lower bound, results are clamped.
    blocks : int
        m ≥ 2 disjoint blocks, formed by a uniformly random partition (CSPRNG).
    bounds : (lower, upper)
        Declared range of the function's output.
    epsilon : number
        ε > 0.

    Returns
    -------
    Measurement
        Input: an array of records (first axis = records; input domain: a vector of
        records of any type) under :class:`HammingDistance`; output the noisy mean of the
        m block results. Privacy map: d_in ↦ PureDP(ε·d_in):
        each changed record changes one block's clamped result, moving the mean by at most
        (U − L)/m, and the Laplace scale is calibrated to that sensitivity.
    """
    return _sample_and_aggregate(function, blocks, bounds, epsilon)[0]


def _sample_and_aggregate(function: Callable[[np.ndarray], float], blocks: int,
                          bounds: tuple[Number, Number], epsilon: Number
                          ) -> tuple[Measurement, Callable[[Any, int], np.ndarray]]:
    """The measurement and ``releases(x, n)``: n independent runs on the same data (n
    partitions, noise drawn together). ``releases`` evaluates ``function`` once per distinct
    permutation of the records, so it assumes ``function`` deterministic (audits)."""
    blocks = integer(blocks, "blocks", minimum=2)
    lo, hi = _bounds(bounds)
    eps = positive(epsilon, "epsilon", up=False)
    sensitivity = (fraction_up(hi) - fraction_down(lo)) / blocks
    release = make_noise(sensitivity, epsilon=eps, output="grid", size=1)

    def run(block: np.ndarray) -> float:
        try:
            value = float(function(block))
        except Exception:
            return lo
        return lo if math.isnan(value) else min(max(value, lo), hi)

    def aggregate(x: Any) -> float:
        data = np.asarray(x)
        order = np.argsort(rng.words(len(data)))  # uniform random partition into m blocks
        parts = np.array_split(data[order], blocks)
        return float(release(float(np.mean([run(p) for p in parts]))))

    def releases(x: Any, n: int) -> np.ndarray:
        data = np.asarray(x)
        size = len(data)
        orders = np.argsort(rng.words(n * size).reshape(n, size), axis=1)
        if size <= 15:  # a permutation's code in base `size` fits in 63 bits: sort codes
            codes = orders @ (size ** np.arange(size, dtype=np.int64))
            _, first, which = np.unique(codes, return_index=True, return_inverse=True)
            distinct = orders[first]
        else:
            distinct, which = np.unique(orders, axis=0, return_inverse=True)
        means = np.array([float(np.mean([run(p) for p in np.array_split(data[o], blocks)]))
                          for o in distinct])
        return np.asarray(_grid_noise(release, n)(means[which.reshape(-1)]), dtype=np.float64)

    return Measurement(aggregate, HammingDistance(), PureDP,
                       lambda d_in: PureDP(eps * non_negative(d_in, "d_in")),
                       f"sample_and_aggregate(m={blocks}, ε={float(eps):g})",
                       input_domain=VectorDomain(AnyDomain())), releases
