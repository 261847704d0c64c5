"""The epsilon registry (Dwork & Roth §13.1): a persistent record of every privacy loss.

Storage through SQLAlchemy: a SQLite file by default, PostgreSQL by URL
(``postgresql+psycopg://user@host/db``). Entities: datasets (measure, lifetime cap, privacy
unit, schema, burn-rate policy), analysts (hashed API tokens) with per-dataset grants (caps
inside the dataset's), studies, releases (who, when, canonical query, exact loss, noise
rows, result hash, optionally the stored result) and their outcomes. The noise rows and the
result hash are written as :mod:`dpkit.core.record` encodes them (the same for every front
end: see :class:`~dpkit.ledger.LedgerAccountant`).

Guarantees
----------
- Check-and-debit is one transaction that first takes the ledger's write lock (SQLite
  ``BEGIN IMMEDIATE``; PostgreSQL a transaction-scoped advisory lock,
  ``pg_advisory_xact_lock``, freed by the commit after the commit is visible), so concurrent
  processes and machines serialise and no interleaving overruns a cap. On PostgreSQL every
  write also moves the chain head by compare-and-set (the head and its ``seq`` it read under
  the lock, else the transaction aborts before its commit): a writer that does not take the
  advisory lock (an older dpkit, which locked the head's row ``FOR UPDATE``, still running
  beside a new one) can make a write fail, never fork the chain or overrun a cap. The
  advisory lock measured 7–10% more debits/s than the row lock with 8 processes (``python
  bench/ledger_scale.py concurrent --backend postgres``, alternating). On PostgreSQL the
  lock and the debit's reads, the burn-rate bucket of this minute and the next among them,
  travel in one round trip (a pipeline, the lock first; each read starts after it is
  granted), and the writes and the commit in another, so a debit holds the head for two
  round trips (a replayed key, an expiring minute or a wait past the next minute adds one). The
  debit is written
  *before* any noise is drawn; a release that fails later is marked ``failed`` and its loss
  still counts. A crash between debit and response never refunds.
- Group commit (:mod:`dpkit.ledger.durability`): a write commits without waiting for the
  disk while it holds the write lock, then waits, with the lock free, for a flush that
  started after its commit (SQLite: one ``fdatasync`` of the WAL shared by every writer
  queued behind it, in any process; PostgreSQL: a barrier transaction that PostgreSQL
  flushes, concurrent barriers sharing one flush). ``debit`` returns only once its debit is
  on disk, so no release is computed from a debit a power loss could undo; the cap checks
  are unchanged (one writer at a time), and the chain is the same chain.
- Reads (a token lookup, a grant, an entry, the spend, the releases, ``verify``) take no
  write lock: each is one read transaction (SQLite: a deferred ``BEGIN`` in WAL mode, a
  snapshot of the last commit; PostgreSQL: ``REPEATABLE READ`` read-only), with the same MAC
  and chain checks. A snapshot may be one commit old: it can only make a request refuse or
  be re-checked, since every debit re-reads the cap, the grant and the burn rate under the
  write lock. A :class:`Ledger` caches its token and grant answers with the chain head's
  ``seq`` and reuses one only while the head has not moved.
- Every change is a link of one keyed hash chain (:mod:`dpkit.ledger.chain`): administrative
  changes (datasets and caps, policies, analysts and tokens, grants, studies), debits (with
  the running totals after them) and outcomes (with the hash of the stored answer). The
  rows the ledger reads to decide a spend or an answer carry a MAC and the ``seq`` of their
  last link; a debit, a replay and a token lookup refuse a row whose MAC fails or that is
  not the latest state in the chain (:class:`~dpkit.errors.LedgerIntegrityError`), with
  index lookups only. :meth:`Ledger.verify` replays the whole chain and checks every row.
- An idempotency key is bound to the hash of its request (dataset, analyst, canonical query,
  loss, noise plan): a retried request gets the recorded answer (after checking it against
  its chained hash) instead of fresh noise; the key with another request is refused
  (:class:`~dpkit.errors.IdempotencyConflictError`). A key whose first attempt never
  recorded an answer (it failed, or crashed more than ``STALE_SECONDS`` ago) debits again,
  since nothing was released.
- A continual release (:mod:`dpkit.stream.frames`) keeps its step high-water mark here: a
  chained ``stream`` event per released step and a MAC-signed mark row (``streams``) naming
  the ``seq`` of the newest one, written by compare-and-set under the write lock
  (:meth:`Ledger.advance_stream`), so a stale or second copy of a stream's state can never
  release a step twice (:class:`~dpkit.errors.StreamRollbackError`). The mark is read from
  the row and checked against the chain (:meth:`Ledger.stream_step`): deleting the newest
  step links, or the row, is refused (:class:`~dpkit.errors.LedgerIntegrityError`).
  ``verify`` checks that each stream's steps follow its paying release and go up by one from
  1, that the rows are the marks the chain implies, and that the link each mark names is
  still there; checkpoints hold the marks.
- Losses compose in the dataset's measure exactly (Fractions; basic composition).
- Every check-and-debit reads a constant number of rows, whatever the ledger's size: running
  totals on the dataset and grant rows, the burn-rate window's running total on the dataset
  row with per-minute buckets (:mod:`dpkit.ledger.window`: rounded outward, never
  under-counting), indexed idempotency look-ups. ``verify`` can start from a signed
  checkpoint (:mod:`dpkit.ledger.checkpoint`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Connection, Engine, create_engine, event, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

try:
    import fcntl
except ImportError:  # not on Windows: SQLite's busy handler alone
    fcntl = None  # type: ignore[assignment]

from dpkit.core.measures import PrivacyLoss, convert
from dpkit.errors import (
    BudgetExceededError,
    IdempotencyConflictError,
    IdempotentReplay,
    LedgerError,
    LedgerIntegrityError,
    StreamRollbackError,
)
from dpkit.ledger import chain, checkpoint, entries, integrity, store, window
from dpkit.ledger.codec import MEASURES, dump, load, now, stamp
from dpkit.ledger.durability import SqliteGroupSync, postgres_barrier
from dpkit.ledger.keys import resolve_key
from dpkit.ledger.rechain import rechain
from dpkit.ledger.schema import (
    SCHEMA_VERSION,
    datasets,
    events,
    meta,
    migrate,
    outcomes,
    releases,
)

__all__ = ["Ledger", "IdempotentReplay", "SCHEMA_VERSION", "STALE_SECONDS"]

STALE_SECONDS = 300  # a debited attempt with no outcome after this long counts as crashed

# the statements of every debit and outcome, as SQL text run on the DBAPI cursor
# (store.run): building and compiling SQLAlchemy statements cost more than the work itself
_SEQ_AND_ID = """SELECT (SELECT "value" FROM "meta" WHERE "key" = 'chain_seq'),
    (SELECT max("id") FROM "releases")"""
_HEAD_SEQ_AND_ID = """SELECT (SELECT "value" FROM "meta" WHERE "key" = 'chain_head'),
    (SELECT "value" FROM "meta" WHERE "key" = 'chain_seq'), (SELECT max("id") FROM "releases")"""
_ADVANCE = """UPDATE "meta" SET "value" = CASE WHEN "key" = 'chain_head' THEN :head ELSE :seq END
    WHERE "key" IN ('chain_head', 'chain_seq')"""
# PostgreSQL: the same move as a compare-and-set on the head and seq read under the lock;
# unless both rows moved, 1 / (count / 2) divides by zero, which aborts the transaction
# inside the writes' round trip, before its commit (a pipeline cannot look at a row count
# between statements). Re-checked on the newest row versions (READ COMMITTED's recheck).
_ADVANCE_IF_HEAD = """WITH moved AS (UPDATE "meta"
    SET "value" = CASE WHEN "key" = 'chain_head' THEN :head ELSE :seq END
    WHERE ("key" = 'chain_head' AND "value" = :old_head)
       OR ("key" = 'chain_seq' AND "value" = :old_seq) RETURNING 1)
    SELECT 1 / (count(*) / 2) FROM moved"""
_HEAD_MOVED = "22012"  # SQLSTATE division_by_zero: _ADVANCE_IF_HEAD found the head moved
# the key of the write lock on PostgreSQL (an advisory lock of the whole database: two
# ledgers in one database share it, which only serialises them)
_LOCK = f"SELECT pg_advisory_xact_lock({int.from_bytes(b'dpkitlgr', 'big')})"
_RELEASE_COLUMNS = store.columns(releases)
_NEWEST = f"""SELECT {_RELEASE_COLUMNS} FROM "releases" WHERE "dataset" = :dataset
    ORDER BY "seq" DESC LIMIT 1"""
_PRIOR = {named: f"""SELECT {_RELEASE_COLUMNS} FROM "releases" WHERE "dataset" = :dataset
    AND "idempotency_key" = :key AND {'"analyst" = :analyst' if named else '"analyst" IS NULL'}
    ORDER BY "id" DESC LIMIT 1""" for named in (True, False)}
_LAST_OUTCOME = f"""SELECT {store.columns(outcomes)} FROM "outcomes"
    WHERE "release_id" = :rid ORDER BY "seq" DESC LIMIT 1"""
_BUCKETS = """SELECT "dataset", "minute", "spent", "mac" FROM "burn"
    WHERE "dataset" = :dataset AND "minute" >= :lo AND "minute" <= :hi"""
_BUCKET_UPDATE = """UPDATE "burn" SET "spent" = :spent, "mac" = :mac
    WHERE "dataset" = :dataset AND "minute" = :minute"""
_BUCKET_INSERT = """INSERT INTO "burn" ("dataset", "minute", "spent", "mac")
    VALUES (:dataset, :minute, :spent, :mac)"""


_READ = "dpkit_read"  # the execution option that marks a connection of Ledger._read
_CACHE_SIZE = 4096  # entries of each read cache (tokens, grants): one per analyst and dataset
_CHAIN_SEQ = """SELECT "value" FROM "meta" WHERE "key" = 'chain_seq'"""


def _insert(table: str, names: list[str]) -> str:
    quoted = ", ".join(f'"{n}"' for n in names)
    return f'INSERT INTO "{table}" ({quoted}) VALUES (' + ", ".join(f":{n}" for n in names) + ")"


_RELEASE_INSERT = _insert("releases", [c.name for c in releases.columns])
_OUTCOME_INSERT = _insert("outcomes", [c.name for c in outcomes.columns if c.name != "id"])
_STREAM_LINK = """SELECT "seq", "kind", "subject", "time", "body", "prev_hash", "hash"
    FROM "events" WHERE "seq" = :seq AND "subject" = :subject"""
_NEWEST_CHECKPOINT = 'SELECT max("seq") FROM "checkpoints"'
_RELEASE_BY_ID = f"""SELECT {_RELEASE_COLUMNS} FROM "releases" WHERE "id" = :rid"""
_MARK = """UPDATE "releases" SET "status" = :status, "result_sha256" = :result_sha256,
    "result" = :result WHERE "id" = :rid"""


class _Answered(IdempotentReplay):  # noqa: N818 - a replay, not a failure
    """An :class:`IdempotentReplay` that also carries the digest chained with the answer
    (``result_sha256``), so that a replay's release record names the original's digest."""

    def __init__(self, release_id: int, result: str | None, result_sha256: str | None) -> None:
        super().__init__(release_id, result)
        self.result_sha256 = result_sha256


def _retired(row: dict[str, Any]) -> bool:
    """A dataset row retired by :meth:`Ledger.retire`: a burn-rate policy of zero loss."""
    per_day = row["per_day"]
    return per_day is not None and load(row["measure"], per_day) == MEASURES[
        row["measure"]].zero()


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """Store a read cache's entry; a full cache starts over (its size stays bounded)."""
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    cache[key] = value


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _engine(location: str | Path, pooled: bool = True) -> tuple[Engine, str]:
    """The engine of a ledger location (``pooled`` False: no pool, for connections a
    :class:`Ledger` keeps open itself)."""
    url = str(location)
    if "://" not in url:
        path = Path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{path}"
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 120},
                               **({} if pooled else {"poolclass": NullPool}))

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: Any, _: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute("PRAGMA busy_timeout=120000")
            dbapi_conn.execute("PRAGMA foreign_keys=ON")

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # a write takes the write lock before any read; a read (Ledger._read) begins a
            # deferred transaction: in WAL mode a snapshot that never waits for a writer
            statement = "BEGIN" if conn.get_execution_options().get(_READ) else "BEGIN IMMEDIATE"
            conn.connection.dbapi_connection.execute(statement)  # type: ignore[union-attr]
    else:
        try:
            # commits do not wait for the disk (the head lock is freed at once); a durable
            # write then commits a barrier that does (Ledger._make_durable: group commit)
            engine = create_engine(url, pool_pre_ping=True,
                                   connect_args={"options": "-c synchronous_commit=off"})
        except ModuleNotFoundError as exc:  # the driver of a server URL is an extra
            hint = " (pip install 'dpkit[postgres]')" if url.startswith("postgres") else ""
            raise LedgerError(f"the ledger URL needs the database driver {exc.name!r}"
                              f"{hint}") from None
    return engine, url


class Ledger:
    """A persistent, atomic, hash-chained record of privacy losses per dataset.

    Parameters
    ----------
    location : str or Path
        A SQLite file path (created with its folders if absent) or a SQLAlchemy URL
        (``sqlite:///…``, ``postgresql+psycopg://…``).
    encryption_key : bytes, optional
        A Fernet key (``cryptography.fernet.Fernet.generate_key()``); stored results are then
        encrypted at rest.
    mac_key : bytes or str, optional
        The key of the chain and of the row MACs. Default: ``$DPKIT_LEDGER_MAC_KEY``, else a
        key file (``<ledger file>.key``, created with a new ledger); see
        :mod:`dpkit.ledger.keys`.
    sync_outcomes : bool, default False
        Wait for the disk when recording an outcome (:meth:`mark`) as well as a debit. By
        default an outcome's commit survives a crash of the process but not a power loss
        until the next debit's commit; a lost outcome never refunds (its debit is durable).

    Raises
    ------
    LedgerError
        If the schema on disk is newer than this dpkit, the MAC key is missing or is not
        this ledger's, or a version-2 ledger to migrate does not verify.
    """

    def __init__(self, location: str | Path, *, encryption_key: bytes | None = None,
                 mac_key: bytes | str | None = None, sync_outcomes: bool = False) -> None:
        self.engine, self.url = _engine(location)
        # what messages and tables print: a PostgreSQL URL's password never leaves the object
        self.shown_url = make_url(self.url).render_as_string(hide_password=True)
        self.path = location
        self._fast_outcomes = not sync_outcomes
        # datasets this object registered or checked: a cap is fixed at registration, so
        # a later register() of the same (measure, cap) needs no write transaction
        self._registered: dict[str, tuple[str, PrivacyLoss, str | None]] = {}
        # the newest checkpoint's seq in the table, the seq it signed, its stream marks
        self._marks_at: tuple[int | None, int, dict[str, Any]] = (-1, 0, {})
        # answers of reads that authenticate and authorise, each with the chain head's seq
        # it was read at: reused only while the head has not moved (analyst_for_token,
        # grant_of)
        self._tokens: dict[str, tuple[int, str]] = {}
        self._grants: dict[tuple[str, str], tuple[int, dict[str, PrivacyLoss | None]]] = {}
        database = make_url(self.url).database if self.url.startswith("sqlite") else None
        self._lock_path = (None if database in (None, "", ":memory:") or fcntl is None
                           else f"{database}.lock")
        self._lock_pid, self._lock_file = -1, cast(Any, None)
        self._thread_lock = threading.Lock()
        # a SQLite file: a write connection kept per thread (_writer), outside the pool
        self._writers = threading.local()
        self._write_engine = (None if database in (None, "", ":memory:")
                              else _engine(self.url, pooled=False)[0])
        self._group_sync: SqliteGroupSync | None = None  # set once WAL mode is confirmed
        self._fernet: Any = None
        if encryption_key is not None:
            from cryptography.fernet import Fernet

            self._fernet = Fernet(encryption_key)
        try:
            with self._transaction() as conn:
                if not self.url.startswith("sqlite"):  # migrations exclude the writers
                    store.run(conn, _LOCK).fetchone()
                self._key, self.key_source = resolve_key(self.url, mac_key, conn)
                found = migrate(conn)
                for name, value in (("chain_head", chain.GENESIS), ("chain_seq", "0"),
                                    ("mac_key_id", chain.key_id(self._key))):
                    if conn.execute(select(meta.c.value).where(meta.c.key == name)
                                    ).first() is None:
                        conn.execute(meta.insert().values(key=name, value=value))
                if found in (1, 2):
                    rechain(conn, self._key, found)
                elif found == 3:
                    window.upgrade(conn, self._key)
                if found in (3, 4):
                    integrity.upgrade_marks(conn, self._key)
        except LedgerError:
            self.engine.dispose()
            raise
        except RuntimeError as exc:
            self.engine.dispose()
            raise LedgerError(str(exc)) from None
        if self._write_engine is not None and self.url.startswith("sqlite"):
            # group commit relies on the WAL; where SQLite fell back to a rollback journal
            # (a file system without shared memory), every commit waits for the disk
            with self._read() as conn:
                mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            if str(mode).lower() == "wal":
                self._group_sync = SqliteGroupSync(os.path.abspath(str(database)))

    # -- plumbing ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _transaction(self, durable: bool = True) -> Iterator[Connection]:
        """A write transaction, committed without waiting for the disk under the write
        lock (SQLite ``synchronous=NORMAL`` in WAL mode, PostgreSQL ``synchronous_commit =
        off``); a ``durable`` one then waits, after the lock is free, for a flush that
        covers it (group commit: :mod:`dpkit.ledger.durability`), so that it is on disk
        when this returns. ``durable`` False (outcomes, unless ``sync_outcomes``): the
        commit survives a crash of the process and is made durable by the next flush; a
        power loss before then can lose the outcome — never a debit, so never a refund
        (the release then reads as debited, unanswered)."""
        with self._writer() as conn:
            with self._queue():
                if self.url.startswith("sqlite"):
                    raw = conn.connection
                    mode = "NORMAL" if self._group_sync is not None else "FULL"
                    if raw.info.get("synchronous") != mode:
                        dbapi: Any = raw.dbapi_connection
                        dbapi.execute(f"PRAGMA synchronous={mode}")
                        raw.info["synchronous"] = mode
                try:
                    with conn.begin():
                        yield conn
                except Exception as exc:
                    if getattr(getattr(exc, "orig", exc), "sqlstate", None) == _HEAD_MOVED:
                        # the failed pipeline leaves the driver's transaction aborted
                        conn.connection.dbapi_connection.rollback()  # type: ignore[union-attr]
                        raise LedgerError(
                            "the chain head moved under the ledger's write lock: a writer "
                            "that does not take it (an older dpkit?) wrote to this ledger; "
                            "nothing was written: stop it, upgrade it and run `dpkit ledger "
                            "verify`") from None
                    raise
                committed = time.monotonic_ns()
            if durable or not self._fast_outcomes:  # the lock is free: wait for the disk
                self._make_durable(conn, committed)

    def _make_durable(self, conn: Connection, committed: int) -> None:
        """Wait until every commit that returned before ``committed`` is on disk (``conn``:
        the writer's connection, between transactions)."""
        if self._group_sync is not None:
            self._group_sync.wait(committed)
        elif not self.url.startswith("sqlite"):
            postgres_barrier(conn)

    @contextlib.contextmanager
    def _writer(self) -> Iterator[Connection]:
        """The connection of a write transaction. SQLite: one kept open per thread and
        process (a debit then skips the pool's check-out, reset and check-in: a fifth of
        its CPU); a failed transaction is rolled back by ``begin()`` and the connection
        reused, an invalidated one replaced. PostgreSQL and in-memory SQLite: the pool
        (pre-pinged: a PostgreSQL restart costs no request)."""
        if self._write_engine is None:
            with self.engine.connect() as writer_conn:
                yield writer_conn
            return
        local = self._writers
        writer: Connection | None = getattr(local, "conn", None)
        if writer is None or local.pid != os.getpid() or writer.closed or writer.invalidated:
            writer = local.conn = self._write_engine.connect()  # outside the pool: a
            # server's threads keep theirs without starving the pool that reads check out from
            local.pid = os.getpid()
        yield writer

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        """A read transaction, outside the writers' queue and lock: on SQLite a deferred
        ``BEGIN`` (in WAL mode, set on every connection, a snapshot of the last commit that
        never waits for a writer), on PostgreSQL ``REPEATABLE READ`` read-only (one snapshot
        for every statement). Every statement inside sees the same committed state, so a
        row and the chain links it is checked against agree; what a read decides is
        re-checked under the write lock by any debit that depends on it."""
        with self.engine.connect() as conn:
            if self.url.startswith("sqlite"):
                conn.execution_options(**{_READ: True})
            else:
                conn.execution_options(isolation_level="REPEATABLE READ",
                                       postgresql_readonly=True)
            with conn.begin():
                yield conn

    def _chain_seq(self, conn: Connection) -> int:
        """The chain head's ``seq`` (one row read): it moves with every change, so a cached
        answer read at the same ``seq`` is still the chain's answer."""
        return int(store.run(conn, _CHAIN_SEQ).fetchone()[0])

    @contextlib.contextmanager
    def _queue(self) -> Iterator[None]:
        """For a SQLite file: queue on an OS lock (``flock`` on ``<ledger>.lock``) before
        ``BEGIN IMMEDIATE``, so that a waiting writer wakes as soon as the lock is free
        instead of sleeping in SQLite's busy handler (which backs off up to 100 ms). Only
        a queue: the database lock still serialises writers, whoever holds this one.
        The threads of one process queue on a thread lock first: ``flock`` belongs to the
        open file, so two threads sharing it would both pass (and meet in the busy
        handler)."""
        path = self._lock_path
        if path is None:
            yield
            return
        if self._lock_pid != os.getpid():  # a forked process opens its own lock file
            self._lock_file = open(path, "a")  # noqa: SIM115 - kept open, by design
            self._thread_lock = threading.Lock()
            self._lock_pid = os.getpid()
        with self._thread_lock:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def _lock_head(self, conn: Connection) -> tuple[str, int, int]:
        """Take the ledger's write lock (PostgreSQL's advisory lock; SQLite already holds
        its database lock) and read the head, its ``seq`` and the last release id; every writer
        passes here first, so one lock serialises them and no two can deadlock."""
        if not self.url.startswith("sqlite"):  # (SQLite: BEGIN IMMEDIATE took the lock)
            store.run(conn, _LOCK).fetchone()  # first: a statement before it sees old rows
        head, seq, last_id = store.run(conn, _HEAD_SEQ_AND_ID).fetchone()
        return str(head), int(seq), int(last_id or 0)

    def _advance(self, conn: Connection, head: str, seq: int, old_head: str) -> None:
        """Move the chain head to ``head`` at ``seq`` from ``old_head`` at ``seq − 1`` (read
        under the write lock); on PostgreSQL by compare-and-set (:data:`_ADVANCE_IF_HEAD`)."""
        if self.url.startswith("sqlite"):  # BEGIN IMMEDIATE excludes every other writer
            store.run(conn, _ADVANCE, {"head": head, "seq": str(seq)})
        else:
            store.run(conn, _ADVANCE_IF_HEAD, {"head": head, "seq": str(seq),
                                               "old_head": old_head, "old_seq": str(seq - 1)})

    def _append(self, conn: Connection, kind: str, table: str, key: tuple[str, ...],
                body: dict[str, Any], time: str) -> int:
        """Append an event link (an administrative change of row ``table`` ``key``);
        returns its ``seq``. The caller holds the write lock."""
        head, seq, _ = self._lock_head(conn)
        digest, _ = store.insert_event(conn, self._key, head, seq + 1, kind,
                                       chain.subject(table, *key), body, time)
        self._advance(conn, digest, seq + 1, head)
        return seq + 1

    def _tampered(self, what: str) -> LedgerIntegrityError:
        return LedgerIntegrityError(f"ledger {self.shown_url}: {what}; refusing to use it (run "
                                    "`dpkit ledger verify`)")

    def _row(self, conn: Connection, table: str, key: tuple[str, ...], started: Any = None
             ) -> dict[str, Any] | None:
        """The mutable row ``table`` ``key`` (None if the chain never created it), after
        checking its MAC and that it is the latest state in the chain (``started``: its
        statement's cursor, from :func:`store.start_fetch`).

        Raises
        ------
        LedgerIntegrityError
            If the row was edited, deleted, or rolled back outside the ledger.
        """
        row, latest = store.fetch(conn, table, key, started)
        name = f"{table} {key[0]!r}" if len(key) == 1 else f"{table} {key!r}"
        if row is None:
            if latest:
                raise self._tampered(f"{name} is in the chain but its row is missing "
                                     "(deleted outside the ledger)")
            return None
        if not store.row_ok(self._key, table, row):
            raise self._tampered(f"{name} was edited outside the ledger (its MAC does not "
                                 "match)")
        if row["seq"] != latest:
            raise self._tampered(f"{name} is not the latest state in the chain (rolled back, "
                                 "or a link was deleted, outside the ledger)")
        return row

    def _dataset(self, conn: Connection, name: str, started: Any = None) -> dict[str, Any]:
        row = self._row(conn, "datasets", (name,), started)
        if row is None:
            raise LedgerError(f"unknown dataset {name!r}")
        return row

    def _sum(self, conn: Connection, dataset: str, measure: str, analyst: str) -> PrivacyLoss:
        """The recorded loss of ``analyst``'s releases on ``dataset`` (for display; the
        debit reads the grant's running total instead)."""
        query = select(releases.c.measure, releases.c.loss).where(
            (releases.c.dataset == dataset) & (releases.c.analyst == analyst))
        total = MEASURES[measure].zero()
        for m, loss in conn.execute(query):
            total = total + load(m, loss)
        return total

    def _bucket_ok(self, bucket: Any) -> None:
        if not hmac.compare_digest(str(bucket.mac), chain.bucket_mac(
                self._key, bucket.dataset, bucket.minute, bucket.spent)):
            raise self._tampered(f"the burn-rate bucket of {bucket.dataset!r} at minute "
                                 f"{bucket.minute} was edited outside the ledger")

    def _window(self, conn: Connection, row: dict[str, Any], moment: datetime,
                loss: window.Raw, sent: tuple[int, Any] | None = None
                ) -> tuple[int, window.Raw, window.Raw, bool]:
        """The burn-rate window after debiting ``loss`` at ``moment``
        (:mod:`dpkit.ledger.window`): the ledger minute, the window's total, the minute's
        bucket, and whether that bucket exists already. Reads only the buckets that leave
        the window (each once in the ledger's life) and the current one, each MAC-checked
        (``sent``: a minute m and the cursor of the buckets of m and m + 1, read with the
        debit's other reads; used when the current bucket is one of them).

        Raises
        ------
        LedgerIntegrityError
            If a bucket read was edited outside the ledger.
        """
        dataset, previous = row["name"], row["window_minute"]
        minute, gone, reset = window.expiry(previous, window.minute_of(moment))
        total = {} if reset else window.raw(row["window_spent"])
        if gone is not None:
            for old in store.rows(store.run(conn, _BUCKETS, {"dataset": dataset,
                                                             "lo": gone[0], "hi": gone[1]})):
                self._bucket_ok(old)
                total = window.sub(total, window.raw(old.spent))
        current: window.Raw = {}
        exists = False
        near = [] if sent is None else store.rows(sent[1])  # (read: a cursor is consumed)
        if minute == previous:
            if sent is not None and sent[0] <= minute <= sent[0] + 1:
                found = next((b for b in near if b.minute == minute), None)
            else:
                found = store.first(conn, _BUCKETS, {"dataset": dataset, "lo": minute,
                                                     "hi": minute})
            if found is not None:
                self._bucket_ok(found)
                current, exists = window.raw(found.spent), True
        return minute, window.add(total, loss), window.add(current, loss), exists

    def _newest_ok(self, conn: Connection, row: dict[str, Any], started: Any = None) -> None:
        """The dataset's newest release link is intact and carries the row's running total
        (one index lookup: an edit of the last debit is refused at the next one;
        ``started``: that lookup's cursor, sent with others)."""
        found = store.rows(started if started is not None
                           else store.run(conn, _NEWEST, {"dataset": row["name"]}))
        if not found:
            return
        newest = found[0]
        if not self._link_ok(newest, chain.release_body(newest._mapping)):
            raise self._tampered(f"release {newest.id} was edited outside the ledger")
        if newest.dataset_spent is not None and newest.dataset_spent != row["spent"]:
            raise self._tampered(f"datasets {row['name']!r}: its running total differs from "
                                 f"its last release's ({newest.id})")

    def _link_ok(self, row: Any, body: dict[str, Any]) -> bool:
        return hmac.compare_digest(str(row.hash), chain.link_hash(self._key, row.prev_hash, body))

    # -- datasets, analysts, studies, policies ----------------------------------------------
    def register(self, dataset: str, cap: PrivacyLoss, privacy_unit: str = "rows",
                 schema: str = "") -> PrivacyLoss:
        """Register ``dataset`` with a lifetime ``cap`` and ``privacy_unit`` (or check an
        existing registration: measure, cap and privacy unit must all be the registered ones,
        since a spend counted under another unit is not a spend of the registered cap).

        Raises
        ------
        LedgerError
            If the dataset exists with another measure, cap or privacy unit (each changes
            only by a recorded :meth:`migrate`).
        LedgerIntegrityError
            If its row was changed outside the ledger.
        """
        measure = type(cap).__name__
        if self._registered.get(dataset) == (measure, cap, privacy_unit):
            return cap  # checked by this object before; a dataset's cap never changes
        with self._transaction() as conn:
            self._lock_head(conn)
            row = self._row(conn, "datasets", (dataset,))
            if row is None:
                body = {"name": dataset, "measure": measure, "cap": dump(cap),
                        "privacy_unit": privacy_unit, "schema": schema,
                        "created": stamp(now())}
                seq = self._append(conn, "dataset", "datasets", (dataset,), body,
                                   body["created"])
                store.put_row(conn, self._key, "datasets", {
                    **body, "spent": dump(type(cap).zero()), "per_day": None, "seq": seq,
                    "window_minute": None, "window_spent": dump(type(cap).zero())},
                    new=True)
                self._registered[dataset] = (measure, cap, privacy_unit)
                return cap
        stored = load(row["measure"], row["cap"])
        if row["measure"] != measure or stored != cap:
            raise LedgerError(
                f"dataset {dataset!r} is registered with lifetime cap {stored} "
                f"({row['measure']}); open it with that budget, use another dataset name, "
                "or record a migration (`dpkit ledger migrate`)")
        if row["privacy_unit"] != privacy_unit:
            raise LedgerError(
                f"dataset {dataset!r} is registered with privacy unit {row['privacy_unit']}, "
                f"not {privacy_unit}: open it with that unit, use another dataset name, or "
                "record a migration (`dpkit ledger migrate`)")
        self._registered[dataset] = (measure, stored, privacy_unit)
        return stored

    def entry(self, dataset: str) -> dict[str, Any] | None:
        """The dataset's entry as registered, checked against the chain: ``measure`` (the
        class name: PureDP, ApproxDP, ZCDP), ``cap`` (exact), ``privacy_unit`` and ``schema``
        (their text); None for a dataset that is not registered.

        Raises
        ------
        LedgerIntegrityError
            If its row was changed outside the ledger.
        """
        with self._read() as conn:
            row = self._row(conn, "datasets", (dataset,))
        if row is None:
            return None
        return {**entries.entry_of(row), "cap": load(row["measure"], row["cap"])}

    def migrate(self, dataset: str, cap: PrivacyLoss, privacy_unit: str = "rows",
                schema: str = "") -> dict[str, Any]:
        """Retire the entry of ``dataset`` and open a new one under the same name with this
        measure (``type(cap)``), lifetime ``cap``, privacy unit and schema text: one ``migrate``
        link of the keyed chain (:mod:`dpkit.ledger.entries`). The spend is carried, never
        reset; a measure changes only before the first release; a new privacy unit is stated
        in the record. Returns the event's body (what was retired, what was opened).

        Raises
        ------
        LedgerError
            For an unknown or retired dataset, a migration that changes nothing, a measure
            change after a release, a cap below the carried spend, or a grant cap or policy
            that cannot be converted to the new measure (nothing is written).
        LedgerIntegrityError
            If a row it reads was changed outside the ledger.
        """
        with self._transaction() as conn:
            self._lock_head(conn)
            row = self._dataset(conn, dataset)
            self._newest_ok(conn, row)
            found = conn.execute(select(store.ROW_TABLES["grants"].c.analyst).where(
                store.ROW_TABLES["grants"].c.dataset == dataset)).scalars().all()
            grants = [g for g in (self._row(conn, "grants", (str(a), dataset)) for a in found)
                      if g is not None]
            released = store.first(conn, _NEWEST, {"dataset": dataset}) is not None
            body = entries.migration_body(row, cap, privacy_unit, schema, grants, released)
            seq = self._append(conn, entries.MIGRATE, "datasets", (dataset,), body,
                               stamp(now()))
            fields = {k: body[k] for k in (*entries.ENTRY_FIELDS, "spent", "per_day")}
            if body["measure"] != row["measure"]:  # no release yet: an empty window
                fields["window_spent"] = dump(type(cap).zero())
            store.put_row(conn, self._key, "datasets", {**row, **fields, "seq": seq},
                          new=False)
            for g in grants:  # a new measure: each grant's cap converted, as a grant link
                moved = body["grants"].get(str(g["analyst"]))
                if moved is not None:
                    key = (str(g["analyst"]), dataset)
                    change = {"analyst": key[0], "dataset": dataset, **moved}
                    at = self._append(conn, "grant", "grants", key, change, stamp(now()))
                    store.put_row(conn, self._key, "grants", {**g, **change, "seq": at},
                                  new=False)
        self._registered.pop(dataset, None)
        return body

    def migrations(self, dataset: str) -> list[dict[str, Any]]:
        """The recorded migrations of ``dataset`` (oldest first): each ``migrate`` event's
        body with its ``seq`` and ``time`` (``verify`` checks them)."""
        with self._read() as conn:
            found = conn.execute(select(events.c.seq, events.c.time, events.c.body).where(
                (events.c.subject == chain.subject("datasets", dataset))
                & (events.c.kind == entries.MIGRATE)).order_by(events.c.seq)).all()
        return [{**json.loads(r.body), "seq": r.seq, "time": r.time} for r in found]

    def set_policy(self, dataset: str, per_day: PrivacyLoss | None) -> None:
        """Burn-rate policy: at most ``per_day`` of loss in any rolling 24 hours (None: off;
        zero: the dataset is retired, see :meth:`retire`).

        Raises
        ------
        LedgerError
            For an unknown or retired dataset, or a policy in another measure.
        """
        with self._transaction() as conn:
            self._lock_head(conn)
            row = self._dataset(conn, dataset)
            if _retired(row):
                raise LedgerError(f"dataset {dataset!r} is retired; its policy cannot change")
            if per_day is not None and type(per_day).__name__ != row["measure"]:
                raise LedgerError(f"the policy must be in the dataset's measure {row['measure']}")
            body = {"name": dataset, "per_day": None if per_day is None else dump(per_day)}
            seq = self._append(conn, "policy", "datasets", (dataset,), body, stamp(now()))
            store.put_row(conn, self._key, "datasets",
                          {**row, "per_day": body["per_day"], "seq": seq}, new=False)

    def retire(self, dataset: str) -> None:
        """Retire ``dataset``: every later debit on it is refused, for good. Recorded in the
        chain as a burn-rate policy of zero loss per day (so :meth:`verify` checks it like
        any policy); its releases and their history stay.

        Raises
        ------
        LedgerError
            For an unknown or already retired dataset.
        """
        self.set_policy(dataset, MEASURES[self._measure(dataset)].zero())

    def retired(self, dataset: str) -> bool:
        """Whether ``dataset`` is retired (:meth:`retire`)."""
        with self._read() as conn:
            return _retired(self._dataset(conn, dataset))

    def _measure(self, dataset: str) -> str:
        with self._read() as conn:
            return str(self._dataset(conn, dataset)["measure"])

    def add_analyst(self, name: str, token: str | None = None) -> str:
        """Create an analyst; returns their API token (only its SHA-256 is stored)."""
        token = token or secrets.token_urlsafe(32)
        with self._transaction() as conn:
            self._lock_head(conn)
            if self._row(conn, "analysts", (name,)) is not None:
                raise LedgerError(f"analyst {name!r} exists")
            body = {"name": name, "token_sha256": token_digest(token), "created": stamp(now())}
            seq = self._append(conn, "analyst", "analysts", (name,), body, body["created"])
            store.put_row(conn, self._key, "analysts", {**body, "seq": seq}, new=True)
        return token

    def rotate_token(self, name: str, token: str | None = None) -> str:
        """Give ``name`` a new API token (the old one stops working); returns it."""
        token = token or secrets.token_urlsafe(32)
        with self._transaction() as conn:
            self._lock_head(conn)
            row = self._row(conn, "analysts", (name,))
            if row is None:
                raise LedgerError(f"unknown analyst {name!r}")
            body = {"name": name, "token_sha256": token_digest(token)}
            seq = self._append(conn, "token", "analysts", (name,), body, stamp(now()))
            store.put_row(conn, self._key, "analysts",
                          {**row, "token_sha256": body["token_sha256"], "seq": seq}, new=False)
        return token

    def analyst_for_token(self, token: str) -> str | None:
        """The analyst whose token this is (compared by hash), or None — also when the
        analyst's row was changed outside the ledger (it authenticates nobody).

        A read transaction (no write lock). An answer is cached with the chain head's
        ``seq`` it was read at and reused only while the head has not moved (one row read);
        after any change — a rotated token among them — the row is read and its MAC and
        place in the chain checked again. Only tokens that authenticated are cached."""
        digest = token_digest(token)
        with self._read() as conn:
            seq = self._chain_seq(conn)
            cached = self._tokens.get(digest)
            if cached is not None and cached[0] == seq:
                return cached[1]
            row = conn.execute(select(store.ROW_TABLES["analysts"].c.name).where(
                store.ROW_TABLES["analysts"].c.token_sha256 == digest)).first()
            if row is None:
                return None
            name = str(row[0])
            try:
                checked = self._row(conn, "analysts", (name,))
            except LedgerIntegrityError:
                return None
        if checked is None or checked["token_sha256"] != digest:
            return None  # the snapshot's row is the signed one: it must name this token
        _remember(self._tokens, digest, (seq, name))
        return name

    def grant(self, analyst: str, dataset: str, cap: PrivacyLoss | None = None) -> None:
        """Let ``analyst`` spend on ``dataset``, at most ``cap`` (inside the dataset's cap)."""
        with self._transaction() as conn:
            self._lock_head(conn)
            ds = self._dataset(conn, dataset)
            if cap is not None and type(cap).__name__ != ds["measure"]:
                raise LedgerError(f"the grant must be in the dataset's measure {ds['measure']}")
            if self._row(conn, "analysts", (analyst,)) is None:
                raise LedgerError(f"unknown analyst {analyst!r}")
            key = (analyst, dataset)
            existing = self._row(conn, "grants", key)
            body = {"analyst": analyst, "dataset": dataset,
                    "cap": None if cap is None else dump(cap)}
            seq = self._append(conn, "grant", "grants", key, body, stamp(now()))
            row = existing or {"spent": dump(MEASURES[ds["measure"]].zero())}
            store.put_row(conn, self._key, "grants", {**row, **body, "seq": seq},
                          new=existing is None)

    def grant_of(self, analyst: str, dataset: str) -> dict[str, Any] | None:
        """The analyst's grant on the dataset, checked: ``{"cap": loss or None, "spent":
        loss}``, or None without a grant.

        A read transaction (no write lock); a grant is cached with the chain head's ``seq``
        and reused only while the head has not moved (any debit or change moves it), then
        read and checked again. A debit re-checks the grant under the write lock.

        Raises
        ------
        LedgerIntegrityError
            If the dataset's or the grant's row was changed outside the ledger.
        """
        key = (analyst, dataset)
        with self._read() as conn:
            seq = self._chain_seq(conn)
            cached = self._grants.get(key)
            if cached is not None and cached[0] == seq:
                return dict(cached[1])
            ds = self._dataset(conn, dataset)
            row = self._row(conn, "grants", key)
        if row is None:
            return None
        found = {"cap": None if row["cap"] is None else load(ds["measure"], row["cap"]),
                 "spent": load(ds["measure"], row["spent"])}
        _remember(self._grants, key, (seq, found))
        return dict(found)

    def add_study(self, name: str, dataset: str, description: str = "") -> None:
        """Record a study (project) that releases can be filed under."""
        with self._transaction() as conn:
            self._lock_head(conn)
            self._dataset(conn, dataset)
            if self._row(conn, "studies", (name,)) is not None:
                raise LedgerError(f"study {name!r} exists")
            body = {"name": name, "dataset": dataset, "description": description,
                    "created": stamp(now())}
            seq = self._append(conn, "study", "studies", (name,), body, body["created"])
            store.put_row(conn, self._key, "studies", {**body, "seq": seq}, new=True)

    # -- spending -----------------------------------------------------------------------
    def cap(self, dataset: str) -> PrivacyLoss:
        """The dataset's lifetime cap (checked against the chain the first time this object
        reads or registers it; a cap never changes, and every debit checks the row again)."""
        known = self._registered.get(dataset)
        if known is not None:
            return known[1]
        with self._read() as conn:
            row = self._dataset(conn, dataset)
        cap = load(row["measure"], row["cap"])
        self._registered[dataset] = (row["measure"], cap, None)  # unit checked at register
        return cap

    def spent(self, dataset: str, analyst: str | None = None) -> PrivacyLoss:
        """Total recorded loss (every debit, released or failed), exact; per analyst if
        given."""
        with self._read() as conn:
            row = self._dataset(conn, dataset)
            if analyst is None:
                return load(row["measure"], row["spent"])
            return self._sum(conn, dataset, row["measure"], analyst=analyst)

    def debit(self, dataset: str, loss: PrivacyLoss, query: str, *,
              analyst: str | None = None, study: str | None = None,
              idempotency_key: str | None = None, noise: str | None = None) -> int:
        """Check ``loss`` against every cap and record it, atomically; returns the release id.

        Caps checked: the dataset's lifetime cap, the analyst's grant (if ``analyst``), and
        the burn-rate policy (loss in the last 24 h); each read from a row whose MAC and
        place in the chain are checked first.

        ``noise`` is the release's noise plan as text, chained with the debit and bound to
        the idempotency key; accountants write :func:`dpkit.core.record.noise_json` (older
        rows may hold free text or nothing).

        Raises
        ------
        BudgetExceededError
            If a cap would be exceeded or the dataset is retired (nothing is written).
        IdempotentReplay
            If ``idempotency_key`` already has a recorded answer for this same request
            (nothing is debited).
        IdempotencyConflictError
            If ``idempotency_key`` was first used with another request.
        LedgerIntegrityError
            If a row or link this debit depends on was changed outside the ledger.
        LedgerError
            For an unknown dataset, an analyst without a grant, or a key whose first
            attempt is still in progress.
        """
        with self._transaction() as conn:
            (head, seq, last_id), sent = self._debit_reads(conn, dataset, analyst,
                                                           idempotency_key)
            moment = now()  # under the lock: release times grow with seq
            row = self._dataset(conn, dataset, sent["dataset"])
            self._newest_ok(conn, row, sent["newest"])
            measure = row["measure"]
            if type(loss).__name__ != measure:
                loss = convert(loss, MEASURES[measure])
            loss_text = dump(loss)
            request = chain.request_digest(dataset, analyst, query, loss_text, noise)
            if idempotency_key is not None:
                self._check_key(conn, dataset, analyst, idempotency_key, request, moment,
                                sent["prior"])
            if _retired(row):
                raise BudgetExceededError(
                    f"dataset {dataset!r} is retired (`dpkit ledger retire`): it takes no "
                    "new releases. Nothing was released.")
            loss_raw = window.raw(loss_text)  # exact fields: no measure objects per debit
            total = window.compose(window.raw(row["spent"]), loss_raw)
            if not window.within(total, window.raw(row["cap"])):
                cap, spent = load(measure, row["cap"]), load(measure, row["spent"])
                raise BudgetExceededError(
                    f"ledger {self.shown_url}: dataset {dataset!r} has spent {spent} of its "
                    f"lifetime cap {cap}; this release ({loss}) would exceed it. Nothing was "
                    "released.")
            grant = None if analyst is None else self._check_grant(
                conn, analyst, dataset, measure, loss, loss_raw, sent["grant"])
            minute, recent, bucket, exists = self._window(conn, row, moment, loss_raw,
                                                          sent["buckets"])
            if row["per_day"] is not None:
                limit = load(measure, row["per_day"])
                if not window.as_loss(measure, recent) <= limit:
                    before = window.as_loss(measure, window.sub(recent, window.raw(loss_text)))
                    raise BudgetExceededError(
                        f"dataset {dataset!r}: {before} spent in the last 24 h; this release "
                        f"({loss}) would exceed the burn-rate limit {limit} per day")
            fields = {"id": last_id + 1, "dataset": dataset, "analyst": analyst,
                      "study": study, "time": stamp(moment), "query": query,
                      "measure": measure, "loss": loss_text, "noise": noise,
                      "idempotency_key": idempotency_key, "request_sha256": request,
                      "dataset_spent": window.text(total),
                      "grant_spent": None if grant is None else grant["spent"],
                      "seq": seq + 1}
            digest = chain.link_hash(self._key, head, chain.release_body(fields))
            with store.batch(conn):  # the writes: one round trip on PostgreSQL
                store.run(conn, _RELEASE_INSERT, {
                    **fields, "status": "debited", "result_sha256": None, "result": None,
                    "prev_hash": head, "hash": digest})
                store.put_row(conn, self._key, "datasets",
                              {**row, "spent": fields["dataset_spent"], "seq": seq + 1,
                               "window_minute": minute, "window_spent": window.text(recent)},
                              new=False)
                spent_text = window.text(bucket)
                mac = chain.bucket_mac(self._key, dataset, minute, spent_text)
                if exists:
                    store.run(conn, _BUCKET_UPDATE, {"dataset": dataset, "minute": minute,
                                                     "spent": spent_text, "mac": mac})
                else:
                    store.run(conn, _BUCKET_INSERT, {"dataset": dataset, "minute": minute,
                                                     "spent": spent_text, "mac": mac})
                if grant is not None:
                    store.put_row(conn, self._key, "grants",
                                  {**grant["row"], "spent": fields["grant_spent"], "seq": seq + 1},
                                  new=False)
                self._advance(conn, digest, seq + 1, head)
                conn.commit()  # in the writes' round trip (PostgreSQL: the pipeline's sync)
            return last_id + 1

    def _debit_reads(self, conn: Connection, dataset: str, analyst: str | None,
                     key: str | None) -> tuple[tuple[str, int, int], dict[str, Any]]:
        """Take the write lock and send every read a debit needs at once: on PostgreSQL one
        round trip (psycopg's pipeline), the advisory lock first. Each later
        statement of the pipeline starts after the lock is granted, and under READ
        COMMITTED takes its snapshot then, so it sees every commit of the lock's previous
        holder (as if sent after the lock). Returns :meth:`_lock_head`'s triple and the
        cursors of the dataset row, its newest release, the key's first release, the
        grant (None when not asked for), and the burn-rate buckets of the current minute and
        the next (with that minute)."""
        soon = window.minute_of(now())
        with store.batch(conn):
            # (SQLite: BEGIN IMMEDIATE took the lock)
            locked = None if self.url.startswith("sqlite") else store.run(conn, _LOCK)
            head_cursor = store.run(conn, _HEAD_SEQ_AND_ID)
            sent = {
                "dataset": store.start_fetch(conn, "datasets", (dataset,)),
                "newest": store.run(conn, _NEWEST, {"dataset": dataset}),
                "prior": None if key is None else store.run(
                    conn, _PRIOR[analyst is not None],
                    {"dataset": dataset, "key": key, "analyst": analyst}),
                "grant": None if analyst is None else store.start_fetch(
                    conn, "grants", (analyst, dataset)),
                # the burn-rate buckets of this minute and the next: the debit's minute
                # (the clock under the lock, so no earlier) is almost always one of them
                "buckets": (soon, store.run(conn, _BUCKETS, {
                    "dataset": dataset, "lo": soon, "hi": soon + 1}))}
        if locked is not None:
            locked.fetchone()
        head, seq, last_id = head_cursor.fetchone()
        return (str(head), int(seq), int(last_id or 0)), sent

    def _check_key(self, conn: Connection, dataset: str, analyst: str | None, key: str,
                   request: str, moment: datetime, started: Any = None) -> None:
        """Replay, refuse or let through a request with an idempotency key: its first
        release must be intact and for the same request; a recorded answer is returned only
        if it matches the hash chained in its outcome (``started``: the cursor of the
        key's lookup, sent with others)."""
        found = store.rows(started if started is not None else store.run(
            conn, _PRIOR[analyst is not None],
            {"dataset": dataset, "key": key, "analyst": analyst}))
        if not found:
            return
        prior = found[0]
        if not self._link_ok(prior, chain.release_body(prior._mapping)):
            raise self._tampered(f"release {prior.id} was edited outside the ledger")
        if prior.request_sha256 != request:
            raise IdempotencyConflictError(
                f"idempotency key {key!r} was first used for another request (release "
                f"{prior.id}: another query, loss or noise plan); use a new key for a new "
                "request. Nothing was debited.")
        last = store.first(conn, _LAST_OUTCOME, {"rid": prior.id})
        if last is not None and not self._link_ok(last, chain.outcome_body(last._mapping)):
            raise self._tampered(f"the outcome of release {prior.id} was edited outside the "
                                 "ledger")
        status = "debited" if last is None else last.status
        if prior.status != status:
            raise self._tampered(f"release {prior.id}: its status differs from its chained "
                                 "outcome")
        if status == "failed":
            return
        if status == "released":
            assert last is not None
            if integrity.stored_sha256(prior.result) != last.stored_sha256:
                raise self._tampered(f"release {prior.id}: its stored answer does not match "
                                     "the hash recorded in the chain; it is not replayed")
            raise _Answered(int(prior.id), self._open(prior.result), last.result_sha256)
        age = moment - datetime.fromisoformat(prior.time)
        if age < timedelta(seconds=STALE_SECONDS):
            raise LedgerError(f"idempotency key {key!r}: the first attempt (release "
                              f"{prior.id}) is still in progress; retry later")

    def _check_grant(self, conn: Connection, analyst: str, dataset: str, measure: str,
                     loss: PrivacyLoss, loss_raw: window.Raw, started: Any = None
                     ) -> dict[str, Any]:
        """The analyst's checked grant with their spend after ``loss`` as text (``spent``)
        and the row (``row``); raises if the grant is missing or ``loss`` would exceed it
        (``started``: the grant's fetch, sent with others)."""
        row = self._row(conn, "grants", (analyst, dataset), started)
        if row is None:
            raise LedgerError(f"analyst {analyst!r} has no grant on dataset {dataset!r}")
        total = window.compose(window.raw(row["spent"]), loss_raw)
        if row["cap"] is not None and not window.within(total, window.raw(row["cap"])):
            raise BudgetExceededError(
                f"analyst {analyst!r} has spent {load(measure, row['spent'])} of their cap "
                f"{load(measure, row['cap'])} on {dataset!r}; this release ({loss}) would "
                "exceed it")
        return {"row": row, "spent": window.text(total)}

    def mark(self, release_id: int, status: str, result_sha256: str | None,
             result: str | None = None) -> None:
        """Record the outcome of a debited release (``released`` or ``failed``), appending a
        chained outcome link; ``result`` (the released values as text) is stored for
        idempotent replays, encrypted when the ledger has a key, and its stored form's
        SHA-256 is chained with the outcome."""
        if status not in ("released", "failed"):
            raise LedgerError(f"unknown status {status!r}")
        sealed = self._seal(result)
        with self._transaction(durable=False) as conn:
            head, seq, _ = self._lock_head(conn)
            body = {"release_id": release_id, "time": stamp(now()), "status": status,
                    "result_sha256": result_sha256,
                    "stored_sha256": integrity.stored_sha256(sealed), "seq": seq + 1}
            digest = chain.link_hash(self._key, head, chain.outcome_body(body))
            with store.batch(conn):
                store.run(conn, _OUTCOME_INSERT, {"prev_hash": head, "hash": digest, **body})
                store.run(conn, _MARK, {"rid": release_id, "status": status,
                                        "result_sha256": result_sha256, "result": sealed})
                self._advance(conn, digest, seq + 1, head)
                conn.commit()  # in the writes' round trip

    def _seal(self, result: str | None) -> str | None:
        if result is None or self._fernet is None:
            return result
        return "fernet:" + self._fernet.encrypt(result.encode()).decode()

    def _open(self, stored: str | None) -> str | None:
        if stored is None or not stored.startswith("fernet:"):
            return stored
        if self._fernet is None:
            raise LedgerError("the stored result is encrypted; open the ledger with its key")
        return str(self._fernet.decrypt(stored[len("fernet:"):].encode()).decode())

    # -- continual releases: the step high-water mark ----------------------------------------
    def _stream_mark(self, conn: Connection, release_id: int) -> tuple[int, str | None]:
        """The last step recorded for the stream paid by ``release_id`` and the MAC of its
        state (0, None before its first step), from its mark row, checked against the chain:
        the row's MAC, that it is the stream's newest link (:meth:`_row`: deleting the newest
        step links, or the row, is refused), and that this link is intact and says the same.

        Raises
        ------
        LedgerIntegrityError
            If the mark row or its link was edited, deleted or rolled back.
        """
        key = (str(int(release_id)),)
        signed = self._checkpoint_marks(conn)  # first: a checkpoint signed later only
        row = self._row(conn, "streams", key)  # holds marks at or below the row read now
        self._after_checkpoint(signed, key[0], row)
        if row is None:
            return 0, None
        # the link the row names (links never change): _row read the row and the newest link's
        # seq in one statement, so a step committed meanwhile cannot look like tampering
        last = store.first(conn, _STREAM_LINK, {"seq": row["seq"],
                                                "subject": chain.subject("streams", *key)})
        if last is None or last.seq != row["seq"] or not self._link_ok(
                last, chain.event_body(last)) or json.loads(last.body) != {
                "release_id": row["release_id"], "step": row["step"], "state": row["state"]}:
            raise self._tampered(f"the step record of stream {release_id} was edited outside "
                                 "the ledger")
        return int(row["step"]), row["state"]

    def _checkpoint_marks(self, conn: Connection
                          ) -> tuple[int | None, int, dict[str, Any]]:
        """(newest checkpoint, its seq, its stream marks), read once per checkpoint."""
        newest = store.run(conn, _NEWEST_CHECKPOINT).fetchone()[0]
        marks_at = self._marks_at
        if newest != marks_at[0]:
            start, _ = checkpoint.latest(conn, self._key)
            marks_at = (newest, 0 if start is None else start.seq, {} if start is None
                        else {i[0]: m for i, m in start.state.rows["streams"].items()})
            self._marks_at = marks_at
        return marks_at

    def _after_checkpoint(self, marks_at: tuple[int | None, int, dict[str, Any]],
                          stream: str, row: dict[str, Any] | None) -> None:
        """A mark row must not be older than the newest signed checkpoint's copy of it (a row
        rolled back to an older signed copy, with the links after it deleted, agrees with
        the chain that is left)."""
        _, signed_at, marks = marks_at
        signed = marks.get(stream)
        fields = None if row is None else {k: row[k] for k in chain.ROW_FIELDS["streams"]}
        if (signed is not None and (fields is None or fields["step"] < signed["step"])) or (
                fields is not None and fields["seq"] <= signed_at and fields != signed):
            raise self._tampered(f"the step record of stream {stream} is older than the one "
                                 "the newest checkpoint signed (rolled back outside the ledger)")

    def stream_step(self, release_id: int) -> tuple[int, str | None]:
        """The high-water mark of a continual release (:mod:`dpkit.stream.frames`): the
        last step released from the stream paid by ``release_id`` and the MAC of the state
        it was released from (None when none was given); (0, None) before any step.

        Raises
        ------
        LedgerIntegrityError
            If its mark row or its newest step link was edited, deleted or rolled back
            outside the ledger (the links and row no longer agree).
        """
        with self._read() as conn:
            return self._stream_mark(conn, release_id)

    def advance_stream(self, release_id: int, step: int, state: str | None = None) -> None:
        """Record that step ``step`` of the stream paid by ``release_id`` is released, if
        and only if the last recorded step is ``step − 1`` (compare-and-set under the
        ledger's write lock; a chained ``stream`` event). ``state``: a MAC of the state the
        step was released from, checked when the stream is restored.

        Raises
        ------
        StreamRollbackError
            If another step ``step`` (or a later one) is already recorded: the caller's
            state is stale; nothing is written.
        LedgerIntegrityError
            If the stream's mark row or its newest step link was changed outside the ledger.
        LedgerError
            If ``release_id`` is no paid, released stream of this ledger.
        """
        step = int(step)
        with self._transaction() as conn:
            self._lock_head(conn)
            paid = store.first(conn, _RELEASE_BY_ID, {"rid": int(release_id)})
            if paid is None or paid.status != "released":
                raise LedgerError(f"release {release_id} is not a released stream")
            if not self._link_ok(paid, chain.release_body(paid._mapping)):
                raise self._tampered(f"release {release_id} was edited outside the ledger")
            found, _ = self._stream_mark(conn, release_id)
            if found != step - 1:
                raise StreamRollbackError(
                    f"stream {release_id}: step {found} is the last released and this state "
                    f"is at step {step - 1}; a newer state exists (a stale or second copy of "
                    "the stream). Nothing was released.")
            mark = {"release_id": int(release_id), "step": step, "state": state}
            seq = self._append(conn, "stream", "streams", (str(int(release_id)),), mark,
                               stamp(now()))
            store.put_row(conn, self._key, "streams", {**mark, "seq": seq}, new=found == 0)

    def release(self, release_id: int) -> dict[str, Any] | None:
        """One release row (as :meth:`releases` gives them; one index lookup), or None."""
        with self._read() as conn:
            row = store.first(conn, _RELEASE_BY_ID, {"rid": int(release_id)})
        if row is None:
            return None
        return {"id": row.id, "dataset": row.dataset, "analyst": row.analyst,
                "study": row.study, "time": row.time, "query": row.query,
                "loss": load(row.measure, row.loss), "noise": row.noise,
                "status": row.status, "result_sha256": row.result_sha256,
                "idempotency_key": row.idempotency_key, "hash": row.hash}

    # -- reading, verifying, exporting ------------------------------------------------------
    def datasets(self) -> list[dict[str, Any]]:
        """Every dataset with its cap, spend and policy, as stored (:meth:`verify` checks
        them)."""
        with self._read() as conn:
            rows = conn.execute(select(datasets).order_by(datasets.c.created)).mappings().all()
        return [{"name": r["name"], "measure": r["measure"], "cap": load(r["measure"], r["cap"]),
                 "privacy_unit": r["privacy_unit"], "created": r["created"],
                 "spent": load(r["measure"], r["spent"]),
                 "per_day": None if r["per_day"] is None else load(r["measure"], r["per_day"])}
                for r in rows]

    def releases(self, dataset: str | None = None, analyst: str | None = None
                 ) -> list[dict[str, Any]]:
        """Release rows (oldest first), optionally for one dataset and/or analyst."""
        query = select(releases).order_by(releases.c.id)
        if dataset is not None:
            query = query.where(releases.c.dataset == dataset)
        if analyst is not None:
            query = query.where(releases.c.analyst == analyst)
        with self._read() as conn:
            rows = conn.execute(query).mappings().all()
        return [{"id": r["id"], "dataset": r["dataset"], "analyst": r["analyst"],
                 "study": r["study"], "time": r["time"], "query": r["query"],
                 "loss": load(r["measure"], r["loss"]), "noise": r["noise"],
                 "status": r["status"], "result_sha256": r["result_sha256"],
                 "idempotency_key": r["idempotency_key"], "hash": r["hash"]} for r in rows]

    def analysts(self) -> list[dict[str, Any]]:
        """Every analyst's name and creation time, as stored (never a token or its hash;
        :meth:`verify` checks the rows)."""
        table = store.ROW_TABLES["analysts"]
        with self._read() as conn:
            rows = conn.execute(select(table.c.name, table.c.created)
                                .order_by(table.c.created)).mappings().all()
        return [{"name": r["name"], "created": r["created"]} for r in rows]

    def grants(self) -> list[dict[str, Any]]:
        """Every grant: analyst, dataset, cap (None: the dataset's) and spend, as stored
        (:meth:`verify` checks them)."""
        table = store.ROW_TABLES["grants"]
        with self._read() as conn:
            measure = {r[0]: r[1] for r in conn.execute(
                select(datasets.c.name, datasets.c.measure))}
            rows = conn.execute(select(table).order_by(table.c.analyst, table.c.dataset)
                                ).mappings().all()
        return [{"analyst": r["analyst"], "dataset": r["dataset"],
                 "cap": None if r["cap"] is None else load(measure[r["dataset"]], r["cap"]),
                 "spent": load(measure[r["dataset"]], r["spent"])} for r in rows]

    def streams(self) -> list[dict[str, Any]]:
        """Every continual release's mark: its release id and last released step, as
        stored (:meth:`verify` checks them)."""
        table = store.ROW_TABLES["streams"]
        with self._read() as conn:
            rows = conn.execute(select(table.c.release_id, table.c.step)
                                .order_by(table.c.release_id)).all()
        return [{"release_id": int(r[0]), "step": int(r[1])} for r in rows]

    def head(self) -> str:
        """The chain head (keep a copy elsewhere to detect a rewritten chain)."""
        with self._read() as conn:
            return str(conn.execute(select(meta.c.value).where(meta.c.key == "chain_head")
                                    ).scalar_one())

    def verify(self, head: str | None = None, *, since_checkpoint: bool = False
               ) -> list[str]:
        """Check the whole ledger against its keyed chain (:mod:`dpkit.ledger.integrity`):
        every link, the head, and every dataset, policy, analyst, grant, study, burn-rate
        bucket, release status, result hash and stored answer; return the problems, each
        naming what is wrong (empty when the ledger is intact). ``head``: a previously saved
        chain head that must still be on the chain. ``since_checkpoint``: start from the
        newest signed checkpoint (:meth:`checkpoint`, :mod:`dpkit.ledger.checkpoint`):
        only the links after it are replayed (a full verify if there is none)."""
        with self._read() as conn:
            start, problems = (checkpoint.latest(conn, self._key) if since_checkpoint
                               else (None, []))
            return problems + integrity.verify(conn, self._key, head, start)

    def checkpoint(self) -> list[str]:
        """Verify the whole ledger under its write lock and, if it is intact, sign and store
        its state at the chain head (:mod:`dpkit.ledger.checkpoint`), so that later
        ``verify(since_checkpoint=True)`` replays only what came after. Returns the problems
        found (nothing is stored unless it is empty). Writers wait while it runs."""
        with self._transaction() as conn:
            self._lock_head(conn)
            problems, state, head, seq = integrity.check(conn, self._key)
            if problems:
                return problems
            last_id = store.run(conn, _SEQ_AND_ID).fetchone()[1]
            text = checkpoint.dump(state, seq, head, int(last_id or 0))
            checkpoint.write(conn, self._key, text, seq, stamp(now()))
        return []

    def export(self) -> dict[str, Any]:
        """Everything but tokens and stored results, as JSON-ready data (losses as exact
        strings; each dataset's recorded migrations under ``migrations``)."""
        def plain(loss: PrivacyLoss) -> dict[str, str]:
            return {k: str(v) for k, v in loss.as_dict().items()}

        return {
            "schema_version": SCHEMA_VERSION,
            "chain_head": self.head(),
            "datasets": [{**d, "cap": plain(d["cap"]), "spent": plain(d["spent"]),
                          "per_day": None if d["per_day"] is None else plain(d["per_day"])}
                         for d in self.datasets()],
            "releases": [{**r, "loss": plain(r["loss"])} for r in self.releases()],
            "migrations": {d["name"]: self.migrations(d["name"]) for d in self.datasets()},
        }

    def count(self) -> int:
        with self._read() as conn:
            return int(conn.execute(select(func.count()).select_from(releases)).scalar_one())

    def dispose(self) -> None:
        """Close this thread's write connection and the pooled ones (e.g. before forking
        worker processes)."""
        conn = getattr(self._writers, "conn", None)
        if conn is not None and self._writers.pid == os.getpid():
            conn.close()
        self._writers = threading.local()
        if self._write_engine is not None:
            self._write_engine.dispose()
        self.engine.dispose()
