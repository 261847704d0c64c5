"""Reading and writing chained links and MAC-signed rows (SQLAlchemy Core, and hand-written
SQL on the DBAPI cursor for the statements of every debit).

Used by the ledger (:mod:`dpkit.ledger.registry`) and by the migration that chains an older
ledger (:mod:`dpkit.ledger.rechain`), so that both write the same links and rows.
"""

from __future__ import annotations

import contextlib
import hmac
import re
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, and_

from dpkit.ledger import chain
from dpkit.ledger.schema import analysts, datasets, events, grants, streams, studies

__all__ = ["ROW_TABLES", "KEYS", "ident", "match", "insert_event", "put_row", "row_ok",
           "latest_seq", "fetch", "run", "batch", "rows", "first", "sql", "columns", "Row"]

ROW_TABLES: dict[str, Table] = {"datasets": datasets, "analysts": analysts, "grants": grants,
                                "studies": studies, "streams": streams}
KEYS: dict[str, tuple[str, ...]] = {"datasets": ("name",), "analysts": ("name",),
                                    "grants": ("analyst", "dataset"), "studies": ("name",),
                                    "streams": ("release_id",)}


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


def _q(name: str) -> str:
    return f'"{name}"'


def columns(table: Table) -> str:
    """The table's columns, quoted, in definition order (for hand-written SQL)."""
    return ", ".join(_q(c.name) for c in table.columns)


_PARAM = re.compile(r"(?<![:\w]):(\w+)")


def sql(conn: Connection, text: str) -> str:
    """``text`` (``:name`` parameters) in the DBAPI's parameter style, cached."""
    if conn.dialect.paramstyle in ("named", "qmark"):  # sqlite3 takes :name with a dict
        return text
    found = _PYFORMAT.get(text)
    if found is None:
        found = _PYFORMAT[text] = _PARAM.sub(r"%(\1)s", text)
    return found


_PYFORMAT: dict[str, str] = {}


def run(conn: Connection, text: str, params: Mapping[str, Any] | None = None) -> Any:
    """Run hand-written SQL on the connection's DBAPI cursor, inside whatever transaction
    the connection holds (the hot path of a debit: no statement building per call);
    returns the cursor."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    cursor.execute(sql(conn, text), dict(params or {}))
    return cursor


@contextlib.contextmanager
def batch(conn: Connection) -> Iterator[None]:
    """Send the statements run inside (writes whose results are not read) together: one
    round trip on PostgreSQL (psycopg's pipeline mode), nothing to do on SQLite."""
    if conn.dialect.name != "postgresql":
        yield
        return
    with conn.connection.dbapi_connection.pipeline():  # type: ignore[union-attr]
        yield


class Row(dict[str, Any]):
    """A row as a dict by column name that also reads its columns as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def _mapping(self) -> Row:
        return self


def rows(cursor: Any) -> list[Row]:
    """A cursor's rows (:class:`Row`)."""
    names = [d[0] for d in cursor.description]
    return [Row(zip(names, r, strict=True)) for r in cursor.fetchall()]


def first(conn: Connection, text: str, params: Mapping[str, Any] | None = None) -> Row | None:
    """The first row of hand-written SQL (:func:`run`), or None."""
    found = rows(run(conn, text, params))
    return found[0] if found else None


def _latest_sql(table: str) -> list[str]:
    """Scalar subqueries: the last ``seq`` of each kind of link that changes the row whose
    key is bound as ``k0``, ``k1`` (its event subject as ``subject``)."""
    parts = ['(SELECT max("seq") FROM "events" WHERE "subject" = :subject)']
    if table == "datasets":
        parts.append('(SELECT max("seq") FROM "releases" WHERE "dataset" = :k0)')
    elif table == "grants":
        parts.append('(SELECT max("seq") FROM "releases" WHERE "dataset" = :k1 '
                     'AND "analyst" = :k0)')
    return parts


def _where(table: str) -> str:
    return " AND ".join(f"{_q(k)} = :k{i}" for i, k in enumerate(KEYS[table]))


_LATEST = {t: "SELECT " + ", ".join(_latest_sql(t)) for t in ROW_TABLES}
_FETCH = {t: f"SELECT {columns(ROW_TABLES[t])}, "
          + ", ".join(f"{p} AS {_q(f'__latest{i}')}" for i, p in enumerate(_latest_sql(t)))
          + f" FROM {_q(t)} WHERE {_where(t)}" for t in ROW_TABLES}
_UPDATE = {t: f"UPDATE {_q(t)} SET "  # the key is not set: no foreign-key checks
           + ", ".join(f"{_q(f)} = :{f}" for f in (*chain.ROW_FIELDS[t], "mac")
                       if f not in KEYS[t])
           + f" WHERE {_where(t)}" for t in ROW_TABLES}


def _bound(table: str, key: tuple[str, ...]) -> dict[str, Any]:
    """The key's values as the columns hold them (a stream's paid release id is an integer;
    PostgreSQL compares no integer with text)."""
    if table == "streams":
        return {"k0": int(key[0])}
    return {f"k{i}": v for i, v in enumerate(key)}


def _params(table: str, key: tuple[str, ...]) -> dict[str, Any]:
    return {"subject": chain.subject(table, *key), **_bound(table, key)}


def put_row(conn: Connection, key: bytes, table: str, row: Mapping[Any, Any], *,
            new: bool) -> None:
    """Insert or update a mutable row with its MAC (``row`` holds every signed field)."""
    values = {k: row[k] for k in chain.ROW_FIELDS[table]}
    values["mac"] = chain.row_mac(key, table, values)
    if new:
        conn.execute(ROW_TABLES[table].insert(), values)
    else:
        run(conn, _UPDATE[table], {**values, **_bound(table, ident(table, values))})


def row_ok(key: bytes, table: str, row: Mapping[Any, Any]) -> bool:
    """Whether the row's MAC matches its fields."""
    mac = row.get("mac")
    return isinstance(mac, str) and hmac.compare_digest(mac, chain.row_mac(key, table, row))


def latest_seq(conn: Connection, table: str, key: tuple[str, ...]) -> int:
    """The ``seq`` of the last link that changed the row (0: none). Index lookups only."""
    found = run(conn, _LATEST[table], _params(table, key)).fetchone()
    return max((int(s) for s in found if s is not None), default=0)


def start_fetch(conn: Connection, table: str, key: tuple[str, ...]) -> Any:
    """Send :func:`fetch`'s statement (inside :func:`batch`, with others); its cursor, for
    :func:`fetch`'s ``started``."""
    return run(conn, _FETCH[table], _params(table, key))


def fetch(conn: Connection, table: str, key: tuple[str, ...], started: Any = None
          ) -> tuple[dict[str, Any] | None, int]:
    """The row ``table`` ``key`` as stored (None if absent) and :func:`latest_seq`, in one
    statement when the row exists (``started``: that statement's cursor, from
    :func:`start_fetch`)."""
    got = rows(started if started is not None else start_fetch(conn, table, key))
    if not got:
        latest = latest_seq(conn, table, key)
        if not latest:
            return None, 0
        # the chain has it: the row may have been created between the two statements (a
        # reader outside a transaction sees each statement's own snapshot); rows are never
        # deleted by the ledger, so one more read tells a new row from a deleted one
        got = rows(run(conn, _FETCH[table], _params(table, key)))
        if not got:
            return None, latest
    row, latest = got[0], 0
    for name in [k for k in got[0] if k.startswith("__latest")]:
        value = row.pop(name)
        latest = latest if value is None else max(latest, int(value))
    return row, latest
