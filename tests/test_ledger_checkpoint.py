"""Signed checkpoints (issue 19): ``verify(since_checkpoint=True)`` replays only the links
after the newest checkpoint, and still finds every edit made after it; a checkpoint edited
without the key is refused."""

from __future__ import annotations

import json
import sqlite3
from fractions import Fraction

import dpkit as dp
from dpkit.ledger import Ledger, integrity

KEY = b"checkpoint-test-key"


def said(problems: list[str], *words: str) -> bool:
    return any(all(w in p for w in words) for p in problems)


def ledger(tmp_path, debits: int = 5) -> Ledger:
    reg = Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    reg.register("d", dp.PureDP(10))
    reg.set_policy("d", dp.PureDP(5))
    reg.add_analyst("ana", token="t")
    reg.grant("ana", "d", dp.PureDP(5))
    for _ in range(debits):
        rid = reg.debit("d", dp.PureDP(Fraction(1, 10)), "q", analyst="ana")
        reg.mark(rid, "released", "ab" * 32, "[1]")
    return reg


def sql(tmp_path, statement: str, *params) -> None:
    db = sqlite3.connect(tmp_path / "l.sqlite")
    with db:
        db.execute(statement, params)
    db.close()


def test_verify_from_a_checkpoint_reads_only_what_follows(tmp_path, monkeypatch):
    reg = ledger(tmp_path)
    assert reg.checkpoint() == []
    pending = reg.debit("d", dp.PureDP(Fraction(1, 10)), "q", analyst="ana")
    reg.mark(1, "failed", None)  # an outcome after the checkpoint for a release before it
    reg.mark(pending, "released", "cd" * 32, "[2]")
    seen = []
    real = integrity.links
    monkeypatch.setattr(integrity, "links", lambda conn, after=0: (
        seen.append(link[0]["seq"]) or link for link in real(conn, after)))
    assert reg.verify(since_checkpoint=True) == []
    assert len(seen) == 3  # the debit and the two outcomes after the checkpoint
    assert reg.verify() == [] and len(seen) > 3


def test_edits_after_the_checkpoint_are_found(tmp_path):
    reg = ledger(tmp_path)
    assert reg.checkpoint() == []
    rid = reg.debit("d", dp.PureDP(Fraction(1, 10)), "q", analyst="ana")
    reg.mark(rid, "released", "ab" * 32, "[1]")
    sql(tmp_path, "UPDATE releases SET loss = ? WHERE id = ?", '{"epsilon": "1/1000"}', rid)
    sql(tmp_path, "UPDATE grants SET spent = ?", '{"epsilon": "0"}')
    sql(tmp_path, "UPDATE burn SET spent = ?", '{"epsilon": "0"}')
    sql(tmp_path, "UPDATE releases SET result = '[9]' WHERE id = 1")  # an older release
    problems = Ledger(tmp_path / "l.sqlite", mac_key=KEY).verify(since_checkpoint=True)
    assert said(problems, f"release {rid} (seq", "does not match its hash")
    assert said(problems, "grants ('ana', 'd')", "spent")
    assert said(problems, "burn-rate bucket 'd'", "spent")
    # an old release's stored answer is the full verify's to find (the checkpoint vouched)
    assert not said(problems, "release 1:")
    assert said(Ledger(tmp_path / "l.sqlite", mac_key=KEY).verify(), "release 1:", "stored")


def test_an_edited_checkpoint_is_refused(tmp_path):
    reg = ledger(tmp_path)
    assert reg.checkpoint() == []
    db = sqlite3.connect(tmp_path / "l.sqlite")
    state = json.loads(db.execute("SELECT state FROM checkpoints").fetchone()[0])
    db.close()
    for row in state["rows"]["datasets"]:
        row["spent"] = '{"epsilon": "0"}'  # the attacker's clean slate
    sql(tmp_path, "UPDATE checkpoints SET state = ?", json.dumps(state))
    problems = Ledger(tmp_path / "l.sqlite", mac_key=KEY).verify(since_checkpoint=True)
    assert said(problems, "checkpoint at seq", "MAC does not match")


def test_no_checkpoint_on_a_tampered_ledger(tmp_path):
    reg = ledger(tmp_path)
    sql(tmp_path, "UPDATE releases SET loss = ? WHERE id = 2", '{"epsilon": "1/1000"}')
    assert said(reg.checkpoint(), "release 2 (seq")
    db = sqlite3.connect(tmp_path / "l.sqlite")
    assert db.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 0
    db.close()
