"""Issue 17 ("One road"): the benchmark figures before and after, side by side, in one command.

    /work/venv/bin/python bench/one_road.py [--before eda4434] [--out /tmp/one_road_run]
        [--only release,run,interface,learn,histograms] [--rounds 5] [--no-spark]

"Before" is ``git archive <--before>`` of this repository; "after" is a copy of this checkout's
working tree (src/ and bench/, uncommitted edits included), taken when the script starts. Each
tree runs its own copy of the bench scripts (from <out>/<tree>/bench, so their results files
land under <out>, never in the repository) with ``PYTHONPATH=<out>/<tree>/src``; <out>/shared
links to the checkout's ../shared (DPBench and FIMI data). Peers are not run (they do not
depend on dpkit). Sections, each tree in turn (the order alternates between rounds):

- release: bench/release_time.py (the demo's five releases, fresh in-memory session per
  repetition) ``--reps 100``, ROUNDS processes per tree; then ``--ledger --reps 30`` (a fresh
  SQLite ledger per repetition, as the demo), 3 processes per tree.
- run: bench/run.py ``--peers-python /nonexistent`` (samplers at 10^7, grouped count + sum at
  10^6 rows, ``dpkit demo``), 2 processes per tree.
- interface: bench/interface.py ``--rows 1000000`` for polars-floor, dpkit-polars and
  dpkit-duckdb (``--repeats 10``) and dpkit-spark (``--repeats 2``; skip with --no-spark).
- learn: bench/learn.py ``--trials 3`` (default 10; the peers' venv is absent here).
- histograms: bench/histograms.py ``--quick --trials 1 --large-trials 1`` (2 datasets per
  dimension instead of all; defaults are 3 trials and 10 large trials).

Empties <out>, then writes <out>/one_road.json (every value) and <out>/one_road.md (the
table: median before, median after, slowdown = after time ÷ before time, so > 1 is slower
whatever the unit, and the spread: min–max over processes, or the in-process repeats), and
prints the table. About 30 minutes on an idle 2-core machine (release 3 min, run 3,
interface 6, learn 10, histograms 6); 62 minutes under a load average of 6–12.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PY = sys.executable
TREES = ("before", "after")
SECTIONS = ("release", "run", "interface", "learn", "histograms")
# figure name -> {"unit", "better" ("lower"/"higher"), "before": [...], "after": [...],
#                 "note": {tree: in-process spread}}
FIG: dict[str, dict[str, Any]] = {}
ERRORS: list[str] = []


def record(name: str, tree: str, value: float | None, unit: str, better: str = "lower",
           note: str = "") -> None:
    f = FIG.setdefault(name, {"unit": unit, "better": better, "before": [], "after": [],
                              "note": {}})
    if value is not None:
        f[tree].append(float(value))
    if note:
        f["note"][tree] = note


def prepare(out: Path, before: str) -> None:
    if out.exists():
        shutil.rmtree(out)
    (out / "before").mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", before, "src", "bench"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out / "before")], input=archive, check=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("src", "bench"):
        shutil.copytree(REPO / part, out / "after" / part, ignore=ignore)
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (out / "shared").symlink_to(shared)


def run(out: Path, tree: str, args: list[str], log: str) -> tuple[str | None, float, float]:
    """Run ``python <args>`` on a tree; (stdout or None on failure, wall s, child CPU s)."""
    env = dict(os.environ, PYTHONPATH=str(out / tree / "src"),
               DPKIT_HOME=str(out / "dpkit_home"),
               DPKIT_BENCH_UPDATE="1")  # it reads each tree's bench/results
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run([PY, *args], cwd=out / tree / "bench", env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (out / "logs").mkdir(exist_ok=True)
    (out / "logs" / f"{log}_{tree}.txt").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
    if proc.returncode != 0:
        tail = " / ".join(proc.stderr.strip().splitlines()[-3:])
        ERRORS.append(f"{tree}: python {' '.join(args)} exited {proc.returncode}: {tail}")
        return None, wall, cpu
    return proc.stdout, wall, cpu


def order(i: int) -> tuple[str, str]:
    return ("after", "before") if i % 2 == 0 else ("before", "after")


def section_release(out: Path, rounds: int) -> None:
    script = str(out / "after" / "bench" / "release_time.py")  # API common to both trees
    for label, extra, n in (("release", ["--reps", "100"], rounds),
                            ("release, SQLite ledger", ["--ledger", "--reps", "30"], 3)):
        for i in range(n):
            for tree in order(i):
                text, wall, cpu = run(out, tree, [script, "--json", *extra], "release_time")
                if text is None:
                    continue
                res = json.loads(text)
                for q, f in res["figures"].items():
                    record(f"{label}: {q}", tree, f["median_ms"], "ms",
                           note=f"IQR {f['iqr_ms']:.2f}")
                record(f"{label}: whole process (wall)", tree, wall, "s")
                record(f"{label}: whole process (CPU)", tree, cpu, "s")


def section_run(out: Path, rounds: int) -> None:
    for i in range(rounds):
        for tree in order(i):
            text, wall, _ = run(out, tree, ["run.py", "--peers-python", "/nonexistent"], "run")
            if text is None:
                continue
            r = json.loads((out / tree / "bench" / "results" / "latest.json").read_text())
            for name, rate in r["samplers"].items():
                record(f"run: {name}", tree, rate, "values/s", "higher")
            for name, v in r.get("lattice_laplace", {}).items():
                record(f"run: {name}", tree, v["coordinates_per_s"], "coords/s", "higher")
            g = r["dpkit_groupby"]
            record("run: grouped 10^6 first result", tree, g["first_result_s"], "s")
            record("run: grouped 10^6 steady", tree, g["steady_s"], "s")
            record("run: grouped 10^6 Polars floor", tree, g["polars_floor_steady_s"], "s")
            record("run: dpkit demo wall", tree, r["demo"]["demo_wall_s"], "s")
            record("run: dpkit demo peak RSS", tree, r["demo"]["demo_peak_rss_mib"], "MiB")
            record("run: whole process (wall)", tree, wall, "s")


def section_interface(out: Path, spark: bool) -> None:
    batches = [("fast", "polars-floor,dpkit-polars,dpkit-duckdb", "10")]
    if spark:
        batches.append(("spark", "dpkit-spark", "2"))
    keys = (("first_result_s", "first result", "s"), ("first_group_s", "first grouped", "s"),
            ("steady_s", "steady", "s"), ("steady_group_s", "steady grouped", "s"),
            ("steady_median_s", "steady median", "s"), ("peak_mib", "peak", "MiB"),
            ("cpu_s", "CPU", "s"))
    for i, (tag, systems, repeats) in enumerate(batches):
        for tree in order(i):
            prefix = out / tree / "bench" / "results" / f"one_road_interface_{tag}"
            text, _, _ = run(out, tree, ["interface.py", "--rows", "1000000", "--systems",
                                         systems, "--repeats", repeats, "--out", str(prefix),
                                         "--data-dir", str(out / "interface_data")],
                             f"interface_{tag}")
            if text is None:
                continue
            for r in json.loads(prefix.with_suffix(".json").read_text())["runs"]:
                if r.get("status") != "ok":
                    ERRORS.append(f"{tree}: interface {r['system']}: {r.get('status')}")
                for key, label, unit in keys:
                    note = ""
                    if key == "steady_s" and r.get("steady_all_s"):
                        note = "repeats " + ", ".join(f"{v:.3g}" for v in r["steady_all_s"])
                    record(f"interface 10^6: {r['system']} {label}", tree, r.get(key), unit,
                           note=note)


def section_learn(out: Path) -> None:
    for tree in order(0):
        text, wall, _ = run(out, tree, ["learn.py", "--trials", "3"], "learn")
        if text is None:
            continue
        rows = json.loads((out / tree / "bench" / "results" / "learn.json").read_text())
        seconds: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            if r["system"] == "dpkit" and "seconds" in r:
                eps = "" if r.get("epsilon") is None else f" ε={r['epsilon']:g}"
                seconds[f"learn: {r['model']}{eps}"].append(r["seconds"])
        for name, values in sorted(seconds.items()):
            record(name, tree, statistics.median(values), "s", note=f"median of {len(values)}")
        record("learn: whole process (wall)", tree, wall, "s")


def section_histograms(out: Path) -> None:
    for tree in order(1):
        text, wall, _ = run(out, tree, ["histograms.py", "--quick", "--trials", "1",
                                        "--large-trials", "1", "--peers-python",
                                        "/nonexistent"], "histograms")
        if text is None:
            continue
        results = out / tree / "bench" / "results"
        for dims in (1, 2):
            seconds: dict[str, list[float]] = defaultdict(list)
            with open(results / f"histograms_{dims}d.csv") as f:
                seen = set()
                for r in csv.DictReader(f):  # one release serves every workload of a run
                    key = (r["method"], r["dataset"], r["scale"], r["epsilon"], r["trial"])
                    if key not in seen:
                        seen.add(key)
                        seconds[r["method"]].append(float(r["seconds"]))
            for method, values in sorted(seconds.items()):
                record(f"histograms {dims}-D: {method} release", tree,
                       statistics.median(values), "s", note=f"median of {len(values)}")
        md = (results / "histograms.md").read_text()
        for dims, took in re.findall(r"^## (\d)-D \(.*; (\d+) s\)$", md, re.M):
            record(f"histograms {dims}-D: evaluate (all methods)", tree, float(took), "s")
        record("histograms: whole process (wall)", tree, wall, "s")


def table() -> list[str]:
    lines = ["| figure | unit | before | after | slowdown (after ÷ before time) | "
             "spread before / after | n |", "|---|---|---:|---:|---:|---|---:|"]
    for name, f in FIG.items():
        b, a = f["before"], f["after"]
        if not a or not b:
            lines.append(f"| {name} | {f['unit']} | {_g(b)} | {_g(a)} | — | — | — |")
            continue
        mb, ma = statistics.median(b), statistics.median(a)
        slow = (ma / mb) if f["better"] == "lower" else (mb / ma)
        notes = f["note"]
        spread = (f"{min(b):.4g}–{max(b):.4g} / {min(a):.4g}–{max(a):.4g}" if len(a) > 1
                  else f"{notes.get('before', '1 run')} / {notes.get('after', '1 run')}")
        lines.append(f"| {name} | {f['unit']} | {mb:.4g} | {ma:.4g} | {slow:.2f} | {spread} | "
                     f"{len(b)}/{len(a)} |")
    return lines


def _g(values: list[float]) -> str:
    return f"{statistics.median(values):.4g}" if values else "failed"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="eda4434", help="commit of the 'before' tree")
    ap.add_argument("--out", type=Path, default=Path("/tmp/one_road_run"))
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--rounds", type=int, default=5, help="release_time processes per tree")
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    if not set(only) <= set(SECTIONS):
        ap.error(f"--only takes {', '.join(SECTIONS)}")
    start = time.perf_counter()
    prepare(args.out, args.before)
    load = []
    took = {}
    for section in SECTIONS:
        if section not in only:
            continue
        load.append(f"{section} {Path('/proc/loadavg').read_text().split()[0]}")
        t = time.perf_counter()
        if section == "release":
            section_release(args.out, args.rounds)
        elif section == "run":
            section_run(args.out, 2)
        elif section == "interface":
            section_interface(args.out, not args.no_spark)
        elif section == "learn":
            section_learn(args.out)
        else:
            section_histograms(args.out)
        took[section] = time.perf_counter() - t
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "before": args.before,
            "after": f"working tree at HEAD {head}", "python": sys.version.split()[0],
            "load_avg_1min_at_section_start": load,
            "section_seconds": {k: round(v) for k, v in took.items()},
            "total_seconds": round(time.perf_counter() - start)}
    (args.out / "one_road.json").write_text(json.dumps({"meta": meta, "figures": FIG,
                                                        "errors": ERRORS}, indent=1))
    lines = [f"Before {args.before}; after: {meta['after']}; {meta['date']}; "
             f"{meta['total_seconds']} s in all ({meta['section_seconds']}); 1-minute load "
             f"average at each section's start: {', '.join(load)}.", "", *table()]
    if ERRORS:
        lines += ["", "Errors:", *[f"- {e}" for e in ERRORS]]
    (args.out / "one_road.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
