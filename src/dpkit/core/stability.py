"""Stability maps of the aggregations interface mode compiles to (the core computes every
sensitivity; the engine only computes the exact statistic).

All inputs are datasets under :class:`AddRemoveDistance` counted in privacy units. After
contribution bounding a unit has at most M = ``max_rows`` rows in total, rows in at most
G = ``max_groups`` groups and at most R = ``max_rows_per_group`` rows in any one group
(:class:`Contribution`). Values are clamped to declared bounds and rounded to integers on a
2^k grid *per record* before summing, so every sum is an exact integer sum (no
floating-point accumulation error; Casacuberta et al. 2022) and a record moves it by at most
``max_abs`` grid steps.

A unit changes the vector of per-group row counts by c with Σ c_g ≤ M, c_g ≤ R and at most
G non-zero entries, so ‖c‖₁ ≤ min(M, G·R), ‖c‖∞ ≤ min(M, R) and ‖c‖₂² ≤ q·R² + r²
(q = min(G, ⌊M/R⌋) full groups and a remainder r; the maximiser of a convex function
over that polytope is a vertex). For d units the bounds scale by d (triangle inequality).

- count (per group): ‖Δ‖_p ≤ d·‖c‖_p.
- sum of grid integers in [lo, hi]: ‖Δ‖_p ≤ d·‖c‖_p·max(|lo|, |hi|).
- distinct units per group: each unit adds 1 to ≤ min(G, M) groups.
- distinct values of a column per group (on the bounded rows): a unit's r_g rows in group g
  remove at most r_g values, so the change is dominated by c: the count's map.
- rank scores for a quantile: each group's score moves by ≤ d·min(M, R) (L∞); the per-group
  exponential mechanisms compose in parallel to a loss of 2·d·‖c‖₁/s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpkit.core.component import Transformation
from dpkit.core.metrics import AddRemoveDistance, L1Distance, L2Distance, LInfDistance, Metric
from dpkit.core.numbers import integer, non_negative, sqrt_up
from dpkit.errors import DomainError

__all__ = [
    "Contribution",
    "make_bounded_count",
    "make_bounded_sum",
    "make_distinct_count",
    "make_rank_scores",
]


@dataclass(frozen=True)
class Contribution:
    """Contribution bounds of one privacy unit: M rows in total, G groups, R rows per group.

    ``None`` means "implied by the others": M defaults to G·R, G and R to M (at least one of
    M, or both G and R, must be given). Construct with :meth:`of`.
    """

    max_rows: int
    max_groups: int
    max_rows_per_group: int

    @classmethod
    def of(cls, max_rows: int | None = None, max_groups: int | None = None,
           max_rows_per_group: int | None = None) -> Contribution:
        """Resolve the implied bounds; raise DomainError for non-positive or missing ones."""
        max_rows, max_groups, max_rows_per_group = (
            None if v is None else integer(v, name, minimum=1)
            for name, v in (("max_rows", max_rows), ("max_groups", max_groups),
                            ("max_rows_per_group", max_rows_per_group)))
        if max_rows is None:
            if max_groups is None or max_rows_per_group is None:
                raise DomainError("declare max_rows, or both max_groups and "
                                  "max_rows_per_group")
            max_rows = max_groups * max_rows_per_group
        groups = min(max_groups or max_rows, max_rows)
        per_group = min(max_rows_per_group or max_rows, max_rows)
        return cls(min(max_rows, groups * per_group), groups, per_group)

    def single_group(self) -> Contribution:
        """The bounds when the whole table is one group (no group-by)."""
        rows = min(self.max_rows, self.max_rows_per_group)
        return Contribution(rows, 1, rows)

    def within_groups(self, groups: int) -> Contribution:
        """The bounds on a release restricted to keys of which a unit has at most ``groups``
        (≤ G, the caller's bound): M' = min(M, groups·R), G' = groups, R unchanged."""
        return Contribution.of(min(self.max_rows, groups * self.max_rows_per_group), groups,
                               self.max_rows_per_group)

    def cells(self) -> Contribution:
        """The bounds on group × bin cells (a row lies in one cell; a cell in one group)."""
        return Contribution.of(self.max_rows, self.max_groups * self.max_rows_per_group,
                               self.max_rows_per_group)

    def l1(self) -> Fraction:
        return Fraction(min(self.max_rows, self.max_groups * self.max_rows_per_group))

    def linf(self) -> Fraction:
        return Fraction(self.max_rows_per_group)

    def l2(self) -> Fraction:
        r, m = self.max_rows_per_group, self.max_rows
        full = min(self.max_groups, m // r)
        rest = min(m - full * r, r) if full < self.max_groups else 0
        return sqrt_up(Fraction(full * r * r + rest * rest))

    def norm(self, metric: Metric) -> Fraction:
        """‖c‖ in the metric's norm (L1, L2 or L∞)."""
        if isinstance(metric, L1Distance):
            return self.l1()
        if isinstance(metric, L2Distance):
            return self.l2()
        if isinstance(metric, LInfDistance):
            return self.linf()
        raise DomainError(f"no count-vector norm for {metric}")


def _scaled(per_unit: Fraction) -> Callable[[Any], Fraction]:
    return lambda d_in: non_negative(d_in, "d_in") * per_unit


def make_bounded_count(function: Callable[[Any], Any], bounds: Contribution, metric: Metric,
                       name: str = "count") -> Transformation:
    """Row counts (one per group) of a table whose units respect ``bounds``."""
    return Transformation(function, AddRemoveDistance(), metric, _scaled(bounds.norm(metric)),
                          name)


def make_bounded_sum(function: Callable[[Any], Any], lower: int, upper: int,
                     bounds: Contribution, metric: Metric, name: str = "sum") -> Transformation:
    """Sums (one per group) of integers clamped to ``[lower, upper]``."""
    if lower > upper:
        raise ValueError("lower > upper")
    per_row = Fraction(max(abs(lower), abs(upper)))
    return Transformation(function, AddRemoveDistance(), metric,
                          _scaled(per_row * bounds.norm(metric)), name)


def make_distinct_count(function: Callable[[Any], Any], bounds: Contribution, metric: Metric,
                        name: str = "distinct units") -> Transformation:
    """Distinct units per group: a unit adds 1 to at most min(G, M) groups."""
    groups = Fraction(min(bounds.max_groups, bounds.max_rows))
    per_unit = {L1Distance: groups, L2Distance: sqrt_up(groups), LInfDistance: Fraction(1)}
    if type(metric) not in per_unit:
        raise DomainError(f"no distinct-count sensitivity for {metric}")
    return Transformation(function, AddRemoveDistance(), metric,
                          _scaled(per_unit[type(metric)]), name)


def make_rank_scores(function: Callable[[Any], Any], bounds: Contribution,
                     name: str = "rank scores") -> Transformation:
    """Quantile scores −dist(q·n, [#{x < c}, #{x ≤ c}]) per candidate c and group: each moves
    by at most min(M, R) per unit (every count and q·n move by ≤ 1 per row)."""
    return Transformation(function, AddRemoveDistance(), LInfDistance(),
                          _scaled(bounds.linf()), name)
