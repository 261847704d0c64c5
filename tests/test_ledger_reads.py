"""Reads without the write lock (issue 35, item 1): a read runs in a read transaction (SQLite:
a deferred ``BEGIN``, a WAL snapshot; PostgreSQL: ``REPEATABLE READ`` read-only), so it never
waits for a writer; the token and grant answers a :class:`Ledger` caches are reused only
while the chain head's ``seq`` is unchanged, and a read still refuses a row whose MAC fails.

On the code before the change, ``analyst_for_token``, ``grant_of`` and ``releases`` issued
``BEGIN IMMEDIATE`` and waited for the write lock held below (SQLite's busy timeout is two
minutes): ``test_reads_never_wait_for_a_held_write_lock[sqlite]`` fails there.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import pytest
import sqlalchemy as sa

import dpkit as dp
from dpkit.errors import BudgetExceededError, LedgerIntegrityError
from dpkit.ledger import Ledger, registry
from dpkit.ledger.registry import token_digest

DEADLINE = 20.0  # seconds a read may take while a writer holds the lock (the old wait: 120)


def _url(location: str) -> str:
    return location if "://" in location else f"sqlite:///{location}"


def tamper(location: str, sql: str, **params: Any) -> None:
    """SQL straight on the database, as an attacker without the MAC key would write it."""
    engine = sa.create_engine(_url(location))
    with engine.begin() as conn:
        if "://" in location:
            conn.execute(sa.text("SET session_replication_role = replica"))
        conn.execute(sa.text(sql), params)
    engine.dispose()


@contextlib.contextmanager
def write_lock_held(location: str) -> Iterator[None]:
    """Another connection holds the ledger's write lock with an uncommitted write: SQLite
    ``BEGIN IMMEDIATE``; PostgreSQL the ledger's advisory lock (as a debit takes it). The
    write changes the analyst's token: a read must not see it (a snapshot of the last
    commit)."""
    edit = "UPDATE analysts SET token_sha256 = 'uncommitted' WHERE name = 'ana'"
    if "://" not in location:
        holder = sqlite3.connect(location, isolation_level=None, timeout=0)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute(edit)
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    engine = sa.create_engine(location)
    with engine.connect() as conn:
        conn.execute(sa.text(registry._LOCK))
        conn.execute(sa.text(edit))
        try:
            yield
        finally:
            conn.rollback()
    engine.dispose()


def setup(location: str) -> Ledger:
    """Dataset d (cap ε = 10), analyst ana (token ``ana-token``, grant ε = 1), who spent 1/2."""
    reg = Ledger(location)
    reg.register("d", dp.PureDP(10))
    reg.add_analyst("ana", token="ana-token")
    reg.grant("ana", "d", dp.PureDP(1))
    rid = reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()", analyst="ana")
    reg.mark(rid, "released", "ab" * 32)
    return reg


def within_deadline(reads: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
    """Run ``reads`` in a thread; its result if it finished within :data:`DEADLINE`, else
    None (the thread is left to finish once the lock is released)."""
    done, out = threading.Event(), {}

    def run() -> None:
        out.update(reads())
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return out if done.wait(DEADLINE) else None


# -- a read never waits for a writer ---------------------------------------------------------
def test_reads_never_wait_for_a_held_write_lock(location):
    setup(location)
    worker = Ledger(location)  # a server worker's ledger: cold caches

    def reads() -> dict[str, Any]:
        return {"token": worker.analyst_for_token("ana-token"),
                "grant": worker.grant_of("ana", "d"), "entry": worker.entry("d"),
                "releases": len(worker.releases("d")), "spent": worker.spent("d"),
                "verify": worker.verify()}

    with write_lock_held(location):
        got = within_deadline(reads)
    assert got is not None, f"a read waited more than {DEADLINE} s for the write lock"
    assert got["token"] == "ana"  # the committed row, not the uncommitted edit
    assert got["grant"] == {"cap": dp.PureDP(1), "spent": dp.PureDP(Fraction(1, 2))}
    assert got["entry"]["cap"] == dp.PureDP(10) and got["releases"] == 1
    assert got["spent"] == dp.PureDP(Fraction(1, 2)) and got["verify"] == []


def test_sqlite_ledger_is_in_wal_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("DPKIT_HOME", str(tmp_path))
    path = tmp_path / "ledger.sqlite"
    Ledger(path).dispose()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# -- the caches follow the chain head --------------------------------------------------------
def _changes_seen(worker: Ledger, admin: Ledger) -> bool:
    """Warm ``worker``'s caches, change the token and the grant through ``admin`` (another
    worker or the command line), and report whether ``worker``'s next reads see both."""
    assert worker.analyst_for_token("ana-token") == "ana"
    assert worker.grant_of("ana", "d")["cap"] == dp.PureDP(1)
    new = admin.rotate_token("ana")
    admin.grant("ana", "d", dp.PureDP(Fraction(1, 2)))  # down to the spend: nothing left
    return (worker.analyst_for_token("ana-token") is None
            and worker.analyst_for_token(new) == "ana"
            and worker.grant_of("ana", "d")["cap"] == dp.PureDP(Fraction(1, 2)))


def test_rotated_token_and_lowered_grant_are_seen_with_warm_caches(location):
    worker = setup(location)
    assert _changes_seen(worker, Ledger(location))
    with pytest.raises(BudgetExceededError):  # and the debit refuses under the write lock
        worker.debit("d", dp.PureDP(Fraction(1, 100)), "count()", analyst="ana")


def test_a_cache_that_ignored_the_head_would_be_caught(tmp_path, monkeypatch):
    """The broken variant: a cache never invalidated (the head's seq read as a constant)
    keeps authenticating the rotated token, and the check above says so."""
    monkeypatch.setenv("DPKIT_HOME", str(tmp_path))
    location = str(tmp_path / "ledger.sqlite")
    worker = setup(location)
    monkeypatch.setattr(Ledger, "_chain_seq", lambda self, conn: 0)
    assert not _changes_seen(worker, Ledger(location))


def test_each_debit_moves_the_head_so_a_cached_grant_shows_the_new_spend(location):
    worker = setup(location)
    assert worker.grant_of("ana", "d")["spent"] == dp.PureDP(Fraction(1, 2))
    Ledger(location).debit("d", dp.PureDP(Fraction(1, 4)), "count()", analyst="ana")
    assert worker.grant_of("ana", "d")["spent"] == dp.PureDP(Fraction(3, 4))


# -- integrity on the read path --------------------------------------------------------------
def test_planted_token_is_refused_with_a_warm_cache(location):
    worker = setup(location)
    assert worker.analyst_for_token("ana-token") == "ana"  # warm
    tamper(location, "UPDATE analysts SET token_sha256 = :h WHERE name = 'ana'",
           h=token_digest("attacker-token"))
    assert worker.analyst_for_token("attacker-token") is None  # MAC fails
    assert Ledger(location).analyst_for_token("ana-token") is None  # a cold worker too


def test_tampered_rows_are_refused_on_the_read_path(location):
    worker = setup(location)
    assert worker.grant_of("ana", "d")["cap"] == dp.PureDP(1)  # warm
    tamper(location, """UPDATE grants SET cap = '{"epsilon": "10"}' WHERE analyst = 'ana'""")
    tamper(location, """UPDATE datasets SET cap = '{"epsilon": "100"}' WHERE name = 'd'""")
    cold = Ledger(location)
    with pytest.raises(LedgerIntegrityError):
        cold.grant_of("ana", "d")
    with pytest.raises(LedgerIntegrityError):
        worker.entry("d")
    # a warm cache answers what the chain said, never the tampered value; the debit re-reads
    assert worker.grant_of("ana", "d")["cap"] == dp.PureDP(1)
    with pytest.raises(LedgerIntegrityError):
        worker.debit("d", dp.PureDP(Fraction(1, 100)), "count()", analyst="ana")


# -- readers beside racing writers -----------------------------------------------------------
def test_reads_beside_concurrent_debits_never_let_the_cap_be_exceeded(tmp_path, monkeypatch):
    """Four threads debit 1/10 each until refused while two threads read through the caches;
    the grant (ε = 1, 1/2 spent) takes exactly five more debits."""
    monkeypatch.setenv("DPKIT_HOME", str(tmp_path))
    location = str(tmp_path / "ledger.sqlite")
    setup(location)
    worker, stop = Ledger(location), threading.Event()
    accepted: list[int] = []
    seen: list[BaseException] = []

    def debit() -> None:
        reg = Ledger(location)
        while True:
            try:
                accepted.append(reg.debit("d", dp.PureDP(Fraction(1, 10)), "count()",
                                          analyst="ana"))
            except BudgetExceededError:
                return

    def read() -> None:
        try:
            while not stop.is_set():
                assert worker.analyst_for_token("ana-token") == "ana"
                grant = worker.grant_of("ana", "d")
                assert grant is not None and grant["spent"] <= dp.PureDP(1)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            seen.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    writers = [threading.Thread(target=debit) for _ in range(4)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert seen == [] and len(accepted) == 5
    assert worker.grant_of("ana", "d")["spent"] == dp.PureDP(1)
    assert worker.verify() == []
