"""PCA and k-means on UCI Adult's 5 numeric columns (issue 8), beside diffprivlib.

    python bench/learn_pca_kmeans.py [--trials 10] [--no-peers]

Setup as bench/learn.py: features scaled by their declared bounds to [−1, 1]; PCA(3, ε = 1,
δ = 1e-6) → LogisticRegression(ε = 2); k-means k = 5, ε = 1, WCSS ÷ scikit-learn's
(n_init = 10) on the training split. diffprivlib runs in /work/peers-venv (subprocess).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from learn import LOWER, PEERS_PYTHON, UPPER, arrays  # noqa: E402

from dpkit.learn import PCA, KMeans, LogisticRegression  # noqa: E402

KMEANS: dict[str, dict[str, Any]] = {
    "KMeans lloyd, sphere_packing, T=5 (bench/learn.py)": {"max_iter": 5},
    "KMeans lloyd, grid start (ε/2), T=3": {"init": "grid", "max_iter": 3},
    "KMeans sample_and_aggregate m=1000, grid start, T=1": {
        "method": "sample_and_aggregate", "init": "grid", "max_iter": 1},
    "KMeans sample_and_aggregate m=1000, sphere_packing, T=1": {
        "method": "sample_and_aggregate", "max_iter": 1},
}

PEER_CODE = r"""
import json, sys, time, warnings
import numpy as np
import diffprivlib.models as dpl
from sklearn.cluster import KMeans
warnings.simplefilter("ignore")
f = np.load(sys.argv[1]); z, zt, y, yt = f["z"], f["zt"], f["y"], f["yt"]
trials = int(sys.argv[3]); rows = []
one = (-np.ones(z.shape[1]), np.ones(z.shape[1]))
base = KMeans(5, n_init=10, random_state=0).fit(z).inertia_
for trial in range(trials):
    t0 = time.perf_counter()
    pca = dpl.PCA(3, epsilon=1.0, data_norm=np.sqrt(z.shape[1]), bounds=one).fit(z)
    t1 = time.perf_counter()
    m = dpl.LogisticRegression(epsilon=2.0, data_norm=np.sqrt(z.shape[1])).fit(pca.transform(z), y)
    rows.append({"system": "diffprivlib", "model": "PCA → LogisticRegression", "epsilon": 3.0,
                 "trial": trial, "seconds": time.perf_counter() - t0, "pca_seconds": t1 - t0,
                 "accuracy": float((m.predict(pca.transform(zt)) == yt).mean())})
    t0 = time.perf_counter()
    c = dpl.KMeans(5, epsilon=1.0, bounds=one).fit(z).cluster_centers_
    w = float(((z - c[((z[:, None] - c[None]) ** 2).sum(2).argmin(1)]) ** 2).sum())
    rows.append({"system": "diffprivlib", "model": "KMeans", "epsilon": 1.0, "trial": trial,
                 "seconds": time.perf_counter() - t0, "wcss_ratio": w / base})
json.dump(rows, open(sys.argv[2], "w"))
"""


def _scaled(a: np.ndarray) -> np.ndarray:
    return (np.clip(a, LOWER, UPPER) - (LOWER + UPPER) / 2) / ((UPPER - LOWER) / 2)


def run_pca_kmeans(trials: int) -> list[dict]:
    """dpkit rows in bench/learn.py's format (PCA rows also carry ``pca_seconds``)."""
    from sklearn.cluster import KMeans as SKMeans

    x, y, xt, yt = arrays()
    z, zt = _scaled(x), _scaled(xt)
    base = SKMeans(5, n_init=10, random_state=0).fit(z).inertia_
    rows: list[dict] = []
    for trial in range(trials):
        t0 = time.perf_counter()
        pca = PCA(3, 1.0, 1e-6, bounds=(-1, 1)).fit(z)
        t1 = time.perf_counter()
        lr = LogisticRegression(2.0, data_norm=np.sqrt(z.shape[1]), classes=[0, 1], C=0.05,
                                intercept_scaling=0.3).fit(pca.transform(z), y)
        rows.append({"system": "dpkit", "model": "PCA → LogisticRegression", "epsilon": 3.0,
                     "trial": trial, "seconds": time.perf_counter() - t0,
                     "pca_seconds": t1 - t0,
                     "accuracy": float((lr.predict(pca.transform(zt)) == yt).mean())})
        for name, kwargs in KMEANS.items():
            t0 = time.perf_counter()
            model = KMeans(5, 1.0, bounds=(-1, 1), **kwargs).fit(z)
            rows.append({"system": "dpkit", "model": name, "epsilon": 1.0, "trial": trial,
                         "seconds": time.perf_counter() - t0,
                         "wcss_ratio": model.inertia(z) / base})
    return rows


def run_peers(trials: int) -> list[dict]:
    if not PEERS_PYTHON.exists():
        return []
    x, y, xt, yt = arrays()
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "d.npz", Path(tmp) / "o.json"
        np.savez(data, z=_scaled(x), zt=_scaled(xt), y=y, yt=yt)
        subprocess.run([str(PEERS_PYTHON), "-c", PEER_CODE, str(data), str(out), str(trials)],
                       check=True)
        return list(json.loads(out.read_text()))


def table(rows: list[dict]) -> list[str]:
    lines = ["| system | model | mean | worst | median s | median PCA-fit s |",
             "|---|---|---:|---:|---:|---:|"]
    for system, model in dict.fromkeys((r["system"], r["model"]) for r in rows):
        sel = [r for r in rows if r["system"] == system and r["model"] == model]
        if "accuracy" in sel[0]:
            v = [r["accuracy"] for r in sel]
            mean, worst = f"{np.mean(v):.2%}", f"{np.min(v):.2%}"
        else:
            v = [r["wcss_ratio"] for r in sel]
            mean, worst = f"{np.mean(v):.3f}", f"{np.max(v):.3f}"
        pca = (f"{np.median([r['pca_seconds'] for r in sel]):.4f}" if "pca_seconds" in sel[0]
               else "—")
        lines.append(f"| {system} | {model} | {mean} | {worst} | "
                     f"{np.median([r['seconds'] for r in sel]):.3f} | {pca} |")
    return lines


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    rows = run_pca_kmeans(args.trials)
    if not args.no_peers:
        rows += run_peers(args.trials)
    print(f"{args.trials} trials; accuracy: mean (worst = min); k-means: WCSS ratio mean "
          "(worst = max)\n")
    print("\n".join(table(rows)))
