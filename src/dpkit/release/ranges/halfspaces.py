"""Halfspace counting queries in low dimension: "how many points satisfy ⟨w, x⟩ ≤ b".

Points live on a declared grid in [0, 1]^d (d = 1 or 2): axis j has m_j ≥ 2 grid points
g = i/(m_j − 1), i = 0 … m_j − 1, and a data set is the count of points at each grid point
(:func:`grid_counts` rounds raw values to it after scaling them by declared bounds). A
:class:`HalfspaceFamily` is a declared, finite list of halfspaces {x : ⟨w, x⟩ ≤ b} with
rational w and b; its 0/1 query matrix is computed exactly in integers
(:meth:`HalfspaceFamily.matrix`). :meth:`HalfspaceFamily.through_grid_points` gives every
halfspace bounded by a line through two grid points (1-D: every threshold), on small grids.

:func:`answer_halfspaces` answers a family at ε-DP by one of the house's existing routes —
no new noise code; every draw goes through :mod:`dpkit.mechanisms.frontend`:

- ``"laplace"`` — the baseline: the k exact answers A·x with discrete Laplace noise of scale
  Δ/ε, Δ = max_c Σ_q A_qc the family's L1 sensitivity (the most queries one grid point is
  in; a record adds 1 to one cell), Dwork, McSherry, Nissim & Smith 2006;
- ``"identity"``, ``"hierarchical"`` (1-D: HB, Qardaji, Yang & Li 2013; 2-D: the quadtree,
  Cormode et al. 2012), ``"privelet"`` (Xiao, Wang & Gehrke 2010) — the grid histogram
  released once by :func:`~dpkit.release.ranges.histogram.release_histogram`, each query
  the sum of its cells (post-processing);
- ``"pmw"`` — private multiplicative weights over the grid
  (:class:`~dpkit.release.synthetic.pmw.PrivateMultiplicativeWeights`, Hardt & Rothblum
  2010), the queries asked in the family's order; once its c measured answers are spent
  the rest are read off its hypothesis (post-processing). MWEM in dpkit is built for marginal
  workloads (:mod:`~dpkit.release.synthetic.mwem`), so PMW is the multiplicative-weights route.

Reference: Muthukrishnan & Nikolov, "Optimal private halfspace counting via discrepancy",
STOC 2012 (arXiv:1203.5453), abstract: for a set P of n points in R^d with integer weights,
every (ε, δ)-DP algorithm for halfspace counting has **average squared error**
Ω(n^{1−1/d}) over the halfspaces, and an (ε, δ)-DP algorithm achieves O(n^{1−1/d}); n is
|P|, the number of *point locations* (here the grid points), not the number of records. The
abstract states no constant and hides its dependence on ε and δ, so :func:`discrepancy_rate`
gives the rate n^{1/2 − 1/(2d)} of the root-mean-square error only (for d = 1 it is 1: the
paper's bound is then constant up to logarithms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.core.measures import PureDP
from dpkit.core.numbers import Number, positive, to_fraction
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.mechanisms.registry import AuditCase, register
from dpkit.release.measure import check_counts
from dpkit.release.ranges.grid2d import FLOAT_EXACT
from dpkit.release.ranges.histogram import release_histogram
from dpkit.release.ranges.switch import clamp_cells
from dpkit.release.synthetic.domain import Domain
from dpkit.release.synthetic.pmw import PrivateMultiplicativeWeights

__all__ = ["HalfspaceFamily", "HalfspaceRelease", "METHODS", "answer_halfspaces", "auto_method",
           "grid_counts", "discrepancy_rate"]

METHODS = ("auto", "laplace", "identity", "hierarchical", "privelet", "pmw")
"""The answerers :func:`answer_halfspaces` accepts (an allow-list)."""

MAX_CELLS = 1 << 14  # grid points of a family
MAX_ENTRIES = 1 << 26  # k × cells of the dense 0/1 query matrix
_HISTOGRAM = {"identity": ("identity", "identity"), "hierarchical": ("hb", "quadtree"),
              "privelet": ("privelet", "privelet")}  # route -> (1-D, 2-D) histogram method


def _check_shape(shape: object) -> tuple[int, ...]:
    dims = tuple(shape) if isinstance(shape, tuple | list) else (shape,)
    if not 1 <= len(dims) <= 2:
        raise DomainError(f"halfspace grids have d = 1 or 2 axes; got shape {shape!r}")
    for m in dims:
        if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 2:
            raise DomainError(f"each axis needs an integer number of grid points ≥ 2; "
                              f"got {shape!r}")
    if math.prod(int(m) for m in dims) > MAX_CELLS:
        raise DomainError(f"a halfspace grid has at most {MAX_CELLS} points; got {shape!r}")
    return tuple(int(m) for m in dims)


def _rational(value: object, name: str) -> Fraction:
    if isinstance(value, bool):
        raise DomainError(f"{name} must be a rational number; got {value!r}")
    try:  # a decimal string is read exactly; a float is its exact binary value
        f = Fraction(value) if isinstance(value, str) else to_fraction(value)
    except (TypeError, ValueError, ZeroDivisionError, DomainError, OverflowError) as err:
        raise DomainError(f"{name} must be a finite rational number; got {value!r}") from err
    return f


def _integer_rows(shape: tuple[int, ...], normals: tuple[tuple[Fraction, ...], ...],
                  offsets: tuple[Fraction, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(W, B) with ⟨w, g_i⟩ ≤ b ⇔ Σ_j W_j·i_j ≤ B for every grid index i, all integers:
    g_ij = i_j/(m_j − 1), so multiplying by L = lcm(m_j − 1) and the denominators' lcm D
    gives W_j = w_j·D·L/(m_j − 1), B = b·D·L. Refuses values whose sums could leave int64."""
    big = math.lcm(*(m - 1 for m in shape))
    rows, bounds = [], []
    for w, b in zip(normals, offsets, strict=True):
        den = math.lcm(b.denominator, *(c.denominator for c in w))
        row = [int(c * den * (big // (m - 1))) for c, m in zip(w, shape, strict=True)]
        bound = int(b * den * big)
        if sum(abs(c) * (m - 1) for c, m in zip(row, shape, strict=True)) + abs(bound) >= 1 << 62:
            raise DomainError("a halfspace's normal or offset has too large a numerator or "
                              "denominator for exact integer evaluation")
        rows.append(row)
        bounds.append(bound)
    return np.array(rows, dtype=np.int64), np.array(bounds, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class HalfspaceFamily:
    """A declared, finite family of halfspaces {x ∈ [0, 1]^d : ⟨w, x⟩ ≤ b} over a grid.

    Parameters
    ----------
    shape : tuple of int, length d ∈ {1, 2}
        Grid points per axis, m_j ≥ 2 (point i_j sits at i_j/(m_j − 1)); at most
        ``MAX_CELLS`` points in all.
    normals : sequence of sequences of rationals, shape (k, d)
        The w of each halfspace (ints, Fractions, decimal strings or floats, read exactly).
    offsets : sequence of rationals, shape (k,)
        The b of each halfspace.

    Attributes
    ----------
    k : int
        Number of queries.
    cells : int
        Number of grid points, Π m_j.

    Raises
    ------
    DomainError
        A bad shape, k = 0, a normal of the wrong length, a non-rational entry, a k × cells
        matrix above ``MAX_ENTRIES`` or numbers too large for exact int64 evaluation (all at
        construction: the family is public).
    """

    shape: tuple[int, ...]
    normals: tuple[tuple[Fraction, ...], ...]
    offsets: tuple[Fraction, ...]
    _rows: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)
    _matrix: np.ndarray | None = field(init=False, repr=False)  # built on first use

    def __init__(self, shape: tuple[int, ...] | int, normals: Any, offsets: Any) -> None:
        dims = _check_shape(shape)
        w = tuple(tuple(_rational(c, "normal") for c in np.atleast_1d(np.asarray(
            row, dtype=object))) for row in normals)
        b = tuple(_rational(c, "offset") for c in offsets)
        if not w or len(w) != len(b) or any(len(row) != len(dims) for row in w):
            raise DomainError(f"a family needs k ≥ 1 normals of length {len(dims)} and one "
                              f"offset each; got {len(w)} normals, {len(b)} offsets")
        if len(w) * math.prod(dims) > MAX_ENTRIES:
            raise DomainError(f"k × cells = {len(w) * math.prod(dims)} exceeds {MAX_ENTRIES}")
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "normals", w)
        object.__setattr__(self, "offsets", b)
        object.__setattr__(self, "_rows", _integer_rows(dims, w, b))
        object.__setattr__(self, "_matrix", None)

    @property
    def k(self) -> int:
        """Number of halfspaces."""
        return len(self.offsets)

    @property
    def cells(self) -> int:
        """Number of grid points."""
        return math.prod(self.shape)

    def matrix(self) -> np.ndarray:
        """The k × cells 0/1 query matrix (uint8; cells in row-major order of ``shape``):
        A[q, c] = 1 iff grid point c satisfies ⟨w_q, x⟩ ≤ b_q, decided in exact integer
        arithmetic (:func:`_integer_rows`). Built once per family (it is immutable) and
        shared read-only: the plan, the sensitivity and the release all read it."""
        if self._matrix is not None:
            return self._matrix
        w, b = self._rows
        index = np.indices(self.shape).reshape(len(self.shape), -1)  # (d, cells)
        matrix = (w @ index <= b[:, None]).astype(np.uint8)
        matrix.setflags(write=False)
        object.__setattr__(self, "_matrix", matrix)
        return matrix

    def sensitivity(self) -> int:
        """Δ = max over grid points of the number of halfspaces containing it: the L1
        sensitivity of the answer vector when a record is added or removed (≥ 1)."""
        return max(1, int(self.matrix().sum(axis=0, dtype=np.int64).max()))

    def answer(self, counts: npt.ArrayLike) -> np.ndarray:
        """Exact answers A·x (int64, shape (k,)) for a count array of shape ``shape``."""
        x = check_counts(counts, (len(self.shape),))
        if x.shape != self.shape:
            raise DomainError(f"counts of shape {x.shape} for a grid of shape {self.shape}")
        return self.matrix().astype(np.int64) @ x.ravel()

    @classmethod
    def through_grid_points(cls, shape: tuple[int, ...] | int) -> HalfspaceFamily:
        """Every distinct halfspace bounded by a hyperplane through grid points, both sides.

        1-D: x ≤ g and −x ≤ −g for every grid point g (2m − 1 queries: x ≥ 0 is x ≤ 1).
        2-D: for every primitive integer direction (dx, dy) between two grid points (index
        units) and every line with that direction through at least two grid points, both
        closed halfspaces; the
        normal in [0, 1]² coordinates is (dy·(m₁ − 1), −dx·(m₂ − 1)). Duplicates (the same
        set of grid points) are kept once, the first found. 2-D grids of at most 32 × 32.

        Raises
        ------
        DomainError
            A bad shape, or a 2-D grid above 1,024 points.
        """
        dims = _check_shape(shape)
        if len(dims) == 1:
            m = dims[0]
            normals = [(1,)] * m + [(-1,)] * (m - 1)
            offsets = [Fraction(t, m - 1) for t in range(m)] + [
                Fraction(-t, m - 1) for t in range(1, m)]  # x ≥ 0 would repeat x ≤ 1
            return cls(dims, normals, offsets)
        if math.prod(dims) > 1024:
            raise DomainError("through_grid_points enumerates lines on grids of at most "
                              "1,024 points")
        return cls(dims, *_lines_2d(dims))


def _lines_2d(dims: tuple[int, ...]) -> tuple[list[tuple[int, int]], list[int]]:
    """Normals and offsets of the distinct 2-D halfspaces through ≥ 2 grid points."""
    m1, m2 = dims
    i, j = np.indices(dims).reshape(2, -1)
    normals: list[tuple[int, int]] = []
    offsets: list[int] = []
    seen: set[bytes] = set()
    for dx in range(0, m1):
        for dy in range(-(m2 - 1), m2):
            if math.gcd(dx, dy) != 1 or (dx == 0 and dy != 1):
                continue
            value = dy * i - dx * j  # the line's index-space equation, constant on the line
            levels, counts = np.unique(value, return_counts=True)
            for c in levels[counts >= 2].tolist():
                for sign in (1, -1):
                    key = np.packbits(sign * value <= sign * c).tobytes()
                    if key in seen:
                        continue
                    seen.add(key)
                    # index i = x₁(m₁ − 1), j = x₂(m₂ − 1): the same halfspace in [0, 1]²
                    normals.append((sign * dy * (m1 - 1), -sign * dx * (m2 - 1)))
                    offsets.append(sign * c)
    return normals, offsets


def grid_counts(values: npt.ArrayLike, bounds: tuple[tuple[Number, Number], ...],
                shape: tuple[int, ...] | int) -> np.ndarray:
    """Counts of records at each grid point: each column j is scaled by its declared bounds
    (lo_j, hi_j) to [0, 1], clamped there (a value outside the bounds counts at the nearest
    end) and rounded to the nearest grid point i/(m_j − 1) (halves up).

    Parameters
    ----------
    values : array_like of finite numbers, shape (n,) or (n, d)
        The records' coordinates in their own units.
    bounds : sequence of (lo, hi) pairs, one per axis
        Declared, lo < hi (never read off the data).
    shape : tuple of int
        Grid points per axis.

    Returns
    -------
    ndarray of int64, shape ``shape``

    Raises
    ------
    DomainError
        A bad shape or bounds, values of the wrong width, NaN or infinite values.
    """
    dims = _check_shape(shape)
    arr = np.asarray(values, dtype=np.float64)
    arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
    if arr.ndim != 2 or arr.shape[1] != len(dims) or len(bounds) != len(dims):
        raise DomainError(f"values need {len(dims)} columns and one (lo, hi) per column")
    if not np.all(np.isfinite(arr)):
        raise DomainError("values must be finite (NaN or infinity found)")
    index = []
    for col, (lo, hi), m in zip(arr.T, bounds, dims, strict=True):
        low, high = float(lo), float(hi)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise DomainError(f"bounds must be finite with lo < hi; got {(lo, hi)!r}")
        unit = np.clip((col - low) / (high - low), 0.0, 1.0)
        index.append(np.floor(unit * (m - 1) + 0.5).astype(np.int64))
    flat = np.ravel_multi_index(tuple(index), dims)
    return np.bincount(flat, minlength=math.prod(dims)).reshape(dims).astype(np.int64)


def discrepancy_rate(n: Number, d: int) -> float:
    """n^{1/2 − 1/(2d)}: the rate of Muthukrishnan & Nikolov's (STOC 2012) lower bound on the
    root-mean-square error of (ε, δ)-DP halfspace counting over n point locations in R^d
    (their bound is Ω(n^{1−1/d}) on the average squared error; the constant, the ε and δ
    dependence and the logarithmic factors are not stated in the abstract, so this is the
    rate only, not a bound).

    Raises
    ------
    DomainError
        n ≤ 0 or d < 1.
    """
    if not n > 0 or isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise DomainError("discrepancy_rate needs n > 0 and an integer d ≥ 1")
    return float(n) ** (0.5 - 1 / (2 * int(d)))


@dataclass(frozen=True)
class HalfspaceRelease:
    """Private answers to a :class:`HalfspaceFamily`.

    Attributes
    ----------
    answers : ndarray of float64, shape (k,)
        One estimated count per halfspace, in records.
    epsilon : Fraction
        ε spent (pure DP, add/remove-one-record neighbours).
    method : str
        The route, one of :data:`METHODS`.
    sensitivity : int or None
        ``"laplace"``: Δ, so each answer's error is discrete Laplace of scale Δ/ε.
    options : dict
        The route's options (PMW's ``alpha``, ``max_updates``; ``updates`` it used).
    """

    answers: np.ndarray
    epsilon: Fraction
    method: str
    sensitivity: int | None = None
    options: dict[str, Any] = field(default_factory=dict)


def _pmw_options(family: HalfspaceFamily, epsilon: Fraction, options: dict[str, Any]
                 ) -> dict[str, Any]:
    unknown = set(options) - {"alpha", "max_updates"}
    if unknown or "alpha" not in options:
        raise DomainError("method 'pmw' takes alpha (its target error in records) and "
                          f"optionally max_updates; got {sorted(options)}")
    domain = _domain(family)
    PrivateMultiplicativeWeights.check(domain, epsilon, options["alpha"],
                                       max_updates=options.get("max_updates"))
    return dict(options)


def _domain(family: HalfspaceFamily) -> Domain:
    return Domain(tuple(f"x{j}" for j in range(len(family.shape))), family.shape)


def _check(counts: npt.ArrayLike, family: HalfspaceFamily, epsilon: Number, method: str,
           options: dict[str, Any]) -> tuple[np.ndarray, Fraction, dict[str, Any]]:
    if not isinstance(family, HalfspaceFamily):
        raise DomainError("family must be a HalfspaceFamily")
    if method not in METHODS:
        raise DomainError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    x = check_counts(counts, (len(family.shape),))
    if x.shape != family.shape:
        raise DomainError(f"counts of shape {x.shape} for a grid of shape {family.shape}")
    eps = positive(epsilon, "epsilon", up=False)
    if method == "pmw":
        return x, eps, _pmw_options(family, eps, options)
    if options:
        raise DomainError(f"method {method!r} takes no options; got {sorted(options)}")
    return x, eps, {}


def _pmw(x: np.ndarray, a: np.ndarray, family: HalfspaceFamily, eps: Fraction,
         options: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """PMW asked every query in order; after c measured answers, the hypothesis answers."""
    cells = np.repeat(np.arange(x.size), x.ravel())
    codes = np.stack(np.unravel_index(cells, family.shape), axis=1).astype(np.int64)
    pmw = PrivateMultiplicativeWeights(codes, _domain(family), eps, options["alpha"],
                                       max_updates=options.get("max_updates"))
    out = np.empty(family.k, dtype=np.float64)
    for q, row in enumerate(a.astype(np.float64)):
        if pmw.updates >= pmw.max_updates:  # the sparse vector is spent: post-processing
            out[q] = float(row @ pmw.hypothesis)
        else:
            out[q] = pmw.answer(row).value
    return out, {**options, "max_updates": pmw.max_updates, "updates": pmw.updates}


@register(audit=lambda: _audit_cases())
def answer_halfspaces(counts: npt.ArrayLike, family: HalfspaceFamily, epsilon: Number,
                      method: str = "auto", *, accountant: AccountantLike = None,
                      **options: Any) -> HalfspaceRelease:
    """Answer every halfspace of ``family`` on the grid counts at ε-DP by one route.

    A primitive on already-bounded counts (one record adds 1 to one grid point), charged
    once through ``accountant`` when given (an Accountant, a PrivacyFilter or a Session
    whose privacy unit is the row: it takes counts, not a session's units, so a session
    with ``PrivacyUnit.by`` is refused by the kit).

    Parameters
    ----------
    counts : array_like of non-negative integers, shape ``family.shape``
        Records per grid point (:func:`grid_counts`).
    family : HalfspaceFamily
        The k declared halfspaces.
    epsilon : number
        ε > 0 in nats, spent in total.
    method : str
        One of :data:`METHODS` (module docstring). ``"auto"`` (the default) picks, from the
        declared family alone, the one of ``"laplace"`` and ``"identity"`` with the smaller
        worst-query noise variance: Laplace's 2p/(1 − p)² at p = e^{−ε/Δ} against r_max
        times that at p = e^{−ε}, r_max the most grid points one halfspace holds (roughly
        Δ² against r_max), so it is never worse than the per-query Laplace baseline.
    accountant : AccountantLike, optional
        Charged PureDP(ε) once, after every check and before any count is read.
    **options
        ``"pmw"`` only: ``alpha`` (required; its target error in records, public) and
        ``max_updates``.

    Returns
    -------
    HalfspaceRelease
        ``answers`` of shape (k,).

    Raises
    ------
    DomainError
        An unknown method or option, counts of another shape, negative, non-integer or
        non-finite counts, ε ≤ 0, PMW's refusals (all before any debit and any draw).
        Counts of any magnitude are accepted: after the debit each cell is clamped to
        ⌊(2^53 − 1)/cells⌋ (a declared bound from the shape; a record still moves one
        clamped cell by at most 1), so no total is read to refuse and nothing raises.
    BudgetExceededError
        From the accountant, before anything runs.

    Notes
    -----
    Privacy (pure ε-DP, add/remove one record): ``"laplace"`` adds discrete Laplace of
    scale Δ/ε to A·x, whose L1 sensitivity is Δ = max_c Σ_q A_qc (Dwork & Roth Thm 3.6;
    Canonne, Kamath & Steinke 2020 for the discrete sampler), so each answer's error is
    P(E = z) = (1 − p)/(1 + p)·p^|z|, p = e^{−ε/Δ}, variance 2p/(1 − p)². The histogram
    routes are ε-DP by :func:`~dpkit.release.ranges.histogram.release_histogram` and the
    sums are post-processing (Dwork & Roth Prop. 2.1); with ``"identity"`` a query over r
    grid points has the error of a sum of r independent discrete Laplace(1/ε), variance
    r·2p/(1 − p)², p = e^{−ε}. ``"pmw"`` is ε-DP by
    :class:`~dpkit.release.synthetic.pmw.PrivateMultiplicativeWeights` (Hardt & Rothblum
    2010; Lyu, Su & Li 2017 Thm 2 for the sparse vector). The work is O(k·cells), fixed by
    the declared family.
    """
    counts_in, eps, opts = _check(counts, family, epsilon, method, options)
    d = len(family.shape)
    delta_l1 = family.sensitivity()  # public: the declared family's
    if method == "auto":
        method = auto_method(family, eps)

    def run() -> HalfspaceRelease:
        # declared clamp (from the shape): totals below 2^53, exact in int64 and float64
        x = clamp_cells(counts_in, FLOAT_EXACT)
        a = family.matrix()
        if method == "laplace":
            exact = a.astype(np.int64) @ x.ravel()
            noisy = frontend.noisy(exact, delta_l1, eps, statistic="halfspaces").value
            return HalfspaceRelease(np.asarray(noisy, dtype=np.float64), eps, method, delta_l1)
        if method == "pmw":
            values, used = _pmw(x, a, family, eps, opts)
            return HalfspaceRelease(values, eps, method, None, used)
        est = release_histogram(x, eps, _HISTOGRAM[method][d - 1]).counts
        return HalfspaceRelease(a.astype(np.float64) @ est.ravel(), eps, method)

    noise = _noise_plan(method, d, delta_l1, eps, family.k)
    return charge(accountant, PureDP(eps), f"answer_halfspaces({method}; shape "
                  f"{family.shape}; k {family.k})", run, noise)


def _dl_variance(scale: Fraction) -> float:
    """Variance of the discrete Laplace of scale s: 2p/(1 − p)², p = e^{−1/s}."""
    p = math.exp(-1 / float(scale))
    return 2 * p / (1 - p) ** 2


def auto_method(family: HalfspaceFamily, epsilon: Number) -> str:
    """``"identity"`` when its worst query's noise variance (r_max discrete Laplaces of
    scale 1/ε) is below the per-query Laplace's (scale Δ/ε), else ``"laplace"``: a choice
    from the declared family and ε only (never from the counts)."""
    eps = positive(epsilon, "epsilon", up=False)
    r_max = int(family.matrix().sum(axis=1, dtype=np.int64).max())
    laplace = _dl_variance(Fraction(family.sensitivity()) / eps)
    return "identity" if r_max * _dl_variance(1 / eps) < laplace else "laplace"


def _noise_plan(method: str, d: int, delta_l1: int, eps: Fraction, k: int
                ) -> tuple[NoiseRow, ...]:
    if method == "laplace":
        return (frontend.noise_row(delta_l1, eps, "halfspaces", count=k),)
    if method == "pmw":
        return ()  # its noise rows are recorded as they are drawn
    return (NoiseRow(_HISTOGRAM[method][d - 1], None, Fraction(1), "histogram"),)


# -- the audit battery's case ---------------------------------------------------------------
def _audit_cases() -> list[AuditCase]:
    """The Laplace route on a 4-point line with the family "x ≤ 1/3", "x ≤ 2/3", "x ≤ 1"
    (grid point 0 is in all three: Δ = 3), ε = 1; x has a record at point 0 and x' not.
    The output is the sum of the three answers (post-processing). Broken: Δ claimed 1."""
    from dpkit.core.component import Measurement
    from dpkit.core.domains import AtomDomain, Kind, VectorDomain
    from dpkit.core.metrics import L1Distance

    family = HalfspaceFamily((4,), [(1,), (1,), (1,)], [Fraction(1, 3), Fraction(2, 3), 1])
    eps = Fraction(1)

    def sampler(sensitivity: int) -> Any:
        def sample(data: object, n: int) -> np.ndarray:
            exact = family.answer(np.asarray(data, dtype=np.int64))
            noisy = frontend.noisy(np.tile(exact, n), sensitivity, eps).value
            return np.asarray(noisy, dtype=np.float64).reshape(n, family.k).sum(axis=1)
        return sample

    claim = Measurement(lambda data: answer_halfspaces(data, family, eps).answers,
                        L1Distance(), PureDP, lambda d_in: PureDP(eps * d_in),
                        "answer_halfspaces", input_domain=VectorDomain(
                            AtomDomain(Kind.INTEGER)))
    return [AuditCase("halfspaces", claim, sampler(family.sensitivity()), sampler(1),
                      np.array([1, 2, 0, 1]), np.array([0, 2, 0, 1]))]
