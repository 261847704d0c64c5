"""dpkit: grouped DP count + DP sum, 10^6 rows, 1,000 public keys, ε = 1 (pure DP).

Same data as peers/opendp_groupby.py (numpy default_rng(0) — benchmark data only, never
noise): "key" Int64 in 0..999, "value" Float64 uniform in [0, 100). Reports the time from
process start (before importing polars/dpkit) to the first release, the steady-state median
of 5 releases (plan + debit + one pass + noise), and the plain Polars group-by floor.
Prints one JSON object.
"""

import time

T0 = time.perf_counter()

import json  # noqa: E402
import statistics  # noqa: E402

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

import dpkit as dp  # noqa: E402

T_IMPORTED = time.perf_counter()
N_ROWS, N_KEYS, REPEATS = 1_000_000, 1_000, 5


def make_data() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    return pl.DataFrame({
        "key": rng.integers(0, N_KEYS, size=N_ROWS, dtype=np.int64),
        "value": rng.uniform(0.0, 100.0, size=N_ROWS),
    })


def release(df: pl.DataFrame) -> pl.DataFrame:
    s = dp.Session(df, budget=dp.PureDP(1))
    return (s.query().group_by("key", keys=list(range(N_KEYS)))
            .agg(dp.count(), dp.sum("value", bounds=(0, 100))).release(epsilon=1))


def floor(df: pl.DataFrame) -> pl.DataFrame:
    return df.lazy().group_by("key").agg(pl.len(), pl.col("value").sum()).collect()


def median_time(fn) -> float:
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    df = make_data()
    t_data = time.perf_counter()
    first = release(df)
    first_s = time.perf_counter() - T0
    assert first.height == N_KEYS
    steady = median_time(lambda: release(df))
    floor_s = median_time(lambda: floor(df))
    exact = floor(df).sort("key")
    print(json.dumps({
        "library": "dpkit", "polars_version": pl.__version__, "n_rows": N_ROWS,
        "n_keys": N_KEYS, "import_s": T_IMPORTED - T0, "datagen_s": t_data - T_IMPORTED,
        "first_result_s": first_s, "steady_s": steady, "polars_floor_steady_s": floor_s,
        "sanity_mean_abs_err_count": float((first["count"] - exact["len"]).abs().mean()),
        "sanity_mean_abs_err_sum": float((first["value_sum"] - exact["value"]).abs().mean()),
    }))


if __name__ == "__main__":
    main()
