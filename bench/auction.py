"""The digital-goods auction by the exponential mechanism (McSherry & Talwar, FOCS 2007).

1. Revenue: for four bid distributions, n bidders and ε ∈ {0.1, 1}, the expected revenue of
   dpkit.apps.digital_goods_auction (exactly, from the price's law; and the mean of real
   runs of the API) against the best fixed price over all prices (OPT) and over the grid of
   100 prices (OPT_P), with the guarantee E[Rev] ≥ OPT_P − (Δ/ε)(ln |P| + 1).
2. Approximate truthfulness: for bidders with random values among n − 1 others, the best
   misreport's expected utility over the truthful one (exact law; and a Monte Carlo check
   with the production sampler), against the bound e^ε.

Bids are drawn with NumPy's seeded generator (benchmark input only).

    PYTHONPATH=src python bench/auction.py            # ≈ 30 s
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

from dpkit.apps.auction import (  # noqa: E402
    digital_goods_auction,
    price_distribution,
    price_grid,
    revenue_scores,
)
from dpkit.mechanisms import make_selection  # noqa: E402
from dpkit.mechanisms.exponential import sample_exponential  # noqa: E402

RESULTS = Path(__file__).parent / "results"
PRICES = price_grid(1, 100)
GRID = np.array([float(p) for p in PRICES])
EPSILONS = (0.1, 1.0)
SIZES = (100, 1000, 10_000)


def bids(gen: np.random.Generator, name: str, n: int) -> np.ndarray:
    if name == "uniform":
        return gen.uniform(0, 1, n)
    if name == "beta(2,5)":
        return gen.beta(2, 5, n)
    if name == "bimodal":
        high = gen.random(n) < 0.3
        return np.where(high, gen.uniform(0.8, 1, n), gen.uniform(0, 0.2, n))
    # equal revenue on [0.05, 1]: P(b ≥ x) = 0.05/x, every price in range earns the same
    return np.minimum(0.05 / gen.uniform(0.05, 1, n), 1.0)


def opt_any(b: np.ndarray) -> float:
    s = np.sort(b)
    return float(np.max(s * (s.size - np.arange(s.size))))


def revenue_table(gen: np.random.Generator, runs: int) -> list[dict]:
    rows = []
    for dist in ("uniform", "beta(2,5)", "bimodal", "equal revenue"):
        for n in SIZES:
            b = bids(gen, dist, n)
            rev = np.array([float(r) for r in revenue_scores(b, PRICES)])
            for eps in EPSILONS:
                _, law = price_distribution(b, epsilon=eps, prices=PRICES)
                real = [digital_goods_auction(b, epsilon=eps, prices=PRICES).revenue
                        for _ in range(runs)]
                bound = rev.max() - (1 / eps) * (math.log(len(PRICES)) + 1)
                rows.append({"dist": dist, "n": n, "eps": eps, "opt": opt_any(b),
                             "opt_p": rev.max(), "expected": float(law @ rev),
                             "runs": float(np.mean(real)), "bound": bound})
    return rows


def utility(law: np.ndarray, value: float, report: float) -> float:
    return float(np.sum(law * (value - GRID) * (report >= GRID)))


def truthfulness(gen: np.random.Generator, bidders: int, draws: int) -> list[dict]:
    """Per ε: the largest ratio E[u(best lie)] / E[u(truth)] over bidders (exact), and the
    production sampler's estimate for the worst bidder."""
    reports = np.linspace(0, 1, 101)
    out = []
    for eps in EPSILONS:
        scale = make_selection(PRICES[-1], eps, monotonic=True).scale
        worst = (0.0, 0.0, None)
        for _ in range(bidders):
            others = bids(gen, "uniform", 99)
            value = float(gen.uniform(0.2, 1))

            def law(report: float, others: np.ndarray = others, eps: float = eps) -> np.ndarray:
                return price_distribution(np.append(others, report), epsilon=eps,
                                          prices=PRICES)[1]

            truth = utility(law(value), value, value)
            gains = [utility(law(r), value, r) / truth for r in reports]
            best = int(np.argmax(gains))
            if gains[best] > worst[0]:
                worst = (gains[best], value, (others, float(reports[best])))
        ratio, value, (others, lie) = worst

        def sampled(report: float, value: float = value, others: np.ndarray = others,
                    scale: object = scale) -> float:
            scores = revenue_scores(np.append(others, report), PRICES)
            p = GRID[np.asarray(sample_exponential(scores, scale, size=draws))]
            return float(np.mean((value - p) * (report >= p)))

        out.append({"eps": eps, "exact": ratio, "sampled": sampled(lie) / sampled(value),
                    "value": value, "lie": lie, "bound": math.exp(eps)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--bidders", type=int, default=30)
    parser.add_argument("--draws", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=2007)
    args = parser.parse_args()
    gen = np.random.default_rng(args.seed)
    start = time.perf_counter()
    table = revenue_table(gen, args.runs)
    truth = truthfulness(gen, args.bidders, args.draws)
    seconds = time.perf_counter() - start

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for eps, ax in zip(EPSILONS, axes, strict=True):
        for dist in ("uniform", "beta(2,5)", "bimodal", "equal revenue"):
            rows = [r for r in table if r["dist"] == dist and r["eps"] == eps]
            ax.plot([r["n"] for r in rows], [r["expected"] / r["opt"] for r in rows], "-o",
                    label=dist)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("bidders n")
        ax.set_ylabel("E[revenue] / best fixed price's revenue")
        ax.set_title(f"exponential-mechanism auction, ε = {eps}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    fig.savefig(RESULTS / "auction.png", dpi=110)

    lines = ["# Digital-goods auction by the exponential mechanism (McSherry & Talwar 2007)",
             "", f"`PYTHONPATH=src python bench/auction.py --runs {args.runs} --bidders "
             f"{args.bidders} --draws {args.draws} --seed {args.seed}` ({seconds:.0f} s). "
             "Plot: `auction.png`.", "",
             f"Prices: {len(PRICES)} evenly spaced in (0, 1]; bids in [0, 1]. OPT: the best "
             "single price over all prices; OPT_P: over the grid; E[Rev]: exact expectation "
             f"under the price's law; runs: mean of {args.runs} real auctions; guarantee: "
             "OPT_P − (Δ/ε)(ln|P| + 1).", "",
             "| bids | n | ε | OPT | OPT_P | E[Rev] | runs | E[Rev]/OPT | guarantee |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        lines.append(f"| {r['dist']} | {r['n']} | {r['eps']} | {r['opt']:.1f} | "
                     f"{r['opt_p']:.1f} | {r['expected']:.1f} | {r['runs']:.1f} | "
                     f"{r['expected'] / r['opt']:.3f} | {r['bound']:.1f} |")
    lines += ["", f"## Approximate truthfulness ({args.bidders} bidders with values in "
              "[0.2, 1] among 99 uniform bids; 101 candidate reports each)", "",
              "| ε | worst E[u(lie)]/E[u(truth)], exact | same, production sampler "
              f"({args.draws} draws each) | e^ε |", "|---:|---:|---:|---:|"]
    for t in truth:
        lines.append(f"| {t['eps']} | {t['exact']:.4f} | {t['sampled']:.4f} | "
                     f"{t['bound']:.4f} |")
    (RESULTS / "auction.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
