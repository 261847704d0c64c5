"""``dpkit ledger …``: the epsilon registry from the command line (Rich tables)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.core.record import noise_rows
from dpkit.errors import LedgerError
from dpkit.ledger import Ledger

ledger_app = typer.Typer(help="The epsilon registry: datasets, releases, verification.",
                         no_args_is_help=True)
LEDGER_HELP = "SQLite file or SQLAlchemy URL (default: the demo ledger)."


def _open(location: str | None, must_exist: bool = True) -> Ledger:
    from dpkit.cli.main import default_ledger_path

    where = location or str(default_ledger_path())
    if must_exist and "://" not in where and not Path(where).exists():
        Console().print(f"[red]no ledger at {where}[/red] (create one with `dpkit ledger init`)")
        raise typer.Exit(1)
    try:
        return Ledger(where)
    except LedgerError as exc:  # a missing or wrong MAC key, a ledger that cannot migrate
        Console().print(f"[red]✗[/red] {exc}", soft_wrap=True)
        raise typer.Exit(1) from None


def _loss(measure: str, epsilon: float | None, delta: float | None, rho: float | None
          ) -> PrivacyLoss:
    if measure == "pure":
        return PureDP(epsilon or 0)
    if measure == "approx":
        return ApproxDP(epsilon or 0, delta or 0)
    if measure == "zcdp":
        return ZCDP(rho or 0)
    raise typer.BadParameter("measure must be pure, approx or zcdp")


@ledger_app.command("init")
def init(ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Create (or migrate) a ledger."""
    reg = _open(ledger, must_exist=False)
    Console().print(f"ledger ready at {reg.url} (chain head {reg.head()[:16]}…); its MAC key: "
                    f"{reg.key_source} (keep it away from whoever can write the ledger)")


@ledger_app.command("datasets")
def list_datasets(ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Datasets with their lifetime cap, spend and burn-rate policy."""
    reg = _open(ledger)
    table = Table(title=f"Datasets in {reg.url}")
    for col in ("dataset", "privacy unit", "lifetime cap", "spent", "per day", "created"):
        table.add_column(col)
    for d in reg.datasets():
        table.add_row(d["name"], d["privacy_unit"], str(d["cap"]), str(d["spent"]),
                      str(d["per_day"] or "—"), d["created"])
    Console().print(table)


@ledger_app.command("show")
def show(dataset: str = typer.Argument(None, help="A dataset (default: list datasets)."),
         dataset_opt: str = typer.Option(None, "--dataset", help="Same as the argument."),
         ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """One dataset's cap, spend and releases (or every dataset)."""
    name = dataset or dataset_opt
    if name is None:
        list_datasets(ledger)
        return
    releases(ledger, name, None)


@ledger_app.command("releases")
def releases(ledger: str = typer.Option(None, help=LEDGER_HELP),
             dataset: str = typer.Option(None, help="Only this dataset."),
             analyst: str | None = typer.Option(None, help="Only this analyst.")) -> None:
    """Releases, oldest first: who, when, loss, status, query, noise rows."""
    reg = _open(ledger)
    table = Table(title=f"Releases{f' of {dataset}' if dataset else ''}")
    for col in ("id", "time", "dataset", "analyst", "loss", "status", "query", "noise"):
        table.add_column(col)
    for r in reg.releases(dataset, analyst):
        table.add_row(str(r["id"]), r["time"], r["dataset"], r["analyst"] or "—",
                      str(r["loss"]), r["status"], r["query"], noise_text(r["noise"]))
    Console().print(table)


def noise_text(stored: str | None) -> str:
    """A release's noise column for a report: its rows (:class:`dpkit.core.record.NoiseRow`),
    one a line; text written before the rows' encoding as it is; "—" for none."""
    rows = noise_rows(stored)
    if rows is None:
        return stored or "—"
    return "\n".join(str(r) for r in rows) or "—"


@ledger_app.command("verify")
def verify(ledger: str = typer.Option(None, help=LEDGER_HELP),
           head: str = typer.Option(None, help="A chain head saved earlier, to detect a "
                                               "rewritten history."),
           since_checkpoint: bool = typer.Option(
               False, "--since-checkpoint",
               help="Start from the newest signed checkpoint ('dpkit ledger checkpoint'): "
                    "replay only the links after it.")) -> None:
    """Check every link of the keyed chain and every row it covers (datasets, caps,
    policies, analysts, grants, running totals, burn-rate buckets, releases, outcomes,
    stored answers); print each problem and exit 1 on any."""
    reg = _open(ledger)
    _exit_on_problems(reg.verify(head, since_checkpoint=since_checkpoint), f"in {reg.url}")
    Console().print(f"[green]✓[/green] {reg.count()} releases verified; chain head "
                    f"{reg.head()}")


def _exit_on_problems(problems: list[str], where: str) -> None:
    """Print each problem and exit 1 if there is any."""
    if problems:
        console = Console()
        for p in problems:
            console.print(f"[red]✗[/red] {p}", soft_wrap=True)
        console.print(f"[red]{len(problems)} problem(s)[/red] {where}")
        raise typer.Exit(1)


@ledger_app.command("checkpoint")
def checkpoint(ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Verify the whole ledger (writers wait) and, if it is intact, sign its state so that
    'dpkit ledger verify --since-checkpoint' replays only what comes after; exit 1 and
    store nothing on any problem."""
    reg = _open(ledger)
    _exit_on_problems(reg.checkpoint(), "found: no checkpoint stored")
    Console().print(f"[green]✓[/green] checkpoint signed at chain head {reg.head()}")


@ledger_app.command("export")
def export(ledger: str = typer.Option(None, help=LEDGER_HELP),
           output: Path = typer.Option(None, help="JSON file (default: standard output).")
           ) -> None:
    """Export datasets and releases as JSON (losses as exact fractions; no tokens, no
    stored results)."""
    text = json.dumps(_open(ledger).export(), indent=2, default=str)
    if output is None:
        typer.echo(text)
    else:
        output.write_text(text)


@ledger_app.command("plot")
def plot(dataset: str = typer.Argument(..., help="The dataset."),
         output: Path = typer.Option(Path("burn-down.png"), help="PNG file to write."),
         ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """A burn-down plot (PNG) of the dataset's remaining budget over time."""
    from dpkit.ledger.plot import burn_down

    burn_down(_open(ledger), dataset, output)
    Console().print(f"wrote {output}")


@ledger_app.command("register")
def register(dataset: str, measure: str = typer.Option("pure", help="pure, approx or zcdp"),
             epsilon: float = typer.Option(None), delta: float = typer.Option(None),
             rho: float = typer.Option(None), unit: str = typer.Option("rows"),
             ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Register a dataset with its lifetime cap."""
    _open(ledger, must_exist=False).register(dataset, _loss(measure, epsilon, delta, rho), unit)


@ledger_app.command("analyst")
def analyst(name: str, dataset: str = typer.Option(..., help="Grant on this dataset."),
            epsilon: float = typer.Option(None, help="The analyst's cap (ε)."),
            delta: float = typer.Option(None), rho: float = typer.Option(None),
            ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Create an analyst with a grant (and print their API token once)."""
    reg = _open(ledger)
    measure = next(d["measure"] for d in reg.datasets() if d["name"] == dataset)
    cap = None
    if epsilon is not None or rho is not None:
        kind = {"PureDP": "pure", "ApproxDP": "approx", "ZCDP": "zcdp"}[measure]
        cap = _loss(kind, epsilon, delta, rho)
    token = reg.add_analyst(name)
    reg.grant(name, dataset, cap)
    Console().print(f"analyst {name!r}: token {token}")


@ledger_app.command("rotate-token")
def rotate_token(name: str, ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Give an analyst a new API token (printed once; the old one stops working)."""
    Console().print(f"analyst {name!r}: new token {_open(ledger).rotate_token(name)}")


@ledger_app.command("policy")
def policy(dataset: str, epsilon: float = typer.Option(None), delta: float = typer.Option(None),
           rho: float = typer.Option(None),
           ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Set the burn-rate limit: at most this loss per rolling 24 hours."""
    reg = _open(ledger)
    measure = next(d["measure"] for d in reg.datasets() if d["name"] == dataset)
    kind = {"PureDP": "pure", "ApproxDP": "approx", "ZCDP": "zcdp"}[measure]
    reg.set_policy(dataset, _loss(kind, epsilon, delta, rho))
