"""SmallDB, the net mechanism (Blum, Ligett & Roth 2008; Dwork & Roth §4.1), against the
median mechanism, MWEM and Identity on UCI Adult, beside Dwork & Roth's bounds (issue 37,
item 2).

    python bench/smalldb.py                    # bench/out/smalldb.md
    python bench/smalldb.py --update-results   # bench/results/smalldb.md

Universe: sex (2) × income (2) × age in three bins [17, 35), [35, 50), [50, 91) — 12 cells,
declared up front. Q: every cell of the three 2-way marginals (16 counting queries). Every
method runs through a Session over Adult's 32,561 training rows (row-level privacy unit,
pure ε, one debit each) at ε ∈ {0.5, 1, 2}:

* ``smalldb`` — ``query.publish.smalldb(spec, cliques, alpha=0.1)``: D&R's m = ⌈ln|Q|/α²⌉
  = 278 is capped to the largest m whose C(|X| + m − 1, m) fits the default 10^6
  candidates (m = 11, 705,432 candidates);
* ``median`` — ``query.publish.median(spec, alpha=500)`` (interactive; its default m = 8),
  asked the 16 queries;
* ``mwem`` — ``query.publish.synthetic(spec, method="mwem")``, the marginals of its table;
* ``identity`` — ``query.publish.marginals(spec, cliques, consistent=False)``: per-cell
  Laplace on each marginal.

Every answer is normalised by the method's own total (m, ñ, its table's rows, the noisy
marginal's sum: post-processing) and compared with the true fraction; the error is the max
over Q, averaged over ``--reps`` fresh-noise runs, in fractions and in records (× n).
Beside them: SmallDB's reported bound (D&R Thm 4.4 with |R| exact, at its m; β = 0.05) and
D&R Thm 4.5's closed form ((16 ln|X| ln|Q| + 4 ln(1/β))/(ε n))^{1/3}. No parameter was tuned
on Adult (α = 0.1 and the median's α = 500 were fixed before any run); Adult is reporting
data here, and the floor row (``bench/floor.py``) runs on held-out MSNBC.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from outdir import add_flag, results_dir  # noqa: E402

import dpkit as dp  # noqa: E402
from dpkit.datasets import load_adult  # noqa: E402
from dpkit.errors import BaselineWarning  # noqa: E402
from dpkit.release.synthetic.domain import Bins, Codec, marginal_counts, records  # noqa: E402
from dpkit.release.synthetic.iterative import LinearQueries  # noqa: E402
from dpkit.release.synthetic.marginals import MarginalWorkload  # noqa: E402

SPEC = {"sex": ["Female", "Male"], "income": ["<=50K", ">50K"], "age": Bins((17, 35, 50, 91))}
CLIQUES = [("sex", "income"), ("sex", "age"), ("income", "age")]
EPSILONS = (0.5, 1.0, 2.0)
METHODS = ("smalldb", "median", "mwem", "identity")


def session(df: pl.DataFrame, eps: float) -> dp.Session:
    return dp.Session(df, dp.PrivacyUnit.rows(), dp.PureDP(eps))


def answers(method: str, df: pl.DataFrame, eps: float, queries: LinearQueries,
            codec: Codec) -> tuple[np.ndarray, object]:
    """The method's normalised answers to Q (and its result, for the bound)."""
    pub = session(df, eps).query().publish
    if method == "smalldb":
        out = pub.smalldb(SPEC, CLIQUES, epsilon=eps, alpha=0.1)
        return out.answers, out
    if method == "median":
        mm = pub.median(SPEC, epsilon=eps, alpha=500)
        shape = codec.domain.shape()
        vals = [mm.answer(queries.matrix[i].toarray().reshape(shape)).value
                for i in range(len(queries))]
        return np.asarray(vals) / max(mm.pmw.noisy_total, 1), None
    if method == "mwem":
        table = pub.synthetic(SPEC, method="mwem", epsilon=eps)
        x = marginal_counts(records(codec.encode(table), codec.domain), codec.domain,
                            codec.domain.attributes).ravel()
        return queries.answer(x) / max(int(x.sum()), 1), None
    rel = pub.marginals(SPEC, CLIQUES, epsilon=eps, consistent=False)
    return np.concatenate([np.asarray(rel[c]).ravel() / max(float(np.sum(rel[c])), 1.0)
                           for c in CLIQUES]), None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    add_flag(ap)
    args = ap.parse_args()
    warnings.simplefilter("ignore", BaselineWarning)  # SmallDB's, stated in the table
    df = load_adult().select(list(SPEC))
    codec = Codec.declare(df, SPEC)
    x = marginal_counts(records(codec.encode(df), codec.domain), codec.domain,
                        codec.domain.attributes).ravel()
    n = int(x.sum())
    queries = LinearQueries.from_marginals(MarginalWorkload(codec.domain, tuple(CLIQUES)))
    truth = queries.answer(x) / n
    rows, t0 = [], time.time()
    for eps in EPSILONS:
        errors: dict[str, list[float]] = {m: [] for m in METHODS}
        bound = theorem = size = None
        for _ in range(args.reps):
            for m in METHODS:
                est, out = answers(m, df, eps, queries, codec)
                errors[m].append(float(np.abs(est - truth).max()))
                if out is not None:
                    bound, theorem = out.bound(n), out.theorem_bound(n)
                    size = (out.plan.size, out.plan.candidates)
        rows.append((eps, {m: (np.mean(v), np.std(v) / np.sqrt(len(v)))
                           for m, v in errors.items()}, bound, theorem, size))
        print(f"ε = {eps}: " + ", ".join(f"{m} {np.mean(v):.4f}" for m, v in errors.items()),
              file=sys.stderr, flush=True)
    write(rows, n, len(queries), args.reps, time.time() - t0,
          results_dir(args.update_results))


def write(rows: list, n: int, q: int, reps: int, seconds: float, out: Path) -> None:
    m, cands = rows[0][4]
    lines = [
        "# SmallDB (the net mechanism) vs the median mechanism, MWEM and Identity on Adult",
        "",
        "Written by `python bench/smalldb.py --update-results` (module docstring: the "
        "universe, Q, the methods; nothing tuned on Adult).",
        "",
        f"Adult training rows n = {n:,}; universe sex × income × age(3 bins) = 12 cells; Q = "
        f"the {q} cells of the three 2-way marginals. SmallDB at α = 0.1: D&R's m = 278 "
        f"capped to m = {m} ({cands:,} candidates). Max error over Q as a fraction of n "
        f"(× n = records in brackets), mean ± s.e. over {reps} fresh-noise runs; "
        f"{seconds:.0f} s in all.",
        "",
        "| ε | SmallDB | median mechanism | MWEM | Identity | SmallDB's bound (Thm 4.4 at m, "
        "β = 0.05) | D&R Thm 4.5 closed form |",
        "|---|---|---|---|---|---|---|",
    ]
    for eps, errs, bound, theorem, _ in rows:
        cells = [f"{mean:.4f} ± {se:.4f} ({mean * n:,.0f})" for mean, se in
                 (errs[k] for k in METHODS)]
        lines.append(f"| {eps} | " + " | ".join(cells) + f" | {bound:.3f} | {theorem:.3f} |")
    lines += [
        "",
        "Reading: SmallDB's error is the m-record grid's (its answers are multiples of 1/m; "
        "the selection's own loss, 2(ln|R| + ln 1/β)/(εn), is at most 0.002 of n here), so it "
        "does not improve with ε and is two orders of magnitude or more above Identity's. "
        "Its bound holds but is loose (the net term √(ln 2|Q|/(2m)) dominates). D&R's "
        "closed form is what SmallDB would achieve at the theorem's α — which needs "
        "m ≈ 4 ln|Q|/α² records and an enumeration of |X|^m databases, out of reach even "
        "for 12 cells. This is why `smalldb` warns (BaselineWarning) before every run and "
        "is no default of any front end.",
    ]
    path = out / "smalldb.md"
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
