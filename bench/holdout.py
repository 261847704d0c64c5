"""The reusable holdout: Dwork et al. (Science 2015)'s experiment, with dpkit's Thresholdout.

An analyst with a training set, a holdout and (for scoring only) a fresh set, each of n rows
with d features in {−1, +1} and a label in {−1, +1}:

1. computes each feature's correlation with the label on the training set and asks the
   holdout for it (plain: the exact holdout correlation; Thresholdout: its answer);
2. keeps the features whose training and holdout correlations are both ≥ 1/√n in absolute
   value with the same sign, and for each k takes the k of largest training correlation;
3. builds the classifier sign(Σ_j sign(c_j) x_j) on them and reports its accuracy on the
   training set, on the holdout (plain, or through Thresholdout) and on fresh data.

"noise": labels independent of the features (every accuracy is 50% in truth). "signal": 20
features agree with the label with probability 1/2 + 3/√n (correlation 6/√n). The paper's
thresholds (T = 4/√n; noise of about 1/√n) scaled to n; ε is the one that gives the sparse
vector's query noise the scale 1/√n with c over-threshold answers (printed).

    PYTHONPATH=src python bench/holdout.py            # ≈ 1 minute
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from dpkit.apps.holdout import ReusableHoldout  # noqa: E402

RESULTS = Path(__file__).parent / "results"
KS = [10, 20, 40, 60, 80, 100, 150, 200]


def make_sets(gen: np.random.Generator, n: int, d: int, signal: bool) -> list[tuple]:
    """Three sets (train, holdout, fresh) of (x (n, d) in ±1, y (n,) in ±1); benchmark
    input only (NumPy's generator, seeded)."""
    sets = []
    for _ in range(3):
        y = gen.choice(np.array([-1, 1], dtype=np.int8), n)
        x = gen.choice(np.array([-1, 1], dtype=np.int8), (n, d))
        if signal:
            agree = gen.random((n, 20)) < 0.5 + 3 / math.sqrt(n)
            x[:, :20] = np.where(agree, y[:, None], -y[:, None])
        sets.append((x, y))
    return sets


def predict(x: np.ndarray, cols: np.ndarray, signs: np.ndarray) -> np.ndarray:
    score = x[:, cols].astype(np.int32) @ signs.astype(np.int32)
    return np.where(score >= 0, 1, -1)


def run(gen: np.random.Generator, n: int, d: int, signal: bool, thresholdout: bool,
        max_over: int) -> tuple[np.ndarray, dict[str, float]]:
    """Accuracies (len(KS), 3): train, holdout (as the analyst sees it), fresh."""
    (xt, yt), (xh, yh), (xf, yf) = make_sets(gen, n, d, signal)
    corr = lambda s: (s[0].astype(np.float32) * s[1][:, None]).mean(axis=0)  # noqa: E731
    c_train = corr((xt, yt))
    info: dict[str, float] = {}
    if thresholdout:
        delta = 2 / n  # queries in [−1, 1]
        eps = 8 * max_over * delta * math.sqrt(n)  # query noise scale 8cΔ/ε = 1/√n
        # one array per set, the label in the last column
        holdout = ReusableHoldout(np.column_stack([xt, yt]), np.column_stack([xh, yh]),
                                  epsilon=eps, threshold=4 / math.sqrt(n),
                                  max_over=max_over, bounds=(-1, 1))
        # a function of one row (features, label): the holdout is never handed over whole
        answers = holdout.query_rows(lambda r: r[:-1] * r[-1])
        c_hold = np.array([float(a) for a in answers])
        info["epsilon"] = eps
    else:
        c_hold = corr((xh, yh))
    cut = 1 / math.sqrt(n)
    keep = np.flatnonzero((np.abs(c_train) >= cut) & (np.abs(c_hold[: d]) >= cut)
                          & (np.sign(c_train) == np.sign(c_hold[: d])))
    order = keep[np.argsort(-np.abs(c_train[keep]))]
    out = np.full((len(KS), 3), np.nan)
    for i, k in enumerate(KS):
        cols = order[:k]
        if cols.size == 0:
            continue
        signs = np.sign(c_train[cols]).astype(np.int8)
        acc = lambda s: float((predict(s[0], cols, signs) == s[1]).mean())  # noqa: E731,B023
        if thresholdout:
            if holdout.exhausted:
                break
            got = holdout.query_rows(
                lambda r: float(predict(r[None, :-1], cols, signs)[0] == r[-1]))  # noqa: B023
            h_acc = float(got[0]) if got else np.nan
        else:
            h_acc = acc((xh, yh))
        out[i] = [acc((xt, yt)), h_acc, acc((xf, yf))]
    if thresholdout:
        info["over"] = holdout.over_answers
    return out, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--d", type=int, default=4000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--max-over", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2015)
    args = parser.parse_args()
    gen = np.random.default_rng(args.seed)  # benchmark data only
    start = time.perf_counter()
    results: dict[tuple[str, str], np.ndarray] = {}
    notes: dict[tuple[str, str], list[dict[str, float]]] = {}
    for case in ("noise", "signal"):
        for method in ("standard holdout", "Thresholdout"):
            runs = [run(gen, args.n, args.d, case == "signal", method == "Thresholdout",
                        args.max_over) for _ in range(args.trials)]
            results[case, method] = np.nanmean([r[0] for r in runs], axis=0)
            notes[case, method] = [r[1] for r in runs]
    seconds = time.perf_counter() - start

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True, sharey=True)
    for row, method in enumerate(("standard holdout", "Thresholdout")):
        for col, case in enumerate(("noise", "signal")):
            ax = axes[row, col]
            acc = results[case, method]
            for j, (label, style) in enumerate([("training", "-o"), ("holdout", "-s"),
                                                ("fresh", "-^")]):
                ax.plot(KS, acc[:, j], style, label=label, markersize=4)
            ax.axhline(0.5, color="grey", lw=0.5)
            ax.set_title(f"{method}, {case}")
            ax.set_xlabel("number of variables k")
            ax.set_ylabel("accuracy")
            ax.legend(fontsize=8)
    fig.suptitle(f"Reusable holdout (Dwork et al. 2015): n = {args.n}, d = {args.d}, "
                 f"mean of {args.trials} trials")
    fig.tight_layout()
    RESULTS.mkdir(exist_ok=True)
    fig.savefig(RESULTS / "holdout.png", dpi=110)

    lines = ["# The reusable holdout (Dwork et al., Science 2015), reproduced with "
             "dpkit.apps.ReusableHoldout", "",
             f"`PYTHONPATH=src python bench/holdout.py --n {args.n} --d {args.d} "
             f"--trials {args.trials} --max-over {args.max_over} --seed {args.seed}` "
             f"({seconds:.0f} s). Plot: `holdout.png`.", "",
             "Accuracy of the analyst's classifier, mean over trials; the holdout column is "
             "what the analyst sees (exact for the standard holdout, Thresholdout's answer "
             "otherwise).", "",
             "| data | holdout | k | training | holdout (reported) | fresh |",
             "|---|---|---:|---:|---:|---:|"]
    for (case, method), acc in results.items():
        for k, row in zip(KS, acc, strict=True):
            lines.append(f"| {case} | {method} | {k} | {row[0]:.3f} | {row[1]:.3f} | "
                         f"{row[2]:.3f} |")
    lines += [""]
    for (case, method), info in notes.items():
        if method == "Thresholdout":
            over = [int(i["over"]) for i in info]
            lines.append(f"- {case}: ε = {info[0]['epsilon']:.1f} (c = {args.max_over}); "
                         f"over-threshold answers per trial: {over}")
    (RESULTS / "holdout.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
