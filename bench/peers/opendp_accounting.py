"""Peer reference: OpenDP 0.16's composed ε of k Gaussian mechanisms (σ, Δ = 1) under zCDP,
converted to (ε, δ). Usage: python opendp_accounting.py K SIGMA DELTA. Prints one JSON line."""

import json
import sys
import time

import opendp.prelude as dp

dp.enable_features("contrib")


def main() -> None:
    k, sigma, delta = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    start = time.perf_counter()
    gauss = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                               scale=sigma)
    composed = dp.c.make_composition([gauss] * k)
    approx = dp.c.make_zCDP_to_approxDP(composed)
    epsilon = approx.map(1.0).epsilon(delta)
    print(json.dumps({"library": "opendp", "zcdp_epsilon": epsilon,
                      "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
