"""The generic private learner on UCI Adult (issue 37, item 1): dpkit's PrivateLearner
(Kasiviswanathan et al. 2011, Thm 3.4: the exponential mechanism over a finite class scored by
−mistakes) beside the non-private ERM over the same class and the majority class, in one run.

    python bench/learn_hypothesis.py [--trials 50] [--update-results]

Rows: UCI's published split (:func:`dpkit.datasets.load_adult`): every learner is fit on the
32,561 training rows and scored on the 16,281 test rows, which are held out — nothing here
was chosen on them. Label: income > 50K (class 1). No parameter is tuned: the binarisation
rules and grids below were written down before any run, from the attributes' meaning.

Binary attributes (d = 8, a value of 1 is "true"): age ≥ 40; education-num ≥ 13 (a
bachelor's degree or more); marital-status Married-civ-spouse or Married-AF-spouse; sex
Male; hours-per-week ≥ 45; capital-gain > 0; occupation Exec-managerial or Prof-specialty;
race White. Numeric grids (declared): age 20, 25, …, 80; education-num 1 … 16;
hours-per-week 10, 15, …, 80; log(1 + capital-gain) 0, 0.5, …, 11.5.

Classes: a stump on the binary attributes (|H| = 16), a stump on the numeric grids
(|H| = 2·(13 + 16 + 15 + 24) = 136), a conjunction of literals over the 8 binary attributes
(|H| = 3^8 = 6561). Cells: median test accuracy over the trials (fresh exponential-mechanism
draws; nothing is seeded), the non-private ERM's (argmin of training mistakes, ties to the
first), the training majority class's, and the theorem's n at α = β = 0.05 (KLNRS Thm 3.4
with its proof's constants, :func:`dpkit.learn.hypothesis.sample_complexity`) beside the
training n. KLNRS give no figure; the table is the result.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outdir import add_flag, results_dir  # noqa: E402

from dpkit.datasets import load_adult  # noqa: E402
from dpkit.learn import PrivateLearner  # noqa: E402
from dpkit.learn.hypothesis import (  # noqa: E402
    Conjunctions,
    HypothesisClass,
    Stumps,
    sample_complexity,
)

EPSILONS = (0.0001, 0.0003, 0.001, 0.003, 0.01, 1.0)
ALPHA = BETA = 0.05
BINARY = ("age ≥ 40", "education-num ≥ 13", "married", "male", "hours ≥ 45",
          "capital-gain > 0", "exec/prof occupation", "white")
GRIDS = {"age": np.arange(20, 81, 5), "education-num": np.arange(1, 17),
         "hours-per-week": np.arange(10, 81, 5), "log capital-gain": np.arange(0, 12, 0.5)}


def binary(df: pl.DataFrame) -> np.ndarray:
    """The 8 declared binary attributes (nulls are false)."""
    married = pl.col("marital-status").is_in(["Married-civ-spouse", "Married-AF-spouse"])
    cols = [pl.col("age") >= 40, pl.col("education-num") >= 13, married,
            pl.col("sex") == "Male", pl.col("hours-per-week") >= 45,
            pl.col("capital-gain") > 0,
            pl.col("occupation").is_in(["Exec-managerial", "Prof-specialty"]),
            pl.col("race") == "White"]
    return df.select([c.fill_null(False).cast(pl.Float64).alias(str(i))
                      for i, c in enumerate(cols)]).to_numpy()


def numeric(df: pl.DataFrame) -> np.ndarray:
    gain = np.log1p(df["capital-gain"].to_numpy().astype(float))
    return np.column_stack([df["age"].to_numpy(), df["education-num"].to_numpy(),
                            df["hours-per-week"].to_numpy(), gain]).astype(float)


def label(df: pl.DataFrame) -> np.ndarray:
    return (df["income"] == ">50K").to_numpy().astype(int)


def erm(h: HypothesisClass, x: np.ndarray, y: np.ndarray) -> int:
    """The non-private empirical risk minimiser over the same class."""
    return int(np.argmin(h.mistakes(x, y)))


def accuracy(h: HypothesisClass, index: int, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(h.predict(index, x) == y))


def run(trials: int) -> list[str]:
    train, test = load_adult("train"), load_adult("test")
    y, y_test = label(train), label(test)
    features: dict[str, tuple[HypothesisClass, Callable[[pl.DataFrame], np.ndarray]]] = {
        "stump, 8 binary attributes": (Stumps([[0.5]] * 8), binary),
        "stump, numeric grids": (Stumps(list(GRIDS.values())), numeric),
        "conjunction, 8 binary attributes": (Conjunctions(8), binary),
    }
    majority = int(y.mean() >= 0.5)
    rows = []
    for name, (h, encode) in features.items():
        x, x_test = encode(train), encode(test)
        best = erm(h, x, y)
        cells = []
        for eps in EPSILONS:
            accs, secs = [], []
            for _ in range(trials):
                start = time.perf_counter()
                model = PrivateLearner(h, eps).fit(x, y)
                secs.append(time.perf_counter() - start)
                accs.append(float(np.mean(model.predict(x_test) == y_test)))
            cells.append(f"{np.median(accs):.3f}")
            last = model.description_
        rows.append(f"| {name} | {h.size} | " + " | ".join(cells)
                    + f" | {accuracy(h, best, x_test, y_test):.3f} (`{h.describe(best)}`) | "
                    f"{float(np.mean(y_test == majority)):.3f} | "
                    f"{sample_complexity(h.size, 1, ALPHA, BETA):,} | {np.median(secs):.3f} |")
        print(rows[-1], f"(last private choice at ε = {EPSILONS[-1]}: {last})", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    add_flag(ap)
    args = ap.parse_args()
    rows = run(args.trials)
    out = results_dir(args.update_results)
    head = " | ".join(f"ε = {e:g}" for e in EPSILONS)
    text = "\n".join([
        "# The generic private learner on Adult (issue 37, item 1)", "",
        f"`python bench/learn_hypothesis.py --trials {args.trials} --update-results`", "",
        "Kasiviswanathan, Lee, Nissim, Raskhodnikova & Smith, *What can we learn privately?*,",
        "SIAM J. Comput. 2011, §3.1, Thm 3.4: the exponential mechanism over a finite class H,",
        "Pr[h] ∝ exp(−ε·mistakes(h)/2) (`dpkit.learn.PrivateLearner`). Fit on the 32,561 training",
        "rows, scored on the 16,281 held-out test rows (test accuracy; median over "
        f"{args.trials} private fits per cell).",
        "Binary attributes: " + "; ".join(f"x{i}: {b}" for i, b in enumerate(BINARY)) + ".",
        "Numeric stump features (x0 … x3): age, education-num, hours-per-week,",
        "log(1 + capital-gain), on declared grids. ERM: the non-private minimiser of training",
        "mistakes over the same class. n(α = β = 0.05, ε = 1): the theorem's sufficient sample",
        "size with its proof's constants, max{8(ln|H| + ln(4/β))/α², 4(ln|H| + ln(2/β))/(εα)}",
        "(the training split has 32,561 rows). The paper gives no figure.", "",
        f"| class | \\|H\\| | {head} | non-private ERM | majority class | n(α=β=0.05, ε=1) | "
        "fit s (ε = 1) |",
        "|---|---:|" + "---:|" * len(EPSILONS) + "---|---:|---:|---:|",
        *rows, ""])
    (out / "learn_hypothesis.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
