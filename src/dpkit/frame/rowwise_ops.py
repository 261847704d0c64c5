"""The allow-list of row-wise operations: what a step's expression tree may contain.

Every node of a step's serialised Polars expression tree (``Expr.meta.serialize`` in JSON;
narwhals expressions are compiled to Polars first) must be listed here; anything else is
refused at plan time by :mod:`dpkit.frame.rowwise`, which walks the tree. An entry is on the
list only if it is

* element-wise: its value on a row depends on that row's values alone (no aggregation,
  window, order, shift, sample, user Python function or row-count-changing operation);
* total: no data value can make it raise (strict casts and parsers, ``replace_strict``
  without a default, and temporal functions that panic on out-of-range dates are absent or
  restricted; see :data:`CAST_STRICT`, :data:`CAST_NONSTRICT`);
* linear: its cost is at most linear in the size of the row's values (no list/array
  producing or consuming operation, no ``repeat_by``; patterns, lengths and mappings that
  set an output size or compile a regex must be literals).

``tests/test_rowwise.py`` runs every entry on extreme values (integer bounds, NaN, ±inf,
nulls, out-of-range dates, odd strings) and asserts that none raises, so a Polars upgrade
that changes a behaviour fails the suite instead of opening a channel.

The server's JSON grammar (:mod:`dpkit.server.protocol`) compiles to narwhals expressions
whose Polars form uses a subset of this list; the same check runs on them
(:func:`dpkit.frame.rowwise.check_expression` is the one definition of "row-wise").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BINARY_OPS", "FUNCTIONS", "Rule", "CAST_STRICT", "CAST_NONSTRICT", "NAMESPACES",
           "DECIMAL_UNSAFE", "INTEGER_UNSAFE", "DTYPE_KINDS",
           "STRICT_TO_CATEGORICAL"]

# BinaryExpr operators: arithmetic (integers wrap, x // 0 and x % 0 are null), comparisons
# and boolean/bitwise logic.
BINARY_OPS = frozenset({
    "Plus", "Minus", "Multiply", "TrueDivide", "FloorDivide", "Modulus",
    "Eq", "NotEq", "EqValidity", "NotEqValidity", "Lt", "LtEq", "Gt", "GtEq",
    "And", "Or", "Xor", "LogicalAnd", "LogicalOr",
})

# Function namespaces: a function serialises as {"Namespace": "Variant"} or
# {"Namespace": {"Variant": options}}; its name here is "Namespace.Variant". Anything else is
# {"Variant": options} or "Variant".
NAMESPACES = frozenset({
    "Boolean", "StringExpr", "TemporalExpr", "StructExpr", "Pow", "Trigonometry", "ListExpr",
    "ArrayExpr", "BinaryExpr", "Categorical", "Bitwise", "Business", "Random", "Range",
    "Correlation", "Rolling", "RollingBy", "Extension",
})


@dataclass(frozen=True)
class Rule:
    """How an allowed function may be called.

    ``literal`` lists the inputs (0 is the expression the function is called on) that must
    be literals: a pattern, a length or a mapping. ``kind`` names an extra check of the
    options and literal values (see :func:`dpkit.frame.rowwise._check_options`).
    ``inputs`` is the exact number of inputs when it matters.
    """

    literal: tuple[int, ...] = ()
    kind: str = ""
    inputs: int | None = None


_ANY = Rule()
_LIT1 = Rule(literal=(1,))

FUNCTIONS: dict[str, Rule] = {
    # numbers
    "Negate": _ANY, "Abs": _ANY, "Sign": _ANY, "Floor": _ANY, "Ceil": _ANY, "Round": _ANY,
    "RoundSF": _ANY, "Log": _ANY, "Log1p": _ANY, "Exp": _ANY, "Clip": _ANY,
    "Pow.Generic": Rule(literal=(1,)),  # an integer column exponent < 0 raises
    "Pow.Sqrt": _ANY, "Pow.Cbrt": _ANY,
    **{f"Trigonometry.{name}": _ANY for name in (
        "Cos", "Cot", "Sin", "Tan", "ArcCos", "ArcSin", "ArcTan", "Cosh", "Sinh", "Tanh",
        "ArcCosh", "ArcSinh", "ArcTanh", "Degrees", "Radians")},
    # nulls, NaN, booleans, membership
    "FillNull": Rule(inputs=2),  # a value or row-wise expression; strategies are absent
    "Coalesce": _ANY,
    "Boolean.Not": _ANY, "Boolean.IsNull": _ANY, "Boolean.IsNotNull": _ANY,
    "Boolean.IsNan": _ANY, "Boolean.IsNotNan": _ANY, "Boolean.IsFinite": _ANY,
    "Boolean.IsInfinite": _ANY, "Boolean.IsBetween": _ANY,
    "Boolean.IsIn": _LIT1, "Boolean.AnyHorizontal": _ANY, "Boolean.AllHorizontal": _ANY,
    "Replace": Rule(literal=(1, 2), inputs=3),
    "ReplaceStrict": Rule(literal=(1, 2), inputs=4),  # 4: with a default (never raises)
    # horizontal and struct
    "SumHorizontal": _ANY, "MinHorizontal": _ANY, "MaxHorizontal": _ANY,
    "MeanHorizontal": _ANY, "AsStruct": _ANY,
    "StructExpr.FieldByName": _ANY, "StructExpr.RenameFields": _ANY,
    "StructExpr.SelectFields": _ANY, "StructExpr.PrefixFields": _ANY,
    "StructExpr.SuffixFields": _ANY,
    # strings (patterns, lengths and affixes are literals; regexes are checked at plan time,
    # and Rust's regex engine runs in time linear in the string)
    "StringExpr.LenChars": _ANY, "StringExpr.LenBytes": _ANY,
    "StringExpr.Lowercase": _ANY, "StringExpr.Uppercase": _ANY,
    "StringExpr.Titlecase": _ANY, "StringExpr.Reverse": _ANY,
    "StringExpr.Contains": Rule(literal=(1,), kind="regex"),
    "StringExpr.Find": Rule(literal=(1,), kind="regex"),
    "StringExpr.CountMatches": Rule(literal=(1,), kind="regex"),
    "StringExpr.Extract": Rule(literal=(1,), kind="regex"),
    "StringExpr.Replace": Rule(literal=(1, 2), kind="regex"),
    "StringExpr.StartsWith": _LIT1, "StringExpr.EndsWith": _LIT1,
    "StringExpr.StripChars": _LIT1, "StringExpr.StripCharsStart": _LIT1,
    "StringExpr.StripCharsEnd": _LIT1, "StringExpr.StripPrefix": _LIT1,
    "StringExpr.StripSuffix": _LIT1,
    "StringExpr.Slice": Rule(literal=(1, 2), kind="sizes"),
    "StringExpr.Head": Rule(literal=(1,), kind="sizes"),
    "StringExpr.Tail": Rule(literal=(1,), kind="sizes"),
    "StringExpr.ZFill": Rule(literal=(1,), kind="sizes"),
    "StringExpr.PadStart": Rule(literal=(1,), kind="sizes"),
    "StringExpr.PadEnd": Rule(literal=(1,), kind="sizes"),
    "StringExpr.ConcatHorizontal": _ANY, "StringExpr.Format": _ANY,
    "StringExpr.ToInteger": Rule(literal=(1,), kind="to_integer"),  # strict=False only
    "StringExpr.Strptime": Rule(literal=(1,), kind="strptime"),  # strict=False, a format
    # temporal: only the fields that return null (never panic) on out-of-range values
    **{f"TemporalExpr.{name}": _ANY for name in (
        "Year", "Quarter", "Month", "Week", "WeekDay", "Day", "Hour", "Minute", "Second",
        "Millisecond", "Microsecond", "Nanosecond", "Century", "Millennium", "TimeStamp",
        "TotalDays", "TotalHours", "TotalMinutes", "TotalSeconds", "TotalMilliseconds",
        "TotalMicroseconds", "TotalNanoseconds")},
}

# Decimal arithmetic raises on overflow: with a Decimal input these are refused (cast the
# column to Float64 first; that cast cannot fail).
DECIMAL_UNSAFE = frozenset({
    "Plus", "Minus", "Multiply", "TrueDivide", "FloorDivide", "Modulus", "SumHorizontal",
    "MeanHorizontal", "Pow.Generic",
})

# Integer arithmetic wraps in Polars but raises on overflow (and on x % 0) in DuckDB and in
# Spark's ANSI mode: on those backends these take floats, literals or 0/1 integers cast from
# booleans (as dpkit's bin does), never other integers.
INTEGER_UNSAFE = frozenset({
    "Plus", "Minus", "Multiply", "FloorDivide", "Modulus", "Negate", "Abs", "SumHorizontal",
    "MeanHorizontal",
})

# Kinds of data types for the cast tables.
DTYPE_KINDS = ("null", "bool", "int", "float", "decimal", "str", "cat", "date", "datetime",
               "duration", "time")

# Casts that cannot fail on any value with strict=True (the Polars default, and what
# narwhals' cast compiles to), besides a cast to the same type, from Null, an integer to a
# wider integer and a cast of a literal (checked at plan time). "int" as a target means
# any integer type: bool and int → int is only allowed when every value fits (checked).
CAST_STRICT: dict[str, frozenset[str]] = {
    "null": frozenset(DTYPE_KINDS),
    "bool": frozenset({"bool", "int", "float", "str"}),
    "int": frozenset({"float", "str"}),
    "float": frozenset({"float", "str"}),
    "decimal": frozenset({"float", "str"}),
    "str": frozenset({"str"}),
    "cat": frozenset({"str"}),
}

# Sources whose strict cast to Categorical (not Enum, which has fixed categories) cannot fail.
STRICT_TO_CATEGORICAL = frozenset({"null", "str", "cat"})

# Casts with strict=False: an unconvertible value becomes null, and none of these raises or
# panics (dates and datetimes never become text: out-of-range values panic in formatting).
CAST_NONSTRICT: dict[str, frozenset[str]] = {
    "null": frozenset(DTYPE_KINDS),
    "bool": frozenset({"bool", "int", "float", "str"}),
    "int": frozenset({"bool", "int", "float", "str"}),
    "float": frozenset({"bool", "int", "float", "str"}),
    "decimal": frozenset({"int", "float", "str"}),
    "str": frozenset({"int", "float", "str", "cat"}),
    "cat": frozenset({"str", "cat"}),
    "date": frozenset({"date", "datetime", "int"}),
    "datetime": frozenset({"date", "datetime", "int"}),
    "duration": frozenset({"duration", "int"}),
    "time": frozenset({"time", "int", "str"}),
}


def dtype_kind(dtype: Any) -> str | None:
    """The kind of a Polars data type for the cast tables, or None (not castable)."""
    import polars as pl

    if dtype == pl.Null:
        return "null"
    if dtype == pl.Boolean:
        return "bool"
    if dtype.is_integer():
        return "int"
    if dtype.is_float():
        return "float"
    if dtype.is_decimal():
        return "decimal"
    if dtype == pl.String:
        return "str"
    if isinstance(dtype, pl.Categorical | pl.Enum):
        return "cat"
    for kind, cls in (("date", pl.Date), ("datetime", pl.Datetime), ("duration", pl.Duration),
                      ("time", pl.Time)):
        if dtype == cls or isinstance(dtype, cls):
            return kind
    return None
