"""The only backend-specific code of the data side (DESIGN.md §2): unique random row keys for
contribution bounding, materialising the bounded table, and public tables for joins.

Row keys must be *unique* (so that "the G groups with the smallest key" never ties) and
their order random and independent of other units' data. All randomness comes from
:mod:`dpkit.core.rng`:

- Polars: a CSPRNG word per row with its low bits replaced by the row index.
- DuckDB: the same layout with the high bits from DuckDB's ``hash`` of (CSPRNG salt,
  row number) — a keyed pseudo-random order; the row number makes keys unique.
- Spark: the string ``hex(xxhash64(salt, id)) ‖ hex(id)`` with ``id`` Spark's
  ``monotonically_increasing_id`` (unique), so keys are unique and ordered by the keyed
  hash. The keyed frame is checkpointed so every later read sees the same keys.

The salt only decides which rows are kept; privacy never depends on the choice being
uniform, only on every unit respecting the bounds, which uniqueness guarantees.
"""

from __future__ import annotations

from typing import Any

import narwhals as nw
import numpy as np
import polars as pl

from dpkit.core import rng
from dpkit.errors import DomainError

__all__ = ["with_row_keys", "materialise", "public_like", "bound_polars", "SUPPORTED"]

SUPPORTED = (nw.Implementation.POLARS, nw.Implementation.DUCKDB, nw.Implementation.PYSPARK)
_DUCKDB_ROW_BITS = 40  # row numbers below 2^40 (10^12 rows)


def _salt() -> int:
    return int(rng.words(1)[0] >> np.uint64(2))  # fits a signed 64-bit literal


def with_row_keys(lf: nw.LazyFrame, name: str) -> nw.LazyFrame:
    """``lf`` with a column ``name`` of unique keys in random order (module docstring)."""
    impl = lf.implementation
    if impl is nw.Implementation.POLARS:
        frame = lf.collect()
        n = len(frame)
        low = np.uint64(max(n.bit_length(), 1))
        keys = (rng.words(n) >> low << low) | np.arange(n, dtype=np.uint64)
        series = nw.new_series(name, keys, nw.UInt64, backend=nw.get_native_namespace(frame))
        return frame.with_columns(series).lazy()
    if impl is nw.Implementation.DUCKDB:
        rel = nw.to_native(lf)
        bits = _DUCKDB_ROW_BITS
        rn = "(row_number() OVER ())::UBIGINT"
        expr = (f"((hash({_salt()}::UBIGINT, {rn}) >> {bits}) << {bits}) | {rn}")
        return nw.from_native(rel.project(f'*, {expr} AS "{name}"'))
    if impl is nw.Implementation.PYSPARK:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

        df = nw.to_native(lf).withColumn("__dpkit_id", F.monotonically_increasing_id())
        ident = F.col("__dpkit_id")
        key = F.concat(F.lpad(F.hex(F.xxhash64(F.lit(_salt()), ident)), 16, "0"),
                       F.lpad(F.hex(ident), 16, "0"))
        df = df.withColumn(name, key).drop("__dpkit_id").localCheckpoint(eager=True)
        return nw.from_native(df)
    raise DomainError(f"backend {impl} is not supported; use Polars, DuckDB or Spark")


def bound_polars(frame: pl.DataFrame, unit: str, key_columns: list[str], max_groups: int,
                 max_rows_per_group: int, max_rows: int, key: str) -> pl.DataFrame:
    """Polars fast path of contribution bounding (same rule as the narwhals window version
    in :func:`dpkit.frame.engine.bound_contributions`, several times faster: Polars' windows
    over ~10^5 units are slow, its grouped ``head`` is not).

    ``frame`` has unique random row keys in column ``key``. Sorted by key, a group's first
    row carries its smallest key, so taking heads of each unit's groups / rows in that order
    keeps the G groups with the smallest keys, R rows of each and M rows in all.
    """
    x = frame.sort(key)
    if key_columns and max_groups < max_rows:
        pairs = (x.select(unit, *key_columns).unique(keep="first", maintain_order=True)
                 .group_by(unit, maintain_order=True).head(max_groups))
        x = x.join(pairs, on=[unit, *key_columns], how="semi", nulls_equal=True)
    if key_columns and max_rows_per_group < max_rows:
        x = x.group_by(unit, *key_columns, maintain_order=True).head(max_rows_per_group)
    x = x.group_by(unit, maintain_order=True).head(max_rows)
    return x.select(frame.columns)


def materialise(lf: nw.LazyFrame) -> nw.LazyFrame:
    """Compute ``lf`` once, so every statistic of a release reads the same rows."""
    impl = lf.implementation
    if impl is nw.Implementation.POLARS:
        return lf.collect().lazy()
    if impl is nw.Implementation.DUCKDB:
        import duckdb

        return nw.from_native(duckdb.from_arrow(nw.to_native(lf).to_arrow_table()))
    if impl is nw.Implementation.PYSPARK:
        return nw.from_native(nw.to_native(lf).localCheckpoint(eager=True))
    raise DomainError(f"backend {impl} is not supported; use Polars, DuckDB or Spark")


def public_like(lf: nw.LazyFrame, table: pl.DataFrame) -> nw.LazyFrame:
    """A public Polars table as a lazy frame of ``lf``'s backend (for joins)."""
    impl = lf.implementation
    if impl is nw.Implementation.POLARS:
        return nw.from_native(table.lazy())
    if impl is nw.Implementation.PYSPARK:
        session: Any = nw.to_native(lf).sparkSession
        return nw.from_native(table).lazy(backend=impl, session=session)
    return nw.from_native(table).lazy(backend=impl)
