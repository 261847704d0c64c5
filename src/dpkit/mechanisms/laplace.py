"""The Laplace mechanism, on integers (discrete) and on a grid (continuous).

Sources: Dwork, McSherry, Nissim & Smith 2006 (Laplace mechanism; Dwork & Roth Thm 3.6);
Ghosh, Roughgarden & Sundararajan 2009 (geometric mechanism = discrete Laplace);
Canonne, Kamath & Steinke 2020 Alg. 2 (exact sampler); Mironov 2012 and Haney et al. 2022
(release on a grid so the set of outputs does not depend on the input).
"""

from __future__ import annotations

from typing import Any

from dpkit.core import samplers
from dpkit.core.accuracy import laplace_tail
from dpkit.core.component import Measurement
from dpkit.core.measures import PureDP
from dpkit.core.metrics import L1Distance
from dpkit.core.numbers import Number, non_negative, positive
from dpkit.mechanisms._common import (
    AUDIT_MAX_SIZE,
    DEFAULT_MAX_SIZE,
    INTEGERS,
    add_integer_noise,
    as_vector,
    floats,
    grid_relaxation,
    make_grid_release,
    representable_scale,
    unwrap,
)
from dpkit.mechanisms.registry import AuditCase, register, vector_sampler

__all__ = ["make_discrete_laplace", "make_laplace", "make_geometric"]

def _audit_discrete() -> list[AuditCase]:
    """Scale 2 (ε = 1/2 at Δ = 1) on the pair 0, 1; broken: scale 1."""
    return [AuditCase("discrete_laplace", make_discrete_laplace(2),
                      vector_sampler(make_discrete_laplace, 2),
                      vector_sampler(make_discrete_laplace, 1), 0, 1)]


def _audit_grid() -> list[AuditCase]:
    """Scale 2 on the pair 0.0, 1.0 (the claim at one coordinate); broken: scale 1."""
    return [AuditCase("laplace", make_laplace(2.0, max_size=1),
                      vector_sampler(make_laplace, 2.0, max_size=AUDIT_MAX_SIZE),
                      vector_sampler(make_laplace, 1.0, max_size=AUDIT_MAX_SIZE), 0.0, 1.0)]


def _audit_geometric() -> list[AuditCase]:
    """ε = 1/2 at Δ = 1 on the pair 0, 1; broken: noise for ε = 1."""
    return [AuditCase("geometric", make_geometric(0.5),
                      vector_sampler(make_geometric, 0.5), vector_sampler(make_geometric, 1),
                      0, 1)]


@register(audit=_audit_discrete)
def make_discrete_laplace(scale: Number) -> Measurement:
    """Add discrete Laplace noise to an integer scalar or vector.

    Parameters
    ----------
    scale : number
        Noise scale s > 0 (P(Z = z) ∝ exp(−|z|/s)); rounded up to a representable rational.
        The standard deviation is √(2e^{-1/s})/(1 − e^{-1/s}) ≈ √2·s for large s.

    Returns
    -------
    Measurement
        Input: int or int array of shape (n,) under :class:`L1Distance` (input domain:
        a vector of integers; bools count as 0/1, arrays of higher rank are read flat);
        output the same shape plus i.i.d. noise. Privacy map: d_in ↦ PureDP(d_in / s),
        i.e. ε = Δ₁/s (Ghosh et al. 2009; Dwork & Roth Thm 3.6). Accuracy:
        ``accuracy(beta)`` is the smallest integer a with P(|Z| > a) ≤ β. Results are
        int64: an input beyond ±2^62 is added exactly and the sum saturates at the int64
        range (never wraps).

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0, or the input is not integer-typed.
    """
    s = representable_scale(scale)

    def function(x: Any) -> Any:
        arr, scalar = as_vector(x, integer=True)
        return unwrap(add_integer_noise(arr, samplers.discrete_laplace(s, arr.size)), scalar)

    return Measurement(
        function=function,
        input_metric=L1Distance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(non_negative(d_in, "d_in") / s),
        name=f"discrete_laplace(scale={float(s):.6g})",
        accuracy=lambda beta: laplace_tail(float(s), float(beta), discrete=True),
        input_domain=INTEGERS,
    )


@register(audit=_audit_grid)
def make_laplace(scale: Number, *, max_size: int = DEFAULT_MAX_SIZE, k: int | None = None
                 ) -> Measurement:
    """Add Laplace noise to a float scalar or vector, released on a grid of width 2^k.

    Each input coordinate is rounded to the nearest multiple of 2^k, discrete Laplace noise
    of scale s/2^k is added in grid units, and the result is returned as floats (multiples of
    2^k). Every possible output is a multiple of 2^k whatever the input, which defeats the
    floating-point attacks on textbook Laplace (Mironov 2012; Haney et al. 2022).

    Parameters
    ----------
    scale : number
        Noise scale s > 0 (the Laplace b; standard deviation √2·s). Rounded up so that s/2^k
        is an integer.
    max_size : int
        Largest vector length accepted; the rounding adds 2^k per coordinate to the L1
        sensitivity, so the privacy map charges 2^k · max_size. Default 65,536.
    k : int, optional
        Grid exponent; default ⌊log₂ s⌋ − 30 (rounding costs ~2^-30 of the scale).

    Returns
    -------
    Measurement
        Input: float scalar or array (n ≤ max_size) under :class:`L1Distance` (input
        domain: a vector of at most ``max_size`` numbers, NaN excluded). Privacy map:
        d_in ↦ PureDP((d_in + 2^k·max_size)/s) (Dwork & Roth Thm 3.6 on the rounded input).
        Every finite input is released without clamping: coordinates with |x| ≤ 2^(60+k)
        (≈ s·2^30 with the default k) on a vectorised path, larger ones exactly
        with integers, one by one; the output is the float nearest to the noisy grid value
        (post-processing), so ``accuracy`` holds for every finite input. ±inf is read as
        ±the largest float; NaN raises.

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0, the input has NaN, or more than ``max_size`` coordinates.
    """
    function, kk, s, grid = make_grid_release(scale, k, max_size, samplers.discrete_laplace)
    relax = grid_relaxation(kk, max_size, "l1")

    return Measurement(
        function=function,
        input_metric=L1Distance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP((non_negative(d_in, "d_in") + relax) / s),
        name=f"laplace(scale={float(s):.6g}, grid=2^{kk})",
        accuracy=lambda beta: laplace_tail(float(s), float(beta), discrete=False)
        + float(grid),
        input_domain=floats(max_size),
    )



@register(audit=_audit_geometric)
def make_geometric(epsilon: Number, sensitivity: Number = 1) -> Measurement:
    """The (two-sided) geometric mechanism of Ghosh, Roughgarden & Sundararajan 2009.

    Adds Z with P(Z = z) ∝ α^{|z|}, α = exp(−ε/Δ), to integer queries of L1 sensitivity Δ:
    the discrete Laplace mechanism with scale Δ/ε (:func:`make_discrete_laplace`).

    Raises
    ------
    DomainError
        If ε ≤ 0 or Δ ≤ 0.
    """
    eps = positive(epsilon, "epsilon", up=False)
    return make_discrete_laplace(positive(sensitivity, "sensitivity") / eps)
