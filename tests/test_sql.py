"""SQL releases (issue 32): the same plan as the builder's query, and — with the noise zeroed
in a test build of the plan — the same values as DuckDB running the same SQL over the bounded
table; the post-processing, the limits, the dialects and the grammar's new operators."""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import duckdb
import narwhals as nw
import numpy as np
import polars as pl
import pytest
import sql_cases as cases
import sqlglot
from sqlglot import exp

import dpkit as dp
from dpkit.frame import aggregates
from dpkit.frame.language import ProtocolError, case, col, compile_expr
from dpkit.frame.query import Query
from dpkit.frame.sql import MAX_SQL_BYTES, SUPPORTED, SQLError, to_query


@pytest.fixture(scope="module")
def session():
    return cases.session()


# -- the same plan as the builder -------------------------------------------------------------
@pytest.mark.parametrize("text, build, options", cases.SUPPORTED,
                         ids=[t[:60] for t, *_ in cases.SUPPORTED])
def test_same_planned_noise_as_the_builder(session, text, build, options):
    translated = to_query(session, text, **options)
    mine, theirs = translated.plan(epsilon=1), build(session).plan(epsilon=1)
    assert mine.noise == theirs.noise
    assert mine.loss == theirs.loss
    assert mine.description.startswith(theirs.description)
    assert ("post-processing" in mine.description) == bool(translated.post.text)


# -- the same values as DuckDB over the bounded table, noise zeroed -----------------------------
def zero_noise(plan):
    """A test build of ``plan`` whose statistics are released without noise: counts and sums
    exactly, a quantile as its best-scoring candidate (the exponential mechanism's mode)."""
    statistics = []
    schema = plan.query.schema()
    for p in plan.statistics:
        agg = plan.query.aggs[p.aggregation]
        if isinstance(agg, aggregates.Quantile):
            values = agg.candidate_values("int" if schema[agg.column].is_integer() else "float")

            def mode(raw, key=p.stat.key, agg=agg, values=values):
                return np.array([values[int(np.argmax([float(s) for s in row]))]
                                 for row in agg.scores(raw[key])])
            statistics.append(replace(p, measurement=mode))
        else:
            statistics.append(replace(p, measurement=lambda raw, key=p.stat.key: raw[key]))
    return replace(plan, statistics=tuple(statistics))


def bounded_adult() -> pl.DataFrame:
    """The table the statistics read: every unit has one row (max_rows = 1 keeps them all)
    and each declared numeric column is clamped to its bounds."""
    clamps = {c: pl.col(c).clip(*s.bounds) for c, s in cases.SCHEMA.columns.items()
              if isinstance(s, dp.Numeric)}
    return cases.adult().with_columns(**clamps)


def duckdb_sql(text: str, dialect: str) -> str:
    """The statement for DuckDB: variances and deviations in their population form (what
    dpkit releases; the sample form's N/(N − 1) needs the noisy count)."""
    def population(node):
        if isinstance(node, exp.Variance):
            return exp.VariancePop(this=node.this)
        if isinstance(node, exp.Stddev | exp.StddevSamp):
            return exp.StddevPop(this=node.this)
        return node
    return sqlglot.parse_one(text, read=dialect).transform(population).sql("duckdb")


def main_columns(translated) -> list[str]:
    """The output columns that are a SELECT item's value (keys and estimates, not CIs)."""
    names = {a.output_name() for a in translated.query.aggs} | set(
        translated.query.group_columns)
    return [dst for src, dst in translated.post.columns if src in names]


def close(mine, theirs, tolerance) -> bool:
    if isinstance(theirs, str | bool) or theirs is None:
        return mine == theirs
    return math.isclose(float(mine), float(theirs), rel_tol=1e-6, abs_tol=tolerance)


@pytest.mark.parametrize("text, build, options", cases.SUPPORTED,
                         ids=[t[:60] for t, *_ in cases.SUPPORTED])
def test_zero_noise_release_equals_duckdb_on_the_bounded_table(text, build, options):
    same_as_duckdb(text, options)


def test_the_duckdb_comparison_catches_a_broken_translation(monkeypatch):
    """A translator that reads ``>`` as ``>=`` is caught (age 40 is in Adult)."""
    from dpkit.frame.sql import rowwise
    monkeypatch.setitem(rowwise._COMPARE, exp.GT, ">=")
    with pytest.raises(AssertionError):
        same_as_duckdb("SELECT COUNT(*) FROM adult WHERE age > 40", {})


def same_as_duckdb(text, options):
    """Assert that the zero-noise release of ``text`` is what DuckDB computes."""
    session = cases.session()
    translated = to_query(session, text, **options)
    record = session.release(zero_noise(translated.plan(epsilon=1)))
    mine = translated.post.apply(record.values).select(main_columns(translated))
    connection = duckdb.connect()
    connection.register("adult", bounded_adult().to_arrow())
    connection.register("regions", cases.REGIONS.to_arrow())
    theirs = connection.sql(duckdb_sql(text, options.get("dialect", "duckdb"))).pl()
    assert mine.width == theirs.width
    quantile = any(isinstance(a, aggregates.Quantile) for a in translated.query.aggs)
    tolerance = 1.0 if quantile else 1e-9  # a quantile: the nearest integer candidate
    keys = len(translated.query.group_columns)
    mine_rows, their_rows = mine.rows(), theirs.rows()
    if keys and "ORDER BY" not in translated.post.text:  # DuckDB lists the keys it saw
        their_rows = sorted(their_rows, key=lambda r: [str(v) for v in r[:keys]])
        seen = {r[:keys] for r in their_rows}
        unseen = [r for r in mine_rows if r[:keys] not in seen]
        assert all(v == 0 for r in unseen for v in r[keys:]), unseen  # absent: count 0
        mine_rows = sorted([r for r in mine_rows if r[:keys] in seen],
                           key=lambda r: [str(v) for v in r[:keys]])
    assert len(mine_rows) == len(their_rows)
    for a, b in zip(mine_rows, their_rows, strict=True):
        assert all(close(x, y, tolerance) for x, y in zip(a, b, strict=True)), (a, b)


def test_zero_noise_is_a_test_build_only(session):
    """The production plan draws noise: two releases of a count differ at some point."""
    plan = to_query(session, "SELECT COUNT(*) FROM adult").plan(epsilon=1)
    draws = {int(session.release(plan).values["count"][0]) for _ in range(40)}
    assert len(draws) > 1  # P(40 equal discrete-Laplace(1) draws) < 0.47^39 < 1e-12


# -- Session.sql, sql_plan, sql_explain ---------------------------------------------------------
def test_session_sql_releases_with_intervals_in_select_order():
    session = cases.session(budget=10)
    out = session.sql("SELECT COUNT(*) AS n, sex AS gender FROM adult GROUP BY sex "
                      "ORDER BY gender", epsilon=1)
    assert out.columns == ["n", "n_ci_low", "n_ci_high", "gender"]
    assert out["gender"].to_list() == ["Female", "Male"]
    assert (out["n_ci_low"] <= out["n"]).all() and (out["n"] <= out["n_ci_high"]).all()
    assert session.spent == dp.ApproxDP(1, 0)
    assert session.last_release.loss == session.spent


def test_sql_plan_and_explain_cost_nothing(session):
    before = session.spent
    text = "SELECT race, COUNT(*) n FROM adult GROUP BY race HAVING n > 10 LIMIT 2"
    plan = session.sql_plan(text, epsilon=1)
    explained = session.sql_explain(text, epsilon=1)
    assert session.spent == before
    assert plan.loss == dp.ApproxDP(1, 0)
    assert "post-processing (no privacy cost): HAVING n > 10 LIMIT 2" in plan.description
    assert explained.endswith("post-processing of the noisy result (no privacy cost): "
                              "HAVING n > 10 LIMIT 2")


def test_split_weights_the_aggregates_in_select_order(session):
    plan = session.sql_plan("SELECT COUNT(*), SUM(age) FROM adult", epsilon=1, split=[3, 1])
    builder = session.query().agg(dp.count(), dp.sum("age", cases.AGE)).plan(
        epsilon=1, split=[3, 1])
    assert plan.noise == builder.noise and plan.noise[0].scale < plan.noise[1].scale


def test_zcdp_and_pure_sessions(session):
    pure = dp.Session({"adult": cases.adult()}, budget=dp.PureDP(5), schema=cases.SCHEMA)
    zcdp = dp.Session({"adult": cases.adult()}, budget=dp.ZCDP(5), schema=cases.SCHEMA)
    assert pure.sql_plan("SELECT AVG(age) FROM adult", epsilon=1).loss == dp.PureDP(1)
    assert zcdp.sql_plan("SELECT AVG(age) FROM adult", rho=1).loss == dp.ZCDP(1)


def test_having_on_a_quantile_and_order_by_ordinal(session):
    text = ("SELECT sex, MEDIAN(age) AS m FROM adult GROUP BY sex HAVING m > 0 ORDER BY 2 "
            "DESC")
    out = session.sql(text, epsilon=1)
    assert out.columns == ["sex", "m", "m_ci_low", "m_ci_high", "m_rank_error"]
    assert out["m"].to_list() == sorted(out["m"].to_list(), reverse=True)


# -- limits and refusals before parsing ------------------------------------------------------
def test_text_over_one_megabyte_is_refused_before_parsing(session, monkeypatch):
    def parse(*args, **kwargs):
        raise AssertionError("parsed")
    monkeypatch.setattr(sqlglot, "parse", parse)
    text = "SELECT COUNT(*) FROM adult --" + "x" * MAX_SQL_BYTES
    with pytest.raises(SQLError, match="longer than 1048576 bytes"):
        to_query(session, text)
    wide = "SELECT COUNT(*) FROM adult --" + "é" * (MAX_SQL_BYTES // 2)  # 2 bytes each
    with pytest.raises(SQLError, match="bytes"):
        to_query(session, wide)


def test_long_but_allowed_text_is_translated(session):
    condition = " OR ".join(f"age = {i}" for i in range(17, 25))
    padding = "\n".join("-- " + "filler" * 20 for _ in range(2000))
    text = f"SELECT COUNT(*) FROM adult WHERE {condition}\n{padding}"
    assert len(text) < MAX_SQL_BYTES
    assert to_query(session, text).query.steps


def test_deep_nesting_is_refused_not_crashed(session):
    condition = "(" * 20 + "age > 1" + ")" * 20
    to_query(session, f"SELECT COUNT(*) FROM adult WHERE {condition}")  # parentheses only
    with pytest.raises(SQLError, match="parentheses nested deeper than 64") as caught:
        to_query(session, "SELECT COUNT(*) FROM adult WHERE " + "(" * 65 + "age > 1" + ")" * 65)
    assert caught.value.column == 34 + 64
    with pytest.raises(SQLError, match="deeper than 12"):  # the grammar's limit
        to_query(session, "SELECT COUNT(*) FROM adult WHERE " + " + ".join(["age"] * 40)
                 + " > 3")
    with pytest.raises(SQLError, match="nested deeper than 64 levels"):  # no RecursionError
        to_query(session, "SELECT COUNT(*) FROM adult WHERE " + " + ".join(["age"] * 5000)
                 + " > 3")


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "spark", "bigquery"])
def test_dialects(session, dialect):
    quoted = {"spark": "`union`", "bigquery": "`union`"}.get(dialect, '"union"')
    text = f"SELECT {quoted}, AVG(age) FROM adult WHERE age >= 20 GROUP BY {quoted}"
    translated = to_query(session, text, dialect=dialect)
    assert translated.query.group_columns == ("union",)


def test_unknown_dialect_and_non_text_are_refused(session):
    with pytest.raises(SQLError, match="unknown dialect"):
        to_query(session, "SELECT COUNT(*) FROM adult", dialect="oracle")
    with pytest.raises(SQLError, match="a string"):
        to_query(session, b"SELECT 1")  # type: ignore[arg-type]


def test_supported_table_examples_translate(session):
    """Every example of the SUPPORTED table (which docs render) runs on Adult."""
    public = {"regions": cases.REGIONS}
    for form, example in SUPPORTED:
        options = {"selection": cases.SELECTION} if "selection" in form else {}
        if "BigQuery" in form:
            options["dialect"] = "bigquery"
        to_query(session, example, public=public, **options)


# -- the grammar's new operators ---------------------------------------------------------------
def test_new_operators_round_trip_through_json(session):
    query = session.query().filter(col("race").is_in("White", "Black")).filter(
        col("education").like("Bach%")).with_columns(
        band=case((col("age") < 30, "young"), otherwise="old")).group_by(
        "sex", keys=cases.SEXES).agg(dp.count())
    again = Query.from_json(session, query.to_json())
    assert again.describe() == query.describe()


def test_new_operators_are_type_checked(session):
    schema = session.schema("adult")
    for bad in (col("age").is_in("x"), col("age").like("1%"),
                case((col("age"), 1)), case((col("age") > 1, 1), otherwise="a"),
                {"op": "in", "args": [{"col": "age"}, {"col": "age"}]}):
        with pytest.raises(ProtocolError):
            compile_expr(bad, schema)


def test_like_matches_sql_semantics():
    frame = pl.DataFrame({"s": ["abc", "a_c", "a%c", "ABC", "a\nc", None]})
    def matches(pattern, sensitive=True):
        expr = compile_expr(col("s").like(pattern, case_sensitive=sensitive))
        return nw.from_native(frame).select(m=expr).to_native()["m"].to_list()

    assert matches("a_c") == [True, True, True, False, True, None]
    assert matches("a\\_c") == [False, True, False, False, False, None]
    assert matches("a\\%c") == [False, False, True, False, False, None]
    assert matches("a%") == [True, True, True, False, True, None]
    assert matches("abc", sensitive=False) == [True, False, False, True, False, None]
    assert matches(".*") == [False] * 5 + [None]  # regex characters are literal


def test_long_in_lists_stay_within_sixteen_arguments_a_node(session):
    """The server's request model takes 16 arguments an operator: a long IN is an OR of
    ``in`` nodes of 15 values each, the same count."""
    values = ", ".join(str(v) for v in range(17, 57))  # 40 ages
    translated = to_query(session, f"SELECT COUNT(*) FROM adult WHERE age IN ({values})")
    node = translated.query.to_json()["steps"][0]["expr"]
    assert node["op"] == "|" and [len(a["args"]) for a in node["args"]] == [16, 16, 11]
    short = to_query(session, "SELECT COUNT(*) FROM adult WHERE age BETWEEN 17 AND 56")
    counts = [session.release(zero_noise(t.plan(epsilon=1))).values["count"][0]
              for t in (translated, short)]
    assert counts[0] == counts[1] > 0


def test_a_duckdb_session_runs_the_new_operators():
    """IN, LIKE and CASE compile to narwhals expressions the DuckDB backend runs too."""
    table = duckdb.from_arrow(cases.adult().to_arrow())
    session = dp.Session({"adult": table}, budget=dp.ApproxDP(10, 1e-6), schema=cases.SCHEMA)
    out = session.sql("SELECT sex, SUM(CASE WHEN age > 40 THEN 1 ELSE 0 END) AS old "
                      "FROM adult WHERE race IN ('White', 'Black') AND education LIKE 'B%' "
                      "AND age IN (30, 40.5, 50) OR \"hours-per-week\" > 80 GROUP BY sex",
                      epsilon=1)
    assert out["sex"].to_list() == cases.SEXES and out.columns[1] == "old"


def test_post_processing_is_compiled_before_the_debit():
    """HAVING is compiled when translated: a literal the engine refuses fails before the
    debit, and the released frame is post-processed by an expression already checked."""
    session = cases.session(budget=10)
    with pytest.raises(SQLError, match="64 bits") as caught:
        session.sql("SELECT sex, COUNT(*) n FROM adult GROUP BY sex "
                    "HAVING n > 99999999999999999999", epsilon=1)
    assert caught.value.fragment == "n > 99999999999999999999"
    assert session.spent == dp.ApproxDP(0, 0) and session.last_release is None


def test_a_session_on_one_unnamed_table_answers_to_its_name_in_sql():
    unnamed = dp.Session(cases.adult(), budget=dp.PureDP(1), schema=cases.SCHEMA)
    named = cases.session()
    text = "SELECT AVG(age) FROM people WHERE sex = 'Male'"
    assert to_query(unnamed, text).query.describe() == to_query(
        named, text.replace("people", "adult")).query.describe()
    with pytest.raises(SQLError, match="no private table 'people'"):
        to_query(named, text)


@pytest.mark.parametrize("argument, bounds", [
    ("GREATEST(age, 20)", (20, 90)),
    ("LEAST(GREATEST(fnlwgt, 0), 100)", (0, 100)),
    ("LEAST(age, \"hours-per-week\")", (1, 99)),  # a null argument is skipped: the hull
    ("age * 2 - \"hours-per-week\"", (34 - 99, 180 - 1)),
    ("CASE WHEN sex = 'Male' THEN age ELSE 0 END", (0, 90)),
    ("age / 4", (Fraction(17, 4), Fraction(90, 4))),
])
def test_bounds_by_interval_arithmetic(session, argument, bounds):
    query = to_query(session, f"SELECT SUM({argument}) FROM adult").query
    assert query.aggs[0].bounds == bounds


@pytest.mark.parametrize("argument", ["LEAST(age, fnlwgt)", "GREATEST(fnlwgt, 0)",
                                      "age / \"hours-per-week\"", "age * fnlwgt"])
def test_bounds_that_do_not_follow_are_refused(session, argument):
    with pytest.raises(SQLError, match="interval arithmetic"):
        to_query(session, f"SELECT SUM({argument}) FROM adult")


def test_public_tables_give_keys_and_bounds_from_their_own_values(session):
    regions = cases.REGIONS.with_columns(weight=pl.Series([1.0, 2.0, float("nan"), 0.5, 3.0]))
    translated = to_query(session, 'SELECT region, SUM(weight) FROM adult JOIN regions USING '
                          '("native-country") GROUP BY region', public={"regions": regions})
    assert translated.query.keys["region"].to_list() == ["North America", "Asia", "Europe"]
    with pytest.raises(SQLError, match="WITH t\\(columns\\)"):
        to_query(session, "WITH t(a) AS (SELECT age FROM adult) SELECT SUM(a) FROM t")


# -- TABLESAMPLE: Poisson sampling of the privacy units (issue 37, item 6) ----------------------
@pytest.mark.parametrize("text, rate", [
    ("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (10 PERCENT)", Fraction(1, 10)),
    ("SELECT COUNT(*) FROM adult AS a TABLESAMPLE BERNOULLI (2.5 PERCENT) WHERE age > 30",
     Fraction(1, 40)),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (100 %)", Fraction(1)),
    ("WITH t AS (SELECT age FROM adult TABLESAMPLE BERNOULLI (50 PERCENT)) "
     "SELECT COUNT(*) FROM t", Fraction(1, 2))])
def test_tablesample_is_the_builders_sample_step(session, text, rate):
    """TABLESAMPLE BERNOULLI compiles to Query.sample(p): the same JSON step (round trip), the
    same plan and the same debit as the builder's query."""
    translated = to_query(session, text)
    steps = translated.query.to_json()["steps"]
    assert steps[0] == {"step": "sample", "p": dp.frame.language.json_number(rate)}
    again = Query.from_json(session, translated.query.to_json())
    assert again.sampling == rate and again.describe() == translated.query.describe()
    builder = session.query().sample(rate)
    if "age > 30" in text:
        builder = builder.filter(col("age") > 30)
    builder = builder.agg(dp.count())
    mine, theirs = translated.plan(epsilon=1), builder.plan(epsilon=1)
    assert mine.loss == theirs.loss
    assert mine.loss.epsilon == dp.core.subsampling.amplified_epsilon(1, rate)
    assert mine.noise == theirs.noise


def test_tablesample_debits_what_the_builder_debits():
    one, two = cases.session(), cases.session()
    one.sql("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (10 PERCENT)", epsilon=1)
    two.query().sample(Fraction(1, 10)).agg(dp.count()).release(epsilon=1)
    assert one.accountant.spent == two.accountant.spent
    assert one.accountant.spent.epsilon == dp.core.subsampling.amplified_epsilon(
        1, Fraction(1, 10)) < 1


@pytest.mark.parametrize("text, message, fragment", [
    ("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (10 PERCENT) REPEATABLE (7)",
     r"REPEATABLE \(seed\) is refused", "REPEATABLE"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE SYSTEM (10 PERCENT)", "storage blocks", "SYSTEM"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE (10 PERCENT)", "storage blocks", "10"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (10)", r"BERNOULLI \(p PERCENT\)",
     "TABLESAMPLE"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE (100 ROWS)", r"sample\(p=n/N\)", "TABLESAMPLE"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (0 PERCENT)", r"in \(0, 100\]", "0"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (100.5 PERCENT)", r"in \(0, 100\]",
     "100.5"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI ('10' PERCENT)", "number literal",
     "'10'"),
    ("SELECT COUNT(*) FROM adult TABLESAMPLE BERNOULLI (1/3 PERCENT)", "number literal", "1/3"),
    ("SELECT COUNT(*) FROM adult USING SAMPLE 10%", "USING SAMPLE is not supported", ""),
    ("WITH t AS (SELECT age FROM adult) SELECT COUNT(*) FROM t TABLESAMPLE BERNOULLI "
     "(5 PERCENT)", "inside the WITH query", "TABLESAMPLE"),
    ("SELECT COUNT(*) FROM adult JOIN regions TABLESAMPLE BERNOULLI (5 PERCENT) USING (race)",
     "public table", "TABLESAMPLE")])
def test_tablesample_refusals(session, text, message, fragment):
    """Refused before anything is read, each with its reason (and the fix where one exists)."""
    before = session.accountant.spent
    with pytest.raises(SQLError, match=message) as info:
        to_query(session, text, public={"regions": cases.REGIONS})
    assert fragment in info.value.fragment
    assert session.accountant.spent == before
