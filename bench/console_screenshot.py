"""Screenshots of the web console for the docs (issue 33): the analyst's view after an explain
and a release, and the curator's view after verify, from a real ``dpkit serve`` driven by the
system Chromium through Playwright (the deployment of tests/test_console_browser.py).

Run from the repository root::

    PYTHONPATH=src python bench/console_screenshot.py [OUT_DIR]   # default: docs/guide

Writes ``console-analyst.png`` and ``console-curator.png`` (1280 px wide, full page).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import expect, sync_playwright  # noqa: E402
from tests.test_console_browser import CURATOR_TOKEN, deploy, start  # noqa: E402

QUERY = "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM adult GROUP BY sex"


def main(out: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("needs Chromium (apt-get install chromium)")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        site = deploy(Path(folder))
        server = start(site["config"])
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                analyst(browser, server.url, site["token"], out / "console-analyst.png")
                curator(browser, server.url, out / "console-curator.png")
                browser.close()
        finally:
            server.stop()
            site["ledger"].dispose()
    print(f"wrote {out / 'console-analyst.png'} and {out / 'console-curator.png'}")


def _page(browser, url: str, token: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url + "/")
    page.fill("#token", token)
    page.click("#signin")
    return page


def analyst(browser, url: str, token: str, path: Path) -> None:
    page = _page(browser, url, token)
    page.fill("#sql", QUERY)
    page.fill("#budget-value", "0.5")
    page.click("#explain")
    expect(page.locator("#explain-table")).to_be_visible()
    page.click("#release")
    expect(page.locator("#result svg.chart g.errorbar")).to_have_count(2)
    expect(page.locator("#history-table")).to_be_visible()
    page.screenshot(path=str(path), full_page=True)
    page.close()


def curator(browser, url: str, path: Path) -> None:
    page = _page(browser, url, CURATOR_TOKEN)
    page.click("#verify")
    expect(page.locator("#verify-status")).to_have_class("ok")
    page.screenshot(path=str(path), full_page=True)
    page.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "guide")
