"""Fuzz target of the SQL front end (issue 32; tests/test_fuzz_surfaces.py).

:func:`sql_text` draws SQL text from a grammar of supported and near-supported forms over the
fuzzer's table (tests/fuzz_strategies.py ``SCHEMA``, declared in :data:`DECLARED`): the
aggregations of the SQL grammar (``COUNT(*)``, ``COUNT(col)``, ``COUNT(DISTINCT …)``, ``SUM``,
``AVG``, ``VARIANCE``, ``STDDEV``, ``MIN``, ``MAX``, ``MEDIAN``, ``PERCENTILE_CONT``), ``WHERE``
conditions (comparisons, ``AND``/``OR``/``NOT``, ``IN``, ``BETWEEN``, ``IS NULL``, ``LIKE``,
``CASE WHEN``), ``GROUP BY`` on declared and undeclared columns, ``HAVING``/``ORDER BY``/
``LIMIT``; identifiers plain, double-quoted, back-quoted, in keyword spellings (``"union"``)
and Unicode; ``--`` and ``/* */`` comments; very long inputs (long comments, long ``IN``
lists, deep ``OR`` chains); and forms that must be refused (window functions, ``UNION``,
aggregating subqueries, self-joins, non-deterministic functions, several statements, DDL,
unbalanced quotes, truncated text).

:func:`run_sql` runs one text on a session over one table, through the road a user takes
(``session.sql_plan`` then ``session.sql``), under the harness's :class:`Recorder`, and records:
a refusal must happen at plan time (a :class:`~dpkit.errors.DomainError`, the ``SQLError``
among them, and nothing spent); a release's debit must equal its plan's loss; (b) nothing may
raise after the debit; (c) no data value may appear in an error or a log line. (a), the
declared sensitivity on neighbours, is checked by ``fuzz_harness.compare`` on what the
recorder saw.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import polars as pl
from fuzz_harness import Recorder, Release, Run, exception_text, leaks
from hypothesis import strategies as st

import dpkit as dp
from dpkit.errors import (
    BoundsError,
    ColumnError,
    DomainError,
    MeasureError,
    ReleaseFailedError,
)

DECLARED = dp.Schema({
    "x": dp.Numeric(-10, 10), "n": dp.Numeric(0, 10, integer=True, nullable=True),
    "g": dp.Categorical([0, 1, 2, 3], nullable=True),
    "c": dp.Categorical(["u", "v", "w"], nullable=True),
    "b": dp.Categorical([True, False], nullable=True),
    "s": dp.Text(nullable=True)})
TABLE = "t"
BUDGET_ARGS = {"pure": {"epsilon": 1}, "zcdp": {"rho": 1},
               "approx": {"epsilon": 1, "delta": Fraction(1, 10**6)}}
BUDGETS = {"pure": dp.PureDP(10**6), "zcdp": dp.ZCDP(10**6),
           "approx": dp.ApproxDP(10**6, Fraction(1, 2))}

# -- identifiers, literals, comments ---------------------------------------------------------
KEYWORDS = ["union", "select", "group", "order", "from", "count", "where", "limit"]


@st.composite
def column(draw: Any, names: list[str]) -> str:
    """A column reference, plain, double-quoted or in upper case (DuckDB's spellings)."""
    name = draw(st.sampled_from(names))
    style = draw(st.sampled_from(["plain", "plain", "double", "upper"]))
    return {"plain": name, "double": f'"{name}"', "upper": name.upper()}[style]


alias = st.one_of(st.sampled_from(["n", "total", "m", "é_moyenne", "σ", "合计", "a b"]),
                  st.sampled_from(KEYWORDS)).map(
    lambda a: f'"{a}"' if not a.isidentifier() or a in KEYWORDS or not a.isascii() else a)
numbers = st.sampled_from(["0", "1", "-1", "2.5", "10", "1e308", "-0.0", "9223372036854775808",
                           "0.5", "3"])
strings = st.sampled_from(["'u'", "'v'", "''", "'it''s'", "'ünï'", "'%'", "'u%'", "'_'",
                           "'\\'", "'a\\%'"])
comment = st.sampled_from([" ", " -- note\n", " /* c */ ", " /* ünïcödé ✓ */ ", "\n-- x\n",
                           "\t\r\n "])


@st.composite
def condition(draw: Any, depth: int = 0) -> str:
    """A WHERE condition (mostly well-typed; some comparing a string with a number)."""
    x, n, g = (draw(column(["x"])), draw(column(["n"])), draw(column(["g"])))
    c, s = draw(column(["c"])), draw(column(["s"]))
    atoms = [f"{x} > {draw(numbers)}", f"{n} BETWEEN 0 AND {draw(numbers)}",
             f"{c} IN ({', '.join(draw(st.lists(strings, min_size=1, max_size=4)))})",
             f"{s} LIKE {draw(strings)}", f"{x} IS NULL", f"{n} IS NOT NULL", f"{g} = 1",
             f"{c} = {draw(numbers)}",  # mistyped: refused before the debit, or total
             f"CASE WHEN {x} > 0 THEN 1 ELSE 0 END = 1", f"{x} + {n} * 2 <= 5",
             f"{x} / 0 > 1", f"{draw(column(['b']))}"]
    atom = draw(st.sampled_from(atoms))
    if depth < 2 and draw(st.booleans()):
        op = draw(st.sampled_from(["AND", "OR"]))
        return f"({atom} {op} {draw(condition(depth + 1))})"
    return f"NOT ({atom})" if draw(st.integers(0, 5)) == 0 else atom


@st.composite
def aggregate(draw: Any) -> str:
    x = draw(column(["x", "x", "n"]))
    forms = ["COUNT(*)", f"COUNT({x})", f"SUM({x})", f"AVG({x})", f"VARIANCE({x})",
             f"VAR_SAMP({x})", f"STDDEV({x})", f"MIN({x})", f"MAX({x})", f"MEDIAN({x})",
             f"PERCENTILE_CONT({draw(st.sampled_from(['0.5', '0.25', '1', '0', '2']))}) "
             f"WITHIN GROUP (ORDER BY {x})", f"COUNT(DISTINCT {draw(column(['c', 'g']))})",
             f"SUM(CASE WHEN {x} > 0 THEN 1 ELSE 0 END)", f"AVG({x} * 2 + 1)",
             f"SUM({draw(column(['s', 'd']))})",  # not numeric or undeclared: refused
             "COUNT(id)"]
    agg = draw(st.sampled_from(forms))
    return f"{agg} AS {draw(alias)}" if draw(st.booleans()) else agg


@st.composite
def select(draw: Any) -> str:
    """A statement of the supported grammar (which may still be refused at plan time)."""
    aggs = draw(st.lists(aggregate(), min_size=1, max_size=3))
    groups = draw(st.lists(column(["g", "c", "b", "g", "c", "s"]), max_size=2, unique=True))
    parts = [f"SELECT{draw(comment)} {', '.join([*groups, *aggs])} FROM {TABLE}"]
    if draw(st.booleans()):
        parts.append(f"WHERE {draw(condition())}")
    if groups:
        parts.append(f"GROUP BY {', '.join(groups)}")
        if draw(st.integers(0, 3)) == 0:
            parts.append("HAVING COUNT(*) > 2")
    if draw(st.integers(0, 3)) == 0:
        parts.append(f"ORDER BY 1 {draw(st.sampled_from(['', 'DESC']))}")
    if draw(st.integers(0, 3)) == 0:
        parts.append(f"LIMIT {draw(st.sampled_from(['1', '0', '10', '-1']))}")
    return draw(comment).join(parts)


NEAR = [  # near-supported forms: each must be refused at parse (or plan) time
    f"SELECT x, COUNT(*) OVER () FROM {TABLE}",
    f"SELECT COUNT(*) FROM {TABLE} UNION SELECT COUNT(*) FROM {TABLE}",
    f"SELECT COUNT(*) FROM {TABLE} WHERE x > (SELECT AVG(x) FROM {TABLE})",
    f"SELECT COUNT(*) FROM {TABLE} a JOIN {TABLE} b ON a.x = b.x",
    f"SELECT SUM(RANDOM()) FROM {TABLE}", f"SELECT COUNT(*) FROM {TABLE} WHERE RAND() < 0.5",
    f"SELECT COUNT(*) FROM {TABLE}; DROP TABLE {TABLE}", f"DELETE FROM {TABLE}",
    f"SELECT x FROM {TABLE}", f"SELECT * FROM {TABLE}",
    f"SELECT COUNT(*) FROM {TABLE} WHERE s = 'a", f"SELECT COUNT(* FROM {TABLE}", "SELECT", "",
    ";", "SELECT COUNT(*) FROM nowhere",
    f"WITH w AS (SELECT COUNT(*) AS k FROM {TABLE}) SELECT SUM(k) FROM w",
    f"SELECT COUNT(*) FROM {TABLE} GROUP BY ROLLUP(g)",
    f"SELECT COUNT(*) FROM {TABLE} /* unterminated", f"SELECT COUNT(`x`) FROM {TABLE}",
    f'SELECT COUNT(*) FROM {TABLE} WHERE "x > 1', f"SELECT COUNT(*) FROM {TABLE} WHERE x > ?",
    f"SELECT COUNT(*) FROM {TABLE} WHERE x > $1", "SELECT COUNT(*) FROM t\x00",
]


@st.composite
def sql_text(draw: Any) -> str:
    """One SQL text: mostly the supported grammar, then near-supported and very long forms."""
    kind = draw(st.sampled_from(["select"] * 6 + ["near", "long"]))
    if kind == "near":
        return draw(st.sampled_from(NEAR))
    text = draw(select())
    if kind == "long":
        size = draw(st.sampled_from([10_000, 200_000]))
        how = draw(st.sampled_from(["comment", "in", "or"]))
        if how == "comment":
            text = f"/* {'ü' * size} */ {text}"
        elif how == "in":
            text = (f"SELECT COUNT(*) FROM {TABLE} WHERE c IN ("
                    + ", ".join(["'u'"] * (size // 5)) + ")")
        else:
            text = f"SELECT COUNT(*) FROM {TABLE} WHERE " + " OR ".join(["x > 1"] * (size // 8))
    return text


# -- running one text ------------------------------------------------------------------------
def _check_text(run: Run, where: str, text: str) -> None:
    found = leaks(text)
    if found:
        run.problems.append(f"(c) {where} contains data values {found}: {text[:600]}")


def run_sql(table: pl.DataFrame, unit: dp.PrivacyUnit, measure: str, text: str,
            row_keys: list[int] | None = None) -> Run:
    """Plan and release ``text`` on a session over ``table`` with :data:`DECLARED`; record a
    refusal after the plan or with spend, a debit other than the plan's loss, (b) a raise after
    the debit and (c) a data value in an error or a log line."""
    run = Run()
    with Recorder(row_keys) as rec:
        session = dp.Session({TABLE: table}, unit, BUDGETS[measure], schema=DECLARED)
        args = BUDGET_ARGS[measure]
        mark = rec.mark()
        try:
            plan = session.sql_plan(text, **args)
        except Exception as exc:
            _refused(run, session, exc, measure)
            run.releases.append(Release(False, [], []))
            return _logs(run, rec)
        ok = True
        try:
            session.sql(text, **args)
        except Exception as exc:
            ok = False
            body = exception_text(exc)
            _check_text(run, "an exception", body)
            if rec.since(mark, "debit") or isinstance(exc, ReleaseFailedError):
                run.problems.append(f"(b) raised after the debit: {body[:600]}")
            else:
                run.notes.append(f"refused after sql_plan() succeeded: {body[:300]}")
        if ok and session.spent != plan.loss:
            run.problems.append(f"the debit {session.spent} is not the plan's loss {plan.loss}")
        run.releases.append(Release(ok, rec.since(mark, "plan"), rec.since(mark, "compute")))
    return _logs(run, rec)


def _refused(run: Run, session: dp.Session, exc: BaseException, measure: str) -> None:
    body = exception_text(exc)
    _check_text(run, "a refusal", body)
    if not isinstance(exc, DomainError | BoundsError | ColumnError | MeasureError):
        run.problems.append(f"refused with {type(exc).__name__}, not a typed dpkit error: "
                            f"{body[:300]}")
    if session.spent != BUDGETS[measure].zero():
        run.problems.append(f"a refusal spent {session.spent}")
    run.notes.append(f"refused: {type(exc).__name__}")


def _logs(run: Run, rec: Recorder) -> Run:
    for line in rec.logs.lines:
        _check_text(run, "a log record", line)
    return run
