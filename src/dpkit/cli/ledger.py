"""``dpkit ledger …``: the epsilon registry from the command line (Rich tables)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.core.record import noise_rows
from dpkit.errors import DomainError, LedgerError
from dpkit.ledger import Ledger
from dpkit.ledger.codec import load

ledger_app = typer.Typer(help="The epsilon registry: datasets, releases, verification.",
                         no_args_is_help=True)
LEDGER_HELP = "SQLite file or SQLAlchemy URL (default: the demo ledger)."
MEASURE_HELP = "The measure of the cap: pure (ε), approx (ε, δ) or zcdp (ρ)."
KINDS = {"PureDP": "pure", "ApproxDP": "approx", "ZCDP": "zcdp"}


def wide_table(title: str, columns: tuple[str, ...]) -> Table:
    """A Rich table whose cells fold onto more lines instead of being cut ("adult-demo-…")
    when the terminal is narrow."""
    table = Table(title=title)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


def default_ledger_path() -> Path:
    """Where the demo's ledger lives: $DPKIT_HOME, else $XDG_DATA_HOME/dpkit, else
    ~/.local/share/dpkit."""
    home = os.environ.get("DPKIT_HOME")
    if home:
        return Path(home) / "demo-ledger.sqlite"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "dpkit" / "demo-ledger.sqlite"


def _open(location: str | None, must_exist: bool = True) -> Ledger:
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
    """The loss the options describe, every given part checked to be a finite number > 0
    (δ in (0, 1)) and every needed part present, before the ledger is opened."""
    def check(value: float | None, option: str, needed: bool = True) -> float | None:
        if value is None:
            if needed:
                raise DomainError(f"measure {measure!r} needs {option} (a number > 0)")
            return None
        if not (math.isfinite(value) and value > 0):
            raise DomainError(f"{option} must be a finite number > 0, got {value:g}")
        return value

    if measure == "pure":
        return PureDP(check(epsilon, "--epsilon") or 0)
    if measure == "approx":
        dlt = check(delta, "--delta", needed=False)
        if dlt is not None and dlt >= 1:
            raise DomainError(f"--delta must be below 1, got {dlt:g}")
        return ApproxDP(check(epsilon, "--epsilon") or 0, dlt or 0)
    if measure == "zcdp":
        return ZCDP(check(rho, "--rho") or 0)
    raise DomainError(f"--measure must be pure, approx or zcdp, got {measure!r}")


def _measure_of(reg: Ledger, dataset: str) -> str:
    """The measure kind (pure, approx, zcdp) of a registered dataset."""
    found = next((d for d in reg.datasets() if d["name"] == dataset), None)
    if found is None:
        raise LedgerError(f"unknown dataset {dataset!r} in {reg.shown_url} (see `dpkit ledger "
                          "datasets`)")
    return KINDS[found["measure"]]


def resolve_dataset(reg: Ledger, name: str) -> str:
    """``name`` if it is a dataset, else the one dataset whose name starts with it.

    Raises
    ------
    LedgerError
        If no dataset, or more than one, starts with ``name``.
    """
    names = [d["name"] for d in reg.datasets()]
    if name in names:
        return name
    found = [n for n in names if n.startswith(name)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise LedgerError(f"unknown dataset {name!r} in {reg.shown_url} (see `dpkit ledger "
                          "datasets`)")
    raise LedgerError(f"{name!r} is the start of {len(found)} datasets ({', '.join(found[:5])}"
                      f"{', …' if len(found) > 5 else ''}); give more of the name")


@ledger_app.command("init")
def init(ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Create (or migrate) a ledger."""
    reg = _open(ledger, must_exist=False)
    Console().print(f"ledger ready at {reg.shown_url} (chain head {reg.head()[:16]}…); its "
                    f"MAC key: {reg.key_source} (keep it away from whoever can write the ledger)")


@ledger_app.command("datasets")
def list_datasets(ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Datasets with their measure, privacy unit, lifetime cap, spend and burn-rate policy
    (as registered: by `dpkit serve` from its configuration, or by `register`; a migrated
    dataset shows its entry in force and its number of migrations)."""
    reg = _open(ledger)
    table = wide_table(f"Datasets in {reg.shown_url}", ("dataset", "measure", "privacy unit",
                                                  "lifetime cap", "spent", "per day",
                                                  "created"))
    for d in reg.datasets():
        per_day = d["per_day"]
        limit = "—" if per_day is None else (
            "retired" if per_day == type(per_day).zero() else str(per_day))
        moved = len(reg.migrations(d["name"]))
        created = d["created"] + (f" (migrated {moved}×)" if moved else "")
        table.add_row(d["name"], KINDS[d["measure"]], d["privacy_unit"], str(d["cap"]),
                      str(d["spent"]), limit, created)
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
    if dataset is not None:
        dataset = resolve_dataset(reg, dataset)
    table = wide_table(f"Releases{f' of {dataset}' if dataset else ''}",
                       ("id", "time", "dataset", "analyst", "loss", "status", "query", "noise"))
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
    _exit_on_problems(reg.verify(head, since_checkpoint=since_checkpoint), f"in {reg.shown_url}")
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
def plot(dataset: str = typer.Argument(..., help="The dataset (or a unique start of its "
                                                 "name)."),
         output: Path = typer.Option(Path("burn-down.png"), help="PNG file to write."),
         ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """A burn-down plot (PNG) of the dataset's remaining budget over time."""
    from dpkit.ledger.plot import burn_down

    reg = _open(ledger)
    burn_down(reg, resolve_dataset(reg, dataset), output)
    Console().print(f"wrote {output}")


@ledger_app.command("register")
def register(dataset: str = typer.Argument(..., help="The dataset's name."),
             measure: str = typer.Option("pure", help=MEASURE_HELP),
             epsilon: float = typer.Option(None, help="Lifetime cap ε (nats, > 0); needed "
                                                      "for pure and approx."),
             delta: float = typer.Option(None, help="Lifetime cap δ (a probability in "
                                                    "(0, 1)); approx only."),
             rho: float = typer.Option(None, help="Lifetime cap ρ (> 0); needed for zcdp."),
             unit: str = typer.Option("rows", help="The privacy unit, as text (e.g. rows, "
                                                   "or the unit column)."),
             ledger: str = typer.Option(None, help=LEDGER_HELP),
             config: Path = typer.Option(None, "--config", help="Register the dataset as "
                                         "this server configuration declares it (budget, "
                                         "privacy unit, source schema; its ledger), exactly "
                                         "as `dpkit serve` would; no other option then.")
             ) -> None:
    """Register a dataset with its lifetime cap (a positive loss; it changes only by a
    recorded `dpkit ledger migrate`). With --config, from the server's configuration."""
    if config is not None:
        if (epsilon, delta, rho, ledger) != (None, None, None, None) or unit != "rows":
            raise DomainError("--config gives the budget, unit and ledger: use no other "
                              "option with it")
        ledger, (cap, unit, schema) = _config_entry(dataset, config)
    else:
        cap, schema = _loss(measure, epsilon, delta, rho), ""  # before the ledger is opened
    reg = _open(ledger, must_exist=False)
    reg.register(dataset, cap, unit, schema)  # or refuses another measure, cap or unit
    Console().print(f"[green]✓[/green] dataset {dataset!r} registered in {reg.shown_url}: "
                    f"lifetime cap {cap}, privacy unit {unit}", soft_wrap=True)


@ledger_app.command("retire")
def retire(dataset: str = typer.Argument(..., help="The dataset (or a unique start of its "
                                                   "name)."),
           ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Retire a dataset: every later debit on it is refused (final); its releases stay in
    the ledger and in its hash chain for `dpkit ledger verify`."""
    reg = _open(ledger)
    name = resolve_dataset(reg, dataset)
    reg.retire(name)
    Console().print(f"[green]✓[/green] dataset {name!r} retired in {reg.shown_url}: it refuses "
                    f"new releases; spent {reg.spent(name)} of {reg.cap(name)}",
                    soft_wrap=True)


@ledger_app.command("analyst")
def analyst(name: str = typer.Argument(..., help="The analyst's name."),
            dataset: str = typer.Option(..., help="Grant on this dataset."),
            epsilon: float = typer.Option(None, help="The analyst's cap ε (default: no cap "
                                                     "beyond the dataset's)."),
            delta: float = typer.Option(None, help="The analyst's cap δ (approx datasets)."),
            rho: float = typer.Option(None, help="The analyst's cap ρ (zcdp datasets)."),
            ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Create an analyst with a grant (and print their API token once)."""
    reg = _open(ledger)
    kind = _measure_of(reg, dataset)
    cap = None
    if epsilon is not None or rho is not None:
        cap = _loss(kind, epsilon, delta, rho)
    token = reg.add_analyst(name)
    reg.grant(name, dataset, cap)
    Console().print(f"analyst {name!r}: token {token}")


@ledger_app.command("rotate-token")
def rotate_token(name: str = typer.Argument(..., help="The analyst's name."),
                 ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Give an analyst a new API token (printed once; the old one stops working)."""
    Console().print(f"analyst {name!r}: new token {_open(ledger).rotate_token(name)}")


@ledger_app.command("policy")
def policy(dataset: str = typer.Argument(..., help="The dataset."),
           epsilon: float = typer.Option(None, help="At most this ε per 24 h (pure, approx)."),
           delta: float = typer.Option(None, help="At most this δ per 24 h (approx)."),
           rho: float = typer.Option(None, help="At most this ρ per 24 h (zcdp)."),
           ledger: str = typer.Option(None, help=LEDGER_HELP)) -> None:
    """Set the burn-rate limit: at most this loss per rolling 24 hours."""
    reg = _open(ledger)
    limit = _loss(_measure_of(reg, dataset), epsilon, delta, rho)
    reg.set_policy(dataset, limit)
    Console().print(f"[green]✓[/green] dataset {dataset!r}: at most {limit} per rolling 24 h",
                    soft_wrap=True)


@ledger_app.command("migrate")
def migrate(dataset: str = typer.Argument(..., help="The dataset, as named in the ledger and "
                                                    "the configuration."),
            config: Path = typer.Option(..., "--config", help="The server's YAML "
                                        "configuration: the new entry is its dataset's budget "
                                        "(measure and cap), privacy unit and source schema.")
            ) -> None:
    """Retire the dataset's ledger entry and open a new one under the same name from the
    server configuration (a recorded link of the chain; 'dpkit ledger verify' checks it).
    The spend is carried, never reset; the measure changes only before the first release; a
    new privacy unit is stated in the record."""
    location, (cap, unit, schema) = _config_entry(dataset, config)
    reg = _open(location)
    body = reg.migrate(dataset, cap, unit, schema)
    before = body["before"]
    console = Console()
    console.print(f"[green]✓[/green] dataset {dataset!r} migrated in {reg.shown_url} (recorded in "
                  "its chain):", soft_wrap=True)
    console.print(f"  retired: {KINDS[before['measure']]}, cap "
                  f"{_text(before['measure'], before['cap'])}, privacy unit "
                  f"{before['privacy_unit']}", soft_wrap=True)
    console.print(f"  opened:  {KINDS[body['measure']]}, cap {cap}, privacy unit {unit}",
                  soft_wrap=True)
    console.print(f"  spend carried: {_text(body['measure'], body['spent'])}", soft_wrap=True)
    if body["note"]:
        console.print(f"  [yellow]note[/yellow]: {body['note']}", soft_wrap=True)


def _text(measure: str, stored: str) -> str:
    """A loss as the ledger stores it, for people."""
    return str(load(measure, stored))


def _config_entry(dataset: str, config: Path) -> tuple[str, tuple[PrivacyLoss, str, str]]:
    """The ledger location of a server configuration and the entry its dataset ``dataset``
    stands for (cap, privacy unit text, schema text), as ``dpkit serve`` registers it; the
    source is opened for its column names and types only, and checked as at start-up."""
    try:
        from dpkit.server.config import load_config
        from dpkit.server.sources import open_source
        from dpkit.server.state import check_declared, entry_of_config
    except ImportError as exc:
        raise ImportError(f"reading a server configuration needs `pip install "
                          f"'dpkit[server]'` ({exc})") from None
    cfg = load_config(config)
    found = next((d for d in cfg.datasets if d.name == dataset), None)
    if found is None:
        raise DomainError(f"--config {config}: no dataset {dataset!r} in it (datasets: "
                          f"{', '.join(d.name for d in cfg.datasets)})")
    source = open_source(found.source)
    try:
        check_declared(found, source)  # an entry the server could not start with: refused
        return cfg.ledger, entry_of_config(found, source)
    finally:
        source.close()
