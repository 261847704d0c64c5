"""The same queries on Polars, DuckDB and Spark (one code path through narwhals)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.frame import engine
from dpkit.frame.aggregates import count, mean, quantile, sum

duckdb = pytest.importorskip("duckdb")

BACKENDS = ["polars", "duckdb", pytest.param("spark", marks=pytest.mark.spark)]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    pyspark = pytest.importorskip("pyspark.sql")
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
    aggs = [count(), sum("x", (0, 10)), mean("x", (0, 10)), quantile("k", 0.5, (0, 9))]
    stats = [st for i, a in enumerate(aggs) for st in a.statistics(
        engine.to_lazy(table).collect_schema(), prefix=f"a{i}_")]

    def run(data):
        lf = engine.to_lazy(data)
        lf = engine.apply_steps(lf, [("filter", (dp_nw().col("k") >= 1,), {})])
        return engine.compute(lf, keys, stats)

    expected = run(table)
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
