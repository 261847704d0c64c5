"""Peer side of bench/learn_tree_peers.py: diffprivlib's RandomForestClassifier,
DecisionTreeClassifier and LinearRegression and scikit-learn's non-private counterparts on
the arrays bench/learn_tree_peers.py wrote (same rows, same published split, same trials).

    /work/peers-venv/bin/python bench/peers/learn_trees_peers.py --data d.npz --out o.json

- Forest: bench/learn_tree_peers.py's run_forest rows (5 numeric columns, capital columns log1p'd,
  6 categorical codes); diffprivlib gets the same declared ``bounds=`` and ``classes=`` and
  dpkit's T = 50 trees of depth D = 10 (diffprivlib's random trees after Fletcher & Islam,
  each record used by one tree, labels by permute-and-flip); scikit-learn the same T and D.
- Single tree: bench/learn_trees.py's rows (5 numeric + 8 categorical codes) and bounds,
  depth 4 as dpkit's bench; diffprivlib's DecisionTreeClassifier is its forest's random
  tree (a different algorithm from dpkit's DiffP-C4.5 / ID3 / SuLQ trees).
- LinearRegression: hours-per-week from age, education-num, log(1 + capital-gain),
  log(1 + capital-loss); ``bounds_X`` / ``bounds_y`` = the declared (UCI) ranges.

Seconds are fit + predict, as bench/learn.py and bench/learn_trees.py time dpkit.
"""
import json
import time
import warnings

import numpy as np
from _learn_common import peer_args


def main():
    args = peer_args()
    import diffprivlib.models as dpl
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LinearRegression
    from sklearn.tree import DecisionTreeClassifier

    z = np.load(args.data)
    y, yt = z["y"], z["yt"]
    n_trees, forest_depth, tree_depth = (int(z[k]) for k in ("n_trees", "forest_depth",
                                                             "tree_depth"))
    forest = (z["fx"], z["fxt"], (z["flo"], z["fhi"]))
    tree = (z["tx"], z["txt"], (z["tlo"], z["thi"]))
    rx, ry, rxt, ryt = z["rx"], z["ry"], z["rxt"], z["ryt"]
    r_bounds, ry_bounds = (z["rlo"], z["rhi"]), (float(z["rylo"]), float(z["ryhi"]))
    warnings.simplefilter("ignore")
    rows = []

    def classify(system, model, eps, trial, estimator, x, xt):
        t0 = time.perf_counter()
        pred = estimator.fit(x, y).predict(xt)
        rows.append({"system": system, "model": model, "epsilon": eps, "trial": trial,
                     "seconds": time.perf_counter() - t0,
                     "accuracy": float((pred == yt).mean())})

    def regress(system, eps, trial, estimator):
        t0 = time.perf_counter()
        pred = estimator.fit(rx, ry).predict(rxt)
        rows.append({"system": system, "model": "LinearRegression (hours-per-week)",
                     "epsilon": eps, "trial": trial, "seconds": time.perf_counter() - t0,
                     "rmse": float(np.sqrt(np.mean((pred - ryt) ** 2)))})

    for trial in range(args.trials):
        classify("scikit-learn", "RandomForest (11 columns)", None, trial,
                 RandomForestClassifier(n_trees, max_depth=forest_depth), *forest[:2])
        classify("scikit-learn", "DecisionTree (non-private)", None, trial,
                 DecisionTreeClassifier(max_depth=tree_depth), *tree[:2])
        regress("scikit-learn", None, trial, LinearRegression())
        for eps in [float(e) for e in args.epsilons.split(",")]:
            classify("diffprivlib", "RandomForest (11 columns)", eps, trial,
                     dpl.RandomForestClassifier(n_trees, epsilon=eps, bounds=forest[2],
                                                classes=[0, 1], max_depth=forest_depth),
                     *forest[:2])
            classify("diffprivlib", "DecisionTree (diffprivlib)", eps, trial,
                     dpl.DecisionTreeClassifier(tree_depth, epsilon=eps, bounds=tree[2],
                                                classes=[0, 1]), *tree[:2])
            regress("diffprivlib", eps, trial,
                    dpl.LinearRegression(epsilon=eps, bounds_X=r_bounds, bounds_y=ry_bounds))
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
