"""Community mobility reports in the style of Google's COVID-19 reports (Aktay et al.,
"Google COVID-19 Community Mobility Reports: Anonymization Process Description (version
1.1)", arXiv:2004.04145, 2020), run day by day as a continual release.

What is released (the paper's process, as built here)
-----------------------------------------------------
Each day t = 1 … T and each public category c (a place type there; casual and registered
rentals on the Bike Sharing data): the number of visits, each user's visits first bounded to
at most ``per_day`` per day and category (the paper bounds a user's contribution to each
metric), with discrete Laplace noise, its error bar at confidence 1 − β from the noise's exact
law, suppressed when the noisy count is below a declared threshold (the paper discards
metrics that fail its reliability bar), and the *percent change from baseline*: 100·(count_t
− B)/B with B the median of the noisy counts on the same weekday over a declared baseline
window of days (post-processing of released values: no further privacy cost).

Privacy
-------
One :class:`~dpkit.stream.ContinualRelease` per report (``keys`` the categories, ``window=1``
so each day's count is released), charged once through the front-end kit
(:func:`dpkit.mechanisms.frontend.charge_record`) when the report is created. A user
contributes at most ``per_day`` visits per (day, category), enforced by :func:`bound_visits`
on every frame, and at most w = ``contributions`` visits over the whole stream, enforced by
the stream from the ``unit`` column (default w = per_day·C·T, which the per-day bound already
implies). So the vector of all daily counts changes by at most w in L1 between neighbouring
streams (one user added or removed), and with the default mechanism "increments" (each day's
count with its own noise) the noise is discrete Laplace of scale b = w/ε, where ε is the
whole stream's budget: the report is ε-DP at the user level (Dwork, Naor, Pitassi &
Rothblum 2010; the discrete Laplace of Canonne, Kamath & Steinke 2020). Written per day, as
the paper states its guarantee: ε_day = ε/T at the per-day sensitivity per_day·C. The other
stream mechanisms ("tree", "smooth", …) release the same daily counts as differences of
their noisy running totals, at the same ε and w.

Frames without a unit column (or a mapping category → count) are fed as declared: their
rows' units are not known, so w holds only if the data obey it (this is the case of the
Bike Sharing data, below).

The Bike Sharing data (UCI; ``day.csv``)
----------------------------------------
It has daily totals of casual and registered rentals and no rider identifiers (the hourly
file, with the same totals split by hour, is not in the shared copy). The privacy unit
therefore cannot be enforced on it: :func:`bike_sharing_counts` feeds the daily totals and
the report *declares* w. What the guarantee means there: any set of rentals with at most
``per_day`` rentals per day in each category and at most w in all (a rider with those
habits) is protected with ε; a rider above the bound is protected with the group-privacy
loss k·ε/w for k rentals (Dwork & Roth 2014, Thm 2.2). With user identifiers, a frame with
the unit column enforces both bounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl

from dpkit.core import numbers
from dpkit.core.accuracy import laplace_tail
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.core.numbers import Number
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, unit_column
from dpkit.mechanisms.registry import AuditCase, Sampler, register
from dpkit.stream.base import draw
from dpkit.stream.frames import ContinualRelease
from dpkit.stream.stream import MECHANISMS

__all__ = ["MobilityReport", "MobilityDay", "bound_visits", "bike_sharing_counts",
           "percent_change", "audit_cases", "BIKE_CATEGORIES"]

BIKE_CATEGORIES = ("casual", "registered")
MAX_CATEGORIES = 1024


@dataclass(frozen=True)
class MobilityDay:
    """One day's release.

    Attributes
    ----------
    t : int
        The day (1-based step).
    counts : dict
        Category → the noisy count (clipped at 0; None when suppressed).
    raw : dict
        Category → the noisy count before clipping (for error analysis; never suppressed:
        suppression hides nothing the release did not already show).
    half_width : float
        The error bar's half-width h (the same for every category): P(|noise| > h) ≤ β.
    confidence : float
        1 − β.
    """

    t: int
    counts: dict[str, float | None]
    raw: dict[str, float]
    half_width: float
    confidence: float


def bound_visits(frame: pl.DataFrame, unit: str, by: str, per_day: int) -> pl.DataFrame:
    """A day's rows with each (unit, category)'s visits cut to its first ``per_day`` rows
    (frame order). Total: nothing depends on the values beyond grouping (nulls are one
    group, as the stream's unit rule).

    Parameters
    ----------
    frame : polars.DataFrame, shape (rows, columns)
        One day's visits, one row each, with the ``unit`` and ``by`` columns.
    unit, by : str
        The privacy-unit and category columns.
    per_day : int
        The bound, ≥ 1.

    Returns
    -------
    polars.DataFrame
        The kept rows, in their order.
    """
    idx = pl.int_range(pl.len()).over([unit, by])
    return frame.filter(idx < per_day)


class MobilityReport:
    """Per-day, per-category visit counts with error bars, released day by day under one
    budget (module docstring).

    Parameters
    ----------
    horizon : int
        T, the number of days (≥ 1).
    epsilon : number
        ε (nats) for the whole report, charged once here (per day: ε/T).
    categories : sequence of str
        The public categories (1 … 1024, distinct).
    accountant : Session, PrivacyFilter or Accountant, optional
        Charged once with ``PureDP(epsilon)`` (None: a fresh filter of that budget, an
        unaccounted run). A Session whose privacy unit names a column
        supplies ``unit`` when it is not given.
    per_day : int
        A user's visits per day and category kept (the paper's contribution bound), ≥ 1.
    contributions : int, optional
        w, a user's visits over the whole report; default per_day·C·T.
    unit, by, time : str
        The frame's privacy-unit, category and day columns (``unit`` None: declared).
    origin : datetime.date, optional
        Day 1's date when ``time`` holds dates (then weekdays come from it); default: days
        are integers 1 … T and weekday(t) = (t − 1) mod 7.
    mechanism : str
        "increments" (default: the paper's independent per-day noise) or another stream
        mechanism (:data:`dpkit.stream.MECHANISMS`).
    beta : float
        The error bars' failure probability.
    min_count : number, optional
        Suppress (publish None for) a count whose noisy value is below it; default the
        error bar's half-width (a count not told apart from 0 at 1 − β).

    Raises
    ------
    DomainError
        At plan time, before the debit: a bad horizon, budget, bound, category list,
        mechanism, column name or beta.
    BudgetExceededError
        If the accountant cannot pay (nothing debited).

    Notes
    -----
    Privacy: ε-DP at the user level (add/remove one user, with per_day per day and category
    and w in all). A user moves the vector of all T·C daily counts by at most w in L1, so
    "increments" with discrete Laplace of scale w/ε on each count is ε-DP (the Laplace
    mechanism, Dwork & Roth 2014, Thm 3.6; on the integers, the discrete Laplace of Canonne,
    Kamath & Steinke 2020); the other
    mechanisms are ε-DP by :mod:`dpkit.stream.frames`. Error bars ("increments"): the
    smallest integer h with P(|Z| > h) ≤ β for Z the discrete Laplace of scale w/ε
    (:func:`dpkit.core.accuracy.laplace_tail`), so [raw − h, raw + h] covers the bounded
    count with probability ≥ 1 − β; other mechanisms use the stream's window half-width.
    Source: Aktay et al. 2020 (arXiv:2004.04145 v1.1), the anonymization process: bounded
    contributions per user, day and metric, Laplace noise, suppression of unreliable
    metrics, percent change from a weekday-median baseline. The bound and the per-day ε are
    parameters here, not the paper's published values.
    """

    def __init__(self, horizon: int, *, epsilon: Number, categories: Sequence[str],
                 accountant: AccountantLike = None, per_day: int = 1,
                 contributions: int | None = None, unit: str | None = None,
                 by: str = "category", time: str = "day", origin: date | None = None,
                 mechanism: str = "increments", beta: float = 0.05,
                 min_count: Number | None = None) -> None:
        self.horizon = numbers.integer(horizon, "horizon", minimum=1, maximum=100_000)
        self.categories = _categories(categories)
        self.per_day = numbers.integer(per_day, "per_day", minimum=1, maximum=1 << 20)
        most = self.per_day * len(self.categories) * self.horizon
        self.contributions = most if contributions is None else numbers.integer(
            contributions, "contributions", minimum=1, maximum=most)
        if mechanism not in MECHANISMS:
            raise DomainError(f"mechanism must be one of {sorted(MECHANISMS)}")
        if origin is not None and not isinstance(origin, date):
            raise DomainError("origin must be a datetime.date")
        unit = unit if unit is not None else unit_column(accountant)
        for name, col in (("unit", unit), ("by", by), ("time", time)):
            if col is not None and not isinstance(col, str):
                raise DomainError(f"{name} must be a column name")
        self.unit, self.by, self.time, self.origin = unit, by, time, origin
        self.min_count = None if min_count is None else float(numbers.to_fraction(min_count))
        eps = numbers.positive(epsilon, "epsilon", up=False)
        if accountant is None:  # an unaccounted run: a filter holding exactly the budget
            accountant = PrivacyFilter(PureDP(eps))
        self.stream = ContinualRelease(
            self.horizon, accountant=accountant, mechanism=mechanism,
            epsilon=eps, keys=self.categories,
            by=by, unit=unit, contributions=self.contributions, time=time, origin=origin,
            window=1, beta=beta, label=f"mobility report, {self.per_day} per day and category")
        self.record = self.stream.record
        self.days: list[MobilityDay] = []

    @property
    def scale(self) -> Fraction:
        """The noise scale of the stream's counters (w/ε for "increments")."""
        scale = frontend.row_of(self.stream.counters[0].noise).scale
        assert scale is not None
        return Fraction(scale)

    def half_width(self, window: float) -> float:
        """The error bar's half-width at the stream's β (class Notes): for "increments" the
        exact law's, else ``window``, the stream's half-width of the day's count. Data-free."""
        if self.stream.config["mechanism"] == "increments":
            return laplace_tail(float(self.scale), self.stream.config["beta"], discrete=True)
        return float(window)

    def feed(self, day: pl.DataFrame | Mapping[str, int]) -> MobilityDay:
        """Release the next day from its visits (one row each) or a mapping category →
        count (declared bounds).

        Raises
        ------
        DomainError
            A frame without the declared columns (before anything advances).
        HorizonExceededError
            After T days.
        """
        if isinstance(day, pl.LazyFrame):
            day = day.collect()
        if isinstance(day, pl.DataFrame) and self.unit is not None:
            missing = [c for c in (self.unit, self.by) if c not in day.columns]
            if missing:
                raise DomainError(f"the day's frame lacks the columns {missing}")
            try:  # on zero rows first: a schema the grouping refuses fails here, no row read
                bound_visits(day.clear(), self.unit, self.by, self.per_day)
            except Exception as exc:  # noqa: BLE001 - a type error of the schema
                raise DomainError(f"the day's unit or category column cannot be grouped: "
                                  f"{type(exc).__name__}") from None
            day = bound_visits(day, self.unit, self.by, self.per_day)
        step = self.stream.feed(day)
        h = self.half_width(step.windows[self.categories[0]].half_width)
        floor = h if self.min_count is None else self.min_count
        raw = {c: float(step.windows[c].raw) for c in self.categories}
        counts: dict[str, float | None] = {
            c: (max(v, 0.0) if v >= floor else None) for c, v in raw.items()}
        out = MobilityDay(step.t, counts, raw, h, 1 - self.stream.config["beta"])
        self.days.append(out)
        return out

    def weekday(self, t: int) -> int:
        """Day t's weekday, 0 = Monday (from ``origin``; else (t − 1) mod 7)."""
        if self.origin is None:
            return (t - 1) % 7
        return (self.origin + timedelta(days=t - 1)).weekday()

    def table(self) -> pl.DataFrame:
        """Every released day and category: ``t``, ``category``, ``count`` (None when
        suppressed), ``low``, ``high`` (the error bar, cut at 0), ``weekday``."""
        rows = [(d.t, c, d.counts[c], max(d.raw[c] - d.half_width, 0.0),
                 max(d.raw[c] + d.half_width, 0.0), self.weekday(d.t))
                for d in self.days for c in self.categories]
        return pl.DataFrame(rows, schema={"t": pl.Int64, "category": pl.String,
                                          "count": pl.Float64, "low": pl.Float64,
                                          "high": pl.Float64, "weekday": pl.Int64},
                            orient="row")

    def percent_change(self, baseline: tuple[int, int]) -> pl.DataFrame:
        """The reports' percent change from baseline (post-processing, module docstring).

        Parameters
        ----------
        baseline : (int, int)
            The first and last day (inclusive, 1-based) of the baseline window; it must
            hold every weekday and have been released.

        Returns
        -------
        polars.DataFrame
            :meth:`table` with ``baseline`` (the median of the same weekday's released
            counts in the window) and ``percent_change`` = 100·(count − baseline)/baseline
            (None when the count is suppressed or the baseline is not positive).

        Raises
        ------
        DomainError
            A window outside the released days or shorter than a week.
        """
        table = self.table()
        return percent_change(table, baseline, released=len(self.days))


def percent_change(table: pl.DataFrame, baseline: tuple[int, int], *,
                   released: int) -> pl.DataFrame:
    """:meth:`MobilityReport.percent_change` on a table of its form (``t``, ``category``,
    ``count``, ``weekday``); suppressed counts (None) are left out of the medians."""
    lo, hi = (numbers.integer(b, "baseline day", minimum=1) for b in baseline)
    if not lo + 6 <= hi <= released:
        raise DomainError("the baseline window must hold at least 7 released days")
    base: dict[tuple[str, int], float | None] = {}
    window = table.filter(pl.col("t").is_between(lo, hi))
    for (cat, wd), part in window.group_by(["category", "weekday"]):
        kept = part["count"].drop_nulls().to_list()
        base[(str(cat), int(wd))] = statistics.median(kept) if kept else None
    b = [base.get((c, w)) for c, w in zip(table["category"], table["weekday"], strict=True)]
    pct = [None if (v is None or m is None or m <= 0) else 100.0 * (v - m) / m
           for v, m in zip(table["count"], b, strict=True)]
    return table.with_columns(pl.Series("baseline", b, dtype=pl.Float64),
                              pl.Series("percent_change", pct, dtype=pl.Float64))


def bike_sharing_counts(path: str | Path) -> tuple[list[date], list[dict[str, int]]]:
    """The UCI Bike Sharing ``day.csv`` as (dates, per day {"casual": n, "registered": m}).

    Raises
    ------
    DomainError
        A file without the columns ``dteday``, ``casual`` and ``registered``.
    """
    df = pl.read_csv(path, try_parse_dates=True)
    if not {"dteday", "casual", "registered"} <= set(df.columns):
        raise DomainError("not the Bike Sharing day.csv (dteday, casual, registered)")
    days = list(df["dteday"].cast(pl.Date))
    counts = [{c: int(row[c]) for c in BIKE_CATEGORIES}
              for row in df.select(BIKE_CATEGORIES).iter_rows(named=True)]
    return days, counts


def _categories(categories: Sequence[str]) -> list[str]:
    if isinstance(categories, str) or not isinstance(categories, Sequence):
        raise DomainError("categories must be a sequence of strings")
    out = list(categories)
    if not 1 <= len(out) <= MAX_CATEGORIES or len(set(out)) != len(out) or not all(
            isinstance(c, str) for c in out):
        raise DomainError(f"categories must be 1 … {MAX_CATEGORIES} distinct strings")
    return out


# -- the audit case ----------------------------------------------------------------------


def _audit_frame(heavy: bool) -> pl.DataFrame:
    users = ["a", "b", "c"] + (["h", "h", "h"] if heavy else [])
    return pl.DataFrame({"user": users, "category": ["x"] * len(users),
                         "day": [1] * len(users)})


def audit_cases() -> list[AuditCase]:
    """The report's case: ε = 1, T = 1, one category, per_day = 1 (w = 1). The neighbours
    differ in user "h" with 3 visits on day 1: bounded, the count moves by 1 (claim ε = 1);
    the broken variant skips :func:`bound_visits`, so the count moves by 3 (3ε)."""
    report = MobilityReport(1, epsilon=1, categories=["x"], per_day=1, unit="user",
                            by="category")
    noise = report.stream.counters[0].noise

    def sampler(bounded: bool) -> Sampler:
        def sample(frame: pl.DataFrame, n: int) -> np.ndarray:
            rows = bound_visits(frame, "user", "category", 1) if bounded else frame
            return np.asarray(rows.height + draw(noise, n), dtype=np.float64)
        return sample

    return [AuditCase("mobility_report", noise, sampler(True), sampler(False),
                      _audit_frame(True), _audit_frame(False), noise.sensitivity)]


register(audit=audit_cases)(MobilityReport)
