"""OpenDP 0.16 Context API (Polars), for bench/interface.py. Runs in /work/peers-venv
(opendp 0.16 needs polars 1.36.1).

    python interface_opendp.py DATA ROWS REPEATS

The Parquet file is read once into a Polars DataFrame. One Context holds the whole run's
budget (ε = 1 per release, split_evenly_over = 2 releases × (1 + REPEATS)), with the privacy
unit ``dp.unit_of(contributions=1, identifier="user_id")`` (user-level):

- grouped: ``truncate_num_groups(5, by=["key"], keep="first")`` then
  ``truncate_per_group(2, by=["key"])`` (OpenDP derives the L0/L∞ sensitivities from them),
  ``group_by("key").agg(dp.len(), value.dp.sum((0, 100)), value.dp.mean((0, 100)))`` joined
  to the 1,000 public keys with ``with_keys`` (a Margin with ``invariant="keys"`` is refused
  under an identifier unit). keep="first": 0.16's keep="sample" fails on Polars 1.36.1
  ("multiple fields with name 'key'" from its struct(hash, struct) rank), so each user keeps
  their 5 smallest keys, a deterministic choice where dpkit samples at random.
- median: ``truncate_per_group(10)`` then ``value.dp.median(candidates)`` over the same
  1,001 candidates as dpkit (0, 0.1, …, 100).

Margins: ``max_length = ROWS`` (needed for float sums; a loose public bound).
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
    MEDIAN_CANDIDATES,
    N_KEYS,
    args,
    since_spawn,
    steady,
)


def main() -> None:
    data, rows, repeats = args()
    from importlib.metadata import version

    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    out: dict = {"system": "opendp-context", "opendp_version": version("opendp"),
                 "polars_version": pl.__version__, "import_s": since_spawn()}
    df = pl.read_parquet(data)
    out["load_s"] = since_spawn() - out["import_s"]
    releases = 2 * (1 + repeats)
    context = dp.Context.compositor(
        data=df.lazy(),
        privacy_unit=dp.unit_of(contributions=1, identifier="user_id"),
        privacy_loss=dp.loss_of(epsilon=EPSILON * releases),
        split_evenly_over=releases,
        margins=[dp.polars.Margin(by=[], max_length=rows)],
    )
    keys = pl.DataFrame({"key": list(range(N_KEYS))})
    value = pl.col("value").fill_null(0.0)
    step = (HIGH - LOW) / (MEDIAN_CANDIDATES - 1)
    candidates = [LOW + i * step for i in range(MEDIAN_CANDIDATES)]

    def group():
        q = (context.query()
             .truncate_num_groups(MAX_GROUPS, by=["key"], keep="first")
             .truncate_per_group(MAX_ROWS_PER_GROUP, by=["key"])
             .group_by("key")
             .agg(dp.len(signed=False).alias("count"), value.dp.sum((LOW, HIGH)),
                  value.dp.mean((LOW, HIGH)).alias("mean"))
             .with_keys(keys))
        return q.release().collect()

    def median():
        q = context.query().truncate_per_group(MAX_ROWS).select(value.dp.median(candidates))
        return q.release().collect().item()

    table = group()
    out["first_group_s"] = since_spawn()
    med = median()
    out["first_result_s"] = since_spawn()
    out["check"] = {"groups": table.height, "total_count": float(table["count"].sum()),
                    "avg_mean": float(table.filter(pl.col("mean").is_finite())["mean"].mean()),
                    "median": float(med)}  # a noisy count ≤ 0 makes a mean ±inf
    steady(out, group, median, repeats)


if __name__ == "__main__":
    main()
