"""The public pieces of SQL: limits, the supported forms, the typed error with its span,
and a translated statement (its query and the post-processing of its result)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import narwhals as nw
import polars as pl
from sqlglot import exp

from dpkit.core.numbers import Number
from dpkit.frame.language import Expr, ProtocolError, compile_expr
from dpkit.frame.query import Plan, Query, SessionLike
from dpkit.frame.schema import Schema

__all__ = ["SQLError", "SQLQuery", "SQLSession", "PostProcess", "MAX_SQL_BYTES", "MAX_SQL_DEPTH",
           "DIALECTS",
           "SUPPORTED", "SUMMARY", "error_at"]

MAX_SQL_BYTES = 1 << 20  # longer text is refused before parsing
MAX_SQL_DEPTH = 64  # nesting of parentheses and of the parsed tree
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
    ("LEAST, GREATEST (nulls ignored): a clamp declares bounds",
     "SELECT AVG(LEAST(GREATEST(fnlwgt, 0), 500000)) FROM adult"),
    ("WHERE: = <> < <= > >=, AND, OR, NOT", "SELECT COUNT(*) FROM adult WHERE NOT age < 30"),
    ("WHERE: IN, BETWEEN, IS [NOT] NULL, [NOT] LIKE, ILIKE",
     "SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40 AND race IN ('White')"),
    ("GROUP BY columns (declared categories)", "SELECT sex, COUNT(*) FROM adult GROUP BY sex"),
    ("GROUP BY expressions, ordinals, aliases",
     "SELECT age >= 40 AS older, COUNT(*) FROM adult GROUP BY 1"),
    ("GROUP BY undeclared keys with selection=dp.PartitionSelection(...)",
     "SELECT \"native-country\", COUNT(*) FROM adult GROUP BY 1"),
    ("aliases", "SELECT AVG(age) AS mean_age FROM adult"),
    ("TABLESAMPLE BERNOULLI (p PERCENT): Poisson sampling of the privacy units, amplified",
     "SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (10 PERCENT)"),
    ("HAVING, ORDER BY, LIMIT (post-processing)",
     "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex HAVING n > 10 ORDER BY n DESC LIMIT 1"),
    ("JOIN a public table (public={name: frame})",
     "SELECT region, COUNT(*) FROM adult JOIN regions USING (\"native-country\") GROUP BY region"),
    ("WITH a row-wise query", "WITH t AS (SELECT age * 2 AS a2 FROM adult) SELECT AVG(a2) FROM t"),
    ("quoted identifiers", "SELECT COUNT(*) FROM adult WHERE \"hours-per-week\" > 40"),
)
SUMMARY = ("SELECT of COUNT/SUM/AVG/VARIANCE/STDDEV/MIN/MAX/MEDIAN/PERCENTILE_CONT with "
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


def error_at(text: str, node: exp.Expr | None, message: str, keyword: str = "") -> SQLError:
    """The :class:`SQLError` of ``message`` at ``node``'s span in ``text``, or at the first
    ``keyword`` when one is given and found (a clause such as ``DISTINCT`` or ``ROLLUP``
    whose node has no tokens of its own)."""
    found = text.upper().find(keyword) if keyword else -1
    span = (found, found + len(keyword) - 1) if found >= 0 else (
        _span(node) if node is not None else None)
    if span is None:
        return SQLError(message)
    start, end = span[0], span[1] + 1
    if isinstance(node, exp.Select | exp.Subquery) and found < 0:  # from its SELECT keyword
        start = max(0, text.upper().rfind("SELECT", 0, start))
    rest = text[end:].lstrip()
    if isinstance(node, exp.Func) and rest.startswith("(") and text.count("(", start, end) == 0:
        end = len(text) - len(rest)  # a call written without arguments: RANDOM()
    depth = text.count("(", start, end) - text.count(")", start, end)
    while end < len(text) and end - start < 80 and (depth > 0 or text[end] == "(" and depth == 0
                                                     and isinstance(node, exp.Func)
                                                     and text.count("(", start, end) == 0):
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
        A condition over the output columns (noisy estimates and keys), typed by
        ``having_schema`` and compiled when the object is built (ProtocolError then).
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
    condition: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.having is not None:  # compiled and checked now, before any debit
            object.__setattr__(self, "condition", compile_expr(self.having,
                                                               self.having_schema))

    def apply(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The released frame, renamed and ordered as the ``SELECT`` list, filtered by
        ``HAVING``, sorted by ``ORDER BY`` and cut by ``LIMIT``."""
        out = frame.select([pl.col(src).alias(dst) for src, dst in self.columns])
        if self.condition is not None:
            out = nw.from_native(out).filter(self.condition).to_native()
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


