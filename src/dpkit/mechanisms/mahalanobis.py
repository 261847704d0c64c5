"""The Gaussian mechanism with a Mahalanobis sensitivity: noise N(0, c²Σ) for a declared
covariance Σ, exact on a lattice.

Source: Dwork & Roth 2014, App. A.1 (the closing note: a query whose differences
f(D) − f(D′) lie in the ellipsoid {v : vᵀΣ⁻¹v ≤ Δ_M²} gets N(0, c²Σ) noise with the
spherical mechanism's c, through the linear map Σ^{1/2}); Bun & Steinke 2016, Prop. 1.6 and
Lemma 2.3 (Gaussian zCDP, composition); Canonne, Kamath & Steinke 2020, Thm 4 (the discrete
Gaussian on integer shifts) and Alg. 3 (the exact sampler).

Construction. Σ (d × d, rational, positive definite) is factored exactly as Σ = L·D·Lᵀ
(L unit lower triangular, D = diag(d₁, …, d_d) > 0, all rational: Gaussian elimination
without square roots). An input x is whitened exactly, w = L⁻¹x (rational arithmetic on the
floats' binary values), rounded coordinate-wise to the grid 2^k (w̄ᵢ = ⌊wᵢ/2^k + 1/2⌋),
independent zᵢ ~ N_ℤ(0, vᵢ) are added with vᵢ ≥ c²dᵢ/4^k (equal unless the fraction is too
long for the sampler, then rounded up to a multiple of 2^-16), and the release is
y = 2^k·L(w̄ + z), the nearest floats to the exact rationals. The noise 2^k·L·z lives on the
lattice 2^k·Lℤ^d, with P(2^k·L·z = 2^k·L·t) = Πᵢ N_ℤ(tᵢ; 0, vᵢ) and covariance ⪯ c²Σ.

Privacy map (proof). The release is post-processing (y = 2^k·L·u) of u = w̄ + z, a vector
of independent discrete Gaussians with integer centres w̄. For neighbours x, x′ the centre
shift s = 2^k(w̄ − w̄′) = L⁻¹(x − x′) + r with |rᵢ| ≤ 2^k. By CKS20 Thm 4 per coordinate and
zCDP composition, ρ = Σᵢ sᵢ²/(2·4^k·vᵢ) ≤ ‖D^{-1/2}s‖²/(2c²), and
‖D^{-1/2}s‖ ≤ ‖D^{-1/2}L⁻¹(x − x′)‖ + ‖D^{-1/2}r‖ ≤ Δ_M + 2^k·√(Σᵢ 1/dᵢ), because
‖D^{-1/2}L⁻¹v‖² = vᵀL⁻ᵀD⁻¹L⁻¹v = vᵀΣ⁻¹v. Hence
ρ(Δ_M) = (Δ_M + 2^k·√(Σᵢ 1/dᵢ))²/(2c²): the spherical Gaussian's map with Δ₂ replaced by
the Mahalanobis sensitivity (Σ = I gives back :func:`~dpkit.mechanisms.make_gaussian`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.accuracy import gaussian_tail
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ZCDP
from dpkit.core.metrics import MahalanobisDistance
from dpkit.core.numbers import Number, non_negative, sqrt_up, to_fraction
from dpkit.core.samplers import discrete_gaussian_variance, grid_exponent
from dpkit.errors import DomainError
from dpkit.mechanisms._common import as_vector, representable_scale
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["make_gaussian_mahalanobis", "MahalanobisDistance", "MahalanobisPlan",
           "mahalanobis_plan", "declared_covariance", "mahalanobis_norm"]

MAX_DIM = 32  # O(d²) exact rational work per release: bounded by this declared size
MAX_SPREAD = 1 << 28  # max dᵢ / min dᵢ: keeps every √vᵢ below the sampler's 2^44
Matrix = tuple[tuple[Fraction, ...], ...]
_FLOAT_MAX = np.finfo(np.float64).max


def declared_covariance(covariance: Sequence[Sequence[Number]]) -> Matrix:
    """Σ as an exact square, symmetric matrix of Fractions (plan-time check).

    Raises
    ------
    DomainError
        Not square, larger than 32 × 32, a non-finite or non-number entry, or not
        symmetric; the message names the fix.
    """
    try:
        rows = [list(r) for r in covariance]
    except TypeError:
        raise DomainError("covariance must be a d × d matrix (a sequence of rows)") from None
    d = len(rows)
    if not 1 <= d <= MAX_DIM or any(len(r) != d for r in rows):
        raise DomainError(f"covariance must be a square d × d matrix with 1 ≤ d ≤ {MAX_DIM}")
    exact = tuple(tuple(_entry(v) for v in r) for r in rows)
    if any(exact[i][j] != exact[j][i] for i in range(d) for j in range(i)):
        raise DomainError("covariance must be symmetric: declare Σ with Σᵢⱼ = Σⱼᵢ exactly "
                          "(e.g. as Fractions or decimal strings)")
    return exact


def _entry(v: object) -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (int, float, str, Fraction, np.number)):
        raise DomainError(f"covariance entries must be rational numbers; got {v!r}")
    try:
        return to_fraction(v) if not isinstance(v, str) else Fraction(v)
    except (ValueError, ZeroDivisionError, OverflowError, DomainError):
        raise DomainError(f"covariance entry {v!r} is not a finite number") from None


def _ldl(sigma: Matrix) -> tuple[Matrix, tuple[Fraction, ...]]:
    """Σ = L·D·Lᵀ exactly; DomainError unless every pivot dᵢ > 0 (Σ positive definite)."""
    d = len(sigma)
    low = [[Fraction(int(i == j)) for j in range(d)] for i in range(d)]
    piv: list[Fraction] = []
    for j in range(d):
        dj = sigma[j][j] - sum((low[j][m] ** 2 * piv[m] for m in range(j)), Fraction(0))
        if dj <= 0:
            raise DomainError("covariance must be positive definite (pivot "
                              f"{j} is {float(dj):.3g}); add a multiple of the identity or "
                              "drop a linearly dependent coordinate")
        piv.append(dj)
        for i in range(j + 1, d):
            acc = sigma[i][j] - sum((low[i][m] * low[j][m] * piv[m] for m in range(j)),
                                    Fraction(0))
            low[i][j] = acc / dj
    return tuple(tuple(r) for r in low), tuple(piv)


@dataclass(frozen=True)
class MahalanobisPlan:
    """The public, data-free parameters of one mechanism (all exact).

    Attributes
    ----------
    lower : Matrix
        L, unit lower triangular, Σ = L·D·Lᵀ.
    pivots : tuple of Fraction
        (d₁, …, d_d), the diagonal of D.
    k : int
        The grid exponent: the whitened input is rounded to multiples of 2^k.
    variances : tuple of Fraction
        vᵢ ≥ c²dᵢ/4^k, the discrete Gaussians' variance parameters in grid units.
    scale : Fraction
        c, the noise multiplier: the noise covariance is at most c²Σ.
    relaxation : Fraction
        2^k·√(Σᵢ 1/dᵢ) (rounded up): what rounding adds to the Mahalanobis sensitivity.
    """

    lower: Matrix
    pivots: tuple[Fraction, ...]
    k: int
    variances: tuple[Fraction, ...]
    scale: Fraction
    relaxation: Fraction

    def whiten(self, x: np.ndarray) -> list[int]:
        """w̄ = round(L⁻¹x / 2^k), exactly (forward substitution on the floats' values)."""
        grid = Fraction(2) ** self.k
        w: list[Fraction] = []
        for i, xi in enumerate(x.tolist()):
            w.append(Fraction(xi) - sum((self.lower[i][m] * w[m] for m in range(i)),
                                        Fraction(0)))
        return [math.floor(v / grid + Fraction(1, 2)) for v in w]

    def colour(self, u: Sequence[int]) -> np.ndarray:
        """y = 2^k·L·u as the nearest floats (post-processing of the whitened release)."""
        grid = Fraction(2) ** self.k
        return np.array([float(grid * sum((self.lower[i][m] * u[m] for m in range(i + 1)),
                                          Fraction(0))) for i in range(len(u))])


def mahalanobis_plan(scale: Number, covariance: Sequence[Sequence[Number]],
                     k: int | None = None) -> MahalanobisPlan:
    """The exact factorisation, grid and variances of :func:`make_gaussian_mahalanobis`
    (module docstring); k defaults to ⌊log₂(c·√min dᵢ)⌋ − 30.

    Raises
    ------
    DomainError
        As :func:`declared_covariance`, Σ not positive definite, c ≤ 0, or Σ too
        ill-conditioned for the exact sampler (max dᵢ/min dᵢ ≥ 2^28).
    """
    c = representable_scale(scale)
    lower, piv = _ldl(declared_covariance(covariance))
    if max(piv) / min(piv) >= MAX_SPREAD:
        raise DomainError("covariance is too ill-conditioned for the exact sampler (pivot "
                          "ratio ≥ 2^28); rescale its coordinates or drop a nearly "
                          "dependent one")
    kk = grid_exponent(c * sqrt_up(min(piv))) if k is None else int(k)
    grid = Fraction(2) ** kk
    variances = tuple(_variance_up(c * c * p / (grid * grid)) for p in piv)
    relax = _up(grid * sqrt_up(sum((1 / p for p in piv), Fraction(0))))
    return MahalanobisPlan(lower, piv, kk, variances, c, relax)


def _up(x: Fraction) -> Fraction:
    """x rounded up to a multiple of 2^-64 (short exact numbers; more noise, never less)."""
    return Fraction(math.ceil(x * (1 << 64)), 1 << 64)


def _variance_up(v: Fraction) -> Fraction:
    if v.denominator < 1 << 32 and v.numerator < 1 << 100:
        return v
    step = Fraction(1, 1 << 16)
    return math.ceil(v / step) * step


def mahalanobis_norm(v: Sequence[Number], covariance: Sequence[Sequence[Number]]) -> Fraction:
    """√(vᵀΣ⁻¹v) rounded up (via Σ = L·D·Lᵀ): the Mahalanobis length of a difference, to
    declare a sensitivity from a known set of neighbouring differences."""
    lower, piv = _ldl(declared_covariance(covariance))
    w: list[Fraction] = []
    for i, vi in enumerate(v):
        w.append(to_fraction(vi) - sum((lower[i][m] * w[m] for m in range(i)), Fraction(0)))
    return _up(sqrt_up(sum((wi * wi / p for wi, p in zip(w, piv, strict=True)), Fraction(0))))


def _audit() -> list[AuditCase]:
    """c = 2, Σ = [[4, 2], [2, 5]], on the pair (0, 0), (2, 0) (Mahalanobis distance
    √(4·5/16) ≈ 1.12, declared up), audited through the first coordinate (post-processing);
    broken: the same draw with Σ/4 (half the noise) for the same claim."""
    sigma = [[4, 2], [2, 5]]
    d_in = mahalanobis_norm([2, 0], sigma)
    return [AuditCase("gaussian_mahalanobis", make_gaussian_mahalanobis(2, sigma, k=-10),
                      _first_coordinate(2, sigma), _first_coordinate(1, sigma),
                      np.zeros(2), np.array([2.0, 0.0]), d_in)]


def _first_coordinate(scale: Number, sigma: Sequence[Sequence[Number]]) -> Sampler:
    """n draws of y₁ = 2^k(w̄₁ + z₁) (L's first row is e₁), vectorised, on the −10 grid."""
    plan = mahalanobis_plan(scale, sigma, k=-10)

    def sample(x: Any, n: int) -> np.ndarray:
        centre = plan.whiten(np.asarray(x, dtype=np.float64))[0]
        return (centre + discrete_gaussian_variance(plan.variances[0], n)) / 1024

    return sample


@register(audit=_audit)
def make_gaussian_mahalanobis(scale: Number, covariance: Sequence[Sequence[Number]], *,
                              k: int | None = None) -> Measurement:
    """Add noise of covariance c²Σ (Σ declared) to a float vector of length d, exactly on
    the lattice 2^k·Lℤ^d (Σ = L·D·Lᵀ).

    Parameters
    ----------
    scale : number
        c > 0, the noise multiplier (units of the input per unit of √Σ); rounded up to a
        rational the exact samplers take.
    covariance : d × d matrix of rationals
        Σ, symmetric positive definite, 1 ≤ d ≤ 32 (ints, Fractions, decimal strings or
        floats, read exactly). Its shape is the sensitivity set's: neighbours' differences
        v satisfy vᵀΣ⁻¹v ≤ Δ_M².
    k : int, optional
        Grid exponent; default ⌊log₂(c·√min dᵢ)⌋ − 30.

    Returns
    -------
    Measurement
        Input: float array of shape (d,) under :class:`MahalanobisDistance` (NaN refused,
        ±inf read as ±the largest float); output: float array of shape (d,).
        Privacy map: Δ_M ↦ ZCDP((Δ_M + 2^k·√(Σᵢ 1/dᵢ))²/(2c²)) (Dwork & Roth App. A.1;
        Bun & Steinke 2016 Prop. 1.6 and Lemma 2.3; CKS20 Thm 4: the proof is in the module
        docstring). Law: y = 2^k·L(w̄ + z), w̄ = round(L⁻¹x/2^k), zᵢ ~ N_ℤ(0, vᵢ)
        independent, vᵢ ≥ c²dᵢ/4^k. ``accuracy(beta)``: a with P(|yᵢ − xᵢ| > a) ≤ β for
        each coordinate i (the Gaussian tail at ≈ c·√max Σᵢᵢ, plus the rounding).

    Raises
    ------
    DomainError
        At construction: c ≤ 0, Σ not square, symmetric, rational, positive definite or
        small enough (d ≤ 32, pivot ratio < 2^28). At release: NaN or a vector of another
        length.
    """
    cov = declared_covariance(covariance)
    plan = mahalanobis_plan(scale, cov, k)
    dim = len(cov)
    grid = Fraction(2) ** plan.k
    # per coordinate: noise sd 2^k·√(Σₘ Lᵢₘ²vₘ) (sub-Gaussian, CKS20), rounding 2^(k-1)·Σₘ|Lᵢₘ|
    sd = max(grid * sqrt_up(sum((low * low * v for low, v in zip(row, plan.variances,
                                                                  strict=True)), Fraction(0)))
             for row in plan.lower)
    rounding = float(max(grid * sum((abs(low) for low in row), Fraction(0)) / 2
                         for row in plan.lower))

    def release(x: Any) -> np.ndarray:
        arr, _ = as_vector(x, integer=False)
        if arr.size != dim:
            raise DomainError(f"the input has {arr.size} coordinates; this mechanism "
                              f"takes {dim}")
        centre = plan.whiten(np.clip(arr, -_FLOAT_MAX, _FLOAT_MAX))
        noise = [int(discrete_gaussian_variance(v, 1)[0]) for v in plan.variances]
        return plan.colour([a + b for a, b in zip(centre, noise, strict=True)])

    def rho(d_in: Any) -> ZCDP:
        shift = non_negative(d_in, "d_in") + plan.relaxation
        return ZCDP(shift * shift / (2 * plan.scale * plan.scale))

    return Measurement(
        function=release,
        input_metric=MahalanobisDistance(cov),
        output_measure=ZCDP,
        privacy_map=rho,
        name=f"gaussian_mahalanobis(scale={float(plan.scale):.6g}, d={dim}, "
             f"grid=2^{plan.k})",
        accuracy=lambda beta: gaussian_tail(float(sd), float(beta)) + rounding,
        input_domain=VectorDomain(AtomDomain(Kind.FLOAT), size=dim),
    )
