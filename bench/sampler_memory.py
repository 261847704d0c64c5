"""Peak memory and speed of one call of the exact samplers (issue 35, item 4).

Each (sampler, size) runs alone in a child process: the child imports dpkit, warms the
sampler up on 10^4 values (tables, caches), notes its RSS, then times one call of ``size``
values. Reported per cell: ns per value (wall time of the one call / size, and its CPU time,
steadier on a shared machine), the child's peak RSS (``ru_maxrss``), and the extra bytes per
value beyond the int64 output ((peak RSS − RSS before the call − 8·size) / size). numpy's
geometric (inexact, seeded, for reference only: never noise) is the floor.

    python bench/sampler_memory.py [SIZES…] [--scale S] [--repeat R] [--samplers A,B]
    # default: 1e6 1e7 1e8 at scale 10; the best of R runs per cell (default 1)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from fractions import Fraction
import numpy as np

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

name, size, scale = sys.argv[1], int(float(sys.argv[2])), Fraction(sys.argv[3])
if name == "numpy-geometric":
    gen = np.random.default_rng(0)  # reference floor only, never noise
    p = 1 - float(np.exp(-1 / float(scale)))
    call = lambda n: gen.geometric(p, n)
else:
    from dpkit.core import samplers
    fn = getattr(samplers, name)
    call = lambda n: fn(scale, n)
call(10_000)
before = rss()
start, cpu = time.perf_counter(), time.process_time()
out = call(size)
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"elapsed": elapsed, "cpu": cpu, "peak": peak, "before": before,
                  "nbytes": int(out.nbytes)}))
"""

SAMPLERS = ("discrete_laplace", "discrete_gaussian", "geometric", "numpy-geometric")


def run_one(name: str, size: float, scale: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", CHILD, name, str(size), scale],
                          capture_output=True, text=True, check=True)
    got: dict[str, float] = json.loads(proc.stdout)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", default=["1e6", "1e7", "1e8"])
    parser.add_argument("--scale", default="10")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--samplers", default=",".join(SAMPLERS),
                        help="comma-separated subset of " + ", ".join(SAMPLERS))
    args = parser.parse_args()
    print(f"scale {args.scale}; one call per child process, best of {args.repeat}")
    print(f"{'sampler':<18} {'size':>6} {'ns/value':>9} {'cpu ns/value':>13} "
          f"{'peak RSS MB':>12} {'extra B/value':>14}")
    for size in args.sizes:
        n = int(float(size))
        for name in args.samplers.split(","):
            runs = [run_one(name, n, args.scale) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r["elapsed"])
            cpu = min(r["cpu"] for r in runs)
            peak = max(r["peak"] for r in runs)
            extra = (peak - best["before"] - best["nbytes"]) / n
            print(f"{name:<18} {size:>6} {best['elapsed'] / n * 1e9:>9.1f} "
                  f"{cpu / n * 1e9:>13.1f} {peak / 1e6:>12.0f} {extra:>14.1f}", flush=True)


if __name__ == "__main__":
    main()
