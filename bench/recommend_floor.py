"""The recommender's floor (issue 34): dpkit.apps.recommend against the private global mean on
MovieLens 100K, users held out.

Protocol. The 943 users are split once (a seeded permutation: data split only, never noise)
into **tuning users** (one third) and **evaluation users** (two thirds); each user's ratings
are split 90/10 at random (seeded). The defaults of ``fit_recommender`` that issue 34 chose
(``guard``, ``beta_item``, ``noise_shrinkage``) were chosen with ``--tune``: fit on the tuning
users' 90%, scored on the tuning users' 10%. The table is computed on the evaluation users
only (fit on their 90%, scored on their 10%): no rating of an evaluation user was used to
choose anything.

Rows: each method (kNN, factor, baseline) of the private model at its defaults (pure ε-DP,
Laplace), the private global mean G (the model's released global effect, predicted for every
pair), the training mean and the non-private model (same pipeline, no noise), at
ε ∈ {1, 8}, ``--trials`` fresh noise draws each (mean ± std). Goals: every method's RMSE at
ε = 1 ≤ the private global mean's; ≤ 1.05 at ε = 8.

MovieLens 100K is for research use only: read from ``shared/data_new/movielens_100k`` (the
``shared`` folder next to the repository, or next to its parent for a worktree) at run time,
never committed.

    python bench/recommend_floor.py              # table in bench/results/recommend_floor.md
    python bench/recommend_floor.py --tune       # the search on the tuning users (prints)
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

import numpy as np
import polars as pl

from dpkit.apps import fit_recommender, nonprivate_recommender

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"
N_ITEMS = 1682
BOUNDS = (1, 5)
EPSILONS = (1, 8)
METHODS = ("knn", "factor", "baseline")


def data_path() -> Path:
    for base in (ROOT.parent, ROOT.parent.parent):
        path = base / "shared" / "data_new" / "movielens_100k" / "u.data"
        if path.exists():
            return path
    raise SystemExit("MovieLens 100K not found under ../shared/data_new/movielens_100k")


def splits() -> dict[str, tuple[pl.DataFrame, pl.DataFrame]]:
    """{"tuning": (train, test), "evaluation": (train, test)}: users split 1/3 : 2/3, each
    user's ratings 90/10 (seeded: the data split only)."""
    df = pl.read_csv(data_path(), separator="\t", has_header=False,
                     new_columns=["user", "item", "rating", "ts"]).with_columns(
        pl.col("item") - 1)
    gen = np.random.default_rng(34)
    users = np.sort(df["user"].unique().to_numpy())
    tuning = gen.permutation(users)[: users.size // 3]
    df = df.with_columns(pl.Series("key", gen.random(df.height))).with_columns(
        (pl.col("key").rank().over("user") / pl.len().over("user")).alias("q"),
        pl.col("user").is_in(tuning.tolist()).alias("tuning"))
    out = {}
    for name, flag in (("tuning", True), ("evaluation", False)):
        part = df.filter(pl.col("tuning") == flag)
        out[name] = (part.filter(pl.col("q") <= 0.9), part.filter(pl.col("q") > 0.9))
    return out


def rmse(pred: np.ndarray, test: pl.DataFrame) -> float:
    return float(np.sqrt(np.mean((pred - test["rating"].to_numpy()) ** 2)))


def scores(model, train: pl.DataFrame, test: pl.DataFrame) -> dict[str, float]:
    pairs = test.select("user", "item")
    out = {m: rmse(model.predict(train, pairs, method=m), test) for m in METHODS}
    out["private global mean"] = rmse(np.full(test.height, model.global_mean), test)
    return out


def trials(train: pl.DataFrame, test: pl.DataFrame, eps: float, n: int,
           **params: float) -> dict[str, np.ndarray]:
    runs = [scores(fit_recommender(train, n_items=N_ITEMS, bounds=BOUNDS, epsilon=eps,
                                   **params), train, test) for _ in range(n)]
    return {k: np.array([r[k] for r in runs]) for k in runs[0]}


def tune(train: pl.DataFrame, test: pl.DataFrame, n: int) -> None:
    """The worst method's mean RMSE at ε = 1 and 8 on the tuning users, per setting."""
    grid = {"guard": [1.0, 2.0, 3.0, 5.0], "beta_item": [1.0, 10.0],
            "noise_shrinkage": [2.0, 10.0]}
    for values in itertools.product(*grid.values()):
        params = dict(zip(grid, values, strict=True))
        worst = [max(v.mean() for k, v in trials(train, test, eps, n, **params).items()
                     if k in METHODS) for eps in EPSILONS]
        print(params, " ".join(f"ε={e}: {w:.4f}" for e, w in zip(EPSILONS, worst,
                                                               strict=True)), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--tune", action="store_true")
    args = ap.parse_args()
    parts = splits()
    if args.tune:
        tune(*parts["tuning"], n=2)
        return
    t0 = time.time()
    train, test = parts["evaluation"]
    rows = [("training mean (not private)", "-",
             rmse(np.full(test.height, train["rating"].mean()), test), 0.0)]
    exact = nonprivate_recommender(train, n_items=N_ITEMS, bounds=BOUNDS, kind="laplace")
    rows += [(f"non-private model, {m}", "∞", v, 0.0)
             for m, v in scores(exact, train, test).items() if m in METHODS]
    ratios = []
    for eps in EPSILONS:
        res = trials(train, test, eps, args.trials)
        rows += [(name, str(eps), v.mean(), v.std()) for name, v in res.items()]
        g = res["private global mean"].mean()
        ratios += [(m, eps, res[m].mean() / g) for m in METHODS]
    lines = ["# The recommender's floor on MovieLens 100K, users held out", "",
             f"Evaluation users only (two thirds of the users, never used to choose a "
             f"default); each user's ratings split 90/10. {args.trials} trials per private "
             "row (fresh noise, mean ± std). Pure ε-DP (Laplace), privacy unit a user, the "
             f"defaults of `fit_recommender`. Run time {time.time() - t0:.0f} s "
             "(`python bench/recommend_floor.py`).", "",
             "| model | ε | test RMSE | ± std |", "|---|---|---|---|"]
    lines += [f"| {n} | {e} | {v:.4f} | {s:.4f} |" for n, e, v, s in rows]
    lines += ["", "RMSE ÷ the private global mean's at the same ε:", "",
              "| method | ε | ratio |", "|---|---|---|"]
    lines += [f"| {m} | {e} | {r:.3f} |" for m, e, r in ratios]
    text = "\n".join(lines) + "\n"
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "recommend_floor.md").write_text(text)


if __name__ == "__main__":
    main()
