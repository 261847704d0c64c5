"""Numbers for people (issue 33): every user-facing loss is a decimal with the exact rational
beside it, a requested budget is charged exactly when it is a finite decimal or the record
says how and why it was rounded, ``calibrate`` prints decimals, and the release listing shows
``year >= 1985`` and ``q=0.5``.

No test here draws statistics from noise: the assertions are about exact, data-free numbers
(losses, plans, texts), so none can flake.
"""

import json
import re
import warnings
from fractions import Fraction

import polars as pl
import pytest

import dpkit as dp
from dpkit.core.numbers import ExactNumbers, exact_text, is_shown_exactly, readable, shown
from dpkit.frame.language import col, expression_text, lit

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("yaml")

with warnings.catch_warnings():  # Starlette's note about its httpx dependency
    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from dpkit.cli.main import app as cli  # noqa: E402
from dpkit.client import Client  # noqa: E402
from dpkit.report import ledger_report  # noqa: E402
from dpkit.server.app import create_app  # noqa: E402
from dpkit.server.config import parse_config  # noqa: E402

# the issue's own example of what nobody can read
OLD_LOSS = {"measure": "ZCDP", "rho": "41137613933698390991480793414556874947785220110427376"
            "816832380928/411376139343359075717412941601390689104584035534330053809532428025",
            "text": "ρ = 0.1"}
MAX_DIGITS = 20  # a rational with more digits than this is for auditors only
RATIONAL = re.compile(r"(\d+)/(\d+)")


def long_rationals(doc):
    """The rationals of more than MAX_DIGITS digits in a JSON document outside its ``exact``
    fields (and the ledger's stored ``noise`` column, which the history returns verbatim)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items()
                    if k != "exact" and not (k == "noise" and isinstance(v, str))}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return long_in_text(json.dumps(strip(doc), ensure_ascii=False))


def long_in_text(text):
    return [m.group(0) for m in RATIONAL.finditer(text)
            if len(m.group(1)) + len(m.group(2)) > MAX_DIGITS]


def frame():
    return pl.DataFrame({"year": [1970 + i % 40 for i in range(400)],
                         "x": [float(i % 7) for i in range(400)]})


# -- the helper ------------------------------------------------------------------------------
def test_readable_is_decimal_and_says_when_it_is_exact():
    charged = Fraction(1152921504606846976, 11529215047266067089)  # ρ = 0.1 after rounding
    assert readable(Fraction(1, 10)) == "0.1" and is_shown_exactly(Fraction(1, 10))
    assert readable(charged) == "0.1" and not is_shown_exactly(charged)
    assert shown(charged) == 0.1 and readable(Fraction(1, 3)) == "0.333333"
    assert exact_text(Fraction(1, 2)) == "0.5" and exact_text(Fraction(1985)) == "1985"
    assert exact_text(Fraction(-3, 8)) == "-0.375" and exact_text(Fraction(1, 3)) == "1/3"
    assert exact_text(0.1) == "0.1"  # a float is its repr
    assert exact_text(Fraction(1, 2**80)) == f"1/{2**80}"  # > 20 digits as a decimal


def test_a_loss_prints_decimals_with_the_exact_rational_beside():
    loss = dp.ZCDP(Fraction(1152921504606846976, 11529215047266067089))
    assert str(loss) == "ρ ≈ 0.1" and str(dp.ZCDP(0.1)) == "ρ = 0.1"
    assert repr(loss) == "ZCDP(ρ≈0.1, exact=1152921504606846976/11529215047266067089)"
    assert loss.as_json() == {"measure": "ZCDP", "rho": 0.1,
                              "exact": {"rho": "1152921504606846976/11529215047266067089"},
                              "text": "ρ ≈ 0.1"}
    assert long_rationals(dp.ApproxDP(1, Fraction(1, 3**50)).as_json()) == []


def test_the_checker_catches_the_old_shape():
    """The broken variant: the loss JSON before issue 33 (fractions as the fields)."""
    assert long_rationals({"loss": OLD_LOSS}) and long_rationals({"a": [{"b": OLD_LOSS}]})
    assert long_rationals({"exact": OLD_LOSS}) == []


# -- charged exactly, or the record says why ---------------------------------------------------
def test_a_finite_decimal_budget_is_charged_exactly():
    s = dp.Session(frame(), budget=dp.PureDP(1))
    s.query().agg(dp.count()).release(epsilon=0.1)  # discrete Laplace b = 10: no rounding
    assert s.last_release.loss == dp.PureDP(Fraction(1, 10)) and s.spent.epsilon == Fraction(
        1, 10)
    assert s.last_release.loss_note is None
    approx = dp.Session(frame(), budget=dp.ApproxDP(1, 1e-5))
    assert approx.budget.delta == Fraction(1, 10**5)  # the decimal typed, not its float
    plan = approx.query().agg(dp.count()).plan(epsilon=0.5, delta=1e-6)
    assert plan.loss.delta == Fraction(1, 10**6) and plan.requested == dp.ApproxDP(
        Fraction(1, 2), Fraction(1, 10**6))


def test_a_rounded_charge_says_how_and_why():
    """ρ = 0.1 with Gaussian noise: σ = √(Δ²/2ρ) is rounded up to a value the exact discrete
    Gaussian sampler draws, so the charge is a little below 1/10 — and the record says so."""
    s = dp.Session(frame(), budget=dp.ZCDP(1))
    plan = s.query().agg(dp.count()).plan(rho=0.1)
    assert plan.requested == dp.ZCDP(Fraction(1, 10))
    assert Fraction(1, 10) - Fraction(1, 10**9) < plan.loss.rho < Fraction(1, 10)
    note = plan.loss_note
    assert note.startswith("requested ρ = 0.1; charged ρ ≈ 0.0999999999")
    assert "less" in note and "rounded up" in note and "discrete Gaussian" in note
    record = s.release(plan)
    assert record.loss == plan.loss and record.loss_note == note
    assert "loss_note=" in repr(plan) and "ρ≈0.1, exact=" in repr(plan)


def test_a_converted_charge_names_both_measures():
    s = dp.Session(frame(), budget=dp.ZCDP(1))
    note = s.query().agg(dp.count(), dp.sum("x", (0, 7))).plan(epsilon=0.5).loss_note
    assert note.startswith("requested ε = 0.5; charged ρ = 0.0625") and "ε²/2" in note


# -- calibrate -------------------------------------------------------------------------------
def test_calibrate_prints_decimals_and_indexes_exactly():
    s = dp.Session(frame(), budget=dp.PureDP(10))
    budget = s.query().agg(dp.count()).calibrate(alpha=20)
    assert isinstance(budget, ExactNumbers) and isinstance(budget["epsilon"], Fraction)
    assert re.fullmatch(r"ExactNumbers\(epsilon≈0\.\d{6}, exact=\d+/\d+\)", repr(budget))
    assert budget.floats == {"epsilon": shown(budget["epsilon"])}
    assert budget.as_json()["exact"] == {"epsilon": str(budget["epsilon"])}
    assert dict(budget) == {"epsilon": budget["epsilon"]}  # what release(**budget) spends


# -- the release listing ---------------------------------------------------------------------
def test_descriptions_are_infix_with_short_numbers():
    s = dp.Session(frame(), budget=dp.PureDP(1))
    q = (s.query().filter((col("year") >= 1985) & ~col("year").is_in(1990, 1991))
         .with_columns(y=col("x") * 2 + 1)
         .agg(dp.count(), dp.quantile("x", Fraction(1, 2), (0, 7))))
    text = q.describe()
    assert text.startswith("filter((year >= 1985) AND (NOT (year IN (1990, 1991))))"
                           ".with_columns(y=(x * 2) + 1).agg(count(), quantile(")
    assert "q=0.5" in text and "Fraction" not in text and "__ge__" not in text
    assert q.describe() == text  # deterministic
    assert expression_text(col("s") == "it's") == "s = 'it''s'"
    # names that could read as a literal or an operator are quoted, so two different
    # expressions never print alike (the description binds an idempotency key)
    assert expression_text(col("TRUE")) == '"TRUE"' != expression_text(lit(True))
    assert expression_text(col('a" = 1 OR "b')) == '"a"" = 1 OR ""b"'
    assert expression_text(col("a") + 1.0) == "a + 1.0" != expression_text(col("a") + 1)
    assert repr(col("year") >= 1985) == "Expr(year >= 1985)"


# -- every user-facing surface ---------------------------------------------------------------
@pytest.fixture
def served(tmp_path):
    frame().write_csv(tmp_path / "t.csv")
    cfg = parse_config({
        "ledger": "ledger.sqlite",
        "datasets": [{"name": "t", "source": {"kind": "csv", "path": "t.csv"},
                      "privacy_unit": "rows", "budget": {"measure": "zcdp", "rho": 1}}]},
        base=tmp_path)
    app = create_app(cfg)
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst("ana")
    ledger.grant("ana", "t")
    http = TestClient(app)
    yield {"app": app, "ledger": ledger, "token": token, "http": http,
           "path": str(tmp_path / "ledger.sqlite")}
    http.close()


BODY = {"steps": [{"step": "filter", "expr": {"op": ">=", "args": [{"col": "year"},
                                                                  {"lit": 1985}]}}],
        "aggs": [{"agg": "count"}, {"agg": "quantile", "column": "x", "q": 0.5,
                                    "bounds": [0, 7]}],
        "budget": {"rho": 0.1}}


def test_server_responses_show_decimals_and_keep_exact_values(served):
    headers = {"Authorization": f"Bearer {served['token']}"}
    http = served["http"]
    answers = [http.post("/v1/datasets/t/explain", json=BODY, headers=headers),
               http.post("/v1/datasets/t/release", json=BODY, headers=headers)]
    body = answers[-1].json()
    answers += [http.get("/v1/datasets", headers=headers),
                http.get("/v1/releases", headers=headers),
                http.get(f"/v1/releases/{body['release_id']}", headers=headers)]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert long_rationals(answer.json()) == []
    assert answers[0].json()["total"]["rho"] == 0.1  # explain: the same shape
    exact = Fraction(body["loss"]["exact"]["rho"])
    assert served["ledger"].spent("t") == dp.ZCDP(exact)  # the ledger's exact value
    assert body["loss"]["rho"] == 0.1 and body["loss"]["text"] == "ρ ≈ 0.1"
    assert body["loss_note"].startswith("requested ρ = 0.1; charged ρ ≈ 0.0999999999")
    assert body["description"].startswith("filter(year >= 1985).agg(count(), quantile(")
    assert "q=0.5" in body["description"]
    assert all(set(r["exact"]) == {"scale", "sensitivity"} for r in body["noise"])
    client = Client(app=served["app"], token=served["token"])  # reads the new shape back
    client.query("t").agg(dp.count()).release(rho=Fraction(1, 8))
    assert long_rationals(client.last_release) == []
    assert served["ledger"].spent("t") == dp.ZCDP(exact) + dp.ZCDP(Fraction(
        client.last_release["loss"]["exact"]["rho"]))
    client.close()


def test_the_client_reads_an_older_servers_fractions():
    from dpkit.client import _exact_fields  # the response's loss, either shape

    assert _exact_fields(OLD_LOSS) == {"rho": Fraction(OLD_LOSS["rho"])}
    assert _exact_fields(dp.ZCDP(Fraction(1, 3)).as_json()) == {"rho": Fraction(1, 3)}


def test_report_and_cli_show_no_long_rationals(served):
    headers = {"Authorization": f"Bearer {served['token']}"}
    r = served["http"].post("/v1/datasets/t/release", json=BODY, headers=headers)
    assert r.status_code == 200, r.text
    page = ledger_report(served["ledger"], "t")
    collapsed = re.findall(r'<details class="exact">.*?</details>', page)
    assert collapsed and all(long_in_text(c) for c in collapsed[:1])  # the exact value is kept
    assert long_in_text(re.sub(r'<details class="exact">.*?</details>', "", page)) == []
    runner = CliRunner()
    for args in (["ledger", "releases"], ["ledger", "datasets"], ["ledger", "show", "t"]):
        out = runner.invoke(cli, [*args, "--ledger", served["path"]], env={"COLUMNS": "200"})
        assert out.exit_code == 0, out.output
        assert long_in_text(out.output) == [] and "ρ ≈ 0.1" in out.output
