"""Peer benchmark: OpenDP ``make_laplace`` throughput on a float64 vector.

Usage: /work/peers-venv/bin/python opendp_laplace.py [N]   (default N=100000)

Builds the measurement once (vector_domain(atom_domain(float, nan=False)),
l1_distance(float), scale=1.0), then times invoking it on a vector of N
float64 zeros. Also times numpy.random.default_rng().laplace(size=N) as a
raw-sampling floor. Each timing is the median of REPEATS runs.
Prints exactly one JSON object on stdout.
"""
import json
import statistics
import sys
import time
from importlib.metadata import version

import numpy as np
import opendp.prelude as dp

REPEATS = 5


def median_time(fn):
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    dp.enable_features("contrib")

    space = (
        dp.vector_domain(dp.atom_domain(T=float, nan=False)),
        dp.l1_distance(T=float),
    )
    meas = dp.m.make_laplace(*space, scale=1.0)
    data = [0.0] * n  # OpenDP's Python bindings take a list for vector domains

    out = meas(data)
    assert len(out) == n
    t_dp = median_time(lambda: meas(data))

    rng = np.random.default_rng()
    t_np = median_time(lambda: rng.laplace(size=n))

    print(json.dumps({
        "library": "opendp",
        "opendp_version": version("opendp"),
        "numpy_version": np.__version__,
        "n": n,
        "repeats": REPEATS,
        "opendp_median_s": t_dp,
        "numpy_median_s": t_np,
        "opendp_values_per_s": n / t_dp,
        "numpy_values_per_s": n / t_np,
    }))


if __name__ == "__main__":
    main()
