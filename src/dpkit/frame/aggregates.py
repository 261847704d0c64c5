"""Aggregations of interface mode: what an analyst asks for, and how each becomes exact
integer statistics (computed by the engine) plus a post-processing step (estimate and CI).

Rules for bad values (DESIGN.md §3.6), the same in every aggregation:

- nulls and NaN in an aggregated column are dropped before clamping, unless ``fill=`` is
  given, in which case they are replaced by it (it must lie within the bounds);
- infinities are clamped to the bounds like any other out-of-range value;
- values are clamped to the declared ``bounds`` and rounded per record to a grid of width 2^k
  (exact for integer columns with integer bounds: k = 0), so sums are exact integer sums.

Each grid statistic has three forms, built by the same code from the same bounds, centre
and grid exponent: the narwhals form (``Statistic.expr``, every backend), the Polars form
(``Statistic.native``, what a Polars session collects, grouped or not) and, for the sums of
:class:`Sum` and :class:`Mean` and the mean's count, the flat form (``Statistic.flat``): the
same exact integers computed over the whole table by one numpy kernel call
(:func:`_grid_stats`) inside the Polars plan (``map_batches``), which the engine collects
instead of the Polars forms when the release is ungrouped, the table is in memory and
every statistic has a flat form (:func:`dpkit.frame.engine.compute`). The flat form is
built by the code that builds the other two: :func:`_clamp`, :func:`_grid_ints` and the
mean's centring run on a third kind of expression, :class:`_Chunked`, which records the
kernel's steps, so the kernel has no clamp or grid rule of its own. Polars materialises
every step of clamp → centre → scale → floor → cast → sum as a full column; the kernel runs
the same IEEE operations over cache-sized chunks of 2^16 values and sums the floored values
in float64, exactly (every partial sum is an integer below 2^47 < 2^53), with no branch on
a value. Measured (issue 35; ``python bench/run.py --only mean --baseline 4c2ab00``, eight
runs, medians, 2 cores shared, load 5–7): the fresh-session DP mean over 10^6 rows 3.38 ms
against 4.82 ms before (0.68×, 0.64–0.78×; diffprivlib 3.20 ms in the same runs, 1.04×,
0.86–1.26×; numpy's mean 0.4–0.6 ms), over 10^5 rows 1.59 ms against 1.80 ms (0.88×); the
grouped release (10^5 rows, 1,000 keys, the Polars form) unchanged (0.98×, 0.92–1.08×).
With a whole core free, Polars' streaming form runs on two and the gain is smaller (~0.4 ms
of ~2 ms at 10^6 values, in process). Every input gives the same integers in all three forms
(NaN and nulls dropped, ±inf to the bounds, -0.0, subnormals, integer and boolean columns,
``fill=``, several chunks): tests/test_frame_kernel.py.
"""

from __future__ import annotations

import abc
import builtins
import enum
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal, cast

import narwhals as nw
import numpy as np
import polars as pl

from dpkit.core.numbers import (
    Number,
    as_typed,
    float_down,
    float_up,
    fraction_down,
    fraction_up,
    readable,
)
from dpkit.errors import BoundsError, ColumnError, DomainError
from dpkit.frame.language import MAX_BINS, MAX_CANDIDATES, Param, aggregation, column_kind
from dpkit.mechanisms import grid_exponent

__all__ = ["Aggregation", "Statistic", "StatKind", "count", "count_distinct", "sum", "mean",
           "variance", "std", "histogram", "quantile", "median", "min", "max"]

NumericKind = Literal["int", "float"]  # how a numeric column is summed: exact ints or a grid


class StatKind(enum.StrEnum):
    """What the engine computes for a :class:`Statistic` (a closed set)."""

    COUNT = "count"  # rows
    SUM = "sum"  # grid integers clamped to [lower, upper]
    DISTINCT = "distinct"  # distinct privacy units
    BINS = "bins"  # row counts per bin of bin_expr (n_bins bins, out-of-range bins dropped)


@dataclass(frozen=True)
class Statistic:
    """One exact integer statistic per group (or per group × bin) for the engine to compute:
    ``kind`` says which (:class:`StatKind`); ``weight`` is its share of the aggregation's
    budget. ``native``: the same statistic as a Polars expression, built by the code that
    built ``expr`` (:func:`_ns`), which a Polars session collects instead of narwhals'
    translation of ``expr`` (:func:`dpkit.frame.engine.native_aggregates`); None: translated.
    ``flat``: the same statistic over the whole table, as a Polars expression and the
    field of its struct that holds it (a numpy kernel for a grid sum and a mean's count,
    :meth:`_Chunked.sum` over :func:`_grid_stats`, whose one call gives both; ``len`` and
    no field for a row count), collected instead of ``native`` by an ungrouped release over
    an in-memory table whose statistics all have one (:func:`dpkit.frame.engine.compute`);
    None: ``native``."""

    key: str
    kind: StatKind
    expr: Any = None  # a narwhals expression (None for a count)
    # the same statistic as a Polars expression, built by the same code (see _ns), or None
    native: Any = field(default=None, compare=False)
    # the same statistic over the whole table (no group-by): (a Polars expression, its
    # struct field or None), statistics of one aggregation sharing the expression; or None
    flat: tuple[pl.Expr, str | None] | None = field(default=None, compare=False)
    bin_expr: Any = None
    n_bins: int = 0
    lower: int = 0
    upper: int = 0
    weight: Fraction = Fraction(1)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", StatKind(self.kind))  # ValueError outside the set


# integer types that widen to Int64 losslessly (UInt64 and 128-bit integers are summed as
# floats: a strict cast of a value ≥ 2^63 to Int64 would fail on the data)
_SAFE_INTS = (nw.Int8, nw.Int16, nw.Int32, nw.Int64, nw.UInt8, nw.UInt16, nw.UInt32)
# integer grid values stay within ±2^31, so a sum over fewer than 2^32 rows fits in Int64
_GRID_INT_LIMIT = 1 << 31
_BOUND_LIMIT = 1 << 512  # |bound|: variance squares the half-range, which must stay finite
# the larger magnitude of a summed quantity, when not 0: its grid 2^k (k = ⌊log₂⌋ − 30) needs
# 2^-k to be a float (k ≥ −1023); subnormal bounds (5e-324) are refused at plan time by _grid
_BOUND_FLOOR = Fraction(1, 1 << 960)


def _dtype_kind(schema: Any, column: str) -> str:
    if column not in schema:
        raise ColumnError(f"unknown column {column!r}; available: {', '.join(schema)}")
    dtype = schema[column]
    if dtype.is_integer():
        return "int" if dtype in _SAFE_INTS else "float"
    if dtype.is_float():
        return "float"
    if dtype == nw.Boolean:
        return "int"
    return str(dtype)


def _require_numeric(schema: Any, column: str, what: str) -> NumericKind:
    kind = _dtype_kind(schema, column)
    if kind not in ("int", "float"):
        raise ColumnError(f"{what}({column!r}) needs a numeric column; {column!r} has type {kind}")
    return cast(NumericKind, kind)


def _bounds(bounds: Any, what: str, column: str) -> tuple[Fraction, Fraction]:
    if bounds is None:
        raise BoundsError(
            f"{what}({column!r}) needs bounds=(lower, upper); dpkit never infers bounds from "
            "the data (docs/security.md#declared-never-inferred)"
        )
    try:
        lo, hi = bounds
        lower, upper = fraction_down(lo), fraction_up(hi)
    except (TypeError, ValueError) as exc:
        raise BoundsError(f"bounds for {column!r} must be two finite numbers: {exc}") from None
    except DomainError as exc:
        raise BoundsError(f"bounds for {column!r} must be two finite numbers: {exc}") from None
    if lower > upper:
        raise BoundsError(f"bounds for {column!r}: lower {lo!r} exceeds upper {hi!r}")
    if builtins.max(abs(lower), abs(upper)) > _BOUND_LIMIT:
        raise BoundsError(f"bounds for {column!r} must lie within ±2^512 (squares and sums "
                          "of values must stay finite in floating point)")
    return lower, upper


def _ns(expr: Any) -> Any:
    """The module an expression belongs to: polars for a Polars expression, else narwhals.

    A grid statistic is built once per module by the same functions (:func:`_clean`,
    :func:`_clamp`, :func:`_grid_ints`): the narwhals form runs on every backend, the
    Polars form (:attr:`Statistic.native`) is what a Polars session collects, skipping
    narwhals' translation, which writes ``fill_nan`` and ``when`` as slower Polars plans."""
    return pl if isinstance(expr, pl.Expr) else nw  # nw for a _Chunked too: its dtypes


def _clean(column: str, kind: NumericKind, fill: Any, lower: Fraction, upper: Fraction,
           ns: Any = nw) -> Any:
    """The column with NaN → null, then nulls dropped (by the aggregation) or filled
    (``ns``: :mod:`narwhals` or :mod:`polars`, the module of the expression, :func:`_ns`).

    The Polars form of a float column without ``fill`` keeps its NaN here and drops them
    where it is read, without a pass of its own: :func:`_clamp` turns NaN into null in its
    own ``when`` and :func:`_count` leaves them out (~0.4 ms per 10^6 values)."""
    expr = ns.col(column)
    if kind == "float" and (ns is nw or fill is not None):
        expr = expr.fill_nan(None)
    if fill is not None:
        value = fraction_up(fill)
        if not lower <= value <= upper:
            raise BoundsError(f"fill value {fill!r} for {column!r} lies outside the bounds")
        expr = expr.fill_null(float(value) if kind == "float" else fill)
    return expr


def _small_ints(kind: NumericKind, lower: Fraction, upper: Fraction) -> bool:
    """Integer column, integer bounds within ±2^31: summed exactly as integers."""
    return kind == "int" and lower.denominator == 1 and upper.denominator == 1 and (
        builtins.max(abs(lower), abs(upper)) <= _GRID_INT_LIMIT)


def _grid(kind: NumericKind, lower: Fraction, upper: Fraction) -> int:
    """Grid exponent for summing: 0 for integers with integer bounds within ±2^31, else
    ~2^-30 of |bound| (so every grid value lies within ±2^31 and sums cannot overflow)."""
    if _small_ints(kind, lower, upper):
        return 0
    top = builtins.max(abs(lower), abs(upper))
    if 0 < top < _BOUND_FLOOR:  # plan time: 2^-k would overflow a float
        raise BoundsError(f"bounds too small: the larger magnitude of a summed quantity (a "
                          f"bound, or a variance's squared half-range) is {readable(top)}; "
                          "it must be 0 or at least 2^-960 (≈ 1e-289) for its grid step 2^-k "
                          "to be a float; rescale the column (multiply it by a power of ten)")
    return 0 if top == 0 else grid_exponent(top)


def _clamp(expr: Any, lo: float, hi: float, dtype: str = "Float64") -> Any:
    """``expr`` clamped to [lo, hi] (``dtype``: the name of both bounds' type): ``clip``
    written as two comparisons, which Polars runs in about a fifth of its ``clip``'s time
    (~0.3 ms against 1.5 ms per 10^6 values); the same values on every backend: null stays
    null, ±inf go to the bounds, a value within the bounds (-0.0 among them) is kept as it
    is. NaN, which Polars and DuckDB order above every number, goes to null: in the Polars
    form by the first branch (:func:`_clean` leaves it there); in the narwhals form it never
    arrives (:func:`_clean` turns it into null). The flat form (:class:`_Chunked`) records
    a clamp step, which the kernel drops NaN after (:func:`_grid_stats`)."""
    if isinstance(expr, _Chunked):  # the flat form: a clip (NaN stays NaN, dropped later)
        return expr.clip(lo, hi)
    ns = _ns(expr)
    kind = getattr(ns, dtype)
    first = ns.when(expr.is_nan()).then(None).when(expr < lo) if ns is pl and dtype == \
        "Float64" else ns.when(expr < lo)
    return first.then(ns.lit(lo, kind)).when(expr > hi).then(ns.lit(hi, kind)).otherwise(expr)


def _count(clean: Any, kind: NumericKind) -> Any:
    """The number of values :func:`_clean` keeps: neither null nor NaN (the Polars form of a
    float column keeps its NaN until here, :func:`_clean`)."""
    if _ns(clean) is pl and kind == "float":
        return clean.count() - clean.is_nan().sum()
    return clean.count()


def _to_int64(expr: Any) -> Any:
    """``expr`` (integer values within ±2^31: clamped, then floored or already integers)
    as Int64. Polars' unchecked (saturating) cast is exact on such values and ~0.5 ms per
    10^6 values cheaper than its checked one; narwhals has only the checked cast."""
    ns = _ns(expr)
    if ns is pl:
        return expr.cast(pl.Int64, wrap_numerical=True)
    return expr.cast(nw.Int64)


def _grid_ints(expr: Any, k: int, lo: float, hi: float, clamped: bool = False,
               integral: bool = False) -> tuple[Any, int, int]:
    """Per record: x clamped to [lo, hi], times 2^-k (exact), rounded down to Int64.

    Returns the expression and its exact integer range, computed in Python with the same
    IEEE operations (clamping, exact scaling and flooring are monotone, so the endpoints
    bound every record). The explicit floor makes every backend agree (a bare cast
    truncates in Polars and Spark but rounds in DuckDB). Flooring moves a value by less than
    one grid step 2^k. ``clamped``: ``expr`` is already Float64 within [lo, hi] (the
    caller proved it), so the float path skips its cast and clamp (one pass less).
    The Polars form skips the floor when lo ≥ 0: its cast truncates toward zero, which is
    the floor of a value ≥ 0 (a pass less). ``integral``: ``expr`` holds integers (an
    integer column, or one centred on an integer midpoint), which may stay integers at
    k = 0; a float column always takes the float path (a bare cast of an unclamped float,
    1e300, would fail on the data).
    """
    ns = _ns(expr)
    step = _step(k)
    if integral and k == 0 and lo.is_integer() and hi.is_integer() and builtins.max(
            abs(lo), abs(hi)) <= _GRID_INT_LIMIT:  # integers stay integers
        whole = _to_int64(expr) if clamped else expr.cast(ns.Int64)
        return _clamp(whole, int(lo), int(hi), "Int64"), int(lo), int(hi)
    # in Float64, clamping first: the cast to Int64 then cannot fail on any value
    scaled = (expr if clamped else _clamp(expr.cast(ns.Float64), lo, hi)) * step
    if ns is not pl or lo < 0:  # Polars' cast truncates: on values ≥ 0 that is the floor
        scaled = scaled.floor()
    return _to_int64(scaled), math.floor(lo * step), math.floor(hi * step)


def _step(k: int) -> float:
    """The grid's scale factor 2^-k, an exact float (k ≥ −1023: :func:`_grid`)."""
    return float(Fraction(2) ** -k)


_CHUNK = 1 << 16  # values per step of the kernel: 512 KiB of float64, within the L2 cache
_STATS = pl.Struct({"s": pl.Int64, "n": pl.Int64})  # what _grid_stats returns
_Steps = tuple[tuple[str, tuple[float, ...]], ...]  # a _Chunked's steps: (name, arguments)


@dataclass(frozen=True)
class _Chunked:
    """The flat form of a column under construction: the Polars expression the kernel
    reads (Float64) and the steps it applies to each chunk, recorded by the very functions
    that build the other two forms (:func:`_clamp`, :func:`_grid_ints`, ``Mean``), which
    see it as a third kind of expression (:func:`_ns` gives narwhals' dtypes for it).

    Only what those functions do with a clamped grid column is defined: casts are no-ops
    (the kernel works in float64: an integer column's values are read as Float64, and a
    value beyond 2^53 rounds monotonically, so its clamp to bounds within ±2^31 is the
    integer clamp; a floored value is an integer, so the cast to Int64 changes nothing),
    the clamp, ``−`` and ``×`` a float, ``floor``, and ``sum``: the kernel's expression."""

    source: pl.Expr
    steps: _Steps = ()

    def _then(self, name: str, *args: float) -> _Chunked:
        return _Chunked(self.source, (*self.steps, (name, args)))

    def cast(self, dtype: object) -> _Chunked:
        return self

    def clip(self, lo: float, hi: float) -> _Chunked:
        return self._then("clip", float(lo), float(hi))

    def __sub__(self, value: float) -> _Chunked:
        return self._then("subtract", value)

    def __mul__(self, value: float) -> _Chunked:
        return self._then("multiply", value)

    def floor(self) -> _Chunked:
        return self._then("floor")

    def sum(self) -> pl.Expr | None:
        """One row: a struct of ``s``, the exact sum of the steps' integers over the values
        that are neither null nor NaN, and ``n``, their number (:func:`_grid_stats`); None
        unless the clamp comes first (NaN must meet it before any arithmetic)."""
        if not self.steps or self.steps[0][0] != "clip":
            return None
        return self.source.map_batches(functools.partial(_grid_stats, steps=self.steps),
                                       return_dtype=_STATS, returns_scalar=True)


def _float_chunks(series: pl.Series) -> Any:
    """The values of a Float64 ``series`` as numpy arrays of at most :data:`_CHUNK` values,
    a null read as NaN. Converted chunk by chunk: a chunk without nulls is a view, one with
    a null a copy with NaN in its place (~0.1–0.2 ms: Polars' ``fill_null``), so the time
    nulls cost is bounded by the number of chunks holding one (a row more or less changes
    it by at most one chunk's copy), not by the column (Polars' ``to_numpy`` of a column
    of 10^6 values with a null costs ~3 ms)."""
    for part in series.get_chunks():
        for start in range(0, len(part), _CHUNK):
            chunk = part.slice(start, _CHUNK)
            yield (chunk.fill_null(math.nan) if chunk.has_nulls() else chunk).to_numpy()


def _apply(steps: _Steps, x: np.ndarray, out: np.ndarray) -> None:
    """``steps`` on ``x`` into ``out``, IEEE operation by operation. The clamp is
    ``fmin`` then ``maximum``: a value within the bounds is kept, ±inf go to the bounds,
    NaN goes to the upper bound (counted and taken out by :func:`_grid_stats`); the same
    SIMD instructions on every value (a NaN-propagating clip followed by a masked copy
    costs ~30× more per value where NaN are scattered: a branch per value)."""
    source = x
    for name, args in steps:  # the first reads x, the others out in place
        if name == "clip":
            np.fmin(source, args[1], out=out)
            np.maximum(out, args[0], out=out)
        else:
            getattr(np, name)(source, *args, out=out)
        source = out


def _grid_stats(series: pl.Series, steps: _Steps, **_polars: object) -> dict[str, int]:
    """``s``: the sum of ``steps`` (:class:`_Chunked`: the clamp, centring, scaling and
    floor of :func:`_grid_ints`, the same IEEE operations in the same order) applied to
    the values of the Float64 ``series`` that are neither null nor NaN; ``n``: the number
    of those values (:func:`_count`). ``_polars``: what Polars passes (``return_dtype``).

    The steps end in integers within ±2^31 (:func:`_flat`), so every partial sum of a
    chunk of 2^16 is an integer below 2^47 and float64 adds them exactly; chunks add up in
    Python integers. A NaN (or null, read as NaN) is clamped like a value (to the upper
    bound, :func:`_apply`) and counted; its contribution, the steps applied to NaN, is
    taken out of the sum once per NaN, in integers. No branch on a value: the time per
    value does not depend on the data. Never raises, never warns (floating-point flags
    are ignored)."""
    total = nans = 0
    buf, nan = np.empty(_CHUNK), np.empty(_CHUNK, dtype=np.bool_)
    with np.errstate(all="ignore"):
        one = np.empty(1)
        _apply(steps, np.array([math.nan]), one)
        for x in _float_chunks(series):
            b, m = buf[:len(x)], nan[:len(x)]
            _apply(steps, x, b)
            nans += int(np.count_nonzero(np.isnan(x, out=m)))
            total += int(b.sum())
    return {"s": total - nans * int(one[0]), "n": len(series) - nans}


def _flat(total: pl.Expr | None, lo: int, hi: int) -> pl.Expr | None:
    """The flat form ``total`` (a :class:`_Chunked` sum) of grid integers of exact range
    [lo, hi], or None beyond ±2^31 (a chunk's float sum might then not be exact)."""
    return None if builtins.max(-lo, hi) > _GRID_INT_LIMIT else total


def _field(flat: pl.Expr | None, name: str) -> tuple[pl.Expr, str] | None:
    """A statistic's flat form: field ``name`` of the kernel's struct ``flat`` (or None)."""
    return None if flat is None else (flat, name)


def check_edges(bins: Sequence[Number] | None) -> list[float]:
    """Bin edges as floats: at least two, finite, strictly increasing (else BoundsError)."""
    if bins is None:
        raise BoundsError("bin edges must be numbers")
    try:
        edges = [float(e) for e in bins]
    except (TypeError, ValueError):
        raise BoundsError("bin edges must be numbers") from None
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise BoundsError("bins must be at least two strictly increasing edges")
    if not all(math.isfinite(e) for e in edges):
        raise BoundsError("bin edges must be finite")
    return edges


def positive_number(x: Number, name: str) -> Fraction:
    value = fraction_up(x)
    if value <= 0:
        raise DomainError(f"{name} must be > 0, got {x!r}")
    return value


def _interval(name: str, est: np.ndarray, half_width: float) -> dict[str, Any]:
    return {name: est, f"{name}_ci_low": est - half_width, f"{name}_ci_high": est + half_width}


def _count_interval(name: str, est: np.ndarray, half_width: int,
                    clip_estimate: bool = False) -> dict[str, Any]:
    """A count's interval cut at 0 (a count is never negative, so the cut interval covers
    whenever the uncut one does: post-processing); with ``clip_estimate`` the estimate
    too (``non_negative``)."""
    shown = np.maximum(est, 0) if clip_estimate else est
    return {name: shown, f"{name}_ci_low": np.maximum(est - half_width, 0),
            f"{name}_ci_high": np.maximum(est + half_width, 0)}


def _ratio_half_width(a_s: float, a_n: float, top: float, n: float) -> float:
    """|S̃/Ñ − S/n| ≤ (a_s + top·a_n)/(n − a_n) when |S̃ − S| ≤ a_s, |Ñ − n| ≤ a_n,
    |S/n| ≤ top and n > a_n (S̃/Ñ − S/n = (S̃ − S)/Ñ + (S/n)(n − Ñ)/Ñ); inf otherwise."""
    return (a_s + top * a_n) / (n - a_n) if n > a_n else math.inf


@dataclass(frozen=True)
class Aggregation(abc.ABC):
    """What every aggregation implements. ``name`` is the output column (a default is
    derived). A new aggregation is a frozen dataclass here with its JSON tag and parameters
    (:func:`dpkit.frame.language.aggregation`): the server and the client then know it."""

    name: str | None = None

    @abc.abstractmethod
    def output_name(self) -> str:
        """The output column's name."""

    def columns(self) -> list[str]:
        """The columns it reads."""
        return []

    @abc.abstractmethod
    def statistics(self, schema: nw.Schema, prefix: str) -> list[Statistic]:
        """The exact statistics the engine computes (keys start with ``prefix``); checks the
        aggregation against ``schema`` at plan time (ColumnError, BoundsError, DomainError)."""

    @abc.abstractmethod
    def finish(self, noisy: dict[str, np.ndarray], half_widths: dict[str, float],
               stats: list[Statistic], beta: float) -> dict[str, Any]:
        """Post-processing: the output columns (estimate, ``_ci_low``, ``_ci_high``) from the
        noisy statistics and their half-widths at level 1 − ``beta`` / :meth:`beta_parts`."""

    def beta_parts(self) -> int:
        """Into how many parts the interval's failure probability β is split: each
        statistic's half-width handed to :meth:`finish` is taken at β / parts (a union
        bound over the statistics the interval combines)."""
        return 1

    def expected_half_width(self, half_widths: dict[str, float], stats: list[Statistic],
                            n: float) -> float | None:
        """The output's own half-width at a stated count ``n`` (data-free, for
        ``Query.explain``), from its statistics' half-widths at β / :meth:`beta_parts`;
        None when the output is one statistic (its line already says it)."""
        return None


_NAME = Param("name", "label", None)
_COLUMN = Param("column", "column")
_BOUNDS = Param("bounds", "bounds", None)
_FILL = Param("fill", "scalar", None)
_CANDIDATES = Param("candidates", "int", None, size=(2, MAX_CANDIDATES))
_METHOD = Param("method", "choice", "exponential", choices=("exponential", "tree"))
_BOUNDED = (_COLUMN, _BOUNDS, _FILL, _NAME)


@aggregation("count", _NAME)
@dataclass(frozen=True)
class Count(Aggregation):
    """Number of rows (per group)."""

    def output_name(self) -> str:
        return self.name or "count"

    def statistics(self, schema: nw.Schema, prefix: str) -> list[Statistic]:
        return [Statistic(f"{prefix}n", StatKind.COUNT, expr=nw.len(), flat=(pl.len(), None))]

    def finish(self, noisy: dict[str, np.ndarray], half_widths: dict[str, float],
               stats: list[Statistic], beta: float) -> dict[str, Any]:
        key = stats[0].key  # integer counts: integer half-width
        return _count_interval(self.output_name(), noisy[key], int(half_widths[key]))


@aggregation("count_distinct", Param("column", "column", None), _NAME)
@dataclass(frozen=True)
class CountDistinct(Aggregation):
    """Number of distinct privacy units (per group; rows under row-level privacy) or, with
    ``column``, of distinct non-null values of ``column``; see :func:`count_distinct`."""

    column: str | None = None

    def output_name(self) -> str:
        return self.name or (f"{self.column}_distinct" if self.column else "units")

    def columns(self) -> list[str]:
        return [self.column] if self.column else []

    def statistics(self, schema: nw.Schema, prefix: str) -> list[Statistic]:
        if self.column is None:
            return [Statistic(f"{prefix}u", StatKind.DISTINCT)]
        # distinct values of the bounded rows: a row count's sensitivities (count_distinct)
        return [Statistic(f"{prefix}v", StatKind.COUNT, expr=_distinct_values(schema,
                                                                              self.column))]

    def finish(self, noisy: dict[str, np.ndarray], half_widths: dict[str, float],
               stats: list[Statistic], beta: float) -> dict[str, Any]:
        key = stats[0].key
        return _count_interval(self.output_name(), noisy[key], int(half_widths[key]))


def _distinct_values(schema: Any, column: str) -> Any:
    """Distinct non-null values of a key-like column (integer, string, categorical, enum,
    boolean, date/time), as one narwhals expression every backend evaluates alike:
    ``n_unique`` (which counts null as a value on every backend) minus one when a null is
    present. Floats and decimals are refused (NaN and −0.0 are distinct values on some
    backends and not on others), as are nested and binary types."""
    if column not in schema:
        raise ColumnError(f"unknown column {column!r}; available: {', '.join(schema)}")
    dtype = schema[column]
    kind = column_kind(dtype)
    if not (dtype.is_integer() or kind in ("string", "boolean", "temporal")):
        raise ColumnError(
            f"count_distinct({column!r}) counts values of an integer, string, categorical, "
            f"boolean or date/time column; {column!r} has type {dtype} (map floats to keys "
            "first, e.g. with bin() or a cast in with_columns)")
    x = nw.col(column)
    return x.n_unique() - x.is_null().any().cast(nw.Int64)


@dataclass(frozen=True)
class ColumnAggregation(Aggregation):
    """An aggregation of one column, with declared bounds and an optional fill value."""

    column: str = ""
    bounds: Sequence[Number] | None = None  # (lower, upper)
    fill: Number | None = None

    def __post_init__(self) -> None:
        if isinstance(self.bounds, list):  # as JSON gives it back
            object.__setattr__(self, "bounds", tuple(self.bounds))

    def columns(self) -> list[str]:
        return [self.column]


@aggregation("sum", *_BOUNDED)
@dataclass(frozen=True)
class Sum(ColumnAggregation):
    """Sum of a numeric column clamped to ``bounds``."""

    def output_name(self) -> str:
        return self.name or f"{self.column}_sum"

    def statistics(self, schema: nw.Schema, prefix: str) -> list[Statistic]:
        kind = _require_numeric(schema, self.column, "sum")
        lower, upper = _bounds(self.bounds, "sum", self.column)
        k = _grid(kind, lower, upper)
        polars = _clean(self.column, kind, self.fill, lower, upper, pl)
        forms = [_grid_ints(clean, k, float_down(lower), float_up(upper),
                            integral=kind == "int")
                 for clean in (_clean(self.column, kind, self.fill, lower, upper), polars,
                               _Chunked(polars.cast(pl.Float64)))]  # narwhals, Polars, flat
        (ints, lo, hi), native, flat = forms[0], forms[1][0], forms[2][0]
        return [Statistic(f"{prefix}s", StatKind.SUM, expr=ints.sum(), lower=lo, upper=hi,
                          n_bins=k, native=native.sum(),  # n_bins carries k for finish()
                          flat=_field(_flat(flat.sum(), lo, hi), "s"))]

    def finish(self, noisy: dict[str, np.ndarray], half_widths: dict[str, float],
               stats: list[Statistic], beta: float) -> dict[str, Any]:
        st = stats[0]
        g = 2.0 ** st.n_bins
        return _interval(self.output_name(), noisy[st.key].astype(np.float64) * g,
                         half_widths[st.key] * g)


@aggregation("mean", *_BOUNDED)
@dataclass(frozen=True)
class Mean(ColumnAggregation):
    """Mean of a numeric column clamped to ``bounds``: a noisy centred sum over a noisy count.

    The budget is split evenly between Σ(x − m) (m the midpoint of the bounds, so the
    sensitivity is half the range) and the count of non-null values. The estimate is
    m + S̃/Ñ clamped to the bounds (m when Ñ < 1: an empty group). The interval combines the
    two noise bounds, each at β/2, over the corners of S/N, so it covers the mean of the
    clamped values with probability ≥ 1 − β.
    """

    def output_name(self) -> str:
        return self.name or f"{self.column}_mean"

    def statistics(self, schema: nw.Schema, prefix: str) -> list[Statistic]:
        kind = _require_numeric(schema, self.column, "mean")
        lower, upper = _bounds(self.bounds, "mean", self.column)
        mid = (lower + upper) / 2
        if _small_ints(kind, lower, upper):
            k = 0 if mid.denominator == 1 else -1  # half-integers are exact at 2^-1
        else:
            k = _grid("float", lower - mid, upper - mid)
        lo_f, hi_f, mid_f = float_down(lower), float_up(upper), float(mid)

        def forms(clean: Any) -> tuple[Any, int, int]:
            # already within [lo_f − mid_f, hi_f − mid_f], these very IEEE differences: x ↦
            # fl(x − mid_f) is monotone on the clamped x, so _grid_ints need not clamp again
            centred = _clamp(clean.cast(_ns(clean).Float64), lo_f, hi_f) - mid_f
            s, lo, hi = _grid_ints(centred, k, lo_f - mid_f, hi_f - mid_f, clamped=True,
                                   integral=kind == "int")
            return s.sum(), lo, hi

        cleans = [_clean(self.column, kind, self.fill, lower, upper, ns) for ns in (nw, pl)]
        (s, lo, hi), (s_pl, _, _) = forms(cleans[0]), forms(cleans[1])  # narwhals, Polars
        # the flat form: one kernel call gives the sum (s) and the count (n)
        flat = _flat(forms(_Chunked(cleans[1].cast(pl.Float64)))[0], lo, hi)
        return [
            Statistic(f"{prefix}s", StatKind.SUM, expr=s, lower=lo, upper=hi, n_bins=k,
                      weight=Fraction(1, 2), native=s_pl, flat=_field(flat, "s")),
            Statistic(f"{prefix}n", StatKind.COUNT, expr=_count(cleans[0], kind),
                      weight=Fraction(1, 2), native=_count(cleans[1], kind),
                      flat=_field(flat, "n")),
        ]

    def finish(self, noisy: dict[str, np.ndarray], half_widths: dict[str, float],
               stats: list[Statistic], beta: float) -> dict[str, Any]:
        s_st, n_st = stats
        lower, upper = _bounds(self.bounds, "mean", self.column)
        lo, hi = float(lower), float(upper)
        mid = float((lower + upper) / 2)
        g = 2.0 ** s_st.n_bins
        s = noisy[s_st.key].astype(np.float64) * g
        n = noisy[n_st.key].astype(np.float64)
        a_s, a_n = half_widths[s_st.key] * g, half_widths[n_st.key]
        est = np.where(n >= 1, mid + s / np.maximum(n, 1), mid).clip(lo, hi)
        n_lo = n - a_n
        valid = n_lo >= 1
        safe = np.where(valid, n_lo, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):  # n + a_n = 0: not valid
            corners = np.stack([(s - a_s) / safe, (s - a_s) / (n + a_n),
                                (s + a_s) / safe, (s + a_s) / (n + a_n)])
        ci_low = np.where(valid, mid + corners.min(axis=0), lo).clip(lo, hi)
        ci_high = np.where(valid, mid + corners.max(axis=0), hi).clip(lo, hi)
        name = self.output_name()
        return {name: est, f"{name}_ci_low": ci_low, f"{name}_ci_high": ci_high}

    def beta_parts(self) -> int:
        return 2

    def expected_half_width(self, half_widths: dict[str, float], stats: list[Statistic],
                            n: float) -> float | None:
        """At a stated count n: (a_S + h·a_N)/(n − a_N), a_S and a_N the sum's and count's
        half-widths at β/2 and h half the range (:func:`_ratio_half_width`; the clamp to
        the bounds only shrinks the error); the range 2h when n ≤ a_N."""
        s_st, n_st = stats
        lower, upper = _bounds(self.bounds, "mean", self.column)
        h = float((upper - lower) / 2)
        a = _ratio_half_width(half_widths[s_st.key] * 2.0 ** s_st.n_bins,
                              half_widths[n_st.key], h, n)
        return builtins.min(a, 2 * h)


@aggregation("variance", *_BOUNDED, Param("std", "flag", False))
@dataclass(frozen=True)
class Variance(ColumnAggregation):
    """Variance (or standard deviation, ``std=True``) of a column clamped to ``bounds``.

    Three noisy statistics with a third of the budget each: S₁ = Σ(x − m), S₂ = Σ(x − m)²
    (m the midpoint; per record |x − m| ≤ h and (x − m)² ≤ h², h half the range) and the
    count N. The estimate is S₂/N − (S₁/N)² clamped to [0, h²] (its square root for std).
    The interval takes each noise bound at β/3 and the extreme values of that expression
    over the resulting box, so it covers the clamped values' (population) variance with
    probability ≥ 1 − β.
    """

    std: bool = False

    def output_name(self) -> str:
        return self.name or f"{self.column}_{'std' if self.std else 'var'}"

    def statistics(self, schema: nw.Schema, prefix: str) -> list[Statistic]:
        kind = _require_numeric(schema, self.column, "variance")
        lower, upper = _bounds(self.bounds, "variance", self.column)
        mid, half = (lower + upper) / 2, (upper - lower) / 2
        clean = _clean(self.column, kind, self.fill, lower, upper)
        lo_f, hi_f, mid_f = float_down(lower), float_up(upper), float(mid)
        centred = _clamp(clean.cast(nw.Float64), lo_f, hi_f) - mid_f
        k1 = _grid("float", -half, half)
        k2 = _grid("float", Fraction(0), half * half)
        h = float_up(half)
        s1, lo1, hi1 = _grid_ints(centred, k1, -h, h)
        s2, lo2, hi2 = _grid_ints(centred * centred, k2, 0.0, float_up(half * half))
        third = Fraction(1, 3)
        return [
            Statistic(f"{prefix}s1", StatKind.SUM, expr=s1.sum(), lower=lo1, upper=hi1, n_bins=k1,
                      weight=third),
            Statistic(f"{prefix}s2", StatKind.SUM, expr=s2.sum(), lower=lo2, upper=hi2, n_bins=k2,
                      weight=third),
            Statistic(f"{prefix}n", StatKind.COUNT, expr=clean.count(), weight=third),
        ]

    def finish(self, noisy: dict[str, np.ndarray], half_widths: dict[str, float],
               stats: list[Statistic], beta: float) -> dict[str, Any]:
        st1, st2, stn = stats
        lower, upper = _bounds(self.bounds, "variance", self.column)
        top = float((upper - lower) / 2) ** 2
        s1 = noisy[st1.key].astype(np.float64) * 2.0**st1.n_bins
        s2 = noisy[st2.key].astype(np.float64) * 2.0**st2.n_bins
        n = noisy[stn.key].astype(np.float64)
        a1 = half_widths[st1.key] * 2.0**st1.n_bins
        a2 = half_widths[st2.key] * 2.0**st2.n_bins
        an = half_widths[stn.key]
        safe_n = np.maximum(n, 1)
        est = np.where(n >= 1, s2 / safe_n - (s1 / safe_n) ** 2, top / 2).clip(0, top)
        n_lo, n_hi = n - an, n + an
        valid = n_lo >= 1
        n_lo = np.where(valid, n_lo, 1.0)
        e2_lo = np.maximum(s2 - a2, 0) / n_hi
        e2_hi = (s2 + a2) / n_lo
        m_ends = np.stack([(s1 - a1) / n_lo, (s1 - a1) / n_hi, (s1 + a1) / n_lo,
                           (s1 + a1) / n_hi])
        m_lo, m_hi = m_ends.min(axis=0), m_ends.max(axis=0)
        sq_max = np.maximum(m_lo**2, m_hi**2)
        sq_min = np.where((m_lo <= 0) & (m_hi >= 0), 0.0, np.minimum(m_lo**2, m_hi**2))
        ci_low = np.where(valid, e2_lo - sq_max, 0.0).clip(0, top)
        ci_high = np.where(valid, e2_hi - sq_min, top).clip(0, top)
        if self.std:
            est, ci_low, ci_high = np.sqrt(est), np.sqrt(ci_low), np.sqrt(ci_high)
        name = self.output_name()
        return {name: est, f"{name}_ci_low": ci_low, f"{name}_ci_high": ci_high}

    def beta_parts(self) -> int:
        return 3

    def expected_half_width(self, half_widths: dict[str, float], stats: list[Statistic],
                            n: float) -> float | None:
        """At a stated count n, with a₁, a₂, a_N the half-widths of S₁, S₂, N at β/3 and h
        half the range: |S̃₂/Ñ − S₂/n| ≤ e₂ = (a₂ + h²·a_N)/(n − a_N) and
        |S̃₁/Ñ − S₁/n| ≤ e₁ = (a₁ + h·a_N)/(n − a_N) (:func:`_ratio_half_width`), so the
        variance moves by at most e₂ + e₁·(2h + e₁) (|u² − v²| = |u − v|·|u + v|); the
        std by at most its square root (|√u − √v| ≤ √|u − v|). Capped at h² (h for std),
        the width of the clamped range of the output."""
        st1, st2, stn = stats
        lower, upper = _bounds(self.bounds, "variance", self.column)
        h = float((upper - lower) / 2)
        a_n = half_widths[stn.key]
        e1 = _ratio_half_width(half_widths[st1.key] * 2.0 ** st1.n_bins, a_n, h, n)
        e2 = _ratio_half_width(half_widths[st2.key] * 2.0 ** st2.n_bins, a_n, h * h, n)
        var = builtins.min(e2 + e1 * (2 * h + e1), h * h)
        return math.sqrt(var) if self.std else var


@aggregation("histogram", _COLUMN, Param("bins", "numbers", size=(2, MAX_BINS + 1)), _NAME,
             Param("non_negative", "flag", None))
@dataclass(frozen=True)
class Histogram(ColumnAggregation):
    """Row counts in bins of a numeric column (one output row per group × bin).

    ``bins`` are increasing edges e₀ < … < e_m; bin i is [eᵢ, eᵢ₊₁), the last one closed.
    Values outside [e₀, e_m], nulls and NaN fall in no bin (they are dropped).

    ``non_negative`` (default None, meaning True): a negative noisy count is shown as 0.
    Every count's interval is cut at 0 either way (a count is never negative, so the cut
    interval covers whenever the noise interval does). Both are post-processing of the
    noisy counts (free; Dwork & Roth Prop. 2.1); the clipped estimate is biased upwards
    near 0, so a sum of many clipped cells over-counts: pass ``non_negative=False`` for
    unbiased cells.
    """

    bins: Sequence[Number] | None = None
    non_negative: bool | None = None  # None: the default, True (kept out of describe())

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.bins, tuple | range):  # as JSON gives it back
            object.__setattr__(self, "bins", list(self.bins))
        if self.non_negative is True:  # one canonical form (describe) for the default
            object.__setattr__(self, "non_negative", None)

    def output_name(self) -> str:
        return self.name or "count"

    def edges(self) -> list[float]:
        if self.bins is None:
            raise BoundsError(f"histogram({self.column!r}) needs bins=[edges…]")
        return check_edges(self.bins)

    def statistics(self, schema: nw.Schema, prefix: str) -> list[Statistic]:
        kind = _require_numeric(schema, self.column, "histogram")
        edges = self.edges()
        x = nw.col(self.column)
        if kind == "float":
            x = x.fill_nan(None)
        index = nw.sum_horizontal(*[(x >= e).cast(nw.Int64) for e in edges[1:-1]]) if len(
            edges) > 2 else nw.lit(0)
        inside = (x >= edges[0]) & (x <= edges[-1])
        bin_expr = nw.when(inside).then(index).otherwise(-1)
        return [Statistic(f"{prefix}h", StatKind.BINS, bin_expr=bin_expr, n_bins=len(edges) - 1)]

    def labels(self) -> list[str]:
        e = self.edges()
        last = len(e) - 2
        return [f"[{e[i]:g}, {e[i + 1]:g}{']' if i == last else ')'}" for i in range(len(e) - 1)]

    def finish(self, noisy: dict[str, np.ndarray], half_widths: dict[str, float],
               stats: list[Statistic], beta: float) -> dict[str, Any]:
        key = stats[0].key  # integer counts: integer half-width
        return _count_interval(self.output_name(), noisy[key], int(half_widths[key]),
                               clip_estimate=self.non_negative is not False)


@aggregation("quantile", _COLUMN, Param("q", "number"), _BOUNDS, _CANDIDATES, _FILL, _METHOD,
             _NAME)
@dataclass(frozen=True)
class Quantile(ColumnAggregation):
    """The q-quantile of a numeric column by the exponential mechanism over candidates.

    Candidates: the integers in ``bounds`` when the column is integer and the range holds at
    most 1,000 of them, otherwise 1,001 evenly spaced points (or ``candidates=n`` points).
    The score of candidate c is minus the distance from q·n to [#{x < c}, #{x ≤ c}], so tied
    values score well; adding or removing a row moves every score by at most 1 (Smith 2011;
    Dwork & Roth §3.4). With probability ≥ 1 − β the released candidate's rank is within
    ``rank_error`` = s·(ln|C| + ln(1/β)) of q·n, s the mechanism's scale (D&R Thm 3.11);
    that bound is reported as ``<name>_rank_error``. ``<name>_ci_low`` / ``_ci_high`` are
    the declared bounds (:meth:`value_interval`: no value interval narrower than the clamp
    range is sound without reading the data's order statistics).
    """

    q: Number = 0.5
    candidates: int | None = None
    method: str = "exponential"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.method not in ("exponential", "tree"):
            raise DomainError(f"unknown quantile method {self.method!r}; use 'exponential' or "
                              "'tree'")

    def output_name(self) -> str:
        if self.name:
            return self.name
        return f"{self.column}_median" if self.level() == Fraction(1, 2) else (
            f"{self.column}_q{float(self.level()):g}")

    def level(self) -> Fraction:
        q = as_typed(self.q)
        if not 0 <= q <= 1:
            raise DomainError(f"quantile level must be in [0, 1], got {self.q!r}")
        return q

    def grid(self, kind: NumericKind) -> tuple[float, float, int]:
        """(first candidate, step, number of candidates)."""
        lower, upper = _bounds(self.bounds, "quantile", self.column)
        span = upper - lower
        if self.candidates is None and kind == "int" and lower.denominator == 1 and (
                upper.denominator == 1) and span <= 1000:
            return float(lower), 1.0, int(span) + 1
        m = self.candidates or 1001
        if m < 2:
            raise DomainError("a quantile needs at least 2 candidates")
        if 0 < span / (m - 1) < _BOUND_FLOOR:  # plan time: 1/step would not be a float
            raise BoundsError(f"bounds too small: the candidates of quantile({self.column!r}) "
                              f"are {readable(span / (m - 1))} apart, below 2^-960 (≈ 1e-289); "
                              "rescale the column (multiply it by a power of ten)")
        return float(lower), float(span) / (m - 1) if span else 1.0, m

    def statistics(self, schema: nw.Schema, prefix: str) -> list[Statistic]:
        kind = _require_numeric(schema, self.column, "quantile")
        if schema[self.column] == nw.Boolean:  # the compiler's candidates are for numbers
            raise ColumnError(f"quantile({self.column!r}) of a boolean column: release a "
                              "count or a mean instead")
        self.level()
        lower, upper = _bounds(self.bounds, "quantile", self.column)
        first, step, m = self.grid(kind)
        clean = _clean(self.column, kind, self.fill, lower, upper)
        x = clean.cast(nw.Float64).clip(float(lower), float(upper))
        # t = (x − c₀)/step; x = c_j ⇒ bin 2j + 1, c_{j−1} < x < c_j ⇒ bin 2j, so that
        # #{x < c_j} = Σ bins ≤ 2j and #{x ≤ c_j} = Σ bins ≤ 2j + 1
        t = (x - first) * (1.0 / step)  # not / step: see Query.bin
        b = nw.when(t == t.floor()).then(t * 2 + 1).otherwise(t.ceil() * 2)
        return [Statistic(f"{prefix}q", StatKind.BINS, bin_expr=b.clip(0, 2 * m - 1).cast(nw.Int64),
                          n_bins=2 * m)]

    def candidate_values(self, kind: NumericKind) -> np.ndarray:
        first, step, m = self.grid(kind)
        return first + step * np.arange(m)

    def scores(self, hist: np.ndarray) -> list[list[Fraction]]:
        """Per group, the exact score of every candidate c: minus the distance from q·n to
        [#{x < c}, #{x ≤ c}] (0 when c is a q-quantile, ties included)."""
        q = self.level()
        num, den = q.numerator, q.denominator
        out = []
        for row in np.asarray(hist, dtype=np.int64):
            cum = np.cumsum(row)
            n = int(cum[-1]) if cum.size else 0
            if n * builtins.max(num, den) >= 1 << 62:  # exact in Python integers instead
                cum = cum.astype(object)
            below, upto = cum[0::2] * den, cum[1::2] * den  # distances scaled by den
            distance = np.maximum(np.maximum(below - num * n, num * n - upto), 0)
            out.append([Fraction(-int(d), den) for d in distance])
        return out

    def finish(self, noisy: dict[str, np.ndarray], half_widths: dict[str, float],
               stats: list[Statistic], beta: float) -> dict[str, Any]:
        key = stats[0].key
        name = self.output_name()
        est = noisy[key].astype(np.float64)
        low, high = self.value_interval()
        return {name: est, f"{name}_ci_low": np.full(est.shape, low),
                f"{name}_ci_high": np.full(est.shape, high),
                f"{name}_rank_error": np.full(est.shape, half_widths[key])}

    def value_interval(self) -> tuple[float, float]:
        """The value interval reported with the quantile: the declared bounds [lower, upper].

        The mechanism's guarantee is in rank: with probability ≥ 1 − β the released
        candidate's rank is within ``rank_error`` of q·n. Turning a rank interval into a
        value interval needs the data's order statistics (which values lie within that many
        ranks of the release), a private read the release did not pay for; without them,
        the only value interval that provably covers the q-quantile of the clamped column
        is the clamp range itself (coverage 1, at no cost). Two extra exponential-mechanism
        picks at ranks q·n ∓ E are not enough either: when q·n < E (few rows, or q near 0
        or 1) the lower pick's guarantee no longer bounds its rank by q·n, and whether that
        happens depends on n. A sound narrower interval is post-processing of a noisy CDF
        (e.g. the tree method's noisy counts with simultaneous bounds, a root count for n),
        which the release would have to keep. The candidate grid cell around the release
        is not an interval for the quantile (it is the output's resolution) and is not
        reported as one.
        """
        lower, upper = _bounds(self.bounds, "quantile", self.column)
        return float_down(lower), float_up(upper)


def count(*, name: str | None = None) -> Count:
    """DP count of rows (per group). Sensitivity: ``max_rows`` of the privacy unit."""
    return Count(name=name)


def sum(column: str, bounds: tuple[Number, Number] | None = None, *, fill: Number | None = None,
        name: str | None = None) -> Sum:  # noqa: A001 - the field's name for it
    """DP sum of ``column`` clamped to ``bounds`` (required). Sensitivity:
    ``max_rows · max(|lower|, |upper|)``."""
    return Sum(name=name, column=column, bounds=bounds, fill=fill)


def mean(column: str, bounds: tuple[Number, Number] | None = None, *, fill: Number | None = None,
         name: str | None = None) -> Mean:
    """DP mean of ``column`` clamped to ``bounds`` (required); see :class:`Mean`."""
    return Mean(name=name, column=column, bounds=bounds, fill=fill)


def count_distinct(column: str | None = None, *, name: str | None = None) -> CountDistinct:
    """DP count of distinct privacy units, or of distinct values of ``column``, per group.

    Parameters
    ----------
    column : str, optional
        Without it: the number of distinct privacy units per group (rows under row-level
        privacy). With it: the number of distinct **non-null** values of ``column`` per
        group, counted on the contribution-bounded rows (nulls are not a value; a group
        whose rows are all null counts 0). The column must be key-like, the kinds a group
        key may have: integer, string, categorical/enum, boolean, date/time/duration.
    name : str, optional
        The output column (default ``"units"``, or ``"<column>_distinct"``).

    Returns
    -------
    CountDistinct
        The aggregation; its release has the columns ``name``, ``name_ci_low`` and
        ``name_ci_high`` (integer noisy counts and the (1 − β) noise interval).

    Raises
    ------
    ColumnError
        At plan time, before any debit: ``column`` is not in the table, or has a float,
        decimal, binary or nested type (NaN and −0.0 are a distinct value on some backends
        and not on others; map floats to keys first, e.g. with ``bin``).

    Notes
    -----
    Privacy (add/remove one unit). Without ``column``, a unit adds 1 to the distinct-unit
    count of at most min(G, M) groups: Δ₁ = min(G, M), Δ∞ = 1, Δ₂ = √min(G, M).

    With ``column``: after contribution bounding a unit has at most R rows in any group and
    at most M rows in total, in at most G groups. Let D_g(x) be the number of distinct
    non-null values of ``column`` among group g's rows. Removing a unit's r_g ≤ R rows
    from group g removes only values seen in those rows alone, so
    0 ≤ D_g(x) − D_g(x − u) ≤ r_g (and adding a unit raises D_g by at most r_g). The change
    vector is dominated entry-wise by the row-count change vector c = (r_g), hence has the
    row count's sensitivities (:func:`count`; :mod:`dpkit.core.stability`):

        Δ∞ = R,   Δ₁ = min(M, G·R),   Δ₂ = √(q·R² + t²),

    with q = min(G, ⌊M/R⌋) full groups and a remainder t = min(M − q·R, R) (t = 0 when
    q = G), and the statistic is released through the same row-count stability map and the
    one calibrated noise entry: discrete Laplace of scale s = Δ₁/ε, ε-DP (Dwork & Roth
    Thm 3.6; Canonne, Kamath & Steinke 2020 Alg. 2), or discrete Gaussian of variance σ²,
    Δ₂²/(2σ²)-zCDP (Bun & Steinke 2016 Prop. 1.6; CKS20 Thm 4). Under
    ``PrivacyUnit.rows()`` one row moves one group's distinct count by at most 1, as it
    moves its row count (M = G = R = 1); without a group-by the table is one group
    (Δ = min(M, R)). The guarantee holds for every ``column``: it needs no bound on the
    number of values. Counting the unit column itself is allowed but conservative
    (``count_distinct()`` without a column has Δ∞ = 1). Sources: PINQ's Distinct is a
    1-stable transformation (McSherry, SIGMOD 2009); the use case is McSherry & Mahajan,
    SIGCOMM 2010, §5.3 (worm payloads with many distinct sources and destinations).
    """
    return CountDistinct(name=name, column=column)


@aggregation("std", *_BOUNDED)
def std(column: str, bounds: tuple[Number, Number] | None = None, *, fill: Number | None = None,
        name: str | None = None) -> Variance:
    """DP standard deviation of ``column`` clamped to ``bounds``; see :class:`Variance`."""
    return Variance(name=name, column=column, bounds=bounds, fill=fill, std=True)


def variance(column: str, bounds: tuple[Number, Number] | None = None, *,
             fill: Number | None = None,
             name: str | None = None) -> Variance:
    """DP variance of ``column`` clamped to ``bounds``; see :class:`Variance`."""
    return Variance(name=name, column=column, bounds=bounds, fill=fill)


_QUANTILE_ALIAS = (_COLUMN, _BOUNDS, _CANDIDATES, _FILL, _METHOD, _NAME)


@aggregation("median", *_QUANTILE_ALIAS)
def median(column: str, bounds: tuple[Number, Number] | None = None, **kw: Any) -> Quantile:
    """DP median: :func:`quantile` at q = 1/2."""
    return quantile(column, Fraction(1, 2), bounds, **kw)


@aggregation("min", *_QUANTILE_ALIAS)
def min(column: str, bounds: tuple[Number, Number] | None = None, *,  # noqa: A001
        name: str | None = None, **kw: Any) -> Quantile:
    """DP minimum: the 0-quantile (the smallest candidate with no value below it, up to
    the exponential mechanism's rank error)."""
    return quantile(column, 0, bounds, name=name or f"{column}_min", **kw)


@aggregation("max", *_QUANTILE_ALIAS)
def max(column: str, bounds: tuple[Number, Number] | None = None, *,  # noqa: A001
        name: str | None = None, **kw: Any) -> Quantile:
    """DP maximum: the 1-quantile."""
    return quantile(column, 1, bounds, name=name or f"{column}_max", **kw)


def histogram(column: str, bins: Sequence[Number] | None = None, *, name: str | None = None,
              non_negative: bool = True) -> Histogram:
    """DP histogram of ``column`` over the bin ``edges`` in ``bins``; see :class:`Histogram`
    (``non_negative=False`` keeps negative noisy counts)."""
    return Histogram(name=name, column=column, bins=bins,
                     non_negative=None if non_negative else False)


def quantile(column: str, q: Number, bounds: tuple[Number, Number] | None = None, *,
             candidates: int | None = None, fill: Number | None = None, name: str | None = None,
             method: str = "exponential") -> Quantile:
    """DP q-quantile of ``column`` over a bounded candidate set: ``method="exponential"``
    (the exponential mechanism, default) or ``"tree"`` (a noisy 16-ary hierarchical
    histogram searched top-down, :mod:`dpkit.mechanisms.tree_quantile`; its noisy counts
    serve every quantile level equally)."""
    return Quantile(name=name, column=column, q=q, bounds=bounds, candidates=candidates,
                    fill=fill, method=method)
