"""Verification of the whole ledger against its keyed chain.

:func:`verify` checks every link (order, ``prev_hash``, keyed hash), the stored head, then
replays the chain (:class:`State`) into the rows it implies — datasets with their caps,
burn-rate policies and running totals, analysts with their token hashes, grants with their
caps and running totals, studies — and compares them with the rows on disk field by field
and MAC by MAC. It also checks each release row's status, result hash and stored answer
against its last chained outcome, that every debit stayed inside the caps in force when
it was made, and that each continual release's mark names an intact link of its last step.
Each problem names the row or link and what differs.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import itertools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from dpkit.errors import LedgerError
from dpkit.ledger import chain, codec, entries, store, window
from dpkit.ledger.schema import burn, checkpoints, events, meta, outcomes, releases

__all__ = ["State", "Start", "verify", "check", "replay", "links", "stored_sha256",
           "upgrade_marks"]


def stored_sha256(stored: str | None) -> str | None:
    """SHA-256 of a release's stored answer exactly as written (sealed when encrypted)."""
    return None if stored is None else hashlib.sha256(stored.encode()).hexdigest()


class State:
    """The mutable rows that a chain implies, built by applying its links in order.

    ``rows[table][ident]`` holds every signed field of a row (:data:`chain.ROW_FIELDS`; the
    burn-rate window's fields are filled in by :meth:`finish`); ``windows`` the burn-rate
    windows and buckets (:class:`~dpkit.ledger.window.Tracker`); ``outcomes[release_id]``
    (status, result hash, stored-answer hash) of the last outcome link of each release;
    ``problems`` what the links themselves get wrong (a debit over a cap, a running total
    that is not the sum).
    """

    def __init__(self) -> None:
        self.rows: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {
            t: {} for t in store.ROW_TABLES}
        self.outcomes: dict[int, tuple[str, str | None, str | None]] = {}
        self.releases: set[int] = set()
        self.problems: list[str] = []
        self.windows = window.Tracker()
        self.release_floor = 0  # from a checkpoint: releases up to this id were before it
        self._parsed: dict[str, window.Raw] = {}  # recent texts of losses and totals
        self._ints_cache: dict[str, dict[str, tuple[int, int]]] = {}

    def _raw(self, textual: str) -> window.Raw:
        """The exact fields of a loss or total written as text, remembering recent texts (a
        running total is read once after it is written; caps and common losses repeat).
        The dicts returned are shared: never changed in place."""
        found = self._parsed.get(textual)
        if found is None:
            if len(self._parsed) > 65536:
                self._parsed.clear()
            found = self._parsed[textual] = window.raw(textual)
        return found

    def _plus(self, measure: str, total: str, release: Mapping[Any, Any]) -> str:
        """``total`` (in ``measure``) after the release's loss, as the ledger writes it:
        exact sums, δ capped at 1 as composition caps it."""
        if release["measure"] != measure:  # older rows: compose through the measures
            return codec.dump(codec.load(measure, total)
                              + codec.load(release["measure"], release["loss"]))
        a, b = self._ints(total), self._ints(release["loss"])
        if a.keys() != b.keys():
            return window.text(window.compose(self._raw(total), self._raw(release["loss"])))
        out = {}
        for field, (n1, d1) in a.items():
            n2, d2 = b[field]
            n, d = (n1 + n2, d1) if d1 == d2 else (n1 * d2 + n2 * d1, d1 * d2)
            g = math.gcd(n, d)
            n, d = n // g, d // g
            if field == "delta" and n > d:
                n = d = 1
            out[field] = (n, d)
        textual = window.text_of_pairs(out)
        self._remember(textual, out)
        return textual

    def _remember(self, textual: str, pairs: dict[str, tuple[int, int]]) -> None:
        if len(self._ints_cache) > 65536:
            self._ints_cache.clear()
        self._ints_cache[textual] = pairs

    def _ints(self, textual: str) -> dict[str, tuple[int, int]]:
        """The fields of a loss or total as text, as reduced (numerator, denominator)
        pairs, remembering recent texts (integer arithmetic: a Fraction sum is several
        times slower, and ``verify`` sums every release twice)."""
        found = self._ints_cache.get(textual)
        if found is None:
            found = {k: (v.numerator, v.denominator) for k, v in self._raw(textual).items()}
            self._remember(textual, found)
        return found

    def _within(self, measure: str, total: str, cap: str) -> bool:
        a, b = self._ints(total), self._ints(cap)
        if a.keys() == b.keys():  # one measure
            return all(n * b[k][1] <= b[k][0] * d for k, (n, d) in a.items())
        return codec.load(measure, total) <= codec.load(measure, cap)

    # -- the running totals a release link must carry ------------------------------------
    def totals_after(self, release: Mapping[Any, Any]) -> tuple[str | None, str | None]:
        """(dataset_spent, grant_spent) after the release ``release`` (a row or a link body),
        as the chain so far says: None where there is no dataset or no grant."""
        ds = self.rows["datasets"].get((release["dataset"],))
        if ds is None:
            return None, None
        measure = ds["measure"]
        total = self._plus(measure, ds["spent"], release)
        grant = self.rows["grants"].get((str(release["analyst"]), release["dataset"]))
        if release["analyst"] is None or grant is None:
            return total, None
        return total, self._plus(measure, grant["spent"], release)

    def finish(self) -> State:
        """Fill in the burn-rate window fields of the dataset rows; returns self."""
        for (name,), row in self.rows["datasets"].items():
            zero = codec.dump(codec.MEASURES[row["measure"]].zero())
            row.update(self.windows.row_fields(name, zero))
        return self

    def apply(self, body: Mapping[str, Any]) -> None:
        if body["kind"] == "event":
            self._event(body)
        elif body["kind"] == "release":
            self._release(body)
        else:
            if body["release_id"] not in self.releases and not (
                    0 < body["release_id"] <= self.release_floor):
                self.problems.append(f"{chain.describe(body)}: no such release before it")
            self.outcomes[body["release_id"]] = (body["status"], body["result_sha256"],
                                                 body["stored_sha256"])

    def _event(self, link: Mapping[str, Any]) -> None:
        kind, seq, b = link["event"], link["seq"], json.loads(link["body"])
        rows, where = self.rows, chain.describe(link)
        if kind == "dataset":
            zero = codec.dump(codec.MEASURES[b["measure"]].zero())
            rows["datasets"][(b["name"],)] = {**b, "spent": zero, "per_day": None, "seq": seq,
                                              "window_minute": None, "window_spent": zero}
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
        elif kind == "stream":
            self._stream(b, where, seq)
        elif kind == entries.MIGRATE:
            self.problems += entries.replay_migration(rows, link["body"], seq, where)
        elif kind != "migration":
            self.problems.append(f"{where}: unknown event kind")

    def _stream(self, b: Mapping[str, Any], where: str, seq: int) -> None:
        """A continual release's step record: its release is before it, and its steps go
        up by one from 1 (a checkpoint holds every stream's mark, so a stream first seen
        after one starts at 1 too); it moves the stream's mark row."""
        rid, step = b.get("release_id"), b.get("step")
        if not isinstance(rid, int) or not isinstance(step, int) or (
                rid not in self.releases and not 0 < rid <= self.release_floor):
            self.problems.append(f"{where}: a stream step of no release before it")
            return
        mark = self.rows["streams"].get((str(rid),))
        last = 0 if mark is None else mark["step"]
        if step != last + 1:
            self.problems.append(f"{where}: stream {rid} goes from step {last} to {step}")
        self.rows["streams"][(str(rid),)] = {"release_id": rid, "step": step,
                                             "state": b.get("state"), "seq": seq}

    def _release(self, body: Mapping[str, Any]) -> None:
        where = chain.describe(body)
        self.releases.add(body["id"])
        ds = self.rows["datasets"].get((body["dataset"],))
        if ds is None:
            self.problems.append(f"{where}: debits an unregistered dataset")
            return
        if body["request_sha256"] != (
                chain.request_digest(body["dataset"], body["analyst"], body["query"],
                                     body["loss"], body["noise"])):
            self.problems.append(f"{where}: request hash does not match its query")
        dataset_spent, grant_spent = self.totals_after(body)
        if (dataset_spent, grant_spent) != (body["dataset_spent"], body["grant_spent"]):
            self.problems.append(f"{where}: running totals differ from the sum of the "
                                 "releases before it")
        measure = ds["measure"]
        assert dataset_spent is not None
        if not self._within(measure, dataset_spent, ds["cap"]):
            self.problems.append(f"{where}: exceeds the dataset's lifetime cap")
        ds.update(spent=dataset_spent, seq=body["seq"])
        self.windows.debit(body["dataset"], body["time"], body["loss"])
        grant = self.rows["grants"].get((str(body["analyst"]), body["dataset"]))
        if grant is not None and grant_spent is not None:
            if grant["cap"] is not None and not self._within(measure, grant_spent,
                                                             grant["cap"]):
                self.problems.append(f"{where}: exceeds the analyst's grant")
            grant.update(spent=grant_spent, seq=body["seq"])


_RELEASE_COLUMNS = [releases.c[f] for f in chain.RELEASE_FIELDS]
_OUTCOME_COLUMNS = [outcomes.c[f] for f in chain.OUTCOME_FIELDS]
_EVENT_COLUMNS = [events.c.kind, *(events.c[f] for f in chain.EVENT_FIELDS)]


def _stream(conn: Connection, query: Any) -> Iterator[Any]:
    """Rows of ``query`` fetched in batches (a server-side cursor on PostgreSQL; set on the
    statement: set on the connection, it would stay for every later statement, and
    PostgreSQL declares no cursor for an INSERT)."""
    yield from conn.execute(query, execution_options={"stream_results": True,
                                                      "yield_per": 4096})


def links(conn: Connection, after: int = 0) -> Iterator[tuple[dict[str, Any], str, str]]:
    """Every link (after ``seq`` ``after``) as (body, prev_hash, hash), in ``seq`` order,
    streamed: the three tables are read in ``seq`` order (indexed) and merged, so memory
    does not grow with the ledger."""
    n_rel, n_out = len(chain.RELEASE_FIELDS), len(chain.OUTCOME_FIELDS)
    rel = ((dict(zip(chain.RELEASE_FIELDS, r[:n_rel], strict=True)), r[n_rel], r[n_rel + 1])
           for r in _stream(conn, select(*_RELEASE_COLUMNS, releases.c.prev_hash,
                                         releases.c.hash).where(releases.c.seq > after)
                                         .order_by(releases.c.seq)))
    out = ((dict(zip(chain.OUTCOME_FIELDS, r[:n_out], strict=True)), r[n_out], r[n_out + 1])
           for r in _stream(conn, select(*_OUTCOME_COLUMNS, outcomes.c.prev_hash,
                                         outcomes.c.hash).where(outcomes.c.seq > after)
                                         .order_by(outcomes.c.seq)))
    ev = ((chain.event_body(r._mapping), r.prev_hash, r.hash)
          for r in _stream(conn, select(*_EVENT_COLUMNS, events.c.prev_hash, events.c.hash)
                           .where(events.c.seq > after).order_by(events.c.seq)))
    tagged = (({"kind": "release", **b}, p, h) for b, p, h in rel)
    tagged_out = (({"kind": "outcome", **b}, p, h) for b, p, h in out)
    yield from heapq.merge(tagged, tagged_out, ev, key=lambda link: link[0]["seq"] or 0)


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


def _compare_buckets(conn: Connection, key: bytes, state: State,
                     since: dict[str, int] | None) -> list[str]:
    """Every burn-rate bucket against the one the chained releases imply, and its MAC (from
    a checkpoint: the buckets of each dataset from ``since[dataset]`` on)."""
    problems, expected = [], dict(state.windows.buckets)
    for b in _stream(conn, select(burn)):
        if since is not None and b.minute < since.get(b.dataset, b.minute):
            continue
        name = f"burn-rate bucket {b.dataset!r} minute {b.minute}"
        want = expected.pop((b.dataset, b.minute), None)
        if want is None:
            problems.append(f"{name}: not implied by the chain (inserted outside the ledger)")
            continue
        if b.spent != window.text(want):
            problems.append(f"{name}: spent is {b.spent!r} but the chain says "
                            f"{window.text(want)!r} (edited outside the ledger)")
        if not hmac.compare_digest(str(b.mac), chain.bucket_mac(key, b.dataset, b.minute,
                                                                b.spent)):
            problems.append(f"{name}: its MAC does not match (edited outside the ledger)")
    problems += [f"burn-rate bucket {d!r} minute {m}: in the chain but missing (deleted "
                 "outside the ledger)" for d, m in expected]
    return problems


def _compare_releases(conn: Connection, state: State, after: Start | None) -> list[str]:
    """Each release row's status, result hash and stored answer against its last chained
    outcome: every release, or (from a checkpoint) those debited or answered after it."""
    problems = []
    query = select(releases.c.id, releases.c.status, releases.c.result_sha256,
                   releases.c.result)
    found = _stream(conn, query if after is None else query.where(
        releases.c.id > after.max_release))
    if after is not None:
        earlier = sorted(i for i in state.outcomes if i <= after.max_release)
        found = itertools.chain(found, *(conn.execute(query.where(releases.c.id.in_(
            earlier[i:i + 500]))) for i in range(0, len(earlier), 500)))
    for r in found:
        last = state.outcomes.get(r.id)
        if last is None and after is not None and r.id <= after.max_release:
            continue
        want = last if last is not None else ("debited", None, None)
        got = (r.status, r.result_sha256, stored_sha256(r.result))
        for field, value, expected in zip(("status", "result_sha256", "stored result"), got,
                                          want, strict=True):
            if value != expected:
                problems.append(f"release {r.id}: {field} differs from its chained outcome "
                                "(edited outside the ledger)")
    return problems


def _compare_marks(conn: Connection, key: bytes, state: State) -> list[str]:
    """Each stream's mark (as the chain implies it: from a checkpoint, its copy) against the
    link it names: that link must still be there, intact, and be the same step of the same
    stream. Links older than a checkpoint are not re-read otherwise, and the mark is what a
    restore trusts; one lookup per stream."""
    problems = []
    query = select(*_EVENT_COLUMNS, events.c.prev_hash, events.c.hash)
    for ident, mark in state.rows["streams"].items():
        found = conn.execute(query.where(events.c.seq == mark["seq"])).first()
        body = None if found is None else chain.event_body(found._mapping)
        ok = found is not None and body is not None and (
            found.kind == "stream" and found.subject == chain.subject("streams", *ident)
            and hmac.compare_digest(str(found.hash),
                                    chain.link_hash(key, str(found.prev_hash), body))
            and json.loads(found.body) == {"release_id": mark["release_id"],
                                           "step": mark["step"], "state": mark["state"]})
        if not ok:
            problems.append(f"streams {_show(ident)}: its mark (step {mark['step']}) names "
                            f"link {mark['seq']}, which is missing or another link (deleted "
                            "or edited outside the ledger)")
    return problems


def upgrade_marks(conn: Connection, key: bytes) -> None:
    """Fill the ``streams`` table of a ledger migrated from version 3 or 4 from its chain,
    once, after checking every link (:func:`replay`), so that a link deleted or edited
    before the upgrade is not laundered into a signed mark; drop the older checkpoints
    (their states hold no marks: ``verify --since-checkpoint`` is a full verify until the
    next one).

    Raises
    ------
    LedgerError
        If the chain does not verify (nothing is changed).
    """
    problems, state, _, _ = replay(conn, key)
    if problems:
        raise LedgerError("this version-4 ledger cannot be upgraded: its chain does not verify "
                          f"({'; '.join(problems[:5])}{'; …' if len(problems) > 5 else ''}); "
                          "restore it from a copy, or open it with the dpkit that wrote it")
    for mark in state.rows["streams"].values():
        store.put_row(conn, key, "streams", mark, new=True)
    conn.execute(checkpoints.delete())


@dataclass
class Start:
    """Where a verify starts from a signed checkpoint (:mod:`dpkit.ledger.checkpoint`): the
    state the chain implied after link ``seq`` (hash ``head``), the last release id then,
    and per dataset the first bucket minute the checkpoint still holds."""

    seq: int
    head: str
    state: State
    max_release: int
    bucket_since: dict[str, int]


def replay(conn: Connection, key: bytes, head: str | None = None, start: Start | None = None
           ) -> tuple[list[str], State, str, int]:
    """Check the links (from ``start``, else from the genesis) in one pass and replay them:
    returns the problems of the links themselves, the state they imply (window fields
    filled in), and the hash and ``seq`` of the last link. All in this process: the key
    never leaves it (no helper process is started; a second process that held the key could
    be hijacked, and one without it could only be trusted for what this one re-checks)."""
    state = State() if start is None else start.state
    last: list[Any] = [chain.GENESIS, 0] if start is None else [start.head, start.seq]
    heads_seen = [head is None or (start is not None and head == start.head)]

    def tap(found: Iterator[tuple[dict[str, Any], str, str]]
            ) -> Iterator[tuple[dict[str, Any], str, str]]:
        for link in found:
            body = link[0]
            state.apply(body)
            last[0], last[1] = link[2], body["seq"]
            if head is not None and not heads_seen[0]:
                previous = (json.loads(body["body"]).get("previous_head") or chain.GENESIS
                            if body["kind"] == "event" and body["event"] == "migration"
                            else None)
                heads_seen[0] = head in (link[2], previous)
            yield link

    after = last[1]
    problems = chain.verify_links(tap(links(conn, after)), key, (last[0], after + 1))
    stored_head, stored_seq = _meta(conn, "chain_head"), _meta(conn, "chain_seq")
    if stored_head != last[0] or str(stored_seq) != str(last[1]):
        problems.append("the stored chain head is not the last link (truncated or extended "
                        "log)")
    if _meta(conn, "mac_key_id") != chain.key_id(key):
        problems.append("meta.mac_key_id does not name this ledger's key")
    if not heads_seen[0]:
        problems.append("the saved head is not on the chain (rewritten history)" if start
                        is None else "the saved head is not on the chain after the checkpoint "
                        "(run a full verify)")
    return problems + state.problems, state.finish(), str(last[0]), int(last[1])


def verify(conn: Connection, key: bytes, head: str | None = None, start: Start | None = None
           ) -> list[str]:
    """Every problem found in the ledger (empty when intact); ``head``, a head saved earlier,
    must still be on the chain (or be the version-2 head the migration started from). One
    pass over the chain in ``seq`` order, then one over each table of rows. From ``start``
    (a checkpoint), only the links after it and the releases and buckets they touched are
    read; the rows are all compared."""
    return check(conn, key, head, start)[0]


def check(conn: Connection, key: bytes, head: str | None = None, start: Start | None = None
          ) -> tuple[list[str], State, str, int]:
    """:func:`verify`, also returning the state the chain implies and the hash and ``seq``
    of its last link (for a checkpoint)."""
    problems, state, last_hash, last_seq = replay(conn, key, head, start)
    problems += (_compare_rows(conn, key, state)
                 + _compare_buckets(conn, key, state,
                                    None if start is None else start.bucket_since)
                 + _compare_releases(conn, state, start)
                 + _compare_marks(conn, key, state))
    return problems, state, last_hash, last_seq
