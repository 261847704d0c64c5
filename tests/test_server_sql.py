"""The same SQL everywhere (issue 32): ``POST /v1/datasets/{name}/sql`` and ``…/sql/explain`` on
the server, ``dp.Client(...).sql``, and ``dpkit sql`` against a ledger. A release debits
exactly its plan's loss and the ledger row holds the canonical plan and the text; refused text
answers 422 with its span and debits nothing; a text over ``MAX_SQL_BYTES`` is refused before
the parser sees it; explain is free."""

from __future__ import annotations

import json
import warnings
from fractions import Fraction

import pytest

import dpkit as dp

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
sql_module = pytest.importorskip("dpkit.frame.sql")

with warnings.catch_warnings():  # Starlette's note about its httpx dependency
    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from dpkit.cli.main import app as cli  # noqa: E402
from dpkit.client import Client  # noqa: E402
from dpkit.frame.session import Session  # noqa: E402
from dpkit.server import sql_routes  # noqa: E402
from dpkit.server.app import create_app  # noqa: E402
from dpkit.server.config import parse_config  # noqa: E402

SQLError, MAX_SQL_BYTES = sql_module.SQLError, sql_module.MAX_SQL_BYTES
SCHEMA = dp.Schema({"age": dp.Numeric(17, 90, integer=True),
                    "sex": dp.Categorical(["Female", "Male"])})
GOOD = "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM adult GROUP BY sex"
WINDOW = "SELECT sex,\n  COUNT(*) OVER () AS n FROM adult GROUP BY sex"  # a window: refused


def config(tmp_path, max_body_bytes=None):
    dp.datasets.load_adult("train").head(2000).write_csv(tmp_path / "adult.csv")
    raw = {"ledger": "ledger.sqlite",
           "datasets": [{"name": "adult", "source": {"kind": "csv", "path": "adult.csv"},
                         "privacy_unit": "rows", "budget": {"measure": "pure", "epsilon": 3},
                         "schema": SCHEMA.to_dict()}]}
    if max_body_bytes is not None:
        raw["max_body_bytes"] = max_body_bytes
    return raw


@pytest.fixture
def served(tmp_path):
    app = create_app(parse_config(config(tmp_path, 4 * MAX_SQL_BYTES), base=tmp_path))
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst("ann")
    ledger.grant("ann", "adult")
    http = TestClient(app, headers={"Authorization": f"Bearer {token}"})
    yield {"app": app, "ledger": ledger, "token": token, "http": http}
    http.close()


def at(text, span):
    """The text from the span's line and column (1-based) on."""
    return text.splitlines()[span["line"] - 1][span["column"] - 1:]


def body(text, **budget):
    return {"sql": text, "budget": budget or {"epsilon": "1/4"}}


def state(served):
    ledger = served["ledger"]
    return ledger.count(), ledger.spent("adult")


# -- the server ------------------------------------------------------------------------------
def test_sql_release_debits_exactly_the_plans_loss(served):
    explained = served["http"].post("/v1/datasets/adult/sql/explain", json=body(GOOD))
    assert explained.status_code == 200, explained.text
    planned = explained.json()["total"]
    r = served["http"].post("/v1/datasets/adult/sql", json=body(GOOD))
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["loss"] == planned == {"measure": "PureDP", "epsilon": 0.25,
                                      "exact": {"epsilon": "1/4"}, "text": "ε = 0.25"}
    assert served["ledger"].spent("adult") == dp.PureDP(Fraction(1, 4))
    assert {row["sex"] for row in got["records"]} == {"Female", "Male"}
    row = served["ledger"].releases("adult")[-1]
    assert row["id"] == got["release_id"] and row["status"] == "released"
    plan, _, text = row["query"].partition(sql_routes.SQL_MARK)
    assert plan and "agg(" in plan and json.loads(text) == GOOD  # the plan, then the text
    assert got["description"] == row["query"]


def test_refused_text_is_422_with_its_span_and_debits_nothing(served):
    before = state(served)
    r = served["http"].post("/v1/datasets/adult/sql", json=body(WINDOW))
    assert r.status_code == 422, r.text
    got = r.json()
    assert got["error"] == "SQLError"
    assert got["line"] == 2 and got["fragment"] and at(WINDOW, got).startswith(got["fragment"])
    assert "OVER" in got["detail"]
    assert state(served) == before


def test_explain_is_free(served):
    before = state(served)
    r = served["http"].post("/v1/datasets/adult/sql/explain", json=body(GOOD))
    assert r.status_code == 200, r.text
    assert r.json()["affordable"] is True and "total: ε = 0.25" in r.json()["text"]
    assert state(served) == before


def test_text_over_the_limit_is_refused_before_parsing(served, monkeypatch):
    def parser_reached(*args, **kwargs):
        raise AssertionError("the text reached the parser")

    import sqlglot

    import dpkit.frame.sql

    monkeypatch.setattr(sqlglot, "parse", parser_reached)  # the parser the translation calls
    monkeypatch.setattr(dpkit.frame.sql, "to_query", parser_reached)
    monkeypatch.setattr(Session, "sql_plan", parser_reached)
    before = state(served)
    long = "SELECT COUNT(*) AS n FROM adult -- " + "x" * MAX_SQL_BYTES
    for path in ("/v1/datasets/adult/sql", "/v1/datasets/adult/sql/explain"):
        r = served["http"].post(path, json=body(long))
        assert r.status_code == 413, r.text
        assert r.json()["error"] == "PayloadTooLarge"
    # multi-byte characters count in bytes: under the limit in characters, over in bytes
    wide = "SELECT COUNT(*) AS n FROM adult -- " + "é" * (MAX_SQL_BYTES // 2)
    assert len(wide) < MAX_SQL_BYTES < len(wide.encode())
    assert served["http"].post("/v1/datasets/adult/sql", json=body(wide)).status_code == 413
    assert state(served) == before


def test_default_body_limit_refuses_a_megabyte_first(tmp_path):
    app = create_app(parse_config(config(tmp_path), base=tmp_path))
    token = app.state.dpkit.ledger.add_analyst("ann")
    app.state.dpkit.ledger.grant("ann", "adult")
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as http:
        r = http.post("/v1/datasets/adult/sql", json=body("SELECT 1 -- " + "x" * 2**20))
    assert r.status_code == 413


def test_sql_route_needs_a_token_and_a_grant(served):
    r = served["http"].post("/v1/datasets/adult/sql", json=body(GOOD),
                            headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    other = served["ledger"].add_analyst("bob")
    r = served["http"].post("/v1/datasets/adult/sql", json=body(GOOD),
                            headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 403
    assert served["ledger"].spent("adult") == dp.PureDP(0)


# -- the client ------------------------------------------------------------------------------
def test_client_round_trip(served):
    client = Client(app=served["app"], token=served["token"])
    plan = client.sql_plan("adult", GOOD, epsilon=Fraction(1, 4))
    assert plan["total"]["exact"]["epsilon"] == "1/4"
    assert served["ledger"].spent("adult") == dp.PureDP(0)
    assert "total" in client.sql_explain("adult", GOOD, epsilon=Fraction(1, 4))
    record = client.sql_record("adult", GOOD, epsilon=Fraction(1, 4), idempotency_key="k1")
    assert record.loss == dp.PureDP(Fraction(1, 4)) and set(record.values["sex"]) == {
        "Female", "Male"}
    again = client.sql_record("adult", GOOD, epsilon=Fraction(1, 4), idempotency_key="k1")
    assert again.replayed and again.release_id == record.release_id
    assert served["ledger"].spent("adult") == dp.PureDP(Fraction(1, 4))
    with pytest.raises(SQLError) as refused:
        client.sql("adult", WINDOW, epsilon=1)
    error = refused.value
    assert error.line == 2 and at(WINDOW, vars(error)).startswith(error.fragment)
    assert str(error).count("(line 2") == 1  # the span once, as the server wrote it
    assert served["ledger"].spent("adult") == dp.PureDP(Fraction(1, 4))


# -- the command line ------------------------------------------------------------------------
@pytest.fixture
def cli_config(tmp_path):
    import yaml

    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump(config(tmp_path)))
    return path


def test_cli_json_release_and_explain(cli_config, tmp_path):
    from dpkit.ledger import Ledger

    runner = CliRunner()
    ledger = str(tmp_path / "other.sqlite")
    plan = runner.invoke(cli, ["sql", "adult", GOOD, "--config", str(cli_config), "--ledger",
                               ledger, "--epsilon", "1/4", "--explain", "--json"])
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.output)["total"]["exact"]["epsilon"] == "1/4"
    done = runner.invoke(cli, ["sql", "adult", GOOD, "--config", str(cli_config), "--ledger",
                               ledger, "--epsilon", "1/4", "--json"])
    assert done.exit_code == 0, done.output
    got = json.loads(done.output)
    assert got["loss"]["exact"]["epsilon"] == "1/4" and {r["sex"] for r in got["records"]} == {
        "Female", "Male"}
    reg = Ledger(ledger)
    assert reg.spent("adult") == dp.PureDP(Fraction(1, 4))  # one debit: explain was free
    assert json.loads(reg.releases("adult")[-1]["query"].partition(sql_routes.SQL_MARK)[2]
                      ) == GOOD
    reg.dispose()


def test_cli_table_and_refusal(cli_config, tmp_path):
    runner = CliRunner()
    ledger = str(tmp_path / "l.sqlite")
    table = runner.invoke(cli, ["sql", "adult", GOOD, "--config", str(cli_config),
                                "--ledger", ledger, "--epsilon", "0.5"])
    assert table.exit_code == 0, table.output
    assert "Female" in table.output and "mean_age" in table.output
    refused = runner.invoke(cli, ["sql", "adult", WINDOW, "--config", str(cli_config),
                                  "--ledger", ledger, "--epsilon", "0.5"])
    assert refused.exit_code == 1 and "SQLError" in refused.output


# -- the docs page ---------------------------------------------------------------------------
def test_docs_page_lists_the_supported_grammar():
    """docs/sql.md's grammar table is dpkit.frame.sql.SUPPORTED, row by row."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "sql.md").read_text()
    rows = [f"| `{form}` | `{example}` |" for form, example in sql_module.SUPPORTED]
    assert [r for r in rows if r not in page] == []


# -- TABLESAMPLE and the sample step over HTTP (issue 37, item 6) --------------------------------
SAMPLED = "SELECT COUNT(*) AS n FROM adult TABLESAMPLE BERNOULLI (10 PERCENT)"


def test_tablesample_over_http_debits_the_amplified_loss(served):
    r = served["http"].post("/v1/datasets/adult/sql", json=body(SAMPLED, epsilon=1))
    assert r.status_code == 200, r.text
    amplified = dp.core.subsampling.amplified_epsilon(1, Fraction(1, 10))
    assert served["ledger"].spent("adult") == dp.PureDP(amplified)
    steps = {"steps": [{"step": "sample", "p": "1/10"}], "aggs": [{"agg": "count"}],
             "budget": {"epsilon": 1}}
    r = served["http"].post("/v1/datasets/adult/release", json=steps)
    assert r.status_code == 200, r.text
    assert served["ledger"].spent("adult") == dp.PureDP(2 * amplified)


@pytest.mark.parametrize("path, payload", [
    ("/v1/datasets/adult/sql",
     body("SELECT COUNT(*) AS n FROM adult TABLESAMPLE (10 ROWS)", epsilon=1)),
    ("/v1/datasets/adult/release",
     {"steps": [{"step": "sample", "n": 10}], "aggs": [{"agg": "count"}],
      "budget": {"epsilon": 1}})])
def test_sample_n_is_refused_over_http_and_debits_nothing(served, path, payload):
    before = state(served)
    r = served["http"].post(path, json=payload)
    assert r.status_code in (400, 422), r.text
    assert ("sample(p=n/N)" if path.endswith("sql") else "Extra inputs") in r.text
    assert state(served) == before
