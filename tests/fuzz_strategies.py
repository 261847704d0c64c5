"""Strategies and harness of the grey-box fuzzer (tests/test_fuzz.py).

Tables have one fixed schema (``SCHEMA``) whose values include extremes (±2^62, 2^63 − 1,
±1e308, ±inf, NaN, nulls, -0.0, 1e-300), strings that parse equal ("1", "1.0") and the
sentinels ``SECRET``, ``SECRET_FLOAT`` and ``SECRET_INT``, which no query ever mentions: any
error message or log line that contains one of ``MARKERS`` printed a data value.

Queries come from two grammars: the server's JSON grammar (``json_query``, turned into a
:class:`~dpkit.frame.Query` by :func:`dpkit.server.protocol.to_query`) and Polars expressions
for library mode (``library_query``: row-wise operations, plus aggregating, windowed and
unit-rewriting ones that must be refused). Both share the group-by and aggregation specs, whose
keys include values that collide after conversion to the column's type.

The harness that runs them and checks the properties is :mod:`fuzz_harness`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
from hypothesis import strategies as st

import dpkit as dp
from dpkit.frame import aggregates
from dpkit.frame.query import Query
from dpkit.frame.session import Session

SECRET = "SECRET_6a1f"
SECRET_FLOAT = 987654321.123
SECRET_INT = 987654321987
MARKERS = ("SECRET", "987654321", "9.87654", "9.8765e")
INF, NAN = math.inf, math.nan

SCHEMA: dict[str, Any] = {"id": pl.Int64, "g": pl.Int64, "s": pl.String, "x": pl.Float64,
                          "n": pl.Int64, "b": pl.Boolean, "c": pl.Categorical, "d": pl.Date}
VALUES: dict[str, list[Any]] = {
    "id": [0, 1, 2, 3, None],
    "g": [0, 1, 2, 3, -1, None, 2**62, -(2**62)],
    "s": ["a", "b", "1", "1.0", "A", "", " a", None, SECRET],
    "x": [0.0, 1.0, 2.5, -0.0, 0.5, 3.0, -7.25, None, NAN, INF, -INF, 1e308, -1e308, 1e-300,
          2.0**62, SECRET_FLOAT],
    "n": [0, 1, 3, -1, 7, None, 2**62, -(2**62), 2**63 - 1, -(2**63), SECRET_INT],
    "b": [True, False, None],
    "c": ["u", "v", "w", None],
    "d": [date(2020, 1, 1), date(2020, 6, 30), date(1970, 1, 1), None, date(1, 1, 1),
          date(9999, 12, 31)],
}
NEW_UNITS = [7, None, -5, 2**62]  # identifiers of an added unit (one not already present)


def frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The table of ``rows`` with the fixed schema (empty tables keep it)."""
    return pl.DataFrame({c: pl.Series(c, [r[c] for r in rows], dtype=t)
                         for c, t in SCHEMA.items()})


row = st.fixed_dictionaries({c: st.sampled_from(v) for c, v in VALUES.items()})


class Pair:
    """Neighbouring tables: ``large`` is ``small`` plus one row (row-level units, inserted
    anywhere) or plus one unit's rows (appended, so row keys can be shared)."""

    def __init__(self, small: pl.DataFrame, large: pl.DataFrame, added: int) -> None:
        self.small, self.large, self.added = small, large, added

    def __repr__(self) -> str:
        return (f"Pair(small={self.small.to_dicts()!r},\n     large=small + "
                f"{self.large.tail(self.added).to_dicts()!r})")


@st.composite
def neighbours(draw: Any, unit: dp.PrivacyUnit, max_rows: int = 8, rows_of: Any = None,
               build: Callable[[list[dict[str, Any]]], pl.DataFrame] = frame) -> Pair:
    """Neighbouring tables of ``rows_of`` rows (default :data:`row`) built by ``build``."""
    one = row if rows_of is None else rows_of
    rows = draw(st.lists(one, max_size=max_rows))
    if unit.column is None:
        pos = draw(st.integers(0, len(rows)))
        extra = draw(one)
        return Pair(build(rows), build([*rows[:pos], extra, *rows[pos:]]), 1)
    present = {r["id"] for r in rows}
    new_id = draw(st.sampled_from([i for i in NEW_UNITS if i not in present]))
    k = draw(st.integers(1, unit.max_rows + 3))
    extra = [{**draw(one), "id": new_id} for _ in range(k)]
    return Pair(build(rows), build(rows + extra), k)


units = st.one_of(
    st.just(dp.PrivacyUnit.rows()),
    st.builds(lambda m, g, r: dp.PrivacyUnit.by("id", m, max_groups=g, max_rows_per_group=r),
              st.integers(1, 3), st.none() | st.integers(1, 2), st.none() | st.integers(1, 2)))
measures = st.sampled_from(["pure", "zcdp", "approx"])
BUDGETS = {"pure": dp.PureDP(10**9), "zcdp": dp.ZCDP(10**9),
           "approx": dp.ApproxDP(10**9, Fraction(1, 2))}
CONFIG_BUDGETS = {"pure": {"measure": "pure", "epsilon": 10**9},
                  "zcdp": {"measure": "zcdp", "rho": 10**9},
                  "approx": {"measure": "approx", "epsilon": 10**9, "delta": "1/2"}}

# -- the server's JSON grammar --------------------------------------------------------------
# Mostly well-typed expressions (so that most queries are accepted and reach the data), and
# a share of untyped ones (which must be refused before the debit, or run totally).
NUM_COLUMNS, ALL_COLUMNS = ["g", "x", "n"], ["g", "s", "x", "n", "b", "c", "d", "id", "new1"]
NUM_LITERALS = [0, 1, 2, -1, 3, 10, 0.5, -0.0, 1e308, -1e308, 2**62, 2**63 - 1, -(2**63),
                1e-300]
STR_LITERALS = ["a", "1", "", "u", " a"]
LITERALS = [*NUM_LITERALS, *STR_LITERALS, True, False]
NUMBERS = [0, 1, -1, 10, 0.5, "1/3", 100, 1e308, -1e308, 2**62, -(2**62), 1e-300, -7.25]
EDGES = [-1e308, -1, 0, 0.5, 1, 2, 3, 10, 1e308]
ARITH, COMPARE = ["+", "-", "*", "/"], [">=", ">", "<=", "<", "==", "!="]


def _col(names: list[str]) -> Any:
    return st.builds(lambda c: {"col": c}, st.sampled_from(names))


def _lit(values: list[Any]) -> Any:
    return st.builds(lambda v: {"lit": v}, st.sampled_from(values))


def _op(ops: list[str], *args: Any) -> Any:
    return st.builds(lambda o, *a: {"op": o, "args": list(a)}, st.sampled_from(ops), *args)


json_num = st.recursive(st.one_of(_col(NUM_COLUMNS), _lit(NUM_LITERALS)),
                        lambda sub: _op(ARITH, sub, sub), max_leaves=4)
json_str = st.one_of(_col(["s", "c"]), _lit(STR_LITERALS))
json_cond_leaf = st.one_of(
    _col(["b"]), _lit([True, False]), _op(COMPARE, json_num, json_num),
    _op(["==", "!="], json_str, json_str),
    _op(["is_null"], st.one_of(_col(ALL_COLUMNS), json_num)))
json_cond = st.recursive(json_cond_leaf, lambda sub: st.one_of(
    st.builds(lambda o, a: {"op": o, "args": a}, st.sampled_from(["&", "|"]),
              st.lists(sub, min_size=2, max_size=3)), _op(["~"], sub)), max_leaves=4)
json_untyped = st.recursive(
    st.one_of(_col([*ALL_COLUMNS, "zz"]), _lit(LITERALS)),
    lambda sub: st.one_of(_op([*ARITH, *COMPARE], sub, sub),
                          st.builds(lambda o, a: {"op": o, "args": a}, st.sampled_from(["&", "|"]),
                                    st.lists(sub, min_size=2, max_size=3)),
                          _op(["~", "is_null"], sub)), max_leaves=5)
json_value = st.one_of(json_num, json_num, json_cond, json_str, json_untyped)
step_column = st.sampled_from(ALL_COLUMNS)
num_column = st.sampled_from(["x", "x", "n", "g", "new1", "s"])
number = st.sampled_from(NUMBERS)
scalar = st.sampled_from(LITERALS)
edges = st.lists(st.sampled_from(EDGES), min_size=2, max_size=4, unique=True).map(sorted)


def _ordered(pair: tuple[Any, Any]) -> list[Any]:
    """Two numbers in increasing order (strings are exact rationals)."""
    a, b = pair
    return [a, b] if Fraction(a) <= Fraction(b) else [b, a]


ordered = st.one_of(st.tuples(number, number).map(_ordered),
                    st.tuples(number, number).map(list))  # some in the wrong order
json_step = st.one_of(
    st.builds(lambda e: {"step": "filter", "expr": e}, st.one_of(*[json_cond] * 4,
                                                                  json_untyped)),
    st.builds(lambda c, e: {"step": "with_columns", "columns": {c: e}},
              st.sampled_from(["new1", "new1", "g", "x", "n", "s", "id"]), json_value),
    st.builds(lambda c, b: {"step": "clamp", "column": c, "lower": b[0], "upper": b[1]},
              num_column, ordered),
    st.builds(lambda c, w, name: {"step": "bin", "column": c, "width": w,
                                  **({"name": name} if name else {})},
              num_column, st.sampled_from([1, 10, 0.5, "1/3", 1e-300, 1e308]),
              st.sampled_from([None, "new1"])),
    st.builds(lambda c, e, name: {"step": "bin", "column": c, "edges": e,
                                  **({"name": name} if name else {})},
              num_column, edges, st.sampled_from([None, "new1"])),
    st.builds(lambda c, m, d: {"step": "map", "column": c, "mapping": m,
                               **({"default": d} if d is not None else {})},
              st.sampled_from(["s", "c", "g", "b"]),
              st.lists(st.tuples(scalar, scalar).map(list), min_size=1, max_size=3,
                       unique_by=lambda kv: repr(kv[0])), st.none() | scalar),
    st.builds(lambda c, v: {"step": "fill_null", "column": c, "value": v},
              st.sampled_from(["x", "n", "g", "s", "b"]), scalar),
    st.builds(lambda cs: {"step": "drop_nulls", "columns": cs},
              st.lists(step_column, max_size=2, unique=True)),
)

# group keys per column: values of the column's type, and values that collide with them
# after conversion to that type (or are of another type)
KEYS_TYPED: dict[str, list[Any]] = {
    "g": [0, 1, 2, 3, -1, 2**62], "n": [0, 1, 3, -1, 7, 2**63 - 1],
    "x": [0.0, 1.0, 0.5, 2.5, -7.25, 3.0, 1e308], "s": ["a", "b", "1", "1.0", "A", "", " a"],
    "b": [True, False], "c": ["u", "v", "w", "zz"], "new1": [0, 1, True, False, 0.5, "a"]}
KEYS_COLLIDING: dict[str, list[Any]] = {
    "g": [1.0, 1.0001, -0.0, 0.0, "1", "01", True, NAN, 2.0**62],
    "n": [1.0, 1.5, "1", -0.0, 0.0, 2.0**63, 9.2e18],
    "x": [-0.0, 0.0, 1, 2**60, 2**60 + 1, 2**53, 2**53 + 1, NAN, "1", True],
    "s": [1, 1.0, True], "b": [1, 0, 1.0, "true"], "c": ["a", 1],
    "d": ["2020-01-01", "2020-1-1", 0], "new1": [1.0, -0.0, 0.0, NAN]}
GROUP_COLUMNS = ["g", "g", "x", "n", "s", "s", "b", "c", "d", "new1"]


@st.composite
def group_keys(draw: Any, column: str) -> list[Any]:
    pool = KEYS_TYPED.get(column, [])
    if not pool or draw(st.integers(0, 3)) == 0:
        pool = pool + KEYS_COLLIDING[column]
    return draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))


# private selections: partition selection by each method, and limited-domain top-k (with k,
# k̄ at and around their limits, some refused before the debit: k = 0, k̄ < k, k > MAX_K)
json_selection = st.one_of(
    st.builds(lambda m, e, d: {"epsilon": e, "delta": d, **({"method": m} if m else {})},
              st.sampled_from([None, "truncated_geometric", "laplace", "gaussian"]),
              st.sampled_from([1, "1/2", 2]), st.sampled_from(["1/1000000", 1e-9])),
    st.builds(lambda k, kb, e, d: {"method": "limited_domain", "k": k, "epsilon": e,
                                   "delta": d, **({"k_bar": kb} if kb is not None else {})},
              st.sampled_from([1, 1, 2, 3, 0, 1001, True, 2.0]),
              st.sampled_from([None, None, 1, 2, 5, 100_001]),
              st.sampled_from([1, "1/2", 3]), st.sampled_from(["1/1000000", 1e-9, 0])))


@st.composite
def json_group_by(draw: Any) -> dict[str, Any]:
    cols = draw(st.lists(st.sampled_from(GROUP_COLUMNS), min_size=1, max_size=2, unique=True))
    if draw(st.integers(0, 4)) == 0:
        return {"columns": cols, "selection": draw(json_selection)}
    keys = {c: draw(group_keys(c)) for c in cols}
    return {"columns": cols, "keys": keys[cols[0]] if len(cols) == 1 else keys}


AGG_COLUMNS = ["x", "x", "n", "n", "g", "new1", "b", "s", "d"]
BOUNDS = [[0, 10], [-1, 1], [0, 1], [0, 1e308], [-1e308, 1e308], [-(2**62), 2**62],
          [0, 2**63 - 1], ["1/3", 3], [0, 0], [-7.25, 3], [0, 1e-300], [-(2**63), 0], [5, 1]]
COMMON_BOUNDS = [[0, 10], [-1, 1], [0, 1], ["1/3", 3], [-7.25, 3], [0, 100], [-(2**62), 2**62]]
bounds = st.one_of(*[st.sampled_from(COMMON_BOUNDS)] * 4, st.sampled_from(BOUNDS), st.none())
json_agg = st.one_of(
    st.sampled_from([{"agg": "count"}, {"agg": "count_distinct"}]),
    st.builds(lambda c: {"agg": "count_distinct", "column": c},
              st.sampled_from([*AGG_COLUMNS, "id", "c"])),
    st.builds(lambda a, c, b, f: {"agg": a, "column": c, **({"bounds": b} if b else {}),
                                  **({"fill": f} if f is not None else {})},
              st.sampled_from(["sum", "sum", "mean", "variance", "std"]),
              st.sampled_from(AGG_COLUMNS), bounds,
              st.sampled_from([None, None, None, 0, 1, 0.5, 1e308])),
    st.builds(lambda a, c, b, q, m, method: {
        "agg": a, "column": c, "method": method, **({"bounds": b} if b else {}),
        **({"q": q} if a == "quantile" else {}), **({"candidates": m} if m else {})},
        st.sampled_from(["quantile", "median", "min", "max"]), st.sampled_from(AGG_COLUMNS),
        bounds, st.sampled_from([0, 0.5, "1/3", 1, 0.9]), st.sampled_from([None, 2, 3, 11]),
        st.sampled_from(["exponential", "tree"])),
    st.builds(lambda c, e: {"agg": "histogram", "column": c, "bins": e},
              st.sampled_from(AGG_COLUMNS), edges),
)
json_aggs = st.lists(json_agg, min_size=1, max_size=3,
                     unique_by=lambda a: (a["agg"], a.get("column"))).map(
    lambda aggs: [a for a in aggs if a["agg"] == "histogram"][:1] or aggs)  # on its own


@st.composite
def json_budget(draw: Any, measure: str, n_aggs: int) -> dict[str, Any]:
    eps = draw(st.sampled_from([1, 0.5, "1/3", 2]))
    budget: dict[str, Any] = {"epsilon": eps}
    if measure == "zcdp" and draw(st.booleans()):
        budget = {"rho": draw(st.sampled_from([1, "1/8", 0.5]))}
    if measure == "approx" and draw(st.booleans()):
        budget["delta"] = draw(st.sampled_from(["1/1000000", 1e-9]))
    if draw(st.integers(0, 9)) == 0:  # an accuracy target instead of a budget
        budget = {"alpha": draw(st.sampled_from([5, 100, "1/2"])),
                  "confidence": draw(st.sampled_from([0.9, 0.95]))}
        if measure == "approx" and draw(st.booleans()):
            budget["delta"] = "1/1000000"
    if n_aggs > 1 and draw(st.integers(0, 4)) == 0:
        budget["split"] = draw(st.lists(st.sampled_from([1, 2, "1/3"]), min_size=n_aggs,
                                        max_size=n_aggs))
    return budget


@st.composite
def json_query(draw: Any, measure: str) -> dict[str, Any]:
    """A request of the server's JSON grammar (mostly well-formed, not always)."""
    aggs = draw(json_aggs)
    body: dict[str, Any] = {"steps": draw(st.lists(json_step, max_size=3)), "aggs": aggs,
                            "budget": draw(json_budget(measure, len(aggs)))}
    if draw(st.booleans()):
        body["group_by"] = draw(json_group_by())
    return body


# -- library mode: Polars expressions -------------------------------------------------------
class PExpr:
    """A Polars expression with the source text that builds it (its repr)."""

    def __init__(self, text: str, expr: Any) -> None:
        self.text, self.expr = text, expr

    def __repr__(self) -> str:
        return self.text


Fn = Callable[..., Any]


def _pcol(names: list[str]) -> Any:
    return st.builds(lambda c: PExpr(f"pl.col({c!r})", pl.col(c)), st.sampled_from(names))


def _plit(values: list[Any]) -> Any:
    return st.builds(lambda v: PExpr(f"pl.lit({v!r})", pl.lit(v)), st.sampled_from(values))


def _papply(fns: list[tuple[str, Fn]], *args: Any) -> Any:
    def build(f: tuple[str, Fn], *a: PExpr) -> PExpr:
        return PExpr(f[0].format(*(x.text for x in a)), f[1](*(x.expr for x in a)))
    return st.builds(build, st.sampled_from(fns), *args)


# row-wise operations, by the type they return
NUM_UNARY: list[tuple[str, Fn]] = [
    ("{}.abs()", lambda e: e.abs()), ("(-{})", lambda e: -e),
    ("{}.fill_null(0)", lambda e: e.fill_null(0)), ("{}.clip(0, 10)", lambda e: e.clip(0, 10)),
    ("{}.floor()", lambda e: e.floor()), ("{}.round(1)", lambda e: e.round(1)),
    ("{}.cast(pl.Int64)", lambda e: e.cast(pl.Int64)),
    ("{}.cast(pl.Int64, strict=False)", lambda e: e.cast(pl.Int64, strict=False)),
    ("{}.cast(pl.Int32)", lambda e: e.cast(pl.Int32)),
    ("{}.cast(pl.Float64)", lambda e: e.cast(pl.Float64)), ("{}.sqrt()", lambda e: e.sqrt()),
    ("{}.pow(2)", lambda e: e.pow(2)), ("{}.fill_nan(0)", lambda e: e.fill_nan(0))]
NUM_BINARY: list[tuple[str, Fn]] = [
    ("({} + {})", lambda a, b: a + b), ("({} - {})", lambda a, b: a - b),
    ("({} * {})", lambda a, b: a * b), ("({} / {})", lambda a, b: a / b),
    ("({} // {})", lambda a, b: a // b), ("({} % {})", lambda a, b: a % b),
    ("pl.min_horizontal({}, {})", lambda a, b: pl.min_horizontal(a, b))]
STR_UNARY: list[tuple[str, Fn]] = [
    ("{}.str.to_uppercase()", lambda e: e.str.to_uppercase()),
    ("{}.str.strip_chars()", lambda e: e.str.strip_chars()),
    ("{}.cast(pl.String)", lambda e: e.cast(pl.String)),
    ("{}.cast(pl.Enum(['a', 'b']))", lambda e: e.cast(pl.Enum(["a", "b"])))]
TO_NUM: list[tuple[str, Fn]] = [
    ("{}.str.len_chars()", lambda e: e.str.len_chars()), ("{}.dt.year()", lambda e: e.dt.year()),
    ("{}.cast(pl.Int64)", lambda e: e.cast(pl.Int64)),
    ("{}.cast(pl.Float64, strict=False)", lambda e: e.cast(pl.Float64, strict=False))]
COND_OF_NUM: list[tuple[str, Fn]] = [
    ("({} > {})", lambda a, b: a > b), ("({} <= {})", lambda a, b: a <= b),
    ("({} == {})", lambda a, b: a == b), ("({} != {})", lambda a, b: a != b)]
COND_UNARY: list[tuple[str, Fn]] = [
    ("{}.is_null()", lambda e: e.is_null()), ("{}.is_nan()", lambda e: e.is_nan()),
    ("{}.is_in([0, 1])", lambda e: e.is_in([0, 1])), ("{}.is_finite()", lambda e: e.is_finite())]
STR_COND: list[tuple[str, Fn]] = [
    ("{}.str.contains('a', literal=True)", lambda e: e.str.contains("a", literal=True)),
    ("{}.str.starts_with('S')", lambda e: e.str.starts_with("S")),
    ("({} == 'a')", lambda e: e == "a")]
BOOL: list[tuple[str, Fn]] = [("({} & {})", lambda a, b: a & b), ("({} | {})", lambda a, b: a | b)]
# not row-wise (one row changes others), or writing columns not named in advance: refused
NOT_ROWWISE: list[tuple[str, Fn]] = [
    ("{}.mean()", lambda e: e.mean()), ("{}.any()", lambda e: e.any()),
    ("{}.skew()", lambda e: e.skew()), ("{}.shift(1)", lambda e: e.shift(1)),
    ("{}.rank()", lambda e: e.rank()), ("{}.cum_sum()", lambda e: e.cum_sum()),
    ("{}.max().over('g')", lambda e: e.max().over("g")),
    ("{}.approx_n_unique()", lambda e: e.approx_n_unique()),
    ("{}.entropy()", lambda e: e.entropy()), ("{}.rle_id()", lambda e: e.rle_id()),
    ("{}.max_by('x')", lambda e: e.max_by("x")),
    ("{}.search_sorted(1)", lambda e: e.search_sorted(1)),
    ("{}.extend_constant(1, 1)", lambda e: e.extend_constant(1, 1)),
    ("{}.index_of(1)", lambda e: e.index_of(1)), ("{}.peak_max()", lambda e: e.peak_max()),
    ("{}.bitwise_or()", lambda e: e.bitwise_or()), ("{}.kurtosis()", lambda e: e.kurtosis()),
    ("{}.rolling_mean(2)", lambda e: e.rolling_mean(2)), ("{}.diff()", lambda e: e.diff()),
    ("{}.sum()", lambda e: e.sum()), ("{}.first()", lambda e: e.first()),
    ("{0}.append({0})", lambda e: e.append(e)), ("{}.implode().list.first()",
                                               lambda e: e.implode().list.first()),
    ("{}.unique_counts()", lambda e: e.unique_counts()), ("{}.mode()", lambda e: e.mode()),
    ("{}.is_duplicated()", lambda e: e.is_duplicated()), ("{}.rank().over('s')",
                                                           lambda e: e.rank().over("s"))]

pl_num = st.recursive(
    st.one_of(_pcol(["x", "n", "g"]), _plit([0, 1, -1, 2, 0.5, 1e308, 2**62, 2**63 - 1])),
    lambda sub: st.one_of(_papply(NUM_UNARY, sub), _papply(NUM_BINARY, sub, sub),
                          _papply(TO_NUM, _pcol(["s", "d", "b"]))), max_leaves=4)
pl_str = st.one_of(_pcol(["s", "c"]), _papply(STR_UNARY, _pcol(["s", "c", "x"])))
pl_cond = st.recursive(
    st.one_of(_pcol(["b"]), _papply(COND_OF_NUM, pl_num, pl_num), _papply(COND_UNARY, pl_num),
              _papply(STR_COND, pl_str)),
    lambda sub: st.one_of(_papply(BOOL, sub, sub), _papply([("(~{})", lambda e: ~e)], sub)),
    max_leaves=4)
pl_when = st.builds(lambda a, b, c: PExpr(f"pl.when({a.text}).then({b.text}).otherwise("
                                          f"{c.text})", pl.when(a.expr).then(b.expr)
                                          .otherwise(c.expr)), pl_cond, pl_num, pl_num)
pl_bad = _papply(NOT_ROWWISE, st.one_of(pl_num, pl_cond))
pl_value = st.one_of(pl_num, pl_num, pl_cond, pl_str, pl_when, pl_bad)


def _bad_cond(e: PExpr) -> PExpr:
    return PExpr(f"({e.text} == 1)", e.expr == 1)


pl_filter = st.one_of(pl_cond, pl_cond, pl_cond, pl_bad.map(_bad_cond),
                      _papply(BOOL, pl_cond, pl_bad.map(_bad_cond)))
# steps that write the unit column under a name not known in advance (finding 4)
_REWRITES = [
    ("with_columns(pl.col('^d$').name.prefix('i'))",
     lambda q: q.with_columns(pl.col("^d$").name.prefix("i"))),
    ("with_columns(pl.struct(id=pl.col('g')).struct.unnest())",
     lambda q: q.with_columns(pl.struct(id=pl.col("g")).struct.unnest())),
    ("with_columns(pl.struct(pl.col('g')).struct.rename_fields(['id']).struct.unnest())",
     lambda q: q.with_columns(pl.struct(pl.col("g")).struct.rename_fields(["id"])
                              .struct.unnest())),
    ("with_columns(pl.col('g').alias('id'))", lambda q: q.with_columns(pl.col("g").alias("id"))),
    ("with_columns(pl.col('id') + 1)", lambda q: q.with_columns(pl.col("id") + 1)),
    ("with_columns(pl.col('id').name.suffix(''))",
     lambda q: q.with_columns(pl.col("id").name.suffix(""))),
    ("select(pl.all().exclude('id'), pl.col('g').alias('id'))",
     lambda q: q.select(pl.all().exclude("id"), pl.col("g").alias("id"))),
]


class LStep:
    """A library-mode step with its source text."""

    def __init__(self, text: str, apply: Callable[[Query], Query]) -> None:
        self.text, self.apply = text, apply

    def __repr__(self) -> str:
        return f".{self.text}"


def _alias(name: str, e: PExpr) -> LStep:
    return LStep(f"with_columns({e.text}.alias({name!r}))",
                 lambda q: q.with_columns(e.expr.alias(name)))


lib_step = st.one_of(
    st.builds(lambda e: LStep(f"filter({e.text})", lambda q: q.filter(e.expr)), pl_filter),
    st.builds(lambda n, e: LStep(f"with_columns({n}={e.text})",
                                 lambda q: q.with_columns(**{n: e.expr})),
              st.sampled_from(["new1", "new1", "g", "x", "s"]), pl_value),
    st.builds(_alias, st.sampled_from(["new1", "x", "n"]), pl_value),
    st.builds(lambda e: LStep(f"select('id', 'g', 'x', 's', new1={e.text})",
                              lambda q: q.select("id", "g", "x", "s", new1=e.expr)), pl_value),
    *[st.sampled_from([LStep(t, f) for t, f in _REWRITES])] * 2,
)


def _flavoured(value: Any, flavour: str) -> Any:
    """``value`` as another number type (library mode takes numpy, Fraction and Decimal)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    exact = Fraction(value) if not isinstance(value, float) else value
    if flavour == "numpy":
        return np.float64(float(exact)) if isinstance(value, float | str) else np.int64(value)
    if flavour == "fraction":
        return Fraction(exact)
    if flavour == "decimal":
        return Decimal(str(float(exact))) if isinstance(value, str) else Decimal(value)
    return exact if isinstance(value, str) else value


def library_agg(spec: dict[str, Any], flavour: str) -> aggregates.Aggregation:
    """The public dpkit aggregation for a JSON aggregation ``spec``."""
    kind = spec["agg"]
    if kind == "count":
        return dp.count()
    if kind == "count_distinct":
        return dp.count_distinct(spec.get("column"))
    if kind == "histogram":
        return dp.histogram(spec["column"], [_flavoured(b, flavour) for b in spec["bins"]])
    b = spec.get("bounds")
    bnds = None if b is None else (_flavoured(b[0], flavour), _flavoured(b[1], flavour))
    if kind in ("sum", "mean", "variance", "std"):
        make = {"sum": dp.sum, "mean": dp.mean, "variance": dp.variance, "std": dp.std}[kind]
        return make(spec["column"], bnds, fill=spec.get("fill"))
    common = {"candidates": spec.get("candidates"), "method": spec.get("method", "exponential")}
    if kind == "quantile":
        return dp.quantile(spec["column"], _flavoured(spec["q"], flavour), bnds, **common)
    make_q = {"median": dp.median, "min": dp.min, "max": dp.max}[kind]
    return make_q(spec["column"], bnds, **common)


def library_selection(doc: dict[str, Any]) -> dp.PartitionSelection | dp.TopKSelection:
    """The public selection object for a JSON selection ``doc`` (the library's own types)."""
    eps, delta = Fraction(doc["epsilon"]), Fraction(doc["delta"])
    if doc.get("method") == "limited_domain":
        return dp.TopKSelection(doc["k"], eps, delta, doc.get("k_bar"))
    return dp.PartitionSelection(eps, delta, doc.get("method", "truncated_geometric"))


PARTITION_KEYS: dict[str, list[Any]] = {
    "x": [2**60, 2**60 + 1, 1, 1.0, -0.0, 0.0, NAN, 0.5],
    "g": [0, 1, 1.0, True, 2**62, "1"], "id": [0, 1, 2, 3, 1.0], "s": ["a", "b", "1"]}


@dataclass(frozen=True)
class LibraryQuery:
    """A library-mode query: steps, then a group-by or a partition, then aggregations."""

    steps: tuple[LStep, ...]
    group_by: dict[str, Any] | None
    partition: tuple[str, tuple[Any, ...]] | None
    aggs: tuple[dict[str, Any], ...]
    budget: dict[str, Any]
    flavour: str

    def jobs(self, session: Session) -> list[tuple[Query, dict[str, Any]]]:
        """The (query, release keyword arguments) to run; raises for refused queries."""
        q = session.query()
        for step in self.steps:
            q = step.apply(q)
        g = self.group_by
        if g is not None and "selection" in g:
            q = q.group_by(*g["columns"], selection=library_selection(g["selection"]))
        elif g is not None:
            q = q.group_by(*g["columns"], keys=g["keys"])
        kwargs = {k: ([_flavoured(w, self.flavour) for w in v] if k == "split" else
                      v if k == "confidence" else _flavoured(v, self.flavour))
                  for k, v in self.budget.items()}
        aggs = [library_agg(a, self.flavour) for a in self.aggs]
        if self.partition is None:
            return [(q.agg(*aggs), kwargs)]
        column, keys = self.partition
        return [(part.agg(*aggs), kwargs) for part in q.partition(column, list(keys)).values()]


@st.composite
def library_query(draw: Any, measure: str, unit: dp.PrivacyUnit) -> LibraryQuery:
    aggs = tuple(draw(json_aggs))
    budget = draw(json_budget(measure, len(aggs)))
    group_by, partition = None, None
    mode = draw(st.sampled_from(["none", "group_by", "partition"]))
    if mode == "group_by":
        group_by = draw(json_group_by())
        if "keys" in group_by and draw(st.booleans()):  # as a KeySet, or with Date keys
            cols, keys = group_by["columns"], group_by["keys"]
            group_by["keys"] = dp.KeySet(keys if isinstance(keys, dict) else {cols[0]: keys})
    elif mode == "partition":
        column = "id" if unit.column else draw(st.sampled_from(sorted(PARTITION_KEYS)))
        keys = draw(st.lists(st.sampled_from(PARTITION_KEYS[column]), min_size=1, max_size=3))
        partition = (column, tuple(keys))
    return LibraryQuery(tuple(draw(st.lists(lib_step, max_size=2))), group_by, partition, aggs,
                        budget, draw(st.sampled_from(["plain", "plain", "numpy", "fraction",
                                                      "decimal"])))


# -- library mode: attacks on the row-wise guard (findings 3 and 4) ------------------------
# well-typed expressions with a node that is not row-wise (one row changes others: an
# aggregation broadcast back, a window, a scan, a membership test against a column) somewhere
# inside, or a step writing the unit column; each must be refused at plan time
BAD_NUM: list[tuple[str, Fn]] = [
    ("{}.mean()", lambda e: e.mean()), ("{}.skew()", lambda e: e.skew()),
    ("{}.kurtosis()", lambda e: e.kurtosis()), ("{}.sum()", lambda e: e.sum()),
    ("{}.std()", lambda e: e.std()), ("{}.median()", lambda e: e.median()),
    ("{}.n_unique()", lambda e: e.n_unique()), ("{}.null_count()", lambda e: e.null_count()),
    ("{}.approx_n_unique()", lambda e: e.approx_n_unique()),
    ("{}.entropy()", lambda e: e.entropy()), ("{}.max_by('x')", lambda e: e.max_by("x")),
    ("{}.search_sorted(1)", lambda e: e.search_sorted(1)),
    ("{}.index_of(1)", lambda e: e.index_of(1)), ("{}.arg_max()", lambda e: e.arg_max()),
    ("{}.first()", lambda e: e.first()), ("{}.implode().list.first()",
                                          lambda e: e.implode().list.first()),
    ("{}.rank()", lambda e: e.rank()), ("{}.cum_sum()", lambda e: e.cum_sum()),
    ("{}.cum_count()", lambda e: e.cum_count()), ("{}.diff()", lambda e: e.diff()),
    ("{}.shift(1)", lambda e: e.shift(1)), ("{}.rle_id()", lambda e: e.rle_id()),
    ("{}.rolling_mean(2)", lambda e: e.rolling_mean(2)),
    ("{}.forward_fill()", lambda e: e.forward_fill()), ("{}.sort()", lambda e: e.sort()),
    ("{}.reverse()", lambda e: e.reverse()), ("{}.max().over('g')",
                                              lambda e: e.max().over("g")),
    ("{}.rank().over('s')", lambda e: e.rank().over("s")),
    ("{}.ewm_mean(alpha=0.5)", lambda e: e.ewm_mean(alpha=0.5)),
    ("{0}.fill_null({0}.mean())", lambda e: e.fill_null(e.mean())),
    ("{0}.clip({0}.min(), 10)", lambda e: e.clip(e.min(), 10)),
    ("({0} - {0}.min())", lambda e: e - e.min()), ("pl.int_range(pl.len())",
                                                 lambda e: pl.int_range(pl.len())),
    ("pl.len()", lambda e: pl.len()), ("{}.extend_constant(1, 1)",
                                       lambda e: e.extend_constant(1, 1)),
    ("{0}.append({0})", lambda e: e.append(e)), ("{}.mode()", lambda e: e.mode()),
    ("{}.unique_counts()", lambda e: e.unique_counts()), ("{}.head(1)", lambda e: e.head(1)),
    ("{}.gather_every(2)", lambda e: e.gather_every(2))]
BAD_COND: list[tuple[str, Fn]] = [
    ("{}.is_duplicated()", lambda e: e.is_duplicated()),
    ("{}.is_unique()", lambda e: e.is_unique()),
    ("{}.is_first_distinct()", lambda e: e.is_first_distinct()),
    ("{}.is_in(pl.col('n').implode())", lambda e: e.is_in(pl.col("n").implode())),
    ("{0}.is_between({0}.min(), 10)", lambda e: e.is_between(e.min(), 10)),
    ("{}.peak_max()", lambda e: e.peak_max()), ("({0} == {0}.max())", lambda e: e == e.max())]
BAD_BOOL: list[tuple[str, Fn]] = [
    ("{}.any()", lambda e: e.any()), ("{}.all()", lambda e: e.all()),
    ("{}.shift(1)", lambda e: e.shift(1)), ("{}.any().over('g')", lambda e: e.any().over("g")),
    ("{}.is_duplicated()", lambda e: e.is_duplicated()),
    ("{}.bitwise_or()", lambda e: e.bitwise_or())]

atk_num = st.recursive(
    st.one_of(_pcol(["x", "n", "g"]), _plit([0, 1, 2, 0.5]),
              _papply(BAD_NUM, _pcol(["x", "n", "g"]))),
    lambda sub: st.one_of(_papply(NUM_BINARY, sub, sub), _papply(NUM_UNARY[:7], sub),
                          _papply(BAD_NUM, sub)), max_leaves=3)
atk_cond = st.recursive(
    st.one_of(_pcol(["b"]), _papply(COND_OF_NUM, atk_num, atk_num),
              _papply(BAD_COND, _pcol(["x", "n", "g"])), _papply(BAD_BOOL, _pcol(["b"]))),
    lambda sub: st.one_of(_papply(BOOL, sub, sub), _papply(BAD_BOOL, sub)), max_leaves=3)
attack_step = st.one_of(
    st.builds(lambda e: LStep(f"filter({e.text})", lambda q: q.filter(e.expr)), atk_cond),
    st.builds(lambda n, e: LStep(f"with_columns({n}={e.text})",
                                 lambda q: q.with_columns(**{n: e.expr})),
              st.sampled_from(["new1", "x"]), atk_num),
    st.builds(lambda e: LStep(f"with_columns(new1=pl.when({e.text}).then(1).otherwise(0))",
                              lambda q: q.with_columns(new1=pl.when(e.expr).then(1)
                                                       .otherwise(0))), atk_cond),
    st.sampled_from([LStep(t, f) for t, f in _REWRITES]),
)
ATTACK_AGGS = [{"agg": "count"}, {"agg": "count_distinct"},
               {"agg": "count_distinct", "column": "s"},
               {"agg": "sum", "column": "x", "bounds": [-10, 10]},
               {"agg": "histogram", "column": "x", "bins": [-10, 0, 1, 10]}]
NEW1_AGGS = [{"agg": "sum", "column": "new1", "bounds": [-10, 10]},
             {"agg": "count_distinct", "column": "new1"},
             {"agg": "mean", "column": "new1", "bounds": [0, 10]}]


@st.composite
def attack_query(draw: Any, measure: str, unit: dp.PrivacyUnit) -> LibraryQuery:
    """A library query whose steps hide a node that is not row-wise, or rewrite the unit
    column, followed by a simple aggregation that reads the steps' output."""
    steps = tuple(draw(st.lists(attack_step, min_size=1, max_size=2)))
    new1 = any("new1=" in s.text for s in steps)
    agg = draw(st.sampled_from(ATTACK_AGGS + NEW1_AGGS if new1 else ATTACK_AGGS))
    group_by = None
    if draw(st.booleans()):
        group_by = {"columns": ["g"], "keys": [0, 1, 2, 3, -1]}
    return LibraryQuery(steps, group_by, None, (agg,), {"epsilon": 1}, "plain")
