"""Private logistic regression on UCI Adult, dpkit beside diffprivlib in one run (issue 34).

    python bench/learn_logistic_peers.py [--trials 10] [--update-results]

Held-out protocol: dpkit's defaults with only ``data_norm`` declared (``method="auto"`` =
objective perturbation, its ridge from CMS11 Alg. 2's second branch; output perturbation's
C = ε/((d + 1)·R·R′); s = R/√d) were chosen on synthetic data (bench/
learn_logistic_synthetic.py: uncentred and centred features, d ∈ {5, 10, 20}, 20,000 rows,
logistic labels at ~25% positives); Adult is the evaluation only, never used to choose.

Task (30,169 × 10: UCI's published train split without rows missing a used column;
15,063 test rows): age, education-num, log(1 + capital-gain), log(1 + capital-loss),
hours-per-week with declared
bounds lower [17, 1, 0, 0, 1], upper [90, 16, log 100000, log 4357, 99], and five declared
indicators (sex = Male, marital-status = Married-civ-spouse, race = White, workclass =
Private, native-country = United-States). Each column is mapped by its declared bounds to
[0, 1] ("uncentred", what min-max scaling gives) or to [−1, 1] ("centred"), and every row
divided by √10, so ‖x‖₂ ≤ 1 = the declared data_norm R both libraries get. Same rows, same
split. The functional mechanism (dpkit's default when bounds are declared) gets the raw
columns with those bounds. diffprivlib (objective perturbation, its default C = 1) runs in
the peers' virtualenv through a subprocess (../shared/PEERS.md; ``DPKIT_PEERS_PYTHON``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from outdir import add_flag, results_dir  # noqa: E402

from dpkit.datasets import load_adult  # noqa: E402
from dpkit.learn import LogisticRegression  # noqa: E402

PEERS_PYTHON = Path(os.environ.get("DPKIT_PEERS_PYTHON", "/work/venv-peers/bin/python"))
EPSILONS = (0.5, 1.0, 5.0)
NUMERIC = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
INDICATORS = [("sex", "Male"), ("marital-status", "Married-civ-spouse"), ("race", "White"),
              ("workclass", "Private"), ("native-country", "United-States")]
LOWER = np.array([17, 1, 0, 0, 1, 0, 0, 0, 0, 0], dtype=float)
UPPER = np.array([90, 16, np.log1p(99999), np.log1p(4356), 99, 1, 1, 1, 1, 1])

PEER = """
import json, sys, warnings
import numpy as np
import diffprivlib.models as dpl
warnings.simplefilter("ignore")
z = np.load(sys.argv[1]); trials = int(sys.argv[2]); eps_list = json.loads(sys.argv[3])
rows = []
for setup in ("uncentred", "centred"):
    x, xt = z[setup], z[setup + "_test"]
    for eps in eps_list:
        for t in range(trials):
            m = dpl.LogisticRegression(epsilon=eps, data_norm=1.0).fit(x, z["y"])
            rows.append({"setup": setup, "system": "diffprivlib (objective, C = 1)",
                         "epsilon": eps, "accuracy": float((m.predict(xt) == z["yt"]).mean())})
json.dump(rows, sys.stdout)
"""


def arrays(part: str) -> tuple[np.ndarray, np.ndarray]:
    """Raw columns (capital columns log1p'd, indicators 0/1) and labels of one split."""
    df = load_adult(part).drop_nulls(subset=NUMERIC + [c for c, _ in INDICATORS] + ["income"])
    num = df.select(NUMERIC).to_numpy().astype(float)
    num[:, 2:4] = np.log1p(num[:, 2:4])
    ind = [(df[c].to_numpy() == v).astype(float) for c, v in INDICATORS]
    y = np.isin(df["income"].to_numpy(), [">50K", ">50K."]).astype(int)
    return np.column_stack([num, *ind]), y


def mapped(x: np.ndarray, centred: bool) -> np.ndarray:
    """Columns to [0, 1] (or [−1, 1]) by the declared bounds, rows divided by √d."""
    z = (np.clip(x, LOWER, UPPER) - LOWER) / (UPPER - LOWER)
    return (2 * z - 1 if centred else z) / np.sqrt(x.shape[1])


def dpkit_rows(data: dict[str, np.ndarray], trials: int) -> list[dict]:
    y, yt = data["y"], data["yt"]
    rows = []
    configs = {"dpkit default (objective; auto with data_norm)": {"method": "auto"},
               "dpkit output, new defaults": {},
               "dpkit output, old defaults (C = 1/√10⁴, s = 1)": {"C": 0.01,
                                                                  "intercept_scaling": 1.0}}
    for setup in ("uncentred", "centred"):
        x, xt = data[setup], data[setup + "_test"]
        for eps in EPSILONS:
            for name, kw in configs.items():
                for _ in range(trials):
                    args = {"method": "output", **kw}
                    m = LogisticRegression(eps, data_norm=1.0, classes=[0, 1], **args).fit(x, y)
                    rows.append({"setup": setup, "system": name, "epsilon": eps,
                                 "accuracy": float((m.predict(xt) == yt).mean())})
    for eps in EPSILONS:  # raw columns with declared bounds: setup-independent
        for _ in range(trials):
            m = LogisticRegression(eps, bounds=(LOWER, UPPER), classes=[0, 1],
                                   method="functional").fit(data["raw"], y)
            acc = float((m.predict(data["raw_test"]) == yt).mean())
            for setup in ("uncentred", "centred"):
                rows.append({"setup": setup, "system": "dpkit functional (bounds)",
                             "epsilon": eps, "accuracy": acc})
    return rows


def run_peer_script(python: Path, script: str, data: dict[str, np.ndarray], trials: int,
                    epsilons: tuple[float, ...]) -> list[dict]:
    """Run ``script`` (argv: an .npz of ``data``, the trials, the ε list as JSON) in the
    peers' interpreter ``python``; its JSON rows (none when that Python is missing)."""
    if not python.exists():
        print(f"diffprivlib skipped: {python} not found (../shared/PEERS.md)")
        return []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "adult.npz"
        np.savez(path, **data)
        out = subprocess.run([str(python), "-c", script, str(path), str(trials),
                              json.dumps(list(epsilons))], check=True, capture_output=True,
                             text=True).stdout
    return json.loads(out)


def peer_rows(data: dict[str, np.ndarray], trials: int) -> list[dict]:
    return run_peer_script(PEERS_PYTHON, PEER, data, trials, EPSILONS)


def table(rows: list[dict], majority: float, trials: int) -> str:
    systems = list(dict.fromkeys(r["system"] for r in rows))
    lines = [f"Adult, 10 columns, {trials} trials per cell; cells: mean test accuracy (min). "
             f"Majority-class rate on the test split: {majority:.4f}. "
             "Command: python bench/learn_logistic_peers.py --trials "
             f"{trials} --update-results", ""]
    for setup in ("uncentred", "centred"):
        lines += [f"### rows mapped {'to [0, 1]' if setup == 'uncentred' else 'to [−1, 1]'}"
                  ", divided by √10 (R = 1)", "",
                  "| system | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " |",
                  "|---|" + "---|" * len(EPSILONS)]
        for s in systems:
            cells = []
            for e in EPSILONS:
                acc = [r["accuracy"] for r in rows
                       if r["setup"] == setup and r["system"] == s and r["epsilon"] == e]
                cells.append(f"{np.mean(acc):.4f} ({min(acc):.4f})" if acc else "—")
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    add_flag(ap)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # TrivialResultWarning of the old defaults
    x, y = arrays("train")
    xt, yt = arrays("test")
    data = {"raw": x, "raw_test": xt, "y": y, "yt": yt,
            "uncentred": mapped(x, False), "uncentred_test": mapped(xt, False),
            "centred": mapped(x, True), "centred_test": mapped(xt, True)}
    rows = peer_rows(data, args.trials) + dpkit_rows(data, args.trials)
    majority = max(yt.mean(), 1 - yt.mean())
    text = table(rows, majority, args.trials)
    print(text)
    out = results_dir(args.update_results)
    (out / "learn_logistic_peers.md").write_text("# Private logistic regression, dpkit vs "
                                                 "diffprivlib (issue 34)\n\n" + text)


if __name__ == "__main__":
    main()
