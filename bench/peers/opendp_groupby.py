"""Peer benchmark: OpenDP Polars Context API, grouped DP count + DP sum.

Usage: /work/peers-venv/bin/python opendp_groupby.py

Data (deterministic, numpy default_rng(0)): 10**6 rows,
  "key"   = Int64 in 0..999 (kept as integer, not cast to string),
  "value" = Float64 uniform in [0, 100).
Query: group_by("key").agg(dp.len(), value.dp.sum((0, 100))) released via
dp.Context.compositor(privacy_unit=unit_of(contributions=1),
privacy_loss=loss_of(epsilon=1.0), split_evenly_over=1) with a margin on
"key" declaring the 1,000 keys public (invariant="keys") so no partition
selection is needed. OpenDP 0.16 requires both max_length (set to 10**6,
the total row count: a loose per-group bound, needed for float sums) and
max_groups (set to 1,000) on the margin. dp.len(signed=False) is the current
default, passed explicitly to silence a FutureWarning.

Reports:
  first_result_s        process start (before importing polars/opendp,
                        includes imports + data generation) -> first release
  steady_s              median of 5 (fresh context + query + release + collect)
  polars_floor_steady_s median of 5 plain Polars group_by count+sum
Prints exactly one JSON object on stdout.
"""
import time

T0 = time.perf_counter()

import json  # noqa: E402
import statistics  # noqa: E402
from importlib.metadata import version  # noqa: E402

import numpy as np  # noqa: E402
import opendp.prelude as dp  # noqa: E402
import polars as pl  # noqa: E402

dp.enable_features("contrib")
T_IMPORTED = time.perf_counter()

N_ROWS, N_KEYS, REPEATS = 1_000_000, 1_000, 5


def make_data():
    rng = np.random.default_rng(0)
    return pl.DataFrame({
        "key": rng.integers(0, N_KEYS, size=N_ROWS, dtype=np.int64),
        "value": rng.uniform(0.0, 100.0, size=N_ROWS),
    })


def dp_release(lf):
    context = dp.Context.compositor(
        data=lf,
        privacy_unit=dp.unit_of(contributions=1),
        privacy_loss=dp.loss_of(epsilon=1.0),
        split_evenly_over=1,
        margins=[dp.polars.Margin(
            by=["key"], invariant="keys", max_length=N_ROWS, max_groups=N_KEYS
        )],
    )
    query = (
        context.query()
        .group_by("key")
        .agg(dp.len(signed=False), pl.col("value").dp.sum((0.0, 100.0)))
    )
    return query.release().collect()


def polars_floor(lf):
    return lf.group_by("key").agg(pl.len(), pl.col("value").sum()).collect()


def median_time(fn):
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    lf = make_data().lazy()
    t_data = time.perf_counter()
    first = dp_release(lf)
    first_result_s = time.perf_counter() - T0
    assert first.height == N_KEYS, first.height

    steady_s = median_time(lambda: dp_release(lf))
    floor_s = median_time(lambda: polars_floor(lf))

    exact = polars_floor(lf).sort("key")
    released = first.sort("key")
    print(json.dumps({
        "library": "opendp",
        "opendp_version": version("opendp"),
        "polars_version": pl.__version__,
        "numpy_version": np.__version__,
        "n_rows": N_ROWS,
        "n_keys": N_KEYS,
        "epsilon": 1.0,
        "key_dtype": "Int64",
        "import_s": T_IMPORTED - T0,
        "datagen_s": t_data - T_IMPORTED,
        "first_result_s": first_result_s,
        "steady_s": steady_s,
        "polars_floor_steady_s": floor_s,
        "repeats": REPEATS,
        "sanity_mean_abs_err_count": float(
            (released["len"].cast(pl.Int64) - exact["len"].cast(pl.Int64)).abs().mean()),
        "sanity_mean_abs_err_sum": float((released["value"] - exact["value"]).abs().mean()),
    }))


if __name__ == "__main__":
    main()
