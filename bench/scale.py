"""Scaling of a grouped release with user-level bounding, 10^5 to 10^8 rows (issue 19).

Data (numpy default_rng(0): benchmark data only, never noise), one Parquet file per size under
/tmp/dpkit_scale, written in row groups of 10^6 rows so generation fits in memory: ``user``
Int64 uniform in [0, rows/10) (about 10 rows per user), ``key`` Int64 in 0..19, ``value``
Float64 uniform in [0, 100).

Release: ``PrivacyUnit.by("user", max_rows=5)``, ``group_by("key", keys=0..19)``,
``count`` + ``sum(value, bounds=(0, 100))`` at ε = 1 (pure DP). Methods, each run alone in a
child process (time and CPU of the run, peak RSS: the child's ``ru_maxrss``):

- ``dpkit-streaming``: ``Session(path)``: the Polars plan stays lazy and streams.
- ``dpkit-memory``: ``Session(pl.read_parquet(path))``: the in-memory path (read included).
- ``dpkit-duckdb``: ``Session(duckdb.read_parquet(path))`` with DuckDB's ``memory_limit``
  at 4 GB (it spills beyond); dpkit's DuckDB path materialises the bounded table (Arrow).
- ``dpkit-spark``: ``Session(spark.read.parquet(path))`` on a ``local[2]`` SparkSession
  (driver memory 2 GB, started before the clock like the imports); peak RSS adds the JVM's
  peak (``VmHWM`` of the Python process's children); up to 10^7 rows.
- ``floor-streaming``: the hand-written streaming Polars pipeline, no privacy: keep the first
  5 rows of each user in file order (``filter(int_range(len()).over("user") < 5)``), then
  ``group_by("key")`` len + sum, ``collect(engine="streaming")``.
- ``floor-head``: the same with ``group_by("user").agg(head(5)).explode`` (Polars runs that
  aggregation with its in-memory engine; up to 10^7 rows only).

Every run uses Polars' default settings. (Emulating a 4 GiB machine with
``POLARS_OVERRIDE_TOTAL_MEMORY_MB=4096``, which makes Polars 2.1 spill window state to disk,
hung the floor at 10^8: all threads waiting on futexes after 0.98 GB spilled; so dpkit caps
its own memory by bounding units in hash buckets, see ``backend.bound_polars_lazy``.)
10^8 runs once per method.

    python bench/scale.py gen            # write the Parquet files (skips existing ones)
    python bench/scale.py run [SIZES…] [--methods M,…]   # e.g. run 1e5 1e6 1e7 1e8; merges
    python bench/scale.py report         # scale.md and scale.png from scale.json
    python bench/scale.py breakdown 1e7  # the streaming plans alone (what dominates)
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

DATA = Path("/tmp/dpkit_scale")
RESULTS = Path(__file__).parent / "results"
K, N_KEYS, CHUNK = 5, 20, 1_000_000
METHODS = ["floor-streaming", "dpkit-streaming", "dpkit-memory", "dpkit-duckdb", "dpkit-spark",
           "floor-head"]
LIMITS = {"floor-head": 10**7, "dpkit-spark": 10**7}  # largest size run
STREAMING_ENV: dict[str, str] = {}  # e.g. POLARS_OVERRIDE_TOTAL_MEMORY_MB (see above)


def path_for(rows: int) -> Path:
    return DATA / f"scale_{rows}.parquet"


def generate(rows: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = path_for(rows)
    if path.exists():
        return
    DATA.mkdir(parents=True, exist_ok=True)
    gen = np.random.default_rng(0)
    schema = pa.schema([("user", pa.int64()), ("key", pa.int64()), ("value", pa.float64())])
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema) as writer:
        for start in range(0, rows, CHUNK):
            m = min(CHUNK, rows - start)
            writer.write_table(pa.table({"user": gen.integers(0, max(rows // 10, 1), m),
                                         "key": gen.integers(0, N_KEYS, m),
                                         "value": gen.uniform(0.0, 100.0, m)},
                                        schema=schema))
    tmp.rename(path)


# -- one measured run (in the child) ----------------------------------------------------------
def _release(source: object) -> object:
    import dpkit as dp

    s = dp.Session(source, dp.PrivacyUnit.by("user", max_rows=K), dp.PureDP(1))
    return s.query().group_by("key", keys=list(range(N_KEYS))).agg(
        dp.count(), dp.sum("value", bounds=(0, 100))).release(epsilon=1)


def child(method: str, path: str) -> None:
    import polars as pl

    import dpkit  # noqa: F401 - imported before the clock starts, like polars

    spark = None
    if method == "dpkit-spark":
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "2g")
                 .config("spark.ui.enabled", "false").getOrCreate())
    rss_imported = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    if method == "dpkit-streaming":
        out = _release(path)
    elif method == "dpkit-memory":
        out = _release(pl.read_parquet(path))
    elif method == "dpkit-duckdb":
        import duckdb

        duckdb.execute("SET memory_limit = '4GB'")  # out-of-core beyond it, as Polars
        out = _release(duckdb.read_parquet(path))
    elif method == "dpkit-spark":
        assert spark is not None
        out = _release(spark.read.parquet(path))
    elif method == "floor-streaming":
        out = (pl.scan_parquet(path).filter(pl.int_range(pl.len()).over("user") < K)
               .group_by("key").agg(pl.len(), pl.col("value").sum()).collect(engine="streaming"))
    elif method == "floor-head":
        out = (pl.scan_parquet(path).group_by("user").agg(pl.col("key", "value").head(K))
               .explode("key", "value").group_by("key").agg(pl.len(), pl.col("value").sum())
               .collect(engine="streaming"))
    else:
        raise SystemExit(f"unknown method {method}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert len(out) == N_KEYS, len(out)  # type: ignore[arg-type]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    peak += _children_peak_kib()  # the JVM of a Spark run
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "rss_imported_mib": rss_imported / 1024,
                      "peak_rss_mib": peak / 1024}))


def _children_peak_kib() -> int:
    """Summed peak RSS (VmHWM, KiB) of this process's live children (Spark's JVM)."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() == str(os.getpid()) and "VmHWM" in fields:
            total += int(fields["VmHWM"].split()[0])
    return total


def measure(method: str, rows: int, timeout: float = 1800.0) -> dict:
    env = dict(os.environ)
    if method in ("dpkit-streaming", "floor-streaming"):
        env.update(STREAMING_ENV)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "child", method, str(path_for(rows))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"method": method, "rows": rows, "error": f"timeout {timeout:.0f} s"}
    record = {"method": method, "rows": rows, "load_before": load,
              "load_after": os.getloadavg()[0], "process_s": time.perf_counter() - t0,
              "env": {k: env[k] for k in STREAMING_ENV if k in env}}
    if proc.returncode != 0:
        record["error"] = (err.strip().splitlines() or ["?"])[-1][:300]
        return record
    record.update(json.loads(out.strip().splitlines()[-1]))
    return record


# -- orchestration and report -------------------------------------------------------------------
def run(sizes: list[int], methods: list[str] | None = None) -> None:
    store = RESULTS / "scale.json"
    data = json.loads(store.read_text()) if store.exists() else {"runs": []}
    for rows in sizes:
        generate(rows)
        for method in methods or METHODS:
            if rows > LIMITS.get(method, 10**9):
                continue
            rec = measure(method, rows)
            print(json.dumps(rec), flush=True)
            data["runs"] = [r for r in data["runs"]
                            if (r["method"], r["rows"]) != (method, rows)] + [rec]
            store.write_text(json.dumps(data, indent=1))


def _fit(points: list[tuple[int, float]]) -> float | None:
    import numpy as np

    if len(points) < 2:
        return None
    x, y = np.log10([p[0] for p in points]), np.log10([p[1] for p in points])
    return float(np.polyfit(x, y, 1)[0])


def report() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import polars as pl

    data = json.loads((RESULTS / "scale.json").read_text())
    runs = [r for r in data["runs"] if "error" not in r]
    by = {(r["method"], r["rows"]): r for r in runs}
    sizes = sorted({r["rows"] for r in data["runs"]})
    lines = ["# Scaling: grouped release with user-level bounding, 10^5 to 10^8 rows", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with "
             f"`python bench/scale.py run 1e5 1e6 1e7 1e8` then `python bench/scale.py "
             f"report`; Polars {pl.__version__}, 2 shared cores (load average in the JSON: "
             "other sessions ran at the same time, so wall times are noisy; CPU s is the "
             "child's user + system time). Setup and methods: the module docstring of "
             "bench/scale.py. Time = from the call to the result (reading the file included; "
             "imports excluded); peak RSS = the child's maximum resident set.", "",
             "| rows | method | wall s | CPU s | peak RSS MiB | wall ÷ floor | CPU ÷ floor | "
             "RSS ÷ floor | load |", "|---|---|---|---|---|---|---|---|---|"]
    for rows in sizes:
        floor = by.get(("floor-streaming", rows))
        for method in METHODS:
            r = by.get((method, rows))
            err = next((x.get("error") for x in data["runs"]
                        if (x["method"], x["rows"]) == (method, rows) and "error" in x), None)
            if r is None:
                if err:
                    lines.append(f"| {rows:.0e} | {method} | failed: {err} | | | | | | |")
                continue
            rt, rc, rm = (f"{r[k] / floor[k]:.2f}×" if floor else ""
                          for k in ("wall_s", "cpu_s", "peak_rss_mib"))
            lines.append(f"| {rows:.0e} | {method} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
                         f"{r['peak_rss_mib']:.0f} | {rt} | {rc} | {rm} | "
                         f"{r['load_before']:.1f} |")
    lines += ["", "Exponent of time vs rows (slope of log time / log rows, least squares):",
              "", "| method | wall 10^5–10^8 | wall 10^6–10^8 | CPU 10^6–10^8 |",
              "|---|---|---|---|"]
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    for method in METHODS:
        pts = sorted((rows, by[(method, rows)]) for rows in sizes if (method, rows) in by)
        if not pts:
            continue
        all_fit = _fit([(n, r["wall_s"]) for n, r in pts])
        big_fit = _fit([(n, r["wall_s"]) for n, r in pts if n >= 10**6])
        cpu_fit = _fit([(n, r["cpu_s"]) for n, r in pts if n >= 10**6])
        fmt = lambda v: f"{v:.2f}" if v is not None else "–"  # noqa: E731
        lines.append(f"| {method} | {fmt(all_fit)} | {fmt(big_fit)} | {fmt(cpu_fit)} |")
        ax_t.loglog([n for n, _ in pts], [r["wall_s"] for _, r in pts], "o-", label=method)
        ax_m.loglog([n for n, _ in pts], [r["peak_rss_mib"] for _, r in pts], "o-",
                    label=method)
    ax_m.axhline(4096, color="grey", ls=":", label="4 GiB")
    ax_t.set(xlabel="rows", ylabel="wall s", title="time")
    ax_m.set(xlabel="rows", ylabel="peak RSS MiB", title="peak memory")
    ax_t.legend(fontsize=8)
    ax_m.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "scale.png", dpi=110)
    lines += ["", NOTES.strip()]
    (RESULTS / "scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def breakdown(rows: int) -> None:
    """Where the streaming time goes: the plans alone, one after the other, this process."""
    import polars as pl

    lf = pl.scan_parquet(path_for(rows))
    i = pl.col("i").cast(pl.UInt64)
    keyed = lf.with_row_index("i").with_columns(
        r=(i.hash(1) & pl.lit(0xFFFF_FFFF_0000_0000, pl.UInt64)) | i).drop("i")

    def agg(p: pl.LazyFrame) -> pl.LazyFrame:
        return p.group_by("key").agg(pl.len(), pl.col("value").sum())

    for name, plan in [
            ("scan + group_by, no bounding", agg(lf)),
            ("scan + keyed hash row keys + group_by", agg(keyed)),
            ("first-k window (the floor)", agg(lf.filter(pl.int_range(pl.len()).over("user")
                                                         < K))),
            ("rank window on the row keys (dpkit's rule)",
             agg(keyed.filter(pl.col("r").rank("ordinal").over("user") <= K)))]:
        t0, c0 = time.perf_counter(), time.process_time()
        plan.collect(engine="streaming")
        print(f"{name}: wall {time.perf_counter() - t0:.2f} s, CPU "
              f"{time.process_time() - c0:.2f} s, load {os.getloadavg()[0]:.1f}", flush=True)


NOTES = """
## Reading the table

- **Goal (issue 19, larger than memory), 10^8 rows, one run each:** `dpkit-streaming` 73.9 s
  wall / 41.0 CPU s, peak RSS 1,537 MiB; the hand-written streaming floor 83.7 s / 44.0 CPU s,
  5,083 MiB: 0.88× the floor's wall time (0.93× its CPU), 0.30× its memory, under the 4 GiB
  goal (the floor is not). Loads of 5–10 on 2 cores: other sessions' benchmarks ran
  throughout, so a single run's wall time is uncertain by tens of per cent.
- **Cost grows linearly** (exponents 1.0–1.1 from 10^6 to 10^8 for every Polars method). At
  10^5 dpkit's fixed cost (session, dry run on zero rows, the row count, noise: ~0.1 s)
  makes it 2.4× the floor; from 10^6 it is 1.1–1.2× and at 10^8 below 1×.
- **What dominates** (`python bench/scale.py breakdown 1e7`: the plans alone, streaming):
  reading the file and the final group-by take 0.3–0.7 s; the per-user window (10^6
  partitions) 4.3–5.4 s wall, 2.4–2.9 CPU s over two runs, the same for the floor's
  `int_range(len()).over(user)` and dpkit's `rank("ordinal").over(user)` on its 64-bit
  row keys (adding the keyed hash to the scan: not measurable, < 0.3 s). dpkit's release
  adds ~0.7 s on top at 10^7.
- **Memory.** Polars' streaming window holds its whole input (~64 bytes a row here), so
  dpkit splits the units into hash buckets bounded one after the other
  (`backend.stream_buckets`: ~768 MiB of window input a bucket; 4 buckets at 10^8, 1 up
  to 10^7). Each bucket re-reads the source; at 10^8 dpkit's four reads and four 25 M-row
  windows still took less CPU than the floor's single 10^8-row window. `dpkit-memory` (the
  bounded table collected in memory, `bound_polars`) needs 10,596 MiB at 10^8;
  `dpkit-duckdb` stays at its 4 GB `memory_limit` (spilling) and materialises the bounded
  table as Arrow: 1.1× the floor.
- **Polars' own out-of-core mode** (`POLARS_OVERRIDE_TOTAL_MEMORY_MB=4096`) spilled 0.98 GB
  and then hung the floor at 10^8 (every thread in a futex wait; killed after 6 min), so
  the runs use Polars' defaults and dpkit does not rely on spilling.
- `floor-head` (`group_by(user).agg(head(5))`) runs that aggregation on Polars' in-memory
  engine (the physical plan shows the fallback); 1.6× the window floor at 10^7.
"""


def main() -> None:
    cmd = sys.argv[1] if len(sys.argv) > 1 else "report"
    if cmd == "child":
        child(sys.argv[2], sys.argv[3])
    elif cmd == "gen":
        for rows in (10**5, 10**6, 10**7, 10**8):
            generate(rows)
    elif cmd == "breakdown":
        breakdown(int(float(sys.argv[2])))
    elif cmd == "run":  # run [SIZES…] [--methods a,b]
        args = sys.argv[2:]
        methods = None
        if "--methods" in args:
            at = args.index("--methods")
            methods, args = args[at + 1].split(","), args[:at] + args[at + 2:]
        run([int(float(s)) for s in args] or [10**5, 10**6, 10**7], methods)
    else:
        report()


if __name__ == "__main__":
    main()
