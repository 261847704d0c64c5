"""Idempotency across processes and crash safety (CI-sized versions of bench/server.py).

- Ledger API from 4 processes sharing some idempotency keys, on SQLite and on a throwaway
  PostgreSQL server: exactly the affordable releases are accepted, a key is answered at most
  once and every repeat of it replays that answer.
- ``dpkit serve`` with 2 workers, ``kill -9`` of the worker serving a release between its
  debit and its answer: the spend never decreases, the chain verifies, a debited release
  that was never answered still counts (no refund) and its key is not debited again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import random
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import pytest

import dpkit as dp
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.ledger import IdempotentReplay, Ledger

EPS = Fraction(1, 100)
PROCS, PER_PROC, SHARED = 4, 50, 5


# -- idempotency keys shared across processes ------------------------------------------------
def _attempt(reg: Ledger, key: str) -> tuple[str, int | None, str | None]:
    try:
        rid = reg.debit("d", dp.PureDP(EPS), "count", idempotency_key=key)
    except IdempotentReplay as replay:
        return "replay", replay.release_id, replay.result
    except BudgetExceededError:
        return "refused", None, None
    except LedgerError as exc:
        return ("busy" if "in progress" in str(exc) else f"error: {exc}"), None, None
    time.sleep(0.005)  # the release is computed between its debit and its answer
    answer = secrets.token_hex(8)  # a fresh "noisy answer"
    reg.mark(rid, "released", hashlib.sha256(answer.encode()).hexdigest(), answer)
    return "fresh", rid, answer


def _client(location: str, proc: int, out: mp.Queue) -> None:
    keys = [f"p{proc}-{i}" for i in range(PER_PROC - SHARED)]
    for i in range(SHARED):  # the same shared key at the same place in every process
        keys.insert(i * PER_PROC // SHARED, f"shared-{i}")
    reg, answers = Ledger(location), []
    for key in keys:
        while (got := _attempt(reg, key))[0] == "busy":
            time.sleep(0.01)
        answers.append((key, *got))
    out.put(answers)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_shared_idempotency_keys_across_processes(backend, tmp_path, request):
    location = (str(tmp_path / "l.sqlite") if backend == "sqlite"
                else request.getfixturevalue("postgres_server"))
    Ledger(location).register("d", dp.PureDP(1))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_client, args=(location, i, out)) for i in range(PROCS)]
    for p in procs:
        p.start()
    answers = [a for _ in procs for a in out.get(timeout=120)]
    for p in procs:
        p.join(30)
    by_key = defaultdict(list)
    for key, kind, rid, answer in answers:
        assert not kind.startswith("error"), kind
        by_key[key].append((kind, rid, answer))
    assert sum(kind == "fresh" for _, kind, _, _ in answers) == 100  # 200 × 0.01 vs a cap of 1
    for key, got in by_key.items():
        fresh = [(rid, answer) for kind, rid, answer in got if kind == "fresh"]
        assert len(fresh) <= 1, key
        if key.startswith("shared-") and fresh:  # answered once, replayed to every other
            assert sorted(kind for kind, _, _ in got) == ["fresh"] + ["replay"] * (PROCS - 1)
            assert {(rid, answer) for kind, rid, answer in got} == {fresh[0]}
    assert any(kind == "fresh" for kind, _, _ in by_key["shared-0"])
    reg = Ledger(location)
    rows = reg.releases("d")
    assert len(rows) == 100 and len({r["idempotency_key"] for r in rows}) == 100
    assert reg.spent("d") == dp.PureDP(1) == dp.PureDP(sum(r["loss"].epsilon for r in rows))
    assert reg.verify() == []


# -- kill -9 of a server worker between debit and answer -------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``python -m dpkit serve --workers 2``; workers are ready once they log "started"."""

    def __init__(self, config: Path) -> None:
        self.port, self.started = _free_port(), set()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dpkit", "serve", "--config", str(config), "--port",
             str(self.port), "--workers", "2"], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in self.proc.stderr:
            if '"message": "started"' in line:
                self.started.add(json.loads(line)["pid"])

    def workers(self) -> list[int]:
        live = []
        for pid in sorted(self.started):
            with contextlib.suppress(OSError):
                state, ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:2]
                if state != "Z" and int(ppid) == self.proc.pid:
                    live.append(pid)
        return live

    def wait_for_workers(self, but: int | None = None) -> None:
        deadline = time.monotonic() + 60
        while len(self.workers()) < 2 or but in self.workers():
            assert self.proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)

    def holder(self) -> int | None:
        """The worker holding an established connection on our port (the client's)."""
        inodes = set()
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == self.port and f[3] == "01":
                inodes.add(f"socket:[{f[9]}]")
        for pid in self.workers():
            with contextlib.suppress(OSError):
                if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes
                       for fd in os.listdir(f"/proc/{pid}/fd")):
                    return pid
        return None

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Firing(threading.Thread):
    """Releases with fresh idempotency keys while ``go`` is set; ``pause()`` returns once no
    request is in flight."""

    def __init__(self, http) -> None:
        super().__init__(daemon=True)
        self.http, self.lock, self.go, self.stop = http, threading.Lock(), threading.Event(), False
        self.interrupted: list[str] = []  # keys whose connection died mid-request
        self.failures: list[int] = []  # statuses other than 200

    def send(self, key: str):
        body = {"group_by": {"columns": ["sex"], "keys": {"sex": ["Female", "Male"]}},
                "aggs": [{"agg": "count"}], "budget": {"epsilon": "1/1000"},
                "idempotency_key": key}
        return self.http.post("/v1/datasets/adult/release", json=body)

    def run(self) -> None:
        import httpx

        while not self.stop:
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


MAX_ROUNDS = 40  # a kill lands in the millisecond window in a fair share of rounds


@pytest.mark.slow
def test_kill_9_between_debit_and_answer_never_refunds(tmp_path):
    """Kill -9 a worker while it serves releases, at least five times and until one kill
    has landed between a debit and its answer (under load the window is often missed: five
    fixed rounds failed the test in some runs)."""
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    dp.datasets.load_adult("train").head(2000).write_csv(tmp_path / "adult.csv")
    config = tmp_path / "server.yaml"
    config.write_text("ledger: ledger.sqlite\nworkers: 2\ndatasets:\n  - name: adult\n"
                      "    source: {kind: csv, path: adult.csv}\n"
                      "    budget: {measure: pure, epsilon: 10}\n")
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.register("adult", dp.PureDP(10))
    token = ledger.add_analyst("alice")
    ledger.grant("alice", "adult")
    server = Server(config)
    rnd = random.Random(1)
    try:
        server.wait_for_workers()
        http = httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60,
                            headers={"Authorization": f"Bearer {token}"})
        client = Firing(http)
        client.start()
        poll = sqlite3.connect(f"file:{tmp_path / 'ledger.sqlite'}?mode=ro", uri=True)
        spends, landed = [ledger.spent("adult")], []
        rounds = 0  # five kills, and more until one has landed between debit and answer
        while rounds < 5 or ("debited" not in landed and rounds < MAX_ROUNDS):
            rounds += 1
            last = poll.execute("SELECT coalesce(max(id), 0) FROM releases").fetchone()[0]
            client.go.set()
            time.sleep(rnd.uniform(0.05, 0.3))
            victim = server.holder() or rnd.choice(server.workers())
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and poll.execute(
                    "SELECT 1 FROM releases WHERE status = 'debited' AND id > ?", (last,)
            ).fetchone() is None:
                pass  # the window between debit and answer lasts milliseconds
            time.sleep(rnd.uniform(0, 0.003))
            os.kill(victim, signal.SIGKILL)
            client.pause()
            spends.append(ledger.spent("adult"))
            assert spends[-1] >= spends[-2] and ledger.verify() == []
            server.wait_for_workers(but=victim)  # uvicorn replaces the dead worker
            if client.interrupted:  # retry the interrupted request's key once
                key = client.interrupted.pop()
                rows = [r for r in ledger.releases("adult") if r["idempotency_key"] == key]
                status = rows[-1]["status"] if rows else "not debited"
                landed.append(status)
                count, again = ledger.count(), client.send(key)
                if status == "debited":  # debited, never answered: not debited again
                    assert again.status_code == 409 and "in progress" in again.json()["detail"]
                    assert ledger.count() == count
                elif status == "released":  # answered, but the response was lost: replayed
                    assert again.status_code == 200 and again.json()["replayed"]
        client.stop = True
        client.pause()
        http.close()
        poll.close()
    finally:
        server.stop()
    assert client.failures == []
    reg = Ledger(tmp_path / "ledger.sqlite")
    rows = reg.releases("adult")
    debited = [r for r in rows if r["status"] == "debited"]
    assert "debited" in landed and len(debited) == landed.count("debited")
    spent = reg.spent("adult")  # every debit counts, answered or not: no refund
    assert spent >= spends[-1] and spent.epsilon == Fraction(len(rows), 1000)
    assert reg.verify() == []
