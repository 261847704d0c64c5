"""The one accountant (issue 17): debit before compute, failures never refunded and never
quoted, replays instead of fresh noise, partitions charged the maximum over parts."""

from __future__ import annotations

from fractions import Fraction

import polars as pl
import pytest

import dpkit as dp
from dpkit.core import rng
from dpkit.core.accountant import (
    Accountant,
    FilterAccountant,
    ParallelAccountant,
    as_accountant,
)
from dpkit.core.compose import PrivacyFilter
from dpkit.errors import (
    BudgetExceededError,
    DomainError,
    InsecureRandomnessError,
    ReleaseFailedError,
)
from dpkit.ledger import Ledger, LedgerAccountant


def test_debit_comes_before_compute_and_over_budget_runs_nothing():
    acc = FilterAccountant(dp.PureDP(1))
    seen = []
    assert acc.run(dp.PureDP(Fraction(1, 2)), "q", lambda: seen.append(acc.spent) or 7) == 7
    assert seen == [dp.PureDP(Fraction(1, 2))]  # debited when compute ran
    with pytest.raises(BudgetExceededError):
        acc.run(dp.PureDP(1), "q", lambda: seen.append("ran"))
    assert seen == [dp.PureDP(Fraction(1, 2))] and acc.spent == dp.PureDP(Fraction(1, 2))


def test_a_failure_keeps_the_loss_and_names_no_data(tmp_path):
    acc = LedgerAccountant(Ledger(tmp_path / "l.sqlite"), "d")
    acc.ledger.register("d", dp.PureDP(1))

    def broken():
        raise ValueError("row 'SECRET_77'")

    with pytest.raises(ReleaseFailedError) as info:
        acc.run(dp.PureDP(Fraction(1, 4)), "q", broken)
    assert "SECRET" not in str(info.value) and info.value.__cause__ is None
    assert acc.spent == dp.PureDP(Fraction(1, 4))
    assert [r["status"] for r in acc.ledger.releases("d")] == ["failed"]
    assert acc.last is not None and acc.last.loss == dp.PureDP(Fraction(1, 4))


def test_idempotent_replay_returns_the_recorded_answer(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.register("d", dp.PureDP(1))
    acc = LedgerAccountant(ledger, "d")
    calls = []

    def compute():
        calls.append(1)
        return "answer-1"

    kw = {"idempotency_key": "k", "store": str, "replay": lambda t: t}
    assert acc.run(dp.PureDP(Fraction(1, 4)), "q", compute, **kw) == "answer-1"
    assert acc.run(dp.PureDP(Fraction(1, 4)), "q", compute, **kw) == "answer-1"
    assert calls == [1] and acc.spent == dp.PureDP(Fraction(1, 4))
    assert acc.last is not None and acc.last.loss is None  # a replay debits nothing


def test_idempotency_keys_need_a_ledger():
    with pytest.raises(DomainError):
        FilterAccountant(dp.PureDP(1)).run(dp.PureDP(Fraction(1, 4)), "q", lambda: 1,
                                           idempotency_key="k")


def test_partition_parts_are_charged_the_maximum():
    parent = FilterAccountant(dp.PureDP(2))
    parts = ParallelAccountant(parent)
    a, b = parts.for_part("a"), parts.for_part("b")
    a.run(dp.PureDP(Fraction(1, 2)), "q", lambda: None)
    b.run(dp.PureDP(Fraction(1, 2)), "q", lambda: None)  # max unchanged
    assert parent.spent == dp.PureDP(Fraction(1, 2))
    b.run(dp.PureDP(Fraction(1, 2)), "q", lambda: None)  # b now 1: the max grows by 1/2
    assert parent.spent == dp.PureDP(1)


def test_the_test_stream_is_refused_before_the_debit():
    acc = FilterAccountant(dp.PureDP(1))
    with rng.deterministic_for_tests(1), pytest.raises(InsecureRandomnessError):
        acc.run(dp.PureDP(Fraction(1, 4)), "q", lambda: 1)
    assert acc.spent == dp.PureDP(0)


def test_every_front_end_finds_the_same_accountant():
    s = dp.Session(pl.DataFrame({"x": [1, 2]}), budget=dp.PureDP(1))
    assert as_accountant(s) is s.accountant
    assert isinstance(as_accountant(PrivacyFilter(dp.PureDP(1))), Accountant)
    with pytest.raises(DomainError):
        as_accountant(object())


def test_the_server_does_not_subclass_session():
    pytest.importorskip("fastapi")
    import dpkit.server.app as app
    import dpkit.server.routes as routes
    import dpkit.server.state as state

    assert not any(isinstance(v, type) and issubclass(v, dp.Session) and v is not dp.Session
                   for module in (app, routes, state) for v in vars(module).values())
