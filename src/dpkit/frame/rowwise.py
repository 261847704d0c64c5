"""Guard that a query's transformations are row-wise (1-stable).

``filter``, ``with_columns`` and ``select`` are 1-stable only when each output row depends on
its own input row alone (McSherry 2009, PINQ's Where/Select). An expression such as
``pl.col("x") - pl.col("x").mean()``, ``.shift()``, ``.rank()``, ``.over(...)`` or a
``filter`` on a median lets one record change every other row, so the declared bounds would
no longer bound a record's influence. Two checks, both before any data is read:

1. structural: the expression tree (Polars' serialised plan) must contain no aggregation,
   window, sort, shift, cumulative, random or user-function node;
2. behavioural: on three synthetic rows built from the schema (never the data), the step
   applied to all rows must equal the step applied to each row alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import narwhals as nw
import polars as pl

from dpkit.errors import DomainError

__all__ = ["check_rowwise"]

_DENY = frozenset({
    "Agg", "Over", "Window", "Sort", "SortBy", "Len", "Gather", "GatherEvery", "Filter",
    "Slice", "Explode", "Implode", "Rolling", "RollingExpr", "AnonymousFunction", "Eval",
    "Shift", "ShiftAndFill", "Rank", "CumSum", "CumProd", "CumMin", "CumMax", "CumCount",
    "CumReduce", "CumFold", "Diff", "Unique", "UniqueCounts", "Reverse", "PctChange",
    "Interpolate", "FillNullWithStrategy", "Mode", "ArgSort", "ArgUnique", "ArgMin", "ArgMax",
    "Random", "Sample", "Shuffle", "First", "Last", "Head", "Tail", "TopK", "BottomK",
    "IsDuplicated", "IsUnique", "IsFirstDistinct", "IsLastDistinct", "ValueCounts",
    "NUnique", "Count", "NullCount", "Quantile", "Median", "Mean", "Sum", "Min", "Max",
    "Std", "Var", "Product", "EwmMean", "EwmStd", "EwmVar", "Hist", "Cut", "QCut",
})


def _names(node: Any) -> Iterator[str]:
    """Node and function names of a serialised expression (not column names or literals)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            if key in ("Column", "Columns", "Literal", "Nth", "DtypeColumn"):
                continue  # user-chosen names and values, not operations
            if key == "Alias" and isinstance(value, list):
                value = value[:1]  # [expression, new name]
            yield from _names(value)
    elif isinstance(node, list):
        for item in node:
            yield from _names(item)
    elif isinstance(node, str):
        yield node


def _structural(expr: pl.Expr) -> None:
    try:
        tree = json.loads(expr.meta.serialize(format="json"))
    except Exception as exc:  # an expression Polars cannot serialise cannot be vetted
        raise DomainError(f"cannot verify that {expr} is row-wise: {exc}") from None
    bad = sorted(set(_names(tree)) & _DENY)
    if bad:
        raise DomainError(
            f"{expr} is not row-wise ({', '.join(bad)}): it lets one record change other rows, "
            "which breaks the sensitivity analysis; use a DP aggregation instead"
        )


def _synthetic(schema: Any) -> pl.DataFrame | None:
    """Three distinct rows per column type (None when a type has no simple synthetic form)."""
    columns = []
    for name, dtype in schema.items():
        polars_dtype = getattr(pl, str(dtype), None)
        if dtype.is_integer() and polars_dtype is not None:
            columns.append(pl.Series(name, [1, 2, 3]).cast(polars_dtype))
        elif dtype.is_float():
            columns.append(pl.Series(name, [0.5, 1.5, 2.5]))
        elif str(dtype) == "String":
            columns.append(pl.Series(name, ["a", "b", "c"]))
        elif str(dtype) == "Boolean":
            columns.append(pl.Series(name, [True, False, True]))
        else:
            return None
    return pl.DataFrame(columns)


def _behavioural(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], schema: Any) -> None:
    frame = _synthetic(schema)
    if frame is None:
        return

    def run(df: pl.DataFrame) -> pl.DataFrame:
        native = any(isinstance(a, pl.Expr) for a in (*args, *kwargs.values()))
        if native:
            return getattr(df.lazy(), op)(*args, **kwargs).collect()
        out = getattr(nw.from_native(df), op)(*args, **kwargs)
        return nw.to_native(out)

    try:
        whole = run(frame)
        rows = pl.concat([run(frame.slice(i, 1)) for i in range(frame.height)])
    except Exception:  # type errors etc. surface when the query runs for real
        return
    if not whole.equals(rows):
        raise DomainError(
            f"{op}({', '.join(map(str, (*args, *kwargs.values())))}) is not row-wise: its "
            "result on a row depends on other rows, which breaks the sensitivity analysis"
        )


def _is_unit_column(value: Any, unit: str) -> bool:
    if isinstance(value, str):
        return value == unit
    if isinstance(value, pl.Expr):
        bare = value.meta.undo_aliases()
        return bool(bare.meta.is_column() and bare.meta.output_name() == unit)
    return False


def check_unit_column(op: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                      unit: str | None) -> None:
    """Raise :class:`DomainError` if a step could rewrite the privacy unit's identifiers.

    Splitting one unit's rows over several identifiers would let it exceed ``max_rows``, so
    ``with_columns``/``select`` may pass the unit column through unchanged but never
    compute it.
    """
    if unit is None or op == "filter":
        return
    if unit in kwargs:
        raise DomainError(f"the privacy unit column {unit!r} cannot be recomputed")
    for value in args:
        if isinstance(value, pl.Expr):
            if value.meta.output_name(raise_if_undetermined=False) == unit and not (
                    _is_unit_column(value, unit)):
                raise DomainError(f"the privacy unit column {unit!r} cannot be recomputed")
        elif not isinstance(value, str):  # e.g. narwhals: output names cannot be inspected
            raise DomainError(
                f"with the privacy unit {unit!r}, pass computed non-Polars columns by keyword "
                f"({op}(name=expr)) so dpkit can see they leave the unit column alone"
            )


def check_rowwise(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], schema: Any) -> None:
    """Raise :class:`DomainError` unless the step maps every row on its own."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, pl.Expr):
            _structural(value)
    _behavioural(op, args, kwargs, schema)
