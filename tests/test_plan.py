"""A plan value and a returned record (issue 31, item 3): ``Query.plan`` returns a
:class:`~dpkit.frame.query.Plan`, ``Session.release(plan)`` returns the
:class:`~dpkit.core.record.Release`, the client gets the server's record, and ``Query`` and
``Session`` call no private name of each other."""

import ast
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import dpkit as dp
from dpkit.core.accountant import FilterAccountant
from dpkit.core.record import Release
from dpkit.errors import BudgetExceededError, DomainError, ReleaseFailedError
from dpkit.frame.query import Plan

SRC = Path(__file__).resolve().parents[1] / "src" / "dpkit"


def _session(budget: Any = None) -> dp.Session:
    frame = pl.DataFrame({"g": ["a", "b", "a", "c"], "x": [1, 2, 3, 4]})
    return dp.Session(frame, dp.PrivacyUnit.rows(), budget or dp.PureDP(10))


def _query(session: dp.Session) -> Any:
    return (session.query().clamp("x", 0, 10).group_by("g", keys=["a", "b"])
            .agg(dp.count(), dp.sum("x")))


def test_plan_holds_statistics_loss_noise_and_description() -> None:
    session = _session()
    plan = _query(session).plan(epsilon=1)
    assert isinstance(plan, Plan)
    assert [p.stat.key for p in plan.statistics] == [r.statistic for r in plan.noise]
    assert plan.loss == dp.PureDP(1)
    assert plan.query.aggs[1].bounds == (0, 10)  # clamp's bounds, declared
    assert "bounds=(0, 10)" in plan.description
    assert session.spent == dp.PureDP(0)  # planning spends nothing


def test_plan_unpacks_as_the_old_pair() -> None:
    plan = _query(_session()).plan(epsilon=1)
    lf, planned = plan
    assert lf is plan.lazy and planned == list(plan.statistics) == plan[1]
    assert len(plan) == 2


def test_session_release_returns_the_record() -> None:
    session = _session()
    plan = _query(session).plan(epsilon=1)
    record = session.release(plan, confidence=0.9)
    assert isinstance(record, Release) and record is session.last_release
    assert isinstance(record.values, pl.DataFrame) and record.values.height == 2
    assert record.loss == plan.loss and record.noise == plan.noise
    assert record.description == plan.description
    assert record.accuracy is not None and record.accuracy.beta == pytest.approx(0.1)
    assert session.spent == dp.PureDP(1)


def test_query_release_is_the_friendly_form() -> None:
    session = _session()
    frame = _query(session).release(epsilon=1)
    assert isinstance(frame, pl.DataFrame)
    assert session.last_release is not None and session.last_release.values is frame


def test_a_plan_of_another_session_is_refused_before_the_debit() -> None:
    mine, other = _session(), _session()
    plan = _query(other).plan(epsilon=1)
    with pytest.raises(DomainError):
        mine.release(plan)
    with pytest.raises(DomainError):
        other.release(plan, confidence=1.5)
    assert mine.spent == other.spent == dp.PureDP(0)
    with pytest.raises(BudgetExceededError):
        mine.release(_query(mine).plan(epsilon=11))


def test_a_partition_part_releases_through_its_plan() -> None:
    session = _session()
    parts = session.query().partition("g", ["a", "b"])
    for part in parts.values():
        record = session.release(part.count().plan(epsilon=1))
        assert record.loss is not None
    assert session.spent == dp.PureDP(1)  # parallel: the maximum over parts


class _Broken(FilterAccountant):
    """An accountant whose outcome cannot be recorded (a ledger gone after the debit)."""

    records = True

    def mark(self, release_id: int | None, status: str, digest: str | None = None,
             stored: str | None = None) -> None:
        raise OSError("disk gone /secret/path")


def test_a_failure_to_record_the_outcome_is_a_release_failure() -> None:
    """After the debit the only error is ReleaseFailedError (its text names no data), also
    when recording the outcome fails — so the server answers 500 from the exception alone
    (before, the OSError escaped and a caller had to read the record back)."""
    accountant = _Broken(dp.PureDP(2))
    with pytest.raises(ReleaseFailedError) as info:
        accountant.run_record(dp.PureDP(1), "q", lambda: 1)
    assert "secret" not in str(info.value)
    assert accountant.spent == dp.PureDP(1)  # the loss stands
    assert accountant.last is not None and accountant.last.status == "failed"
    with pytest.raises(ReleaseFailedError):
        accountant.run_record(dp.PureDP(1), "q", lambda: 1 // 0)
    assert accountant.spent == dp.PureDP(2)


def test_run_record_returns_what_run_keeps() -> None:
    accountant = FilterAccountant(dp.PureDP(2))
    record = accountant.run_record(dp.PureDP(Fraction(1, 2)), "q", lambda: [1, 2])
    assert record is accountant.last and record.values == [1, 2]
    assert record.loss == dp.PureDP(Fraction(1, 2)) and record.status == "released"


def _private_attributes(path: Path, receiver: str) -> list[str]:
    """``receiver._name`` and ``receiver.session._name`` uses in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not (
                node.attr.startswith("__")):
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == receiver:
                found.append(node.attr)  # self.session._x
            elif isinstance(base, ast.Name) and base.id == receiver:
                found.append(node.attr)  # session._x / query._x
    return found


def test_query_and_session_call_no_private_name_of_each_other() -> None:
    assert _private_attributes(SRC / "frame" / "query.py", "session") == []
    assert _private_attributes(SRC / "frame" / "session.py", "query") == []
    for name in ("server/app.py", "server/routes.py", "client.py"):
        path = SRC / name
        if path.exists():
            assert _private_attributes(path, "session") == [], name


def test_query_does_not_import_session() -> None:
    """``frame.query`` and ``frame.session`` form no import circle (not even for types)."""
    tree = ast.parse((SRC / "frame" / "query.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "dpkit.frame.session" not in imported


def test_no_deprecation_on_the_pair_form() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, planned = _query(_session()).plan(epsilon=1)
    assert len(planned) == 2
