"""The vector mechanism (Chaudhuri, Monteleoni & Sarwate 2011, *Differentially private
empirical risk minimization*, JMLR 12, §4 Alg. 1 and Thm 6): noise with density
∝ exp(−‖b‖₂/s) for vector queries of bounded L2 sensitivity, ε = Δ₂/s.

Grid and exactness. Each coordinate is rounded to the grid 2^k (k = ⌊log₂ s⌋ − 30) and
lattice noise Z ∈ ℤ^d with P(Z = z) ∝ exp(−‖z‖₂/(s/2^k)) is added in grid units, drawn
exactly by :func:`dpkit.core.lattice.lattice_laplace`. The lattice pmf is shift-invariant
for lattice shifts, so for rounded inputs v, v′ the output ratio is
exp((‖o − v′‖₂ − ‖o − v‖₂)/s) ≤ exp(‖v − v′‖₂/s) by the triangle inequality; rounding moves
each coordinate by at most 2^(k−1), so ‖v − v′‖₂ ≤ Δ₂ + 2^k·√d. The set of outputs is the
grid, whatever the input.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.accuracy import l2_laplace_norm_tail
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.lattice import check_dimension, lattice_laplace
from dpkit.core.measures import PureDP
from dpkit.core.metrics import L2Distance
from dpkit.core.numbers import Number, integer, non_negative, sqrt_up
from dpkit.errors import DomainError
from dpkit.mechanisms._common import (
    as_vector,
    grid_relaxation,
    make_grid_release,
    representable_scale,
)
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["make_vector_laplace"]


def _audit() -> list[AuditCase]:
    """Scale 2 in d = 2 on the 2^-10 grid, on the pair (0, 0), (1, 0), audited through the
    first coordinate (a projection is post-processing); broken: scale 1. The n outputs are
    drawn at once with the lattice sampler of the mechanism (its noise in grid units)."""
    def sampler(scale: Fraction) -> Sampler:
        steps = scale * 1024

        def sample(x: Any, n: int) -> np.ndarray:
            proposal = steps * Fraction(141422, 100000)  # ≥ √2·steps
            noise = lattice_laplace(steps, proposal, 2, n)[:, 0]
            return (np.round(np.asarray(x)[0] * 1024) + noise) / 1024

        return sample

    return [AuditCase("vector_laplace", make_vector_laplace(2.0, 2, k=-10),
                      sampler(Fraction(2)), sampler(Fraction(1)),
                      np.zeros(2), np.array([1.0, 0.0]))]


@register(audit=_audit)
def make_vector_laplace(scale: Number, dim: int, *, k: int | None = None) -> Measurement:
    """Add vector-mechanism noise (density ∝ exp(−‖z‖₂/s)) to a float vector of length d.

    Parameters
    ----------
    scale : number
        s > 0; ‖noise‖₂ follows Gamma(d, s) (mean d·s), each coordinate has standard
        deviation s·√(d + 1). Rounded up to a whole number of grid steps.
    dim : int
        The vector length d ≥ 1 (public). The exact sampler's acceptance falls with d
        (0.09 at d = 10); dimensions needing more than 2^17 proposals per draw (d ≳ 40) are
        refused in favour of Laplace with L1 sensitivity √d·Δ₂ or the Gaussian mechanism.
    k : int, optional
        Grid exponent; default ⌊log₂ s⌋ − 30.

    Returns
    -------
    Measurement
        Input: float array of shape (d,) under :class:`L2Distance` (input domain: a vector
        of d numbers, NaN excluded); output the same shape.
        Privacy map: Δ₂ ↦ PureDP((Δ₂ + 2^k·√d)/s) (CMS11 Thm 6 on the rounded input; the
        lattice argument is in the module docstring). ``accuracy(beta)`` is the radius r
        with P(‖noise‖₂ > r) ≤ β (the Gamma(d, s) quantile, plus the grid).
        Every finite input is released without clamping: coordinates with |x| ≤ 2^(60+k)
        (≈ s·2^30 with the default k) on a vectorised path, larger ones exactly
        with integers, one by one; the output is the float nearest to the noisy grid value
        (post-processing), so ``accuracy`` holds for every finite input. ±inf is read as
        ±the largest float; NaN raises.

    Raises
    ------
    DomainError
        If s ≤ 0, d < 1 or too large for the exact sampler, or the input has NaN or the
        wrong length.
    """
    dim = integer(dim, "dim", minimum=1)

    def noise(steps: int, n: int) -> np.ndarray:
        if n != dim:
            raise DomainError(f"the input has {n} coordinates; this mechanism takes {dim}")
        proposal = representable_scale(steps * sqrt_up(Fraction(dim)))
        return lattice_laplace(Fraction(steps), proposal, dim, 1)[0]

    check_dimension(dim)
    function, kk, s, grid = make_grid_release(scale, k, dim, noise)
    relax = grid_relaxation(kk, dim, "l2")

    def checked(x: Any) -> Any:
        arr, _ = as_vector(x, integer=False)
        if arr.size != dim:
            raise DomainError(f"the input has {arr.size} coordinates; this mechanism "
                              f"takes {dim}")
        return function(arr)

    return Measurement(
        function=checked,
        input_metric=L2Distance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP((non_negative(d_in, "d_in") + relax) / s),
        name=f"vector_laplace(scale={float(s):.6g}, d={dim}, grid=2^{kk})",
        accuracy=lambda beta: l2_laplace_norm_tail(float(s), dim, float(beta))
        + float(grid) * dim**0.5,
        input_domain=VectorDomain(AtomDomain(Kind.FLOAT), size=dim),
    )
