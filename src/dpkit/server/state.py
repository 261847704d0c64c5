"""What a server worker holds: the ledger, the stream store and the served datasets."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from dpkit.frame.bounded_cache import BoundedCache
from dpkit.frame.schema import Schema, SchemaError
from dpkit.frame.session import PlanMemo, Session
from dpkit.ledger import Ledger
from dpkit.server import streams
from dpkit.server.config import ConfigError, DatasetConfig, ServerConfig
from dpkit.server.errors import refusal
from dpkit.server.sources import Source, open_source

__all__ = ["Served", "ServerState"]


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
                self.ledger.register(d.name, d.budget, str(d.privacy_unit), _schema_text(
                    self.datasets[d.name].source))
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


def _schema_text(source: Source) -> str:
    return ",".join(f"{name}:{dtype}" for name, dtype in source.columns)
