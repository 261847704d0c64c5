"""The query language, defined once: a registry of step kinds and aggregations, their JSON form,
and the expression grammar that steps carry over JSON.

Each step kind (:mod:`dpkit.frame.query`, decorator :func:`step`) and each aggregation
(:mod:`dpkit.frame.aggregates`, decorator :func:`aggregation`) registers a tag and its
parameters — name, type (one of :data:`TYPES`), default, size limits — once. From the registry
come :meth:`Query.to_json <dpkit.frame.Query.to_json>` and :meth:`Query.from_json
<dpkit.frame.Query.from_json>`, the server's request models (:mod:`dpkit.server.protocol`
generates them) and :class:`dpkit.Client` (a ``Query`` on a remote session), so a new
aggregation touches one file. The JSON form of a query::

    {"steps": [{"step": "filter", "expr": {"op": ">=", "args": [{"col": "age"}, {"lit": 30}]}},
               {"step": "clamp", "column": "hours", "lower": 0, "upper": 80}],
     "group_by": {"columns": ["sex"], "keys": ["Female", "Male"]},
     "aggs": [{"agg": "count"}, {"agg": "mean", "column": "age", "bounds": [17, 90]}]}

Numbers are JSON numbers or exact rationals as strings (``"1/3"``; a ``Fraction`` is written
so); a parameter at its default is left out. Ints, floats, Fractions and strings come back as
they went in, so a query and its JSON round trip give the same :meth:`describe
<dpkit.frame.Query.describe>` and the same plan.

Expressions are an allow-listed grammar: ``{"col": name}``, ``{"lit": value}`` and ``{"op": o,
"args": [...]}`` with ``o`` one of :data:`OPERATORS`, built in Python with :func:`col`,
:func:`lit`, operators and :meth:`Expr.is_in` / :meth:`Expr.like` / :func:`case`, and
compiled by :func:`compile_expr` to narwhals expressions that are type-checked against the
schema and cannot fail on any row. SQL (:mod:`dpkit.frame.sql`) compiles to the same grammar:
``IN`` is ``in``, ``LIKE`` / ``ILIKE`` are ``like`` / ``ilike``, ``CASE WHEN`` is ``case``,
``LEAST`` / ``GREATEST`` (nulls ignored) are ``least`` / ``greatest``.
There is no step that returns rows. Polars and narwhals expressions have no JSON form.
"""

from __future__ import annotations

import math
import operator
import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any, Literal, TypeVar, get_args

import narwhals as nw

from dpkit.errors import DomainError

__all__ = ["Param", "Form", "STEPS", "AGGREGATIONS", "TYPES", "step", "aggregation", "unregister",
           "on_change", "encode_step", "decode_step", "encode_agg", "decode_agg", "decode",
           "number", "json_number", "json_scalar", "ProtocolError", "Expr", "col", "lit",
           "check_tree", "compile_expr", "expression_text", "compiled_text", "expr_kind",
           "value_kind", "column_kind", "OPERATORS",
           "case", "in_node", "like_pattern", "MAX_EXPR_DEPTH", "MAX_EXPR_NODES", "MAX_BINS",
           "MAX_CANDIDATES"]

MAX_EXPR_DEPTH = 12  # nested operators in one expression
MAX_EXPR_NODES = 200  # nodes in one expression
MAX_BINS = 10_000  # bin edges (histograms, bin steps) hold at most MAX_BINS + 1 numbers
MAX_CANDIDATES = 100_001  # quantile candidates
MAX_NAME, MAX_TEXT = 256, 1000  # characters of a column name, of a string literal
_RATIONAL = re.compile(r"^[+-]?(\d{1,40}(\.\d{0,40})?|\.\d{1,40})([eE][+-]?\d{1,3})?"
                       r"(/\d{1,40})?$")


class ProtocolError(DomainError):
    """A query's JSON form or expression is malformed, over a limit, or outside the
    allow-list."""


# -- the registry ----------------------------------------------------------------------------
ParamType = Literal["column", "new_column", "label", "columns", "number", "numbers", "bounds",
                    "scalar", "pairs", "int", "choice", "flag", "expr", "exprs"]
TYPES: tuple[str, ...] = get_args(ParamType)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # the default of a parameter that must be given


@dataclass(frozen=True)
class Param:
    """One parameter of a step or aggregation.

    ``type`` is one of :data:`TYPES`: a ``column`` of the table, a ``new_column`` name (not
    ``__dpkit…``), an output ``label``, ``columns``; a ``number`` (int, float or exact
    rational), ``numbers``, ``bounds`` (two numbers); a ``scalar`` (bool, int, float or str),
    ``pairs`` (a mapping of scalars); an ``int``, a ``choice`` among ``choices``, a ``flag``; an
    ``expr`` of the grammar, ``exprs`` (new column → expr). ``size`` is the (min, max) length
    of a list or mapping, or the range of an int.
    """

    name: str
    type: ParamType
    default: object = REQUIRED
    size: tuple[int, int] | None = None
    choices: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class Form:
    """A registered tag: its parameters, what ``build`` s it (a step's lowering method
    ``(query, **params) → query``, an aggregation's class or factory) and, for steps, a
    ``check(query, params)`` run on JSON input only."""

    tag: str
    params: tuple[Param, ...]
    build: Callable[..., Any]
    check: Callable[[Any, dict[str, Any]], None] | None = None


STEPS: dict[str, Form] = {}
AGGREGATIONS: dict[str, Form] = {}
_WRITERS: dict[type, Form] = {}  # aggregation class → the tag its objects are written with
_LISTENERS: list[Callable[[], None]] = []
F = TypeVar("F", bound=Callable[..., Any])


def _add(table: dict[str, Form], form: Form) -> None:
    names = [p.name for p in form.params]
    if not re.fullmatch(r"[a-z][a-z0-9_]*", form.tag) or len(set(names)) != len(names):
        raise DomainError(f"cannot register {form.tag!r}: a lower-case tag and distinct "
                          "parameter names are needed")
    if any(p.type not in TYPES for p in form.params):
        raise DomainError(f"{form.tag}: parameter types are one of {', '.join(TYPES)}")
    table[form.tag] = form
    for listener in _LISTENERS:
        listener()


def step(tag: str, *params: Param, check: Callable[[Any, dict[str, Any]], None] | None = None
         ) -> Callable[[F], F]:
    """Decorator registering a query method as the lowering of step ``tag`` (``params`` are
    its keyword arguments; ``check`` runs on JSON input before it)."""
    def register(fn: F) -> F:
        _add(STEPS, Form(tag, params, fn, check))
        return fn
    return register


def aggregation(tag: str, *params: Param) -> Callable[[F], F]:
    """Decorator registering an aggregation under ``tag`` with its parameters.

    On a dataclass: its objects are written with ``tag``, one JSON field per parameter (a
    parameter is a field of the same name; any other field must keep its default). On a
    factory function returning one (``dp.median``): a further tag, read only.

    Raises
    ------
    DomainError
        For a malformed tag or parameter, or a parameter default that differs from the
        field's.
    """
    def register(obj: F) -> F:
        form = Form(tag, params, obj)
        if isinstance(obj, type):
            defaults = {f.name: f.default for f in fields(obj)}
            for p in params:
                if p.name not in defaults or not (p.required or p.default == defaults[p.name]):
                    raise DomainError(f"{tag}: parameter {p.name!r} is not a field of "
                                      f"{obj.__name__} with that default")
        _add(AGGREGATIONS, form)
        if isinstance(obj, type):
            _WRITERS[obj] = form
        return obj
    return register


def unregister(tag: str) -> None:
    """Remove the step or aggregation ``tag`` from the registry (for tests and plug-ins)."""
    form = STEPS.pop(tag, None) or AGGREGATIONS.pop(tag, None)
    for cls in [c for c, f in _WRITERS.items() if f is form]:
        del _WRITERS[cls]
    for listener in _LISTENERS:
        listener()


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener()`` after every change of the registry (the server regenerates its
    request models)."""
    _LISTENERS.append(listener)


# -- JSON form of steps and aggregations ---------------------------------------------------
def encode_step(tag: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON form of a step as called. Raises ProtocolError if it has none."""
    if params is None or tag not in STEPS:
        raise ProtocolError(f"{tag}(…) has no JSON form (a library-only step)")
    return {"step": tag, **_encode_params(STEPS[tag], params)}


def decode_step(doc: Any) -> tuple[str, dict[str, Any]]:
    """``(tag, params)`` of a step's JSON form, every parameter checked (else ProtocolError)."""
    form = _form(STEPS, doc, "step")
    return form.tag, _decode_params(form, doc, "step")


def encode_agg(agg: Any) -> dict[str, Any]:
    """The JSON form of an aggregation object. Raises ProtocolError for an unregistered
    class or a field the JSON form cannot carry."""
    form = _WRITERS.get(type(agg))
    if form is None:
        raise ProtocolError(f"{type(agg).__name__} is not a registered aggregation")
    names = {p.name for p in form.params}
    for f in fields(agg):
        if f.name not in names and getattr(agg, f.name) is not f.default and (
                getattr(agg, f.name) != f.default):
            raise ProtocolError(f"{form.tag}: {f.name}= has no JSON form")
    return {"agg": form.tag, **_encode_params(form, vars(agg))}


def decode_agg(doc: Any) -> Any:
    """The aggregation object of a JSON form (its parameters checked, else ProtocolError)."""
    form = _form(AGGREGATIONS, doc, "agg")
    return form.build(**_decode_params(form, doc, "agg"))


def _form(table: dict[str, Form], doc: Any, key: str) -> Form:
    if not isinstance(doc, Mapping) or doc.get(key) not in table:
        tag = doc.get(key) if isinstance(doc, Mapping) else doc
        raise ProtocolError(f"unknown {key} {str(tag)[:50]!r}; known: {', '.join(table)}")
    return table[doc[key]]


def _at_default(p: Param, value: Any) -> bool:
    return value is p.default or (type(value) is type(p.default) and value == p.default)


def _encode_params(form: Form, params: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for p in form.params:
        value = params.get(p.name, p.default)
        if not _at_default(p, value):
            try:
                out[p.name] = _ENCODE[p.type](value)
            except (TypeError, ValueError, AttributeError, ZeroDivisionError):
                raise ProtocolError(f"{form.tag}: {p.name}={value!r} has no JSON form"
                                    ) from None
    return out


def _decode_params(form: Form, doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    unknown = set(doc) - {key, *(p.name for p in form.params)}
    if unknown:
        raise ProtocolError(f"{form.tag}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    out = {}
    for p in form.params:
        if p.name not in doc and p.required:
            raise ProtocolError(f"{form.tag}: {p.name} is required")
        out[p.name] = decode(p, doc[p.name], form.tag) if p.name in doc else p.default
    return out


def decode(p: Param, value: object, where: str = "") -> Any:
    """One parameter from JSON: checked against its type and limits, converted (numbers from
    strings to Fractions, bounds to a tuple, pairs to a dict, expressions to :class:`Expr`).

    Raises
    ------
    ProtocolError
        If the value is not of the parameter's type or is over a limit.
    """
    if value is None and p.default is None:
        return None
    what = f"{where}.{p.name}" if where else p.name
    if p.type in ("columns", "numbers", "pairs", "exprs"):
        kind = Mapping if p.type == "exprs" else (list, tuple)
        lo, hi = p.size or (0, 1 << 20)
        if not isinstance(value, kind) or not lo <= len(value) <= hi:
            raise ProtocolError(f"{what}: expected {lo} to {hi} items")
    if p.type in ("int", "flag") and (type(value) is not (int if p.type == "int" else bool)
                                      or p.size and not p.size[0] <= value <= p.size[1]):
        raise ProtocolError(f"{what}: expected {'an int in ' + str(p.size) if p.size else p.type}")
    if p.type == "choice" and value not in p.choices:
        raise ProtocolError(f"{what}: one of {', '.join(p.choices)}")
    try:
        return _DECODE[p.type](value)
    except ProtocolError as exc:
        raise ProtocolError(f"{what}: {exc}") from None


def _name(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME:
        raise ProtocolError(f"expected a name of 1 to {MAX_NAME} characters")
    return value


def _new_name(value: Any) -> str:
    if _name(value).startswith("__dpkit"):
        raise ProtocolError("column names starting with '__dpkit' are reserved")
    return value


def _scalar(value: Any) -> bool | int | float | str:
    if isinstance(value, str) and len(value) > MAX_TEXT or not isinstance(
            value, bool | int | float | str):
        raise ProtocolError(f"expected a bool, number or string of at most {MAX_TEXT} "
                            "characters")
    return value


def _pairs(value: Any) -> dict[Any, Any]:
    if not all(isinstance(kv, list | tuple) and len(kv) == 2 for kv in value):
        raise ProtocolError("expected [old, new] pairs")
    out = {_scalar(k): _scalar(v) for k, v in value}
    if len(out) != len(value):
        raise ProtocolError("repeated source values")
    return out


def _bounds(value: Any) -> tuple[Any, Any]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ProtocolError("expected [lower, upper]")
    return number(value[0]), number(value[1])


def number(value: Any) -> int | float | Fraction:
    """A JSON number as it is, or an exact rational from a string ("1/3", "1e-6"); finite.

    Raises
    ------
    ProtocolError
        For a bool, a non-finite float, or a string that is not a bounded decimal or ratio.
    """
    if isinstance(value, str):
        if not _RATIONAL.match(value.strip()):  # bounded: "1e99999999" would take minutes
            raise ProtocolError(f"{value[:50]!r} is not a number (use e.g. 0.25, 1e-6 or 1/3)")
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ProtocolError(f"{value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ProtocolError(f"expected a finite number, got {str(value)[:50]!r}")
    return value


def json_number(value: Any) -> int | float | str:
    """A number for JSON: ints and floats as they are, other rationals exactly as "p/q"."""
    if isinstance(value, bool):
        raise ProtocolError(f"expected a number, got {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ProtocolError(f"{value!r} is not a finite number")
        return value
    try:
        return str(Fraction(value))
    except (TypeError, ValueError):
        raise ProtocolError(f"{value!r} is not a number") from None


def json_scalar(value: object) -> bool | int | float | str:
    """A bool, number or string for JSON (NumPy scalars unwrapped); else ProtocolError."""
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and not math.isfinite(value):
        raise ProtocolError(f"{value!r} has no JSON form")
    return _scalar(value)


def _pair(lower: Any, upper: Any) -> tuple[Any, Any]:
    return lower, upper


def _node_of(value: Any) -> dict[str, Any]:
    if not isinstance(value, Expr):
        raise TypeError("not a grammar expression")
    return dict(value.node)


_DECODE: dict[str, Callable[[Any], Any]] = {
    "column": _name, "new_column": _new_name, "label": _name, "choice": str, "int": int,
    "flag": bool, "columns": lambda v: tuple(_name(c) for c in v), "number": number,
    "numbers": lambda v: [number(x) for x in v], "bounds": _bounds, "scalar": _scalar,
    "pairs": _pairs, "expr": lambda v: Expr(check_tree(v)),
    "exprs": lambda v: {_new_name(k): Expr(check_tree(e)) for k, e in v.items()}}
_ENCODE: dict[str, Callable[[Any], Any]] = {
    "column": _name, "new_column": _name, "label": _name, "choice": str, "int": operator.index,
    "flag": bool, "columns": lambda v: [_name(c) for c in v], "number": json_number,
    "numbers": lambda v: [json_number(x) for x in v],
    "bounds": lambda v: [json_number(x) for x in _pair(*v)],
    "scalar": json_scalar, "pairs": lambda v: [[json_scalar(k), json_scalar(x)]
                                               for k, x in v.items()],
    "expr": _node_of, "exprs": lambda v: {_name(k): _node_of(e) for k, e in v.items()}}


# -- expressions -----------------------------------------------------------------------------
def _op(op: str, reflected: bool = False) -> Callable[..., Expr]:
    def apply(self: Expr, *others: Any) -> Expr:
        args = [_node(o) for o in others]
        return Expr({"op": op, "args": [*args, self.node] if reflected else [self.node, *args]})
    return apply


class Expr:
    """A row-wise expression of the grammar: ``node`` is its JSON form. Build with
    :func:`col` and :func:`lit`, comparisons, ``+ - * /``, ``& | ~`` and :meth:`is_null`."""

    __hash__ = None  # type: ignore[assignment]  # == builds an expression

    def __init__(self, node: Mapping[str, Any]) -> None:
        self.node = node

    __ge__, __gt__, __le__, __lt__ = _op(">="), _op(">"), _op("<="), _op("<")
    __eq__, __ne__ = _op("=="), _op("!=")  # type: ignore[assignment]
    __add__, __sub__, __mul__, __truediv__ = _op("+"), _op("-"), _op("*"), _op("/")
    __radd__, __rsub__ = _op("+", reflected=True), _op("-", reflected=True)
    __rmul__, __rtruediv__ = _op("*", reflected=True), _op("/", reflected=True)
    __and__, __or__, __invert__ = _op("&"), _op("|"), _op("~")
    __rand__, __ror__ = _op("&", reflected=True), _op("|", reflected=True)
    is_null = _op("is_null")  # true where the value is null

    def is_in(self, *values: Any) -> Expr:
        """True where the value is one of the literal ``values`` (SQL ``IN``; null stays
        null). More than 15 values become an ``|`` of ``in`` nodes (16 arguments a node)."""
        return Expr(in_node(self.node, [{"lit": v} for v in values]))

    def like(self, pattern: str, *, case_sensitive: bool = True) -> Expr:
        """True where the string matches the SQL ``LIKE`` ``pattern`` (``%`` any run of
        characters, ``_`` one character, ``\\`` escapes them); ``ILIKE`` when not
        ``case_sensitive``."""
        return Expr({"op": "like" if case_sensitive else "ilike",
                     "args": [self.node, {"lit": pattern}]})

    def __bool__(self) -> bool:
        raise TypeError("an expression has no truth value; combine with & and |, not and/or")

    def __repr__(self) -> str:
        return f"Expr({expression_text(self.node)})"


def col(name: str) -> Expr:
    """The column ``name`` of the (transformed) private table."""
    return Expr({"col": name})


def lit(value: object) -> Expr:
    """A literal (bool, int, float or str)."""
    return Expr({"lit": value})


def in_node(value: Mapping[str, Any], literals: list[Any]) -> dict[str, Any]:
    """``value IN literals`` as grammar nodes of at most 16 arguments: an ``in`` node, or an
    ``|`` of ``in`` nodes of 15 literals each."""
    chunks = [{"op": "in", "args": [value, *literals[i:i + 15]]}
              for i in range(0, max(len(literals), 1), 15)]
    return chunks[0] if len(chunks) == 1 else {"op": "|", "args": chunks}


def case(*branches: tuple[Any, Any], otherwise: Any = None) -> Expr:
    """SQL ``CASE WHEN c₁ THEN v₁ … ELSE e END``: the value of the first branch whose
    condition is true (a null condition is not true), else ``otherwise`` (null if None).

    Raises
    ------
    ProtocolError
        Without a branch.
    """
    if not branches:
        raise ProtocolError("case needs at least one (condition, value) branch")
    args = [_node(x) for cond, value in branches for x in (cond, value)]
    return Expr({"op": "case", "args": args + ([] if otherwise is None else [_node(otherwise)])})


def _node(value: Any) -> Any:
    return value.node if isinstance(value, Expr) else {"lit": value}


_CMP: dict[str, Callable[[Any, Any], Any]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt,
    "==": operator.eq, "!=": operator.ne, "+": operator.add, "-": operator.sub,
    "*": operator.mul, "/": operator.truediv}
_LOGIC: dict[str, Callable[[Any, Any], Any]] = {"&": operator.and_, "|": operator.or_}
_UNARY: dict[str, Callable[[Any], Any]] = {"~": operator.invert,
                                           "is_null": lambda e: e.is_null()}
_SPECIAL = ("in", "like", "ilike", "case", "least", "greatest")  # SQL's IN, LIKE, ILIKE,
# CASE WHEN, LEAST and GREATEST
OPERATORS = (*_CMP, *_LOGIC, *_UNARY, *_SPECIAL)
_ARITHMETIC = frozenset({"+", "-", "*", "/"})
_INT64 = (-(1 << 63), (1 << 63) - 1)


def check_tree(root: Any) -> dict[str, Any]:
    """Check an expression's JSON form: nodes ``{"col": name}``, ``{"lit": scalar}`` or
    ``{"op": o, "args": [1 to 16 nodes]}`` with ``o`` in OPERATORS, at most MAX_EXPR_DEPTH
    operators deep and MAX_EXPR_NODES nodes (else ProtocolError)."""
    stack: list[tuple[Any, int]] = [(root, 0)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if depth > MAX_EXPR_DEPTH:
            raise ProtocolError(f"expression nested deeper than {MAX_EXPR_DEPTH} operators")
        if seen > MAX_EXPR_NODES:
            raise ProtocolError(f"expression larger than {MAX_EXPR_NODES} nodes")
        keys = set(node) if isinstance(node, Mapping) else None
        if keys == {"col"}:
            _name(node["col"])
        elif keys == {"lit"}:
            _scalar(node["lit"])
        elif keys == {"op", "args"} and node["op"] in OPERATORS and isinstance(
                node["args"], list | tuple) and 1 <= len(node["args"]) <= 16:
            stack.extend((a, depth + 1) for a in node["args"])
        else:
            raise ProtocolError(f"malformed expression node {str(node)[:80]}: use col, lit or "
                                f"op (one of {' '.join(OPERATORS)}) with 1 to 16 args")
    return dict(root)


def compile_expr(node: Expr | Mapping[str, Any], schema: Mapping[str, Any] | None = None
                 ) -> Any:
    """Compile an expression of the grammar to a narwhals expression.

    The compiled expression is total: it cannot fail on any row. Arithmetic (``+ - * /``)
    runs in Float64 (integer overflow raises in DuckDB and in Spark's ANSI mode; floats
    overflow to ±inf instead), division by zero gives null, and integer literals must fit
    in Int64. With a ``schema`` every operator is type-checked first (numbers for
    arithmetic, booleans for logic, one kind on both sides of a comparison), so that no
    implicit cast can fail on a value.

    Parameters
    ----------
    node : Expr or mapping
        ``{"col": name}``, ``{"lit": value}`` or ``{"op": o, "args": [...]}``.
    schema : mapping of column → dtype, optional
        The table's schema at this step (queries always pass it).

    Returns
    -------
    narwhals.Expr

    Raises
    ------
    ProtocolError
        For an unknown operator, a wrong number of arguments, a wrongly typed argument, or
        an expression deeper than ``MAX_EXPR_DEPTH`` or larger than ``MAX_EXPR_NODES``.
    """
    tree = check_tree(node.node if isinstance(node, Expr) else node)
    if schema is not None:
        expr_kind(tree, schema)
    compiled = _compile(tree)
    _TEXTS[id(compiled)] = expression_text(tree)  # a plan's description reads it back
    weakref.finalize(compiled, _TEXTS.pop, id(compiled), None)
    return compiled


# the text of each live compiled expression, by id (dropped when the expression is)
_TEXTS: dict[int, str] = {}
_INFIX = {"==": "=", "&": "AND", "|": "OR"}
_FUNCTIONS = {"least": "LEAST", "greatest": "GREATEST"}
_KEYWORDS = frozenset({"TRUE", "FALSE", "NULL", "NOT", "AND", "OR", "IN", "IS", "LIKE", "ILIKE",
                       "CASE", "WHEN", "THEN", "ELSE", "END", "LEAST", "GREATEST"})


def compiled_text(compiled: object) -> str | None:
    """The :func:`expression_text` of an expression :func:`compile_expr` returned (a query's
    steps hold compiled expressions), or None for any other object."""
    return _TEXTS.get(id(compiled))


def expression_text(node: Expr | Mapping[str, Any]) -> str:
    """An expression of the grammar as SQL-like infix text, for people (a plan's
    description, the release listing): ``year >= 1985``, ``(x * 2) + 1``,
    ``(sex = 'F') AND (age IS NULL)``, ``CASE WHEN … THEN … ELSE … END``. Compound operands
    are parenthesised, so the text is deterministic and unambiguous; the exact form is the
    JSON node (:meth:`Query.to_json <dpkit.frame.Query.to_json>`).

    Parameters
    ----------
    node : Expr or mapping
        A checked expression (:func:`check_tree`).

    Returns
    -------
    str
    """
    tree = node.node if isinstance(node, Expr) else node
    if "col" in tree:
        name = str(tree["col"])
        bare = name.isidentifier() and name.upper() not in _KEYWORDS  # else it could read
        return name if bare else '"' + name.replace('"', '""') + '"'  # as a literal or op
    if "lit" in tree:
        return _literal_text(tree["lit"])
    op, args = tree["op"], [_operand(a) for a in tree["args"]]
    if op == "~":
        return f"NOT {args[0]}"
    if op == "is_null":
        return f"{args[0]} IS NULL"
    if op == "in":
        return f"{args[0]} IN ({', '.join(args[1:])})"
    if op in ("like", "ilike"):
        return f"{args[0]} {op.upper()} {args[1]}"
    if op == "case":
        pairs = [f"WHEN {args[i]} THEN {args[i + 1]}" for i in range(0, len(args) - 1, 2)]
        other = f" ELSE {args[-1]}" if len(args) % 2 else ""
        return f"CASE {' '.join(pairs)}{other} END"
    if op in _FUNCTIONS:
        return f"{_FUNCTIONS[op]}({', '.join(args)})"
    return f" {_INFIX.get(op, op)} ".join(args)


def _operand(node: Mapping[str, Any]) -> str:
    text = expression_text(node)
    return f"({text})" if "op" in node and node["op"] not in ("least", "greatest") else text


def _literal_text(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value) if isinstance(value, float) else str(value)


def column_kind(dtype: nw.dtypes.DType) -> str:
    """The kind of value a column holds: "boolean", "number", "string", "temporal", "other"."""
    if dtype == nw.Boolean:
        return "boolean"
    if dtype.is_numeric():
        return "number"
    if dtype in (nw.String, nw.Categorical) or isinstance(dtype, nw.Enum):
        return "string"
    if dtype.is_temporal():
        return "temporal"
    return "other"


def value_kind(value: object) -> str:
    """The kind of a literal: "boolean", "number" or "string"."""
    return "boolean" if isinstance(value, bool) else (
        "number" if isinstance(value, int | float) else "string")


def expr_kind(node: Any, schema: Mapping[str, Any]) -> str:
    """The kind of value an expression (checked by :func:`check_tree`) yields ("number",
    "string", "boolean", "temporal"), or ProtocolError if an operator gets arguments of the
    wrong kind."""
    node = node.node if isinstance(node, Expr) else node
    if "col" in node:
        if node["col"] not in schema:
            raise ProtocolError(f"unknown column {node['col']!r}")
        return column_kind(schema[node["col"]])
    if "lit" in node:
        return value_kind(node["lit"])
    op, kinds = node["op"], [expr_kind(a, schema) for a in node["args"]]
    if op == "is_null":
        return "boolean"
    if op in _SPECIAL:
        return _special_kind(op, node["args"], kinds)
    if op in _ARITHMETIC:
        if any(k != "number" for k in kinds):
            raise ProtocolError(f"operator {op!r} takes numbers, got {', '.join(kinds)}")
        return "number"
    if op in _CMP:
        if len(set(kinds)) != 1 or kinds[0] == "other":
            raise ProtocolError(f"operator {op!r} compares values of one kind, got "
                                f"{', '.join(kinds)}")
        return "boolean"
    if any(k != "boolean" for k in kinds):
        raise ProtocolError(f"operator {op!r} takes conditions, got {', '.join(kinds)}")
    return "boolean"


def _special_kind(op: str, args: list[Any], kinds: list[str]) -> str:
    """The kind of an ``in``, ``like``/``ilike`` or ``case`` node (its arguments' kinds
    given), or ProtocolError."""
    if op in ("least", "greatest"):
        if len(kinds) < 2 or any(k != "number" for k in kinds):
            raise ProtocolError(f"{op} takes 2 or more numbers, got {', '.join(kinds)}")
        return "number"
    if op == "case":
        pairs = len(kinds) // 2
        conditions = kinds[0:2 * pairs:2]
        values = kinds[1:2 * pairs:2] + kinds[2 * pairs:]  # then the default, if any
        if len(kinds) < 2 or any(k != "boolean" for k in conditions):
            raise ProtocolError("case takes (condition, value) pairs and an optional default")
        if len(set(values)) != 1 or values[0] == "other":
            raise ProtocolError(f"case values must be of one kind, got {', '.join(values)}")
        return values[0]
    if any("lit" not in a for a in args[1:]):
        raise ProtocolError(f"{op}: the values after the first argument must be literals")
    if op == "in":
        if len(args) < 2 or len(set(kinds)) != 1 or kinds[0] == "other":
            raise ProtocolError(f"in: literals of the value's kind ({kinds[0]}) are needed")
        return "boolean"
    if kinds != ["string", "string"]:
        raise ProtocolError(f"{op} matches a string against a string pattern, got "
                            f"{', '.join(kinds)}")
    return "boolean"


def like_pattern(pattern: str, case_sensitive: bool = True) -> str:
    """The regular expression of a SQL ``LIKE`` pattern: ``%`` is any run of characters
    (newlines too), ``_`` one character, a backslash escapes the next character; anchored.
    Every other character is matched literally, so the regex has no nested repetition
    (linear-time engines: Polars' and DuckDB's)."""
    out, chars = [], iter(pattern)
    for c in chars:
        if c == "\\":
            out.append(re.escape(next(chars, "\\")))
        else:
            out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
    return ("(?s)" if case_sensitive else "(?is)") + "^" + "".join(out) + "$"


def _compile_special(op: str, node: Mapping[str, Any], args: list[Any]) -> Any:
    if op in ("least", "greatest"):  # nulls ignored, in Float64 like arithmetic
        if len(args) < 2:
            raise ProtocolError(f"{op} takes 2 or more arguments")
        fn = nw.min_horizontal if op == "least" else nw.max_horizontal
        return fn(*(a.cast(nw.Float64) for a in args))
    if op == "case":  # nested when/then: the first true condition wins, as in SQL
        if len(args) < 2:
            raise ProtocolError("case takes (condition, value) pairs and an optional default")
        last = len(args) - 2 - len(args) % 2
        out: Any = nw.when(args[last]).then(args[last + 1])
        if len(args) % 2:
            out = out.otherwise(args[-1])
        for i in range(last - 2, -1, -2):
            out = nw.when(args[i]).then(args[i + 1]).otherwise(out)
        return out
    if len(node["args"]) < 2 or any("lit" not in a for a in node["args"][1:]):
        raise ProtocolError(f"{op} takes a value and literals")
    values = [a["lit"] for a in node["args"][1:]]
    if op == "in":
        if all(value_kind(v) == "number" for v in values):  # is_in needs equal types
            out = args[0] == values[0]
            for v in values[1:]:
                out = out | (args[0] == v)
            return out
        return args[0].is_in(values)
    if len(values) != 1 or not isinstance(values[0], str):
        raise ProtocolError(f"{op} takes a string and one string pattern")
    return args[0].str.contains(like_pattern(values[0], op == "like"))


def _compile(node: Mapping[str, Any]) -> Any:
    if "col" in node:
        return nw.col(node["col"])
    if "lit" in node:
        v = node["lit"]
        if isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
            raise ProtocolError(f"integer literal {v} does not fit in 64 bits")
        if isinstance(v, float) and not math.isfinite(v):
            raise ProtocolError("literals must be finite")
        return nw.lit(v)
    op, args = node["op"], [_compile(a) for a in node["args"]]
    if op in _SPECIAL:
        return _compile_special(op, node, args)
    if op in _UNARY:
        _arity(op, args, 1)
        return _UNARY[op](args[0])
    if op in _ARITHMETIC:
        _arity(op, args, 2)
        a, b = (x.cast(nw.Float64) for x in args)
        if op == "/":  # x / 0 is null on every backend (Spark's ANSI mode raises)
            c = node["args"][1].get("lit")
            if isinstance(c, int | float) and not isinstance(c, bool):
                # a reciprocal: Polars' x / c depends on the column's length
                return a * (1.0 / c) if c != 0 and math.isfinite(1.0 / c) else nw.lit(
                    None, nw.Float64)
            return nw.when(b != 0).then(a * (nw.lit(1.0) / b))
        return _CMP[op](a, b)
    if op in _CMP:
        _arity(op, args, 2)
        return _CMP[op](args[0], args[1])
    if len(args) < 2:
        raise ProtocolError(f"operator {op!r} takes 2 or more arguments")
    out = args[0]
    for a in args[1:]:
        out = _LOGIC[op](out, a)
    return out


def _arity(op: str, args: list[Any], n: int) -> None:
    if len(args) != n:
        raise ProtocolError(f"operator {op!r} takes {n} argument{'s' if n > 1 else ''}, "
                            f"got {len(args)}")
