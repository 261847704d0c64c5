"""Group commit (issue 35, 2): a debit is durable before ``debit()`` returns, one flush
serves every commit made before it started, and killing a writer anywhere — the leader in
the middle of its flush among them — never refunds, never overspends, and leaves a chain
that verifies.

Durability itself (a power loss) cannot be staged in a test; what is checked is the rule
that gives it (:mod:`dpkit.ledger.durability`): SQLite — every debit returns after a flush
that *started after its commit returned*; PostgreSQL — the barrier is a transaction that
PostgreSQL must flush at commit (``synchronous_commit`` on, an xid assigned, a WAL record
written), and the WAL is flushed past the debit when ``debit()`` returns.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from fractions import Fraction
from pathlib import Path

import pytest

import dpkit as dp
from dpkit.errors import BudgetExceededError
from dpkit.ledger import Ledger, durability
from dpkit.ledger.durability import SqliteGroupSync

EPS = Fraction(1, 100)
KEY = b"group-commit-test-key-of-32-bytes!"


def _ledger(path: Path, cap: Fraction = Fraction(10**6)) -> Ledger:
    ledger = Ledger(path, mac_key=KEY)
    ledger.register("d", dp.PureDP(cap))
    return ledger


class _Recorder:
    """Wraps a ledger's group sync: each debit's commit time and return time, each flush's
    start (the watermark it writes) and end; the first flush blocks until ``hold`` writers
    are waiting, so that they commit while it runs."""

    def __init__(self, ledger: Ledger, hold: int, monkeypatch: pytest.MonkeyPatch,
                 until_returned: int = 0) -> None:
        sync = ledger._group_sync
        assert sync is not None  # a SQLite file in WAL mode
        self.commits: dict[int, int] = {}
        self.returned: dict[int, int] = {}
        self.flushes: list[tuple[int, int]] = []
        self.waiting = 0
        self.changed = threading.Condition()
        self.first = True
        wait, flush, write_mark = sync.wait, sync.flush, sync._write_mark

        def recorded_wait(committed: int) -> None:
            self.commits[threading.get_ident()] = committed
            with self.changed:
                self.waiting += 1
                self.changed.notify_all()
            wait(committed)

        def held_flush(last_inode: int) -> int:
            if self.first:
                self.first = False
                with self.changed:
                    assert self.changed.wait_for(
                        lambda: self.waiting >= hold and len(self.returned) >= until_returned,
                        timeout=120)
            return flush(last_inode)

        def recorded_mark(started: int, inode: int) -> None:
            self.flushes.append((started, time.monotonic_ns()))
            write_mark(started, inode)

        monkeypatch.setattr(sync, "wait", recorded_wait)
        monkeypatch.setattr(sync, "flush", held_flush)
        monkeypatch.setattr(sync, "_write_mark", recorded_mark)


def _debit_in_threads(ledger: Ledger, threads: int, recorder: _Recorder) -> dict[int, int]:
    """One debit per thread, all at once; each thread's return time."""
    returned = recorder.returned

    def one() -> None:
        ledger.debit("d", dp.PureDP(EPS), "q")
        with recorder.changed:
            returned[threading.get_ident()] = time.monotonic_ns()
            recorder.changed.notify_all()

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert len(returned) == threads
    return returned


def _covered(recorder: _Recorder, returned: dict[int, int]) -> list[int]:
    """The threads whose debit returned without a flush that started after its commit
    and ended before the return."""
    return [t for t, commit in recorder.commits.items()
            if not any(commit < start and end <= returned[t] for start, end in recorder.flushes)]


def test_every_debit_returns_after_a_flush_that_started_after_its_commit(tmp_path, monkeypatch):
    ledger = _ledger(tmp_path / "l.sqlite")
    recorder = _Recorder(ledger, hold=3, monkeypatch=monkeypatch)
    returned = _debit_in_threads(ledger, 3, recorder)
    assert _covered(recorder, returned) == []
    # the first flush started before the other two commits; the second covered both
    assert len(recorder.flushes) == 2
    assert ledger.spent("d") == dp.PureDP(3 * EPS) and ledger.verify() == []


def test_the_rule_catches_a_follower_that_trusts_a_flush_already_running(tmp_path, monkeypatch):
    """The broken variant: a writer that finds a flush started by another writer returns
    without one that started after its commit (as if that flush covered it). The first
    flush is held until the two others have returned, so neither can be covered."""
    guard = threading.Lock()

    class Trusting(SqliteGroupSync):
        started = False

        def wait(self, committed: int) -> None:
            with guard:
                trusting, Trusting.started = Trusting.started, True
            if not trusting:
                super().wait(committed)

    ledger = _ledger(tmp_path / "l.sqlite")
    ledger._group_sync = Trusting(ledger._group_sync.database)
    recorder = _Recorder(ledger, hold=1, monkeypatch=monkeypatch, until_returned=2)
    returned = _debit_in_threads(ledger, 3, recorder)
    assert len(_covered(recorder, returned)) == 2


def test_a_stale_watermark_vouches_for_nothing(tmp_path):
    """A watermark from another boot (or time namespace), or garbage, is not trusted."""
    ledger = _ledger(tmp_path / "l.sqlite")
    sync = ledger._group_sync
    assert sync is not None and sync.epoch
    Path(sync.path).write_text(f"another-boot/x {time.monotonic_ns() * 2} 1\n")
    before = sync.flushes
    ledger.debit("d", dp.PureDP(EPS), "q")
    assert sync.flushes == before + 1
    Path(sync.path).write_text("garbage\n")
    ledger.debit("d", dp.PureDP(EPS), "q")
    assert sync.flushes == before + 2


def test_a_database_without_wal_waits_for_the_disk_in_each_commit(tmp_path, monkeypatch):
    """Group commit needs the WAL; where SQLite cannot use it the commits stay FULL."""
    from sqlalchemy.engine import Connection

    execute = Connection.exec_driver_sql

    def no_wal(self, statement, *args, **kwargs):
        if statement == "PRAGMA journal_mode":
            statement = "SELECT 'delete'"
        return execute(self, statement, *args, **kwargs)

    monkeypatch.setattr(Connection, "exec_driver_sql", no_wal)
    ledger = _ledger(tmp_path / "l.sqlite")
    assert ledger._group_sync is None
    ledger.debit("d", dp.PureDP(EPS), "q")
    with ledger._writer() as conn:
        assert conn.connection.info["synchronous"] == "FULL"


def test_writers_a_flush_covered_leave_under_a_shared_lock(tmp_path, monkeypatch):
    """A writer whose commit a flush already covers reads the watermark under a shared lock
    and leaves: the writers one flush covered leave together instead of taking the lock
    exclusively one after another (a context switch each on a busy machine). The old rule
    (every writer takes the lock exclusively) fails this."""
    import fcntl

    ledger = _ledger(tmp_path / "l.sqlite")
    sync = ledger._group_sync
    assert sync is not None
    ledger.debit("d", dp.PureDP(EPS), "q")  # opens the sync file, writes a watermark
    taken: list[int] = []
    flock = fcntl.flock

    def recorded(fd: int, kind: int) -> None:
        taken.append(kind)
        flock(fd, kind)

    monkeypatch.setattr(durability.fcntl, "flock", recorded)
    committed = time.monotonic_ns()
    sync.wait(committed)  # not covered: leads a flush, under the exclusive lock
    assert fcntl.LOCK_EX in taken and sync.flushes >= 2
    taken.clear()
    sync.wait(committed)  # covered by the flush just made
    assert fcntl.LOCK_EX not in taken and fcntl.LOCK_SH in taken


# -- kill -9 --------------------------------------------------------------------------------
_HANGING_LEADER = textwrap.dedent("""
    import sys, time
    from fractions import Fraction
    import dpkit as dp
    from dpkit.ledger import Ledger

    ledger = Ledger(sys.argv[1], mac_key=sys.argv[2].encode())
    sync = ledger._group_sync

    def hang(last_inode: int) -> int:  # the leader is killed in the middle of its flush
        print("flushing", flush=True)
        time.sleep(600)
        return -1

    sync.flush = hang
    ledger.debit("d", dp.PureDP(Fraction(1, 100)), "killed")
""")


def _debits(path: str, count: int, out: mp.Queue) -> None:
    ledger = Ledger(path, mac_key=KEY)
    done = 0
    for _ in range(count):
        try:
            ledger.debit("d", dp.PureDP(EPS), "follower")
            done += 1
        except BudgetExceededError:
            pass
    out.put(done)


def test_killing_the_leader_in_the_middle_of_its_flush(tmp_path):
    """Followers queued behind a leader that dies in its flush take over; the dead
    leader's debit was committed, so it counts (never refunded), and the chain verifies."""
    path = tmp_path / "l.sqlite"
    _ledger(path).dispose()
    leader = subprocess.Popen([sys.executable, "-c", _HANGING_LEADER, str(path), KEY.decode()],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert leader.stdout is not None and leader.stdout.readline().strip() == "flushing"
        out: mp.Queue = mp.get_context("spawn").Queue()
        followers = [mp.get_context("spawn").Process(target=_debits, args=(str(path), 5, out))
                     for _ in range(3)]
        for follower in followers:
            follower.start()
        os.kill(leader.pid, signal.SIGKILL)
        accepted = sum(out.get(timeout=300) for _ in followers)
        for follower in followers:
            follower.join(timeout=300)
    finally:
        leader.kill()
        leader.wait()
    ledger = Ledger(path, mac_key=KEY)
    queries = [r["query"] for r in ledger.releases("d")]
    assert queries.count("killed") == 1 and queries.count("follower") == accepted == 15
    assert ledger.spent("d") == dp.PureDP(16 * EPS) and ledger.verify() == []


def _debit_forever(path: str, started: mp.Event) -> None:
    ledger = Ledger(path, mac_key=KEY)
    started.set()
    while True:
        try:
            rid = ledger.debit("d", dp.PureDP(EPS), "q")
            ledger.mark(rid, "released", "00")
        except BudgetExceededError:
            return


@pytest.mark.parametrize("round_", range(3))
def test_kill_9_at_random_points_never_overspends_nor_refunds(tmp_path, round_):
    """Four processes debit and mark against a cap; one is killed at a random moment (in a
    commit, a flush, a mark, or between them). Exactly the cap is spent in the end, every
    debit recorded counts, and the chain verifies."""
    path = tmp_path / "l.sqlite"
    cap = Fraction(3)  # 300 debits of 1/100
    _ledger(path, cap).dispose()
    context = mp.get_context("spawn")
    events = [context.Event() for _ in range(4)]
    procs = [context.Process(target=_debit_forever, args=(str(path), e)) for e in events]
    for proc in procs:
        proc.start()
    for started in events:
        assert started.wait(timeout=300)
    time.sleep(random.uniform(0, 0.3))  # a random point in the victim's loop, not a wait
    os.kill(procs[0].pid, signal.SIGKILL)
    for proc in procs:
        proc.join(timeout=300)
    assert all(proc.exitcode is not None for proc in procs)
    ledger = Ledger(path, mac_key=KEY)
    releases = ledger.releases("d")
    assert len(releases) == 300  # the survivors ran the cap out
    assert ledger.spent("d") == dp.PureDP(cap) and ledger.verify() == []


# -- PostgreSQL -------------------------------------------------------------------------------
def _check_barrier(barrier, monkeypatch, location: str) -> list[tuple[str, bool, bool]]:
    """Run a debit with ``barrier`` as the durability barrier; per barrier: its
    ``synchronous_commit``, whether it holds an xid (so its commit writes a record that
    PostgreSQL flushes), and whether the WAL was flushed past the debit when it returned."""
    from sqlalchemy import event, text

    seen: list[tuple[str, bool, bool]] = []

    def checked(conn) -> None:
        insert_lsn = conn.exec_driver_sql("SELECT pg_current_wal_insert_lsn()").scalar()
        conn.commit()
        states: list[tuple[str, bool]] = []

        def spy(connection) -> None:  # just before the barrier's COMMIT is sent
            cursor = connection.connection.dbapi_connection.cursor()
            mode = cursor.execute("SHOW synchronous_commit").fetchone()[0]
            xid = cursor.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()[0]
            states.append((str(mode), xid is not None))

        event.listen(conn, "commit", spy)
        try:
            barrier(conn)
        finally:
            event.remove(conn, "commit", spy)
        flushed = conn.execute(text("SELECT pg_current_wal_flush_lsn() >= :lsn"),
                               {"lsn": insert_lsn}).scalar()
        conn.commit()
        seen.extend((mode, xid, bool(flushed)) for mode, xid in states)

    monkeypatch.setattr("dpkit.ledger.registry.postgres_barrier", checked)
    ledger = Ledger(location, mac_key=KEY)
    ledger.register("d", dp.PureDP(1))
    ledger.debit("d", dp.PureDP(EPS), "q")
    ledger.dispose()
    return seen


def test_the_postgres_barrier_is_flushed_at_commit(postgres_server, monkeypatch):
    import pg

    seen = _check_barrier(durability.postgres_barrier, monkeypatch,
                          pg.fresh_database(postgres_server, "barrier"))
    assert seen and all(state == ("on", True, True) for state in seen), seen


def test_the_barrier_check_catches_a_barrier_that_writes_nothing(postgres_server, monkeypatch):
    """The broken variant: a read-only "barrier" has no xid, so PostgreSQL does not wait
    for the disk at its commit."""
    import pg

    def reads_only(conn) -> None:
        with conn.begin():
            conn.exec_driver_sql("SELECT 1")

    seen = _check_barrier(reads_only, monkeypatch, pg.fresh_database(postgres_server, "noop"))
    assert seen and not any(xid for _, xid, _ in seen)
