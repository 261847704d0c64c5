"""``dpkit report LEDGER DATASET``: a dataset's HTML report (budget, burn-down, queries)."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import typer
from rich.console import Console

from dpkit.cli.ledger import _open, resolve_dataset
from dpkit.errors import DomainError

__all__ = ["report"]


def report(
    ledger: str = typer.Argument(..., help="SQLite file or SQLAlchemy URL of the ledger."),
    dataset: str = typer.Argument(..., help="The dataset (or a unique start of its name)."),
    out: Path = typer.Option(Path("report.html"), help="The HTML file to write."),
    open_: bool = typer.Option(False, "--open", help="Open the report in a web browser."),
) -> None:
    """Write an HTML report of a dataset: its budget and burn-down, and its queries as run."""
    from dpkit.report import ledger_report

    if not out.parent.is_dir() or out.is_dir():
        raise DomainError(f"--out {out}: not a file in an existing directory")
    reg = _open(ledger)
    name = resolve_dataset(reg, dataset)
    html = ledger_report(reg, name)  # nothing is written if it fails
    try:
        out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise DomainError(f"--out {out}: cannot write it ({exc.strerror})") from None
    Console().print(f"[green]✓[/green] wrote {out}", soft_wrap=True)
    if open_:
        webbrowser.open(out.resolve().as_uri())
