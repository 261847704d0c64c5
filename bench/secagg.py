"""Secure aggregation (dpkit.local.secagg; Bonawitz et al., CCS 2017): time per round.

    python bench/secagg.py [--quick] [--update-results]

1. One round of the protocol in one process for n ∈ {10, 100, 500} clients, vector length
   d ∈ {16, 1024}, with 0% and 10% of the clients dropping out after sharing their keys
   (the case that makes the server rebuild their pairwise masks), modulus m = 2^32,
   threshold t = ⌊2n/3⌋ + 1. Reported: wall-clock seconds of the clients' work (all n,
   run one after another: divide by n for one client's) and of the server's, one round
   per cell (three for n ≤ 100, the median), and the number of X25519 key agreements.
   The machine is shared (2 cores, other jobs), so the times are upper bounds.
2. A worked example on real data: the first 300 rows of UCI Adult's training split as 300
   clients holding (age, hours-per-week) scaled to [0, 1], summed by
   ``DistributedDiscreteGaussian.release`` (σ = 1/2 per client, γ = 1/256, clip 3/2: the
   parameters of bench/local_numeric.py, chosen there before any run) with 30 clients
   dropping out; the error against the exact sum of the 270 survivors and the ρ charged
   (at the threshold). No parameter was tuned on these rows; nothing was held out (nothing
   is fitted).

The paper measures its own Java implementation (§7) on other hardware; its times are not
comparable with these, so none is copied here.

Writes bench/results/secagg.md (with --update-results; else bench/out/).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outdir import add_flag, results_dir  # noqa: E402

import dpkit.local as ldp  # noqa: E402
from dpkit.core import rng  # noqa: E402
from dpkit.datasets import load_adult  # noqa: E402
from dpkit.local import secagg  # noqa: E402

M = 1 << 32


def one_round(n: int, d: int, drop: float) -> dict[str, float]:
    """One round, timed by side (the steps of secagg.secure_sum, split)."""
    x = (np.arange(n * d, dtype=np.int64).reshape(n, d) * 2654435761) % M
    t = secagg.default_threshold(n)
    early = set(range(1, int(round(drop * n)) + 1))
    session = rng.random_bytes(16)
    client_s = server_s = 0.0
    t0 = time.perf_counter()
    clients = [secagg.Client(u, t, M, session) for u in range(1, n + 1)]
    adverts = [c.advertise() for c in clients]
    client_s += time.perf_counter() - t0
    server = secagg.Server(t, M, d, session)
    t0 = time.perf_counter()
    keys = server.collect_keys(adverts)
    server_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    sent = [msg for c in clients for msg in c.share_keys(keys)]
    client_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    inbox = server.route(sent)
    server_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    masked = [c.masked_input(x[c.index - 1], inbox.get(c.index, [])) for c in clients
              if c.index not in early]
    client_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    alive, gone = server.collect_inputs(masked, range(1, n + 1))
    server_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    answers = [c.unmask(alive, gone) for c in clients if c.index in alive]
    client_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    total = server.unmask(answers, alive, gone)
    server_s += time.perf_counter() - t0
    keep = [u - 1 for u in sorted(alive)]
    assert np.array_equal(total, x[keep].sum(axis=0) % M), "masks did not cancel"
    # share keys: every pair; mask keys: the clients that send an input; rebuilt masks
    agreements = n * (n - 1) + len(alive) * (n - 1) + len(gone) * len(alive)
    return {"n": n, "d": d, "drop": drop, "client_s": client_s, "server_s": server_s,
            "agreements": agreements}


def grid(quick: bool) -> list[dict[str, float]]:
    rows = []
    for n in (10, 100) if quick else (10, 100, 500):
        for d in (16, 1024):
            for drop in (0.0, 0.1):
                runs = [one_round(n, d, drop) for _ in range(3 if n <= 100 else 1)]
                row = {**runs[0], "client_s": statistics.median(r["client_s"] for r in runs),
                       "server_s": statistics.median(r["server_s"] for r in runs),
                       "runs": len(runs)}
                print(row, flush=True)
                rows.append(row)
    return rows


def adult_example() -> dict[str, float]:
    df = load_adult("train").head(300)
    bounds = {"age": (17, 90), "hours-per-week": (1, 99)}
    x = np.stack([(df[c].to_numpy().astype(float) - lo) / (hi - lo)
                  for c, (lo, hi) in bounds.items()], axis=1)
    mech = ldp.DistributedDiscreteGaussian(2, clip=Fraction(3, 2), scale=Fraction(1, 2),
                                           gamma=Fraction(1, 256), modulus=M)
    dropped = tuple(range(1, 31))
    t0 = time.perf_counter()
    est = mech.release(x, None, drop_before_input=dropped)
    seconds = time.perf_counter() - t0
    exact = x[30:].sum(axis=0)
    t = secagg.default_threshold(300)
    rho = mech.rho(300, least=t)
    out = {"n": 300, "t": t, "dropped": len(dropped), "seconds": seconds,
           "exact": exact.tolist(), "estimate": est.tolist(),
           "abs_error": np.abs(est - exact).tolist(), "rho": float(rho.rho),
           "rho_no_dropout": float(mech.rho(300).rho),
           "eps_at_1e-6": float(rho.to_approx(Fraction(1, 10**6)).epsilon),
           "noise_sd": 0.5 * np.sqrt(270)}
    print(out, flush=True)
    return out


def write(path: Path, rows: list[dict[str, float]], ex: dict[str, float]) -> None:
    out = ["# Secure aggregation: time per round (dpkit.local.secagg)", "",
           "`python bench/secagg.py --update-results` (Bonawitz et al., CCS 2017, §4: "
           "X25519 + HKDF-SHA256 pairwise masks, ChaCha20 keystream mod m, Shamir t-of-n "
           "over GF(2³¹ − 1); one process, m = 2^32, t = ⌊2n/3⌋ + 1; dropouts leave after "
           "sharing their keys). Seconds of wall clock on a shared 2-core machine; the "
           "clients' column is all n clients one after another.", "",
           "| n | d | dropped | clients (s) | per client (s) | server (s) | key agreements "
           "| rounds |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['n']} | {r['d']} | {r['drop']:.0%} | {r['client_s']:.2f} | "
                   f"{r['client_s'] / r['n']:.4f} | {r['server_s']:.2f} | "
                   f"{r['agreements']:,} | {r['runs']} |")
    out += ["", "Every round's unmasked sum was checked equal to the survivors' inputs mod m. "
            "The cost grows as n²: each client agrees a key with every other twice (the "
            "share-encryption pair and the mask pair) and expands a mask of length d per "
            "pair; the server rebuilds, per dropped client, one mask per survivor. The paper "
            "(§7) reports its own Java implementation's times on other hardware; they are "
            "not copied here.", "",
            "## Worked example: Adult (age, hours-per-week), 300 clients, 30 dropouts", "",
            "`DistributedDiscreteGaussian(2, clip=3/2, scale=1/2, gamma=1/256, "
            "modulus=2^32).release(x, drop_before_input=1…30)`: the first 300 rows of the "
            "training split, each scaled to [0, 1] (age ∈ [17, 90], hours ∈ [1, 99]); "
            "parameters from bench/local_numeric.py, not tuned here.", "",
            "| | age | hours |", "|---|---:|---:|",
            f"| exact sum of the 270 survivors | {ex['exact'][0]:.2f} | {ex['exact'][1]:.2f} |",
            f"| released | {ex['estimate'][0]:.2f} | {ex['estimate'][1]:.2f} |",
            f"| absolute error | {ex['abs_error'][0]:.2f} | {ex['abs_error'][1]:.2f} |", "",
            f"Noise SD of the sum ≈ σ·√270 = {ex['noise_sd']:.2f} per coordinate (before the "
            f"rotation's mixing). Charged: ρ = {ex['rho']:.4g} (at least t = {ex['t']} "
            f"clients' noise in the sum; {ex['rho_no_dropout']:.4g} without dropouts), "
            f"ε = {ex['eps_at_1e-6']:.3g} at δ = 1e-6 (replace-one neighbours). "
            f"One round took {ex['seconds']:.1f} s."]
    path.write_text("\n".join(out) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="n ≤ 100 only")
    add_flag(ap)
    args = ap.parse_args()
    rows = grid(args.quick)
    ex = adult_example()
    write(results_dir(args.update_results) / "secagg.md", rows, ex)


if __name__ == "__main__":
    main()
