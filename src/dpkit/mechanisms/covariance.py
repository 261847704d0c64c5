"""The second-moment matrix XᵀX under zCDP: Analyze Gauss.

:func:`make_analyze_gauss` is Algorithm 1 of Dwork, Talwar, Thakurta & Zhang, *Analyze Gauss:
Optimal Bounds for Privacy-Preserving Principal Component Analysis*, STOC 2014: release
XᵀX + E, where E is symmetric and its upper triangle (diagonal included) is i.i.d. Gaussian.
The noise here is the exact grid Gaussian of :func:`~dpkit.mechanisms.make_gaussian`, and the
guarantee is stated in zCDP (Bun & Steinke 2016, Prop. 1.6; Canonne, Kamath & Steinke 2020,
Thm 4) with the sensitivity derived below, not the paper's (ε, δ) constant.

Why there is no Wishart mechanism
---------------------------------
The "Wishart mechanism" of Jiang, Xie & Zhang (AAAI 2016) and Imtiaz & Sarwate (ICASSP 2016),
XᵀX/n + W with W ~ W_d(d + 1, 3/(2nε)·I), is not differentially private: W is positive
semi-definite, so the output's support {B : B − XᵀX/n ⪰ 0} depends on the data, and an output
possible on one dataset can be impossible on a neighbour. The claim was retracted (Sarwate
2017) and the flaw is noted by Sheffet (ALT 2019, fn. 4) and Amin, Dick, Kulesza, Muñoz Medina
& Vassilvitskii (NeurIPS 2019, §1.2); diffprivlib removed its implementation. Sheffet
(ALT 2019) proves an (ε, δ)-DP variant, XᵀX + W with W ~ W_d(k, B²·I) and k growing like
d + O(ln(1/δ)/ε²); it is not provided because its exact statement (the formula for k, the
conditions on ε and δ, the neighbouring relation) could not be checked against the paper when
this module was written. Use :func:`make_analyze_gauss`; project its output onto the PSD cone
afterwards if a positive semi-definite matrix is needed (post-processing, no privacy cost).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import samplers
from dpkit.core.component import Measurement
from dpkit.core.compose import calibrate_scale
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ZCDP
from dpkit.core.metrics import AddRemoveDistance
from dpkit.core.numbers import (
    Number,
    dyadic_up,
    float_down,
    integer,
    non_negative,
    positive,
    sqrt_up,
)
from dpkit.errors import DomainError
from dpkit.mechanisms._common import make_grid_release
from dpkit.mechanisms.gaussian import make_gaussian
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["make_analyze_gauss"]

MAX_DIM = 1 << 12
_FINE_BITS = 40  # each row's products are rounded to the grid 2^f, f = ⌊log₂ B²⌋ − 40
_CHUNK = 1 << 20  # products held in memory at once


def _floor_log2(x: Fraction) -> int:
    return samplers.grid_exponent(x) + samplers.GRID_BITS


def _row_sensitivity(b2: Fraction, d: int, f: int) -> Fraction:
    """Δ ≥ 2^f·‖v(x)‖₂ for every accepted row x (v as in :func:`_triangle`), rounded up.

    A row passes the check fl(Σ x_j²) ≤ B², so ‖x‖² ≤ B²/(1 − 2^-53)^d + d·2^-1074
    ≤ B²(1 + d·2^-51) + d·2^-1074 (at most d roundings per square, underflow included).
    Each product is off by ≤ 2^-53|x_i x_j| + 2^-1075 after the float multiply and by ≤ 2^(f−1)
    (+ 2^(f−1075) if subnormal) after rounding to the 2^f grid, ≤ 2^-53|x_i x_j| + 2^f in all;
    and ‖(x_i x_j)_{i≤j}‖₂ ≤ ‖x‖². Hence Δ = (1 + 2^-53)‖x‖² + 2^f √m.
    """
    m = d * (d + 1) // 2
    norm_sq = b2 * (1 + Fraction(d, 2**51)) + Fraction(d, 2**1074)
    sens = norm_sq * (1 + Fraction(1, 2**53)) + Fraction(2) ** f * sqrt_up(Fraction(m))
    return dyadic_up(sens, max(0, 60 - _floor_log2(sens)))


def _square_norms(arr: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", arr, arr)


def _rows(x: Any, d: int, b2_float: float, b_float: float, clip: bool) -> np.ndarray:
    """Validate the (n, d) input; clip rows above the bound if asked, else raise."""
    arr = np.asarray(x)
    if arr.ndim != 2 or arr.shape[1] != d:
        raise DomainError(f"expected an array of shape (n, {d}), got shape {arr.shape}")
    if arr.dtype.kind not in "iufb":
        raise DomainError(f"expected numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise DomainError("NaN or infinity in the input; drop or fill it first")
    over = _square_norms(arr) > b2_float
    if clip and over.any():
        big = arr[over]
        peak = np.abs(big).max(axis=1)  # rescale first so that squaring cannot overflow
        norms = peak * np.sqrt(_square_norms(big / peak[:, None]))
        arr[over] = big * (b_float * (1 - 2.0**-30) / norms)[:, None]
        over = _square_norms(arr) > b2_float
    if over.any():
        raise DomainError("a row has L2 norm above data_norm; pass clip=True to scale such "
                          "rows down to the bound")
    return arr


def _triangle(arr: np.ndarray, rows: np.ndarray, cols: np.ndarray, f: int) -> np.ndarray:
    """Σ_r v(x_r), exactly (Python ints, units of 2^f): v(x) is the upper triangle of x xᵀ
    with each product rounded to the nearest multiple of 2^f.

    Each |v| ≤ 2^41 + 1, so a chunk of ≤ 2^20 rows sums in int64 without overflow; chunks are
    added as Python ints. The total is exact, hence independent of the order of the rows.
    """
    total = np.zeros(rows.size, dtype=object)
    step = max(1, _CHUNK // rows.size)
    for start in range(0, arr.shape[0], step):
        block = arr[start:start + step]
        total = total + samplers.to_grid(block[:, rows] * block[:, cols], f).sum(axis=0
                                                                                 ).astype(object)
    return total


def _spectral_bound(sigma: float, d: int, beta: float) -> float:
    """b with P(‖E‖₂ > b) ≤ β for E symmetric, upper triangle i.i.d. σ-sub-Gaussian.

    The smaller of two bounds, t = ln(1/β), m = d(d+1)/2:
    ‖E‖₂ ≤ ‖E‖_F ≤ √2‖u‖₂ (u the triangle) and P(‖u‖² > σ²(m + 2√(mt) + 2t)) ≤ e^{−t}
    (Hsu, Kakade & Zhang 2012, Thm 1); and, from a 1/4-net N of the sphere (|N| ≤ 9^d,
    ‖E‖₂ ≤ 2 max_N |vᵀEv|; Vershynin 2018, Cor. 4.2.13 and Ex. 4.4.3) with vᵀEv
    √2σ-sub-Gaussian, ‖E‖₂ ≤ 4σ√(d ln 9 + ln(2/β)).
    """
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    m = d * (d + 1) // 2
    t = math.log1p(1 / beta - 1)
    frobenius = sigma * math.sqrt(2 * (m + 2 * math.sqrt(m * t) + 2 * t))
    net = 4 * sigma * math.sqrt(d * math.log1p(8) + math.log1p(1) + t)
    return min(frobenius, net)


def _audit() -> list[AuditCase]:
    """d = 1, B = 1, σ = 2 (ρ ≈ 1/8, audited as (ε, δ) at δ = 10^-3) on the tables {0} and
    {0, 1} (one row added); broken: σ = 1. The n outputs share the exact XᵀX."""
    def sampler(scale: int) -> Sampler:
        release = _analyze_gauss(1, 1, scale=scale)[1]
        return lambda rows, n: release(rows, n)[:, 0, 0]

    return [AuditCase("analyze_gauss", make_analyze_gauss(1, 1, scale=2), sampler(2),
                      sampler(1), np.array([[0.0]]), np.array([[0.0], [1.0]]))]


@register(audit=_audit)
def make_analyze_gauss(dim: int, data_norm: Number, *, scale: Number | None = None,
                       rho: Number | None = None, clip: bool = False, k: int | None = None
                       ) -> Measurement:
    """Analyze Gauss: the second-moment matrix XᵀX plus symmetric Gaussian noise, under zCDP.

    Computes T = XᵀX's upper triangle (m = d(d+1)/2 entries, ``np.triu_indices`` order)
    exactly — each row's products rounded to a fine grid 2^f, f = ⌊log₂ B²⌋ − 40, and summed
    in integers, so no floating-point accumulation depends on n or on the row order — rounds
    it to the grid 2^k, adds i.i.d. discrete Gaussian noise of standard deviation σ on that
    grid (as :func:`~dpkit.mechanisms.make_gaussian`) and mirrors it into a symmetric matrix
    (DTTZ14, Algorithm 1).

    Parameters
    ----------
    dim : int
        d, the number of columns (public; 1 ≤ d ≤ 4096).
    data_norm : number
        B > 0, the declared bound on each row's L2 norm (never inferred from the data;
        2^-500 ≤ B ≤ 2^500).
    scale : number, optional
        σ > 0, the standard deviation of each noise entry (rounded up to whole grid steps).
    rho : number, optional
        Target ρ > 0 of zCDP for one added or removed row; σ is then the smallest scale whose
        privacy map at d_in = 1 is at most ρ (:func:`~dpkit.core.compose.calibrate_scale`).
        Pass exactly one of ``scale`` and ``rho``.
    clip : bool
        If True, a row whose norm exceeds B is scaled by B(1 − 2^-30)/‖x‖ (towards the origin,
        onto the ball; a per-row map, so neighbours stay neighbours) instead of raising. The
        margin 2^-30 absorbs the float error of computing the norm.
    k : int, optional
        Grid exponent; default ⌊log₂ σ⌋ − 30 (as :func:`~dpkit.mechanisms.make_gaussian`).

    Returns
    -------
    Measurement
        Input: float array of shape (n, d), one row per record, under
        :class:`~dpkit.core.metrics.AddRemoveDistance`. Output: symmetric float64 array of
        shape (d, d) on the 2^k grid. Privacy map (zCDP, ρ in nats):

            d_in ↦ ZCDP((d_in·Δ + 2^k √m)² / (2σ²)),
            Δ = (1 + 2^-53)(B²(1 + d·2^-51) + d·2^-1074) + 2^f √m  (≈ B²),

        i.e. ``make_gaussian(σ, max_size=m).privacy_map(d_in·Δ)``: a row x moves the triangle
        of x xᵀ by ‖(x_i x_j)_{i≤j}‖₂ ≤ ‖x‖² ≤ B² in L2, and Δ adds the float error of the
        row check and of the products and the 2^f rounding (see ``_row_sensitivity``);
        2^k √m is the final rounding to the grid (Bun & Steinke 2016, Prop. 1.6; CKS20,
        Thm 4). ``accuracy(beta)``: b with P(‖E‖₂ > b) ≤ β for the noise matrix E, plus the
        grid rounding d·2^(k−1); not included is the per-row rounding, at most
        n·(d·2^f + 2^-52·B²) ≤ n·B²·d·2^-39 in spectral norm.

    Raises
    ------
    DomainError
        If d, B, σ or ρ is out of range, both or neither of ``scale`` and ``rho`` are given,
        or (when called) the input has the wrong shape, a non-numeric dtype, NaN or infinity,
        or a row with norm above B and ``clip`` is False.
    """
    return _analyze_gauss(dim, data_norm, scale=scale, rho=rho, clip=clip, k=k)[0]


def _analyze_gauss(dim: int, data_norm: Number, *, scale: Number | None = None,
                   rho: Number | None = None, clip: bool = False, k: int | None = None
                   ) -> tuple[Measurement, Callable[[Any, int], np.ndarray]]:
    """The measurement and ``release(x, n)``: n independent releases on the same table (one
    exact XᵀX, n noise draws), shape (n, d, d)."""
    dim = integer(dim, "dim", minimum=1, maximum=MAX_DIM)
    if (scale is None) == (rho is None):
        raise DomainError("pass exactly one of scale and rho")
    bound = positive(data_norm, "data_norm")
    b2 = bound * bound
    if not Fraction(1, 2**1000) <= b2 <= 2**1000:
        raise DomainError("data_norm must be between 2^-500 and 2^500")
    d, m = dim, dim * (dim + 1) // 2
    f = _floor_log2(b2) - _FINE_BITS
    sensitivity = _row_sensitivity(b2, d, f)
    if rho is not None:
        target = ZCDP(positive(rho, "rho", up=False))
        scale = calibrate_scale(
            lambda s: _analyze_gauss(d, data_norm, scale=s, clip=clip, k=k)[0], 1, target,
            start=sensitivity / sqrt_up(2 * target.rho))
    assert scale is not None
    gauss = make_gaussian(scale, max_size=m, k=k)
    _, kk, sigma, grid = make_grid_release(scale, k, m, samplers.discrete_gaussian)
    steps = sigma / grid  # an integer: make_gaussian's noise in grid steps
    rows, cols = np.triu_indices(d)
    b2_float, b_float = float_down(b2), float_down(bound)

    def release(x: Any, n: int) -> np.ndarray:
        total = _triangle(_rows(x, d, b2_float, b_float, clip), rows, cols, f)
        if kk >= f:  # round the exact sums to the 2^k grid (nearest, ties up)
            q = 1 << (kk - f)
            z = (2 * total + q) // (2 * q)
        else:
            z = total * (1 << (f - kk))
        noisy = z + samplers.discrete_gaussian(steps, n * m).reshape(n, m).astype(object)
        out = np.zeros((n, d, d))
        out[:, rows, cols] = np.ldexp(noisy.astype(np.float64), kk)
        out[:, cols, rows] = out[:, rows, cols]
        return out

    return Measurement(
        function=lambda x: release(x, 1)[0],
        input_metric=AddRemoveDistance(),
        output_measure=ZCDP,
        privacy_map=lambda d_in: gauss.privacy_map(non_negative(d_in, "d_in") * sensitivity),
        name=f"analyze_gauss(d={d}, data_norm={float(bound):g}, scale={float(sigma):.6g}, "
             f"grid=2^{kk})",
        accuracy=lambda beta: _spectral_bound(float(sigma), d, float(beta))
        + d * float(grid) / 2,
        input_domain=VectorDomain(VectorDomain(AtomDomain(Kind.FLOAT, infinity=False),
                                               size=d)),
    ), release
