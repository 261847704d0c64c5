"""Top-k over an unknown domain with user-level contribution bounds, on real user logs.

- MovieLens 100K (``../shared/data_new/movielens_100k/``, local use only; never committed):
  users and the titles of the movies they rated, as "queries".
- MSNBC (``../shared/data_new/msnbc/``, CC BY 4.0): each browsing session is a user; its
  "queries" are its distinct page-category n-grams up to trigrams (a domain of 17 + 17² +
  17³ = 5,219 possible items, not enumerated by the release).

For ε ∈ {0.1, 1}, δ = 1e-6, k ∈ {10, 50} and contribution bounds d, the release is
``dpkit.apps.topk.top_k_unknown_domain`` (partition selection + noisy user counts, one
Session release). Reported: the fraction of the true top-k (by distinct users, no bound)
that the release's top-k contains, and the mean absolute error of the released counts
against the true user counts (which includes the bias of bounding users to d items).

    PYTHONPATH=src python bench/topk.py            # ≈ 1.5 minutes
"""

from __future__ import annotations

import argparse
import gzip
import time
from fractions import Fraction
from pathlib import Path

import matplotlib
import numpy as np
import polars as pl

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dpkit.apps.topk import top_k_unknown_domain  # noqa: E402
from dpkit.mechanisms.partition_selection import (  # noqa: E402
    truncated_geometric_probabilities,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data_new"
RESULTS = Path(__file__).parent / "results"
EPSILONS = (0.1, 1.0)
DELTA = 1e-6
KS = (10, 50)


def movielens() -> pl.DataFrame:
    root = DATA / "movielens_100k"
    ratings = pl.read_csv(root / "u.data", separator="\t", has_header=False,
                          new_columns=["user", "movie", "rating", "ts"])
    fields = [line.split("|")[:2] for line in
              (root / "u.item").read_text(encoding="latin-1").splitlines() if line]
    titles = pl.DataFrame({"movie": [int(f[0]) for f in fields],
                           "item": [f[1] for f in fields]})
    return ratings.join(titles, on="movie").select("user", "item")


def msnbc() -> pl.DataFrame:
    with gzip.open(DATA / "msnbc" / "msnbc990928.seq.gz", "rt") as fh:
        lines = [line.strip() for line in fh if line[:1].isdigit()]
    tokens = (pl.DataFrame({"s": lines}).with_row_index("user")
              .with_columns(pl.col("s").str.split(" ")).explode("s")
              .rename({"s": "t1"}))
    tokens = tokens.with_columns(
        pl.col("t1").shift(-1).over("user").alias("t2"),
        pl.col("t1").shift(-2).over("user").alias("t3"))
    grams = [tokens.select("user", item=pl.col("t1")),
             tokens.drop_nulls("t2").select("user", item=pl.concat_str("t1", "t2",
                                                                        separator="-")),
             tokens.drop_nulls("t3").select("user", item=pl.concat_str("t1", "t2", "t3",
                                                                        separator="-"))]
    return pl.concat(grams).unique()


def half_threshold(eps: float, d: int) -> int:
    """Users an item needs (after bounding) to be released with probability ½: the
    truncated-geometric rule at ε_s/d, δ/d (ε_s = ε/2)."""
    probs = truncated_geometric_probabilities(Fraction(eps / 2) / d, Fraction(DELTA) / d)
    return next(n for n, p in enumerate(probs) if p >= Fraction(1, 2))


def evaluate(pairs: pl.DataFrame, ds: list[int], trials: int) -> list[dict]:
    truth = pairs.unique().group_by("item").agg(pl.len().alias("true")).sort(
        ["true", "item"], descending=[True, False])
    rows = []
    for eps in EPSILONS:
        for d in ds:
            found = {k: [] for k in KS}
            errors: dict[int, list[float]] = {k: [] for k in KS}
            relative: dict[int, list[float]] = {k: [] for k in KS}
            seconds = []
            for _ in range(trials):
                start = time.perf_counter()
                out = top_k_unknown_domain(pairs.lazy(), user="user", item="item", k=max(KS), d=d,
                                           epsilon=eps, delta=DELTA)
                seconds.append(time.perf_counter() - start)
                joined = out.join(truth, on="item", how="left")
                for k in KS:
                    top = set(truth["item"][:k].to_list())
                    got = joined.head(k)
                    found[k].append(len(top & set(got["item"].to_list())) / k)
                    if got.height:
                        gap = (got["count"] - got["true"]).abs()
                        errors[k].append(float(gap.mean()))
                        relative[k].append(float((gap / got["true"]).mean()))
            for k in KS:
                rows.append({"eps": eps, "d": d, "k": k, "found": float(np.mean(found[k])),
                             "error": float(np.mean(errors[k])) if errors[k] else float("nan"),
                             "relative": float(np.mean(relative[k])) if errors[k]
                             else float("nan"),
                             "released": len(errors[k]), "seconds": float(np.mean(seconds)),
                             "kth": int(truth["true"][k - 1]),
                             "half": half_threshold(eps, d)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1)
    args = parser.parse_args()
    start = time.perf_counter()
    datasets = {"MovieLens 100K titles": (movielens(), [1, 5, 20]),
                "MSNBC category n-grams": (msnbc(), [5, 20, 50])}
    results = {name: evaluate(pairs, ds, args.trials) for name, (pairs, ds) in datasets.items()}
    sizes = {name: (pairs["user"].n_unique(), pairs["item"].n_unique(), pairs.height)
             for name, (pairs, _) in datasets.items()}
    seconds = time.perf_counter() - start

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (name, rows) in zip(axes, results.items(), strict=True):
        for eps in EPSILONS:
            for k in KS:
                sel = [r for r in rows if r["eps"] == eps and r["k"] == k]
                ax.plot([r["d"] for r in sel], [r["found"] for r in sel], "-o",
                        label=f"ε = {eps}, k = {k}")
        ax.set_xscale("log")
        ax.set_xlabel("contribution bound d (items per user)")
        ax.set_title(name)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("fraction of the true top-k found")
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    fig.savefig(RESULTS / "topk.png", dpi=110)

    lines = ["# Top-k over an unknown domain with user-level contribution bounds", "",
             f"`PYTHONPATH=src python bench/topk.py --trials {args.trials}` ({seconds:.0f} s "
             "in all, data loading included). Plot: `topk.png`. δ = 1e-6; ε split half to "
             "partition selection (truncated geometric), half to the counts (discrete "
             "Laplace, scale d/ε_c). Mean over trials.", ""]
    for name, rows in results.items():
        users, items, n = sizes[name]
        lines += [f"## {name}: {users} users, {items} distinct items, {n} (user, item) pairs",
                  "", "| ε | d | k | true k-th count | users for release w.p. ½ | top-k found "
                  "| mean abs count error (released top-k vs true) | mean relative error "
                  "| trials with a release | s per release |", "|---:" * 10 + "|"]
        for r in rows:
            lines.append(f"| {r['eps']} | {r['d']} | {r['k']} | {r['kth']} | {r['half']} | "
                         f"{r['found']:.2f} | {r['error']:.1f} | {r['relative']:.3f} | "
                         f"{r['released']}/"
                         f"{args.trials} | {r['seconds']:.1f} |")
        lines.append("")
    (RESULTS / "topk.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
