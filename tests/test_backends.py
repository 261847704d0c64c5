"""The same queries on Polars, DuckDB and Spark (one code path through narwhals)."""

from __future__ import annotations

import os
import shutil
from collections import defaultdict

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.frame import backend, engine
from dpkit.frame.aggregates import count, count_distinct, mean, quantile, sum

duckdb = pytest.importorskip("duckdb")

BACKENDS = ["polars", "duckdb", pytest.param("spark", marks=pytest.mark.spark)]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    pyspark = pytest.importorskip("pyspark.sql")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (no java on PATH, no JAVA_HOME)")
    warehouse = str(tmp_path_factory.mktemp("spark-warehouse"))
    session = (pyspark.SparkSession.builder.master("local[2]").appName("dpkit-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.warehouse.dir", warehouse)
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", "2g").getOrCreate())
    yield session
    session.stop()


def _table() -> pl.DataFrame:
    rng = np.random.default_rng(11)  # test data only, never noise
    n = 3000
    x = rng.normal(5, 3, n)
    x[::97] = np.nan
    return pl.DataFrame({
        "u": rng.integers(0, 400, n),
        "g": rng.choice(["a", "b", "c", None], n),
        "x": x,
        "k": rng.integers(0, 10, n),
    })


def _native(kind: str, table: pl.DataFrame, request: pytest.FixtureRequest):
    if kind == "polars":
        return table
    if kind == "duckdb":
        return duckdb.from_arrow(table.to_arrow())
    spark = request.getfixturevalue("spark")
    return spark.createDataFrame(table.rows(), schema="u long, g string, x double, k long")


@pytest.mark.parametrize("kind", BACKENDS)
def test_exact_statistics_agree_across_backends(kind, request):
    """Row-level privacy: the engine's exact integer statistics are identical everywhere."""
    table = _table()
    keys = pl.DataFrame({"g": ["a", "b", "c"]})
    aggs = [count(), sum("x", (0, 10)), mean("x", (0, 10)), quantile("k", 0.5, (0, 9)),
            count_distinct("k"), count_distinct("g")]
    stats = [st for i, a in enumerate(aggs) for st in a.statistics(
        engine.to_lazy(table).collect_schema(), prefix=f"a{i}_")]

    def run(data):
        lf = engine.to_lazy(data)
        lf = engine.apply_steps(lf, [("filter", (dp_nw().col("k") >= 1,), {})])
        whole = engine.compute(lf, None, stats[-2:])  # one group: g's nulls not counted
        return {**engine.compute(lf, keys, stats), **{f"all_{k}": v for k, v in whole.items()}}

    expected = run(table)
    assert expected["all_a5_v"][0] == 3  # "a", "b", "c"; null is not a value
    got = run(_native(kind, table, request))
    assert expected.keys() == got.keys()
    for key in expected:
        np.testing.assert_array_equal(expected[key], got[key])


def dp_nw():
    import narwhals as nw
    return nw


@pytest.mark.parametrize("kind", BACKENDS)
def test_user_level_bounds_hold_on_every_backend(kind, request):
    table = _table()
    unit = dp.PrivacyUnit.by("u", max_rows=4, max_groups=2, max_rows_per_group=2)
    lf = engine.to_lazy(_native(kind, table, request))
    bounded = engine.bound_contributions(lf, unit, ["x"], ["g"])
    out = pl.DataFrame(bounded.collect().to_native()) if kind != "polars" else (
        bounded.collect().to_native())
    if not isinstance(out, pl.DataFrame):
        out = pl.from_arrow(out)
    per_pair = out.group_by("u", "g").len()
    assert per_pair["len"].max() <= 2
    assert per_pair.group_by("u").len()["len"].max() <= 2
    assert out.group_by("u").len()["len"].max() <= 4
    # every unit keeps min(its rows, what the bounds allow): at least one row each
    assert out["u"].n_unique() == table["u"].n_unique()


@pytest.mark.parametrize("kind", BACKENDS)
def test_release_end_to_end(kind, request):
    data = _native(kind, _table(), request)
    s = dp.Session(data, dp.PrivacyUnit.by("u", max_rows=8, max_groups=3), dp.ApproxDP(20, 1e-5))
    q = (s.query().filter(dp_nw().col("k") < 9).clamp("x", 0, 10)
         .join(pl.DataFrame({"g": ["a", "b", "c"], "r": ["N", "N", "S"]}), on="g", how="inner")
         .group_by("r", selection=dp.PartitionSelection(1, 1e-7))
         .agg(dp.count(), dp.mean("x"), dp.median("x")))
    out = q.release(epsilon=4)
    assert set(out["r"].to_list()) == {"N", "S"}
    assert out["count"].min() > 300
    assert out["x_mean"].is_between(3, 7).all()


# -- Spark at scale (issue 19): contribution bounding is one lazy plan -------------------------


def _spark_rows(spark):
    """A table whose units have many rows in many groups (so G, R and M all bind), with
    null groups and identical rows (interchangeable: equal keys)."""
    rng = np.random.default_rng(5)  # test data only, never noise
    n = 2000
    rows = [(int(u), None if g == 0 else f"g{g}", float(x)) for u, g, x in zip(
        rng.integers(0, 60, n), rng.integers(0, 7, n), rng.integers(0, 50, n) / 2, strict=True)]
    return rows, spark.createDataFrame(rows, schema="u long, g string, x double")


def _reference(rows, hashes, max_groups, max_rows_per_group, max_rows, grouped=True):
    """The bounding rule, written out: per unit in key order, the G groups seen first,
    the first R rows of each, the first M of those (without groups: the first min(M, R))."""
    by_unit = defaultdict(list)
    for row, h in zip(rows, hashes, strict=True):
        by_unit[row[0]].append((h, row))
    kept = []
    for items in by_unit.values():
        items.sort(key=lambda t: t[0])
        if not grouped:
            kept += [r for _, r in items[:min(max_rows, max_rows_per_group)]]
            continue
        group_rank: dict = {}
        per_group: dict = defaultdict(int)
        mine = []
        for _, row in items:
            rank = group_rank.setdefault(row[1], len(group_rank))
            per_group[row[1]] += 1
            if rank < max_groups and per_group[row[1]] <= max_rows_per_group:
                mine.append(row)
        kept += mine[:max_rows]
    return sorted(kept, key=repr)


@pytest.mark.spark
@pytest.mark.parametrize("bounds", [(2, 2, 3), (3, 1, 10), (10, 3, 4), (1, 5, 5)])
def test_spark_bounding_keeps_exactly_the_rule_rows(spark, bounds):
    """The Spark plan keeps exactly the rows of the rule (G groups with the smallest first
    key, R rows per group, M rows) for the row keys it hashes — every rule binding, each
    alone, and none — and the same rows on a second read of the same plan."""
    from pyspark.sql import functions as F  # noqa: N812

    rows, df = _spark_rows(spark)
    salt = 123456789
    hashes = [r[0] for r in df.select(F.xxhash64(F.lit(salt), "u", "g", "x")).collect()]
    assert len(set(hashes)) == len(set(rows))  # distinct rows, distinct keys
    g, r, m = bounds
    bounded = backend.bound_spark(df, "u", ["g"], g, r, m, salt=salt)
    got = sorted((tuple(x) for x in bounded.collect()), key=repr)
    assert got == _reference(rows, hashes, g, r, m)
    assert sorted((tuple(x) for x in bounded.collect()), key=repr) == got
    ungrouped = backend.bound_spark(df, "u", [], g, r, m, salt=salt)
    assert sorted((tuple(x) for x in ungrouped.collect()), key=repr) == _reference(
        rows, hashes, g, r, m, grouped=False)


@pytest.mark.spark
def test_spark_bounding_is_lazy_with_one_shuffle(spark):
    """Bounding a Spark frame runs no job (no checkpoint, nothing collected) and plans a
    single shuffle, by the privacy unit; the release then reads the same rows in every
    job, whose bounds hold, with a fresh CSPRNG salt."""
    rows, df = _spark_rows(spark)
    unit = dp.PrivacyUnit.by("u", max_rows=3, max_groups=2, max_rows_per_group=2)
    tracker = spark.sparkContext.statusTracker()
    before = len(tracker.getJobIdsForGroup(None))
    bounded = engine.bound_contributions(engine.to_lazy(df), unit, ["x"], ["g"])
    native = engine.nw.to_native(bounded)
    assert len(tracker.getJobIdsForGroup(None)) == before  # nothing ran
    plan = native._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange") == 1 and "REPARTITION_BY_COL" in plan
    first = sorted((tuple(x) for x in native.collect()), key=repr)
    assert sorted((tuple(x) for x in native.collect()), key=repr) == first
    out = pl.DataFrame(first, schema=["x", "g", "u"], orient="row")
    assert out.group_by("u", "g").len()["len"].max() <= 2
    assert out.group_by("u").agg(pl.col("g").n_unique())["g"].max() <= 2
    assert out.group_by("u").len()["len"].max() <= 3
