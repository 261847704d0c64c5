"""Pufferfish privacy for a correlated daily series: the Markov quilt mechanism (Song, Wang
& Chaudhuri, SIGMOD 2017) against group DP and naive per-day DP on UCI Bike Sharing.

Data: ``shared/data_new/bike_sharing_uci/day.csv`` (731 days, 2011–2012, CC BY 4.0).
Year 1 (2011, 365 days) is the held-out public year: it fixes the state space and Θ.
Year 2 (2012, 366 days) is released. Nothing is tuned on year 2 (W = 16 and the class
below were fixed before it was read).

Series (states 0…k − 1):
- ``weathersit``: 1 clear, 2 mist, 3 light rain/snow (4 never occurs) → k = 3;
- ``temp``: normalised temperature in 4 bins at year 1's quartiles → k = 4.

Θ: the year-1 estimate P̂ (transition counts + 1, rows normalised), and two chains around
it: 0.9·P̂ + 0.1·I (more persistent) and 0.9·P̂ + 0.1·J/k (less); each rounded to a grid
of 1/1000 with every entry ≥ 1/1000 and rows summing to 1; q = year 1's state frequencies
(+1, same rounding).

Released: the histogram of year 2's states (L = 2 per day), reported as frequencies.
Scales per count: MQMExact σ_max and MQMApprox (``dpkit.apps.correlated.quilt_scale``),
group DP over the whole series (one unit of T days: 2T/ε) and naive per-day DP (2/ε,
which does not protect a day that its neighbours predict: no Pufferfish guarantee). Error:
mean over ``--trials`` releases of the L1 error of the frequency vector, noise drawn through
the calibrated entry at each scale (one real ``markov_quilt_release`` per cell too).

The paper (§6) reports, on its physical-activity and electricity data, that MQMExact and
MQMApprox add far less noise than GroupDP and that MQMExact ≤ MQMApprox; its values are
on other data and are not reproduced here.

    PYTHONPATH=src python bench/pufferfish.py --update-results   # ≈ 10 s
"""

from __future__ import annotations

import argparse
import csv
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from outdir import HERE, add_flag, require, results_dir

from dpkit.apps.correlated import (
    MarkovClass,
    markov_class,
    markov_quilt_release,
    mixing_rates,
    quilt_scale,
)
from dpkit.core.measures import PureDP
from dpkit.mechanisms import frontend

# shared/data_new beside the checkout, or beside its parent for a worktree
DATA = next((b / "shared" / "data_new" / "bike_sharing_uci" / "day.csv"
             for b in (HERE.parent.parent, HERE.parent.parent.parent)
             if (b / "shared" / "data_new").exists()),
            HERE.parent.parent / "shared" / "data_new" / "bike_sharing_uci" / "day.csv")
EPSILONS = (Fraction(1, 10), Fraction(1, 2), Fraction(1), Fraction(2))
GRID = 1000
WIDTH = 16


def load(path: Path) -> dict[str, list[dict[str, str]]]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {"1": [r for r in rows if r["yr"] == "0"], "2": [r for r in rows if r["yr"] == "1"]}


def series(years: dict[str, list[dict[str, str]]], name: str) -> tuple[np.ndarray, np.ndarray, int]:
    if name == "weathersit":
        y1 = np.array([int(r["weathersit"]) - 1 for r in years["1"]])
        y2 = np.array([int(r["weathersit"]) - 1 for r in years["2"]])
        return y1, y2, 3
    t1 = np.array([float(r["temp"]) for r in years["1"]])
    cuts = np.quantile(t1, [0.25, 0.5, 0.75])  # year 1 only: public
    t2 = np.array([float(r["temp"]) for r in years["2"]])
    return np.searchsorted(cuts, t1), np.searchsorted(cuts, t2), 4


def on_grid(row: np.ndarray) -> list[Fraction]:
    """A probability vector on the 1/GRID grid, every entry ≥ 1/GRID, summing to 1."""
    ints = np.maximum(np.round(row / row.sum() * GRID).astype(int), 1)
    ints[int(np.argmax(ints))] += GRID - int(ints.sum())
    return [Fraction(int(x), GRID) for x in ints]


def fit_class(y1: np.ndarray, k: int):  # noqa: ANN201 (a MarkovClass)
    counts = np.ones((k, k))
    np.add.at(counts, (y1[:-1], y1[1:]), 1)
    p_hat = counts / counts.sum(axis=1, keepdims=True)
    q = on_grid(np.bincount(y1, minlength=k) + 1.0)
    chains = []
    for p in (p_hat, 0.9 * p_hat + 0.1 * np.eye(k), 0.9 * p_hat + 0.1 / k):
        chains.append((q, [on_grid(r) for r in p]))
    return markov_class(chains, k)


def mixing_line(model: MarkovClass) -> str:
    """Per chain of Θ: reversible (detailed balance, exact)? Dobrushin's τ and the certified
    λ_up ≥ λ* (MQMApprox takes the eigengap term for reversible chains only)."""
    parts = []
    for chain in model.chains:
        reversible, tau, lam = mixing_rates(chain)
        parts.append(f"{'reversible' if reversible else 'not reversible'}, "
                     f"τ = {float(tau):.3f}, λ* ≤ {float(lam):.3f}")
    return "Θ's chains: " + "; ".join(parts) + "."


def l1_error(counts: np.ndarray, scale_eps: Fraction, eps: Fraction, trials: int) -> float:
    t = counts.sum()
    drawn = frontend.noisy(np.tile(counts, trials), scale_eps, PureDP(eps)).value
    noisy = np.asarray(drawn, dtype=np.float64).reshape(trials, -1)
    return float(np.abs(noisy - counts).sum(axis=1).mean() / t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    add_flag(ap)
    args = ap.parse_args()
    require(DATA, what="the Bike Sharing daily series")
    years = load(DATA)
    lines = ["# Pufferfish privacy on a correlated series: the Markov quilt mechanism", "",
             "Written by `PYTHONPATH=src python bench/pufferfish.py --update-results` "
             "(UCI Bike Sharing, `shared/data_new`). Year 1 (2011) is held out: it fixes "
             "the states and Θ; year 2 (2012, T = 366) is released. Histogram of states "
             "(L = 2), scale per count; error = mean L1 error of the state frequencies over "
             f"{args.trials} releases. Naive per-day DP gives **no** guarantee for a "
             "correlated secret (a day predictable from its neighbours).", ""]
    start = time.perf_counter()
    for name in ("weathersit", "temp"):
        y1, y2, k = series(years, name)
        model = fit_class(y1, k)
        counts = np.bincount(y2, minlength=k)
        t = int(y2.size)
        lines += [f"## {name} (k = {k}, |Θ| = {len(model.chains)}; {model.describe()})", "",
                  "| ε | MQMExact σ | quilt (i, a, b) | MQMApprox σ | group DP 2T/ε | "
                  "naive 2/ε | L1 err MQMExact | MQMApprox | group DP | naive |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        mixing = mixing_line(model)
        for eps in EPSILONS:
            exact = quilt_scale(model, t, eps, lipschitz=2, max_width=WIDTH)
            approx = quilt_scale(model, t, eps, lipschitz=2, method="approx", max_width=WIDTH)
            group, naive = Fraction(2 * t) / eps, Fraction(2) / eps
            one = markov_quilt_release(y2, model, epsilon=eps, max_width=WIDTH)
            assert one.scale == exact
            errs = [l1_error(counts, eps * s, eps, args.trials)
                    for s in (exact.scale, approx.scale, group, naive)]
            lines.append(f"| {float(eps):g} | {float(exact.scale):.3f} | "
                         f"({exact.node}, {exact.left}, {exact.right}) | "
                         f"{float(approx.scale):.3f} | {float(group):.0f} | "
                         f"{float(naive):.0f} | " + " | ".join(f"{e:.4f}" for e in errs) + " |")
        lines += ["", mixing, ""]
    lines += ["Reading: on `weathersit` (weather mixes within days) MQMExact's σ is 10–18× "
              "naive per-day DP's and 20–36× below group DP's; MQMApprox is 1.3–1.5× MQMExact. "
              "MQMApprox takes the tighter of Dobrushin's bound and the paper's eigengap bound,"
              " the latter for reversible chains only (module docstring); Θ's chains, fitted to"
              ' year 1, are not reversible (detailed balance fails exactly), so on these data '
              "it is Dobrushin's and σ is unchanged by the eigengap term; λ* ≤ τ always, and "
              'the eigengap term would win only when λ* is well below τ. On `temp` (seasonal, '
              'very persistent) no quilt within W = 16 days beats the trivial one at ε ≤ 1, so '
              'MQM is group DP; at ε = 2 MQMExact is 4× below it and MQMApprox is not. The '
              "ordering MQMExact ≤ MQMApprox ≤ group DP is the paper's (§6, on its activity and"
              ' electricity data); its values are not comparable (other data). A quilt (i, 0, '
              '0) is the trivial quilt.',
              "", f"Run time: {time.perf_counter() - start:.1f} s.", ""]
    out = results_dir(args.update_results) / "pufferfish.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
