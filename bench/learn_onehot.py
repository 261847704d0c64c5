"""Logistic regression on UCI Adult with every attribute: dpkit's functional mechanism and
output perturbation beside diffprivlib and non-private scikit-learn, same published
train/test split, same inputs, ε ∈ {0.1, 1}.

    python bench/learn_onehot.py [--trials 10]

Inputs (all declared, none read off the training data):

- one-hot: workclass, education, marital-status, occupation, relationship, race, sex,
  native-country, each with its UCI category list. The lists are read once from
  ``load_adult("all")`` (train + test) as a documented public input — UCI publishes them
  (adult.names); a missing value is the all-zero row of its group. 99 indicator columns.
- numeric: age, education-num, capital-gain, capital-loss, hours-per-week with the declared
  bounds lower [17, 1, 0, 0, 1], upper [90, 16, 99999, 4356, 99]; capital-gain and
  capital-loss as log(1 + x) (a public transform; bounds transformed alike).
- label: income == ">50K".

dpkit gets the raw columns with ``bounds=`` and ``one_hot=`` (it maps numeric columns to
[−1, 1] itself). diffprivlib (bench/peers/learn_onehot_peers.py, run with the peers'
virtualenv) and scikit-learn get the same rows already mapped: numeric columns to [−1, 1]
by the declared bounds, indicators 0/1, so every row has L2 norm ≤ √(5 + 8) = √13, the
``data_norm`` diffprivlib is given.

Also re-run: bench/learn.py's 5-numeric-column setup (raw capital columns, its bounds) with
``method="functional"`` beside its ``method="output"`` configuration (C = 0.1,
intercept_scaling = 0.3) and diffprivlib (``data_norm = 1`` on the rows scaled as
bench/learn.py's peers are).

Seconds are fit time only (prediction excluded), per trial.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from dpkit.datasets import load_adult
from dpkit.learn import LogisticRegression

HERE = Path(__file__).parent
PEERS_PYTHON = Path("/work/peers-venv/bin/python")
CATEGORICAL = ["workclass", "education", "marital-status", "occupation", "relationship",
               "race", "sex", "native-country"]
NUMERIC = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
LOWER = np.array([17, 1, 0, 0, 1], dtype=float)
UPPER = np.array([90, 16, 99999, 4356, 99], dtype=float)
EPSILONS = (0.1, 1.0)


def category_lists() -> dict[str, list[str]]:
    """The UCI category lists (public: adult.names), read once from the whole file."""
    full = load_adult("all")
    return {c: sorted(full[c].drop_nulls().unique().to_list()) for c in CATEGORICAL}


def onehot_arrays(levels: dict[str, list[str]]):
    """(x, y, xt, yt, one_hot groups, lower, upper): numeric columns first (capital
    columns log1p'd), then the indicators; bounds for every column."""

    def encode(df):
        num = df.select(NUMERIC).to_numpy().astype(float)
        num[:, 2:4] = np.log1p(num[:, 2:4])
        blocks = [num]
        for c in CATEGORICAL:
            lookup = {v: i for i, v in enumerate(levels[c])}
            block = np.zeros((df.height, len(levels[c])))
            for row, v in enumerate(df[c].to_list()):
                if v is not None:
                    block[row, lookup[v]] = 1.0
            blocks.append(block)
        return np.column_stack(blocks)

    tr, te = load_adult("train"), load_adult("test")
    x, xt = encode(tr), encode(te)
    y = (tr["income"].to_numpy() == ">50K").astype(int)
    yt = (te["income"].to_numpy() == ">50K").astype(int)
    groups, start = [], len(NUMERIC)
    for c in CATEGORICAL:
        groups.append(list(range(start, start + len(levels[c]))))
        start += len(levels[c])
    lower = np.concatenate([LOWER, np.zeros(start - len(NUMERIC))])
    upper = np.concatenate([UPPER, np.ones(start - len(NUMERIC))])
    lower[2:4], upper[2:4] = np.log1p(lower[2:4]), np.log1p(upper[2:4])
    return x, y, xt, yt, groups, lower, upper


def numeric_arrays():
    """bench/learn.py's setup: the 5 numeric columns, raw, with its declared bounds."""
    tr, te = load_adult("train"), load_adult("test")
    x = tr.select(NUMERIC).to_numpy().astype(float)
    xt = te.select(NUMERIC).to_numpy().astype(float)
    y = (tr["income"].to_numpy() == ">50K").astype(int)
    yt = (te["income"].to_numpy() == ">50K").astype(int)
    return x, y, xt, yt


def mapped(x, lower, upper, n_numeric):
    """Numeric columns to [−1, 1] by their declared bounds, indicators unchanged."""
    z = x.copy()
    lo, hi = lower[:n_numeric], upper[:n_numeric]
    z[:, :n_numeric] = 2 * (np.clip(x[:, :n_numeric], lo, hi) - lo) / (hi - lo) - 1
    return z


def _timed(system, model, eps, trial, fit, predict, yt):
    t0 = time.perf_counter()
    fitted = fit()
    seconds = time.perf_counter() - t0
    return {"system": system, "model": model, "epsilon": eps, "trial": trial,
            "seconds": seconds, "accuracy": float((predict(fitted) == yt).mean())}


def run_dpkit(trials: int) -> list[dict]:
    """dpkit's rows; each configuration's trials run back to back (interleaving them with
    output perturbation's multithreaded L-BFGS fits slowed the short fits down several-fold
    on a shared machine)."""
    x, y, xt, yt, groups, lower, upper = onehot_arrays(category_lists())
    nx, ny, nxt, nyt = numeric_arrays()
    configs = {
        "one-hot, functional": (x, y, xt, yt, dict(bounds=(lower, upper), method="functional",
                                                   one_hot=groups)),
        "one-hot, output": (x, y, xt, yt, dict(bounds=(lower, upper), method="output",
                                               C=0.1, intercept_scaling=0.3)),
        "5 numeric, functional": (nx, ny, nxt, nyt, dict(bounds=(LOWER, UPPER),
                                                         method="functional")),
        "5 numeric, output": (nx, ny, nxt, nyt, dict(bounds=(LOWER, UPPER), method="output",
                                                     C=0.1, intercept_scaling=0.3)),
    }
    rows = []
    for name, (a, b, at, bt, kw) in configs.items():
        for eps in EPSILONS:
            for trial in range(trials):
                rows.append(_timed(
                    "dpkit", f"LogisticRegression ({name})", eps, trial,
                    lambda e=eps, a=a, b=b, kw=kw: LogisticRegression(
                        e, classes=[0, 1], **kw).fit(a, b),
                    lambda m, at=at: m.predict(at), bt))
    return rows


def run_peers(trials: int) -> list[dict]:
    if not PEERS_PYTHON.exists():
        print(f"peers skipped: {PEERS_PYTHON} not found")
        return []
    x, y, xt, yt, groups, lower, upper = onehot_arrays(category_lists())
    nx, ny, nxt, nyt = numeric_arrays()
    k = len(NUMERIC)
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp) / "adult_onehot.npz", Path(tmp) / "peers.json"
        np.savez(data, x=mapped(x, lower, upper, k), y=y, xt=mapped(xt, lower, upper, k),
                 yt=yt, data_norm=np.sqrt(k + len(groups)),
                 nx=mapped(nx, LOWER, UPPER, k) / np.sqrt(k), ny=ny,
                 nxt=mapped(nxt, LOWER, UPPER, k) / np.sqrt(k), nyt=nyt)
        subprocess.run([str(PEERS_PYTHON), str(HERE / "peers" / "learn_onehot_peers.py"),
                        "--data", str(data), "--out", str(out), "--trials", str(trials),
                        "--epsilons", ",".join(map(str, EPSILONS))], check=True)
        return json.loads(out.read_text())


def run_onehot(trials: int) -> list[dict]:
    """Rows {"system", "model", "epsilon", "trial", "seconds", "accuracy"} for dpkit,
    diffprivlib and scikit-learn (epsilon None: non-private) on both setups."""
    return run_dpkit(trials) + run_peers(trials)


def table(rows: list[dict]) -> list[str]:
    lines = ["| setup, method | ε | system | mean accuracy | worst trial | median fit s |",
             "|---|---:|---|---:|---:|---:|"]
    keys = sorted({(r["model"].split("(")[1].split(",")[0], -1.0 if r["epsilon"] is None
                    else r["epsilon"], r["system"], r["model"]) for r in rows},
                  key=lambda k: (k[0], k[1], ["dpkit", "diffprivlib", "scikit-learn"].index(
                      k[2]), k[3]))
    for _, eps, system, model in keys:
        sel = [r for r in rows if r["model"] == model and r["system"] == system
               and (r["epsilon"] if r["epsilon"] is not None else -1.0) == eps]
        acc = [r["accuracy"] for r in sel]
        label = model.removeprefix("LogisticRegression (").removesuffix(")")
        lines.append(f"| {label} | {'—' if eps < 0 else f'{eps:g}'} | {system} | "
                     f"{np.mean(acc):.2%} | {np.min(acc):.2%} | "
                     f"{np.median([r['seconds'] for r in sel]):.3f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    rows = run_onehot(args.trials)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    yt = numeric_arrays()[3]
    print(f"{args.trials} trials; majority class on the test split: "
          f"{max(yt.mean(), 1 - yt.mean()):.2%}\n")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
