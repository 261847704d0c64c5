"""Open a configured dataset once at startup, and hand each request a table to query.

CSV, Parquet and PostgreSQL tables are read into memory as Polars frames once (requests
share them: Polars frames are immutable). A DuckDB table stays in its read-only database
file; each request queries it through its own cursor (DuckDB connections are not shared
across threads).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import polars as pl

from dpkit.frame import engine
from dpkit.server.config import ConfigError, SourceConfig

__all__ = ["Source", "open_source"]


class Source:
    """A loaded dataset: ``open()`` yields a table for one request; ``columns`` its schema."""

    def __init__(self, frame: pl.DataFrame | None = None, duckdb_con: Any = None,
                 table: str | None = None) -> None:
        self._frame = frame
        self._con = duckdb_con
        self._table = table
        with self.open() as data:
            schema = engine.to_lazy(data).collect_schema()
        self.columns = [(name, str(dtype)) for name, dtype in schema.items()]

    @contextlib.contextmanager
    def open(self) -> Iterator[Any]:
        """The table for one request (a Polars frame, or a DuckDB relation on a fresh
        cursor, closed afterwards)."""
        if self._frame is not None:
            yield self._frame
            return
        cursor = self._con.cursor()
        try:
            yield cursor.table(self._table)
        finally:
            cursor.close()

    def close(self) -> None:
        """Release the DuckDB connection, if any."""
        if self._con is not None:
            self._con.close()


def open_source(source: SourceConfig) -> Source:
    """Load or open ``source``.

    Raises
    ------
    ConfigError
        If the file, table or database cannot be read.
    """
    try:
        if source.kind == "csv":
            return Source(pl.read_csv(str(source.path), infer_schema_length=10_000))
        if source.kind == "parquet":
            return Source(pl.read_parquet(str(source.path)))
        if source.kind == "duckdb":
            return _duckdb(source)
        return Source(_postgres(source))
    except ConfigError:
        raise
    except Exception as exc:  # the message names the file or table, never row values
        raise ConfigError(f"cannot load {source.kind} source "
                          f"{source.path or source.table}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from None


def _duckdb(source: SourceConfig) -> Source:
    import duckdb

    con = duckdb.connect(str(source.path), read_only=True)
    try:
        return Source(duckdb_con=con, table=source.table)
    except Exception:
        con.close()
        raise


def _postgres(source: SourceConfig) -> pl.DataFrame:
    import sqlalchemy as sa

    schema, _, name = (source.table or "").rpartition(".")
    table = sa.table(name, schema=schema or None)
    query: Any = sa.select(sa.literal_column("*")).select_from(table)
    engine_ = sa.create_engine(source.url or "")
    try:
        with engine_.connect() as conn:
            frame = pl.read_database(query, connection=conn, infer_schema_length=None)
    finally:
        engine_.dispose()
    if not isinstance(frame, pl.DataFrame):  # pragma: no cover - iter_batches is off
        raise ConfigError("unexpected batched read")
    return frame
