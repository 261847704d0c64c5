"""The burn-rate window kept on write (issue 19): per-minute buckets and a running 24 h total
on the dataset row, the version-3 → 4 upgrade, and the attacks on them — an edited total or
bucket, a clock stepped back, concurrent debits racing the window. Each attack is done as an
attacker who can write the database but does not hold the MAC key would do it."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

import dpkit as dp
from dpkit.errors import BudgetExceededError, LedgerError, LedgerIntegrityError
from dpkit.ledger import Ledger, chain, window

KEY = b"window-test-key"
T0 = datetime(2026, 3, 1, 10, 0, 30, tzinfo=UTC)  # 30 s into a minute


def at(monkeypatch, moment: datetime) -> None:
    monkeypatch.setattr("dpkit.ledger.registry.now", lambda: moment)


def ledger(tmp_path, per_day=Fraction(1)) -> Ledger:
    reg = Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    reg.register("d", dp.PureDP(100))
    if per_day is not None:
        reg.set_policy("d", dp.PureDP(per_day))
    return reg


def said(problems: list[str], *words: str) -> bool:
    return any(all(w in p for w in words) for p in problems)


def sql(tmp_path, statement: str, *params) -> list[tuple]:
    db = sqlite3.connect(tmp_path / "l.sqlite")
    with db:
        found = db.execute(statement, params).fetchall()
    db.close()
    return found


def test_window_never_undercounts_and_rounds_outward(tmp_path, monkeypatch):
    reg = ledger(tmp_path)
    at(monkeypatch, T0)
    reg.debit("d", dp.PureDP(Fraction(3, 4)), "q")
    for later in (timedelta(hours=23, minutes=59, seconds=59),  # inside the exact window
                  timedelta(hours=24, seconds=10)):  # outside it, inside the same minute
        at(monkeypatch, T0 + later)
        with pytest.raises(BudgetExceededError, match="burn-rate"):
            reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")
    at(monkeypatch, T0 + timedelta(hours=24, minutes=1))  # a whole minute later: expired
    reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")
    assert reg.verify() == []


def test_buckets_leave_the_window_one_by_one(tmp_path, monkeypatch):
    reg = ledger(tmp_path)
    for k in range(4):  # 1/4 at T0, T0 + 1 h, + 2 h, + 3 h
        at(monkeypatch, T0 + timedelta(hours=k))
        reg.debit("d", dp.PureDP(Fraction(1, 4)), "q")
    at(monkeypatch, T0 + timedelta(hours=25, minutes=1))  # the first two have left
    reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")
    with pytest.raises(BudgetExceededError, match="burn-rate"):
        reg.debit("d", dp.PureDP(Fraction(1, 100)), "q")
    assert reg.verify() == []


def test_a_clock_stepped_back_does_not_expire_a_loss_early(tmp_path, monkeypatch):
    """The ledger minute never goes back: a debit made with a clock two days behind is
    counted from the latest time the ledger has seen."""
    reg = ledger(tmp_path)
    at(monkeypatch, T0 + timedelta(days=2))
    reg.debit("d", dp.PureDP(Fraction(3, 4)), "q")
    at(monkeypatch, T0)  # the clock was set back
    with pytest.raises(BudgetExceededError, match="burn-rate"):
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")
    reg.debit("d", dp.PureDP(Fraction(1, 4)), "q")
    at(monkeypatch, T0 + timedelta(days=2, hours=23))  # still inside the window of both
    with pytest.raises(BudgetExceededError, match="burn-rate"):
        reg.debit("d", dp.PureDP(Fraction(1, 100)), "q")
    assert reg.verify() == []


def test_policy_set_later_counts_earlier_releases(tmp_path, monkeypatch):
    reg = ledger(tmp_path, per_day=None)
    at(monkeypatch, T0)
    reg.debit("d", dp.PureDP(Fraction(3, 4)), "q")
    reg.set_policy("d", dp.PureDP(1))
    with pytest.raises(BudgetExceededError, match="burn-rate"):
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")


def test_approx_dp_window_subtracts_exactly(tmp_path, monkeypatch):
    """δ sums are not capped at 1 inside the window: a capped sum minus an expired bucket
    would under-count what is left."""
    reg = Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    reg.register("d", dp.ApproxDP(100, 1))
    reg.set_policy("d", dp.ApproxDP(100, Fraction(9, 10)))
    at(monkeypatch, T0)
    reg.debit("d", dp.ApproxDP(0, Fraction(8, 10)), "q")
    at(monkeypatch, T0 + timedelta(hours=12))
    with pytest.raises(BudgetExceededError):  # 0.8 + 0.8 > 0.9
        reg.debit("d", dp.ApproxDP(0, Fraction(8, 10)), "q")
    at(monkeypatch, T0 + timedelta(hours=24, minutes=1))
    reg.debit("d", dp.ApproxDP(0, Fraction(8, 10)), "q")
    assert reg.verify() == []


# -- attacks on the totals -----------------------------------------------------------------
def test_reset_window_total_is_reported_and_refused(tmp_path, monkeypatch):
    reg = ledger(tmp_path)
    at(monkeypatch, T0)
    reg.debit("d", dp.PureDP(Fraction(3, 4)), "q")
    sql(tmp_path, "UPDATE datasets SET window_spent = ?", '{"epsilon": "0"}')
    reg = Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    assert said(reg.verify(), "datasets 'd'", "window_spent")
    with pytest.raises(LedgerIntegrityError):
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")


def test_inflated_expiring_bucket_is_refused_when_it_expires(tmp_path, monkeypatch):
    """Raising an old bucket would subtract more than it held when it leaves the window (and
    so lift the burn-rate): its MAC fails, at that debit and in verify."""
    reg = ledger(tmp_path)
    at(monkeypatch, T0)
    reg.debit("d", dp.PureDP(Fraction(1, 4)), "q")
    at(monkeypatch, T0 + timedelta(hours=12))
    reg.debit("d", dp.PureDP(Fraction(3, 4)), "q")
    sql(tmp_path, "UPDATE burn SET spent = ? WHERE minute = ?", '{"epsilon": "5"}',
        window.minute_of(T0))
    reg = Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    assert said(reg.verify(), "burn-rate bucket 'd'", "spent")
    at(monkeypatch, T0 + timedelta(hours=24, minutes=1))
    with pytest.raises(LedgerIntegrityError, match="bucket"):
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")  # 3/4 + 1/2 > 1 either way


def test_deleted_or_forged_buckets_are_reported(tmp_path, monkeypatch):
    reg = ledger(tmp_path)
    at(monkeypatch, T0)
    reg.debit("d", dp.PureDP(Fraction(1, 4)), "q")
    sql(tmp_path, "DELETE FROM burn")
    sql(tmp_path, "INSERT INTO burn VALUES ('d', 1, '{\"epsilon\": \"0\"}', ?)", "0" * 64)
    problems = Ledger(tmp_path / "l.sqlite", mac_key=KEY).verify()
    assert said(problems, "minute 1", "not implied by the chain")
    assert said(problems, f"minute {window.minute_of(T0)}", "missing")


def test_edited_release_inside_the_window_does_not_lift_the_burn_rate(tmp_path, monkeypatch):
    """The debit no longer reads the window's releases (O(1)): shrinking an earlier release's
    loss changes nothing it checks, and verify names the edit."""
    reg = ledger(tmp_path)
    at(monkeypatch, T0)
    first = reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")
    reg.debit("d", dp.PureDP(Fraction(1, 4)), "q")
    sql(tmp_path, "UPDATE releases SET loss = ? WHERE id = ?", '{"epsilon": "1/1000"}', first)
    reg = Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    with pytest.raises(BudgetExceededError, match="burn-rate"):
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")  # 3/4 + 1/2 > 1
    assert said(reg.verify(), f"release {first} (seq", "does not match its hash")


# -- the version-3 upgrade -----------------------------------------------------------------
def _as_version_3(tmp_path) -> None:
    """Turn a fresh ledger back into what version 3 wrote: no window columns, no buckets,
    dataset rows signed over the version-3 fields."""
    db = sqlite3.connect(tmp_path / "l.sqlite")
    with db:
        db.execute("DROP TABLE burn")
        db.execute("DROP INDEX releases_seq")
        db.execute("DROP INDEX outcomes_seq")
        for column in ("window_minute", "window_spent"):
            db.execute(f"ALTER TABLE datasets DROP COLUMN {column}")
        db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        cur = db.execute("SELECT * FROM datasets")
        names = [d[0] for d in cur.description]
        for values in cur.fetchall():
            row = dict(zip(names, values, strict=True))
            mac = chain.row_mac(KEY, "datasets", row, chain.V3_DATASET_FIELDS)
            db.execute("UPDATE datasets SET mac = ? WHERE name = ?", (mac, row["name"]))
    db.close()


def test_version_3_ledger_is_upgraded_with_its_window(tmp_path, monkeypatch):
    reg = ledger(tmp_path)
    for k, eps in enumerate((Fraction(1, 4), Fraction(1, 2))):
        at(monkeypatch, T0 + timedelta(hours=k))
        reg.debit("d", dp.PureDP(eps), "q")
    reg.dispose()
    _as_version_3(tmp_path)
    reg = Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    assert reg.verify() == []
    assert sql(tmp_path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("6",)]
    at(monkeypatch, T0 + timedelta(hours=2))
    with pytest.raises(BudgetExceededError, match="burn-rate"):  # 3/4 from before the upgrade
        reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")
    at(monkeypatch, T0 + timedelta(hours=24, minutes=1))  # the first 1/4 has left
    reg.debit("d", dp.PureDP(Fraction(1, 2)), "q")
    assert reg.verify() == []


def test_tampered_version_3_ledger_is_not_upgraded(tmp_path, monkeypatch):
    reg = ledger(tmp_path)
    at(monkeypatch, T0)
    reg.debit("d", dp.PureDP(Fraction(3, 4)), "q")
    reg.dispose()
    _as_version_3(tmp_path)
    sql(tmp_path, "UPDATE releases SET loss = ?", '{"epsilon": "1/1000"}')  # before upgrading
    with pytest.raises(LedgerError, match="cannot be upgraded"):
        Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    assert sql(tmp_path, "SELECT value FROM meta WHERE key = 'schema_version'") == [("3",)]


# -- concurrency ---------------------------------------------------------------------------
def _spend(path: str, attempts: int, queue) -> None:
    reg, ok = Ledger(path, mac_key=KEY), 0
    for _ in range(attempts):
        try:
            rid = reg.debit("d", dp.PureDP(Fraction(1, 10)), "q")
            reg.mark(rid, "released", "ab" * 32)
            ok += 1
        except BudgetExceededError:
            pass
    queue.put(ok)


def test_concurrent_processes_never_overrun_the_burn_rate(tmp_path):
    ledger(tmp_path, per_day=Fraction(1, 2)).dispose()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_spend, args=(str(tmp_path / "l.sqlite"), 6, queue))
             for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert sum(queue.get(timeout=5) for _ in procs) == 5  # 18 attempts of 1/10 against 1/2
    reg = Ledger(tmp_path / "l.sqlite", mac_key=KEY)
    assert reg.spent("d") == dp.PureDP(Fraction(1, 2)) and reg.verify() == []
