"""Approximate minima perturbation (Iyengar et al., S&P 2019, Alg. 1) beside objective and
output perturbation, the non-private scikit-learn model and the trivial baseline (issue 36,
item 6).

    python bench/learn_amp.py [--trials 5] [--update-results]

Same (ε, δ) for every private method: ε ∈ {0.1, 0.25, 0.5, 1, 5}, δ = 10⁻⁶ (pure-ε
methods spend ε only). Nothing here was tuned: AMP's constants are the paper's (ε₃ = ε/100,
δ₂ = δ/100, ε₂ = 0.9·(ε − ε₃), γ = 2^-20·Λ), the other methods run at their defaults.

Tasks and held-out rows:
- Adult income (logistic, SVM): UCI's published train split (30,169 rows after dropping
  rows missing a used column) to fit, its test split (15,063 rows) to score; the 10
  columns of bench/learn_logistic_peers.py (five numeric, log for the capital columns,
  five indicators) mapped by declared bounds to [−1, 1] and rows divided by √10, so
  data_norm = 1. Accuracy on the test split.
- Adult hours-per-week (regression): the same splits and columns minus hours-per-week,
  declared bounds, y_bounds (1, 99). RMSE on the test split.
- Bike Sharing daily count cnt (regression; ../shared/data_new/bike_sharing_uci/day.csv,
  731 days): season, holiday, workingday, weathersit, temp, atemp, hum, windspeed with
  declared bounds, y_bounds (0, 9000); days split at random into 2/3 fit and 1/3 held out
  (a fixed split of the rows, seed 36; the noise is the CSPRNG's). RMSE on the held-out
  days.
The last table is the wall time of one AMP fit (median over the trials): the solver runs a
number of accelerated gradient steps fixed by n and the declared quantities
(dpkit.learn._amp.solver_steps), the same for every dataset of that size.
Output perturbation exists in dpkit for logistic regression only; objective perturbation
(pure ε) for logistic regression only; the linear regression's pure-ε method is the
sufficient-statistics (functional) mechanism.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import TypeVar

import numpy as np
import polars as pl
from sklearn.linear_model import HuberRegressor
from sklearn.linear_model import LinearRegression as SkLinear
from sklearn.linear_model import LogisticRegression as SkLogistic
from sklearn.svm import LinearSVC as SkSVC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outdir import add_flag, results_dir  # noqa: E402

from dpkit.datasets import load_adult  # noqa: E402
from dpkit.learn import LinearRegression, LinearSVC, LogisticRegression  # noqa: E402

EPSILONS = (0.1, 0.25, 0.5, 1.0, 5.0)
DELTA = 1e-6
NUMERIC = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
INDICATORS = [("sex", "Male"), ("marital-status", "Married-civ-spouse"), ("race", "White"),
              ("workclass", "Private"), ("native-country", "United-States")]
LOWER = np.array([17, 1, 0, 0, 1, 0, 0, 0, 0, 0], dtype=float)
UPPER = np.array([90, 16, np.log1p(99999), np.log1p(4356), 99, 1, 1, 1, 1, 1])
BIKE = [Path("/work/shared/data_new/bike_sharing_uci/day.csv"),
        Path(__file__).resolve().parents[2] / "shared/data_new/bike_sharing_uci/day.csv"]
BIKE_COLUMNS = ["season", "holiday", "workingday", "weathersit", "temp", "atemp", "hum",
                "windspeed"]
BIKE_LOWER = np.array([1, 0, 0, 1, 0, 0, 0, 0], dtype=float)
BIKE_UPPER = np.array([4, 1, 1, 4, 1, 1, 1, 1], dtype=float)
T = TypeVar("T")
FIT_TIMES: dict[str, list[list[float]]] = {}  # AMP rows: per ε, the seconds of each fit


def fitted(name: str, column: int, model: T, x: np.ndarray, y: np.ndarray) -> T:
    """``model.fit(x, y)``; an AMP row's wall time goes to FIT_TIMES."""
    start = time.perf_counter()
    out = model.fit(x, y)  # type: ignore[attr-defined]
    if "AMP" in name:
        FIT_TIMES.setdefault(name, [[] for _ in EPSILONS])[column].append(
            time.perf_counter() - start)
    return out


def adult(part: str) -> tuple[np.ndarray, np.ndarray]:
    df = load_adult(part).drop_nulls(subset=NUMERIC + [c for c, _ in INDICATORS] + ["income"])
    num = df.select(NUMERIC).to_numpy().astype(float)
    num[:, 2:4] = np.log1p(num[:, 2:4])
    ind = [(df[c].to_numpy() == v).astype(float) for c, v in INDICATORS]
    y = np.isin(df["income"].to_numpy(), [">50K", ">50K."]).astype(int)
    return np.column_stack([num, *ind]), y


def mapped(x: np.ndarray) -> np.ndarray:
    """Declared bounds to [−1, 1], rows divided by √d (so ‖x‖ ≤ 1)."""
    z = 2 * (np.clip(x, LOWER, UPPER) - LOWER) / (UPPER - LOWER) - 1
    return z / np.sqrt(x.shape[1])


def bike() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    path = next(p for p in BIKE if p.exists())
    df = pl.read_csv(path)
    x, y = df.select(BIKE_COLUMNS).to_numpy().astype(float), df["cnt"].to_numpy().astype(float)
    order = np.random.default_rng(36).permutation(len(y))  # the split, not the noise
    fit, held = order[: 2 * len(y) // 3], order[2 * len(y) // 3:]
    return x[fit], y[fit], x[held], y[held]


def stats(values: list[float]) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values):.3f}"


def classification(trials: int) -> list[str]:
    x, y = adult("train")
    xt, yt = adult("test")
    z, zt = mapped(x), mapped(xt)
    lines = [f"### Adult income: test accuracy (fit {len(y):,} rows, held out {len(yt):,})", "",
             "| method | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " |",
             "|---|" + "---|" * len(EPSILONS)]
    majority = max(yt.mean(), 1 - yt.mean())
    private = {
        "logistic, AMP (ε, δ)": lambda e: LogisticRegression(
            epsilon=e, delta=DELTA, data_norm=1, classes=[0, 1], method="amp"),
        "logistic, objective perturbation (pure ε)": lambda e: LogisticRegression(
            epsilon=e, data_norm=1, classes=[0, 1], method="objective"),
        "logistic, output perturbation (pure ε)": lambda e: LogisticRegression(
            epsilon=e, data_norm=1, classes=[0, 1], method="output"),
        "SVM (Huber hinge), AMP (ε, δ)": lambda e: LinearSVC(
            epsilon=e, delta=DELTA, data_norm=1, classes=[0, 1]),
    }
    for name, make in private.items():
        cells = []
        for j, e in enumerate(EPSILONS):
            acc = [float((fitted(name, j, make(e), z, y).predict(zt) == yt).mean())
                   for _ in range(trials)]
            cells.append(stats(acc))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name, model in (("logistic, scikit-learn (non-private)", SkLogistic(max_iter=2000)),
                        ("SVM, scikit-learn LinearSVC (non-private)", SkSVC())):
        acc = float((model.fit(z, y).predict(zt) == yt).mean())
        lines.append(f"| {name} | " + " | ".join([f"{acc:.3f}"] * len(EPSILONS)) + " |")
    lines.append("| majority class (trivial) | " + " | ".join([f"{majority:.3f}"] *
                                                              len(EPSILONS)) + " |")
    return lines


def regression(title: str, x: np.ndarray, y: np.ndarray, xt: np.ndarray, yt: np.ndarray,
               bounds: tuple[np.ndarray, np.ndarray], y_bounds: tuple[float, float],
               trials: int) -> list[str]:
    lines = [f"### {title}: held-out RMSE (fit {len(y):,} rows, held out {len(yt):,})", "",
             "| method | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " |",
             "|---|" + "---|" * len(EPSILONS)]
    private = {
        "linear, AMP on Huber's loss (ε, δ)": lambda e: LinearRegression(
            epsilon=e, delta=DELTA, bounds=bounds, y_bounds=y_bounds, method="amp"),
        "linear, sufficient statistics (pure ε)": lambda e: LinearRegression(
            epsilon=e, bounds=bounds, y_bounds=y_bounds),
    }
    for name, make in private.items():
        cells = []
        for j, e in enumerate(EPSILONS):
            err = [float(np.sqrt(np.mean((fitted(f"{title}: {name}", j, make(e), x,
                                                 y).predict(xt) - yt) ** 2)))
                   for _ in range(trials)]
            cells.append(stats(err))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name, model in (("scikit-learn LinearRegression (non-private)", SkLinear()),
                        ("scikit-learn HuberRegressor (non-private)",
                         HuberRegressor(max_iter=1000))):
        err = float(np.sqrt(np.mean((model.fit(x, y).predict(xt) - yt) ** 2)))
        lines.append(f"| {name} | " + " | ".join([f"{err:.3f}"] * len(EPSILONS)) + " |")
    base = float(np.sqrt(np.mean((yt - np.mean(y)) ** 2)))
    lines.append("| training mean (trivial, non-private) | " +
                 " | ".join([f"{base:.3f}"] * len(EPSILONS)) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    add_flag(ap)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    lines = ["# Approximate minima perturbation (issue 36, item 6)", "",
             "Written by `python bench/learn_amp.py --trials "
             f"{args.trials} --update-results`; mean ± sd over {args.trials} fits per cell "
             f"(fresh noise each), δ = {DELTA:g} for AMP. Protocol and held-out rows: the "
             "script's docstring.", ""]
    lines += classification(args.trials) + [""]
    x, y = adult("train")
    xt, yt = adult("test")
    keep = [0, 1, 2, 3, 5, 6, 7, 8, 9]  # every column but hours-per-week (the target)
    lines += regression("Adult hours-per-week", x[:, keep], x[:, 4], xt[:, keep], xt[:, 4],
                        (LOWER[keep], UPPER[keep]), (1.0, 99.0), args.trials) + [""]
    bx, by, bxt, byt = bike()
    lines += regression("Bike Sharing daily count", bx, by, bxt, byt,
                        (BIKE_LOWER, BIKE_UPPER), (0.0, 9000.0), args.trials)
    lines += ["", "### AMP: seconds per fit (median)", "",
              "| fit | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " |",
              "|---|" + "---|" * len(EPSILONS)]
    lines += [f"| {name} | " + " | ".join(f"{np.median(t):.3f}" for t in times) + " |"
              for name, times in FIT_TIMES.items()]
    lines += ["", f"Run time {time.perf_counter() - start:.0f} s on a shared 2-core machine."]
    out = results_dir(args.update_results) / "learn_amp.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
