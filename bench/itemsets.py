"""Private top-50 frequent itemsets at real scale: TF, PrivBasis and SmartTrunc.

    python bench/itemsets.py                 # the report (default: 10 trials, ~10 min, 2 cores)
    python bench/itemsets.py --tune          # the held-out tuning of SmartTrunc's defaults
    python bench/itemsets.py --trials 3 --data chess,msnbc

Reports, for ε ∈ {0.1, 1}: the top-50 false-negative rate (share of the true top-50 missing
from the release; mean and worst over the trials), the median seconds of a call (from the
transactions as Python lists of items to the release: parsing included), and the peak
memory of a call (tracemalloc, one extra call; NumPy and SciPy buffers are traced) beside
the peak resident memory of the whole cell's process (data loading included).

Truth: the exact top-50 of any size (``exact_top_k_all``); TF (≤ 3 items) is scored against
it and, in brackets, against the top-50 of ≤ 3 items (its own task).

Data (reported; none of it was used to choose a default):

- ``chess``, ``mushroom``: FIMI (../shared/data/fimi/), 3,196 × 75 and 8,124 × 119.
- ``msnbc``: the 989,818 sessions of ../shared/data_new/msnbc/ (UCI MSNBC.com Anonymous
  Web Data, CC BY 4.0; used locally) as item sets: the distinct page categories (1 … 17)
  of each session.
- ``retail``: the retail-like generator below with the public seed ``BENCH_SEED``.

Held out for tuning (``--tune``; never reported as results): UCI Adult ("all" split, 8
categorical columns as ``column=value`` items), ``retail_like`` with seeds 1 and 2 (n and M
reduced), and ``dense_like`` with seeds 1 and 2.

Retail-like generator (:func:`retail_like`), benchmark input only (NumPy's generator with a
public seed; no release uses it): n = 88,162 transactions over M = 16,470 items (the sizes
of the FIMI retail set of Brijs et al. 1999). Lengths: 1 + NegBin(r = 2, mean 9.3), capped
at 76 (mean 10.3, standard deviation ≈ 7.2, a long right tail: retail's mean is 10.3 and its
longest basket 76). Items: each of a transaction's draws is item i with probability ∝
1/rank(i) (Zipf, exponent 1) over a fixed random permutation of the ids; repeated draws
collapse, so the most popular item is in ≈ 60% of the transactions (retail: 57%) and the
tail items in a handful.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from dpkit.learn.itemsets import (
    false_negative_rate,
    read_fimi,
    sparse_incidence,
    top_k_itemsets,
)
from dpkit.learn.privbasis import exact_top_k_all, privbasis
from dpkit.learn.smarttrunc import smarttrunc

HERE = Path(__file__).parent
SHARED = HERE.parent.parent / "shared"
FIMI = SHARED / "data" / "fimi"
MSNBC = SHARED / "data_new" / "msnbc" / "msnbc990928.seq.gz"
K = 50
EPSILONS = (0.1, 1.0)
BENCH_SEED = 20121001  # public: the retail-like benchmark input (PVLDB 6(1), Oct 2012)
REPORTED = ("chess", "mushroom", "msnbc", "retail")
TUNING = ("adult", "retail_like_1", "retail_like_2", "dense_like_1", "dense_like_2")
ADULT_COLUMNS = ["workclass", "education", "marital-status", "occupation", "relationship",
                 "race", "sex", "income"]

Data = tuple[list[list[Any]], list[Any]]


def retail_like(seed: int, n: int = 88_162, m: int = 16_470) -> Data:
    """Retail-like transactions (module docstring): lists of int item ids, and the ids."""
    g = np.random.default_rng(seed)  # benchmark input, public seed
    lengths = np.minimum(1 + g.negative_binomial(2, 2 / (2 + 9.3), n), 76)
    zipf = 1.0 / np.arange(1, m + 1)
    cum = np.cumsum(zipf / zipf.sum())
    draws = np.minimum(np.searchsorted(cum, g.random(int(lengths.sum()))), m - 1)
    ids = g.permutation(m)[draws]
    bounds = np.cumsum(lengths)[:-1]
    return [np.unique(t).tolist() for t in np.split(ids, bounds)], list(range(m))


def dense_like(seed: int, n: int = 3_000, m: int = 75) -> Data:
    """Dense correlated transactions (tuning only): three latent classes, item i present
    with probability clip(1 − 0.9·(i/m)^0.8 + N(0, 0.1) per class, 0.02, 0.999)."""
    g = np.random.default_rng(seed)
    base = 1 - 0.9 * (np.arange(m) / m) ** 0.8
    probs = np.clip(base[None, :] + g.normal(0, 0.1, (3, m)), 0.02, 0.999)
    cls = g.integers(0, 3, n)
    present = g.random((n, m)) < probs[cls]
    return [np.flatnonzero(r).tolist() for r in present], list(range(m))


def msnbc() -> Data:
    """MSNBC sessions as sets of page categories 1 … 17 (parsing only)."""
    with gzip.open(MSNBC, "rt") as f:
        lines = f.read().split("\n")[7:]
    return [sorted(set(map(int, line.split()))) for line in lines if line.strip()], \
        list(range(1, 18))


def adult() -> Data:
    from dpkit.datasets import load_adult
    from dpkit.learn.itemsets import transactions_from_table

    table = load_adult("all")
    tx = transactions_from_table(table, ADULT_COLUMNS)
    return tx, sorted({f"{c}={v}" for c in ADULT_COLUMNS for v in table[c].drop_nulls().unique()})


def load(name: str) -> Data:
    if name in ("chess", "mushroom"):
        tx = read_fimi(FIMI / f"{name}.dat")
        return tx, sorted({i for t in tx for i in t})
    if name == "msnbc":
        return msnbc()
    if name == "retail":
        return retail_like(BENCH_SEED)
    if name == "adult":
        return adult()
    kind, seed = name.rsplit("_", 1)
    if kind == "retail_like":
        return retail_like(int(seed), n=30_000, m=8_000)
    return dense_like(int(seed))


def methods(options: dict[str, Any] | None = None) -> dict[str, Callable[..., Any]]:
    opts = options or {}
    return {
        "TF (pruned, ≤ 3)": lambda tx, items, eps: top_k_itemsets(tx, items, K, eps,
                                                                   prune=True),
        "PrivBasis": lambda tx, items, eps: privbasis(tx, items, K, eps),
        "SmartTrunc": lambda tx, items, eps: smarttrunc(tx, items, K, eps, **opts),
    }


def _traced_peak(call: Callable[..., Any], *args: Any) -> int:
    """The peak of the memory traced (tracemalloc: Python objects, NumPy and SciPy buffers)
    during ``call(*args)``, in bytes."""
    tracemalloc.start()
    call(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def run_cell(name: str, trials: int, which: list[str], options: dict[str, Any],
             memory: bool = True) -> dict[str, Any]:
    """Every method × ε on one dataset, in this process."""
    t0 = time.perf_counter()
    tx, items = load(name)
    load_s = time.perf_counter() - t0
    truth = exact_top_k_all(tx, items, K)
    truth3 = exact_top_k_all(tx, items, K, max_size=3)
    rows = []
    for label, fit in methods(options).items():
        if label not in which:
            continue
        for eps in EPSILONS:
            fnr, fnr3, secs = [], [], []
            for _ in range(trials):
                t = time.perf_counter()
                out = fit(tx, items, eps)
                secs.append(time.perf_counter() - t)
                fnr.append(false_negative_rate(out.itemsets, truth))
                fnr3.append(false_negative_rate(out.itemsets, truth3))
            peak = peak_csr = None
            if memory:
                peak = _traced_peak(fit, tx, items, eps)
                peak_csr = _traced_peak(fit, sparse_incidence(tx, items), items, eps)
            rows.append({"data": name, "method": label, "epsilon": eps, "fnr": fnr,
                         "fnr3": fnr3, "seconds": float(np.median(secs)), "peak_bytes": peak,
                         "peak_csr_bytes": peak_csr})
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"data": name, "n": len(tx), "m": len(items), "load_seconds": load_s,
            "rss_bytes": rss, "rows": rows}


def in_subprocess(name: str, trials: int, which: list[str], options: dict[str, Any],
                  memory: bool = True) -> dict[str, Any]:
    """One dataset in a fresh process (its peak RSS is its own)."""
    spec = json.dumps({"name": name, "trials": trials, "which": which,
                       "options": {k: str(v) for k, v in options.items()}, "memory": memory})
    out = subprocess.run([sys.executable, __file__, "--cell", spec], capture_output=True,
                         text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cell_main(spec: str) -> None:
    args = json.loads(spec)
    options: dict[str, Any] = {k: v if k == "counting" else Fraction(v)
                               for k, v in args["options"].items() if k != "split"}
    if "split" in args["options"]:
        options["split"] = [Fraction(v) for v in args["options"]["split"].split(",")]
    print(json.dumps(run_cell(args["name"], args["trials"], args["which"], options,
                              args["memory"])))


def _fmt(values: list[float]) -> str:
    return f"{np.mean(values):.2f} ({np.max(values):.2f})"


def report(trials: int, data: list[str]) -> None:
    which = list(methods())
    cells = [in_subprocess(name, trials, which, {}) for name in data]
    print(f"Top-{K} frequent itemsets, {trials} trials per cell: FNR mean (worst) against the "
          "top-50 of any size [TF: against the top-50 of ≤ 3 items]; median seconds per call "
          "(from Python lists: parsing included); peak traced memory of one call from the "
          "lists and from a CSR incidence matrix (the method alone); the cell process's peak "
          "RSS (data loading and the truth included).\n")
    print("| data (n × M) | method | ε | FNR | seconds | peak MB (lists) | peak MB (CSR) | "
          "process RSS MB |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for cell in cells:
        for r in cell["rows"]:
            fnr = _fmt(r["fnr"])
            if r["method"].startswith("TF"):
                fnr += f" [{_fmt(r['fnr3'])}]"
            peak, peak_csr = ("–" if r[key] is None else f"{r[key] / 2**20:.0f}"
                              for key in ("peak_bytes", "peak_csr_bytes"))
            print(f"| {cell['data']} ({cell['n']:,} × {cell['m']:,}) | {r['method']} | "
                  f"{r['epsilon']:g} | {fnr} | {r['seconds']:.2f} | {peak} | {peak_csr} | "
                  f"{cell['rss_bytes'] / 2**20:.0f} |")
    print("\nload seconds (reading/generating the data, not in the timings): " + ", ".join(
        f"{c['data']} {c['load_seconds']:.1f}" for c in cells))


GRID = [{"noise_share": Fraction(s), "threshold": Fraction(t),
         "split": f"1/20,1/10,{f},1/20,1/10"}
        for s in ("1/10", "1/5") for t in ("7/20", "1/2", "7/10") for f in ("3/10", "2/5")]


def tune(trials: int) -> None:
    """SmartTrunc's (noise_share, threshold, split) over GRID, and the method choice
    (SmartTrunc against PrivBasis and against its own level-wise counting), on the tuning
    data only."""
    scores: dict[str, list[float]] = {}
    for name in TUNING:
        for options in GRID:
            cell = in_subprocess(name, trials, ["SmartTrunc"], options, memory=False)
            for r in cell["rows"]:
                key = ", ".join(f"{k}={v}" for k, v in options.items())
                scores.setdefault(key, []).append(float(np.mean(r["fnr"])))
                print(f"{name} ε={r['epsilon']:g} SmartTrunc({key}) "
                      f"FNR {_fmt(r['fnr'])}", flush=True)
        cell = in_subprocess(name, trials, ["PrivBasis"], {}, memory=False)
        for r in cell["rows"]:
            scores.setdefault("PrivBasis", []).append(float(np.mean(r["fnr"])))
            print(f"{name} ε={r['epsilon']:g} PrivBasis FNR {_fmt(r['fnr'])}", flush=True)
        cell = in_subprocess(name, trials, ["SmartTrunc"], {"counting": "levels"},
                             memory=False)
        for r in cell["rows"]:
            scores.setdefault("SmartTrunc, counting=levels", []).append(float(np.mean(r["fnr"])))
            print(f"{name} ε={r['epsilon']:g} SmartTrunc levels FNR {_fmt(r['fnr'])}",
                  flush=True)
    print("\n| configuration | mean FNR over tuning cells | worst cell |\n|---|---:|---:|")
    for key, vals in sorted(scores.items(), key=lambda kv: np.mean(kv[1])):
        print(f"| {key} | {np.mean(vals):.3f} | {np.max(vals):.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--data", default=",".join(REPORTED))
    parser.add_argument("--tune", action="store_true")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        _cell_main(args.cell)
    elif args.tune:
        tune(args.trials)
    else:
        report(args.trials, args.data.split(","))


if __name__ == "__main__":
    main()
