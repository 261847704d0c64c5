"""Row-wise SQL, translated by allow-list into the expression grammar of
:mod:`dpkit.frame.language`, and what a column is known to hold: bounds by interval arithmetic
from the declared bounds, group keys from the declared categories."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from sqlglot import exp

from dpkit.core.numbers import Number
from dpkit.frame.language import in_node
from dpkit.frame.query import Query
from dpkit.frame.sql.common import SUMMARY, SQLError, SQLSession, error_at
from dpkit.mechanisms.limited_domain import TopKSelection
from dpkit.mechanisms.partition_selection import PartitionSelection

__all__ = ["RowWise", "AGG_FUNCTIONS", "BOOLEAN_KEYS", "Interval", "describe", "literal", "plain"]

AGG_FUNCTIONS: tuple[type[exp.Expr], ...] = (exp.AggFunc, exp.WithinGroup)
_COMPARE: dict[type[exp.Expr], str] = {
    exp.EQ: "==", exp.NEQ: "!=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.And: "&", exp.Or: "|"}
BOOLEAN_KEYS = (False, True)
_RANDOM = {"NOW", "RANDOM", "RAND", "UUID", "GEN_RANDOM_UUID", "SETSEED", "CURRENT_TIMESTAMP",
           "CURRENT_DATE", "CURRENT_TIME", "LOCALTIMESTAMP", "TODAY", "NEWID"}
Interval = tuple[Fraction, Fraction]


def describe(node: exp.Expr) -> str:
    """What a refused node is, in SQL words."""
    if isinstance(node, exp.Union | exp.Intersect | exp.Except):
        return node.key.upper()
    if isinstance(node, exp.Window):
        return "a window function (OVER)"
    if isinstance(node, exp.Subquery | exp.Select):
        return "a subquery"
    if isinstance(node, exp.Rand | exp.CurrentTimestamp | exp.CurrentDate | exp.CurrentTime
                  | exp.Uuid) or isinstance(node, exp.Anonymous) and str(
                      node.name).upper() in _RANDOM:
        return "a non-deterministic function"
    if isinstance(node, exp.Anonymous):
        return f"the function {str(node.name).upper()[:40]}"
    if isinstance(node, exp.Func):
        return f"the function {node.sql_name()}"
    return f"{node.key.upper()}"


class RowWise:
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
        self.columns: set[str] = set()  # the table's columns after the steps so far
        self._schema: tuple[Query, Any] | None = None

    def schema(self) -> Any:
        """The schema of the query built so far, remembered per query (each computation
        applies the steps to a lazy frame and checks them)."""
        assert self.query is not None
        if self._schema is None or self._schema[0] is not self.query:
            self._schema = (self.query, self.query.schema())
        return self._schema[1]

    def fail(self, node: exp.Expr | None, message: str, keyword: str = "") -> SQLError:
        return error_at(self.text, node, message, keyword)

    def refuse(self, node: exp.Expr, where: str = "") -> SQLError:
        keyword = node.key.upper() if isinstance(node, exp.Rollup | exp.Cube) else ""
        return self.fail(node, f"{describe(node)} is not supported{where}; supported: "
                               f"{SUMMARY}", keyword)

    def no_aggregate(self, node: exp.Expr, where: str) -> None:
        for n in node.walk():
            if isinstance(n, AGG_FUNCTIONS):
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
        if isinstance(node, exp.Literal | exp.Boolean | exp.Neg) and literal(node) is not None:
            return {"lit": literal(node)}
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
        if isinstance(node, exp.Least | exp.Greatest):
            if not node.args.get("ignore_nulls"):
                raise self.fail(node, "LEAST/GREATEST here return NULL on a NULL argument "
                                      "(BigQuery); dpkit's ignore NULLs as PostgreSQL, "
                                      "DuckDB and Spark do: use another dialect")
            op = "least" if isinstance(node, exp.Least) else "greatest"
            return {"op": op, "args": [self.expr(a, column)
                                       for a in [node.this, *node.expressions]]}
        if isinstance(node, exp.Null):
            raise self.fail(node, "NULL is supported in IS [NOT] NULL and as a CASE's missing "
                                  "ELSE only", "NULL")
        if isinstance(node, AGG_FUNCTIONS):
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
        return in_node(self.expr(node.this, column), values)

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
        lo, hi = self.range(node)
        return None if lo is None or hi is None else (lo, hi)

    def range(self, node: dict[str, Any]) -> tuple[Fraction | None, Fraction | None]:
        """Lower and upper bounds of a grammar expression by interval arithmetic over the
        declared bounds (None: unbounded on that side)."""
        if "col" in node:
            found = self.bounds.get(node["col"]) or (
                (Fraction(0), Fraction(1)) if self.keys.get(node["col"]) == BOOLEAN_KEYS
                else None)
            return found if found is not None else (None, None)
        if "lit" in node:
            v = node["lit"]
            return (Fraction(v), Fraction(v)) if isinstance(v, int | float) else (None, None)
        op, args = node["op"], node["args"]
        if op not in ("+", "-", "*", "/", "case", "least", "greatest"):
            return (Fraction(0), Fraction(1))  # a condition: summed as 0/1
        parts = [self.range(a) for a in args]
        if op in ("least", "greatest"):
            return _extreme(op, parts, [Fraction(a["lit"]) for a in args if "lit" in a
                                        and isinstance(a["lit"], int | float)])
        if op == "case":
            values = args[1::2] if len(args) % 2 == 0 else [*args[1:-1:2], args[-1]]
            parts = [self.range(v) for v in values]
            lows, highs = [p[0] for p in parts], [p[1] for p in parts]
            return (None if None in lows else min(lows),  # type: ignore[type-var]
                    None if None in highs else max(highs))  # type: ignore[type-var]
        a, b = self.interval(args[0]), self.interval(args[1])
        if a is None or b is None:
            return (None, None)
        if op == "+":
            return (a[0] + b[0], a[1] + b[1])
        if op == "-":
            return (a[0] - b[1], a[1] - b[0])
        if op == "/":
            if "lit" not in args[1] or b[0] == 0:
                return (None, None)
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
        return BOOLEAN_KEYS


def literal(node: exp.Expr) -> bool | int | float | str | None:
    """The value of a literal (a negated number too), or None."""
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        inner = literal(node.this)
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


def _extreme(op: str, parts: list[tuple[Fraction | None, Fraction | None]],
             literals: list[Fraction]) -> tuple[Fraction | None, Fraction | None]:
    """Bounds of LEAST / GREATEST, which ignore nulls: the result is one of the non-null
    arguments, so it lies within the hull of their bounds; a literal (never null) also caps
    LEAST from above and GREATEST from below."""
    lows, highs = [p[0] for p in parts], [p[1] for p in parts]
    lo = None if None in lows else min(x for x in lows if x is not None)
    hi = None if None in highs else max(x for x in highs if x is not None)
    if op == "least" and literals:
        hi = min(literals) if hi is None else min(hi, *literals)
    if op == "greatest" and literals:
        lo = max(literals) if lo is None else max(lo, *literals)
    return lo, hi


def plain(interval: Interval) -> tuple[Number, Number]:
    """Bounds as ints where they are integers (so integer columns sum exactly)."""
    return tuple(int(x) if x.denominator == 1 else x for x in interval)  # type: ignore[return-value]

