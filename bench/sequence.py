"""dpkit.apps.sequence (noisy prefix tree, Chen, Fung, Desai & Sossou KDD 2012) on MSNBC
(989,818 browsing sequences over 17 categories; ../shared/data_new/msnbc/, CC BY 4.0).

At ε ∈ {0.1, 0.5, 1}, height h = 6, threshold 2 noise standard deviations (declared, not
tuned), ``--reps`` noise draws:

* prefix counts: 1,000 prefixes (half drawn from the data, lengths 1..h; half random
  strings), relative error |est − true| / max(true, s) with the sanity bound s = 0.1% of
  the sequences (the convention of Chen et al.);
* frequent patterns: the top-50 contiguous patterns of length 2 and 3 by support (the
  number of sequences whose first h symbols contain them), synthetic sequences against the
  truth, F1 (= precision = recall at equal sizes).

Beside it, the n-gram model of Chen, Ács & Castelluccia (CCS 2012): grams up to length 4 of
the sequences cut to 20 symbols, queried through its expected prefix tree. The published
MSNBC figures of both papers could not be checked here (no copy of the papers).

    python bench/sequence.py     # bench/results/sequence.md and sequence.png
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import numpy as np
import polars as pl

from dpkit.apps import sequence as sq

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data_new" / "msnbc" / "msnbc990928.seq.gz"
OUT = ROOT / "bench" / "results"
K, H, TOP = 17, 6, 50
NGRAM_ORDER, ELL = 4, 20  # the n-gram model: grams up to 4, sequences cut to 20 symbols
EPSILONS = (0.1, 0.5, 1.0)


def load() -> pl.DataFrame:
    with gzip.open(DATA, "rt") as fh:
        lines = fh.read().split("\n")
    body = [line for line in lines[lines.index("% Sequences:") + 2:] if line.strip()]
    return pl.DataFrame({"line": body}).select(
        pl.col("line").str.strip_chars().str.split(" ").cast(pl.List(pl.Int64))
        .list.eval(pl.element() - 1).alias("sequence"))


def supports(mat: np.ndarray, length: int) -> dict[int, int]:
    """Support (sequences containing it) of each contiguous pattern of ``length``."""
    n, h = mat.shape
    b = K + 1
    codes, rows = [], []
    for j in range(h - length + 1):
        win = mat[:, j: j + length]
        ok = np.all(win >= 0, axis=1)
        code = np.zeros(n, dtype=np.int64)
        for c in range(length):
            code = code * b + win[:, c] + 1
        codes.append(code[ok])
        rows.append(np.flatnonzero(ok))
    pairs = np.unique(np.concatenate(rows) * b**length + np.concatenate(codes))
    values, counts = np.unique(pairs % b**length, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist(), strict=True))


def top_patterns(mat: np.ndarray) -> set[tuple[int, int]]:
    allp = [((length, code), c) for length in (2, 3)
            for code, c in supports(mat, length).items()]
    allp.sort(key=lambda x: -x[1])
    return {p for p, _ in allp[:TOP]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    df = load()
    n = df.height
    mat, lengths = sq.prefix_matrix(df, "sequence", K, H)
    gen = np.random.default_rng(7)  # query workload only
    from_data = gen.integers(0, n, 500)
    qlen = gen.integers(1, H + 1, 1000)
    prefixes = []
    for i, row in enumerate(from_data):
        ln = min(int(qlen[i]), int(lengths[row])) or 1
        prefixes.append(mat[row, :ln].tolist() if lengths[row] else [0])
    prefixes += [gen.integers(0, K, int(q)).tolist() for q in qlen[500:]]
    truth = np.array([np.all(mat[:, : len(p)] == np.array(p), axis=1).sum() for p in prefixes])
    sanity = 0.001 * n
    true_top = top_patterns(mat)
    rows = []
    for eps, method in [(e, m) for e in EPSILONS for m in ("prefix tree", "n-gram")]:
        rel, f1, secs, nodes = [], [], [], []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            if method == "prefix tree":
                tree = sq.prefix_tree(df, alphabet=K, height=H, epsilon=eps)
            else:
                tree = sq.ngram_model(df, alphabet=K, order=NGRAM_ORDER, max_length=ELL,
                                      epsilon=eps).prefix_tree(H)
            secs.append(time.perf_counter() - t0)
            nodes.append(tree.codes.size)
            est = tree.count(prefixes)
            rel.append(np.mean(np.abs(est - truth) / np.maximum(truth, sanity)))
            syn = tree.synthesize()
            smat, _ = sq.prefix_matrix(syn, "sequence", K, H)
            f1.append(len(top_patterns(smat) & true_top) / TOP)
        rows.append({"method": method, "epsilon": eps, "prefix_rel_err": float(np.mean(rel)),
                     "prefix_rel_err_std": float(np.std(rel)), "top50_f1": float(np.mean(f1)),
                     "nodes": float(np.mean(nodes)), "seconds": float(np.mean(secs))})
        print(rows[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    lines = ["# Noisy prefix tree (Chen et al. KDD 2012) and n-gram model (CCS 2012) on MSNBC", "",
             f"{n:,} sequences, 17 categories; height {H}, threshold 2 noise std, ε split "
             f"evenly over levels; mean over {args.reps} noise draws. Prefix-count relative "
             "error with sanity bound 0.1% of the sequences (1,000 queries, half from the "
             "data); top-50 frequent contiguous patterns (length 2–3, support in the first "
             f"{H} symbols) from the synthetic sequences, F1 against the truth. Seconds: one "
             "release (tree construction, all of MSNBC). Published MSNBC figures of Chen et "
             "al. (KDD 2012, CCS 2012): not checked (no copy of the papers here). n-gram "
             f"model: order {NGRAM_ORDER}, sequences cut to {ELL} symbols, threshold 2 std.", "",
             "| method | ε | prefix rel. error | ± std | top-50 F1 | nodes | seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['method']} | {r['epsilon']:g} | {r['prefix_rel_err']:.4f} | "
                     f"{r['prefix_rel_err_std']:.4f} | {r['top50_f1']:.2f} | "
                     f"{r['nodes']:.0f} | {r['seconds']:.1f} |")
    (OUT / "sequence.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for method, style in (("prefix tree", "-"), ("n-gram", "--")):
        sub = [r for r in rows if r["method"] == method]
        eps = [r["epsilon"] for r in sub]
        ax.plot(eps, [r["prefix_rel_err"] for r in sub], "o" + style,
                label=f"{method}: prefix count rel. error")
        ax.plot(eps, [r["top50_f1"] for r in sub], "s" + style, label=f"{method}: top-50 F1")
    ax.set_xlabel("ε")
    ax.set_title("MSNBC (h = 6)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(OUT / "sequence.png", dpi=120)


if __name__ == "__main__":
    main()
