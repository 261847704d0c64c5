"""The release log's hash chain: every debit and every outcome is a link.

Link i stores ``hash_i = SHA-256(hash_{i−1} ‖ canonical JSON of its immutable fields)``, with
``hash_0`` the genesis value; ``seq`` orders links across the ``releases`` and ``outcomes``
tables. Changing, deleting or reordering any recorded loss, query, status or result hash
breaks every later link, which :func:`verify_links` reports (a tamperer who rewrites the
whole chain is caught by comparing the head with a copy kept elsewhere, e.g. ``dpkit ledger
verify --head``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["GENESIS", "link_hash", "release_body", "outcome_body", "verify_links"]

GENESIS = "0" * 64

_RELEASE_FIELDS = ("id", "dataset", "analyst", "study", "time", "query", "measure", "loss",
                   "noise", "idempotency_key", "seq")
_OUTCOME_FIELDS = ("release_id", "time", "status", "result_sha256", "seq")


def _canonical(body: Mapping[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def link_hash(prev_hash: str, body: Mapping[str, Any]) -> str:
    return hashlib.sha256((prev_hash + _canonical(body)).encode()).hexdigest()


def release_body(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": "release", **{k: row[k] for k in _RELEASE_FIELDS}}


def outcome_body(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": "outcome", **{k: row[k] for k in _OUTCOME_FIELDS}}


def verify_links(links: Iterable[tuple[dict[str, Any], str, str]]) -> list[str]:
    """Check (body, prev_hash, hash) links in ``seq`` order; return the problems found."""
    problems, expected_prev, expected_seq = [], GENESIS, 1
    for body, prev, digest in links:
        where = f"{body['kind']} seq {body['seq']}"
        if body["seq"] != expected_seq:
            problems.append(f"{where}: expected seq {expected_seq} (a link is missing or "
                            "reordered)")
            expected_seq = body["seq"]
        if prev != expected_prev:
            problems.append(f"{where}: prev_hash does not match the previous link")
        if link_hash(prev, body) != digest:
            problems.append(f"{where}: content does not match its hash (edited)")
        expected_prev, expected_seq = digest, expected_seq + 1
    return problems
