"""The JSON form of a dpkit query, as the server accepts it and the client writes it.

A request is a query's JSON form (:meth:`dpkit.frame.Query.to_json`; the steps, aggregations
and expression grammar of :mod:`dpkit.frame.language`) plus its budget::

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
"method"}``; with method ``"limited_domain"`` also ``k`` and ``k_bar``: top-k). ``budget``
holds ``epsilon``/``rho``/``delta``, or ``alpha`` (an accuracy target) with ``confidence``;
and optionally ``split``. Numbers may be JSON numbers or exact rationals as strings
(``"1/3"``).

The request model is generated from the registry: one model per registered step and
aggregation (its parameters, types, defaults and limits), joined in discriminated unions on
``step`` and ``agg``; :data:`QueryRequest` is regenerated when the registry changes, so a new
aggregation needs no edit here. Expressions are the allow-listed grammar (``{"col"}``,
``{"lit"}``, ``{"op", "args"}`` with ``op`` one of ``OPERATORS``), with depth and size
limits. There is no step that returns rows: the only output of a query is its DP
aggregations, so raw data cannot leave through this form.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from dpkit.frame import aggregates, language
from dpkit.frame.language import (
    MAX_EXPR_DEPTH,
    MAX_EXPR_NODES,
    OPERATORS,
    Param,
    ProtocolError,
    json_number,
    json_scalar,
)
from dpkit.frame.query import KeySet, Query, selection_json
from dpkit.mechanisms import limited_domain

if TYPE_CHECKING:
    from dpkit.frame.session import Session

__all__ = ["ProtocolError", "QueryRequest", "request_model", "step_list", "to_query", "from_query",
           "request_json", "agg_to_json", "compile_expr", "OPERATORS", "MAX_EXPR_DEPTH",
           "MAX_EXPR_NODES", "MAX_KEYS"]

MAX_STEPS = 32
MAX_AGGS = 16
MAX_KEYS = 100_000  # public group keys after the cross product
MAX_CELLS = 5_000_000  # groups × (bins or quantile candidates) over all aggregations

# -- models ----------------------------------------------------------------------------------
Name = Annotated[str, Field(min_length=1, max_length=language.MAX_NAME)]
Text = Annotated[str, Field(max_length=language.MAX_TEXT)]
Number = int | float | Annotated[str, Field(max_length=64)]  # a string is an exact rational
Scalar = bool | int | float | Text
_OP: Any = Literal.__getitem__(OPERATORS)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ColExpr(_Model):
    """A column of the (transformed) private table."""

    col: Name


class LitExpr(_Model):
    """A literal value."""

    lit: Scalar


class OpExpr(_Model):
    """An allow-listed operator applied to 1 or more argument expressions."""

    op: _OP
    args: list[Expr] = Field(min_length=1, max_length=16)


Expr = ColExpr | LitExpr | OpExpr
OpExpr.model_rebuild()


def _sized(kind: Any, p: Param) -> Any:
    lo, hi = p.size or (None, None)
    if p.type == "int":
        return Annotated[kind, Field(ge=lo, le=hi)]
    return Annotated[kind, Field(min_length=lo, max_length=hi)]


_TYPES: dict[str, Callable[[Param], Any]] = {
    "column": lambda p: Name, "new_column": lambda p: Name, "label": lambda p: Name,
    "columns": lambda p: _sized(list[Name], p), "number": lambda p: Number,
    "numbers": lambda p: _sized(list[Number], p), "bounds": lambda p: tuple[Number, Number],
    "scalar": lambda p: Scalar, "pairs": lambda p: _sized(list[tuple[Scalar, Scalar]], p),
    "int": lambda p: _sized(int, p), "choice": lambda p: Literal.__getitem__(p.choices),
    "flag": lambda p: bool, "expr": lambda p: Expr,
    "exprs": lambda p: _sized(dict[Name, Expr], p)}


def _field(p: Param) -> tuple[Any, Any]:
    kind = _TYPES[p.type](p)
    if p.required:
        return kind, ...
    if isinstance(p.default, tuple | list):
        return kind, Field(default_factory=lambda: list(p.default))
    return (kind | None if p.default is None else kind), p.default


def _union(key: str, table: Mapping[str, language.Form]) -> Any:
    """``list[M₁ | M₂ | …]``: one model per registered tag, discriminated by ``key``."""
    models = []
    for tag, form in table.items():
        fields: dict[str, Any] = {key: (Literal.__getitem__(tag), ...)}
        fields.update((p.name, _field(p)) for p in form.params)
        name = "".join(w.title() for w in (*tag.split("_"), key))
        models.append(create_model(name, __base__=_Model, **fields))
    item: Any = Annotated[Union[tuple(models)], Field(discriminator=key)]  # noqa: UP007
    return list.__class_getitem__(item)


class Selection(_Model):
    epsilon: Number
    delta: Number
    method: Literal["truncated_geometric", "laplace", "gaussian",
                    "limited_domain"] = "truncated_geometric"
    k: Annotated[int, Field(ge=1, le=limited_domain.MAX_K, strict=True)] | None = None
    k_bar: Annotated[int, Field(ge=1, le=limited_domain.MAX_K_BAR, strict=True)] | None = None


class GroupBy(_Model):
    columns: list[Name] = Field(min_length=1, max_length=8)
    keys: dict[Name, list[Scalar]] | list[Scalar | list[Scalar]] | None = None
    selection: Selection | None = None


class Budget(_Model):
    epsilon: Number | None = None
    rho: Number | None = None
    delta: Number | None = None
    alpha: Number | None = None
    confidence: float = Field(default=0.95, gt=0, lt=1)
    split: list[Number] | None = Field(default=None, max_length=MAX_AGGS)


class QueryRequest(_Model):
    """A DP query on one dataset: transformations, grouping, aggregations and budget (the
    name is rebound to a subclass generated from the registry: see :func:`request_model`)."""

    steps: list[Any] = Field(default_factory=list, max_length=MAX_STEPS)
    group_by: GroupBy | None = None
    aggs: list[Any] = Field(min_length=1, max_length=MAX_AGGS)
    budget: Budget
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


_BASE = QueryRequest


def request_model() -> type[QueryRequest]:
    """The request model of the registry as it is now (``QueryRequest`` is kept equal to
    it: the server's endpoints read it when the application is created)."""
    model: type[QueryRequest] = globals()["QueryRequest"]
    return model


def step_list() -> Any:
    """The type of a request's ``steps`` as the registry is now: a list of the registered
    steps' models, discriminated on ``step`` (hosted streams' requests use it too)."""
    return _union("step", language.STEPS)


def _generate() -> None:
    steps, aggs = step_list(), _union("agg", language.AGGREGATIONS)
    globals()["QueryRequest"] = create_model(
        "QueryRequest", __base__=_BASE, __doc__=_BASE.__doc__,
        steps=(steps, Field(default_factory=list, max_length=MAX_STEPS)),
        aggs=(aggs, Field(min_length=1, max_length=MAX_AGGS)))


_generate()
language.on_change(_generate)


# -- JSON → Query ----------------------------------------------------------------------------
def to_query(session: Session, payload: QueryRequest | Mapping[str, Any]
             ) -> tuple[Query, dict[str, Any]]:
    """Build the :class:`~dpkit.frame.Query` a request describes.

    Parameters
    ----------
    session : Session
        The session the query runs on (its first table).
    payload : QueryRequest or mapping
        The request (validated against :func:`request_model` unless it is an instance).

    Returns
    -------
    (Query, dict)
        The query, and the keyword arguments of :meth:`Query.release` (``epsilon``,
        ``rho``, ``delta``, ``alpha``, ``confidence``, ``split``, ``idempotency_key``).

    Raises
    ------
    ProtocolError
        For a malformed request, an expression over the limits, or too many keys or cells.
    DomainError, BoundsError, ColumnError, MeasureError
        As the corresponding :class:`Query` methods raise them.
    """
    request = _validated(payload)
    keys = request.group_by.keys if request.group_by is not None else None
    sizes = [len(v) for v in keys.values()] if isinstance(keys, dict) else [len(keys or ())]
    if math.prod(sizes) > MAX_KEYS:
        raise ProtocolError(f"group_by: more than {MAX_KEYS} keys")
    query = Query.from_json(session, request.model_dump(
        include={"steps", "group_by", "aggs"}, exclude_unset=True))
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
    model = request_model()
    if isinstance(payload, model):
        return payload
    if isinstance(payload, _BASE):  # validated by an older model: the registry changed
        payload = payload.model_dump(exclude_unset=True)
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ProtocolError(f"malformed query at {where or 'top level'}: {first['msg']}"
                            ) from None


def _release_kwargs(request: QueryRequest) -> dict[str, Any]:
    b = request.budget
    kwargs: dict[str, Any] = {k: language.number(v) for k, v in (
        ("epsilon", b.epsilon), ("rho", b.rho), ("delta", b.delta), ("alpha", b.alpha))
        if v is not None}
    kwargs["confidence"] = b.confidence
    if b.split is not None:
        kwargs["split"] = [language.number(w) for w in b.split]
    if request.idempotency_key is not None:
        kwargs["idempotency_key"] = request.idempotency_key
    return kwargs


def compile_expr(node: ColExpr | LitExpr | OpExpr | Mapping[str, Any],
                 schema: Mapping[str, Any] | None = None) -> Any:
    """Compile an allow-listed expression to a narwhals expression: see
    :func:`dpkit.frame.language.compile_expr` (ProtocolError for anything else)."""
    tree = node.model_dump() if isinstance(node, BaseModel) else node
    return language.compile_expr(tree, schema)


# -- Query pieces → JSON (for the client) ---------------------------------------------------
def request_json(query: Mapping[str, Any], budget: Mapping[str, Any],
                 idempotency_key: str | None = None) -> dict[str, Any]:
    """The request for a query's JSON form with a budget (``epsilon``/``rho``/``delta``/
    ``alpha``/``confidence``/``split``; None values left out), validated against
    :func:`request_model` (else ProtocolError)."""
    out: dict[str, Any] = {k: v for k, v in query.items() if k != "group_by" or v}
    out["budget"] = {k: (v if k == "confidence" else [json_number(w) for w in v]
                         if k == "split" else json_number(v))
                     for k, v in budget.items() if v is not None}
    if idempotency_key is not None:
        out["idempotency_key"] = idempotency_key
    _validated(out)
    return out


def from_query(*, steps: Sequence[Mapping[str, Any]] = (),
               group_by: Mapping[str, Any] | None = None,
               aggs: Sequence[aggregates.Aggregation] = (),
               budget: Mapping[str, Any] | None = None,
               idempotency_key: str | None = None) -> dict[str, Any]:
    """The JSON request for a query given by its parts (the reverse of :func:`to_query`).

    Parameters
    ----------
    steps : sequence of mappings
        Steps already in JSON form.
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
        A JSON-ready request (validated against :func:`request_model`).
    """
    query: dict[str, Any] = {"steps": [dict(s) for s in steps],
                             "aggs": [language.encode_agg(a) for a in aggs]}
    if group_by is not None:
        group: dict[str, Any] = {"columns": list(group_by["columns"])}
        if (s := group_by.get("selection")) is not None:
            group["selection"] = selection_json(s)
        if group_by.get("keys") is not None:
            group["keys"] = keys_json(group["columns"], group_by["keys"])
        query["group_by"] = group
    return request_json(query, budget or {}, idempotency_key)


def keys_json(columns: list[str], keys: Any) -> Any:
    """Public group keys in JSON form: a mapping of value lists, or a list of values/rows."""
    if isinstance(keys, KeySet):
        keys = keys.frame
    if isinstance(keys, pl.DataFrame):
        frame = keys.select(columns)
        if len(columns) == 1:
            return [json_scalar(v) for v in frame.to_series()]
        return [[json_scalar(v) for v in row] for row in frame.rows()]
    if isinstance(keys, Mapping):
        return {str(k): [json_scalar(v) for v in values] for k, values in keys.items()}
    return [[json_scalar(v) for v in k] if isinstance(k, tuple | list) else json_scalar(k)
            for k in keys]


agg_to_json = language.encode_agg
