"""The server's per-request work is constant (issue 19): a dataset is registered once per
worker (later sessions check it without a write transaction), and the bounded tables of an
in-memory dataset are shared by the requests of a worker (dpkit.frame.bounded_cache)."""

from __future__ import annotations

from fractions import Fraction

import polars as pl
import pytest

import dpkit as dp
from dpkit.errors import DomainError, LedgerError
from dpkit.frame.bounded_cache import BoundedCache
from dpkit.ledger import Ledger

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402
from served import serve_one  # noqa: E402

UNIT = dp.PrivacyUnit.by("u", max_rows=2)


def _frame() -> pl.DataFrame:
    return pl.DataFrame({"u": [1, 1, 2, 3, 3, 3], "k": ["a", "b", "a", "b", "b", "a"]})


def test_register_again_opens_no_transaction(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.register("d", dp.PureDP(2))
    opened = []
    original = ledger._transaction
    monkeypatch.setattr(ledger, "_transaction", lambda *a, **k: opened.append(1) or original(
        *a, **k))
    assert ledger.register("d", dp.PureDP(2)) == dp.PureDP(2)
    assert opened == []
    with pytest.raises(LedgerError, match="lifetime cap"):  # another cap still checks the row
        ledger.register("d", dp.PureDP(3))
    assert opened == [1]
    # a second object over the same file checks the row once, then remembers
    other = Ledger(tmp_path / "l.sqlite")
    with pytest.raises(LedgerError, match="lifetime cap"):
        other.register("d", dp.ApproxDP(2, 1e-9))
    assert other.register("d", dp.PureDP(2)) == dp.PureDP(2)
    ledger.dispose()
    other.dispose()


def test_sessions_share_a_cache_over_the_same_table_and_unit():
    df, cache = _frame(), BoundedCache()
    for _ in range(3):
        s = dp.Session(df, UNIT, dp.PureDP(10), bounded_cache=cache)
        s.query().group_by("k", keys=["a", "b"]).agg(dp.count()).release(epsilon=1)
        assert s.spent == dp.PureDP(1)  # reuse never skips the debit
    assert cache.answer_hits == 2  # the same plan: its exact values are remembered
    s.query().group_by("k", keys=["b", "a"]).agg(dp.count()).release(epsilon=1)
    assert (cache.hits, cache.answer_hits) == (1, 2)  # another plan: the same bounded table


def test_remembered_answers_are_exact_and_private_to_their_table():
    df, cache = _frame(), BoundedCache()
    s = dp.Session(df, dp.PrivacyUnit.rows(), dp.PureDP(10**6), bounded_cache=cache)
    query = s.query().group_by("k", keys=["a", "b"]).agg(dp.count())
    first = query.release(epsilon=10**5)["count"].to_list()  # noise ~1e-5: the exact counts
    assert first == [3, 3]
    again = query.release(epsilon=10**5)["count"].to_list()
    assert again == first and cache.answer_hits == 1
    # what a caller does to the arrays it gets is not what is remembered
    (key, plan), = cache._answers
    got = cache.answer(key, plan, lambda: pytest.fail("recomputed"))
    for array in got.values():
        array[:] = 99
    assert all((a != 99).all() for a in cache.answer(key, plan, dict).values())
    # a bounded table that leaves the cache takes its answers with it
    for other in ("x", "y"):
        cache.get_or_compute((other,), [], lambda: None)
    assert key not in cache._items and cache._answers == {}


@pytest.mark.parametrize("other", ["table", "unit"])
def test_a_shared_cache_refuses_other_tables_or_units(other):
    df, cache = _frame(), BoundedCache()
    dp.Session(df, UNIT, dp.PureDP(10), bounded_cache=cache)
    data = df.clone() if other == "table" else df
    unit = UNIT if other == "table" else dp.PrivacyUnit.by("u", max_rows=1)
    with pytest.raises(DomainError, match="other tables or another privacy unit"):
        dp.Session(data, unit, dp.PureDP(10), bounded_cache=cache)


def test_requests_reuse_bounded_tables_and_register_once(tmp_path, monkeypatch):
    app, _, token = serve_one(tmp_path, _frame(), {"column": "u", "max_rows": 2},
                              {"measure": "pure", "epsilon": 10}, analyst="alice")
    state = app.state.dpkit
    registered = []
    original = state.ledger.register
    monkeypatch.setattr(state.ledger, "register", lambda *a, **k: registered.append(
        state.ledger._registered.get(a[0])) or original(*a, **k))
    body = {"group_by": {"columns": ["k"], "keys": {"k": ["a", "b"]}},
            "aggs": [{"agg": "count"}], "budget": {"epsilon": "1/2"}}
    with TestClient(app) as http:
        for _ in range(3):
            r = http.post("/v1/datasets/t/release", json=body,
                          headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 200, r.text
    assert state.datasets["t"].bounded.answer_hits == 2  # the same plan: exact values reused
    assert len(registered) == 3 and all(r is not None for r in registered)  # all memo hits
    assert state.ledger.spent("t") == dp.PureDP(Fraction(3, 2))
