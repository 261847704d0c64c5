"""Continual releases hosted by the server (issue 20; dpkit.server.streams): opened once
through the ledger, advanced step by step by any worker from the encrypted state the ledger's
step mark names, over HTTP and through dpkit.Client; refused requests debit nothing."""

from __future__ import annotations

import json
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
                         "price": rng.integers(0, 11, n) * 0.25,
                         "stamp": [datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=int(d))
                                   for d in rng.integers(0, N_DAYS, n)]})


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
    {"keys": [str(i) for i in range(1000)], "horizon": 2001},
    {"keys": [str(i) for i in range(1000)], "horizon": 201, "mechanism": "factorization"},
    {"keys": [str(i) for i in range(1000)], "window": 50},
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


def test_an_unbounded_stream_keeps_every_step_in_pages(server: dict[str, Any],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streams, "MAX_CELLS_PER_REQUEST", 6)  # pages of 3 steps for 2 keys
    body = _open_body(horizon=None, mechanism="hybrid", window=None)
    r = server["http"].post("/v1/datasets/visits/streams", json=body, headers=_auth(server))
    assert r.status_code == 200, r.text
    sid = r.json()["stream_id"]
    for _ in range(2):
        r = server["http"].post(f"/v1/streams/{sid}/next", json={"max_steps": 3},
                                headers=_auth(server))
    assert [s["t"] for s in r.json()["steps"]] == [4, 5, 6]
    first = server["http"].get(f"/v1/streams/{sid}", headers=_auth(server)).json()
    assert [s["t"] for s in first["steps"]] == [1, 2, 3] and first["horizon"] is None
    client = dp.Client(app=server["app"], token=server["tokens"]["alice"])
    assert [s.t for s in client.stream(sid).history()] == [1, 2, 3, 4, 5, 6]


# -- issue 30: attacks on hosted streams, each a regression test --------------------------------
def _open(server: dict[str, Any], **change: Any) -> int:
    r = server["http"].post("/v1/datasets/visits/streams", json=_open_body(**change),
                            headers=_auth(server))
    assert r.status_code == 200, r.text
    return int(r.json()["stream_id"])


def _state_bytes(server: dict[str, Any], sid: int) -> int:
    files = list((server["tmp"] / "ledger.sqlite.streams" / str(sid)).glob("*.state"))
    assert len(files) == 1
    return files[0].stat().st_size


def test_the_secret_state_does_not_grow_with_the_history(server: dict[str, Any]) -> None:
    """Finding 4: the released history lived in the encrypted state, so step t cost O(t·keys)."""
    keys = [f"k{i}" for i in range(50)]
    sid = _open(server, keys=keys, horizon=400, window=None, mechanism="increments")
    http = server["http"]
    http.post(f"/v1/streams/{sid}/next", json={"max_steps": 2}, headers=_auth(server))
    early = _state_bytes(server, sid)
    http.post(f"/v1/streams/{sid}/next", json={"max_steps": 200}, headers=_auth(server))
    assert _state_bytes(server, sid) < early * 1.2  # O(keys), not O(t·keys)


def test_history_is_paginated_and_bounded(server: dict[str, Any], noiseless: None) -> None:
    http = server["http"]
    sid = _open(server, horizon=N_DAYS)
    http.post(f"/v1/streams/{sid}/next", json={"max_steps": 7}, headers=_auth(server))
    page = http.get(f"/v1/streams/{sid}", params={"offset": 2, "limit": 3},
                    headers=_auth(server)).json()
    assert [s["t"] for s in page["steps"]] == [3, 4, 5] and page["t"] == 7
    r = http.get(f"/v1/streams/{sid}", params={"limit": streams.MAX_PAGE + 1},
                 headers=_auth(server))
    assert r.status_code == 422
    # the default page is bounded, and the client's history() pages through all of it
    client = dp.Client(app=server["app"], token=server["tokens"]["alice"])
    assert [s.t for s in client.stream(sid).history()] == list(range(1, 8))
    assert [s.t for s in client.stream(sid).history(since=5)] == [6, 7]


def test_keys_times_steps_per_request_is_bounded(server: dict[str, Any]) -> None:
    keys = [str(i) for i in range(1000)]
    sid = _open(server, keys=keys, horizon=200, window=None, mechanism="increments")
    r = server["http"].post(f"/v1/streams/{sid}/next", json={"max_steps": 200},
                            headers=_auth(server))
    assert r.status_code == 422 and server["ledger"].stream_step(sid)[0] == 0


def test_released_history_is_authenticated(server: dict[str, Any]) -> None:
    """A ledger-host adversary cannot silently edit, drop or move released steps."""
    http = server["http"]
    sid = _open(server)
    http.post(f"/v1/streams/{sid}/next", json={"max_steps": 3}, headers=_auth(server))
    log = streams.StreamStore.history_path(server["app"].state.dpkit.streams, sid)
    text = log.read_bytes()
    lines = text.splitlines(keepends=True)
    doc = json.loads(lines[0])
    doc["step"]["releases"][0]["value"] += 1  # a released value changed, its MAC kept
    edited = json.dumps(doc).encode() + b"\n"
    log.write_bytes(edited + b"".join(lines[1:]))
    r = http.get(f"/v1/streams/{sid}", headers=_auth(server))
    assert r.status_code == 500 and r.json()["error"] == "StreamHistoryDamaged"
    log.write_bytes(b"".join(lines[1:]))  # a dropped step
    assert http.get(f"/v1/streams/{sid}", headers=_auth(server)).status_code == 500
    log.write_bytes(text + b'{"t":4,')  # a torn tail (a crash mid-append) is ignored
    assert [s["t"] for s in http.get(f"/v1/streams/{sid}", headers=_auth(server)
                                     ).json()["steps"]] == [1, 2, 3]
    r = http.post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    assert r.status_code == 200 and [s["t"] for s in r.json()["steps"]] == [4]
    got = http.get(f"/v1/streams/{sid}", headers=_auth(server)).json()["steps"]
    assert [s["t"] for s in got] == [1, 2, 3, 4]


def test_a_step_recorded_but_not_logged_is_recovered(server: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between the ledger's mark and the log's append loses no released step."""
    http = server["http"]
    sid = _open(server)
    http.post(f"/v1/streams/{sid}/next", json={"max_steps": 2}, headers=_auth(server))
    monkeypatch.setattr(streams.StreamStore, "append", lambda *a, **k: None)  # the "crash"
    http.post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    monkeypatch.undo()
    got = http.get(f"/v1/streams/{sid}", headers=_auth(server)).json()["steps"]
    assert [s["t"] for s in got] == [1, 2, 3]


def test_a_pure_stream_on_a_zcdp_dataset_releases(server: dict[str, Any]) -> None:
    """Finding 5a: paid, then 410 StreamLost at every step (loss texts in two measures)."""
    sid = _open(server, budget={"epsilon": "1/2"})
    r = server["http"].post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    assert r.status_code == 200, r.text
    assert [s["t"] for s in r.json()["steps"]] == [1]


@pytest.mark.parametrize("change", [
    {"aggregation": {"agg": "sum", "column": "price", "bounds": ["0", "1e-305"]}},
    {"aggregation": {"agg": "sum", "column": "price", "bounds": ["-1e-300", "0"]},
     "mechanism": "hybrid", "horizon": None},
    {"time": "stamp", "origin": "2024-01-01T00:00:00", "window": None},  # naive vs UTC
    {"time": "stamp", "origin": "2024-01-01T00:00:00+03:00", "window": None},  # +03 vs UTC
    {"time": "date", "origin": "9900-01-01", "horizon": None, "mechanism": "hybrid",
     "window": None},  # an unbounded stream that meets the calendar's end after the debit
])
def test_what_fails_after_the_debit_is_refused_before_it(server: dict[str, Any],
                                                          change: dict[str, Any]) -> None:
    """Findings 5b, 5c: an overflowing grid, a time zone that disagrees with ``origin``."""
    r = server["http"].post("/v1/datasets/visits/streams", json=_open_body(**change),
                            headers=_auth(server))
    assert r.status_code == 422, r.text
    assert server["ledger"].spent("visits") == dp.ZCDP(0)


def test_a_datetime_stream_with_matching_zones_releases(server: dict[str, Any]) -> None:
    sid = _open(server, time="stamp", origin="2024-01-01T00:00:00+00:00", window=None,
                every=86400)
    r = server["http"].post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    assert r.status_code == 200 and [s["t"] for s in r.json()["steps"]] == [1]


def test_a_retired_dataset_releases_no_further_step(server: dict[str, Any]) -> None:
    """Finding 5d: streams opened before ``dpkit ledger retire`` kept releasing."""
    http = server["http"]
    sid = _open(server)
    http.post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    server["ledger"].retire("visits")
    r = http.post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    assert r.status_code == 409 and r.json()["error"] == "DatasetRetired"
    assert server["ledger"].stream_step(sid)[0] == 1
    assert http.get(f"/v1/streams/{sid}", headers=_auth(server)).status_code == 200


def test_errors_after_the_debit_name_no_value(server: dict[str, Any],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """After the debit a step's failure is a fixed, data-free answer (not a Polars message)."""
    from dpkit.stream import frames

    sid = _open(server)

    def leak(self: Any, frame: pl.DataFrame) -> list[int]:
        raise ValueError(f"could not compare {frame['region'][0]!r}")

    monkeypatch.setattr(frames.ContinualRelease, "_increments", leak)
    r = server["http"].post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    assert r.status_code == 500 and r.json()["error"] == "ReleaseFailed"
    assert "north" not in r.text and "south" not in r.text and "east" not in r.text
    assert server["ledger"].stream_step(sid)[0] == 0


def test_a_state_deleted_under_a_reader_is_a_retryable_conflict(
        server: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 7: a state file deleted by ``cleanup`` before a concurrent request read it
    was a 500; now a 409 the client may retry."""
    http = server["http"]
    sid = _open(server)
    store = server["app"].state.dpkit.streams
    listed = streams.StreamStore.candidates

    def raced(self: Any, stream_id: int, step: int) -> list[Path]:
        found = listed(self, stream_id, step)
        for f in found:  # another request advanced and cleaned up in between
            f.unlink()
        return found

    monkeypatch.setattr(streams.StreamStore, "candidates", raced)
    r = http.post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
    assert r.status_code in (409, 410), r.text
    assert r.status_code != 500
    assert store is not None


def test_racing_next_requests_never_get_a_500(server: dict[str, Any]) -> None:
    import threading

    sid = _open(server, horizon=1000, window=None)
    codes: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        http = TestClient(server["app"])
        for _ in range(25):
            r = http.post(f"/v1/streams/{sid}/next", json={}, headers=_auth(server))
            with lock:
                codes.append(r.status_code)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(codes) == 200 and set(codes) <= {200, 409}, sorted(set(codes))
    released = server["ledger"].stream_step(sid)[0]
    assert released == codes.count(200) and released >= 1
    got = server["http"].get(f"/v1/streams/{sid}", params={"limit": 1000},
                             headers=_auth(server)).json()["steps"]
    assert [s["t"] for s in got] == list(range(1, released + 1))
