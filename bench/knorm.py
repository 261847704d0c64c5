"""The K-norm mechanism (Hardt & Talwar, STOC 2010) against the Laplace mechanism on small
workloads of linear queries over Adult histograms: dpkit.release.release_linear_queries.

Workloads (public, fixed before any run; nothing is tuned — the mechanism has no free
parameter beyond ε, and the lattice step is the default h = 1 for integer queries). Data: the
Adult train split (32,561 rows); the test split is not used.

- ``age windows`` (d = 2): histogram over 6 age bands [17–24, 25–34, 35–44, 45–54, 55–64,
  65+]; queries: count of 17–44, count of 35–64 (overlapping windows; K is a hexagon).
- ``age prefixes`` (d = 3): the same histogram; counts of age < 35, < 45, < 55.
- ``sex × income`` (d = 4): histogram over the 4 cells (sex, income); queries: total,
  female, >50K, female and >50K (a 2 × 2 marginal's linear combinations).

For each workload and ε ∈ {0.1, 0.5, 1}: the mean squared error E‖y − Ax‖₂² (summed over
the d queries) of R real releases through ``release_linear_queries`` (K-norm, exact on ℤᵈ),
beside (i) the Laplace mechanism with L1 sensitivity Δ₁ = maxⱼ‖aⱼ‖₁: discrete Laplace of scale
Δ₁/ε on each answer, its exact MSE d·2e^{−ε/Δ₁}/(1 − e^{−ε/Δ₁})² and R real draws through
``frontend.noisy``; (ii) Hardt & Talwar's continuous K-norm law: z = r·u with r ~ Gamma(d + 1,
1/ε) and u uniform in K has density ∝ exp(−ε‖z‖_K) (the sampler of Hardt & Talwar 2010;
the identity is derived in docs/topics/knorm.md), so its MSE is exactly
(d + 1)(d + 2)/ε² · E_{u∼U(K)}‖u‖₂², with E_{U(K)}‖u‖₂² by Monte Carlo (10^6 uniform points of
K by rejection from its bounding box, NumPy's seeded generator: a benchmark input, never
noise). The continuous Laplace MSE 2d(Δ₁/ε)² is shown too.

    PYTHONPATH=src python bench/knorm.py            # ≈ 1 min
"""

from __future__ import annotations

import argparse
import math
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl

from dpkit.core.measures import PureDP
from dpkit.datasets import load_adult
from dpkit.mechanisms import frontend
from dpkit.mechanisms.knorm import knorm_plan
from dpkit.release import release_linear_queries

OUT = Path(__file__).parent / "results" / "knorm.md"
EPSILONS = (Fraction(1, 10), Fraction(1, 2), Fraction(1))
AGE_EDGES = (17, 25, 35, 45, 55, 65, 200)


def histograms() -> dict[str, tuple[np.ndarray, list[list[int]]]]:
    """Each workload's histogram x (Adult train) and matrix A."""
    adult = load_adult("train")
    ages = adult["age"].to_numpy()
    age_hist = np.histogram(ages, bins=AGE_EDGES)[0].astype(np.int64)
    cells = [("Male", "<=50K"), ("Male", ">50K"), ("Female", "<=50K"), ("Female", ">50K")]
    sex_income = np.array([adult.filter((pl.col("sex") == s) & (pl.col("income") == i)).height
                           for s, i in cells], dtype=np.int64)
    return {
        "age windows": (age_hist, [[1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 1, 0]]),
        "age prefixes": (age_hist, [[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0],
                                    [1, 1, 1, 1, 0, 0]]),
        "sex × income": (sex_income, [[1, 1, 1, 1], [0, 0, 1, 1], [0, 1, 0, 1],
                                      [0, 0, 0, 1]]),
    }


def uniform_in_k_second_moment(a: list[list[int]], points: int, seed: int) -> float:
    """E‖u‖₂² for u uniform in K = conv(±aⱼ), by rejection from the bounding box."""
    plan = knorm_plan(a, 1)
    gen = np.random.default_rng(seed)
    box = np.array(plan.box, dtype=float)
    g = np.array(plan.facets, dtype=float).T / plan.denominator
    kept: list[np.ndarray] = []
    total = 0
    while total < points:
        u = gen.uniform(-1, 1, size=(points, plan.dim)) * box
        inside = u[(u @ g).max(axis=1) <= 1]
        kept.append(inside)
        total += inside.shape[0]
    u = np.concatenate(kept)[:points]
    return float((u * u).sum(axis=1).mean())


def discrete_laplace_variance(scale: float) -> float:
    q = math.exp(-1 / scale)
    return 2 * q / (1 - q) ** 2


def run(draws: int, points: int, seed: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for name, (x, a) in histograms().items():
        d = len(a)
        exact = np.array(a, dtype=np.int64) @ x
        l1 = max(sum(abs(v) for v in col) for col in zip(*a, strict=True))
        moment = uniform_in_k_second_moment(a, points, seed)
        for eps in EPSILONS:
            plan = knorm_plan(a, eps)
            start = time.perf_counter()
            err = np.array([release_linear_queries(x, a, eps) - exact for _ in range(draws)])
            per_release = (time.perf_counter() - start) / draws
            sq = (err ** 2).sum(axis=1)
            lap = np.array([frontend.noisy(exact, l1, PureDP(eps)).value - exact
                            for _ in range(draws)])
            lap_sq = (lap.astype(float) ** 2).sum(axis=1)
            e = float(eps)
            rows.append({
                "workload": name, "d": d, "n": len(a[0]), "L1": l1, "epsilon": e,
                "knorm": float(sq.mean()), "knorm_se": float(sq.std() / math.sqrt(draws)),
                "laplace_exact": d * discrete_laplace_variance(l1 / e),
                "laplace": float(lap_sq.mean()),
                "ht_continuous": (d + 1) * (d + 2) / e ** 2 * moment,
                "laplace_continuous": 2 * d * (l1 / e) ** 2,
                "proposals": plan.expected_proposals, "ms": per_release * 1e3,
            })
    return rows


def report(rows: list[dict[str, object]], args: argparse.Namespace, seconds: float) -> str:
    lines = [
        "# The K-norm mechanism vs the Laplace mechanism on Adult workloads",
        "",
        f"`PYTHONPATH=src python bench/knorm.py --draws {args.draws} --points {args.points} "
        f"--seed {args.seed}` ({seconds:.0f} s).",
        "",
        "Data: Adult train split (the test split is not used); workloads fixed in advance "
        "(bench/knorm.py docstring), nothing tuned. MSE = E‖y − Ax‖₂² summed over the d "
        f"queries; K-norm and Laplace (empirical) over {args.draws} real releases each "
        "(± one standard error for K-norm). Laplace: discrete Laplace of scale Δ₁/ε per "
        "answer, Δ₁ = maxⱼ‖aⱼ‖₁ (its exact MSE beside the empirical one). HT continuous: "
        "the continuous K-norm law's exact MSE (d + 1)(d + 2)/ε²·E_{U(K)}‖u‖₂² (Gamma(d + 1, "
        f"1/ε) radius times a uniform point of K; the moment from {args.points} Monte Carlo "
        "points). Proposals: the plan's bound on the expected proposals per draw.",
        "",
        "| workload | d | n | Δ₁ | ε | K-norm MSE | ± s.e. | Laplace MSE (exact) | Laplace MSE "
        "(emp.) | K-norm / Laplace | HT continuous MSE | continuous Laplace MSE | proposals ≤ | "
        "ms / release |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = float(r["knorm"]) / float(r["laplace_exact"])  # type: ignore[arg-type]
        lines.append(
            f"| {r['workload']} | {r['d']} | {r['n']} | {r['L1']} | {r['epsilon']:g} | "
            f"{r['knorm']:.4g} | {r['knorm_se']:.2g} | {r['laplace_exact']:.4g} | "
            f"{r['laplace']:.4g} | {ratio:.3f} | {r['ht_continuous']:.4g} | "
            f"{r['laplace_continuous']:.4g} | {r['proposals']:.3g} | {r['ms']:.2f} |")
    gaps = [abs(float(r["knorm"]) - float(r["ht_continuous"]))  # type: ignore[arg-type]
            / float(r["knorm_se"]) for r in rows]  # type: ignore[arg-type]
    ratios = [float(r["knorm"]) / float(r["laplace_exact"]) for r in rows]  # type: ignore[arg-type]
    lines += [
        "",
        f"Reading: K-norm's MSE is {min(ratios):.2f}–{max(ratios):.2f} times the Laplace "
        "mechanism's: it pays for the shape of K = conv(±aⱼ), not for the L1 ball of radius "
        "Δ₁ around it, and gains most where the queries overlap most. The lattice law "
        "(h = 1) is within "
        f"{max(gaps):.1f} standard errors of Hardt & Talwar's continuous law in every row.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=2010)
    args = parser.parse_args()
    start = time.perf_counter()
    rows = run(args.draws, args.points, args.seed)
    OUT.write_text(report(rows, args, time.perf_counter() - start))
    print(OUT.read_text())


if __name__ == "__main__":
    main()
