"""The web console's server side (issue 33): the page and its files carry a strict CSP and
come from the package (no CDN), ``/docs`` is Swagger UI whose every URL is same-origin and
served, and the curator's routes (the ledger, ``verify``) answer the curator's token only.
The console in a real browser: tests/test_console_browser.py."""

from __future__ import annotations

import re
import warnings
from fractions import Fraction
from pathlib import Path

import pytest

import dpkit as dp

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("yaml")

with warnings.catch_warnings():  # Starlette's note about its httpx dependency
    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient  # noqa: E402

from dpkit.server import console_routes  # noqa: E402
from dpkit.server.app import create_app  # noqa: E402
from dpkit.server.config import parse_config  # noqa: E402

CONSOLE = Path(console_routes.__file__).parent / "console"
CURATOR_ENV = "DPKIT_TEST_CURATOR_TOKEN"


@pytest.fixture
def served(tmp_path, monkeypatch):
    dp.datasets.load_adult("train").head(500).write_csv(tmp_path / "adult.csv")
    monkeypatch.setenv(CURATOR_ENV, "the-curators-token")
    app = create_app(parse_config({
        "ledger": "ledger.sqlite", "curator_token_env": CURATOR_ENV,
        "datasets": [{"name": "adult", "source": {"kind": "csv", "path": "adult.csv"},
                      "budget": {"measure": "pure", "epsilon": 3}}]}, base=tmp_path))
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst("ann")
    ledger.grant("ann", "adult", dp.PureDP(2))
    http = TestClient(app)
    yield {"app": app, "ledger": ledger, "token": token, "http": http}
    http.close()


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def directives(csp):
    return {part.split()[0]: part.split()[1:] for part in csp.split(";") if part.strip()}


# -- the page and its files ------------------------------------------------------------------
def test_console_is_served_with_a_strict_csp(served):
    page = served["http"].get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = directives(page.headers["content-security-policy"])
    assert csp["default-src"] == ["'self'"] and csp["script-src"] == ["'self'"]
    assert csp["frame-ancestors"] == ["'none'"] and csp["object-src"] == ["'none'"]
    assert not any("unsafe" in v for values in csp.values() for v in values)
    # every file the page names is same-origin, allow-listed and served with the policy
    named = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assets = [u for u in named if u.startswith("/console/")]
    assert assets and all(u.startswith("/") and not u.startswith("//") for u in named)
    assert "<script>" not in page.text and " style=" not in page.text  # nothing inline
    for url in assets:
        r = served["http"].get(url)
        assert r.status_code == 200 and "content-security-policy" in r.headers, url


def test_console_files_are_package_data_and_hold_no_html_sink(served):
    modules = sorted(p.name for p in CONSOLE.glob("*.js"))
    assert modules == sorted(n for n in console_routes.ASSETS if n.endswith(".js"))
    for name in modules:  # each module is served, and none parses a string as markup
        text = (CONSOLE / name).read_text(encoding="utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                     "eval(", "new Function", "http://", "https://"):
            assert sink not in text.replace("http://www.w3.org/2000/svg", ""), (name, sink)
        imports = re.findall(r'from "([^"]+)"', text)
        assert all(i.startswith("./") and i[2:] in console_routes.ASSETS for i in imports)
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert '"dpkit.server" = ["console/*"]' in pyproject


def test_console_files_outside_the_allow_list_are_not_served(served):
    for url in ("/console/index.html.bak", "/console/..%2fapp.py", "/console/%2e%2e/app.py",
                "/docs/assets/index.html", "/docs/assets/swagger-initializer.js"):
        assert served["http"].get(url).status_code == 404, url


# -- /docs -------------------------------------------------------------------------------------
def test_docs_reference_only_same_origin_urls_that_are_served(served):
    pytest.importorskip("fastapi_swagger")
    page = served["http"].get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    urls += re.findall(r"""url:\s*['"]([^'"]+)['"]""", page.text)
    assert len(urls) >= 3 and not any("//" in u for u in urls), urls
    for url in urls:
        assert served["http"].get(url).status_code == 200, url
    csp = directives(page.headers["content-security-policy"])
    assert csp["default-src"] == ["'self'"] and "'unsafe-eval'" not in csp["script-src"]
    assert "'unsafe-inline'" not in csp["script-src"]
    # FastAPI's CDN pages are gone
    assert served["http"].get("/redoc").status_code == 404


def test_docs_csp_allows_exactly_the_inline_start_up_script():
    page = "<script src='/x.js'></script><script>\nstart()\n</script>"
    csp = console_routes.docs_csp(page)
    assert csp.count("'sha256-") == 1
    assert console_routes.docs_csp(page.replace("start()", "other()")) != csp


# -- the curator's routes ----------------------------------------------------------------------
def test_curator_routes_answer_the_curator_only(served, monkeypatch):
    http = served["http"]
    for path, method in (("/v1/curator/ledger", http.get), ("/v1/curator/verify", http.post)):
        assert method(path).status_code == 401
        assert method(path, headers=bearer(served["token"])).status_code == 401  # an analyst
        assert method(path, headers=bearer("the-curators-token-")).status_code == 401
        assert method(path, headers=bearer("the-curators-token")).status_code == 200
    monkeypatch.delenv(CURATOR_ENV)
    r = http.get("/v1/curator/ledger", headers=bearer("the-curators-token"))
    assert r.status_code == 501 and r.json()["error"] == "NotConfigured"


def test_curator_ledger_and_verify(served):
    http, ledger = served["http"], served["ledger"]
    body = {"aggs": [{"agg": "count"}], "budget": {"epsilon": "1/4"}}
    for _ in range(2):
        r = http.post("/v1/datasets/adult/release", json=body, headers=bearer(served["token"]))
        assert r.status_code == 200, r.text
    out = http.get("/v1/curator/ledger", headers=bearer("the-curators-token")).json()
    (adult,) = out["datasets"]
    def exact(loss: dict) -> Fraction:  # a loss's exact value (decimals are for people)
        return Fraction(loss["exact"]["epsilon"])

    assert exact(adult["cap"]) == 3 and exact(adult["spent"]) == Fraction(1, 2)
    assert [round(p["spent"], 9) for p in adult["burn"]] == [0.25, 0.5]
    assert exact(adult["spent"]) == ledger.spent("adult").epsilon
    assert [r["id"] for r in out["releases"]] == [2, 1] and out["release_count"] == 2
    assert out["analysts"] == [{"name": "ann", "created": out["analysts"][0]["created"]}]
    assert "token" not in str(out["analysts"])
    (grant,) = out["grants"]
    assert grant["analyst"] == "ann" and exact(grant["cap"]) == 2
    assert exact(grant["spent"]) == Fraction(1, 2) and out["streams"] == []
    assert out["head"] == ledger.head()
    ok = http.post("/v1/curator/verify", headers=bearer("the-curators-token")).json()
    assert ok == {"ok": True, "problems": [], "head": ledger.head(), "releases": 2}


def test_verify_reports_a_tampered_ledger(served):
    """The broken variant: a release row changed outside the ledger is found."""
    import sqlalchemy as sa

    http, ledger = served["http"], served["ledger"]
    body = {"aggs": [{"agg": "count"}], "budget": {"epsilon": "1/4"}}
    http.post("/v1/datasets/adult/release", json=body, headers=bearer(served["token"]))
    with ledger.engine.begin() as conn:
        conn.execute(sa.text("UPDATE releases SET query = 'other()'"))
    out = http.post("/v1/curator/verify", headers=bearer("the-curators-token")).json()
    assert out["ok"] is False and out["problems"]


def test_curator_ledger_lists_streams(served):
    """A continual release's mark appears with its dataset and analyst (Ledger.streams)."""
    ledger = served["ledger"]
    rid = ledger.debit("adult", dp.PureDP(Fraction(1, 8)), "stream(count)", analyst="ann")
    ledger.mark(rid, "released", None)
    ledger.advance_stream(rid, 1)
    assert ledger.streams() == [{"release_id": rid, "step": 1}]
    out = served["http"].get("/v1/curator/ledger", headers=bearer("the-curators-token")).json()
    assert out["streams"] == [{"release_id": rid, "step": 1, "dataset": "adult",
                               "analyst": "ann"}]
