"""Reading and writing chained links and MAC-signed rows (SQLAlchemy Core).

Used by the ledger (:mod:`dpkit.ledger.registry`) and by the migration that chains an older
ledger (:mod:`dpkit.ledger.rechain`), so that both write the same links and rows.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, and_, func, select

from dpkit.ledger import chain
from dpkit.ledger.schema import analysts, datasets, events, grants, releases, studies

__all__ = ["ROW_TABLES", "KEYS", "ident", "match", "insert_event", "put_row", "row_ok",
           "latest_seq", "fetch"]

ROW_TABLES: dict[str, Table] = {"datasets": datasets, "analysts": analysts, "grants": grants,
                                "studies": studies}
KEYS: dict[str, tuple[str, ...]] = {"datasets": ("name",), "analysts": ("name",),
                                    "grants": ("analyst", "dataset"), "studies": ("name",)}


def ident(table: str, row: Mapping[Any, Any]) -> tuple[str, ...]:
    """The primary key of a mutable row."""
    return tuple(str(row[k]) for k in KEYS[table])


def match(table: str, key: tuple[str, ...]) -> ColumnElement[bool]:
    """The WHERE clause selecting the row with primary key ``key``."""
    t = ROW_TABLES[table]
    return and_(*(t.c[k] == v for k, v in zip(KEYS[table], key, strict=True)))


def insert_event(conn: Connection, key: bytes, head: str, seq: int, kind: str, subject: str,
                 body: Mapping[str, Any], time: str) -> tuple[str, dict[str, Any]]:
    """Append event link ``seq`` after ``head``; returns its hash (the new head) and its
    link body."""
    row = {"seq": seq, "kind": kind, "subject": subject, "time": time,
           "body": chain.canonical(body)}
    link = chain.event_body(row)
    digest = chain.link_hash(key, head, link)
    conn.execute(events.insert().values(prev_hash=head, hash=digest, **row))
    return digest, link


def put_row(conn: Connection, key: bytes, table: str, row: Mapping[Any, Any], *,
            new: bool) -> None:
    """Insert or update a mutable row with its MAC (``row`` holds every signed field)."""
    values = {k: row[k] for k in chain.ROW_FIELDS[table]}
    values["mac"] = chain.row_mac(key, table, values)
    t = ROW_TABLES[table]
    if new:
        conn.execute(t.insert().values(**values))
    else:
        conn.execute(t.update().where(match(table, ident(table, values))).values(**values))


def row_ok(key: bytes, table: str, row: Mapping[Any, Any]) -> bool:
    """Whether the row's MAC matches its fields."""
    mac = row.get("mac")
    return isinstance(mac, str) and hmac.compare_digest(mac, chain.row_mac(key, table, row))


def _latest_parts(table: str, key: tuple[str, ...]) -> list[Any]:
    """Scalar subqueries: the last ``seq`` of each kind of link that changes the row."""
    parts = [select(func.max(events.c.seq)).where(
        events.c.subject == chain.subject(table, *key)).scalar_subquery()]
    if table == "datasets":
        parts.append(select(func.max(releases.c.seq)).where(
            releases.c.dataset == key[0]).scalar_subquery())
    elif table == "grants":
        parts.append(select(func.max(releases.c.seq)).where(
            (releases.c.dataset == key[1]) & (releases.c.analyst == key[0])).scalar_subquery())
    return parts


def latest_seq(conn: Connection, table: str, key: tuple[str, ...]) -> int:
    """The ``seq`` of the last link that changed the row (0: none). Index lookups only."""
    found = conn.execute(select(*_latest_parts(table, key))).one()
    return max((int(s) for s in found if s is not None), default=0)


def fetch(conn: Connection, table: str, key: tuple[str, ...]
          ) -> tuple[dict[str, Any] | None, int]:
    """The row ``table`` ``key`` as stored (None if absent) and :func:`latest_seq`, in one
    statement when the row exists."""
    parts = _latest_parts(table, key)
    got = conn.execute(select(ROW_TABLES[table], *(p.label(f"__latest{i}") for i, p in
                                                   enumerate(parts)))
                       .where(match(table, key))).mappings().first()
    if got is None:
        return None, latest_seq(conn, table, key)
    latest = max((int(got[f"__latest{i}"]) for i in range(len(parts))
                  if got[f"__latest{i}"] is not None), default=0)
    return {c.name: got[c.name] for c in ROW_TABLES[table].columns}, latest
