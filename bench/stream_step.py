"""The cost of one hosted stream step as the stream grows (issue 30, finding 4).

    python bench/stream_step.py                     # t = 10, 100, 1000 with 1,000 keys
    python bench/stream_step.py --horizon 200 --at 10 100 200   # within the old limits

A served Parquet table of 50,000 synthetic rows (day 1…horizon, 1,000 regions), one continual
histogram over the 1,000 regions (smooth binary mechanism, ρ = 1/2), through FastAPI's
TestClient in this process. The stream is advanced in requests of as many steps as a request
may take; at each target t the three single-step ``POST /v1/streams/{id}/next`` requests that
end at t are timed (wall clock and this process's CPU time, medians: the machine may be
shared), then one ``GET /v1/streams/{id}`` of the default page. A step restores the
encrypted state, reads its day's rows, writes the new state (fsync), records the step in the
ledger (a durable SQLite commit) and appends it to the stream's log (fsync). The goal: < 50 ms
at t = 1,000 with 1,000 keys, flat in t (before issue 30 the whole history was in the state,
so a step cost O(t·keys)). Prints a table (no file written).
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from stream_server import served_events

from dpkit.server import streams

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--horizon", type=int, default=1000)
    parser.add_argument("--at", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--mechanism", default="smooth")
    args = parser.parse_args()
    keys = [f"r{i}" for i in range(args.keys)]
    folder, app, headers = served_events(50_000, args.horizon, keys)
    per_request = getattr(streams, "MAX_CELLS_PER_REQUEST", 100_000)  # (older servers)
    chunk = max(min(100, per_request // args.keys), 1)
    print(f"keys = {args.keys}, horizon = {args.horizon}, mechanism = {args.mechanism}")
    print("| t | one /next: wall ms | CPU ms | state file (bytes) | GET default page: ms |")
    print("|---|---|---|---|---|")
    with TestClient(app) as http:
        body = {"aggregation": {"agg": "count"}, "time": "day", "horizon": args.horizon,
                "mechanism": args.mechanism, "budget": {"rho": "1/2"}, "keys": keys,
                "by": "region"}
        r = http.post("/v1/datasets/v/streams", json=body, headers=headers)
        assert r.status_code == 200, r.text
        sid, t = r.json()["stream_id"], 0
        for target in sorted(args.at):
            while t < target - 3:  # advance in bulk to three steps before the target
                k = min(chunk, target - 3 - t)
                r = http.post(f"/v1/streams/{sid}/next", json={"max_steps": k},
                              headers=headers)
                assert r.status_code == 200, r.text
                t = r.json()["t"]
            times, cpu = [], []
            while t < target:
                start, c0 = time.perf_counter(), time.process_time()
                r = http.post(f"/v1/streams/{sid}/next", json={}, headers=headers)
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - c0)
                assert r.status_code == 200, r.text
                t = r.json()["t"]
            state = sum(f.stat().st_size for f in (folder / "l.sqlite.streams" / str(sid)
                                                   ).glob("*.state"))
            start = time.perf_counter()
            assert http.get(f"/v1/streams/{sid}", headers=headers).status_code == 200
            page = time.perf_counter() - start
            print(f"| {t} | {1000 * statistics.median(times):.1f} | "
                  f"{1000 * statistics.median(cpu):.1f} | {state} | {1000 * page:.1f} |")


if __name__ == "__main__":
    main()
