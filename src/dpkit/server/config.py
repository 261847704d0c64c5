"""The server's YAML configuration, parsed into frozen dataclasses and validated.

Example::

    ledger: ledger.sqlite            # a SQLite path (relative to this file) or SQLAlchemy URL
    ledger_key_env: DPKIT_LEDGER_KEY # optional: env var holding a Fernet key for stored answers
                                     # (and for hosted streams' encrypted states)
    curator_token_env: DPKIT_CURATOR_TOKEN  # optional: env var holding the curator's token
                                     # (the console's curator view; /v1/curator/* routes)
    streams_dir: streams             # optional: where hosted streams keep their states
                                     # (default: <ledger file>.streams next to a SQLite ledger)
    workers: 2
    max_body_bytes: 65536
    datasets:
      - name: adult
        source: {kind: csv, path: adult.csv}
        privacy_unit: rows
        budget: {measure: pure, epsilon: 3}
      - name: visits
        source: {kind: duckdb, path: clinic.duckdb, table: visits}
        privacy_unit: {column: patient_id, max_rows: 5, max_groups: 2}
        budget: {measure: approx, epsilon: 2, delta: 1e-6}
        schema:                      # optional: declared metadata (dp.Schema.to_dict's shape;
          columns:                   # `dpkit schema FILE` writes a template)
            age: {type: numeric, lower: 0, upper: 120, integer: true}
            ward: {type: categorical, categories: [A, B, C]}
            patient_id: {type: text}

Numbers may be YAML numbers or exact rationals written as strings (``"1/3"``).

A dataset's ``schema`` is public metadata: analysts see it in ``GET /v1/datasets``, and the
builder and SQL take group keys and bounds from it. Its ``privacy_unit``, if given, must be
the dataset's (either may be omitted). At start-up every declared column and the privacy
unit's column must exist in the source, a ``numeric`` one with a numeric type (names and
types only; no value is read), or the server refuses to start, naming the column.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.errors import DomainError
from dpkit.frame.privacy_unit import PrivacyUnit
from dpkit.frame.schema import Schema, SchemaError

__all__ = ["ConfigError", "SourceConfig", "DatasetConfig", "ServerConfig", "load_config",
           "parse_config", "SOURCE_KINDS"]

SOURCE_KINDS = ("csv", "parquet", "duckdb", "postgres")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_TOP_KEYS = {"ledger", "ledger_key_env", "workers", "max_body_bytes", "datasets",
             "streams_dir", "curator_token_env"}


class ConfigError(DomainError):
    """The server configuration is missing a field or has an invalid value."""


@dataclass(frozen=True)
class SourceConfig:
    """Where a dataset's rows live: a CSV/Parquet/DuckDB file or a PostgreSQL table."""

    kind: str
    path: Path | None = None
    url: str | None = None
    table: str | None = None


@dataclass(frozen=True)
class DatasetConfig:
    """A served dataset: its source, privacy unit, lifetime budget (the ledger cap) and
    declared metadata (None: none declared)."""

    name: str
    source: SourceConfig
    privacy_unit: PrivacyUnit
    budget: PrivacyLoss
    schema: Schema | None = None


@dataclass(frozen=True)
class ServerConfig:
    """The whole server configuration (see the module docstring)."""

    ledger: str
    datasets: tuple[DatasetConfig, ...]
    workers: int = 1
    max_body_bytes: int = 65536
    ledger_key_env: str | None = None
    streams_dir: Path | None = None  # hosted continual releases' encrypted states
    curator_token_env: str | None = None  # env var with the curator's token (console_routes)
    path: Path | None = None  # the YAML file it was read from (for messages)


def load_config(path: str | Path) -> ServerConfig:
    """Read and validate a YAML server configuration.

    Parameters
    ----------
    path : str or Path
        The YAML file. Relative paths inside it are resolved against its folder.

    Returns
    -------
    ServerConfig

    Raises
    ------
    ConfigError
        If the file is missing, is not YAML, or a field is missing or invalid (the message
        names the field, e.g. ``datasets[0].budget.epsilon``).
    """
    import yaml

    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"no configuration file at {file}")
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {exc}") from None
    return replace(parse_config(raw, base=file.resolve().parent), path=file)


def parse_config(raw: Any, base: Path | None = None) -> ServerConfig:
    """Validate an already-parsed configuration mapping (see :func:`load_config`)."""
    here = base or Path.cwd()
    top = _mapping(raw, "configuration")
    _no_extra(top, _TOP_KEYS, "configuration")
    ledger = _string(top.get("ledger"), "ledger")
    if "://" not in ledger:
        ledger = str(_path(ledger, here))
    entries = top.get("datasets")
    if not isinstance(entries, list) or not entries:
        raise ConfigError("datasets: a non-empty list of datasets is required")
    datasets = tuple(_dataset(e, f"datasets[{i}]", here) for i, e in enumerate(entries))
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        raise ConfigError(f"datasets: duplicate names in {names}")
    key_env = top.get("ledger_key_env")
    curator_env = top.get("curator_token_env")
    streams = top.get("streams_dir")
    if streams is not None:
        streams_dir: Path | None = _path(_string(streams, "streams_dir"), here)
    else:
        streams_dir = None if "://" in ledger else Path(ledger + ".streams")
    return ServerConfig(
        ledger=ledger, datasets=datasets,
        workers=_positive_int(top.get("workers", 1), "workers"),
        max_body_bytes=_positive_int(top.get("max_body_bytes", 65536), "max_body_bytes"),
        ledger_key_env=None if key_env is None else _string(key_env, "ledger_key_env"),
        streams_dir=streams_dir,
        curator_token_env=None if curator_env is None else _string(curator_env,
                                                                   "curator_token_env"))


def _dataset(raw: Any, where: str, here: Path) -> DatasetConfig:
    entry = _mapping(raw, where)
    _no_extra(entry, {"name", "source", "privacy_unit", "budget", "schema"}, where)
    name = _string(entry.get("name"), f"{where}.name")
    if not _NAME.match(name):
        raise ConfigError(f"{where}.name: use 1-128 letters, digits, '_', '.' or '-'")
    schema = _schema(entry.get("schema"), f"{where}.schema")
    unit = _unit(entry["privacy_unit"], f"{where}.privacy_unit") if entry.get(
        "privacy_unit") is not None else None
    declared = schema.privacy_unit if schema is not None else None
    if unit is not None and declared is not None and unit != declared:
        raise ConfigError(f"{where}.privacy_unit: {unit} differs from "
                          f"{where}.schema.privacy_unit {declared}; declare it in one place")
    return DatasetConfig(name=name, source=_source(entry.get("source"), f"{where}.source", here),
                         privacy_unit=unit or declared or PrivacyUnit.rows(),
                         budget=_budget(entry.get("budget"), f"{where}.budget"), schema=schema)


def _schema(raw: Any, where: str) -> Schema | None:
    """A dataset's ``schema:`` (:meth:`Schema.from_dict`, whose keys are allow-listed)."""
    if raw is None:
        return None
    try:
        return Schema.from_dict(_mapping(raw, where))
    except SchemaError as exc:  # its text names the key under schema (schema.columns.age…)
        text = str(exc)
        raise ConfigError(text.replace("schema", where, 1) if text.startswith("schema")
                          else f"{where}: {text}") from None


def _source(raw: Any, where: str, here: Path) -> SourceConfig:
    src = _mapping(raw, where)
    _no_extra(src, {"kind", "path", "url", "table"}, where)
    kind = _string(src.get("kind"), f"{where}.kind")
    if kind not in SOURCE_KINDS:
        raise ConfigError(f"{where}.kind: must be one of {', '.join(SOURCE_KINDS)}")
    if kind == "postgres":
        url = _string(src.get("url"), f"{where}.url")
        return SourceConfig(kind, url=url, table=_table(src.get("table"), f"{where}.table"))
    path = _path(_string(src.get("path"), f"{where}.path"), here)
    if not path.is_file():
        raise ConfigError(f"{where}.path: no such file {path}")
    table = _table(src.get("table"), f"{where}.table") if kind == "duckdb" else None
    if kind != "duckdb" and src.get("table") is not None:
        raise ConfigError(f"{where}.table: only duckdb and postgres sources have tables")
    return SourceConfig(kind, path=path, table=table)


def _unit(raw: Any, where: str) -> PrivacyUnit:
    if raw == "rows":
        return PrivacyUnit.rows()
    unit = _mapping(raw, where)
    _no_extra(unit, {"column", "max_rows", "max_groups", "max_rows_per_group"}, where)
    bounds = {k: _positive_int(unit[k], f"{where}.{k}") for k in
              ("max_rows", "max_groups", "max_rows_per_group") if unit.get(k) is not None}
    try:
        return PrivacyUnit.by(_string(unit.get("column"), f"{where}.column"), **bounds)
    except DomainError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _budget(raw: Any, where: str) -> PrivacyLoss:
    budget = _mapping(raw, where)
    _no_extra(budget, {"measure", "epsilon", "delta", "rho"}, where)
    measure = budget.get("measure")
    fields = {"pure": ("epsilon",), "approx": ("epsilon", "delta"), "zcdp": ("rho",)}
    if measure not in fields:
        raise ConfigError(f"{where}.measure: must be pure, approx or zcdp")
    extra = sorted(k for k in budget if k != "measure" and k not in fields[measure])
    if extra:
        raise ConfigError(f"{where}: {', '.join(extra)} does not apply to measure {measure}")
    values = [_number(budget.get(k), f"{where}.{k}") for k in fields[measure]]
    try:
        if measure == "pure":
            return PureDP(values[0])
        if measure == "approx":
            return ApproxDP(values[0], values[1])
        return ZCDP(values[0])
    except DomainError as exc:
        raise ConfigError(f"{where}: {exc}") from None


# -- small validators ------------------------------------------------------------------------
def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    return raw


def _no_extra(raw: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: "
                          f"{', '.join(sorted(allowed))}")


def _string(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(f"{where}: a non-empty string is required")
    return raw.strip()


def _path(raw: str, here: Path) -> Path:
    path = Path(raw).expanduser()
    return path if path.is_absolute() else here / path


def _table(raw: Any, where: str) -> str:
    table = _string(raw, where)
    if not _TABLE.match(table):
        raise ConfigError(f"{where}: {table!r} is not a plain [schema.]table name")
    return table


def _positive_int(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise ConfigError(f"{where}: a positive integer is required, got {raw!r}")
    return raw


def _number(raw: Any, where: str) -> int | float | Fraction:
    if isinstance(raw, bool) or raw is None:
        raise ConfigError(f"{where}: a number is required")
    if isinstance(raw, int | float):
        return raw
    try:
        return Fraction(str(raw).strip())
    except (ValueError, ZeroDivisionError):
        raise ConfigError(f"{where}: {raw!r} is not a number") from None
