"""The HTTP server (``dpkit serve``) and ``dpkit.Client``: releases debit exactly their loss,
explain is free, idempotent retries replay, and every refused request — no or wrong token,
no grant, someone else's releases, oversized or malformed queries, attempts to get rows out
through expressions, exhausted budgets — gets the right status and debits nothing."""

import json
import logging
import warnings
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest

import dpkit as dp

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("yaml")

with warnings.catch_warnings():  # Starlette's note about its httpx dependency
    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient  # noqa: E402
from tests.processes import ServerProcess  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from dpkit.client import ServerError, col, lit  # noqa: E402
from dpkit.errors import BudgetExceededError, ColumnError, DomainError  # noqa: E402
from dpkit.server import protocol  # noqa: E402
from dpkit.server.app import create_app  # noqa: E402
from dpkit.server.config import ConfigError, load_config, parse_config  # noqa: E402

MAX_BODY = 16_384
KEYS = {"columns": ["sex"], "keys": {"sex": ["Female", "Male"]}}
COUNT_MEAN = [{"agg": "count"}, {"agg": "mean", "column": "age", "bounds": [17, 90]}]


def query(**overrides):
    body = {"steps": [{"step": "filter", "expr": {"op": ">=", "args": [{"col": "age"},
                                                                      {"lit": 30}]}}],
            "group_by": KEYS, "aggs": COUNT_MEAN, "budget": {"epsilon": "1/4"}}
    return {**body, **overrides}


@pytest.fixture(scope="module")
def adult():
    return dp.datasets.load_adult("train").head(2000)


@pytest.fixture
def server(tmp_path, adult):
    """An app with three datasets, and analysts alice (cap ε = 2 on adult), bob (no cap on
    adult, grants on units/approx) and carol (no grants)."""
    adult.write_csv(tmp_path / "adult.csv")
    cfg = parse_config({
        "ledger": "ledger.sqlite", "max_body_bytes": MAX_BODY,
        "datasets": [
            {"name": "adult", "source": {"kind": "csv", "path": "adult.csv"},
             "privacy_unit": "rows", "budget": {"measure": "pure", "epsilon": 3}},
            {"name": "units", "source": {"kind": "csv", "path": "adult.csv"},
             "privacy_unit": {"column": "fnlwgt", "max_rows": 2},
             "budget": {"measure": "pure", "epsilon": 3}},
            {"name": "approx", "source": {"kind": "csv", "path": "adult.csv"},
             "budget": {"measure": "approx", "epsilon": 3, "delta": "1/1000000"}}]},
        base=tmp_path)
    app = create_app(cfg)
    ledger = app.state.dpkit.ledger
    tokens = {name: ledger.add_analyst(name) for name in ("alice", "bob", "carol")}
    ledger.grant("alice", "adult", dp.PureDP(2))
    ledger.grant("bob", "adult")
    ledger.grant("bob", "units")
    ledger.grant("bob", "approx")
    http = TestClient(app)
    yield {"app": app, "ledger": ledger, "tokens": tokens, "http": http}
    http.close()


def auth(server, who):
    return {"Authorization": f"Bearer {server['tokens'][who]}"}


def post(server, who, path, body):
    return server["http"].post(path, json=body, headers=auth(server, who))


def snapshot(server):
    ledger = server["ledger"]
    return (ledger.count(), [ledger.spent(d) for d in ("adult", "units", "approx")])


# -- what works ----------------------------------------------------------------------------
def test_release_debits_exactly_its_loss(server):
    r = post(server, "alice", "/v1/datasets/adult/release", query())
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["loss"] == {"measure": "PureDP", "epsilon": 0.25, "exact": {"epsilon": "1/4"},
                            "text": "ε = 0.25"}
    assert server["ledger"].spent("adult") == dp.PureDP(Fraction(1, 4))
    assert server["ledger"].spent("adult", "alice") == dp.PureDP(Fraction(1, 4))
    assert [row["sex"] for row in body["records"]] == ["Female", "Male"]
    assert [c["name"] for c in body["columns"]][:2] == ["sex", "count"]
    assert r.headers["x-request-id"]
    rows = server["ledger"].releases("adult")
    assert [x["id"] for x in rows] == [body["release_id"]] and rows[0]["status"] == "released"


def test_explain_is_free(server):
    before = snapshot(server)
    r = post(server, "alice", "/v1/datasets/adult/explain", query())
    assert r.status_code == 200, r.text
    body = r.json()
    assert "total: ε = 0.25" in body["text"]
    assert [s["statistic"] for s in body["statistics"]] == ["a0_n", "a1_s", "a1_n"]
    assert all(s["sensitivity"] > 0 and s["scale"] > 0 and s["expected_error"] > 0
               for s in body["statistics"])
    assert body["total"]["exact"]["epsilon"] == "1/4" and body["affordable"] is True
    assert body["remaining"]["exact"]["epsilon"] == "2"  # alice's cap is tighter than the dataset's
    assert snapshot(server) == before


def test_idempotent_retry_replays_and_debits_once(server):
    body = query(idempotency_key="report-1")
    first = post(server, "alice", "/v1/datasets/adult/release", body).json()
    again = post(server, "alice", "/v1/datasets/adult/release", body).json()
    assert again["records"] == first["records"]
    assert again["release_id"] == first["release_id"] and again["replayed"] is True
    assert again["loss"]["exact"]["epsilon"] == "0"
    assert server["ledger"].spent("adult") == dp.PureDP(Fraction(1, 4))
    other = post(server, "bob", "/v1/datasets/adult/release", body).json()  # bob's own key
    assert other["replayed"] is False
    assert server["ledger"].spent("adult") == dp.PureDP(Fraction(1, 2))


def test_datasets_lists_granted_ones_with_budgets(server):
    post(server, "alice", "/v1/datasets/adult/release", query())
    r = server["http"].get("/v1/datasets", headers=auth(server, "alice"))
    assert r.status_code == 200
    (info,) = r.json()
    assert info["name"] == "adult" and info["measure"] == "PureDP"
    assert {"name": "age", "dtype": "Int64"} in info["columns"]
    exact = {k: info[k]["exact"]["epsilon"] for k in ("cap", "spent", "analyst_cap", "remaining")}
    assert exact == {"cap": "3", "spent": "1/4", "analyst_cap": "2", "remaining": "7/4"}
    assert info["remaining"]["epsilon"] == 1.75  # the decimal beside it, for people
    names = [d["name"] for d in server["http"].get("/v1/datasets",
                                                   headers=auth(server, "bob")).json()]
    assert names == ["adult", "units", "approx"]
    assert server["http"].get("/v1/datasets", headers=auth(server, "carol")).json() == []


def test_partition_selection_alpha_and_health(server):
    body = query(group_by={"columns": ["education"],
                           "selection": {"epsilon": 1, "delta": "1/10000000"}},
                 aggs=[{"agg": "count"}], budget={"epsilon": 1, "delta": "1/10000000"})
    r = post(server, "bob", "/v1/datasets/approx/release", body)
    assert r.status_code == 200, r.text
    loss = r.json()["loss"]
    spent = dp.ApproxDP(Fraction(loss["exact"]["epsilon"]), Fraction(loss["exact"]["delta"]))
    assert server["ledger"].spent("approx") == spent  # selection + Gaussian count, exactly
    assert spent <= dp.ApproxDP(2, Fraction(2, 10_000_000))
    r = post(server, "bob", "/v1/datasets/adult/release",
             query(budget={"alpha": 200, "confidence": 0.9}))
    assert r.status_code == 200, r.text
    loss = dp.PureDP(Fraction(r.json()["loss"]["exact"]["epsilon"]))
    assert server["ledger"].spent("adult") == loss
    assert server["http"].get("/healthz").json()["status"] == "ok"
    assert server["http"].get("/docs").status_code == 200
    assert "/v1/datasets/{name}/release" in server["http"].get("/openapi.json").json()["paths"]


# -- authentication and authorisation ------------------------------------------------------
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"},
                                     {"Authorization": "Basic YWxpY2U6eA=="},
                                     {"Authorization": "Bearer "}])
def test_missing_or_wrong_token_is_401(server, headers):
    before = snapshot(server)
    http = server["http"]
    for r in (http.post("/v1/datasets/adult/release", json=query(), headers=headers),
              http.post("/v1/datasets/adult/explain", json=query(), headers=headers),
              http.get("/v1/datasets", headers=headers),
              http.get("/v1/releases", headers=headers)):
        assert r.status_code == 401, r.text
        assert "record" not in r.text
    assert snapshot(server) == before


def test_revoked_token_and_grant_are_refused_by_the_next_request(server):
    """Issue 35: the worker caches token and grant answers; a change made by another process
    (the command line, another worker) moves the chain head, and the next request re-reads."""
    from dpkit.ledger import Ledger

    assert post(server, "alice", "/v1/datasets/adult/release", query()).status_code == 200
    admin = Ledger(server["ledger"].url)
    old = server["tokens"]["alice"]
    server["tokens"]["alice"] = admin.rotate_token("alice")
    refused = server["http"].post("/v1/datasets/adult/release", json=query(),
                                  headers={"Authorization": f"Bearer {old}"})
    assert refused.status_code == 401, refused.text
    assert post(server, "alice", "/v1/datasets/adult/release", query()).status_code == 200
    admin.grant("alice", "adult", dp.PureDP(Fraction(1, 2)))  # down to her spend
    before = snapshot(server)
    assert post(server, "alice", "/v1/datasets/adult/release", query()).status_code != 200
    assert snapshot(server) == before


def test_no_grant_is_403_and_unknown_dataset_404(server):
    before = snapshot(server)
    assert post(server, "carol", "/v1/datasets/adult/release", query()).status_code == 403
    assert post(server, "carol", "/v1/datasets/adult/explain", query()).status_code == 403
    assert post(server, "alice", "/v1/datasets/units/release", query()).status_code == 403
    assert post(server, "alice", "/v1/datasets/nope/release", query()).status_code == 404
    assert snapshot(server) == before


def test_analysts_see_only_their_own_releases(server):
    mine = post(server, "alice", "/v1/datasets/adult/release", query()).json()["release_id"]
    post(server, "bob", "/v1/datasets/adult/release", query())
    http = server["http"]
    alice = http.get("/v1/releases", headers=auth(server, "alice")).json()
    bob = http.get("/v1/releases", headers=auth(server, "bob")).json()
    assert [r["id"] for r in alice] == [mine]
    assert mine not in [r["id"] for r in bob] and len(bob) == 1
    assert http.get(f"/v1/releases/{mine}", headers=auth(server, "bob")).status_code == 404
    assert http.get(f"/v1/releases/{mine}", headers=auth(server, "alice")).status_code == 200
    assert "result" not in alice[0]  # metadata only, no stored answers


# -- refused queries ---------------------------------------------------------------------------
def test_oversized_body_is_413(server):
    before = snapshot(server)
    big = query(idempotency_key="x" * 100, steps=[{"step": "map", "column": "race",
                                                   "mapping": [[f"v{i}", "w"] for i in
                                                               range(3000)]}])
    r = post(server, "alice", "/v1/datasets/adult/release", big)
    assert r.status_code == 413
    payload = json.dumps(big).encode()
    chunks = (payload[i:i + 4096] for i in range(0, len(payload), 4096))  # no Content-Length
    r = server["http"].post("/v1/datasets/adult/release", content=chunks,
                            headers={**auth(server, "alice"),
                                     "Content-Type": "application/json"})
    assert r.status_code == 413
    assert snapshot(server) == before


def deep(levels):
    expr = {"op": ">=", "args": [{"col": "age"}, {"lit": 30}]}
    for _ in range(levels):
        expr = {"op": "~", "args": [expr]}
    return expr


REFUSED = {
    "malformed JSON": b'{"aggs": [{"agg": "count"}',
    "not an object": b"[1, 2, 3]",
    "unknown op": query(steps=[{"step": "filter", "expr": {"op": "sort", "args": [
        {"col": "age"}]}}]),
    "python call op": query(steps=[{"step": "with_columns", "columns": {"x": {
        "op": "map_elements", "args": [{"col": "age"}]}}}]),
    "unknown agg": query(aggs=[{"agg": "collect", "column": "age"}]),
    "raw rows agg": query(aggs=[{"agg": "rows"}]),
    "select step": query(steps=[{"step": "select", "columns": ["age", "sex"]}]),
    "collect step": query(steps=[{"step": "collect"}]),
    "extra top-level field": {**query(), "return_rows": True},
    "extra expression field": query(steps=[{"step": "filter", "expr": {
        "col": "age", "op": "head"}}]),
    "literal object": query(steps=[{"step": "filter", "expr": {"lit": {"a": 1}}}]),
    "expression too deep": query(steps=[{"step": "filter", "expr": deep(20)}]),
    "JSON too deep": query(steps=[{"step": "filter", "expr": deep(80)}]),
    "wrong arity": query(steps=[{"step": "filter", "expr": {"op": ">=", "args": [
        {"col": "age"}]}}]),
    "no aggregation": query(aggs=[]),
    "no bounds": query(aggs=[{"agg": "mean", "column": "age"}]),
    "unknown column": query(aggs=[{"agg": "sum", "column": "salary", "bounds": [0, 1]}]),
    "type error": query(steps=[{"step": "filter", "expr": {"op": ">", "args": [
        {"col": "sex"}, {"lit": 3}]}}]),
    "bad number": query(budget={"epsilon": "lots"}),
    "huge exponent": query(budget={"epsilon": "1e99999999"}),
    "too many cells": query(group_by={"columns": ["age"], "keys": list(range(1000))},
                            aggs=[{"agg": "quantile", "column": "age", "q": 0.5,
                                   "bounds": [0, 100], "candidates": 5000}]),
    "negative epsilon": query(budget={"epsilon": -1}),
    "no budget": query(budget={}),
    "keys and selection": query(group_by={**KEYS, "selection": {"epsilon": 1,
                                                               "delta": 0.001}}),
    "no keys": query(group_by={"columns": ["sex"]}),
    "reserved name": query(steps=[{"step": "with_columns", "columns": {
        "__dpkit_rand": {"lit": 1}}}]),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_malformed_or_unsafe_queries_are_422(server, case):
    before = snapshot(server)
    body = REFUSED[case]
    headers = {**auth(server, "alice"), "Content-Type": "application/json"}
    for path in ("/v1/datasets/adult/release", "/v1/datasets/adult/explain"):
        if isinstance(body, bytes):
            r = server["http"].post(path, content=body, headers=headers)
        else:
            r = server["http"].post(path, json=body, headers=headers)
        assert r.status_code == 422, (case, r.text)
        assert r.json()["error"]
    assert snapshot(server) == before


def test_unit_column_cannot_be_rewritten(server):
    before = snapshot(server)
    body = query(steps=[{"step": "with_columns", "columns": {"fnlwgt": {"lit": 1}}}])
    r = post(server, "bob", "/v1/datasets/units/release", body)
    assert r.status_code == 422 and "privacy unit" in r.json()["detail"]
    assert snapshot(server) == before


def test_budget_exhaustion_is_409_and_debits_nothing(server):
    before = snapshot(server)
    r = post(server, "alice", "/v1/datasets/adult/release", query(budget={"epsilon": 2.5}))
    assert r.status_code == 409 and r.json()["error"] == "BudgetExceededError"
    assert "alice" in r.json()["detail"]  # her grant's cap
    r = post(server, "bob", "/v1/datasets/adult/release", query(budget={"epsilon": 3.5}))
    assert r.status_code == 409  # the dataset's lifetime cap
    assert "lifetime cap" in r.json()["detail"] and "sqlite" not in r.json()["detail"]
    assert snapshot(server) == before
    assert post(server, "alice", "/v1/datasets/adult/release",
                query(budget={"epsilon": 2})).status_code == 200
    r = post(server, "alice", "/v1/datasets/adult/release", query(budget={"epsilon": 0.01}))
    assert r.status_code == 409
    assert server["ledger"].spent("adult") == dp.PureDP(2)


def test_failure_after_debit_returns_nothing(server, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("value 'Bachelors' in row 7")  # an error text holding data

    monkeypatch.setattr("dpkit.frame.session._assemble", broken)  # after the debit
    r = post(server, "alice", "/v1/datasets/adult/release", query())
    assert r.status_code == 500 and "Bachelors" not in r.text and "records" not in r.json()
    assert server["ledger"].spent("adult") == dp.PureDP(Fraction(1, 4))  # no refund
    assert [x["status"] for x in server["ledger"].releases("adult")] == ["failed"]


def test_logs_are_structured_and_hold_no_data(server):
    lines = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(logging.getLogger("dpkit.server").handlers[0].formatter)
    logging.getLogger("dpkit.server").addHandler(handler)
    try:
        body = query(steps=[{"step": "filter", "expr": {"op": "==", "args": [
            {"col": "race"}, {"lit": "Needle-Literal"}]}}])
        r = post(server, "alice", "/v1/datasets/adult/release", body)
        post(server, "alice", "/v1/datasets/adult/release", {"aggs": "Needle-Literal"})
    finally:
        logging.getLogger("dpkit.server").removeHandler(handler)
    records = [json.loads(line) for line in lines]
    ok = next(x for x in records if x.get("status") == 200)
    assert ok["analyst"] == "alice" and ok["dataset"] == "adult"
    assert ok["loss"] == "ε = 0.25" and ok["release_id"] == r.json()["release_id"]
    assert ok["request_id"] == r.headers["x-request-id"] and ok["latency_ms"] >= 0
    assert any(x.get("status") == 422 for x in records)
    text = "\n".join(lines)
    assert "Needle" not in text and "Female" not in text
    assert "count_ci" not in text and "records" not in text  # no results either


# -- the client ---------------------------------------------------------------------------
def test_client_mirrors_session(server, adult, tmp_path):
    client = dp.Client(app=server["app"], token=server["tokens"]["bob"])
    remote = (client.query("adult")
              .filter((col("age") >= 30) & ~col("workclass").is_null())
              .with_columns(senior=col("age") > 60, half=col("hours-per-week") / 2)
              .clamp("hours-per-week", 0, 80)
              .bin("age", width=10, name="decade")
              .map("sex", {"Female": "F", "Male": "M"})
              .fill_null("occupation", "?")
              .drop_nulls("race")
              .group_by("sex", keys=["F", "M"])
              .agg(dp.count(), dp.mean("hours-per-week"), dp.median("age", (17, 90)),
                   dp.max("decade", (0, 100)), dp.std("half", (0, 50))))
    session = dp.Session(adult, dp.PrivacyUnit.rows(), dp.PureDP(10))
    import narwhals as nw

    local = (session.query()
             .filter((nw.col("age") >= 30) & ~nw.col("workclass").is_null())
             .with_columns(senior=nw.col("age") > 60, half=nw.col("hours-per-week") / 2)
             .clamp("hours-per-week", 0, 80)
             .bin("age", width=10, name="decade")
             .map("sex", {"Female": "F", "Male": "M"})
             .fill_null("occupation", "?")
             .drop_nulls("race")
             .group_by("sex", keys=["F", "M"])
             .agg(dp.count(), dp.mean("hours-per-week"), dp.median("age", (17, 90)),
                  dp.max("decade", (0, 100)), dp.std("half", (0, 50))))
    assert remote.explain(epsilon=1).splitlines()[1:] == local.explain(epsilon=1).splitlines()[1:]
    got, want = remote.release(epsilon=1), local.release(epsilon=1)
    assert got.schema == want.schema and got["sex"].to_list() == ["F", "M"]
    assert got["age_median_ci_low"].to_list() == [17.0, 17.0]  # the bounds (issue 33)
    assert client.last_release["loss"]["exact"]["epsilon"] == "1"
    assert [r["id"] for r in client.releases()] == [client.last_release["release_id"]]
    hist = client.query("adult").agg(dp.histogram("age", [17, 30, 50, 90])).release(epsilon=1)
    assert hist.columns == ["bin", "count", "count_ci_low", "count_ci_high"]
    with pytest.raises(BudgetExceededError):
        client.query("adult").count().release(epsilon=5)
    with pytest.raises(ColumnError):
        client.query("adult").sum("salary", (0, 1)).release(epsilon=0.1)
    with pytest.raises(DomainError):
        client.query("adult").filter(col("age") > lit("x") + 1).count().release(epsilon=0.1)
    assert [d["name"] for d in client.datasets()] == ["adult", "units", "approx"]
    with pytest.raises(ServerError) as denied:
        dp.Client(app=server["app"], token="nope").datasets()
    assert denied.value.status == 401


def test_client_returns_the_servers_record(server):
    """``release_record`` hands back the server's release record (the one the session
    returned), not a reading of ``last_release``: the same id, loss, noise and digest as
    the ledger's row."""
    from dpkit.core.record import Release, digest_of

    client = dp.Client(app=server["app"], token=server["tokens"]["bob"])
    q = client.query("adult").group_by("sex", keys=["Female", "Male"]).count()
    record = q.release_record(epsilon=Fraction(1, 4), idempotency_key="rec-1")
    assert isinstance(record, Release) and record.loss == dp.PureDP(Fraction(1, 4))
    assert record.values["sex"].to_list() == ["Female", "Male"]
    assert len(record.noise) == 1 and "count" in record.description
    row = client.releases()[-1]
    assert row["id"] == record.release_id and row["result_sha256"] == record.digest
    assert digest_of(record.values) == record.digest
    again = q.release_record(epsilon=Fraction(1, 4), idempotency_key="rec-1")
    assert again.replayed and again.loss is None and again.release_id == record.release_id
    client.close()


def test_protocol_round_trip(adult):
    payload = protocol.from_query(
        steps=[{"step": "filter", "expr": (col("age") >= 18).node}],
        group_by={"columns": ["sex", "race"],
                  "keys": dp.KeySet({"sex": ["Female", "Male"]}) * dp.KeySet(
                      {"race": ["White", "Black"]})},
        aggs=[dp.count(name="n"), dp.quantile("age", 0.9, (17, 90), candidates=50),
              dp.min("age", (17, 90)), dp.sum("capital-gain", (0, Fraction(1, 3)))],
        budget={"epsilon": Fraction(1, 3), "split": [1, 1, 1, 2]})
    assert payload["budget"] == {"epsilon": "1/3", "split": [1, 1, 1, 2]}
    assert payload["group_by"]["keys"][0] == ["Female", "White"]
    session = dp.Session(adult, budget=dp.PureDP(1))
    q, kwargs = protocol.to_query(session, payload)
    assert kwargs == {"epsilon": Fraction(1, 3), "confidence": 0.95, "split": [1, 1, 1, 2]}
    assert [a.output_name() for a in q.aggs] == ["n", "age_q0.9", "age_min", "capital-gain_sum"]
    assert len(q.keys) == 4
    with pytest.raises(protocol.ProtocolError):
        protocol.compile_expr({"op": "collect", "args": [{"col": "age"}]})
    with pytest.raises(protocol.ProtocolError):
        protocol.to_query(session, {"aggs": [{"agg": "count"}], "budget": {}, "rows": 1})


# -- configuration and the command ---------------------------------------------------------
def write_yaml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_config_with_duckdb(tmp_path, adult):
    duckdb = pytest.importorskip("duckdb")
    adult.write_parquet(tmp_path / "adult.parquet")
    con = duckdb.connect(str(tmp_path / "census.duckdb"))
    con.register("frame", adult.to_arrow())
    con.execute("CREATE TABLE people AS SELECT row_number() OVER () AS pid, * FROM frame")
    con.close()
    cfg = load_config(write_yaml(tmp_path / "server.yaml", """
ledger: state/ledger.sqlite
workers: 3
datasets:
  - name: census
    source: {kind: duckdb, path: census.duckdb, table: people}
    privacy_unit: {column: pid, max_rows: 1}
    budget: {measure: zcdp, rho: "1/2"}
  - name: adult
    source: {kind: parquet, path: adult.parquet}
    privacy_unit: rows
    budget: {measure: approx, epsilon: 1, delta: 1e-6}
"""))
    assert cfg.workers == 3 and cfg.max_body_bytes == 65536
    assert cfg.ledger == str(tmp_path / "state" / "ledger.sqlite")
    census, parquet = cfg.datasets
    assert census.source.table == "people" and census.privacy_unit.column == "pid"
    assert census.budget == dp.ZCDP(Fraction(1, 2))
    assert parquet.budget == dp.ApproxDP(1, Fraction(1, 10**6))
    app = create_app(cfg)
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst("ann")
    ledger.grant("ann", "census")
    client = dp.Client(app=app, token=token)
    out = (client.query("census").group_by("sex", keys=["Female", "Male"])
           .agg(dp.count(), dp.mean("age", (17, 90))).release(rho=Fraction(1, 8)))
    assert out["sex"].to_list() == ["Female", "Male"] and out["count"].dtype == pl.Int64
    rho = Fraction(client.last_release["loss"]["exact"]["rho"])
    assert ledger.spent("census") == dp.ZCDP(rho) and rho <= Fraction(1, 8)
    client.close()


@pytest.mark.parametrize("text, message", [
    ("ledger: l.sqlite\ndatasets: []\n", "datasets"),
    ("ledger: l.sqlite\ndatasets:\n  - {name: a, source: {kind: excel, path: a.csv}, "
     "budget: {measure: pure, epsilon: 1}}\n", "datasets[0].source.kind"),
    ("ledger: l.sqlite\ndatasets:\n  - {name: a, source: {kind: csv, path: missing.csv}, "
     "budget: {measure: pure, epsilon: 1}}\n", "no such file"),
    ("ledger: l.sqlite\ndatasets:\n  - {name: a, source: {kind: csv, path: a.csv}, "
     "budget: {measure: pure, rho: 1}}\n", "rho does not apply"),
    ("ledger: l.sqlite\ndatasets:\n  - {name: a, source: {kind: csv, path: a.csv}, "
     "budget: {measure: pure, epsilon: -1}}\n", "budget"),
    ("ledger: l.sqlite\nworkers: 0\ndatasets:\n  - {name: a, source: {kind: csv, path: a.csv},"
     " budget: {measure: pure, epsilon: 1}}\n", "workers"),
    ("ledger: l.sqlite\nport: 1\ndatasets: []\n", "unknown field(s) port"),
    ("ledger: l.sqlite\ndatasets:\n  - {name: a, source: {kind: duckdb, path: a.csv, "
     "table: 'x; drop'}, budget: {measure: pure, epsilon: 1}}\n", "table"),
])
def test_config_errors_name_the_field(tmp_path, text, message):
    (tmp_path / "a.csv").write_text("x\n1\n")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        load_config(write_yaml(tmp_path / "bad.yaml", text))


def test_serve_help_and_bad_config():
    from dpkit.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "120"})
    assert out.exit_code == 0 and "--config" in out.output and "--workers" in out.output
    bad = runner.invoke(app, ["serve", "--config", "/nonexistent/server.yaml"])
    assert bad.exit_code != 0


@pytest.mark.slow
def test_uvicorn_end_to_end(tmp_path, adult):
    adult.write_csv(tmp_path / "adult.csv")
    config = write_yaml(tmp_path / "server.yaml", """
ledger: ledger.sqlite
workers: 2
datasets:
  - name: adult
    source: {kind: csv, path: adult.csv}
    budget: {measure: pure, epsilon: 3}
""")
    ledger = dp.Ledger(tmp_path / "ledger.sqlite")
    ledger.register("adult", dp.PureDP(3))
    token = ledger.add_analyst("alice")
    ledger.grant("alice", "adult")
    server = ServerProcess(config)
    try:
        server.wait_ready(workers=2)  # readiness, not a fixed start-up time
        client = dp.Client(server.url, token)
        out = client.query("adult").group_by("sex", keys=["Female", "Male"]).count().release(
            epsilon=0.5)
        assert out["count"].dtype == pl.Int64 and len(out) == 2
        assert ledger.spent("adult") == dp.PureDP(Fraction(1, 2))
        client.close()
    finally:
        code = server.stop()
    stderr = "".join(server.stderr)
    assert code == 0, stderr
    logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(x.get("path") == "/v1/datasets/adult/release" and x.get("status") == 200
               for x in logs)
    assert "Finished server process" in stderr or "Shutting down" in stderr
