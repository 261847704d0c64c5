"""A soak of ``dpkit serve`` (issue 35, item 5): full rate for minutes, memory flat, the ledger
exact at the end.

    /work/venv/bin/python bench/soak.py [--minutes 10] [--clients 8] [--workers 2]
        [--dir /tmp/ledger_scale_disk] [--every 10]

``dpkit serve --workers 2`` on Adult (Parquet, 32,561 rows) with its SQLite ledger (and the
data) in a fresh directory under ``--dir``, checked with ``df -T`` to be on ext4 so that every
debit pays its fsync; ``--clients`` client processes each send grouped counts by sex at
ε = 1/1000 (cap 10⁹: never binding), one request at a time, back to back, for ``--minutes``
(bench/server.py's ``Server`` and request body). Every ``--every`` seconds the resident
memory of the server's master and of each worker is sampled (psutil if installed, else
/proc); once a minute a progress line: requests/s in that minute, errors, each worker's RSS,
the load average. A worker that uvicorn replaced is reported (a restart would hide a leak).

At the end, after the clients have stopped: ``Ledger.verify()`` must be clean, the spend must
equal the accepted requests × ε exactly (Fractions; a request that failed on the client's
side after its debit shows here as a mismatch, as it should), every release marked; and
memory flat: per process, the mean RSS of the last minute against the first, and the
least-squares slope (MiB per minute) over the samples after the first minute (the first
fills caches and imports lazily). "Flat" means the last minute is within max(5 %, 10 MiB) of
the first. Exit status 1 if any check fails. Results: bench/results/soak.md.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import disks as fs  # noqa: E402
from server import DATASET, SMALL_EPS, Server, release_body  # noqa: E402

CAP = Fraction(10**9)


# -- the clients -----------------------------------------------------------------------------
def _client(url: str, token: str, ready: Any, go: Any, stop: Any, ok: Any, errors: Any,
            out: Any) -> None:
    """Send releases back to back until ``stop``; count answers in the shared ``ok`` and
    ``errors`` (this process is their only writer), put the latencies at the end."""
    http = httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {token}"})
    body, latencies = release_body(SMALL_EPS), []
    ready.put(os.getpid())
    go.wait()
    while not stop.is_set():
        t = time.perf_counter()
        try:
            r = http.post(f"/v1/datasets/{DATASET}/release", json=body)
        except httpx.HTTPError:
            errors.value += 1
            continue
        if r.status_code == 200:
            latencies.append(time.perf_counter() - t)
            ok.value += 1
        else:
            errors.value += 1
    out.put(latencies)


# -- memory ----------------------------------------------------------------------------------
def _rss_reader() -> Callable[[int], float | None]:
    """A function from a pid to its resident memory in MiB (None once it is gone)."""
    try:
        import psutil
    except ImportError:
        page = os.sysconf("SC_PAGE_SIZE")

        def from_proc(pid: int) -> float | None:
            try:
                return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page / 2**20
            except OSError:
                return None
        return from_proc

    def from_psutil(pid: int) -> float | None:
        try:
            return float(psutil.Process(pid).memory_info().rss) / 2**20
        except psutil.Error:
            return None
    return from_psutil


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MiB) points, in MiB per minute."""
    if len(points) < 3:
        return None
    t, m = [p[0] for p in points], [p[1] for p in points]
    mt, mm = statistics.fmean(t), statistics.fmean(m)
    var = sum((a - mt) ** 2 for a in t)
    return 60 * sum((a - mt) * (b - mm) for a, b in zip(t, m, strict=True)) / var


def memory(samples: dict[str, list[tuple[float, float]]], seconds: float) -> list[dict[str, Any]]:
    """Per process: first- and last-minute mean RSS, the slope after the first minute, and
    whether it is flat (module docstring)."""
    rows = []
    for name, points in samples.items():
        first = [m for t, m in points if t <= 60]
        last = [m for t, m in points if t >= seconds - 60]
        if not first or not last:
            continue
        a, b = statistics.fmean(first), statistics.fmean(last)
        slope = _slope([p for p in points if p[0] > 60]) or _slope(points)
        rows.append({"process": name, "first_min_mib": round(a, 1), "last_min_mib": round(b, 1),
                     "max_mib": round(max(m for _, m in points), 1),
                     "slope_mib_per_min": None if slope is None else round(slope, 2),
                     "flat": b - a <= max(0.05 * a, 10.0), "samples": len(points)})
    return rows


# -- the soak --------------------------------------------------------------------------------
def soak(minutes: float, clients: int, workers: int, folder: Path, every: float
         ) -> dict[str, Any]:
    rss = _rss_reader()
    seconds = 60 * minutes
    with tempfile.TemporaryDirectory(dir=fs.require(folder, "ext4")) as tmp, \
            Server(Path(tmp), str(Path(tmp) / "ledger.sqlite"), workers, CAP) as server:
        assert server.proc is not None
        ctx = mp.get_context("spawn")
        ready, go, stop, out = ctx.Queue(), ctx.Event(), ctx.Event(), ctx.Queue()
        ok = [ctx.Value("q", 0, lock=False) for _ in range(clients)]
        errors = [ctx.Value("q", 0, lock=False) for _ in range(clients)]
        procs = [ctx.Process(target=_client, args=(server.url, server.token, ready, go, stop,
                                                   ok[i], errors[i], out))
                 for i in range(clients)]
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=300)  # every client has imported httpx and is connected
        pids = {"master": server.proc.pid,
                **{f"worker {i + 1}": pid for i, pid in enumerate(server.live_workers())}}
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in pids}
        minutes_rows: list[dict[str, Any]] = []
        load0 = os.getloadavg()
        go.set()
        t0 = time.monotonic()
        last = {"t": t0, "done": 0}

        def progress(now: float) -> None:
            """One line (and row) for the minute since the last one."""
            done = sum(v.value for v in ok)
            row = {"minute": len(minutes_rows) + 1,
                   "requests_per_s": round((done - last["done"]) / (now - last["t"]), 1),
                   "requests": done, "errors": sum(v.value for v in errors),
                   "rss_mib": {n: round(s[-1][1], 1) for n, s in samples.items() if s},
                   "load": round(os.getloadavg()[0], 2)}
            minutes_rows.append(row)
            last.update(t=now, done=done)
            print(f"[soak] minute {row['minute']}: {row['requests_per_s']} req/s, "
                  f"{row['requests']} answered, {row['errors']} errors, RSS MiB "
                  f"{row['rss_mib']}, load {row['load']}", file=sys.stderr, flush=True)

        next_sample, next_minute, end = t0, t0 + 60, t0 + seconds
        pause = threading.Event()  # never set: waits until the next sample or minute
        while (now := time.monotonic()) < end:
            if now >= next_sample:
                for name, pid in pids.items():
                    got = rss(pid)
                    if got is not None:
                        samples[name].append((now - t0, got))
                next_sample += every
            if now >= next_minute:
                progress(now)
                next_minute += 60
            pause.wait(max(0.0, min(next_sample, next_minute, end) - time.monotonic()))
        if time.monotonic() - last["t"] > 1:  # the last, partial minute
            progress(time.monotonic())
        stop.set()
        latencies = sorted(x for _ in procs for x in out.get(timeout=300))
        for p in procs:
            p.join(60)
        elapsed = time.monotonic() - t0
        replaced = sorted(set(server.started) - set(pids.values()))
        accepted = sum(v.value for v in ok)
        ledger = server.ledger
        problems = ledger.verify()
        spent = ledger.spent(DATASET).epsilon
        statuses: dict[str, int] = {}
        for r in ledger.releases(DATASET):
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        load1 = os.getloadavg()

    def ms(q: float) -> float | None:
        if not latencies:
            return None
        return round(1e3 * latencies[min(len(latencies) - 1, int(q * len(latencies)))], 1)

    return {"minutes": minutes, "clients": clients, "workers": workers, "dir": str(folder),
            "seconds": round(elapsed, 1), "accepted": accepted,
            "errors": sum(v.value for v in errors),
            "requests_per_s": round(accepted / elapsed, 1), "p50_ms": ms(0.5),
            "p99_ms": ms(0.99), "verify_problems": problems[:5],
            "spent": str(spent), "accepted_times_eps": str(accepted * SMALL_EPS),
            "spend_exact": spent == accepted * SMALL_EPS, "statuses": statuses,
            "workers_replaced": replaced, "memory": memory(samples, elapsed),
            "per_minute": minutes_rows, "loadavg_start": [round(x, 2) for x in load0],
            "loadavg_end": [round(x, 2) for x in load1], "rss_from": _rss_source()}


def _rss_source() -> str:
    with contextlib.suppress(ImportError):
        import psutil  # noqa: F401

        return "psutil"
    return "/proc"


def passed(r: dict[str, Any]) -> bool:
    """Verify clean, spend exact, every release marked, no worker replaced, memory flat."""
    return (not r["verify_problems"] and r["spend_exact"] and set(r["statuses"]) <= {"released"}
            and not r["workers_replaced"] and all(m["flat"] for m in r["memory"]))


def markdown(r: dict[str, Any], command: str) -> str:
    lines = ["# Soak of dpkit serve (issue 35, item 5)", "",
             f"`{command}` — {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores "
             f"(shared with other jobs), load average at start {r['loadavg_start']}, at end "
             f"{r['loadavg_end']}; RSS from {r['rss_from']}. Procedure: bench/soak.py's "
             "docstring.", "",
             f"- **{'PASS' if passed(r) else 'FAIL'}**: {r['accepted']:,} releases in "
             f"{r['seconds']} s ({r['requests_per_s']} req/s, p50 {r['p50_ms']} ms, p99 "
             f"{r['p99_ms']} ms), {r['errors']} errors, {r['clients']} clients, "
             f"{r['workers']} workers, ledger under {r['dir']} (ext4)",
             f"- verify: {'clean' if not r['verify_problems'] else r['verify_problems']}; "
             f"spend {r['spent']} {'=' if r['spend_exact'] else '≠'} accepted × ε = "
             f"{r['accepted_times_eps']}; statuses {r['statuses']}; workers replaced: "
             f"{r['workers_replaced'] or 'none'}", "",
             "| process | first minute MiB | last minute MiB | max MiB | slope MiB/min "
             "(after minute 1; all samples in a short run) | flat | samples |",
             "|---|---:|---:|---:|---:|---|---:|"]
    lines += [f"| {m['process']} | {m['first_min_mib']} | {m['last_min_mib']} | {m['max_mib']} | "
              f"{m['slope_mib_per_min']} | {'yes' if m['flat'] else 'NO'} | {m['samples']} |"
              for m in r["memory"]]
    lines += ["", "| minute | requests/s | answered | errors | RSS MiB | load |",
              "|---:|---:|---:|---:|---|---:|"]
    lines += [f"| {m['minute']} | {m['requests_per_s']} | {m['requests']:,} | {m['errors']} | "
              f"{m['rss_mib']} | {m['load']} |" for m in r["per_minute"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=fs.EXT4)
    ap.add_argument("--every", type=float, default=10, help="seconds between RSS samples")
    args = ap.parse_args()
    result = soak(args.minutes, args.clients, args.workers, args.dir, args.every)
    text = markdown(result, "/work/venv/bin/python bench/soak.py " + " ".join(sys.argv[1:]))
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "soak.md").write_text(text)
    print(text)
    raise SystemExit(0 if passed(result) else 1)


if __name__ == "__main__":
    main()
