"""The translation of a statement: FROM (a private table, a row-wise WITH over it, a JOIN
with a public table), WHERE, GROUP BY and the SELECT list's aggregates, into a
:class:`~dpkit.frame.Query` of the registry."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import narwhals as nw
import polars as pl
import sqlglot
from sqlglot import exp

from dpkit.errors import DomainError
from dpkit.frame import aggregates
from dpkit.frame.language import Expr, ProtocolError
from dpkit.frame.query import Query
from dpkit.frame.schema import missing_bounds, missing_categories
from dpkit.frame.sql.common import (
    DIALECTS,
    MAX_KEYS,
    MAX_SQL_BYTES,
    MAX_SQL_DEPTH,
    SUMMARY,
    SQLError,
    SQLQuery,
    SQLSession,
    error_at,
)
from dpkit.frame.sql.post import Aggregated, Post
from dpkit.frame.sql.rowwise import AGG_FUNCTIONS, BOOLEAN_KEYS, describe, literal, plain
from dpkit.mechanisms.limited_domain import TopKSelection
from dpkit.mechanisms.partition_selection import PartitionSelection

__all__ = ["to_query", "Translator"]


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
    _check_parentheses(text)
    tree = _parse(text, dialect)
    _check_depth(text, tree)
    return Translator(session, text, dict(public or {}), selection).statement(tree)


def _check_parentheses(text: str) -> None:
    """Refuse parentheses nested deeper than MAX_SQL_DEPTH before parsing (the parser
    recurses per level; in a string literal they count too, which only refuses more)."""
    depth = 0
    for i, c in enumerate(text):
        if c in "()":
            depth = max(0, depth + (1 if c == "(" else -1))
            if depth > MAX_SQL_DEPTH:
                line = text.count("\n", 0, i) + 1
                raise SQLError(f"parentheses nested deeper than {MAX_SQL_DEPTH}", line,
                               i - (text.rfind("\n", 0, i) + 1) + 1, text[i:i + 20])


def _check_depth(text: str, tree: exp.Expr) -> None:
    """Refuse a tree deeper than MAX_SQL_DEPTH nodes (a long chain of operators) before the
    translation recurses into it."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SQL_DEPTH:
            raise error_at(text, node, f"expression nested deeper than {MAX_SQL_DEPTH} levels")
        stack.extend((child, depth + 1) for child in node.iter_expressions())


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


_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Variance, exp.VariancePop, exp.Stddev,
               exp.StddevSamp, exp.StddevPop, exp.Min, exp.Max, exp.Median, exp.PercentileCont,
               exp.PercentileDisc, exp.Quantile, exp.ApproxQuantile, exp.ApproxQuantiles,
               exp.WithinGroup)
_SIMPLE: dict[type[exp.Expr], tuple[str, Callable[..., aggregates.Aggregation]]] = {
    exp.Sum: ("SUM", aggregates.sum), exp.Avg: ("AVG", aggregates.mean),
    exp.Variance: ("VARIANCE", aggregates.variance),
    exp.VariancePop: ("VAR_POP", aggregates.variance),
    exp.Stddev: ("STDDEV", aggregates.std), exp.StddevSamp: ("STDDEV_SAMP", aggregates.std),
    exp.StddevPop: ("STDDEV_POP", aggregates.std), exp.Min: ("MIN", aggregates.min),
    exp.Max: ("MAX", aggregates.max), exp.Median: ("MEDIAN", aggregates.median)}
_SELECT_ARGS = {"expressions", "from_", "joins", "where", "group", "having", "order", "limit",
                "with_"}
_ROWWISE_ARGS = {"expressions", "from_", "joins", "where"}
_NAMES = {"distinct": "SELECT DISTINCT", "qualify": "QUALIFY", "windows": "WINDOW",
          "offset": "OFFSET", "laterals": "LATERAL", "pivots": "PIVOT", "into": "INTO",
          "locks": "FOR UPDATE", "sample": "USING SAMPLE", "settings": "SETTINGS",
          "prewhere": "PREWHERE", "connect": "CONNECT BY", "match": "MATCH_RECOGNIZE",
          "kind": "SELECT AS", "cluster": "CLUSTER BY", "distribute": "DISTRIBUTE BY",
          "sort": "SORT BY", "exclude": "EXCLUDE"}


class Translator(Post):
    """One statement's translation (see :func:`to_query`)."""

    # -- statement ------------------------------------------------------------------------
    def statement(self, tree: exp.Expr) -> SQLQuery:
        if not isinstance(tree, exp.Select):
            keyword = tree.key.upper() if isinstance(
                tree, exp.Union | exp.Intersect | exp.Except) else ""
            raise self.fail(tree, f"{describe(tree)} is not supported (one SELECT statement); "
                                  f"supported: {SUMMARY}", keyword)
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
                raise self.fail(node, f"{name} is not supported here; supported: {SUMMARY}",
                                name.split()[-1])

    def with_clause(self, with_: exp.With) -> None:
        if with_.args.get("recursive"):
            raise self.fail(with_, "WITH RECURSIVE is not supported")
        for cte in with_.expressions:
            inner = cte.this
            alias = cte.args.get("alias")
            if alias is not None and alias.columns:
                raise self.fail(alias, "WITH t(columns) is not supported: name the columns "
                                       "with AS inside the query")
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
        if from_ is not None and isinstance(from_.this, exp.Subquery | exp.Select):
            raise self.refuse(from_.this, " in FROM (name a WITH query instead)")
        if from_ is None or not isinstance(from_.this, exp.Table):
            raise self.fail(from_.this if from_ is not None else select,
                            "FROM needs one private table (or a WITH query over it)")
        table = from_.this
        self.check_table(table, private=True)
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
            sample = table.args.get("sample")
            if sample is not None:
                self.tablesample(sample)
            for join in select.args.get("joins") or []:
                self.join(join)
        self.qualifiers |= {name, table.alias_or_name}

    def check_table(self, table: exp.Table, *, private: bool = False) -> None:
        """Refuse a table's modifiers; TABLESAMPLE only on a private table (FROM)."""
        for key, value in table.args.items():
            if key == "sample" and value is not None and private:
                if table.name in self.ctes:
                    raise self.fail(value, "TABLESAMPLE on a WITH query: put it on the private "
                                           "table inside the WITH query", "TABLESAMPLE")
                continue
            if key == "sample" and value is not None:
                raise self.fail(value, "TABLESAMPLE on a public table is not supported: it "
                                       "samples the privacy units of the private table (FROM)",
                                "TABLESAMPLE")
            if key not in ("this", "alias") and value not in (None, False, []):
                raise self.fail(table, f"table {table.sql()[:40]} with "
                                       f"{key.upper()} is not supported")

    def tablesample(self, sample: exp.TableSample) -> None:
        """``TABLESAMPLE BERNOULLI (p PERCENT)`` → ``Query.sample(p/100)``: Poisson sampling of
        the privacy units (every row of a kept unit), not of rows — a row sample would let a
        unit's rows in independently, and amplification is per unit. The percent is a
        literal in (0, 100]. Refused: REPEATABLE (seed) (every sample is drawn afresh from the
        CSPRNG), SYSTEM (storage blocks: no per-unit law), a bare number or no method (rows
        in some dialects, percent in others), and ``(n ROWS)``, which compiles to
        ``Query.sample(n=…)`` and is refused there with the reason and the fix."""
        args = {k: v for k, v in sample.args.items() if v not in (None, False, [])}
        method = args.pop("method", None)
        name = method.name.upper() if method is not None else ""
        assert self.query is not None
        if "seed" in args:
            raise self.fail(args["seed"], "TABLESAMPLE … REPEATABLE (seed) is refused: dpkit "
                                          "draws every sample afresh from its CSPRNG (no "
                                          "seeded production randomness)", "REPEATABLE")
        if name == "SYSTEM":
            raise self.fail(sample, "TABLESAMPLE SYSTEM samples storage blocks, which gives no "
                                    "per-unit guarantee; use TABLESAMPLE BERNOULLI (p PERCENT)",
                            "SYSTEM")
        size = args.pop("size", None) or args.pop("rows", None)
        if size is not None and name in ("", "RESERVOIR") and not args:
            try:  # the same step as the builder's and the JSON form's: refused there
                self.query = self.query.sample(n=self.literal_count(size))
            except DomainError as exc:
                raise self.fail(sample, f"TABLESAMPLE (n ROWS): {exc}", "TABLESAMPLE") from None
            return
        percent = args.pop("percent", None)
        if name != "BERNOULLI" or percent is None or args:
            raise self.fail(sample, "TABLESAMPLE is supported as TABLESAMPLE BERNOULLI "
                                    "(p PERCENT), p a literal in (0, 100] (Poisson sampling of "
                                    "the privacy units)", "TABLESAMPLE")
        try:  # a short decimal literal, read exactly (2.5 is 5/2)
            if not isinstance(percent, exp.Literal) or percent.is_string or len(
                    percent.this) > 40:
                raise ValueError
            rate = Fraction(percent.this) / 100
        except (ValueError, ZeroDivisionError):
            raise self.fail(percent, "the TABLESAMPLE percent must be a number literal in "
                                     "(0, 100]") from None
        if not 0 < rate <= 1:
            raise self.fail(percent, "the TABLESAMPLE percent must be in (0, 100]")
        self.query = self.query.sample(rate)

    def literal_count(self, node: exp.Expr) -> int:
        if not isinstance(node, exp.Literal) or node.is_string or not node.this.isdigit():
            raise self.fail(node, "TABLESAMPLE (n ROWS) needs an integer literal n")
        return int(node.this)

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
            self.columns.add(column)
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
                self.keys[column] = BOOLEAN_KEYS

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
            self.columns.add(column)
            self.scope[column] = {"col": column}
            values = frame.get_column(column)
            if values.dtype.is_numeric() and values.null_count() < len(values):
                lo, hi = values.min(), values.max()  # a public table's values are public
                if isinstance(lo, int | float) and isinstance(hi, int | float) and (
                        math.isfinite(lo) and math.isfinite(hi) and lo < hi):
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
                    and term.this.name == term.expression.name
                    and (not term.this.table or not term.expression.table
                         or (term.this.table in public_names)
                         != (term.expression.table in public_names))):
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
        if name in self.columns or name.startswith("__dpkit"):
            raise self.fail(node, f"the name {name!r} is taken (a column of the table): "
                                  "choose another alias")

    def add_columns(self, computed: dict[str, Expr], where: exp.Expr) -> None:
        """One with_columns step (the builder type-checks it), recording what the new columns
        are known to hold."""
        if not computed:
            return
        assert self.query is not None
        try:
            self.query = self.query.with_columns(**computed)
        except ProtocolError as exc:
            raise self.fail(where, str(exc)) from None
        for name, expr in computed.items():
            self.columns.add(name)
            interval = self.interval(dict(expr.node))
            if interval is not None:
                self.bounds[name] = interval
            keys = self.domain(dict(expr.node))
            if keys is not None:
                self.keys[name] = keys

    def filter(self, condition: exp.Expr) -> None:
        self.no_aggregate(condition, "in WHERE (use HAVING on the SELECT list's aggregates)")
        node = self.expr(condition)
        assert self.query is not None
        try:
            self.query = self.query.filter(Expr(node))  # type-checks it
        except ProtocolError as exc:
            if isinstance(exc, SQLError):
                raise
            raise self.fail(condition, f"WHERE: {exc}") from None

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
        aggs: list[Aggregated] = []
        outputs: list[tuple[str, str]] = []
        for item in items:
            inner = item.this if isinstance(item, exp.Alias) else item
            alias = item.alias if isinstance(item, exp.Alias) else None
            if isinstance(inner, exp.Star):
                raise self.fail(item, "SELECT * releases rows: select aggregates")
            for n in inner.walk():
                if isinstance(n, exp.Window | exp.Subquery | exp.Select):
                    raise self.refuse(n)
            agg_node = _aggregate_node(inner)
            if agg_node is not None:
                agg = self.aggregation(agg_node, alias, computed)
                aggs.append(Aggregated(inner, agg))
                outputs += [(c, c) for c in _agg_columns(agg)]
                continue
            key = self.group_of(inner, groups, group_columns)
            if key is None:
                if isinstance(inner, exp.Filter):
                    raise self.fail(item, "an aggregate's FILTER (WHERE …) is not supported: "
                                          "use WHERE, or a CASE WHEN inside the aggregate")
                if any(isinstance(n, AGG_FUNCTIONS) for n in inner.walk()):
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
        post = self.post(select, aggs, outputs, group_columns)
        return SQLQuery(query, post, self.text)

    def group_items(self, select: exp.Select, items: list[exp.Expr]
                    ) -> list[tuple[exp.Expr, str]]:
        """GROUP BY items as (expression, column name), ordinals and aliases resolved."""
        group = select.args.get("group")
        if group is None:
            return []
        for key in group.args:
            if key != "expressions" and group.args[key] not in (None, [], False):
                raise self.fail(group, f"GROUP BY {key.upper()} is not supported",
                                key.upper())
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
            raise self.fail(node, f"{describe(node)} takes one column or expression "
                                  "(no DISTINCT or options)")

    def count(self, node: exp.Count, alias: str | None,
              computed: dict[str, Expr]) -> aggregates.Aggregation:
        self.only_args(node, {"this", "big_int"}, distinct=True)
        arg = node.this
        if arg is None or isinstance(arg, exp.Star) or literal(arg) is not None:  # COUNT(1)
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
            if declared is None and self.keys.get(column) == BOOLEAN_KEYS:
                return column, (0, 1)
            if declared is None:
                raise self.fail(node, missing_bounds(column, what, self.specs.get(column)))
            spec = self.specs.get(column)
            if spec is not None and getattr(spec, "bounds", None) is not None:
                return column, spec.bounds  # as declared (ints stay ints)
            return column, plain(declared)
        interval = self.interval(grammar)
        if interval is None:
            raise self.fail(node, f"{what}({node.sql()[:60]}) needs bounds: they do not "
                                  "follow from the declared bounds of its columns by "
                                  "interval arithmetic (declare them, or name the "
                                  "expression in a WITH query over declared columns)")
        column = self.derived(node, grammar, computed, f"({node.sql()})")
        return column, plain(interval)

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
        value = literal(node) if node is not None else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(node, "a quantile level is a number literal")
        assert node is not None
        text = node.this.this if isinstance(node, exp.Neg) else node.this
        level = Fraction(str(text))
        return -level if isinstance(node, exp.Neg) else level


def _aggregate_node(node: exp.Expr) -> exp.Expr | None:
    """The aggregate a SELECT item is (a BigQuery quantile is an index into one), or None."""
    if isinstance(node, exp.Bracket) and isinstance(node.this, exp.ApproxQuantiles):
        return node
    return node if isinstance(node, _AGGREGATES) else None


def _agg_columns(agg: aggregates.Aggregation) -> list[str]:
    name = agg.output_name()
    extra = ["rank_error"] if isinstance(agg, aggregates.Quantile) else []
    return [name, f"{name}_ci_low", f"{name}_ci_high", *(f"{name}_{e}" for e in extra)]


