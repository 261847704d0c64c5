"""Continual releases hosted by the server (issue 20; dpkit.server.streams): opened once
through the ledger, advanced step by step by any worker from the encrypted state the ledger's
step mark names, over HTTP and through dpkit.Client; refused requests debit nothing."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import dpkit as dp

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # Starlette's note about its httpx dependency
    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient  # noqa: E402
from cryptography.fernet import Fernet  # noqa: E402

from dpkit.client import col  # noqa: E402
from dpkit.errors import BudgetExceededError, DomainError, StreamRollbackError  # noqa: E402
from dpkit.server import streams  # noqa: E402
from dpkit.server.app import create_app  # noqa: E402
from dpkit.server.config import parse_config  # noqa: E402
from dpkit.stream import HorizonExceededError, base  # noqa: E402

N_DAYS = 12


@pytest.fixture
def noiseless(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Zero node noise: the data side and the plumbing are then exact."""
    monkeypatch.setattr(base, "draw", lambda noise, size: np.zeros(size, dtype=np.int64))
    yield


def _rows() -> pl.DataFrame:
    rng = np.random.default_rng(7)  # test data only (not noise)
    n = 400
    return pl.DataFrame({"day": rng.integers(1, N_DAYS + 1, n),
                         "date": [date(2024, 1, 1) + timedelta(days=int(d))
                                  for d in rng.integers(0, N_DAYS, n)],
                         "region": rng.choice(["north", "south", "east"], n),
                         "age": rng.integers(18, 80, n), "amount": rng.integers(0, 9, n),
                         "price": rng.integers(0, 11, n) * 0.25})


def _config(tmp_path: Path, **top: Any) -> Any:
    return parse_config({
        "ledger": "ledger.sqlite", "ledger_key_env": "DPKIT_TEST_STREAM_KEY", **top,
        "datasets": [{"name": "visits", "source": {"kind": "parquet", "path": "visits.parquet"},
                      "privacy_unit": "rows", "budget": {"measure": "zcdp", "rho": 2}}]},
        base=tmp_path)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("DPKIT_TEST_STREAM_KEY", Fernet.generate_key().decode())
    frame = _rows()
    frame.write_parquet(tmp_path / "visits.parquet")
    app = create_app(_config(tmp_path))
    ledger = app.state.dpkit.ledger
    tokens = {name: ledger.add_analyst(name) for name in ("alice", "bob")}
    ledger.grant("alice", "visits", dp.ZCDP(1))
    ledger.grant("bob", "visits")
    http = TestClient(app)
    yield {"app": app, "ledger": ledger, "tokens": tokens, "http": http, "frame": frame,
           "tmp": tmp_path}
    http.close()


def _auth(server: dict[str, Any], who: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {server['tokens'][who]}"}


def _open_body(**over: Any) -> dict[str, Any]:
    body = {"steps": [{"step": "filter", "expr": {"op": ">=", "args": [{"col": "age"},
                                                                      {"lit": 30}]}}],
            "aggregation": {"agg": "count"}, "time": "day", "horizon": N_DAYS,
            "mechanism": "tree", "budget": {"rho": "1/4"}, "keys": ["north", "south"],
            "by": "region", "window": 3}
    return {**body, **over}


def _truth(frame: pl.DataFrame) -> dict[str, np.ndarray]:
    kept = frame.filter(pl.col("age") >= 30)
    out = {}
    for key in ("north", "south"):
        days = kept.filter(pl.col("region") == key)["day"].to_numpy()
        out[key] = np.cumsum(np.bincount(days, minlength=N_DAYS + 1)[1:])
    return out


def test_a_stream_is_charged_once_and_released_step_by_step(server: dict[str, Any],
                                                            noiseless: None) -> None:
    http, ledger = server["http"], server["ledger"]
    r = http.post("/v1/datasets/visits/streams", json=_open_body(), headers=_auth(server))
    assert r.status_code == 200, r.text
    opened = r.json()
    sid = opened["stream_id"]
    assert opened["t"] == 0 and opened["steps"] == [] and opened["next_available"]
    assert ledger.spent("visits") == dp.ZCDP(Fraction_q(1, 4))
    assert "filter" in ledger.release(sid)["query"]  # the rows are in the ledger's text
    truth = _truth(server["frame"])
    r = http.post(f"/v1/streams/{sid}/next", json={"max_steps": 5}, headers=_auth(server))
    assert r.status_code == 200, r.text
    got = r.json()
    assert [s["t"] for s in got["steps"]] == [1, 2, 3, 4, 5] and got["t"] == 5
    for step in got["steps"]:
        t = step["t"]
        assert step["interval"] == [t, t + 1]
        for rel in step["releases"]:
            assert rel["value"] == truth[rel["key"]][t - 1]
            assert rel["low"] < rel["value"] < rel["high"]
        for win in step["windows"]:
            before = truth[win["key"]][t - 4] if t > 3 else 0
            assert win["value"] == truth[win["key"]][t - 1] - before
    assert ledger.spent("visits") == dp.ZCDP(Fraction_q(1, 4))  # steps debit nothing
    assert ledger.stream_step(sid)[0] == 5
    # the history survives (a lost response loses nothing)
    r = http.get(f"/v1/streams/{sid}", params={"since": 3}, headers=_auth(server))
    assert [s["t"] for s in r.json()["steps"]] == [4, 5]
    # to the horizon, then a clear error
    r = http.post(f"/v1/streams/{sid}/next", json={"max_steps": 100}, headers=_auth(server))
    assert r.json()["t"] == N_DAYS and r.json()["closed"]
    r = http.post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    assert r.status_code == 422 and r.json()["error"] == "HorizonExceededError"
    assert ledger.verify() == []
    # only the newest state is kept, encrypted
    files = list((server["tmp"] / "ledger.sqlite.streams" / str(sid)).glob("*.state"))
    assert len(files) == 1 and files[0].name.startswith(f"{N_DAYS}-")
    assert b"north" not in files[0].read_bytes()


def Fraction_q(a: int, b: int) -> Any:  # noqa: N802 - a short exact rational
    from fractions import Fraction

    return Fraction(a, b)


def test_through_the_client_and_any_worker(server: dict[str, Any], noiseless: None) -> None:
    client = dp.Client(app=server["app"], token=server["tokens"]["bob"])
    q = client.query("visits").filter(col("age") >= 30)
    s = q.continual(dp.count(), time="day", horizon=N_DAYS, rho=0.5, mechanism="smooth",
                    keys=["north", "south"], by="region")
    truth = _truth(server["frame"])
    first = s.next(2)
    assert [step.t for step in first] == [1, 2]
    assert first[1]["north"].value == truth["north"][1]
    # a second worker (another application over the same ledger and streams_dir)
    other = dp.Client(app=create_app(_config(server["tmp"])), token=server["tokens"]["bob"])
    again = other.stream(s.stream_id)
    assert again.t == 2 and len(again.history()) == 2
    third = again.next(1)[0]
    assert third.t == 3 and third["south"].value == truth["south"][2]
    assert s.next(1)[0].t == 4  # the first worker continues from the ledger's mark
    sums = q.continual(dp.sum("amount", (0, 8)), time="day", horizon=N_DAYS, epsilon=None,
                       rho=0.25, mechanism="honaker")
    kept = server["frame"].filter(pl.col("age") >= 30)
    assert sums.next(1)[0].value == kept.filter(pl.col("day") == 1)["amount"].sum()
    prices = q.continual(dp.sum("price", (0, 2.5)), time="day", horizon=N_DAYS, rho=0.25,
                         mechanism="tree")  # a real-valued sum (on a grid of 2^-15)
    assert prices.next(1)[0].value == kept.filter(pl.col("day") == 1)["price"].sum()
    with pytest.raises(BudgetExceededError):  # the dataset's cap: 2 - 0.5 - 0.25 - 0.25 < 2
        q.continual(dp.count(), time="day", horizon=N_DAYS, rho=2)


def test_a_stale_or_concurrent_state_never_redraws_a_step(server: dict[str, Any]) -> None:
    http = server["http"]
    sid = http.post("/v1/datasets/visits/streams", json=_open_body(),
                    headers=_auth(server)).json()["stream_id"]
    http.post(f"/v1/streams/{sid}/next", json={"max_steps": 2}, headers=_auth(server))
    store = server["app"].state.dpkit.streams
    # two requests restore the same state; the second loses the compare-and-set
    with server["app"].state.dpkit.datasets["visits"].source.open() as data:
        state = server["app"].state.dpkit
        session = state.session(state.datasets["visits"], data, "alice")
        a = streams.load_stream(session, store, sid, "alice")
        b = streams.load_stream(session, store, sid, "alice")
        streams.advance(a, store, 1)
        with pytest.raises(StreamRollbackError):
            streams.advance(b, store, 1)
    assert len(store.candidates(sid, 3)) == 1  # the loser deleted its file
    # a stale file put back (a rollback of the directory) is never used
    stale = server["tmp"] / "stale"
    stale.mkdir()
    for f in store.candidates(sid, 3):
        shutil.copy(f, stale / f.name)
    http.post(f"/v1/streams/{sid}/next", json={"max_steps": 1}, headers=_auth(server))
    for f in store.folder(sid).glob("*.state"):
        f.unlink()
    for f in stale.iterdir():
        shutil.copy(f, store.folder(sid) / f.name)
    r = http.post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    assert r.status_code == 410 and r.json()["error"] == "StreamLost"
    assert server["ledger"].stream_step(sid)[0] == 4


def test_steps_become_available_by_the_clock(server: dict[str, Any]) -> None:
    today = datetime.now(UTC).date()
    body = _open_body(time="date", origin=(today - timedelta(days=2)).isoformat(),
                      horizon=30, window=None)
    r = server["http"].post("/v1/datasets/visits/streams", json=body, headers=_auth(server))
    assert r.status_code == 200, r.text
    sid = r.json()["stream_id"]
    r = server["http"].post(f"/v1/streams/{sid}/next", json={"max_steps": 10},
                            headers=_auth(server))
    got = r.json()
    assert [s["t"] for s in got["steps"]] == [1, 2]  # today's step has not ended
    assert got["steps"][0]["interval"] == [(today - timedelta(days=2)).isoformat(),
                                           (today - timedelta(days=1)).isoformat()]
    assert not got["next_available"] and got["next_interval"][0] == today.isoformat()


@pytest.mark.parametrize("change", [
    {"mechanism": "nope"}, {"horizon": 0}, {"horizon": streams.MAX_HORIZON + 1},
    {"budget": {"rho": "1/4", "epsilon": 1}}, {"budget": {}}, {"extra": 1},
    {"aggregation": {"agg": "mean", "column": "age", "bounds": [0, 1]}},
    {"aggregation": {"agg": "sum", "column": "amount"}},
    {"aggregation": {"agg": "sum", "column": "amount", "bounds": ["x", 2]}},
    {"steps": [{"step": "select_rows"}]}, {"time": "nope"}, {"keys": ["a"] * 1001},
    {"keys": ["north"], "by": None}, {"mechanism": "factorization", "budget": {"epsilon": 1}},
    {"horizon": None}, {"origin": "yesterday"}, {"origin": 2**63},
    {"time": "date", "origin": "9999-12-25", "window": None},
    {"keys": [str(i) for i in range(1000)], "horizon": 1000},
])
def test_refused_requests_debit_nothing(server: dict[str, Any], change: dict[str, Any]) -> None:
    r = server["http"].post("/v1/datasets/visits/streams", json=_open_body(**change),
                            headers=_auth(server))
    assert r.status_code == 422, (change, r.text)
    assert server["ledger"].spent("visits") == dp.ZCDP(0)


def test_access_control(server: dict[str, Any], tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    http = server["http"]
    assert http.post("/v1/datasets/visits/streams", json=_open_body()).status_code == 401
    over = _open_body(budget={"rho": 2})  # alice's grant is ρ = 1
    r = http.post("/v1/datasets/visits/streams", json=over, headers=_auth(server))
    assert r.status_code == 409 and server["ledger"].spent("visits") == dp.ZCDP(0)
    sid = http.post("/v1/datasets/visits/streams", json=_open_body(),
                    headers=_auth(server)).json()["stream_id"]
    for path in (f"/v1/streams/{sid}", f"/v1/streams/{sid + 100}"):
        assert http.get(path, headers=_auth(server, "bob")).status_code == 404
    assert http.post(f"/v1/streams/{sid}/next", json={},
                     headers=_auth(server, "bob")).status_code == 404
    assert http.post(f"/v1/streams/{sid}/next", json={"max_steps": 0},
                     headers=_auth(server)).status_code == 422
    # a release that is not a stream is not one
    q = {"aggs": [{"agg": "count"}], "budget": {"rho": "1/100"}}
    rid = http.post("/v1/datasets/visits/release", json=q,
                    headers=_auth(server)).json()["release_id"]
    assert http.get(f"/v1/streams/{rid}", headers=_auth(server)).status_code == 404
    # without an encryption key, hosting is off (and debits nothing)
    monkeypatch.delenv("DPKIT_TEST_STREAM_KEY")
    cfg = parse_config({"ledger": "l2.sqlite", "datasets": [
        {"name": "visits", "source": {"kind": "parquet", "path": "visits.parquet"},
         "budget": {"measure": "zcdp", "rho": 2}}]}, base=server["tmp"])
    bare = create_app(cfg)
    token = bare.state.dpkit.ledger.add_analyst("carol")
    bare.state.dpkit.ledger.grant("carol", "visits")
    with TestClient(bare) as h:
        r = h.post("/v1/datasets/visits/streams", json=_open_body(),
                   headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 501 and bare.state.dpkit.ledger.spent("visits") == dp.ZCDP(0)


def test_client_errors_are_typed(server: dict[str, Any], noiseless: None) -> None:
    client = dp.Client(app=server["app"], token=server["tokens"]["alice"])
    q = client.query("visits")
    with pytest.raises(DomainError):
        q.continual(dp.mean("age", (0, 99)), time="day", horizon=3, rho=0.1)
    s = q.continual(dp.count(), time="day", horizon=2, rho=0.1, mechanism="increments")
    assert [x.t for x in s.next(5)] == [1, 2] and s.closed
    with pytest.raises(HorizonExceededError):
        s.next()


def test_an_unbounded_stream_keeps_its_newest_steps(server: dict[str, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streams, "MAX_CELLS", 6)  # 3 steps of history for 2 keys
    body = _open_body(horizon=None, mechanism="hybrid", window=None)
    r = server["http"].post("/v1/datasets/visits/streams", json=body, headers=_auth(server))
    assert r.status_code == 200, r.text
    sid = r.json()["stream_id"]
    r = server["http"].post(f"/v1/streams/{sid}/next", json={"max_steps": 5},
                            headers=_auth(server))
    assert [s["t"] for s in r.json()["steps"]] == [1, 2, 3, 4, 5]
    kept = server["http"].get(f"/v1/streams/{sid}", headers=_auth(server)).json()
    assert [s["t"] for s in kept["steps"]] == [3, 4, 5] and kept["horizon"] is None
