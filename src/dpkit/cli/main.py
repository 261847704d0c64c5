"""The ``dpkit`` command line."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from dpkit.cli.ledger import ledger_app

app = typer.Typer(help="dpkit — differential privacy, exact by construction.",
                  no_args_is_help=True, add_completion=False)
app.add_typer(ledger_app, name="ledger")
bench_app = typer.Typer(help="Evaluation harnesses.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@bench_app.command("histograms")
def bench_histograms(
    dims: int = typer.Option(1, help="1 (4,096 bins) or 2 (256×256) DPBench datasets."),
    methods: str = typer.Option("", help="Comma-separated algorithms (default: all for dims)."),
    datasets: str = typer.Option("", help="Comma-separated dataset names (default: all)."),
    scales: str = typer.Option("1000,100000,10000000", help="Comma-separated record counts."),
    epsilons: str = typer.Option("0.01,0.1,1", help="Comma-separated ε values."),
    trials: int = typer.Option(3, help="Trials per setting."),
    data_dir: Path = typer.Option(None, help="DPBench data (default: ../shared/data/dpbench)."),
    out: Path = typer.Option(Path("histograms"), help="Prefix of the .csv, .md and .png."),
    seed: int = typer.Option(0, help="Seed of the resampling and workloads (not noise)."),
) -> None:
    """DPBench's protocol (Hay et al. 2016) on the registered histogram algorithms."""
    from dpkit.release.ranges import dpbench as bench

    names = [m for m in methods.split(",") if m] or bench.available(dims)
    data = bench.load_datasets(data_dir or bench.default_data_dir(), dims,
                               [d for d in datasets.split(",") if d] or None)
    runs = bench.evaluate(data, names, [int(float(s)) for s in scales.split(",")],
                          [float(e) for e in epsilons.split(",")], trials, seed)
    bench.write_csv(runs, out.with_suffix(".csv"))
    bench.plot(runs, out.with_suffix(".png"))
    table = Table("workload", "ε", "scale", "method", "scaled error", "÷ identity")
    for row in bench.summary(runs):
        table.add_row(str(row["workload"]), f"{row['epsilon']:g}", f"{row['scale']:,}",
                      str(row["method"]), f"{row['error']:.3g}", f"{row['vs_identity']:.2f}")
    Console().print(table)
    Console().print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.png')}")


def default_ledger_path() -> Path:
    """Where the demo's ledger lives: $DPKIT_HOME, else $XDG_DATA_HOME/dpkit, else
    ~/.local/share/dpkit."""
    home = os.environ.get("DPKIT_HOME")
    if home:
        return Path(home) / "demo-ledger.sqlite"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "dpkit" / "demo-ledger.sqlite"


@app.command()
def demo(
    ledger: Path = typer.Option(None, help="SQLite ledger file (default: see below)."),
    reset_ledger: bool = typer.Option(False, "--reset-ledger",
                                      help="Delete the demo ledger before running."),
    epsilon: float = typer.Option(1.0, help="Total budget ε of this demo run."),
) -> None:
    """Run a complete DP analysis of the UCI Adult data (ε = 1 in total)."""
    from dpkit.cli.demo import run_demo

    path = ledger or default_ledger_path()
    if reset_ledger and path.exists():
        path.unlink()
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    run_demo(path, epsilon, Console())


@app.command()
def audit(
    mechanism: str = typer.Argument("all", help="A registered mechanism, or 'all'."),
    samples: int = typer.Option(100_000, help="Outputs per input per histogram vote."),
    broken: bool = typer.Option(False, help="Audit the deliberately broken variants."),
) -> None:
    """Empirically audit registered mechanisms: histogram test and an ε lower bound (95%)."""
    from dpkit.audit import CASES, run_audit

    names = sorted(CASES) if mechanism == "all" else [mechanism]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise typer.BadParameter(f"unknown mechanism {unknown[0]!r}; known: "
                                 f"{', '.join(sorted(CASES))}")
    table = Table(title="dpkit audit")
    table.add_column("mechanism", no_wrap=True)
    for col in ("claimed ε", "δ", "audited ε lower bound (95%)", "histogram test", "samples",
                "seconds"):
        table.add_column(col, justify="right")
    for name in names:
        r = run_audit(CASES[name], samples, broken=broken)
        table.add_row(r.name, f"{r.claimed_epsilon:.4g}", f"{r.claimed_delta:g}",
                      f"{r.lower_bound:.4g}", "pass" if r.histogram_passed else "FAIL",
                      f"{r.samples:,}", f"{r.seconds:.1f}")
    Console().print(table)


@app.command()
def serve(
    config: Path = typer.Option(..., "--config", help="The server's YAML configuration."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int = typer.Option(None, help="Worker processes (default: the config's)."),
) -> None:
    """Serve DP queries over HTTP (FastAPI + uvicorn; API docs at /docs)."""
    try:
        from dpkit.server.app import serve as run_server
        from dpkit.server.config import ConfigError
    except ImportError as exc:
        raise typer.BadParameter(f"the server needs `pip install dpkit[server]` ({exc})"
                                 ) from None
    try:
        run_server(config, host=host, port=port, workers=workers)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None
