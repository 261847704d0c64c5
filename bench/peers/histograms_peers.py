"""Peers for DPBench histogram release: OpenDP and diffprivlib's per-cell noise ("Identity").

In /work/peers-venv: python bench/peers/histograms_peers.py --data-dir DIR --scales 1000,100000
--epsilons 1 --trials 1 --seed 0 --out p.json [--dims 1,2] [--systems a,b] [--budget-seconds 480]
Inputs replicate dpkit's bench.evaluate (Generator(seed) per dims: resample, then workloads). Each
system releases the counts ε-DP (L1 sensitivity 1); rows are scored as dpkit does (scaled L2, RMSE).
opendp: dp.m.make_laplace(vector_domain(atom_domain(T="i64")), l1_distance, scale=1/ε), exact
discrete Laplace per cell. diffprivlib: mechanisms.Geometric(ε, sensitivity=1).randomise per cell.
diffprivlib-hist: tools.histogram/histogramdd on np.repeat records (clamps noisy counts at 0).
JSON rows {system, dataset, dims, scale, epsilon, workload, trial, scaled_error, rmse, seconds}.
Budget: blocks (trial × dims × peer) that would overrun --budget-seconds are skipped and logged.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import warnings
from importlib.metadata import version
from pathlib import Path

import numpy as np

RANGE_QUERIES = 2000  # DPBench's random range workloads have 2,000 queries
SYSTEMS = ("opendp", "diffprivlib", "diffprivlib-hist")


# --- inputs: copied from dpkit.release.ranges.dpbench / dpkit.release.workload (not imported)

def load_datasets(data_dir: Path, dims: int, names: list[str] | None) -> dict[str, np.ndarray]:
    out = {}
    for path in sorted((Path(data_dir) / f"{dims}D").glob("*.npy")):
        if names and path.stem not in names:
            continue
        out[path.stem] = np.rint(np.load(path)).astype(np.int64)
    if not out:
        raise SystemExit(f"no {dims}-D datasets selected in {data_dir}")
    return out


def resample(shape: np.ndarray, scale: int, generator: np.random.Generator) -> np.ndarray:
    p = shape.astype(np.float64).ravel()
    p /= p.sum()
    return generator.multinomial(int(scale), p).reshape(shape.shape).astype(np.int64)


def workloads(shape: tuple[int, ...], generator: np.random.Generator
              ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, lo, hi) with lo, hi of shape (q, d), hi exclusive, as dpkit draws them."""
    if len(shape) == 1:
        n = shape[0]
        prefix = ("Prefix1D", np.zeros((n, 1), np.int64), np.arange(1, n + 1).reshape(-1, 1))
        ends = np.sort(generator.integers(0, n, size=(RANGE_QUERIES, 2)), axis=1)
        return [prefix, ("Range1D", ends[:, :1].astype(np.int64), ends[:, 1:] + 1)]
    lo = np.empty((RANGE_QUERIES, len(shape)), dtype=np.int64)
    hi = np.empty_like(lo)
    for j, n in enumerate(shape):
        ends = np.sort(generator.integers(0, n, size=(RANGE_QUERIES, 2)), axis=1)
        lo[:, j], hi[:, j] = ends[:, 0], ends[:, 1] + 1
    return [("Range2D", lo, hi)]


def answer(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """W·x by a summed-area table and inclusion–exclusion (float64)."""
    table = np.asarray(x, dtype=np.float64)
    for axis in range(table.ndim):
        table = np.cumsum(table, axis=axis)
        table = np.concatenate([np.zeros_like(table.take([0], axis=axis)), table], axis=axis)
    total = np.zeros(lo.shape[0])
    for corner in itertools.product((0, 1), repeat=table.ndim):
        index = tuple(np.where(c, hi[:, j], lo[:, j]) for j, c in enumerate(corner))
        total += (-1 if (table.ndim - sum(corner)) % 2 else 1) * table[index]
    return total


def errors(x: np.ndarray, est: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float]:
    """(DPBench scaled error ‖Wx − Wx̂‖₂/|W|/‖x‖₁, RMSE per query)."""
    diff = answer(x, lo, hi) - answer(est, lo, hi)
    scale = float(np.abs(x).sum())
    return float(np.linalg.norm(diff) / len(diff) / scale), float(np.sqrt(np.mean(diff * diff)))


# --- the peers -----------------------------------------------------------------------------

def release_opendp(x: np.ndarray, eps: float) -> np.ndarray:
    import opendp.prelude as dp
    dp.enable_features("contrib")  # make_laplace is a "contrib" constructor in 0.16
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
    meas = dp.m.make_laplace(*space, scale=1.0 / eps)  # integer domain → discrete Laplace
    assert meas.check(1, eps), "OpenDP does not certify ε at L1 sensitivity 1"
    return np.asarray(meas(x.ravel()), dtype=np.float64).reshape(x.shape)


def release_diffprivlib(x: np.ndarray, eps: float) -> np.ndarray:
    from diffprivlib.mechanisms import Geometric
    mech = Geometric(epsilon=eps, sensitivity=1)
    return np.fromiter((mech.randomise(v) for v in x.ravel().tolist()), dtype=np.float64,
                       count=x.size).reshape(x.shape)


def records(x: np.ndarray) -> np.ndarray:
    """One row per record: the cell index (1-D) or (row, column) coordinates (2-D)."""
    cells = np.repeat(np.arange(x.size), x.ravel())
    return cells if x.ndim == 1 else np.column_stack(np.unravel_index(cells, x.shape))


def release_diffprivlib_hist(x: np.ndarray, eps: float, sample: np.ndarray) -> np.ndarray:
    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.tools import histogram, histogramdd
    acc = BudgetAccountant()
    if x.ndim == 1:
        hist, _ = histogram(sample, epsilon=eps, bins=x.size, range=(0, x.size), accountant=acc)
    else:
        hist, _ = histogramdd(sample, epsilon=eps, bins=x.shape,
                              range=[(0, n) for n in x.shape], accountant=acc)
    return np.asarray(hist, dtype=np.float64)


def run_system(system: str, x: np.ndarray, eps: float) -> tuple[np.ndarray, float]:
    sample = records(x) if system == "diffprivlib-hist" else None
    t0 = time.perf_counter()
    if system == "opendp":
        est = release_opendp(x, eps)
    elif system == "diffprivlib":
        est = release_diffprivlib(x, eps)
    else:
        est = release_diffprivlib_hist(x, eps, sample)
    return est, time.perf_counter() - t0


# --- driver --------------------------------------------------------------------------------

def probe(system: str, x: np.ndarray) -> float:
    """Seconds for one throwaway release (ε = 1) of ``x``: the cost estimate of a block."""
    return run_system(system, x, 1.0)[1]


def main() -> None:
    t_start = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path("/work/shared/data/dpbench"))
    ap.add_argument("--scales", default="1000,100000,10000000")
    ap.add_argument("--epsilons", default="0.01,0.1,1")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dims", default="1,2")
    ap.add_argument("--datasets", default="", help="comma-separated stems (default: all)")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--budget-seconds", type=float, default=480.0,
                    help="skip blocks (trial × dims × system) that would not fit (0: no limit)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    scales = [int(float(s)) for s in args.scales.split(",")]
    epsilons = [float(e) for e in args.epsilons.split(",")]
    systems = [s for s in args.systems.split(",") if s]
    if unknown := set(systems) - set(SYSTEMS):
        raise SystemExit(f"unknown systems {sorted(unknown)}; choose from {SYSTEMS}")
    names = [n for n in args.datasets.split(",") if n] or None
    data = {int(d): load_datasets(args.data_dir, int(d), names) for d in args.dims.split(",")}
    warnings.simplefilter("ignore", RuntimeWarning)  # diffprivlib's "secure RNG" notices
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731
    log(f"opendp {version('opendp')}, diffprivlib {version('diffprivlib')}, "
        f"numpy {np.__version__}")

    # Every input first, in dpkit's order: a fresh Generator(seed) per dims (as
    # bench/histograms.py calls evaluate once per dims), then datasets × scales × ε × trials,
    # each drawing the resample and then its workloads.
    inputs: dict[tuple[int, int], list[tuple]] = {}
    for dims, sets in data.items():
        generator = np.random.default_rng(args.seed)
        for name, scale, eps, trial in itertools.product(sets, scales, epsilons,
                                                         range(args.trials)):
            x = resample(sets[name], scale, generator)
            inputs.setdefault((dims, trial), []).append(
                (name, scale, eps, x, workloads(x.shape, generator)))

    # Blocks by priority: trial 0 of the exact peers, trial 0 of diffprivlib-hist, then later
    # trials. A block runs only if its estimate (that system's measured block time on this
    # dims, else a probe × block size) fits in what is left of the budget.
    core = [s for s in systems if s != "diffprivlib-hist"]
    extra = [s for s in systems if s == "diffprivlib-hist"]
    order = [(t, d, s) for t in range(args.trials) for group in (core, extra)
             for d in data for s in group]
    measured: dict[tuple[int, str], float] = {}
    rows, skipped = [], []
    for trial, dims, system in order:
        block = inputs[dims, trial]
        left = args.budget_seconds - (time.perf_counter() - t_start)
        if args.budget_seconds and (trial > 0 or system in extra):
            if (dims, system) not in measured:
                largest = max(block, key=lambda b: b[1])[3]
                measured[dims, system] = probe(system, largest) * len(block) * 1.1
                left = args.budget_seconds - (time.perf_counter() - t_start)
            if measured[dims, system] > left:
                skipped.append(f"{dims}-D {system} trial {trial} "
                               f"(~{measured[dims, system]:.0f} s, {max(left, 0):.0f} s left)")
                continue
        t0 = time.perf_counter()
        for name, scale, eps, x, loads in block:
            est, seconds = run_system(system, x, eps)
            for wname, lo, hi in loads:
                err, rmse = errors(x, est, lo, hi)
                rows.append({"system": system, "dataset": name, "dims": dims, "scale": scale,
                             "epsilon": eps, "workload": wname, "trial": trial,
                             "scaled_error": err, "rmse": rmse, "seconds": seconds})
        measured[dims, system] = time.perf_counter() - t0
        log(f"{dims}-D {system} trial {trial}: {len(block)} releases in "
            f"{measured[dims, system]:.0f} s (total {time.perf_counter() - t_start:.0f} s)")
    for line in skipped:
        log(f"skipped for --budget-seconds {args.budget_seconds:g}: {line}")

    rows.sort(key=lambda r: (r["dims"], r["dataset"], r["scale"], r["epsilon"], r["trial"],
                             r["system"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["workload"], r["epsilon"], r["scale"], r["system"]), []).append(r)
    log("workload  eps  scale  system  mean_scaled_error  mean_seconds  runs")
    for (w, e, sc, m), rs in sorted(groups.items()):
        log(f"{w} {e:g} {sc} {m} {np.mean([r['scaled_error'] for r in rs]):.4g} "
            f"{np.mean([r['seconds'] for r in rs]):.3f} {len(rs)}")
    log(f"wrote {len(rows)} rows to {args.out} in {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
