"""Held-out check of ``method="auto"`` in 2-D: Adult age × hours-per-week (issue 34).

    python bench/auto_adult2d.py            # 10 trials at ε ∈ {0.1, 1}
    python bench/auto_adult2d.py --trials 3

Adult (the shipped training split, 32,561 rows) binned 64 × 64 on the declared domains age
[17, 91) and hours-per-week [1, 100), 1,000 random rectangles per trial (DPBench's 2-D
ranges, a fresh seeded workload per trial), RMSE per query. Prints, per ε, the mean RMSE of
Identity, HDMM and auto over the trials, the ratios auto ÷ Identity and HDMM ÷ Identity, and
which algorithm auto chose (``HistogramRelease.options["chose"]``). Adult was never used to
choose auto's rule or its fallback (DPBench's 2-D shapes were: ``bench/auto_rule.py``).
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from dpkit.datasets import load_adult
from dpkit.release import release_histogram
from dpkit.release.workload import random_rectangles, rmse

SIDE = 64
AGE = (17, 91)
HOURS = (1, 100)


def adult_2d() -> np.ndarray:
    """The 64 × 64 count array of (age, hours-per-week), int64."""
    df = load_adult()
    counts, _, _ = np.histogram2d(df["age"].to_numpy(), df["hours-per-week"].to_numpy(),
                                  bins=SIDE, range=[AGE, HOURS])
    return counts.astype(np.int64)


def run(trials: int, epsilons: list[float]) -> list[str]:
    x = adult_2d()
    lines = [f"Adult age × hours-per-week, {SIDE}×{SIDE}, N = {int(x.sum()):,}, 1,000 random "
             f"rectangles, {trials} trials (RMSE per query)", "",
             "| ε | Identity | HDMM | auto | auto ÷ Identity | HDMM ÷ Identity | auto chose |",
             "|---|---|---|---|---|---|---|"]
    for i, eps in enumerate(epsilons):
        err: dict[str, list[float]] = {"identity": [], "hdmm": [], "auto": []}
        chose: Counter[str] = Counter()
        for t in range(trials):
            w = random_rectangles(x.shape, 1000, np.random.default_rng([i, t]))
            for m in err:
                out = release_histogram(x, eps, m, workload=w)
                err[m].append(rmse(w, x, out.counts))
                if m == "auto":
                    chose[str(out.options.get("chose", "?"))] += 1
        mean = {m: float(np.mean(v)) for m, v in err.items()}
        lines.append(f"| {eps} | {mean['identity']:.1f} | {mean['hdmm']:.1f} | "
                     f"{mean['auto']:.1f} | {mean['auto'] / mean['identity']:.2f} | "
                     f"{mean['hdmm'] / mean['identity']:.2f} | "
                     f"{', '.join(f'{k} ×{n}' for k, n in sorted(chose.items()))} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0])
    a = ap.parse_args()
    print("\n".join(run(a.trials, a.epsilons)))


if __name__ == "__main__":
    main()
