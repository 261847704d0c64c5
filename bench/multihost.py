"""Several ``dpkit serve`` hosts on one PostgreSQL ledger (issue 35, item 3).

    /work/venv/bin/python bench/multihost.py [--seconds 20] [--clients 8] [--update-results]

For N = 1 and N = 2 server processes (one worker each, on different ports: stand-ins for
hosts), all on one throwaway PostgreSQL ledger (tests/pg.py, Debian's package, loopback):
``--clients`` client processes, spread round-robin over the N servers, each sending grouped
counts by sex on Adult (train, 32,561 rows, CSV) at ε = 1/1000 against a cap of 10⁶, one at
a time, for ``--seconds`` after a 2 s warm-up. Reports requests/s, p50/p99 latency of the
accepted requests, the share of all cores busy during the measured window and the CPU
seconds per request of the clients, of the servers, of PostgreSQL and of everything else
(other load on the machine; clients, servers and PostgreSQL share the machine: at 100 %
busy a second server cannot add throughput), errors, and the ratio of requests/s at N = 2 to
N = 1. Each N starts on a fresh database, and ``verify()`` must be clean at the end. Writes
``multihost.md`` to bench/out (bench/results with ``--update-results``).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # pg.py, processes.py

from outdir import add_flag, results_dir  # noqa: E402

EPS = Fraction(1, 1000)
BODY = {"group_by": {"columns": ["sex"], "keys": {"sex": ["Female", "Male"]}},
        "aggs": [{"agg": "count"}], "budget": {"epsilon": str(EPS)}}
WARMUP = 2.0


def _client(url: str, token: str, start: float, seconds: float, out: Any) -> None:
    """Send releases one at a time; latencies of those sent after ``start`` (a wall-clock
    instant shared by all clients) and before ``start + seconds``."""
    latencies, errors, cpu = [], Counter(), 0.0
    with httpx.Client(base_url=url, timeout=120,
                      headers={"Authorization": f"Bearer {token}"}) as http:
        while (t := time.time()) < start + seconds:
            if t < start:
                http.post("/v1/datasets/adult/release", json=BODY)
                cpu = time.process_time()
                continue
            r = http.post("/v1/datasets/adult/release", json=BODY)
            if r.status_code == 200:
                latencies.append(time.time() - t)
            else:
                errors[str(r.status_code)] += 1
    out.put((latencies, dict(errors), time.process_time() - cpu))


def _cpu_busy(since: tuple[int, int] | None = None) -> Any:
    """The machine's busy and total jiffies (/proc/stat); given an earlier reading, the
    fraction of all cores busy since then."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    now = (sum(fields) - fields[3] - fields[4], sum(fields))  # idle and iowait are not busy
    if since is None:
        return now
    return (now[0] - since[0]) / max(1, now[1] - since[1])


def _cpu_of(pids: set[int], reaped: bool = False) -> float:
    """User + system CPU seconds of processes (/proc; 0 for one that is gone), with
    ``reaped`` that of their children that have exited too (PostgreSQL's backends)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
        if reaped:
            total += int(fields[13]) + int(fields[14])
    return total / os.sysconf("SC_CLK_TCK")


def _cpu_seconds(procs: list[Any]) -> float:
    """CPU seconds of the servers' processes and their workers."""
    return _cpu_of({pid for p in procs for pid in {p.proc.pid, *p.started}})


def _postgres_cpu() -> float:
    """CPU seconds of the processes running as the ``postgres`` user (the ledger's server
    and its backends, live or exited; tests/pg.py starts it as that user)."""
    import pwd

    uid = str(pwd.getpwnam("postgres").pw_uid)
    pids = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uids = next(li for li in status.read_text().splitlines() if li.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if uids.split()[1] == uid:
            pids.add(int(status.parent.name))
    return _cpu_of(pids, reaped=True)


def run(servers: int, clients: int, seconds: float, root: Path, server_url: str,
        workers: int = 1) -> dict:
    import pg
    from processes import ServerProcess

    import dpkit as dp
    from dpkit.ledger import Ledger

    url = pg.fresh_database(server_url, f"multihost{servers}")
    ledger = Ledger(url)
    ledger.register("adult", dp.PureDP(10**6))
    tokens = [ledger.add_analyst(f"a{i}") for i in range(clients)]
    for i in range(clients):
        ledger.grant(f"a{i}", "adult")
    procs = []
    for n in range(servers):
        config = root / f"host{servers}-{n}.yaml"
        config.write_text(f"ledger: {url}\nworkers: {workers}\ndatasets:\n  - name: adult\n"
                          f"    source: {{kind: csv, path: {root / 'adult.csv'}}}\n"
                          "    budget: {measure: pure, epsilon: 1000000}\n")
        procs.append(ServerProcess(config))
    try:
        for p in procs:
            p.wait_ready(workers)
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        start = time.time() + WARMUP + 3  # spawned clients import httpx first
        senders = [ctx.Process(target=_client, args=(procs[i % servers].url, tokens[i],
                                                     start, seconds, out))
                   for i in range(clients)]
        for w in senders:
            w.start()
        time.sleep(max(0.0, start - time.time()))
        busy, server_cpu, pg_cpu = _cpu_busy(), _cpu_seconds(procs), _postgres_cpu()
        time.sleep(max(0.0, start + seconds - time.time()))
        busy, server_cpu = _cpu_busy(busy), _cpu_seconds(procs) - server_cpu
        pg_cpu = _postgres_cpu() - pg_cpu
        results = [out.get(timeout=seconds + 600) for _ in senders]
        for w in senders:
            w.join()
    finally:
        for p in procs:
            p.stop()
    latencies = sorted(x for lat, _, _ in results for x in lat)
    errors: Counter = Counter()
    for _, e, _ in results:
        errors.update(e)
    client_cpu = sum(c for _, _, c in results)
    problems = ledger.verify()
    ledger.dispose()
    q = statistics.quantiles(latencies, n=100)
    return {"servers": servers, "workers": workers, "rps": len(latencies) / seconds,
            "p50": q[49] * 1e3, "p99": q[98] * 1e3, "errors": dict(errors), "verify": problems,
            "busy": busy,
            "client_ms": client_cpu / len(latencies) * 1e3,
            "server_ms": server_cpu / len(latencies) * 1e3,
            "pg_ms": pg_cpu / len(latencies) * 1e3,
            "other_ms": (busy * (os.cpu_count() or 1) * seconds - client_cpu - server_cpu
                         - pg_cpu) / len(latencies) * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--clients", type=int, default=8)
    add_flag(ap)
    args = ap.parse_args()
    import pg

    import dpkit as dp

    reason = pg.unavailable()
    if reason:
        raise SystemExit(f"no PostgreSQL server can be started here: {reason}")
    os.environ["DPKIT_LEDGER_MAC_KEY"] = secrets.token_hex(32)  # as every host would get it
    rows = []
    with tempfile.TemporaryDirectory() as tmp, pg.server() as server_url:
        root = Path(tmp)
        dp.datasets.load_adult("train").write_csv(root / "adult.csv")
        for servers in (1, 2):
            rows.append(run(servers, args.clients, args.seconds, root, server_url))
            print(rows[-1], file=sys.stderr)
    ratio = rows[1]["rps"] / rows[0]["rps"]
    own = rows[0]["client_ms"] + rows[0]["server_ms"] + rows[0]["pg_ms"]
    load = os.getloadavg()
    lines = [
        "# Several hosts on one PostgreSQL ledger",
        "",
        f"`python bench/multihost.py --seconds {args.seconds:g} --clients {args.clients}`: "
        f"{args.clients} client processes, grouped count on Adult at ε = 1/1000, "
        f"{os.cpu_count()} cores (shared), load average after the run {load[0]:.1f}.",
        "",
        "| server processes | requests/s | p50 ms | p99 ms | CPU busy | client CPU ms/req "
        "| server CPU ms/req | PostgreSQL CPU ms/req | other CPU ms/req | errors | verify |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
        *(f"| {r['servers']} | {r['rps']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | "
          f"{r['busy']:.0%} | {r['client_ms']:.1f} | {r['server_ms']:.1f} | {r['pg_ms']:.1f} | "
          f"{r['other_ms']:.1f} | "
          f"{r['errors'] or 'none'} | {'clean' if not r['verify'] else r['verify']} |"
          for r in rows),
        "",
        f"2 servers vs 1: **{ratio:.2f}×** requests/s (goal ≥ 1.6×).",
        "",
        f"Reading: with one server the cores were already {rows[0]['busy']:.0%} busy. One "
        f"request costs {own:.1f} ms of CPU in clients, server and PostgreSQL together, so "
        f"{os.cpu_count()} idle cores bound the whole set-up at ≈ "
        f"{(os.cpu_count() or 1) * 1e3 / own:.0f} requests/s however many servers run; "
        "CPU the table counts as other is load outside this benchmark. A second server adds "
        "throughput only where the first leaves cores idle: on separate hosts, each with "
        "its own cores, against a PostgreSQL that is not saturated.",
        "",
    ]
    path = results_dir(args.update_results) / "multihost.md"
    path.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
