"""Strategy reuse in the matrix mechanism (HDMM): time per release and the error it costs.

    python bench/matrix_reuse.py [--trials 3] [--baseline 1]

For DPBench's random workloads (2,000 queries; 1-D over 4,096 bins, as in
bench/histograms.py, and 2-D rectangles over 256 × 256) this times

- the first release of a new random workload (the strategy cache empty: one search for the
  family's strategy, :mod:`dpkit.release.ranges.matrix`, "Strategy reuse"),
- the releases of ``--trials`` further, held-out workloads of the same family (cache hits),
- ``--baseline`` releases that re-optimise on each workload (``reuse=False``: the behaviour
  before reuse),

and, on each held-out workload, the ratio of the exact expected errors (Li et al. 2010,
Prop. 3: 2(Δ_A/ε)²‖WA⁺‖_F²) of the reused strategy to the strategy optimised on that
workload. The formula is evaluated without dense n × n algebra (the p-Identity form of
:func:`dpkit.release.ranges.matrix.expected_rmse` in 1-D, the factorised rectangle error in
2-D); tests/test_release_matrix.py checks it equals :func:`dpkit.release.measure.
expected_rmse` on dense matrices. Writes bench/results/matrix_reuse.md. The data are
synthetic counts (the timing and the error formula do not depend on them); the workloads
come from a seeded NumPy Generator (benchmark inputs, never noise).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from outdir import add_flag, results_dir

from dpkit.release import release_histogram
from dpkit.release.measure import l1_sensitivity
from dpkit.release.ranges import matrix as mm
from dpkit.release.workload import RangeWorkload, random_ranges, random_rectangles

RESULTS = Path(__file__).parent / "results"
QUERIES = 2000  # DPBench's random range workloads
N_1D, N_2D = 4096, 256


def _release_seconds(x: np.ndarray, workload: RangeWorkload, reuse: bool) -> float:
    t = time.perf_counter()
    release_histogram(x, Fraction(1), "mm", workload=workload, reuse=reuse)
    return time.perf_counter() - t


def _squared_error(workload: RangeWorkload, factors: list[mm.PIdentity]) -> float:
    """Δ_A²‖WA⁺‖_F² of the strategy ⊗ factors on the workload (the expected total squared
    error at ε = √2); Δ_A the exact bound of :func:`l1_sensitivity` per factor."""
    delta = math.prod(float(l1_sensitivity(f.sparse())) for f in factors)
    if len(factors) == 1:
        gram = mm._gram_operator(workload.lo[:, 0], workload.hi[:, 0], workload.shape[0])
        return delta**2 * factors[0].error(gram)
    boxes, counts = np.unique(np.hstack([workload.lo, workload.hi]), axis=0,
                              return_counts=True)
    d = len(factors)
    return delta**2 * mm._rectangle_error([f.theta for f in factors], boxes[:, :d],
                                          boxes[:, d:], counts.astype(np.float64))


def run(shape: tuple[int, ...], trials: int, baseline: int, generator: np.random.Generator
        ) -> dict[str, object]:
    def new_workload() -> RangeWorkload:
        if len(shape) == 1:
            return random_ranges(shape[0], QUERIES, generator)
        return random_rectangles((shape[0], shape[1]), QUERIES, generator)

    x = generator.integers(0, 1000, shape)
    mm.strategy_cache_clear()
    first = _release_seconds(x, new_workload(), True)
    held_out = [new_workload() for _ in range(trials)]
    later = [_release_seconds(x, w, True) for w in held_out]
    hits = mm.strategy_cache_info()["hits"]
    per_workload = [_release_seconds(x, w, False) for w in held_out[:baseline]]
    ratios = []
    for w in held_out:
        reused = _squared_error(w, mm.mm_strategy(shape, w))
        own = _squared_error(w, mm.mm_strategy(shape, w, reuse=False))
        ratios.append(reused / own)
    return {"shape": shape, "first": first, "later": later, "hits": hits,
            "per_workload": per_workload, "ratios": ratios}


def report(rows: list[dict], command: str) -> str:
    lines = ["# Matrix mechanism: strategy reuse by workload structure", "",
             f"Command: `{command}`", "",
             f"Host: {platform.machine()}, {os.cpu_count()} cores (shared), load average "
             f"{os.getloadavg()[0]:.1f}; Python {platform.python_version()}.", "",
             "Random DPBench workloads (2,000 queries, uniform endpoints), ε = 1, default "
             "options (p = 16 per axis). *First*: a new workload with an empty cache (one "
             "search for the family's strategy). *Later*: further held-out workloads of the "
             "family (cache hits, counted). *Re-optimised*: `reuse=False`, a search per "
             "workload (the behaviour before reuse). Error ratio: exact expected squared "
             "error (Li et al. 2010, Prop. 3) of the reused strategy ÷ the strategy "
             "optimised on that workload (RMSE ratio = its square root).", "",
             "| workload | first release (s) | later releases (s, mean / max) | goal | "
             "cache hits | re-optimised per workload (s) | error ratio, squared (mean / "
             "max) | RMSE ratio (max) |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        shape = r["shape"]
        name = (f"1-D ranges, n = {shape[0]:,}" if len(shape) == 1 else
                f"2-D rectangles, {shape[0]}×{shape[1]}")
        goal = "≤ 0.2 s" if len(shape) == 1 else "≤ 1 s"
        later, ratios, base = r["later"], r["ratios"], r["per_workload"]
        ok = "met" if max(later) <= (0.2 if len(shape) == 1 else 1.0) else "NOT met"
        base_txt = " / ".join(f"{b:.1f}" for b in base) if base else "—"
        lines.append(f"| {name} | {r['first']:.2f} | {np.mean(later):.3f} / "
                     f"{max(later):.3f} | {goal} ({ok}) | {r['hits']} | {base_txt} | "
                     f"{np.mean(ratios):.4f} / {max(ratios):.4f} | "
                     f"{math.sqrt(max(ratios)):.4f} |")
    lines += ["", "A ratio below 1 means the search on the workload itself ended in a worse "
              "local optimum than the family strategy (L-BFGS-B from one or two starts).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="held-out workloads per shape")
    parser.add_argument("--baseline", type=int, default=1,
                        help="releases timed with reuse=False (re-optimising) per shape")
    parser.add_argument("--seed", type=int, default=0, help="workload generator seed")
    add_flag(parser)
    args = parser.parse_args()
    generator = np.random.default_rng(args.seed)  # benchmark inputs only
    rows = [run((N_1D,), args.trials, args.baseline, generator),
            run((N_2D, N_2D), args.trials, args.baseline, generator)]
    command = (f"python bench/matrix_reuse.py --trials {args.trials} --baseline "
               f"{args.baseline} --seed {args.seed}")
    text = report(rows, command)
    (results_dir(args.update_results) / "matrix_reuse.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
