"""Stability maps of the aggregations interface mode compiles to (the core computes every
sensitivity; the engine only computes the exact statistic).

All inputs are datasets under :class:`AddRemoveDistance` counted in privacy units; a unit
contributes at most ``max_rows`` rows after contribution bounding. Values are clamped to
declared bounds and rounded to integers on a 2^k grid *per record* before summing, so every
sum is an exact integer sum (no floating-point accumulation error; Casacuberta et al. 2022)
and a record moves it by at most ``max_abs`` grid steps.

- count (per group, public keys): each unit changes the counts by at most ``max_rows`` in
  total, so ‖Δ‖₁ ≤ d·max_rows and ‖Δ‖₂ ≤ d·max_rows.
- sum of grid integers in [lo, hi]: ‖Δ‖₁, ‖Δ‖₂ ≤ d·max_rows·max(|lo|, |hi|).
- rank scores for a quantile: each score changes by at most d·max_rows (L∞).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from dpkit.core.component import Transformation
from dpkit.core.metrics import AddRemoveDistance, LInfDistance, Metric
from dpkit.core.numbers import non_negative

__all__ = ["make_bounded_count", "make_bounded_sum", "make_rank_scores"]


def _scaled(per_unit: Fraction) -> Callable[[Any], Fraction]:
    return lambda d_in: non_negative(d_in, "d_in") * per_unit


def make_bounded_count(function: Callable[[Any], Any], max_rows: int, metric: Metric,
                       name: str = "count") -> Transformation:
    """Counts (one per public group) of a table whose units have ≤ ``max_rows`` rows."""
    return Transformation(function, AddRemoveDistance(), metric, _scaled(Fraction(max_rows)),
                          name)


def make_bounded_sum(function: Callable[[Any], Any], lower: int, upper: int, max_rows: int,
                     metric: Metric, name: str = "sum") -> Transformation:
    """Sums (one per group) of integers clamped to ``[lower, upper]``."""
    if lower > upper:
        raise ValueError("lower > upper")
    per_row = Fraction(max(abs(lower), abs(upper)))
    return Transformation(function, AddRemoveDistance(), metric,
                          _scaled(per_row * max_rows), name)


def make_rank_scores(function: Callable[[Any], Any], max_rows: int,
                     name: str = "rank scores") -> Transformation:
    """Quantile scores −dist(q·n, [#{x < c}, #{x ≤ c}]) per candidate c: each moves by at
    most max_rows per unit (every count and q·n move by ≤ 1 per row)."""
    return Transformation(function, AddRemoveDistance(), LInfDistance(),
                          _scaled(Fraction(max_rows)), name)
