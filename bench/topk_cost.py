"""The cost of a top-k request (issue 30, attack 6), before and after the one-stream sampler.

A ``group_by(selection=TopKSelection(k=1000, ε))`` request with ``count()`` on UCI Adult
(train, one row per unit), grouped by a low-cardinality column (``age``, 73 groups) and a
high-cardinality one (``fnlwgt``, 21,648 groups), at ε = 1 (the sentinel ends the draw early)
and ε = 10,000 (ε₀ = 10: nearly every present key beats the sentinel); k̄ is the default 4k.
Also the request of the attack (k̄ = 100,000: refused at plan time after the fix), and one
draw of ``sample_top_k`` at k = 1,000 over 100,001 tied candidates, and over 4,001 candidates
1 nat apart (the remaining top nearly alone every round: the sampler's worst case, at the
largest k̄ the per-request limit allows for k = 1,000).

Each figure is the median of 3 runs in a fresh process per source tree: the tree at
``--before`` (default: de04c15, the main branch this fix starts from, exported with
``git archive``) and this checkout. Prints one table with the ratios.

    PYTHONPATH=src python bench/topk_cost.py            # ≈ 2 minutes
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 3
K = 1000


def _median(fn) -> float | str:
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a refusal is a figure here
            return f"refused ({type(exc).__name__})"
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def worker() -> None:
    """Measure with whatever dpkit is first on sys.path; print JSON."""
    import numpy as np

    import dpkit as dp
    from dpkit.mechanisms.selection import sample_top_k

    adult = dp.datasets.load_adult("train")
    out: dict[str, float | str] = {}

    def request(column: str, epsilon: float, k_bar: int | None = None) -> None:
        s = dp.Session(adult, dp.PrivacyUnit.rows(), dp.ApproxDP(10**6, 1e-3))
        (s.query().group_by(column, selection=dp.TopKSelection(K, epsilon, 1e-6, k_bar=k_bar))
         .agg(dp.count()).release(epsilon=1))

    for column in ("age", "fnlwgt"):
        for epsilon in (1, 10_000):
            out[f"request k=1000 {column} eps={epsilon}"] = _median(
                lambda c=column, e=epsilon: request(c, e))
    out["request k=1000 k_bar=100000 fnlwgt eps=1 (the attack)"] = _median(
        lambda: request("fnlwgt", 1, 100_000))
    n = 100_001
    out["one draw k=1000 N=100001 tied"] = _median(
        lambda: sample_top_k(np.zeros(n, dtype=np.int64), K, Fraction(1)))
    worst = 4 * K + 1  # k̄ = 4,000 candidates and ⊥: the most k·k̄ ≤ 4,000,000 allows at k
    out["one draw k=1000 N=4001 1 nat apart (limit's worst)"] = _median(
        lambda: sample_top_k(np.arange(worst, dtype=np.int64), K, Fraction(1)))
    print(json.dumps(out))


def measure(src: Path) -> dict[str, float | str]:
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, __file__, "--worker"], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="de04c15", help="git revision before the fix")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "src"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        before = measure(Path(tmp) / "src")
    after = measure(ROOT / "src")
    print(f"{'figure (median of 3, seconds)':58} {'before':>10} {'after':>22} {'ratio':>7}")
    for name, old in before.items():
        new = after[name]
        ratio = (f"{old / new:.0f}×" if isinstance(old, float) and isinstance(new, float)
                 else "")
        fmt = [f"{v:.3f}" if isinstance(v, float) else v for v in (old, new)]
        print(f"{name:58} {fmt[0]:>10} {fmt[1]:>22} {ratio:>7}")


if __name__ == "__main__":
    main()
