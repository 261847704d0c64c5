"""dpkit.learn on UCI Adult (issue 8's goals), beside diffprivlib and non-private
scikit-learn in the same run: same published train/test split, 10 trials each.

    python bench/learn.py [--trials 10]

Features: the 5 numeric columns (age, education-num, capital-gain, capital-loss,
hours-per-week) with declared bounds (the UCI documentation's ranges, not the data's);
label income > 50K. Also, from bench/learn_*.py: decision trees (learn_trees), logistic
regression on all attributes one-hot (learn_onehot, with its diffprivlib peer), frequent
itemsets by TF and PrivBasis (learn_privbasis). Writes learn.{md,json} to bench/out/
(bench/results/ with --update-results). Adult ships with dpkit; the mushroom itemsets need
../shared/data (skipped without it). The peers run in their own virtualenv (PEERS.md;
/work/peers-venv by default).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from outdir import TRACKED, add_flag, results_dir

from dpkit.datasets import load_adult
from dpkit.learn import PCA, GaussianNB, KMeans, LogisticRegression

HERE = Path(__file__).parent
RESULTS = TRACKED  # where a run writes: main() points it at bench/out unless asked
PEERS_PYTHON = Path("/work/peers-venv/bin/python")
COLUMNS = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
LOWER = np.array([17, 1, 0, 0, 1], dtype=float)
UPPER = np.array([90, 16, 99999, 4356, 99], dtype=float)
MAJORITY = None


def arrays():
    tr, te = load_adult("train"), load_adult("test")
    x = tr.select(COLUMNS).to_numpy().astype(float)
    xt = te.select(COLUMNS).to_numpy().astype(float)
    y = (tr["income"].to_numpy() == ">50K").astype(int)
    yt = (te["income"].to_numpy() == ">50K").astype(int)
    return x, y, xt, yt


def run_dpkit(x, y, xt, yt, epsilons, trials):
    rows = []
    for trial in range(trials):
        for eps in epsilons:
            for name, make in (
                ("GaussianNB", lambda e: GaussianNB(e, bounds=(LOWER, UPPER), classes=[0, 1])),
                ("LogisticRegression", lambda e: LogisticRegression(  # auto: functional
                    e, bounds=(LOWER, UPPER), classes=[0, 1])),
            ):
                t0 = time.perf_counter()
                pred = make(eps).fit(x, y).predict(xt)
                rows.append({"system": "dpkit", "model": name, "epsilon": eps, "trial": trial,
                             "seconds": time.perf_counter() - t0,
                             "accuracy": float((pred == yt).mean())})
    from sklearn.cluster import KMeans as SKMeans

    z = (np.clip(x, LOWER, UPPER) - (LOWER + UPPER) / 2) / ((UPPER - LOWER) / 2)
    base = SKMeans(5, n_init=10, random_state=0).fit(z).inertia_
    zt = (np.clip(xt, LOWER, UPPER) - (LOWER + UPPER) / 2) / ((UPPER - LOWER) / 2)
    for trial in range(trials):
        # PCA (3 components, ε = 1, δ = 1e-6) → logistic regression (ε = 2)
        t0 = time.perf_counter()
        pca = PCA(3, 1.0, 1e-6, bounds=(-1, 1)).fit(z)
        lr = LogisticRegression(2.0, data_norm=np.sqrt(z.shape[1]), classes=[0, 1], C=0.05,
                                intercept_scaling=0.3).fit(pca.transform(z), y)
        rows.append({"system": "dpkit", "model": "PCA → LogisticRegression", "epsilon": 3.0,
                     "trial": trial, "seconds": time.perf_counter() - t0,
                     "accuracy": float((lr.predict(pca.transform(zt)) == yt).mean())})
        t0 = time.perf_counter()
        model = KMeans(5, 1.0, bounds=(-1, 1), max_iter=3).fit(z)  # init="auto": grid start
        rows.append({"system": "dpkit", "model": "KMeans", "epsilon": 1.0, "trial": trial,
                     "seconds": time.perf_counter() - t0,
                     "wcss_ratio": model.inertia(z) / base})
    return rows


ONEHOT_NAMES = {
    "LogisticRegression (one-hot, functional)": "LogisticRegression, all attributes one-hot",
    "LogisticRegression (one-hot, objective)": "LogisticRegression, all attributes one-hot",
    "LogisticRegression (one-hot, non-private)": "LogisticRegression, all attributes one-hot",
    "LogisticRegression (one-hot, output)": "LogisticRegression, one-hot, output perturbation",
    "LogisticRegression (5 numeric, output)": "LogisticRegression, output perturbation",
}


def run_more(trials: int) -> list[dict]:
    """The other issue-8 benches (bench/learn_*.py): decision trees, logistic regression on
    all attributes one-hot beside diffprivlib, PrivBasis and TF itemsets. One-hot rows get
    one name per task so that dpkit's functional mechanism, diffprivlib's objective
    perturbation and scikit-learn share a table row."""
    from learn_onehot import run_onehot
    from learn_privbasis import run_privbasis, run_tf
    from learn_tree_peers import run_tree_peers
    from learn_trees import run_trees

    rows = run_trees(trials) + run_tree_peers(trials)
    for r in run_onehot(trials):
        if r["model"] in ONEHOT_NAMES:  # the 5-numeric peers and output rows are above
            rows.append({**r, "model": ONEHOT_NAMES[r["model"]]})
    itemsets = run_tf(min(trials, 5)) + run_privbasis(min(trials, 5))
    return rows + itemsets


def run_peers(x, y, xt, yt, epsilons, trials):
    if not PEERS_PYTHON.exists():
        print(f"peers skipped: {PEERS_PYTHON} not found")
        return []
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "adult.npz", Path(tmp) / "peers.json"
        np.savez(data, x=x, y=y, xt=xt, yt=yt, lo=LOWER, hi=UPPER)
        subprocess.run([str(PEERS_PYTHON), str(HERE / "peers" / "learn_peers.py"), "--data",
                        str(data), "--out", str(out), "--trials", str(trials), "--epsilons",
                        ",".join(map(str, epsilons))], check=True)
        return json.loads(out.read_text())


def table(rows, majority):
    keys = sorted({(r["model"], r["epsilon"] if r["epsilon"] is not None else -1)
                   for r in rows if "accuracy" in r})
    systems = ["dpkit", "diffprivlib", "scikit-learn"]
    lines = ["| model | ε | " + " | ".join(systems) + " | dpkit fit time ÷ diffprivlib's |",
             "|---|---:|" + "---:|" * (len(systems) + 1)]
    for model, eps in keys:
        if eps == -1:
            continue
        cells, times = [], {}
        for s in systems:
            sel = [r for r in rows if r["system"] == s and r["model"] == model and (
                r["epsilon"] == eps or s == "scikit-learn") and "accuracy" in r]
            if not sel:
                cells.append("—")
                continue
            acc = [r["accuracy"] for r in sel]
            times[s] = float(np.median([r["seconds"] for r in sel]))
            cells.append(f"{np.mean(acc):.2%} (min {np.min(acc):.2%}; {times[s]:.3f} s)")
        ratio = (f"{times['dpkit'] / times['diffprivlib']:.2f}×"
                 if "dpkit" in times and "diffprivlib" in times else "—")
        lines.append(f"| {model} | {eps:g} | " + " | ".join(cells) + f" | {ratio} |")
    lines.append("")
    lines.append(f"Majority class on the test split: {majority:.2%}.")
    lines += ["", "k-means (k = 5, ε = 1) on the 5 features scaled by their declared bounds to "
              "[−1, 1]: within-cluster sum of squares ÷ scikit-learn's (n_init = 10) on the "
              "training split; mean (worst; median seconds).", "",
              "| system | WCSS ratio |", "|---|---:|"]
    for s in ("dpkit", "diffprivlib"):
        r = [v["wcss_ratio"] for v in rows if v["system"] == s and "wcss_ratio" in v]
        t = [v["seconds"] for v in rows if v["system"] == s and "wcss_ratio" in v]
        if r:
            lines.append(f"| {s} | {np.mean(r):.3f} (worst {np.max(r):.3f}; "
                         f"{np.median(t):.3f} s) |")
    lines += ["", "Linear regression of hours-per-week on age, education-num and log(1 + "
              "capital gain/loss), declared bounds, default settings: test RMSE, mean (worst; "
              "median fit + predict seconds). Predicting the mean: RMSE 12.48.", "",
              "| ε | " + " | ".join(systems) + " |", "|---:|" + "---:|" * len(systems)]
    regression = [r for r in rows if "rmse" in r]
    for eps in sorted({r["epsilon"] for r in regression if r["epsilon"] is not None}):
        cells = []
        for s in systems:
            sel = [r["rmse"] for r in regression if r["system"] == s and (
                r["epsilon"] == eps or s == "scikit-learn")]
            sec = [r["seconds"] for r in regression if r["system"] == s and (
                r["epsilon"] == eps or s == "scikit-learn")]
            cells.append(f"{np.mean(sel):.2f} (worst {np.max(sel):.2f}; "
                         f"{np.median(sec):.3f} s)" if sel else "—")
        lines.append(f"| {eps:g} | " + " | ".join(cells) + " |")
    lines += ["", "Top-50 frequent itemsets at ε = 1 (no peer has them): false-negative rate "
              "against the true top-50 of any size and of ≤ 3 items, mean (worst; median "
              "seconds). TF (Bhaskar et al.) enumerates ≤ 3 items; PrivBasis any size, or ≤ 3 "
              "with max3.", "",
              "| data, method | FNR, any size | FNR, ≤ 3 items | seconds |",
              "|---|---:|---:|---:|"]

    def fnr_cell(sel, key):
        vals = [v[key] for v in sel if key in v]
        return f"{np.mean(vals):.3f} (worst {np.max(vals):.3f})" if vals else "—"

    for model in sorted({v["model"] for v in rows if "fnr" in v}):
        sel = [v for v in rows if v.get("model") == model]
        max3 = model.endswith("max3") or not model.endswith("privbasis")
        any_key, three_key = ("fnr_all", "fnr") if max3 else ("fnr", "fnr_max3")
        lines.append(f"| {model.removeprefix('itemsets ')} | {fnr_cell(sel, any_key)} | "
                     f"{fnr_cell(sel, three_key)} | "
                     f"{np.median([v['seconds'] for v in sel]):.2f} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--epsilons", default="0.1,1")
    add_flag(ap)
    args = ap.parse_args()
    global RESULTS
    RESULTS = results_dir(args.update_results)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    x, y, xt, yt = arrays()
    rows = run_dpkit(x, y, xt, yt, epsilons, args.trials)
    from learn_tree_peers import run_forest

    rows += run_forest(epsilons, args.trials)
    rows += run_more(args.trials)
    rows += run_peers(x, y, xt, yt, epsilons, args.trials)
    majority = float(max(yt.mean(), 1 - yt.mean()))
    (RESULTS / "learn.json").write_text(json.dumps(rows, indent=1))
    lines = ["# dpkit.learn on UCI Adult", "",
             "Reproduce: `python bench/learn.py` (peers: bench/peers/learn_peers.py in the "
             "peers' virtualenv, PEERS.md).", "",
             f"Measured {time.strftime('%Y-%m-%d')} on 2 cores; {args.trials} trials; the 5 "
             "numeric columns with declared bounds unless the row says otherwise (decision "
             "trees: 13 columns, categorical as codes; random forest: 11; one-hot: all "
             "attributes); cells: mean test accuracy (worst trial; median fit + predict "
             "seconds). scikit-learn is non-private (same in every ε row). LogisticRegression "
             "is dpkit's default (the functional mechanism with declared bounds), beside "
             "diffprivlib's objective perturbation.", "", *table(rows, majority)]
    (RESULTS / "learn.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
