"""The epsilon registry (Dwork & Roth §13.1): a persistent record of every privacy loss.

SQLite, standard library. One row per dataset (its measure and lifetime cap) and one row per
release (time, canonical query text, measure, exact loss, status, result hash). The check
and the debit happen in one ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock
first, so concurrent processes serialise and no interleaving can overrun a cap. The debit is
written *before* any noise is drawn; a release that then fails is marked ``failed`` and its
loss still counts (never refunded).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.errors import BudgetExceededError, LedgerError

__all__ = ["Ledger"]

_MEASURES: dict[str, type[PrivacyLoss]] = {"PureDP": PureDP, "ApproxDP": ApproxDP, "ZCDP": ZCDP}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS datasets (
    name TEXT PRIMARY KEY,
    measure TEXT NOT NULL,
    cap TEXT NOT NULL,
    privacy_unit TEXT NOT NULL,
    schema TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset TEXT NOT NULL REFERENCES datasets(name),
    time TEXT NOT NULL,
    query TEXT NOT NULL,
    measure TEXT NOT NULL,
    loss TEXT NOT NULL,
    status TEXT NOT NULL,
    result_sha256 TEXT
);
CREATE INDEX IF NOT EXISTS releases_dataset ON releases(dataset);
"""
SCHEMA_VERSION = "1"


def _dump(loss: PrivacyLoss) -> str:
    return json.dumps(loss.as_dict(), sort_keys=True)


def _load(measure: str, text: str) -> PrivacyLoss:
    fields = {k: Fraction(v) for k, v in json.loads(text).items()}
    return _MEASURES[measure](**fields)


class Ledger:
    """A persistent, atomic record of privacy losses per dataset.

    Parameters
    ----------
    path : str or Path
        SQLite file; created (with parent folders) if absent.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.executescript(_SCHEMA)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                       (SCHEMA_VERSION,))

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA busy_timeout=60000")
            yield db
        finally:
            db.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def register(self, dataset: str, cap: PrivacyLoss, privacy_unit: str = "rows",
                 schema: str = "") -> PrivacyLoss:
        """Register ``dataset`` with a lifetime ``cap`` (or check an existing registration).

        Raises
        ------
        LedgerError
            If the dataset exists with another measure or cap.
        """
        measure = type(cap).__name__
        with self._transaction() as db:
            row = db.execute("SELECT measure, cap FROM datasets WHERE name = ?",
                             (dataset,)).fetchone()
            if row is None:
                db.execute("INSERT INTO datasets VALUES (?, ?, ?, ?, ?, ?)",
                           (dataset, measure, _dump(cap), privacy_unit, schema, _now()))
                return cap
        stored = _load(row[0], row[1])
        if row[0] != measure or stored != cap:
            raise LedgerError(
                f"dataset {dataset!r} is registered with lifetime cap {stored} "
                f"({row[0]}); open it with that budget or use another dataset name"
            )
        return stored

    def cap(self, dataset: str) -> PrivacyLoss:
        with self._connect() as db:
            row = db.execute("SELECT measure, cap FROM datasets WHERE name = ?",
                             (dataset,)).fetchone()
        if row is None:
            raise LedgerError(f"unknown dataset {dataset!r}")
        return _load(row[0], row[1])

    def _spent(self, db: sqlite3.Connection, dataset: str, measure: str) -> PrivacyLoss:
        total = _MEASURES[measure].zero()
        for m, loss in db.execute("SELECT measure, loss FROM releases WHERE dataset = ?",
                                  (dataset,)):
            total = total + _load(m, loss)
        return total

    def spent(self, dataset: str) -> PrivacyLoss:
        """Total recorded loss of ``dataset`` (every debit, released or failed), exact."""
        cap = self.cap(dataset)
        with self._connect() as db:
            return self._spent(db, dataset, type(cap).__name__)

    def debit(self, dataset: str, loss: PrivacyLoss, query: str) -> int:
        """Check ``loss`` against the cap and record it, atomically; returns the release id.

        Raises
        ------
        BudgetExceededError
            If recorded spend + ``loss`` would exceed the lifetime cap (nothing is written).
        """
        with self._transaction() as db:
            row = db.execute("SELECT measure, cap FROM datasets WHERE name = ?",
                             (dataset,)).fetchone()
            if row is None:
                raise LedgerError(f"unknown dataset {dataset!r}")
            cap = _load(row[0], row[1])
            spent = self._spent(db, dataset, row[0])
            if not (spent + loss) <= cap:
                raise BudgetExceededError(
                    f"ledger {self.path}: dataset {dataset!r} has spent {spent} of its lifetime "
                    f"cap {cap}; this release ({loss}) would exceed it. Nothing was released."
                )
            cur = db.execute(
                "INSERT INTO releases (dataset, time, query, measure, loss, status) "
                "VALUES (?, ?, ?, ?, ?, 'debited')",
                (dataset, _now(), query, type(loss).__name__, _dump(loss)),
            )
            return int(cur.lastrowid or 0)

    def mark(self, release_id: int, status: str, result_sha256: str | None) -> None:
        """Record the outcome of a debited release (``released`` or ``failed``)."""
        with self._transaction() as db:
            db.execute("UPDATE releases SET status = ?, result_sha256 = ? WHERE id = ?",
                       (status, result_sha256, release_id))

    def datasets(self) -> list[dict[str, Any]]:
        """Every dataset with its cap and spend."""
        with self._connect() as db:
            rows = db.execute("SELECT name, measure, cap, privacy_unit, created FROM datasets "
                              "ORDER BY created").fetchall()
        return [{"name": n, "measure": m, "cap": _load(m, c), "privacy_unit": u,
                 "created": t, "spent": self.spent(n)} for n, m, c, u, t in rows]

    def releases(self, dataset: str | None = None) -> list[dict[str, Any]]:
        """Release rows (oldest first), optionally for one dataset."""
        sql = "SELECT id, dataset, time, query, measure, loss, status, result_sha256 FROM releases"
        args: tuple[Any, ...] = ()
        if dataset is not None:
            sql += " WHERE dataset = ?"
            args = (dataset,)
        with self._connect() as db:
            rows = db.execute(sql + " ORDER BY id", args).fetchall()
        return [{"id": i, "dataset": d, "time": t, "query": q, "loss": _load(m, loss),
                 "status": s, "result_sha256": h} for i, d, t, q, m, loss, s, h in rows]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
