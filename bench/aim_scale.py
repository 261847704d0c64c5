"""AIM at scale (issue 18): time, peak memory and accuracy of dpkit's AIM before and after
the NumPy junction-tree rewrite, and the evidence behind ``synthesize()``'s choices.

    python bench/aim_scale.py aim --label before --src /tmp/aim_before/src [--trials 2]
    python bench/aim_scale.py aim --label after [--trials 3]
    python bench/aim_scale.py peers --trials 3          # smartnoise-synth AIM, Adult W2
    python bench/aim_scale.py choice [--trials 2]       # synthesize()'s method rule, held out
    python bench/aim_scale.py report                    # bench/results/aim_scale.md

"before" is the same script run on ``git -C /work/main archive HEAD src`` (taken before the
change) through PYTHONPATH. Every AIM run is a child process (its own peak RSS, from
``getrusage``; ``base_mb`` is the RSS after imports and loading the data). Data:

- ``nltcs``: the NLTCS 2^16 table (../shared/data/hd_datasets/raw_nltcs: 16 binary disability
  measures, 21,574 people), workload all 560 3-way marginals — the issue's
  "16-attribute binary survey";
- ``adult``: Private-PGM's Adult (48,842 × 14) with its declared domain, workload all 91
  2-way marginals; ``adult_obs``: the same with each column recoded to the values that occur
  (what smartnoise-synth's categorical encoding does, so the comparison with its AIM is on
  the same domain; not a private choice, for the comparison only).

TV: mean total-variation distance between real and synthetic marginals (all k-subsets).
Results accumulate in bench/results/aim_scale.json (one row per run); ``report`` writes the
tables.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
ROOT = HERE.parent
RESULTS = HERE / "results"
OUT_JSON = RESULTS / "aim_scale.json"
SHARED = ROOT.parent / "shared" / "data"
PEERS_PYTHON = Path(os.environ.get("SNSYNTH_PYTHON", "/tmp/snsynth-venv/bin/python"))
DELTA = Fraction(1, 10 ** 9)


# ------------------------------------------------------------------------------ data
def load(name: str):
    """(codes int64 (n, d), Domain) of a dataset above."""
    import polars as pl

    from dpkit.release.synthetic.domain import Domain

    if name == "nltcs":
        raw = np.loadtxt(SHARED / "hd_datasets" / "raw_nltcs" / "2to16disabilityNLTCS.txt",
                         skiprows=1)
        cells = raw[:, :16].astype(np.int64)[:, ::-1]  # columns Y16 … Y1 → Y1 … Y16
        codes = np.repeat(cells, raw[:, 16].astype(np.int64), axis=0)
        return codes, Domain(tuple(f"Y{i}" for i in range(1, 17)), (2,) * 16)
    base = SHARED / "private_pgm"
    domain = Domain.from_json(base / "adult-domain.json")
    codes = pl.read_csv(base / "adult.csv").select(domain.attributes).to_numpy().astype(
        np.int64)
    if name == "adult":
        return codes, domain
    if name == "adult_obs":
        cols = [np.unique(codes[:, j], return_inverse=True)[1] for j in range(codes.shape[1])]
        return (np.column_stack(cols).astype(np.int64),
                Domain(domain.attributes, tuple(int(c.max()) + 1 for c in cols)))
    raise SystemExit(f"unknown data set {name!r}")


def workload(name: str, domain) -> list[tuple[str, ...]]:
    k = 3 if name == "nltcs" else 2
    return list(itertools.combinations(domain.attributes, k))


def mean_tv(codes, sample, domain, k: int) -> float:
    from dpkit.release.synthetic.domain import marginal_counts
    from dpkit.release.synthetic.marginals import total_variation

    return float(np.mean([total_variation(marginal_counts(codes, domain, c),
                                          marginal_counts(sample, domain, c))
                          for c in itertools.combinations(domain.attributes, k)]))


# ----------------------------------------------------------------------- one AIM run
def one(data: str, eps: float, iters: int | None = None) -> dict:
    """One AIM run in this process (the child): fit + sample, then the errors."""
    from dpkit.core.measures import largest_rho
    from dpkit.release.synthetic.aim import aim

    codes, domain = load(data)
    cliques = workload(data, domain)
    rho = largest_rho(Fraction(eps), DELTA)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    wall, cpu = time.perf_counter(), time.process_time()
    result = aim(codes, domain, rho, cliques, **({} if iters is None else {"iters": iters}))
    sample = result.sample()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    row = {"data": data, "epsilon": eps, "seconds": wall, "cpu_seconds": cpu,
           "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "base_mb": base, "rounds": len(result.selected), "rows": int(sample.shape[0])}
    for k in (1, 2, 3):
        row[f"tv_{k}way"] = mean_tv(codes, sample, domain, k)
    return row


def run_aim(args: argparse.Namespace) -> None:
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = str(Path(args.src).resolve())
    for data in args.data.split(","):
        for eps in [float(e) for e in args.epsilons.split(",")]:
            for trial in range(args.trials):
                extra = [] if args.iters is None else ["--iters", str(args.iters)]
                out = subprocess.run([sys.executable, __file__, "_one", "--data", data,
                                      "--eps", str(eps), *extra], env=env, check=True,
                                     capture_output=True, text=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                row.update(label=args.label, trial=trial, system="dpkit", iters=args.iters,
                           load=os.getloadavg()[0])
                print(json.dumps(row), flush=True)
                _write(_read() + [row])  # re-read: other invocations may append meanwhile


# ----------------------------------------------------------------------------- peers
def run_peers(args: argparse.Namespace) -> None:
    """smartnoise-synth's AIM (Private-PGM's reference code) on Adult, all 2-way
    marginals (its default degree 2), through bench/peers/synth_peers.py in its own venv;
    tv_2way_fixed re-draws from the same model with its sampler fixed."""
    if not PEERS_PYTHON.exists():
        raise SystemExit(f"{PEERS_PYTHON} not found (PEERS.md: the smartnoise-synth group)")
    tmp = RESULTS / "_aim_scale_peers.json"
    w3 = RESULTS / "_aim_scale_w3.json"
    w3.write_text("[]")
    subprocess.run([str(PEERS_PYTHON), str(HERE / "peers" / "synth_peers.py"), "--data",
                    str(SHARED / "private_pgm" / "adult.csv"), "--domain",
                    str(SHARED / "private_pgm" / "adult-domain.json"), "--epsilons",
                    args.epsilons, "--trials", str(args.trials), "--workload3", str(w3),
                    "--methods", "aim", "--out", str(tmp)], check=True)
    rows = _read()
    for p in json.loads(tmp.read_text()):
        rows.append({"label": "smartnoise-synth", "system": "smartnoise-synth",
                     "data": "adult_obs", "epsilon": p["epsilon"], "trial": p["trial"],
                     "seconds": p["seconds"], "tv_2way": p.get("tv_2way_fixed"),
                     "tv_2way_shipped": p.get("tv_2way"), "error": p.get("error")})
    tmp.unlink()
    w3.unlink()
    _write(rows)


# ------------------------------------------------------- synthesize()'s default method
CHOICE_DATA = ("nltcs", "adult", "salary", "taxi", "pums", "bike", "movielens")
CHOICE_METHODS = ("mst", "aim", "mwem", "mwem2", "independent")
GENRES = ("Action", "Comedy", "Drama", "Romance", "Thriller", "Adventure", "Sci-Fi",
          "Children's")


def _bins(x: np.ndarray, edges: list[float]) -> np.ndarray:
    return np.clip(np.searchsorted(np.asarray(edges), x, side="right") - 1, 0,
                   len(edges) - 2).astype(np.int64)


def load_choice(name: str):
    """The data sets of the method-choice study, as (codes, Domain): the AIM ones above,
    Private-PGM/hd-datasets' salary and NIST taxi (their domains), SmartNoise's PUMS sample
    (1,000 people: age in 10-year bins, sex, educ, race, income in 8 bins, married), UCI
    bike sharing by day (731 days: season, yr, mnth, holiday, weekday, workingday,
    weathersit, temp/hum/windspeed/cnt each in 8 equal bins of their declared range) and
    MovieLens-100K ratings joined with the rater and 8 genre flags (100,000 ratings:
    rating, age in 7 bins, gender, occupation, genres)."""
    import polars as pl

    from dpkit.release.synthetic.domain import Domain

    if name in ("nltcs", "adult", "adult_obs"):
        return load(name)
    hd = SHARED / "hd_datasets" / "clean"
    if name in ("salary", "taxi"):
        stem = "salary" if name == "salary" else "nist-taxi"
        sizes = json.loads((hd / f"{stem}-domain.json").read_text())
        if name == "salary":
            frame = pl.read_csv(hd / "salary.csv.gz")
        else:
            import io
            import zipfile

            with zipfile.ZipFile(hd / "nist-taxi.zip") as z:
                frame = pl.read_csv(io.BytesIO(z.read("nist-taxi.csv")))
        domain = Domain(tuple(sizes), tuple(sizes.values()))
        return frame.select(domain.attributes).to_numpy().astype(np.int64), domain
    if name == "pums":
        f = pl.read_csv(SHARED / "pums" / "PUMS.csv", infer_schema_length=None)
        cols = {"age": _bins(f["age"].to_numpy(), list(range(0, 101, 10))),
                "sex": f["sex"].to_numpy(), "educ": f["educ"].to_numpy() - 1,
                "race": f["race"].to_numpy() - 1,
                "income": _bins(f["income"].to_numpy().astype(float),
                                [0, 1, 1e4, 2e4, 3e4, 5e4, 8e4, 1.5e5, 1e9]),
                "married": f["married"].to_numpy()}
        sizes = {"age": 10, "sex": 2, "educ": 16, "race": 6, "income": 8, "married": 2}
    elif name == "bike":
        f = pl.read_csv(SHARED.parent / "data_new" / "bike_sharing_uci" / "day.csv")
        cols = {"season": f["season"].to_numpy() - 1, "yr": f["yr"].to_numpy(),
                "mnth": f["mnth"].to_numpy() - 1, "holiday": f["holiday"].to_numpy(),
                "weekday": f["weekday"].to_numpy(), "workingday": f["workingday"].to_numpy(),
                "weathersit": f["weathersit"].to_numpy() - 1}
        sizes = {"season": 4, "yr": 2, "mnth": 12, "holiday": 2, "weekday": 7,
                 "workingday": 2, "weathersit": 4}
        for c, top in (("temp", 1.0), ("hum", 1.0), ("windspeed", 1.0), ("cnt", 9000.0)):
            cols[c] = _bins(f[c].to_numpy().astype(float), list(np.linspace(0, top, 9)))
            sizes[c] = 8
    elif name == "movielens":
        ml = SHARED.parent / "data_new" / "movielens_100k"
        data = np.loadtxt(ml / "u.data", dtype=np.int64)
        users = [line.split("|") for line in (ml / "u.user").read_text().splitlines()]
        occupations = sorted({u[3] for u in users})
        age = np.zeros(len(users) + 1, np.int64)
        gender = np.zeros(len(users) + 1, np.int64)
        job = np.zeros(len(users) + 1, np.int64)
        for u in users:
            age[int(u[0])] = _bins(np.array([int(u[1])]), [0, 18, 25, 35, 45, 50, 56, 200])[0]
            gender[int(u[0])] = u[2] == "F"
            job[int(u[0])] = occupations.index(u[3])
        genre_names = [g.split("|")[0] for g in (ml / "u.genre").read_text(
            encoding="latin-1").splitlines() if g]
        items = [line.split("|") for line in (ml / "u.item").read_text(
            encoding="latin-1").splitlines()]
        flags = np.zeros((len(items) + 1, len(genre_names)), np.int64)
        for it in items:
            flags[int(it[0])] = [int(v) for v in it[5:5 + len(genre_names)]]
        cols = {"rating": data[:, 2] - 1, "age": age[data[:, 0]],
                "gender": gender[data[:, 0]], "occupation": job[data[:, 0]]}
        sizes = {"rating": 5, "age": 7, "gender": 2, "occupation": len(occupations)}
        for g in GENRES:
            cols[g] = flags[data[:, 1], genre_names.index(g)]
            sizes[g] = 2
    else:
        raise SystemExit(f"unknown data set {name!r}")
    domain = Domain(tuple(sizes), tuple(sizes.values()))
    return np.column_stack([np.asarray(cols[a], np.int64) for a in domain.attributes]), domain


def choice_one(data: str, eps: float, method: str) -> dict:
    """One synthesize() run (child process): 2-way and 3-way mean TV of all marginals."""
    import polars as pl

    from dpkit.release.synthetic.synthesize import synthesize

    codes, domain = load_choice(data)
    table = pl.DataFrame({a: codes[:, j] for j, a in enumerate(domain.attributes)})
    spec = {a: list(range(s)) for a, s in zip(domain.attributes, domain.sizes, strict=True)}
    options: dict = {}
    if method in ("mwem2", "mwem3"):  # all 2-way (synthesize's before issue 18) or 3-way
        options["workload"] = list(itertools.combinations(domain.attributes, int(method[-1])))
    wall = time.perf_counter()
    syn = synthesize(table, spec, method="mwem" if method.startswith("mwem") else method,
                     epsilon=eps, **options)
    wall = time.perf_counter() - wall
    sample = syn.select(domain.attributes).to_numpy().astype(np.int64)
    return {"data": data, "epsilon": eps, "method": method, "seconds": wall,
            "tv_2way": mean_tv(codes, sample, domain, 2),
            "tv_3way": mean_tv(codes, sample, domain, 3),
            "d": len(domain.attributes), "log2_cells": float(np.log2(domain.size())),
            "max_pair_cells": max(domain.size(p) for p in itertools.combinations(
                domain.attributes, 2)), "n": int(codes.shape[0])}


def run_choice(args: argparse.Namespace) -> None:
    rows = json.loads(CHOICE_JSON.read_text()) if CHOICE_JSON.exists() else []
    done = {(r["data"], r["epsilon"], r["method"], r["trial"]) for r in rows}
    for data in args.data.split(","):
        for eps in [float(e) for e in args.epsilons.split(",")]:
            for method in args.methods.split(","):
                for trial in range(args.trials):
                    if (data, eps, method, trial) in done:
                        continue
                    try:
                        out = subprocess.run([sys.executable, __file__, "_choice", "--data",
                                              data, "--eps", str(eps), "--method", method],
                                             check=True, capture_output=True, text=True,
                                             timeout=args.timeout).stdout
                        row = json.loads(out.strip().splitlines()[-1])
                    except subprocess.TimeoutExpired:  # too slow to be a default here
                        row = {"data": data, "epsilon": eps, "method": method,
                               "seconds": args.timeout, "timeout": True}
                    row["trial"] = trial
                    print(json.dumps(row), flush=True)
                    # re-read: never overwrite rows another invocation appended meanwhile
                    rows = json.loads(CHOICE_JSON.read_text()) if CHOICE_JSON.exists() else []
                    CHOICE_JSON.write_text(json.dumps(rows + [row], indent=1))


CHOICE_JSON = RESULTS / "aim_scale_choice.json"
FEATURES = ("d", "log2_cells", "log2_max_pair", "epsilon")
RULE_METHODS = ("mst", "aim", "mwem", "independent")


def _cells_of_choice() -> dict[tuple[str, float], dict]:
    """Per (data, ε): the features and each method's error — the mean over trials of
    (2-way TV + 3-way TV)/2; a method with a timed-out run counts as infinitely bad."""
    rows = json.loads(CHOICE_JSON.read_text())
    out: dict[tuple[str, float], dict] = {}
    for r in rows:
        cell = out.setdefault((r["data"], r["epsilon"]), {"err": {}, "feat": {}})
        if not r.get("timeout") and "d" in r:
            cell["feat"] = {"d": r["d"], "log2_cells": r["log2_cells"],
                            "log2_max_pair": float(np.log2(r["max_pair_cells"])),
                            "epsilon": r["epsilon"]}
        err = float("inf") if r.get("timeout") else (r["tv_2way"] + r["tv_3way"]) / 2
        cell["err"].setdefault(r["method"], []).append(err)
    for cell in out.values():
        cell["err"] = {m: float(np.mean(v)) for m, v in cell["err"].items()}
    return out


def _rules(cells: list[dict], methods: tuple[str, ...] = RULE_METHODS) -> list[tuple]:
    """Constant rules, then "m1 if feature ≤ t else m2" at the midpoints between the
    observed values of the feature."""
    out: list[tuple] = [("const", m) for m in methods]
    for f in FEATURES:
        values = sorted({c["feat"][f] for c in cells})
        for lo, hi in zip(values, values[1:], strict=False):
            for m1 in methods:
                for m2 in methods:
                    if m1 != m2:
                        out.append(("split", f, (lo + hi) / 2, m1, m2))
    return out


def _apply(rule: tuple, feat: dict) -> str:
    if rule[0] == "const":
        return rule[1]
    _, f, t, m1, m2 = rule
    return m1 if feat[f] <= t else m2


def _regret(rule: tuple, cells: list[dict], methods: tuple[str, ...] = RULE_METHODS
            ) -> float:
    """Mean log(error of the rule's choice / best error in the cell)."""
    total = 0.0
    for c in cells:
        best = min(c["err"].get(m, float("inf")) for m in methods)
        got = c["err"].get(_apply(rule, c["feat"]), float("inf"))
        total += float("inf") if not np.isfinite(got) else float(np.log(got / best))
    return total / len(cells)


def _fit_rule(cells: list[dict], methods: tuple[str, ...] = RULE_METHODS) -> tuple:
    rules = _rules(cells, methods)
    return min(rules, key=lambda r: (round(_regret(r, cells, methods), 9), rules.index(r)))


def shipped_form(rule: tuple, cells: list[dict]) -> tuple:
    """The rule as ``synthesize.DEFAULT_RULE``/``PURE_RULE`` hold it: (feature, threshold,
    method at or below, method above), the threshold to 3 significant digits (more if
    needed to split every cell as the fitted midpoint does); a constant rule as
    (d, ∞, m, m)."""
    if rule[0] == "const":
        return ("d", float("inf"), rule[1], rule[1])
    _, f, t, m1, m2 = rule
    for digits in range(3, 17):
        r = float(f"{t:.{digits}g}")
        if all((c["feat"][f] <= r) == (c["feat"][f] <= t) for c in cells):
            return (f, r, m1, m2)
    return (f, t, m1, m2)


def _describe(rule: tuple) -> str:
    if rule[0] == "const":
        return f"always {rule[1]}"
    _, f, t, m1, m2 = rule
    return f"{m1} if {f} ≤ {t:.3g} else {m2}"


def choice_report() -> list[str]:
    """Leave-one-dataset-out: for each data set, the rule fitted on the others is applied
    to its cells; then the rule fitted on all of them (the one synthesize() ships)."""
    table = _cells_of_choice()
    cells = {k: {**v, "key": k} for k, v in table.items() if v["feat"]}
    data = sorted({k[0] for k in cells})
    lines = ["## synthesize()'s default method: leave-one-dataset-out", "",
             "Reproduce: `python bench/aim_scale.py choice` (data sets, methods and time limit "
             "in its help; 2 trials per cell; the AIM cells of adult, movielens, salary and "
             "taxi: `choice --methods aim --data adult,movielens,salary,taxi --trials 1`) "
             "then `python bench/aim_scale.py report`.", "",
             "Error per (data set, ε): mean over trials of (mean 2-way TV + mean 3-way TV)/2 "
             "of synthesize(method=…)'s table (δ = 1e-9 for MST and AIM). A run over the time "
             "limit counts as a failure of its method there. Rules: a constant method, or "
             "`m1 if feature ≤ t else m2` on a public feature (d, log2 of the domain's "
             "cells, log2 of the largest 2-way marginal's cells, ε), fitted by the mean log "
             "ratio to the best method of the cell.", "",
             "| held out | ε | rule fitted on the others | chosen | ÷ best | best | "
             "÷ independent |", "|---|---:|---|---|---:|---|---:|"]
    for held in data:
        train = [c for k, c in cells.items() if k[0] != held]
        rule = _fit_rule(train)
        for k, c in sorted(cells.items()):
            if k[0] != held:
                continue
            pick = _apply(rule, c["feat"])
            err = c["err"].get(pick, float("inf"))
            best_m = min(RULE_METHODS, key=lambda m: c["err"].get(m, float("inf")))
            best = c["err"][best_m]
            ind = c["err"].get("independent", float("nan"))
            lines.append(f"| {held} | {k[1]:g} | {_describe(rule)} | {pick} | "
                         f"{err / best:.2f} | {best_m} | {err / ind:.2f} |")
    ratios = [float(r.split("|")[5]) for r in lines if r.startswith("| ") and
              r.split("|")[5].strip() not in ("inf", "÷ best")]
    lines += ["", f"Held out: the choice was the best in {sum(r <= 1.0 for r in ratios)}, "
              f"within 1.25× of it in {sum(r <= 1.25 for r in ratios)} of "
              f"{len(cells)} cells (worst finite {max(ratios):.2f}×; "
              f"{len(cells) - len(ratios)} over the time limit)."]
    final = _fit_rule(list(cells.values()))
    pure = _fit_rule(list(cells.values()), ("mwem", "independent"))
    every = list(cells.values())
    lines += ["", f"Fitted on all data sets (shipped in `choose_method`): **{_describe(final)}**"
              f" (mean log ratio to the best {_regret(final, every):.3f}), "
              f"`DEFAULT_RULE = {shipped_form(final, every)!r}`; without Private-PGM (`mbi`), "
              f"among the pure methods: **{_describe(pure)}**, "
              f"`PURE_RULE = {shipped_form(pure, every)!r}` (src/dpkit/release/synthetic/"
              "synthesize.py; tests/test_release_synthesize.py checks that they are these).",
              "", "Errors per cell (mean of 2-way and 3-way TV; mean seconds of one run; "
              "runs):", "",
              "| data | ε | " + " | ".join(RULE_METHODS) + " | mwem, all 2-way | mwem, all 3-way |",
              "|---|---:|" + "---:|" * (len(RULE_METHODS) + 2)]
    rows = json.loads(CHOICE_JSON.read_text())
    for k, c in sorted(table.items()):
        secs = {}
        for r in rows:
            if (r["data"], r["epsilon"]) == k:
                secs.setdefault(r["method"], []).append(r["seconds"])
        vals = [f"{c['err'][m]:.4f} ({np.mean(secs[m]):.0f} s; {len(secs[m])})" if m in c["err"] and
                np.isfinite(c["err"][m]) else (f"> {max(secs[m]):.0f} s" if m in secs else "—")
                for m in (*RULE_METHODS, "mwem2", "mwem3")]
        lines.append(f"| {k[0]} | {k[1]:g} | " + " | ".join(vals) + " |")
    return lines


# ---------------------------------------------------------------------------- report
def _read() -> list[dict]:
    return json.loads(OUT_JSON.read_text()) if OUT_JSON.exists() else []


def _write(rows: list[dict]) -> None:
    OUT_JSON.write_text(json.dumps(rows, indent=1))


def _cell(vals: list[float], fmt: str) -> str:
    if not vals:
        return "—"
    if len(vals) == 1:
        return format(vals[0], fmt)
    return f"{format(float(np.mean(vals)), fmt)} ({format(min(vals), fmt)}–" \
           f"{format(max(vals), fmt)})"


def report(_: argparse.Namespace) -> None:
    rows = [r for r in _read() if not r.get("error")]
    earlier = RESULTS / "synthetic_peers.json"  # bench/synthetic.py's peer runs, same setting
    if earlier.exists():
        rows += [{"label": "smartnoise-synth", "data": "adult_obs", "epsilon": p["epsilon"],
                  "seconds": p["seconds"], "tv_2way": p.get("tv_2way_fixed"),
                  "tv_2way_shipped": p.get("tv_2way")}
                 for p in json.loads(earlier.read_text())
                 if p.get("method") == "aim" and not p.get("error")]
    aim_rows = rows
    lines = ["# AIM at scale: before and after", "",
             "Reproduce (2 shared cores, shared with other jobs: wall times move with the "
             "load, so CPU seconds are shown too):", "", "```",
             "git -C /work/main archive a34ad4d src | tar -x -C /tmp/aim_before  # before",
             "python bench/aim_scale.py aim --label before --src /tmp/aim_before/src "
             "--data nltcs --epsilons 1,0.1 --trials 1",
             "python bench/aim_scale.py aim --label before --src /tmp/aim_before/src "
             "--data adult_obs --epsilons 0.1 --trials 6",
             "python bench/aim_scale.py aim --label before --src /tmp/aim_before/src "
             "--data adult_obs --epsilons 1 --trials 2",
             "python bench/aim_scale.py aim --label after --data nltcs --epsilons 1,0.1 "
             "--trials 2",
             "python bench/aim_scale.py aim --label after --data adult_obs --epsilons 0.1 "
             "--trials 6  # run twice",
             "python bench/aim_scale.py aim --label after --data adult_obs --epsilons 1 "
             "--trials 2",
             "python bench/aim_scale.py aim --label after-iters1000 --iters 1000 --data "
             "adult_obs --epsilons 0.1 --trials 6  # 1000 fit iterations a round (default 300)",
             "python bench/aim_scale.py peers --epsilons 0.1 --trials 3  # /tmp/snsynth-venv",
             "python bench/aim_scale.py report", "```", "",
             "Cells: mean (min–max) over trials. Memory: peak RSS of the run's process "
             "(`base` = after imports and loading the data, before AIM). TV: mean total "
             "variation over all k-way marginals of the synthetic table (rows = AIM's noisy "
             "total), ε with δ = 1e-9. `load`: the 1-minute load average after each run "
             "(mean), on 2 cores. Rows labelled `after-v0` in aim_scale.json are the same "
             "code before its calibration moved to log space (not shown).", ""]
    keys = sorted({(r["data"], r["epsilon"]) for r in aim_rows})
    lines += ["| data, workload | ε | version | trials | wall s | CPU s | peak MB (base) | "
              "rounds | TV 1-way | TV 2-way | TV 3-way | load |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    names = {"nltcs": "NLTCS, all 560 3-way", "adult": "Adult, all 91 2-way",
             "adult_obs": "Adult (observed values), all 91 2-way"}
    for data, eps in keys:
        for label in ("before", "after", "after-iters1000", "smartnoise-synth"):
            sel = [r for r in aim_rows if r["data"] == data and r["epsilon"] == eps
                   and r["label"] == label]
            if not sel:
                continue

            def col(key: str, fmt: str, sel: list[dict] = sel) -> str:
                return _cell([r[key] for r in sel if r.get(key) is not None], fmt)

            peak = col("peak_mb", ".0f")
            base = col("base_mb", ".0f")
            loads = [r["load"] for r in sel if "load" in r]
            load = [float(np.mean(loads))] if loads else []
            lines.append(f"| {names.get(data, data)} | {eps:g} | {label} | {len(sel)} | "
                         f"{col('seconds', '.1f')} | {col('cpu_seconds', '.1f')} | "
                         f"{peak}{'' if base == '—' else f' ({base})'} | "
                         f"{col('rounds', '.0f')} | {col('tv_1way', '.4f')} | "
                         f"{col('tv_2way', '.4f')} | {col('tv_3way', '.4f')} | "
                         f"{_cell(load, '.1f')} |")
    for eps in sorted({r["epsilon"] for r in aim_rows if r["label"] == "smartnoise-synth"}):
        shipped = [r["tv_2way_shipped"] for r in aim_rows if r["label"] == "smartnoise-synth"
                   and r["epsilon"] == eps and r.get("tv_2way_shipped") is not None]
        lines.append(f"- smartnoise-synth at ε = {eps:g}: its AIM (Private-PGM's reference "
                     "code, bench/peers/synth_peers.py) re-drawn with its sampler fixed; as "
                     f"shipped (mbi 1.1.0's sampler) 2-way TV {_cell(shipped, '.4f')}. Its "
                     "categorical encoding keeps the values that occur, hence `adult_obs` for "
                     "dpkit. Rows include bench/synthetic.py's earlier peer runs "
                     "(results/synthetic_peers.json).")
    lines.append("")
    if CHOICE_JSON.exists():
        lines += choice_report()
    (RESULTS / "aim_scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("aim")
    a.add_argument("--label", default="after")
    a.add_argument("--src", default=None, help="dpkit source dir to run (PYTHONPATH)")
    a.add_argument("--data", default="nltcs")
    a.add_argument("--epsilons", default="1")
    a.add_argument("--trials", type=int, default=2)
    a.add_argument("--iters", type=int, default=None, help="AIM's per-round iterations")
    p = sub.add_parser("peers")
    p.add_argument("--epsilons", default="0.1")
    p.add_argument("--trials", type=int, default=3)
    o = sub.add_parser("_one")
    o.add_argument("--data", required=True)
    o.add_argument("--eps", type=float, required=True)
    o.add_argument("--iters", type=int, default=None)
    c = sub.add_parser("choice")
    c.add_argument("--trials", type=int, default=2)
    c.add_argument("--data", default=",".join(CHOICE_DATA))
    c.add_argument("--epsilons", default="0.1,1")
    c.add_argument("--methods", default=",".join(CHOICE_METHODS))
    c.add_argument("--timeout", type=float, default=300.0,
                   help="seconds; a slower run counts as a failure of its method there")
    q = sub.add_parser("_choice")
    q.add_argument("--data", required=True)
    q.add_argument("--eps", type=float, required=True)
    q.add_argument("--method", required=True)
    sub.add_parser("report")
    args = ap.parse_args()
    if args.cmd == "_one":
        print(json.dumps(one(args.data, args.eps, args.iters)))
    elif args.cmd == "aim":
        run_aim(args)
    elif args.cmd == "peers":
        run_peers(args)
    elif args.cmd == "_choice":
        print(json.dumps(choice_one(args.data, args.eps, args.method)))
    elif args.cmd == "choice":
        run_choice(args)
    else:
        report(args)


if __name__ == "__main__":
    main()
