"""DiffGen on UCI Adult, evaluated like the paper (Mohammed, Chen, Fung & Yu, KDD 2011, §5):
a decision tree trained on the release, tested on real held-out rows.

    python bench/diffgen.py --update-results          # bench/results/diffgen.md
    python bench/diffgen.py --trials 1                # a quick look, bench/out/diffgen.md

Data: adult.data without missing values (30,162 rows) is released; adult.test without
missing values (15,060 rows) is held out and only classified — the paper's split (45,222
records, train/test as distributed). What was chosen before any run: DiffGen's budget
split (the paper's), the taxonomies (written from the census categories) and the
classifier (scikit-learn's DecisionTreeClassifier, entropy criterion, min_samples_leaf=20).
What changed after the first run, on this split: the default score (Max instead of
InfoGain, for the data-free reason in the InfoGain row below) and, on the table, the leaf
floor as 20 records of weight (the first run counted table rows, so small tables never
split). So this table is not a held-out check of those two choices; bench/floor.py checks
the default on MovieLens, which DiffGen never saw.

Rows, for h ∈ {4, 10, 16} and ε ∈ {0.1, 0.25, 0.5, 1} (median accuracy over ``--trials``
fresh releases, fresh noise each):

- DiffGen, table: the tree is trained on the generalised table (one training row per leaf,
  its noisy count, clipped at 0, as the weight; features: each attribute's generalised
  value as its position in the cut), and the test rows are generalised by the same cut —
  the paper's protocol.
- DiffGen, sampled: the tree is trained on 30,162 records sampled from the release
  (``sample(n)``), features the raw values (categorical: the leaf's position in its
  taxonomy), and tested on the raw test rows.
- weighted variant: the same two, one draw per step over weighted candidates.
- InfoGain: the paper's variant with score="infogain" (normalised information gain, Δu =
  log₂ 2 = 1), on the table. The default score is Max (see :func:`dpkit.release.
  generalization.diffgen.diffgen`: at ε′ = ε/52 the normalised gain's exponential mechanism
  is uniform to within e^{ε′/2}, whatever the data); that default was set after a first
  run on this split, so this table is not a held-out check of that choice.
- Identity (the baseline at the same ε): per-cell discrete Laplace on the full contingency
  table of the same 14 attributes and the class (the declared grids: about 10^24 cells),
  sampled and classified like "DiffGen, sampled". The table is never materialised: the
  non-empty cells get their noise through the kit; each empty cell's positive part has
  mean a/((1 − a)(1 + a)), a = e^−ε, and there are so many that their total is that mean
  times their number (relative error below 10^−9), and a draw from them is uniform over the
  domain.
- non-private: the same tree on the real training rows.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from outdir import add_flag, results_dir  # noqa: E402

from dpkit.core import rng  # noqa: E402
from dpkit.datasets import load_adult  # noqa: E402
from dpkit.mechanisms import frontend  # noqa: E402
from dpkit.release.generalization import (  # noqa: E402
    ADULT_CLASSES,
    ADULT_TARGET,
    ADULT_TAXONOMY,
    Categorical,
    diffgen,
)

STEPS = (4, 10, 16)
EPSILONS = (0.1, 0.25, 0.5, 1.0)
PAPER = 0.82  # assumed: DiffGen at ε = 1, h = 10 on Adult (see the results file)
COLUMNS = list(ADULT_TAXONOMY)


def split() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The paper's split: train and test without missing values."""
    keep = [*COLUMNS, ADULT_TARGET]
    return (load_adult("train").select(keep).drop_nulls(),
            load_adult("test").select(keep).drop_nulls())


def codes(df: pl.DataFrame, taxes: dict = ADULT_TAXONOMY) -> np.ndarray:
    """Each attribute's code (leaf position or grid cell), shape (rows, attributes)."""
    return np.stack([tax.codes(df[c]) for c, tax in taxes.items()], axis=1)


def labels(df: pl.DataFrame, target: str = ADULT_TARGET,
           classes: tuple[str, ...] = ADULT_CLASSES) -> np.ndarray:
    """The class as 0/1 (the second declared class is 1)."""
    return (df[target] == classes[1]).to_numpy().astype(int)


def tree(weighted: bool = False):
    """The classifier: leaves of at least 20 records (in weight when a training row is a
    leaf of the table standing for its count's records)."""
    from sklearn.tree import DecisionTreeClassifier

    if weighted:
        return DecisionTreeClassifier(criterion="entropy", min_weight_fraction_leaf=0.0)
    return DecisionTreeClassifier(criterion="entropy", min_samples_leaf=20)


def accuracy(X: np.ndarray, y: np.ndarray, Xte: np.ndarray, yte: np.ndarray,
             weight: np.ndarray | None = None) -> float:
    if len(set(y.tolist())) < 2:  # one class released: the tree predicts it
        return float(np.mean(yte == (y[0] if y.size else 0)))
    model = tree(weight is not None)
    if weight is not None:
        model.set_params(min_weight_fraction_leaf=min(0.5, 20 / float(weight.sum())))
    return float(np.mean(model.fit(X, y, sample_weight=weight).predict(Xte) == yte))


def raw_features(df: pl.DataFrame, taxes: dict = ADULT_TAXONOMY) -> np.ndarray:
    """Raw values: numbers as they are, categories as their leaf's position."""
    cols = [tax.codes(df[c]) if isinstance(tax, Categorical) else df[c].to_numpy()
            for c, tax in taxes.items()]
    return np.stack(cols, axis=1).astype(float)


def on_table(out, test: pl.DataFrame) -> float:
    """The paper's protocol: train on the generalised table weighted by the noisy counts."""
    plan = out.plan
    weight = np.maximum(out.table["count"].to_numpy(), 0).astype(float)
    X, Xte = [], []
    test_codes = codes(test, plan.taxonomies)
    for i, c in enumerate(plan.taxonomies):
        spans = out.spans[c]
        starts = np.unique(spans[:, 0])
        X.append(np.searchsorted(starts, spans[:, 0]))
        Xte.append(np.searchsorted(starts, test_codes[:, i], side="right") - 1)
    y = labels(out.table, plan.target, plan.classes)
    keep = weight > 0
    return accuracy(np.stack(X, 1)[keep], y[keep], np.stack(Xte, 1),
                    labels(test, plan.target, plan.classes), weight[keep])


def on_sample(synthetic: pl.DataFrame, test: pl.DataFrame, taxes: dict = ADULT_TAXONOMY,
              target: str = ADULT_TARGET, classes: tuple[str, ...] = ADULT_CLASSES) -> float:
    return accuracy(raw_features(synthetic, taxes), labels(synthetic, target, classes),
                    raw_features(test, taxes), labels(test, target, classes))


def identity_sample(train: pl.DataFrame, eps: float, n: int, taxes: dict = ADULT_TAXONOMY,
                    target: str = ADULT_TARGET, classes: tuple[str, ...] = ADULT_CLASSES
                    ) -> pl.DataFrame:
    """n records drawn from the Identity release (per-cell discrete Laplace at ε on the full
    table of the attributes × class), without materialising it (module docstring)."""
    keys = np.column_stack([codes(train, taxes), labels(train, target, classes)])
    cells, counts = np.unique(keys, axis=0, return_counts=True)
    noisy = np.maximum(frontend.noisy(counts.astype(np.int64), 1, eps).value, 0)
    sizes = [tax.size for tax in taxes.values()] + [2]
    total_cells = math.prod(sizes)
    a = math.exp(-eps)
    empty_mass = (total_cells - len(cells)) * a / ((1 - a) * (1 + a))
    real_share = float(noisy.sum()) / (float(noisy.sum()) + empty_mass)
    from_real = int(np.sum(rng.uniforms(n) < real_share))
    cum = np.cumsum(noisy)
    picks = np.searchsorted(cum, rng.uniform_below(int(cum[-1]), from_real), side="right") \
        if from_real and cum[-1] > 0 else np.zeros(0, dtype=np.int64)
    uniform = np.stack([rng.uniform_below(s, n - from_real) for s in sizes], axis=1) \
        if n > from_real else np.zeros((0, len(sizes)), dtype=np.int64)
    drawn = np.vstack([cells[picks], uniform]).astype(np.int64)
    out = {c: tax.values(drawn[:, i]) for i, (c, tax) in enumerate(taxes.items())}
    out[target] = pl.Series(np.asarray(classes, dtype=object)[drawn[:, -1]].tolist(),
                            dtype=pl.String)
    return pl.DataFrame(out)


def run(trials: int) -> tuple[list[dict], float, float, float]:
    train, test = split()
    yte = labels(test)
    majority = float(np.mean(yte == 0))
    nonprivate = accuracy(raw_features(train), labels(train), raw_features(test), yte)
    rows = []
    for h in STEPS:
        for eps in EPSILONS:
            got: dict[str, list[float]] = {}
            for _ in range(trials):
                for variant in ("diffgen", "weighted"):  # the default score, Max
                    out = diffgen(train, ADULT_TAXONOMY, ADULT_TARGET, ADULT_CLASSES,
                                  epsilon=eps, steps=h, variant=variant)
                    got.setdefault(f"{variant} table", []).append(on_table(out, test))
                    got.setdefault(f"{variant} sampled", []).append(
                        on_sample(out.sample(train.height), test))
                out = diffgen(train, ADULT_TAXONOMY, ADULT_TARGET, ADULT_CLASSES,
                              epsilon=eps, steps=h, score="infogain")
                got.setdefault("infogain table", []).append(on_table(out, test))
                got.setdefault("identity", []).append(
                    on_sample(identity_sample(train, eps, train.height), test))
            rows.append({"h": h, "epsilon": eps,
                         **{k: float(np.median(v)) for k, v in got.items()}})
            print(rows[-1], file=sys.stderr, flush=True)
    return rows, nonprivate, majority, float(train.height)


def write(out: Path, rows: list[dict], nonprivate: float, majority: float, n: float,
          trials: int, seconds: float, cmd: str) -> None:
    keys = ["diffgen table", "diffgen sampled", "weighted table", "weighted sampled",
            "infogain table", "identity"]
    lines = ["# DiffGen on UCI Adult (issue 36, item 1)", "",
             f"Command: `{cmd}` ({seconds:.0f} s; median of {trials} releases per cell).", "",
             "Released: adult.data without missing values "
             f"({int(n):,} rows); held out: adult.test without missing values (classified "
             "only). Classification accuracy of a decision tree (entropy, "
             "min_samples_leaf=20) on the held-out rows; higher is better. "
             "See the docstring of bench/diffgen.py for each row's protocol.", "",
             f"Non-private tree on the real training rows: **{nonprivate:.3f}**; "
             f"majority class: {majority:.3f}.", "",
             "| h | ε | DiffGen, Max (table) | DiffGen, Max (sampled) | weighted, Max (table) "
             "| weighted, Max (sampled) | DiffGen, InfoGain (table) | Identity (sampled) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['h']} | {r['epsilon']} | " +
                     " | ".join(f"{r[k]:.3f}" for k in keys) + " |")
    at = next(r for r in rows if r["h"] == 10 and r["epsilon"] == 1.0)
    gap = 100 * (PAPER - at["diffgen table"])
    lines += ["", "## Against the paper", "",
              f"DiffGen at ε = 1, h = 10 (the paper's protocol, 'table'): "
              f"**{at['diffgen table']:.3f}**; the paper's figure is taken as "
              f"{PAPER:.2f} (about 82%, the value the issue quotes for DiffGen at ε = 1; "
              "the paper's text was not available here to read the exact point off its "
              f"figure): {abs(gap):.1f} percentage points "
              f"{'below' if gap > 0 else 'above'} it — the goal is within 5."]
    out.mkdir(parents=True, exist_ok=True)
    (out / "diffgen.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    add_flag(ap)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows, nonprivate, majority, n = run(args.trials)
    cmd = "python bench/diffgen.py" + (f" --trials {args.trials}" if args.trials != 3 else "") \
        + (" --update-results" if args.update_results else "")
    write(results_dir(args.update_results), rows, nonprivate, majority, n, args.trials,
          time.perf_counter() - t0, cmd)


if __name__ == "__main__":
    main()
