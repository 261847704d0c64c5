"""Halfspace counting on UCI Adult: every route of ``answer_halfspaces`` against the rate of
Muthukrishnan & Nikolov's (STOC 2012) lower bound (issue 37, item 2).

    python bench/halfspaces.py                    # bench/out/halfspaces.md
    python bench/halfspaces.py --update-results   # bench/results/halfspaces.md

Data: Adult (train + test, 48,842 rows), age (d = 1) and age × hours-per-week (d = 2), each
scaled by the declared bounds (0, 100) to [0, 1] and rounded to a grid of 64 points (1-D) or
16 × 16 points (2-D) (:func:`~dpkit.release.ranges.halfspaces.grid_counts`). Subsamples of n
rows without replacement (a NumPy generator: benchmark inputs, never noise). Queries: every
halfspace through grid points (``HalfspaceFamily.through_grid_points``: 127 in 1-D, 29,889
in 2-D). ε = 1 (pure DP) for every route, one debit each.

Routes: ``laplace`` (discrete Laplace on the k answers, scale Δ/ε with Δ the family's L1
sensitivity), ``identity`` / ``hierarchical`` (HB in 1-D, quadtree in 2-D) / ``privelet`` (a
histogram release, queries summed from it), ``pmw`` (private multiplicative weights over
the grid, queries in the family's order; c = 10 measured answers and α = ⌈4c·ln(2k)/ε⌉
records, a rule of ε and k only). Nothing was tuned on Adult: every default was fixed before
the first run, so all of Adult is held out.

Error: |answer − exact| over the k queries, the maximum, the mean and the root mean square
(the paper's measure), averaged over
``--reps`` draws (subsample and noise). Reference: the paper's bound is Ω(n^{1−1/d}) on the
*average squared* error where n = |P| is the number of point locations (here the grid's
points) — the root-mean-square rate n^{1/2−1/(2d)} is shown at n = |P| (constant across the
rows of a grid) and, for comparison only, at n = records. The abstract gives no constant and
hides the ε, δ dependence, so these are rates, not bounds.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from outdir import add_flag, results_dir  # noqa: E402

from dpkit.datasets import load_adult  # noqa: E402
from dpkit.release.ranges.halfspaces import (  # noqa: E402
    METHODS,
    HalfspaceFamily,
    answer_halfspaces,
    discrepancy_rate,
    grid_counts,
)

EPSILON = 1
SIZES = (500, 2_000, 8_000, 32_000, 48_842)
SETUPS = {1: (("age",), (64,)), 2: (("age", "hours-per-week"), (16, 16))}
BOUNDS = (0, 100)
UPDATES = 10


def pmw_options(k: int) -> dict[str, int]:
    """PMW's c and α from ε and k only (module docstring)."""
    return {"max_updates": UPDATES, "alpha": math.ceil(4 * UPDATES * math.log(2 * k) / EPSILON)}


def run(d: int, reps: int, gen: np.random.Generator) -> list[str]:
    columns, shape = SETUPS[d]
    table = load_adult("all").select(columns).to_numpy().astype(np.float64)
    family = HalfspaceFamily.through_grid_points(shape)
    cells = family.cells
    lines = [f"## d = {d}: {' × '.join(columns)} on a {' × '.join(map(str, shape))} grid "
             f"(|P| = {cells} points, k = {family.k} halfspaces, Δ = {family.sensitivity()})",
             "", f"M&N rate at n = |P|: |P|^{{1/2−1/(2d)}} = {discrepancy_rate(cells, d):.2f}",
             "", "| n (records) | route | max error | mean error | RMS error | rate at n records "
             "| seconds |", "|---:|---|---:|---:|---:|---:|---:|"]
    for n in SIZES:
        for method in METHODS:
            maxes, means, rms, start = [], [], [], time.perf_counter()
            for _ in range(reps):
                rows = table[gen.choice(len(table), size=n, replace=False)]
                counts = grid_counts(rows, (BOUNDS,) * d, shape)
                options = pmw_options(family.k) if method == "pmw" else {}
                out = answer_halfspaces(counts, family, EPSILON, method, **options)
                err = np.abs(out.answers - family.answer(counts))
                maxes.append(float(err.max()))
                means.append(float(err.mean()))
                rms.append(float(np.sqrt(np.mean(err ** 2))))
            seconds = (time.perf_counter() - start) / reps
            lines.append(f"| {n:,} | {method} | {np.mean(maxes):,.1f} | {np.mean(means):,.1f} "
                         f"| {np.mean(rms):,.1f} | {discrepancy_rate(n, d):.2f} | {seconds:.3f} |")
    return lines + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    add_flag(ap)
    args = ap.parse_args()
    gen = np.random.default_rng(2012)  # subsamples only (benchmark inputs)
    lines = ["# Halfspace counting on Adult (ε = 1)", "",
             "Written by `python bench/halfspaces.py --update-results` "
             f"({args.reps} draws per row; errors in records, averaged over the draws).", ""]
    for d in (1, 2):
        lines += run(d, args.reps, gen)
    lines += [
        "Reading: the paper's n is |P|, the number of point locations; its lower bound is on",
        "the root-mean-square error over the halfspaces and hides its constant, ε and δ, so",
        "the rate columns say how the best possible error grows, not where it lies. In 1-D the",
        "rate is 1 (thresholds: a hierarchical release is polylogarithmic); in 2-D it is",
        "|P|^{1/4}.", ""]
    out = results_dir(args.update_results)
    (out / "halfspaces.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
