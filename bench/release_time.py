"""Time of one release of each of ``dpkit demo``'s queries, on any checkout of dpkit.

    PYTHONPATH=<tree>/src python bench/release_time.py [--reps 200] [--warmup 5]
                                                      [--ledger] [--json]

The queries are the demo's (src/dpkit/cli/demo.py), on the same shipped UCI Adult data
(``dp.datasets.load_adult("train")``, 32,561 rows), the same ε shares of a total ε = 1 and the
same order: education counts (16 public keys), income counts (2 keys), mean age and mean hours
per week by sex, the age histogram (6 bins), the median of hours per week. Each repetition
builds a fresh session (privacy unit: one row; budget ``PureDP(1)``; in memory, or with
``--ledger`` a fresh SQLite ledger file in a temporary directory, as the demo has) and times
each release as a whole: query building, plan, debit, compute and noise (the wall time of
``session.query()...release(...)``). The data are loaded once, outside the timings.

Prints per query: repetitions, median, interquartile range (Q1–Q3) and minimum in
milliseconds, plus the session's construction and the sum of the five releases per
repetition ("demo total"); the first (cold) repetition of the process, which pays the lazy
imports, is reported apart and not counted. ``--json`` prints the same as one JSON object.

Uses only API that exists both before and after issue 17 (the demo's own calls), so the
same file times either tree: ``PYTHONPATH=/tmp/before/src python bench/release_time.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import dpkit as dp

EDUCATION = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th",
             "HS-grad", "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters",
             "Prof-school", "Doctorate"]
AGE_EDGES = [17, 25, 35, 45, 55, 65, 91]
EPSILON = Fraction(1)
SHARES = {"education": Fraction(2, 10), "income": Fraction(1, 10), "means": Fraction(3, 10),
          "age": Fraction(2, 10), "median": Fraction(2, 10)}
EPS = {k: v * EPSILON for k, v in SHARES.items()}

# the demo's releases, in the demo's order
QUERIES: dict[str, Callable[[Any], Any]] = {
    "education counts": lambda q: q.group_by("education", keys=EDUCATION).count().release(
        epsilon=EPS["education"]),
    "income counts": lambda q: q.group_by("income", keys=["<=50K", ">50K"]).count().release(
        epsilon=EPS["income"]),
    "means by sex": lambda q: q.group_by("sex", keys=["Female", "Male"]).agg(
        dp.mean("age", bounds=(17, 90)), dp.mean("hours-per-week", bounds=(1, 99))
    ).release(epsilon=EPS["means"]),
    "age histogram": lambda q: q.histogram("age", bins=AGE_EDGES).release(epsilon=EPS["age"]),
    "median hours": lambda q: q.quantile("hours-per-week", 0.5, bounds=(1, 99)).release(
        epsilon=EPS["median"]),
}
SESSION = "session"
TOTAL = "demo total"


def one_repetition(adult: Any, ledger_dir: Path | None, rep: int) -> dict[str, float]:
    """Seconds of the session's construction and of each release, in a fresh session."""
    out: dict[str, float] = {}
    t = time.perf_counter()
    if ledger_dir is None:
        session = dp.Session(adult, privacy_unit=dp.PrivacyUnit.rows(),
                             budget=dp.PureDP(EPSILON))
    else:
        session = dp.Session(adult, privacy_unit=dp.PrivacyUnit.rows(),
                             budget=dp.PureDP(EPSILON), ledger=ledger_dir / f"l{rep}.sqlite",
                             dataset=f"adult-demo-{rep}")
    out[SESSION] = time.perf_counter() - t
    for name, release in QUERIES.items():
        t = time.perf_counter()
        release(session.query())
        out[name] = time.perf_counter() - t
    out[TOTAL] = sum(out[name] for name in QUERIES)
    return out


def summary(values: list[float]) -> dict[str, float]:
    """Median, quartiles and minimum, in milliseconds."""
    ms = sorted(v * 1e3 for v in values)
    q1, median, q3 = statistics.quantiles(ms, n=4, method="inclusive")
    return {"median_ms": median, "q1_ms": q1, "q3_ms": q3, "iqr_ms": q3 - q1, "min_ms": ms[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200, help="counted repetitions (default 200)")
    ap.add_argument("--warmup", type=int, default=5,
                    help="uncounted repetitions first, the cold one included (default 5)")
    ap.add_argument("--ledger", action="store_true",
                    help="each session with a fresh SQLite ledger (as the demo) instead of "
                         "in memory")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    if args.reps < 2 or args.warmup < 1:
        ap.error("--reps must be >= 2 and --warmup >= 1")

    t = time.perf_counter()
    adult = dp.datasets.load_adult("train")
    load_s = time.perf_counter() - t
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ledger_dir = Path(tmp) if args.ledger else None
        for rep in range(args.warmup + args.reps):
            runs.append(one_repetition(adult, ledger_dir, rep))
    cold, counted = runs[0], runs[args.warmup:]
    names = [SESSION, *QUERIES, TOTAL]
    result = {
        "dpkit": str(Path(dp.__file__).resolve().parent),
        "python": sys.version.split()[0],
        "ledger": args.ledger, "reps": args.reps, "warmup": args.warmup,
        "load_adult_ms": load_s * 1e3,
        "cold_ms": {n: cold[n] * 1e3 for n in names},
        "figures": {n: summary([r[n] for r in counted]) for n in names},
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"dpkit from {result['dpkit']}; {args.reps} repetitions after {args.warmup} warm-up; "
          f"{'SQLite ledger' if args.ledger else 'in-memory session'}; load_adult "
          f"{load_s * 1e3:.0f} ms")
    print(f"| {'release':<18} | median ms | IQR ms (Q1–Q3)         |  min ms | cold ms |")
    print(f"|{'-' * 20}|----------:|-----------------------:|--------:|--------:|")
    for n in names:
        f = result["figures"][n]
        iqr = f"{f['iqr_ms']:.2f} ({f['q1_ms']:.2f}–{f['q3_ms']:.2f})"
        print(f"| {n:<18} | {f['median_ms']:9.2f} | {iqr:>22} | {f['min_ms']:7.2f} | "
              f"{result['cold_ms'][n]:7.1f} |")


if __name__ == "__main__":
    main()
