"""The epsilon registry: persistence, atomic check-and-debit, no refunds, two processes."""

import multiprocessing as mp
from fractions import Fraction

import polars as pl
import pytest

import dpkit as dp
from dpkit.errors import BudgetExceededError, LedgerError, ReleaseFailedError
from dpkit.ledger import Ledger


def frame() -> pl.DataFrame:
    return pl.DataFrame({"x": list(range(100))})


def test_session_resumes_spend(tmp_path):
    path = tmp_path / "l.sqlite"
    s = dp.Session(frame(), budget=dp.PureDP(1), ledger=path, dataset="d")
    s.query().count().release(epsilon=0.25)
    s2 = dp.Session(frame(), budget=dp.PureDP(1), ledger=path, dataset="d")
    assert s2.spent == dp.PureDP(Fraction(1, 4)) and s2.remaining == dp.PureDP(Fraction(3, 4))
    s2.query().count().release(epsilon=0.75)
    with pytest.raises(BudgetExceededError):
        s.query().count().release(epsilon=0.01)  # the first session sees the ledger's spend
    rows = Ledger(path).releases("d")
    assert [r["status"] for r in rows] == ["released", "released"]
    assert all(len(r["result_sha256"]) == 64 for r in rows)
    assert rows[0]["loss"] == dp.PureDP(Fraction(1, 4))


def test_refused_release_writes_no_row(tmp_path):
    path = tmp_path / "l.sqlite"
    s = dp.Session(frame(), budget=dp.PureDP(1), ledger=path, dataset="d")
    with pytest.raises(BudgetExceededError):
        s.query().count().release(epsilon=2)
    assert Ledger(path).releases("d") == []


def test_failure_after_debit_is_not_refunded(tmp_path, monkeypatch):
    path = tmp_path / "l.sqlite"
    s = dp.Session(frame(), budget=dp.PureDP(1), ledger=path, dataset="d")

    from dpkit.frame import engine

    real, real_dry_run, dry = engine.compute, engine.dry_run, []

    def dry_run(*args, **kwargs):  # the plan-time dry run on zero rows, before the debit
        dry.append(1)
        try:
            return real_dry_run(*args, **kwargs)
        finally:
            dry.pop()

    def broken(*args, **kwargs):
        if dry:
            return real(*args, **kwargs)
        raise OSError("disk vanished")

    monkeypatch.setattr(engine, "dry_run", dry_run)
    monkeypatch.setattr("dpkit.frame.engine.compute", broken)
    with pytest.raises(ReleaseFailedError, match="OSError"):
        s.query().count().release(epsilon=0.5)
    rows = Ledger(path).releases("d")
    assert [r["status"] for r in rows] == ["failed"]
    assert s.spent == dp.PureDP(Fraction(1, 2))


def test_cap_mismatch_is_an_error(tmp_path):
    path = tmp_path / "l.sqlite"
    dp.Session(frame(), budget=dp.PureDP(1), ledger=path, dataset="d")
    with pytest.raises(LedgerError):
        dp.Session(frame(), budget=dp.PureDP(2), ledger=path, dataset="d")
    with pytest.raises(LedgerError):
        dp.Session(frame(), budget=dp.ZCDP(1), ledger=path, dataset="d")


def test_privacy_unit_mismatch_is_an_error(tmp_path):
    """A spend counted under another privacy unit is not a spend of the registered cap: a
    session (or any caller of register) with another unit is refused, the same object too."""
    path = tmp_path / "l.sqlite"
    people = pl.DataFrame({"pid": [1, 1, 2], "x": [1, 2, 3]})
    per_person = dp.PrivacyUnit.by("pid", max_rows=2)
    dp.Session(people, per_person, dp.PureDP(1), ledger=path, dataset="d")
    with pytest.raises(LedgerError, match="privacy unit"):
        dp.Session(people, dp.PrivacyUnit.rows(), dp.PureDP(1), ledger=path, dataset="d")
    ledger = Ledger(path)
    ledger.register("d", dp.PureDP(1), str(per_person))  # the registered unit: accepted
    with pytest.raises(LedgerError, match="migrate"):
        ledger.register("d", dp.PureDP(1), "rows")  # not let through by the object's cache
    assert Ledger(path).releases("d") == []


def test_measures_round_trip(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    led.register("z", dp.ZCDP(Fraction(1, 3)))
    led.debit("z", dp.ZCDP(Fraction(1, 7)), "q")
    assert led.spent("z") == dp.ZCDP(Fraction(1, 7))
    led.register("a", dp.ApproxDP(1, Fraction(1, 10**6)))
    led.debit("a", dp.ApproxDP(Fraction(1, 2), Fraction(1, 10**7)), "q")
    with pytest.raises(BudgetExceededError):
        led.debit("a", dp.ApproxDP(Fraction(1, 4), Fraction(1, 10**6)), "q")  # δ overruns
    assert led.spent("a") == dp.ApproxDP(Fraction(1, 2), Fraction(1, 10**7))


def _spend(path: str, attempts: int, queue) -> None:
    s = dp.Session(frame(), budget=dp.PureDP(1), ledger=path, dataset="shared")
    ok = 0
    for _ in range(attempts):
        try:
            s.query().count().release(epsilon=Fraction(1, 10))
            ok += 1
        except BudgetExceededError:
            pass
    queue.put(ok)


def test_two_processes_never_overrun_the_cap(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    Ledger(path).register("shared", dp.PureDP(1))
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_spend, args=(path, 8, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    successes = queue.get(timeout=5) + queue.get(timeout=5)
    assert successes == 10  # 16 attempts at ε = 1/10 against a cap of 1
    led = Ledger(path)
    assert led.spent("shared") == dp.PureDP(1)
    assert len(led.releases("shared")) == 10
