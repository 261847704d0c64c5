"""A report on UCI Adult, as ``dpkit demo`` releases it, and its screenshot in headless
Chromium (issue 24: the report's screenshot in the docs).

Runs the demo's five releases (ε = 1 in total) through a fresh ledger, writes
``report.html`` (``dpkit.report.ledger_report`` with the records and the true values) and,
when Chromium is installed, ``report.png`` (1200 px wide). Writes to bench/out/, or with
``--update-results`` to bench/results/report.html and docs/guide/report.png. Needs
``dpkit[plot]``; the Adult data ships with dpkit.

    PYTHONPATH=src python bench/report_screenshot.py [--update-results] [--height 3300]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import outdir  # noqa: E402

import dpkit as dp  # noqa: E402
from dpkit.cli.demo import AGE_EDGES, EDUCATION, SHARES  # noqa: E402
from dpkit.report import ledger_report  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs" / "guide" / "report.png"


def report(ledger_path: Path) -> str:
    """The demo's releases on Adult through a ledger at ``ledger_path``, as a report."""
    adult = dp.datasets.load_adult("train")
    name = "adult-demo"
    ledger = dp.Ledger(ledger_path)
    session = dp.Session(adult, budget=dp.PureDP(1), ledger=ledger, dataset=name)
    q, records, truth = session.query(), [], {}

    def keep(true):
        records.append(session.last_release)
        truth[session.last_release.release_id] = true

    q.group_by("education", keys=EDUCATION).count().release(epsilon=SHARES["education"])
    keep({"count": dict(adult.group_by("education").len().iter_rows())})
    q.group_by("income", keys=["<=50K", ">50K"]).count().release(epsilon=SHARES["income"])
    keep({"count": dict(adult.group_by("income").len().iter_rows())})
    q.group_by("sex", keys=["Female", "Male"]).agg(
        dp.mean("age", bounds=(17, 90)), dp.mean("hours-per-week", bounds=(1, 99))
    ).release(epsilon=SHARES["means"])
    means = adult.group_by("sex").agg(pl.col("age").mean(), pl.col("hours-per-week").mean())
    keep({"age_mean": dict(means.select("sex", "age").iter_rows()),
          "hours-per-week_mean": dict(means.select("sex", "hours-per-week").iter_rows())})
    q.histogram("age", bins=AGE_EDGES).release(epsilon=SHARES["age"])
    keep({"count": np.histogram(adult["age"].to_numpy(), bins=AGE_EDGES)[0].tolist()})
    q.quantile("hours-per-week", 0.5, bounds=(1, 99)).release(epsilon=SHARES["median"])
    keep({"hours-per-week_median": [float(np.median(adult["hours-per-week"].to_numpy()))]})
    return ledger_report(ledger, name, records, truth, title="Privacy report: UCI Adult demo")


def screenshot(html: Path, png: Path, height: int) -> bool:
    """``html`` rendered by headless Chromium to ``png`` (1200 px wide); False without it."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no screenshot: Chromium is not installed (apt-get install chromium)",
              file=sys.stderr)
        return False
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-quic", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run",
                        f"--user-data-dir={profile}", "--hide-scrollbars",
                        f"--window-size=1200,{height}", f"--screenshot={png}",
                        html.resolve().as_uri()], check=True, capture_output=True, timeout=120)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    outdir.add_flag(ap)
    ap.add_argument("--height", type=int, default=3300, help="screenshot height in px")
    args = ap.parse_args()
    out = outdir.results_dir(args.update_results)
    with tempfile.TemporaryDirectory() as tmp:
        page = report(Path(tmp) / "ledger.sqlite")
    html = out / "report.html"
    html.write_text(page, encoding="utf-8")
    written = [html]
    if screenshot(html, out / "report.png", args.height):
        written.append(out / "report.png")
        if out == outdir.TRACKED:  # one tracked copy: the docs'
            shutil.move(out / "report.png", DOCS)
            written[-1] = DOCS
    print("wrote " + ", ".join(str(p) for p in written))


if __name__ == "__main__":
    main()
