"""Private k-means on UCI Adult's numeric columns (issue 36, item 5): dpkit's KMeans on a
private coreset (Feldman, Xiang, Zhu & Rus, IPSN 2017) and by sample and aggregate with the
centre of attention (Nissim, Raskhodnikova & Smith, STOC 2007, §4), beside dpkit's default
KMeans, the deprecated matched-mean aggregator, non-private scikit-learn and two trivial
baselines, at the same budget, in one run.

    python bench/learn_kmeans_coreset.py [--trials 5] [--update-results]

Rows: UCI's published split (:func:`dpkit.datasets.load_adult`): fit on the 32,561 training
rows, k-means cost measured on the 16,281 test rows (held out; no default of any method was
chosen on Adult, and nothing is tuned here: every dpkit method runs at its defaults).

Columns (d = 5): age, education-num, log(1 + capital-gain), log(1 + capital-loss),
hours-per-week, each scaled to [0, 1] by its UCI range (declared: [17, 90], [1, 16],
[0, ln 100000], [0, ln 4357], [1, 99]); every private method gets bounds (0, 1). k = 5.

Systems: dpkit KMeans default (``method="lloyd"``, ``init="auto"``: ε-DP); ``"coreset"``
(ε-DP, L = 3 levels, 4096 cells a level); ``"sample_and_aggregate"`` with δ = 10^-6 (the
centre of attention, (ε, δ)-DP, m = 1000 blocks); the same without δ (the deprecated matched
mean, ε-DP); the trivial baselines: k centres at the ε-DP mean (dpkit KMeans with one
cluster and one iteration, repeated k times) and k centres uniform in the box (data-free);
scikit-learn KMeans (non-private, k-means++, n_init 10). Cells: the median over the trials
(fresh noise each; nothing is seeded) of the held-out cost per row (mean squared distance
to the nearest centre, in the scaled units), and in parentheses its ratio to scikit-learn's.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans as PlainKMeans

from dpkit.core.rng import uniforms
from dpkit.datasets import load_adult
from dpkit.learn import KMeans

RESULTS = Path(__file__).parent / "results" / "learn_kmeans_coreset.md"
EPSILONS = (0.5, 1, 2, 5)
K, DELTA = 5, 1e-6
COLUMNS = {"age": (17, 90, False), "education-num": (1, 16, False),
           "capital-gain": (0, math.log(100_000), True),
           "capital-loss": (0, math.log(4357), True), "hours-per-week": (1, 99, False)}


def features(split: str) -> np.ndarray:
    frame = load_adult(split)
    cols = []
    for name, (low, high, log) in COLUMNS.items():
        x = frame[name].to_numpy().astype(float)
        x = np.log1p(x) if log else x
        cols.append(np.clip((x - low) / (high - low), 0, 1))
    return np.stack(cols, axis=1)


def cost(x: np.ndarray, centres: np.ndarray) -> float:
    d = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return float(d.min(axis=1).mean())


def systems(eps: float) -> dict[str, object]:
    box = (0, 1)
    return {
        "dpkit default (lloyd)": lambda x: KMeans(K, eps, bounds=box).fit(x).cluster_centers_,
        "dpkit coreset": lambda x: KMeans(K, eps, bounds=box, method="coreset")
        .fit(x).cluster_centers_,
        "dpkit centre of attention (δ=1e-6)": lambda x: KMeans(
            K, eps, bounds=box, method="sample_and_aggregate", delta=DELTA)
        .fit(x).cluster_centers_,
        "dpkit matched mean (deprecated)": lambda x: KMeans(
            K, eps, bounds=box, method="sample_and_aggregate").fit(x).cluster_centers_,
        "trivial: private mean ×k": lambda x: np.repeat(KMeans(
            1, eps, bounds=box, max_iter=1, init="random").fit(x).cluster_centers_, K, 0),
        "trivial: random centres": lambda x: uniforms(K * x.shape[1]).reshape(K, -1),
    }


def run(trials: int) -> str:
    train, test = features("train"), features("test")
    plain = statistics.median(cost(test, PlainKMeans(K, n_init=10).fit(train).cluster_centers_)
                              for _ in range(trials))
    names = list(systems(1))
    table: dict[str, list[str]] = {n: [] for n in names}
    seconds: dict[str, list[float]] = {n: [] for n in names}
    for eps in EPSILONS:
        for name, fit in systems(eps).items():
            values = []
            for _ in range(trials):
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    centres = np.asarray(fit(train))  # type: ignore[operator]
                seconds[name].append(time.perf_counter() - start)
                values.append(cost(test, centres))
            med = statistics.median(values)
            table[name].append(f"{med:.4f} ({med / plain:.2f}×)")
    lines = ["| method | " + " | ".join(f"ε = {e}" for e in EPSILONS) + " | fit s |",
             "|---" * (len(EPSILONS) + 2) + "|"]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(table[name])
                     + f" | {statistics.median(seconds[name]):.2f} |")
    lines.append(f"| scikit-learn KMeans (non-private) | {plain:.4f} (1.00×) "
                 + "| ″ " * (len(EPSILONS) - 1) + "| |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--update-results", action="store_true")
    args = parser.parse_args()
    table = run(args.trials)
    header = ("# Private k-means on Adult: coreset and centre of attention\n\n"
              f"`python bench/learn_kmeans_coreset.py --trials {args.trials} --update-results`"
              "\n\nHeld-out k-means cost per row on Adult's 16,281 test rows (5 numeric "
              "columns scaled to [0, 1] by their UCI ranges; k = 5; fit on the 32,561 "
              f"training rows); median of {args.trials} trials, ratio to scikit-learn's "
              "non-private cost in parentheses. See the script's docstring for the "
              "systems.\n\n")
    text = header + table + "\n"
    print(text)
    if args.update_results:
        RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
