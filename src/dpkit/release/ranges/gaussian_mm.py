"""The matrix mechanism with Gaussian noise under ρ-zCDP, its strategy optimised for L2
sensitivity (Li, Miklau, Hay, McGregor & Rastogi, VLDB J 2015, §4 (ε, δ) version; the
convex formulation of Yuan, Yang, Zhang & Hao, "Convex optimization for linear query
processing under approximate differential privacy", KDD 2016).

Strategy A (n×n, full rank), noisy answers y = Ax + N(0, σ²I), estimate x̂ = A⁻¹y (least
squares for a square strategy). Adding or removing one record moves Ax by a column of A, so
the L2 sensitivity is Δ₂ = max_j ‖a_j‖₂ and the release is ρ-zCDP with ρ = Δ₂²/(2σ²)
(Bun & Steinke, TCC 2016, Prop. 1.6). The workload W's expected total squared error is
σ²·‖W A⁻¹‖_F² = σ²·tr(WᵀW (AᵀA)⁻¹), so the strategy minimises Δ₂²·tr(G (AᵀA)⁻¹), G = WᵀW.
Li & Miklau's SVD bound (PVLDB 2012) gives (Σᵢ σᵢ(W))²/n ≤ that for every A; under L2 it
is nearly attained (HDMM's repository, experiments/journal/oned.csv: the convex optimum is
within 1.05× of it on 1-D prefix and all-range workloads).

Optimisation: A = B·diag(1/‖b_j‖) (unit columns, Δ₂ = 1) and L-BFGS over B on
f(B) = tr(G (AᵀA)⁻¹), gradient ∂f/∂A = −2A(AᵀA)⁻¹G(AᵀA)⁻¹ pulled back through the
column normalisation; start from G^{1/2}, the eigen-design of Li & Miklau. Dense: meant for
n ≤ 1,024 cells (each step is O(n³)). Noise: :func:`dpkit.mechanisms.make_gaussian`
(discrete Gaussian on a 2^k grid, the grid rounding charged in its privacy map), drawn by
:func:`dpkit.mechanisms.frontend.noisy` (the measurement of :func:`dpkit.mechanisms.make_noise`).

Strategy reuse: the optimised A depends only on the (public) workload, so it is cached — a
bounded LRU (:func:`strategy_cache_clear`, :func:`strategy_cache_info`) keyed by the
workload's structure (:func:`dpkit.release.workload.structure`): ``("prefix", n)``,
``("all-range", n)``, ``("identity", n)``, ``("uniform-ranges", n)`` for a workload that
declares the uniform random family (optimised for the family's expected Gram
G_all − ½I, which minimises the family's expected error since the error is linear in G; see
:mod:`dpkit.release.ranges.matrix`), or a digest of any other set of ranges. Δ₂ and σ are
computed from the strategy actually used on every release.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

from dpkit.core.component import Measurement
from dpkit.core.measures import ZCDP
from dpkit.core.metrics import L1Distance
from dpkit.core.numbers import Number, fraction_up, non_negative, positive, sqrt_up
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.measure import check_counts
from dpkit.release.ranges.matrix import range_gram
from dpkit.release.ranges.strategy_cache import StrategyCache
from dpkit.release.workload import Factor, RangeWorkload, all_range_gram, structure

__all__ = ["l2_sensitivity", "optimize_l2", "l2_error", "gaussian_expected_rmse",
           "gaussian_matrix_mechanism", "make_gaussian_matrix_release", "MAX_CELLS",
           "strategy_cache_clear", "strategy_cache_info"]

MAX_CELLS = 1024
_U = 2.0 ** -53  # float64 unit roundoff
_STRATEGIES = StrategyCache(16)  # n ≤ 1,024: at most 8 MB per entry


def strategy_cache_clear() -> None:
    """Empty the Gaussian matrix mechanism's strategy cache and reset its counters."""
    _STRATEGIES.clear()


def strategy_cache_info() -> dict[str, int]:
    """The strategy cache's ``hits``, ``misses``, ``size`` and ``maxsize``."""
    return _STRATEGIES.info()


def l2_sensitivity(strategy: np.ndarray) -> Fraction:
    """Δ₂ = max_j ‖a_j‖₂, rounded up to an exact upper bound: the float sum of m squares is
    inflated by the bound (m+1)u/(1 − (m+1)u) on its relative error (Higham 2002, Eq. 4.4)
    plus the rounding of each square, and the square root is taken upwards (exactly:
    :func:`~dpkit.core.numbers.sqrt_up`).

    Raises
    ------
    DomainError
        An empty, non-finite or all-zero strategy."""
    a = np.asarray(strategy, dtype=np.float64)
    if a.ndim != 2 or a.size == 0 or not np.all(np.isfinite(a)):
        raise DomainError("the strategy must be a finite, non-empty 2-D matrix")
    squares = float((a * a).sum(axis=0).max())
    if squares <= 0:
        raise DomainError("the strategy has no nonzero entry")
    m = a.shape[0] + 2
    gamma = m * _U / (1 - m * _U)
    bound = fraction_up(squares) * (1 + fraction_up(gamma))
    return sqrt_up(bound)


def l2_error(gram: np.ndarray, strategy: np.ndarray) -> float:
    """Δ₂²·tr(G (AᵀA)⁻¹): the workload's total squared error per unit noise variance
    σ²/Δ₂² (with σ² = Δ₂²/(2ρ) the expected total squared error is this over 2ρ)."""
    a = np.asarray(strategy, dtype=np.float64)
    sensitivity_sq = float((a * a).sum(axis=0).max())
    return sensitivity_sq * float(np.trace(np.linalg.solve(a.T @ a, gram)))


def _loss_and_grad(flat: np.ndarray, gram: np.ndarray, n: int) -> tuple[float, np.ndarray]:
    b = flat.reshape(n, n)
    norms = np.sqrt((b * b).sum(axis=0))
    a = b / norms
    inv = np.linalg.inv(a.T @ a)
    ig = inv @ gram
    grad_a = -2 * a @ (ig @ inv)
    grad_b = (grad_a - a * (a * grad_a).sum(axis=0)) / norms
    return float(np.trace(ig)), grad_b.ravel()


def optimize_l2(gram: np.ndarray, maxiter: int = 1000) -> np.ndarray:
    """A strategy with unit columns (Δ₂ = 1) minimising tr(G (AᵀA)⁻¹) (module docstring).
    Deterministic: same G, same A. ``gram`` is WᵀW (n×n, n ≤ :data:`MAX_CELLS`).

    Raises
    ------
    DomainError
        ``gram`` not square, not finite, or larger than MAX_CELLS."""
    g = np.asarray(gram, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != g.shape[1] or not np.all(np.isfinite(g)):
        raise DomainError("gram must be a finite square matrix WᵀW")
    n = g.shape[0]
    if n > MAX_CELLS:
        raise DomainError(f"the L2 strategy optimisation is dense O(n³) per step; n = {n} > "
                          f"{MAX_CELLS} (pass your own strategy)")
    eig, vec = np.linalg.eigh(g)
    # G^{1/2} plus a small ridge keeps the start invertible for rank-deficient workloads
    start = (vec * np.sqrt(np.maximum(eig, 0.0))) @ vec.T + 1e-3 * max(eig.max(), 1) * np.eye(n)
    result = minimize(_loss_and_grad, start.ravel(), args=(g, n), jac=True,
                      method="L-BFGS-B", options={"maxiter": int(maxiter)})
    b = result.x.reshape(n, n)
    best = b / np.sqrt((b * b).sum(axis=0))
    start_a = start / np.sqrt((start * start).sum(axis=0))
    return best if l2_error(g, best) <= l2_error(g, start_a) else start_a


def _gram(workload: RangeWorkload | None, n: int) -> tuple[np.ndarray, int]:
    """The workload's own WᵀW and query count (all ranges for None)."""
    if workload is None:
        return all_range_gram(n), n * (n + 1) // 2
    if len(workload.shape) != 1 or workload.shape[0] != n:
        raise DomainError(f"the workload is over {workload.shape}; the histogram has {n} cells")
    w = workload.matrix()
    w = np.asarray(w.toarray() if sp.issparse(w) else w, dtype=np.float64)
    return w.T @ w, w.shape[0]


def _factor_gram(factor: Factor) -> np.ndarray:
    """Dense WᵀW of a structural factor, a function of its key alone (named families from
    n; a "ranges" key's digest covers its ranges and weights)."""
    kind, n = factor.key[0], int(factor.key[1])
    i = np.arange(n)
    if kind == "all-range":
        return all_range_gram(n)
    if kind == "uniform-ranges":  # E[r rᵀ] ∝ G_all − ½I (module docstring)
        return all_range_gram(n) - 0.5 * np.eye(n)
    if kind == "prefix":  # prefixes [0, k) holding i and j: n − max(i, j)
        return (n - np.maximum.outer(i, i)).astype(np.float64)
    if kind == "identity":
        return np.eye(n)
    if factor.lo is None or factor.hi is None or factor.weights is None:
        raise DomainError(f"the factor {kind!r} carries no ranges")
    return range_gram(factor.lo, factor.hi, n, factor.weights)


def _strategy(workload: RangeWorkload | None, n: int, reuse: bool = True) -> np.ndarray:
    """The cached strategy for the workload's structure (module docstring)."""
    if not isinstance(reuse, bool):
        raise DomainError(f"reuse must be True or False; got {reuse!r}")
    if workload is None:
        factor = Factor(("all-range", n))
    else:
        if len(workload.shape) != 1 or workload.shape[0] != n:
            raise DomainError(f"the workload is over {workload.shape}; the histogram has "
                              f"{n} cells")
        # a 1-D workload is always one factor (the fallback only satisfies the type checker)
        (factor,) = structure(workload, use_family=reuse) or (Factor(("identity", n)),)
    if n > MAX_CELLS:
        raise DomainError(f"the L2 strategy optimisation is dense O(n³) per step; n = {n} > "
                          f"{MAX_CELLS} (pass your own strategy)")
    return _STRATEGIES.get(("l2", factor.key), lambda: [optimize_l2(_factor_gram(factor))])[0]


def gaussian_expected_rmse(workload: RangeWorkload | None, n: int, rho: Number,
                           strategy: np.ndarray | None = None) -> float:
    """Per-query RMSE √(σ²‖WA⁻¹‖_F²/|W|), σ² = Δ₂²/(2ρ), of the release below (all ranges
    when ``workload`` is None)."""
    r = positive(rho, "rho", up=False)
    gram, queries = _gram(workload, n)
    a = _strategy(workload, n) if strategy is None else np.asarray(strategy, np.float64)
    return math.sqrt(l2_error(gram, a) / (2 * float(r)) / queries)


def gaussian_matrix_mechanism(x: np.ndarray, rho: Number, workload: RangeWorkload | None = None,
                              strategy: np.ndarray | None = None, *, reuse: bool = True
                              ) -> np.ndarray:
    """Release a 1-D histogram by the matrix mechanism with Gaussian noise. ρ-zCDP.

    Parameters
    ----------
    x : array of non-negative int, shape (n,)
        The counts (n ≤ :data:`MAX_CELLS` unless ``strategy`` is given).
    rho : number
        ρ > 0 (zCDP; (ε, δ) by ε = ρ + 2√(ρ ln(1/δ)), Bun & Steinke 2016 Prop. 1.3).
    workload : RangeWorkload, optional
        The ranges to optimise the strategy for (default: all ranges).
    strategy : ndarray, shape (n, n), optional
        A full-rank strategy to use instead of the optimised one.
    reuse : bool
        True (default): a workload declaring a random family gets the family's cached
        strategy; False optimises on the queries themselves. Either way Δ₂ is that of the
        strategy used.

    Returns
    -------
    ndarray of float64, shape (n,)
        x̂ = A⁻¹(Ax + N(0, σ²)), σ = Δ₂/√(2ρ) (rounded up to the noise grid).

    Raises
    ------
    DomainError
        Bad counts, ρ ≤ 0, a workload of another domain, a strategy of the wrong shape,
        ``reuse`` not a bool.
    """
    counts = check_counts(x, (1,))
    r = positive(rho, "rho", up=False)
    n = counts.size
    a = _strategy(workload, n, reuse) if strategy is None else np.asarray(strategy, np.float64)
    if a.shape != (n, n):
        raise DomainError(f"the strategy must be {n}×{n}; got {a.shape}")
    noisy = frontend.noisy(a @ counts.astype(np.float64), l2_sensitivity(a), ZCDP(r),
                           output="grid", size=n).value
    return np.linalg.solve(a, noisy)


def make_gaussian_matrix_release(rho: Number, workload: RangeWorkload | None = None
                                 ) -> Measurement:
    """:func:`gaussian_matrix_mechanism` as a Measurement on count vectors under L1
    distance. Privacy map d_in ↦ ZCDP(d_in²·ρ): d_in records move Ax by ≤ d_in·Δ₂ in L2."""
    r = positive(rho, "rho", up=False)
    return Measurement(
        function=lambda x: gaussian_matrix_mechanism(x, r, workload),
        input_metric=L1Distance(),
        output_measure=ZCDP,
        privacy_map=lambda d_in: ZCDP(non_negative(d_in, "d_in") ** 2 * r),
        name=f"gaussian_matrix_mechanism(rho={float(r):.6g})")
