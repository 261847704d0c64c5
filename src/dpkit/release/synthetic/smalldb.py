"""SmallDB, the net mechanism (Blum, Ligett & Roth, STOC 2008; Dwork & Roth 2014 §4.1,
Algorithm "SmallDB", Proposition 4.1 and Theorems 4.2–4.5): the exponential mechanism over
every database of m records from the data universe X, scored by how badly it answers a
declared finite class Q of counting queries; it releases the chosen database y (a synthetic
dataset of m rows) and its answers. Exponential time: for small universes only.

The map. x ∈ ℕ^|X| is the data's histogram (n = ‖x‖₁ records), Q a 0/1 matrix (one row
per query q, q(x) = Σ_z q(z)·x_z in records), R = {y ∈ ℕ^|X| : ‖y‖₁ = m} the candidates,
|R| = C(|X| + m − 1, m) (stars and bars, enumerated by
:func:`~dpkit.release.synthetic.median.candidate_databases`). The score of y is the integer

    u(x, y) = −max_{q∈Q} |m·q(x) − n·q(y)|   (= −m·n·max_q |q(x)/n − q(y)/m|),

i.e. D&R's −max_q |f(x) − f(y)| on normalised queries, multiplied by the integer m·n so it
is exact. y is drawn with probability ∝ exp(ε·u(x, y)/(2Δ)) through the one selection
entry (:func:`dpkit.mechanisms.frontend.select`, exact sampling).

Sensitivity (this normalisation, stated for both relations). Adding or removing one record
z changes m·q(x) by m·q(z) ∈ {0, m} and n·q(y) by q(y) ∈ [0, m] in the same direction, so
every |m·q(x) − n·q(y)| moves by at most m; substituting one record keeps n and moves
m·q(x) by at most m. Hence Δu = m for add/remove and substitute-one neighbours alike —
D&R's Δ = 1/n on normalised queries, scaled by m·n, without n having to be public. A
privacy unit of at most M records moves it by M·m: Δ = M·m (``sensitivity`` = M).

Privacy (pure ε-DP per unit): the exponential mechanism with Δ = M·m (McSherry & Talwar
2007; D&R Thm 3.10; SmallDB is D&R Prop. 4.1). Nothing else reads the data (m, Q and the
candidates are declared or public), and the answers q(y)/m are post-processing.

Size. Default m (D&R Thm 4.2 / Lemma 4.3: m = log|Q|/α² records suffice for a y within α
of x on every query): m = ⌈ln|Q|/α²⌉, raised to the Hoeffding minimum ⌊ln(2|Q|)/(2α²)⌋ + 1
where D&R's argument needs |Q| > 2 (2|Q|·e^{−2mα²} < 1). The default is capped to the largest
m whose enumeration is at most ``max_candidates`` (public arithmetic; the result says so);
a declared m above it, or a universe with more cells than ``max_candidates``, is refused at
plan time.

Accuracy (:meth:`SmallDBResult.bound`, normalised, with probability ≥ 1 − β; D&R Thm 4.4
with |R| exact instead of |X|^m): for the m actually used, some y ∈ R is within
α_m = √(ln(2|Q|)/(2m)) of x/n on every query (Lemma 4.3's Hoeffding and union bound; R is
finite, so α_m itself is attained), and the exponential mechanism loses at most
2Δ(ln|R| + ln(1/β))/ε in score (D&R Thm 3.11), so

    max_q |q(x)/n − q(y)/m| ≤ α_m + 2M(ln|R| + ln(1/β))/(ε·n).

D&R Thm 4.5's closed form, ((16 ln|X| ln|Q| + 4 ln(1/β))/(ε n))^{1/3}, is the same bound at
the theorem's own choice of α (:meth:`SmallDBResult.theorem_bound`, for comparison). Both
need n, which is private: the caller supplies it (public knowledge or its own estimate).

Accuracy against the trivial answer: y answers on the grid 1/m, so on data whose fractions
lie between grid points its error is up to 1/(2m) of n, i.e. n/(2m) records, whatever ε;
per-cell Laplace on the histogram (Identity) is within about c·ln(2|X|/β)/ε records (c the
most cells one query sums). On held-out Adult (``bench/smalldb.py``,
``bench/results/smalldb.md``) SmallDB's max error is far above Identity's for every ε.
:func:`plan_smalldb` therefore always emits :class:`~dpkit.errors.BaselineWarning` before
any draw, with the n above which Identity is better (public quantities only); the release
is unchanged.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import polars as pl

from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import L1Distance
from dpkit.core.numbers import Number, positive
from dpkit.core.record import NoiseRow
from dpkit.errors import BaselineWarning, DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.registry import AuditCase, Sampler, register
from dpkit.release.synthetic.domain import Domain
from dpkit.release.synthetic.iterative import LinearQueries
from dpkit.release.synthetic.median import candidate_databases

__all__ = ["SmallDBPlan", "SmallDBResult", "plan_smalldb", "smalldb", "smalldb_scores",
           "dr_size", "MAX_CANDIDATES"]

MAX_CANDIDATES = 1_000_000  # default cap on |R| (≈ 4 s to enumerate and score on one core)
_CHUNK = 1 << 22  # candidate × query entries scored at once (memory is declared)


def _count(cells: int, m: int) -> int:
    return math.comb(cells + m - 1, m)


def dr_size(queries: int, alpha: float) -> int:
    """D&R's m = ⌈ln|Q|/α²⌉ (Thm 4.2), at least Hoeffding's ⌊ln(2|Q|)/(2α²)⌋ + 1, the least
    m with 2|Q|e^{−2mα²} < 1 (Lemma 4.3's condition, which ⌈ln|Q|/α²⌉ meets for |Q| > 2)."""
    hoeffding = math.floor(math.log(2 * queries) / (2 * alpha * alpha)) + 1
    return max(math.ceil(math.log(queries) / (alpha * alpha)), hoeffding)


def _largest_size(cells: int, most: int, upto: int) -> int:
    """The largest m ≤ ``upto`` with C(cells + m − 1, m) ≤ ``most`` (0 if none)."""
    m = 0
    while m < upto and _count(cells, m + 1) <= most:
        m += 1
    return m


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise DomainError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SmallDBPlan:
    """What :func:`plan_smalldb` fixed before any record is read (all public).

    Attributes
    ----------
    cells, queries : int
        |X| and |Q|.
    size : int
        m, the records of the released database.
    candidates : int
        |R| = C(|X| + m − 1, m).
    capped : bool
        The default m (D&R's, from α) was lowered to fit ``max_candidates``.
    epsilon : Fraction
        ε (nats), per unit.
    sensitivity : int
        M, the records one privacy unit contributes (the score's Δ is M·m).
    beta : float
        Failure probability of the reported bounds.
    net_error : float
        α_m = √(ln(2|Q|)/(2m)): some candidate is this close to x/n on every query.
    selection_gap : float
        2M(ln|R| + ln(1/β))/ε, in records: what the selection may lose (divide by n).
    note : str
        Why Identity can be more accurate (module docstring), with its threshold n.
    """

    cells: int
    queries: int
    size: int
    candidates: int
    capped: bool
    epsilon: Fraction
    sensitivity: int
    beta: float
    net_error: float
    selection_gap: float
    note: str

    @property
    def score_sensitivity(self) -> int:
        """Δ = M·m of the integer score (module docstring)."""
        return self.sensitivity * self.size

    def noise_row(self) -> NoiseRow:
        """The selection's row (written with the debit): its temperature 2Δ/ε, exact."""
        return frontend.selection_row(self.score_sensitivity, self.epsilon,
                                      f"SmallDB: one of {self.candidates} databases of "
                                      f"{self.size} records")


def plan_smalldb(cells: int, queries: int, epsilon: Number, *, alpha: Number | None = None,
                 size: int | None = None, beta: float = 0.05, sensitivity: int = 1,
                 max_candidates: int = MAX_CANDIDATES, advise: bool = True) -> SmallDBPlan:
    """Check and fix everything SmallDB needs before a record is read (a session runs it
    before the debit); parameters as :func:`smalldb`, with ``cells`` = |X| and ``queries``
    = |Q|.

    Returns
    -------
    SmallDBPlan

    Raises
    ------
    DomainError
        ε ≤ 0; neither ``alpha`` nor ``size``; α outside (0, 1]; β outside (0, 1); a
        ``size``, ``sensitivity``, ``max_candidates``, ``cells`` or ``queries`` that is not a
        positive integer; a declared ``size`` whose C(|X| + m − 1, m) exceeds
        ``max_candidates`` (the message names the largest m that fits); more cells than
        ``max_candidates`` (no m ≥ 1 fits).

    Warns
    -----
    BaselineWarning
        Always when ``advise`` (module docstring, "Accuracy against the trivial answer").
    """
    eps = positive(epsilon, "epsilon", up=False)
    cells, count_q = _positive_int(cells, "cells"), _positive_int(queries, "queries")
    unit = _positive_int(sensitivity, "sensitivity")
    most = _positive_int(max_candidates, "max_candidates")
    if not (isinstance(beta, int | float) and 0 < beta < 1):
        raise DomainError("beta must be in (0, 1)")
    if alpha is None and size is None:
        raise DomainError("declare alpha (the normalised error target, m = ⌈ln|Q|/α²⌉) or "
                          "size (m, the records of the released database)")
    if cells > most:
        raise DomainError(f"SmallDB enumerates C(|X| + m − 1, m) databases: {cells} cells "
                          f"exceed max_candidates={most} already at m = 1; use fewer cells "
                          "(fewer columns, coarser bins) or a larger max_candidates")
    capped = False
    if size is not None:
        m = _positive_int(size, "size")
        if _count(cells, m) > most:
            fits = _largest_size(cells, most, m)
            raise DomainError(f"SmallDB enumerates C(|X| + m − 1, m) = {_count(cells, m)} "
                              f"databases for {cells} cells and m = {m}, more than "
                              f"max_candidates={most}; use a smaller size (m ≤ {fits} fits) "
                              "or fewer cells")
    elif alpha is not None:
        a = float(positive(alpha, "alpha"))
        if a > 1:
            raise DomainError("alpha is a normalised error: it must be in (0, 1]")
        want = dr_size(count_q, a)
        m = _largest_size(cells, most, want)
        capped = m < want
    candidates = _count(cells, m)
    net = min(1.0, math.sqrt(math.log(2 * count_q) / (2 * m)))
    gap = 2 * unit * (math.log(candidates) + math.log(1 / beta)) / float(eps)
    plan = SmallDBPlan(cells, count_q, m, candidates, capped, eps, unit, float(beta), net,
                       gap, _advice(cells, m, eps, unit, float(beta), capped))
    if advise:
        warnings.warn(plan.note, BaselineWarning, stacklevel=2)
    return plan


def _advice(cells: int, m: int, eps: Fraction, unit: int, beta: float, capped: bool) -> str:
    """The trivial answer's comparison (public quantities): the grid floor n/(2m) records
    against per-cell Laplace's c·ln(2|X|/β)·M/ε, taken at c = 1 (the kindest to SmallDB)."""
    identity = unit * math.log(2 * cells / beta) / float(eps)
    threshold = math.ceil(2 * m * identity)
    cap = " (capped to fit max_candidates)" if capped else ""
    return (f"SmallDB releases m = {m} records{cap}: its answers lie on the grid 1/m, so on "
            f"data between grid points a query is off by up to n/(2m) records whatever ε, "
            f"while per-cell Laplace (Identity) is within about {identity:.3g} records per "
            f"cell; with more than n ≈ {threshold} records Identity (dpkit.release."
            "release_histogram, method='identity') or MWEM can be more accurate")


@dataclass(frozen=True)
class SmallDBResult:
    """The output of :func:`smalldb`.

    Attributes
    ----------
    synthetic : ndarray of int64, shape (|X|,)
        y, the released database as counts over the universe (sums to m).
    answers : ndarray of float64, shape (|Q|,)
        q(y)/m, the normalised answers (estimates of q(x)/n).
    plan : SmallDBPlan
        m, |R|, ε, M, β and the bound's terms.
    table : polars.DataFrame or None
        y as m rows of the declared columns (``query.publish.smalldb``; None here).
    """

    synthetic: np.ndarray
    answers: np.ndarray
    plan: SmallDBPlan
    table: pl.DataFrame | None = None

    @property
    def epsilon(self) -> Fraction:
        return self.plan.epsilon

    def answer(self, queries: LinearQueries) -> np.ndarray:
        """q(y)/m for other counting queries over the same universe (post-processing)."""
        return queries.answer(self.synthetic) / self.plan.size

    def records(self, domain: Domain) -> np.ndarray:
        """y as m records of codes, shape (m, number of attributes), in ``domain``'s
        row-major cell order (decode with the session's codec)."""
        if domain.size() != self.synthetic.size:
            raise DomainError(f"the domain has {domain.size()} cells, y {self.synthetic.size}")
        cells = np.repeat(np.arange(self.synthetic.size), self.synthetic)
        return np.stack(np.unravel_index(cells, domain.shape()), axis=1).astype(np.int64)

    def bound(self, n: int) -> float:
        """max_q |q(x)/n − q(y)/m| ≤ α_m + 2M(ln|R| + ln(1/β))/(ε n) with probability
        ≥ 1 − β, for data of ``n`` records (module docstring; D&R Thm 4.4). ``n`` is the
        caller's: SmallDB never reads or releases it."""
        n = _positive_int(n, "n")
        return self.plan.net_error + self.plan.selection_gap / n

    def theorem_bound(self, n: int) -> float:
        """D&R Thm 4.5's closed form ((16 ln|X| ln|Q| + 4 ln(1/β))/((ε/M) n))^{1/3}: the
        bound at the theorem's own α (for comparison with :meth:`bound`)."""
        n = _positive_int(n, "n")
        p = self.plan
        top = 16 * math.log(max(p.cells, 2)) * math.log(max(p.queries, 2)) \
            + 4 * math.log(1 / p.beta)
        return float((top / (float(p.epsilon) / p.sensitivity * n)) ** (1 / 3))


def smalldb_scores(x: np.ndarray, queries: LinearQueries, candidates: np.ndarray
                   ) -> np.ndarray:
    """u(x, y) = −max_q |m·q(x) − n·q(y)| for every candidate row y (int64, shape (|R|,));
    m = the candidates' row sum, n = x's sum. Linear in |R|·|X| (chunked: the memory is
    bounded by declared sizes)."""
    m = int(candidates[0].sum())
    n = int(x.sum())
    target = m * np.rint(queries.answer(x)).astype(np.int64)
    matrix = queries.matrix
    step = max(1, _CHUNK // max(len(queries), 1))
    out = np.empty(candidates.shape[0], dtype=np.int64)
    for start in range(0, candidates.shape[0], step):
        block = candidates[start:start + step]
        answers = np.rint(np.asarray(matrix @ block.T.astype(np.float64))).astype(np.int64)
        out[start:start + step] = -np.abs(target[:, None] - n * answers).max(axis=0)
    return out


def _counts(x: object, cells: int) -> np.ndarray:
    counts = np.asarray(x)
    if counts.shape != (cells,) or counts.dtype.kind not in "iu" or (counts < 0).any():
        raise DomainError(f"x must be non-negative integer counts of shape ({cells},)")
    return counts.astype(np.int64)


def _audit() -> list[AuditCase]:
    """Three cells, m = 4, Q = the three prefix counts (15 candidates), ε = 1: x = (0, 1, 2),
    x′ adds a record to cell 0; the output is the chosen candidate's index (the pair was
    picked by exact enumeration: the correct selection's loss on it is 0.51, the broken
    one's 2.08). Broken: the score's sensitivity taken as 1 instead of M·m = 4 (D&R's
    Δ = 1/n mistaken for the integer score's), so the selection runs at 4ε for the same
    claim."""
    queries = LinearQueries.from_matrix(np.tril(np.ones((3, 3))))
    cand = candidate_databases(3, 4)

    def sampler(sensitivity: int) -> Sampler:
        def sample(data: object, n: int) -> np.ndarray:
            scores = smalldb_scores(np.asarray(data, dtype=np.int64), queries, cand)
            return np.asarray(frontend.select(scores, sensitivity, 1, size=n).value)
        return sample

    claim = Measurement(lambda d: sampler(4)(d, 1), L1Distance(), PureDP,
                        lambda d: PureDP(Fraction(d)), "smalldb",
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER), size=3))
    return [AuditCase("smalldb", claim, sampler(4), sampler(1), np.array([0, 1, 2]),
                      np.array([1, 1, 2]))]


@register(audit=_audit)
def smalldb(x: np.ndarray, queries: LinearQueries, epsilon: Number, *,
            alpha: Number | None = None, size: int | None = None, beta: float = 0.05,
            sensitivity: int = 1, max_candidates: int = MAX_CANDIDATES,
            plan: SmallDBPlan | None = None) -> SmallDBResult:
    """SmallDB (Blum, Ligett & Roth 2008; Dwork & Roth §4.1): release a database of m
    records chosen by the exponential mechanism for how well it answers ``queries``.

    Parameters
    ----------
    x : ndarray of int, shape (|X|,)
        The data's histogram over the universe (non-negative counts, n = their sum).
    queries : LinearQueries
        Q, counting queries over the same |X| cells (e.g. ``LinearQueries.from_marginals``).
    epsilon : number
        ε > 0 (nats).
    alpha : number in (0, 1], optional
        The normalised error target of D&R's size m = ⌈ln|Q|/α²⌉ (module docstring).
    size : int, optional
        m, declared (overrides ``alpha``). One of the two is required.
    beta : float
        Failure probability of the reported bounds (default 0.05).
    sensitivity : int
        M, records per privacy unit (default 1): the score's Δ is M·m.
    max_candidates : int
        Largest |R| = C(|X| + m − 1, m) enumerated (default 10^6).
    plan : SmallDBPlan, optional
        A plan from :func:`plan_smalldb` (a session plans before its debit); the other
        options are then ignored.

    Returns
    -------
    SmallDBResult
        ``synthetic`` (|X|,) counts summing to m, ``answers`` (|Q|,) in [0, 1], ``plan``;
        ``bound(n)`` and ``theorem_bound(n)`` the accuracy (normalised).

    Raises
    ------
    DomainError
        :func:`plan_smalldb`'s refusals, a workload over another number of cells, counts of
        the wrong shape, negative or non-integer.

    Warns
    -----
    BaselineWarning
        Before the draw (unless a plan is given): Identity can be more accurate.

    Notes
    -----
    Accuracy: not a default. On held-out real data (``bench/floor.py``: MSNBC sessions,
    news × sports × distinct pages, 16 cells, every cell of the three 2-way marginals, α =
    0.1) its max error is 5–8× per-cell Laplace's (Identity) at ε = 0.1 and 86–95× at ε = 1;
    on Adult (``bench/results/smalldb.md``) 0.063 of n at every ε ∈ {0.5, 1, 2}, against
    Identity's 0.0001–0.0004 and MWEM's 0.004–0.005: its m-record grid, not the noise, sets
    the error. Prefer Identity or MWEM; it warns (BaselineWarning) before every draw.

    Guarantee: PureDP(ε) per unit of at most M records, for add/remove and substitute-one
    neighbours: P[y] ∝ exp(ε·u(x, y)/(2M·m)) with u(x, y) = −max_q |m·q(x) − n·q(y)|,
    |Δu| ≤ M·m (McSherry & Talwar 2007; D&R Thm 3.10, Prop. 4.1).
    """
    cells = queries.domain_size
    if plan is None:
        plan = plan_smalldb(cells, len(queries), epsilon, alpha=alpha, size=size, beta=beta,
                            sensitivity=sensitivity, max_candidates=max_candidates,
                            advise=False)
        warnings.warn(plan.note, BaselineWarning, stacklevel=2)
    if (plan.cells, plan.queries) != (cells, len(queries)):
        raise DomainError("the plan was made for another universe or workload")
    counts = _counts(x, cells)
    candidates = candidate_databases(cells, plan.size)
    scores = smalldb_scores(counts, queries, candidates)
    pick = int(frontend.select(scores, plan.score_sensitivity, plan.epsilon).value)
    y = candidates[pick].astype(np.int64)
    return SmallDBResult(y, queries.answer(y) / plan.size, plan)
