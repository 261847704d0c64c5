"""Time the plan-time checks that issue 16 added to a release (goal: < 5 ms a release).

For each of the demo's queries on UCI Adult: the time of ``Query.plan`` (schema, row-wise
allow-list, canonical keys, calibration), of the dry run on zero rows
(:func:`dpkit.frame.engine.dry_run`), and of a whole release, as medians over repeats.

    python bench/plan_checks.py [--repeats 30]
"""

from __future__ import annotations

import argparse
import statistics
import time

import polars as pl

import dpkit as dp
from dpkit.cli.demo import AGE_EDGES, EDUCATION
from dpkit.frame import engine


def queries(s: dp.Session) -> dict[str, dp.Query]:
    q = s.query()
    return {
        "education counts": q.group_by("education", keys=EDUCATION).count(),
        "income counts": q.group_by("income", keys=["<=50K", ">50K"]).count(),
        "means by sex": q.group_by("sex", keys=["Female", "Male"]).agg(
            dp.mean("age", bounds=(17, 90)), dp.mean("hours-per-week", bounds=(1, 99))),
        "age histogram": q.histogram("age", bins=AGE_EDGES),
        "median hours": q.quantile("hours-per-week", 0.5, bounds=(1, 99)),
        "filtered, with steps": q.filter(pl.col("age") >= 30).with_columns(
            older=pl.col("age") > 60).group_by("sex", keys=["Female", "Male"]).count(),
    }


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    adult = dp.datasets.load_adult("train")
    s = dp.Session(adult, budget=dp.PureDP(10**9))
    print("| query | plan (ms) | dry run (ms) | checks total (ms) | release (ms) |")
    print("|---|---|---|---|---|")
    for name, query in queries(s).items():
        def plan(query=query):
            return query.plan(0.1)

        _, planned = plan()

        def dry(query=query, planned=planned):
            engine.dry_run(query.lazy(empty=True), query.keys, [p.stat for p in planned],
                           None, query.group_columns)

        p, d = median_ms(plan, args.repeats), median_ms(dry, args.repeats)
        r = median_ms(lambda query=query: query.release(epsilon=0.1), args.repeats)
        print(f"| {name} | {p:.2f} | {d:.2f} | {p + d:.2f} | {r:.2f} |")


if __name__ == "__main__":
    main()
