"""Top-k over an unknown domain with user-level contribution bounds, on real user logs.

- MovieLens 100K (``../shared/data_new/movielens_100k/``, local use only; never committed):
  users and the titles of the movies they rated, as "queries"; a rating ≥ 4 is a "click".
- MSNBC (``../shared/data_new/msnbc/``, CC BY 4.0): each browsing session is a user; its
  "queries" are its distinct page-category n-grams up to trigrams (a domain of 17 + 17² +
  17³ = 5,219 possible items, not enumerated by the release); how often the n-gram occurs
  in the session is its "clicks".

For ε ∈ {0.1, 1}, δ = 1e-6, k ∈ {3, 10, 50}, two methods of
``dpkit.apps.topk.top_k_unknown_domain`` (one Session release each, half of ε to the
selection, half to the user counts and click totals):

- ``threshold``: partition selection (truncated geometric) with each user bounded to d
  items, then the k largest noisy counts (Korolova et al. 2009); one release serves both k;
- ``limited_domain``: Durfee & Rogers' top-k (k̄ = 4k, the documented default), users
  unrestricted (d = None) or bounded to d; one release per k.

Reported: the fraction of the true top-k (by distinct users, no bound) among the released
rows, how many rows came out, and the mean relative error of the released user counts and
click totals against the true ones (click totals: each (user, item) clamped to c, no d bound).
Nothing here was tuned on these data: d, c, k̄ and the ε split are the grid and defaults
written down before the runs.

    PYTHONPATH=src python bench/topk.py            # ≈ 2 minutes
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

from dpkit.apps.topk import MAX_D, top_k_unknown_domain  # noqa: E402
from dpkit.mechanisms.limited_domain import sentinel_score  # noqa: E402
from dpkit.mechanisms.partition_selection import (  # noqa: E402
    truncated_geometric_probabilities,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data_new"
RESULTS = Path(__file__).parent / "results"
EPSILONS = (0.1, 1.0)
DELTA = 1e-6
KS = (3, 10, 50)
CLICK_BOUND = 5


def movielens() -> pl.DataFrame:
    root = DATA / "movielens_100k"
    ratings = pl.read_csv(root / "u.data", separator="\t", has_header=False,
                          new_columns=["user", "movie", "rating", "ts"])
    fields = [line.split("|")[:2] for line in
              (root / "u.item").read_text(encoding="latin-1").splitlines() if line]
    titles = pl.DataFrame({"movie": [int(f[0]) for f in fields],
                           "item": [f[1] for f in fields]})
    return ratings.join(titles, on="movie").select(
        "user", "item", clicks=(pl.col("rating") >= 4).cast(pl.Int64))


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
    return pl.concat(grams).group_by("user", "item").agg(clicks=pl.len())


def truth_of(pairs: pl.DataFrame) -> pl.DataFrame:
    return (pairs.group_by("item")
            .agg(true=pl.col("user").n_unique(),
                 true_clicks=pl.col("clicks").clip(0, CLICK_BOUND).sum())
            .sort(["true", "item"], descending=[True, False]))


def score(out: pl.DataFrame, truth: pl.DataFrame, k: int, ranked: bool) -> dict[str, float]:
    """Found fraction of the true top-k, rows out, mean relative errors of counts and clicks."""
    if not ranked:
        out = out.head(k)
    top = set(truth["item"][:k].to_list())
    joined = out.join(truth, on="item", how="left")
    found = len(top & set(out["item"].to_list())) / k
    if not joined.height:
        return {"found": found, "rows": 0, "count": np.nan, "clicks": np.nan}
    count = ((joined["count"] - joined["true"]).abs() / joined["true"]).mean()
    clicks = ((joined["clicks"] - joined["true_clicks"]).abs()
              / joined["true_clicks"].clip(1, None)).mean()
    return {"found": found, "rows": joined.height, "count": float(count),
            "clicks": float(clicks)}


def bar(method: str, eps: float, d: int | None, k: int, truth: pl.DataFrame) -> float:
    """What an item must beat: for threshold, the users (after bounding) it needs to be
    released with probability ½ (truncated geometric at ε_s/d, δ/d); for limited domain, the
    sentinel h_⊥ = h_(k̄+1) + 1 + ln(min(d, k̄)/δ)/ε₀ (true counts, before any bound)."""
    eps_s = Fraction(eps) / 2
    if method == "threshold":
        probs = truncated_geometric_probabilities(eps_s / d, Fraction(DELTA) / d)
        return next(n for n, p in enumerate(probs) if p >= Fraction(1, 2))
    k_bar = 4 * k
    base = int(truth["true"][k_bar]) if truth.height > k_bar else 0
    return float(sentinel_score(base, eps_s / k, Fraction(DELTA), min(d or MAX_D, k_bar)))


def runs(pairs: pl.DataFrame, ds: list[int | None]) -> list[tuple[str, int | None, tuple]]:
    """(method, d, ks of one release) for every release of the grid."""
    out: list[tuple[str, int | None, tuple]] = [("threshold", d, KS) for d in ds if d]
    out += [("limited_domain", d, (k,)) for d in ds for k in KS]
    return out


def evaluate(pairs: pl.DataFrame, ds: list[int | None], trials: int) -> list[dict]:
    truth = truth_of(pairs)
    rows = []
    for eps in EPSILONS:
        for method, d, ks in runs(pairs, ds):
            got: dict[int, list[dict]] = {k: [] for k in ks}
            seconds = []
            for _ in range(trials):
                start = time.perf_counter()
                extra = ({"method": "limited_domain"} if method == "limited_domain" else {})
                out = top_k_unknown_domain(pairs.lazy(), user="user", item="item",
                                           k=max(ks), d=d, epsilon=eps, delta=DELTA,
                                           clicks="clicks", click_bound=CLICK_BOUND, **extra)
                seconds.append(time.perf_counter() - start)
                for k in ks:
                    got[k].append(score(out, truth, k, method == "limited_domain"))
            for k in ks:
                mean = {m: float(np.nanmean([g[m] for g in got[k]]))
                        if any(np.isfinite(g[m]) for g in got[k]) else float("nan")
                        for m in ("found", "rows", "count", "clicks")}
                rows.append({"eps": eps, "method": method, "d": d, "k": k, **mean,
                             "kth": int(truth["true"][k - 1]),
                             "bar": bar(method, eps, d, k, truth),
                             "seconds": float(np.mean(seconds))})
    return rows


def plot(results: dict[str, list[dict]]) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (name, rows) in zip(axes, results.items(), strict=True):
        labels = sorted({(r["method"], r["d"]) for r in rows}, key=str)
        width = 0.8 / len(labels)
        cases = [(eps, k) for eps in EPSILONS for k in KS]
        for j, (method, d) in enumerate(labels):
            values = [next((r["found"] for r in rows if r["method"] == method and r["d"] == d
                            and r["eps"] == eps and r["k"] == k), np.nan) for eps, k in cases]
            ax.bar(np.arange(len(cases)) + j * width, values, width,
                   label=f"{method}, d = {d if d else 'none'}")
        ax.set_xticks(np.arange(len(cases)) + 0.4 - width / 2)
        ax.set_xticklabels([f"ε={eps}\nk={k}" for eps, k in cases])
        ax.set_title(name)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("fraction of the true top-k found")
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    fig.savefig(RESULTS / "topk.png", dpi=110)


def fmt(x: float, digits: int) -> str:
    return "–" if not np.isfinite(x) else f"{x:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=1)
    args = parser.parse_args()
    start = time.perf_counter()
    # MovieLens releases take 0.1 s: five times the trials there
    datasets = {"MovieLens 100K titles": (movielens(), [None, 5, 20], 5 * args.trials),
                "MSNBC category n-grams": (msnbc(), [None, 5, 50], args.trials)}
    results = {name: evaluate(pairs, ds, trials)
               for name, (pairs, ds, trials) in datasets.items()}
    sizes = {name: (pairs["user"].n_unique(), pairs["item"].n_unique(), pairs.height, trials)
             for name, (pairs, _, trials) in datasets.items()}
    seconds = time.perf_counter() - start
    plot(results)
    lines = ["# Top-k over an unknown domain with user-level contribution bounds", "",
             f"`PYTHONPATH=src python bench/topk.py --trials {args.trials}` ({seconds:.0f} s "
             "in all, data loading included). Plot: `topk.png`. δ = 1e-6; ε split half to the "
             "selection, half to the user counts and click totals (a quarter each; discrete "
             "Laplace). threshold = partition selection (truncated geometric) with users "
             "bounded to d items, then the k largest noisy counts; limited_domain = Durfee & "
             "Rogers' top-k with k̄ = 4k (d = none: users unrestricted). Click totals clamp "
             f"each (user, item) to c = {CLICK_BOUND}. Mean over trials; relative errors over "
             "the released rows. *Bar to pass*: for threshold, the users an item needs after "
             "bounding to be released with probability ½; for limited domain, the sentinel "
             "h_⊥ = h_(k̄+1) + 1 + ln(min(d, k̄)/δ)/ε₀ with ε₀ = ε_s/k (from the true counts; "
             "an item with a count below it is rarely picked).", ""]
    for name, rows in results.items():
        users, items, n, trials = sizes[name]
        lines += [f"## {name}: {users} users, {items} distinct items, {n} (user, item) pairs; "
                  f"{trials} trial(s)",
                  "", "| ε | method | d | k | true k-th count | bar to pass | top-k found "
                  "| rows out | count rel. error | clicks rel. error | s per release |",
                  "|---:" * 11 + "|"]
        for r in rows:
            lines.append(f"| {r['eps']} | {r['method']} | {r['d'] or 'none'} | {r['k']} | "
                         f"{r['kth']} | {r['bar']:.0f} | {fmt(r['found'], 2)} | "
                         f"{fmt(r['rows'], 1)} | "
                         f"{fmt(r['count'], 3)} | {fmt(r['clicks'], 3)} | {r['seconds']:.1f} |")
        lines.append("")
    (RESULTS / "topk.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
