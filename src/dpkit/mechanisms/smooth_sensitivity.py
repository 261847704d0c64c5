"""Smooth sensitivity (Nissim, Raskhodnikova & Smith 2007) for the median and trimmed means.

The β-smooth upper bound S(x) = max_k e^{−kβ}·A_k(x) on the local sensitivity is computed
exactly by :func:`dpkit.core.smooth.smooth_upper_bound` (definitions and proof there).

Release on a grid. The statistic is rounded to the grid 2^k (which adds 2^k to the local
sensitivity) and discrete Laplace noise with the data-dependent scale b(x) = (S(x) + 2^k)/a
is added in grid units, a = ε/2; b is rounded up to a representable rational (a relative
increase ≤ 2^-40; with the 2^-99 of the exact bound, b is (β + η)-smooth, η = 2^-38).
The set of outputs is the fixed grid.

Privacy ((ε, δ), substitution neighbours). With β' = β + η ≤ c/(1 + 2c),
c = ε/(2 ln(2/δ) + ε), the ratio P_x(o)/P_y(o) splits into a shift term ≤ e^{|f(x)−f(y)|/b_x}
≤ e^{ε/2} and a dilation term. If b_x ≤ b_y the dilation term is at most Z(b_y)/Z(b_x) ≤
b_y/b_x ≤ e^{β'} (Z(b) = coth(1/(2b)) is the discrete Laplace normaliser and u·coth u
increases). If b_x > b_y it is at most exp(|o − f(y)|·β'/b_y), which stays below e^{ε/2}
unless |Y_x|/b_x > ε/(2β'e^{β'}) − ε/2 ≥ ln(2/δ) — an event of probability
P(|Y| > T) < 2e^{−T/b} ≤ δ, using β'e^{β'} ≤ β'(1 + 2β') ≤ c. This is NRS07 Lemma 2.5 and
Example 2 (Laplace noise, α = ε/2, β = ε/(2 ln(2/δ))) redone for discrete Laplace noise on
a lattice; the admissible β is smaller than theirs by the factor (1 + 2c)(1 + ε/(2 ln(2/δ))).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.core import samplers
from dpkit.core.accuracy import laplace_tail
from dpkit.core.component import Measurement
from dpkit.core.measures import ApproxDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import Number, fraction_down, fraction_up, log_up, non_negative, positive
from dpkit.core.smooth import smooth_upper_bound
from dpkit.errors import BoundsError, DomainError
from dpkit.mechanisms._common import VALUES, representable_scale
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = [
    "make_smooth_median",
    "make_smooth_trimmed_mean",
    "admissible_beta",
    "sample_smooth_median",
]

_ETA = Fraction(1, 1 << 38)  # smoothness lost to rounding S and the noise scale up
AUDIT_DELTA = Fraction(1, 10**6)
AUDIT_PAIR = (np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0]))  # one substitution


def _audit_median() -> list[AuditCase]:
    """Bounds (0, 1), ε = 1, δ = 10^-6 on (0, 0, 1) and (0, 1, 1) (medians 0 and 1);
    broken: 4ε (a quarter of the noise) for the same claim."""
    def sampler(epsilon: int) -> Sampler:
        return lambda x, n: sample_smooth_median(np.asarray(x), (0, 1), epsilon, AUDIT_DELTA, n)

    return [AuditCase("smooth_median", make_smooth_median((0, 1), 1, AUDIT_DELTA), sampler(1),
                      sampler(4), *AUDIT_PAIR)]


def _audit_trimmed_mean() -> list[AuditCase]:
    """The 10%-trimmed mean (nothing trimmed at n = 3: the mean), bounds (0, 1), ε = 1,
    δ = 10^-6, on (0, 0, 1) and (0, 1, 1); broken: 4ε for the same claim."""
    def sampler(epsilon: int) -> Sampler:
        release = _make("mean", (0, 1), epsilon, AUDIT_DELTA, Fraction(1, 10), None)[1]
        return lambda x, n: release(np.asarray(x), n)

    return [AuditCase("smooth_trimmed_mean",
                      make_smooth_trimmed_mean((0, 1), Fraction(1, 10), 1, AUDIT_DELTA),
                      sampler(1), sampler(4), *AUDIT_PAIR)]


def admissible_beta(epsilon: Fraction, delta: Fraction) -> Fraction:
    """The smoothness β used for (ε, δ): β + 2^-38 ≤ c/(1 + 2c), c = ε/(2 ln(2/δ) + ε).

    Rounded down (ln(2/δ) rounded up), so the privacy argument in the module docstring holds.
    """
    c = epsilon / (2 * log_up(2 / delta) + epsilon)
    beta = c / (1 + 2 * c) - _ETA
    if beta <= 0:
        raise DomainError("epsilon is too small for the smooth-sensitivity framework")
    return beta


def _check(bounds: Any, epsilon: Number, delta: Number
           ) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    try:
        lo, hi = (fraction_down(bounds[0]), fraction_up(bounds[1]))
    except (TypeError, ValueError, IndexError):
        raise BoundsError("bounds must be (lower, upper) numbers") from None
    if not (math.isfinite(float(lo)) and math.isfinite(float(hi)) and lo < hi):
        raise BoundsError("bounds must be finite with lower < upper")
    eps = positive(epsilon, "epsilon", up=False)
    dlt = fraction_down(delta)
    if not 0 < dlt <= Fraction(1, 2):
        raise DomainError("delta must be in (0, 1/2]")
    return lo, hi, eps, dlt


def _sorted_values(x: Any, lo: float, hi: float) -> np.ndarray:
    """Sorted values clamped to [lo, hi]; NaN counts as ``lo`` so n stays fixed (the
    neighbouring relation substitutes values, it never removes one)."""
    arr = np.asarray(x, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise DomainError("the input is empty; n ≥ 1 values are required")
    return np.sort(np.clip(np.nan_to_num(arr, nan=lo), lo, hi))


def _make(statistic: str, bounds: Any, epsilon: Number, delta: Number, trim: Number,
          k: int | None) -> tuple[Measurement, Callable[[Any, int], np.ndarray]]:
    lo, hi, eps, dlt = _check(bounds, epsilon, delta)
    beta = admissible_beta(eps, dlt)
    half_eps = eps / 2
    kk = samplers.grid_exponent(hi - lo) if k is None else int(k)
    grid = Fraction(2) ** kk
    lo_f, hi_f = float(lo), float(hi)
    # a float mean of values in [L, U] (fsum, one division) is within 2^-52·max|L|,|U| of the
    # exact mean; twice that joins the grid rounding in the local-sensitivity slack
    float_slack = Fraction(max(abs(lo), abs(hi))) / (1 << 51) if statistic == "mean" else 0
    trim_fraction = fraction_down(trim)
    if not 0 <= trim_fraction < Fraction(1, 2):
        raise DomainError("trim must be in [0, 1/2)")

    def window(n: int) -> tuple[int, int, int]:
        if statistic == "median":
            m = (n + 1) // 2  # lower median x_m
            return m + 1, m, 1
        t = math.floor(trim_fraction * n)
        return n - t + 1, t + 1, n - 2 * t

    def estimate(values: np.ndarray) -> Fraction:
        n = values.size
        if statistic == "median":
            return Fraction(float(values[(n + 1) // 2 - 1]))
        t = math.floor(trim_fraction * n)
        kept = values[t:n - t]
        return Fraction(math.fsum(kept.tolist()) / kept.size)

    def release(x: npt.ArrayLike, size: int) -> np.ndarray:
        values = _sorted_values(x, lo_f, hi_f)
        a, b, w = window(values.size)
        smooth = smooth_upper_bound(values, a, b, w, (lo, hi), beta)
        scale = representable_scale((smooth + grid + float_slack) / (half_eps * grid))
        centre = round(estimate(values) / grid)
        noisy = centre + samplers.discrete_laplace(scale, size)
        # clamping to [L, U] is post-processing
        return np.clip(noisy.astype(np.float64) * float(grid), lo_f, hi_f)

    def privacy_map(d_in: Any) -> ApproxDP:
        if non_negative(d_in, "d_in") > 1:
            raise DomainError("the smooth-sensitivity guarantee is for one substitution")
        return ApproxDP(eps, dlt)

    worst_scale = float((hi - lo + grid + float_slack) / half_eps)
    return Measurement(
        lambda x: float(release(x, 1)[0]), HammingDistance(), ApproxDP, privacy_map,
        f"smooth_{statistic}(ε={float(eps):g}, δ={float(dlt):g}, β={float(beta):.4g})",
        # the actual scale depends on the data and is not released; this bound uses
        # S(x) ≤ U − L and holds for every dataset
        accuracy=lambda beta_: laplace_tail(worst_scale, float(beta_), discrete=False),
        input_domain=VALUES,
    ), release


@register(audit=_audit_median)
def make_smooth_median(bounds: tuple[Number, Number], epsilon: Number, delta: Number, *,
                       k: int | None = None) -> Measurement:
    """The median with noise scaled to its β-smooth sensitivity (NRS07 §3.1).

    Parameters
    ----------
    bounds : (lower, upper)
        Declared range [L, U]; values are clamped, NaN counts as L.
    epsilon : number
        ε > 0 (nats).
    delta : number
        δ ∈ (0, 1/2].
    k : int, optional
        Output grid exponent; default ⌊log₂(U − L)⌋ − 30.

    Returns
    -------
    Measurement
        Input: a 1-D array of n values (one per individual; n is public under substitution
        neighbours; input domain: numbers, NaN allowed) under :class:`HammingDistance`.
        Output: the lower median x_m, m = ⌊(n+1)/2⌋, rounded to the grid, plus discrete
        Laplace noise of scale b(x) = (S(x) + 2^k)/(ε/2), clamped to [L, U]. Privacy map:
        d_in = 1 ↦ (ε, δ) (module docstring; NRS07 Lemma 2.5 / Example 2 on a lattice).
        ``accuracy(beta)`` is a data-independent worst case (S ≤ U − L); typical errors are
        far smaller.

    Raises
    ------
    DomainError
        For ε ≤ 0, δ ∉ (0, 1/2], empty input, or d_in > 1.
    BoundsError
        For missing, infinite or inverted bounds.
    """
    return _make("median", bounds, epsilon, delta, 0, k)[0]


@register(audit=_audit_trimmed_mean)
def make_smooth_trimmed_mean(bounds: tuple[Number, Number], trim: Number, epsilon: Number,
                             delta: Number, *, k: int | None = None) -> Measurement:
    """The t-trimmed mean with noise scaled to its β-smooth sensitivity.

    Drops the t = ⌊trim·n⌋ smallest and t largest clamped values and averages the rest;
    A_k uses the window a = n − t + 1, b = t + 1, w = n − 2t (Bun & Steinke 2019,
    *Average-Case Averages*, §3; the smooth framework of NRS07 §2).

    Parameters
    ----------
    bounds : (lower, upper)
        Declared range [L, U]; values are clamped, NaN counts as L.
    trim : number
        Fraction trimmed from each end, in [0, 1/2).
    epsilon, delta : number
        ε > 0 (nats); δ ∈ (0, 1/2].
    k : int, optional
        Output grid exponent; default ⌊log₂(U − L)⌋ − 30.

    Returns
    -------
    Measurement
        As :func:`make_smooth_median`, with the trimmed mean as the statistic (computed with
        a correctly rounded sum; the float error is folded into the sensitivity).

    Raises
    ------
    DomainError
        For ε ≤ 0, δ ∉ (0, 1/2], trim ∉ [0, 1/2), empty input, or d_in > 1.
    BoundsError
        For missing, infinite or inverted bounds.
    """
    return _make("mean", bounds, epsilon, delta, trim, k)[0]


def sample_smooth_median(x: npt.ArrayLike, bounds: tuple[Number, Number], epsilon: Number,
                         delta: Number, size: int) -> np.ndarray:
    """``size`` independent releases of :func:`make_smooth_median` on the same data (one
    smooth-sensitivity computation), for audits and accuracy studies."""
    return _make("median", bounds, epsilon, delta, 0, None)[1](x, size)
