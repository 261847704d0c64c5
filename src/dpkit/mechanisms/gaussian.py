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
from dpkit.core.measures import ZCDP
from dpkit.core.metrics import L2Distance
from dpkit.core.numbers import Number, non_negative, positive
from dpkit.mechanisms._common import (
    DEFAULT_MAX_SIZE,
    as_vector,
    grid_relaxation,
    make_grid_release,
    unwrap,
)

__all__ = ["make_discrete_gaussian", "make_gaussian"]


def _rho(d_in: Any, sigma: Fraction) -> ZCDP:
    d = non_negative(d_in, "d_in")
    return ZCDP(d * d / (2 * sigma * sigma))


def make_discrete_gaussian(scale: Number) -> Measurement:
    """Add discrete Gaussian noise N_ℤ(0, σ²) to an integer scalar or vector.

    Parameters
    ----------
    scale : number
        σ > 0, the standard deviation parameter (the variance is at most σ²).

    Returns
    -------
    Measurement
        Input: int or int array under :class:`L2Distance`. Privacy map:
        d_in ↦ ZCDP(d_in²/(2σ²)) (CKS20 Thm 4). ``accuracy(beta)``: a with P(|Z| > a) ≤ β.

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0 or the input is not integer-typed.
    """
    sigma = positive(scale, "scale")

    def function(x: Any) -> Any:
        arr, scalar = as_vector(x, integer=True)
        return unwrap(arr + samplers.discrete_gaussian(sigma, arr.size), scalar)

    return Measurement(
        function=function,
        input_metric=L2Distance(),
        output_measure=ZCDP,
        privacy_map=lambda d_in: _rho(d_in, sigma),
        name=f"discrete_gaussian(scale={float(sigma):.6g})",
        accuracy=lambda beta: math.floor(gaussian_tail(float(sigma), float(beta))),
    )


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
        Input: floats under :class:`L2Distance`. Privacy map:
        d_in ↦ ZCDP((d_in + 2^k √max_size)²/(2σ²)) (Bun & Steinke 2016 Prop. 1.6; CKS20 Thm 4).

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
    )
