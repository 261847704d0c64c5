"""Ledger tampering (issue 16, findings 7 and 9): each test is the attack, done as an attacker
who can write the database but does not hold the MAC key would do it — SQL on the SQLite
file (sqlite3, or SQLAlchemy) or on the PostgreSQL database — and checks both that
``verify`` names the change and that the change buys nothing: no debit beyond a cap, no
replay of a replaced answer, no login with a planted token. On the code before the fix every
one of these edits went unnoticed by ``verify`` and most were honoured by the next debit.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import warnings
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet
from typer.testing import CliRunner

import dpkit as dp
from dpkit.cli.main import app as cli
from dpkit.errors import (
    BudgetExceededError,
    IdempotencyConflictError,
    LedgerError,
    LedgerIntegrityError,
    StreamRollbackError,
)
from dpkit.ledger import IdempotentReplay, Ledger, LedgerAccountant, chain
from dpkit.ledger.registry import token_digest
from dpkit.stream import ContinualRelease


def tamper(location: str, sql: str, **params) -> None:
    """The attack: SQL straight on the database, outside the ledger (foreign keys are not
    enforced: off by default in SQLite, bypassed by a PostgreSQL superuser)."""
    url = location if "://" in location else f"sqlite:///{location}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        if "://" in location:
            conn.execute(sa.text("SET session_replication_role = replica"))
        conn.execute(sa.text(sql), params)
    engine.dispose()


def read(location: str, sql: str, **params):
    url = location if "://" in location else f"sqlite:///{location}"
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text(sql), params).all()
    engine.dispose()
    return rows


def setup(location: str, grant_cap: float | None = 1) -> Ledger:
    """Dataset d (cap ε = 10) and analyst ana (grant ε = ``grant_cap``), who spends 1/2."""
    reg = Ledger(location)
    reg.register("d", dp.PureDP(10))
    reg.add_analyst("ana", token="ana-token")
    reg.grant("ana", "d", None if grant_cap is None else dp.PureDP(grant_cap))
    rid = reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()", analyst="ana")
    reg.mark(rid, "released", "ab" * 32)
    assert reg.verify() == []
    return reg


def said(problems: list[str], *words: str) -> bool:
    return any(all(w in p for w in words) for p in problems)


# -- grants --------------------------------------------------------------------------------
def test_reset_grant_spend_is_reported_and_refused(location):
    setup(location)
    tamper(location, "UPDATE grants SET spent = :zero", zero='{"epsilon": "0"}')
    reg = Ledger(location)
    assert said(reg.verify(), "grants ('ana', 'd')", "spent", "edited outside the ledger")
    with pytest.raises(LedgerIntegrityError, match="grants"):
        reg.debit("d", dp.PureDP(Fraction(3, 4)), "count()", analyst="ana")  # 1/2 + 3/4 > 1
    assert reg.spent("d", analyst="ana") == dp.PureDP(Fraction(1, 2))
    assert reg.count() == 1


def test_raised_grant_cap_is_reported_and_refused(location):
    setup(location)
    tamper(location, "UPDATE grants SET cap = :cap", cap='{"epsilon": "100"}')
    reg = Ledger(location)
    assert said(reg.verify(), "grants ('ana', 'd')", "cap")
    with pytest.raises(LedgerIntegrityError):
        reg.debit("d", dp.PureDP(2), "count()", analyst="ana")
    with pytest.raises(LedgerIntegrityError):  # the server's view of the grant
        reg.grant_of("ana", "d")
    assert reg.count() == 1


def test_grant_row_rolled_back_to_an_older_signed_copy(location):
    """A row copied before some debits carries a valid MAC; it is still refused, as it is
    not the last state the chain recorded."""
    reg = setup(location)
    old = read(location, "SELECT spent, seq, mac FROM grants")[0]
    reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()", analyst="ana")  # the grant is used up
    tamper(location, "UPDATE grants SET spent = :s, seq = :q, mac = :m", s=old[0], q=old[1],
           m=old[2])
    reg = Ledger(location)
    assert said(reg.verify(), "grants ('ana', 'd')", "seq")
    with pytest.raises(LedgerIntegrityError, match="latest state"):
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()", analyst="ana")


def test_deleted_latest_release_is_reported_and_refused(location):
    reg = setup(location)
    rid = reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()", analyst="ana")
    tamper(location, "DELETE FROM releases WHERE id = :rid", rid=rid)
    reg = Ledger(location)
    problems = reg.verify()
    assert said(problems, "truncated") and said(problems, "datasets 'd'", "spent")
    with pytest.raises(LedgerIntegrityError):
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()", analyst="ana")


# -- datasets and policies -----------------------------------------------------------------
@pytest.mark.parametrize("edit", ["UPDATE datasets SET per_day = NULL",
                                  "UPDATE datasets SET per_day = '{\"epsilon\": \"100\"}'"])
def test_removed_or_raised_burn_rate_is_reported_and_refused(location, edit):
    reg = setup(location, grant_cap=None)
    reg.set_policy("d", dp.PureDP(1))
    tamper(location, edit)
    reg = Ledger(location)
    assert said(reg.verify(), "datasets 'd'", "per_day")
    with pytest.raises(LedgerIntegrityError):
        reg.debit("d", dp.PureDP(1), "count()")  # 1/2 + 1 > 1 per day
    assert reg.count() == 1


@pytest.mark.parametrize("edit", [
    "UPDATE releases SET time = '2000-01-01T00:00:00.000000+00:00'",  # out of the window
    "UPDATE releases SET loss = '{\"epsilon\": \"1/1000\"}'"])
def test_recent_releases_moved_or_shrunk_do_not_lift_the_burn_rate(location, edit):
    reg = setup(location, grant_cap=None)
    reg.set_policy("d", dp.PureDP(1))
    reg.debit("d", dp.PureDP(Fraction(1, 4)), "count()")
    tamper(location, edit)
    reg = Ledger(location)
    assert said(reg.verify(), "does not match its hash")
    with pytest.raises(LedgerIntegrityError):
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()")  # 3/4 + 1/2 > 1 per day
    assert reg.count() == 2


def test_burn_rate_window_reads_only_recent_releases(location, monkeypatch):
    """The policy's walk stops at the first release older than the window (plus slack): its
    cost does not grow with the ledger's history (an edited old release is found by verify,
    not by every debit), and old releases do not count."""
    from datetime import timedelta

    from dpkit.ledger import codec

    reg = Ledger(location)
    reg.register("d", dp.PureDP(10))
    with monkeypatch.context() as m:
        m.setattr("dpkit.ledger.registry.now", lambda: codec.now() - timedelta(days=3))
        for _ in range(300):
            reg.debit("d", dp.PureDP(Fraction(1, 100)), "count()")
    tamper(location, "UPDATE releases SET loss = '{\"epsilon\": \"1/1000\"}' WHERE id = 2")
    reg = Ledger(location)
    reg.set_policy("d", dp.PureDP(Fraction(1, 2)))
    reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()")
    with pytest.raises(BudgetExceededError, match="burn-rate"):
        reg.debit("d", dp.PureDP(Fraction(1, 100)), "count()")
    assert said(reg.verify(), "release 2 (seq", "does not match its hash")


def test_changed_dataset_cap_is_reported_and_refused(location):
    setup(location, grant_cap=None)
    tamper(location, "UPDATE datasets SET cap = :cap", cap='{"epsilon": "1000"}')
    reg = Ledger(location)
    assert said(reg.verify(), "datasets 'd'", "cap")
    with pytest.raises(LedgerIntegrityError):
        reg.debit("d", dp.PureDP(20), "count()")
    with pytest.raises(LedgerIntegrityError):  # a session with the forged budget cannot open
        dp.Session(pl.DataFrame({"x": [1, 2]}), budget=dp.PureDP(1000), ledger=Ledger(location),
                   dataset="d")


def test_reset_dataset_spend_is_reported_and_refused(location):
    reg = setup(location, grant_cap=None)
    reg.debit("d", dp.PureDP(9), "count()")
    tamper(location, "UPDATE datasets SET spent = :zero", zero='{"epsilon": "0"}')
    reg = Ledger(location)
    assert said(reg.verify(), "datasets 'd'", "spent")
    with pytest.raises(LedgerIntegrityError):
        reg.debit("d", dp.PureDP(1), "count()")


def test_deleted_dataset_row_cannot_be_registered_afresh(location):
    """Deleting the dataset's row (foreign keys are off in a plain connection) and opening a
    session would have registered it again with nothing spent."""
    setup(location, grant_cap=None)
    tamper(location, "DELETE FROM grants")
    tamper(location, "DELETE FROM datasets")
    with pytest.raises(LedgerIntegrityError, match="deleted"):
        dp.Session(pl.DataFrame({"x": [1, 2]}), budget=dp.PureDP(10), ledger=Ledger(location),
                   dataset="d")
    assert said(Ledger(location).verify(), "datasets 'd'", "missing")


# -- analysts ------------------------------------------------------------------------------
def test_planted_token_hash_authenticates_nobody(location):
    setup(location)
    tamper(location, "UPDATE analysts SET token_sha256 = :h WHERE name = 'ana'",
           h=token_digest("attacker-token"))
    reg = Ledger(location)
    assert said(reg.verify(), "analysts 'ana'", "token_sha256")
    assert reg.analyst_for_token("attacker-token") is None
    assert reg.analyst_for_token("ana-token") is None


def test_inserted_analyst_authenticates_nobody(location):
    setup(location)
    tamper(location, "INSERT INTO analysts (name, token_sha256, created) VALUES "
           "('mallory', :h, '2026-01-01')", h=token_digest("mallory-token"))
    tamper(location, "INSERT INTO grants (analyst, dataset, cap, spent) VALUES "
           "('mallory', 'd', NULL, '{\"epsilon\": \"0\"}')")
    reg = Ledger(location)
    problems = reg.verify()
    assert said(problems, "analysts 'mallory'", "not in the chain")
    assert said(problems, "grants ('mallory', 'd')", "not in the chain")
    assert reg.analyst_for_token("mallory-token") is None
    with pytest.raises(LedgerIntegrityError):
        reg.debit("d", dp.PureDP(1), "count()", analyst="mallory")


def test_rotated_token_replaces_the_old_one(location):
    reg = setup(location)
    new = reg.rotate_token("ana")
    assert reg.analyst_for_token(new) == "ana" and reg.analyst_for_token("ana-token") is None
    assert reg.verify() == []


# -- releases, outcomes, stored answers ------------------------------------------------------
def _released_with_key(location: str, encryption_key: bytes | None = None):
    s = dp.Session(pl.DataFrame({"x": range(100)}), budget=dp.PureDP(1),
                   ledger=Ledger(location, encryption_key=encryption_key), dataset="d")
    first = s.query().count().release(epsilon=0.5, idempotency_key="req-1")
    return s, first


def test_replaced_stored_answer_is_not_replayed(location):
    s, first = _released_with_key(location)
    forged = pl.DataFrame({"count": [12345]}).write_json()
    tamper(location, "UPDATE releases SET result = :r", r=forged)
    with pytest.raises(LedgerIntegrityError, match="stored answer"):
        s.query().count().release(epsilon=0.5, idempotency_key="req-1")
    reg = Ledger(location)
    assert said(reg.verify(), "release 1", "stored result")
    assert reg.count() == 1 and s.spent == dp.PureDP(Fraction(1, 2))


def test_swapped_encrypted_answer_is_not_replayed(tmp_path, monkeypatch):
    """Fernet authenticates a ciphertext but not which release it belongs to: a valid
    ciphertext of another release is caught by the chained hash."""
    from cryptography.fernet import Fernet

    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    location, key = str(tmp_path / "l.sqlite"), Fernet.generate_key()
    s, _ = _released_with_key(location, key)
    s.query().filter(pl.col("x") > 50).count().release(epsilon=0.25, idempotency_key="req-2")
    db = sqlite3.connect(location)
    other = db.execute("SELECT result FROM releases WHERE id = 2").fetchone()[0]
    db.execute("UPDATE releases SET result = ? WHERE id = 1", (other,))
    db.commit()
    db.close()
    with pytest.raises(LedgerIntegrityError):
        s.query().count().release(epsilon=0.5, idempotency_key="req-1")


def test_changed_outcome_is_reported_and_not_replayed(location):
    """The attacker replaces the stored answer and updates the outcome's hashes to match."""
    s, _ = _released_with_key(location)
    forged = pl.DataFrame({"count": [12345]}).write_json()
    digest = hashlib.sha256(forged.encode()).hexdigest()
    tamper(location, "UPDATE releases SET result = :r", r=forged)
    tamper(location, "UPDATE outcomes SET stored_sha256 = :h", h=digest)
    with pytest.raises(LedgerIntegrityError, match="outcome"):
        s.query().count().release(epsilon=0.5, idempotency_key="req-1")
    assert said(Ledger(location).verify(), "outcome of release 1", "does not match its hash")


def test_outcome_status_edit_is_reported(location):
    reg = setup(location)
    tamper(location, "UPDATE outcomes SET status = 'failed'")
    tamper(location, "UPDATE releases SET status = 'failed'")
    assert said(Ledger(location).verify(), "outcome of release 1", "edited")
    del reg


def test_edited_release_loss_is_reported(location):
    setup(location)
    tamper(location, "UPDATE releases SET loss = :l", l='{"epsilon": "1/1000"}')
    assert said(Ledger(location).verify(), "release 1 (seq", "does not match its hash")


def test_whole_chain_rewritten_without_the_key_is_reported(location):
    """The version-2 attack: edit a loss and recompute every link (SHA-256 was unkeyed).
    Without the key, the best the attacker can do is a guess; every link then fails."""
    setup(location)
    tamper(location, "UPDATE releases SET loss = :l", l='{"epsilon": "1/1000"}')
    guess, head = b"guess", chain.GENESIS
    rows = read(location, "SELECT 'release', id, seq FROM releases UNION ALL "
                "SELECT 'outcome', id, seq FROM outcomes UNION ALL "
                "SELECT 'event', seq, seq FROM events ORDER BY 3")
    for kind, ident, _ in rows:
        table = {"release": "releases", "outcome": "outcomes", "event": "events"}[kind]
        key_col = "seq" if kind == "event" else "id"
        url = location if "://" in location else f"sqlite:///{location}"
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            row = conn.execute(sa.text(f"SELECT * FROM {table} WHERE {key_col} = :i"),
                               {"i": ident}).mappings().one()
        engine.dispose()
        body = {"release": chain.release_body, "outcome": chain.outcome_body,
                "event": chain.event_body}[kind](row)
        digest = chain.link_hash(guess, head, body)
        tamper(location, f"UPDATE {table} SET prev_hash = :p, hash = :h WHERE {key_col} = :i",
               p=head, h=digest, i=ident)
        head = digest
    tamper(location, "UPDATE meta SET value = :h WHERE key = 'chain_head'", h=head)
    problems = Ledger(location).verify()
    assert sum("does not match its hash" in p for p in problems) == len(rows)


# -- idempotency keys are bound to their request (finding 9) -------------------------------
def test_idempotency_key_with_another_query_is_refused(location):
    s, first = _released_with_key(location)
    with pytest.raises(IdempotencyConflictError, match="another request"):
        s.query().filter(pl.col("x") > 50).count().release(epsilon=0.5,
                                                            idempotency_key="req-1")
    with pytest.raises(IdempotencyConflictError):  # same query text, another ε
        s.query().count().release(epsilon=0.25, idempotency_key="req-1")
    again = s.query().count().release(epsilon=0.5, idempotency_key="req-1")
    assert again.equals(first)
    assert Ledger(location).count() == 1 and s.spent == dp.PureDP(Fraction(1, 2))
    assert issubclass(IdempotencyConflictError, LedgerError)  # the server answers 409


def test_idempotency_key_is_per_analyst_and_dataset(location):
    reg = setup(location, grant_cap=None)
    reg.add_analyst("bob")
    reg.grant("bob", "d")
    rid = reg.debit("d", dp.PureDP(Fraction(1, 10)), "count()", analyst="ana",
                    idempotency_key="k")
    reg.mark(rid, "released", "cd" * 32, "[1]")
    with pytest.raises(IdempotentReplay):
        reg.debit("d", dp.PureDP(Fraction(1, 10)), "count()", analyst="ana",
                  idempotency_key="k")
    with pytest.raises(IdempotencyConflictError):
        reg.debit("d", dp.PureDP(Fraction(1, 10)), "sum(x)", analyst="ana",
                  idempotency_key="k")
    reg.debit("d", dp.PureDP(Fraction(1, 10)), "sum(x)", analyst="bob", idempotency_key="k")
    assert reg.verify() == []


def test_server_answers_409_to_a_reused_key(tmp_path, monkeypatch):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    pytest.importorskip("yaml")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with")
        from fastapi.testclient import TestClient

    from dpkit.server.app import create_app
    from dpkit.server.config import parse_config

    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    pl.DataFrame({"age": list(range(18, 90)) * 5}).write_csv(tmp_path / "t.csv")
    app = create_app(parse_config({
        "ledger": "ledger.sqlite",
        "datasets": [{"name": "t", "source": {"kind": "csv", "path": "t.csv"},
                      "budget": {"measure": "pure", "epsilon": 3}}]}, base=tmp_path))
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst("alice")
    ledger.grant("alice", "t")
    count = {"aggs": [{"agg": "count"}], "budget": {"epsilon": "1/4"},
             "idempotency_key": "r-1"}
    older = {**count, "steps": [{"step": "filter", "expr": {
        "op": ">=", "args": [{"col": "age"}, {"lit": 30}]}}]}
    with TestClient(app) as http:
        headers = {"Authorization": f"Bearer {token}"}
        first = http.post("/v1/datasets/t/release", json=count, headers=headers)
        assert first.status_code == 200, first.text
        again = http.post("/v1/datasets/t/release", json=count, headers=headers)
        assert again.status_code == 200 and again.json()["replayed"]
        other = http.post("/v1/datasets/t/release", json=older, headers=headers)
        assert other.status_code == 409 and other.json()["error"] == "IdempotencyConflictError"
    assert ledger.count() == 1


# -- keys, migration, the command line -------------------------------------------------------
def test_the_mac_key_must_be_this_ledgers(tmp_path, monkeypatch):
    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    path = tmp_path / "l.sqlite"
    setup(str(path))
    key_file = Path(str(path) + ".key")
    assert key_file.exists() and key_file.stat().st_mode & 0o077 == 0
    monkeypatch.setenv("DPKIT_LEDGER_MAC_KEY", "another key")
    with pytest.raises(LedgerError, match="not the key"):
        Ledger(path)
    monkeypatch.setenv("DPKIT_LEDGER_MAC_KEY", key_file.read_text().strip())
    assert Ledger(path).verify() == []
    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY")
    key_file.rename(tmp_path / "elsewhere.key")
    with pytest.raises(LedgerError, match="missing"):
        Ledger(path)
    reg = Ledger(path, mac_key=(tmp_path / "elsewhere.key").read_text().strip())
    assert reg.verify() == []


V2_SCHEMA = """
CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE datasets (name VARCHAR(255) PRIMARY KEY, measure VARCHAR(16) NOT NULL,
    cap TEXT NOT NULL, privacy_unit TEXT NOT NULL, schema TEXT NOT NULL,
    created VARCHAR(32) NOT NULL, spent TEXT, per_day TEXT);
CREATE TABLE analysts (name VARCHAR(255) PRIMARY KEY, token_sha256 VARCHAR(64) UNIQUE,
    created VARCHAR(32) NOT NULL);
CREATE TABLE grants (analyst VARCHAR(255) REFERENCES analysts(name),
    dataset VARCHAR(255) REFERENCES datasets(name), cap TEXT, spent TEXT NOT NULL,
    PRIMARY KEY (analyst, dataset));
CREATE TABLE studies (name VARCHAR(255) PRIMARY KEY, dataset VARCHAR(255) NOT NULL
    REFERENCES datasets(name), description TEXT NOT NULL, created VARCHAR(32) NOT NULL);
CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset VARCHAR(255) NOT NULL
    REFERENCES datasets(name), time VARCHAR(32) NOT NULL, query TEXT NOT NULL,
    measure VARCHAR(16) NOT NULL, loss TEXT NOT NULL, status VARCHAR(16) NOT NULL,
    result_sha256 VARCHAR(64), analyst VARCHAR(255), study VARCHAR(255), noise TEXT,
    idempotency_key VARCHAR(255), result TEXT, seq INTEGER, prev_hash VARCHAR(64),
    hash VARCHAR(64));
CREATE INDEX releases_dataset ON releases (dataset);
CREATE INDEX releases_idempotency ON releases (dataset, analyst, idempotency_key);
CREATE TABLE outcomes (id INTEGER PRIMARY KEY AUTOINCREMENT, release_id INTEGER NOT NULL
    REFERENCES releases(id), time VARCHAR(32) NOT NULL, status VARCHAR(16) NOT NULL,
    result_sha256 VARCHAR(64), seq INTEGER NOT NULL, prev_hash VARCHAR(64) NOT NULL,
    hash VARCHAR(64) NOT NULL);
"""


def _v2_ledger(path: Path, grant_spent: str = '{"epsilon": "1/2"}') -> str:
    """A version-2 ledger as dpkit 0.2 wrote it: ana spent 1/2 of a grant of 1 on d, in a
    released answer with a stored result; returns its chain head."""
    db = sqlite3.connect(path)
    db.executescript(V2_SCHEMA)
    db.execute("INSERT INTO datasets VALUES ('d', 'PureDP', '{\"epsilon\": \"10\"}', 'rows', '',"
               " '2026-01-01T00:00:00+00:00', '{\"epsilon\": \"1/2\"}', "
               "'{\"epsilon\": \"5\"}')")
    db.execute("INSERT INTO analysts VALUES ('ana', ?, '2026-01-01T00:00:00+00:00')",
               (token_digest("ana-token"),))
    db.execute("INSERT INTO grants VALUES ('ana', 'd', '{\"epsilon\": \"1\"}', ?)",
               (grant_spent,))
    release = {"id": 1, "dataset": "d", "analyst": "ana", "study": None,
               "time": "2026-01-02T00:00:00+00:00", "query": "count()", "measure": "PureDP",
               "loss": '{"epsilon": "1/2"}', "noise": None, "idempotency_key": "k", "seq": 1}
    h1 = chain.legacy_link_hash(chain.GENESIS, chain.legacy_body("release", release))
    outcome = {"release_id": 1, "time": "2026-01-02T00:00:01+00:00", "status": "released",
               "result_sha256": "ab" * 32, "seq": 2}
    h2 = chain.legacy_link_hash(h1, chain.legacy_body("outcome", outcome))
    db.execute("INSERT INTO releases (id, dataset, time, query, measure, loss, status, "
               "result_sha256, analyst, idempotency_key, result, seq, prev_hash, hash) VALUES "
               "(1, 'd', ?, 'count()', 'PureDP', ?, 'released', ?, 'ana', 'k', '[7]', 1, ?, ?)",
               (release["time"], release["loss"], "ab" * 32, chain.GENESIS, h1))
    db.execute("INSERT INTO outcomes VALUES (1, 1, ?, 'released', ?, 2, ?, ?)",
               (outcome["time"], "ab" * 32, h1, h2))
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", "2"),
                                                     ("chain_head", h2), ("chain_seq", "2")])
    db.commit()
    db.close()
    return h2


def test_version_2_ledger_is_migrated_and_covered(tmp_path, monkeypatch):
    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    path = tmp_path / "v2.sqlite"
    old_head = _v2_ledger(path, grant_spent='{"epsilon": "0"}')  # reset before the upgrade
    reg = Ledger(path)
    assert reg.verify() == [] and reg.verify(old_head) == []  # a v2 head saved earlier
    assert reg.grant_of("ana", "d") == {"cap": dp.PureDP(1), "spent": dp.PureDP(Fraction(1, 2))}
    with pytest.raises(IdempotentReplay) as replay:
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()", analyst="ana", idempotency_key="k")
    assert replay.value.result == "[7]"
    with pytest.raises(BudgetExceededError, match="their cap"):
        reg.debit("d", dp.PureDP(Fraction(3, 4)), "count()", analyst="ana")
    tamper(str(path), "UPDATE grants SET cap = :c", c='{"epsilon": "9"}')  # now covered
    assert said(Ledger(path).verify(), "grants ('ana', 'd')", "cap")
    version = read(str(path), "SELECT value FROM meta WHERE key = 'schema_version'")[0][0]
    assert version == "6"


def test_version_2_ledger_with_a_broken_chain_is_not_migrated(tmp_path, monkeypatch):
    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    path = tmp_path / "v2.sqlite"
    _v2_ledger(path)
    tamper(str(path), "UPDATE releases SET loss = :l", l='{"epsilon": "1/100"}')
    with pytest.raises(LedgerError, match="cannot be migrated"):
        Ledger(path)
    assert read(str(path), "SELECT value FROM meta WHERE key = 'schema_version'")[0][0] == "2"


def test_cli_verify_names_the_problem_and_exits_1(tmp_path, monkeypatch):
    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    path = str(tmp_path / "l.sqlite")
    setup(path)
    run = CliRunner().invoke
    assert run(cli, ["ledger", "verify", "--ledger", path]).exit_code == 0
    tamper(path, "UPDATE grants SET spent = :z", z='{"epsilon": "0"}')
    res = run(cli, ["ledger", "verify", "--ledger", path])
    assert res.exit_code == 1 and "grants ('ana', 'd')" in res.output and "spent" in res.output
    Path(path + ".key").unlink()
    res = run(cli, ["ledger", "verify", "--ledger", path])
    assert res.exit_code == 1 and "MAC key is missing" in res.output


def test_export_and_listing_still_work_on_a_clean_ledger(location):
    reg = setup(location)
    exported = reg.export()
    assert exported["schema_version"] == 6 and json.dumps(exported, default=str)
    assert [d["name"] for d in reg.datasets()] == ["d"]


def test_cli_checkpoint_then_verify_since_it(tmp_path, monkeypatch):
    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    path = str(tmp_path / "l.sqlite")
    setup(path)
    run = CliRunner().invoke
    res = run(cli, ["ledger", "checkpoint", "--ledger", path])
    assert res.exit_code == 0 and "checkpoint signed" in res.output
    assert run(cli, ["ledger", "verify", "--since-checkpoint", "--ledger", path]).exit_code == 0
    tamper(path, "UPDATE grants SET spent = :z", z='{"epsilon": "0"}')
    res = run(cli, ["ledger", "verify", "--since-checkpoint", "--ledger", path])
    assert res.exit_code == 1 and "grants ('ana', 'd')" in res.output
    res = run(cli, ["ledger", "checkpoint", "--ledger", path])  # nothing signed over an edit
    assert res.exit_code == 1 and "no checkpoint stored" in res.output


# -- continual releases: the step mark (issue 30, finding B) ----------------------------------
def _stream(location: str, tmp_path: Path):
    """A stream on d (ε = 1) fed steps 1–3, its state saved then (the old copy, and the mark
    row as it was, when there is one), then fed steps 4 and 5."""
    reg = setup(location)
    key = Fernet.generate_key()
    s = ContinualRelease(32, accountant=LedgerAccountant(reg, "d"), mechanism="tree",
                         epsilon=1)
    for x in (1, 2, 3):
        s.feed(x)
    s.save(tmp_path / "old", key)
    step3 = read(location, "SELECT max(seq) FROM events WHERE kind = 'stream'")[0][0]
    try:
        old_row = read(location, "SELECT step, state, seq, mac FROM streams")
    except sa.exc.DatabaseError:  # no such table (the code before the fix)
        old_row = []
    for x in (4, 5):
        s.feed(x)
    return reg, s, key, step3, old_row


def _refused(reg: Ledger, s, key: bytes, tmp_path: Path) -> None:
    """The old state is not restored and step 4 is not released a second time."""
    acct = LedgerAccountant(reg, "d")
    with pytest.raises((LedgerIntegrityError, StreamRollbackError)):
        ContinualRelease.restore(tmp_path / "old", key, acct)
    with pytest.raises((LedgerIntegrityError, StreamRollbackError)):
        reg.advance_stream(s.release_id, 4)


@pytest.mark.parametrize("row", ["kept", "deleted"])
def test_deleted_newest_step_links_do_not_roll_a_stream_back(location, tmp_path, row):
    """The attack: delete the stream's newest step links and rewind the stored head to the
    link before them (the chain then ends cleanly), copy back the state saved at step 3.
    Before the fix the mark was the newest remaining link: step 4 was released again."""
    reg, s, key, step3, _ = _stream(location, tmp_path)
    tamper(location, "DELETE FROM events WHERE kind = 'stream' AND seq > :s", s=step3)
    head = read(location, "SELECT hash FROM events WHERE seq = :s", s=step3)[0][0]
    tamper(location, "UPDATE meta SET value = :h WHERE key = 'chain_head'", h=head)
    tamper(location, "UPDATE meta SET value = :s WHERE key = 'chain_seq'", s=str(step3))
    if row == "deleted":
        tamper(location, "DELETE FROM streams")
    _refused(reg, s, key, tmp_path)
    assert said(reg.verify(), f"streams '{s.release_id}'")


@pytest.mark.parametrize("row", ["kept", "rolled back"])
def test_deleted_step_links_before_a_checkpoint_are_reported(location, tmp_path, row):
    """The same deletion after a checkpoint was signed over the deleted links (and more
    links after it): ``verify --since-checkpoint`` reports it, from the mark row and from
    the checkpoint's copy of the mark (the row rolled back to its signed copy of step 3)."""
    reg, s, key, step3, old_row = _stream(location, tmp_path)
    assert reg.checkpoint() == []
    rid = reg.debit("d", dp.PureDP(Fraction(1, 10)), "count()")
    reg.mark(rid, "released", "ab" * 32)
    tamper(location, "DELETE FROM events WHERE kind = 'stream' AND seq > :s", s=step3)
    if row == "rolled back":
        (step, state, seq, mac), = old_row
        tamper(location, "UPDATE streams SET step = :a, state = :b, seq = :c, mac = :d",
               a=step, b=state, c=seq, d=mac)
    problems = reg.verify(since_checkpoint=True)
    assert said(problems, f"streams '{s.release_id}'"), problems
    assert said(reg.verify(), "expected seq")
    _refused(reg, s, key, tmp_path)


def test_an_intact_stream_verifies_from_a_checkpoint(location, tmp_path):
    """No false alarm: the mark rows, the checkpoint's marks and a stream fed on after the
    checkpoint all agree; a step out of order after it is refused."""
    reg, s, key, _, _ = _stream(location, tmp_path)
    assert reg.checkpoint() == []
    s.feed(6)
    assert reg.stream_step(s.release_id) == (6, None)
    assert reg.verify() == [] and reg.verify(since_checkpoint=True) == []
    with pytest.raises(StreamRollbackError):
        reg.advance_stream(s.release_id, 6)


def _as_version_4(location: str) -> None:
    """The ledger as schema 4 left it: no mark rows, checkpoints without marks."""
    tamper(location, "DROP TABLE streams")
    tamper(location, "UPDATE meta SET value = '4' WHERE key = 'schema_version'")


def test_version_4_ledger_gets_its_marks_from_the_chain(location, tmp_path):
    reg, s, key, _, _ = _stream(location, tmp_path)
    assert reg.checkpoint() == []
    reg.dispose()
    _as_version_4(location)
    reg = Ledger(location)
    assert read(location, "SELECT value FROM meta WHERE key = 'schema_version'")[0][0] == "6"
    assert read(location, "SELECT count(*) FROM checkpoints")[0][0] == 0  # held no marks
    assert reg.stream_step(s.release_id) == (5, None) and reg.verify() == []
    with pytest.raises(StreamRollbackError):  # the old state is stale, as before
        ContinualRelease.restore(tmp_path / "old", key, LedgerAccountant(reg, "d"))


def test_version_4_ledger_with_a_deleted_step_link_is_not_upgraded(location, tmp_path):
    reg, s, key, step3, _ = _stream(location, tmp_path)
    reg.dispose()
    _as_version_4(location)
    tamper(location, "DELETE FROM events WHERE seq = :s", s=step3 + 1)  # step 4, mid-chain
    with pytest.raises(LedgerError, match="cannot be upgraded"):
        Ledger(location)
    assert read(location, "SELECT value FROM meta WHERE key = 'schema_version'")[0][0] == "4"
