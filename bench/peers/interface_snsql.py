"""SmartNoise SQL 1.0 (pandas reader), for bench/interface.py. Runs in /work/snsql-venv.

    python interface_snsql.py DATA ROWS REPEATS

The Parquet file is read once into a pandas DataFrame. Metadata: ``user_id`` is the
private id, ``max_ids = 10`` (SmartNoise keeps at most 10 rows per user by reservoir
sampling; it has no per-group L0/L∞ bounds, so its count/sum sensitivities come from 10 rows
per user, not 5 groups × 2 rows), ``value`` in [0, 100], ``censor_dims = False`` (SmartNoise
has no public key-set: it releases the keys found in the data, here all 1,000, and censoring
them would need δ > 0).

- grouped: ``SELECT key, COUNT(*), SUM(value), AVG(value) FROM data GROUP BY key`` with
  ``Privacy(epsilon=1/3, delta=0)``: SmartNoise charges ε per noisy column (COUNT and SUM;
  AVG reuses them), and ``get_privacy_cost`` reports ε = 1 for the query.
- median: not supported (PERCENTILE_CONT / PERCENTILE_DISC are parsed but the private
  rewriter refuses them), so only the grouped release is timed.
"""

import time

T_START = time.perf_counter()

import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _interface_common import EPSILON, HIGH, LOW, MAX_ROWS, args, emit, since_spawn  # noqa: E402

QUERY = "SELECT key, COUNT(*) AS n, SUM(value) AS s, AVG(value) AS m FROM data GROUP BY key"


def main() -> None:
    data, rows, repeats = args()
    import statistics
    import warnings
    from importlib.metadata import version

    import pandas as pd
    import snsql
    from snsql import Privacy

    warnings.filterwarnings("ignore")
    out: dict = {"system": "smartnoise-sql", "smartnoise_sql_version": version("smartnoise-sql"),
                 "import_s": since_spawn()}
    df = pd.read_parquet(data)
    out["load_s"] = since_spawn() - out["import_s"]
    meta = {"": {"": {"data": {
        "max_ids": MAX_ROWS, "row_privacy": False, "censor_dims": False,
        "user_id": {"type": "int", "private_id": True},
        "key": {"type": "int"},
        "value": {"type": "float", "lower": LOW, "upper": HIGH, "nullable": False}}}}}
    reader = snsql.from_df(df, privacy=Privacy(epsilon=EPSILON / 3, delta=0.0), metadata=meta)
    out["privacy_cost"] = [float(x) for x in reader.get_privacy_cost(QUERY)]

    def group():
        return reader.execute_df(QUERY)

    table = group()
    out["first_group_s"] = since_spawn()
    out["first_result_s"] = None  # no DP median
    out["median_supported"] = False
    out["check"] = {"groups": len(table), "total_count": float(table["n"].sum()),
                    "avg_mean": float(table["m"].mean()), "median": None}
    emit(out)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        group()
        times.append(time.perf_counter() - t)
        out.update({"steady_s": None, "steady_group_s": statistics.median(times),
                    "steady_median_s": None, "steady_all_s": times, "repeats": len(times)})
        emit(out)


if __name__ == "__main__":
    main()
