"""DPBench's evaluation protocol for histogram algorithms (Hay, Machanavajjhala, Miklau, Chen
& Zhang, "Principled evaluation of differentially private algorithms using DPBench",
SIGMOD 2016, §4–5), also ``dpkit bench histograms``.

For every dataset (a DPBench shape: 1-D 4,096 bins or 2-D 256×256 counts), data scale s
(10^3 … 10^7 records), ε and trial: draw a histogram of s records from the dataset's
normalised shape (multinomial resampling, DPBench's "scale" knob), release it with each
algorithm, and score the workload (Prefix1D, random 1-D ranges, random 2-D rectangles) by the
scaled per-query L2 error ‖Wx − Wx̂‖₂ / |W| / s. Results go to a CSV (one row per run) and a
PNG (mean error vs scale per algorithm, one panel per workload × ε).

The resampling and the random workloads use a seeded NumPy Generator: they are benchmark
inputs. The releases draw their noise from the CSPRNG as always.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from dpkit.errors import DomainError
from dpkit.release.ranges.histogram import methods, release_histogram
from dpkit.release.workload import RangeWorkload, prefix, random_ranges, random_rectangles

__all__ = ["Run", "default_data_dir", "load_datasets", "resample", "workloads", "evaluate",
           "write_csv", "write_markdown", "plot", "summary"]

RANGE_QUERIES = 2000  # DPBench's random range workloads have 2,000 queries


@dataclass(frozen=True)
class Run:
    """One algorithm run: its setting, scaled error, RMSE and wall time (seconds)."""

    method: str
    dataset: str
    dims: int
    scale: int
    epsilon: float
    workload: str
    trial: int
    scaled_error: float
    rmse: float
    seconds: float


def default_data_dir() -> Path:
    """``$DPKIT_DPBENCH``, else ``shared/data/dpbench`` beside the repository checkout."""
    import os

    env = os.environ.get("DPKIT_DPBENCH")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent.parent / "shared" / "data" / "dpbench"
        if candidate.is_dir():
            return candidate
    return Path("../shared/data/dpbench")


def load_datasets(data_dir: Path, dims: int, names: Sequence[str] | None = None
                  ) -> dict[str, np.ndarray]:
    """The DPBench shapes of ``dims`` dimensions in ``data_dir/{1D,2D}`` as int64 arrays."""
    folder = Path(data_dir) / f"{dims}D"
    if not folder.is_dir():
        raise DomainError(f"no DPBench data at {folder}; pass --data-dir or set DPKIT_DPBENCH")
    out = {}
    for path in sorted(folder.glob("*.npy")):
        if names and path.stem not in names:
            continue
        out[path.stem] = np.rint(np.load(path)).astype(np.int64)
    if not out:
        raise DomainError(f"no datasets selected in {folder}")
    return out


def resample(shape: np.ndarray, scale: int, generator: np.random.Generator) -> np.ndarray:
    """A histogram of ``scale`` records drawn from ``shape``'s normalised counts."""
    p = shape.astype(np.float64).ravel()
    p /= p.sum()
    return generator.multinomial(int(scale), p).reshape(shape.shape).astype(np.int64)


def workloads(shape: tuple[int, ...], generator: np.random.Generator) -> list[RangeWorkload]:
    """DPBench's workloads for a domain: Prefix1D and 2,000 random ranges (1-D), or 2,000
    random rectangles (2-D)."""
    if len(shape) == 1:
        return [prefix(shape[0]), random_ranges(shape[0], RANGE_QUERIES, generator)]
    return [random_rectangles(shape, RANGE_QUERIES, generator)]  # type: ignore[arg-type]


def evaluate(datasets: dict[str, np.ndarray], algorithms: Sequence[str], scales: Iterable[int],
             epsilons: Iterable[float], trials: int, seed: int = 0, progress: bool = True
             ) -> list[Run]:
    """Run every algorithm on every dataset × scale × ε × trial (see module docstring)."""
    from rich.progress import Progress

    generator = np.random.default_rng(seed)  # benchmark inputs only
    settings = [(d, s, e, t) for d in datasets for s in scales for e in epsilons
                for t in range(trials)]
    runs: list[Run] = []
    with Progress(disable=not progress) as bar:
        task = bar.add_task("histograms", total=len(settings) * len(algorithms))
        for name, scale, eps, trial in settings:
            x = resample(datasets[name], scale, generator)
            loads = workloads(x.shape, generator)
            for method in algorithms:
                t0 = time.perf_counter()
                out = release_histogram(x, eps, method, workload=loads[0])
                seconds = time.perf_counter() - t0
                for w in loads:
                    err = out.error(w, x)
                    runs.append(Run(method, name, x.ndim, int(scale), float(eps), w.name.split(
                        "(")[0], trial, err["scaled_error"], err["rmse"], seconds))
                bar.advance(task)
    return runs


def write_csv(runs: Sequence[Run], path: Path) -> None:
    """Write one CSV row per :class:`Run` (its fields as columns) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(Run.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(r) for r in runs)


def _mean_by(runs: Sequence[Run], key: tuple[str, ...]) -> dict[tuple, float]:
    groups: dict[tuple, list[float]] = {}
    for r in runs:
        groups.setdefault(tuple(getattr(r, k) for k in key), []).append(r.scaled_error)
    return {k: float(np.mean(v)) for k, v in groups.items()}


def summary(runs: Sequence[Run]) -> list[dict[str, object]]:
    """Mean scaled error per (workload, ε, scale, method) over datasets and trials, with the
    ratio to Identity's."""
    means = _mean_by(runs, ("workload", "epsilon", "scale", "method"))
    rows = []
    for (w, e, s, m), v in sorted(means.items()):
        base = means.get((w, e, s, "identity"))
        rows.append({"workload": w, "epsilon": e, "scale": s, "method": m, "error": v,
                     "vs_identity": v / base if base else float("nan")})
    return rows


def write_markdown(runs: Sequence[Run], path: Path) -> None:
    """The :func:`summary` table as Markdown (mean scaled error and its ratio to Identity's)."""
    lines = ["| workload | ε | scale | method | scaled error | ÷ identity |",
             "|---|---:|---:|---|---:|---:|"]
    lines += [f"| {r['workload']} | {r['epsilon']:g} | {r['scale']:,} | {r['method']} | "
              f"{r['error']:.3g} | {r['vs_identity']:.2f} |" for r in summary(runs)]
    path.parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(lines) + "\n")


def plot(runs: Sequence[Run], path: Path) -> None:
    """Mean scaled error vs scale (log–log), a line per algorithm, a panel per workload × ε."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = _mean_by(runs, ("workload", "epsilon", "method", "scale"))
    panels = sorted({(w, e) for w, e, _, _ in means})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (w, e) in zip(axes[0], panels, strict=True):
        for m in sorted({k[2] for k in means if k[:2] == (w, e)}):
            pts = sorted((s, v) for (ww, ee, mm, s), v in means.items() if (ww, ee, mm) ==
                         (w, e, m))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
        ax.set(xscale="log", yscale="log", xlabel="scale (records)", title=f"{w}, ε = {e:g}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("scaled L2 error per query")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def available(dims: int) -> list[str]:
    """Registered algorithms for histograms of ``dims`` dimensions."""
    return list(methods(dims))
