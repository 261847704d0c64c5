"""Learn and check the selection rule of ``release_histogram(method="auto")``.

    python bench/auto_rule.py collect --dims 1 --trials 3                 # candidates' trials
    python bench/auto_rule.py collect --dims 1 --trials 7 --first-trial 3  # 0–9 -> results/
    python bench/auto_rule.py collect --dims 2 --trials 3                 # auto_runs_*.csv
    python bench/auto_rule.py collect --dims 2 --trials 7 --first-trial 3  # (one at a time)
    python bench/auto_rule.py fit --trials 10 --border-trials 10   # lists borderline cells
    python bench/auto_rule.py refine --upto 30     # their 2 best candidates + pick: 30 trials
    python bench/auto_rule.py fit --trials 10 --border-trials 30   # rule -> src/dpkit/release/
                                    # ranges/auto_rule.py, LOO table -> results/auto.md
    (results/auto.md: then `refine --upto 30` once more and the last `fit` again)
    python bench/auto_rule.py fallback   # auto.FALLBACK from the DPBench 2-D shapes' runs
    python bench/auto_rule.py high       # auto.HIGH from every training shape's runs
    python bench/auto_rule.py heldout --trials 10 --border-trials 60  # results/auto_heldout.md:
                                    # auto ÷ Identity, without and with auto.HIGH

(``--methods mm`` runs only the named candidates, e.g. one added later: its file gets the
names as a suffix.) ``collect`` runs every candidate algorithm
(:data:`dpkit.release.ranges.auto.CANDIDATES`, each with its own scale switch off: ``auto``
has already measured the scale) on every dataset (the DPBench shapes in
``shared/data/dpbench`` plus three synthetic shapes per dimension, :func:`synthetic`) ×
scale × ε × trial × workload, DPBench's protocol (multinomial resampling to the scale,
scaled L2 error per query). ``fit`` builds the lookup table
(:func:`dpkit.release.ranges.auto.fit_rule`) on all datasets and ships it; then, for every
dataset D, it fits the table on the others, runs ``auto`` with that table on D's cells (fresh
noise, the same resampled inputs) and compares its error with the best candidate's and with
Identity's on that cell: D's cells never inform the rule that is scored on them. ``refine``
adds trials where the first ``fit`` found ``auto`` within 1.25–2× of the best (the winner's
curse of a minimum over noisy means, and auto's own noise, decide those cells).

Every input (resampling, random workloads, synthetic shapes) comes from a seeded NumPy
Generator keyed by the cell, so ``fit`` rebuilds exactly the inputs ``collect`` scored.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from dpkit.core.numbers import to_fraction
from dpkit.release.ranges import auto, grid2d, hilbert, partition
from dpkit.release.ranges import dpbench as bench
from dpkit.release.ranges.auto_rule import RULE
from dpkit.release.ranges.histogram import release_histogram
from dpkit.release.ranges.switch import noisy_total
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
TRIALS = 1  # per collect process; results/auto.md used 10 (the docstring's commands)
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
    return x, [random_rectangles(x.shape, bench.RANGE_QUERIES, g)]


def kind(workload: RangeWorkload) -> str:
    return workload.name.split("(")[0]


def collect(dims: int, trials: int, part: int = 0, parts: int = 1, first: int = 0,
            methods: list[str] | None = None) -> None:
    """Run ``methods`` (default every candidate) on every cell of rank ``dims`` for trials
    ``first`` … ``first + trials − 1``; rows -> results/auto_runs_<dims>d_<part>_t<first>
    [_<methods>].csv."""
    data = datasets(dims)
    names = sorted(data)
    candidates = tuple(methods or auto.CANDIDATES[dims])
    tag = "_" + "-".join(methods) if methods else ""
    out = RESULTS / f"auto_runs_{dims}d_{part}_t{first}{tag}.csv"
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


def cell_means(rows: list[dict], below: int | None = None) -> dict[tuple, dict[str, float]]:
    """(dataset, dims, scale, ε, workload) -> {method: mean scaled error over trials}
    (only trials < ``below`` if given: the old estimator's first :data:`OLD_TRIALS`)."""
    acc: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if below is not None and r["trial"] >= below:
            continue
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
        cells.append(auto.Cell(dims, workload, scale * eps / cells_n, errs, name))
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


OLD_TRIALS, OLD_AUTO = 3, 2  # the old estimator: candidates' first 3 trials, auto's first 2
BORDER = (1.25, 2.0)  # a cell is borderline when auto's error ÷ best falls in this range
EDGES = ("neighbours", "interpolated")  # fit_rule's safety variants, chosen by LOO score


def proxy_loo(means: dict[tuple, dict[str, float]], edges: str) -> tuple[float, float, float]:
    """Leave-one-dataset-out share of cells within 1.25× of the best, from the candidates'
    runs alone: auto's error taken as its pick's at the true scale ÷ 0.95 (error ∝ 1/ε).
    Overall, 1-D, 2-D. Used only to choose between :data:`EDGES`."""
    hits: dict[int, list[bool]] = {1: [], 2: []}
    for held in sorted({k[0] for k in means}):
        rule = auto.fit_rule(training_cells(means, exclude=held), edges=edges)
        for (name, dims, scale, eps, workload), errs in means.items():
            if name == held:
                pick = auto.choose(scale, eps * 0.95, 4096 if dims == 1 else 65536, dims,
                                   workload, rule)
                hits[dims].append(errs[pick] / 0.95 <= 1.25 * min(errs.values()))
    both = hits[1] + hits[2]
    return float(np.mean(both)), float(np.mean(hits[1])), float(np.mean(hits[2]))


def fit(trials: int, border_trials: int) -> None:
    """Fit the shipped rule on all datasets, then the leave-one-dataset-out evaluation:
    ``trials`` runs of auto per cell, up to ``border_trials`` on borderline cells. Writes
    results/auto.md, the rule, and results/auto_borderline.csv (for ``refine``)."""
    t0, c0 = time.perf_counter(), time.process_time()
    runs = load_runs()
    means, old = cell_means(runs), cell_means(runs, below=OLD_TRIALS)
    counts: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in runs:
        counts[(r["dataset"], r["dims"], r["scale"], r["epsilon"], r["workload"])][
            r["method"]] += 1
    variants = {e: proxy_loo(means, e) for e in EDGES}
    edges = max(EDGES, key=lambda e: (variants[e][0], e == EDGES[0]))
    rule = auto.fit_rule(training_cells(means), edges=edges)
    body = "\n".join(f"    {k!r}: {dict(sorted(v.items()))!r}," for k, v in sorted(rule.items()))
    RULE_FILE.write_text(
        '"""The selection table of ``method="auto"`` (generated by ``bench/auto_rule.py fit``;'
        ' do not\nedit by hand): "rank/workload type" -> {decade of the signal N̂·ε/cells: '
        'algorithm}."""\n\nRULE: dict[str, dict[int, str]] = {\n' + body + "\n}\n")
    data = {1: datasets(1), 2: datasets(2)}
    names = {d: sorted(v) for d, v in data.items()}
    rows, border = [], []
    for held in sorted({k[0] for k in means}):
        loo_rule = auto.fit_rule(training_cells(means, exclude=held), edges=edges)
        for key, errs in sorted(means.items()):
            name, dims, scale, eps, workload = key
            if name != held:
                continue
            best = min(errs, key=lambda m: errs[m])
            got: list[float] = []
            n_runs = trials  # decided once, after `trials` runs: no optional stopping
            while len(got) < n_runs:
                x, loads = cell_inputs(names[dims], data[dims], name, scale,
                                       EPSILONS.index(eps), len(got))
                w = next(w for w in loads if kind(w) == workload)
                est = release_histogram(x, eps, "auto", workload=w, rule=loo_rule).counts
                got.append(scaled_error(w, x, est))
                if len(got) == trials and BORDER[0] <= np.mean(got) / errs[best] <= BORDER[1]:
                    n_runs = max(trials, border_trials)
            chosen = auto.choose(float(scale), eps * 0.95, x.size, dims,
                                 auto.workload_kind(w, dims), loo_rule)
            err, err_old = float(np.mean(got)), float(np.mean(got[:OLD_AUTO]))
            o = old[key]
            rows.append((name, dims, scale, eps, workload, chosen, best, err / errs[best],
                         err / errs["identity"], err_old / min(o.values()),
                         err_old / o["identity"], len(got), counts[key][best]))
            if BORDER[0] <= err / errs[best] <= BORDER[1]:
                second = sorted(errs, key=lambda m: errs[m])[1]
                border.append({"dataset": name, "dims": dims, "scale": scale, "epsilon": eps,
                               "workload": workload,
                               "methods": " ".join(sorted({best, second, chosen}))})
        print(f"held out {held}", file=sys.stderr)
    with open(RESULTS / "auto_borderline.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["dataset", "dims", "scale", "epsilon",
                                                "workload", "methods"])
        writer.writeheader()
        writer.writerows(border)
    cost = (time.perf_counter() - t0, time.process_time() - c0, os.getloadavg()[0])
    write_report(rows, means, rule, trials, border_trials, variants, edges, cost)


def refine(upto: int) -> None:
    """Extra trials (up to ``upto`` per method) on the borderline cells that the last ``fit``
    listed in results/auto_borderline.csv, for the two best candidates and the pick; rows
    -> results/auto_runs_<dims>d_refine.csv (appended; trials already there are skipped)."""
    with open(RESULTS / "auto_borderline.csv") as fh:
        todo = list(csv.DictReader(fh))
    runs = load_runs()
    have: dict[tuple, int] = defaultdict(int)
    for r in runs:
        have[(r["dataset"], r["dims"], r["scale"], r["epsilon"], r["workload"],
              r["method"])] += 1
    t0 = time.perf_counter()
    for dims in (1, 2):
        data = datasets(dims)
        names = sorted(data)
        out = RESULTS / f"auto_runs_{dims}d_refine.csv"
        new = not out.exists()
        with open(out, "a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=FIELDS)
            if new:
                writer.writeheader()
            for c in todo:
                if int(c["dims"]) != dims:
                    continue
                name, scale, eps, workload = (c["dataset"], int(c["scale"]),
                                              float(c["epsilon"]), c["workload"])
                for m in c["methods"].split():
                    for trial in range(have[(name, dims, scale, eps, workload, m)], upto):
                        x, loads = cell_inputs(names, data, name, scale,
                                               EPSILONS.index(eps), trial)
                        w = next(w for w in loads if kind(w) == workload)
                        est = release_histogram(x, eps, m, workload=w,
                                                **auto.PLAIN.get(m, {})).counts
                        writer.writerow({"dataset": name, "dims": dims, "scale": scale,
                                         "epsilon": eps, "trial": trial, "workload": workload,
                                         "method": m, "error": scaled_error(w, x, est)})
                fh.flush()
        print(f"{dims}-D refined at {time.perf_counter() - t0:.0f} s", file=sys.stderr)


def _summary(rows: list[tuple], ratio: int, ident: int, label: str) -> list[str]:
    """Goal lines for one estimator: ``ratio``/``ident`` index the rows' ÷ best / ÷ Identity."""
    n = len(rows)
    within = sum(r[ratio] <= 1.25 for r in rows)
    worst = max(rows, key=lambda r: r[ident])
    return [
        f"- {label}: within 1.25× of the best candidate in {within}/{n} cells = "
        f"{within / n:.1%} (goal ≥ 90%: {'met' if within / n >= 0.9 else 'NOT met'}); worst "
        f"÷ Identity {worst[ident]:.2f} ({worst[0]}, scale {worst[2]:,}, ε = {worst[3]:g}, "
        f"{worst[4]}; chose {worst[5]}; goal ≤ 1.2: "
        f"{'met' if worst[ident] <= 1.2 else 'NOT met'}); "
        + "; ".join(f"{d}-D {np.mean([r[ratio] <= 1.25 for r in rows if r[1] == d]):.1%} of "
                    f"{sum(r[1] == d for r in rows)}, worst ÷ Identity "
                    f"{max(r[ident] for r in rows if r[1] == d):.2f}" for d in (1, 2))]


def write_report(rows: list[tuple], means: dict[tuple, dict[str, float]],
                 rule: dict[str, dict[int, str]], trials: int, border_trials: int,
                 variants: dict[str, tuple[float, float, float]], edges: str,
                 cost: tuple[float, float, float]) -> None:
    decades = sorted({d for table in rule.values() for d in table})
    n_border = sum(r[11] > trials for r in rows)
    lines = [
        "# `method=\"auto\"`: leave-one-dataset-out evaluation", "",
        "Reproduce (bench/auto_rule.py's docstring): `collect` the candidates' trials 0–9, "
        f"`fit --trials {trials} --border-trials {trials}`, `refine --upto {border_trials}`, "
        f"`fit --trials {trials} --border-trials {border_trials}`, `refine --upto "
        f"{border_trials}` again (the cells that became borderline), then the same `fit` "
        "(writes this file, `src/dpkit/release/ranges/auto_rule.py` and "
        "`results/auto_borderline.csv`).", "",
        f"Protocol: DPBench (multinomial resampling to scales {SCALES[1]} in 1-D, "
        f"{SCALES[2]} in 2-D, ε ∈ {EPSILONS}; Prefix1D and 2,000 random ranges in 1-D, 2,000 "
        "random rectangles in 2-D; scaled L2 error per query). Datasets: the shared DPBench "
        "shapes (10 1-D, 5 2-D) and 3 synthetic shapes per rank (bench/auto_rule.py "
        "`synthetic`). For each dataset D the rule is fitted on the other datasets only, and "
        "`auto` (5% of ε on the noisy count, the rest on the pick) runs on D's cells with fresh "
        "noise on the same resampled inputs and workloads as the candidates' trials. Best = "
        "the best candidate (switch off, all of ε) on that cell; candidates: "
        f"{', '.join(auto.CANDIDATES[1])} (1-D), {', '.join(auto.CANDIDATES[2])} (2-D).", "",
        "Two estimators of error ÷ best. *Old*: each candidate's mean over its first "
        f"{OLD_TRIALS} trials, auto's over its first {OLD_AUTO} (the minimum over ~10 noisy "
        "means is biased low: a winner's curse). *New*: every candidate's mean over its 10 "
        f"trials (up to {border_trials} for the two best and the pick on the borderline "
        f"cells, where auto fell within {BORDER[0]}–{BORDER[1]}× of the best: `refine`), "
        f"auto's over {trials} trials ({border_trials} on the {n_border} cells still "
        "borderline after those). Both score the same rule, which is fitted on the new means.",
        "",
        f"Measured {time.strftime('%Y-%m-%d')}; `fit` took {cost[0]:.0f} s wall, {cost[1]:.0f} "
        f"s CPU, load average {cost[2]:.1f} (2 shared cores).", "",
        "## Goals", "",
        *_summary(rows, 7, 8, "new estimator"),
        *_summary(rows, 9, 10, "old estimator"),
        f"- median error ÷ best (new): {np.median([r[7] for r in rows]):.2f}; median ÷ "
        f"Identity: {np.median([r[8] for r in rows]):.2f}; cells above 1.2× Identity: "
        f"{sum(r[8] > 1.2 for r in rows)}", "",
        "Rule variant (fit_rule's safety check at a decade's edges), chosen by the "
        "leave-one-dataset-out share within 1.25× computed from the candidates' runs alone "
        "(auto ≈ its pick ÷ 0.95): "
        + "; ".join(f"`{e}` {v[0]:.1%} (1-D {v[1]:.1%}, 2-D {v[2]:.1%})"
                    for e, v in variants.items()) + f". Shipped: `{edges}`.", "",
        "Why the 90% goal is missed: see `## Why` below.", "",
        "## Scale switches: derived thresholds and their out-of-sample check", "",
        f"A method loses on a cell when its error (switch off) exceeds {LOSS}× Identity's; the "
        "threshold is a decade below the smallest signal N·ε/cells at which it loses on any "
        "dataset; the LOO column fits it without the held-out dataset and reports the worst "
        "ratio on the held-out cells where the method would still run its own algorithm "
        "(0: none).", "",
        *threshold_lines(means), "",
        "## Every registered method: worst ratio to Identity before and after", "",
        "From the switch-off runs above (hdmm not run: an alias of mm).",
        "", *before_after(means), "",
        "## The shipped rule (fitted on all datasets)", "",
        "Columns: the decade of the signal N̂·ε'/cells (a signal beyond the table uses the "
        "nearest decade).", "",
        "| rank/workload | " + " | ".join(f"10^{d}" for d in decades) + " |",
        "|---|" + "---|" * len(decades)]
    for key, table in sorted(rule.items()):
        lines.append(f"| {key} | " + " | ".join(table.get(d, "—") for d in decades) + " |")
    lines += ["", "## Why", "", WHY, "",
              "## Per cell (leave-one-dataset-out)", "",
              "| dataset | scale | ε | workload | chosen (at the true scale) | best | ÷ best | "
              "÷ Identity | ÷ best (old) | ÷ Identity (old) | auto trials | best's trials |",
              "|---|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[2]:,} | {r[3]:g} | {r[4]} | {r[5]} | {r[6]} | "
                     f"{r[7]:.2f} | {r[8]:.2f} | {r[9]:.2f} | {r[10]:.2f} | {r[11]} | "
                     f"{r[12]} |")
    (RESULTS / "auto.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:20]))


WHY = (
    "What changed the score (2026-11-25): (1) mm joined the 1-D candidates (its strategy is "
    "now cached by workload family: ≈ 0.01 s per 1-D release after the first); it is the best "
    "or within 1.25× on nearly every 1-D cell from signal 10^0 up, 1.2–1.4× better than HB. "
    "(2) The estimator: 10 trials per candidate and cell instead of 3, 30 for the two best "
    "and the pick on the borderline cells, and 10 (30) for auto instead of 2. On the same "
    "rule the old estimator reports 64–66% within 1.25×, the new one 81–82% (two `fit` "
    "runs on the same candidate runs: 82.2% / 64.0%, then 80.9% / 66.1%; auto's fresh "
    "noise moves the score by about 1.5 points): most "
    "of the old misses were a 3-trial minimum over ~10 noisy means (a winner's curse) and a "
    "2-trial auto. (3) fit_rule's `interpolated` edge check, chosen by the "
    "leave-one-dataset-out score above: it lets StructureFirst serve the lowest 1-D "
    "decade of ranges, where the `neighbours` check excluded it for losing 2.6–3.2× to "
    "Identity a whole decade higher.\n\n"
    "Why the 90% goal is still missed: in 2-D the features (noisy scale, rank, workload "
    "type) do not decide the winner. Scored in-sample on the candidates' means (the best "
    "single choice per rank, workload type and decade, fitted and scored on all datasets) "
    "these features reach 93.6% of the 1-D cells but 66.3% of the 2-D cells, 84.3% "
    "overall: a ceiling below 90% before any leave-one-out loss. At one signal decade each "
    "2-D dataset has its own winner: the k-d tree on Adult (10–31× better than the pick at "
    "10^5–10^7 records; no other dataset teaches it, so leave-one-out cannot learn it), UG on "
    "the synthetic blocks and smooth shapes at low signal, AG on BeijingTaxi, DAWA on "
    "cabspotting; none of the 2-D misses is a cell where auto picked the per-cell best, and "
    "18 of them are beyond 2×. The 1-D misses are at signal 10^-2 (100 records over 4,096 "
    "cells: Uniform wins on the flat bids sets, StructureFirst or DAWA elsewhere) and at "
    "10^0 (DAWA 1.4–1.9× better than mm on GrossCompen and MEDCOST, mm better on bids and "
    "the spikes). Second features: the domain size and a finer signal resolution carry no "
    "information on this grid (every 1-D set has 4,096 cells, every 2-D set 256 × 256; "
    "scales are powers of ten and ε ∈ {0.1, 1}, so every training signal sits exactly on a "
    "decade). The noise-free fraction of non-zero cells as a second feature (two buckets) "
    "raised the leave-one-out proxy from 80.1% to at most 82.2% (with its threshold picked "
    "among four on the same score, so optimistic), before paying a further share of ε to "
    "measure it: not shipped. `auto` also pays 5% of ε for its count (≈ 1.05× on its pick's "
    "error).")


def fallback() -> None:
    """Print :func:`~dpkit.release.ranges.auto.fit_fallback` for the shipped rule, fitted on
    the collected runs of the DPBench 2-D shapes only (not the synthetic ones, not Adult
    age × hours-per-week, the held-out check of ``bench/auto_adult2d.py``), with the paired
    ratio pick ÷ HDMM per decade."""
    means = cell_means([r for r in load_runs() if r["dims"] == 2])
    cells = [c for c in training_cells(means) if not c.dataset.startswith("syn_")]
    found = auto.fit_fallback(cells, RULE)
    for c in sorted(cells, key=lambda c: (c.signal, c.dataset)):
        d = min(max(round(math.log10(c.signal)), -3), 2)
        chosen = RULE["2/Range2D"].get(d, "identity")
        print(f"{c.dataset:22s} signal {c.signal:9.4f} decade {d:2d} {chosen:5s} ÷ mm = "
              f"{c.errors[chosen] / c.errors['mm']:.2f}")
    print("FALLBACK =", {k: (m, sorted(v)) for k, (m, v) in found.items()})


def high() -> None:
    """Print :func:`~dpkit.release.ranges.auto.fit_high` fitted on every training shape's
    runs (the DPBench shapes and the synthetic ones), with the evidence per decade: the
    best data-dependent candidate's geometric-mean error ÷ the guard's algorithm, and that
    algorithm's worst ratio to Identity."""
    cells = training_cells(cell_means(load_runs()))
    found = auto.fit_high(cells)
    for key, (robust, start) in found.items():
        here = [c for c in cells if f"{c.dims}/{c.kind}" == key]
        for d in sorted({round(math.log10(c.signal)) for c in here}):
            cs = [c for c in here if round(math.log10(c.signal)) == d]
            dep = set(cs[0].errors) - set(auto.INDEPENDENT[cs[0].dims]) - {"identity"}
            gm = {m: math.exp(np.mean([math.log(c.errors[m] / c.errors[robust]) for c in cs]))
                  for m in dep}
            best = min(gm, key=lambda m: gm[m])
            worst = max(c.errors[robust] / c.errors["identity"] for c in cs)
            print(f"{key} decade {d:2d}: best data-dependent {best} {gm[best]:.2f}× {robust}; "
                  f"{robust} worst {worst:.2f}× Identity{'  <- guard' if d >= start else ''}")
    print("HIGH =", found)


HELD_SCALES = [10**3, 10**5, 10**7]  # the goal cells (2-D: a subset of SCALES[2])
BORDER_HELD = 1.1  # heldout: a cell above this ratio to Identity gets more trials


def heldout(trials: int, more: int) -> None:
    """Held-out auto ÷ Identity per cell (results/auto_heldout.md).

    Leave one dataset out: for every dataset D, the rule, the 2-D fallback and the
    high-signal guard are fitted on the other datasets' runs only
    (:func:`~dpkit.release.ranges.auto.fit_rule`, ``fit_fallback`` on the other DPBench 2-D
    shapes as ``fallback`` does, ``fit_high``), then scored on D's cells (:func:`_score`).
    Then Adult's 1-D columns (:func:`adult_1d`: domains of 74 to 16,384 cells; never used
    to fit anything) with the shipped rule, fallback and guard."""
    t0 = time.perf_counter()
    means = cell_means(load_runs())
    rows = []
    for held in sorted({k[0] for k in means}):
        train = training_cells(means, exclude=held)
        rule = auto.fit_rule(train, edges="interpolated")
        fb = auto.fit_fallback([c for c in train if c.dims == 2 and not
                                c.dataset.startswith("syn_")], rule)
        dims = next(k[1] for k in means if k[0] == held)
        data = datasets(dims)
        names = sorted(data)

        def inputs(scale: int, ei: int, t: int, held: str = held, names: list[str] = names,
                   data: dict[str, np.ndarray] = data
                   ) -> tuple[np.ndarray, list[RangeWorkload]]:
            return cell_inputs(names, data, held, scale, ei, t)
        rows += _score(held, dims, inputs, rule, fb, auto.fit_high(train), trials, more)
        print(f"held out {held} at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    for i, (name, shape) in enumerate(adult_1d().items()):
        def adult_inputs(scale: int, ei: int, t: int, i: int = i, shape: np.ndarray = shape
                         ) -> tuple[np.ndarray, list[RangeWorkload]]:
            g = np.random.default_rng([100 + i, int(math.log10(scale)), ei, t])
            x = bench.resample(shape, scale, g)
            return x, [prefix(x.size), random_ranges(x.size, bench.RANGE_QUERIES, g)]
        rows += _score(name, 1, adult_inputs, RULE, auto.FALLBACK, auto.HIGH, trials, more)
        print(f"{name} at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    from auto_adult2d import run as adult_2d  # bench/auto_adult2d.py, next to this file

    write_heldout(rows, trials, more, time.perf_counter() - t0, adult_2d(trials, EPSILONS))


def adult_1d() -> dict[str, np.ndarray]:
    """Shapes nobody fitted on: Adult's age (74 cells, 17–90), hours-per-week (99, 1–99),
    capital-loss (4,357, 0–4,356) and fnlwgt in 16,384 equal bins (beyond MM_CELLS_1D:
    HB runs where mm would)."""
    from dpkit.datasets import load_adult

    df = load_adult()
    out = {}
    for col, lo, cells in (("age", 17, 74), ("hours-per-week", 1, 99),
                           ("capital-loss", 0, 4357)):
        out[f"Adult {col}"] = np.bincount(df[col].to_numpy() - lo, minlength=cells)
    w = df["fnlwgt"].to_numpy()
    out["Adult fnlwgt"] = np.histogram(w, bins=16384, range=(0, int(w.max()) + 1))[0]
    return {k: v.astype(np.int64) for k, v in out.items()}


def _score(name: str, dims: int,
           inputs: Callable[[int, int, int], tuple[np.ndarray, list[RangeWorkload]]],
           rule: Mapping[str, Mapping[int, str]],
           fb: Mapping[str, tuple[str, frozenset[int]]],
           guard: Mapping[str, tuple[str, int]], trials: int, more: int) -> list[tuple]:
    """One dataset's rows at ε ∈ {0.1, 1} and scales 10^3, 10^5, 10^7, ``trials`` fresh
    trials each, paired with Identity (all of ε) on the same resampled input: auto's steps
    — one noisy count (5% of ε) per trial, then the pick at the rest of ε — without the
    guard ("before") and with it ("after"); a pick both make runs once and scores both. A
    cell where either ratio exceeds :data:`BORDER_HELD` after ``trials`` runs gets ``more``
    (Identity's error on 1-D ranges varies by ±40% between trials)."""
    rows = []
    for scale in HELD_SCALES:
        for ei, eps in enumerate(EPSILONS):
            err: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
            picks: dict[str, set[str]] = defaultdict(set)
            n_runs, t = trials, 0  # decided once, after `trials` runs: no optional stopping
            while t < n_runs:
                x, loads = inputs(scale, ei, t)
                t += 1
                ident = release_histogram(x, eps, "identity").counts
                eps0, rest = auto.split(to_fraction(eps))
                n_hat = noisy_total(x, eps0)
                for w in loads:
                    chosen = {}
                    for r, g in (("before", {}), ("after", guard)):
                        m = auto.choose(n_hat, rest, x.size, dims, auto.workload_kind(w, dims),
                                        rule, fb, g)
                        chosen[r] = ("hb" if m == "mm" and dims == 1 and x.size > auto.MM_CELLS_1D
                                    else m)
                    done = {m: scaled_error(w, x, release_histogram(
                        x, rest, m, workload=w, **auto.PLAIN.get(m, {})).counts)
                        for m in set(chosen.values())}
                    k = kind(w)
                    err[k]["identity"].append(scaled_error(w, x, ident))
                    for r, m in chosen.items():
                        err[k][r].append(done[m])
                        picks[f"{k} {r}"].add(m)
                if t == trials and any(np.mean(e[r]) > BORDER_HELD * np.mean(e["identity"])
                                       for e in err.values() for r in ("before", "after")):
                    n_runs = max(trials, more)
            for k, e in err.items():
                base = float(np.mean(e["identity"]))
                rows.append((name, dims, scale, eps, k, "/".join(sorted(picks[f"{k} before"])),
                             "/".join(sorted(picks[f"{k} after"])),
                             float(np.mean(e["before"])) / base,
                             float(np.mean(e["after"])) / base, len(e["identity"])))
    return rows


def write_heldout(rows: list[tuple], trials: int, more: int, wall: float,
                  adult2d: list[str]) -> None:
    lines = [
        "# `method=\"auto\"`: held-out error ÷ Identity per cell (issue 34)", "",
        f"Reproduce: `python bench/auto_rule.py heldout --trials {trials} --border-trials "
        f"{more}` (reads the "
        "candidates' runs `results/auto_runs_*.csv` that `collect` wrote; "
        f"{wall:.0f} s wall on 2 shared cores).", "",
        "Protocol: leave one dataset out. For each dataset D (the DPBench shapes and the "
        "synthetic ones of `bench/auto_rule.py`), the rule (`fit_rule`, `interpolated` "
        "edges), the 2-D low-signal fallback (`fit_fallback` on the other DPBench 2-D shapes) "
        "and the high-signal guard (`fit_high`) are fitted on the other datasets' runs only; "
        f"D's cells at ε ∈ {EPSILONS} and scales {HELD_SCALES} are then released {trials} "
        "times each (DPBench resampling, Prefix1D and 2,000 random ranges in 1-D, 2,000 random "
        "rectangles in 2-D, scaled L2 error) with auto's steps — 5% of ε on a noisy count, "
        "the pick at the rest — and with Identity at all of ε on the same input. *Before*: "
        "the rule and the fallback (the shipped auto before `HIGH`); *after*: with the "
        "high-signal guard too. Both columns read the same noisy count per trial and share "
        "the run where they pick the same algorithm. Ratio = mean error over trials ÷ "
        f"Identity's mean error over the same trials; a cell above {BORDER_HELD}× after "
        f"{trials} trials (before or after) gets {more} (decided once, after the first "
        f"{trials}).", "",
        "Then *Adult 1-D* (`adult_1d`: age, 74 cells; hours-per-week, 99; capital-loss, "
        "4,357; fnlwgt in 16,384 bins, beyond `MM_CELLS_1D`, so HB runs where mm would): "
        "shapes and domain sizes nobody fitted anything on, scored the same way with the "
        "shipped rule, fallback and guard (*before*: without `HIGH`).", "",
        "Note on noise: on 1-D random ranges Identity's own error varies by ±40% from one "
        "trial to the next (long ranges sum thousands of cells' noise: the error is the "
        "norm of a random walk), so a ratio of a few trials' means of two algorithms with "
        "equal expected error can read 1.3×.", "", "## Goal: auto ≤ 1.2× Identity", ""]
    groups = (("1-D held out (DPBench + synthetic)", lambda r: r[1] == 1 and
               not r[0].startswith("Adult ")),
              ("2-D held out (DPBench + synthetic)", lambda r: r[1] == 2),
              ("Adult 1-D (never fitted on)", lambda r: r[0].startswith("Adult ")))
    for label, member in groups:
        mine = [r for r in rows if member(r)]
        if not mine:
            continue
        for col, when in ((7, "before"), (8, "after")):
            worst = max(mine, key=lambda r: r[col])
            over = sum(r[col] > 1.2 for r in mine)
            lines.append(f"- {label}, {when}: worst {worst[col]:.2f} ({worst[0]}, scale "
                         f"{worst[2]:,}, ε = {worst[3]:g}, {worst[4]}); cells above 1.2×: "
                         f"{over} of {len(mine)}")
        for scale in HELD_SCALES:
            at = [r[8] for r in mine if r[2] == scale]
            lines.append(f"  - scale {scale:,}: after ÷ Identity {min(at):.2f}–{max(at):.2f}")
    lines += ["", "## Adult age × hours-per-week (2-D, `bench/auto_adult2d.py`, the shipped "
              "auto)", "", *adult2d]
    lines += ["", "## Per cell", "",
              "| dataset | scale | ε | workload | pick before | pick after | before ÷ Identity "
              "| after ÷ Identity | trials |", "|---|---:|---:|---|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[2]:,} | {r[3]:g} | {r[4]} | {r[5]} | {r[6]} | "
                     f"{r[7]:.2f} | {r[8]:.2f} | {r[9]} |")
    (RESULTS / "auto_heldout.md").write_text("\n".join(lines) + "\n")
    print("\n".join(line for line in lines if line.startswith(("-", "  -"))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["collect", "fit", "refine", "fallback", "high", "heldout"])
    ap.add_argument("--dims", type=int, default=1)
    ap.add_argument("--trials", type=int, default=TRIALS)
    ap.add_argument("--part", type=int, default=0, help="this process's share of datasets")
    ap.add_argument("--parts", type=int, default=1)
    ap.add_argument("--first-trial", type=int, default=0)
    ap.add_argument("--methods", nargs="*", help="collect only these candidates")
    ap.add_argument("--border-trials", type=int, default=30,
                    help="fit: auto's trials on borderline cells")
    ap.add_argument("--upto", type=int, default=30, help="refine: trials per method")
    args = ap.parse_args()
    if args.step == "collect":
        collect(args.dims, args.trials, args.part, args.parts, args.first_trial, args.methods)
    elif args.step == "refine":
        refine(args.upto)
    elif args.step == "fallback":
        fallback()
    elif args.step == "high":
        high()
    elif args.step == "heldout":
        heldout(args.trials, args.border_trials)
    else:
        fit(args.trials, args.border_trials)


if __name__ == "__main__":
    main()
