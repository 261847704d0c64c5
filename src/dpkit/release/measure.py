"""Noisy linear measurements of a histogram, and their least-squares inference.

Every algorithm of :mod:`dpkit.release` measures linear queries ``y = A·x`` of the count vector
``x`` and post-processes. Neighbouring histograms differ by one record (add/remove): ``x`` and
``x'`` are at L1 distance 1, so ``A·x`` moves by at most the largest column L1 norm of ``A``,
Δ_A = max_j Σ_i |A_ij|. Adding Laplace noise of scale Δ_A/ε to each query is ε-DP (Dwork,
McSherry, Nissim & Smith 2006; Dwork & Roth Thm 3.6); for substitution neighbours (one
record changes cell) double the distance.

The noise is exact and drawn through the front-end kit,
:func:`dpkit.mechanisms.frontend.noisy` (the measurement of the one calibrated-noise entry,
:func:`dpkit.mechanisms.make_noise`, its privacy map checked with exact rationals): integer
queries get discrete Laplace noise of scale Δ_A/ε (Canonne, Kamath & Steinke 2020), or with
per-query weights Privelet's scales wᵢ·Δ/ε (``weights=``); integer queries of L2 sensitivity
get discrete Gaussian noise. The expected error of the least-squares estimate from a strategy
``A`` for a workload ``W`` is 2(Δ_A/ε)²‖W A⁺‖_F² summed over queries (Li, Hay, Rastogi,
Miklau & McGregor 2010, Prop. 3): :func:`expected_rmse`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from dpkit.core.numbers import fraction_up
from dpkit.errors import DomainError

__all__ = ["l1_sensitivity", "least_squares", "expected_rmse", "check_counts"]

_U = 2.0 ** -53  # unit roundoff of float64


def check_counts(x: object, dims: tuple[int, ...] = (1, 2)) -> np.ndarray:
    """A histogram as an int64 array: non-negative integers below 2^63, finite, of an
    accepted rank (DomainError otherwise, before any debit)."""
    arr = np.asarray(x)
    if arr.ndim not in dims:
        raise DomainError(f"histogram must have {' or '.join(map(str, dims))} dimensions; "
                          f"got shape {arr.shape}")
    if arr.size == 0:
        raise DomainError("histogram is empty")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise DomainError("histogram has NaN or infinite counts")
        if not np.all(arr == np.round(arr)):
            raise DomainError("histogram counts must be integers")
    elif arr.dtype.kind not in "iub":
        raise DomainError(f"histogram counts must be numbers; got dtype {arr.dtype}")
    if np.any(arr < 0):
        raise DomainError("histogram counts must be non-negative")
    if arr.dtype.kind in "fu" and np.any(arr >= 2**63):  # the cast below would wrap them
        raise DomainError("histogram counts must be below 2^63 (they are read as int64)")
    return arr.astype(np.int64)


def l1_sensitivity(strategy: np.ndarray | sp.spmatrix) -> Fraction:
    """Δ_A = max_j Σ_i |A_ij| as an exact upper bound (a Fraction).

    Integer matrices are summed exactly; real ones in float64, each column sum inflated by
    the relative bound (m+1)·u/(1 − (m+1)·u) of m-term summation (Higham 2002, Eq. 4.4)."""
    a = sp.csc_matrix(strategy) if sp.issparse(strategy) else np.asarray(strategy)
    data = np.asarray(a.data if sp.issparse(a) else a)
    if data.size == 0:
        return Fraction(0)
    if np.all(data == np.round(data)):
        sums = np.asarray(abs(a).astype(np.int64).sum(axis=0)).ravel()
        return Fraction(int(sums.max()))
    sums = np.asarray(abs(a).sum(axis=0)).ravel()
    m = a.shape[0] + 1
    gamma = m * _U / (1 - m * _U)
    return fraction_up(float(sums.max())) * (1 + fraction_up(gamma))


def least_squares(strategy: np.ndarray | sp.spmatrix, y: np.ndarray,
                  weights: np.ndarray | None = None) -> np.ndarray:
    """argmin_x ‖diag(w)(A x − y)‖₂ (post-processing): dense ``lstsq`` for small strategies,
    sparse LSQR otherwise. ``weights`` are 1/σ_i for queries with unequal noise."""
    a = strategy
    y = np.asarray(y, dtype=np.float64)
    if weights is not None:
        a = sp.diags(weights) @ a if sp.issparse(a) else weights[:, None] * a
        y = weights * y
    if sp.issparse(a) and a.shape[1] > 2048:
        return spla.lsqr(a, y, atol=1e-12, btol=1e-12, iter_lim=20 * a.shape[1])[0]
    dense = _dense(a)
    return np.linalg.lstsq(dense, y, rcond=None)[0]


def _dense(matrix: np.ndarray | sp.spmatrix) -> np.ndarray:
    if sp.issparse(matrix):
        return np.asarray(matrix.toarray(), dtype=np.float64)  # type: ignore[union-attr]
    return np.asarray(matrix, dtype=np.float64)


def expected_rmse(workload: np.ndarray | sp.spmatrix | None, strategy: np.ndarray | sp.spmatrix,
                  epsilon: float, sensitivity: float | None = None, *,
                  gram: np.ndarray | None = None, queries: int | None = None) -> float:
    """Root mean squared error per query of least squares from ``strategy`` with Laplace
    noise of scale Δ_A/ε: √(2(Δ_A/ε)² ‖W A⁺‖_F² / |W|) (Li et al. 2010, Prop. 3), using
    ‖W A⁺‖_F² = trace((AᵀA)⁻¹ WᵀW). Pass the workload matrix W, or its Gram matrix WᵀW as
    ``gram`` with the number of ``queries`` (for workloads too large to write out, e.g.
    :func:`~dpkit.release.workload.all_range_gram`). Dense linear algebra: meant for
    domains up to a few thousand cells."""
    a = _dense(strategy)
    if gram is None:
        if workload is None:
            raise DomainError("pass a workload matrix or its gram= and queries=")
        w = _dense(workload)
        gram, queries = w.T @ w, w.shape[0]
    if not queries:
        raise DomainError("queries must be a positive count")
    sensitivity = float(l1_sensitivity(a)) if sensitivity is None else sensitivity
    total = float(np.trace(np.linalg.solve(a.T @ a, gram)))
    return math.sqrt(2 * (sensitivity / epsilon) ** 2 * total / queries)
