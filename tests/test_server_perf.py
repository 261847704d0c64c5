"""The server's per-request memos (issue 19): what they remember, and that they never let
a query through that the checks they skip would refuse.

- ``PlanMemo``: the dry runs on zero rows (``app._dry_run`` and ``engine.dry_run``) run once
  per distinct query, schema and budget arguments; a refused query is refused every time; a
  query remembered on one schema is checked again on another.
- the canonical-keys memo (``query._canonical_keys``): a key list converted for one column
  type is converted (and refused) again for another.
- the session's table schema is read once per in-memory table, and again when the table's
  columns change.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import polars as pl
import pytest

import dpkit as dp
from dpkit.errors import DomainError
from dpkit.frame import engine
from dpkit.frame.session import PlanMemo, Session
from dpkit.server import protocol
from dpkit.server import routes as server_app  # the endpoints and their work
from dpkit.server.state import ServerState

BODY = {"group_by": {"columns": ["g"], "keys": {"g": ["a", "b"]}},
        "aggs": [{"agg": "count"}], "budget": {"epsilon": "1/10"}}


def _frame() -> pl.DataFrame:
    return pl.DataFrame({"g": ["a", "b", "a", "c"], "x": [1, 2, 3, 4]})


def _session(frame: pl.DataFrame, memo: PlanMemo) -> Session:
    return Session(frame, dp.PrivacyUnit.rows(), dp.PureDP(1000), plan_memo=memo)


def _release(session: Session, body: dict[str, Any]) -> pl.DataFrame:
    query, kwargs = server_app._build(session, protocol.QueryRequest.model_validate(body))
    return server_app._release(session, query, kwargs).values  # the record's frame


@pytest.fixture
def dry_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every dry run that actually runs (the app's and the engine's)."""
    calls: list[str] = []
    app_dry, engine_dry = server_app._dry_run, engine.dry_run

    def app_spy(*args: Any, **kwargs: Any) -> None:
        calls.append("steps")
        app_dry(*args, **kwargs)

    def engine_spy(*args: Any, **kwargs: Any) -> None:
        calls.append("release")
        engine_dry(*args, **kwargs)

    monkeypatch.setattr(server_app, "_dry_run", app_spy)
    monkeypatch.setattr(engine, "dry_run", engine_spy)
    return calls


def test_a_repeated_query_is_dry_run_once(dry_runs: list[str]) -> None:
    memo, frame = PlanMemo(), _frame()
    for _ in range(3):
        assert _release(_session(frame, memo), BODY).height == 2
    assert dry_runs == ["steps", "release"]
    other = {**BODY, "budget": {"epsilon": "1/5"}}  # other budget: other statistics
    _release(_session(frame, memo), other)
    assert dry_runs == ["steps", "release", "release"]


def _refusing(monkeypatch: pytest.MonkeyPatch, refuse: Any) -> list[str]:
    """Dry runs that fail when ``refuse(empty frame)`` says so (standing in for a query that
    only the dry run refuses, e.g. a backend's binding error); records each one run."""
    calls: list[str] = []
    engine_dry = engine.dry_run

    def app_spy(query: Any) -> None:
        calls.append("steps")
        if refuse(query.lazy(empty=True)):
            raise DomainError("the query does not run on this dataset's schema")

    def engine_spy(empty: Any, *args: Any, **kwargs: Any) -> None:
        calls.append("release")
        if refuse(empty):
            raise DomainError("the query does not run on this table's schema")
        engine_dry(empty, *args, **kwargs)

    monkeypatch.setattr(server_app, "_dry_run", app_spy)
    monkeypatch.setattr(engine, "dry_run", engine_spy)
    return calls


def test_a_refused_query_is_refused_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A query its dry run refuses is never remembered: refused (422) on every request,
    its dry run run every time."""
    calls = _refusing(monkeypatch, lambda empty: True)
    memo, frame = PlanMemo(), _frame()
    for _ in range(3):
        with pytest.raises(server_app.ApiError) as info:
            _release(_session(frame, memo), BODY)
        assert info.value.status == 422
    assert calls == ["steps"] * 3 and len(memo) == 0


@pytest.mark.parametrize("stage", ["steps", "release"])
def test_a_query_remembered_on_one_schema_is_checked_on_another(
        monkeypatch: pytest.MonkeyPatch, stage: str) -> None:
    """The same JSON query passes its dry runs on an Int64 column; on an Int32 one (a
    stand-in for a schema the query does not run on) it must be dry-run again and
    refused: the memo's key holds the table's schema."""
    def refuse(empty: Any) -> bool:
        return str(empty.collect_schema()["x"]) == "Int32" and calls[-1] == stage

    calls = _refusing(monkeypatch, refuse)
    memo = PlanMemo()
    assert _release(_session(_frame(), memo), BODY).height == 2
    narrow = _frame().with_columns(pl.col("x").cast(pl.Int32))
    with pytest.raises(server_app.ApiError) as info:
        _release(_session(narrow, memo), BODY)
    assert info.value.status == 422
    assert calls.count(stage) == 2


def test_a_plan_memo_holds_at_most_its_size() -> None:
    memo = PlanMemo(size=2)
    for key in "abc":
        memo.run_once(key, lambda: None)
    assert len(memo) == 2
    ran: list[int] = []
    memo.run_once("a", lambda: ran.append(1))  # dropped first (least recently used)
    memo.run_once("c", lambda: ran.append(2))  # still remembered
    assert ran == [1]


def test_remembered_keys_are_converted_again_for_another_column_type() -> None:
    """[1.5, 2.5] are valid keys of a Float64 column, not of an Int64 one; and [1.0, 1.0001]
    are two keys as floats but one as integers: remembered conversions must not carry over."""
    floats = pl.DataFrame({"k": [1.5, 2.5], "x": [1, 2]})
    ints = pl.DataFrame({"k": [1, 2], "x": [1, 2]})
    memo = PlanMemo()
    s_f, s_i = _session(floats, memo), _session(ints, memo)
    assert s_f.query().group_by("k", keys=[1.5, 2.5]).keys is not None
    with pytest.raises(DomainError):
        s_i.query().group_by("k", keys=[1.5, 2.5])
    assert s_f.query().group_by("k", keys=[1.0, 1.0001]).keys is not None
    with pytest.raises(DomainError):
        s_i.query().group_by("k", keys=[1.0, 1.0001])
    with pytest.raises(DomainError):  # and refused again, not remembered
        s_i.query().group_by("k", keys=[1.0, 1.0001])


def test_remembered_keys_keep_their_digest() -> None:
    """The ledger's query text holds the keys' digest: the memo gives the same one."""
    from dpkit.frame.query import _digest

    memo = PlanMemo()
    first = _session(_frame(), memo).query().group_by("g", keys=["a", "b"])
    again = _session(_frame(), memo).query().group_by("g", keys=["a", "b"])
    assert first.keys_digest == again.keys_digest == _digest(first.keys)
    assert first.describe() == again.describe()


def test_the_schema_is_read_again_when_the_table_changes() -> None:
    memo, frame = PlanMemo(), _frame()
    assert str(_session(frame, memo).query().schema()["x"]) == "Int64"
    frame.replace_column(1, frame["x"].cast(pl.Float64))  # in place: same object
    assert str(_session(frame, memo).query().schema()["x"]) == "Float64"


def test_a_served_release_spends_what_it_logs(tmp_path: Any) -> None:
    """Through the server's state (per-dataset memo shared across requests): each release
    debits its ε once, also when its dry runs are remembered."""
    from dpkit.server.config import parse_config

    _frame().write_csv(tmp_path / "d.csv")
    cfg = parse_config({"ledger": "ledger.sqlite", "datasets": [
        {"name": "d", "source": {"kind": "csv", "path": "d.csv"}, "privacy_unit": "rows",
         "budget": {"measure": "pure", "epsilon": 10}}]}, base=tmp_path)
    state = ServerState(cfg)
    try:
        state.ledger.add_analyst("a")
        state.ledger.grant("a", "d")
        served = state.datasets["d"]
        for _ in range(5):
            with served.source.open() as data:
                session = state.session(served, data, "a")
                query, kwargs = server_app._build(
                    session, protocol.QueryRequest.model_validate(BODY))
                server_app._release(session, query, kwargs)
        assert len(served.plans) == 2
        assert state.ledger.spent("d").epsilon == Fraction(5, 10)
        assert state.ledger.count() == 5
    finally:
        state.close()
