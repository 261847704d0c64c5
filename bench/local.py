"""Local frequency oracles (dpkit.local, issue 21): accuracy against the closed forms, speed
at 10^6 users, ``auto``'s choice, and a collection campaign on MSNBC's page categories.

    python bench/local.py [--quick] [--peers-python /work/peers-ldp/bin/python]

1. For each oracle, ε ∈ {0.5, 1, 2, 4} and k ∈ {2, 16, 1024}: the measured MSE of the
   unbiased estimator (mean over trials and values of (f̂ − f)²) over a Zipf(1.1)
   population of n = 10^4 users, against the closed form (mean over values of Var[f̂(v)]).
2. ``auto(k, ε)``'s choice and the measured MSE of GRR and OLH side by side.
3. 10^6 users at k = 1024, ε = 1: randomise and estimate (wall and CPU seconds, load).
4. MSNBC (989,818 users, 17 categories: each user's first page category) at ε = 1 and 4:
   errors of every oracle (raw and Norm-Sub), and bench/results/local.png (estimated vs
   true frequencies). Writes bench/results/local.md.
5. With --peers-python: pure-ldp and multi-freq-ldpy on the first 20,000 MSNBC users.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from pathlib import Path

import numpy as np
from outdir import add_flag, results_dir

import dpkit.local as ldp
from dpkit.core import rng

HERE = Path(__file__).resolve().parent
MSNBC = Path("/work/shared/data_new/msnbc/msnbc990928.seq.gz")
EPSILONS = (0.5, 1, 2, 4)
KS = (2, 16, 1024)
TRIALS = {2: 2000, 16: 300, 1024: 12}
N_USERS = 10_000
BLOCK = 100_000  # users per randomise/aggregate block (bounds memory of unary reports)


def zipf_population(k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    weights = 1.0 / np.arange(1, k + 1) ** 1.1
    counts = np.floor(weights / weights.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    return np.repeat(np.arange(k), counts), counts / n


def collect(oracle: ldp.FrequencyOracle, values: np.ndarray) -> np.ndarray:
    """Support counts of all users' reports, randomised and aggregated block by block."""
    support = np.zeros(oracle.k, dtype=np.int64)
    for s in range(0, values.size, BLOCK):
        support += oracle.support(oracle.randomize(values[s: s + BLOCK]))
    return support


def unbiased(oracle: ldp.FrequencyOracle, support: np.ndarray, n: int) -> np.ndarray:
    p, q = float(oracle.p), float(oracle.q)
    return (support / n - q) / (p - q)


def accuracy(quick: bool) -> list[dict]:
    rows = []
    for k in KS:
        truth, freq = zipf_population(k, N_USERS)
        for eps in EPSILONS:
            for name, cls in ldp.ORACLES.items():
                oracle = cls(k, eps)
                reps = max(2, TRIALS[k] // (4 if quick else 1))
                t0 = time.process_time()
                err = [np.mean((unbiased(oracle, collect(oracle, truth), truth.size) - freq) ** 2)
                       for _ in range(reps)]
                closed = float(np.mean(oracle.variance(truth.size, freq)))
                rows.append({"oracle": name, "k": k, "eps": eps, "mse": float(np.mean(err)),
                             "se": float(np.std(err, ddof=1) / np.sqrt(reps)), "closed": closed,
                             "trials": reps, "cpu": time.process_time() - t0})
                print(rows[-1], flush=True)
    return rows


def speed(n: int = 10**6, k: int = 1024) -> list[dict]:
    values = rng.uniform_below(k, n).astype(np.int64)
    rows = []
    for name, cls in ldp.ORACLES.items():
        oracle = cls(k, 1)
        t0, c0 = time.perf_counter(), time.process_time()
        rand_time = agg_time = 0.0
        support = np.zeros(k, dtype=np.int64)
        for s in range(0, n, BLOCK):
            a = time.perf_counter()
            reports = oracle.randomize(values[s: s + BLOCK])
            b = time.perf_counter()
            support += oracle.support(reports)
            rand_time += b - a
            agg_time += time.perf_counter() - b
        oracle.estimate_from_support(support, n)
        rows.append({"oracle": name, "randomise": rand_time, "aggregate": agg_time,
                     "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                     "load": os.getloadavg()[0]})
        print(rows[-1], flush=True)
    return rows


def msnbc_first_categories() -> np.ndarray:
    firsts = []
    with gzip.open(MSNBC, "rt") as fh:
        for line in fh:
            parts = line.split()
            if parts and parts[0].isdigit():
                firsts.append(int(parts[0]) - 1)
    return np.array(firsts, dtype=np.int64)


def msnbc(plot: Path) -> list[dict]:
    values = msnbc_first_categories()
    k = 17
    truth = np.bincount(values, minlength=k) / values.size
    rows, shown = [], {}
    for eps in (1, 4):
        for name, cls in ldp.ORACLES.items():
            oracle = cls(k, eps)
            t0 = time.perf_counter()
            frame = oracle.estimate_from_support(collect(oracle, values), values.size,
                                                 postprocess="norm-sub")
            raw, post = frame["unbiased"].to_numpy(), frame["estimate"].to_numpy()
            cover = np.mean((frame["ci_low"].to_numpy() <= truth)
                            & (truth <= frame["ci_high"].to_numpy()))
            rows.append({"oracle": name, "eps": eps, "n": values.size,
                         "linf": float(np.abs(raw - truth).max()),
                         "l1": float(np.abs(raw - truth).sum()),
                         "l1_normsub": float(np.abs(post - truth).sum()),
                         "mse": float(np.mean((raw - truth) ** 2)),
                         "closed": float(np.mean(oracle.variance(values.size, truth))),
                         "ci95_cover": float(cover), "seconds": time.perf_counter() - t0})
            print(rows[-1], flush=True)
            if name in ("grr", "oue", "olh"):
                shown[(name, eps)] = raw
    auto_names = {eps: ldp.auto(k, eps).name for eps in (1, 4)}
    _plot(plot, truth, shown, auto_names)
    return rows


def _plot(path: Path, truth: np.ndarray, shown: dict, auto_names: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["frontpage", "news", "tech", "local", "opinion", "on-air", "misc", "weather",
             "msn-news", "health", "living", "business", "msn-sports", "sports", "summary",
             "bbs", "travel"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    x = np.arange(truth.size)
    for ax, eps in zip(axes, (1, 4), strict=True):
        ax.bar(x, truth, color="lightgray", label="true")
        for offset, name in zip((-0.25, 0, 0.25), ("grr", "oue", "olh"), strict=True):
            ax.plot(x + offset, shown[(name, eps)], "o", ms=4, label=f"{name} (unbiased)")
        ax.set_title(f"MSNBC first page category, n = 989,818, ε = {eps} "
                     f"(auto: {auto_names[eps]})", fontsize=9)
        ax.set_xticks(x, names, rotation=70, fontsize=7)
        ax.axhline(0, color="black", lw=0.5)
    axes[0].set_ylabel("frequency")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


PEER_SCRIPT = r"""
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
values = np.array(json.loads(sys.stdin.read()))
k, eps, trials = 17, 1.0, 5
truth = np.bincount(values, minlength=k) / values.size
out = []
def run(name, fn):
    errs, secs = [], []
    row = {"lib": name.split(":")[0], "oracle": name.split(":")[1]}
    try:
        for _ in range(trials):
            t0 = time.perf_counter()
            est = np.asarray(fn(), dtype=float)
            secs.append(time.perf_counter() - t0)
            errs.append(float(np.abs(est - truth).sum()))
        row.update(l1=float(np.mean(errs)), seconds=float(np.mean(secs)))
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    out.append(row)
from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer
from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
ident = lambda x: x
def pure(client, server):
    for v in values:
        server.aggregate(client.privatise(int(v)))
    return np.array(server.estimate_all(range(k))) / values.size
run("pure-ldp:grr", lambda: pure(DEClient(eps, k, index_mapper=ident),
                                 DEServer(eps, k, index_mapper=ident)))
run("pure-ldp:oue", lambda: pure(UEClient(eps, k, use_oue=True, index_mapper=ident),
                                 UEServer(eps, k, use_oue=True, index_mapper=ident)))
run("pure-ldp:olh", lambda: pure(LHClient(eps, k, use_olh=True, index_mapper=ident),
                                 LHServer(eps, k, use_olh=True, index_mapper=ident)))
from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Client, GRR_Aggregator_MI
from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Client, UE_Aggregator_MI
from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Client, LH_Aggregator_MI
run("multi-freq-ldpy:grr", lambda: GRR_Aggregator_MI(
    [GRR_Client(int(v), k, eps) for v in values], k, eps))
run("multi-freq-ldpy:oue", lambda: UE_Aggregator_MI(
    [UE_Client(int(v), k, eps, True) for v in values], eps, True))
run("multi-freq-ldpy:olh", lambda: LH_Aggregator_MI(
    [LH_Client(int(v), k, eps, True) for v in values], k, eps, True))
print(json.dumps(out))
"""


def peers(python: str, n: int = 20_000) -> list[dict]:
    """pure-ldp and multi-freq-ldpy (their own venv, a subprocess) against dpkit on the first
    n MSNBC users, k = 17, ε = 1: mean L1 error over 5 runs and seconds per run
    (randomise + estimate). multi-freq-ldpy's MI estimator projects onto the simplex."""
    import json
    import subprocess

    values = msnbc_first_categories()[:n]
    done = subprocess.run([python, "-c", PEER_SCRIPT], input=json.dumps(values.tolist()),
                          capture_output=True, text=True, check=True)
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    truth = np.bincount(values, minlength=17) / n
    for name in ("grr", "oue", "olh"):
        for post in (None, "norm-sub"):
            errs, secs = [], []
            for _ in range(5):
                oracle = ldp.ORACLES[name](17, 1)
                t0 = time.perf_counter()
                frame = oracle.estimate(oracle.randomize(values), postprocess=post)
                secs.append(time.perf_counter() - t0)
                errs.append(float(np.abs(frame["estimate"].to_numpy() - truth).sum()))
            rows.append({"lib": "dpkit" + (" (Norm-Sub)" if post else ""), "oracle": name,
                         "l1": float(np.mean(errs)), "seconds": float(np.mean(secs))})
    for r in rows:
        print(r, flush=True)
    return rows


def write(path: Path, acc: list[dict], spd: list[dict], real: list[dict],
          peer: list[dict]) -> None:
    out = ["# Local frequency oracles (dpkit.local)", "",
           "`python bench/local.py`. Machine: 2 shared cores (load beside each timing).", "",
           "## 1. Measured MSE vs closed form (Zipf(1.1) population, n = 10^4 users)", "",
           "ratio = measured MSE / closed form (mean over values of Var[f̂(v)]); "
           "± = 1 standard error of the ratio from the spread over trials.", "",
           "| oracle | k | ε | trials | measured MSE | closed form | ratio | ±se |",
           "|---|---|---|---|---|---|---|---|"]
    for r in acc:
        out.append(f"| {r['oracle']} | {r['k']} | {r['eps']} | {r['trials']} | {r['mse']:.3e} "
                   f"| {r['closed']:.3e} | {r['mse'] / r['closed']:.3f} "
                   f"| {r['se'] / r['closed']:.3f} |")
    within = sum(abs(r["mse"] / r["closed"] - 1) <= 0.10 for r in acc)
    out += ["", f"Within 10%: {within} of {len(acc)} cells.", "",
            "## 2. auto(k, ε): GRR if k < 3e^ε + 2, else OLH", "",
            "| k | ε | auto | GRR MSE | OLH MSE | lower measured |", "|---|---|---|---|---|---|"]
    by = {(r["oracle"], r["k"], r["eps"]): r["mse"] for r in acc}
    for k in KS:
        for eps in EPSILONS:
            g, o = by[("grr", k, eps)], by[("olh", k, eps)]
            out.append(f"| {k} | {eps} | {ldp.auto(k, eps).name} | {g:.3e} | {o:.3e} | "
                       f"{'grr' if g < o else 'olh'} |")
    out += ["", "## 3. 10^6 users, k = 1024, ε = 1 (blocks of 10^5 users)", "",
            "| oracle | randomise s | aggregate s | wall s | CPU s | load |",
            "|---|---|---|---|---|---|"]
    for r in spd:
        out.append(f"| {r['oracle']} | {r['randomise']:.2f} | {r['aggregate']:.2f} | "
                   f"{r['wall']:.2f} | {r['cpu']:.2f} | {r['load']:.1f} |")
    out += ["", "## 4. MSNBC first page category (k = 17, n = 989,818)", "",
            "![estimated vs true](local.png)", "",
            "| oracle | ε | L∞ | L1 | L1 after Norm-Sub | MSE | closed form | 95% CI cover "
            "| s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in real:
        out.append(f"| {r['oracle']} | {r['eps']} | {r['linf']:.4f} | {r['l1']:.4f} | "
                   f"{r['l1_normsub']:.4f} | {r['mse']:.2e} | {r['closed']:.2e} | "
                   f"{r['ci95_cover']:.2f} | {r['seconds']:.1f} |")
    if peer:
        out += ["", "## 5. Peers: first 20,000 MSNBC users, k = 17, ε = 1 (mean of 5 runs)", "",
                "Same data and ε; seconds = randomise + estimate for the 20,000 users. "
                "pure-ldp 1.2.0 and multi-freq-ldpy 0.2.5 in their own venv "
                "(../shared/PEERS.md); both loop in Python per user, with numpy's "
                "Mersenne Twister (not a CSPRNG).", "",
                "| library | oracle | L1 error | seconds |", "|---|---|---|---|"]
        for r in sorted(peer, key=lambda r: (r["oracle"], r["lib"])):
            if "error" in r:
                out.append(f"| {r['lib']} | {r['oracle']} | fails: {r['error'][:60]} | — |")
            else:
                out.append(f"| {r['lib']} | {r['oracle']} | {r['l1']:.4f} "
                           f"| {r['seconds']:.3f} |")
    path.write_text("\n".join(out) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a quarter of the trials")
    parser.add_argument("--peers-python", help="python of a venv with pure-ldp and "
                        "multi-freq-ldpy (e.g. /work/peers-ldp/bin/python)")
    add_flag(parser)
    args = parser.parse_args()
    results = results_dir(args.update_results)
    peer = peers(args.peers_python) if args.peers_python else []
    acc = accuracy(args.quick)
    spd = speed()
    real = msnbc(results / "local.png")
    write(results / "local.md", acc, spd, real, peer)


if __name__ == "__main__":
    main()
