"""The Gaussian mechanism under zero-concentrated DP, on integers and on a grid.

Sources: Bun & Steinke 2016, Prop. 1.6 (the Gaussian mechanism with L2 sensitivity Δ and
standard deviation σ is Δ²/(2σ²)-zCDP); Canonne, Kamath & Steinke 2020, Thm 4 (the same for
the discrete Gaussian on integer-valued queries) and Alg. 3 (exact sampler).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpkit.core import samplers
from dpkit.core.accuracy import gaussian_tail
from dpkit.core.component import Measurement
from dpkit.core.measures import ZCDP, ApproxDP
from dpkit.core.metrics import L2Distance
from dpkit.core.numbers import (
    Number,
    fraction_down,
    fraction_up,
    log_up,
    non_negative,
    positive,
    sqrt_up,
)
from dpkit.core.renamed import renamed
from dpkit.errors import DomainError
from dpkit.mechanisms._common import (
    AUDIT_MAX_SIZE,
    DEFAULT_MAX_SIZE,
    INTEGERS,
    add_integer_noise,
    as_vector,
    floats,
    grid_relaxation,
    make_grid_release,
    unwrap,
)
from dpkit.mechanisms.registry import AuditCase, register, vector_sampler

__all__ = [
    "make_discrete_gaussian",
    "make_gaussian",
    "make_approx_gaussian",
    "analytic_gaussian_epsilon",
    "classic_gaussian_epsilon",
]


GAUSSIAN_DELTA = Fraction(1, 10**3)  # the δ of the analytic Gaussian's audit case


def _audit_discrete() -> list[AuditCase]:
    """σ = 2 on the pair 0, 1 (ρ = 1/8, audited as (ε, δ) at δ = 10^-3); broken: σ = 1."""
    return [AuditCase("discrete_gaussian", make_discrete_gaussian(2),
                      vector_sampler(make_discrete_gaussian, 2),
                      vector_sampler(make_discrete_gaussian, 1), 0, 1)]


def _audit_grid() -> list[AuditCase]:
    """σ = 2 on the pair 0.0, 1.0; broken: σ = 1."""
    return [AuditCase("gaussian", make_gaussian(2.0, max_size=1),
                      vector_sampler(make_gaussian, 2.0, max_size=AUDIT_MAX_SIZE),
                      vector_sampler(make_gaussian, 1.0, max_size=AUDIT_MAX_SIZE), 0.0, 1.0)]


def _audit_approx() -> list[AuditCase]:
    """The analytic map at δ = 10^-3, σ = 2 on the pair 0.0, 1.0; broken: σ = 1."""
    return [AuditCase("analytic_gaussian", make_approx_gaussian(2.0, GAUSSIAN_DELTA, max_size=1),
                      vector_sampler(make_approx_gaussian, 2.0, delta=GAUSSIAN_DELTA,
                                     max_size=AUDIT_MAX_SIZE),
                      vector_sampler(make_approx_gaussian, 1.0, delta=GAUSSIAN_DELTA,
                                     max_size=AUDIT_MAX_SIZE), 0.0, 1.0)]


def _rho(d_in: Any, sigma: Fraction) -> ZCDP:
    d = non_negative(d_in, "d_in")
    return ZCDP(d * d / (2 * sigma * sigma))


@register(audit=_audit_discrete)
def make_discrete_gaussian(scale: Number) -> Measurement:
    """Add discrete Gaussian noise N_ℤ(0, σ²) to an integer scalar or vector.

    Parameters
    ----------
    scale : number
        σ > 0, the standard deviation parameter (the variance is at most σ²).

    Returns
    -------
    Measurement
        Input: int or int array under :class:`L2Distance` (input domain: a vector of
        integers, read flat). Privacy map:
        d_in ↦ ZCDP(d_in²/(2σ²)) (CKS20 Thm 4). ``accuracy(beta)``: a with P(|Z| > a) ≤ β.
        Results are int64: an input beyond ±2^62 is added exactly and the sum saturates at
        the int64 range (never wraps).

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0 or the input is not integer-typed.
    """
    sigma = positive(scale, "scale")

    def function(x: Any) -> Any:
        arr, scalar = as_vector(x, integer=True)
        return unwrap(add_integer_noise(arr, samplers.discrete_gaussian(sigma, arr.size)),
                      scalar)

    return Measurement(
        function=function,
        input_metric=L2Distance(),
        output_measure=ZCDP,
        privacy_map=lambda d_in: _rho(d_in, sigma),
        name=f"discrete_gaussian(scale={float(sigma):.6g})",
        accuracy=lambda beta: math.floor(gaussian_tail(float(sigma), float(beta))),
        input_domain=INTEGERS,
    )


@register(audit=_audit_grid)
def make_gaussian(scale: Number, *, max_size: int = DEFAULT_MAX_SIZE, k: int | None = None
                  ) -> Measurement:
    """Add Gaussian noise to a float scalar or vector, released on a grid of width 2^k.

    Coordinates are rounded to multiples of 2^k and discrete Gaussian noise with σ/2^k grid
    steps is added; the output is a multiple of 2^k whatever the input (Mironov 2012;
    Haney et al. 2022).

    Parameters
    ----------
    scale : number
        σ > 0, the standard deviation (rounded up so that σ/2^k is an integer).
    max_size : int
        Largest vector length; rounding adds at most 2^k·√max_size to the L2 sensitivity.
    k : int, optional
        Grid exponent; default ⌊log₂ σ⌋ − 30.

    Returns
    -------
    Measurement
        Input: floats under :class:`L2Distance` (input domain: a vector of at most
        ``max_size`` numbers, NaN excluded). Privacy map:
        d_in ↦ ZCDP((d_in + 2^k √max_size)²/(2σ²)) (Bun & Steinke 2016 Prop. 1.6; CKS20 Thm 4).
        Every finite input is released without clamping: coordinates with |x| ≤ 2^(60+k)
        (≈ σ·2^30 with the default k) on a vectorised path, larger ones exactly
        with integers, one by one; the output is the float nearest to the noisy grid value
        (post-processing), so ``accuracy`` holds for every finite input. ±inf is read as
        ±the largest float; NaN raises.

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0, the input has NaN or more than ``max_size`` coordinates.
    """
    function, kk, sigma, grid = make_grid_release(scale, k, max_size, samplers.discrete_gaussian)
    relax = grid_relaxation(kk, max_size, "l2")

    return Measurement(
        function=function,
        input_metric=L2Distance(),
        output_measure=ZCDP,
        privacy_map=lambda d_in: _rho(non_negative(d_in, "d_in") + relax, sigma),
        name=f"gaussian(scale={float(sigma):.6g}, grid=2^{kk})",
        accuracy=lambda beta: gaussian_tail(float(sigma), float(beta)) + float(grid),
        input_domain=floats(max_size),
    )


@renamed(sigma="scale")
def classic_gaussian_epsilon(sensitivity: Fraction, scale: Fraction, delta: Fraction
                             ) -> Fraction:
    """ε of the classic Gaussian mechanism of scale (standard deviation) σ (Dwork & Roth
    Thm A.1), rounded up (``sigma=``, deprecated, is ``scale``):
    σ ≥ Δ√(2 ln(1.25/δ))/ε ⇔ ε = Δ√(2 ln(1.25/δ))/σ, valid only when ε < 1.

    Raises
    ------
    DomainError
        If the resulting ε is not below 1 (the theorem does not apply).
    """
    eps = sensitivity * sqrt_up(2 * log_up(Fraction(5, 4) / delta)) / scale
    if eps >= 1:
        raise DomainError(f"the classic Gaussian bound needs ε < 1, got {float(eps):.4g}; "
                          "use the analytic Gaussian or zCDP")
    return eps


@renamed(sigma="scale")
def analytic_gaussian_epsilon(sensitivity: Fraction, scale: Fraction, delta: Fraction
                              ) -> Fraction:
    """The smallest ε (to 1e-12, rounded up) with (ε, δ)-DP for the Gaussian mechanism of
    scale (standard deviation) σ (``sigma=``, deprecated, is ``scale``), by the
    exact characterisation of Balle & Wang 2018, Thm 8:
    δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ), decreasing in ε.

    Φ is evaluated with mpmath at 60 significant digits and the returned ε is one at which
    δ(ε) + 1e-40 ≤ δ, so float and series errors cannot make it too small.
    """
    import mpmath

    if sensitivity == 0:
        return Fraction(0)
    mp = mpmath.mp.clone() if hasattr(mpmath.mp, "clone") else mpmath.mp
    mp.dps = 60
    d, s, target = (mp.mpf(x.numerator) / x.denominator for x in (sensitivity, scale, delta))

    def delta_of(eps: Any) -> Any:
        a, b = d / (2 * s), eps * s / d
        return mp.ncdf(a - b) - mp.exp(eps) * mp.ncdf(-a - b)

    lo, hi = mp.mpf(0), mp.mpf(1)
    while delta_of(hi) + mp.mpf("1e-40") > target:
        hi *= 2
        if hi > 1e6:
            raise DomainError("no ε meets this δ")
    if delta_of(lo) + mp.mpf("1e-40") <= target:
        return Fraction(0)
    while hi - lo > mp.mpf("1e-13"):
        mid = (lo + hi) / 2
        if delta_of(mid) + mp.mpf("1e-40") <= target:
            hi = mid
        else:
            lo = mid
    return fraction_up(Fraction(str(mp.nstr(hi, 40))) + Fraction(1, 10**12))


@register(audit=_audit_approx)
def make_approx_gaussian(scale: Number, delta: Number, *, analytic: bool = True,
                         max_size: int = DEFAULT_MAX_SIZE, k: int | None = None
                         ) -> Measurement:
    """The Gaussian mechanism on floats (grid release) with an (ε, δ) privacy map.

    Parameters
    ----------
    scale : number
        σ > 0, the standard deviation (rounded up to whole grid steps).
    delta : number
        δ ∈ (0, 1) at which ε is reported.
    analytic : bool
        Use the exact analytic Gaussian bound (Balle & Wang 2018, Thm 8; default) or the
        classic bound σ = Δ√(2 ln(1.25/δ))/ε (Dwork & Roth Thm A.1, valid for ε < 1).

    Returns
    -------
    Measurement
        Input: floats under :class:`L2Distance`; privacy map
        d_in ↦ ApproxDP(ε(d_in + 2^k√max_size, σ, δ), δ). Input range as
        :func:`make_gaussian`.
    """
    dlt = fraction_down(delta)
    if not 0 < dlt < 1:
        raise DomainError("delta must be in (0, 1)")
    function, kk, sigma, grid = make_grid_release(scale, k, max_size, samplers.discrete_gaussian)
    relax = grid_relaxation(kk, max_size, "l2")
    bound = analytic_gaussian_epsilon if analytic else classic_gaussian_epsilon

    return Measurement(
        function=function,
        input_metric=L2Distance(),
        output_measure=ApproxDP,
        privacy_map=lambda d_in: ApproxDP(bound(non_negative(d_in, "d_in") + relax, sigma,
                                                dlt), dlt),
        name=f"{'analytic' if analytic else 'classic'}_gaussian(scale={float(sigma):.6g})",
        accuracy=lambda beta: gaussian_tail(float(sigma), float(beta)) + float(grid),
        input_domain=floats(max_size),
    )
