"""The JSON form of a dpkit query, as the server accepts it and the client writes it.

A request mirrors :class:`dpkit.frame.Query`::

    {
      "steps": [
        {"step": "filter", "expr": {"op": ">=", "args": [{"col": "age"}, {"lit": 30}]}},
        {"step": "with_columns", "columns": {"senior": {"op": ">", "args": [{"col": "age"},
                                                                          {"lit": 60}]}}},
        {"step": "clamp", "column": "hours-per-week", "lower": 0, "upper": 80},
        {"step": "bin", "column": "age", "width": 10, "name": "decade"},
        {"step": "map", "column": "sex", "mapping": [["Female", "F"], ["Male", "M"]]},
        {"step": "fill_null", "column": "occupation", "value": "?"},
        {"step": "drop_nulls", "columns": ["workclass"]}
      ],
      "group_by": {"columns": ["sex"], "keys": {"sex": ["F", "M"]}},
      "aggs": [{"agg": "count"}, {"agg": "mean", "column": "age", "bounds": [17, 90]}],
      "budget": {"epsilon": 0.5},
      "idempotency_key": "report-2024-q1"
    }

``group_by`` takes public ``keys`` (a ``{column: values}`` mapping, crossed; a list of values
for one column; or a list of rows) or a private ``selection`` (``{"epsilon", "delta",
"method"}``). ``budget`` holds ``epsilon``/``rho``/``delta``, or ``alpha`` (an accuracy
target) with ``confidence``; and optionally ``split``. Numbers may be JSON numbers or exact
rationals as strings (``"1/3"``).

Expressions are a small whitelisted AST — ``{"col": name}``, ``{"lit": value}`` and
``{"op": o, "args": [...]}`` with ``o`` one of ``OPERATORS`` — compiled to narwhals
expressions, with depth and size limits. There is no step that returns rows: the only output
of a query is its DP aggregations, so raw data cannot leave through this form.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Annotated, Any, Literal

import narwhals as nw
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dpkit.errors import DomainError
from dpkit.frame import aggregates
from dpkit.frame.query import KeySet
from dpkit.mechanisms.partition_selection import PartitionSelection

if TYPE_CHECKING:
    from dpkit.frame.query import Query
    from dpkit.frame.session import Session

__all__ = ["ProtocolError", "QueryRequest", "to_query", "from_query", "agg_to_json",
           "compile_expr", "OPERATORS", "MAX_EXPR_DEPTH", "MAX_EXPR_NODES", "MAX_KEYS"]

MAX_EXPR_DEPTH = 12  # nested operators in one expression
MAX_EXPR_NODES = 200  # nodes in one expression
MAX_STEPS = 32
MAX_AGGS = 16
MAX_KEYS = 100_000  # public group keys after the cross product
MAX_BINS = 10_000
MAX_CANDIDATES = 100_001
MAX_CELLS = 5_000_000  # groups × (bins or quantile candidates) over all aggregations
_RATIONAL = re.compile(r"^[+-]?(\d{1,40}(\.\d{0,40})?|\.\d{1,40})([eE][+-]?\d{1,3})?"
                       r"(/\d{1,40})?$")

_CMP: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt,
    "==": operator.eq, "!=": operator.ne, "+": operator.add, "-": operator.sub,
    "*": operator.mul, "/": operator.truediv}
_LOGIC: dict[str, Callable[[Any, Any], Any]] = {"&": operator.and_, "|": operator.or_}
_UNARY: dict[str, Callable[[Any], Any]] = {"~": operator.invert,
                                           "is_null": lambda e: e.is_null()}
OPERATORS = (*_CMP, *_LOGIC, *_UNARY)


class ProtocolError(DomainError):
    """A request is malformed, over a limit, or uses something outside the whitelist."""


# -- models ----------------------------------------------------------------------------------
Name = Annotated[str, Field(min_length=1, max_length=256)]
Text = Annotated[str, Field(max_length=1000)]
Number = int | float | Annotated[str, Field(max_length=64)]  # a string is an exact rational
Scalar = bool | int | float | Text


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ColExpr(_Model):
    """A column of the (transformed) private table."""

    col: Name


class LitExpr(_Model):
    """A literal value."""

    lit: Scalar


class OpExpr(_Model):
    """A whitelisted operator applied to 1 or more argument expressions."""

    op: Literal[">=", ">", "<=", "<", "==", "!=", "+", "-", "*", "/", "&", "|", "~", "is_null"]
    args: list[Expr] = Field(min_length=1, max_length=16)


Expr = ColExpr | LitExpr | OpExpr
OpExpr.model_rebuild()


class FilterStep(_Model):
    step: Literal["filter"]
    expr: Expr


class WithColumnsStep(_Model):
    step: Literal["with_columns"]
    columns: dict[Name, Expr] = Field(min_length=1, max_length=32)


class ClampStep(_Model):
    step: Literal["clamp"]
    column: Name
    lower: Number
    upper: Number


class BinStep(_Model):
    step: Literal["bin"]
    column: Name
    edges: list[Number] | None = Field(default=None, max_length=MAX_BINS + 1)
    width: Number | None = None
    name: Name | None = None


class MapStep(_Model):
    step: Literal["map"]
    column: Name
    mapping: list[tuple[Scalar, Scalar]] = Field(min_length=1, max_length=10_000)
    default: Scalar | None = None
    name: Name | None = None


class FillNullStep(_Model):
    step: Literal["fill_null"]
    column: Name
    value: Scalar


class DropNullsStep(_Model):
    step: Literal["drop_nulls"]
    columns: list[Name] = Field(default_factory=list, max_length=256)


Step = Annotated[FilterStep | WithColumnsStep | ClampStep | BinStep | MapStep | FillNullStep
                 | DropNullsStep, Field(discriminator="step")]


class Selection(_Model):
    epsilon: Number
    delta: Number
    method: Literal["truncated_geometric", "laplace", "gaussian"] = "truncated_geometric"


class GroupBy(_Model):
    columns: list[Name] = Field(min_length=1, max_length=8)
    keys: dict[Name, list[Scalar]] | list[Scalar | list[Scalar]] | None = None
    selection: Selection | None = None


class _NamedAgg(_Model):
    name: Name | None = None


class CountAgg(_NamedAgg):
    agg: Literal["count"]


class CountDistinctAgg(_NamedAgg):
    agg: Literal["count_distinct"]


class _ColumnAgg(_NamedAgg):
    column: Name
    bounds: tuple[Number, Number] | None = None
    fill: Scalar | None = None


class SumAgg(_ColumnAgg):
    agg: Literal["sum"]


class MeanAgg(_ColumnAgg):
    agg: Literal["mean"]


class VarianceAgg(_ColumnAgg):
    agg: Literal["variance"]


class StdAgg(_ColumnAgg):
    agg: Literal["std"]


class HistogramAgg(_NamedAgg):
    agg: Literal["histogram"]
    column: Name
    bins: list[Number] = Field(min_length=2, max_length=MAX_BINS + 1)


class QuantileAgg(_ColumnAgg):
    agg: Literal["quantile", "median", "min", "max"]
    q: Number | None = None
    candidates: int | None = Field(default=None, ge=2, le=MAX_CANDIDATES)
    method: Literal["exponential", "tree"] = "exponential"


Agg = Annotated[CountAgg | CountDistinctAgg | SumAgg | MeanAgg | VarianceAgg | StdAgg
                | HistogramAgg | QuantileAgg, Field(discriminator="agg")]


class Budget(_Model):
    epsilon: Number | None = None
    rho: Number | None = None
    delta: Number | None = None
    alpha: Number | None = None
    confidence: float = Field(default=0.95, gt=0, lt=1)
    split: list[Number] | None = Field(default=None, max_length=MAX_AGGS)


class QueryRequest(_Model):
    """A DP query on one dataset: transformations, grouping, aggregations and budget."""

    steps: list[Step] = Field(default_factory=list, max_length=MAX_STEPS)
    group_by: GroupBy | None = None
    aggs: list[Agg] = Field(min_length=1, max_length=MAX_AGGS)
    budget: Budget
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


# -- JSON → Query ----------------------------------------------------------------------------
def to_query(session: Session, payload: QueryRequest | Mapping[str, Any]
             ) -> tuple[Query, dict[str, Any]]:
    """Build the :class:`~dpkit.frame.Query` a request describes.

    Parameters
    ----------
    session : Session
        The session the query runs on (its first table).
    payload : QueryRequest or mapping
        The request (a mapping is validated first).

    Returns
    -------
    (Query, dict)
        The query, and the keyword arguments of :meth:`Query.release` (``epsilon``,
        ``rho``, ``delta``, ``alpha``, ``confidence``, ``split``, ``idempotency_key``).

    Raises
    ------
    ProtocolError
        For a malformed request, an expression over the limits, or too many keys.
    DomainError, BoundsError, ColumnError, MeasureError
        As the corresponding :class:`Query` methods raise them.
    """
    request = _validated(payload)
    query = session.query()
    for step in request.steps:
        query = _apply_step(query, step)
    if request.group_by is not None:
        query = _group_by(query, request.group_by)
    query = query.agg(*(_aggregation(a) for a in request.aggs))
    _check_cells(query)
    return query, _release_kwargs(request)


def _check_cells(query: Query) -> None:
    """Refuse queries whose exact statistics would be huge (groups × bins/candidates)."""
    cells = 0
    for agg in query.aggs:
        if isinstance(agg, aggregates.Histogram):
            cells += len(agg.edges()) - 1
        elif isinstance(agg, aggregates.Quantile):
            cells += 2 * (agg.candidates or 1001)
        else:
            cells += 1
    groups = len(query.keys) if query.keys is not None else 1
    if groups * cells > MAX_CELLS:
        raise ProtocolError(f"the query has {groups} groups × {cells} cells per group; the "
                            f"limit is {MAX_CELLS} in all")


def _validated(payload: QueryRequest | Mapping[str, Any]) -> QueryRequest:
    if isinstance(payload, QueryRequest):
        return payload
    try:
        return QueryRequest.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ProtocolError(f"malformed query at {where or 'top level'}: {first['msg']}"
                            ) from None


def _apply_step(query: Query, step: Any) -> Query:
    names = list(step.columns) if isinstance(step, WithColumnsStep) else [
        getattr(step, "name", None) or ""]
    if any(n.startswith("__dpkit") for n in names):
        raise ProtocolError("column names starting with '__dpkit' are reserved")
    if isinstance(step, FilterStep):
        schema = query.schema()
        if _kind(step.expr, schema) != "boolean":
            raise ProtocolError("filter: the expression must be a condition (true/false)")
        return query.filter(compile_expr(step.expr, schema))
    if isinstance(step, WithColumnsStep):
        schema = query.schema()
        return query.with_columns(**{k: compile_expr(v, schema)
                                     for k, v in step.columns.items()})
    if isinstance(step, ClampStep):
        return query.clamp(step.column, _number(step.lower), _number(step.upper))
    if isinstance(step, BinStep):
        edges = None if step.edges is None else [_number(e) for e in step.edges]
        width = None if step.width is None else _number(step.width)
        return query.bin(step.column, edges, width=width, name=step.name)
    if isinstance(step, MapStep):
        old = [k for k, _ in step.mapping]
        if len(set(map(repr, old))) != len(old):
            raise ProtocolError("map: repeated source values")
        schema = query.schema()
        column = _kind(ColExpr(col=step.column), schema)
        if any(_kind(LitExpr(lit=k), schema) != column for k in old):
            raise ProtocolError(f"map: {step.column!r} holds {column} values; map those")
        return query.map(step.column, dict(step.mapping), default=step.default, name=step.name)
    if isinstance(step, FillNullStep):
        schema = query.schema()
        column = _kind(ColExpr(col=step.column), schema)
        if _kind(LitExpr(lit=step.value), schema) != column:
            raise ProtocolError(f"fill_null: {step.column!r} holds {column} values; the fill "
                                "value must be one too")
        return query.fill_null(step.column, step.value)
    if isinstance(step, DropNullsStep):
        return query.drop_nulls(*step.columns)
    raise ProtocolError(f"unknown step {step!r}")  # pragma: no cover - the models forbid it


def _group_by(query: Query, group: GroupBy) -> Query:
    if group.selection is not None:
        s = group.selection
        if group.keys is not None:
            raise ProtocolError("group_by: pass keys or selection, not both")
        selection = PartitionSelection(_number(s.epsilon), _number(s.delta), s.method)
        return query.group_by(*group.columns, selection=selection)
    keys = group.keys
    if keys is None:
        raise ProtocolError("group_by needs public keys or a private selection")
    sizes = [len(v) for v in keys.values()] if isinstance(keys, dict) else [len(keys)]
    if math.prod(sizes) > MAX_KEYS:
        raise ProtocolError(f"group_by: more than {MAX_KEYS} keys")
    values: Any = keys
    if isinstance(keys, list) and len(group.columns) > 1:
        values = [tuple(k) if isinstance(k, list) else k for k in keys]
    return query.group_by(*group.columns, keys=values)


def _aggregation(agg: Any) -> aggregates.Aggregation:
    if isinstance(agg, CountAgg):
        return aggregates.count(name=agg.name)
    if isinstance(agg, CountDistinctAgg):
        return aggregates.count_distinct(name=agg.name)
    if isinstance(agg, HistogramAgg):
        return aggregates.histogram(agg.column, [_number(b) for b in agg.bins], name=agg.name)
    bounds = None if agg.bounds is None else (_number(agg.bounds[0]), _number(agg.bounds[1]))
    common = {"fill": agg.fill, "name": agg.name}
    if isinstance(agg, QuantileAgg):
        fixed = {"median": Fraction(1, 2), "min": Fraction(0), "max": Fraction(1)}
        if (agg.q is None) == (agg.agg == "quantile"):
            raise ProtocolError(f"{agg.agg}: q is "
                                f"{'required' if agg.agg == 'quantile' else 'not allowed'}")
        level = _number(agg.q) if agg.q is not None else fixed[agg.agg]
        name = agg.name or (f"{agg.column}_{agg.agg}" if agg.agg in ("min", "max") else None)
        return aggregates.quantile(agg.column, level, bounds, candidates=agg.candidates,
                                   fill=agg.fill, name=name, method=agg.method)
    make = {"sum": aggregates.sum, "mean": aggregates.mean, "variance": aggregates.variance,
            "std": aggregates.std}[agg.agg]
    return make(agg.column, bounds, **common)


def _release_kwargs(request: QueryRequest) -> dict[str, Any]:
    b = request.budget
    kwargs: dict[str, Any] = {k: _number(v) for k, v in (
        ("epsilon", b.epsilon), ("rho", b.rho), ("delta", b.delta), ("alpha", b.alpha))
        if v is not None}
    kwargs["confidence"] = b.confidence
    if b.split is not None:
        kwargs["split"] = [_number(w) for w in b.split]
    if request.idempotency_key is not None:
        kwargs["idempotency_key"] = request.idempotency_key
    return kwargs


def _number(value: Any) -> Any:
    """A JSON number, or an exact rational from a string; finite."""
    if isinstance(value, bool):
        raise ProtocolError(f"expected a number, got {value!r}")
    if isinstance(value, str):
        if not _RATIONAL.match(value.strip()):  # bounded: "1e99999999" would take minutes
            raise ProtocolError(f"{value!r} is not a number (use e.g. 0.25, 1e-6 or 1/3)")
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ProtocolError(f"{value!r} is not a number") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ProtocolError(f"{value!r} is not a finite number")
    return value


# -- expressions -----------------------------------------------------------------------------
def compile_expr(node: ColExpr | LitExpr | OpExpr | Mapping[str, Any],
                 schema: Mapping[str, Any] | None = None) -> Any:
    """Compile a whitelisted expression AST to a narwhals expression.

    The compiled expression is total: it cannot fail on any row. Arithmetic (``+ - * /``)
    runs in Float64 (integer overflow raises in DuckDB and in Spark's ANSI mode; floats
    overflow to ±inf instead), division by zero gives null, and integer literals must fit
    in Int64. With a ``schema`` every operator is type-checked first (numbers for
    arithmetic, booleans for logic, one kind on both sides of a comparison), so that no
    implicit cast can fail on a value.

    Parameters
    ----------
    node : ColExpr, LitExpr, OpExpr or mapping
        ``{"col": name}``, ``{"lit": value}`` or ``{"op": o, "args": [...]}``.
    schema : mapping of column → dtype, optional
        The table's schema at this step (the server always passes it).

    Returns
    -------
    narwhals.Expr

    Raises
    ------
    ProtocolError
        For an unknown operator, a wrong number of arguments, or an expression deeper than
        ``MAX_EXPR_DEPTH`` or larger than ``MAX_EXPR_NODES``.
    """
    if isinstance(node, Mapping):
        try:
            parsed: Any = OpExpr.model_validate(node) if "op" in node else (
                ColExpr.model_validate(node) if "col" in node else LitExpr.model_validate(node))
        except ValidationError as exc:
            raise ProtocolError(f"malformed expression: {exc.errors()[0]['msg']}") from None
        node = parsed
    _check_size(node)
    if schema is not None:
        _kind(node, schema)
    return _compile(node)


_ARITHMETIC = frozenset({"+", "-", "*", "/"})
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _column_kind(dtype: Any) -> str:
    if dtype == nw.Boolean:
        return "boolean"
    if dtype.is_numeric():
        return "number"
    if dtype in (nw.String, nw.Categorical) or isinstance(dtype, nw.Enum):
        return "string"
    if dtype.is_temporal():
        return "temporal"
    return "other"


def _kind(node: Any, schema: Mapping[str, Any]) -> str:
    """The kind of value an expression yields ("number", "string", "boolean", "temporal",
    "null"), or ProtocolError if an operator gets arguments of the wrong kind."""
    if isinstance(node, ColExpr):
        if node.col not in schema:
            raise ProtocolError(f"unknown column {node.col!r}")
        return _column_kind(schema[node.col])
    if isinstance(node, LitExpr):
        v = node.lit
        if isinstance(v, bool):
            return "boolean"
        if isinstance(v, int | float):
            return "number"
        return "string"
    kinds = [_kind(a, schema) for a in node.args]
    if node.op == "is_null":
        return "boolean"
    if node.op in _ARITHMETIC:
        if any(k != "number" for k in kinds):
            raise ProtocolError(f"operator {node.op!r} takes numbers, got {', '.join(kinds)}")
        return "number"
    if node.op in _CMP:
        if len(set(kinds)) != 1 or kinds[0] == "other":
            raise ProtocolError(f"operator {node.op!r} compares values of one kind, got "
                                f"{', '.join(kinds)}")
        return "boolean"
    if any(k != "boolean" for k in kinds):
        raise ProtocolError(f"operator {node.op!r} takes conditions, got {', '.join(kinds)}")
    return "boolean"


def _check_size(root: Any) -> None:
    stack: list[tuple[Any, int]] = [(root, 0)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if depth > MAX_EXPR_DEPTH:
            raise ProtocolError(f"expression nested deeper than {MAX_EXPR_DEPTH} operators")
        if seen > MAX_EXPR_NODES:
            raise ProtocolError(f"expression larger than {MAX_EXPR_NODES} nodes")
        if isinstance(node, OpExpr):
            stack.extend((a, depth + 1) for a in node.args)


def _compile(node: Any) -> Any:
    if isinstance(node, ColExpr):
        return nw.col(node.col)
    if isinstance(node, LitExpr):
        v = node.lit
        if isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
            raise ProtocolError(f"integer literal {v} does not fit in 64 bits")
        if isinstance(v, float) and not math.isfinite(v):
            raise ProtocolError("literals must be finite")
        return nw.lit(v)
    args = [_compile(a) for a in node.args]
    if node.op in _UNARY:
        _arity(node.op, args, 1)
        return _UNARY[node.op](args[0])
    if node.op in _ARITHMETIC:
        _arity(node.op, args, 2)
        a, b = (x.cast(nw.Float64) for x in args)
        if node.op == "/":  # x / 0 is null on every backend (Spark's ANSI mode raises)
            divisor = node.args[1]
            if isinstance(divisor, LitExpr) and isinstance(divisor.lit, int | float) and (
                    not isinstance(divisor.lit, bool)):  # a reciprocal: Polars' x / c depends on n
                c = float(divisor.lit)
                return a * (1.0 / c) if c != 0 and math.isfinite(1.0 / c) else nw.lit(
                    None, nw.Float64)
            return nw.when(b != 0).then(a * (nw.lit(1.0) / b))
        return _CMP[node.op](a, b)
    if node.op in _CMP:
        _arity(node.op, args, 2)
        return _CMP[node.op](args[0], args[1])
    if len(args) < 2:
        raise ProtocolError(f"operator {node.op!r} takes 2 or more arguments")
    out = args[0]
    for a in args[1:]:
        out = _LOGIC[node.op](out, a)
    return out


def _arity(op: str, args: list[Any], n: int) -> None:
    if len(args) != n:
        raise ProtocolError(f"operator {op!r} takes {n} argument{'s' if n > 1 else ''}, "
                            f"got {len(args)}")


# -- Query pieces → JSON (for the client) ---------------------------------------------------
def from_query(*, steps: Sequence[Mapping[str, Any]] = (),
               group_by: Mapping[str, Any] | None = None,
               aggs: Sequence[aggregates.Aggregation] = (),
               budget: Mapping[str, Any] | None = None,
               idempotency_key: str | None = None) -> dict[str, Any]:
    """The JSON request for a query given by its parts (the reverse of :func:`to_query`).

    Parameters
    ----------
    steps : sequence of mappings
        Steps already in JSON form (the client builds them).
    group_by : mapping, optional
        ``{"columns": [...], "keys": ...}`` or ``{"columns": [...], "selection": ...}``;
        keys may be a :class:`KeySet`, a Polars frame, a mapping or a sequence.
    aggs : sequence of Aggregation
        dpkit aggregation objects (``dp.count()``, ``dp.mean("age", (17, 90))``, ...).
    budget : mapping, optional
        ``epsilon``/``rho``/``delta``/``alpha``/``confidence``/``split``.
    idempotency_key : str, optional

    Returns
    -------
    dict
        A JSON-ready request (validated against :class:`QueryRequest`).
    """
    payload: dict[str, Any] = {"steps": [dict(s) for s in steps],
                               "aggs": [agg_to_json(a) for a in aggs],
                               "budget": _budget_json(budget or {})}
    if group_by is not None:
        payload["group_by"] = _group_json(group_by)
    if idempotency_key is not None:
        payload["idempotency_key"] = idempotency_key
    _validated(payload)
    return payload


def _budget_json(budget: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in budget.items():
        if value is None:
            continue
        if key == "split":
            out[key] = [json_number(w) for w in value]
        else:
            out[key] = value if key == "confidence" else json_number(value)
    return out


def _group_json(group: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"columns": list(group["columns"])}
    selection = group.get("selection")
    if selection is not None:
        out["selection"] = {"epsilon": json_number(selection.epsilon),
                            "delta": json_number(selection.delta), "method": selection.method}
    keys = group.get("keys")
    if keys is not None:
        out["keys"] = keys_json(out["columns"], keys)
    return out


def keys_json(columns: list[str], keys: Any) -> Any:
    """Public group keys in JSON form: a mapping of value lists, or a list of values/rows."""
    if isinstance(keys, KeySet):
        keys = keys.frame
    if isinstance(keys, pl.DataFrame):
        frame = keys.select(columns)
        if len(columns) == 1:
            return [_scalar(v) for v in frame.to_series()]
        return [[_scalar(v) for v in row] for row in frame.rows()]
    if isinstance(keys, Mapping):
        return {str(k): [_scalar(v) for v in values] for k, values in keys.items()}
    return [[_scalar(v) for v in k] if isinstance(k, tuple | list) else _scalar(k)
            for k in keys]


def agg_to_json(agg: aggregates.Aggregation) -> dict[str, Any]:
    """A dpkit aggregation object as its JSON form.

    Raises
    ------
    ProtocolError
        For an aggregation the protocol does not know.
    """
    out: dict[str, Any]
    if isinstance(agg, aggregates.Count):
        out = {"agg": "count"}
    elif isinstance(agg, aggregates.CountDistinct):
        out = {"agg": "count_distinct"}
    elif isinstance(agg, aggregates.Histogram):
        out = {"agg": "histogram", "column": agg.column,
               "bins": [json_number(b) for b in agg.edges()]}
    elif isinstance(agg, aggregates.ColumnAggregation):
        out = _column_agg_json(agg)
    else:
        raise ProtocolError(f"cannot send {type(agg).__name__} to the server")
    if agg.name is not None:
        out["name"] = agg.name
    return out


def _column_agg_json(agg: aggregates.ColumnAggregation) -> dict[str, Any]:
    if isinstance(agg, aggregates.Quantile):
        kind = "quantile"
        extra: dict[str, Any] = {"q": json_number(agg.q), "method": agg.method}
        if agg.candidates is not None:
            extra["candidates"] = agg.candidates
    elif isinstance(agg, aggregates.Variance):
        kind, extra = ("std" if agg.std else "variance"), {}
    elif isinstance(agg, aggregates.Mean | aggregates.Sum):
        kind, extra = ("mean" if isinstance(agg, aggregates.Mean) else "sum"), {}
    else:
        raise ProtocolError(f"cannot send {type(agg).__name__} to the server")
    out: dict[str, Any] = {"agg": kind, "column": agg.column, **extra}
    if agg.bounds is not None:
        lo, hi = agg.bounds
        out["bounds"] = [json_number(lo), json_number(hi)]
    if agg.fill is not None:
        out["fill"] = _scalar(agg.fill)
    return out


def json_number(value: Any) -> int | float | str:
    """A number for JSON: ints and floats as they are, other rationals exactly as "p/q"."""
    if isinstance(value, bool):
        raise ProtocolError(f"expected a number, got {value!r}")
    if isinstance(value, int | float):
        return value
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else str(value)
    try:
        return str(Fraction(value))
    except (TypeError, ValueError):
        raise ProtocolError(f"{value!r} is not a number") from None


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
