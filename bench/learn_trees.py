"""dpkit.learn.DecisionTreeClassifier on UCI Adult: DiffP-C4.5, DiffP-ID3 (Friedman &
Schuster 2010) and SuLQ ID3 (Blum et al. 2005) at ε ∈ {0.1, 1}, published train/test split.

    python bench/learn_trees.py [--trials 10]

Features: the 5 numeric columns with the UCI documentation's ranges as declared bounds
(capital-gain and capital-loss as log(1 + x), a public transform, so that the grid of
candidate thresholds is not all below the few large gains) and the 8 categorical columns
(workclass, education, marital-status, occupation, relationship, race, sex, native-country)
as codes, missing values as their own code "?". The category lists are read off the data
here (a benchmark input; UCI publishes them). Label: income > 50K.

Settings, chosen by reasoning, not on the test split: D = 4 (the budget is split over
D + 1 levels; Adult's strong signals — marital status/relationship, capital gain, education
— need two or three levels), G = 16 grid cells per numeric feature. A check on the last
8000 rows of the training split (never the test split) put D ∈ {3, 4, 5} within about a
point of each other for every method.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpkit.datasets import load_adult
from dpkit.learn import DecisionTreeClassifier

NUMERIC = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
CATEGORICAL = ["workclass", "education", "marital-status", "occupation", "relationship",
               "race", "sex", "native-country"]
LOWER = np.array([17, 1, 0, 0, 1], dtype=float)
UPPER = np.array([90, 16, 99999, 4356, 99], dtype=float)
EPSILONS = (0.1, 1.0)
METHODS = {"diffp_c45": 4, "diffp_id3": 4, "sulq_id3": 4}  # method → max_depth


def arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[int, int],
                      tuple[np.ndarray, np.ndarray]]:
    """Encoded train/test features and labels, the categorical declaration and bounds."""
    full = load_adult("all")
    levels = {c: sorted(full[c].fill_null("?").unique().to_list()) for c in CATEGORICAL}

    def encode(df):
        cols = [df[c].to_numpy().astype(float) for c in NUMERIC]
        cols[2], cols[3] = np.log1p(cols[2]), np.log1p(cols[3])
        for c in CATEGORICAL:
            lookup = {v: i for i, v in enumerate(levels[c])}
            cols.append(np.array([lookup[v] for v in df[c].fill_null("?").to_list()], float))
        return np.column_stack(cols)

    tr, te = load_adult("train"), load_adult("test")
    y = (tr["income"].to_numpy() == ">50K").astype(int)
    yt = (te["income"].to_numpy() == ">50K").astype(int)
    d = len(NUMERIC)
    categorical = {d + i: len(levels[c]) for i, c in enumerate(CATEGORICAL)}
    lower = np.concatenate([LOWER[:2], np.log1p(LOWER[2:4]), LOWER[4:],
                            np.zeros(len(CATEGORICAL))])
    upper = np.concatenate([UPPER[:2], np.log1p(UPPER[2:4]), UPPER[4:],
                            [len(levels[c]) - 1 for c in CATEGORICAL]])
    return encode(tr), y, encode(te), yt, categorical, (lower, upper)


def run_trees(trials: int) -> list[dict]:
    """One row per (method, ε, trial): accuracy on the test split and fit+predict seconds."""
    x, y, xt, yt, categorical, bounds = arrays()
    rows = []
    for trial in range(trials):
        for method, depth in METHODS.items():
            for eps in EPSILONS:
                t0 = time.perf_counter()
                model = DecisionTreeClassifier(eps, depth, method, bounds=bounds,
                                               classes=[0, 1], categorical=categorical)
                pred = model.fit(x, y).predict(xt)
                rows.append({"system": "dpkit", "model": f"DecisionTree ({method})",
                             "epsilon": eps, "trial": trial,
                             "seconds": time.perf_counter() - t0,
                             "accuracy": float((pred == yt).mean())})
    return rows


def summary(rows: list[dict]) -> str:
    lines = ["| model | ε | mean accuracy | min accuracy | mean seconds |",
             "|---|---|---|---|---|"]
    for key in dict.fromkeys((r["model"], r["epsilon"]) for r in rows):
        sel = [r for r in rows if (r["model"], r["epsilon"]) == key]
        acc = np.array([r["accuracy"] for r in sel])
        sec = np.mean([r["seconds"] for r in sel])
        lines.append(f"| {key[0]} | {key[1]:g} | {acc.mean():.2%} | {acc.min():.2%} | "
                     f"{sec:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    result = run_trees(args.trials)
    print(summary(result))
    yt = arrays()[3]
    print(f"\nMajority class on the test split: {max(yt.mean(), 1 - yt.mean()):.2%}.")
