"""What a server worker holds: the ledger, the stream store and the served datasets."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpkit.core.measures import PrivacyLoss
from dpkit.frame.bounded_cache import BoundedCache
from dpkit.frame.schema import Schema, SchemaError
from dpkit.frame.session import PlanMemo, Session
from dpkit.ledger import Ledger
from dpkit.ledger.entries import differences
from dpkit.server import streams
from dpkit.server.config import ConfigError, DatasetConfig, ServerConfig
from dpkit.server.errors import refusal
from dpkit.server.sources import Source, open_source

__all__ = ["Served", "ServerState", "register_from_config", "entry_of_config",
           "MismatchError"]


class MismatchError(ConfigError):
    """The ledger holds a served dataset with another measure, cap or privacy unit than its
    configuration (``dpkit serve`` refuses to start)."""


@dataclass
class Served:
    """A dataset as served: its configuration, its loaded source, and what its requests
    share (one per dataset and worker): bounded tables (dpkit.frame.bounded_cache) and the
    plan-time dry runs that passed (dpkit.frame.session.PlanMemo)."""

    config: DatasetConfig
    source: Source
    bounded: BoundedCache = field(default_factory=BoundedCache)
    plans: PlanMemo = field(default_factory=PlanMemo)


class ServerState:
    """The ledger and the datasets, opened once per worker process."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        key = os.environ.get(config.ledger_key_env) if config.ledger_key_env else None
        if config.ledger_key_env and not key:
            raise ConfigError(f"ledger_key_env: ${config.ledger_key_env} is not set (it holds "
                              "the Fernet key that encrypts stored answers)")
        self.ledger = Ledger(config.ledger, encryption_key=key.encode() if key else None)
        self.streams = streams.StreamStore(config.streams_dir, key.encode() if key else None)
        self.datasets: dict[str, Served] = {}
        try:
            for d in config.datasets:
                self.datasets[d.name] = Served(d, open_source(d.source))
                check_declared(d, self.datasets[d.name].source)
                register_from_config(self.ledger, d, self.datasets[d.name].source,
                                     config_path=config.path)
        except BaseException:
            self.close()
            raise

    def session(self, served: Served, data: Any, analyst: str) -> Session:
        """A session for one request (cheap: the data is already loaded or opened)."""
        c = served.config
        try:
            return Session(data, c.privacy_unit, c.budget, ledger=self.ledger,
                           dataset=c.name, analyst=analyst, bounded_cache=served.bounded,
                           plan_memo=served.plans, schema=c.schema)
        except Exception as exc:
            raise refusal(exc) from exc

    def close(self) -> None:
        for served in self.datasets.values():
            served.source.close()
        self.ledger.dispose()


def check_declared(config: DatasetConfig, source: Source) -> None:
    """At start-up: every declared column and the privacy unit's column are columns of the
    source, a declared numeric one of a numeric type (names and types only, no value read).

    Raises
    ------
    ConfigError
        Naming the dataset and the column.
    """
    unit = config.privacy_unit if config.privacy_unit.column is not None else None
    declared = Schema(config.schema.columns if config.schema is not None else {}, unit)
    try:
        declared.check_columns(dict(source.columns))
    except SchemaError as exc:
        raise ConfigError(f"dataset {config.name!r}: {exc}") from None


def schema_text(source: Source) -> str:
    """The schema text the ledger records for a source: ``name:dtype`` of each column (as a
    :class:`~dpkit.frame.Session` over the same table writes it)."""
    return ",".join(f"{name}:{dtype}" for name, dtype in source.columns)


def entry_of_config(config: DatasetConfig, source: Source) -> tuple[PrivacyLoss, str, str]:
    """The ledger entry a dataset's configuration stands for: its lifetime cap (the budget,
    whose type is the measure), its privacy unit's canonical text (``str(PrivacyUnit)``) and
    the source's schema text."""
    return config.budget, str(config.privacy_unit), schema_text(source)


def register_from_config(ledger: Ledger, config: DatasetConfig, source: Source,
                         config_path: Path | None = None) -> None:
    """Register a served dataset from its configuration when the ledger does not hold it
    (cap, measure, privacy unit, schema text: what ``Session(ledger=…)`` registers), or check
    that the ledger's entry is the configuration's. Compared canonically: the measure's name,
    the exact cap (``epsilon: 1`` and ``1.0`` are one cap) and the privacy unit's text.

    Raises
    ------
    MismatchError
        If the ledger holds the dataset with another measure, cap or privacy unit: the
        message lists each difference (configuration vs ledger) and the two ways on (a new
        dataset name, or ``dpkit ledger migrate``).
    LedgerIntegrityError
        If the dataset's row was changed outside the ledger.
    """
    cap, unit, schema = entry_of_config(config, source)
    found = ledger.entry(config.name)
    if found is None:
        ledger.register(config.name, cap, unit, schema)
        found = ledger.entry(config.name)  # a concurrent worker may have registered first
        assert found is not None
    wrong = differences(found, cap, unit)
    if not wrong:
        ledger.register(config.name, cap, unit, schema)  # remembered: no write per request
        return
    where = f" --config {config_path}" if config_path is not None else " --config CONFIG"
    lines = "\n".join(f"  {field}: config {want}, ledger {have}" for field, want, have in wrong)
    raise MismatchError(
        f"dataset {config.name!r}: the configuration and the ledger {ledger.shown_url} "
        "disagree:\n"
        f"{lines}\nThe ledger's entry is fixed (its spend was accounted under it). Either "
        f"serve it under a new dataset name, or record a migration to the configuration's "
        f"entry (the spend is carried, the old entry stays in the chain):\n"
        f"  dpkit ledger migrate {config.name}{where}")
