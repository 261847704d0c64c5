"""Amplification by subsampling (issue 37, item 6): the maps beside dp-accounting, and SQL's
TABLESAMPLE on Adult against the builder's query and against no sampling at the same charge.

    PYTHONPATH=src python bench/sampling.py --update-results   # ≈ 20 s

Table 1: ε′ = ln(1 + p(e^ε − 1)) as dpkit charges it (an exact rational rounded up; Poisson
sampling for add/remove-one neighbours, Balle, Barthe & Gaboardi 2018, Thm 8; the same map
with p = n/N for n of N without replacement and substitute-one neighbours, Thm 9) beside
dp-accounting's PLD of ``PoissonSampledDpEvent(p, LaplaceDpEvent(1/ε))`` at δ = 1e-12 (its
pessimistic discretisation, interval 1e-4): the difference is its precision, not dpkit's.

Table 2: Adult's train split (rows as units, N = 32,561), the total count through
``session.sql("… TABLESAMPLE BERNOULLI (p PERCENT)")`` at a charged ε of 0.1: the inner ε
the step may spend (the largest whose amplified loss is ≤ 0.1), the debit (checked equal to
the builder's ``query.sample(p)`` query), and over ``--trials`` releases the RMSE of the
estimate count/p of N, against the unsampled count at ε = 0.1. Nothing is tuned: p and ε
are fixed here, Adult's test split is not read.
"""

from __future__ import annotations

import argparse
import math
import time
from fractions import Fraction

import numpy as np
from outdir import add_flag, results_dir

import dpkit as dp
from dpkit.core.numbers import readable
from dpkit.core.subsampling import amplified_epsilon

RATES = (Fraction(1, 1000), Fraction(1, 100), Fraction(1, 10), Fraction(1, 2))
EPSILONS = (Fraction(1, 10), Fraction(1), Fraction(2), Fraction(5))
CHARGED = Fraction(1, 10)
SQL_RATES = (Fraction(1, 100), Fraction(1, 10), Fraction(1, 2), Fraction(1))


def pld_epsilon(p: Fraction, eps: Fraction) -> float:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    event = dp_accounting.PoissonSampledDpEvent(float(p), dp_accounting.LaplaceDpEvent(
        1 / float(eps)))
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    return float(accountant.compose(event).get_epsilon(1e-12))


def inner_epsilon(p: Fraction, charged: Fraction) -> Fraction:
    """The largest ε on a grid of 1/10⁴ whose amplified loss at p is ≤ ``charged``."""
    guess = math.log1p(math.expm1(float(charged)) / float(p))  # the inverse map, in floats
    eps = Fraction(int(guess * 10_000) + 1, 10_000)
    while amplified_epsilon(eps, p) > charged:
        eps -= Fraction(1, 10_000)
    return eps


def table_maps() -> list[str]:
    lines = ["## 1. The map, beside dp-accounting", "",
             "| p | ε | dpkit ε′ (charged) | dp-accounting PLD ε′ | difference |",
             "|---|---|---|---|---|"]
    for p in RATES:
        for eps in EPSILONS:
            ours = amplified_epsilon(eps, p)
            theirs = pld_epsilon(p, eps)
            lines.append(f"| {readable(p)} | {readable(eps)} | {readable(ours)} | "
                         f"{theirs:.6f} | {theirs - float(ours):+.1e} |")
    return lines


def table_adult(trials: int) -> list[str]:
    adult = dp.datasets.load_adult("train")
    n = adult.height
    lines = ["", f"## 2. Adult (N = {n:,} rows as units): the total count at a charged "
             f"ε = {readable(CHARGED)}", "",
             "| TABLESAMPLE | inner ε | debit (SQL = builder) | RMSE of count/p | "
             "mean kept / (pN) |", "|---|---|---|---|---|"]
    for p in SQL_RATES:
        eps = inner_epsilon(p, CHARGED) if p < 1 else CHARGED
        budget = dp.PureDP(trials * 2)
        sql, builder = (dp.Session(adult, privacy_unit=dp.PrivacyUnit.rows(), budget=budget)
                        for _ in range(2))
        text = ("SELECT COUNT(*) AS n FROM adult" if p == 1 else
                f"SELECT COUNT(*) AS n FROM adult TABLESAMPLE BERNOULLI "
                f"({float(p * 100):g} PERCENT)")
        estimates = []
        for _ in range(trials):
            estimates.append(float(sql.sql(text, epsilon=eps)["n"][0]) / float(p))
        query = builder.query() if p == 1 else builder.query().sample(p)
        query.agg(dp.count()).release(epsilon=eps)
        one = sql.accountant.spent.epsilon / trials
        assert one == builder.accountant.spent.epsilon <= CHARGED
        arr = np.array(estimates)
        rmse = float(np.sqrt(np.mean((arr - n) ** 2)))
        label = "none" if p == 1 else f"BERNOULLI ({float(p * 100):g} PERCENT)"
        lines.append(f"| {label} | {readable(eps)} | {readable(one)} | {rmse:,.1f} | "
                     f"{arr.mean() / n:.4f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    add_flag(ap)
    args = ap.parse_args()
    start = time.perf_counter()
    lines = ["# Amplification by subsampling", "",
             "Written by `PYTHONPATH=src python bench/sampling.py --update-results`. "
             "Table 1: dpkit's charged ε′ = ln(1 + p(e^ε − 1)) (exact, rounded up; Balle, "
             "Barthe & Gaboardi 2018, Thm 8 — Thm 9's without-replacement map is the same "
             "with p = n/N) beside dp-accounting's PLD of `PoissonSampledDpEvent(p, "
             "LaplaceDpEvent(1/ε))` at δ = 1e-12 (interval 1e-4). Table 2: Adult's train "
             f"split, the total count through SQL's TABLESAMPLE at a charged ε of "
             f"{readable(CHARGED)}, {args.trials} releases per row; the debit is checked "
             "equal to the builder's `query.sample(p)` query's. Nothing is tuned; the test "
             "split is not read.", ""]
    lines += table_maps()
    lines += table_adult(args.trials)
    lines += ["", "Reading: dp-accounting's pessimistic PLD lies above dpkit's exact charge "
              "by less than its discretisation interval (1e-4) in every cell: the two agree "
              "to dp-accounting's own precision. On a count, sampling at a fixed charge "
              "buys a larger inner ε but pays the sampling error √(N(1 − p)/p), which "
              "dominates at every rate here: amplification is for mechanisms whose cost "
              "is not a count's (DP-SGD's per-step Gaussian, many composed queries), not a "
              "way to cheapen one count.", "",
              f"Run time: {time.perf_counter() - start:.1f} s."]
    out = results_dir(args.update_results) / "sampling.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
