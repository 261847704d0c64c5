"""Range-count workloads over a histogram (DPBench, Hay et al. SIGMOD 2016).

A workload is a list of axis-aligned ranges over a count array of shape ``shape`` (1-D or
multi-dimensional): query i sums the cells with ``lo[i, j] ≤ index_j < hi[i, j]`` on every
axis j (``hi`` exclusive). Answers come from a summed-area table in O(2^d) per query, so
workloads of 10^6 queries over 256×256 cells cost milliseconds; ``matrix()`` gives the
explicit sparse query matrix W for small domains (strategy selection, error formulas).

Random workloads take a NumPy ``Generator`` from the caller: they are benchmark inputs, never
noise. They declare their *family* (``"uniform-ranges"``: every axis's endpoints drawn
independently and uniformly), and :func:`structure` describes a workload by its family and
shape — a Kronecker product of per-axis factors — so that a strategy search (the matrix
mechanism's) can be keyed and reused by structure rather than by the queries' contents.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dpkit.errors import DomainError

__all__ = ["RangeWorkload", "prefix", "all_range", "all_range_gram", "identity", "random_ranges",
           "random_rectangles", "scaled_error", "rmse", "FAMILIES", "Factor", "structure"]

FAMILIES = ("uniform-ranges",)
"""Declarable workload families (an allow-list): ``"uniform-ranges"`` — each query's range on
every axis has its two endpoints drawn independently and uniformly over the cells (DPBench's
random 1-D ranges and 2-D rectangles, :func:`random_ranges`, :func:`random_rectangles`)."""


@dataclass(frozen=True, eq=False)
class RangeWorkload:
    """Axis-aligned range-count queries over a histogram.

    Attributes
    ----------
    shape : tuple of int
        The histogram's shape (n,) or (n1, n2, …).
    lo, hi : ndarray of int64, shape (q, d)
        Inclusive lower and exclusive upper cell index of each query on each axis.
    name : str
        A label for reports ("Prefix1D", "Range1D(2000)", …).
    family : str or None
        The random family the queries were drawn from, one of :data:`FAMILIES`, or None (the
        workload stands for itself). A declaration about the public workload, used only to
        choose a strategy (:func:`structure`); it never changes the privacy guarantee.

    Raises
    ------
    DomainError
        Mismatched ``lo``/``hi`` shapes, an empty or out-of-domain range, or a family not in
        :data:`FAMILIES`.
    """

    shape: tuple[int, ...]
    lo: np.ndarray
    hi: np.ndarray
    name: str = "ranges"
    family: str | None = None

    def __post_init__(self) -> None:
        if self.family is not None and self.family not in FAMILIES:
            raise DomainError(f"unknown workload family {self.family!r}; choose from "
                              f"{', '.join(FAMILIES)} or None")
        d = len(self.shape)
        if self.lo.ndim != 2 or self.lo.shape != self.hi.shape or self.lo.shape[1] != d:
            raise DomainError(f"lo and hi must both have shape (q, {d})")
        if np.any(self.lo < 0) or np.any(self.hi > np.asarray(self.shape)) or np.any(
                self.lo >= self.hi):
            raise DomainError("every range needs 0 ≤ lo < hi ≤ size on each axis")

    def __len__(self) -> int:
        return int(self.lo.shape[0])

    def answer(self, x: np.ndarray) -> np.ndarray:
        """The exact answers W·x, shape (q,), float64 (int64 for integer ``x``)."""
        x = np.asarray(x)
        if x.shape != self.shape:
            raise DomainError(f"histogram has shape {x.shape}; the workload expects "
                              f"{self.shape}")
        table = x.astype(np.int64 if x.dtype.kind in "iub" else np.float64)
        for axis in range(x.ndim):  # summed-area table with a leading zero on every axis
            table = np.cumsum(table, axis=axis)
            table = np.concatenate([np.zeros_like(table.take([0], axis=axis)), table],
                                   axis=axis)
        total: np.ndarray = np.zeros(len(self), dtype=table.dtype)
        for corner in itertools.product((0, 1), repeat=x.ndim):  # inclusion–exclusion
            index = tuple(np.where(c, self.hi[:, j], self.lo[:, j])
                          for j, c in enumerate(corner))
            sign = -1 if (x.ndim - sum(corner)) % 2 else 1
            total = total + sign * table[index]
        return total

    def matrix(self) -> sp.csr_matrix:
        """The query matrix W, shape (q, prod(shape)), as a sparse 0/1 matrix (row-major
        cells). Meant for small domains: it has Σ_i |range_i| nonzeros."""
        rows, cols = [], []
        for i in range(len(self)):
            axes = [np.arange(a, b) for a, b in zip(self.lo[i], self.hi[i], strict=True)]
            cells = np.ravel_multi_index(np.meshgrid(*axes, indexing="ij"), self.shape).ravel()
            rows.append(np.full(cells.size, i))
            cols.append(cells)
        r, c = np.concatenate(rows), np.concatenate(cols)
        return sp.csr_matrix((np.ones(r.size), (r, c)), shape=(len(self), int(np.prod(
            self.shape))))


def _one_d(lo: np.ndarray, hi: np.ndarray, n: int, name: str) -> RangeWorkload:
    return RangeWorkload((n,), lo.reshape(-1, 1).astype(np.int64),
                         hi.reshape(-1, 1).astype(np.int64), name)


def prefix(n: int) -> RangeWorkload:
    """The n prefix queries [0, k), k = 1 … n (DPBench's Prefix1D)."""
    return _one_d(np.zeros(n), np.arange(1, n + 1), n, "Prefix1D")


def all_range(n: int) -> RangeWorkload:
    """All n(n+1)/2 ranges [a, b), 0 ≤ a < b ≤ n."""
    a, b = np.triu_indices(n + 1, k=1)
    return _one_d(a, b, n, "AllRange1D")


def all_range_gram(n: int) -> np.ndarray:
    """WᵀW of the all-range workload without writing W out: entry (i, j) counts the ranges
    holding both cells, (min(i, j) + 1)·(n − max(i, j))."""
    i = np.arange(n)
    return ((np.minimum.outer(i, i) + 1) * (n - np.maximum.outer(i, i))).astype(np.float64)


def identity(shape: tuple[int, ...] | int) -> RangeWorkload:
    """One query per cell."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    cells = np.indices(shape).reshape(len(shape), -1).T
    return RangeWorkload(shape, cells.astype(np.int64), cells.astype(np.int64) + 1,
                         "Identity")


def random_ranges(n: int, count: int, generator: np.random.Generator) -> RangeWorkload:
    """``count`` ranges with endpoints uniform over the cells (DPBench's random 1-D ranges)."""
    ends = np.sort(generator.integers(0, n, size=(count, 2)), axis=1)
    w = _one_d(ends[:, 0], ends[:, 1] + 1, n, f"Range1D({count})")
    return RangeWorkload(w.shape, w.lo, w.hi, w.name, "uniform-ranges")


def random_rectangles(shape: tuple[int, int], count: int, generator: np.random.Generator
                      ) -> RangeWorkload:
    """``count`` rectangles with corners uniform over the cells (DPBench's 2-D ranges)."""
    lo = np.empty((count, len(shape)), dtype=np.int64)
    hi = np.empty_like(lo)
    for j, n in enumerate(shape):
        ends = np.sort(generator.integers(0, n, size=(count, 2)), axis=1)
        lo[:, j], hi[:, j] = ends[:, 0], ends[:, 1] + 1
    return RangeWorkload(tuple(shape), lo, hi, f"Range2D({count})", "uniform-ranges")


@dataclass(frozen=True, eq=False)
class Factor:
    """One axis of a workload's Kronecker structure (see :func:`structure`).

    Attributes
    ----------
    key : tuple
        Hashable structural key: ``("identity", n)``, ``("prefix", n)``, ``("all-range", n)``,
        ``("uniform-ranges", n)`` (a declared random family: its expected WᵀW), or
        ``("ranges", n, digest)`` for any other set of ranges (a BLAKE2b digest of the
        distinct ranges and their multiplicities).
    lo, hi : ndarray of int64, shape (k,), or None
        The factor's distinct ranges [lo, hi), sorted (None for a declared family).
    weights : ndarray of int64, shape (k,), or None
        Their multiplicities divided by their gcd (WᵀW of the factor is Σ w r rᵀ, up to a
        scale the strategy search ignores).
    """

    key: tuple
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    weights: np.ndarray | None = None


def _factor(lo: np.ndarray, hi: np.ndarray, counts: np.ndarray, n: int) -> Factor:
    """The factor of distinct sorted ranges with multiplicities ``counts``: a named family
    when the set is one (equal multiplicities, and the set's size forces the whole family:
    n distinct singletons, n distinct prefixes, n(n+1)/2 distinct ranges), else a digest."""
    weights = counts // np.gcd.reduce(counts)
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    if np.all(weights == 1):
        if lo.size == n and np.all(hi - lo == 1):
            return Factor(("identity", n), lo, hi, weights)
        if lo.size == n and np.all(lo == 0):
            return Factor(("prefix", n), lo, hi, weights)
        if lo.size == n * (n + 1) // 2:
            return Factor(("all-range", n), lo, hi, weights)
    digest = hashlib.blake2b(b"|".join(np.ascontiguousarray(a, np.int64).tobytes()
                                       for a in (lo, hi, weights)), digest_size=20).hexdigest()
    return Factor(("ranges", n, digest), lo, hi, weights)


def structure(workload: RangeWorkload, *, use_family: bool = True) -> tuple[Factor, ...] | None:
    """The workload as a Kronecker product of per-axis factors, or None if it is not one.

    A declared family (``workload.family``, if ``use_family``) gives one
    ``("uniform-ranges", n)`` factor per axis: a query's ranges on different axes are drawn
    independently, so the family's expected WᵀW is the Kronecker product of the axes'
    expected Grams. Otherwise the distinct queries are read: a 1-D workload is always one
    factor; a d-D workload is a product when its distinct boxes are exactly the Cartesian
    product of its distinct per-axis ranges (equal counts force equal sets) with equal
    multiplicities, so WᵀW = c·(G₁ ⊗ … ⊗ G_d). Cost: sorting the q queries.

    Parameters
    ----------
    workload : RangeWorkload
        The queries (public).
    use_family : bool
        Whether a declared family stands for the workload (default True); False reads the
        queries themselves.

    Returns
    -------
    tuple of Factor, one per axis, or None
        None for a multi-dimensional workload that is not a single Kronecker product.
    """
    if use_family and workload.family == "uniform-ranges":
        return tuple(Factor(("uniform-ranges", int(n))) for n in workload.shape)
    d = len(workload.shape)
    boxes, counts = np.unique(np.hstack([workload.lo, workload.hi]), axis=0, return_counts=True)
    if d == 1:
        return (_factor(boxes[:, 0], boxes[:, 1], counts, int(workload.shape[0])),)
    axes = [np.unique(boxes[:, [j, d + j]], axis=0) for j in range(d)]
    if boxes.shape[0] != math.prod(a.shape[0] for a in axes) or np.any(counts != counts[0]):
        return None
    return tuple(_factor(a[:, 0], a[:, 1], np.ones(a.shape[0], np.int64), int(n))
                 for a, n in zip(axes, workload.shape, strict=True))


def rmse(workload: RangeWorkload, x: np.ndarray, estimate: np.ndarray) -> float:
    """Root mean squared error per query, √(‖Wx − Wx̂‖₂² / |W|)."""
    diff = workload.answer(np.asarray(x, dtype=np.float64)) - workload.answer(
        np.asarray(estimate, dtype=np.float64))
    return float(np.sqrt(np.mean(diff * diff)))


def scaled_error(workload: RangeWorkload, x: np.ndarray, estimate: np.ndarray) -> float:
    """DPBench's scaled average per-query L2 error ‖Wx − Wx̂‖₂ / |W| / ‖x‖₁ (Hay et al.
    SIGMOD 2016, §4.3)."""
    diff = workload.answer(np.asarray(x, dtype=np.float64)) - workload.answer(
        np.asarray(estimate, dtype=np.float64))
    scale = float(np.abs(np.asarray(x)).sum())
    return float(np.linalg.norm(diff) / len(workload) / scale) if scale else float("nan")
