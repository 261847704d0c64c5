"""dpkit (Polars, DuckDB or Spark backend) and the non-private Polars floor, for
bench/interface.py. Runs in dpkit's own environment.

    python interface_dpkit.py DATA ROWS REPEATS {polars,duckdb,spark,floor}

Task: with the privacy unit ``user_id`` (at most 10 rows, 5 groups, 2 rows per group), a
grouped DP count + sum + mean of ``value`` in [0, 100] over the 1,000 public keys (one release,
ε = 1 split evenly by dpkit), then the DP median of ``value`` (one release, ε = 1).

- polars: the Parquet file is read once into a Polars DataFrame (the Session's data).
- duckdb: ``duckdb.read_parquet(DATA)``, a lazy relation (each release reads the file).
- spark: ``spark.read.parquet(DATA)`` on a ``local[2]`` SparkSession (lazy, not cached;
  driver memory from ``BENCH_SPARK_DRIVER_MEMORY``, default 2g, other settings Spark's
  defaults); the session's start-up is inside time to first result and reported as
  ``startup_s``.
- floor: plain Polars on the same in-memory DataFrame, no privacy: group_by(key) len + sum +
  mean, and the exact median. No contribution bounding, no noise.
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

DRIVER_MEMORY = os.environ.get("BENCH_SPARK_DRIVER_MEMORY", "2g")  # bench/interface.py sets it

ENGINE = sys.argv[4]


def main() -> None:
    data, rows, repeats = args()
    import polars as pl

    out: dict = {"system": "polars-floor" if ENGINE == "floor" else f"dpkit-{ENGINE}",
                 "polars_version": pl.__version__}
    if ENGINE == "floor":
        df = pl.read_parquet(data)
        out["import_s"] = out["load_s"] = None

        def group():
            return df.group_by("key").agg(pl.len().alias("count"), pl.col("value").sum(),
                                          pl.col("value").mean().alias("mean"))

        def median():
            return df.select(pl.col("value").median()).item()
    else:
        import dpkit as dp

        out["import_s"] = since_spawn()
        if ENGINE == "polars":
            source = pl.read_parquet(data)
        elif ENGINE == "duckdb":
            import duckdb

            out["duckdb_version"] = duckdb.__version__
            source = duckdb.read_parquet(data)
        elif ENGINE == "spark":
            import pyspark
            from pyspark.sql import SparkSession

            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers in this venv
            t = time.perf_counter()
            spark = (SparkSession.builder.master("local[2]").appName("dpkit-interface")
                     .config("spark.driver.memory", DRIVER_MEMORY)
                     .config("spark.ui.enabled", "false").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            out["startup_s"] = time.perf_counter() - t
            out["spark_driver_memory"] = DRIVER_MEMORY
            out["pyspark_version"] = pyspark.__version__
            source = spark.read.parquet(data)
        else:
            raise SystemExit(f"unknown engine {ENGINE}")
        out["load_s"] = since_spawn() - out["import_s"]
        unit = dp.PrivacyUnit.by("user_id", max_rows=MAX_ROWS, max_groups=MAX_GROUPS,
                                 max_rows_per_group=MAX_ROWS_PER_GROUP)
        session = dp.Session(source, unit, dp.PureDP(1e9))
        keys = list(range(N_KEYS))

        def group():
            return (session.query().group_by("key", keys=keys)
                    .agg(dp.count(), dp.sum("value", (LOW, HIGH)),
                         dp.mean("value", (LOW, HIGH)))
                    .release(epsilon=EPSILON))

        def median():
            return session.query().agg(dp.median("value", (LOW, HIGH))).release(
                epsilon=EPSILON)["value_median"][0]

    table = group()
    out["first_group_s"] = since_spawn()
    med = median()
    out["first_result_s"] = since_spawn()
    count_col = "count"
    mean_col = "mean" if ENGINE == "floor" else "value_mean"
    out["check"] = {"groups": table.height, "total_count": float(table[count_col].sum()),
                    "avg_mean": float(table[mean_col].mean()), "median": float(med)}
    steady(out, group, median, repeats)


if __name__ == "__main__":
    main()
