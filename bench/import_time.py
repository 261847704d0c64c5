"""How long ``import dpkit`` takes, beside ``import polars`` in the same run (issue 33's goal:
under 0.3 s on an idle machine).

    python bench/import_time.py [--runs N] [--top K]

Each import runs in a fresh interpreter under ``python -X importtime``; the figure is the
top-level module's cumulative time (microseconds in the report, shown in seconds), the median
of N runs (default 5), alternating dpkit and polars so that machine load hits both alike.
As a user's machine does, the runs read cached bytecode: ``PYTHONDONTWRITEBYTECODE`` is
dropped from their environment and one untimed import of each module writes it first
(compiling dpkit's ~200 modules from source costs more than the import itself).
Prints both medians, their ratio, and the K modules of dpkit's import with the largest
cumulative time in its last run (the places to look for eager imports).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def importtime(module: str) -> tuple[float, list[tuple[int, str]]]:
    """Seconds to import ``module`` in a fresh interpreter, and every (cumulative µs, name)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                         capture_output=True, text=True, check=True, env=ENV).stderr
    rows = [(int(m[2]), m[3] + m[4]) for m in map(LINE.match, out.splitlines()) if m]
    top = next(us for us, name in reversed(rows) if name.strip() == module)
    return top / 1e6, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"dpkit": [], "polars": []}
    rows: list[tuple[int, str]] = []
    for module in times:  # writes the bytecode caches
        importtime(module)
    for _ in range(args.runs):
        for module in times:
            seconds, found = importtime(module)
            times[module].append(seconds)
            if module == "dpkit":
                rows = found
    dpkit, polars = (statistics.median(times[m]) for m in ("dpkit", "polars"))
    print(f"import dpkit : {dpkit:.3f} s (median of {args.runs})")
    print(f"import polars: {polars:.3f} s (median of {args.runs})")
    print(f"ratio dpkit / polars: {dpkit / polars:.2f}")
    print(f"\nlargest cumulative times in import dpkit (top {args.top}):")
    for us, name in sorted(rows, reverse=True)[:args.top]:
        print(f"  {us / 1e6:7.3f} s  {name}")


if __name__ == "__main__":
    main()
