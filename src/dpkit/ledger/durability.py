"""Group commit: many writes made durable by one flush of the log.

A debit must be on disk before its release is computed (Dwork & Roth §13.1's registry is
only as good as its record). Waiting for the disk *inside* the write transaction holds the
ledger's write lock across an ``fsync``, so the number of fsyncs a disk does per second
bounds the number of releases (243/s on this machine's ext4, against 1,977/s on tmpfs). As
databases do (group commit; DeWitt et al., "Implementation techniques for main memory
database systems", SIGMOD 1984), a write transaction now commits without waiting for
the disk and releases the lock; the writer then waits, outside the lock, for one flush that
*started after its commit returned*. One flush covers every commit before it, so writers
that commit while a flush is running share the next one.

SQLite (:class:`SqliteGroupSync`)
    Write transactions commit with ``synchronous=NORMAL`` in WAL mode: the commit's frames
    are written to the ``-wal`` file (the page cache: they survive a crash of the process,
    not yet a power loss) and nothing waits for the disk. :meth:`SqliteGroupSync.wait`
    then makes them durable: under a lock (a thread lock, then ``flock`` on
    ``<ledger>.sync``, so threads and processes queue alike; shared to read, exclusive to
    flush) it reads the watermark, the monotonic time at which the newest completed flush
    *started*; if that is after the writer's commit returned, the commit is already on
    disk. Otherwise this writer takes the lock exclusively, reads the watermark again (a
    flush may have run in between) and leads: it notes the time, flushes the WAL file
    (``fdatasync``, as SQLite's own commits do; its folder too when the WAL file is new),
    and writes the time as the watermark. Why
    this is enough: the commit's frames were written to the WAL file's pages before the
    flush started, and a flush on any descriptor of a file flushes all its pages; a WAL
    file that was checkpointed and reset or removed in between had its frames copied to
    the database file by a checkpoint that syncs (SQLite syncs at every checkpoint unless
    ``synchronous=OFF``). The watermark is
    trusted only under the same boot and time namespace (``CLOCK_MONOTONIC`` restarts at a
    boot and is shifted per time namespace), so a stale file never vouches for a write.

PostgreSQL (:func:`postgres_barrier`)
    Ledger connections run with ``synchronous_commit = off``: a write's commit is in the WAL
    buffers, ordered after every earlier commit, and the head lock is released at once. The
    writer then commits a *barrier*, a transaction that writes a WAL record (a row of
    ``meta`` inserted and deleted) with ``synchronous_commit = on``. Its commit waits until
    the WAL is flushed past the barrier's commit record, hence past the write's (WAL is
    flushed in order), and PostgreSQL's own group commit lets concurrent barriers share one
    flush (``XLogFlush`` flushes to the newest insert position).

What a write may see: another writer's commit that is not yet durable. A power loss can
only lose a suffix of the commit order, and a writer returns only once its own commit (so
every earlier one) is durable; a later debit that saw an earlier, lost one was conservative
(more was spent), and its own loss is in the same lost suffix, so no release was computed
from it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # not on Windows: each process flushes for itself
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from sqlalchemy import Connection

__all__ = ["SqliteGroupSync", "postgres_barrier"]


_SHARED = 0 if fcntl is None else fcntl.LOCK_SH
_EXCLUSIVE = 0 if fcntl is None else fcntl.LOCK_EX

# the file's data and the metadata needed to read it back (its size), as SQLite's own
# commits use: no flush of timestamps
_sync_data = getattr(os, "fdatasync", os.fsync)


def _epoch() -> str:
    """Where monotonic times are comparable: the boot and the time namespace (empty when
    unknown: the watermark is then this process's own)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        space = os.readlink("/proc/self/ns/time") if os.path.exists("/proc/self/ns/time") else ""
    except OSError:
        return ""
    return f"{boot}/{space}"


class SqliteGroupSync:
    """Makes a SQLite ledger's WAL commits durable, one flush per group of writers.

    Parameters
    ----------
    database : str
        The ledger's database file (its WAL file is ``database + "-wal"``).

    Attributes
    ----------
    flushes : int
        The flushes this object led (for tests and benchmarks).
    """

    def __init__(self, database: str) -> None:
        self.database = database
        self.wal = f"{database}-wal"
        self.path = f"{database}.sync"
        self.epoch = _epoch()
        self.flushes = 0
        self._pid = -1
        self._file: int = -1
        self._thread_lock = threading.Lock()
        self._local_mark = -1  # the watermark of this process when no epoch is known

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """This process's turn (a thread lock: ``flock`` belongs to the open file, which the
        threads share), with the sync file's descriptor open and not yet ``flock``-ed."""
        if self._pid != os.getpid():  # a forked process opens its own descriptor
            self._file = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            self._thread_lock = threading.Lock()
            self._pid = os.getpid()
        with self._thread_lock:
            try:
                yield
            finally:
                if fcntl is not None:
                    fcntl.flock(self._file, fcntl.LOCK_UN)

    def _flock(self, kind: int) -> None:
        if fcntl is not None:
            fcntl.flock(self._file, kind)

    def _read_mark(self) -> tuple[int, int]:
        """(the newest flush's start, the WAL file's inode then); (-1, -1) if untrusted."""
        if not self.epoch:
            return self._local_mark, -1
        text = os.pread(self._file, 256, 0).decode("ascii", "replace").split()
        if len(text) != 3 or text[0] != self.epoch:
            return -1, -1
        try:
            return int(text[1]), int(text[2])
        except ValueError:
            return -1, -1

    def _write_mark(self, started: int, inode: int) -> None:
        if not self.epoch:
            self._local_mark = started
            return
        data = f"{self.epoch} {started} {inode}\n".encode()
        os.ftruncate(self._file, 0)
        os.pwrite(self._file, data, 0)

    def flush(self, last_inode: int) -> int:
        """Flush the WAL file (its folder too when its inode is not ``last_inode``, the
        last flush's), or the database file when there is no WAL file; returns the WAL's
        inode (-1 when there is none)."""
        try:
            fd = os.open(self.wal, os.O_RDONLY)
        except FileNotFoundError:  # checkpointed and removed: the database file holds it
            fd, inode = os.open(self.database, os.O_RDONLY), -1
        else:
            inode = os.fstat(fd).st_ino
        try:
            _sync_data(fd)
        finally:
            os.close(fd)
        if inode not in (-1, last_inode):  # a new WAL file: its name must survive too
            folder = os.open(os.path.dirname(os.path.abspath(self.wal)), os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        self.flushes += 1
        return inode

    def wait(self, committed: int) -> None:
        """Return once every commit that returned before ``committed`` (a
        ``time.monotonic_ns()`` read after it) is on disk.

        The watermark is read under a shared lock, which waits for a running flush (its
        leader holds the lock exclusively) and lets every writer it covered go at once
        (under an exclusive lock they would wake and leave one at a time, each a context
        switch on a busy machine). A writer not covered then takes the lock exclusively
        (not atomically: another may lead in between, so the watermark is read again) and
        leads the next flush."""
        with self._locked():
            self._flock(_SHARED)
            if self._read_mark()[0] > committed:  # a flush started after the commit
                return
            self._flock(_EXCLUSIVE)
            mark, last_inode = self._read_mark()
            if mark > committed:
                return
            started = time.monotonic_ns()
            inode = self.flush(last_inode)
            self._write_mark(started, inode)

    def close(self) -> None:
        if self._pid == os.getpid() and self._file >= 0:
            os.close(self._file)
            self._file, self._pid = -1, -1


_BARRIER_ON = "SET LOCAL synchronous_commit = on"
_BARRIER_INSERT = """INSERT INTO "meta" ("key", "value") VALUES (:key, '')"""
_BARRIER_DELETE = """DELETE FROM "meta" WHERE "key" = :key"""


def postgres_barrier(conn: Connection) -> None:
    """Commit a transaction that writes a WAL record with ``synchronous_commit = on``
    (``conn`` not in a transaction): it returns once the WAL is flushed past every commit
    made before it (see the module docstring)."""
    from dpkit.ledger import store

    key = f"durable:{uuid.uuid4().hex}"  # unique: barriers never wait on each other's rows
    with conn.begin(), store.batch(conn):
        store.run(conn, _BARRIER_ON)
        store.run(conn, _BARRIER_INSERT, {"key": key})
        store.run(conn, _BARRIER_DELETE, {"key": key})
