"""SmartNoise SQL's side of bench/sql_smartnoise.py. Runs in its own venv (/work/venv-snsql;
../shared/PEERS.md); standard library + pandas + smartnoise-sql only.

    python sql_snsql.py JOB.json

JOB: ``{"csv": path, "metadata": {...}, "statements": [{"name", "sql", "epsilon",
"delta"}], "repeats": R}``. Per statement: SmartNoise charges its ε per noisy column, so the
per-column ε is scaled until ``get_privacy_cost`` reports the statement's ε (the same total
as dpkit spends); then it runs R times. Prints one JSON object: per statement the median
seconds of one ``execute_df`` (parse, rewrite, run, noise), the R result tables (records),
or the refusal (exception type and first line).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import warnings
from typing import Any


def run(reader_of: Any, statement: dict[str, Any], repeats: int) -> dict[str, Any]:
    from snsql import Privacy

    eps, delta = statement["epsilon"], statement.get("delta") or 0.0
    try:
        probe = reader_of(Privacy(epsilon=1.0, delta=delta))
        cost = probe.get_privacy_cost(statement["sql"])[0]  # ε at ε = 1 per column
        reader = reader_of(Privacy(epsilon=eps / max(cost, 1e-12), delta=delta))
        charged = reader.get_privacy_cost(statement["sql"])
        tables, times = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            frame = reader.execute_df(statement["sql"])
            times.append(time.perf_counter() - t)
            tables.append(json.loads(frame.to_json(orient="records")))
    except Exception as exc:  # a refusal: the rewriter or the parser says no
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return {"refused": f"{type(exc).__name__}: {first}"}
    return {"seconds": statistics.median(times), "tables": tables,
            "charged": [float(x) for x in charged]}


def main() -> None:
    warnings.filterwarnings("ignore")
    with open(sys.argv[1]) as f:
        job = json.load(f)
    from importlib.metadata import version

    import pandas as pd
    import snsql

    df = pd.read_csv(job["csv"])

    def reader_of(privacy: Any) -> Any:
        return snsql.from_df(df, privacy=privacy, metadata=job["metadata"])

    out = {"version": version("smartnoise-sql"),
           "results": {s["name"]: run(reader_of, s, job["repeats"])
                       for s in job["statements"]}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
