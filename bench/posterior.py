"""One posterior sample (OPS) against Laplace-noised sufficient statistics, Beta–Bernoulli.

For θ ∈ {0.1, 0.3, 0.5}, n ∈ {10, 100, 1000, 10000} and ε ∈ {0.1, 1}: ``trials`` data sets
x ~ Bernoulli(θ)ⁿ (NumPy, seeded: benchmark input only), each estimated by
- OPS: ``dpkit.apps.posterior.one_posterior_sample`` (uniform prior, a = 0.01, 1024 grid
  points); its expected absolute error is computed exactly from its law on the grid, and one
  real draw per data set is also taken;
- Laplace: the count of ones plus discrete Laplace noise of scale 1/ε (the calibrated entry,
  sensitivity 1), clamped to [0, n], then the Beta(1, 1) posterior mean;
- non-private: the Beta(1, 1) posterior mean.
Reported: mean absolute error |θ̂ − θ| over data sets.

    PYTHONPATH=src python bench/posterior.py            # ≈ 1 minute
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dpkit.apps.posterior import (  # noqa: E402
    beta_bernoulli_grid,
    one_posterior_sample,
    posterior_law,
)
from dpkit.mechanisms import make_noise  # noqa: E402

RESULTS = Path(__file__).parent / "results"
THETAS = (0.1, 0.3, 0.5)
SIZES = (10, 100, 1000, 10_000)
EPSILONS = (0.1, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=2014)
    args = parser.parse_args()
    gen = np.random.default_rng(args.seed)
    grid = beta_bernoulli_grid((1, 1), Fraction(1, 100), 1024)
    start = time.perf_counter()
    rows = []
    for eps in EPSILONS:
        laplace = make_noise(1, epsilon=eps)
        for theta in THETAS:
            for n in SIZES:
                ones = gen.binomial(n, theta, size=args.trials)
                ops_exact = np.mean([posterior_law(grid, int(s), n, eps)
                                     @ np.abs(grid.theta - theta) for s in ones])
                ops_draws = np.mean([abs(one_posterior_sample(
                    np.r_[np.ones(s), np.zeros(n - s)], epsilon=eps) - theta) for s in ones])
                noisy = np.clip(np.asarray(laplace(ones.astype(np.int64))), 0, n)
                lap = np.mean(np.abs((1 + noisy) / (2 + n) - theta))
                exact = np.mean(np.abs((1 + ones) / (2 + n) - theta))
                rows.append({"eps": eps, "theta": theta, "n": n, "ops": float(ops_exact),
                             "ops_draws": float(ops_draws), "laplace": float(lap),
                             "nonprivate": float(exact)})
    seconds = time.perf_counter() - start

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, eps in zip(axes, EPSILONS, strict=True):
        for key, style in (("ops", "-o"), ("laplace", "-s"), ("nonprivate", "--")):
            sel = [r for r in rows if r["eps"] == eps and r["theta"] == 0.3]
            ax.plot([r["n"] for r in sel], [r[key] for r in sel], style, label=key)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n")
        ax.set_title(f"Beta–Bernoulli, θ = 0.3, ε = {eps}")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("mean |θ̂ − θ|")
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    fig.savefig(RESULTS / "posterior.png", dpi=110)

    lines = ["# One posterior sample vs Laplace-noised sufficient statistics (Beta–Bernoulli)",
             "", f"`PYTHONPATH=src python bench/posterior.py --trials {args.trials} --seed "
             f"{args.seed}` ({seconds:.0f} s). Plot: `posterior.png`. Mean |θ̂ − θ| over "
             f"{args.trials} data sets; OPS on 1024 grid points in [0.01, 0.99], uniform prior "
             "(exact expectation under its law, and one real draw per data set).", "",
             "| ε | θ | n | OPS (exact) | OPS (draws) | Laplace count → posterior mean | "
             "non-private posterior mean |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['eps']} | {r['theta']} | {r['n']} | {r['ops']:.4f} | "
                     f"{r['ops_draws']:.4f} | {r['laplace']:.4f} | {r['nonprivate']:.4f} |")
    (RESULTS / "posterior.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
