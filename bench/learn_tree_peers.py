"""dpkit's tree models and LinearRegression beside diffprivlib and non-private scikit-learn
on UCI Adult (issue 8: fit time ≤ 2× diffprivlib's, accuracy beside it). Same published
train/test split, same rows for every system, ε ∈ {0.1, 1}.

    python bench/learn_tree_peers.py [--trials 10]

- "RandomForest (11 columns)": run_forest's rows — 5 numeric columns
  (capital-gain and capital-loss as log(1 + x), a public transform) and workclass,
  marital-status, occupation, relationship, race, sex as codes; declared bounds; T = 50
  trees of depth D = 10 for dpkit, diffprivlib and scikit-learn alike. The rows are
  bench/learn_trees.py's ``arrays()`` without its education and native-country columns
  (same category lists, same codes as run_forest's encoding).
- "DecisionTree (diffprivlib)" / "DecisionTree (non-private)": bench/learn_trees.py's rows
  (5 numeric + 8 categorical codes) and bounds, depth 4 as dpkit's DecisionTree rows there.
  diffprivlib's tree is a random tree (its forest's building block), not DiffP-C4.5, so it
  gets its own table row; its time is the reference for dpkit's "DecisionTree (…)" rows.
- "LinearRegression (hours-per-week)": hours-per-week from age, education-num,
  log(1 + capital-gain), log(1 + capital-loss); declared bounds the UCI ranges of
  bench/learn.py (X: [17, 1, 0, 0] … [90, 16, 99999, 4356], capital columns log1p'd; y:
  [1, 99]). Rows carry "rmse" (test split) instead of "accuracy"; dpkit's default ridge
  α = 1, diffprivlib's defaults.

Seconds are fit + predict, as bench/learn.py and bench/learn_trees.py time dpkit. The
peers run in their own virtualenv (bench/peers/learn_trees_peers.py; /work/peers-venv).
``run_tree_peers`` returns the peer rows and dpkit's regression rows; the ``__main__``
also runs run_forest's and bench/learn_trees.py's run_trees for dpkit's
tree rows and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from learn_trees import CATEGORICAL, NUMERIC, arrays  # noqa: E402

from dpkit.learn import LinearRegression  # noqa: E402

HERE = Path(__file__).parent
PEERS_PYTHON = Path("/work/peers-venv/bin/python")
EPSILONS = (0.1, 1.0)
FOREST_CATEGORICAL = ["workclass", "marital-status", "occupation", "relationship", "race",
                      "sex"]
N_TREES, FOREST_DEPTH, TREE_DEPTH = 50, 10, 4  # run_forest; learn_trees
REGRESSION = "LinearRegression (hours-per-week)"
# regression features: age, education-num, capital-gain, capital-loss (log1p'd); target
# hours-per-week; declared bounds as bench/learn.py's LOWER / UPPER
R_LOWER = np.array([17, 1, 0, 0], dtype=float)
R_UPPER = np.array([90, 16, np.log1p(99999), np.log1p(4356)])
RY_BOUNDS = (1.0, 99.0)


def forest_arrays(x, xt, bounds):
    """The random forest's 11 columns (run_forest's) out of
    bench/learn_trees.py's arrays."""
    keep = list(range(len(NUMERIC))) + [len(NUMERIC) + CATEGORICAL.index(c)
                                        for c in FOREST_CATEGORICAL]
    return x[:, keep], xt[:, keep], (bounds[0][keep], bounds[1][keep])


def regression_arrays(x, xt):
    """(X, y, X_test, y_test): hours-per-week (column 4) from columns 0-3, already
    log1p'd by arrays()."""
    return x[:, :4], x[:, 4], xt[:, :4], xt[:, 4]


def run_forest(epsilons, trials) -> list[dict]:
    """Random decision trees (T = 50, D = 10) on the 5 numeric columns (capital-gain and
    capital-loss as log(1 + x), a public transform) and 6 categorical columns as codes
    (bench/learn_trees.py's encoding without education and native-country; the category
    lists are read off the data there: a benchmark input, UCI publishes them)."""
    from learn_trees import arrays as tree_arrays

    from dpkit.learn import RandomForestClassifier

    tx, y, txt, yt, _, tree_bounds = tree_arrays()
    x, xt, (lower, upper) = forest_arrays(tx, txt, tree_bounds)
    rows = []
    for trial in range(trials):
        for eps in epsilons:
            t0 = time.perf_counter()
            model = RandomForestClassifier(50, 10, eps, bounds=(lower, upper), classes=[0, 1])
            pred = model.fit(x, y).predict(xt)
            rows.append({"system": "dpkit", "model": "RandomForest (11 columns)",
                         "epsilon": eps, "trial": trial, "seconds": time.perf_counter() - t0,
                         "accuracy": float((pred == yt).mean())})
    return rows


def run_dpkit_regression(trials: int) -> list[dict]:
    x, _, xt, _, _, _ = arrays()
    rx, ry, rxt, ryt = regression_arrays(x, xt)
    rows = []
    for trial in range(trials):
        for eps in EPSILONS:
            t0 = time.perf_counter()
            model = LinearRegression(eps, bounds=(R_LOWER, R_UPPER), y_bounds=RY_BOUNDS)
            pred = model.fit(rx, ry).predict(rxt)
            rows.append({"system": "dpkit", "model": REGRESSION, "epsilon": eps,
                         "trial": trial, "seconds": time.perf_counter() - t0,
                         "rmse": float(np.sqrt(np.mean((pred - ryt) ** 2)))})
    return rows


def run_tree_peers(trials: int) -> list[dict]:
    """diffprivlib and scikit-learn rows (trees, forest, regression) and dpkit's
    LinearRegression rows; model names as dpkit's rows so that they share a table row."""
    rows = run_dpkit_regression(trials)
    if not PEERS_PYTHON.exists():
        print(f"peers skipped: {PEERS_PYTHON} not found")
        return rows
    x, y, xt, yt, _, bounds = arrays()
    fx, fxt, fb = forest_arrays(x, xt, bounds)
    rx, ry, rxt, ryt = regression_arrays(x, xt)
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "adult.npz", Path(tmp) / "peers.json"
        np.savez(data, y=y, yt=yt, fx=fx, fxt=fxt, flo=fb[0], fhi=fb[1], tx=x, txt=xt,
                 tlo=bounds[0], thi=bounds[1], rx=rx, ry=ry, rxt=rxt, ryt=ryt, rlo=R_LOWER,
                 rhi=R_UPPER, rylo=RY_BOUNDS[0], ryhi=RY_BOUNDS[1], n_trees=N_TREES,
                 forest_depth=FOREST_DEPTH, tree_depth=TREE_DEPTH)
        subprocess.run([str(PEERS_PYTHON), str(HERE / "peers" / "learn_trees_peers.py"),
                        "--data", str(data), "--out", str(out), "--trials", str(trials),
                        "--epsilons", ",".join(map(str, EPSILONS))], check=True)
        return rows + json.loads(out.read_text())


def summary(rows: list[dict]) -> list[str]:
    """Markdown table: per (model, ε) and system, mean metric (worst trial; median seconds),
    and dpkit's median seconds ÷ diffprivlib's (for dpkit's DecisionTree methods: ÷
    diffprivlib's DecisionTree at the same ε)."""
    systems = ["dpkit", "diffprivlib", "scikit-learn"]
    lines = ["| model | ε | " + " | ".join(systems) + " | dpkit ÷ diffprivlib time |",
             "|---|---:|" + "---:|" * (len(systems) + 1)]
    keys = dict.fromkeys((r["model"], r["epsilon"]) for r in rows
                         if r["system"] != "scikit-learn")
    keys.update(dict.fromkeys((r["model"], None) for r in rows
                              if not any(m == r["model"] for m, _ in keys)))

    def median_seconds(system, model, eps):
        sel = [r["seconds"] for r in rows if r["system"] == system and r["model"] == model
               and r["epsilon"] == eps]
        return float(np.median(sel)) if sel else None

    for model, eps in sorted(keys, key=lambda k: (k[0], k[1] is None, k[1] or 0)):
        cells = []
        for s in systems:
            sel = [r for r in rows if r["system"] == s and r["model"] == model
                   and (r["epsilon"] == eps or s == "scikit-learn")]
            if not sel:
                cells.append("—")
                continue
            key = "rmse" if "rmse" in sel[0] else "accuracy"
            vals = np.array([r[key] for r in sel])
            sec = float(np.median([r["seconds"] for r in sel]))
            if key == "rmse":
                cells.append(f"RMSE {vals.mean():.2f} (worst {vals.max():.2f}; {sec:.3f} s)")
            else:
                cells.append(f"{vals.mean():.2%} (worst {vals.min():.2%}; {sec:.3f} s)")
        ours = median_seconds("dpkit", model, eps)
        peer_model = "DecisionTree (diffprivlib)" if model.startswith("DecisionTree") else model
        theirs = median_seconds("diffprivlib", peer_model, eps)
        ratio = f"{ours / theirs:.2f}×" if ours and theirs else "—"
        label = "—" if eps is None else f"{eps:g}"
        lines.append(f"| {model} | {label} | " + " | ".join(cells) + f" | {ratio} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--out", help="also write every row as JSON here")
    args = ap.parse_args()
    from learn_trees import run_trees

    rows = run_forest(list(EPSILONS), args.trials) + run_trees(args.trials)
    rows += run_tree_peers(args.trials)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    _, _, xt, yt, _, _ = arrays()
    ryt = xt[:, 4]  # hours-per-week
    print(f"{args.trials} trials; cells: mean test accuracy or RMSE (worst trial; median fit "
          "+ predict seconds); scikit-learn is non-private (same in every ε row).\n")
    print("\n".join(summary(rows)))
    print(f"\nMajority class on the test split: {max(yt.mean(), 1 - yt.mean()):.2%}; "
          f"hours-per-week test standard deviation (RMSE of the constant mean): "
          f"{ryt.std():.2f}.")


if __name__ == "__main__":
    main()
