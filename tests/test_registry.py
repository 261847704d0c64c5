"""The epsilon registry, version 2: migrations, analysts and grants, burn-rate policies,
idempotency keys, encryption at rest, the hash chain, concurrency, and the CLI."""

from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3
from fractions import Fraction

import polars as pl
import pytest
from cryptography.fernet import Fernet
from typer.testing import CliRunner

import dpkit as dp
from dpkit.cli.main import app
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.ledger import IdempotentReplay, Ledger

V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE datasets (name TEXT PRIMARY KEY, measure TEXT NOT NULL, cap TEXT NOT NULL,
    privacy_unit TEXT NOT NULL, schema TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE releases (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL,
    time TEXT NOT NULL, query TEXT NOT NULL, measure TEXT NOT NULL, loss TEXT NOT NULL,
    status TEXT NOT NULL, result_sha256 TEXT);
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO datasets VALUES ('old', 'PureDP', '{"epsilon": "1"}', 'rows', '', '2026-01-01');
INSERT INTO releases VALUES (1, 'old', '2026-01-02T00:00:00+00:00', 'count', 'PureDP',
    '{"epsilon": "1/4"}', 'released', NULL);
"""


def test_version_1_ledger_is_migrated_and_chained(tmp_path):
    path = tmp_path / "v1.sqlite"
    db = sqlite3.connect(path)
    db.executescript(V1_SCHEMA)
    db.close()
    reg = Ledger(path)
    assert reg.spent("old") == dp.PureDP(Fraction(1, 4))
    assert reg.verify() == []
    reg.debit("old", dp.PureDP(Fraction(1, 4)), "count")
    assert reg.spent("old") == dp.PureDP(Fraction(1, 2)) and reg.verify() == []


def test_analyst_grants_and_burn_rate(tmp_path):
    reg = Ledger(tmp_path / "l.sqlite")
    reg.register("d", dp.PureDP(10))
    token = reg.add_analyst("ana")
    assert reg.analyst_for_token(token) == "ana" and reg.analyst_for_token("x") is None
    with pytest.raises(LedgerError, match="no grant"):
        reg.debit("d", dp.PureDP(1), "q", analyst="ana")
    reg.grant("ana", "d", dp.PureDP(2))
    reg.debit("d", dp.PureDP(Fraction(3, 2)), "q", analyst="ana")
    with pytest.raises(BudgetExceededError, match="their cap"):
        reg.debit("d", dp.PureDP(1), "q", analyst="ana")
    reg.set_policy("d", dp.PureDP(2))
    with pytest.raises(BudgetExceededError, match="burn-rate"):
        reg.debit("d", dp.PureDP(1), "q")  # 1.5 + 1 > 2 in the last 24 h
    assert reg.spent("d") == dp.PureDP(Fraction(3, 2))
    assert reg.spent("d", analyst="ana") == dp.PureDP(Fraction(3, 2))
    assert reg.verify() == []


def test_idempotency_key_replays_the_recorded_answer(tmp_path):
    key = Fernet.generate_key()
    path = tmp_path / "l.sqlite"
    s = dp.Session(pl.DataFrame({"x": range(100)}), budget=dp.PureDP(1),
                   ledger=Ledger(path, encryption_key=key), dataset="d")
    first = s.query().count().release(epsilon=0.5, idempotency_key="req-1")
    again = s.query().count().release(epsilon=0.5, idempotency_key="req-1")
    assert first.equals(again) and s.spent == dp.PureDP(Fraction(1, 2))
    raw = sqlite3.connect(path).execute("SELECT result FROM releases").fetchone()[0]
    assert raw.startswith("fernet:") and "count" not in raw  # encrypted at rest
    first_row = Ledger(path).releases("d")[0]  # the same request, without the Fernet key
    with pytest.raises(LedgerError, match="encrypted"):
        Ledger(path).debit("d", first_row["loss"], first_row["query"], noise=first_row["noise"],
                           idempotency_key="req-1")
    reg = Ledger(path)
    reg.debit("d", dp.PureDP(Fraction(1, 10)), "q", idempotency_key="req-2")
    with pytest.raises(LedgerError, match="in progress"):  # no outcome yet: not a replay
        reg.debit("d", dp.PureDP(Fraction(1, 10)), "q", idempotency_key="req-2")
    with pytest.raises(dp.errors.DomainError):
        dp.Session(pl.DataFrame({"x": [1]}), budget=dp.PureDP(1)).query().count().release(
            epsilon=1, idempotency_key="k")


def test_chain_detects_edits_deletions_and_truncation(tmp_path):
    path = tmp_path / "l.sqlite"
    reg = Ledger(path)
    reg.register("d", dp.PureDP(10))
    for i in range(3):
        rid = reg.debit("d", dp.PureDP(Fraction(1, 10)), f"q{i}")
        reg.mark(rid, "released", "ab" * 32)
    saved = reg.head()
    assert reg.verify(saved) == []
    db = sqlite3.connect(path)
    db.execute("UPDATE outcomes SET status = 'failed' WHERE release_id = 2")
    db.commit()
    assert any("edited" in p for p in Ledger(path).verify())
    db.execute("UPDATE outcomes SET status = 'released' WHERE release_id = 2")
    db.execute("DELETE FROM outcomes WHERE release_id = 3")
    db.commit()
    problems = Ledger(path).verify(saved)
    assert any("missing" in p or "truncated" in p or "saved head" in p for p in problems)


@pytest.mark.slow
def test_concurrent_processes_never_overrun_the_cap(tmp_path):
    path = str(tmp_path / "l.sqlite")
    Ledger(path).register("d", dp.PureDP(1))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_spend_on, args=(path, "d", 40, out)) for _ in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    accepted = sum(out.get(timeout=10) for _ in procs)
    reg = Ledger(path)
    assert accepted == 100  # 320 requests of ε = 0.01 against a cap of 1
    assert reg.spent("d") == dp.PureDP(1) and reg.count() == 100 and reg.verify() == []


def test_cli_commands(tmp_path):
    path = str(tmp_path / "cli.sqlite")
    run = CliRunner().invoke
    assert run(app, ["ledger", "init", "--ledger", path]).exit_code == 0
    assert run(app, ["ledger", "register", "d", "--epsilon", "2", "--ledger", path]
               ).exit_code == 0
    res = run(app, ["ledger", "analyst", "ana", "--dataset", "d", "--epsilon", "1",
                    "--ledger", path])
    assert res.exit_code == 0 and "token" in res.output
    Ledger(path).debit("d", dp.PureDP(Fraction(1, 2)), "count()", analyst="ana")
    for cmd in (["datasets"], ["show", "d"], ["releases", "--analyst", "ana"], ["verify"]):
        res = run(app, ["ledger", *cmd, "--ledger", path])
        assert res.exit_code == 0, res.output
    exported = json.loads(run(app, ["ledger", "export", "--ledger", path]).output)
    assert exported["releases"][0]["loss"] == {"epsilon": "1/2"}
    png = tmp_path / "b.png"
    assert run(app, ["ledger", "plot", "d", "--output", str(png), "--ledger", path]
               ).exit_code == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert run(app, ["ledger", "policy", "d", "--epsilon", "1", "--ledger", path]
               ).exit_code == 0
    assert run(app, ["ledger", "verify", "--ledger", str(tmp_path / "none.sqlite")]
               ).exit_code == 1


@pytest.fixture(scope="module")
def postgres_url(tmp_path_factory):
    import pg

    reason = pg.unavailable()
    if reason:
        pytest.skip(f"no PostgreSQL server for the ledger tests: {reason}")
    with pytest.MonkeyPatch.context() as mp, pg.server() as url:
        mp.setenv("DPKIT_HOME", str(tmp_path_factory.mktemp("keys")))  # the MAC key file
        yield url


def test_postgres_ledger_basics(postgres_url):
    reg = Ledger(postgres_url)
    reg.register("pgd", dp.ApproxDP(1, 1e-6))
    rid = reg.debit("pgd", dp.ApproxDP(Fraction(1, 2), 0), "count", idempotency_key="a")
    reg.mark(rid, "released", "cd" * 32, "[]")
    with pytest.raises(IdempotentReplay):
        reg.debit("pgd", dp.ApproxDP(Fraction(1, 2), 0), "count", idempotency_key="a")
    with pytest.raises(BudgetExceededError):
        reg.debit("pgd", dp.ApproxDP(1, 0), "count")
    assert reg.spent("pgd") == dp.ApproxDP(Fraction(1, 2), 0) and reg.verify() == []
    s = dp.Session(pl.DataFrame({"x": range(10)}), budget=dp.ApproxDP(1, 1e-6),
                   ledger=Ledger(postgres_url), dataset="pgd")
    s.query().count().release(epsilon=0.25)
    assert Ledger(postgres_url).spent("pgd").epsilon == Fraction(3, 4)


@pytest.mark.parametrize("step", ["debit", "mark"])
def test_a_writer_outside_the_lock_cannot_fork_the_chain(postgres_url, monkeypatch, step):
    """An older dpkit locks the head's row, not the advisory lock: if it moves the head
    while a new writer holds the lock, the new writer's compare-and-set finds the head
    moved and aborts before its commit (without it, the write overwrote the head: a fork)."""
    import pg
    import sqlalchemy as sa

    from dpkit.ledger import registry

    dataset, url = "d", pg.fresh_database(postgres_url, f"fork_{step}")
    reg = Ledger(url)
    reg.register(dataset, dp.PureDP(1))
    rid = reg.debit(dataset, dp.PureDP(Fraction(1, 4)), "q") if step == "mark" else None
    other = sa.create_engine(url)
    real = registry.chain.link_hash

    def old_writer_moves_the_head(*args):  # between the writer's reads and its writes
        with other.begin() as conn:  # (the old row lock made this wait: time out, fail)
            conn.execute(sa.text("SET LOCAL lock_timeout = '3s'"))
            conn.execute(sa.text("UPDATE meta SET value = CASE WHEN key = 'chain_head' "
                                 "THEN :h ELSE CAST(CAST(value AS INTEGER) + 1 AS TEXT) END "
                                 "WHERE key IN ('chain_head', 'chain_seq')"), {"h": "f" * 64})
        return real(*args)

    before = (reg.spent(dataset), len(reg.releases(dataset)))
    monkeypatch.setattr(registry.chain, "link_hash", old_writer_moves_the_head)
    with pytest.raises(LedgerError, match="chain head moved"):
        if step == "debit":
            reg.debit(dataset, dp.PureDP(Fraction(1, 4)), "q")
        else:
            reg.mark(rid, "released", "ab" * 32, "[]")
    monkeypatch.undo()
    assert (reg.spent(dataset), len(reg.releases(dataset))) == before
    assert reg.head() == "f" * 64  # the other writer's head stands: nothing overwrote it
    if step == "mark":
        assert reg.release(rid)["status"] == "debited"
    other.dispose()


@pytest.mark.slow
def test_concurrent_processes_on_postgres(postgres_url):
    Ledger(postgres_url).register("pgc", dp.PureDP(1))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_spend_on, args=(postgres_url, "pgc", 40, out))
             for _ in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    accepted = sum(out.get(timeout=10) for _ in procs)
    reg = Ledger(postgres_url)
    assert accepted == 100 and reg.spent("pgc") == dp.PureDP(1) and reg.verify() == []


def _spend_on(url: str, dataset: str, n: int, out: mp.Queue) -> None:
    reg = Ledger(url)
    accepted = 0
    for _ in range(n):
        try:
            reg.debit(dataset, dp.PureDP(Fraction(1, 100)), "q")
            accepted += 1
        except BudgetExceededError:
            pass
    out.put(accepted)


def test_server_reads_a_postgres_table(postgres_url):
    """The query server's PostgreSQL source loads a table (names checked and quoted)."""
    import sqlalchemy as sa

    from dpkit.server.config import SourceConfig
    from dpkit.server.sources import open_source

    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text('CREATE TABLE "people" (pid INTEGER, age INTEGER, city TEXT)'))
        conn.execute(sa.text("INSERT INTO people VALUES (1, 30, 'a'), (2, 41, 'b'), "
                             "(3, 52, NULL)"))
    engine.dispose()
    source = open_source(SourceConfig(kind="postgres", url=postgres_url, table="people"))
    assert [name for name, _ in source.columns] == ["pid", "age", "city"]
    with source.open() as frame:
        s = dp.Session(frame, dp.PrivacyUnit.by("pid", 1), dp.PureDP(1))
        assert s.query().count().release(epsilon=1).height == 1
