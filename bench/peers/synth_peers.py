"""Peer benchmark: smartnoise-synth (snsynth) MWEM, MST and AIM on UCI Adult.

For each method x epsilon x trial this fits the synthesizer on the integer-coded
Adult table, samples as many rows as the real data has, and measures

* seconds -- wall time of fit + sample,
* tv_2way -- mean total-variation distance over all 91 two-way marginals,
* tv_3way -- mean TV over the fixed 3-way workload given by --workload3,
* tv_2way_fixed, tv_3way_fixed (MST, AIM) -- the same for records re-drawn from the same
  fitted model with Private-PGM's sampler fixed (see _RandomTies),

where TV(p, q) = 0.5 * sum |p - q| between the normalised real and synthetic
count tables of a marginal.  Every column is declared categorical, so no budget
goes to preprocessing (preprocessor_eps=0).  MST and AIM are (eps, delta)-DP;
snsynth's MWEM takes no delta (pure eps-DP).

Run with the smartnoise venv (it needs snsynth and mbi), e.g.:

    /work/snsql-venv/bin/python bench/peers/synth_peers.py \
        --data /work/shared/data/private_pgm/adult.csv \
        --domain /work/shared/data/private_pgm/adult-domain.json \
        --workload3 workload3.json --epsilons 0.1,1 --trials 1 \
        --methods mwem,mst,aim --out results/synth_peers.json

Output: a JSON list of records, one per run (see `record` in main()).
"""
import argparse
import contextlib
import io
import itertools
import json
import time

import numpy as np
import pandas as pd

SYSTEM = "smartnoise-synth"

# Non-default constructor arguments per method (besides epsilon/delta); stored in
# each record's "params".
# * MWEM defaults: iterations = 10*ceil(log10(n)) = 50 per histogram,
#   q_count = 2*iterations, marginal_width = 3 (n > 10k), mult_weights_iterations = 20,
#   split_factor = None -> one histogram over all 14 columns (~1e19 cells), which
#   cannot be allocated.  split_factor=2 (7 histograms of consecutive column pairs)
#   fits but takes > 15 min on 2 cores (the capital-loss x hours-per-week histogram
#   alone, 9,900 cells, takes > 10 min), so the default here is split_factor=1: one
#   MWEM per column, columns sampled independently (--mwem-split-factor changes it).
# * MST has no tuning parameters.
# * AIM defaults: degree=2 (all 2-way marginals with <= max_cells=10000 cells),
#   max_model_size=80 MB, rounds=16*n_columns.  snsynth's AIM has no argument for
#   an explicit workload, so the 15 fixed 3-way marginals cannot be given to it.
PARAMS = {
    "mwem": {"split_factor": 1},
    "mst": {},
    "aim": {},
}


def counts(codes, clique, sizes):
    """Count table of `clique` (flattened) from a dict column -> integer codes."""
    dims = [sizes[c] for c in clique]
    flat = np.ravel_multi_index([codes[c] for c in clique], dims)
    return np.bincount(flat, minlength=int(np.prod(dims))).astype(float)


def tv(p, q):
    """Total-variation distance between two count tables (normalised here)."""
    return 0.5 * np.abs(p / p.sum() - q / max(q.sum(), 1.0)).sum()


class _RandomTies:
    """numpy, except that a stable argsort breaks ties in random order.

    Private-PGM 1.1.0's ``synthetic_data`` ranks the records of each group of equal parent
    values by record index (``np.argsort(inverse, kind="stable")``) before its stratified
    draw, so every column ends up ordered like the records and hence like the others; on
    Adult its MST records miss the model's own off-tree 2-way marginals by ~0.13 TV.
    ``sampler_fixed`` re-draws the same fitted model with ties broken at random: the
    smallest change that makes the shipped sampler draw from the model.
    """

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def argsort(a, kind=None, **kw):
        if kind == "stable":
            return np.lexsort((np.random.rand(len(a)), a))
        return np.argsort(a, kind=kind, **kw)


@contextlib.contextmanager
def sampler_fixed():
    import mbi.markov_random_field as mrf

    saved = mrf.np
    mrf.np = _RandomTies()
    try:
        yield
    finally:
        mrf.np = saved


def run_once(method, eps, delta, df, columns):
    """Fit + sample; returns (synthetic DataFrame, seconds, DataFrame re-drawn with the
    sampler fixed or None)."""
    from snsynth import Synthesizer

    kwargs = dict(PARAMS[method])
    if method != "mwem":  # MWEMSynthesizer does not accept delta
        kwargs["delta"] = delta
    t0 = time.perf_counter()
    # snsynth prints diagnostics (AIM: width, sigma); keep stdout to one line per run
    with contextlib.redirect_stdout(io.StringIO()):
        synth = Synthesizer.create(method, epsilon=eps, **kwargs)
        synth.fit(df, categorical_columns=columns, preprocessor_eps=0.0)
        out = synth.sample(len(df))
    secs = time.perf_counter() - t0
    fixed = None
    if method in ("mst", "aim"):
        with contextlib.redirect_stdout(io.StringIO()), sampler_fixed():
            fixed = pd.DataFrame(synth.sample(len(df)), columns=columns)
    return pd.DataFrame(out, columns=columns), secs, fixed


def to_codes(table, columns, sizes):
    """Integer codes per column (clipped into the domain) and the count of bad values."""
    codes, bad = {}, 0
    for c in columns:
        v = pd.to_numeric(table[c], errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(v) & (v >= 0) & (v <= sizes[c] - 1) & (v == np.round(v))
        bad += int((~ok).sum())
        codes[c] = np.clip(np.nan_to_num(v), 0, sizes[c] - 1).astype(int)
    return codes, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--domain", required=True)
    ap.add_argument("--epsilons", default="0.1,1")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--workload3", required=True, help="JSON list of 3-column lists")
    ap.add_argument("--methods", default="mwem,mst,aim")
    ap.add_argument("--out", required=True)
    ap.add_argument("--time-limit", type=float, default=900.0,
                    help="seconds per method x epsilon; later trials are skipped once exceeded")
    ap.add_argument("--mwem-split-factor", type=int, default=1)
    args = ap.parse_args()
    PARAMS["mwem"]["split_factor"] = args.mwem_split_factor

    df = pd.read_csv(args.data)
    with open(args.domain) as f:
        sizes = json.load(f)
    columns = list(sizes)
    df = df[columns].astype(int)
    with open(args.workload3) as f:
        triples = [tuple(t) for t in json.load(f)]
    pairs = list(itertools.combinations(columns, 2))
    real = {c: df[c].to_numpy() for c in columns}
    real_counts = {cl: counts(real, cl, sizes) for cl in pairs + triples}

    records = []
    for method in args.methods.split(","):
        if method not in PARAMS:
            raise SystemExit(f"unknown method {method!r}; choose from {sorted(PARAMS)}")
        for eps in [float(e) for e in args.epsilons.split(",")]:
            spent = 0.0
            for trial in range(args.trials):
                record = {"system": SYSTEM, "method": method, "epsilon": eps, "trial": trial,
                          "delta": None if method == "mwem" else args.delta,
                          "params": PARAMS[method], "seconds": None, "tv_2way": None,
                          "tv_3way": None, "rows": None, "error": None}
                if spent > args.time_limit:
                    record["error"] = (f"skipped: time limit {args.time_limit:g}s exceeded "
                                       f"({spent:.0f}s)")
                else:
                    np.random.seed(trial)  # snsynth's non-noise randomness uses np.random
                    t0 = time.perf_counter()
                    try:
                        synth, secs, fixed = run_once(method, eps, args.delta, df.copy(),
                                                      columns)
                        errs, bad = {}, 0
                        for name, table in (("", synth), ("_fixed", fixed)):
                            if table is None:
                                continue
                            codes, b = to_codes(table, columns, sizes)
                            bad += b
                            err = {cl: tv(real_counts[cl], counts(codes, cl, sizes))
                                   for cl in pairs + triples}
                            errs[f"tv_2way{name}"] = float(np.mean([err[p] for p in pairs]))
                            errs[f"tv_3way{name}"] = float(np.mean([err[t] for t in triples]))
                        record.update(seconds=secs, rows=len(synth), **errs)
                        if bad:
                            record["error"] = f"{bad} synthetic values outside domain (clipped)"
                    except Exception as e:  # noqa: BLE001 - record and move on
                        record["error"] = f"{type(e).__name__}: {e}"[:300]
                    spent += time.perf_counter() - t0
                records.append(record)
                fmt = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
                print(f"{method:5s} eps={eps:<5g} trial={trial} seconds={fmt(record['seconds'])} "
                      f"tv2={fmt(record['tv_2way'])} tv3={fmt(record['tv_3way'])} "
                      f"fixed sampler: tv2={fmt(record.get('tv_2way_fixed'))} "
                      f"tv3={fmt(record.get('tv_3way_fixed'))} "
                      f"error={record['error']}", flush=True)
                with open(args.out, "w") as f:  # rewrite after every run: partial results survive
                    json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
