"""What caching ``Schema.check_columns`` per served dataset could save per release request
(issue 35's residual "the server re-runs check_columns per request").

One server (FastAPI TestClient, a 20,000-row table of 8 numeric and 8 categorical declared
columns, CSV or DuckDB source), release requests alternating one by one between the real
check and a no-op (what a perfect cache would cost: nothing); the median of each arm and of
the paired differences (neighbouring requests share the machine's load), beside the check's
own time and a whole per-request ``Session``'s.

Measured (2 shared cores, load 3): the check costs 4-9 µs of a 4-9 ms release; the paired
difference is +0.002 to +0.08 ms, inside the run-to-run noise, so no cache was added.

    python bench/server_check_columns.py            # CSV and DuckDB, 300 requests a side
    python bench/server_check_columns.py --rounds 10
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np
import polars as pl
from fastapi.testclient import TestClient

from dpkit.frame.schema import Schema
from dpkit.server.app import create_app
from dpkit.server.config import parse_config

BLOCK = 60
BODY = {"group_by": {"columns": ["c0"]}, "aggs": [{"agg": "count"}],
        "budget": {"epsilon": "1/1000"}}
SCHEMA = {"columns": {
    **{f"x{i}": {"type": "numeric", "lower": 0, "upper": 100} for i in range(8)},
    **{f"c{i}": {"type": "categorical", "categories": ["a", "b", "c"]} for i in range(8)}}}


def table() -> pl.DataFrame:
    gen = np.random.default_rng(0)  # the table only, never noise
    return pl.DataFrame({**{f"x{i}": gen.integers(0, 100, 20_000) for i in range(8)},
                         **{f"c{i}": gen.choice(["a", "b", "c"], 20_000) for i in range(8)}})


def source(kind: str, tmp: Path) -> dict[str, str]:
    frame = table()
    if kind == "csv":
        frame.write_csv(tmp / "t.csv")
        return {"kind": "csv", "path": "t.csv"}
    import duckdb

    con = duckdb.connect(str(tmp / "t.duckdb"))
    con.register("f", frame.to_arrow())
    con.execute("create table t as select * from f")
    con.close()
    return {"kind": "duckdb", "path": "t.duckdb", "table": "t"}


def run(kind: str, rounds: int) -> str:
    tmp = Path(tempfile.mkdtemp())
    cfg = parse_config({"ledger": "ledger.sqlite", "datasets": [{
        "name": "t", "source": source(kind, tmp), "privacy_unit": "rows",
        "budget": {"measure": "pure", "epsilon": 10 ** 9}, "schema": SCHEMA}]}, base=tmp)
    app = create_app(cfg)
    state = app.state.dpkit
    token = state.ledger.add_analyst("ann")
    state.ledger.grant("ann", "t")
    real = Schema.check_columns
    arms = {"check": real, "no-op": lambda self, types: None}
    times: dict[str, list[float]] = {k: [] for k in arms}
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(app) as http:
        for _ in range(30):  # warm: the plan memo, the bounded table, the ledger's caches
            assert http.post("/v1/datasets/t/release", json=BODY, headers=headers).is_success
        try:
            for _ in range(rounds * BLOCK):  # the arms alternate request by request
                for name, check in arms.items():
                    Schema.check_columns = check  # type: ignore[method-assign]
                    t = time.perf_counter()
                    r = http.post("/v1/datasets/t/release", json=BODY, headers=headers)
                    times[name].append(time.perf_counter() - t)
                    assert r.is_success, r.text
        finally:
            Schema.check_columns = real  # type: ignore[method-assign]
        served = state.datasets["t"]  # the app's shutdown closes the sources: time them here
        with served.source.open() as data:
            session_us = timeit.timeit(lambda: state.session(served, data, "ann"),
                                       number=300) / 300
            declared = served.config.schema
            assert declared is not None
            types = dict(state.session(served, data, "ann").schema())
            check_us = timeit.timeit(lambda: declared.check_columns(types),
                                     number=20_000) / 20_000
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    # the median of the paired differences (neighbouring requests share the machine's load)
    diff = statistics.median(a - b for a, b in zip(times["check"], times["no-op"],
                                                   strict=True)) * 1e3
    return (f"| {kind} | {len(times['check'])} | {med['check']:.3f} | {med['no-op']:.3f} | "
            f"{diff:+.3f} ({diff / med['check']:+.2%}) | {check_us * 1e6:.1f} | "
            f"{session_us * 1e6:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help=f"{BLOCK} requests per arm each")
    args = ap.parse_args()
    logging.disable(logging.CRITICAL)  # the server's request log
    print("| source | requests per arm | median ms, check | median ms, no-op | "
          "median paired difference ms | "
          "check_columns µs | Session() µs |")
    print("|---|---|---|---|---|---|---|")
    for kind in ("csv", "duckdb"):
        print(run(kind, args.rounds), flush=True)


if __name__ == "__main__":
    main()
