"""RAPPOR, Apple's count-mean sketches and PEM heavy hitters (dpkit.local, issue 21 part A):
speed at 10^6 users, MSNBC's page categories and MSNBC sessions as strings.

    python bench/local_hh.py [--quick] [--no-speed] [--peers-python /path/to/venv/bin/python]

0. Accuracy: measured MSE over trials vs the closed form (CMS, HCMS) or the reported SE²
   (RAPPOR) at ε ∈ {0.5, 1, 2, 4}.
1. Speed: 10^6 users over k = 1024 values (Zipf 1.1), ε = 1 — randomise and estimate with
   RAPPOR (m = 128, h = 2, 64 cohorts, f = 1/2, p = 1/2, q = 3/4; OLS against the 1024
   candidates), CMS and HCMS (k = 256 × m = 1024), and OLH, BLH, SUE, OUE for comparison
   (wall and CPU seconds; the machine is shared, so CPU seconds are the stable figure).
2. MSNBC (989,818 users, 17 categories, each user's first page category) at ε = 1 and 4:
   one-time RAPPOR (ε∞ = ε1 = ε), CMS and HCMS against the 17 candidates: max and L1
   frequency error, top-5 recall, 95% CI coverage.
3. MSNBC sessions as strings (each category a letter a…q, the session's first L = 4 pages;
   shorter sessions end with ⊥): PEM top-10 at ε = 1 and 4, recall against the true top-10
   and the mean absolute frequency error of the identified strings.
4. With --peers-python: pure-ldp's CMS, HCMS and one-time RAPPOR on the first 20,000 MSNBC
   users next to dpkit's (same parameters).
Writes bench/results/local_hh.md and bench/results/local_hh.png.
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import numpy as np

import dpkit.local as ldp

HERE = Path(__file__).resolve().parent
MSNBC = Path("/work/shared/data_new/msnbc/msnbc990928.seq.gz")
NAMES = ["frontpage", "news", "tech", "local", "opinion", "on-air", "misc", "weather",
         "msn-news", "health", "living", "business", "msn-sports", "sports", "summary", "bbs",
         "travel"]
LETTERS = "abcdefghijklmnopq"
BLOCK = 100_000


def zipf(k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    w = 1.0 / np.arange(1, k + 1) ** 1.1
    counts = np.floor(w / w.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    return np.repeat(np.arange(k), counts), counts / n


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def speed(n: int) -> list[dict]:
    k = 1024
    values, truth = zipf(k, n)
    cands = np.arange(k)
    rows = []

    def run_rappor():
        r = ldp.RAPPOR()
        return r.estimate(r.randomize(values), cands)["estimate"].to_numpy()

    def run_sketch(cls):
        def go():
            s = cls(1, 256, 1024)
            total, m = None, 0
            for b in range(0, n, BLOCK):
                part, cnt = s.sketch(s.randomize(values[b: b + BLOCK]))
                total = part if total is None else total + part
                m += cnt
            return s.estimate_from_sketch(total, m, cands)["estimate"].to_numpy()
        return go

    def run_oracle(name):
        def go():
            o = ldp.ORACLES[name](k, 1)
            sup = np.zeros(k, dtype=np.int64)
            for b in range(0, n, BLOCK):
                sup += o.support(o.randomize(values[b: b + BLOCK]))
            return o.estimate_from_support(sup, n)["estimate"].to_numpy()
        return go

    jobs = {"rappor": run_rappor, "cms": run_sketch(ldp.CountMeanSketch),
            "hcms": run_sketch(ldp.HadamardCountMeanSketch)}
    jobs.update({name: run_oracle(name) for name in ("olh", "blh", "sue", "oue")})
    for name, fn in jobs.items():
        est, wall, cpu = timed(fn)
        rows.append({"oracle": name, "n": n, "k": k, "wall": wall, "cpu": cpu,
                     "rmse": float(np.sqrt(np.mean((est - truth) ** 2)))})
        print(rows[-1], flush=True)
    return rows


def accuracy(quick: bool) -> list[dict]:
    """MSE over trials against the closed form: CMS and HCMS (k = 64 × m = 256, fresh hash
    functions every trial, n = 10^4 over a Zipf population of 16 values) and RAPPOR
    (m = 64, h = 2, 8 cohorts, against the mean of its reported SE²)."""
    n, trials, rows = 10_000, (10 if quick else 60), []
    values, truth = zipf(16, n)
    counts = truth * n
    others = (counts ** 2).sum() - counts ** 2
    cands = np.arange(16)
    for eps in (0.5, 1, 2, 4):
        protos = {"cms": lambda e=eps: ldp.CountMeanSketch(e, 64, 256),
                  "hcms": lambda e=eps: ldp.HadamardCountMeanSketch(e, 64, 256),
                  "rappor": lambda e=eps: ldp.RAPPOR.one_time(e, 64, 2, 8)}
        for name, make in protos.items():
            est, rep_var = [], []
            for _ in range(trials):
                proto = make()
                frame = proto.estimate(proto.randomize(values), cands)
                est.append(frame["estimate"].to_numpy())
                rep_var.append(frame["std_error"].to_numpy() ** 2)
            mse = float(np.mean((np.array(est) - truth) ** 2))
            if name == "rappor":
                closed = float(np.mean(rep_var))
            else:
                closed = float(np.mean(make().variance(n, counts, others))) / n ** 2
            rows.append({"protocol": name, "eps": eps, "n": n, "trials": trials, "mse": mse,
                         "closed": closed, "ratio": mse / closed})
            print(rows[-1], flush=True)
    return rows


def msnbc_sessions() -> list[list[int]]:
    out = []
    with gzip.open(MSNBC, "rt") as fh:
        for line in fh:
            parts = line.split()
            if parts and parts[0].isdigit():
                out.append([int(p) - 1 for p in parts])
    return out


def categories(sessions: list[list[int]], quick: bool) -> tuple[list[dict], dict]:
    values = np.array([s[0] for s in sessions], dtype=np.int64)
    if quick:
        values = values[:200_000]
    truth = np.bincount(values, minlength=17) / values.size
    top5 = set(np.argsort(-truth)[:5].tolist())
    cands = list(range(17))
    rows, shown = [], {}
    for eps in (1, 4):
        protocols = {"rappor (one-time)": ldp.RAPPOR.one_time(eps, 128, 2, 16),
                     "cms": ldp.CountMeanSketch(eps, 256, 1024),
                     "hcms": ldp.HadamardCountMeanSketch(eps, 256, 1024)}
        for name, proto in protocols.items():
            t0 = time.perf_counter()
            frame = proto.estimate(proto.randomize(values), cands)
            est = frame["estimate"].to_numpy()
            cover = np.mean((frame["ci_low"].to_numpy() <= truth)
                            & (truth <= frame["ci_high"].to_numpy()))
            rows.append({"protocol": name, "eps": eps, "n": values.size,
                         "linf": float(np.abs(est - truth).max()),
                         "l1": float(np.abs(est - truth).sum()),
                         "top5_recall": len(top5 & set(np.argsort(-est)[:5].tolist())) / 5,
                         "ci95_cover": float(cover), "seconds": time.perf_counter() - t0})
            print(rows[-1], flush=True)
            shown[(name, eps)] = est
    shown["truth"] = truth
    return rows, shown


def prefixes(sessions: list[list[int]], length: int) -> np.ndarray:
    return np.array(["".join(LETTERS[c] for c in s[:length]) for s in sessions], dtype=object)


def heavy_hitters(sessions: list[list[int]], quick: bool, length: int = 4, top: int = 10
                  ) -> tuple[list[dict], dict]:
    values = prefixes(sessions, length)
    if quick:
        values = values[:200_000]
    uniq, counts = np.unique(values, return_counts=True)
    freq = dict(zip(uniq.tolist(), (counts / values.size).tolist(), strict=True))
    true_top = [str(u) for u in uniq[np.argsort(-counts, kind="stable")[:top]]]
    order = np.argsort(-counts, kind="stable")
    boundary = [(str(uniq[i]), float(counts[i] / values.size)) for i in order[top - 2: top + 2]]
    rows, shown = [], {"true_top": true_top, "freq": freq, "boundary": boundary}
    for eps in (1, 4):
        for keep in (top, 3 * top):
            pem = ldp.PEM(eps, LETTERS, length, top_k=top, keep=keep)
            t0 = time.perf_counter()
            frame = pem.estimate(pem.randomize(values))
            found = frame["value"].to_list()
            est = frame["estimate"].to_numpy()
            err = np.abs(est - np.array([freq.get(v, 0.0) for v in found]))
            rows.append({"eps": eps, "keep": keep, "n": values.size, "L": length, "k": top,
                         "recall": len(set(found) & set(true_top)) / top,
                         "mae": float(err.mean()), "max_err": float(err.max()),
                         "seconds": time.perf_counter() - t0})
            print(rows[-1], flush=True)
            shown[(eps, keep)] = (found, est)
    return rows, shown


PEER_SCRIPT = r"""
import json, math, sys, time
import numpy as np
from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
from pure_ldp.frequency_oracles.rappor import RAPPORClient, RAPPORServer

cfg = json.load(sys.stdin)
data = [v + 1 for v in cfg["values"]]  # pure-ldp's default index mapper: items 1 … d
d, n, out = 17, len(cfg["values"]), []
truth = np.bincount(cfg["values"], minlength=d) / n
for eps in cfg["eps"]:
    for name in ("cms", "hcms", "rappor (one-time)"):
        errs, secs = [], []
        for _ in range(cfg["reps"]):
            t0 = time.perf_counter()
            if name == "rappor (one-time)":
                h = 2
                f = 2 / (1 + math.exp(eps / (2 * h)))
                server = RAPPORServer(f, 128, h, d, num_of_cohorts=16)
                client = RAPPORClient(f, 128, server.get_hash_funcs(), 16)
            else:
                server = CMSServer(eps, 256, 1024, is_hadamard=name == "hcms")
                client = CMSClient(eps, server.get_hash_funcs(), 1024,
                                   is_hadamard=name == "hcms")
            for v in data:
                server.aggregate(client.privatise(v))
            est = np.array([server.estimate(v, suppress_warnings=True)
                            for v in range(1, d + 1)], dtype=float)
            secs.append(time.perf_counter() - t0)
            if abs(est.sum()) > 2:  # counts, not frequencies
                est = est / n
            errs.append(float(np.abs(est - truth).sum()))
        out.append({"library": "pure-ldp", "protocol": name, "eps": eps, "n": n,
                    "l1": float(np.mean(errs)), "seconds": float(np.median(secs))})
print(json.dumps(out))
"""


def peers(python: str, sessions: list[list[int]], n: int = 20_000, reps: int = 3
          ) -> list[dict]:
    """pure-ldp's CMS, HCMS and one-time RAPPOR vs dpkit's on MSNBC's first n users, same
    parameters (k = 256 × m = 1024; m = 128, h = 2, 16 cohorts), mean L1 error over reps
    runs and median seconds (client + server)."""
    import json
    import subprocess

    values = [s[0] for s in sessions[:n]]
    cfg = json.dumps({"values": values, "eps": [1, 4], "reps": reps})
    done = subprocess.run([python, "-c", PEER_SCRIPT], input=cfg, capture_output=True,
                          text=True, check=True, timeout=3000)
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    arr = np.array(values)
    truth = np.bincount(arr, minlength=17) / n
    for eps in (1, 4):
        makers = {"cms": lambda e=eps: ldp.CountMeanSketch(e, 256, 1024),
                  "hcms": lambda e=eps: ldp.HadamardCountMeanSketch(e, 256, 1024),
                  "rappor (one-time)": lambda e=eps: ldp.RAPPOR.one_time(e, 128, 2, 16)}
        for name, make in makers.items():
            errs, secs = [], []
            for _ in range(reps):
                t0 = time.perf_counter()
                proto = make()
                est = proto.estimate(proto.randomize(arr), list(range(17)))
                secs.append(time.perf_counter() - t0)
                errs.append(float(np.abs(est["estimate"].to_numpy() - truth).sum()))
            rows.append({"library": "dpkit", "protocol": name, "eps": eps, "n": n,
                         "l1": float(np.mean(errs)), "seconds": float(np.median(secs))})
    for r in rows:
        print(r, flush=True)
    return rows


def plot(path: Path, cats: dict, hh: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    truth = cats["truth"]
    x = np.arange(17)
    for ax, eps in zip(axes[:2], (1, 4), strict=True):
        ax.bar(x, truth, color="lightgray", label="true")
        for off, name in zip((-0.25, 0, 0.25), ("rappor (one-time)", "cms", "hcms"),
                             strict=True):
            ax.plot(x + off, cats[(name, eps)], "o", ms=4, label=name)
        ax.set_title(f"MSNBC first category, ε = {eps}", fontsize=9)
        ax.set_xticks(x, NAMES, rotation=70, fontsize=7)
        ax.axhline(0, color="black", lw=0.5)
    axes[0].set_ylabel("frequency")
    axes[0].legend(fontsize=8)
    ax = axes[2]
    true_top = hh["true_top"]
    ax.bar(np.arange(len(true_top)), [hh["freq"][v] for v in true_top], color="lightgray",
           label="true top-10")
    for marker, eps in (("o", 1), ("s", 4)):
        found, est = hh[(eps, 3 * len(true_top))]
        pos = [true_top.index(v) if v in true_top else None for v in found]
        xs = [p for p in pos if p is not None]
        ys = [e for p, e in zip(pos, est, strict=True) if p is not None]
        ax.plot(xs, ys, marker, ms=5, label=f"PEM ε = {eps} ({len(xs)}/10 found)")
    labels = ["→".join(NAMES[LETTERS.index(c)] for c in v) if v else "⊥" for v in true_top]
    ax.set_xticks(np.arange(len(true_top)), labels, rotation=70, fontsize=7)
    ax.set_title("MSNBC session prefixes (first 4 pages): heavy hitters", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def write(path: Path, spd: list[dict], acc: list[dict], cat: list[dict], hh: list[dict],
          boundary: list[tuple[str, float]], peer: list[dict]) -> None:
    lines = ["# RAPPOR, count-mean sketches and PEM heavy hitters (issue 21, part A)", "",
             "Produced by `python bench/local_hh.py`. Shared 2-core machine: CPU seconds are",
             "the stable figure; wall seconds include waiting for other processes.", ""]
    if spd:
        lines += ["## Speed: 10^6 users, k = 1024, ε = 1 (randomise + estimate)", "",
                  "| protocol | wall s | CPU s | RMSE |", "|---|---:|---:|---:|"]
        lines += [f"| {r['oracle']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rmse']:.2e} |"
                  for r in spd]
        lines.append("")
    if acc:
        lines += ["## Accuracy: measured MSE vs closed form (16 values, Zipf 1.1, n = 10^4)", "",
                  "CMS/HCMS: k = 64 × m = 256, fresh hashes per trial, closed form of",
                  "dpkit.local.sketch (noise + collision terms). RAPPOR: one-time, m = 64, h = 2,",
                  "8 cohorts; 'closed' is the mean of its reported SE² (sandwich formula).", "",
                  "| protocol | ε | trials | MSE | closed form | ratio |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['protocol']} | {r['eps']} | {r['trials']} | {r['mse']:.3e} | "
                  f"{r['closed']:.3e} | {r['ratio']:.3f} |" for r in acc]
        lines.append("")
    lines += ["## MSNBC first page category (17 values)", "",
              "| protocol | ε | n | max error | L1 error | top-5 recall | 95% CI cover | s |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['protocol']} | {r['eps']} | {r['n']:,} | {r['linf']:.4f} | {r['l1']:.4f} "
              f"| {r['top5_recall']:.1f} | {r['ci95_cover']:.2f} | {r['seconds']:.1f} |"
              for r in cat]
    if peer:
        lines += ["", "## Side by side with pure-ldp (MSNBC first 20,000 users, 17 categories)",
                  "", "Same parameters (CMS/HCMS k = 256 × m = 1024; one-time RAPPOR m = 128,",
                  "h = 2, 16 cohorts, f = 2/(1 + e^{ε/4})); mean L1 error over 3 runs, median",
                  "seconds for client + server of all users. pure-ldp runs in its own venv.", "",
                  "| protocol | ε | dpkit L1 | pure-ldp L1 | dpkit s | pure-ldp s |",
                  "|---|---:|---:|---:|---:|---:|"]
        index = {(r["library"], r["protocol"], r["eps"]): r for r in peer}
        for eps in (1, 4):
            for name in ("cms", "hcms", "rappor (one-time)"):
                a, b = index[("dpkit", name, eps)], index[("pure-ldp", name, eps)]
                lines.append(f"| {name} | {eps} | {a['l1']:.4f} | {b['l1']:.4f} | "
                             f"{a['seconds']:.2f} | {b['seconds']:.2f} |")
    lines += ["", "## MSNBC sessions as strings: PEM top-10 of the first-4-pages prefixes", "",
              "| ε | keep | n | recall | mean abs freq error | max abs error | s |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['eps']} | {r['keep']} | {r['n']:,} | {r['recall']:.1f} | {r['mae']:.4f} "
              f"| {r['max_err']:.4f} | {r['seconds']:.1f} |" for r in hh]
    if boundary:
        lines += ["", "True frequencies around the top-10 boundary (ranks 9–12; a miss there is",
                  "a swap of near-ties, within about one standard error of PEM at ε = 4): "
                  + ", ".join(f"{v or '⊥'}: {f:.4f}" for v, f in boundary) + "."]
    lines += ["", "Letters a…q are MSNBC's 17 categories in file order (a = frontpage, "
              "f = on-air, h = weather, …); a string shorter than 4 is a session that ended.",
              "", "![estimates](local_hh.png)", ""]
    path.write_text("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--peers-python", help="python of a venv with pure-ldp installed")
    args = ap.parse_args()
    spd = [] if args.no_speed else speed(100_000 if args.quick else 1_000_000)
    acc = accuracy(args.quick)
    sessions = msnbc_sessions()
    cat, cats = categories(sessions, args.quick)
    hh, hits = heavy_hitters(sessions, args.quick)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    plot(out / "local_hh.png", cats, hits)
    peer = peers(args.peers_python, sessions) if args.peers_python else []
    write(out / "local_hh.md", spd, acc, cat, hh, hits["boundary"], peer)


if __name__ == "__main__":
    main()
