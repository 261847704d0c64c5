"""``dpkit demo``: a differentially private analysis of UCI Adult, beside the true values.

The true (non-private) values are printed only because this is a demonstration on public
data: they show the price of privacy. A real analyst sees only the DP columns.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

import dpkit as dp
from dpkit.core.numbers import fraction_down

EDUCATION = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th",
             "HS-grad", "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters",
             "Prof-school", "Doctorate"]
AGE_EDGES = [17, 25, 35, 45, 55, 65, 91]
# share of the total ε per release (exact, so the shares sum to exactly the budget)
SHARES = {"education": Fraction(2, 10), "income": Fraction(1, 10), "means": Fraction(3, 10),
          "age": Fraction(2, 10), "median": Fraction(2, 10)}


def _fmt(x: Any, digits: int = 1) -> str:
    return f"{x:,.{digits}f}" if isinstance(x, float) else f"{x:,}"


def _table(title: str, key: str, rows: list[tuple[Any, ...]], digits: int = 0,
           note: str = "") -> Table:
    table = Table(title=title, caption=note, title_justify="left")
    table.add_column(key)
    table.add_column("DP estimate", justify="right", style="bold cyan")
    table.add_column("95% CI", justify="right")
    table.add_column("true value (not private)", justify="right", style="dim")
    for k, est, lo, hi, true in rows:
        table.add_row(str(k), _fmt(est, digits), f"[{_fmt(lo, digits)}, {_fmt(hi, digits)}]",
                      _fmt(true, digits))
    return table


def _counts(res: pl.DataFrame, truth: dict[Any, int], key: str) -> list[tuple[Any, ...]]:
    return [(r[key], r["count"], r["count_ci_low"], r["count_ci_high"], truth.get(r[key], 0))
            for r in res.iter_rows(named=True)]


def run_demo(ledger_path: Path, epsilon: float, console: Console) -> None:
    start = time.perf_counter()
    adult = dp.datasets.load_adult("train")
    dataset = f"adult-demo-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}"
    session = dp.Session(adult, privacy_unit=dp.PrivacyUnit.rows(),
                         budget=dp.PureDP(epsilon), ledger=ledger_path, dataset=dataset)
    eps = {k: v * fraction_down(epsilon) for k, v in SHARES.items()}
    console.rule("[bold]dpkit demo: UCI Adult (32,561 adults, 1994 US Census), "
                 f"total budget ε = {epsilon:g}")
    console.print("Privacy unit: one row (one person). Noise: exact discrete Laplace and the "
                  "exponential mechanism. Intervals cover the true value with ≥ 95% "
                  "probability (per cell).\n")

    q = session.query()
    res = q.group_by("education", keys=EDUCATION).count().release(epsilon=eps["education"])
    truth = dict(adult.group_by("education").len().iter_rows())
    console.print(_table(f"People by education (ε = {float(eps['education']):g})", "education",
                         _counts(res, truth, "education")))

    res = q.group_by("income", keys=["<=50K", ">50K"]).count().release(epsilon=eps["income"])
    truth = dict(adult.group_by("income").len().iter_rows())
    console.print(_table(f"People by income (ε = {float(eps['income']):g})", "income",
                         _counts(res, truth, "income")))

    res = q.group_by("sex", keys=["Female", "Male"]).agg(
        dp.mean("age", bounds=(17, 90)), dp.mean("hours-per-week", bounds=(1, 99))
    ).release(epsilon=eps["means"])
    truth_df = adult.group_by("sex").agg(pl.col("age").mean(), pl.col("hours-per-week").mean())
    true_means = {r["sex"]: r for r in truth_df.iter_rows(named=True)}
    for col, label in (("age", "Mean age"), ("hours-per-week", "Mean hours per week")):
        name = f"{col}_mean"
        rows = [(r["sex"], r[name], r[f"{name}_ci_low"], r[f"{name}_ci_high"],
                 true_means[r["sex"]][col]) for r in res.iter_rows(named=True)]
        console.print(_table(f"{label} by sex (bounds declared; ε = {float(eps['means'] / 2):g})",
                             "sex", rows, digits=2))

    res = q.histogram("age", bins=AGE_EDGES).release(epsilon=eps["age"])
    true_counts = np.histogram(adult["age"].to_numpy(), bins=AGE_EDGES)[0].tolist()
    rows = [(r["bin"], r["count"], r["count_ci_low"], r["count_ci_high"], t)
            for r, t in zip(res.iter_rows(named=True), true_counts, strict=True)]
    console.print(_table(f"Histogram of age (ε = {float(eps['age']):g})", "age", rows))

    res = q.quantile("hours-per-week", 0.5, bounds=(1, 99)).release(epsilon=eps["median"])
    r = res.row(0, named=True)
    true_median = float(np.median(adult["hours-per-week"].to_numpy()))
    title = f"Median hours per week (exponential mechanism; ε = {float(eps['median']):g})"
    table = Table(title=title, title_justify="left")
    for c in ("DP estimate", "rank error (95%)", "true value (not private)"):
        table.add_column(c, justify="right")
    table.add_row(_fmt(r["hours-per-week_median"]),
                  f"± {r['hours-per-week_median_rank_error']:.0f} of 32,561 rows",
                  _fmt(true_median))
    console.print(table)

    console.rule("budget")
    console.print(f"Spent: [bold]{session.spent}[/bold] (exact)   "
                  f"Remaining: {session.remaining}")
    runs = len(session.ledger.datasets()) if session.ledger else 0
    console.print(f"Ledger: {ledger_path} — this run is dataset '{dataset}' "
                  f"({runs} demo run(s) recorded; each run has its own lifetime cap ε = "
                  f"{epsilon:g}).")
    console.print("Inspect it with `dpkit ledger show`; reset it with "
                  "`dpkit demo --reset-ledger` or by deleting the file.")
    console.print(f"Finished in {time.perf_counter() - start:.1f} s.")
