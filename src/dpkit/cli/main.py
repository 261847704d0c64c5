"""The ``dpkit`` command line.

Manners: a dpkit error (:class:`dpkit.errors.DPError`) or a missing optional extra prints one
line — what went wrong and the fix — on standard error and exits with code 1; ``dpkit
--debug …`` shows the traceback instead. Every option has help text; ``dpkit --version``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from dpkit.cli.ledger import default_ledger_path, ledger_app
from dpkit.cli.report import report
from dpkit.cli.sql import sql
from dpkit.errors import DomainError, DPError

_DEBUG = {"on": False}


def _plain_flags() -> None:
    """Typer ≥ 0.20's Rich help shows a ``<bool>`` type beside every flag (``--broken /
    --no-broken  <bool>``): a flag takes no value, so show none."""
    option = getattr(getattr(typer, "core", None), "TyperOption", None)
    show = getattr(option, "display_type_rich", None)
    if option is None or show is None or getattr(show, "_dpkit", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        return None if getattr(self, "is_flag", False) else show(self, ctx)

    display_type_rich._dpkit = True  # type: ignore[attr-defined]
    option.display_type_rich = display_type_rich


_plain_flags()


class _Group(typer.core.TyperGroup):
    """The command group: a dpkit error or a missing extra raised by any command prints one
    line on standard error and exits with code 1 (the traceback only with ``--debug``)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (DPError, ImportError) as exc:
            if _DEBUG["on"]:
                raise
            console = Console(stderr=True, soft_wrap=True, highlight=False)
            console.print(f"[red]error[/red] ({type(exc).__name__}): ", end="")
            console.print(str(exc), markup=False)
            console.print("[dim](`dpkit --debug …` shows the traceback)[/dim]")
            ctx.exit(1)


app = typer.Typer(cls=_Group, help="dpkit — differential privacy, exact by construction.",
                  no_args_is_help=True, add_completion=False)
app.add_typer(ledger_app, name="ledger")
app.command("report")(report)
app.command("schema")(__import__("dpkit.cli.schema", fromlist=["schema"]).schema)
app.command("sql")(sql)
bench_app = typer.Typer(help="Evaluation harnesses.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


def _version(value: bool) -> None:
    if value:
        from dpkit import __version__

        typer.echo(f"dpkit {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print dpkit's version and exit."),
    debug: bool = typer.Option(False, "--debug",
                               help="Show the full traceback of an error."),
) -> None:
    """dpkit — differential privacy, exact by construction."""
    _DEBUG["on"] = debug


def positive(value: float, option: str) -> float:
    """``value`` if it is a finite number > 0, else a :class:`DomainError` naming
    ``option`` (checked before anything is written)."""
    if not (math.isfinite(value) and value > 0):
        raise DomainError(f"{option} must be a finite number > 0, got {value:g}")
    return value


@bench_app.command("histograms")
def bench_histograms(
    dims: int = typer.Option(1, help="1 (4,096 bins) or 2 (256×256) DPBench datasets."),
    methods: str = typer.Option("", help="Comma-separated algorithms (default: all for dims)."),
    datasets: str = typer.Option("", help="Comma-separated dataset names (default: all)."),
    scales: str = typer.Option("1000,100000,10000000", help="Comma-separated record counts."),
    epsilons: str = typer.Option("0.01,0.1,1", help="Comma-separated ε values."),
    trials: int = typer.Option(3, help="Trials per setting."),
    data_dir: Path = typer.Option(None, help="DPBench data (default: $DPKIT_DPBENCH, else "
                                             "../shared/data/dpbench)."),
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
    bench.write_markdown(runs, out.with_suffix(".md"))
    written = [out.with_suffix(".csv"), out.with_suffix(".md")]
    try:
        bench.plot(runs, out.with_suffix(".png"))
        written.append(out.with_suffix(".png"))
    except ImportError:
        Console(stderr=True).print("no plot: it needs matplotlib (pip install 'dpkit[plot]')")
    table = Table("workload", "ε", "scale", "method", "scaled error", "÷ identity")
    for row in bench.summary(runs):
        table.add_row(str(row["workload"]), f"{row['epsilon']:g}", f"{row['scale']:,}",
                      str(row["method"]), f"{row['error']:.3g}", f"{row['vs_identity']:.2f}")
    Console().print(table)
    Console().print("wrote " + ", ".join(str(p) for p in written))


@app.command()
def demo(
    ledger: Path = typer.Option(None, help="SQLite ledger file (default: "
                                           "$DPKIT_HOME/demo-ledger.sqlite, else "
                                           "~/.local/share/dpkit/demo-ledger.sqlite)."),
    reset_ledger: bool = typer.Option(False, "--reset-ledger",
                                      help="Delete the demo ledger before running."),
    epsilon: float = typer.Option(1.0, help="Total budget ε of this demo run (> 0)."),
) -> None:
    """Run a complete DP analysis of the UCI Adult data (ε = 1 in total)."""
    from dpkit.cli.demo import run_demo

    positive(epsilon, "--epsilon")  # before anything is deleted or registered
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
    from rich import progress as bar

    from dpkit.audit import CASES, run_audit

    names = sorted(CASES) if mechanism == "all" else [mechanism]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise typer.BadParameter(f"unknown mechanism {unknown[0]!r}; known: "
                                 f"{', '.join(sorted(CASES))}")
    # readable at 80 columns: short headers (the caption spells them out), long mechanism
    # names fold onto a second line instead of squeezing the numbers
    table = Table(title="dpkit audit", caption="ε ≥: the audited lower bound on ε (95% "
                  "confidence); test: the histogram test; s: seconds")
    table.add_column("mechanism", overflow="fold", min_width=12, ratio=1)
    for col in ("claimed ε", "δ", "ε ≥", "test", "samples", "s"):
        table.add_column(col, justify="right", no_wrap=True)
    columns = (bar.TextColumn("auditing {task.description}"), bar.BarColumn(),
               bar.MofNCompleteColumn(), bar.TimeElapsedColumn())
    with bar.Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("", total=len(names))
        for name in names:
            progress.update(task, description=name)
            r = run_audit(CASES[name], samples, broken=broken)
            table.add_row(r.name, f"{r.claimed_epsilon:.4g}", f"{r.claimed_delta:g}",
                          f"{r.lower_bound:.4g}", "pass" if r.histogram_passed else "FAIL",
                          f"{r.samples:,}", f"{r.seconds:.1f}")
            progress.advance(task)
    Console().print(table)


@app.command()
def serve(
    config: Path = typer.Option(..., "--config", help="The server's YAML configuration "
                                                      "(see dpkit.server.config)."),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int = typer.Option(None, help="Worker processes (default: the config's)."),
) -> None:
    """Serve DP queries over HTTP (FastAPI + uvicorn; API docs at /docs)."""
    try:
        from dpkit.server.app import serve as run_server
        from dpkit.server.config import ConfigError
        from dpkit.server.state import MismatchError
    except ImportError as exc:
        raise ImportError(f"the server needs `pip install 'dpkit[server]'` ({exc})") from None
    try:
        run_server(config, host=host, port=port, workers=workers)
    except MismatchError:  # its lines hold a command to copy: the plain one-error print
        raise
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None
