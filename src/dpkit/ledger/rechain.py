"""Chain an older ledger (schema version 1 or 2) under the version-3 keyed chain.

Run once, inside the migration's transaction, right after the columns are added
(:func:`dpkit.ledger.schema.migrate`). A version-2 ledger's own chain (unkeyed SHA-256 over
releases and outcomes) is checked first, with the consistency of release statuses: if it
does not verify the migration is refused and nothing changes, so that tampering is never
laundered into a valid chain. The new chain then starts with a ``migration`` event (naming
the version-2 head, so that a head saved before the upgrade still verifies), then one event
per existing dataset, policy, analyst, grant and study — the state as found, which version 2
did not protect — then the old links in their order, each release now carrying its request
hash and the running totals recomputed from the releases (a tampered cached total is
replaced, not trusted), each outcome the hash of the stored answer. Finally every mutable
row is rewritten from the replayed chain with its ``seq`` and MAC, and the burn-rate buckets
are written (:mod:`dpkit.ledger.window`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, select

from dpkit.errors import LedgerError
from dpkit.ledger import chain, codec, store, window
from dpkit.ledger.integrity import State, stored_sha256
from dpkit.ledger.schema import analysts, datasets, grants, meta, outcomes, releases, studies

__all__ = ["rechain", "check_v2"]


def _meta(conn: Connection, key: str) -> str | None:
    row = conn.execute(select(meta.c.value).where(meta.c.key == key)).first()
    return None if row is None else str(row[0])


def check_v2(conn: Connection) -> list[str]:
    """The problems of a version-2 ledger, as its own ``verify`` found them (chain, head,
    release statuses)."""
    rel = conn.execute(select(releases)).mappings().all()
    out = conn.execute(select(outcomes)).mappings().all()
    links = sorted([(chain.legacy_body("release", r), r["prev_hash"], r["hash"]) for r in rel]
                   + [(chain.legacy_body("outcome", o), o["prev_hash"], o["hash"]) for o in out],
                   key=lambda link: link[0]["seq"] or 0)
    problems = chain.verify_links(links, None)
    if _meta(conn, "chain_head") != (links[-1][2] if links else chain.GENESIS):
        problems.append("the stored chain head is not the last link (truncated log)")
    latest = {o["release_id"]: o for o in sorted(out, key=lambda o: o["seq"])}
    for r in rel:
        last = latest.get(r["id"])
        if r["status"] != (last["status"] if last else "debited") or (
                last and r["result_sha256"] != last["result_sha256"]):
            problems.append(f"release {r['id']}: status/result differ from its chained outcome")
    return problems


class _Writer:
    """Appends links to a new chain and replays them into the rows they imply."""

    def __init__(self, conn: Connection, key: bytes) -> None:
        self.conn, self.key = conn, key
        self.head, self.seq, self.state = chain.GENESIS, 0, State()

    def event(self, kind: str, table: str, ident: tuple[str, ...], body: Mapping[str, Any],
              time: str) -> None:
        self.seq += 1
        self.head, link = store.insert_event(self.conn, self.key, self.head, self.seq, kind,
                                             chain.subject(table, *ident), body, time)
        self.state.apply(link)

    def release(self, row: Mapping[Any, Any]) -> None:
        self.seq += 1
        fields = {**row, "seq": self.seq, "request_sha256": chain.request_digest(
            row["dataset"], row["analyst"], row["query"], row["loss"], row["noise"])}
        fields["dataset_spent"], fields["grant_spent"] = self.state.totals_after(fields)
        body = chain.release_body(fields)
        digest = chain.link_hash(self.key, self.head, body)
        self.conn.execute(releases.update().where(releases.c.id == row["id"]).values(
            seq=self.seq, prev_hash=self.head, hash=digest,
            **{k: fields[k] for k in ("request_sha256", "dataset_spent", "grant_spent")}))
        self.state.apply(body)
        self.head = digest

    def outcome(self, row: Mapping[Any, Any], stored: str | None, outcome_id: Any) -> None:
        self.seq += 1
        fields = {**{k: row[k] for k in ("release_id", "time", "status", "result_sha256")},
                  "seq": self.seq, "stored_sha256": stored}
        body = chain.outcome_body(fields)
        digest = chain.link_hash(self.key, self.head, body)
        values = {**fields, "prev_hash": self.head, "hash": digest}
        if outcome_id is None:
            self.conn.execute(outcomes.insert().values(**values))
        else:
            self.conn.execute(outcomes.update().where(outcomes.c.id == outcome_id)
                              .values(**values))
        self.state.apply(body)
        self.head = digest


def _snapshot(w: _Writer, conn: Connection) -> None:
    """One event per existing dataset, policy, analyst, grant and study."""
    for d in conn.execute(select(datasets).order_by(datasets.c.created, datasets.c.name)
                          ).mappings().all():
        w.event("dataset", "datasets", (d["name"],), {k: d[k] for k in (
            "name", "measure", "cap", "privacy_unit", "schema", "created")}, d["created"])
        if d["per_day"] is not None:
            w.event("policy", "datasets", (d["name"],),
                    {"name": d["name"], "per_day": d["per_day"]}, d["created"])
    for a in conn.execute(select(analysts).order_by(analysts.c.created, analysts.c.name)
                          ).mappings().all():
        w.event("analyst", "analysts", (a["name"],),
                {k: a[k] for k in ("name", "token_sha256", "created")}, a["created"])
    for g in conn.execute(select(grants).order_by(grants.c.analyst, grants.c.dataset)
                          ).mappings().all():
        w.event("grant", "grants", (g["analyst"], g["dataset"]),
                {k: g[k] for k in ("analyst", "dataset", "cap")}, codec.stamp(codec.now()))
    for s in conn.execute(select(studies).order_by(studies.c.created, studies.c.name)
                          ).mappings().all():
        w.event("study", "studies", (s["name"],),
                {k: s[k] for k in ("name", "dataset", "description", "created")}, s["created"])


def rechain(conn: Connection, key: bytes, found: int) -> None:
    """Build the version-3 chain over a ledger migrated from version ``found`` (1 or 2).

    Raises
    ------
    LedgerError
        If a version-2 ledger's chain does not verify (nothing is changed).
    """
    if found == 2 and (problems := check_v2(conn)):
        raise LedgerError("this version-2 ledger cannot be migrated: its chain does not verify "
                          f"({'; '.join(problems[:5])}{'; …' if len(problems) > 5 else ''}); "
                          "restore it from a copy, or open it with the dpkit that wrote it")
    w = _Writer(conn, key)
    w.event("migration", "ledger", (), {
        "from_version": found, "previous_head": _meta(conn, "chain_head") if found == 2
        else None, "previous_seq": _meta(conn, "chain_seq")}, codec.stamp(codec.now()))
    _snapshot(w, conn)
    rel = {r["id"]: r for r in conn.execute(select(releases)).mappings().all()}
    if found == 1:  # no outcomes yet: each release is followed by its outcome
        for rid in sorted(rel):
            w.release(rel[rid])
            if rel[rid]["status"] in ("released", "failed"):
                w.outcome({**rel[rid], "release_id": rid}, stored_sha256(rel[rid]["result"]),
                          None)
    else:
        out = conn.execute(select(outcomes)).mappings().all()
        last = {o["release_id"]: o["id"] for o in sorted(out, key=lambda o: o["seq"])}
        old = sorted([(r["seq"] or 0, "release", r) for r in rel.values()]
                     + [(o["seq"], "outcome", o) for o in out], key=lambda t: t[0])
        for _, kind, row in old:
            if kind == "release":
                w.release(row)
            else:
                latest = last[row["release_id"]] == row["id"]
                stored = stored_sha256(rel[row["release_id"]]["result"]) if latest else None
                w.outcome(row, stored, row["id"])
    for table, rows in w.state.finish().rows.items():
        for state_row in rows.values():
            store.put_row(conn, key, table, state_row, new=False)
    window.write_buckets(conn, key, w.state.windows)
    conn.execute(meta.update().where(meta.c.key == "chain_head").values(value=w.head))
    conn.execute(meta.update().where(meta.c.key == "chain_seq").values(value=str(w.seq)))
