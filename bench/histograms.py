"""Histogram release on DPBench data: every registered algorithm, DPBench's protocol.

    python bench/histograms.py [--trials 3] [--scales 1000,100000,10000000] [--quick]

Writes histograms_{1d,2d}.csv and .png and histograms.md to bench/out/ (bench/results/ with
--update-results): the mean scaled L2 error per workload × ε × scale × algorithm (ratio to
Identity), the issue's goal checks, the exact-formula anchors (expected RMSE of the
data-independent strategies at n = 4,096, ε = 1) and each algorithm's release time on
4,096 bins and 256×256 cells.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from outdir import TRACKED, add_flag, require, results_dir

from dpkit.release import release_histogram
from dpkit.release.measure import expected_rmse
from dpkit.release.ranges import dpbench as bench
from dpkit.release.workload import all_range_gram

RESULTS = TRACKED  # where a run writes: main() points it at bench/out unless asked
PEERS_PYTHON = Path("/work/peers-venv/bin/python")


def run_peers(python: Path, scales: list[int], epsilons: list[float], trials: int,
              datasets: list[str] | None) -> list[dict]:
    """OpenDP and diffprivlib on the same resampled inputs (bench/peers/histograms_peers.py,
    in the peers' own virtualenv)."""
    out = RESULTS / "histograms_peers.json"
    cmd = [str(python), str(Path(__file__).parent / "peers" / "histograms_peers.py"),
           "--data-dir", str(bench.default_data_dir()), "--scales", ",".join(map(str, scales)),
           "--epsilons", ",".join(map(str, epsilons)), "--trials", str(trials), "--seed", "0",
           "--out", str(out)]
    if datasets:
        cmd += ["--datasets", ",".join(datasets)]
    subprocess.run(cmd, check=True)
    return json.loads(out.read_text())


def peer_table(runs: list[bench.Run], peers: list[dict]) -> list[str]:
    """Mean scaled error and seconds per release: dpkit's Identity and best algorithm beside
    each peer (same datasets, trials and workloads)."""
    err: dict = defaultdict(list)
    sec: dict = defaultdict(list)
    for r in runs:
        err[(r.workload, r.epsilon, r.scale, f"dpkit {r.method}")].append(r.scaled_error)
        sec[(r.workload, r.epsilon, r.scale, f"dpkit {r.method}")].append(r.seconds)
    for p in peers:
        key = (p["workload"], float(p["epsilon"]), int(p["scale"]), p["system"])
        err[key].append(p["scaled_error"])
        sec[key].append(p["seconds"])
    systems = sorted({p["system"] for p in peers})
    out = ["| workload | ε | scale | dpkit identity | dpkit best | " + " | ".join(systems)
           + " |", "|---|---:|---:|---:|---|" + "---:|" * len(systems)]
    for w, e, s in sorted({k[:3] for k in err if k[3].startswith("dpkit")}):
        mine = {k[3]: float(np.mean(v)) for k, v in err.items() if k[:3] == (w, e, s)
                and k[3].startswith("dpkit") and k[3] != "dpkit uniform"}
        best = min(mine, key=mine.get)
        ident = mine.get("dpkit identity", float("nan"))
        cells = []
        for sysname in systems:
            v = err.get((w, e, s, sysname))
            t = sec.get((w, e, s, sysname))
            cells.append("—" if not v else f"{np.mean(v):.3g} ({np.mean(t):.2f} s)")
        t_ident = np.mean(sec[(w, e, s, "dpkit identity")])
        out.append(f"| {w} | {e:g} | {s:,} | {ident:.3g} ({t_ident:.3f} s) | "
                   f"{best[6:]} {mine[best]:.3g} | " + " | ".join(cells) + " |")
    return out


def anchors() -> list[tuple[str, float, float, float | None, float | None]]:
    """(strategy, prefix RMSE, goal, all-range RMSE, goal) at n = 4,096, ε = 1."""
    from dpkit.release.ranges.hierarchical import hb_branching, tree_strategy
    from dpkit.release.ranges.wavelet import haar_forward

    n = 4096
    prefix_gram = np.minimum.outer(n - np.arange(n), n - np.arange(n)).astype(float)
    ranges_gram = all_range_gram(n)
    rows = []
    for name, a, goals in [("identity", np.eye(n), (64.01, None)),
                           ("binary tree", tree_strategy(n, 2), (21.77, 27.90)),
                           ("Haar (Privelet)", haar_forward(np.eye(n, dtype=np.int64), 0),
                            (21.67, 26.18)),
                           (f"HB (b = {hb_branching(n)})", tree_strategy(n, hb_branching(n)),
                            (15.66, 19.76))]:
        p = expected_rmse(None, a, 1.0, gram=prefix_gram, queries=n)
        r = expected_rmse(None, a, 1.0, gram=ranges_gram, queries=n * (n + 1) // 2)
        rows.append((name, p, goals[0], r, goals[1]))
    return rows


def _git_head() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=Path(__file__).parent).stdout.strip()


def hdmm_anchors() -> list[tuple[str, float, str]]:
    """HDMM's anchors: (check, ours, goal) — OPT_0 RMSE at ε = √2 on all ranges (1-D n = 256
    and the 256 × 256 product) and the L2-optimised strategy against the SVD bound on
    prefix / all ranges n = 256 (squared-error ratio)."""
    import math

    from dpkit.release.ranges import gaussian_mm as gm
    from dpkit.release.ranges import matrix as mm
    from dpkit.release.workload import all_range, prefix

    n, sqrt2 = 256, math.sqrt(2)
    (a,) = mm.mm_strategy((n,))
    one = mm.expected_rmse(all_range(n), a, sqrt2)
    two = mm.kron_expected_rmse([mm._AllRangeGram(n)] * 2, [len(all_range(n))] * 2,
                                mm.mm_strategy((n, n)), sqrt2)
    w = prefix(n).matrix().toarray().astype(float)
    rows = [("1-D all ranges n = 256, OPT_0 RMSE (Laplace, ε = √2)", one, "≤ 5.74"),
            ("2-D all ranges 256×256, OPT_⊗ RMSE (Laplace, ε = √2)", two, "≤ 32.7")]
    for name, gram in (("prefix", w.T @ w), ("all ranges", all_range_gram(n))):
        ratio = gm.l2_error(gram, gm.optimize_l2(gram)) / mm.svd_lower_bound(gram=gram)
        rows.append((f"1-D {name} n = 256, L2 strategy ÷ SVD bound (Gaussian, squared)",
                     ratio, "≤ 1.1"))
    return rows


def timings(datasets_1d: dict, datasets_2d: dict) -> list[tuple[str, float, float | None]]:
    x1 = next(iter(datasets_1d.values()))
    x2 = next(iter(datasets_2d.values()))
    out = []
    for m in sorted(set(bench.available(1)) | set(bench.available(2))):
        t1 = t2 = None
        if m in bench.available(1):
            t = time.perf_counter()
            release_histogram(x1, 1, m)
            t1 = time.perf_counter() - t
        if m in bench.available(2):
            t = time.perf_counter()
            release_histogram(x2, 1, m)
            t2 = time.perf_counter() - t
        out.append((m, t1, t2))
    return out


def goal_lines(runs: list[bench.Run], small: int, large: int) -> list[str]:
    rows = bench.summary(runs)
    lines = []
    for method in ("dawa", "ag"):
        ratios = [1 / r["vs_identity"] for r in rows if r["method"] == method
                  and r["scale"] == small]
        if ratios:
            lines.append(f"- {method} at scale {small:,}: Identity's error ÷ {method}'s = "
                         f"{min(ratios):.2f}–{max(ratios):.2f}× over workloads × ε (goal ≥ 2×): "
                         f"{'met' if min(ratios) >= 2 else 'NOT met'}")
    worst = [(r["vs_identity"], r["method"], r["workload"], r["epsilon"]) for r in rows
             if r["scale"] == large and r["method"] not in ("identity", "uniform")]
    if worst:
        ratio, method, workload, eps = max(worst)
        lines.append(f"- At scale {large:,} the worst algorithm relative to Identity is "
                     f"{method} ({workload}, ε = {eps:g}) at {ratio:.2f}× Identity's error "
                     f"(goal ≤ 1.2×; Uniform, a baseline, excluded): "
                     f"{'met' if ratio <= 1.2 else 'NOT met'}")
    return lines


def table(runs: list[bench.Run]) -> list[str]:
    rows = bench.summary(runs)
    methods = sorted({r["method"] for r in rows})
    keys = sorted({(r["workload"], r["epsilon"], r["scale"]) for r in rows})
    value = {(r["workload"], r["epsilon"], r["scale"], r["method"]): r for r in rows}
    out = ["| workload | ε | scale | " + " | ".join(methods) + " |",
           "|---|---:|---:|" + "---:|" * len(methods)]
    for w, e, s in keys:
        cells = []
        for m in methods:
            r = value.get((w, e, s, m))
            cells.append("—" if r is None else f"{r['error']:.3g} ({r['vs_identity']:.2f})")
        out.append(f"| {w} | {e:g} | {s:,} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--scales", default="1000,100000,10000000")
    ap.add_argument("--epsilons", default="0.01,0.1,1")
    ap.add_argument("--quick", action="store_true", help="two datasets per dimension")
    ap.add_argument("--large-trials", type=int, default=10,
                    help="trials for the large-scale goal check")
    ap.add_argument("--peers-python", type=Path, default=PEERS_PYTHON,
                    help="python of the peers' virtualenv (skipped if missing)")
    add_flag(ap)
    args = ap.parse_args()
    global RESULTS
    scales = [int(float(s)) for s in args.scales.split(",")]
    epsilons = [float(e) for e in args.epsilons.split(",")]
    data_dir = bench.default_data_dir()
    require(data_dir / "1D", data_dir / "2D", what="DPBench data ($DPKIT_DPBENCH)")
    RESULTS = results_dir(args.update_results)
    lines = ["# Histogram release on DPBench data", "",
             "Reproduce: `python bench/histograms.py` (or `dpkit bench histograms --dims 1|2`).",
             "",
             f"Protocol (Hay et al. SIGMOD 2016): scales {', '.join(f'{s:,}' for s in scales)} "
             f"by multinomial resampling of each dataset's shape; ε ∈ {epsilons}; "
             f"{args.trials} trials; Prefix1D and 2,000 random ranges (1-D), 2,000 random "
             "rectangles (2-D); cells show the mean scaled L2 error per query "
             "‖Wx − Wx̂‖₂/|W|/scale over datasets and trials, and (in parentheses) its ratio "
             "to Identity's.", "",
             f"Measured {time.strftime('%Y-%m-%d')} at git {_git_head()} on 2 cores.", ""]
    all_runs = []
    loaded = {}
    for dims in (1, 2):
        data = bench.load_datasets(data_dir, dims)
        if args.quick:
            data = dict(list(data.items())[:2])
        loaded[dims] = data
        t = time.perf_counter()
        runs = bench.evaluate(data, bench.available(dims), scales, epsilons, args.trials)
        took = time.perf_counter() - t
        bench.write_csv(runs, RESULTS / f"histograms_{dims}d.csv")
        bench.plot(runs, RESULTS / f"histograms_{dims}d.png")
        all_runs += runs
        lines += [f"## {dims}-D ({', '.join(data)}; {took:.0f} s)", "",
                  f"![error vs scale](histograms_{dims}d.png)", "", *table(runs), ""]
    # the large-scale goal compares means of heavy-tailed errors (a prefix workload's error
    # is a random walk's): 3 trials left ±10% noise on the ratios, so it gets more trials
    large = []
    for dims in (1, 2):
        algorithms = [m for m in bench.available(dims) if m != "uniform"]
        large += bench.evaluate(loaded[dims], algorithms, [max(scales)], epsilons,
                                args.large_trials, seed=1)
    lines += ["## Goals", "", *goal_lines(all_runs, min(scales), max(scales)),
              f"- The same at scale {max(scales):,} with {args.large_trials} trials per "
              "dataset (less noise on the ratio; fresh inputs):",
              *["  " + line for line in goal_lines(large, max(scales), max(scales))
                if "worst" in line], ""]
    if args.peers_python.exists():
        names = [n for d in loaded.values() for n in d] if args.quick else None
        peers = run_peers(args.peers_python, scales, epsilons, args.trials, names)
        lines += ["## Beside the peers (OpenDP, diffprivlib: per-cell noise only)", "",
                  "Same resampled histograms and workloads (bench/peers/histograms_peers.py, "
                  "in the peers' virtualenv; it may run fewer trials to fit its time limit, "
                  "see histograms_peers.json). Mean scaled error (mean seconds per release).",
                  "", *peer_table(all_runs, peers), ""]
    lines += ["## Exact-formula anchors (expected RMSE, least squares, ε = 1, n = 4,096)", "",
              "| strategy | prefix | goal | all ranges | goal |", "|---|---:|---:|---:|---:|"]
    for name, p, pg, r, rg in anchors():
        lines.append(f"| {name} | {p:.2f} | {pg:.2f} | {r:.2f} | "
                     f"{'—' if rg is None else f'{rg:.2f}'} |")
    lines += ["", "## HDMM anchors", "", "| check | dpkit | goal |", "|---|---:|---|"]
    lines += [f"| {name} | {value:.4g} | {goal} |" for name, value, goal in hdmm_anchors()]
    lines += ["", "## Release time (one run, ε = 1)", "",
              "| algorithm | 4,096 bins s | 256×256 s |", "|---|---:|---:|"]
    for m, t1, t2 in timings(loaded[1], loaded[2]):
        lines.append(f"| {m} | {'—' if t1 is None else f'{t1:.3f}'} | "
                     f"{'—' if t2 is None else f'{t2:.3f}'} |")
    (RESULTS / "histograms.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
