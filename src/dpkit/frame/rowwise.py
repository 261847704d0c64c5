"""Plan-time guard that a query's ``filter`` / ``with_columns`` / ``select`` steps are row-wise.

These steps are 1-stable only when each output row depends on its own input row alone
(McSherry 2009, PINQ's Where/Select). ``pl.col("x") - pl.col("x").mean()``, ``.any()``,
``.shift()``, ``.over(...)`` or a ``filter`` on a median let one record change every other
row, so the declared bounds would no longer bound a record's influence. The guard is an
allow-list, checked before any data is read or budget spent:

1. the step is applied to an empty Polars frame with the input's schema (narwhals
   expressions are compiled to Polars there), and every node of the resulting plan's
   expression trees must be on :mod:`dpkit.frame.rowwise_ops`' list — anything else is
   refused with its name;
2. casts are checked against the source type (resolved from the schema): a strict cast must
   be one that no value can fail, others must say ``strict=False``; arithmetic that raises
   on overflow is refused (on Decimals; on integers where the backend does not wrap, as
   DuckDB and Spark's ANSI mode raise);
3. the step's output names are resolved against the schema: an expression that writes the
   privacy unit's column must be that column itself (``select`` must keep it), so no step
   can split a unit's rows over several identifiers;
4. as an extra, the step runs on one row of nulls, which surfaces errors that fire on any
   row (a malformed regex, duplicated ``replace`` keys) before the debit rather than after.

Nothing here reads the data. Every accepted operation costs at most linear time in the values
it reads; library mode's scope (what timing remains out of scope, and why) is written down in
the attack model (``docs/security.md``).
"""

from __future__ import annotations

import datetime
import decimal
import functools
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

import narwhals as nw
import polars as pl

from dpkit.errors import ColumnError, DomainError
from dpkit.frame.rowwise_ops import (
    BINARY_OPS,
    CAST_NONSTRICT,
    CAST_STRICT,
    DECIMAL_UNSAFE,
    FUNCTIONS,
    INTEGER_UNSAFE,
    NAMESPACES,
    STRICT_TO_CATEGORICAL,
    dtype_kind,
)

__all__ = ["check_step", "check_rowwise", "check_expression"]

_STEP_NODES = {"HStack": "exprs", "Select": "expr", "Filter": "predicate"}
_STEP_OPS = frozenset({"filter", "with_columns", "select"})
_RENAMES = frozenset({"Prefix", "Suffix", "ToLowercase", "ToUppercase"})
_COMPARISONS = frozenset({"Eq", "NotEq", "EqValidity", "NotEqValidity", "Lt", "LtEq", "Gt",
                          "GtEq"})
_INT_TYPES = {f"{s}Int{b}": (s == "", b) for s in ("", "U") for b in (8, 16, 32, 64, 128)}
_DST_KINDS = {**dict.fromkeys(_INT_TYPES, "int"), "Float16": "float", "Float32": "float",
              "Float64": "float", "String": "str", "Boolean": "bool", "Date": "date",
              "Time": "time", "Null": "null", "Datetime": "datetime", "Duration": "duration",
              "Enum": "cat", "Categorical": "cat", "Decimal": "decimal"}
_PANIC = (Exception, pl.exceptions.PanicException)
_SCAN = '{"DataFrameScan":{"df":['


@dataclass
class _Found:
    """What the walk collected for the type-dependent checks."""

    casts: list[dict[str, Any]] = field(default_factory=list)
    ops: list[tuple[str, list[Any]]] = field(default_factory=list)


def check_step(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], schema: Any,
               unit: str | None = None, *, integers_wrap: bool = True) -> None:
    """Raise unless a ``filter`` / ``with_columns`` / ``select`` step is row-wise, total and
    leaves the privacy unit's column alone.

    Parameters
    ----------
    op : str
        "filter", "with_columns" or "select".
    args, kwargs
        The step's arguments, as :class:`~dpkit.frame.Query` stores them (Polars or narwhals
        expressions, column names, literals).
    schema : polars or narwhals schema
        The step's input schema (no data is read).
    unit : str, optional
        The privacy unit's column (None: row-level privacy).
    integers_wrap : bool
        Whether the backend's integer arithmetic wraps on overflow (Polars) rather than
        raising (DuckDB; Spark in ANSI mode). If not, integer arithmetic is refused unless
        its inputs are literals or 0/1 integers cast from booleans.

    Raises
    ------
    DomainError
        Naming the first operation that is not on the allow-list, a cast that could fail on
        a value, a step that writes the unit column or whose output names cannot be
        resolved, or a step that fails on a row of nulls.
    ColumnError
        If the step refers to a column the schema lacks.
    """
    if op not in _STEP_OPS:
        raise DomainError(f"{op} is not a row-wise step")
    try:
        _check(op, args, kwargs, schema, unit, integers_wrap)
    except (DomainError, ColumnError):
        raise
    except pl.exceptions.ColumnNotFoundError as exc:
        raise ColumnError(f"{op}: unknown column ({_first_line(exc)})") from None
    except (*_PANIC, RecursionError) as exc:  # fail closed, naming no data (none was read)
        raise DomainError(f"cannot verify that {op} is row-wise: {type(exc).__name__}: "
                          f"{_first_line(exc)}") from None


def _check(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], schema: Any,
           unit: str | None, integers_wrap: bool) -> None:
    for value in (*args, *kwargs.values()):
        _check_argument(value)
    polars_schema = _polars_schema(schema)
    empty, null_row = _frames(polars_schema)
    native = any(isinstance(a, pl.Expr) for a in (*args, *kwargs.values()))  # as the engine
    out = _apply(empty, op, args, kwargs, native)
    text = _serialise(out)
    chain = _step_chain(json.loads(text))
    found = _Found()
    for _, exprs in chain:
        for expr in exprs:
            _vet(expr, found)
    _check_casts(found, empty, polars_schema)
    if "Decimal" in text or not integers_wrap:
        _check_arithmetic(found, empty, polars_schema, integers_wrap)
    out_schema = out.collect_schema()
    if unit is not None and op != "filter":
        _check_unit(op, chain, empty, unit, out_schema)
    _null_row(op, chain, null_row)


def check_rowwise(op: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                  schema: nw.Schema) -> None:
    """:func:`check_step` without a privacy unit column."""
    check_step(op, args, kwargs, schema)


def check_expression(expr: Any, schema: nw.Schema) -> None:
    """Raise :class:`DomainError` unless a Polars or narwhals expression is row-wise and
    total on ``schema`` (the server can vet its compiled expressions with this).
    """
    check_step("select", (expr,), {}, schema)


# -- plan ------------------------------------------------------------------------------------
_SCALARS = (str, int, float, bool, type(None), decimal.Decimal, datetime.date,
            datetime.datetime, datetime.time, datetime.timedelta)


def _check_argument(value: Any, nested: bool = False) -> None:
    """Expressions (Polars' or narwhals' own classes), column names and literal values, or a
    list of them. Anything else — a Series (values by row position), an array, a generator
    or an iterable that could yield other expressions when the step runs — is refused."""
    if isinstance(value, pl.Expr | nw.Expr):
        if type(value).__module__.split(".")[0] in ("polars", "narwhals"):
            return
    elif type(value) in _SCALARS:
        return
    elif type(value) in (list, tuple) and not nested:
        for item in value:
            _check_argument(item, nested=True)
        return
    raise DomainError(f"a step takes expressions, column names and literal values, not "
                      f"{type(value).__name__}; it cannot be checked to be row-wise")


def _polars_schema(schema: Any) -> pl.Schema:
    if isinstance(schema, pl.Schema):
        return schema
    if not isinstance(schema, nw.Schema):
        return pl.Schema(dict(schema))
    try:
        return schema.to_polars()
    except Exception:  # a backend type Polars lacks: opaque, so no operation applies to it
        columns = {}
        for name, dtype in schema.items():
            try:
                columns[name] = nw.Schema({name: dtype}).to_polars()[name]
            except Exception:
                columns[name] = pl.Object()
        return pl.Schema(columns)


def _frames(schema: pl.Schema) -> tuple[pl.LazyFrame, pl.DataFrame]:
    """An empty lazy frame and a one-row frame of nulls with ``schema`` (cached)."""
    key = tuple(schema.items())
    try:
        return _frames_cached(key)
    except TypeError:  # an unhashable data type
        return _build_frames(key)


def _build_frames(key: tuple[tuple[str, Any], ...]) -> tuple[pl.LazyFrame, pl.DataFrame]:
    schema = pl.Schema(dict(key))
    nulls = pl.DataFrame([pl.Series(name, [None], dtype=dtype) for name, dtype in key],
                         schema=schema)
    return pl.LazyFrame(schema=schema), nulls


_frames_cached = functools.lru_cache(maxsize=64)(_build_frames)


def _apply(frame: pl.LazyFrame, op: str, args: tuple[Any, ...], kwargs: dict[str, Any],
           native: bool) -> pl.LazyFrame:
    if native:
        return getattr(frame, op)(*args, **kwargs)
    out = getattr(nw.from_native(frame), op)(*args, **kwargs)
    return nw.to_native(out)


def _serialise(lf: pl.LazyFrame) -> str:
    """The plan as JSON. ``LazyFrame.serialize(format="json")`` warns that the format is
    deprecated (a global warnings filter is not thread-safe), so call what it calls; if a
    Polars release drops it, every step is refused ("cannot verify") and the tests fail."""
    buffer = io.BytesIO()
    lf._ldf.serialize_json(buffer)
    text = buffer.getvalue().decode()
    # the empty input's bytes (a list of integers) take most of the parse time: drop them
    head = text.find(_SCAN)
    if head >= 0:
        text = text[:head + len(_SCAN)] + text[text.index("]", head):]
    return text


def _step_chain(plan: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    """The plan's nodes above the empty input, top first, with their expressions."""
    chain: list[tuple[str, list[Any]]] = []
    node = plan
    while True:
        ((kind, body),) = node.items()
        if kind == "DataFrameScan":
            return chain
        if kind not in _STEP_NODES:
            raise DomainError(f"cannot verify that the step is row-wise: its plan has a "
                              f"{kind} node")
        value = body[_STEP_NODES[kind]]
        chain.append((kind, value if isinstance(value, list) else [value]))
        node = body["input"]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


def _to_expr(node: Any) -> pl.Expr:
    return pl.Expr.deserialize(io.StringIO(json.dumps(node)), format="json")


# -- the allow-list walk ---------------------------------------------------------------------
def _power_of_two(node: Any) -> bool:
    """A literal ±2^k (its reciprocal is exact, so x / c = x · (1/c) on any number of rows)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, int | float) and not isinstance(item, bool):
            if item == 0 or not math.isfinite(item):
                return False
            mantissa, _ = math.frexp(abs(item))
            return mantissa == 0.5
    return False


def _refuse(what: str, why: str = "") -> DomainError:
    return DomainError(
        f"{what}{why}: not on dpkit's list of row-wise operations (a step may only use "
        "element-wise operations that cannot fail on a value; see dpkit.frame.rowwise_ops). "
        "Aggregate with a DP aggregation instead")


def _function_name(function: Any) -> tuple[str, Any]:
    """("Namespace.Variant" or "Variant", options) of a serialised function."""
    if isinstance(function, str):
        return function, None
    ((key, value),) = function.items()
    if key in NAMESPACES:
        if isinstance(value, str):
            return f"{key}.{value}", None
        if isinstance(value, dict) and len(value) == 1:
            ((variant, options),) = value.items()
            return f"{key}.{variant}", options
    return key, value


def _is_literal(node: Any) -> bool:
    return isinstance(node, dict) and set(node) == {"Literal"}


def _literal(node: Any) -> Any:
    """The Python value of a plain literal (str, int, float, bool or None), else a marker."""
    if not _is_literal(node):
        return _OPAQUE
    inner = node["Literal"]
    for key in ("Dyn", "Scalar"):
        if key in inner and isinstance(inner[key], dict) and len(inner[key]) == 1:
            ((kind, value),) = inner[key].items()
            if kind == "Null":
                return None
            if isinstance(value, str | int | float | bool):
                return value
    return _OPAQUE


_OPAQUE = object()


def _vet(root: Any, found: _Found) -> None:
    """Walk one expression tree (iteratively: trees can be deep); refuse unknown nodes."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            raise _refuse(node)  # a unit variant such as "Len"
        if not isinstance(node, dict) or len(node) != 1:
            raise _refuse(f"an expression node of form {type(node).__name__}")
        ((kind, body),) = node.items()
        if kind in ("Column", "Selector"):
            continue  # column references (selectors carry only names and types)
        if kind == "Literal":
            if not isinstance(body, dict) or not set(body) <= {"Dyn", "Scalar"}:
                raise _refuse("a literal Series", " (it assigns values by row position)")
        elif kind == "Alias":
            stack.append(body[0])
        elif kind == "KeepName":
            stack.append(body)
        elif kind == "RenameAlias":
            rename = body["function"]
            name = rename if isinstance(rename, str) else next(iter(rename))
            if name not in _RENAMES:
                raise _refuse(f"name.{name.lower()}", " (a Python function)")
            stack.append(body["expr"])
        elif kind == "BinaryExpr":
            if body["op"] not in BINARY_OPS:
                raise _refuse(str(body["op"]))
            if body["op"] == "TrueDivide" and isinstance(body["right"], dict) and (
                    "Literal" in body["right"]) and not _power_of_two(body["right"]):
                # Polars divides by a constant exactly on 1-2 rows and through its reciprocal
                # on longer columns: a row's result would depend on the table's length
                raise _refuse("division by a constant", " (its rounding depends on the "
                              "number of rows in Polars; multiply by the reciprocal instead)")
            found.ops.append((body["op"], [body["left"], body["right"]]))
            stack.extend((body["left"], body["right"]))
        elif kind == "Ternary":
            stack.extend((body["predicate"], body["truthy"], body["falsy"]))
        elif kind == "Cast":
            if not (isinstance(body["dtype"], dict) and "Literal" in body["dtype"]):
                raise _refuse("a cast to a computed type")
            found.casts.append(body)
            stack.append(body["expr"])
        elif kind == "Function":
            _vet_function(body, found, stack)
        else:
            raise _refuse(_describe(kind, body))


def _describe(kind: str, body: Any) -> str:
    """A readable name for a refused node (e.g. "Agg.Max", "Over", "AnonymousFunction")."""
    if kind == "Agg" and isinstance(body, dict) and body:
        return f"Agg.{next(iter(body))} (an aggregation)"
    return kind


def _vet_function(body: dict[str, Any], found: _Found, stack: list[Any]) -> None:
    name, options = _function_name(body["function"])
    rule = FUNCTIONS.get(name)
    if rule is None:
        raise _refuse(name)
    inputs = body["input"]
    if rule.inputs is not None and len(inputs) != rule.inputs:
        why = " without a default (it raises on unmapped values)" if (
            name == "ReplaceStrict") else f" with {len(inputs)} inputs"
        raise _refuse(name, why)
    for i, arg in enumerate(inputs):
        if i in rule.literal:
            if not _is_literal(arg):
                raise _refuse(name, f" with a computed argument {i} (it must be a literal)")
        else:
            stack.append(arg)
    if rule.kind:
        _check_options(name, rule.kind, options, inputs)
    found.ops.append((name, inputs))


def _check_options(name: str, kind: str, options: Any, inputs: list[Any]) -> None:
    values = [_literal(a) for a in inputs]
    if kind == "regex":
        is_literal = options.get("literal") if isinstance(options, dict) else options is True
        if not is_literal and not _valid_regex(values[1]):
            raise _refuse(name, " with an invalid or non-text regex")
        if name == "StringExpr.Replace" and not isinstance(values[2], str):
            raise _refuse(name, " with a non-text replacement")
    elif kind == "sizes":
        sizes = values[1:]
        nonneg = [] if name in ("StringExpr.Head", "StringExpr.Tail") else (
            sizes[1:] if name == "StringExpr.Slice" else sizes)
        if not all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                   for v in sizes) or any(v is not None and v < 0 for v in nonneg):
            raise _refuse(name, " with a length that is not a non-negative integer")
    elif kind == "to_integer":
        base = values[1]
        if options.get("strict", True) or not isinstance(base, int) or not 2 <= base <= 36:
            raise _refuse(name, " unless strict=False with a literal base in 2..36 (a strict "
                          "parse raises on the data)")
    elif kind == "strptime":
        dtype, opts = options
        target = dtype.get("Literal") if isinstance(dtype, dict) else None
        naive = target in ("Date", "Time") or (
            isinstance(target, dict) and "Datetime" in target and target["Datetime"][1] is None)
        if opts.get("strict", True) or opts.get("format") is None or not naive:
            raise _refuse(name, " unless strict=False, with a format, to a Date, Time or "
                          "time-zone-naive Datetime (a strict or inferred parse raises on "
                          "the data)")


@functools.lru_cache(maxsize=256)
def _valid_regex(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    try:
        pl.select(pl.lit("x").str.contains(pattern)).item()
    except _PANIC:
        return False
    return True


# -- type-dependent checks -------------------------------------------------------------------
def _has_column(node: Any) -> bool:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "Column" in item or "Selector" in item:
                return True
            stack.extend(v for k, v in item.items() if k != "Literal")
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _input_dtypes(node: Any, empty: pl.LazyFrame, schema: pl.Schema) -> list[Any]:
    """The data types an expression yields on ``schema`` (every output of a selector)."""
    ((kind, body),) = node.items()
    if kind == "Column" and body in schema:
        return [schema[body]]
    if (kind == "BinaryExpr" and body["op"] in _COMPARISONS) or (
            kind == "Function" and _function_name(body["function"])[0].startswith("Boolean.")):
        return [pl.Boolean()]
    return list(empty.select(_to_expr(node)).collect_schema().dtypes())


def _check_casts(found: _Found, empty: pl.LazyFrame, schema: pl.Schema) -> None:
    for cast in found.casts:
        target = cast["dtype"]["Literal"]
        name = target if isinstance(target, str) else next(iter(target), "")
        dst = _DST_KINDS.get(name)
        strict = cast["options"] != "NonStrict"
        if dst is None:
            raise _refuse(f"a cast to {name}", " (only scalar types)")
        if not _has_column(cast["expr"]):
            continue  # a cast of literals: it fails on every row or on none (null-row run)
        for src in _input_dtypes(cast["expr"], empty, schema):
            kind = dtype_kind(src)
            if strict and (src == pl.Null or str(src) == name or _int_fits(src, name) or (
                    name == "Categorical" and kind in STRICT_TO_CATEGORICAL)):
                continue
            allowed = (CAST_STRICT if strict else CAST_NONSTRICT).get(kind or "", frozenset())
            if dst in allowed:
                continue
            if strict and dst in CAST_NONSTRICT.get(kind or "", frozenset()):
                raise _refuse(f"cast({src} → {name}, strict=True)",
                              " (it raises on a value that does not convert; write "
                              ".cast(dtype, strict=False) to get null instead)")
            raise _refuse(f"cast({src} → {name})", " (it can fail or panic on a value)")


def _int_fits(src: Any, name: str) -> bool:
    """Whether every value of ``src`` (an integer, a boolean, or a date/time type's physical
    integer) fits in the integer type ``name``."""
    if name not in _INT_TYPES:
        return False
    if src == pl.Boolean:
        return True
    physical = "Int32" if src == pl.Date else "Int64" if isinstance(
        src, pl.Datetime | pl.Duration) or src == pl.Time else str(src)
    if physical not in _INT_TYPES:
        return False
    signed, bits = _INT_TYPES[name]
    src_signed, src_bits = _INT_TYPES[physical]
    if signed:
        return src_bits < bits or (src_signed and src_bits == bits)
    return not src_signed and src_bits <= bits


def _check_arithmetic(found: _Found, empty: pl.LazyFrame, schema: pl.Schema,
                      integers_wrap: bool) -> None:
    """Arithmetic that raises on overflow: on Decimal inputs always, on integer inputs where
    the backend does not wrap (only run when "Decimal" appears, or off Polars)."""
    for name, inputs in found.ops:
        decimal = name in DECIMAL_UNSAFE
        integer = name in INTEGER_UNSAFE and not integers_wrap
        if not (decimal or integer):
            continue
        for arg in inputs:
            kinds = {dtype_kind(d) for d in _input_dtypes(arg, empty, schema)}
            if decimal and "decimal" in kinds:
                raise _refuse(f"{name} on a Decimal", " (it raises on overflow; cast to "
                              "Float64 first, which cannot fail)")
            if integer and "int" in kinds and not _bounded(arg, empty, schema):
                raise _refuse(f"{name} on an integer column", " (integer overflow raises on "
                              "this backend; cast to Float64 first)")


def _bounded(node: Any, empty: pl.LazyFrame, schema: pl.Schema) -> bool:
    """A literal, or an integer cast from a boolean (0 or 1)."""
    if _is_literal(node):
        return True
    inner = node.get("Cast", {}).get("expr")
    return inner is not None and all(
        d == pl.Boolean for d in _input_dtypes(inner, empty, schema))


# -- the privacy unit ------------------------------------------------------------------------
def _check_unit(op: str, chain: list[tuple[str, list[Any]]], empty: pl.LazyFrame, unit: str,
                out_schema: Any) -> None:
    """An expression whose outputs include ``unit`` must pass the unit column through."""
    for _, exprs in chain:
        for node in exprs:
            if unit in _output_names(node, empty, op) and not _passes_through(node, unit):
                raise DomainError(
                    f"{op}: an expression writes the privacy unit column {unit!r}; it may "
                    "only be passed through unchanged (splitting a unit's rows over several "
                    "identifiers would let it exceed its contribution bounds)")
    if op == "select" and unit not in out_schema:
        raise DomainError(f"select must keep the privacy unit column {unit!r}")


def _output_names(node: Any, empty: pl.LazyFrame, op: str) -> list[str]:
    ((kind, body),) = node.items()
    if kind == "Column":
        return [body]
    if kind == "Alias":
        return [body[1]]
    try:
        return list(empty.select(_to_expr(node)).collect_schema().names())
    except (*_PANIC, RecursionError) as exc:
        raise DomainError(f"{op}: the output names of an expression cannot be resolved "
                          f"({type(exc).__name__}), so dpkit cannot check that it leaves "
                          "the privacy unit column alone") from None


def _passes_through(node: Any, unit: str) -> bool:
    if "Selector" in node:
        return True  # a bare selector outputs each column unchanged, under its own name
    while "Alias" in node:
        node = node["Alias"][0]
    return bool(node == {"Column": unit})


# -- one row of nulls ------------------------------------------------------------------------
def _null_row(op: str, chain: list[tuple[str, list[Any]]], frame: pl.DataFrame) -> None:
    """Run the vetted plan on one row of nulls: an error that fires on any row surfaces now,
    before the debit, instead of telling after it whether the step saw a row."""
    if not frame.width:
        return
    try:
        for kind, exprs in reversed(chain):
            compiled = [_to_expr(e) for e in exprs]
            if kind == "Filter":
                frame = frame.filter(*compiled)
            elif kind == "HStack":
                frame = frame.with_columns(*compiled)
            else:
                frame = frame.select(*compiled)
    except (*_PANIC, RecursionError) as exc:
        raise DomainError(f"{op}: the step fails on a row of nulls ({type(exc).__name__}: "
                          f"{_first_line(exc)}); it would fail on the data after the budget "
                          "is spent") from None
