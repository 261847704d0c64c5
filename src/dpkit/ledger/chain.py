"""The ledger's keyed hash chain and row MACs.

Every change to the ledger is a link of one chain, ordered by ``seq`` across three
append-only tables: ``events`` (administrative changes: a dataset registered, a burn-rate
policy, an analyst added or a token rotated, a grant, a study, a migration; and a continual
release's step, its high-water mark), ``releases``
(a debit: who, what, the exact loss, the running totals after it) and ``outcomes`` (a
release's status and the hashes of its answer and of the stored copy). Link i stores

    hash_i = HMAC-SHA256(key, hash_{i−1} ‖ canonical JSON of its immutable fields)

with ``hash_0`` the genesis value. The mutable rows that the ledger reads to decide a spend
or an answer (``datasets``, ``analysts``, ``grants``, ``studies``, and ``streams``: a continual
release's last step) are caches of the chain:
each carries the ``seq`` of the last link that changed it and a MAC (HMAC-SHA256 under the
same key, domain-separated) over all its fields. Without the key nobody can write a link or
a row that verifies; editing, deleting or reordering links breaks the chain, and editing a
row breaks its MAC (see :mod:`dpkit.ledger.integrity`). Someone holding the key can rewrite
everything consistently; a chain head saved elsewhere (``dpkit ledger verify --head``)
detects that, and a truncation.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["GENESIS", "ROW_FIELDS", "RELEASE_FIELDS", "OUTCOME_FIELDS", "EVENT_FIELDS",
           "V3_DATASET_FIELDS", "canonical", "link_hash", "legacy_link_hash", "row_mac",
           "bucket_mac", "checkpoint_mac", "key_id", "request_digest", "release_body",
           "outcome_body", "event_body", "legacy_body", "subject", "verify_links",
           "hash_problems"]

GENESIS = "0" * 64

RELEASE_FIELDS = ("id", "dataset", "analyst", "study", "time", "query", "measure", "loss",
                   "noise", "idempotency_key", "request_sha256", "dataset_spent",
                   "grant_spent", "seq")
OUTCOME_FIELDS = ("release_id", "time", "status", "result_sha256", "stored_sha256", "seq")
EVENT_FIELDS = ("subject", "time", "body", "seq")

# schema version 2 (unkeyed SHA-256), read once when a version-2 ledger is migrated
_V2_RELEASE_FIELDS = ("id", "dataset", "analyst", "study", "time", "query", "measure", "loss",
                      "noise", "idempotency_key", "seq")
_V2_OUTCOME_FIELDS = ("release_id", "time", "status", "result_sha256", "seq")

ROW_FIELDS: dict[str, tuple[str, ...]] = {
    "datasets": ("name", "measure", "cap", "privacy_unit", "schema", "created", "spent",
                 "per_day", "seq", "window_minute", "window_spent"),
    "analysts": ("name", "token_sha256", "created", "seq"),
    "grants": ("analyst", "dataset", "cap", "spent", "seq"),
    "studies": ("name", "dataset", "description", "created", "seq"),
    "streams": ("release_id", "step", "state", "seq"),
}


# schema version 3 signed the dataset rows without the burn-rate window (read once, when a
# version-3 ledger is migrated)
V3_DATASET_FIELDS = ROW_FIELDS["datasets"][:-2]


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(body: object) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 characters kept."""
    return _CANONICAL.encode(body)


def _mac(key: bytes, message: str) -> str:
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def link_hash(key: bytes, prev_hash: str, body: Mapping[str, Any]) -> str:
    """HMAC-SHA256 of the previous link's hash followed by the canonical body."""
    return _mac(key, prev_hash + canonical(body))


def legacy_link_hash(prev_hash: str, body: Mapping[str, Any]) -> str:
    """A schema-version-2 link: unkeyed SHA-256 (checked once, when migrating)."""
    return hashlib.sha256((prev_hash + canonical(body)).encode()).hexdigest()


def row_mac(key: bytes, table: str, row: Mapping[Any, Any],
            fields: tuple[str, ...] | None = None) -> str:
    """The MAC of a mutable row: HMAC-SHA256 over ``row:<table>:`` and its canonical
    fields (``ROW_FIELDS[table]``, including the ``seq`` of the last link that changed
    it; ``fields``: another list, for an older schema). The prefix keeps it apart from link
    hashes, whose input starts with a hex digest."""
    names = ROW_FIELDS[table] if fields is None else fields
    return _mac(key, f"row:{table}:" + canonical({k: row[k] for k in names}))


def bucket_mac(key: bytes, dataset: str, minute: int, spent: str) -> str:
    """The MAC of a burn-rate bucket (:mod:`dpkit.ledger.window`): HMAC-SHA256 over
    ``burn:`` and its dataset, minute and sum. A bucket only grows, so an older signed copy
    or a deleted bucket can only make the window count *more* loss when it expires; ``verify``
    re-derives every bucket from the chained releases."""
    return _mac(key, "burn:" + canonical([dataset, minute, spent]))


def checkpoint_mac(key: bytes, text: str) -> str:
    """The MAC of a checkpoint (:mod:`dpkit.ledger.checkpoint`): HMAC-SHA256 over
    ``checkpoint:`` and its canonical JSON."""
    return _mac(key, "checkpoint:" + text)


def key_id(key: bytes) -> str:
    """A fingerprint of the MAC key (stored in ``meta``; it names the key, reveals nothing)."""
    return _mac(key, "dpkit ledger key id")[:16]


def request_digest(dataset: str, analyst: str | None, query: str, loss: str,
                   noise: str | None) -> str:
    """SHA-256 of a release request: dataset, analyst, canonical query text, exact loss and
    noise plan. An idempotency key is bound to it: the same key with another request is
    refused."""
    body = {"dataset": dataset, "analyst": analyst, "query": query, "loss": loss,
            "noise": noise}
    return hashlib.sha256(canonical(body).encode()).hexdigest()


def subject(table: str, *key: str) -> str:
    """The row an event changes, as canonical JSON (``["grants", analyst, dataset]``)."""
    return canonical([table, *key])


def release_body(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The chained body of a release link: its kind and the fields of :data:`RELEASE_FIELDS`."""
    return {"kind": "release", **{k: row[k] for k in RELEASE_FIELDS}}


def outcome_body(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The chained body of an outcome link: its kind and :data:`OUTCOME_FIELDS`."""
    return {"kind": "outcome", **{k: row[k] for k in OUTCOME_FIELDS}}


def event_body(row: Mapping[Any, Any]) -> dict[str, Any]:
    """The chained body of an admin event link: its kind, the event and :data:`EVENT_FIELDS`."""
    return {"kind": "event", "event": row["kind"], **{k: row[k] for k in EVENT_FIELDS}}


def legacy_body(kind: str, row: Mapping[Any, Any]) -> dict[str, Any]:
    """A version-2 link body (``kind``: release or outcome)."""
    fields = _V2_RELEASE_FIELDS if kind == "release" else _V2_OUTCOME_FIELDS
    return {"kind": kind, **{k: row[k] for k in fields}}


def describe(body: Mapping[str, Any]) -> str:
    """A link's name in a problem report, e.g. ``release 12 (seq 40)``."""
    if body["kind"] == "event":
        return f"event {body['event']} {body['subject']} (seq {body['seq']})"
    if body["kind"] == "release":
        return f"release {body['id']} (seq {body['seq']})"
    return f"outcome of release {body['release_id']} (seq {body['seq']})"


def verify_links(links: Iterable[tuple[dict[str, Any], str, str]], key: bytes | None,
                 start: tuple[str, int] = (GENESIS, 1)) -> list[str]:
    """Check (body, prev_hash, hash) links in ``seq`` order; return the problems found.
    ``key`` None checks version-2 (unkeyed) links; ``start``: the hash the first link must
    follow and its ``seq`` (after a checkpoint)."""
    problems, (expected_prev, expected_seq) = [], start
    for body, prev, digest in links:
        if body["seq"] != expected_seq:
            problems.append(f"{describe(body)}: expected seq {expected_seq} (a link is "
                            "missing, duplicated or reordered)")
            expected_seq = body["seq"] if isinstance(body["seq"], int) else expected_seq
        if prev != expected_prev:
            problems.append(f"{describe(body)}: prev_hash does not match the previous link")
        problems += hash_problems([(body, prev, digest)], key)
        expected_prev, expected_seq = digest, expected_seq + 1
    return problems


def hash_problems(links: Iterable[tuple[dict[str, Any], str, str]], key: bytes | None
                  ) -> list[str]:
    """The links whose content does not match their (keyed) hash."""
    problems = []
    for body, prev, digest in links:
        recomputed = (legacy_link_hash(prev, body) if key is None
                      else link_hash(key, prev, body))
        if not hmac.compare_digest(recomputed, str(digest)):
            problems.append(f"{describe(body)}: content does not match its hash (edited "
                            "outside the ledger)")
    return problems
