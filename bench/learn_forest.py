"""Private random forests on UCI Adult (issue 36, item 4): dpkit's
SmoothRandomForestClassifier (Fletcher & Islam 2017; both leaf rules) beside dpkit's
RandomForestClassifier, diffprivlib's RandomForestClassifier (which cites the same paper),
non-private scikit-learn and the majority class, in one run.

    DPKIT_PEERS_PYTHON=/work/venv-peers-logistic/bin/python \\
        python bench/learn_forest.py [--trials 10] [--update-results]

Rows: UCI's published split, read by :func:`dpkit.datasets.load_adult` — the model is fit on
the 32,561 training rows and scored on the 16,281 test rows (every row, no subsample). The
test rows are held out: no default of any system was chosen on them, and nothing is tuned
here (the smooth forest's T = 10 trees and depth D = ⌈ln 2 / −ln(1 − 1/m)⌉ = 8 for m = 11
features are the paper's rules; every other system runs at its library defaults).

Columns: bench/learn_tree_peers.py's forest columns (11): age, education-num,
log(1 + capital-gain), log(1 + capital-loss), hours-per-week with the UCI ranges as declared
bounds, and workclass, marital-status, occupation, relationship, race, sex as codes
0 … m − 1 (bounds [0, m − 1]). Label: income > 50K. Every private system gets the same
declared ``bounds`` and ``classes=[0, 1]``; none reads a bound off the data.

Systems (library defaults unless stated): dpkit SmoothRandomForestClassifier with
``leaf="counts"`` (ε-DP, the default) and ``leaf="smooth_sensitivity"`` at δ = 10^-6
((ε, δ)-DP); dpkit RandomForestClassifier (ε-DP); diffprivlib RandomForestClassifier (ε-DP
as it claims; 10 trees of depth 5) in the peers' virtualenv through a subprocess
(``DPKIT_PEERS_PYTHON``, ../shared/PEERS.md); scikit-learn RandomForestClassifier
(non-private, 100 trees, unlimited depth); the training split's majority class (no fit).
Cells: median test accuracy over the trials (fresh noise each; nothing is seeded) and the
median fit seconds (fit only, on the shared 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learn_tree_peers import forest_arrays  # noqa: E402
from learn_trees import arrays  # noqa: E402
from outdir import add_flag, results_dir  # noqa: E402
from sklearn.ensemble import RandomForestClassifier as SkForest  # noqa: E402

from dpkit.learn import RandomForestClassifier, SmoothRandomForestClassifier  # noqa: E402

PEERS_PYTHON = Path(os.environ.get("DPKIT_PEERS_PYTHON", "/work/venv-peers-logistic/bin/python"))
EPSILONS = (0.1, 0.5, 1.0, 5.0)
DELTA = 1e-6
NON_PRIVATE = ("scikit-learn RandomForestClassifier (non-private)", "majority class (no fit)")

PEER = """
import json, sys, time, warnings
import numpy as np
import diffprivlib.models as dpl
warnings.simplefilter("ignore")
z = np.load(sys.argv[1]); trials = int(sys.argv[2]); eps_list = json.loads(sys.argv[3])
rows = []
for eps in eps_list:
    for _ in range(trials):
        t0 = time.perf_counter()
        m = dpl.RandomForestClassifier(epsilon=eps, bounds=(z["lo"], z["hi"]), classes=[0, 1])
        m.fit(z["x"], z["y"])
        sec = time.perf_counter() - t0
        rows.append({"system": "diffprivlib RandomForestClassifier", "epsilon": eps,
                     "seconds": sec, "accuracy": float((m.predict(z["xt"]) == z["yt"]).mean())})
json.dump(rows, sys.stdout)
"""


def data() -> dict[str, np.ndarray]:
    """The 11 forest columns of both splits, labels and declared bounds."""
    x, y, xt, yt, _, bounds = arrays()
    fx, fxt, (lo, hi) = forest_arrays(x, xt, bounds)
    return {"x": fx, "y": y, "xt": fxt, "yt": yt, "lo": lo, "hi": hi}


def dpkit_models(d: dict[str, np.ndarray]) -> dict[str, Callable[[float], object]]:
    bounds, classes = (d["lo"], d["hi"]), [0, 1]
    return {
        "dpkit SmoothRandomForestClassifier, leaf=counts (ε-DP)":
            lambda e: SmoothRandomForestClassifier(epsilon=e, bounds=bounds, classes=classes),
        "dpkit SmoothRandomForestClassifier, leaf=smooth_sensitivity (ε, δ = 1e-6)":
            lambda e: SmoothRandomForestClassifier(epsilon=e, delta=DELTA,
                                                   leaf="smooth_sensitivity", bounds=bounds,
                                                   classes=classes),
        "dpkit RandomForestClassifier (ε-DP)":
            lambda e: RandomForestClassifier(epsilon=e, bounds=bounds, classes=classes)}


def timed(model: object, d: dict[str, np.ndarray]) -> tuple[float, float]:
    """(fit seconds, test accuracy)."""
    t0 = time.perf_counter()
    model.fit(d["x"], d["y"])  # type: ignore[attr-defined]
    sec = time.perf_counter() - t0
    return sec, float((model.predict(d["xt"]) == d["yt"]).mean())  # type: ignore[attr-defined]


def local_rows(d: dict[str, np.ndarray], trials: int) -> list[dict]:
    rows = []
    for name, make in dpkit_models(d).items():
        for eps in EPSILONS:
            for _ in range(trials):
                sec, acc = timed(make(eps), d)
                rows.append({"system": name, "epsilon": eps, "seconds": sec, "accuracy": acc})
    for _ in range(trials):  # non-private: one row per trial, the same in every ε column
        sec, acc = timed(SkForest(), d)
        rows.append({"system": NON_PRIVATE[0], "epsilon": None, "seconds": sec,
                     "accuracy": acc})
    values, counts = np.unique(d["y"], return_counts=True)
    rows.append({"system": NON_PRIVATE[1], "epsilon": None, "seconds": 0.0,
                 "accuracy": float((d["yt"] == values[counts.argmax()]).mean())})
    return rows


def peer_rows(d: dict[str, np.ndarray], trials: int) -> list[dict]:
    from learn_logistic_peers import run_peer_script

    return run_peer_script(PEERS_PYTHON, PEER, d, trials, EPSILONS)


def cell(rows: list[dict], system: str, eps: float | None) -> str:
    sel = [r for r in rows if r["system"] == system and (eps is None or r["epsilon"] == eps)]
    if not sel:
        return "—"
    acc = float(np.median([r["accuracy"] for r in sel]))
    sec = float(np.median([r["seconds"] for r in sel]))
    return f"{acc:.4f} ({sec:.2f} s)"


def table(rows: list[dict], trials: int, seconds: float) -> str:
    systems = list(dict.fromkeys(r["system"] for r in rows if r["system"] not in NON_PRIVATE))
    lines = ["Command: `DPKIT_PEERS_PYTHON=/work/venv-peers-logistic/bin/python python "
             f"bench/learn_forest.py --trials {trials} --update-results` ({seconds:.0f} s on 2 "
             "shared cores).", "",
             "Adult, UCI's published split: fit on the 32,561 training rows, scored on the "
             "16,281 held-out test rows (no subsample; no default of any system was chosen on "
             "them). 11 columns (bench/learn_tree_peers.py's forest columns), declared bounds. "
             f"Cells: median test accuracy over {trials} trials (median fit seconds). "
             "Non-private rows are the same in every column.", "",
             "| system | " + " | ".join(f"ε = {e:g}" for e in EPSILONS) + " |",
             "|---|" + "---:|" * len(EPSILONS)]
    for s in systems:
        lines.append(f"| {s} | " + " | ".join(cell(rows, s, e) for e in EPSILONS) + " |")
    for s in NON_PRIVATE:
        lines.append(f"| {s} | " + " | ".join(cell(rows, s, None) for _ in EPSILONS) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    add_flag(ap)
    args = ap.parse_args()
    if args.trials < 5:
        raise SystemExit("--trials must be at least 5 (medians over ≥ 5 trials)")
    warnings.simplefilter("ignore")  # TrivialResultWarning at small ε is part of the result
    t0 = time.perf_counter()
    d = data()
    rows = peer_rows(d, args.trials) + local_rows(d, args.trials)
    text = table(rows, args.trials, time.perf_counter() - t0)
    print(text)
    out = results_dir(args.update_results)
    (out / "learn_forest.md").write_text("# Private random forests on Adult (issue 36, item 4)"
                                         "\n\n" + text, encoding="utf-8")


if __name__ == "__main__":
    main()
