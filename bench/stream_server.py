"""Hosted continual releases (dpkit.server.streams): the latency of a step request.

    python bench/stream_server.py

A served Parquet table of 100,000 synthetic event rows (day 1…365, 4 regions), a continual
histogram over the 4 regions with a 7-day window (T = 365, ρ = 1/2), 100 requests of one step
each and one request of 200 steps, through FastAPI's TestClient in this process. Every step
restores the encrypted state, reads its day's rows, writes the new state (fsync) and records
the step in the ledger (a durable SQLite commit). Prints the figures (no file written).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from cryptography.fernet import Fernet

from dpkit.server.app import create_app
from dpkit.server.config import parse_config

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient


def served_events(rows: int, days: int, regions: list[str]
                  ) -> tuple[Path, Any, dict[str, str]]:
    """(folder, app, an analyst's headers): ``rows`` synthetic events (day 1…``days``, a
    region each) served as dataset "v" (zCDP, ρ = 10) with hosted streams on."""
    folder = Path(tempfile.mkdtemp())
    rng = np.random.default_rng(0)  # synthetic data only; the noise is dpkit's CSPRNG
    pl.DataFrame({"day": rng.integers(1, days + 1, rows),
                  "region": rng.choice(regions, rows)}).write_parquet(folder / "v.parquet")
    os.environ["DPKIT_BENCH_STREAM_KEY"] = Fernet.generate_key().decode()
    app = create_app(parse_config({
        "ledger": "l.sqlite", "ledger_key_env": "DPKIT_BENCH_STREAM_KEY",
        "datasets": [{"name": "v", "source": {"kind": "parquet", "path": "v.parquet"},
                      "budget": {"measure": "zcdp", "rho": 10}}]}, base=folder))
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst("a")
    ledger.grant("a", "v")
    logging.getLogger("dpkit.server").setLevel(logging.WARNING)
    return folder, app, {"Authorization": f"Bearer {token}"}


def main() -> None:
    _, app, headers = served_events(100_000, 365, ["a", "b", "c", "d"])
    with TestClient(app) as http:
        for mechanism in ("smooth", "factorization"):
            body = {"aggregation": {"agg": "count"}, "time": "day", "horizon": 365,
                    "mechanism": mechanism, "budget": {"rho": "1/2"},
                    "keys": ["a", "b", "c", "d"], "by": "region", "window": 7}
            sid = http.post("/v1/datasets/v/streams", json=body, headers=headers).json()[
                "stream_id"]
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(100):
                assert http.post(f"/v1/streams/{sid}/next", json={},
                                 headers=headers).status_code == 200
            one, cpu = (time.perf_counter() - w0) / 100, (time.process_time() - c0) / 100
            w0 = time.perf_counter()
            got = http.post(f"/v1/streams/{sid}/next", json={"max_steps": 200},
                            headers=headers).json()
            assert len(got["steps"]) == 200
            many = (time.perf_counter() - w0) / 200
            print(f"{mechanism}: one step per request {1000 * one:.1f} ms wall "
                  f"({1000 * cpu:.1f} ms CPU); 200 steps in one request {1000 * many:.1f} "
                  f"ms per step; load average {os.getloadavg()[0]:.2f} (2 shared cores)")


if __name__ == "__main__":
    main()
