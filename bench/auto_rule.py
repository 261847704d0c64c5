"""Learn and check the selection rule of ``release_histogram(method="auto")``.

    python bench/auto_rule.py collect --dims 1 --part 0 --parts 2   # one process per core;
    python bench/auto_rule.py collect --dims 1 --part 1 --parts 2   # trial 0 -> results/
    python bench/auto_rule.py collect --dims 2                      # auto_runs_*_t0.csv
    (the same three with --first-trial 1 --trials 2 for trials 1–2)
    python bench/auto_rule.py fit --trials 2   # rule -> src/dpkit/release/ranges/auto_rule.py,
                                               # leave-one-dataset-out table -> results/auto.md

``collect`` runs every candidate algorithm (:data:`dpkit.release.ranges.auto.CANDIDATES`, each
with its own scale switch off: ``auto`` has already measured the scale) on every dataset
(the DPBench shapes in ``shared/data/dpbench`` plus three synthetic shapes per dimension,
:func:`synthetic`) × scale × ε × trial × workload, DPBench's protocol (multinomial
resampling to the scale, scaled L2 error per query). ``fit`` builds the lookup table
(:func:`dpkit.release.ranges.auto.fit_rule`) on all datasets and ships it; then, for every
dataset D, it fits the table on the others, runs ``auto`` with that table on D's cells (fresh
noise, the same resampled inputs) and compares its error with the best candidate's and with
Identity's on that cell: D's cells never inform the rule that is scored on them.

Every input (resampling, random workloads, synthetic shapes) comes from a seeded NumPy
Generator keyed by the cell, so ``fit`` rebuilds exactly the inputs ``collect`` scored.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from dpkit.release.ranges import auto, grid2d, hilbert, partition
from dpkit.release.ranges import dpbench as bench
from dpkit.release.ranges.histogram import release_histogram
from dpkit.release.workload import (
    RangeWorkload,
    prefix,
    random_ranges,
    random_rectangles,
    scaled_error,
)

RESULTS = Path(__file__).parent / "results"
RULE_FILE = Path(auto.__file__).with_name("auto_rule.py")
# with ε ∈ {0.1, 1}, scales 10^3, 10^5, 10^7 already cover every signal decade in 1-D
SCALES = {1: [10**3, 10**5, 10**7], 2: [10**3, 10**4, 10**5, 10**6, 10**7]}
EPSILONS = [0.1, 1.0]  # the ε; scale·ε spans 10^2–10^7 (signal decades −2…3)
TRIALS = 1  # per collect process; results/auto.md used 3 (--first-trial 0, then 1 with 2)
ADAPTIVE = {"dawa", "mm"}  # the others ignore the workload: released once, scored on all
FIELDS = ["dataset", "dims", "scale", "epsilon", "trial", "workload", "method", "error"]


def synthetic(dims: int) -> dict[str, np.ndarray]:
    """Three synthetic shapes per dimension (fixed seed): piecewise-constant steps, a sparse
    long-tailed set of spikes, and a smooth mixture of Gaussian bumps."""
    g = np.random.default_rng(20171)
    if dims == 1:
        n = 4096
        steps = np.repeat(g.integers(0, 100, 16), n // 16)
        spikes = np.zeros(n, dtype=np.int64)
        spikes[g.choice(n, 60, replace=False)] = (1e6 / np.arange(1, 61) ** 1.2).astype(int)
        t = np.arange(n)
        smooth = sum(g.uniform(1, 5) * np.exp(-0.5 * ((t - g.uniform(0, n)) / g.uniform(50, 400))
                                               ** 2) for _ in range(5))
        return {"syn_steps": steps, "syn_spikes": spikes,
                "syn_smooth": np.rint(1000 * smooth).astype(np.int64)}
    side = 256
    blocks = np.kron(g.integers(0, 100, (8, 8)), np.ones((32, 32), dtype=np.int64))
    spikes = np.zeros(side * side, dtype=np.int64)
    spikes[g.choice(side * side, 300, replace=False)] = (1e6 / np.arange(1, 301) ** 1.1
                                                         ).astype(int)
    u, v = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    smooth = sum(np.exp(-0.5 * (((u - g.uniform(0, side)) ** 2 + (v - g.uniform(0, side)) ** 2)
                                / g.uniform(10, 40) ** 2)) for _ in range(6))
    return {"syn_blocks": blocks, "syn_spikes": spikes.reshape(side, side),
            "syn_smooth": np.rint(1000 * smooth).astype(np.int64)}


def datasets(dims: int) -> dict[str, np.ndarray]:
    return {**bench.load_datasets(bench.default_data_dir(), dims), **synthetic(dims)}


def cell_inputs(names: list[str], data: dict[str, np.ndarray], name: str, scale: int,
                eps_index: int, trial: int) -> tuple[np.ndarray, list[RangeWorkload]]:
    """The resampled histogram and the workloads of one cell (seeded by the cell)."""
    g = np.random.default_rng([names.index(name), int(math.log10(scale)), eps_index, trial])
    x = bench.resample(data[name], scale, g)
    if x.ndim == 1:
        return x, [prefix(x.size), random_ranges(x.size, bench.RANGE_QUERIES, g)]
    return x, [random_rectangles(x.shape, bench.RANGE_QUERIES, g)]  # type: ignore[arg-type]


def kind(workload: RangeWorkload) -> str:
    return workload.name.split("(")[0]


def collect(dims: int, trials: int, part: int = 0, parts: int = 1, first: int = 0) -> None:
    data = datasets(dims)
    names = sorted(data)
    candidates = auto.CANDIDATES[dims]
    out = RESULTS / f"auto_runs_{dims}d_{part}_t{first}.csv"
    RESULTS.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        for name in names[part::parts]:
            for scale in SCALES[dims]:
                for ei, eps in enumerate(EPSILONS):
                    for trial in range(first, first + trials):
                        x, loads = cell_inputs(names, data, name, scale, ei, trial)
                        shared = {m: release_histogram(x, eps, m, **auto.PLAIN.get(m, {})
                                                       ).counts
                                  for m in candidates if m not in ADAPTIVE}
                        for w in loads:
                            for m in candidates:
                                est = shared[m] if m in shared else release_histogram(
                                    x, eps, m, workload=w, **auto.PLAIN.get(m, {})).counts
                                writer.writerow({
                                    "dataset": name, "dims": dims, "scale": scale,
                                    "epsilon": eps, "trial": trial, "workload": kind(w),
                                    "method": m,
                                    "error": scaled_error(w, x, est)})
                        fh.flush()
            print(f"{dims}-D {name} done at {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def load_runs() -> list[dict]:
    rows = []
    for path in sorted(RESULTS.glob("auto_runs_*d*.csv")):
        with open(path) as fh:
            for r in csv.DictReader(fh):
                rows.append({**r, "dims": int(r["dims"]), "scale": int(r["scale"]),
                             "epsilon": float(r["epsilon"]), "trial": int(r["trial"]),
                             "error": float(r["error"])})
    return rows


def cell_means(rows: list[dict]) -> dict[tuple, dict[str, float]]:
    """(dataset, dims, scale, ε, workload) -> {method: mean scaled error over trials}."""
    acc: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["dataset"], r["dims"], r["scale"], r["epsilon"], r["workload"])
        acc[key][r["method"]].append(r["error"])
    return {k: {m: float(np.mean(v)) for m, v in ms.items()} for k, ms in acc.items()}


def training_cells(means: dict[tuple, dict[str, float]], exclude: str | None = None
                   ) -> list[auto.Cell]:
    cells = []
    for (name, dims, scale, eps, workload), errs in means.items():
        if name == exclude:
            continue
        cells_n = 4096 if dims == 1 else 65536
        cells.append(auto.Cell(dims, workload, scale * eps / cells_n, errs))
    return cells


SWITCHED = {1: ["dawa", "noise_first", "structure_first", "phpartition"],
            2: ["dawa", "ug", "ag", "kdtree"]}
LOSS = 1.1  # a method "loses" on a cell where its error exceeds 1.1× Identity's
MARGIN = 10.0  # thresholds sit a decade below the smallest losing signal


def thresholds(means: dict[tuple, dict[str, float]], exclude: str | None = None
               ) -> dict[tuple[int, str], float]:
    """Per switched method: the switch threshold, half a decade (÷√10) below the smallest
    signal N·ε/cells of any cell (other datasets than ``exclude``) where the method, switch
    off, loses to Identity (inf if never; the measured signals are a decade apart)."""
    out = {}
    for dims, names in SWITCHED.items():
        for m in names:
            lose = [scale * eps / (4096 if d == 1 else 65536)
                    for (name, d, scale, eps, _), errs in means.items()
                    if d == dims and name != exclude and errs[m] > LOSS * errs["identity"]]
            out[(dims, m)] = min(lose, default=math.inf) / MARGIN
    return out


def threshold_lines(means: dict[tuple, dict[str, float]]) -> list[str]:
    """The derived switch thresholds, and their leave-one-dataset-out check: with the
    threshold fitted on the other datasets, the worst ratio to Identity on the held-out
    dataset's cells where the method would still run (signal below the threshold)."""
    full = thresholds(means)
    names = sorted({k[0] for k in means})
    lines = ["| rank | method | switch-off worst ÷ Identity | threshold (all data) | "
             "LOO worst ÷ Identity below the held-out threshold |", "|---|---|---:|---:|---:|"]
    for (dims, m), t in sorted(full.items()):
        worst_off = max(errs[m] / errs["identity"] for k, errs in means.items() if k[1] == dims)
        loo = 0.0
        for name in names:
            t_out = thresholds(means, exclude=name)[(dims, m)]
            for (nm, d, scale, eps, _), errs in means.items():
                cells = 4096 if d == 1 else 65536
                if nm == name and d == dims and scale * eps / cells < t_out:
                    loo = max(loo, errs[m] / errs["identity"])
        lines.append(f"| {dims} | {m} | {worst_off:.2f} | {t:.3g} | {loo:.2f} |")
    return lines


OLD = {(1, "structure_first"): 1.0, (1, "phpartition"): 1.0, (1, "dawa"): math.inf,
       (1, "noise_first"): math.inf, (2, "ug"): 0.1, (2, "kdtree"): 0.1, (2, "ag"): 50.0,
       (2, "dawa"): math.inf}
NEW = {(1, "structure_first"): partition.SWITCH, (1, "phpartition"): partition.SWITCH_PHPARTITION,
       (1, "dawa"): partition.SWITCH_DAWA, (1, "noise_first"): partition.SWITCH_NOISE_FIRST,
       (2, "ug"): grid2d.SWITCH["ug"], (2, "kdtree"): grid2d.SWITCH["kdtree"],
       (2, "ag"): grid2d.SWITCH["ag"], (2, "dawa"): hilbert.SWITCH_DAWA_2D}  # shipped defaults


def before_after(means: dict[tuple, dict[str, float]]) -> list[str]:
    """Worst ratio to Identity per method with the old and the new default thresholds,
    from the switch-off runs: below its threshold a method's own error counts, at or above
    it Identity's at 95% of ε (× 1/0.95, the noisy count's share; N̂'s own noise ignored).
    Data-independent methods have no switch: their measured worst ratio, both columns."""
    lines = ["| rank | method | worst ÷ Identity, old defaults | new defaults | robust |",
             "|---|---|---:|---:|---|"]
    for dims in (1, 2):
        for m in auto.CANDIDATES[dims]:
            if m == "identity":
                continue
            cols = []
            for table in (OLD, NEW):
                t = table.get((dims, m), math.inf)
                worst = 0.0
                for (_, d, scale, eps, _), errs in means.items():
                    if d != dims:
                        continue
                    signal = scale * eps / (4096 if d == 1 else 65536)
                    worst = max(worst, errs[m] / errs["identity"] if signal < t else 1 / 0.95)
                cols.append(worst)
            from dpkit.release.ranges.histogram import method as find
            lines.append(f"| {dims} | {m} | {cols[0]:.2f} | {cols[1]:.2f} | "
                         f"{'yes' if find(m, dims).robust else 'no'} |")
    return lines


def fit(trials: int) -> None:
    """Fit the shipped rule on all datasets, then the leave-one-dataset-out evaluation."""
    means = cell_means(load_runs())
    rule = auto.fit_rule(training_cells(means))
    body = "\n".join(f"    {k!r}: {dict(sorted(v.items()))!r}," for k, v in sorted(rule.items()))
    RULE_FILE.write_text(
        '"""The selection table of ``method="auto"`` (generated by ``bench/auto_rule.py fit``;'
        ' do not\nedit by hand): "rank/workload type" -> {decade of the signal N̂·ε/cells: '
        'algorithm}."""\n\nRULE: dict[str, dict[int, str]] = {\n' + body + "\n}\n")
    data = {1: datasets(1), 2: datasets(2)}
    names = {d: sorted(v) for d, v in data.items()}
    rows = []
    for held in sorted({k[0] for k in means}):
        loo_rule = auto.fit_rule(training_cells(means, exclude=held))
        for (name, dims, scale, eps, workload), errs in sorted(means.items()):
            if name != held:
                continue
            ei = EPSILONS.index(eps)
            got = []
            for trial in range(trials):
                x, loads = cell_inputs(names[dims], data[dims], name, scale, ei, trial)
                w = next(w for w in loads if kind(w) == workload)
                est = release_histogram(x, eps, "auto", workload=w, rule=loo_rule).counts
                got.append(scaled_error(w, x, est))
            n_hat = float(scale)
            chosen = auto.choose(n_hat, eps * 0.95, x.size, dims,
                                 auto.workload_kind(w, dims), loo_rule)
            err = float(np.mean(got))
            best = min(errs, key=lambda m: errs[m])
            rows.append((name, dims, scale, eps, workload, chosen, best, err / errs[best],
                         err / errs["identity"]))
        print(f"held out {held}", file=sys.stderr)
    write_report(rows, means, rule, trials)


def write_report(rows: list[tuple], means: dict[tuple, dict[str, float]],
                 rule: dict[str, dict[int, str]], trials: int) -> None:
    n = len(rows)
    decades = sorted({d for table in rule.values() for d in table})
    within = sum(r[7] <= 1.25 for r in rows)
    worst_id = max(rows, key=lambda r: r[8])
    lines = [
        "# `method=\"auto\"`: leave-one-dataset-out evaluation", "",
        "Reproduce (see bench/auto_rule.py's docstring): `python bench/auto_rule.py collect "
        "--dims 1|2 [--part k --parts 2] [--first-trial 1 --trials 2]` (3 trials in all), then "
        "`python bench/auto_rule.py fit --trials 2` (writes this file and "
        "`src/dpkit/release/ranges/auto_rule.py`).", "",
        f"Protocol: DPBench (multinomial resampling to scales {SCALES[1]} in 1-D, "
        f"{SCALES[2]} in 2-D, ε ∈ {EPSILONS}; 3 trials per cell for the candidates, {trials} "
        "for `auto` — fewer than DPBench's, 2 shared cores; Prefix1D and 2,000 random "
        "ranges in 1-D, "
        "2,000 random rectangles in 2-D; scaled L2 error per query). Datasets: the shared "
        "DPBench shapes (10 1-D, 5 2-D) and 3 synthetic shapes per rank (bench/auto_rule.py "
        "`synthetic`). For each dataset D the rule is fitted on the other datasets only, and "
        "`auto` (5% of ε on the noisy count, the rest on the pick) runs on D's cells with fresh "
        "noise. Best = the best candidate (switch off, all of ε) on that cell; candidates: "
        f"{', '.join(auto.CANDIDATES[1])} (1-D), {', '.join(auto.CANDIDATES[2])} (2-D).", "",
        f"Measured {time.strftime('%Y-%m-%d')}.", "",
        "## Goals", "",
        f"- within 1.25× of the best candidate: {within}/{n} cells = {within / n:.1%} "
        f"(goal ≥ 90%): {'met' if within / n >= 0.9 else 'NOT met'}",
        f"- worst ratio to Identity: {worst_id[8]:.2f} ({worst_id[0]}, scale {worst_id[2]:,}, "
        f"ε = {worst_id[3]:g}, {worst_id[4]}; chose {worst_id[5]}) (goal ≤ 1.2): "
        f"{'met' if worst_id[8] <= 1.2 else 'NOT met'}",
        f"- cells above 1.2× Identity: {sum(r[8] > 1.2 for r in rows)}; median error ÷ best: "
        f"{np.median([r[7] for r in rows]):.2f}; median error ÷ Identity: "
        f"{np.median([r[8] for r in rows]):.2f}",
        *[f"- {d}-D: {np.mean([r[7] <= 1.25 for r in rows if r[1] == d]):.1%} of "
          f"{sum(r[1] == d for r in rows)} cells within 1.25× of the best; worst ÷ Identity "
          f"{max(r[8] for r in rows if r[1] == d):.2f}" for d in (1, 2)], "",
        "Why the 90% goal is missed: the features (noisy scale, rank, workload type) do not "
        "decide the winner. At one signal decade the best algorithm differs by dataset (2-D: "
        "k-d tree 11–37× better than MM on Adult at 10^6–10^7 records and 16–88× worse on "
        "others; UG on the synthetic blocks, DAWA on cabspotting), and the data-dependent "
        "winners' errors vary by 2–5× between runs at small scale, so even the right pick "
        "lands beyond 1.25× of a 3-trial best on some cells. A noisy non-zero-cell fraction "
        "(Pythia's sparsity feature) did not help in an offline check on these runs (75.8% vs "
        "75.0% with the true-scale pick); `auto` pays 5% of ε (≈ 1.05× on its pick's error).",
        "",
        "## Scale switches: derived thresholds and their out-of-sample check", "",
        f"A method loses on a cell when its error (switch off) exceeds {LOSS}× Identity's; the "
        "threshold is a decade below the smallest signal N·ε/cells at which it loses on any "
        "dataset; the LOO column fits it without the held-out dataset and reports the worst "
        "ratio on the held-out cells where the method would still run its own algorithm "
        "(0: none).", "",
        *threshold_lines(means), "",
        "## Every registered method: worst ratio to Identity before and after", "",
        "From the switch-off runs above (hdmm and 1-D mm not run: data-independent, as HB).",
        "", *before_after(means), "",
        "## The shipped rule (fitted on all datasets)", "",
        "Columns: the decade of the signal N̂·ε'/cells (a signal beyond the table uses the "
        "nearest decade).", "",
        "| rank/workload | " + " | ".join(f"10^{d}" for d in decades) + " |",
        "|---|" + "---|" * len(decades)]
    for key, table in sorted(rule.items()):
        lines.append(f"| {key} | " + " | ".join(table.get(d, "—") for d in decades) + " |")
    lines += ["", "## Per cell (leave-one-dataset-out)", "",
              "| dataset | scale | ε | workload | chosen (at the true scale) | best | "
              "÷ best | ÷ Identity |", "|---|---:|---:|---|---|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[2]:,} | {r[3]:g} | {r[4]} | {r[5]} | {r[6]} | "
                     f"{r[7]:.2f} | {r[8]:.2f} |")
    (RESULTS / "auto.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:20]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["collect", "fit"])
    ap.add_argument("--dims", type=int, default=1)
    ap.add_argument("--trials", type=int, default=TRIALS)
    ap.add_argument("--part", type=int, default=0, help="this process's share of datasets")
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--first-trial", type=int, default=0)
    args = ap.parse_args()
    if args.step == "collect":
        collect(args.dims, args.trials, args.part, args.parts, args.first_trial)
    else:
        fit(args.trials)


if __name__ == "__main__":
    main()
