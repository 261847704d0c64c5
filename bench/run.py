"""dpkit's benchmarks beside the libraries a user would pick instead, in one run.

    python bench/run.py [--peers-python /work/peers-venv/bin/python] [--n 10000000]
                        [--only samplers,groupby,demo,mean] [--mean-reps 30]
                        [--baseline REV]

1. Sampler throughput (values/s) on 10^7 values: dpkit discrete Laplace, discrete Gaussian and
   grid (continuous) Laplace, next to numpy.random.Generator.laplace (insecure floating-point
   floor) and OpenDP 0.16 make_laplace on a float vector (peer venv, smaller n: it is slow).
   The exact L2 ("vector") Laplace on Z^d, dpkit.core.lattice.lattice_laplace, is timed at
   d = 2 (10^6 vectors) and d = 10 (10^5 vectors); its rate is in coordinates/s, with
   vectors/s beside it.
2. Grouped DP count + sum, 10^6 rows, 1,000 public keys, ε = 1: time to first result from a
   fresh process and steady state, next to plain Polars (the floor) and OpenDP's Context API.
3. Peak memory (max RSS) of `dpkit demo`.
4. A fresh-session DP mean (ε = 1, bounds (0, 100)) at 10^5 and 10^6 rows beside
   diffprivlib's ``tools.mean`` (peers' virtualenv through ``DPKIT_PEERS_PYTHON``, default
   /work/venv-peers-logistic/bin/python) and numpy's ``mean`` (the floor): bench/fixed_cost.py's
   items and timing loop (``--mean-reps`` repetitions in 3 round-robin blocks; medians),
   with its grouped count + sum at 10^5 rows and 1,000 keys beside the plain Polars
   group-by (the issue's goal: ≤ 1.5× that floor). ``--only mean`` runs just this section
   (about a minute). ``--baseline REV`` measures the section at git revision REV too, side by
   side in the same run: the two trees (REV's ``src`` exported to a temporary directory)
   run in turn in fresh processes, block after block, and the table gains before / after
   columns.

Writes bench/results/latest.json and prints a Markdown table with ratios. With --only, just
those sections are re-measured and the others are kept from the existing latest.json. Peers
run from the virtual environment described in ../shared/PEERS.md; skipped if it is missing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
from outdir import add_flag, results_dir

from dpkit.core import samplers
from dpkit.core.lattice import lattice_laplace
from dpkit.mechanisms import make_gaussian, make_laplace, make_staircase

HERE = Path(__file__).resolve().parent


def rate(fn, n: int, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t)
    return n / best


# (d, vectors) for the lattice (vector) Laplace rows
LATTICE_CASES = ((2, 1_000_000), (10, 100_000))


def lattice_bench() -> dict[str, dict[str, float]]:
    """Vectors/s and coordinates/s of the exact L2 Laplace on Z^d at scale 1."""
    out = {}
    for d, vectors in LATTICE_CASES:
        scale = Fraction(1)
        proposal = scale * Fraction(math.isqrt(d * 10**12) + 1, 10**6)  # ≥ s·√d
        r = rate(lambda k, s=scale, b=proposal, d=d: lattice_laplace(s, b, d, k), vectors)
        out[f"dpkit_lattice_laplace_d{d}"] = {"dim": d, "vectors": vectors,
                                              "vectors_per_s": r, "coordinates_per_s": r * d}
    return out


def samplers_bench(n: int) -> dict[str, float]:
    grid = make_laplace(1.0, max_size=n)
    grid_gauss = make_gaussian(1.0, max_size=n)  # default max_size is 65,536
    stair = make_staircase(1, 1)
    zeros = np.zeros(n)
    gen = np.random.default_rng()  # the insecure floor, for comparison only
    return {
        "dpkit_discrete_laplace": rate(lambda k: samplers.discrete_laplace(1, k), n),
        "dpkit_discrete_laplace_scale_1e3": rate(
            lambda k: samplers.discrete_laplace(Fraction(1000), k), n),
        "dpkit_geometric": rate(lambda k: samplers.geometric(1, k), n),
        "dpkit_discrete_gaussian": rate(lambda k: samplers.discrete_gaussian(1, k), n, 1),
        "dpkit_discrete_gaussian_sigma_1e3": rate(
            lambda k: samplers.discrete_gaussian(1000, k), n, 1),
        "dpkit_grid_laplace": rate(lambda k: grid(zeros), n),
        "dpkit_grid_gaussian": rate(lambda k: grid_gauss(zeros), n, 1),
        "dpkit_staircase": rate(lambda k: stair(zeros), n, 1),
        "numpy_laplace_insecure": rate(lambda k: gen.laplace(0, 1, k), n),
    }


def peer(python: str | None, script: str, *args: str) -> dict | None:
    if not python or not Path(python).exists():
        return None
    out = subprocess.run([python, str(HERE / "peers" / script), *args], capture_output=True,
                         text=True, timeout=1800)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def demo_memory() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, DPKIT_HOME=home)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dpkit", "demo"], env=env, check=True,
                       capture_output=True)
        wall = time.perf_counter() - t
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"demo_wall_s": wall, "demo_peak_rss_mib": peak_kib / 1024}


def mean_bench(reps: int, baseline: str | None = None) -> dict[str, object]:
    """Median seconds of the fresh-session DP mean, numpy's mean and diffprivlib's at each
    of bench/fixed_cost.py's sizes, and of the grouped release and its Polars floor (its
    timing loop); with ``baseline`` (a git revision) the same at that revision, in turn."""
    import fixed_cost

    out: dict[str, object] = {"reps": reps, "sizes": list(fixed_cost.SIZES),
                              "peers_python": str(fixed_cost.PEERS_PYTHON)}
    if baseline is None:
        times = fixed_cost.measure(reps, blocks=3)
        out["median_s"] = {name: statistics.median(ts) for name, ts in times.items()}
        return out
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", baseline, "src"], cwd=HERE.parent,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        trees = {"after": HERE.parent / "src", "before": Path(tmp) / "src"}
        runs: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
        for _ in range(3):  # blocks: after, before, after, before…
            for label, src in trees.items():
                for name, ts in _measure_in(src, max(1, reps // 3)).items():
                    runs[label].setdefault(name, []).extend(ts)
    out["median_s"] = {name: statistics.median(ts) for name, ts in runs["after"].items()}
    out["baseline"] = {"rev": baseline, "median_s": {
        name: statistics.median(ts) for name, ts in runs["before"].items()}}
    return out


def _measure_in(src: Path, reps: int) -> dict[str, list[float]]:
    """bench/fixed_cost.py's timing loop (one block) in a fresh process importing dpkit from
    ``src``."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import fixed_cost; "
            "print(json.dumps(fixed_cost.measure(int(sys.argv[2]), 1)))")
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", code, str(HERE), str(reps)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


SECTIONS = ("samplers", "groupby", "demo", "mean")


def step(what: str) -> None:
    """Say what runs next (standard error): a full run takes minutes."""
    print(f"[bench/run.py {time.strftime('%H:%M:%S')}] {what}…", file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers-python", default="/work/peers-venv/bin/python")
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--opendp-n", type=int, default=50_000)
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated sections to re-measure: " + ", ".join(SECTIONS))
    ap.add_argument("--mean-reps", type=int, default=30)
    ap.add_argument("--baseline", default=None,
                    help="git revision to measure the mean section at too, side by side")
    add_flag(ap)
    args = ap.parse_args()
    only = set(args.only.split(","))
    if not only <= set(SECTIONS):
        ap.error(f"unknown section in --only: {args.only}")

    out_dir = results_dir(args.update_results)
    latest = out_dir / "latest.json"
    results: dict[str, object] = {}
    if only != set(SECTIONS) and latest.exists():
        results = json.loads(latest.read_text())
    if "demo" in only:
        step("the demo's memory")
        results["demo"] = demo_memory()  # first, so RUSAGE_CHILDREN is the demo's alone
    if "samplers" in only:
        results["n"] = args.n
        step(f"the samplers on {args.n:,} draws each")
        results["samplers"] = samplers_bench(args.n)
        step("the lattice (vector) Laplace")
        results["lattice_laplace"] = lattice_bench()
        step("OpenDP's Laplace (peers' virtualenv)")
        results["opendp_laplace"] = peer(args.peers_python, "opendp_laplace.py",
                                         str(args.opendp_n))
    if "groupby" in only:
        step("the grouped release (dpkit, then OpenDP)")
        grouped = subprocess.run([sys.executable, str(HERE / "dpkit_groupby.py")],
                                 capture_output=True, text=True, check=True)
        results["dpkit_groupby"] = json.loads(grouped.stdout)
        results["opendp_groupby"] = peer(args.peers_python, "opendp_groupby.py")
    if "mean" in only:
        step("the fresh-session mean beside diffprivlib (peers' virtualenv) and numpy")
        results["mean"] = mean_bench(args.mean_reps, args.baseline)

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                          capture_output=True).stdout.strip()
    stamp = {"date": time.strftime("%Y-%m-%d"), "git_head": head}
    results.setdefault("measured", {}).update({section: stamp for section in sorted(only)})
    latest.write_text(json.dumps(results, indent=2))
    print(report(results))


def mean_lines(m: dict) -> list[str]:
    """The mean section's table: milliseconds per release and the ratios (and, measured
    with ``--baseline``, the same before and after)."""
    lines = _mean_table(m["median_s"], m["sizes"])
    base = m.get("baseline")
    if base:
        lines += ["", f"Before (`{base['rev']}`), in the same run:"]
        lines += _mean_table(base["median_s"], m["sizes"])
        keys = [f"dpkit mean {n}" for n in m["sizes"]] + [GROUPED]
        lines += ["", "| after ÷ before | " + " | ".join(keys) + " |",
                  "|---" * (len(keys) + 1) + "|",
                  "| time | " + " | ".join(
                      f"{m['median_s'][k] / base['median_s'][k]:.2f}×"
                      if k in m["median_s"] and k in base["median_s"] else "—"
                      for k in keys) + " |"]
    return lines


GROUPED = "dpkit grouped 100000"


def _mean_table(med: dict, sizes: list[int]) -> list[str]:
    """One tree's rows: the means beside their floors and diffprivlib, then the grouped
    release beside its Polars floor (milliseconds, ratios)."""
    lines = ["", "| fresh-session mean, ε = 1 | " + " | ".join(f"{n:,} rows (ms)" for n in sizes)
             + " |", "|---" * (len(sizes) + 1) + "|"]
    for label, key in (("numpy mean (floor)", "numpy mean"),
                       ("diffprivlib tools.mean", "diffprivlib mean"), ("dpkit", "dpkit mean")):
        lines.append(f"| {label} | " + " | ".join(
            f"{med[f'{key} {n}'] * 1e3:.3f}" if f"{key} {n}" in med else "—" for n in sizes)
            + " |")
    for label, key in (("dpkit ÷ diffprivlib", "diffprivlib mean"),
                       ("dpkit ÷ numpy", "numpy mean")):
        lines.append(f"| {label} | " + " | ".join(
            f"{med[f'dpkit mean {n}'] / med[f'{key} {n}']:.2f}×" if f"{key} {n}" in med
            else "—" for n in sizes) + " |")
    floor = med.get("polars grouped 100000")
    if GROUPED in med and floor:
        lines += ["", "| grouped count+sum, 10^5 rows, 1,000 keys | ms | ÷ Polars (goal ≤ 1.5) |",
                  "|---|---|---|", f"| Polars group_by (floor) | {floor * 1e3:.3f} | 1× |",
                  f"| dpkit, fresh session | {med[GROUPED] * 1e3:.3f} | "
                  f"{med[GROUPED] / floor:.2f}× |"]
    return lines


def report(r: dict) -> str:
    s = r.get("samplers") or {}
    od = r.get("opendp_laplace") or {}
    lines = ["| sampler (values/s) | rate | vs numpy (insecure) | vs OpenDP |",
             "|---|---|---|---|"] if s else []
    numpy_rate = s.get("numpy_laplace_insecure", float("nan"))
    odr = od.get("opendp_values_per_s")
    for name in s:
        vs_od = f"{s[name] / odr:,.0f}×" if odr else "—"
        lines.append(f"| {name} | {s[name]:,.0f} | {s[name] / numpy_rate:.3f}× | {vs_od} |")
    for name, v in (r.get("lattice_laplace") or {}).items():
        c = v["coordinates_per_s"]
        vs_od = f"{c / odr:,.0f}×" if odr else "—"
        lines.append(f"| {name} (coordinates/s; {v['vectors_per_s']:,.0f} vectors/s, "
                     f"{v['vectors']:,} vectors) | {c:,.0f} | {c / numpy_rate:.3f}× | {vs_od} |")
    if odr:
        lines.append(f"| opendp_make_laplace (n={od['n']:,}) | {odr:,.0f} | "
                     f"{odr / numpy_rate:.5f}× | 1× |")
    g, og = r.get("dpkit_groupby"), r.get("opendp_groupby") or {}
    if g:
        lines += ["", "| grouped count+sum, 10^6 rows, 1,000 keys | first result (s) | "
                  "steady (s) | steady / Polars floor |", "|---|---|---|---|",
                  f"| Polars floor | — | {g['polars_floor_steady_s']:.4f} | 1× |",
                  f"| dpkit | {g['first_result_s']:.2f} | {g['steady_s']:.4f} | "
                  f"{g['steady_s'] / g['polars_floor_steady_s']:.2f}× |"]
    if g and og:
        lines.append(f"| OpenDP {og['opendp_version']} | {og['first_result_s']:.2f} | "
                     f"{og['steady_s']:.3f} | {og['steady_s'] / g['polars_floor_steady_s']:.1f}× |")
    if r.get("mean"):
        lines += mean_lines(r["mean"])
    d = r.get("demo")
    if d:
        lines += ["", f"`dpkit demo`: {d['demo_wall_s']:.2f} s wall, peak RSS "
                  f"{d['demo_peak_rss_mib']:.0f} MiB"]
    measured = r.get("measured") or {}
    if measured:
        lines += ["", "Measured: " + "; ".join(
            f"{k} {v['date']} at {v['git_head']}" for k, v in sorted(measured.items()))
            + "; sections not listed are from an earlier run."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
