"""Signed checkpoints: ``verify`` from a known-good state instead of from the genesis.

:meth:`Ledger.checkpoint <dpkit.ledger.Ledger.checkpoint>` runs a full verify under the
write lock and, if the ledger is intact, stores the state the chain implied at its last link
— every mutable row, the burn-rate windows and the buckets still inside them, the last
release id — with the link's ``seq`` and hash, as canonical JSON signed with the ledger's
key (:func:`dpkit.ledger.chain.checkpoint_mac`). ``verify(since_checkpoint=True)`` then
checks the checkpoint's MAC, replays only the links after it (the first must follow the
checkpoint's hash), and compares every row, the buckets from the checkpoint's windows on and
the releases debited or answered after it. What it does not re-read — links, releases and
buckets older than the checkpoint — was verified when the checkpoint was signed; a full
verify still checks everything. Without the key a checkpoint cannot be forged; deleting
checkpoints only makes ``verify`` start from an older one or from the genesis.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from sqlalchemy import Connection, select

from dpkit.ledger import chain, store, window
from dpkit.ledger.integrity import Start, State
from dpkit.ledger.schema import checkpoints

__all__ = ["dump", "load", "latest", "write"]


def dump(state: State, seq: int, head: str, max_release: int) -> str:
    """The checkpoint of ``state`` after link ``seq`` (hash ``head``) as canonical JSON."""
    tracker = state.windows
    return chain.canonical({
        "seq": seq, "head": head, "max_release": max_release,
        "rows": {t: list(rows.values()) for t, rows in state.rows.items()},
        "minute": tracker.minute,
        "total": {d: window.text(v) for d, v in tracker.total.items()},
        "buckets": [[d, m, window.text(v)] for (d, m), v in tracker.buckets.items()
                    if m >= tracker.minute[d] - window.SPAN]})


def load(text: str) -> Start:
    """The :class:`~dpkit.ledger.integrity.Start` a checkpoint's JSON describes."""
    data: dict[str, Any] = json.loads(text)
    state = State()
    for table, rows in data["rows"].items():
        state.rows[table] = {store.ident(table, r): r for r in rows}
    tracker = state.windows
    tracker.minute = {d: int(m) for d, m in data["minute"].items()}
    tracker.total = {d: window.raw(v) for d, v in data["total"].items()}
    tracker.buckets = {(d, int(m)): window.raw(v) for d, m, v in data["buckets"]}
    state.release_floor = int(data["max_release"])
    since = {d: m - window.SPAN for d, m in tracker.minute.items()}
    return Start(seq=int(data["seq"]), head=str(data["head"]), state=state,
                 max_release=int(data["max_release"]), bucket_since=since)


def write(conn: Connection, key: bytes, text: str, seq: int, time: str) -> None:
    """Store a checkpoint, signed."""
    conn.execute(checkpoints.insert().values(seq=seq, time=time, state=text,
                                             mac=chain.checkpoint_mac(key, text)))


def latest(conn: Connection, key: bytes) -> tuple[Start | None, list[str]]:
    """The newest checkpoint whose MAC matches (None: none), and the problems met on the way
    (a checkpoint whose MAC does not match is reported and skipped)."""
    problems: list[str] = []
    query = select(checkpoints).order_by(checkpoints.c.seq.desc())
    for row in conn.execute(query):
        if hmac.compare_digest(str(row.mac), chain.checkpoint_mac(key, str(row.state))):
            start = load(row.state)
            if start.seq == row.seq:
                return start, problems
        problems.append(f"checkpoint at seq {row.seq}: its MAC does not match (edited "
                        "outside the ledger); skipped")
    return None, problems
