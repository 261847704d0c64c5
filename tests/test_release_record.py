"""The one release record (issue 17): every front end — a session query, ``query.publish``
(histogram, PMW), a ``dpkit.learn`` fit, the server — builds the same frozen ``Release`` and
writes it to the ledger the same way: the noise as rows in one JSON encoding, the result hash
as a SHA-256 of the values by one canonical serialization. Before, a count wrote free text
("mechanism scale s" strings), a histogram and a fit wrote no noise at all, and each front end
hashed its result its own way."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.core.record import (
    NoiseRow,
    Release,
    digest_of,
    noise_json,
    noise_rows,
)
from dpkit.errors import DomainError, ReleaseFailedError
from dpkit.ledger import Ledger

HEX64 = re.compile(r"^[0-9a-f]{64}$")
ROW_KEYS = {"name", "scale", "sensitivity", "statistic"}


def _frame(n: int = 400) -> pl.DataFrame:
    return pl.DataFrame({"g": ["a", "b"] * (n // 2), "x": [float(i % 50) for i in range(n)],
                         "u": list(range(n))})


def _session(tmp_path, budget=None) -> dp.Session:
    return dp.Session(_frame(), budget=budget or dp.PureDP(20),
                      ledger=Ledger(tmp_path / "l.sqlite"), dataset="d")


def _check_row(ledger: Ledger, release: Release) -> dict:
    """The ledger row of ``release``: noise in the one encoding, equal to the record's rows;
    a 64-hex digest equal to the record's and to the digest of its values."""
    row = next(r for r in ledger.releases() if r["id"] == release.release_id)
    assert row["noise"] == noise_json(release.noise)  # one encoding, canonical
    assert all(set(d) == ROW_KEYS for d in json.loads(row["noise"]))
    assert noise_rows(row["noise"]) == release.noise
    assert HEX64.match(row["result_sha256"]) and row["result_sha256"] == release.digest
    assert release.digest == digest_of(release.values)
    assert row["status"] == "released" and ledger.verify() == []
    return row


# -- the record -------------------------------------------------------------------------------
def test_a_release_record_is_frozen(tmp_path):
    s = _session(tmp_path)
    s.query().count().release(epsilon=1)
    record = s.last_release
    assert isinstance(record, dp.Release) and s.accountant.last is record
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.digest = "0" * 64  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.noise[0].scale = Fraction(0)  # type: ignore[misc]
    assert record.accuracy is not None
    with pytest.raises(TypeError):
        record.accuracy.half_widths["x"] = 0.0  # type: ignore[index]
    arr = np.arange(3.0)
    held = dp.core.record.read_only(arr)
    with pytest.raises(ValueError):
        held[0] = 9.0


def test_noise_rows_are_exact_and_checked_before_anything_runs():
    row = NoiseRow("discrete Laplace", 0.1, 1, "count")
    assert row.scale == Fraction(0.1) and row.sensitivity == 1  # a float's binary value
    assert NoiseRow.from_dict(json.loads(json.dumps(row.as_dict()))) == row
    for bad in (float("nan"), float("inf"), "2", True):
        with pytest.raises(DomainError):
            NoiseRow("laplace", bad, 1)
    with pytest.raises(DomainError):
        NoiseRow("", 1, 1)
    assert noise_rows(None) is None and noise_rows('{"count": "x scale 1"}') is None
    assert noise_rows("[]") == ()


# -- one noise plan, one digest, for every front end --------------------------------------------
def test_a_count_records_its_planned_scales(tmp_path):
    s = _session(tmp_path)
    q = s.query().group_by("g", keys=["a", "b"]).agg(dp.count(), dp.sum("x", bounds=(0, 50)),
                                                      dp.mean("x", bounds=(0, 50)))
    _, planned = q.plan(Fraction(3, 2))
    out = q.release(epsilon=Fraction(3, 2), confidence=0.9)
    record = s.last_release
    assert record.values is out and record.loss == dp.PureDP(Fraction(3, 2))
    assert [(r.name, r.scale, r.sensitivity, r.statistic) for r in record.noise] == [
        (p.mechanism, p.scale * p.unit, p.sensitivity * p.unit, p.stat.key) for p in planned]
    assert any(p.unit != 1 for p in planned)  # a grid sum: its scale is in value units
    assert record.accuracy.beta == pytest.approx(0.1)
    assert dict(record.accuracy.half_widths) == {
        p.stat.key: pytest.approx(p.accuracy(0.1) * float(p.unit)) for p in planned}
    assert not record.replayed and record.status == "released"
    _check_row(s.ledger, record)


def test_every_front_end_writes_the_same_shape(tmp_path):
    s = _session(tmp_path)
    s.query().count().release(epsilon=1)
    count = _check_row(s.ledger, s.last_release)

    hist = s.query().publish.histogram("x", [0, 10, 20, 50], "hb", epsilon=1)
    record = s.last_release
    assert record.values is hist and record.noise[0].name == "hb"
    histogram = _check_row(s.ledger, record)

    from dpkit.learn import LinearRegression

    x = np.linspace(0, 1, 200)[:, None]
    model = LinearRegression(epsilon=1, bounds=(0, 1), y_bounds=(0, 2), accountant=s)
    model.fit(x, 2 * x[:, 0])
    assert model.release_ is s.last_release and model.release_.values is model
    fit = _check_row(s.ledger, model.release_)

    pmw = s.query().publish.pmw({"g": ["a", "b"]}, epsilon=1, alpha=50)
    assert pmw.release is s.last_release
    pmw_row = _check_row(s.ledger, pmw.release)

    for row in (count, histogram, fit, pmw_row):
        assert isinstance(json.loads(row["noise"]), list)
    assert json.loads(count["noise"])[0]["scale"] == "1"  # a count at ε = 1: b = 1/ε
    assert json.loads(histogram["noise"])[0]["scale"] is None  # the algorithm splits ε


def test_a_fit_without_an_accountant_keeps_its_record_too():
    from dpkit.learn import StandardScaler

    model = StandardScaler(epsilon=1, bounds=(0, 1)).fit(np.linspace(0, 1, 100)[:, None])
    record = model.release_
    assert record.release_id is None and record.loss == dp.PureDP(1)
    assert record.digest == digest_of(model) and HEX64.match(record.digest)


def test_a_replay_carries_the_original_digest(tmp_path):
    s = _session(tmp_path)
    q = s.query().group_by("g", keys=["a", "b"]).count()
    first = q.release(epsilon=1, idempotency_key="k")
    original = s.last_release
    again = q.release(epsilon=1, idempotency_key="k")
    replay = s.last_release
    assert replay.replayed and replay.loss is None and not original.replayed
    assert replay.release_id == original.release_id and replay.digest == original.digest
    assert replay.noise == original.noise and replay.accuracy == original.accuracy
    assert first.equals(again) and digest_of(again) == original.digest  # survives the JSON
    assert s.spent == dp.PureDP(1) and s.ledger.count() == 1


def test_a_failed_release_keeps_its_loss_and_no_digest(tmp_path):
    s = _session(tmp_path)
    acc = s.accountant

    def broken():
        raise ValueError("secret")

    with pytest.raises(ReleaseFailedError):
        acc.run(dp.PureDP(Fraction(1, 4)), "q", broken, noise=(NoiseRow("x", 1, 1),))
    record = s.last_release
    assert record.status == "failed" and record.loss == dp.PureDP(Fraction(1, 4))
    assert record.digest is None and record.values is None
    row = s.ledger.releases()[-1]
    assert row["status"] == "failed" and noise_rows(row["noise"]) == record.noise


def test_a_refused_release_leaves_no_record(tmp_path):
    s = _session(tmp_path, budget=dp.PureDP(1))
    s.query().count().release(epsilon=1)
    assert s.last_release is not None
    with pytest.raises(dp.errors.BudgetExceededError):
        s.query().count().release(epsilon=1)
    assert s.last_release is None  # not the previous release's record


def test_a_partition_part_records_through_the_session():
    s = dp.Session(_frame(), budget=dp.PureDP(4))
    parts = s.query().partition("g", ["a", "b"])
    out = parts["a"].count().release(epsilon=1)
    assert s.last_release is not None and s.last_release.values is out
    assert s.last_release.noise[0].scale == 1


def test_legacy_noise_text_stays_readable(tmp_path):
    from dpkit.cli.ledger import noise_text

    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.register("d", dp.PureDP(5))
    legacy = json.dumps({"count": "discrete Laplace scale 1"})
    rid = ledger.debit("d", dp.PureDP(1), "old", noise=legacy)
    ledger.mark(rid, "released", "ab" * 32)
    s = dp.Session(_frame(), budget=dp.PureDP(5), ledger=ledger, dataset="d")
    s.query().count().release(epsilon=1)
    rows = ledger.releases("d")
    assert noise_text(rows[0]["noise"]) == legacy
    assert re.fullmatch(r"\w+: discrete Laplace, scale 1, sensitivity 1",
                        noise_text(rows[1]["noise"]))
    assert ledger.verify() == []


# -- the digest --------------------------------------------------------------------------------
def test_digest_is_canonical_and_sensitive():
    frame = pl.DataFrame({"k": ["a", "b"], "n": pl.Series([1, 2], dtype=pl.UInt32),
                          "v": [0.5, None]})
    same = pl.DataFrame({"k": ["a", "b"], "n": [1, 2], "v": [0.5, None]})
    assert digest_of(frame) == digest_of(same)  # the JSON replay's Int64 agrees
    assert digest_of(frame) != digest_of(frame.with_columns(v=pl.Series([0.5, float("nan")])))
    assert digest_of(frame) != digest_of(frame.rename({"v": "w"}))
    assert digest_of(frame) != digest_of(frame.select("n", "k", "v"))
    assert digest_of(frame) != digest_of(frame.with_columns(pl.col("n") + 1))
    assert digest_of({"a": np.arange(4), "b": 1}) == digest_of({"b": 1, "a": np.arange(4)})
    assert digest_of(np.arange(4)) != digest_of(np.arange(4).reshape(2, 2))
    assert digest_of(np.arange(4)) != digest_of(np.arange(4.0))
    assert digest_of([1, "1"]) != digest_of(["1", 1])


def test_digest_never_reads_an_unknown_object():
    class Holder:
        def __init__(self, secret):
            self.secret = secret

    assert digest_of(Holder("alice")) == digest_of(Holder("bob"))


def test_a_models_digest_covers_its_fitted_attributes_only():
    from dpkit.learn import StandardScaler

    model = StandardScaler(epsilon=1, bounds=(0, 1)).fit(np.linspace(0, 1, 100)[:, None])
    before = digest_of(model)
    model.release_ = None
    assert digest_of(model) == before  # the record is not part of what it digests
    model.mean_ = model.mean_ + 1
    assert digest_of(model) != before


def test_the_server_renders_the_record(tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    pytest.importorskip("yaml")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with")
        from fastapi.testclient import TestClient
    from dpkit.server.app import create_app
    from dpkit.server.config import parse_config

    _frame().write_csv(tmp_path / "t.csv")
    cfg = parse_config({"ledger": "ledger.sqlite", "datasets": [
        {"name": "t", "source": {"kind": "csv", "path": "t.csv"}, "privacy_unit": "rows",
         "budget": {"measure": "pure", "epsilon": 3}}]}, base=tmp_path)
    app = create_app(cfg)
    ledger = app.state.dpkit.ledger
    headers = {"Authorization": f"Bearer {ledger.add_analyst('ana')}"}
    ledger.grant("ana", "t")
    body = {"group_by": {"columns": ["g"], "keys": {"g": ["a", "b"]}},
            "aggs": [{"agg": "count"}], "budget": {"epsilon": "1/2"},
            "idempotency_key": "k1"}
    with TestClient(app) as http:
        first = http.post("/v1/datasets/t/release", json=body, headers=headers).json()
        again = http.post("/v1/datasets/t/release", json=body, headers=headers).json()
        info = http.get(f"/v1/releases/{first['release_id']}", headers=headers).json()
    row = ledger.releases("t")[0]
    # the response shows decimals with the ledger's exact rows under "exact" (issue 33)
    assert first["noise"] == info["noise_rows"]
    assert [{**r.as_dict()} for r in map(NoiseRow.from_dict, first["noise"])] == json.loads(
        row["noise"])
    assert [set(r) for r in json.loads(row["noise"])] == [ROW_KEYS]
    assert [set(r) for r in first["noise"]] == [ROW_KEYS | {"exact"}]
    assert first["noise"][0]["scale"] == 2.0  # a count at ε = 1/2
    assert first["noise"][0]["exact"] == {"scale": "2", "sensitivity": "1"}
    assert HEX64.match(first["digest"]) and first["digest"] == row["result_sha256"]
    assert again["replayed"] and again["digest"] == first["digest"]
    assert again["noise"] == first["noise"] and again["release_id"] == first["release_id"]
    assert info["noise"] == row["noise"]  # the stored text, unchanged
