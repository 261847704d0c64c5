"""The web console in a real browser (issue 33): Playwright drives the system Chromium
against a real ``dpkit serve`` process. An analyst signs in with a token, explains and
releases a SQL query, sees the numbers and the chart with its error bars, watches the
remaining budget drop by exactly the release's loss, gets a refusal as a message; markup in
column names and group keys renders as text; the curator opens the ledger and runs verify.

One browser and one server for the module; each test has its own browser context (so its
own ``sessionStorage``). No fixed sleeps: Playwright's ``expect`` waits for each state.
``python bench/console_screenshot.py`` writes the screenshots in docs/guide/ from the same
deployment (:func:`deploy`).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import dpkit as dp
from dpkit.core.numbers import exact_text

pytest.importorskip("fastapi")
pytest.importorskip("yaml")
playwright = pytest.importorskip("playwright.sync_api")

from tests.processes import ServerProcess  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium; .ci/run "
    "installs it on a best-effort basis; Playwright's own download is not reachable)")

MARKUP = "<img src=x onerror=alert(1)>"  # a column name and a group key
CURATOR_ENV = "DPKIT_CONSOLE_TEST_CURATOR"
CURATOR_TOKEN = "curator-token-for-the-browser-test"
GROUPED = 'SELECT tag, COUNT(*) AS n FROM adult GROUP BY tag'
TIMEOUT = 60_000  # ms: a guard for a loaded machine; expect() returns as soon as it holds
playwright.expect.set_options(timeout=TIMEOUT)


def deploy(folder: Path) -> dict[str, Any]:
    """A served deployment in ``folder``: the Adult sample with a column named like markup
    and a ``tag`` column whose values are markup, served as ``adult`` (pure DP, ε = 3) and
    ``adult_z`` (zCDP, ρ = 1), its configuration and ledger, an analyst token (ann, cap ε = 2
    on adult) and the curator's token (in ``$DPKIT_CONSOLE_TEST_CURATOR``)."""
    import polars as pl

    frame = dp.datasets.load_adult("train").head(1500).select("age", "sex")
    frame = frame.with_columns(
        pl.when(pl.col("age") < 40).then(pl.lit(MARKUP)).otherwise(pl.lit("plain"))
        .alias("tag"), pl.col("age").alias(MARKUP))
    frame.write_csv(folder / "adult.csv")
    schema = dp.Schema({"age": dp.Numeric(17, 90, integer=True),
                        "sex": dp.Categorical(["Female", "Male"]),
                        "tag": dp.Categorical([MARKUP, "plain"])})
    import yaml

    (folder / "server.yaml").write_text(yaml.safe_dump({
        "ledger": "ledger.sqlite", "curator_token_env": CURATOR_ENV,
        "datasets": [{"name": "adult", "source": {"kind": "csv", "path": "adult.csv"},
                      "privacy_unit": "rows", "budget": {"measure": "pure", "epsilon": 3},
                      "schema": schema.to_dict()},
                     {"name": "adult_z", "source": {"kind": "csv", "path": "adult.csv"},
                      "privacy_unit": "rows", "budget": {"measure": "zcdp", "rho": 1},
                      "schema": schema.to_dict()}]}), encoding="utf-8")
    ledger = dp.Ledger(folder / "ledger.sqlite")
    ledger.register("adult", dp.PureDP(3))
    ledger.register("adult_z", dp.ZCDP(1))
    token = ledger.add_analyst("ann")
    ledger.grant("ann", "adult", dp.PureDP(2))
    ledger.grant("ann", "adult_z")
    return {"config": folder / "server.yaml", "ledger": ledger, "token": token}


def start(config: Path) -> ServerProcess:
    """The server, once its worker has started and its socket answers (polled, no sleep
    of a fixed length)."""
    import httpx

    os.environ[CURATOR_ENV] = CURATOR_TOKEN  # the server process inherits it
    server = ServerProcess(config)
    server.wait_ready()
    deadline = time.monotonic() + TIMEOUT / 1000
    while True:  # uvicorn binds its socket just after the app's start-up
        try:
            if httpx.get(server.url + "/healthz", timeout=5).status_code == 200:
                return server
        except httpx.TransportError:
            if time.monotonic() > deadline or server.proc.poll() is not None:
                raise
        time.sleep(0.05)  # polling interval, not a wait for a guessed start-up time


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[dict[str, Any]]:
    deployment = deploy(tmp_path_factory.mktemp("console"))
    server = start(deployment["config"])
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield {**deployment, "url": server.url, "browser": browser}
        finally:
            browser.close()
            server.stop()
            deployment["ledger"].dispose()


@pytest.fixture
def page(site):
    context = site["browser"].new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT)
    tab = context.new_page()
    tab.dialogs = []  # any alert() a page would open
    tab.on("dialog", lambda d: (tab.dialogs.append(d.message), d.dismiss()))
    tab.requests = []  # every URL the page asks for: same-origin only (works offline)
    context.on("request", lambda r: tab.requests.append(r.url))
    tab.refusals = []  # the browser's CSP reports (a refused script or style)
    tab.on("console", lambda m: "Content Security Policy" in m.text
           and tab.refusals.append(m.text))
    tab.goto(site["url"] + "/")
    yield tab
    assert all(u.startswith(site["url"] + "/") for u in tab.requests), tab.requests
    assert tab.refusals == []
    context.close()


def sign_in(page, token: str) -> None:
    page.fill("#token", token)
    page.click("#signin")


def exact_of(cell) -> Fraction:
    """The exact value a loss element carries (a decimal or p/q string)."""
    playwright.expect(cell).to_have_attribute("data-exact", re.compile(r"\d"))
    return Fraction(cell.get_attribute("data-exact"))


def remaining(page) -> Fraction:
    return exact_of(page.locator(".dataset[data-name='adult'] .remaining .loss"))


def test_explain_release_chart_and_budget(site, page):
    expect = playwright.expect
    sign_in(page, site["token"])
    expect(page.locator("#analyst")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('dpkit.token')") == site["token"]
    before, count = remaining(page), site["ledger"].count()
    page.fill("#sql", GROUPED)
    page.fill("#budget-value", "0.25")
    page.click("#explain")
    expect(page.locator("#explain-table")).to_contain_text("discrete Laplace")
    assert site["ledger"].count() == count  # explain is free
    page.click("#release")
    expect(page.locator("#result-table tbody tr")).to_have_count(2)
    # the numbers: the table is the ledger's release, each value inside its interval
    release = site["ledger"].releases("adult")[-1]
    expect(page.locator("#result h3")).to_have_text(f"Release {release['id']}")
    rows = page.locator("#result-table tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    heads = page.locator("#result-table thead th").all_text_contents()
    assert heads == ["tag", "n", "n_ci_low", "n_ci_high"]
    assert sorted(r[0] for r in rows) == sorted([MARKUP, "plain"])
    for _, n, low, high in rows:
        assert int(low) <= int(n) <= int(high)
    # the chart: one bar and one error bar per group, the bar's top inside its bar
    chart = page.locator("#result svg.chart")
    expect(chart.locator("g.errorbar")).to_have_count(2)
    for i in range(2):
        bar = chart.locator("rect.bar").nth(i).bounding_box()
        whisker = chart.locator("g.errorbar").nth(i).locator("line").first.bounding_box()
        assert whisker["y"] - 1 <= bar["y"] <= whisker["y"] + whisker["height"] + 1
    # the remaining budget drops by exactly the release's loss
    assert exact_of(page.locator("#release-loss .loss")) == Fraction(1, 4)
    after = before - Fraction(1, 4)
    left = page.locator(".dataset[data-name='adult'] .remaining .loss")
    expect(left).not_to_have_attribute("data-exact", exact_text(before))
    assert exact_of(left) == after
    assert site["ledger"].count() == count + 1
    expect(page.locator("#history-table tbody tr").first).to_contain_text(str(release["id"]))
    assert page.dialogs == []


def test_refusal_is_a_message_and_debits_nothing(site, page):
    expect = playwright.expect
    sign_in(page, site["token"])
    expect(page.locator("#analyst")).to_be_visible()
    count, spent = site["ledger"].count(), site["ledger"].spent("adult")
    page.fill("#sql", "SELECT sex FROM adult UNION SELECT sex FROM adult")
    page.click("#release")
    message = page.locator("#message")
    expect(message).to_contain_text("UNION is not supported")
    expect(message).to_have_class("error")
    assert site["ledger"].count() == count and site["ledger"].spent("adult") == spent
    # a zCDP dataset takes its budget as ρ
    page.select_option("#dataset", "adult_z")
    expect(page.locator("#budget-label")).to_have_text("ρ")
    page.fill("#sql", "SELECT COUNT(*) AS n FROM adult_z")
    page.fill("#budget-value", "0.01")
    page.click("#explain")
    rho = page.locator("#explain-table .loss").first
    expect(rho).to_have_text(re.compile(r"^ρ [=≈] 0.01$"))  # ≈: σ rounded up
    # the exact ρ the plan charges: at most the request (rounding is the numbers part's)
    assert Fraction(99, 10_000) < Fraction(rho.get_attribute("data-exact")) <= Fraction(1, 100)
    assert site["ledger"].spent("adult_z") == dp.ZCDP(0)
    # the JSON tab's refusals too: an unknown aggregation
    page.click("#tab-json")
    page.fill("#json", '{"aggs": [{"agg": "rows"}]}')
    page.click("#explain")
    expect(message).to_contain_text("ValidationError")
    page.fill("#json", '{"aggs": [{"agg": "count"}]}')
    page.click("#explain")
    expect(page.locator("#explain-table")).to_contain_text("count")


def test_markup_in_names_and_keys_renders_as_text(site, page):
    expect = playwright.expect
    sign_in(page, site["token"])
    schema = page.locator(".dataset[data-name='adult'] details")
    schema.locator("summary").click()
    expect(schema.get_by_role("cell", name=MARKUP, exact=True)).to_have_count(1)
    expect(schema).to_contain_text("plain")  # the declared categories, as text
    page.fill("#sql", GROUPED)
    page.fill("#budget-value", "0.05")
    page.click("#release")
    expect(page.locator("#result-table").get_by_role("cell", name=MARKUP, exact=True)
           ).to_have_count(1)
    expect(page.locator("#result svg text.label", has_text=MARKUP)).to_have_count(1)
    assert page.locator("img").count() == 0 and page.dialogs == []
    # the broken variant: the same text parsed as markup makes an element this test sees,
    # and the CSP (the second line of defence) refuses to run its handler. It goes into an
    # element of its own: the console may still be re-rendering its panels (the history
    # refresh after the release) and would replace the markup in one of theirs
    with page.expect_console_message(lambda m: "Content Security Policy" in m.text):
        page.evaluate("name => { const d = document.createElement('div');"
                      " d.id = 'broken-variant'; d.innerHTML = name;"
                      " document.body.appendChild(d); }", MARKUP)
    assert page.locator("#broken-variant img").count() == 1 and page.dialogs == []
    page.refusals.clear()  # expected here (the fixture checks that no other page has one)


def test_curator_view_and_verify(site, page):
    expect = playwright.expect
    sign_in(page, "not a token")
    expect(page.locator("#message")).to_contain_text("neither an analyst's nor the curator's")
    sign_in(page, CURATOR_TOKEN)
    expect(page.locator("#curator")).to_be_visible()
    expect(page.locator("#analyst")).to_be_hidden()
    ledger = site["ledger"]
    expect(page.locator("#ledger-datasets-table")).to_contain_text("adult")
    expect(page.locator("#ledger-releases")).to_contain_text(f"releases: {ledger.count()} ")
    expect(page.locator("#burn svg.burn polyline.spend")).to_have_count(2)  # a dataset each
    expect(page.locator("#ledger-grants")).to_contain_text("ann")
    page.click("#verify")
    status = page.locator("#verify-status")
    expect(status).to_contain_text(f"intact: {ledger.count()} releases")
    expect(status).to_have_class("ok")
    page.click("#signout")
    expect(page.locator("#curator")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('dpkit.token')") is None


def test_api_docs_render_from_the_server_alone(site, page):
    """/docs is Swagger UI from the package's files: it draws the API's routes, asks no
    other origin for anything (checked by the fixture) and breaks no CSP rule."""
    page.goto(site["url"] + "/docs")
    expect = playwright.expect
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("dpkit server")
    expect(page.locator(".opblock-summary-path",
                        has_text=re.compile(r"^/v1/datasets/\{name\}/sql$"))).to_have_count(1)
    assert any(u.endswith("/docs/assets/swagger-ui-bundle.js") for u in page.requests)
