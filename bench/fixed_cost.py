"""Fixed cost of one release (issue 35, item 4): dpkit beside diffprivlib and the floors.

    python bench/fixed_cost.py [--reps 60] [--blocks 3] [--update-results]

In one run, on the same data (numpy ``default_rng(0)``: benchmark data only, never noise):

- **mean**: a fresh-session DP mean at 10^5 and 10^6 rows (``Session(df, budget=PureDP(1))``
  then ``query().agg(dp.mean("x", bounds=(0, 100))).release(epsilon=1)``, the wall time of
  both; "x" uniform in [0, 100)), beside numpy's ``x.mean()`` (the floor) and diffprivlib's
  ``tools.mean(x, epsilon=1, bounds=(0, 100))``, run in the peers' virtualenv through a
  subprocess (``DPKIT_PEERS_PYTHON``, default /work/venv-peers-logistic/bin/python; its own
  timings, data made there the same way);
- **grouped**: a fresh-session grouped DP count + sum over 1,000 public keys at 10^5 rows,
  beside the plain Polars ``group_by("key").agg(len, sum)`` (its floor).
- **noise**: one exact discrete Laplace call (``dpkit.core.samplers.discrete_laplace``) of 1
  and of 1,000 values at the scales of the grouped release's count (2) and sum (2^26): the
  sampler's fixed cost per call, which a release pays once per statistic.

The repetitions are split into ``--blocks`` blocks; each block times every in-process item
once per repetition, round-robin (so a change of the machine's load falls on all of them),
then runs the peer for the same number of repetitions. Medians over all blocks are reported,
with the ratios the issue's goals name (dpkit mean ÷ diffprivlib ≤ 1 at 10^6 rows; grouped
÷ floor ≤ 1.5 at 10^5 rows). One warm-up of each item first (imports, Polars' thread pool).
Writes ``fixed_cost.md`` (bench/out, or bench/results with ``--update-results``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outdir import add_flag, results_dir  # noqa: E402

import dpkit as dp  # noqa: E402
from dpkit.core import samplers  # noqa: E402

PEERS_PYTHON = Path(os.environ.get("DPKIT_PEERS_PYTHON",
                                   "/work/venv-peers-logistic/bin/python"))
SIZES = (100_000, 1_000_000)
N_KEYS, GROUPED_ROWS = 1_000, 100_000
NOISE_SCALES = (2, 2**26)

PEER = """
import json, sys, time, warnings
import numpy as np
from diffprivlib import tools
warnings.simplefilter("ignore")
reps = int(sys.argv[1]); out = {}
for n in json.loads(sys.argv[2]):
    x = np.random.default_rng(0).uniform(0.0, 100.0, n)
    tools.mean(x, epsilon=1.0, bounds=(0, 100))  # warm-up
    times = []
    for _ in range(reps):
        t = time.perf_counter(); tools.mean(x, epsilon=1.0, bounds=(0, 100))
        times.append(time.perf_counter() - t)
    out[str(n)] = times
print(json.dumps(out))
"""


def mean_data(n: int) -> pl.DataFrame:
    return pl.DataFrame({"x": np.random.default_rng(0).uniform(0.0, 100.0, n)})


def grouped_data() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    return pl.DataFrame({"key": rng.integers(0, N_KEYS, GROUPED_ROWS, dtype=np.int64),
                         "value": rng.uniform(0.0, 100.0, GROUPED_ROWS)})


def dp_mean(df: pl.DataFrame) -> Callable[[], object]:
    def run() -> object:
        s = dp.Session(df, budget=dp.PureDP(1))
        return s.query().agg(dp.mean("x", bounds=(0, 100))).release(epsilon=1)
    return run


def dp_grouped(df: pl.DataFrame) -> Callable[[], object]:
    keys = list(range(N_KEYS))

    def run() -> object:
        s = dp.Session(df, budget=dp.PureDP(1))
        return (s.query().group_by("key", keys=keys)
                .agg(dp.count(), dp.sum("value", bounds=(0, 100))).release(epsilon=1))
    return run


def polars_grouped(df: pl.DataFrame) -> Callable[[], object]:
    return lambda: df.lazy().group_by("key").agg(pl.len(), pl.col("value").sum()).collect()


def peer_times(reps: int) -> dict[str, list[float]] | None:
    """diffprivlib's per-call times (seconds) for each size, or None without the peers."""
    if not PEERS_PYTHON.exists():
        print(f"diffprivlib skipped: {PEERS_PYTHON} not found (../shared/PEERS.md)",
              file=sys.stderr)
        return None
    out = subprocess.run([str(PEERS_PYTHON), "-c", PEER, str(reps), json.dumps(SIZES)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def measure(reps: int, blocks: int, grouped: bool = True) -> dict[str, list[float]]:
    """Per-call times (seconds) of every item (module docstring); ``grouped`` False leaves
    out the grouped release and its floor (bench/run.py's mean section)."""
    items: dict[str, Callable[[], object]] = {}
    for n in SIZES:
        df = mean_data(n)
        x = df["x"].to_numpy()
        items[f"dpkit mean {n}"] = dp_mean(df)
        items[f"numpy mean {n}"] = lambda x=x: x.mean()
    if grouped:
        frame = grouped_data()
        items[f"dpkit grouped {GROUPED_ROWS}"] = dp_grouped(frame)
        items[f"polars grouped {GROUPED_ROWS}"] = polars_grouped(frame)
        for scale in NOISE_SCALES:
            for size in (1, N_KEYS):
                items[f"discrete_laplace scale {scale} × {size}"] = (
                    lambda scale=scale, size=size: samplers.discrete_laplace(scale, size))
    for fn in items.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in items}
    per_block = max(1, reps // blocks)
    for _ in range(blocks):
        for _ in range(per_block):
            for name, fn in items.items():
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
        peer = peer_times(per_block)
        for n, ts in (peer or {}).items():
            times.setdefault(f"diffprivlib mean {n}", []).extend(ts)
    return times


def report(times: dict[str, list[float]]) -> str:
    med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    lines = ["# Fixed cost per release (issue 35, item 4)", "",
             f"`python bench/fixed_cost.py` — Polars {pl.__version__}, numpy {np.__version__}, "
             f"{os.cpu_count()} cores; medians of {len(next(iter(times.values())))} "
             "repetitions, fresh session per release, ε = 1.", "",
             "| item | median ms |", "|---|---:|"]
    lines += [f"| {name} | {ms:.3f} |" for name, ms in med.items()]
    lines += ["", "| ratio | value | goal |", "|---|---:|---:|"]
    for n in SIZES:
        peer = med.get(f"diffprivlib mean {n}")
        if peer:
            goal = "≤ 1" if n == 1_000_000 else ""
            lines.append(f"| dpkit mean ÷ diffprivlib, {n} rows | "
                         f"{med[f'dpkit mean {n}'] / peer:.2f} | {goal} |")
        lines.append(f"| dpkit mean ÷ numpy mean, {n} rows | "
                     f"{med[f'dpkit mean {n}'] / med[f'numpy mean {n}']:.1f} | |")
    grouped = med[f"dpkit grouped {GROUPED_ROWS}"] / med[f"polars grouped {GROUPED_ROWS}"]
    lines.append(f"| dpkit grouped ÷ Polars group_by, {GROUPED_ROWS} rows, {N_KEYS} keys | "
                 f"{grouped:.2f} | ≤ 1.5 |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--blocks", type=int, default=3)
    add_flag(ap)
    args = ap.parse_args()
    text = report(measure(args.reps, args.blocks))
    print(text)
    (results_dir(args.update_results) / "fixed_cost.md").write_text(text)


if __name__ == "__main__":
    main()
