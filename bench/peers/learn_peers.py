"""Peer benchmark: diffprivlib's GaussianNB and LogisticRegression and scikit-learn's
non-private models on the arrays bench/learn.py wrote (same splits, same trials).

    /work/peers-venv/bin/python bench/peers/learn_peers.py --data adult.npz --out out.json

diffprivlib gets the same declared bounds (GaussianNB ``bounds=``) and data norm
(LogisticRegression ``data_norm=``, features centred and scaled as dpkit's ``bounds=``
does, so both see the same rows); its default regularisation (C = 1).
"""
import json
import time
import warnings

import numpy as np
from _learn_common import peer_args


def main():
    args = peer_args()
    import diffprivlib.models as dpl
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB

    z = np.load(args.data)
    x, y, xt, yt, lo, hi = (z[k] for k in ("x", "y", "xt", "yt", "lo", "hi"))

    def scaled(a):
        return (np.clip(a, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2) / np.sqrt(a.shape[1])

    rows = []

    def record(system, model, eps, trial, t0, pred):
        rows.append({"system": system, "model": model, "epsilon": eps, "trial": trial,
                     "seconds": time.perf_counter() - t0, "accuracy": float((pred == yt).mean())})

    warnings.simplefilter("ignore")
    # k-means on the features scaled by their declared bounds to [−1, 1] (raw units would
    # be all capital-gain); WCSS relative to scikit-learn's (n_init=10)
    z = (np.clip(x, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2)
    base = KMeans(5, n_init=10, random_state=0).fit(z).inertia_

    def wcss(centres):
        return float(((z - centres[((z[:, None] - centres[None]) ** 2).sum(2).argmin(1)]) ** 2
                      ).sum())

    for trial in range(args.trials):
        # PCA (3 components, ε = 1) → logistic regression (ε = 2) on the scaled features
        t0 = time.perf_counter()
        pca = dpl.PCA(3, epsilon=1.0, data_norm=np.sqrt(z.shape[1]),
                      bounds=(-np.ones(z.shape[1]), np.ones(z.shape[1]))).fit(z)
        zt = (np.clip(xt, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2)
        m = dpl.LogisticRegression(epsilon=2.0, data_norm=np.sqrt(z.shape[1])).fit(
            pca.transform(z), y)
        record("diffprivlib", "PCA → LogisticRegression", 3.0, trial, t0,
               m.predict(pca.transform(zt)))
        t0 = time.perf_counter()
        m = dpl.KMeans(5, epsilon=1.0, bounds=(-np.ones(z.shape[1]), np.ones(z.shape[1])))
        m.fit(z)
        rows.append({"system": "diffprivlib", "model": "KMeans", "epsilon": 1.0,
                     "trial": trial, "seconds": time.perf_counter() - t0,
                     "wcss_ratio": wcss(m.cluster_centers_) / base})
        t0 = time.perf_counter()
        record("scikit-learn", "GaussianNB", None, trial, t0, GaussianNB().fit(x, y).predict(xt))
        t0 = time.perf_counter()
        m = LogisticRegression(max_iter=2000).fit(scaled(x), y)
        record("scikit-learn", "LogisticRegression", None, trial, t0, m.predict(scaled(xt)))
        for eps in [float(e) for e in args.epsilons.split(",")]:
            t0 = time.perf_counter()
            m = dpl.GaussianNB(epsilon=eps, bounds=(lo, hi)).fit(x, y)
            record("diffprivlib", "GaussianNB", eps, trial, t0, m.predict(xt))
            t0 = time.perf_counter()
            m = dpl.LogisticRegression(epsilon=eps, data_norm=1.0).fit(scaled(x), y)
            record("diffprivlib", "LogisticRegression", eps, trial, t0, m.predict(scaled(xt)))
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
