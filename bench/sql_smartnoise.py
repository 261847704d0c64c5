"""SQL side by side: dpkit's ``Session.sql`` and SmartNoise SQL on the same statements over the
same Adult table at the same ε, in one run (issue 32's figures).

    /work/venv/bin/python bench/sql_smartnoise.py [--repeats 50]
        [--snsql-python /work/venv-snsql/bin/python] [--update-results]

The table: UCI Adult (train, 32,561 rows; ``dp.datasets.load_adult``) with ``-`` in column
names written ``_``, one row per person (row-level privacy on both sides). One declaration
gives both sides their metadata: dpkit's ``dp.Schema`` (bounds, categories) and SmartNoise's
metadata (the same bounds; ``row_privacy``; ``censor_dims: false`` because SmartNoise has no
public key set — it releases the keys it finds, where dpkit releases the declared
categories). SmartNoise runs as a subprocess in its own venv (bench/peers/sql_snsql.py;
../shared/PEERS.md), its per-column ε scaled until its ``get_privacy_cost`` equals the
statement's ε.

Per statement: the median time of one release (parse, plan, run, noise; dpkit: the budget
check and the record too, on an in-memory accountant), the error of every cell (group ×
statistic) over ``--repeats`` releases against the exact answer (DuckDB running the same SQL on
the same table; each side's mean absolute error), and the statements each side refuses. Prints
a table and writes ``sql_smartnoise.json`` and ``.md`` (bench/out, or bench/results with
``--update-results``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from outdir import add_flag, results_dir

import dpkit as dp
from dpkit.errors import DPError

HERE = Path(__file__).resolve().parent
EPSILON = 1.0

NUMERIC = {"age": (17, 90), "hours_per_week": (1, 99), "education_num": (1, 16),
           "capital_gain": (0, 100_000)}
CATEGORICAL = ["sex", "race", "income", "education", "marital_status", "relationship"]

STATEMENTS: list[tuple[str, str]] = [
    ("count", "SELECT COUNT(*) AS n FROM adult"),
    ("count by sex", "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex"),
    ("mean age", "SELECT AVG(age) AS mean_age FROM adult"),
    ("sum hours", "SELECT SUM(hours_per_week) AS hours FROM adult"),
    ("count+mean by sex",
     "SELECT sex, COUNT(*) AS n, AVG(hours_per_week) AS hours FROM adult GROUP BY sex"),
    ("by race, sex", "SELECT race, sex, COUNT(*) AS n, SUM(age) AS age_sum FROM adult "
                     "GROUP BY race, sex"),
    ("filtered by education", "SELECT education, COUNT(*) AS n FROM adult WHERE age >= 30 "
                              "GROUP BY education"),
    ("between and", "SELECT COUNT(*) AS n FROM adult WHERE age BETWEEN 25 AND 35 AND "
                    "hours_per_week > 40"),
    ("in list", "SELECT income, COUNT(*) AS n FROM adult WHERE marital_status IN "
                "('Divorced', 'Separated') GROUP BY income"),
    ("variance", "SELECT VARIANCE(age) AS var_age FROM adult"),
    ("stddev by sex", "SELECT sex, STDDEV(hours_per_week) AS sd FROM adult GROUP BY sex"),
    ("median", "SELECT MEDIAN(age) AS med FROM adult"),
    ("percentile", "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY age) AS med "
                   "FROM adult"),
    ("case in select", "SELECT SUM(CASE WHEN income = '>50K' THEN 1 ELSE 0 END) AS rich "
                       "FROM adult"),
    ("quoted keyword", 'SELECT "relationship", COUNT(*) AS n FROM adult GROUP BY '
                       '"relationship"'),
    ("having, order, limit", "SELECT education, COUNT(*) AS n FROM adult GROUP BY education "
                             "HAVING COUNT(*) > 100 ORDER BY n DESC LIMIT 5"),
    ("min/max", "SELECT MIN(age) AS lo, MAX(age) AS hi FROM adult"),
    ("window (refused)", "SELECT sex, COUNT(*) OVER () AS n FROM adult GROUP BY sex"),
    ("union (refused)", "SELECT COUNT(*) AS n FROM adult UNION SELECT COUNT(*) AS n "
                        "FROM adult"),
    ("subquery (refused)", "SELECT COUNT(*) AS n FROM adult WHERE age > (SELECT AVG(age) "
                           "FROM adult)"),
]


def adult() -> pl.DataFrame:
    frame = dp.datasets.load_adult("train")
    frame = frame.rename({c: c.replace("-", "_") for c in frame.columns})
    return frame.select([*NUMERIC, *CATEGORICAL])


def dpkit_schema(frame: pl.DataFrame) -> dp.Schema:
    """The declaration (categories are the public domain of Adult's columns, as documented
    in adult.names, not read from a private table)."""
    columns: dict[str, Any] = {c: dp.Numeric(lo, hi, integer=True) for c, (lo, hi)
                               in NUMERIC.items()}
    columns.update({c: dp.Categorical(sorted(frame[c].unique().to_list()))
                    for c in CATEGORICAL})
    return dp.Schema(columns)


def snsql_metadata(frame: pl.DataFrame) -> dict[str, Any]:
    table: dict[str, Any] = {"row_privacy": True, "censor_dims": False, "max_ids": 1}
    for c, (lo, hi) in NUMERIC.items():
        table[c] = {"type": "int", "lower": lo, "upper": hi, "nullable": False}
    for c in CATEGORICAL:
        table[c] = {"type": "string", "nullable": False}
    return {"": {"": {"adult": table}}}


def exact(frame: pl.DataFrame, sql: str) -> pl.DataFrame | None:
    """The exact answer (DuckDB on the same table), or None where DuckDB has no answer."""
    con = duckdb.connect()
    con.register("adult", frame.to_arrow())
    try:
        return con.sql(sql).pl()
    except duckdb.Error:
        return None
    finally:
        con.close()


def run_dpkit(frame: pl.DataFrame, sql: str, repeats: int) -> dict[str, Any]:
    session = dp.Session(frame, dp.PrivacyUnit.rows(), dp.PureDP(10**9),
                         schema=dpkit_schema(frame))
    try:
        session.sql_plan(sql, epsilon=EPSILON)
    except DPError as exc:  # refused at plan time (SQLError and the plan's checks)
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return {"refused": f"{type(exc).__name__}: {first}"}
    tables, times = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        out = session.sql(sql, epsilon=EPSILON)
        times.append(time.perf_counter() - t)
        tables.append(out.to_dicts())
    return {"seconds": statistics.median(times), "tables": tables}


def run_snsql(python: str, frame: pl.DataFrame, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "adult.csv"
        frame.write_csv(csv)
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({
            "csv": str(csv), "metadata": snsql_metadata(frame), "repeats": repeats,
            "statements": [{"name": n, "sql": s, "epsilon": EPSILON} for n, s in STATEMENTS]}))
        done = subprocess.run([python, str(HERE / "peers" / "sql_snsql.py"), str(job)],
                              capture_output=True, text=True, check=True)
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def cell_errors(truth: pl.DataFrame, tables: list[list[dict[str, Any]]]
                ) -> dict[str, float]:
    """Mean absolute error of each cell (key values × statistic column) over the releases;
    a cell a release omits counts its exact value as the error."""
    value_columns = [c for c in truth.columns if truth[c].dtype.is_numeric()]
    key_columns = [c for c in truth.columns if c not in value_columns]
    out = {}
    for row in truth.iter_rows(named=True):
        key = tuple(row[k] for k in key_columns)
        for c in value_columns:
            errors = []
            for table in tables:
                got = next((r for r in table if tuple(r.get(k) for k in key_columns) == key),
                           None)
                value = None if got is None else got.get(c)
                errors.append(abs(float(row[c])) if value is None
                              else abs(float(value) - float(row[c])))
            out["/".join(map(str, key)) + ("/" if key else "") + c] = statistics.fmean(errors)
    return out


def compare(name: str, sql: str, frame: pl.DataFrame, mine: dict[str, Any],
            theirs: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"statement": name, "sql": sql,
                           "dpkit_s": mine.get("seconds"), "snsql_s": theirs.get("seconds"),
                           "dpkit_refused": mine.get("refused"),
                           "snsql_refused": theirs.get("refused")}
    truth = exact(frame, sql)
    if truth is None:
        return row
    for side, got in (("dpkit", mine), ("snsql", theirs)):
        if "tables" in got:
            row[f"{side}_error"] = cell_errors(truth, got["tables"])
    if "dpkit_error" in row and "snsql_error" in row:
        cells = row["dpkit_error"]
        row["cells"] = len(cells)
        row["dpkit_le_snsql"] = sum(cells[k] <= row["snsql_error"][k] * 1.0 for k in cells)
        ratios = [cells[k] / row["snsql_error"][k] for k in cells if row["snsql_error"][k] > 0]
        row["median_error_ratio"] = statistics.median(ratios) if ratios else None
    return row


def markdown(rows: list[dict[str, Any]], repeats: int, version: str) -> str:
    lines = [f"# dpkit SQL vs SmartNoise SQL {version} (Adult, 32,561 rows, ε = {EPSILON}, "
             f"{repeats} releases per statement)", "",
             "| statement | dpkit s | SmartNoise s | time ratio | cells dpkit ≤ SN | "
             "median error ratio (dpkit/SN) | refused by |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        d, s = r["dpkit_s"], r["snsql_s"]
        refused = ", ".join(side for side in ("dpkit", "snsql") if r[f"{side}_refused"])
        cells = f"{r['dpkit_le_snsql']}/{r['cells']}" if "cells" in r else "—"
        ratio = r.get("median_error_ratio")
        lines.append(f"| {r['statement']} | {_fmt(d)} | {_fmt(s)} | "
                     f"{_fmt(d / s if d and s else None)} | {cells} | {_fmt(ratio)} | "
                     f"{refused or '—'} |")
    lines += ["", "Refusals:", ""]
    for r in rows:
        for side in ("dpkit", "snsql"):
            if r[f"{side}_refused"]:
                lines.append(f"- {side} refuses *{r['statement']}*: `{r[f'{side}_refused']}`")
    return "\n".join(lines) + "\n"


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--snsql-python", default="/work/venv-snsql/bin/python")
    add_flag(parser)
    args = parser.parse_args()
    frame = adult()
    theirs = run_snsql(args.snsql_python, frame, args.repeats)
    rows = [compare(name, sql, frame, run_dpkit(frame, sql, args.repeats),
                    theirs["results"][name]) for name, sql in STATEMENTS]
    out = results_dir(args.update_results)
    (out / "sql_smartnoise.json").write_text(json.dumps(
        {"smartnoise_sql": theirs["version"], "repeats": args.repeats, "rows": rows},
        indent=1, default=str))
    page = markdown(rows, args.repeats, theirs["version"])
    (out / "sql_smartnoise.md").write_text(page)
    sys.stdout.write(page)


if __name__ == "__main__":
    main()
