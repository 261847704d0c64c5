"""PCA centred on a private mean (issue 34): captured variance ÷ scikit-learn's on Adult.

    python bench/learn_pca_centred.py [--trials 10] [--k 2]
    python bench/learn_pca_centred.py --choose [--trials 10]

Adult (the held-out evaluation set, never used to choose a default): the 5 numeric columns of
bench/learn.py, scaled by their declared bounds (the UCI documentation's ranges) to [0, 1],
declared bounds [0, 1]; training split. For each ε ∈ {0.1, 1, 10} (δ = 1e-6): the variance
of the data along dpkit's top-k components, tr(V C Vᵀ) with C the sample covariance, ÷ the
same for scikit-learn's PCA (the sum of C's top-k eigenvalues); median (and worst) over the
trials, for the default ``centre="mean"`` and the old ``centre="midpoint"``; the noiseless
midpoint-centred figure shows the bias is the centring's.

``--choose`` is how the default ``mean_share`` was picked: the same ratio on synthetic data
(rows N(μ, Σ) clipped to [0, 1]^6, μ off the midpoint, Σ with a random spectrum; one dataset
per trial, shared by every share), for several shares; nothing of Adult is read.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from dpkit.datasets import load_adult
from dpkit.learn import PCA

COLUMNS = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
LOWER = np.array([17, 1, 0, 0, 1], dtype=float)  # bench/learn.py's declared bounds
UPPER = np.array([90, 16, 99999, 4356, 99], dtype=float)
EPSILONS = (0.1, 1.0, 10.0)
SHARES = (0.02, 0.05, 0.1, 0.2, 0.3)


def adult() -> np.ndarray:
    x = load_adult("train").select(COLUMNS).to_numpy().astype(float)
    return (np.clip(x, LOWER, UPPER) - LOWER) / (UPPER - LOWER)


def synthetic(gen: np.random.Generator, n: int = 30000, d: int = 6) -> np.ndarray:
    """Test input (not production noise): correlated rows with an off-centre mean."""
    mean = gen.uniform(0.05, 0.4, d)
    basis, _ = np.linalg.qr(gen.normal(size=(d, d)))
    spread = 0.15 * np.exp(-gen.uniform(0, 3, d))
    return np.clip(mean + (gen.normal(size=(n, d)) * spread) @ basis.T, 0, 1)


def ratio(x: np.ndarray, components: np.ndarray) -> float:
    """Variance captured by ``components`` ÷ the best k components' (scikit-learn's)."""
    cov = np.cov(x, rowvar=False)
    best = np.sort(np.linalg.eigvalsh(cov))[::-1][:components.shape[0]].sum()
    return float(np.trace(components @ cov @ components.T) / best)


def noiseless_midpoint(x: np.ndarray, k: int) -> np.ndarray:
    centred = x - 0.5
    _, vectors = np.linalg.eigh(centred.T @ centred)
    return vectors[:, ::-1][:, :k].T


def figures(datasets: list[np.ndarray], k: int, **params: object
            ) -> dict[float, list[float]]:
    """One fit per dataset at each ε (the same datasets for every setting compared)."""
    out: dict[float, list[float]] = {}
    for eps in EPSILONS:
        out[eps] = []
        for x in datasets:
            pca = PCA(k, eps, 1e-6, bounds=(0, 1), **params).fit(x)  # type: ignore[arg-type]
            out[eps].append(ratio(x, pca.components_))
    return out


def line(name: str, got: dict[float, list[float]]) -> str:
    cells = [f"{statistics.median(v):.3f} ({min(v):.3f})" for v in got.values()]
    return f"| {name} | " + " | ".join(cells) + " |"


def header(first: str) -> list[str]:
    return [f"| {first} | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " |",
            "|---|" + "---|" * len(EPSILONS)]


def evaluate(trials: int, k: int) -> None:
    x = adult()
    print(f"Adult, {x.shape[0]} rows × {x.shape[1]} columns in [0, 1], k = {k}, δ = 1e-6, "
          f"{trials} fits: captured variance ÷ scikit-learn's, median (worst)\n")
    print("\n".join(header("centre")))
    print(line("mean (default, mean_share = 0.1)", figures([x] * trials, k)))
    print(line("midpoint (before issue 34)", figures([x] * trials, k, centre="midpoint")))
    print(f"\nnoiseless, midpoint-centred: {ratio(x, noiseless_midpoint(x, k)):.3f}")


def choose(trials: int, k: int) -> None:
    gen = np.random.default_rng()  # test input only
    datasets = [synthetic(gen) for _ in range(trials)]
    print(f"synthetic (30,000 × 6, one dataset per trial, the same for every row), k = {k}, "
          f"{trials} fits: captured variance ÷ scikit-learn's, median (worst)\n")
    print("\n".join(header("mean_share")))
    for share in SHARES:
        print(line(f"{share:g}", figures(datasets, k, mean_share=share)))
    print(line("midpoint", figures(datasets, k, centre="midpoint")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--choose", action="store_true", help="the synthetic sweep of shares")
    args = parser.parse_args()
    (choose if args.choose else evaluate)(args.trials, args.k)


if __name__ == "__main__":
    main()
