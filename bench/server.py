"""The ledger and ``dpkit serve`` under stress: concurrency, crash safety and load.

    /work/venv/bin/python bench/server.py concurrency --backend sqlite|postgres
        [--mode ledger|http|both]
    /work/venv/bin/python bench/server.py crash [--kills 100] [--backend sqlite|postgres]
    /work/venv/bin/python bench/server.py load [--seconds 60] [--clients 8] [--workers 2]
    /work/venv/bin/python bench/server.py disks [--seconds 20] [--clients 8] [--workers 2]
        [--ext4 /tmp/ledger_scale_disk] [--tmpfs /dev/shm/ledger_scale] [--hosts 1,2,4]
    /work/venv/bin/python bench/server.py report     # rewrite the .md from the .json

concurrency  8 processes × 200 requests of ε = 1/100 (sent as an exact rational) against a
             lifetime cap of 10, straight through the ledger (mode ``ledger``: ``debit``, 5 ms
             standing for the computation, ``mark``) or as HTTP releases to ``dpkit serve
             --workers 2`` (mode ``http``). Each process sends 180 keys of its own and, every
             10th request, one of 20 shared keys (the same key at the same place in every
             process, so that they arrive together): 140 requests repeat a key another process
             sent. A request answered "in progress" (409: its key's first attempt is between
             debit and answer) is retried after 20 ms. Checks: exactly 1,000 fresh answers;
             spend = Σ logged losses = 10; ``verify()`` clean; per key at most one fresh
             answer, and every replay returns that answer (same release id and values).
crash        ``dpkit serve --workers 2`` on Adult; one client thread sends releases (ε = 1/1000,
             a fresh idempotency key each). Per kill: let a random number of releases pass
             (0.05–1 s), find the worker holding the client's connection (through
             /proc/net/tcp), wait until the ledger shows a release *debited and not yet
             answered*, wait a further random 0–5 ms, then ``kill -9`` that worker. Then
             pause the client, check the spend did not decrease and ``verify()`` is clean,
             classify the interrupted request by its key's ledger row, retry that key once (a
             released key must replay, a debited one must answer 409 "in progress" without a
             new debit) and wait for uvicorn to replace the worker. Kills go on until
             ``--kills`` of them interrupted a request whose loss was debited (at most
             3 × ``--kills`` kills: one that lands after the answer was sent interrupts nothing
             and counts only in the total). At the end the server is restarted and checked
             again.
load         ``--clients`` processes each sending grouped counts by sex on Adult (32,561
             rows, Parquet) at ε = 1/1000 against a cap of 10⁶ for ``--seconds``, one at a
             time per process, to ``dpkit serve --workers N``: requests/s, p50/p99 latency.
             ``--client wrk``: the same requests from wrk (Debian's package; one thread,
             ``--clients`` connections, each one request at a time), a load generator that
             leaves the two cores to the server (the Python clients spend ≈ 2 ms of CPU per
             request themselves); ``--client both`` runs the two one after the other.
disks        (issue 35, item 5) in one run: the ``load`` workload (Python clients) with the
             SQLite ledger (and the data) in a directory on ext4, then on tmpfs (both checked
             with ``df -T``): their ratio is the measure of group commit; then ``--hosts``
             ``dpkit serve`` processes (``--workers`` each, different ports, standing in for
             hosts) sharing one PostgreSQL ledger, whose data directory is on the ext4
             directory so that its commits pay a real fsync: bench/multihost.py's ``run``
             (clients round-robin over the servers, Adult as CSV, one analyst per client,
             measured for ``--seconds`` after a 2 s warm-up). Requests/s, p50/p99 and the
             ratios ext4 ÷ tmpfs and N servers ÷ 1.

Everything runs on loopback; PostgreSQL is a throwaway server from tests/pg.py (Debian's
package). Results: bench/results/server.json (updated after every run) and server.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import platform
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE.parent / "tests"))  # pg.py: the throwaway PostgreSQL server

import disks as fs  # noqa: E402  (bench/: the ext4 and tmpfs directories)

DATASET = "adult"
CONCURRENCY_EPS, CONCURRENCY_CAP = Fraction(1, 100), 10
PROCESSES, PER_PROCESS, SHARED = 8, 200, 20
SMALL_EPS = Fraction(1, 1000)


def release_body(epsilon: Fraction, key: str | None = None) -> dict[str, Any]:
    """A grouped DP count by sex over public keys (the server's JSON query form)."""
    body: dict[str, Any] = {"group_by": {"columns": ["sex"], "keys": {"sex": ["Female", "Male"]}},
                            "aggs": [{"agg": "count"}], "budget": {"epsilon": str(epsilon)}}
    if key is not None:
        body["idempotency_key"] = key
    return body


# -- the ledger's backend --------------------------------------------------------------------
@contextlib.contextmanager
def ledger_location(backend: str, root: Path) -> Iterator[str]:
    """A fresh ledger: a SQLite file in ``root`` or a throwaway PostgreSQL server's URL."""
    if backend == "sqlite":
        yield str(root / "ledger.sqlite")
        return
    import pg

    reason = pg.unavailable()
    if reason:
        raise SystemExit(f"no PostgreSQL server can be started here: {reason}")
    with pg.server() as url:
        yield url


# -- the server ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``python -m dpkit serve`` over Adult (Parquet) with one analyst, on a free port.

    The workers' "started" log lines (JSON, with their pid) tell which children are ready.
    """

    def __init__(self, root: Path, ledger: str, workers: int, cap: Fraction) -> None:
        import dpkit as dp

        data = root / "adult.parquet"
        if not data.exists():
            dp.datasets.load_adult("train").write_parquet(data)
        config = root / "server.yaml"
        config.write_text(f"ledger: {json.dumps(ledger)}\nworkers: {workers}\ndatasets:\n"
                          f"  - name: {DATASET}\n    source: {{kind: parquet, path: {data}}}\n"
                          f"    budget: {{measure: pure, epsilon: \"{cap}\"}}\n")
        self.ledger = dp.Ledger(ledger)
        self.ledger.register(DATASET, dp.PureDP(cap))
        self.token = self.ledger.add_analyst("bench")
        self.ledger.grant("bench", DATASET)
        self.config, self.workers, self.port = config, workers, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.started: set[int] = set()
        self.tail: deque[str] = deque(maxlen=40)
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> Server:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dpkit", "serve", "--config", str(self.config), "--port",
             str(self.port), "--workers", str(self.workers)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        threading.Thread(target=self._drain, daemon=True).start()
        self.wait_ready()
        return self

    def _drain(self) -> None:
        assert self.proc and self.proc.stderr
        for line in self.proc.stderr:
            self.tail.append(line.rstrip())
            if '"message": "started"' in line:
                self.started.add(int(json.loads(line)["pid"]))

    def live_workers(self) -> list[int]:
        """Ready workers: children of the master that logged "started" and are not zombies."""
        assert self.proc
        live = []
        for pid in sorted(self.started):
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z" and int(stat[1]) == self.proc.pid:
                    live.append(pid)
        return live

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while len(self.live_workers()) < self.workers:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError("the server exited:\n" + "\n".join(self.tail))
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not start:\n" + "\n".join(self.tail))
            time.sleep(0.05)

    def holder(self) -> int | None:
        """The worker holding an established client connection on our port, if any."""
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError):
                for line in Path(table).read_text().splitlines()[1:]:
                    f = line.split()
                    if int(f[1].rsplit(":", 1)[1], 16) == self.port and f[3] == "01":
                        inodes.add(f"socket:[{f[9]}]")
        for pid in self.live_workers():
            with contextlib.suppress(OSError):
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    with contextlib.suppress(OSError):
                        if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                            return pid
        return None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc, self.started = None, set()
        return code

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_: Any) -> None:
        self.stop()
        self.ledger.dispose()


# -- concurrency -----------------------------------------------------------------------------
def _attempt_ledger(reg: Any, key: str) -> tuple[str, Any, Any]:
    import dpkit as dp
    from dpkit.errors import BudgetExceededError, IdempotentReplay, LedgerError

    try:
        rid = reg.debit(DATASET, dp.PureDP(CONCURRENCY_EPS), "count by sex", idempotency_key=key)
    except IdempotentReplay as replay:
        return "replay", replay.release_id, replay.result
    except BudgetExceededError:
        return "refused", None, None
    except LedgerError as exc:
        if "in progress" in str(exc):
            return "busy", None, None
        raise
    time.sleep(0.005)  # stands for computing the release between its debit and its answer
    answer = json.dumps(secrets.randbelow(10**12))  # stands for the fresh noisy answer
    reg.mark(rid, "released", hashlib.sha256(answer.encode()).hexdigest(), answer)
    return "fresh", rid, answer


def _attempt_http(http: httpx.Client, key: str) -> tuple[str, Any, Any]:
    r = http.post(f"/v1/datasets/{DATASET}/release", json=release_body(CONCURRENCY_EPS, key))
    body = r.json()
    if r.status_code == 200:
        return ("replay" if body["replayed"] else "fresh"), body["release_id"], json.dumps(
            body["records"])
    if r.status_code == 409 and body.get("error") == "BudgetExceededError":
        return "refused", None, None
    if r.status_code == 409 and "in progress" in body.get("detail", ""):
        return "busy", None, None
    return "error", r.status_code, r.text[:300]


def _concurrency_client(mode: str, target: tuple[str, ...], proc: int, go: Any, out: Any) -> None:
    keys = [f"p{proc}-{i}" for i in range(PER_PROCESS - SHARED)]
    for i in range(SHARED):  # at the same place in every process, so that they collide
        keys.insert(i * PER_PROCESS // SHARED, f"shared-{i}")
    if mode == "ledger":
        from dpkit.ledger import Ledger

        reg = Ledger(target[0])
        attempt = lambda key: _attempt_ledger(reg, key)  # noqa: E731
    else:
        http = httpx.Client(base_url=target[0], timeout=120,
                            headers={"Authorization": f"Bearer {target[1]}"})
        attempt = lambda key: _attempt_http(http, key)  # noqa: E731
    answers, busy = [], 0
    go.wait()
    for key in keys:
        while (got := attempt(key))[0] == "busy":
            busy += 1
            time.sleep(0.02)
        answers.append((key, *got))
    out.put((answers, busy, time.time()))


def concurrency(mode: str, backend: str) -> dict[str, Any]:
    import dpkit as dp

    with tempfile.TemporaryDirectory() as tmp, ledger_location(backend, Path(tmp)) as where:
        server = None
        if mode == "ledger":
            dp.Ledger(where).register(DATASET, dp.PureDP(CONCURRENCY_CAP))
            target: tuple[str, ...] = (where,)
        else:
            server = Server(Path(tmp), where, 2, Fraction(CONCURRENCY_CAP)).start()
            target = (server.url, server.token)
        try:
            ctx = mp.get_context("spawn")
            go, out = ctx.Event(), ctx.Queue()
            procs = [ctx.Process(target=_concurrency_client, args=(mode, target, i, go, out))
                     for i in range(PROCESSES)]
            for p in procs:
                p.start()
            time.sleep(5 if mode == "ledger" else 3)  # let every process import and connect
            start = time.time()
            go.set()
            results = [out.get(timeout=1800) for _ in procs]
            for p in procs:
                p.join(60)
            wall = max(r[2] for r in results) - start
            summary = check_answers([a for r in results for a in r[0]], dp.Ledger(where))
        finally:
            if server:
                server.stop()
    summary.update(busy_retries=sum(r[1] for r in results), wall_s=round(wall, 2),
                   requests_per_s=round(summary["requests"] / wall, 1),
                   debits_per_s=round(summary["accepted"] / wall, 1))
    return summary


def check_answers(answers: list[tuple[str, str, Any, Any]], ledger: Any) -> dict[str, Any]:
    """Exactly one fresh answer per debited key, replays equal to it, spend = Σ logged."""
    kinds = Counter(kind for _, kind, _, _ in answers)
    by_key: dict[str, list[tuple[str, Any, Any]]] = {}
    for key, kind, rid, answer in answers:
        by_key.setdefault(key, []).append((kind, rid, answer))
    double = [k for k, got in by_key.items() if sum(kind == "fresh" for kind, _, _ in got) > 1]
    mismatched = 0
    for got in by_key.values():
        fresh = [(rid, answer) for kind, rid, answer in got if kind == "fresh"]
        mismatched += sum(1 for kind, rid, answer in got
                          if kind == "replay" and (not fresh or fresh[0] != (rid, answer)))
    rows = ledger.releases(DATASET)
    spent = ledger.spent(DATASET).epsilon
    logged = sum((r["loss"].epsilon for r in rows), Fraction(0))
    logged_keys = Counter(r["idempotency_key"] for r in rows)
    shared = {k: got for k, got in by_key.items() if k.startswith("shared-")}
    return {
        "requests": len(answers), "accepted": kinds["fresh"], "replayed": kinds["replay"],
        "refused_budget": kinds["refused"], "errors": kinds["error"],
        "error_examples": [a for a in answers if a[1] == "error"][:3],
        "duplicate_requests": sum(len(g) - 1 for g in shared.values()),
        "shared_keys_answered": sum(any(kind == "fresh" for kind, _, _ in g)
                                    for g in shared.values()),
        "keys_with_two_fresh_answers": len(double), "replays_differing": mismatched,
        "keys_debited_twice": sum(1 for n in logged_keys.values() if n > 1),
        "ledger_releases": len(rows), "statuses": dict(Counter(r["status"] for r in rows)),
        "spent": str(spent), "sum_logged": str(logged), "spend_equals_logged": spent == logged,
        "verify": ledger.verify(),
    }


# -- crash safety ----------------------------------------------------------------------------
class Firing(threading.Thread):
    """One client sending releases with fresh idempotency keys until paused or stopped.
    ``pause()`` returns only once no request is in flight."""

    def __init__(self, url: str, token: str, epsilon: Fraction) -> None:
        super().__init__(daemon=True)
        self.http = httpx.Client(base_url=url, timeout=120,
                                 headers={"Authorization": f"Bearer {token}"})
        self.epsilon, self.lock, self.go = epsilon, threading.Lock(), threading.Event()
        self.stopped, self.sent = False, 0
        self.interrupted: list[str] = []  # keys whose connection died mid-request
        self.failures: list[int] = []  # statuses other than 200

    def send(self, key: str) -> httpx.Response:
        self.sent += 1
        return self.http.post(f"/v1/datasets/{DATASET}/release",
                              json=release_body(self.epsilon, key))

    def run(self) -> None:
        while not self.stopped:
            with self.lock:
                if self.go.is_set():
                    key = uuid.uuid4().hex
                    try:
                        if (status := self.send(key).status_code) != 200:
                            self.failures.append(status)
                    except httpx.TransportError:
                        self.interrupted.append(key)
                    continue
            time.sleep(0.005)

    def pause(self) -> None:
        self.go.clear()
        with self.lock:
            pass


def _debited_since(engine: Any, after: int) -> int | None:
    from sqlalchemy import text

    with engine.connect() as conn:
        return conn.execute(text("SELECT id FROM releases WHERE status = 'debited' AND id > :a "
                                 "ORDER BY id LIMIT 1"), {"a": after}).scalar()


def _max_id(engine: Any) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        return int(conn.execute(text("SELECT coalesce(max(id), 0) FROM releases")).scalar())


def crash(kills: int, backend: str, seed: int = 0, log: Any = print) -> dict[str, Any]:
    """Kill -9 a worker ``kills`` times between debit and answer; see the module docstring."""
    from sqlalchemy import create_engine

    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp, ledger_location(backend, Path(tmp)) as where, \
            Server(Path(tmp), where, 2, Fraction(10**6)) as server:
        ledger, poll = server.ledger, create_engine(server.ledger.url)
        client = Firing(server.url, server.token, SMALL_EPS)
        client.start()
        spends, problems, landed = [ledger.spent(DATASET).epsilon], [], Counter()
        start, i = time.time(), 0
        while landed["debited"] + landed["released"] < kills and i < 3 * kills:
            i += 1
            last = _max_id(poll)
            client.go.set()
            time.sleep(rnd.uniform(0.05, 1))
            victim = server.holder() or rnd.choice(server.live_workers())
            deadline = time.monotonic() + 30
            while _debited_since(poll, last) is None and time.monotonic() < deadline:
                pass  # spin: the window between debit and answer lasts milliseconds
            time.sleep(rnd.uniform(0, 0.005))
            os.kill(victim, signal.SIGKILL)
            client.pause()
            spends.append(ledger.spent(DATASET).epsilon)
            if spends[-1] < spends[-2]:
                problems.append(f"kill {i}: spend decreased {spends[-2]} -> {spends[-1]}")
            problems += [f"kill {i}: {p}" for p in ledger.verify()]
            key = client.interrupted[-1] if client.interrupted else None
            status = _key_status(ledger, key)
            landed[status] += 1
            while len(server.live_workers()) < 2 or victim in server.live_workers():
                time.sleep(0.05)  # uvicorn's supervisor replaces the dead worker
            problems += [f"kill {i}: {p}" for p in _retry(client, ledger, key, status)]
            if i % 10 == 0:
                log(f"  {i} kills, {dict(landed)}, spend {float(spends[-1]):.3f}, "
                    f"problems {len(problems)}")
        elapsed = time.time() - start
        client.stopped = True
        client.go.clear()
        before = ledger.spent(DATASET).epsilon
        server.stop()
        server.start()  # a full restart: the ledger is reopened by new workers
        after = ledger.spent(DATASET).epsilon
        r = httpx.get(f"{server.url}/healthz")
        final_verify = ledger.verify()
        rows = ledger.releases(DATASET)
        logged = sum((x["loss"].epsilon for x in rows), Fraction(0))
        statuses = Counter(x["status"] for x in rows)
    return {
        "kills_between_debit_and_response": landed["debited"] + landed["released"],
        "kills_total": i, "seconds": round(elapsed, 1), "requests_sent": client.sent,
        "interrupted_requests": sum(landed[k] for k in ("debited", "released", "not debited")),
        "kill_landed": {"between debit and answer (release stays debited)": landed["debited"],
                        "between answer recorded and response": landed["released"],
                        "before the debit": landed["not debited"],
                        "no request in flight": landed["none"]},
        "releases_debited": len(rows), "statuses": dict(statuses),
        "spend_monotone": all(b >= a for a, b in zip(spends, spends[1:], strict=False)),
        "spend_after_restart_equal": before == after, "health_after_restart": r.status_code,
        "spent": str(after), "sum_logged": str(logged), "spend_equals_logged": after == logged,
        "debited_still_counted": after == len(rows) * SMALL_EPS,
        "other_failures": Counter(client.failures), "verify": final_verify,
        "problems": problems[:20], "problem_count": len(problems),
    }


def _key_status(ledger: Any, key: str | None) -> str:
    if key is None:
        return "none"
    rows = [r for r in ledger.releases(DATASET) if r["idempotency_key"] == key]
    return rows[-1]["status"] if rows else "not debited"


def _retry(client: Firing, ledger: Any, key: str | None, status: str) -> list[str]:
    """Retry an interrupted request's key: it must replay a recorded answer, and must not
    debit again while its first attempt has no answer."""
    if key is None or status == "none":
        return []
    count, r = ledger.count(), client.send(key)
    client.interrupted.remove(key)
    if status == "released" and not (r.status_code == 200 and r.json()["replayed"]):
        return [f"key {key}: recorded answer not replayed ({r.status_code})"]
    if status == "debited" and not (r.status_code == 409 and ledger.count() == count):
        return [f"key {key}: debited attempt answered {r.status_code} on retry"]
    if status == "not debited" and r.status_code != 200:
        return [f"key {key}: retry failed ({r.status_code})"]
    return []


# -- load ------------------------------------------------------------------------------------
def _load_client(url: str, token: str, seconds: float, go: Any, out: Any) -> None:
    http = httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {token}"})
    body, latencies, errors = release_body(SMALL_EPS), [], Counter()
    go.wait()
    cpu = time.process_time()
    end = time.perf_counter() + seconds
    while (t := time.perf_counter()) < end:
        try:
            r = http.post(f"/v1/datasets/{DATASET}/release", json=body)
            if r.status_code == 200:
                latencies.append(time.perf_counter() - t)
            else:
                errors[str(r.status_code)] += 1
        except httpx.HTTPError as exc:
            errors[type(exc).__name__] += 1
    out.put((latencies, dict(errors), time.process_time() - cpu))


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of processes (from /proc; 0 for one that is gone)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _rss_mib(pids: list[int]) -> float:
    """Summed resident memory of processes in MiB (from /proc; 0 for one that is gone)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


def _sample_rss(pids: list[int], every: float, stop: threading.Event,
                samples: list[tuple[float, float]]) -> None:
    """Append (seconds since start, server RSS MiB) every ``every`` seconds until ``stop``."""
    t0 = time.perf_counter()
    while not stop.wait(every):
        samples.append((time.perf_counter() - t0, _rss_mib(pids)))


def _memory_trend(samples: list[tuple[float, float]]) -> dict[str, Any]:
    """Server RSS over the run: the mean of its first and last tenth, the maximum, and the
    least-squares slope in MiB per minute (memory is flat when the slope is near 0)."""
    if len(samples) < 4:
        return {}
    t = [x for x, _ in samples]
    m = [y for _, y in samples]
    tenth = max(1, len(m) // 10)
    mt, mm = sum(t) / len(t), sum(m) / len(m)
    slope = (sum((a - mt) * (b - mm) for a, b in zip(t, m, strict=True))
             / max(sum((a - mt) ** 2 for a in t), 1e-9))
    return {"server_rss_mib_first_tenth": round(sum(m[:tenth]) / tenth, 1),
            "server_rss_mib_last_tenth": round(sum(m[-tenth:]) / tenth, 1),
            "server_rss_mib_max": round(max(m), 1),
            "server_rss_mib_per_min": round(60 * slope, 2), "rss_samples": len(m)}


_WRK_SCRIPT = """wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %s"
"""


def _wrk(url: str, token: str, seconds: float, clients: int) -> dict[str, Any]:
    """Run wrk (one thread, ``clients`` connections) for ``seconds``; its latencies in ms,
    requests, non-2xx count and socket errors as it prints them."""
    import re
    import shutil

    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install wrk)")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(_WRK_SCRIPT % (json.dumps(release_body(SMALL_EPS)), token))
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{clients}", f"-d{int(seconds)}s", "--latency", "--timeout",
             "30s", "-s", f.name, f"{url}/v1/datasets/{DATASET}/release"],
            capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    unit = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}

    def ms(text: str) -> float:
        value, suffix = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
        return round(float(value) * unit[suffix], 1)

    pct = {int(m.group(1)): ms(m.group(2))
           for m in re.finditer(r"^\s+(\d+)%\s+(\S+)\s*$", out, re.M)}
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)$", out, re.M)
    return {"requests": total, "non_2xx": int(bad.group(1)) if bad else 0,
            "socket_errors": sock.group(1) if sock else None, "p50_ms": pct.get(50),
            "p90_ms": pct.get(90), "p99_ms": pct.get(99), "raw": out}


def _measured(server: Server, seconds: float, drive: Any) -> tuple[Any, float, dict[str, Any]]:
    """Run ``drive()`` against the server while sampling its RSS and CPU; returns what
    ``drive`` returned, the seconds it took, and the server's figures: the ledger's releases,
    verify, spend = Σ logged, the memory trend, CPU per release and the load at the start."""
    server_pids = [server.proc.pid, *server.live_workers()] if server.proc else []
    load_before = os.getloadavg()
    server_cpu = _cpu_seconds(server_pids)
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_rss, daemon=True,
                               args=(server_pids, max(seconds / 120, 0.5), stop, samples))
    sampler.start()
    start = time.perf_counter()
    got = drive()
    elapsed = time.perf_counter() - start
    stop.set()
    server_cpu = _cpu_seconds(server_pids) - server_cpu
    while True:  # requests still in flight when the client stops (wrk) land meanwhile:
        count = server.ledger.count()  # read the spend and the log between two equal counts
        spent = server.ledger.spent(DATASET).epsilon
        logged = sum((r["loss"].epsilon for r in server.ledger.releases(DATASET)), Fraction(0))
        if server.ledger.count() == count:
            break
    # CPU per answered request (all requests end in a release, errors included): the
    # server's master and workers
    return got, elapsed, {
        "ledger_releases": count, "verify": server.ledger.verify(), "spent": str(spent),
        "sum_logged": str(logged), "spend_equals_logged": spent == logged,
        **_memory_trend(samples),
        "server_cpu_ms_per_request": round(1000 * server_cpu / max(1, count), 2),
        "loadavg_at_start": [round(x, 2) for x in load_before]}


def load_wrk(seconds: float, clients: int, workers: int, backend: str,
             root: Path | None = None) -> dict[str, Any]:
    """The load run with wrk as the client (module docstring), under ``root`` as ``load``."""
    with tempfile.TemporaryDirectory(dir=root) as tmp, \
            ledger_location(backend, Path(tmp)) as where, \
            Server(Path(tmp), where, workers, Fraction(10**6)) as server:
        got, elapsed, figures = _measured(server, seconds, lambda: _wrk(
            server.url, server.token, seconds, clients))
    ok = got["requests"] - got["non_2xx"]
    return {"client": "wrk", "seconds": round(elapsed, 1), "clients": clients,
            "workers": workers, "requests_ok": ok,
            "requests_per_s": round(ok / elapsed, 1), "p50_ms": got["p50_ms"],
            "p90_ms": got["p90_ms"], "p99_ms": got["p99_ms"],
            "errors": {"non_2xx": got["non_2xx"], "socket": got["socket_errors"]}, **figures}


def load(seconds: float, clients: int, workers: int, backend: str, root: Path | None = None
         ) -> dict[str, Any]:
    """The load run (module docstring); the data and a SQLite ledger in a fresh directory
    under ``root`` (default: the temporary directory)."""
    with tempfile.TemporaryDirectory(dir=root) as tmp, \
            ledger_location(backend, Path(tmp)) as where, \
            Server(Path(tmp), where, workers, Fraction(10**6)) as server:
        ctx = mp.get_context("spawn")
        go, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_load_client, args=(server.url, server.token, seconds, go,
                                                        out)) for _ in range(clients)]
        for p in procs:
            p.start()
        time.sleep(3)

        def drive() -> list[Any]:
            go.set()
            return [out.get(timeout=seconds + 300) for _ in procs]

        results, elapsed, figures = _measured(server, seconds, drive)
        for p in procs:
            p.join(60)
    lat = sorted(x for r in results for x in r[0])
    errors: Counter[str] = Counter()
    for r in results:
        errors.update(r[1])

    def pct(q: float) -> float:
        return round(1000 * lat[min(len(lat) - 1, int(q * len(lat)))], 1) if lat else float("nan")

    return {"seconds": round(elapsed, 1), "clients": clients, "workers": workers,
            "requests_ok": len(lat), "requests_per_s": round(len(lat) / elapsed, 1),
            "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99),
            "max_ms": round(1000 * lat[-1], 1) if lat else None, "errors": dict(errors),
            **figures,
            # the 8 client processes' CPU per answered request
            "client_cpu_ms_per_request": round(
                1000 * sum(r[2] for r in results) / max(1, len(lat)), 2)}


# -- disks and hosts -------------------------------------------------------------------------
def disks(seconds: float, clients: int, workers: int, ext4: Path, tmpfs: Path,
          hosts: list[int], client: str = "python") -> dict[str, Any]:
    """The load on SQLite on ext4 and on tmpfs, then on one PostgreSQL with ``hosts``
    server processes (module docstring), in one run; rows and ratios. ``client`` "wrk":
    the SQLite rows are driven by wrk (leaving the cores to the server)."""
    import multihost
    import pg

    rows: list[dict[str, Any]] = []
    for kind, folder in (("ext4", ext4), ("tmpfs", tmpfs)):
        run = load_wrk if client == "wrk" else load
        r = run(seconds, clients, workers, "sqlite", root=fs.require(folder, kind))
        r.setdefault("verify", [])
        r.setdefault("spend_equals_logged", None)
        r.setdefault("loadavg_at_start", [round(os.getloadavg()[0], 2)])
        rows.append({"ledger": f"SQLite, {kind}", "client": client, "dir": str(folder),
                     "servers": 1,
                     "workers": workers, "requests_per_s": r["requests_per_s"],
                     "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"], "errors": r["errors"],
                     "verify": r["verify"], "spend_equals_logged": r["spend_equals_logged"],
                     "loadavg_at_start": r["loadavg_at_start"][0]})
        print(rows[-1], file=sys.stderr)
    if hosts:
        reason = pg.unavailable()
        if reason:
            raise SystemExit(f"no PostgreSQL server can be started here: {reason}")
        os.environ.setdefault("DPKIT_LEDGER_MAC_KEY", secrets.token_hex(32))  # as hosts get it
        with tempfile.TemporaryDirectory(dir=ext4) as tmp, pg.server(parent=str(ext4)) as url:
            import dpkit as dp

            dp.datasets.load_adult("train").write_csv(Path(tmp) / "adult.csv")
            for n in hosts:
                load0 = round(os.getloadavg()[0], 2)
                r = multihost.run(n, clients, seconds, Path(tmp), url, workers)
                rows.append({"ledger": "PostgreSQL, data on ext4", "dir": str(ext4),
                             "servers": n, "workers": workers,
                             "requests_per_s": round(r["rps"], 1), "p50_ms": round(r["p50"], 1),
                             "p99_ms": round(r["p99"], 1), "errors": r["errors"],
                             "verify": r["verify"], "cpu_busy": round(r["busy"], 2),
                             "loadavg_at_start": load0})
                print(rows[-1], file=sys.stderr)
    rate = {(row["ledger"], row["servers"]): row["requests_per_s"] for row in rows}
    ratios = {"ext4 / tmpfs": round(rate[("SQLite, ext4", 1)] / rate[("SQLite, tmpfs", 1)], 3)}
    one = rate.get(("PostgreSQL, data on ext4", 1))
    for n in hosts:
        if one and n != 1:
            ratios[f"PostgreSQL {n} servers / 1"] = round(
                rate[("PostgreSQL, data on ext4", n)] / one, 3)
    return {"seconds": seconds, "clients": clients, "rows": rows, "ratios": ratios}


def disks_lines(name: str, r: dict[str, Any]) -> list[str]:
    """The ``disks`` run as a table and its ratios."""
    lines = [f"- **{name}**: {r['clients']} clients, {r['seconds']} s per row; ratios "
             + ", ".join(f"{k} = {v}" for k, v in r["ratios"].items()), "",
             "| ledger | dir | servers × workers | requests/s | p50 ms | p99 ms | errors | "
             "verify | load at start |", "|---|---|---|---:|---:|---:|---|---|---:|"]
    lines += [f"| {row['ledger']} | {row['dir']} | {row['servers']} × {row['workers']} | "
              f"{row['requests_per_s']} | {row['p50_ms']} | {row['p99_ms']} | "
              f"{row['errors'] or 'none'} | {'clean' if not row['verify'] else row['verify']} | "
              f"{row['loadavg_at_start']} |" for row in r["rows"]]
    return [*lines, ""]


# -- results ---------------------------------------------------------------------------------
def save(name: str, command: str, result: dict[str, Any], load_before: tuple[float, ...]) -> None:
    import uvicorn

    import dpkit

    path = RESULTS / "server.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M"),
                  "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                             f"{platform.python_version()}, uvicorn {uvicorn.__version__}, "
                             f"dpkit {getattr(dpkit, '__version__', '?')}",
                  "loadavg_before": [round(x, 2) for x in load_before],
                  "loadavg_after": [round(x, 2) for x in os.getloadavg()], "result": result}
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    report()


def report() -> None:
    path = RESULTS / "server.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    lines = ["# dpkit serve and the ledger under stress", "",
             "Produced by `bench/server.py` (see its docstring for the exact procedure). The "
             "machine is shared with other jobs: the 1-minute load averages are shown; clients, "
             "server workers and the ledger's database share its cores.", ""] + summary(data)
    for name in sorted(data):
        run = data[name]
        lines += [f"## {name}", "", f"`{run['command']}`", "",
                  f"{run['date']} — {run['machine']}; load average before "
                  f"{run['loadavg_before']}, after {run['loadavg_after']}", "",
                  "| figure | value |", "|---|---|"]
        lines += [f"| {k} | {json.dumps(v, default=str) if isinstance(v, dict | list) else v} |"
                  for k, v in run["result"].items()]
        lines.append("")
    (RESULTS / "server.md").write_text("\n".join(lines))


def summary(data: dict[str, Any]) -> list[str]:
    """The headline figures, one line per run."""
    lines = []
    for name in sorted(data):
        r = data[name]["result"]
        if name.startswith("concurrency"):
            lines.append(
                f"- **{name}**: {r['accepted']:,} of {r['requests']:,} requests accepted; "
                f"spend {r['spent']} = Σ logged {r['sum_logged']}; verify "
                f"{'clean' if not r['verify'] else r['verify']}; {r['replayed']} of "
                f"{r['duplicate_requests']} repeated keys replayed (the others' first "
                f"attempt found the cap reached), "
                f"{r['keys_with_two_fresh_answers']} keys answered twice; "
                f"{r['wall_s']} s, {r['debits_per_s']} debits/s")
        elif name.startswith("crash"):
            lines.append(
                f"- **{name}**: {r['kills_between_debit_and_response']} kill -9s between debit "
                f"and response ({r['kills_total']} in all); spend monotone "
                f"{'yes' if r['spend_monotone'] else 'NO'}, unchanged by a restart "
                f"{'yes' if r['spend_after_restart_equal'] else 'NO'}; "
                f"{r['statuses'].get('debited', 0)} never-answered releases still counted; "
                f"verify {'clean' if not r['verify'] else r['verify']}; "
                f"{r['problem_count']} problems")
        elif name.startswith("disks"):
            lines += disks_lines(name, r)
        elif name.startswith("load"):
            lines.append(
                f"- **{name}**: {r['requests_per_s']} requests/s, p50 {r['p50_ms']} ms, "
                f"p99 {r['p99_ms']} ms, errors {r['errors'] or 0} over {r['seconds']} s"
                + (f"; server CPU {r['server_cpu_ms_per_request']} ms/request, clients "
                   f"{r.get('client_cpu_ms_per_request', '(wrk)')} ms/request; spend = Σ logged "
                   f"{'yes' if r['spend_equals_logged'] else 'NO'}"
                   if "server_cpu_ms_per_request" in r else "")
                + f" (load {r.get('loadavg_at_start', ['?'])[0]})")
    return [*lines, ""] if lines else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("concurrency")
    c.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    c.add_argument("--mode", choices=["ledger", "http", "both"], default="both")
    k = sub.add_parser("crash")
    k.add_argument("--kills", type=int, default=100)
    k.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    k.add_argument("--seed", type=int, default=0)
    ld = sub.add_parser("load")
    ld.add_argument("--seconds", type=float, default=60)
    ld.add_argument("--clients", type=int, default=8)
    ld.add_argument("--workers", type=int, default=2)
    ld.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ld.add_argument("--client", choices=["python", "wrk", "both"], default="python")
    dk = sub.add_parser("disks")
    dk.add_argument("--seconds", type=float, default=20)
    dk.add_argument("--clients", type=int, default=8)
    dk.add_argument("--workers", type=int, default=2)
    dk.add_argument("--ext4", type=Path, default=fs.EXT4)
    dk.add_argument("--tmpfs", type=Path, default=fs.TMPFS)
    dk.add_argument("--hosts", default="1,2,4", help="server processes on PostgreSQL "
                    "(comma-separated; empty: skip PostgreSQL)")
    dk.add_argument("--client", choices=["python", "wrk"], default="python",
                    help="what drives the SQLite rows (PostgreSQL rows: Python clients)")
    sub.add_parser("report")
    args = parser.parse_args()
    command = "/work/venv/bin/python bench/server.py " + " ".join(sys.argv[1:])
    before = os.getloadavg()
    if args.what == "report":
        report()
        return
    if args.what == "concurrency":
        for mode in (["ledger", "http"] if args.mode == "both" else [args.mode]):
            before = os.getloadavg()
            result = concurrency(mode, args.backend)
            print(mode, args.backend, json.dumps(result, default=str))
            save(f"concurrency {mode} {args.backend}", command, result, before)
    elif args.what == "disks":
        hosts = [int(n) for n in args.hosts.split(",") if n]
        result = disks(args.seconds, args.clients, args.workers, args.ext4, args.tmpfs, hosts,
                       args.client)
        print(json.dumps(result, indent=1, default=str))
        save(f"disks {args.clients} {args.client} clients {args.workers} workers", command,
             result, before)
    elif args.what == "crash":
        result = crash(args.kills, args.backend, args.seed)
        print(json.dumps(result, indent=1, default=str))
        save(f"crash {args.backend}", command, result, before)
    else:
        for client in (["python", "wrk"] if args.client == "both" else [args.client]):
            before = os.getloadavg()
            run = load if client == "python" else load_wrk
            result = run(args.seconds, args.clients, args.workers, args.backend)
            print(json.dumps(result, indent=1, default=str))
            suffix = "" if client == "python" else " (wrk)"
            save(f"load {args.backend} {args.clients} clients {args.workers} workers{suffix}",
                 command, result, before)


if __name__ == "__main__":
    main()
