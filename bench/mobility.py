"""Google-style mobility reports (Aktay et al. 2020, arXiv:2004.04145) on the UCI Bike
Sharing days: dpkit.apps.mobility.MobilityReport with the paper's independent per-day noise
("increments", the per-step baseline: each day's counts with their own discrete Laplace at
ε/T of the stream's budget) beside dpkit's continual counters ("tree", and "smooth", the
default of ``query.continual``) at the same total budget, the daily counts read as
differences of their noisy running totals.

Data: ``shared/data_new/bike_sharing_uci/day.csv``, 731 days, categories casual and
registered. No rider ids: the unit is declared (per_day = 2 rentals per day and category,
w = per_day·2·731 over the stream; module docstring of dpkit.apps.mobility). Nothing of the
report was tuned on these data (the defaults — per_day 1, "increments", β = 0.05,
suppression below the error bar — are data-free; per_day = 2 and the baseline window, the
first 35 days, are declared here before any run). Figures: MAE of the daily counts (released
value, clipped at 0, against the true count), MAE of the percent change from baseline (days
after the window, from the released values before suppression, where the noisy baseline is
positive; the truth uses the same rule on the true counts),
the share of suppressed counts, and the error bars' empirical coverage; medians over trials.

    PYTHONPATH=src python bench/mobility.py --update-results   # ≈ 2 min; writes
    # bench/results/mobility.md and docs/guide/mobility.png
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path

import matplotlib
import numpy as np
import polars as pl

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from outdir import add_flag, results_dir  # noqa: E402

from dpkit.apps.mobility import (  # noqa: E402
    BIKE_CATEGORIES,
    MobilityReport,
    bike_sharing_counts,
    percent_change,
)

PER_DAY = 2
BASELINE = (1, 35)
EPS_DAY = (0.1, 0.5, 1.0, 2.0)
MECHANISMS = ("increments", "tree", "smooth")
DOCS = HERE.parent / "docs" / "guide" / "mobility.png"


def data_path() -> Path:
    for base in (HERE.parent.parent, HERE.parent.parent.parent):
        p = base / "shared" / "data_new" / "bike_sharing_uci" / "day.csv"
        if p.exists():
            return p
    raise SystemExit("error: shared/data_new/bike_sharing_uci/day.csv not found")


def truth_table(days, counts) -> pl.DataFrame:
    rows = [(t, c, float(day[c]), d.weekday()) for t, (d, day) in
            enumerate(zip(days, counts, strict=True), 1) for c in BIKE_CATEGORIES]
    table = pl.DataFrame(rows, schema={"t": pl.Int64, "category": pl.String,
                                       "count": pl.Float64, "weekday": pl.Int64},
                         orient="row")
    return percent_change(table, BASELINE, released=len(days))


def run(days, counts, mechanism: str, eps_day: float) -> MobilityReport:
    T = len(days)
    report = MobilityReport(T, epsilon=Fraction(eps_day) * T, categories=list(BIKE_CATEGORIES),
                            per_day=PER_DAY, origin=days[0], mechanism=mechanism)
    for day in counts:
        report.feed(day)
    return report


def errors(report: MobilityReport, truth: pl.DataFrame) -> dict[str, float]:
    published = report.percent_change(BASELINE)
    raw = np.array([d.raw[c] for d in report.days for c in BIKE_CATEGORIES])
    # the % change compared on every day: the released values before suppression (clipped
    # at 0), same baseline rule; suppression is a publication choice counted separately
    out = percent_change(report.table().with_columns(
        pl.Series("count", np.maximum(raw, 0.0))), BASELINE, released=len(report.days))
    h = np.array([d.half_width for d in report.days for c in BIKE_CATEGORIES])
    true = truth["count"].to_numpy()
    after = (out["t"] > BASELINE[1]).to_numpy()
    pct, tpct = out["percent_change"].to_numpy(), truth["percent_change"].to_numpy()
    both = after & np.isfinite(pct.astype(float)) & np.isfinite(tpct.astype(float))
    # (a baseline of 0, possible when the noise swamps a small count, leaves a day undefined)
    return {"count_mae": float(np.mean(np.abs(np.maximum(raw, 0) - true))),
            "pct_mae": float(np.mean(np.abs(pct[both] - tpct[both]))) if both.any() else
            float("nan"),
            "suppressed": float(published["count"].is_null().mean()),
            "coverage": float(np.mean(np.abs(raw - true) <= h)),
            "half_width": float(np.median(h))}


def figure(days, truth: pl.DataFrame, report: MobilityReport, eps_day: float) -> None:
    out = report.percent_change(BASELINE)
    fig, axes = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    for c, colour in zip(BIKE_CATEGORIES, ("tab:orange", "tab:blue"), strict=True):
        part, tp = out.filter(pl.col("category") == c), truth.filter(pl.col("category") == c)
        x = np.array(days)
        val = part["count"].to_numpy().astype(float)
        axes[0].errorbar(x, val, yerr=[val - part["low"].to_numpy(),
                                       part["high"].to_numpy() - val],
                         fmt=".", ms=2, lw=0.5, color=colour, label=f"{c} (released)")
        axes[0].plot(x, tp["count"].to_numpy(), lw=0.6, color="k", alpha=0.5)
        axes[1].plot(x, part["percent_change"].to_numpy(), ".", ms=2, color=colour,
                     label=f"{c} (released)")
        axes[1].plot(x, tp["percent_change"].to_numpy(), lw=0.6, color="k", alpha=0.5)
    axes[0].set_ylabel("rentals per day")
    axes[0].set_title(f"Bike Sharing as a mobility report: ε = {eps_day} per day, "
                      f"{PER_DAY} rentals/day/category, 95% error bars (black: true)")
    axes[0].legend(fontsize=8)
    axes[1].set_ylabel("% change from baseline")
    axes[1].set_yscale("symlog", linthresh=100)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(DOCS, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10)
    add_flag(ap)
    args = ap.parse_args()
    out = results_dir(args.update_results)
    start = time.time()
    days, counts = bike_sharing_counts(data_path())
    truth = truth_table(days, counts)
    lines = ["# Mobility reports (Aktay et al. 2020) on the Bike Sharing days", "",
             f"`PYTHONPATH=src python bench/mobility.py --trials {args.trials} "
             "--update-results` (about {secs} s). Figure: `docs/guide/mobility.png`.", "",
             f"731 days (2011–2012), categories casual and registered, {PER_DAY} rentals per "
             f"day and category (declared: the data have no rider ids), w = {PER_DAY}·2·731 "
             f"= {PER_DAY * 2 * 731} over the stream; total budget ε_day·731, charged once; "
             f"baseline window days {BASELINE[0]}–{BASELINE[1]} (2011-01-01 … 2011-02-04), "
             "median of the same weekday. Medians over "
             f"{args.trials} trials. Held out: nothing was tuned on these data.", "",
             "| ε per day | mechanism | MAE daily count | MAE % change | suppressed | "
             "error bar h (95%) | coverage |", "|---:|---|---:|---:|---:|---:|---:|"]
    for eps in EPS_DAY:
        for mech in MECHANISMS:
            runs = [errors(run(days, counts, mech, eps), truth) for _ in range(args.trials)]
            med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
            lines.append(f"| {eps} | {mech} | {med['count_mae']:.1f} | {med['pct_mae']:.1f} | "
                         f"{med['suppressed']:.1%} | {med['half_width']:.0f} | "
                         f"{med['coverage']:.3f} |")
            print(lines[-1], flush=True)
    figure(days, truth, run(days, counts, "increments", 1.0), 1.0)
    lines += ["", "The true counts are hundreds (casual, winter) to thousands (registered); "
              "\"increments\" is both the paper's method and the per-step baseline. The tree "
              "and smooth counters answer running totals well but a day's count is the "
              "difference of two of their releases, which carries more noise than one "
              "per-day draw at the same budget: for per-day counts the paper's choice is "
              "the right one. Their error bars are the stream's (a sub-exponential bound, "
              "conservative: coverage ≈ 1); the increments' bars are the exact law's "
              "(coverage ≈ 0.95 or above, as stated). The percent changes are large (a summer "
              "day has up to 20 times the winter baseline's casual rentals), so an error of "
              "a few percent in a weekday's baseline becomes tens of percentage points: the "
              "% change MAE is dominated by the baseline's noise.", ""]
    text = "\n".join(lines).replace("{secs}", f"{time.time() - start:.0f}")
    (out / "mobility.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
