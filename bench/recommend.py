"""McSherry & Mironov's private recommender (dpkit.apps.recommend) on MovieLens 100K.

Split: per user, time-ordered — each user's last 20% of ratings (by timestamp) are the test
set. Hyper-parameters (budget split, stabilisers, k, rank) were chosen on a validation split
of the *training* part only (each user's last 20% of their training ratings), with
``--tune``; the test split is read once per configuration below.

Metrics: RMSE on the test ratings; precision@10 = the share of each user's 10 highest-scored
unrated items that the user rated ≥ 4 in the test period, averaged over users with at least
one such rating. Private runs repeat ``--reps`` times (fresh noise); mean ± std reported.

MovieLens 100K is for research use only: read from ../shared/data_new/movielens_100k at run
time, never committed.

    python bench/recommend.py            # table + plot in bench/results/
    python bench/recommend.py --tune     # the validation search (prints, writes nothing)
"""

from __future__ import annotations

import argparse
import itertools
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl

from dpkit.apps import fit_recommender, nonprivate_recommender

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data_new" / "movielens_100k" / "u.data"
OUT = ROOT / "bench" / "results"
N_ITEMS = 1682
BOUNDS = (1, 5)
EPSILONS = (0.1, 1.0, 10.0)
# chosen on the validation split (python bench/recommend.py --tune), per weighting
_COMMON = dict(split=(Fraction(1, 20), Fraction(17, 20), Fraction(1, 10)), beta_item=1.0,
               beta_cov=1.0, neighbours=30, rank=20, user_shrinkage=5.0, ridge=1.0,
               noise_shrinkage=10.0)
# the item prior τ (empirical-Bayes shrinkage of the item effects) chosen on the same
# validation split: 0.5 for the Gaussian weights; none (M&M's stabiliser) for Laplace
PARAMS = {"laplace": dict(_COMMON, clip=1.0), "gaussian": dict(_COMMON, clip=2.0,
                                                                item_prior=0.5)}


def load() -> pl.DataFrame:
    df = pl.read_csv(DATA, separator="\t", has_header=False,
                     new_columns=["user", "item", "rating", "ts"])
    return df.with_columns(pl.col("item") - 1)


def time_split(df: pl.DataFrame, frac: float = 0.2) -> tuple[pl.DataFrame, pl.DataFrame]:
    ranked = df.sort("user", "ts", "item").with_columns(
        (pl.int_range(pl.len()).over("user") / pl.len().over("user")).alias("q"))
    return ranked.filter(pl.col("q") < 1 - frac).drop("q"), ranked.filter(
        pl.col("q") >= 1 - frac).drop("q")


def random_split(df: pl.DataFrame, frac: float = 0.2) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per user, a uniformly random 20% of the ratings are the test set (seeded: data split
    only)."""
    gen = np.random.default_rng(0)
    ranked = df.with_columns(pl.Series("key", gen.random(df.height))).with_columns(
        (pl.col("key").rank().over("user") / pl.len().over("user")).alias("q"))
    return (ranked.filter(pl.col("q") <= 1 - frac).drop("q", "key"),
            ranked.filter(pl.col("q") > 1 - frac).drop("q", "key"))


def rmse(pred: np.ndarray, test: pl.DataFrame) -> float:
    return float(np.sqrt(np.mean((pred - test["rating"].to_numpy()) ** 2)))


def precision(top: pl.DataFrame, test: pl.DataFrame) -> float:
    liked = test.filter(pl.col("rating") >= 4).select("user", "item").with_columns(
        pl.lit(1).alias("hit"))
    users = liked["user"].unique()
    hits = (top.filter(pl.col("user").is_in(users.implode())).join(liked, on=["user", "item"],
                                                                      how="left")
            .group_by("user").agg((pl.col("hit").fill_null(0).sum() / pl.len()).alias("p")))
    return float(hits["p"].mean())


def mean_baselines(train: pl.DataFrame, test: pl.DataFrame) -> dict[str, tuple[float, float]]:
    g = float(train["rating"].mean())
    stats = train.group_by("item").agg(pl.col("rating").mean().alias("m"),
                                       pl.len().alias("n"))
    item_mean = np.full(N_ITEMS, g)
    item_mean[stats["item"].to_numpy()] = stats["m"].to_numpy()
    counts = np.zeros(N_ITEMS)
    counts[stats["item"].to_numpy()] = stats["n"].to_numpy()
    out = {"global mean": (rmse(np.full(test.height, g), test), float("nan"))}
    pred = item_mean[test["item"].to_numpy()]
    # top-10 by item mean among items with ≥ 20 ratings (a plain mean ranks 1-rating items first)
    score = np.where(counts >= 20, item_mean, -np.inf)
    out["item mean"] = (rmse(pred, test), _top_by_score(train, score, test))
    return out


def _top_by_score(train: pl.DataFrame, score: np.ndarray, test: pl.DataFrame) -> float:
    users = np.sort(train["user"].unique().to_numpy())
    mat = np.tile(score, (users.size, 1))
    rows = np.searchsorted(users, train["user"].to_numpy())
    mat[rows, train["item"].to_numpy()] = -np.inf
    top = np.argsort(-mat, axis=1, kind="stable")[:, :10]
    frame = pl.DataFrame({"user": np.repeat(users, 10), "item": top.reshape(-1)})
    return precision(frame, test)


def evaluate(model, train: pl.DataFrame, test: pl.DataFrame, method: str) -> tuple[float, float]:
    pred = model.predict(train, test.select("user", "item"), method=method)
    return rmse(pred, test), precision(model.top_k(train, 10, method=method), test)


def tune(train: pl.DataFrame) -> None:
    fit, val = time_split(train)
    grid = {"split": [(Fraction(1, 10), Fraction(6, 10), Fraction(3, 10)),
                      (Fraction(1, 20), Fraction(17, 20), Fraction(1, 10))],
            "noise_shrinkage": [3.0, 10.0], "clip": [1.0, 2.0]}
    for kind in ("laplace", "gaussian"):
        for values in itertools.product(*grid.values()):
            p = dict(PARAMS[kind], **dict(zip(grid, values, strict=True)))
            res = []
            for _ in range(1):
                m = fit_recommender(fit, n_items=N_ITEMS, bounds=BOUNDS,
                                    **_budget(kind, 1.0), **p)
                res.append(evaluate(m, fit, val, "knn")[0])
            print(kind, values, f"val RMSE {np.mean(res):.4f}")


def _budget(kind: str, eps: float) -> dict:
    # pure ε (Laplace) or ρ = ε²/2 (Gaussian; the zCDP that ε-DP implies, Bun & Steinke
    # Prop. 1.4 — a weaker guarantee than ε-DP, compared at the same ε for shape)
    return {"epsilon": eps} if kind == "laplace" else {"rho": Fraction(eps) ** 2 / 2}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--split", choices=("time", "random"), default="time")
    args = ap.parse_args()
    train, test = (time_split if args.split == "time" else random_split)(load())
    suffix = "" if args.split == "time" else "_random"
    if args.tune:
        tune(train)
        return
    t0 = time.time()
    rows = []
    for name, (e, p) in mean_baselines(train, test).items():
        rows.append({"method": name, "epsilon": "-", "rmse": e, "rmse_std": 0.0, "p10": p})
    for kind in ("laplace", "gaussian"):
        base = nonprivate_recommender(train, n_items=N_ITEMS, bounds=BOUNDS, kind=kind,
                                      **{k: v for k, v in PARAMS[kind].items()
                                         if k not in ("split", "noise_shrinkage", "item_prior")})
        for method in ("baseline", "knn", "factor"):
            e, p = evaluate(base, train, test, method)
            rows.append({"method": f"non-private {kind} weights, {method}", "epsilon": "inf",
                         "rmse": e, "rmse_std": 0.0, "p10": p})
        for eps in EPSILONS:
            res = {m: [] for m in ("knn", "factor")}
            for _ in range(args.reps):
                model = fit_recommender(train, n_items=N_ITEMS, bounds=BOUNDS,
                                        **_budget(kind, eps), **PARAMS[kind])
                for m in res:
                    res[m].append(evaluate(model, train, test, m))
            for m, vals in res.items():
                arr = np.array(vals)
                rows.append({"method": f"private {kind}, {m}", "epsilon": f"{eps:g}",
                             "rmse": arr[:, 0].mean(), "rmse_std": arr[:, 0].std(),
                             "p10": arr[:, 1].mean()})
    table = pl.DataFrame(rows)
    print(table)
    OUT.mkdir(parents=True, exist_ok=True)
    lines = ["# McSherry & Mironov private recommender on MovieLens 100K", "",
             ("Per-user time-ordered 80/20 split (each user's last 20% of ratings by time "
              "are the test set)" if args.split == "time" else "Per-user random 80/20 split")
             + "; hyper-parameters chosen on a validation split of the training part only "
             f"(time-ordered, within the training part). {args.reps} noise draws per "
             "private row. Laplace rows: pure ε-DP; "
             "Gaussian rows: ρ = ε²/2 zCDP (weaker than ε-DP). Privacy unit: a user. "
             f"Run time {time.time() - t0:.0f} s.", "",
             "| method | ε | RMSE | ± std | precision@10 |", "|---|---|---|---|---|"]
    for r in table.iter_rows(named=True):
        lines.append(f"| {r['method']} | {r['epsilon']} | {r['rmse']:.4f} | "
                     f"{r['rmse_std']:.4f} | {r['p10']:.4f} |")
    (OUT / f"recommend{suffix}.md").write_text("\n".join(lines) + "\n")
    _plot(table, suffix)


def _plot(table: pl.DataFrame, suffix: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in table["method"].unique(maintain_order=True):
        sub = table.filter(pl.col("method") == name)
        if name.startswith("private"):
            ax.errorbar([float(x) for x in sub["epsilon"]], sub["rmse"], sub["rmse_std"],
                        marker="o", label=name)
        elif "baseline" not in name:
            ax.axhline(sub["rmse"][0], ls="--", lw=1, label=name,
                       color="grey" if "mean" in name else None)
    ax.set_xscale("log")
    ax.set_xlabel("ε")
    ax.set_ylabel("test RMSE")
    ax.set_title("MovieLens 100K, McSherry & Mironov")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(OUT / f"recommend{suffix}.png", dpi=120)


if __name__ == "__main__":
    main()
