"""Private contribution-bound and bound tuning: ``dp.tune`` / ``Session.recommend_bounds``.

A curator with a per-person table must choose M = ``max_rows`` (or G = ``max_groups`` and
R = ``max_rows_per_group`` for a grouped query) and a numeric column's clamping ``bounds``.
Small bounds drop rows (bias); large ones scale the noise (variance). This module spends a
stated share of the session's budget to choose them, as PipelineDP's
``calculate_private_contribution_bounds`` does and as Amin, Kulesza, Muñoz Medina &
Vassilvitskii (ICML 2019, "Bounding user contributions: a bias-variance trade-off in
differential privacy", §3–4) analyse: release a histogram of per-unit contributions on a
declared geometric grid 1, 2, 4, …, cap (grouped: units by rows, distinct groups and most
rows in one group, on grid³), estimate for every grid candidate the rows it would
drop (bias) and the noise of the final query at the budget that remains, and keep the
candidate of least estimated error. Numeric bounds come the same way, adapted to value
clamping: a private histogram of one sampled value per unit on ``bins`` equal bins of the
declared outer range, projected on unimodal non-negative histograms, then the interval of
grid edges of least estimated error, the clamped tails' bias taken at the fit plus a
stated fraction of its noise's standard deviation (so the search steps inward from the
outer range only as far as the noisy tails allow).

Both steps are ordinary releases through the session's accountant (and ledger), through
the front-end kit (:func:`dpkit.mechanisms.frontend.charge_record` and ``noisy``, the one
calibrated-noise entry). Nothing is inferred: the grid's cap, the outer range, the number
of value bins and the group keys are declared.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

import narwhals as nw
import numpy as np

from dpkit.core.markup import box, facts, table
from dpkit.core.measures import ZCDP, PrivacyLoss, PureDP, convert
from dpkit.core.numbers import Number, as_typed
from dpkit.core.record import NoiseRow, Release
from dpkit.core.stability import Contribution
from dpkit.errors import BoundsError, BudgetExceededError, ColumnError, DomainError
from dpkit.frame import aggregates, engine
from dpkit.frame.privacy_unit import PrivacyUnit
from dpkit.mechanisms import frontend

if TYPE_CHECKING:
    from dpkit.frame.query import Query
    from dpkit.frame.session import Session

__all__ = ["tune", "recommend_bounds", "BoundsRecommendation", "Candidate", "grid",
           "MAX_CAP", "DEFAULT_SHARE", "DEFAULT_LEVELS", "DEFAULT_BINS", "MAX_BINS",
           "value_edges", "unimodal", "choose_interval"]

MAX_CAP = 1 << 16  # the largest declarable cap: at most 17 grid values, 289 candidates
DEFAULT_SHARE = Fraction(1, 10)  # of the session's budget (ε, or ρ under zCDP)
DEFAULT_LEVELS = (Fraction(1, 100), Fraction(99, 100))  # deprecated (the old quantiles)
DEFAULT_BINS = 16  # equal bins of the value histogram over the outer range (set on PUMS_dup)
MAX_BINS = 256  # the most declarable bins (the fit and the search are O(bins²))
TAIL_Z = Fraction(1, 5)  # the clamped tails' bias: the fit plus TAIL_Z noise stds (PUMS_dup)
HISTOGRAM_WEIGHT = Fraction(1, 2)  # of the tuning budget, when bounds are tuned too
BETA = 0.05  # a noisy count below its (1 − BETA/|grid|) noise quantile is read as 0
STATISTICS = ("count", "sum", "mean")
ROWS = "rows per unit"  # the histogram of an ungrouped query
JOINT = "units by (rows, groups, most rows in a group)"  # of a grouped one


@dataclass(frozen=True)
class Candidate:
    """One candidate's contribution bounds and the final query's estimated error per cell.

    Attributes
    ----------
    max_rows, max_groups, max_rows_per_group : int
        M, G, R (from the declared grid).
    noise_std : float
        Standard deviation of the final statistic's noise per cell, at the final budget.
    bias : float
        Estimated bias per cell from dropped rows (from the private histograms).
    error : float
        √(bias² + noise_std²), the estimated root-mean-square error per cell.
    """

    max_rows: int
    max_groups: int
    max_rows_per_group: int
    noise_std: float
    bias: float
    error: float

    def bounds(self) -> dict[str, int]:
        return {"max_rows": self.max_rows, "max_groups": self.max_groups,
                "max_rows_per_group": self.max_rows_per_group}


@dataclass(frozen=True)
class BoundsRecommendation:
    """What :func:`tune` chose, what it estimated and what it charged.

    Attributes
    ----------
    contribution : dict of str to int
        The chosen ``max_rows``, ``max_groups``, ``max_rows_per_group``.
    bounds : tuple of float or None
        The chosen numeric bounds of ``column`` (None when not tuned).
    column, statistic : str or None, str
        The final query's column and statistic ("count", "sum" or "mean").
    candidates : tuple of Candidate
        Every grid candidate with its estimated error, best first.
    histogram : ndarray of int, shape (|grid|,) or (|grid|³,)
        The released noisy histogram: units per grid value of their rows (ungrouped), or
        per cell (rows, distinct groups, most rows in one group) of grid³, flattened with
        rows slowest (grouped).
    grid : tuple of int
        The declared grid 1, 2, 4, …, cap.
    loss : PrivacyLoss
        The exact loss charged (the sum of the releases' losses), in the session's measure.
    remaining : PrivacyLoss
        The session's budget left after the tuning.
    releases : tuple of Release
        The records of the tuning's releases (the value histogram when ``column`` is tuned,
        then the contribution histogram).
    values : ndarray of int, shape (bins,), or None
        The released noisy value histogram: units whose one sampled value of ``column``
        (clamped to the outer range) falls in each bin (None when not tuned).
    edges : tuple of float, length bins + 1
        The declared value grid's edges (empty when not tuned); ``bounds`` are two of them.
    """

    contribution: dict[str, int]
    bounds: tuple[float, float] | None
    column: str | None
    statistic: str
    candidates: tuple[Candidate, ...]
    histogram: np.ndarray
    grid: tuple[int, ...]
    loss: PrivacyLoss
    remaining: PrivacyLoss
    releases: tuple[Release[Any], ...]
    values: np.ndarray | None = None
    edges: tuple[float, ...] = ()

    def rows(self) -> list[dict[str, object]]:
        """The candidate table as dicts (a Rich or pandas table takes them as they are)."""
        chosen = self.contribution
        return [{**c.bounds(), "noise_std": c.noise_std, "bias": c.bias, "error": c.error,
                 "chosen": c.bounds() == chosen} for c in self.candidates]

    def session(self, session: Session) -> Session:
        """``session`` with the chosen contribution bounds (:meth:`Session.with_bounds`: the
        same accountant and ledger)."""
        return session.with_bounds(**self.contribution)

    def apply(self, query: Query) -> Query:
        """``query`` on its session with the chosen contribution bounds, its aggregations of
        ``column`` clamped to the chosen ``bounds``."""
        view = self.session(_session(query))
        aggs = tuple(replace(a, bounds=self.bounds)
                     if self.bounds is not None and isinstance(a, aggregates.ColumnAggregation)
                     and a.column == self.column else a for a in query.aggs)
        return replace(query, session=view, aggs=aggs)

    def __str__(self) -> str:
        head = f"{'M':>6} {'G':>6} {'R':>6} {'noise std':>12} {'bias':>12} {'error':>12}"
        lines = [f"contribution bounds for a {self.statistic}"
                 + (f" of {self.column!r}" if self.column else ""), head]
        for r in self.rows():
            mark = "  <- chosen" if r["chosen"] else ""
            lines.append(f"{r['max_rows']:>6} {r['max_groups']:>6} "
                         f"{r['max_rows_per_group']:>6} {r['noise_std']:>12.4g} "
                         f"{r['bias']:>12.4g} {r['error']:>12.4g}{mark}")
        lines.append(f"chosen: {self.contribution}"
                     + (f"; bounds {self.bounds}" if self.bounds else ""))
        lines.append(f"charged: {self.loss}; remaining: {self.remaining}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        header = ["max_rows", "max_groups", "max_rows_per_group", "noise std", "bias",
                  "error", "chosen"]
        body = [list(r.values()) for r in self.rows()]
        return box("dpkit bound recommendation",
                   facts([("statistic", self.statistic), ("column", self.column),
                          ("chosen", self.contribution), ("bounds", self.bounds),
                          ("charged", self.loss), ("remaining", self.remaining)]),
                   table(header, body, "estimated error per cell, best first"))


def grid(cap: int) -> tuple[int, ...]:
    """The declared geometric grid 1, 2, 4, …, cap (cap appended when not a power of 2).

    Raises
    ------
    DomainError
        ``cap`` is not an integer in [1, MAX_CAP].
    """
    if isinstance(cap, bool) or not isinstance(cap, int | np.integer) or not (
            1 <= cap <= MAX_CAP):
        raise DomainError(f"cap must be an integer in [1, {MAX_CAP}], got {cap!r}: declare "
                          "the most rows a unit may have (a larger cap means a larger grid)")
    values = [1 << k for k in range(int(cap).bit_length()) if 1 << k <= cap]
    return tuple(values) if values[-1] == cap else (*values, int(cap))


def _session(query: Query) -> Session:
    """The query's session (a :class:`~dpkit.frame.Session`: the tuner reads its privacy
    unit and budget, which the query's ``SessionLike`` protocol does not name)."""
    return cast("Session", query.session)


# -- plan time --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Spec:
    """The validated request (everything checked before the debit)."""

    query: Query
    groups: tuple[str, ...]
    n_keys: int
    statistic: str
    column: str | None
    outer: tuple[Fraction, Fraction] | None
    grid: tuple[int, ...]
    histogram: str
    budget: PrivacyLoss  # the whole tuning
    final: PrivacyLoss  # what the final query is assumed to spend
    bins: int


def _tuning_budget(session: Session, share: Number | None, epsilon: Number | None,
                   rho: Number | None) -> PrivacyLoss:
    if sum(x is not None for x in (share, epsilon, rho)) > 1:
        raise DomainError("pass one of share=, epsilon= or rho=")
    if epsilon is not None or rho is not None:
        value = as_typed(cast(Number, epsilon if epsilon is not None else rho))
        if value <= 0:
            raise DomainError(f"the tuning budget must be positive, got {value}")
        if rho is not None:
            if session.measure is not ZCDP:
                raise DomainError("rho= needs a zCDP session; pass epsilon= or share=")
            return ZCDP(value)
        return PureDP(value)
    part = DEFAULT_SHARE if share is None else as_typed(share)
    if not 0 < part < 1:
        raise DomainError(f"share must be in (0, 1), got {share!r}: the fraction of the "
                          "session's budget the tuning spends (default 1/10)")
    budget = session.budget
    if isinstance(budget, ZCDP):
        return ZCDP(budget.rho * part)
    return PureDP(budget.epsilon * part)  # type: ignore[attr-defined]


def _fits(session: Session, loss: PrivacyLoss) -> PrivacyLoss:
    """The session's remaining budget after ``loss``; BudgetExceededError if it does not fit
    or leaves nothing."""
    spend = convert(loss, session.measure)
    if not spend <= session.remaining:
        raise BudgetExceededError(f"the tuning costs {spend}, more than the remaining "
                                  f"{session.remaining}: pass a smaller share= or epsilon=")
    left = session.remaining - spend
    if left == session.measure.zero():  # the error model divides by the final budget
        raise BudgetExceededError(f"the tuning costs all of the remaining {spend}, leaving "
                                  "nothing for the final query: pass a smaller share= or "
                                  "epsilon=")
    return left


def _check_bins(bins: int) -> int:
    if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or not (
            2 <= bins <= MAX_BINS):
        raise DomainError(f"bins must be an integer in [2, {MAX_BINS}], got {bins!r}: the "
                          "number of equal bins of the value histogram over the outer range")
    return int(bins)


def _check_levels(levels: Sequence[Number]) -> None:
    """``levels`` is deprecated (the numeric bounds are no longer two quantiles): a
    non-default value warns and is otherwise ignored."""
    try:
        default = tuple(levels) == DEFAULT_LEVELS
    except TypeError:
        default = False
    if not default:
        warnings.warn("levels= is deprecated and ignored: numeric bounds are chosen from a "
                      "private value histogram (bins=)", DeprecationWarning, stacklevel=3)


def _spec(query: Query, statistic: str, column: str | None, bounds: Any, cap: int | None,
          share: Number | None, epsilon: Number | None, rho: Number | None,
          bins: int | None) -> _Spec:
    session = _session(query)
    unit = session.privacy_unit
    if unit.column is None:
        raise DomainError("contribution bounds need a privacy unit column: "
                          "Session(..., privacy_unit=dp.PrivacyUnit.by(column, cap))")
    if statistic not in STATISTICS:
        raise DomainError(f"statistic must be one of {', '.join(STATISTICS)}, got "
                          f"{statistic!r}")
    schema = query.schema()
    groups = tuple(query.group_columns)
    engine.check_columns(schema, list(groups))
    n_keys = 1 if query.keys is None else max(len(query.keys), 1)
    g = grid(unit.max_rows if cap is None else cap)
    outer = None
    if statistic != "count":
        if column is None:
            raise DomainError(f"a {statistic} needs column=")
        engine.check_columns(schema, [column])
        if not schema[column].is_numeric():
            raise ColumnError(f"column {column!r} is not numeric: a {statistic} needs numbers")
        outer = _outer(query, column, bounds)
    n_bins = _check_bins(DEFAULT_BINS if bins is None else bins)
    budget = _tuning_budget(session, share, epsilon, rho)
    final = _fits(session, budget)
    return _Spec(query, groups, n_keys, statistic, column, outer, g, JOINT if groups else ROWS,
                 budget, final, n_bins)


def _outer(query: Query, column: str, bounds: Any) -> tuple[Fraction, Fraction]:
    """The declared outer range: ``bounds=``, else the column's ``dp.Numeric`` bounds."""
    if bounds is None:
        declared = query.session.declared(query.table)
        bounds = None if declared is None else declared.bounds(column)
    if bounds is None:
        raise BoundsError(f"declare the outer range of {column!r}: bounds=(lower, upper) or "
                          f"dp.Numeric(lower, upper) in the session's schema")
    lower, upper = aggregates._bounds(tuple(bounds), "tune", column)
    if not lower < upper:
        raise BoundsError(f"the outer range of {column!r} must have lower < upper, got "
                          f"{bounds!r}")
    return lower, upper


# -- the data side --------------------------------------------------------------------------
def _per_unit(lf: Any, unit: str, groups: Sequence[str]) -> list[np.ndarray]:
    """Per unit: its rows, and with ``groups`` its distinct groups and most rows in one."""
    if not groups:
        counts = lf.group_by(unit).agg(nw.len().alias("n")).collect()
        return [engine.to_polars(counts)["n"].to_numpy()]
    pairs = lf.group_by(unit, *groups).agg(nw.len().alias("r"))
    per = pairs.group_by(unit).agg(nw.col("r").sum().alias("n"), nw.len().alias("g"),
                                   nw.col("r").max().alias("rmax")).collect()
    frame = engine.to_polars(per)
    return [frame["n"].to_numpy(), frame["g"].to_numpy(), frame["rmax"].to_numpy()]


def _bucket(values: np.ndarray, g: Sequence[int]) -> np.ndarray:
    """A unit with v goes to the smallest grid value ≥ min(v, cap) (its index)."""
    return np.searchsorted(np.asarray(g), np.minimum(np.asarray(values, dtype=np.int64),
                                                     g[-1]), side="left")


def bucket_counts(stats: Sequence[np.ndarray], g: Sequence[int]) -> np.ndarray:
    """Units per cell of the grid (one statistic) or of grid³ (rows, groups, most rows in a
    group; flattened, rows slowest): every unit is in exactly one cell."""
    flat = np.zeros(len(stats[0]), dtype=np.int64)
    for values in stats:
        flat = flat * len(g) + _bucket(values, g)
    return np.bincount(flat, minlength=len(g) ** len(stats)).astype(np.int64)


def _histogram_budget(spec: _Spec) -> PrivacyLoss:
    weight = HISTOGRAM_WEIGHT if spec.column is not None else Fraction(1)
    b = spec.budget
    return ZCDP(b.rho * weight) if isinstance(b, ZCDP) else PureDP(
        b.epsilon * weight)  # type: ignore[attr-defined]


def _release_histogram(spec: _Spec) -> tuple[np.ndarray, Release[Any]]:
    """One release: the histogram has L1 = L2 sensitivity 1 under add/remove of a unit (a
    unit is in exactly one cell), drawn at ``_histogram_budget``."""
    budget = _histogram_budget(spec)
    plan = [frontend.noise_row(1, budget, spec.histogram)]
    query = spec.query
    unit = cast(str, _session(query).privacy_unit.column)  # checked by _spec
    lf = query.lazy()

    def compute() -> np.ndarray:
        counts = bucket_counts(_per_unit(lf, unit, spec.groups), spec.grid)
        return frontend.noisy(counts, 1, budget, statistic=spec.histogram).value

    description = (f"tune contribution bounds: histogram of {spec.histogram} on the grid "
                   f"{list(spec.grid)}")
    return frontend.charge_record(_session(query), budget, description, compute, plan,
                                  unit_bounded=True)


def value_edges(outer: tuple[Fraction, Fraction], bins: int) -> tuple[Fraction, ...]:
    """The declared value grid: ``bins`` equal bins over the outer range, its bins + 1 edges
    lower + k·(upper − lower)/bins, exact (public: the outer range and ``bins`` only)."""
    lower, upper = outer
    step = (upper - lower) / bins
    return tuple(lower + k * step for k in range(bins + 1))


def _value_counts(lf: Any, unit: str, column: str, outer: tuple[float, float],
                  bins: int) -> np.ndarray:
    """Units per value bin: one uniformly random row per unit (the engine's contribution
    bounding at M = 1), its value clamped to the outer range; a null or NaN value is in no
    bin. Every unit is in at most one bin."""
    one = engine.bound_contributions(lf, PrivacyUnit.by(unit, 1), [column])
    frame = engine.to_polars(one.select(nw.col(column).cast(nw.Float64)).collect())
    x = frame[column].to_numpy().astype(np.float64)
    x = x[np.isfinite(x)]
    lo, hi = outer
    idx = np.floor((np.clip(x, lo, hi) - lo) / (hi - lo) * bins).astype(np.int64)
    return np.bincount(np.clip(idx, 0, bins - 1), minlength=bins).astype(np.int64)


def _value_budget(spec: _Spec) -> PrivacyLoss:
    b, rest = spec.budget, 1 - HISTOGRAM_WEIGHT
    return ZCDP(b.rho * rest) if isinstance(b, ZCDP) else PureDP(
        b.epsilon * rest)  # type: ignore[attr-defined]


def _release_values(spec: _Spec) -> tuple[np.ndarray, Release[Any]]:
    """One release: the value histogram has L1 = L2 sensitivity 1 under add/remove of a
    unit (one sampled row per unit, so a unit is in at most one bin)."""
    assert spec.column is not None and spec.outer is not None  # checked by _spec
    budget, column, bins = _value_budget(spec), spec.column, spec.bins
    name = f"units by a value of {column!r}"
    plan = [frontend.noise_row(1, budget, name)]
    query = spec.query
    unit = cast(str, _session(query).privacy_unit.column)
    lf = query.lazy()
    outer = (float(spec.outer[0]), float(spec.outer[1]))

    def compute() -> np.ndarray:
        counts = _value_counts(lf, unit, column, outer, bins)
        return frontend.noisy(counts, 1, budget, statistic=name).value

    description = (f"tune bounds: histogram of one value of {column!r} per unit on {bins} "
                   f"equal bins of [{outer[0]:g}, {outer[1]:g}]")
    return frontend.charge_record(_session(query), budget, description, compute, plan,
                                  unit_bounded=True)


def unimodal(counts: np.ndarray) -> np.ndarray:
    """The least-squares unimodal fit of ``counts`` (non-decreasing up to a mode, then
    non-increasing; the best mode by squared error, the first on ties), clipped at 0.

    Parameters
    ----------
    counts : ndarray, shape (bins,)
        Noisy counts.

    Returns
    -------
    ndarray of float, shape (bins,)
        The fit. Post-processing: a noisy count scattered around 0 in an empty tail is
        pooled with its neighbours towards the mode instead of read as mass. O(bins²),
        whatever the counts (the loop's length is set by ``bins``; pooling varies with
        the released counts only).
    """
    from scipy.optimize import isotonic_regression  # pool adjacent violators; scipy on use

    y = np.asarray(counts, dtype=np.float64)
    best, fit = math.inf, np.zeros_like(y)
    for m in range(len(y) + 1):
        trial = np.concatenate([isotonic_regression(y[:m]).x,
                                isotonic_regression(y[m:][::-1]).x[::-1]])
        sse = float(np.sum((trial - y) ** 2))
        if sse < best:
            best, fit = sse, trial
    return np.maximum(fit, 0.0)


def _tails(fit: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per edge k: Σ fit·distance over the bins below it (to their midpoints) and Σ
    distance² (the noise's weight), and the same for the bins above it."""
    mid = (edges[:-1] + edges[1:]) / 2
    below = np.maximum(edges[:, None] - mid[None, :], 0.0)
    above = np.maximum(mid[None, :] - edges[:, None], 0.0)
    return below @ fit, (below ** 2).sum(axis=1), above @ fit, (above ** 2).sum(axis=1)


def choose_interval(noisy: np.ndarray, std: float, edges: Sequence[float], statistic: str,
                    contribution: Contribution, rows: float, final: PrivacyLoss
                    ) -> tuple[int, int]:
    """The grid edges (i, j), i < j, of least estimated error √(bias² + noise²) of the final
    statistic clamped to [edges[i], edges[j]].

    Parameters
    ----------
    noisy : ndarray, shape (bins,)
        The released value histogram (units per bin; a unit taken at its bin's midpoint).
    std : float
        The standard deviation of one noisy count (≥ 0).
    edges : sequence of float, length bins + 1
        The declared grid's edges, increasing.
    statistic : {"sum", "mean"}
        The final statistic (per cell).
    contribution : Contribution
        The final query's contribution bounds (M, or G and R).
    rows : float
        Rows per cell the final query keeps (estimated).
    final : PrivacyLoss
        The final query's budget.

    Returns
    -------
    (int, int)
        Indices into ``edges``; (0, bins) when the histogram's noisy total is ≤ 0.

    Notes
    -----
    Post-processing (Amin, Kulesza, Muñoz Medina & Vassilvitskii, ICML 2019, §3–4, with
    values in place of contributions). The fit f is :func:`unimodal` of ``noisy``. Clamping
    to [a, b] moves the rows' mean by at most T(a, b)/N, T = Σ f·(distance of a bin's
    midpoint to [a, b]), N the noisy total; T is taken at its fit plus ``TAIL_Z`` standard
    deviations of its raw estimate, std·√(Σ distance²), since the fit of an empty tail is
    about 0 whatever its noise: the search then steps inward only as far as the tails'
    noise allows. A sum's bias is rows·T/N. The noise: a sum's √2·max(|a|, |b|)·Δ₁/ε
    (Laplace; Δ₂/√(2ρ) under zCDP), a mean's that of its centred sum ((b − a)/2 per row)
    and its count at half the budget each, over the rows. Ties go to the wider interval.
    """
    e = np.asarray(edges, dtype=np.float64)
    total = float(np.sum(noisy))
    if total <= 0:
        return 0, len(e) - 1
    fit = unimodal(noisy)
    low, low_w, high, high_w = _tails(fit, e)
    a, b = np.triu_indices(len(e), k=1)
    lo, hi = e[a], e[b]
    spread = float(TAIL_Z) * std * np.sqrt(low_w[a] + high_w[b])
    shift = (low[a] + high[b] + spread) / total
    if statistic == "mean":
        centre = (lo + hi) / 2
        mean = np.clip(float(fit @ ((e[:-1] + e[1:]) / 2)) / max(float(fit.sum()), 1e-300),
                       lo, hi)
        noise = (_noise_std(contribution, final, Fraction(1, 2))
                 * np.hypot((hi - lo) / 2, mean - centre) / max(rows, 1.0))
        bias = shift
    else:
        noise = np.maximum(np.abs(lo), np.abs(hi)) * _noise_std(contribution, final,
                                                                Fraction(1))
        bias = shift * rows
    order = np.lexsort((a, -(b - a), np.hypot(bias, noise)))
    return int(a[order[0]]), int(b[order[0]])


def _std(row: NoiseRow) -> float:
    """A noisy count's standard deviation, about: Laplace b·√2, Gaussian σ."""
    scale = float(row.scale) if row.scale is not None else 0.0
    return scale if "gaussian" in row.name.lower() else scale * math.sqrt(2)


# -- the error model ------------------------------------------------------------------------
def _cells(hist: np.ndarray, g: Sequence[int], grouped: bool) -> tuple[np.ndarray, ...]:
    """(counts, n, groups, most rows in a group) of the histogram's non-zero cells, each
    cell at its upper grid values (n ≤ groups · most rows)."""
    values = np.asarray(g, dtype=np.float64)
    if not grouped:
        keep = hist > 0
        return hist[keep], values[keep], values[keep] * 0 + 1, values[keep]
    size = len(g)
    idx = np.flatnonzero(hist > 0)
    n, rest = values[idx // (size * size)], idx % (size * size)
    groups, most = values[rest // size], values[rest % size]
    return hist[idx], np.minimum(n, groups * most), groups, most


def _dropped(cells: tuple[np.ndarray, ...], c: Contribution) -> float:
    """Rows dropped by bounds ``c``, at least n − min(n, M, min(G, g)·min(R, r)) per unit
    (a unit keeps at most that many), summed over the cells."""
    counts, n, g, r = cells
    kept = np.minimum(np.minimum(n, c.max_rows),
                      np.minimum(g, c.max_groups) * np.minimum(r, c.max_rows_per_group))
    return float(np.sum(counts * (n - kept)))


def _noise_std(sensitivity: Contribution, final: PrivacyLoss, share: Fraction) -> float:
    """Noise std of a count at ``share`` of ``final``: √2·Δ₁/ε (Laplace) or Δ₂/√(2ρ)."""
    if isinstance(final, ZCDP):
        return float(sensitivity.l2()) / math.sqrt(2 * float(final.rho * share))
    return math.sqrt(2) * float(sensitivity.l1()) / float(final.epsilon * share)  # type: ignore[attr-defined]


def feasible(g: Sequence[int], grouped: bool) -> np.ndarray:
    """The cells a unit can be in (public): with rows n, groups k and most rows in a group
    r in their cells' ranges (lo, hi], k ≤ n, r ≤ n and n ≤ k·r must be satisfiable."""
    size = len(g)
    if not grouped:
        return np.ones(size, dtype=bool)
    hi = np.asarray(g, dtype=np.int64)
    lo = np.concatenate([[1], hi[:-1] + 1])
    n, k, r = np.meshgrid(np.arange(size), np.arange(size), np.arange(size), indexing="ij")
    ok = (lo[k] <= hi[n]) & (lo[r] <= hi[n]) & (lo[n] <= hi[k] * hi[r])
    return ok.reshape(-1)


def denoised(hist: np.ndarray, row: NoiseRow, possible: np.ndarray) -> np.ndarray:
    """Noisy counts of the ``possible`` cells clipped at 0, and those below the noise's
    (1 − BETA/cells) quantile set to 0 (post-processing): an empty cell far up the grid
    would otherwise read as phantom units whose dropped rows outweigh any noise saving.
    Discrete Laplace of scale s: P(X ≥ s·ln(1/b)) ≤ b; discrete Gaussian of σ:
    P(X ≥ σ·√(2 ln(1/b))) ≤ b."""
    tail = math.log(max(int(possible.sum()), 1) / BETA)
    scale = float(row.scale) if row.scale is not None else 0.0
    cut = scale * (math.sqrt(2 * tail) if "gaussian" in row.name.lower() else tail)
    counts = np.asarray(hist, dtype=np.float64)
    return np.where(possible & (counts > cut), counts, 0.0)


def _candidates(spec: _Spec, hist: np.ndarray,
                bounds: tuple[float, float] | None) -> list[Candidate]:
    g = spec.grid
    cells = _cells(hist, g, bool(spec.groups))
    magnitude = 1.0 if bounds is None else max(abs(bounds[0]), abs(bounds[1]), 1e-12)
    width = 0.0 if bounds is None else bounds[1] - bounds[0]
    if spec.groups:  # G beyond the declared keys changes nothing: stop at the first ≥ K
        reach = next((v for v in g if v >= spec.n_keys), g[-1])
        pairs = [(gg, r) for gg in g if gg <= reach for r in g]
    else:
        pairs = [(m, m) for m in g]
    total = float(np.sum(cells[0] * cells[1]))
    out = []
    for gg, r in pairs:
        c = Contribution.of(min(g[-1], gg * r), gg, r) if spec.groups else Contribution.of(r)
        dropped = _dropped(cells, c)
        out.append(_candidate(spec, c, dropped, total, magnitude, width))
    return sorted(out, key=lambda c: (c.error, -c.max_rows, -c.max_groups,
                                      -c.max_rows_per_group))


def _kept_rows(spec: _Spec, hist: np.ndarray, c: Contribution) -> float:
    """Rows per cell the final query keeps under ``c`` (estimated from the histogram)."""
    cells = _cells(hist, spec.grid, bool(spec.groups))
    total = float(np.sum(cells[0] * cells[1]))
    return (total - _dropped(cells, c)) / spec.n_keys


def _candidate(spec: _Spec, c: Contribution, dropped: float, total: float,
               magnitude: float, width: float) -> Candidate:
    k = spec.n_keys
    if spec.statistic == "mean":
        std_sum = magnitude * _noise_std(c, spec.final, Fraction(1, 2))
        std_n = _noise_std(c, spec.final, Fraction(1, 2))
        kept = max((total - dropped) / k, 1.0)
        noise = math.sqrt(std_sum ** 2 + (magnitude / 2 * std_n) ** 2) / kept
        # the kept rows' mean moves by (D/N)·(mean kept − mean dropped): σ ≈ width/4
        bias = dropped / max(total, 1.0) * width / 4
    elif spec.statistic == "sum":
        noise = magnitude * _noise_std(c, spec.final, Fraction(1))
        bias = magnitude / 2 * dropped / k  # a dropped row's value: half the magnitude
    else:
        noise = _noise_std(c, spec.final, Fraction(1))
        bias = dropped / k
    return Candidate(c.max_rows, c.max_groups, c.max_rows_per_group, noise, bias,
                     math.hypot(noise, bias))


# -- the entry points -----------------------------------------------------------------------
def tune(query: Query, *, share: Number | None = None, epsilon: Number | None = None,
         rho: Number | None = None, cap: int | None = None, bins: int | None = None,
         levels: Sequence[Number] = DEFAULT_LEVELS) -> BoundsRecommendation:
    """Choose contribution bounds (and a column's bounds) for ``query``, privately.

    The final query is read off ``query``: its group-by columns and keys, and its first
    aggregation (a count, sum or mean; a sum or mean's declared bounds are the outer range
    the bounds are chosen in). See :func:`recommend_bounds` for the rest.

    Parameters
    ----------
    query : Query
        A built query of a session with ``PrivacyUnit.by(column, cap)``.
    share, epsilon, rho, cap, bins, levels
        As :func:`recommend_bounds`.

    Returns
    -------
    BoundsRecommendation

    Raises
    ------
    DomainError
        ``query`` has no count, sum or mean; or as :func:`recommend_bounds`.
    """
    first = next((a for a in query.aggs if isinstance(
        a, aggregates.Count | aggregates.Sum | aggregates.Mean)), None)
    if first is None:
        raise DomainError("dp.tune needs a query with a count, sum or mean aggregation")
    statistic = {aggregates.Count: "count", aggregates.Sum: "sum",
                 aggregates.Mean: "mean"}[type(first)]
    column = getattr(first, "column", None)
    declared = dict(query.declared)
    outer = getattr(first, "bounds", None) or (declared.get(column) if column else None)
    base = replace(query, aggs=())
    return recommend_bounds(base, statistic=statistic, column=column, bounds=outer,
                            share=share, epsilon=epsilon, rho=rho, cap=cap, bins=bins,
                            levels=levels)


def recommend_bounds(query: Query, *, statistic: str = "count", column: str | None = None,
                     bounds: tuple[Number, Number] | None = None, share: Number | None = None,
                     epsilon: Number | None = None, rho: Number | None = None,
                     cap: int | None = None, bins: int | None = None,
                     levels: Sequence[Number] = DEFAULT_LEVELS) -> BoundsRecommendation:
    """Spend a stated share of the budget to choose contribution bounds and numeric bounds.

    Parameters
    ----------
    query : Query
        The rows and grouping of the final query (its steps and ``group_by``; its
        aggregations are ignored). Its session's privacy unit is ``by(column, M)``.
    statistic : {"count", "sum", "mean"}
        The final query's statistic (per group).
    column : str, optional
        The numeric column of a sum or mean; its bounds are tuned.
    bounds : (lower, upper), optional
        The declared outer range of ``column`` (default: its ``dp.Numeric`` bounds).
    share : number in (0, 1), optional
        Fraction of the session's budget (ε, or ρ in a zCDP session) to spend; default 1/10.
    epsilon, rho : number, optional
        An explicit tuning budget instead of ``share`` (one of the three).
    cap : int, optional
        The grid's cap (declared; default the privacy unit's ``max_rows``), ≤ ``MAX_CAP``.
    bins : int, optional
        Equal bins of the value histogram over the outer range (declared; default
        ``DEFAULT_BINS`` = 16), in [2, ``MAX_BINS``]; the chosen bounds are two of its edges.
    levels : (lower, upper)
        Deprecated and ignored (the levels of the former quantile bounds); a non-default
        value raises a DeprecationWarning.

    Returns
    -------
    BoundsRecommendation
        The chosen bounds, every candidate's estimated error (noise std and bias per cell),
        the released histogram, the exact loss charged and the remaining budget.

    Raises
    ------
    DomainError
        Row-level privacy unit, unknown statistic, share outside (0, 1), a non-positive
        budget, cap outside [1, ``MAX_CAP``], bins outside [2, ``MAX_BINS``]. Before any
        debit.
    ColumnError
        An unknown group or value column, or a non-numeric ``column``. Before any debit.
    BoundsError
        A sum or mean without a declared outer range, or one with lower ≥ upper. Before
        any debit.
    BudgetExceededError
        The tuning does not fit the remaining budget, or leaves none of it for the final
        query. Before any debit.

    Notes
    -----
    Privacy (add/remove one unit). The histogram puts every unit in exactly one cell: the
    grid value of its rows (ungrouped), or the cell (rows, distinct groups, most rows in one
    group) of grid³ (grouped), each capped at the cap; so one unit changes one count by
    one: Δ₁ = Δ₂ = 1, and the discrete Laplace of scale 1/ε_h (or the discrete Gaussian at
    ρ_h) makes it ε_h-DP (ρ_h-zCDP) (Dwork & Roth Thm 3.6; Canonne, Kamath & Steinke 2020
    Thm 4). With ``column``, ε_h = ε_t/2 and the value histogram gets the other ε_t/2: one
    uniformly random row per unit (the engine's contribution bounding at M = 1, the one
    CSPRNG), its value clamped to the outer range [L, U] and counted in one of ``bins``
    equal bins (a null in none), so again Δ₁ = Δ₂ = 1 and the same noise at ε_t/2 (ρ_t/2)
    makes it ε_t/2-DP; the bins depend on the declared L, U and ``bins`` only. The
    interval [a, b] is two of the bins' edges chosen by :func:`choose_interval`
    (post-processing of the released histograms).
    By basic composition the tuning is ε_t-DP (ρ_t-zCDP), ε_t = share · ε. The choice is
    post-processing. Estimated error per cell of a candidate (M, G, R), after Amin et al.
    2019 §4: D = the rows it drops, Σ_cells n_c·(v − min(v, M, min(G, g)·min(R, r))) over
    the noisy counts n_c of the cells at their upper grid values (v rows, g groups, r most
    rows in a group, v ≤ g·r; ungrouped g = 1, r = v; each count below its noise's
    (1 − 0.05/cells) quantile read as 0); K the declared keys (1 without);
    a count's bias D/K and noise √2·Δ₁/ε_f (Laplace) or Δ₂/√(2ρ_f) at the remaining budget;
    a sum's both times B = max(|lower|, |upper|), a dropped row taken as B/2; a mean's noise
    that of its sum and count (half the budget each) over the kept rows, its bias
    (D/N)·(upper − lower)/4 (a dropped share D/N of rows σ ≈ width/4 away). Heuristics:
    the bias per dropped row is not released, so it is a stated guess.
    """
    _check_levels(levels)
    spec = _spec(query, statistic, column, bounds, cap, share, epsilon, rho, bins)
    releases: list[Release[Any]] = []
    values = None
    if spec.column is not None:  # every check ran in _spec: nothing fails between debits
        values, second = _release_values(spec)
        releases.append(second)
    hist, first = _release_histogram(spec)
    releases.append(first)
    session = _session(query)
    loss = sum((convert(r.loss, session.measure) for r in releases if r.loss is not None),
               session.measure.zero())
    clean = denoised(hist, first.noise[0], feasible(spec.grid, bool(spec.groups)))
    outer = None if spec.outer is None else (float(spec.outer[0]), float(spec.outer[1]))
    candidates = _candidates(spec, clean, outer)
    chosen_bounds: tuple[float, float] | None = None
    edges: tuple[float, ...] = ()
    if values is not None and spec.outer is not None:
        edges = tuple(float(e) for e in value_edges(spec.outer, spec.bins))
        best = candidates[0]
        c = (Contribution.of(best.max_rows, best.max_groups, best.max_rows_per_group)
             if spec.groups else Contribution.of(best.max_rows))
        i, j = choose_interval(values, _std(releases[0].noise[0]), edges, spec.statistic, c,
                               _kept_rows(spec, clean, c), spec.final)
        chosen_bounds = (edges[i], edges[j])
        candidates = _candidates(spec, clean, chosen_bounds)
    return BoundsRecommendation(candidates[0].bounds(), chosen_bounds, spec.column,
                                spec.statistic, tuple(candidates), hist, spec.grid, loss,
                                session.remaining, tuple(releases), values, edges)
