"""``dpkit report DATASET --ledger LEDGER``: a dataset's HTML report (budget, burn-down,
queries). The older ``dpkit report LEDGER DATASET`` still works, with a deprecation note."""

from __future__ import annotations

import warnings
import webbrowser
from pathlib import Path

import typer
from rich.console import Console

from dpkit.cli.ledger import LEDGER_HELP, _open, resolve_dataset
from dpkit.errors import DomainError

__all__ = ["report"]


def report(
    first: str = typer.Argument(..., metavar="DATASET", help="The dataset (or a unique start "
                                "of its name). Deprecated form: LEDGER DATASET (the ledger "
                                "first, as before --ledger existed)."),
    second: str = typer.Argument(None, hidden=True),
    ledger: str = typer.Option(None, help=LEDGER_HELP),
    out: Path = typer.Option(Path("report.html"), help="The HTML file to write."),
    open_: bool = typer.Option(False, "--open", help="Open the report in a web browser."),
) -> None:
    """Write an HTML report of a dataset: its budget and burn-down, and its queries as run
    (`dpkit report DATASET --ledger FILE`, the spelling of `dpkit ledger …`)."""
    from dpkit.report import ledger_report

    if second is not None:
        if ledger is not None:
            raise DomainError("give the ledger once: `dpkit report DATASET --ledger LEDGER`")
        warnings.warn("`dpkit report LEDGER DATASET` is deprecated; use `dpkit report DATASET "
                      "--ledger LEDGER`", DeprecationWarning, stacklevel=1)
        Console(stderr=True).print("[yellow]deprecated[/yellow]: `dpkit report LEDGER DATASET`"
                                   "; use `dpkit report DATASET --ledger LEDGER`",
                                   soft_wrap=True)
        ledger, dataset = first, second
    else:
        dataset = first
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
