"""The jointly DP mediator for a parallel-links congestion game (Kearns, Pai, Roth & Ullman
2014; Rogers & Roth 2014): dpkit.apps.private_equilibrium.

Game (public, fixed before any run, not tuned): m = 4 links with c_ℓ(x) = a_ℓ + b_ℓ·x/n,
a = (1, 1.5, 2, 0.5), b = (2, 1, 0.5, 3); T = 3 types allowed links {0, 1, 2}, {1, 2, 3},
{0, 3}; players' types drawn with shares (0.5, 0.3, 0.2) by NumPy's seeded generator
(benchmark input only). n ∈ {10^3, 10^4, 10^5}, ε ∈ {0.1, 1}, β = 10^-6.

1. Following: over real runs of the API, each player's gain from switching links alone at
   the realised loads (mean over players, max over players) against the published regret
   bound; the average cost per player against the true (noiseless) Wardrop equilibrium's.
2. Truthfulness: for a player of each true type, the expected cost saved by the best
   deviation — any misreport t′ (or the truth) followed by the link of least expected cost
   given the billboard and the others' true counts (an upper bound on what any deviation
   the player can compute saves) — exact over the suggestions (costs are affine, so only
   the others' expected loads matter) and by Monte Carlo over the histogram noise (production draws;
   the same noise for the truth and the lie), against the bound
   (1 − e^{−ε})·C + E[regret bound] + β·C (module docstring), C = max_ℓ (a_ℓ + b_ℓ).

    PYTHONPATH=src python bench/equilibrium.py            # ≈ 30 s
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dpkit.apps.equilibrium import (  # noqa: E402
    DENOMINATOR,
    congestion_game,
    private_equilibrium,
    published_distribution,
    regret,
    regret_bound,
    wardrop_split,
)
from dpkit.mechanisms import make_noise  # noqa: E402

RESULTS = Path(__file__).parent / "results"
GAME = congestion_game([1, 1.5, 2, 0.5], [2, 1, 0.5, 3],
                       [[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 0, 1]])
SHARES = (0.5, 0.3, 0.2)
SIZES = (1_000, 10_000, 100_000)
EPSILONS = (0.1, 1.0)
BETA = 1e-6


def true_equilibrium_cost(counts: np.ndarray, n: int) -> float:
    """Average cost per player at the Wardrop equilibrium of the true counts."""
    loads = wardrop_split(GAME, counts, n).sum(axis=0)
    return float(loads @ GAME.costs(loads, n)) / n


def following(types: np.ndarray, eps: float, runs: int) -> dict:
    n = types.size
    counts = np.bincount(types, minlength=GAME.types)
    means, maxes, bounds, costs = [], [], [], []
    for _ in range(runs):
        result = private_equilibrium(types, GAME, epsilon=eps, beta=BETA)
        gain = regret(GAME, types, result.suggestions)
        load = np.bincount(result.suggestions, minlength=GAME.links)
        means.append(gain.mean())
        maxes.append(gain.max())
        bounds.append(result.regret_bound)
        costs.append(float(load @ GAME.costs(load, n)) / n)
    return {"mean": float(np.mean(means)), "max": float(np.max(maxes)),
            "bound": float(np.mean(bounds)), "bound_min": float(np.min(bounds)),
            "violations": int(np.sum(np.array(maxes) > np.array(bounds))),
            "cost": float(np.mean(costs)), "opt": true_equilibrium_cost(counts, n)}


def expected_costs(numer: np.ndarray, others: np.ndarray, t: int, n: int) -> np.ndarray:
    """E[c_ℓ(L^{−i}_ℓ + 1)] for each link ℓ given the table, the others' true counts."""
    mu = others @ (numer / DENOMINATOR)
    return GAME.costs(mu + 1, n)


def truthfulness(types: np.ndarray, eps: float, draws: int) -> dict:
    """The largest expected saving of a deviation over true types, with its standard error
    (Monte Carlo over the histogram noise)."""
    n = types.size
    counts = np.bincount(types, minlength=GAME.types)
    noise = make_noise(2, epsilon=eps)
    zs = np.asarray(noise(np.zeros(draws * GAME.types, dtype=np.int64))).reshape(draws, -1)
    cache: dict[tuple, np.ndarray] = {}

    def table(reported: np.ndarray) -> np.ndarray:
        key = tuple(np.maximum(reported, 0))
        if key not in cache:
            cache[key] = published_distribution(GAME, reported, n)[0]
        return cache[key]

    best, best_se, extra, bounds = -math.inf, 0.0, -math.inf, []
    for t in range(GAME.types):
        others = counts - np.eye(GAME.types, dtype=np.int64)[t]
        saved = np.zeros((draws, GAME.types))
        for d, z in enumerate(zs):
            truth = table(counts + z)
            follow = float(truth[t] @ expected_costs(truth, others, t, n)) / DENOMINATOR
            if t == 0:
                bounds.append(regret_bound(GAME, truth, counts + z, n, noise.scale, BETA)[1])
            for lie in range(GAME.types):
                numer = table(others + np.eye(GAME.types, dtype=np.int64)[lie] + z)
                reply = expected_costs(numer, others, t, n)[GAME.allowed[t]].min()
                saved[d, lie] = follow - reply
        gains = saved.mean(axis=0)
        lying = saved - saved[:, [t]]  # a misreport's saving beyond the truthful best reply
        extra = max(extra, float(np.max(np.delete(lying.mean(axis=0), t))))
        lie = int(np.argmax(gains))
        if gains[lie] > best:
            best, best_se = float(gains[lie]), float(saved[:, lie].std() / math.sqrt(draws))
    c = GAME.max_cost
    return {"gain": best, "se": best_se, "extra": extra,
            "bound": (1 - math.exp(-eps)) * c + float(np.mean(bounds)) + BETA * c,
            "loose": (math.exp(eps) - 1) * c + float(np.mean(bounds)) + BETA * c}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2014)
    args = parser.parse_args()
    gen = np.random.default_rng(args.seed)
    start = time.perf_counter()
    rows = []
    for n in SIZES:
        types = gen.choice(GAME.types, size=n, p=SHARES)
        for eps in EPSILONS:
            rows.append({"n": n, "eps": eps} | following(types, eps, args.runs)
                        | {"truth": truthfulness(types, eps, args.draws)})
    seconds = time.perf_counter() - start

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for eps, style in zip(EPSILONS, ("-", "--"), strict=True):
        sub = [r for r in rows if r["eps"] == eps]
        ns = [r["n"] for r in sub]
        axes[0].plot(ns, [r["max"] for r in sub], "o" + style, color="C0",
                     label=f"max regret, ε = {eps}")
        axes[0].plot(ns, [r["mean"] for r in sub], "s" + style, color="C2",
                     label=f"mean regret, ε = {eps}")
        axes[0].plot(ns, [r["bound"] for r in sub], "^" + style, color="C3",
                     label=f"published bound, ε = {eps}")
        axes[1].plot(ns, [max(r["truth"]["gain"], 1e-7) for r in sub], "o" + style,
                     color="C0", label=f"best deviation's saving, ε = {eps}")
        axes[1].plot(ns, [r["truth"]["bound"] for r in sub], "^" + style, color="C3",
                     label=f"bound (1 − e^−ε)C + E[R] + βC, ε = {eps}")
    for ax, title in zip(axes, ("regret of following (cost units)",
                                "expected saving from deviating or lying"), strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("players n")
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    fig.savefig(RESULTS / "equilibrium.png", dpi=110)

    lines = ["# Jointly DP mediator for a parallel-links congestion game", "",
             f"`PYTHONPATH=src python bench/equilibrium.py --runs {args.runs} --draws "
             f"{args.draws} --seed {args.seed}` ({seconds:.0f} s). Plot: `equilibrium.png`.",
             "", "Game (public, not tuned): m = 4 links, c(x) = a + b·x/n, a = (1, 1.5, 2, "
             "0.5), b = (2, 1, 0.5, 3); T = 3 types with links {0,1,2}, {1,2,3}, {0,3}, "
             f"shares {SHARES}; C = max(a + b) = {GAME.max_cost}; β = {BETA}.", "",
             "## Following the suggestions", "",
             f"Per (n, ε): {args.runs} real runs of `private_equilibrium` on one type "
             "vector. Regret: a player's gain from switching links alone at the realised "
             "loads (mean over players and runs; max over players and runs). Bound: the "
             "published regret bound (mean over runs, and its smallest value). Cost: average "
             "cost per player, realised vs the true counts' Wardrop equilibrium.", "",
             "| n | ε | mean regret | max regret | bound (mean) | bound (min) | runs over "
             "bound | cost | equilibrium cost | cost ratio |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['eps']} | {r['mean']:.2e} | {r['max']:.2e} | "
                     f"{r['bound']:.3g} | {r['bound_min']:.3g} | {r['violations']} | "
                     f"{r['cost']:.4f} | {r['opt']:.4f} | {r['cost'] / r['opt']:.4f} |")
    lines += ["", "## Approximate truthfulness", "",
              "For a player of each true type: the best deviation's expected saving (any "
              "report, then the link of least expected cost given the billboard *and the "
              "others' true counts* — an upper bound on what a deviation the player can "
              "compute saves), exact over the suggestions, "
              f"Monte Carlo over {args.draws} draws of the histogram noise (common to the "
              "truth and the lie; ± one standard error). Bound: (1 − e^−ε)·C + E[regret "
              "bound] + β·C; the (e^ε − 1)·C form beside it. Lying's extra saving: the best "
              "misreport's expected saving minus that of reporting the truth and then "
              "replying best (negative: lying costs).", "",
              "| n | ε | best saving | ± s.e. | lying's extra saving | bound | (e^ε − 1) form |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        t = r["truth"]
        lines.append(f"| {r['n']} | {r['eps']} | {t['gain']:.2e} | {t['se']:.1e} | "
                     f"{t['extra']:.2e} | {t['bound']:.3g} | {t['loose']:.3g} |")
    (RESULTS / "equilibrium.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
