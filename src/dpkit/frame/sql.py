"""SQL, compiled to the one query language: ``session.sql("SELECT sex, AVG(age) FROM adult
GROUP BY sex", epsilon=1)``.

SQL is a front end of the builder, not a second engine. The text is parsed by sqlglot
(``sqlglot.parse_one(text, read=dialect)``; dialects :data:`DIALECTS`: DuckDB, the default,
PostgreSQL, Spark SQL and BigQuery — the common spellings each of them reads), and the tree is
translated **by allow-list** into a :class:`~dpkit.frame.Query` of the registry
(:mod:`dpkit.frame.language`): row-wise SQL becomes the grammar's expressions (``filter``,
``with_columns``), ``GROUP BY`` becomes ``group_by`` over declared keys (or a private
partition selection when the caller passes ``selection=``), each aggregate an aggregation of
:mod:`dpkit.frame.aggregates` with the declared bounds (:meth:`Session.declared
<dpkit.frame.Session.declared>`). The release then goes the one road: the same plan-time
checks, dry run, debit and record as :meth:`Query.release <dpkit.frame.Query.release>`.
``HAVING``, ``ORDER BY`` and ``LIMIT`` are post-processing of the noisy result (they cost no
privacy; the plan's description says so).

Everything outside :data:`SUPPORTED` is refused while translating — before any data is read or
budget spent — with a :class:`SQLError` naming the line, column and fragment: subqueries that
aggregate, window functions, set operations, joins of private tables, non-deterministic and
unknown functions. Text longer than :data:`MAX_SQL_BYTES` is refused before parsing.

Decisions, and why:

- **Bounds of an expression** (``AVG(age * 2)``): the aggregate reads a ``with_columns`` column
  whose bounds follow from the declared bounds by interval arithmetic (``+ - *``, division by a
  non-zero literal, ``CASE`` as the hull of its values, a condition as [0, 1]); otherwise the
  statement is refused, naming the declaration that is missing. Interval arithmetic keeps
  "declared, never inferred" (DESIGN.md §3.4): the bounds are a function of declared facts.
  The aggregation clamps to those bounds, so the guarantee holds whatever the data hold.
- **``VAR_SAMP`` / ``VARIANCE`` / ``STDDEV``** release :func:`dpkit.variance` / ``std``, the
  population form (S₂/N − (S₁/N)²): the sample form's N/(N − 1) would need the noisy count,
  which the release does not return; the two differ by O(1/N).
- **``COUNT(col)``** is the sum of ``col IS NOT NULL`` over [0, 1] (the count's sensitivity).
- **``/``** is real division (DuckDB's), null on a zero divisor.
- **Budget split**: the ``split=`` option, in the order of the aggregates in ``SELECT``.
- **Table names**: the session's table names; a session opened on one unnamed table (named
  ``data``) answers to any single table name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Protocol

import narwhals as nw
import polars as pl
import sqlglot
from sqlglot import exp

from dpkit.core.numbers import Number
from dpkit.errors import DomainError
from dpkit.frame import aggregates
from dpkit.frame.language import Expr, ProtocolError, compile_expr, expr_kind
from dpkit.frame.query import Plan, Query, SessionLike
from dpkit.frame.schema import Schema, missing_bounds, missing_categories
from dpkit.mechanisms.limited_domain import TopKSelection
from dpkit.mechanisms.partition_selection import PartitionSelection

__all__ = ["SQLError", "SQLQuery", "SQLSession", "PostProcess", "to_query", "MAX_SQL_BYTES",
           "DIALECTS", "SUPPORTED"]

MAX_SQL_BYTES = 1 << 20  # longer text is refused before parsing
DIALECTS = ("duckdb", "postgres", "spark", "bigquery")
MAX_KEYS = 10_000  # distinct values of a public table's column used as group keys

SUPPORTED: tuple[tuple[str, str], ...] = (
    ("COUNT(*)", "SELECT COUNT(*) FROM adult"),
    ("COUNT(col)", "SELECT COUNT(age) FROM adult"),
    ("COUNT(DISTINCT unit)", "SELECT COUNT(DISTINCT pid) FROM adult"),
    ("COUNT(DISTINCT col)", "SELECT COUNT(DISTINCT education) FROM adult"),
    ("SUM, AVG", "SELECT SUM(age), AVG(age) FROM adult"),
    ("VAR_SAMP, VARIANCE, VAR_POP", "SELECT VARIANCE(age) FROM adult"),
    ("STDDEV, STDDEV_SAMP, STDDEV_POP", "SELECT STDDEV(age) FROM adult"),
    ("MIN, MAX, MEDIAN", "SELECT MIN(age), MAX(age), MEDIAN(age) FROM adult"),
    ("PERCENTILE_CONT / PERCENTILE_DISC",
     "SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) FROM adult"),
    ("QUANTILE_CONT, APPROX_QUANTILE (DuckDB, Spark)",
     "SELECT QUANTILE_CONT(age, 0.25) FROM adult"),
    ("APPROX_QUANTILES (BigQuery)", "SELECT APPROX_QUANTILES(age, 4)[OFFSET(2)] FROM adult"),
    ("arithmetic in aggregates (bounds by interval arithmetic)",
     "SELECT AVG(age * 2 + 1) FROM adult"),
    ("CASE WHEN, IF", "SELECT SUM(CASE WHEN sex = 'Male' THEN 1 ELSE 0 END) FROM adult"),
    ("WHERE: = <> < <= > >=, AND, OR, NOT", "SELECT COUNT(*) FROM adult WHERE NOT age < 30"),
    ("WHERE: IN, BETWEEN, IS [NOT] NULL, [NOT] LIKE, ILIKE",
     "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40 AND race IN ('White')"),
    ("GROUP BY columns (declared categories)", "SELECT sex, COUNT(*) FROM adult GROUP BY sex"),
    ("GROUP BY expressions, ordinals, aliases",
     "SELECT age >= 40 AS older, COUNT(*) FROM adult GROUP BY 1"),
    ("GROUP BY undeclared keys with selection=dp.PartitionSelection(...)",
     "SELECT \"native-country\", COUNT(*) FROM adult GROUP BY 1"),
    ("aliases", "SELECT AVG(age) AS mean_age FROM adult"),
    ("HAVING, ORDER BY, LIMIT (post-processing)",
     "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex HAVING n > 10 ORDER BY n DESC LIMIT 1"),
    ("JOIN a public table (public={name: frame})",
     "SELECT region, COUNT(*) FROM adult JOIN regions USING (\"native-country\") GROUP BY region"),
    ("WITH a row-wise query", "WITH t AS (SELECT age * 2 AS a2 FROM adult) SELECT AVG(a2) FROM t"),
    ("quoted identifiers", "SELECT COUNT(*) FROM adult WHERE \"hours-per-week\" > 40"),
)
_SUMMARY = ("SELECT of COUNT/SUM/AVG/VARIANCE/STDDEV/MIN/MAX/MEDIAN/PERCENTILE_CONT with "
            "WHERE, GROUP BY, HAVING, ORDER BY, LIMIT, a JOIN with a public table and a "
            "row-wise WITH (dpkit.frame.sql.SUPPORTED lists them)")


class SQLSession(SessionLike, Protocol):
    """What SQL needs of a session: a :class:`~dpkit.frame.query.SessionLike` that also
    knows each table's declared :class:`~dpkit.frame.Schema` (a
    :class:`~dpkit.frame.Session`)."""

    def declared(self, name: str | None = None) -> Schema | None: ...


class SQLError(ProtocolError):
    """A SQL statement outside the supported forms, or malformed.

    Attributes
    ----------
    line, column : int
        Where the offending fragment starts (1-based; 0 when not known).
    fragment : str
        The offending text (at most 80 characters).
    """

    def __init__(self, message: str, line: int = 0, column: int = 0, fragment: str = "") -> None:
        where = f" (line {line}, column {column}: {fragment!r})" if line else ""
        super().__init__(message + where)
        self.line, self.column, self.fragment = line, column, fragment


def _position(text: str, start: int) -> tuple[int, int]:
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


def _span(node: exp.Expr) -> tuple[int, int] | None:
    """(start, end) offsets of the tokens under ``node``, or None."""
    starts, ends = [], []
    for n in node.walk():
        meta = n.meta
        if "start" in meta and "end" in meta:
            starts.append(meta["start"])
            ends.append(meta["end"])
    return (min(starts), max(ends)) if starts else None


def _error(text: str, node: exp.Expr | None, message: str) -> SQLError:
    span = _span(node) if node is not None else None
    if span is None:
        return SQLError(message)
    start, end = span[0], span[1] + 1
    depth = text.count("(", start, end) - text.count(")", start, end)
    while depth > 0 and end < len(text) and end - start < 80:  # a call's closing parenthesis
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    line, column = _position(text, start)
    return SQLError(message, line, column, text[start:end][:80])


# -- the result's post-processing ----------------------------------------------------------
@dataclass(frozen=True)
class PostProcess:
    """What SQL asks of the noisy result after the release: the ``SELECT`` list's order and
    names, ``HAVING``, ``ORDER BY`` and ``LIMIT``. Post-processing of a DP release costs no
    privacy (Dwork & Roth Prop. 2.1); every part is checked when built, so :meth:`apply`
    cannot fail on any value.

    Attributes
    ----------
    columns : tuple of (str, str)
        (released column, output name), in output order.
    having : Expr or None
        A condition over the output columns (noisy estimates and keys).
    order : tuple of (str, bool, bool)
        (output column, descending, nulls last).
    limit : int or None
        At most this many rows.
    text : str
        The SQL of the post-processing, for the plan's description.
    """

    columns: tuple[tuple[str, str], ...] = ()
    having: Expr | None = None
    having_schema: Mapping[str, Any] = field(default_factory=dict)
    order: tuple[tuple[str, bool, bool], ...] = ()
    limit: int | None = None
    text: str = ""

    def apply(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The released frame, renamed and ordered as the ``SELECT`` list, filtered by
        ``HAVING``, sorted by ``ORDER BY`` and cut by ``LIMIT``."""
        out = frame.select([pl.col(src).alias(dst) for src, dst in self.columns])
        if self.having is not None:
            condition = compile_expr(self.having, self.having_schema)
            out = nw.from_native(out).filter(condition).to_native()
        if self.order:
            out = out.sort([c for c, _, _ in self.order],
                           descending=[d for _, d, _ in self.order],
                           nulls_last=[n for _, _, n in self.order])
        return out.head(self.limit) if self.limit is not None else out


@dataclass(frozen=True)
class SQLQuery:
    """A SQL statement translated: the builder's ``query`` and the ``post``-processing of
    its result. ``plan``/``explain``/``release`` take the budget as :meth:`Query.release
    <dpkit.frame.Query.release>` does (``split``: weights of the aggregates in ``SELECT``
    order)."""

    query: Query
    post: PostProcess
    text: str

    def plan(self, epsilon: Number | None = None, *, rho: Number | None = None,
             delta: Number | None = None, split: Sequence[Number] | None = None) -> Plan:
        """The :class:`~dpkit.frame.Plan` of the release (reads nothing, spends nothing);
        its description ends with the post-processing, if any."""
        plan = self.query.plan(epsilon, rho=rho, delta=delta, split=split)
        if not self.post.text:
            return plan
        return replace(plan, description=f"{plan.description} | post-processing (no privacy "
                                         f"cost): {self.post.text}")

    def explain(self, epsilon: Number | None = None, *, rho: Number | None = None,
                delta: Number | None = None, split: Sequence[Number] | None = None,
                confidence: float = 0.95) -> str:
        """:meth:`Query.explain <dpkit.frame.Query.explain>` plus the post-processing."""
        text = self.query.explain(epsilon, rho=rho, delta=delta, split=split,
                                  confidence=confidence)
        if self.post.text:
            text += f"\npost-processing of the noisy result (no privacy cost): {self.post.text}"
        return text

    def release(self, epsilon: Number | None = None, *, rho: Number | None = None,
                delta: Number | None = None, split: Sequence[Number] | None = None,
                confidence: float = 0.95, idempotency_key: str | None = None
                ) -> pl.DataFrame:
        """Release through the session (one debit, one record) and post-process the
        result; the frame of :meth:`Query.release <dpkit.frame.Query.release>` with the
        ``SELECT`` list's names and order."""
        plan = self.plan(epsilon, rho=rho, delta=delta, split=split)
        record = self.query.session.release(plan, confidence=confidence,
                                            idempotency_key=idempotency_key)
        return self.post.apply(record.values)


def to_query(session: SQLSession, text: str, *, dialect: str = "duckdb",
             public: Mapping[str, Any] | None = None,
             selection: PartitionSelection | TopKSelection | None = None) -> SQLQuery:
    """Translate a SQL statement into a query of ``session`` (reads no data, spends nothing).

    Parameters
    ----------
    session : Session
        The private tables, their declared schemas (:class:`~dpkit.frame.Schema`) and the
        privacy unit.
    text : str
        One ``SELECT`` statement, at most :data:`MAX_SQL_BYTES` bytes (UTF-8).
    dialect : str
        How to read it: one of :data:`DIALECTS` (default ``"duckdb"``).
    public : mapping of str to table, optional
        Public tables the statement may ``JOIN`` (name → Polars frame or what it accepts).
    selection : PartitionSelection or TopKSelection, optional
        Lets ``GROUP BY`` on a column without declared categories select its keys privately
        (spends its (ε, δ) on top of the aggregates'; an (ε, δ) session).

    Returns
    -------
    SQLQuery
        The query and its post-processing.

    Raises
    ------
    SQLError
        For text over the limit, a parse error, or any form outside :data:`SUPPORTED`, with
        the line, column and fragment; and for a missing declaration (its message names it).
    DomainError, ColumnError, BoundsError
        As the builder raises them for the translated query.
    """
    if not isinstance(text, str):
        raise SQLError("SQL text must be a string")
    if len(text) > MAX_SQL_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_SQL_BYTES:
        raise SQLError(f"SQL text longer than {MAX_SQL_BYTES} bytes is refused")
    if dialect not in DIALECTS:
        raise SQLError(f"unknown dialect {str(dialect)[:40]!r}; one of {', '.join(DIALECTS)}")
    tree = _parse(text, dialect)
    return _Translator(session, text, dict(public or {}), selection).statement(tree)


def _parse(text: str, dialect: str) -> exp.Expr:
    try:
        trees = sqlglot.parse(text, read=dialect)
    except sqlglot.errors.ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        line, column = int(first.get("line") or 0), int(first.get("col") or 0)
        fragment = str(first.get("highlight") or "")[:80]
        raise SQLError(f"cannot parse the SQL ({str(first.get('description') or 'syntax')[:120]})",
                       line, column, fragment) from None
    except (sqlglot.errors.TokenError, sqlglot.errors.SqlglotError, RecursionError,
            ValueError) as exc:
        raise SQLError(f"cannot read the SQL ({type(exc).__name__})") from None
    found = [t for t in trees if t is not None]
    if len(found) != 1:
        raise SQLError(f"one SELECT statement is supported, got {len(found)}")
    return found[0]


# -- translation ----------------------------------------------------------------------------
_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Variance, exp.VariancePop, exp.Stddev,
               exp.StddevSamp, exp.StddevPop, exp.Min, exp.Max, exp.Median, exp.PercentileCont,
               exp.PercentileDisc, exp.Quantile, exp.ApproxQuantile, exp.ApproxQuantiles,
               exp.WithinGroup)
_AGG_FUNCTIONS: tuple[type[exp.Expr], ...] = (exp.AggFunc, exp.WithinGroup)
_SIMPLE: dict[type[exp.Expr], tuple[str, Callable[..., aggregates.Aggregation]]] = {
    exp.Sum: ("SUM", aggregates.sum), exp.Avg: ("AVG", aggregates.mean),
    exp.Variance: ("VARIANCE", aggregates.variance),
    exp.VariancePop: ("VAR_POP", aggregates.variance),
    exp.Stddev: ("STDDEV", aggregates.std), exp.StddevSamp: ("STDDEV_SAMP", aggregates.std),
    exp.StddevPop: ("STDDEV_POP", aggregates.std), exp.Min: ("MIN", aggregates.min),
    exp.Max: ("MAX", aggregates.max), exp.Median: ("MEDIAN", aggregates.median)}
_COMPARE: dict[type[exp.Expr], str] = {
    exp.EQ: "==", exp.NEQ: "!=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.And: "&", exp.Or: "|"}
_SELECT_ARGS = {"expressions", "from_", "joins", "where", "group", "having", "order", "limit",
                "with_"}
_ROWWISE_ARGS = {"expressions", "from_", "joins", "where"}
_NAMES = {"distinct": "SELECT DISTINCT", "qualify": "QUALIFY", "windows": "WINDOW",
          "offset": "OFFSET", "laterals": "LATERAL", "pivots": "PIVOT", "into": "INTO",
          "locks": "FOR UPDATE", "sample": "TABLESAMPLE", "settings": "SETTINGS",
          "prewhere": "PREWHERE", "connect": "CONNECT BY", "match": "MATCH_RECOGNIZE",
          "kind": "SELECT AS", "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY",
          "sort": "SORT BY", "exclude": "EXCLUDE"}
_BOOLEAN_KEYS = (False, True)
Interval = tuple[Fraction, Fraction]


def _describe(node: exp.Expr) -> str:
    """What a refused node is, in SQL words."""
    if isinstance(node, exp.Union | exp.Intersect | exp.Except):
        return node.key.upper()
    if isinstance(node, exp.Window):
        return "a window function (OVER)"
    if isinstance(node, exp.Subquery | exp.Select):
        return "a subquery"
    if isinstance(node, exp.Rand | exp.CurrentTimestamp | exp.CurrentDate | exp.CurrentTime
                  | exp.Uuid):
        return f"the non-deterministic function {node.sql()[:40]}"
    if isinstance(node, exp.Anonymous):
        return f"the function {str(node.name).upper()[:40]}"
    if isinstance(node, exp.Func):
        return f"the function {node.sql_name()}"
    return f"{node.key.upper()}"


@dataclass
class _Agg:
    """A SELECT item that is an aggregate: its node and the aggregation built."""

    node: exp.Expr
    agg: aggregates.Aggregation


class _Translator:
    """One statement's translation: the query built so far, what each table column is
    known to hold (declared bounds, keys), and the names SQL can see."""

    def __init__(self, session: SQLSession, text: str, public: dict[str, Any],
                 selection: PartitionSelection | TopKSelection | None) -> None:
        self.session, self.text, self.public, self.selection = session, text, public, selection
        self.query: Query | None = None
        self.table: str | None = None
        self.bounds: dict[str, Interval] = {}
        self.keys: dict[str, tuple[Any, ...]] = {}
        self.specs: dict[str, Any] = {}
        self.scope: dict[str, dict[str, Any]] = {}  # visible name → grammar node
        self.qualifiers: set[str] = set()
        self.ctes: dict[str, exp.Select] = {}

    def fail(self, node: exp.Expr | None, message: str) -> SQLError:
        return _error(self.text, node, message)

    def refuse(self, node: exp.Expr, where: str = "") -> SQLError:
        return self.fail(node, f"{_describe(node)} is not supported{where}; supported: "
                               f"{_SUMMARY}")

    # -- statement ------------------------------------------------------------------------
    def statement(self, tree: exp.Expr) -> SQLQuery:
        if not isinstance(tree, exp.Select):
            raise self.refuse(tree, " (one SELECT statement)")
        self.check_args(tree, _SELECT_ARGS)
        with_ = tree.args.get("with_")
        if with_ is not None:
            self.with_clause(with_)
        self.source(tree)
        where = tree.args.get("where")
        if where is not None:
            self.filter(where.this)
        return self.aggregate(tree)

    def check_args(self, select: exp.Select, allowed: set[str]) -> None:
        for key, value in select.args.items():
            if key not in allowed and value not in (None, False, [], ""):
                node = value if isinstance(value, exp.Expr) else (
                    value[0] if isinstance(value, list) and value and isinstance(
                        value[0], exp.Expr) else select)
                name = _NAMES.get(key, key.upper().rstrip("_"))
                raise self.fail(node, f"{name} is not supported here; supported: {_SUMMARY}")

    def with_clause(self, with_: exp.With) -> None:
        if with_.args.get("recursive"):
            raise self.fail(with_, "WITH RECURSIVE is not supported")
        for cte in with_.expressions:
            inner = cte.this
            if not isinstance(inner, exp.Select):
                raise self.refuse(inner, " in WITH (a row-wise SELECT)")
            self.check_args(inner, _ROWWISE_ARGS)
            for item in inner.expressions:
                self.no_aggregate(item, "in WITH (its query must be row-wise)")
            self.ctes[cte.alias_or_name] = inner

    # -- FROM, JOIN, WITH -----------------------------------------------------------------
    def source(self, select: exp.Select) -> None:
        """The FROM table (a private table or a CTE over one), its joins and WHERE."""
        from_ = select.args.get("from_")
        if from_ is None or not isinstance(from_.this, exp.Table):
            raise self.fail(from_.this if from_ is not None else select,
                            "FROM needs one private table (or a WITH query over it)")
        table = from_.this
        self.check_table(table)
        name = table.name
        if name in self.ctes:
            if select.args.get("joins"):
                raise self.fail(select.args["joins"][0], "JOIN inside the WITH query, not "
                                                         "with it")
            cte = self.ctes.pop(name)
            self.source(cte)
            where = cte.args.get("where")
            if where is not None:
                self.filter(where.this)
            self.project(cte)
        else:
            self.open(table)
            for join in select.args.get("joins") or []:
                self.join(join)
        self.qualifiers |= {name, table.alias_or_name}

    def check_table(self, table: exp.Table) -> None:
        for key, value in table.args.items():
            if key not in ("this", "alias") and value not in (None, False, []):
                raise self.fail(table, f"table {table.sql()[:40]} with "
                                       f"{key.upper()} is not supported")

    def open(self, table: exp.Table) -> None:
        if self.query is not None:
            raise self.fail(table, "one private table per statement")
        name = table.name
        if name in self.public:
            raise self.fail(table, f"{name!r} is a public table: FROM names a private table "
                                   "and JOIN a public one")
        try:
            self.session.table(name)
            self.table = None if name == self.session.default_table else name
        except DomainError:
            if self.session.default_table != "data":
                raise self.fail(table, f"no private table {name!r}") from None
            self.table = None  # a session on one unnamed table answers to any name
        self.query = Query(self.session, table=self.table)
        declared = self.session.declared(self.table)
        schema = self.session.schema(self.table)
        for column, dtype in schema.items():
            self.scope[column] = {"col": column}
            spec = declared.spec(column) if declared is not None else None
            self.specs[column] = spec
            bounds = declared.bounds(column) if declared is not None else None
            if bounds is not None:
                self.bounds[column] = (Fraction(bounds[0]), Fraction(bounds[1]))
            categories = declared.categories(column) if declared is not None else None
            if categories is not None:
                self.keys[column] = tuple(categories)
            elif dtype == nw.Boolean:
                self.keys[column] = _BOOLEAN_KEYS

    def join(self, join: exp.Join) -> None:
        table = join.this
        if not isinstance(table, exp.Table):
            raise self.refuse(table, " in JOIN (a public table by name)")
        self.check_table(table)
        name = table.name
        if name not in self.public:
            raise self.fail(table, f"JOIN {name!r}: only public tables passed as public="
                                   "{name: frame} can be joined (a private table, or the "
                                   "table itself, cannot)")
        side, kind = join.args.get("side"), join.args.get("kind")
        extra = [k for k, v in join.args.items() if k not in ("this", "on", "using", "side",
                                                            "kind") and v not in (None, [], False)]
        if extra or (side or "").upper() not in ("", "LEFT") or (kind or "").upper() not in (
                "", "INNER", "OUTER"):
            raise self.fail(join, "only [INNER] JOIN and LEFT [OUTER] JOIN with a public "
                                  "table are supported")
        frame = self.public[name]
        frame = frame if isinstance(frame, pl.DataFrame) else pl.DataFrame(frame)
        on = self.join_keys(join, {name, table.alias_or_name})
        clash = [c for c in frame.columns if c not in on and c in self.scope]
        if clash:
            raise self.fail(table, f"public table {name!r} repeats the column(s) "
                                   f"{', '.join(map(repr, clash[:5]))}: rename them")
        assert self.query is not None
        try:
            self.query = self.query.join(frame, on=on, how="left" if side else "inner")
        except DomainError as exc:
            raise self.fail(join, f"JOIN {name!r}: {exc}") from None
        for column in frame.columns:
            if column in on:
                continue
            self.scope[column] = {"col": column}
            values = frame.get_column(column)
            if values.dtype.is_numeric() and values.null_count() < len(values):
                lo, hi = values.min(), values.max()  # a public table's values are public
                if isinstance(lo, int | float) and isinstance(hi, int | float) and lo < hi:
                    self.bounds[column] = (Fraction(lo), Fraction(hi))
            distinct = values.drop_nulls().unique(maintain_order=True)
            if 0 < len(distinct) <= MAX_KEYS:
                self.keys[column] = tuple(distinct.to_list())
        self.qualifiers |= {name, table.alias_or_name}

    def join_keys(self, join: exp.Join, public_names: set[str]) -> list[str]:
        using = join.args.get("using")
        if using:
            return [self.name_of(i) for i in using]
        condition = join.args.get("on")
        if condition is None:
            raise self.fail(join, "JOIN needs ON a = b or USING (columns)")
        terms: list[exp.Expr] = list(condition.flatten()) if isinstance(
            condition, exp.And) else [condition]
        keys = []
        for term in terms:
            if not (isinstance(term, exp.EQ) and isinstance(term.this, exp.Column)
                    and isinstance(term.expression, exp.Column)
                    and term.this.name == term.expression.name):
                raise self.fail(term, "JOIN ON supports equalities of same-named columns "
                                      "(a.k = b.k), joined by AND")
            keys.append(term.this.name)
        return keys

    def name_of(self, node: exp.Expr) -> str:
        return str(node.name if isinstance(node, exp.Identifier | exp.Column) else node)

    def project(self, cte: exp.Select) -> None:
        """A WITH query's SELECT list: the names the outer query sees."""
        scope: dict[str, dict[str, Any]] = {}
        computed: dict[str, Expr] = {}
        for item in cte.expressions:
            if isinstance(item, exp.Star):
                scope.update(self.scope)
                continue
            name = item.alias_or_name
            inner = item.this if isinstance(item, exp.Alias) else item
            node = self.expr(inner)
            if "col" in node:
                scope[name] = node
                continue
            if not isinstance(item, exp.Alias):
                raise self.fail(item, "a computed column of a WITH query needs a name "
                                      "(expr AS name)")
            self.new_column(item, name)
            computed[name] = Expr(node)
            scope[name] = {"col": name}
        self.add_columns(computed, cte)
        self.scope = scope

    def new_column(self, node: exp.Expr, name: str) -> None:
        assert self.query is not None
        if name in self.query.schema() or name.startswith("__dpkit"):
            raise self.fail(node, f"the name {name!r} is taken (a column of the table): "
                                  "choose another alias")

    def add_columns(self, computed: dict[str, Expr], where: exp.Expr) -> None:
        """One with_columns step, recording what the new columns are known to hold."""
        if not computed:
            return
        assert self.query is not None
        schema = self.query.schema()
        for name, expr in computed.items():
            try:
                expr_kind(expr.node, schema)
            except ProtocolError as exc:
                raise self.fail(where, str(exc)) from None
            interval = self.interval(dict(expr.node))
            if interval is not None:
                self.bounds[name] = interval
            keys = self.domain(dict(expr.node))
            if keys is not None:
                self.keys[name] = keys
        self.query = self.query.with_columns(**computed)

    def filter(self, condition: exp.Expr) -> None:
        self.no_aggregate(condition, "in WHERE (use HAVING on the SELECT list's aggregates)")
        node = self.expr(condition)
        assert self.query is not None
        try:
            if expr_kind(node, self.query.schema()) != "boolean":
                raise self.fail(condition, "WHERE needs a condition (true/false)")
            self.query = self.query.filter(Expr(node))
        except ProtocolError as exc:
            if isinstance(exc, SQLError):
                raise
            raise self.fail(condition, f"WHERE: {exc}") from None

    def no_aggregate(self, node: exp.Expr, where: str) -> None:
        for n in node.walk():
            if isinstance(n, _AGG_FUNCTIONS):
                raise self.fail(n, f"an aggregate is not allowed {where}")
            if isinstance(n, exp.Window | exp.Subquery | exp.Select) and n is not node:
                raise self.refuse(n)

    # -- row-wise expressions -------------------------------------------------------------
    def expr(self, node: exp.Expr,
             column: Callable[[exp.Column], dict[str, Any]] | None = None) -> dict[str, Any]:
        """A row-wise SQL expression as a grammar node (an allow-list: anything else is
        refused). ``column`` resolves column references (default: the table's scope)."""
        resolve = column or self.column
        if isinstance(node, exp.Column):
            return resolve(node)
        if isinstance(node, exp.Paren):
            return self.expr(node.this, column)
        if isinstance(node, exp.Literal | exp.Boolean | exp.Neg) and _literal(node) is not None:
            return {"lit": _literal(node)}
        if isinstance(node, exp.Neg):
            return {"op": "-", "args": [{"lit": 0}, self.expr(node.this, column)]}
        op = _COMPARE.get(type(node))
        if op is not None:
            return {"op": op, "args": [self.expr(node.this, column),
                                       self.expr(node.expression, column)]}
        if isinstance(node, exp.Not):
            return {"op": "~", "args": [self.expr(node.this, column)]}
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self.fail(node, "IS supports IS NULL and IS NOT NULL")
            return {"op": "is_null", "args": [self.expr(node.this, column)]}
        if isinstance(node, exp.Between):
            x = self.expr(node.this, column)
            return {"op": "&", "args": [
                {"op": ">=", "args": [x, self.expr(node.args["low"], column)]},
                {"op": "<=", "args": [x, self.expr(node.args["high"], column)]}]}
        if isinstance(node, exp.In):
            return self.in_list(node, column)
        if isinstance(node, exp.Like | exp.ILike):
            return self.like(node, column)
        if isinstance(node, exp.Case | exp.If):
            return self.case(node, column)
        if isinstance(node, exp.Null):
            raise self.fail(node, "NULL is supported in IS [NOT] NULL and as a CASE's missing "
                                  "ELSE only")
        if isinstance(node, _AGG_FUNCTIONS):
            raise self.fail(node, "an aggregate is not allowed inside a row-wise expression")
        raise self.refuse(node)

    def column(self, node: exp.Column) -> dict[str, Any]:
        qualifier = node.table
        if node.args.get("db") or node.args.get("catalog"):
            raise self.fail(node, "qualify a column by its table only (t.column)")
        if qualifier and qualifier not in self.qualifiers and qualifier not in self.ctes:
            raise self.fail(node, f"unknown table {qualifier!r}")
        if isinstance(node.this, exp.Star):
            raise self.fail(node, "* is supported in COUNT(*) and WITH queries only")
        name = node.name
        found = self.scope.get(name)
        if found is None and not node.this.args.get("quoted"):
            matches = [k for k in self.scope if k.lower() == name.lower()]
            found = self.scope[matches[0]] if len(matches) == 1 else None
        if found is None:
            raise self.fail(node, f"unknown column {name!r}")
        return found

    def in_list(self, node: exp.In, column: Any) -> dict[str, Any]:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self.fail(node, "IN takes a list of literals (no subquery)")
        values = [self.expr(v, column) for v in node.expressions]
        if not values or any("lit" not in v for v in values):
            raise self.fail(node, "IN takes a non-empty list of literals")
        return {"op": "in", "args": [self.expr(node.this, column), *values]}

    def like(self, node: exp.Like | exp.ILike, column: Any) -> dict[str, Any]:
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise self.fail(node, "LIKE takes a string literal pattern")
        out = {"op": "like" if isinstance(node, exp.Like) else "ilike",
               "args": [self.expr(node.this, column), {"lit": pattern.this}]}
        return {"op": "~", "args": [out]} if node.args.get("negate") else out

    def case(self, node: exp.Case | exp.If, column: Any) -> dict[str, Any]:
        ifs = [node] if isinstance(node, exp.If) else node.args.get("ifs") or []
        subject = node.this if isinstance(node, exp.Case) and node.this is not None else None
        args = []
        for branch in ifs:
            condition = self.expr(branch.this, column)
            if subject is not None:  # CASE x WHEN v THEN …
                condition = {"op": "==", "args": [self.expr(subject, column), condition]}
            args += [condition, self.expr(branch.args["true"], column)]
        default = node.args.get("false") if isinstance(node, exp.If) else node.args.get(
            "default")
        if default is not None and not isinstance(default, exp.Null):
            args.append(self.expr(default, column))
        return {"op": "case", "args": args}

    # -- what a column holds: interval arithmetic, key domains ----------------------------
    def interval(self, node: dict[str, Any]) -> Interval | None:
        """Bounds of a grammar expression from the declared bounds, or None."""
        if "col" in node:
            return self.bounds.get(node["col"]) or (
                (Fraction(0), Fraction(1)) if self.keys.get(node["col"]) == _BOOLEAN_KEYS
                else None)
        if "lit" in node:
            v = node["lit"]
            return (Fraction(v), Fraction(v)) if isinstance(v, int | float) else None
        op, args = node["op"], node["args"]
        if op not in ("+", "-", "*", "/", "case"):
            return (Fraction(0), Fraction(1))  # a condition: summed as 0/1
        if op == "case":
            values = args[1::2] if len(args) % 2 == 0 else [*args[1:-1:2], args[-1]]
            parts = [self.interval(v) for v in values]
            if any(p is None for p in parts):
                return None
            return (min(p[0] for p in parts if p), max(p[1] for p in parts if p))
        a, b = self.interval(args[0]), self.interval(args[1])
        if a is None or b is None:
            return None
        if op == "+":
            return (a[0] + b[0], a[1] + b[1])
        if op == "-":
            return (a[0] - b[1], a[1] - b[0])
        if op == "/":
            if "lit" not in args[1] or b[0] == 0:
                return None
            b = (1 / b[0], 1 / b[0])
        products = [x * y for x in a for y in b]
        return (min(products), max(products))

    def domain(self, node: dict[str, Any]) -> tuple[Any, ...] | None:
        """The public values a grammar expression can take (its group keys), or None."""
        if "col" in node:
            return self.keys.get(node["col"])
        if "lit" in node:
            return (node["lit"],)
        op, args = node["op"], node["args"]
        if op == "case":
            values = args[1::2] if len(args) % 2 == 0 else [*args[1:-1:2], args[-1]]
            if not all("lit" in v for v in values):
                return None
            return tuple(dict.fromkeys(v["lit"] for v in values))
        if op in ("+", "-", "*", "/"):
            return None
        return _BOOLEAN_KEYS

    # -- SELECT, GROUP BY, aggregates -----------------------------------------------------
    def aggregate(self, select: exp.Select) -> SQLQuery:
        items = list(select.expressions)
        groups = self.group_items(select, items)
        computed: dict[str, Expr] = {}
        group_columns: list[str] = []
        for node, name in groups:
            grammar = self.expr(node)
            if "col" in grammar:
                group_columns.append(grammar["col"])
                continue
            self.new_column(node, name)
            computed[name] = Expr(grammar)
            group_columns.append(name)
        aggs: list[_Agg] = []
        outputs: list[tuple[str, str]] = []
        for item in items:
            inner = item.this if isinstance(item, exp.Alias) else item
            alias = item.alias if isinstance(item, exp.Alias) else None
            if isinstance(inner, exp.Star):
                raise self.fail(item, "SELECT * releases rows: select aggregates")
            agg_node = _aggregate_node(inner)
            if agg_node is not None:
                agg = self.aggregation(agg_node, alias, computed)
                aggs.append(_Agg(inner, agg))
                name = agg.output_name()
                outputs += [(c, c) for c in _agg_columns(agg)]
                continue
            key = self.group_of(inner, groups, group_columns)
            if key is None:
                if any(isinstance(n, _AGG_FUNCTIONS) for n in inner.walk()):
                    raise self.fail(item, "arithmetic on aggregates is not supported: select "
                                          "each aggregate and combine the released values")
                raise self.fail(item, "a selected column must be in GROUP BY or inside an "
                                      "aggregate")
            outputs.append((key, alias or item.alias_or_name or key))
        if not aggs:
            raise self.fail(select, "a release needs at least one aggregate (COUNT, SUM, "
                                    "AVG, ...)")
        self.add_columns(computed, select)
        assert self.query is not None
        query = self.query
        if group_columns:
            query = self.group_by(query, group_columns, groups)
        try:
            query = query.agg(*(a.agg for a in aggs))
        except DomainError as exc:
            raise self.fail(select, str(exc)) from None
        names = [dst for _, dst in outputs]
        if len(set(names)) != len(names):
            raise self.fail(select, f"output names repeat: {names}; use AS aliases")
        post = self.post(select, aggs, outputs, query, group_columns)
        return SQLQuery(query, post, self.text)

    def group_items(self, select: exp.Select, items: list[exp.Expr]
                    ) -> list[tuple[exp.Expr, str]]:
        """GROUP BY items as (expression, column name), ordinals and aliases resolved."""
        group = select.args.get("group")
        if group is None:
            return []
        for key in group.args:
            if key != "expressions" and group.args[key] not in (None, [], False):
                raise self.fail(group, f"GROUP BY {key.upper()} is not supported")
        aliases = {i.alias: i.this for i in items if isinstance(i, exp.Alias)}
        out: list[tuple[exp.Expr, str]] = []
        for node in group.expressions:
            if isinstance(node, exp.Literal) and not node.is_string:
                index = int(node.this) if str(node.this).isdigit() else 0
                if not 1 <= index <= len(items):
                    raise self.fail(node, f"GROUP BY {node.this}: no such SELECT item")
                item = items[index - 1]
                node = item.this if isinstance(item, exp.Alias) else item
            elif isinstance(node, exp.Column) and not node.table and node.name in aliases \
                    and node.name not in self.scope:
                node = aliases[node.name]
            self.no_aggregate(node, "in GROUP BY")
            name = next((i.alias for i in items if isinstance(i, exp.Alias) and i.this == node),
                        None)
            out.append((node, name or f"group_{len(out) + 1}"))
        return out

    def group_of(self, node: exp.Expr, groups: list[tuple[exp.Expr, str]],
                 columns: list[str]) -> str | None:
        """The group column a SELECT item is, or None."""
        for (group, _), name in zip(groups, columns, strict=True):
            if node == group:
                return name
        if isinstance(node, exp.Column):
            grammar = self.expr(node)
            if grammar.get("col") in columns:
                return grammar["col"]
        return None

    def group_by(self, query: Query, columns: list[str],
                 groups: list[tuple[exp.Expr, str]]) -> Query:
        missing = [(c, g) for c, (g, _) in zip(columns, groups, strict=True)
                   if c not in self.keys]
        try:
            if not missing:
                return query.group_by(*columns, keys={c: list(self.keys[c]) for c in columns})
            if self.selection is not None:
                return query.group_by(*columns, selection=self.selection)
        except DomainError as exc:
            raise self.fail(groups[0][0], f"GROUP BY: {exc}") from None
        column, node = missing[0]
        raise self.fail(node, missing_categories(column, self.specs.get(column)))

    def aggregation(self, node: exp.Expr, alias: str | None,
                    computed: dict[str, Expr]) -> aggregates.Aggregation:
        if isinstance(node, exp.Count):
            return self.count(node, alias, computed)
        if type(node) in _SIMPLE:
            what, build = _SIMPLE[type(node)]
            self.only_args(node, {"this"})
            column, bounds = self.argument(node.this, what, computed)
            return build(column, bounds, name=alias)
        column_node, q = self.quantile_parts(node)
        column, bounds = self.argument(column_node, "PERCENTILE_CONT", computed)
        if not 0 <= q <= 1:
            raise self.fail(node, "a quantile level must lie in [0, 1]")
        return aggregates.quantile(column, q, bounds, name=alias)

    def only_args(self, node: exp.Expr, allowed: set[str],
                  distinct: bool = False) -> None:
        extra = [k for k, v in node.args.items() if k not in allowed
                 and v not in (None, False, [])]
        if extra or not distinct and isinstance(node.args.get("this"), exp.Distinct):
            raise self.fail(node, f"{_describe(node)} takes one column or expression "
                                  "(no DISTINCT or options)")

    def count(self, node: exp.Count, alias: str | None,
              computed: dict[str, Expr]) -> aggregates.Aggregation:
        self.only_args(node, {"this", "big_int"}, distinct=True)
        arg = node.this
        if arg is None or isinstance(arg, exp.Star):
            return aggregates.count(name=alias)
        if isinstance(arg, exp.Distinct):
            if len(arg.expressions) != 1:
                raise self.fail(node, "COUNT(DISTINCT …) takes one column")
            grammar = self.expr(arg.expressions[0])
            if "col" not in grammar:
                raise self.fail(node, "COUNT(DISTINCT …) takes a column (name an expression "
                                      "in a WITH query first)")
            if grammar["col"] == self.session.privacy_unit.column:
                return aggregates.count_distinct(name=alias)
            return aggregates.count_distinct(grammar["col"], name=alias)
        source = self.expr(arg)
        name = self.derived(arg, {"op": "~", "args": [{"op": "is_null", "args": [source]}]},
                            computed, f"{arg.sql()} IS NOT NULL")
        label = alias or (f"{source['col']}_count" if "col" in source else f"{name}_count")
        return aggregates.sum(name, (0, 1), name=label)

    def argument(self, node: exp.Expr | None, what: str,
                 computed: dict[str, Expr]) -> tuple[str, Any]:
        """The column an aggregate reads (a with_columns column for an expression) and its
        bounds (declared, or by interval arithmetic from declared bounds)."""
        if node is None:
            raise self.fail(node, f"{what} needs an argument")
        if isinstance(node, exp.Distinct):
            raise self.fail(node, f"{what}(DISTINCT …) is not supported")
        grammar = self.expr(node)
        if "col" in grammar:
            column = grammar["col"]
            declared = self.bounds.get(column)
            if declared is None and self.keys.get(column) == _BOOLEAN_KEYS:
                return column, (0, 1)
            if declared is None:
                raise self.fail(node, missing_bounds(column, what, self.specs.get(column)))
            spec = self.specs.get(column)
            if spec is not None and getattr(spec, "bounds", None) is not None:
                return column, spec.bounds  # as declared (ints stay ints)
            return column, _plain(declared)
        interval = self.interval(grammar)
        if interval is None:
            raise self.fail(node, f"{what}({node.sql()[:60]}) needs bounds: they do not "
                                  "follow from the declared bounds of its columns by "
                                  "interval arithmetic (declare them, or name the "
                                  "expression in a WITH query over declared columns)")
        column = self.derived(node, grammar, computed, f"({node.sql()})")
        return column, _plain(interval)

    def derived(self, node: exp.Expr, grammar: dict[str, Any],
                computed: dict[str, Expr], name: str) -> str:
        """A with_columns column for an aggregate's expression argument."""
        if len(name) > 200:
            name = f"expr_{len(computed) + 1}"
        existing = next((k for k, v in computed.items() if v.node == grammar), None)
        if existing is not None:
            return existing
        self.new_column(node, name)
        computed[name] = Expr(grammar)
        return name

    def quantile_parts(self, node: exp.Expr) -> tuple[exp.Expr, Fraction]:
        """(column expression, level) of PERCENTILE_CONT … WITHIN GROUP, QUANTILE_CONT,
        APPROX_QUANTILE and BigQuery's APPROX_QUANTILES(x, n)[OFFSET(k)]."""
        if isinstance(node, exp.WithinGroup):
            inner, order = node.this, node.expression
            if not isinstance(inner, exp.PercentileCont | exp.PercentileDisc) or not (
                    isinstance(order, exp.Order) and len(order.expressions) == 1):
                raise self.refuse(node)
            ordered = order.expressions[0]
            if ordered.args.get("desc"):
                raise self.fail(ordered, "WITHIN GROUP (ORDER BY x DESC) is not supported")
            return ordered.this, self.level(inner.this)
        if isinstance(node, exp.Bracket):
            quantiles = node.this
            if not isinstance(quantiles, exp.ApproxQuantiles) or len(node.expressions) != 1:
                raise self.refuse(node)
            n = self.level(quantiles.expression)
            k = self.level(node.expressions[0]) - int(node.args.get("offset") or 0)
            if n <= 0 or n.denominator != 1 or k.denominator != 1:
                raise self.fail(node, "APPROX_QUANTILES(x, n)[OFFSET(k)] takes integers")
            return quantiles.this, k / n
        if isinstance(node, exp.PercentileCont | exp.PercentileDisc) and node.expression:
            return node.this, self.level(node.expression)
        if isinstance(node, exp.Quantile | exp.ApproxQuantile):
            self.only_args(node, {"this", "quantile"})
            return node.this, self.level(node.args["quantile"])
        raise self.refuse(node)

    def level(self, node: exp.Expr | None) -> Fraction:
        value = _literal(node) if node is not None else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(node, "a quantile level is a number literal")
        assert node is not None
        text = node.this.this if isinstance(node, exp.Neg) else node.this
        level = Fraction(str(text))
        return -level if isinstance(node, exp.Neg) else level

    # -- HAVING, ORDER BY, LIMIT ----------------------------------------------------------
    def post(self, select: exp.Select, aggs: list[_Agg], outputs: list[tuple[str, str]],
             query: Query, group_columns: list[str]) -> PostProcess:
        names = dict(outputs)
        by_alias = {i.alias: i for i in select.expressions if isinstance(i, exp.Alias)}
        schema = query.schema()
        out_schema = {dst: (schema[src] if src in group_columns else nw.Float64)
                      for src, dst in outputs}

        def output(node: exp.Expr) -> str | None:
            """The output column a HAVING / ORDER BY reference names, or None."""
            for a in aggs:
                if node == a.node:
                    return a.agg.output_name()
            if isinstance(node, exp.Column) and not node.table:
                if node.name in out_schema:
                    return node.name
                if node.name in by_alias:
                    return output(by_alias[node.name].this)
                try:
                    grammar = self.expr(node)
                except SQLError:
                    return None
                return names.get(grammar.get("col", ""))
            return None

        def column(node: exp.Column) -> dict[str, Any]:
            name = output(node)
            if name is None:
                raise self.fail(node, "HAVING and ORDER BY use the SELECT list's columns, "
                                      "aliases and aggregates (another aggregate would cost "
                                      "budget)")
            return {"col": name}

        having, texts = None, []
        node = select.args.get("having")
        if node is not None:
            having = self.having(node.this, output, column, out_schema)
            texts.append(f"HAVING {node.this.sql()}")
        order = self.order_by(select, output, outputs)
        if order:
            texts.append("ORDER BY " + ", ".join(
                f"{c}{' DESC' if d else ''}" for c, d, _ in order))
        limit = self.limit(select)
        if limit is not None:
            texts.append(f"LIMIT {limit}")
        return PostProcess(tuple(outputs), having, out_schema, order, limit, " ".join(texts))

    def having(self, node: exp.Expr, output: Callable[[exp.Expr], str | None],
               column: Callable[[exp.Column], dict[str, Any]],
               out_schema: dict[str, Any]) -> Expr:
        def named(n: exp.Expr) -> exp.Expr:
            name = output(n) if isinstance(n, _AGG_FUNCTIONS) else None
            return n if name is None else exp.column(name, quoted=True)

        replaced = node.transform(named)
        self.no_aggregate(replaced, "in HAVING unless it is in the SELECT list")
        grammar = self.expr(replaced, column)
        try:
            if expr_kind(grammar, out_schema) != "boolean":
                raise self.fail(node, "HAVING needs a condition")
        except ProtocolError as exc:
            if isinstance(exc, SQLError):
                raise
            raise self.fail(node, f"HAVING: {exc}") from None
        return Expr(grammar)

    def order_by(self, select: exp.Select, output: Callable[[exp.Expr], str | None],
                 outputs: list[tuple[str, str]]) -> tuple[tuple[str, bool, bool], ...]:
        order = select.args.get("order")
        if order is None:
            return ()
        keys = []
        items = list(select.expressions)
        for ordered in order.expressions:
            if not isinstance(ordered, exp.Ordered) or ordered.args.get("with_fill"):
                raise self.refuse(ordered)
            node, name = ordered.this, None
            if isinstance(node, exp.Literal) and not node.is_string:
                index = int(node.this) if str(node.this).isdigit() else 0
                if not 1 <= index <= len(items):
                    raise self.fail(node, f"ORDER BY {node.this}: no such SELECT item")
                item = items[index - 1]
                name = output(item.this if isinstance(item, exp.Alias) else item) or (
                    item.alias if isinstance(item, exp.Alias) else None)
            else:
                name = output(node)
            if name is None or name not in {dst for _, dst in outputs}:
                raise self.fail(node, "ORDER BY uses the SELECT list's columns, aliases, "
                                      "ordinals and aggregates")
            keys.append((name, bool(ordered.args.get("desc")),
                         not ordered.args.get("nulls_first")))
        return tuple(keys)

    def limit(self, select: exp.Select) -> int | None:
        node = select.args.get("limit")
        if node is None:
            return None
        value = node.expression
        extra = [k for k, v in node.args.items() if k != "expression" and v not in (None, [],
                                                                                   False)]
        if extra or not (isinstance(value, exp.Literal) and not value.is_string
                         and str(value.this).isdigit() and int(value.this) < 1 << 31):
            raise self.fail(node, "LIMIT takes a non-negative integer literal")
        return int(value.this)


def _aggregate_node(node: exp.Expr) -> exp.Expr | None:
    """The aggregate a SELECT item is (a BigQuery quantile is an index into one), or None."""
    if isinstance(node, exp.Bracket) and isinstance(node.this, exp.ApproxQuantiles):
        return node
    return node if isinstance(node, _AGGREGATES) else None


def _agg_columns(agg: aggregates.Aggregation) -> list[str]:
    name = agg.output_name()
    extra = ["rank_error"] if isinstance(agg, aggregates.Quantile) else []
    return [name, f"{name}_ci_low", f"{name}_ci_high", *(f"{name}_{e}" for e in extra)]


def _literal(node: exp.Expr) -> bool | int | float | str | None:
    """The value of a literal (a negated number too), or None."""
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        inner = _literal(node.this)
        return -inner if isinstance(inner, int | float) and not isinstance(inner, bool) else None
    if not isinstance(node, exp.Literal):
        return None
    if node.is_string:
        return str(node.this)
    text = str(node.this)
    try:
        return int(text) if text.isdigit() else float(text)
    except ValueError:
        return None


def _plain(interval: Interval) -> tuple[Number, Number]:
    """Bounds as ints where they are integers (so integer columns sum exactly)."""
    return tuple(int(x) if x.denominator == 1 else x for x in interval)  # type: ignore[return-value]
