"""Verification of the whole ledger against its keyed chain.

:func:`verify` checks every link (order, ``prev_hash``, keyed hash), the stored head, then
replays the chain (:class:`State`) into the rows it implies — datasets with their caps,
burn-rate policies and running totals, analysts with their token hashes, grants with their
caps and running totals, studies — and compares them with the rows on disk field by field
and MAC by MAC. It also checks each release row's status, result hash and stored answer
against its last chained outcome, and that every debit stayed inside the caps in force when
it was made. Each problem names the row or link and what differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, select

from dpkit.ledger import chain, codec, store
from dpkit.ledger.schema import events, meta, outcomes, releases

__all__ = ["State", "verify", "links", "stored_sha256"]


def stored_sha256(stored: str | None) -> str | None:
    """SHA-256 of a release's stored answer exactly as written (sealed when encrypted)."""
    return None if stored is None else hashlib.sha256(stored.encode()).hexdigest()


class State:
    """The mutable rows that a chain implies, built by applying its links in order.

    ``rows[table][ident]`` holds every signed field of a row (:data:`chain.ROW_FIELDS`);
    ``outcomes[release_id]`` the last outcome link of each release; ``problems`` what the
    links themselves get wrong (a debit over a cap, a running total that is not the sum).
    """

    def __init__(self) -> None:
        self.rows: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {
            t: {} for t in store.ROW_TABLES}
        self.outcomes: dict[int, dict[str, Any]] = {}
        self.releases: set[int] = set()
        self.problems: list[str] = []

    # -- the running totals a release link must carry ------------------------------------
    def totals_after(self, release: Mapping[Any, Any]) -> tuple[str | None, str | None]:
        """(dataset_spent, grant_spent) after the release ``release`` (a row or a link body),
        as the chain so far says: None where there is no dataset or no grant."""
        ds = self.rows["datasets"].get((release["dataset"],))
        if ds is None:
            return None, None
        loss = codec.load(release["measure"], release["loss"])
        total = codec.dump(codec.load(ds["measure"], ds["spent"]) + loss)
        grant = self.rows["grants"].get((str(release["analyst"]), release["dataset"]))
        if release["analyst"] is None or grant is None:
            return total, None
        return total, codec.dump(codec.load(ds["measure"], grant["spent"]) + loss)

    def apply(self, body: Mapping[str, Any]) -> None:
        if body["kind"] == "event":
            self._event(body)
        elif body["kind"] == "release":
            self._release(body)
        else:
            if body["release_id"] not in self.releases:
                self.problems.append(f"{chain.describe(body)}: no such release before it")
            self.outcomes[body["release_id"]] = dict(body)

    def _event(self, link: Mapping[str, Any]) -> None:
        kind, seq, b = link["event"], link["seq"], json.loads(link["body"])
        rows, where = self.rows, chain.describe(link)
        if kind == "dataset":
            rows["datasets"][(b["name"],)] = {
                **b, "spent": codec.dump(codec.MEASURES[b["measure"]].zero()), "per_day": None,
                "seq": seq}
        elif kind == "analyst":
            rows["analysts"][(b["name"],)] = {**b, "seq": seq}
        elif kind == "study":
            rows["studies"][(b["name"],)] = {**b, "seq": seq}
        elif kind in ("policy", "token", "grant"):
            table, key = {"policy": ("datasets", (b.get("name"),)),
                          "token": ("analysts", (b.get("name"),)),
                          "grant": ("grants", (b.get("analyst"), b.get("dataset")))}[kind]
            row = rows[table].get(key)
            if row is None and kind == "grant":
                ds = rows["datasets"].get((b["dataset"],))
                if ds is None:
                    self.problems.append(f"{where}: grant on an unregistered dataset")
                    return
                row = rows[table][key] = {
                    "analyst": b["analyst"], "dataset": b["dataset"],
                    "spent": codec.dump(codec.MEASURES[ds["measure"]].zero())}
            if row is None:
                self.problems.append(f"{where}: changes a row the chain never created")
                return
            row.update({k: v for k, v in b.items() if k not in store.KEYS[table]}, seq=seq)
        elif kind != "migration":
            self.problems.append(f"{where}: unknown event kind")

    def _release(self, body: Mapping[str, Any]) -> None:
        where = chain.describe(body)
        self.releases.add(body["id"])
        ds = self.rows["datasets"].get((body["dataset"],))
        if ds is None:
            self.problems.append(f"{where}: debits an unregistered dataset")
            return
        if body["request_sha256"] != chain.request_digest(
                body["dataset"], body["analyst"], body["query"], body["loss"], body["noise"]):
            self.problems.append(f"{where}: request hash does not match its query")
        dataset_spent, grant_spent = self.totals_after(body)
        if (dataset_spent, grant_spent) != (body["dataset_spent"], body["grant_spent"]):
            self.problems.append(f"{where}: running totals differ from the sum of the "
                                 "releases before it")
        measure = ds["measure"]
        assert dataset_spent is not None
        if not codec.load(measure, dataset_spent) <= codec.load(measure, ds["cap"]):
            self.problems.append(f"{where}: exceeds the dataset's lifetime cap")
        ds.update(spent=dataset_spent, seq=body["seq"])
        grant = self.rows["grants"].get((str(body["analyst"]), body["dataset"]))
        if grant is not None and grant_spent is not None:
            if grant["cap"] is not None and not (
                    codec.load(measure, grant_spent) <= codec.load(measure, grant["cap"])):
                self.problems.append(f"{where}: exceeds the analyst's grant")
            grant.update(spent=grant_spent, seq=body["seq"])


def links(conn: Connection) -> list[tuple[dict[str, Any], str, str]]:
    """Every link as (body, prev_hash, hash), in ``seq`` order."""
    found = [(chain.release_body(r), r["prev_hash"], r["hash"])
             for r in conn.execute(select(releases)).mappings()]
    found += [(chain.outcome_body(o), o["prev_hash"], o["hash"])
              for o in conn.execute(select(outcomes)).mappings()]
    found += [(chain.event_body(e), e["prev_hash"], e["hash"])
              for e in conn.execute(select(events)).mappings()]
    return sorted(found, key=lambda link: link[0]["seq"] or 0)


def _meta(conn: Connection, key: str) -> str | None:
    row = conn.execute(select(meta.c.value).where(meta.c.key == key)).first()
    return None if row is None else str(row[0])


def _show(ident: tuple[str, ...]) -> str:
    return repr(ident[0]) if len(ident) == 1 else repr(ident)


def _compare_rows(conn: Connection, key: bytes, state: State) -> list[str]:
    problems = []
    for table, t in store.ROW_TABLES.items():
        expected = dict(state.rows[table])
        for row in conn.execute(select(t)).mappings():
            ident = store.ident(table, row)
            name = f"{table} {_show(ident)}"
            want = expected.pop(ident, None)
            if want is None:
                problems.append(f"{name}: not in the chain (inserted outside the ledger)")
                continue
            for field in chain.ROW_FIELDS[table]:
                if row[field] != want.get(field):
                    problems.append(f"{name}: {field} is {row[field]!r} but the chain says "
                                    f"{want.get(field)!r} (edited outside the ledger)")
            if not store.row_ok(key, table, row):
                problems.append(f"{name}: its MAC does not match (edited outside the ledger)")
        problems += [f"{table} {_show(ident)}: in the chain but missing (deleted outside the "
                     "ledger)" for ident in expected]
    return problems


def _compare_releases(conn: Connection, state: State) -> list[str]:
    problems = []
    for r in conn.execute(select(releases)).mappings():
        last = state.outcomes.get(r["id"])
        status = last["status"] if last else "debited"
        found = (r["status"], r["result_sha256"], stored_sha256(r["result"]))
        want = (status, last["result_sha256"] if last else None,
                last["stored_sha256"] if last else None)
        for field, got, expected in zip(("status", "result_sha256", "stored result"), found,
                                        want, strict=True):
            if got != expected:
                problems.append(f"release {r['id']}: {field} differs from its chained outcome "
                                "(edited outside the ledger)")
    return problems


def verify(conn: Connection, key: bytes, head: str | None = None) -> list[str]:
    """Every problem found in the ledger (empty when intact); ``head``, a head saved earlier,
    must still be on the chain (or be the version-2 head the migration started from)."""
    found = links(conn)
    problems = chain.verify_links(found, key)
    stored_head, stored_seq = _meta(conn, "chain_head"), _meta(conn, "chain_seq")
    last_hash, last_seq = (found[-1][2], found[-1][0]["seq"]) if found else (chain.GENESIS, 0)
    if stored_head != last_hash or str(stored_seq) != str(last_seq):
        problems.append("the stored chain head is not the last link (truncated or extended "
                        "log)")
    if _meta(conn, "mac_key_id") != chain.key_id(key):
        problems.append("meta.mac_key_id does not name this ledger's key")
    state = State()
    heads = {link[2] for link in found}
    for body, _, _ in found:
        state.apply(body)
        if body["kind"] == "event" and body["event"] == "migration":
            heads.add(json.loads(body["body"]).get("previous_head") or chain.GENESIS)
    if head is not None and head not in heads:
        problems.append("the saved head is not on the chain (rewritten history)")
    return (problems + state.problems + _compare_rows(conn, key, state)
            + _compare_releases(conn, state))
