"""Interface mode side by side: dpkit on Polars, DuckDB and Spark next to OpenDP's Context API,
Tumult Analytics, PipelineDP (local), SmartNoise SQL and the non-private Polars floor.

    /work/venv/bin/python bench/interface.py --rows 1000000 10000000
        [--systems dpkit-polars,opendp-context,...] [--repeats 3] [--timeout 600]
        [--peers-python /work/peers-venv/bin/python] [--tumult-python ...] [--snsql-python ...]
        [--spark-driver-memory 2g]
    /work/venv/bin/python bench/interface.py --report-only   # rewrite the .md from the .json

Task (per size): synthetic data written once to a Parquet file in a temporary directory
(numpy default_rng(0), benchmark data only): ``user_id`` Int64 with ROWS/10 distinct users
(the privacy unit, ~10 rows each), ``key`` Int64 uniform in 0..999 (1,000 public keys),
``value`` Float64 uniform in [0, 100). With user-level bounds — at most 10 rows, 5 groups and
2 rows per group per user — release (1) a grouped DP count + sum + mean of ``value`` over the
1,000 keys at ε = 1 and (2) the DP median of ``value`` at ε = 1.

Each system runs as a fresh subprocess in its own virtual environment (bench/peers/
interface_*.py; peers never enter dpkit's venv: see ../shared/PEERS.md), one at a time,
the sizes in turn. Per system and size:

- first result: wall time from spawning the process (interpreter start-up and imports
  included) until both releases are in hand; the grouped table's own time is kept too.
- steady state: the median over REPEATS repeats, in the same process, of the whole task
  (grouped release + median release), and of each part.
- peak memory: the largest sum of resident set sizes of the child's session (Python, a
  Spark JVM and its Python workers), sampled every 0.1 s from /proc; the largest single
  process's max RSS from ``/usr/bin/time -v`` is kept as ``max_rss_mib``.
- CPU time (user + system of every process in the session, sampled likewise), less
  sensitive than wall time to other work on a shared machine; the 1-minute load average
  before each run is recorded.

A run that exceeds --timeout is stopped (its whole session) and recorded as
"> timeout", keeping whatever the child reported before (it prints a JSON snapshot after its
first result and after every repeat). Results: bench/results/interface.json and .md (the JSON
is updated after every run, so a stopped benchmark keeps what it measured).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from outdir import add_flag, results_dir

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"
RESULTS = HERE / "results"
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")
CHILD = [0]  # the running child's session, stopped with the benchmark

# name -> (python option, script, extra argv)
SYSTEMS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "polars-floor": ("dpkit", "interface_dpkit.py", ("floor",)),
    "dpkit-polars": ("dpkit", "interface_dpkit.py", ("polars",)),
    "dpkit-duckdb": ("dpkit", "interface_dpkit.py", ("duckdb",)),
    "dpkit-spark": ("dpkit", "interface_dpkit.py", ("spark",)),
    "opendp-context": ("peers", "interface_opendp.py", ()),
    "tumult-analytics": ("tumult", "interface_tumult.py", ()),
    "pipelinedp-local": ("peers", "interface_pipelinedp.py", ()),
    "smartnoise-sql": ("snsql", "interface_snsql.py", ()),
}
PEER_SYSTEMS = ("opendp-context", "tumult-analytics", "pipelinedp-local", "smartnoise-sql")

SEMANTICS = {
    "polars-floor": "No privacy: exact group_by(key) len + sum + mean and exact median on the "
                    "in-memory DataFrame; no contribution bounding, no noise.",
    "dpkit-polars": "Session on the Parquet file read once into a Polars DataFrame. "
                    "PrivacyUnit.by('user_id', max_rows=10, max_groups=5, "
                    "max_rows_per_group=2): random (CSPRNG) choice of each user's 5 groups, 2 "
                    "rows per group, 10 rows in total, then one release of count + sum + mean "
                    "(ε = 1 split evenly; the mean is a noisy centred sum over a noisy count) "
                    "over the 1,000 public keys; median: exponential mechanism over 1,001 "
                    "candidates, ε = 1, each user's 10 rows.",
    "dpkit-duckdb": "As dpkit-polars, on duckdb.read_parquet(path) (a lazy relation: every "
                    "release reads the file).",
    "dpkit-spark": "As dpkit-polars, on spark.read.parquet(path) (not cached) with a local[2] "
                   "SparkSession (driver memory: --spark-driver-memory, recorded per run as "
                   "spark_driver_memory; other settings Spark's defaults, so 200 shuffle "
                   "partitions with adaptive coalescing); contribution bounding is one lazy "
                   "plan (one shuffle by user, window ranks, salted-hash row keys, no "
                   "checkpoint); Spark start-up is inside first result.",
    "opendp-context": "unit_of(contributions=1, identifier='user_id'); truncate_num_groups(5, "
                      "keep='first') + truncate_per_group(2) then len + sum + mean joined to "
                      "the public keys (with_keys); median over the same 1,001 candidates "
                      "after truncate_per_group(10). keep='sample' fails on Polars 1.36.1, so "
                      "each user keeps their smallest keys (deterministic). OpenDP's "
                      "truncate_num_groups keeps rank < k, i.e. 4 groups per user for k = 5 "
                      "(rank('dense') starts at 1): fewer rows than declared, still private. "
                      "OpenDP's mean is a noisy sum over a noisy count (not clamped).",
    "tumult-analytics": "AddRowsWithID('user_id'); MaxGroupsPerID('key', 5) + "
                        "MaxRowsPerGroupPerID('key', 2); no multi-aggregation query in 0.21, "
                        "so count, sum and average are three queries at ε = 1/3 each over "
                        "KeySet.from_dict(keys); median: MaxRowsPerID(10) + median(0, 100), "
                        "ε = 1. Its own pyspark 3.5 (dpkit-Spark runs pyspark 4), same "
                        "local[2] configuration; Spark start-up is inside first result.",
    "pipelinedp-local": "LocalBackend on a list of Python tuples; max_partitions_contributed=5, "
                        "max_contributions_per_partition=2, COUNT + SUM + MEAN in one "
                        "aggregate over public_partitions (ε = 1 split by PipelineDP, "
                        "Laplace); median: PERCENTILE(50) on one public partition with 10 "
                        "rows per user (python-dp quantile tree).",
    "smartnoise-sql": "pandas reader; max_ids=10 (per-user row cap by reservoir sampling; no "
                      "per-group bounds, so sensitivities assume 10 rows per user), "
                      "censor_dims=False (no public key-set: the keys found in the data are "
                      "released), ε = 1/3 per noisy column, privacy cost ε = 1 for the query; "
                      "no DP median (PERCENTILE_CONT/DISC are refused by the rewriter), so "
                      "only the grouped release is timed.",
}

OBSERVED = """\
- OpenDP 0.16 `truncate_num_groups(k)` filters `rank("dense").over(id) < k`; dense ranks start
  at 1, so it keeps k − 1 groups per user (4 for k = 5) while the sensitivity assumes k: a
  utility loss, not a privacy one (visible in the sanity table: ~20% fewer rows counted than
  dpkit). Its `keep="sample"` fails on Polars 1.36.1 (`multiple fields with name 'key'`).
- Tumult Analytics 0.21 has no multi-aggregation query: count, sum and average are three
  Spark evaluations, each re-running the truncation.
- SmartNoise SQL has no public key-set and no DP median; with `censor_dims=True` (its default)
  the grouped query would also need δ > 0 for τ-thresholding.
- PipelineDP's LocalBackend is pure Python over tuples (~70 s per grouped release at 10^6
  rows); at 10^7 it did not finish the first release in 600 s.
- Tumult's first task at 10^6 rows took 548 s (each of its 4 queries is several Spark jobs
  with Python UDFs); at 10^7 it did not finish the first query in 600 s (8 GB driver) nor in
  540 s (2 GB driver).
"""

# -- data ------------------------------------------------------------------------------
def make_data(rows: int, directory: Path) -> Path:
    import numpy as np
    import polars as pl

    path = directory / f"interface_{rows}.parquet"
    if path.exists():
        return path
    rng = np.random.default_rng(0)  # benchmark data only, never noise
    pl.DataFrame({
        "user_id": rng.integers(0, max(rows // 10, 1), size=rows, dtype=np.int64),
        "key": rng.integers(0, 1000, size=rows, dtype=np.int64),
        "value": rng.uniform(0.0, 100.0, size=rows),
    }).write_parquet(path)
    return path


# -- running one system ----------------------------------------------------------------
def session_pids(sid: int) -> dict[int, tuple[int, float]]:
    """{pid: (resident bytes, CPU seconds)} of the processes in session ``sid`` (the child
    is a session leader; a Spark JVM and its Python worker daemons, which set their own
    process group, stay in its session)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid:  # field 6 of stat: session
                cpu = (int(fields[11]) + int(fields[12])) / TICKS  # fields 14, 15
                out[int(entry)] = (int(fields[21]) * PAGE, cpu)  # field 24: rss in pages
        except (OSError, ValueError, IndexError):
            continue
    return out


def kill_session(sid: int) -> None:
    for pid in session_pids(sid):  # noqa: SIM118 - a snapshot
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def run_system(name: str, python: str, data: Path, rows: int, repeats: int, timeout: float,
               driver_memory: str = "2g") -> dict:
    _, script, extra = SYSTEMS[name]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                          capture_output=True).stdout.strip()  # src may move during a run
    record: dict = {"system": name, "rows": rows, "load_avg_before": os.getloadavg()[0],
                    "git_head": head}
    if not Path(python).exists():
        record["status"] = f"not run: {python} is missing (see shared/PEERS.md)"
        return record
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tfile:
        cmd = [python, str(PEERS / script), str(data), str(rows), str(repeats), *extra]
        if Path("/usr/bin/time").exists():
            cmd = ["/usr/bin/time", "-v", "-o", tfile.name, *cmd]
        env = dict(os.environ, BENCH_T0=repr(time.time()), PYTHONUNBUFFERED="1",
                   BENCH_SPARK_DRIVER_MEMORY=driver_memory)
        env.pop("PYSPARK_PYTHON", None)
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
        CHILD[0] = proc.pid
        peak = [0]
        cpu: dict[int, float] = {}
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                procs = session_pids(proc.pid)
                peak[0] = max(peak[0], sum(rss for rss, _ in procs.values()))
                cpu.update({pid: c for pid, (_, c) in procs.items()})
                done.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        timed_out = False
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_session(proc.pid)
            stdout, stderr = proc.communicate()
        wall = time.perf_counter() - start
        done.set()
        sampler.join()
        kill_session(proc.pid)  # a Spark JVM or worker left behind
        time_v = Path(tfile.name).read_text() if not timed_out else ""
    snapshots = [line for line in stdout.splitlines() if line.startswith("{")]
    if snapshots:
        record.update(json.loads(snapshots[-1]))
        record["system"] = name
    record["process_wall_s"] = wall
    record["peak_mib"] = peak[0] / 2**20
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", time_v)
    if m:
        record["max_rss_mib"] = int(m.group(1)) / 1024
    record["cpu_s"] = sum(cpu.values())  # as last sampled, every process of the session
    if timed_out:
        record["status"] = f"> timeout ({timeout:g} s)"
    elif proc.returncode != 0:
        record["status"] = f"failed (exit {proc.returncode})"
        record["stderr_tail"] = stderr[-2000:]
    elif not snapshots:
        record["status"] = "failed (no result printed)"
        record["stderr_tail"] = stderr[-2000:]
    else:
        record["status"] = "ok"
    return record


# -- report ----------------------------------------------------------------------------
def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "—"
    r = a / b
    return f"{r:.0f}×" if r >= 10 else f"{r:.2g}×"


def first(r: dict) -> tuple[float | None, str]:
    """First result and which: the whole task, or the grouped table alone (no median)."""
    if r.get("first_result_s") is not None:
        return r["first_result_s"], ""
    if r.get("first_group_s") is not None:
        return r["first_group_s"], " (g)"
    return None, ""


def steady_of(r: dict) -> tuple[float | None, str]:
    if r.get("steady_s") is not None:
        return r["steady_s"], ""
    if r.get("steady_group_s") is not None:
        return r["steady_group_s"], " (g)"
    return None, ""


def goals(runs: list[dict]) -> list[str]:
    by = {r["system"]: r for r in runs}
    out = []
    dp_pl, floor = by.get("dpkit-polars", {}), by.get("polars-floor", {})
    if dp_pl.get("steady_s") and floor.get("steady_s"):
        r = dp_pl["steady_s"] / floor["steady_s"]
        out.append(f"dpkit-Polars steady state within 2× of the floor: "
                   f"{'met' if r <= 2 else 'NOT met'} ({r:.1f}×; grouped release alone "
                   f"{dp_pl['steady_group_s'] / floor['steady_group_s']:.1f}×, median "
                   f"{dp_pl['steady_median_s'] / floor['steady_median_s']:.1f}×).")
    if dp_pl.get("first_result_s"):
        worst = []
        for name in PEER_SYSTEMS:
            p = by.get(name)
            if not p:
                continue
            if p.get("first_result_s") is not None:
                worst.append((p["first_result_s"] / dp_pl["first_result_s"], name, ""))
            elif p.get("first_group_s") is not None and dp_pl.get("first_group_s"):
                worst.append((p["first_group_s"] / dp_pl["first_group_s"], name,
                              " (grouped table only)"))
            elif p.get("status", "").startswith(">"):
                worst.append((float("inf"), name, " (timed out before a result)"))
        if worst:
            lo = min(worst)
            met = lo[0] >= 10
            out.append(f"dpkit-Polars ≥ 10× faster than every peer to first result: "
                       f"{'met' if met else 'NOT met'} (closest: {lo[1]} at "
                       f"{lo[0]:.1f}×{lo[2]}).")
    sp, tu = by.get("dpkit-spark", {}), by.get("tumult-analytics", {})
    if sp.get("first_result_s") and tu:
        parts = []
        for key, label in (("first_result_s", "first result"), ("steady_s", "steady state")):
            if sp.get(key) and tu.get(key):
                parts.append(f"{label} {tu[key] / sp[key]:.1f}× faster ({sp[key]:.0f} s vs "
                             f"{tu[key]:.0f} s)")
            elif sp.get(key):
                parts.append(f"{label} {sp[key]:.0f} s, Tumult none within "
                             f"{results_timeout(tu)}")
        out.append("dpkit-Spark faster than Tumult on Spark: met — " + "; ".join(parts) + ".")
    return out


def results_timeout(r: dict) -> str:
    m = re.search(r"\(([\d.]+ s)\)", r.get("status", ""))
    return f"the {m.group(1)} limit" if m else "its run"


def report(results: dict) -> str:
    lines = [
        "# Interface mode: dpkit beside the DP libraries a user would pick instead",
        "",
        "Reproduce (each system runs as a fresh process in its own venv, one at a time; peers "
        "installed per `shared/PEERS.md` outside the repository):",
        "",
        "    /work/venv/bin/python bench/interface.py --rows 1000000 10000000",
        "",
        "Task per size: `user_id` (privacy unit, rows/10 users, ~10 rows each), `key` (1,000 "
        "public integer keys), `value` uniform in [0, 100); user-level bounds: ≤ 10 rows, "
        "≤ 5 groups, ≤ 2 rows per group per user. Release (1) grouped count + sum + mean "
        "over the 1,000 keys at ε = 1 and (2) the median at ε = 1. Data in a Parquet file "
        "written before the runs.",
        "",
        "- **first s**: fresh process, spawn → both releases in hand (imports, reading the "
        "Parquet file, Spark start-up included). (g): the grouped table only — the system "
        "has no DP median.",
        "- **first grouped s**: spawn → the grouped table.",
        "- **steady s**: median of the repeats, in the same process, of grouped + median "
        "releases; the two parts beside it.",
        "- **peak MiB**: largest summed RSS of the child's session (Python + JVM + "
        "workers), sampled every 0.1 s. **CPU s**: user + system of the whole run (first "
        "result + repeats), every process of the session, sampled the same way.",
        "- **steady / floor**: steady state over the non-private Polars floor's. "
        "**first / dpkit-Polars**: each system's first result over dpkit-Polars's.",
        "",
        f"Measured {results.get('date', '?')}, last invocation at git "
        f"{results.get('git_head', '?')} (each run's commit is `git_head` in the JSON)"
        + (f" (with uncommitted changes to {', '.join(results['src_uncommitted'])})"
           if results.get("src_uncommitted") else "") + " on "
        f"{results.get('machine', '?')}; repeats = {results.get('repeats', '?')}, time limit "
        f"{results.get('timeout_s', '?')} s per system and size. The machine is shared with "
        "other work: the 1-minute load average before each run is in the JSON "
        "(`load_avg_before`); treat differences below 1.5× as noise.",
    ]
    for rows in results.get("sizes", []):
        runs = [r for r in results.get("runs", []) if r["rows"] == rows]
        if not runs:
            continue
        by = {r["system"]: r for r in runs}
        dp_first = by.get("dpkit-polars", {}).get("first_result_s")
        dp_first_g = by.get("dpkit-polars", {}).get("first_group_s")
        lines += ["", f"## {rows:,} rows", "",
                  "| system | first s | first grouped s | steady s | steady grouped s | "
                  "steady median s | peak MiB | CPU s | steady / floor | first / dpkit-Polars "
                  "| status |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in runs:
            f, fnote = first(r)
            s, snote = steady_of(r)
            base = dp_first_g if fnote else dp_first
            floor_cmp = (steady_of(by.get("polars-floor", {}))[0] if not snote else
                         by.get("polars-floor", {}).get("steady_group_s"))
            status = r.get("status", "?")
            done_repeats = r.get("repeats") or 0
            if status.startswith(">") and done_repeats >= results.get("repeats", 0):
                status = "ok (all repeats done; stopped at the time limit while exiting)"
            elif status.startswith(">") and r.get("first_group_s") is not None:
                status += f"; {done_repeats} repeat(s) done"
            lines.append(
                f"| {r['system']} | {fmt(f)}{fnote} | {fmt(r.get('first_group_s'))} | "
                f"{fmt(s)}{snote} | {fmt(r.get('steady_group_s'))} | "
                f"{fmt(r.get('steady_median_s'))} | {fmt(r.get('peak_mib'), 4)} | "
                f"{fmt(r.get('cpu_s'))} | {ratio(s, floor_cmp)} | {ratio(f, base)} | "
                f"{status} |")
        spark = [r for r in runs if r.get("startup_s") is not None]
        if spark:
            lines += ["", "Spark session start-up (inside first result): " + ", ".join(
                f"{r['system']} {r['startup_s']:.1f} s" for r in spark) + "."]
        checks = [r for r in runs if r.get("check")]
        if checks:
            lines += ["", "Sanity (released values; the floor's are exact and unbounded): "
                      "total count over the keys, average of the per-key means, median.", "",
                      "| system | groups | total count | avg mean | median |",
                      "|---|---:|---:|---:|---:|"]
            for r in checks:
                c = r["check"]
                med = "—" if c.get("median") is None else f"{c['median']:.2f}"
                lines.append(f"| {r['system']} | {c['groups']} | {c['total_count']:,.0f} | "
                             f"{c['avg_mean']:.2f} | {med} |")
        g = goals(runs)
        if g:
            lines += ["", "Goals:", ""] + [f"- {x}" for x in g]
        failed = [r for r in runs if r.get("stderr_tail")]
        for r in failed:
            tail = r["stderr_tail"].strip().splitlines()[-3:]
            lines += ["", f"{r['system']} failed: `{' / '.join(t.strip() for t in tail)}`"]
    lines += ["", "## What each system computes", ""]
    lines += [f"- **{k}**: {v}" for k, v in SEMANTICS.items()]
    versions = {}
    for r in results.get("runs", []):
        for k, v in r.items():
            if k.endswith("_version"):
                versions[f"{r['system']}: {k[:-8]}"] = v
    if versions:
        lines += ["", "Versions: " + "; ".join(f"{k} {v}" for k, v in sorted(versions.items()))
                  + "."]
    lines += ["", "## Peer behaviour seen while writing this benchmark", "", OBSERVED.strip()]
    notes = results.get("notes")
    if notes:
        lines += ["", "## Notes on this run", "", notes.strip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--peers-python", default="/work/peers-venv/bin/python")
    ap.add_argument("--tumult-python", default="/work/tumult-venv/bin/python")
    ap.add_argument("--snsql-python", default="/work/snsql-venv/bin/python")
    ap.add_argument("--spark-driver-memory", default="2g",
                    help="spark.driver.memory of dpkit-spark and tumult-analytics (local[2])")
    ap.add_argument("--data-dir", default=None, help="keep the Parquet files here")
    ap.add_argument("--out", default=None,
                    help="path prefix of the .json and .md results (default: interface in "
                         "bench/out/, or bench/results/ with --update-results)")
    ap.add_argument("--merge", action="store_true",
                    help="keep runs of other systems/sizes from the existing JSON")
    ap.add_argument("--report-only", action="store_true")
    add_flag(ap)
    args = ap.parse_args()
    args.out = args.out or str(results_dir(args.update_results) / "interface")

    def stop(signum: int, frame: object) -> None:
        if CHILD[0]:
            kill_session(CHILD[0])
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    out_json, out_md = Path(args.out + ".json"), Path(args.out + ".md")
    if args.report_only:
        out_md.write_text(report(json.loads(out_json.read_text())))
        print(out_md.read_text())
        return
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        ap.error(f"unknown systems {sorted(unknown)}; choose from {', '.join(SYSTEMS)}")
    pythons = {"dpkit": sys.executable, "peers": args.peers_python,
               "tumult": args.tumult_python, "snsql": args.snsql_python}
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                          capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=HERE, text=True,
                           capture_output=True).stdout.split("\n")
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    results: dict = {"runs": []}
    if args.merge and out_json.exists():
        results = json.loads(out_json.read_text())
        redo = {(s, n) for s in systems for n in args.rows}
        results["runs"] = [r for r in results["runs"] if (r["system"], r["rows"]) not in redo]
    results.update({"date": time.strftime("%Y-%m-%d"), "git_head": head,
                    "src_uncommitted": [line[3:] for line in dirty if line.strip()],
                    "machine": f"{os.cpu_count()} cores, {mem:.0f} GiB",
                    "repeats": args.repeats, "timeout_s": args.timeout,
                    "sizes": sorted(set(results.get("sizes", [])) | set(args.rows))})
    out_json.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(args.data_dir or tmp)
        directory.mkdir(parents=True, exist_ok=True)
        for rows in args.rows:
            data = make_data(rows, directory)
            for name in systems:
                print(f"[{time.strftime('%H:%M:%S')}] {rows:,} rows: {name} …", flush=True)
                rec = run_system(name, pythons[SYSTEMS[name][0]], data, rows, args.repeats,
                                 args.timeout, args.spark_driver_memory)
                print(f"    {rec.get('status')}: first {fmt(first(rec)[0])} s, steady "
                      f"{fmt(steady_of(rec)[0])} s, peak {fmt(rec.get('peak_mib'), 4)} MiB",
                      flush=True)
                results["runs"].append(rec)
                order = {n: i for i, n in enumerate(SYSTEMS)}
                results["runs"].sort(key=lambda r: (r["rows"], order.get(r["system"], 99)))
                out_json.write_text(json.dumps(results, indent=2))
                out_md.write_text(report(results))
    print(out_md.read_text())


if __name__ == "__main__":
    main()
