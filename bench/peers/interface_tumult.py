"""Tumult Analytics 0.21 (on its own pyspark 3.5), for bench/interface.py. Runs in
/work/tumult-venv.

    python interface_tumult.py DATA ROWS REPEATS

``spark.read.parquet(DATA)`` on a ``local[2]`` SparkSession (same configuration as
dpkit-Spark: driver memory from ``BENCH_SPARK_DRIVER_MEMORY``, default 2g, UI off); its
start-up is inside time to first result and reported as ``startup_s``. One Session with
``AddRowsWithID("user_id")`` holds the whole run's budget (PureDP, ε = 1 per
release × 2 releases × (1 + REPEATS)).

- grouped: Tumult 0.21 has no multi-aggregation query, so the "release" is three queries on
  ``enforce(MaxGroupsPerID("key", 5)).enforce(MaxRowsPerGroupPerID("key", 2))
  .groupby(KeySet.from_dict({"key": range(1000)}))``: ``count()``, ``sum("value", 0, 100)``
  and ``average("value", 0, 100)``, ε = 1/3 each (dpkit and OpenDP split ε = 1 over the
  same three aggregations inside one release).
- median: ``enforce(MaxRowsPerID(10)).median("value", 0, 100)``, ε = 1.
"""

import time

T_START = time.perf_counter()

import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _interface_common import (  # noqa: E402
    EPSILON,
    HIGH,
    LOW,
    MAX_GROUPS,
    MAX_ROWS,
    MAX_ROWS_PER_GROUP,
    N_KEYS,
    args,
    since_spawn,
    steady,
)

DRIVER_MEMORY = os.environ.get("BENCH_SPARK_DRIVER_MEMORY", "2g")  # set by bench/interface.py


def main() -> None:
    data, rows, repeats = args()
    from importlib.metadata import version

    import pyspark
    from pyspark.sql import SparkSession
    from tmlt.analytics import (
        AddRowsWithID,
        KeySet,
        MaxGroupsPerID,
        MaxRowsPerGroupPerID,
        MaxRowsPerID,
        PureDPBudget,
        QueryBuilder,
        Session,
    )

    out: dict = {"system": "tumult-analytics", "tmlt_analytics_version":
                 version("tmlt.analytics"), "pyspark_version": pyspark.__version__,
                 "import_s": since_spawn()}
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers in this venv
    t = time.perf_counter()
    spark = (SparkSession.builder.master("local[2]").appName("tumult-interface")
             .config("spark.driver.memory", DRIVER_MEMORY)
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    out["startup_s"] = time.perf_counter() - t
    out["spark_driver_memory"] = DRIVER_MEMORY
    sdf = spark.read.parquet(data)
    releases = 2 * (1 + repeats)
    session = Session.from_dataframe(
        privacy_budget=PureDPBudget(EPSILON * releases), source_id="data", dataframe=sdf,
        protected_change=AddRowsWithID(id_column="user_id"))
    out["load_s"] = since_spawn() - out["import_s"]
    keys = KeySet.from_dict({"key": list(range(N_KEYS))})
    third = PureDPBudget(EPSILON / 3)

    def grouped():
        return (QueryBuilder("data").enforce(MaxGroupsPerID("key", MAX_GROUPS))
                .enforce(MaxRowsPerGroupPerID("key", MAX_ROWS_PER_GROUP)).groupby(keys))

    def group():
        c = session.evaluate(grouped().count(name="count"), third).toPandas()
        s = session.evaluate(grouped().sum("value", LOW, HIGH, name="sum"), third).toPandas()
        m = session.evaluate(grouped().average("value", LOW, HIGH, name="mean"),
                             third).toPandas()
        return c.merge(s, on="key").merge(m, on="key")

    def median():
        q = (QueryBuilder("data").enforce(MaxRowsPerID(MAX_ROWS))
             .median("value", LOW, HIGH, name="median"))
        return float(session.evaluate(q, PureDPBudget(EPSILON)).toPandas()["median"][0])

    table = group()
    out["first_group_s"] = since_spawn()
    med = median()
    out["first_result_s"] = since_spawn()
    out["check"] = {"groups": len(table), "total_count": float(table["count"].sum()),
                    "avg_mean": float(table["mean"].mean()), "median": med}
    steady(out, group, median, repeats)


if __name__ == "__main__":
    main()
