"""``dpkit sql DATASET "SELECT …"``: one SQL statement against a ledger, as the server runs it.

The dataset, its source, privacy unit, budget and declared schema come from the server's YAML
configuration (``--config``, else ``$DPKIT_SERVER_CONFIG``), opened as ``dpkit serve`` opens
it (:class:`dpkit.server.state.ServerState`); ``--ledger`` names another ledger than the
configuration's. The statement is planned and released as ``POST /v1/datasets/{name}/sql``
does (:func:`dpkit.server.sql_routes.plan_statement`: the debit is the plan's loss, the
ledger's row holds the canonical plan and the text). Output: a Rich table (each statistic
with its interval), or with ``--json`` the server's release response; ``--explain`` prints the
plan and its cost and spends nothing.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import polars as pl
import typer
from rich.console import Console
from rich.table import Table

from dpkit.errors import DomainError

CONFIG_HELP = "The server's YAML configuration (default: $DPKIT_SERVER_CONFIG)."


def sql(
    dataset: str = typer.Argument(..., help="A dataset of the configuration."),
    statement: str = typer.Argument(..., help="One SQL SELECT statement (quote it)."),
    ledger: str = typer.Option(None, help="SQLite file or SQLAlchemy URL (default: the "
                                          "configuration's ledger)."),
    config: Path = typer.Option(None, "--config", help=CONFIG_HELP),
    epsilon: str = typer.Option(None, help="ε to spend (a number or a fraction, e.g. 1/4)."),
    rho: str = typer.Option(None, help="ρ to spend (zCDP datasets)."),
    delta: str = typer.Option(None, help="δ (Gaussian noise on an (ε, δ) dataset)."),
    confidence: float = typer.Option(0.95, help="Coverage of each interval, in (0, 1)."),
    dialect: str = typer.Option(None, help="The text's SQL dialect (postgres, duckdb, "
                                           "spark, bigquery)."),
    analyst: str = typer.Option(None, help="Charge this analyst's grant too (default: the "
                                           "curator: the dataset's cap only)."),
    as_json: bool = typer.Option(False, "--json", help="Print the release (or the plan) as "
                                                       "JSON."),
    explain: bool = typer.Option(False, "--explain", help="Print the plan and its cost; "
                                                          "spends nothing."),
) -> None:
    """Release one SQL statement on a configured dataset (debited in the ledger)."""
    if not 0 < confidence < 1:
        raise DomainError(f"--confidence must be in (0, 1), got {confidence:g}")
    budget = {"epsilon": epsilon, "rho": rho, "delta": delta}
    from dpkit.server.sql_routes import plan_statement

    state, served = _open(dataset, config, ledger)
    try:
        with served.source.open() as data:
            # no analyst: the curator's session (the dataset's cap only; Session takes None)
            session = state.session(served, data, cast(str, analyst))
            planned = plan_statement(session, statement, dialect=dialect, **budget)
            if explain:
                _print_plan(planned, confidence, as_json)
                return
            record = planned.release(confidence)
        _print_release(session, record, as_json)
    finally:
        state.close()


def _open(dataset: str, config: Path | None, ledger: str | None) -> tuple[Any, Any]:
    """The server's state for the configuration (its ledger replaced by ``ledger``) and the
    served ``dataset``."""
    try:
        from dpkit.server.config import load_config
        from dpkit.server.state import ServerState
    except ImportError as exc:
        raise ImportError(f"dpkit sql needs `pip install 'dpkit[server]'` ({exc})") from None
    where = config or os.environ.get("DPKIT_SERVER_CONFIG")
    if not where:
        raise DomainError("dpkit sql needs --config (the server's YAML, which names the "
                          "dataset's source, privacy unit and schema) or $DPKIT_SERVER_CONFIG")
    cfg = load_config(where)
    if ledger:
        cfg = replace(cfg, ledger=ledger)
    state = ServerState(cfg)
    served = state.datasets.get(dataset)
    if served is None:
        state.close()
        raise DomainError(f"no dataset {dataset!r} in {where}; datasets: "
                          f"{', '.join(sorted(state.datasets)) or 'none'}")
    return state, served


def _print_plan(planned: Any, confidence: float, as_json: bool) -> None:
    plan = planned.plan
    names = ("epsilon", "rho", "delta", "split")
    args = {k: v for k, v in zip(names, plan.arguments, strict=True) if v is not None}
    text = planned.sql.explain(**args, confidence=confidence)
    if as_json:
        typer.echo(json.dumps({"text": text, "total": _loss_json(plan.loss),
                               "description": plan.description}, ensure_ascii=False))
    else:
        Console().print(text, markup=False, highlight=False)


def _loss_json(loss: Any) -> dict[str, object]:
    return dict(loss.as_json())


def _print_release(session: Any, record: Any, as_json: bool) -> None:
    if as_json:
        from dpkit.server.routes import release_body

        typer.echo(json.dumps(release_body(session, record), default=str, ensure_ascii=False))
        return
    frame: pl.DataFrame = record.values
    table = Table(title=f"release {record.release_id}: {record.loss}", title_justify="left")
    for name, dtype in frame.schema.items():
        table.add_column(name, justify="right" if dtype.is_numeric() else "left",
                         overflow="fold")
    for row in frame.iter_rows():
        table.add_row(*(_cell(v) for v in row))
    Console().print(table)


def _cell(value: Any) -> str:
    """A value as the table shows it: floats to 4 significant decimals past the point."""
    if value is None:
        return "—"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.4f}" if abs(value) < 1e6 else f"{value:,.1f}"
    return str(value)
