"""PipelineDP 0.3 on its LocalBackend (pure Python, one process), for bench/interface.py.
Runs in /work/peers-venv.

    python interface_pipelinedp.py DATA ROWS REPEATS

The Parquet file is read with pyarrow into a list of (user_id, key, value) tuples — the
LocalBackend's input — once; the conversion is inside time to first result. Each release
is its own NaiveBudgetAccountant(total_epsilon=1, total_delta=0) + DPEngine, Laplace noise:

- grouped: ``engine.aggregate`` with metrics COUNT, SUM, MEAN, ``max_partitions_contributed=5,
  max_contributions_per_partition=2``, ``min_value=0, max_value=100`` and the 1,000 keys as
  ``public_partitions``; PipelineDP splits ε = 1 among the metrics itself.
- median: ``Metrics.PERCENTILE(50)`` on a single public partition (every row mapped to key 0)
  with ``max_partitions_contributed=1, max_contributions_per_partition=10`` (the per-user
  bound of 10 rows), ε = 1; PipelineDP computes percentiles with python-dp's quantile tree.
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


def main() -> None:
    data, rows, repeats = args()
    from importlib.metadata import version

    import pipeline_dp
    import pyarrow.parquet as pq

    out: dict = {"system": "pipelinedp-local", "pipeline_dp_version": version("pipeline-dp"),
                 "import_s": since_spawn()}
    table = pq.read_table(data)
    records = list(zip(table["user_id"].to_pylist(), table["key"].to_pylist(),
                       table["value"].to_pylist(), strict=True))
    del table
    out["load_s"] = since_spawn() - out["import_s"]
    backend = pipeline_dp.LocalBackend()
    public = list(range(N_KEYS))
    M = pipeline_dp.Metrics

    def run(params, extractors, partitions):
        accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=0)
        engine = pipeline_dp.DPEngine(accountant, backend)
        result = engine.aggregate(records, params, extractors, public_partitions=partitions)
        accountant.compute_budgets()
        return list(result)

    group_params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[M.COUNT, M.SUM, M.MEAN],
        max_partitions_contributed=MAX_GROUPS,
        max_contributions_per_partition=MAX_ROWS_PER_GROUP, min_value=LOW, max_value=HIGH)
    group_extract = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1],
        value_extractor=lambda r: r[2])
    median_params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, metrics=[M.PERCENTILE(50)],
        max_partitions_contributed=1, max_contributions_per_partition=MAX_ROWS,
        min_value=LOW, max_value=HIGH)
    median_extract = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: 0,
        value_extractor=lambda r: r[2])

    def group():
        return run(group_params, group_extract, public)

    def median():
        (_, metrics), = run(median_params, median_extract, [0])
        return metrics.percentile_50

    result = group()
    out["first_group_s"] = since_spawn()
    med = median()
    out["first_result_s"] = since_spawn()
    out["check"] = {"groups": len(result),
                    "total_count": float(sum(m.count for _, m in result)),
                    "avg_mean": float(sum(m.mean for _, m in result) / len(result)),
                    "median": float(med)}
    steady(out, group, median, repeats)


if __name__ == "__main__":
    main()
