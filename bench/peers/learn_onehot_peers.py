"""Peer side of bench/learn_onehot.py: diffprivlib's LogisticRegression (objective
perturbation with the vector mechanism, after Chaudhuri, Monteleoni & Sarwate 2011) and
non-private scikit-learn on the arrays bench/learn_onehot.py wrote (same rows, same split).

    /work/peers-venv/bin/python bench/peers/learn_onehot_peers.py --data d.npz --out o.json

One-hot setup: rows already mapped (numeric columns to [−1, 1] by their declared bounds,
indicators 0/1), ``data_norm`` = √13 (5 numeric + 8 groups, each coordinate ≤ 1), the bound
those rows satisfy. 5-numeric setup: bench/learn.py's peers' rows (scaled to [−1, 1] and
divided by √5), ``data_norm`` = 1. diffprivlib's default C = 1; seconds are fit time only.
"""
import json
import time
import warnings

import numpy as np
from _learn_common import peer_args


def main():
    args = peer_args()
    import diffprivlib.models as dpl
    from sklearn.linear_model import LogisticRegression

    z = np.load(args.data)
    setups = {"one-hot": (z["x"], z["y"], z["xt"], z["yt"], float(z["data_norm"])),
              "5 numeric": (z["nx"], z["ny"], z["nxt"], z["nyt"], 1.0)}
    warnings.simplefilter("ignore")
    rows = []

    def record(system, model, eps, trial, estimator, x, y, xt, yt):
        t0 = time.perf_counter()
        m = estimator.fit(x, y)
        seconds = time.perf_counter() - t0
        rows.append({"system": system, "model": model, "epsilon": eps, "trial": trial,
                     "seconds": seconds, "accuracy": float((m.predict(xt) == yt).mean())})

    for trial in range(args.trials):
        for setup, (x, y, xt, yt, norm) in setups.items():
            record("scikit-learn", f"LogisticRegression ({setup}, non-private)", None, trial,
                   LogisticRegression(max_iter=2000), x, y, xt, yt)
            for eps in [float(e) for e in args.epsilons.split(",")]:
                record("diffprivlib", f"LogisticRegression ({setup}, objective)", eps, trial,
                       dpl.LogisticRegression(epsilon=eps, data_norm=norm), x, y, xt, yt)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
