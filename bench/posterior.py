"""One posterior sample (OPS) against Laplace-noised sufficient statistics: Beta–Bernoulli
and Dirichlet–categorical.

Beta–Bernoulli (``--model beta``): for θ ∈ {0.1, 0.3, 0.5}, n ∈ {10, 100, 1000, 10000} and
ε ∈ {0.1, 1}: ``trials`` data sets x ~ Bernoulli(θ)ⁿ (NumPy, seeded: benchmark input only),
each estimated by
- OPS: ``dpkit.apps.posterior.one_posterior_sample`` (uniform prior, a = 0.01, 1024 grid
  points); its expected absolute error is computed exactly from its law on the grid, and one
  real draw per data set is also taken;
- Laplace: the count of ones plus discrete Laplace noise of scale 1/ε (the calibrated entry,
  sensitivity 1), clamped to [0, n], then the Beta(1, 1) posterior mean;
- non-private: the Beta(1, 1) posterior mean.
Reported: mean absolute error |θ̂ − θ| over data sets.

Dirichlet–categorical (``--model dirichlet``): for K ∈ {3, 4}, n ∈ {100, 1000, 10000} and
ε ∈ {0.1, 0.5, 1, 2}: ``trials`` data sets, each with its own θ ~ Dirichlet(1, …, 1)
(synthetic, not tuned: components below the grid's 1/m occur) and x ~ Categorical(θ)ⁿ, each
estimated by
- OPS: ``one_posterior_sample_categorical`` (uniform prior, the default resolution: m = 182
  for K = 3, 48 for K = 4, ≤ 2^14 points); expected error exactly from its law, and one real
  draw per data set;
- Laplace: the K counts plus discrete Laplace noise of scale 2/ε (L1 sensitivity 2 under
  substitution, the calibrated entry), divided by n and projected (Euclidean) onto the
  probability simplex, which normalises it;
- non-private: the Dirichlet(1) posterior mean (n_k + 1)/(n + K).
Reported: mean L1 error Σ_k |θ̂_k − θ_k| over data sets.

Each model writes its own section of ``results/posterior.md`` (the other is kept) and its
own plot.

    PYTHONPATH=src python bench/posterior.py --model beta        # ≈ 5 s
    PYTHONPATH=src python bench/posterior.py --model dirichlet   # ≈ 20 s
"""

from __future__ import annotations

import argparse
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dpkit.apps.posterior import (  # noqa: E402
    beta_bernoulli_grid,
    dirichlet_categorical_grid,
    one_posterior_sample,
    one_posterior_sample_categorical,
    posterior_law,
)
from dpkit.mechanisms import make_noise  # noqa: E402

RESULTS = Path(__file__).parent / "results"
THETAS = (0.1, 0.3, 0.5)
SIZES = (10, 100, 1000, 10_000)
EPSILONS = (0.1, 1.0)
CATEGORIES = (3, 4)
CAT_SIZES = (100, 1000, 10_000)
CAT_EPSILONS = (0.1, 0.5, 1.0, 2.0)


def write_section(lines: list[str]) -> None:
    """Replace (or append) the section of results/posterior.md whose heading is lines[0]."""
    path = RESULTS / "posterior.md"
    text = path.read_text() if path.exists() else ""
    sections = [s for s in ("\n" + text).split("\n# ") if s.strip()]
    sections = ["# " + s.strip("\n") for s in sections]
    new = "\n".join(lines)
    for i, s in enumerate(sections):
        if s.splitlines()[0] == lines[0]:
            sections[i] = new
            break
    else:
        sections.append(new)
    path.write_text("\n\n".join(sections) + "\n")


def save_plot(fig: Any, axes: Any, ylabel: str, name: str) -> None:
    """Log–log panels with legends, saved as results/<name>."""
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    axes[0].set_ylabel(ylabel)
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    fig.savefig(RESULTS / name, dpi=110)


def beta(args: argparse.Namespace) -> None:
    gen = np.random.default_rng(args.seed)
    grid = beta_bernoulli_grid((1, 1), Fraction(1, 100), 1024)
    theta_grid = grid.theta[:, 0]
    start = time.perf_counter()
    rows = []
    for eps in EPSILONS:
        laplace = make_noise(1, epsilon=eps)
        for theta in THETAS:
            for n in SIZES:
                ones = gen.binomial(n, theta, size=args.trials)
                ops_exact = np.mean([posterior_law(grid, (int(s), n - int(s)), eps)
                                     @ np.abs(theta_grid - theta) for s in ones])
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
        ax.set_xlabel("n")
        ax.set_title(f"Beta–Bernoulli, θ = 0.3, ε = {eps}")
    save_plot(fig, axes, "mean |θ̂ − θ|", "posterior.png")

    lines = ["# One posterior sample vs Laplace-noised sufficient statistics (Beta–Bernoulli)",
             "", f"`PYTHONPATH=src python bench/posterior.py --model beta --trials {args.trials}"
             f" --seed {args.seed}` ({seconds:.0f} s). Plot: `posterior.png`. Mean |θ̂ − θ| "
             f"over {args.trials} data sets; OPS on 1024 grid points in [0.01, 0.99], uniform "
             "prior (exact expectation under its law, and one real draw per data set).", "",
             "| ε | θ | n | OPS (exact) | OPS (draws) | Laplace count → posterior mean | "
             "non-private posterior mean |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['eps']} | {r['theta']} | {r['n']} | {r['ops']:.4f} | "
                     f"{r['ops_draws']:.4f} | {r['laplace']:.4f} | {r['nonprivate']:.4f} |")
    write_section(lines)
    print("\n".join(lines))


def simplex_projection(v: np.ndarray) -> np.ndarray:
    """The Euclidean projection of each row of v onto the probability simplex (sort-based;
    Held, Wolfe & Crowder 1974; Duchi et al. 2008)."""
    u = -np.sort(-v, axis=1)
    cumulative = np.cumsum(u, axis=1) - 1
    steps = np.arange(1, v.shape[1] + 1)
    rho = np.count_nonzero(u - cumulative / steps > 0, axis=1)
    tau = cumulative[np.arange(v.shape[0]), rho - 1] / rho
    return np.maximum(v - tau[:, None], 0)


def dirichlet(args: argparse.Namespace) -> None:
    gen = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = []
    for k in CATEGORIES:
        grid = dirichlet_categorical_grid(k)
        m = int(round(1 / grid.theta.min()))
        for n in CAT_SIZES:
            thetas = gen.dirichlet(np.ones(k), size=args.trials)
            counts = np.array([gen.multinomial(n, t) for t in thetas])
            grid_err = np.abs(grid.theta[None, :, :] - thetas[:, None, :]).sum(axis=2)
            nonprivate = (counts + 1) / (n + k)
            for eps in CAT_EPSILONS:
                laplace = make_noise(2, epsilon=eps)
                ops_exact = np.mean([posterior_law(grid, c.tolist(), eps) @ e
                                     for c, e in zip(counts, grid_err, strict=True)])
                ops_draws = np.mean([np.abs(one_posterior_sample_categorical(
                    np.repeat(np.arange(k), c), epsilon=eps, categories=k) - t).sum()
                    for c, t in zip(counts, thetas, strict=True)])
                noisy = np.asarray(laplace(counts.reshape(-1).astype(np.int64))).reshape(
                    counts.shape)
                lap = np.abs(simplex_projection(noisy / n) - thetas).sum(axis=1).mean()
                rows.append({"eps": eps, "k": k, "m": m, "points": grid.theta.shape[0],
                             "n": n, "ops": float(ops_exact), "ops_draws": float(ops_draws),
                             "laplace": float(lap), "nonprivate": float(
                                 np.abs(nonprivate - thetas).sum(axis=1).mean())})
    seconds = time.perf_counter() - start

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    colours = dict(zip(CAT_SIZES, ("C0", "C1", "C2"), strict=True))
    for ax, k in zip(axes, CATEGORIES, strict=True):
        for n in CAT_SIZES:
            sel = [r for r in rows if r["k"] == k and r["n"] == n]
            eps = [r["eps"] for r in sel]
            ax.plot(eps, [r["ops"] for r in sel], "-o", color=colours[n], label=f"OPS, n={n}")
            ax.plot(eps, [r["laplace"] for r in sel], "--s", color=colours[n],
                    label=f"Laplace, n={n}")
        ax.set_xlabel("ε")
        ax.set_title(f"Dirichlet–categorical, K = {k} (m = {sel[0]['m']})")
    save_plot(fig, axes, "mean Σ|θ̂ₖ − θₖ|", "posterior_dirichlet.png")

    lines = ["# One posterior sample vs Laplace-noised sufficient statistics "
             "(Dirichlet–categorical)", "",
             f"`PYTHONPATH=src python bench/posterior.py --model dirichlet --trials "
             f"{args.trials} --seed {args.seed}` ({seconds:.0f} s). Plot: "
             f"`posterior_dirichlet.png`. Mean L1 error Σₖ|θ̂ₖ − θₖ| over {args.trials} data "
             "sets, each with its own θ ~ Dirichlet(1, …, 1); OPS on the default grid θ = c/m "
             "(c_k ≥ 1), uniform prior (exact expectation under its law, and one real draw per "
             "data set); Laplace: counts + discrete Laplace of scale 2/ε, divided by n, "
             "projected onto the simplex.", "",
             "| ε | K | m (points) | n | OPS (exact) | OPS (draws) | Laplace counts → simplex | "
             "non-private posterior mean |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r["eps"], r["k"], r["n"])):
        lines.append(f"| {r['eps']} | {r['k']} | {r['m']} ({r['points']}) | {r['n']} | "
                     f"{r['ops']:.4f} | {r['ops_draws']:.4f} | {r['laplace']:.4f} | "
                     f"{r['nonprivate']:.4f} |")
    write_section(lines)
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", choices=("beta", "dirichlet", "all"), default="all")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=2014)
    args = parser.parse_args()
    if args.model in ("beta", "all"):
        beta(args)
    if args.model in ("dirichlet", "all"):
        dirichlet(args)


if __name__ == "__main__":
    main()
