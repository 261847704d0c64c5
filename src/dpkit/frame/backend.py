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


def _run_starts(frame: pl.DataFrame, columns: list[str]) -> np.ndarray:
    """True where a row starts a new run of equal ``columns`` (nulls equal to nulls)."""
    cond = None
    for c in columns:
        changed = pl.col(c).ne_missing(pl.col(c).shift(1))
        cond = changed if cond is None else cond | changed
    assert cond is not None
    return np.asarray(frame.select(cond.fill_null(True)).to_series().to_numpy(), dtype=bool)


def _run_position(starts: np.ndarray) -> np.ndarray:
    """0, 1, 2, … within each run."""
    first = np.flatnonzero(starts)
    return np.arange(starts.size) - first[np.cumsum(starts) - 1]


def bound_polars(frame: pl.DataFrame, unit: str, key_columns: list[str], max_groups: int,
                 max_rows_per_group: int, max_rows: int, key: str) -> pl.DataFrame:
    """Polars fast path of contribution bounding: the rule of the narwhals window version
    in :func:`dpkit.frame.engine.bound_contributions` (per unit the G groups whose smallest
    row key is smallest, R rows with the smallest keys in each, M in all), computed with
    sorts and run arithmetic instead of windows (Polars' windows over ~10^5 units are slow).

    ``frame`` has unique random row keys in column ``key``.
    """
    s = frame.select(unit, *key_columns, key).with_row_index("__dpkit_i").sort(
        [unit, *key_columns, key])
    pair_start = _run_starts(s, [unit, *key_columns])
    keep = _run_position(pair_start) < max_rows_per_group
    per_unit = max_rows_per_group if not key_columns else None  # rows a unit can still have
    if key_columns and max_groups < max_rows:
        # each group's first row (in key order) carries its smallest key; rank the groups
        # of each unit by it and keep the first G
        pairs = s.filter(pl.Series(pair_start)).select(unit, key).with_row_index("__dpkit_p")
        pairs = pairs.sort([unit, key])
        rank = _run_position(_run_starts(pairs, [unit]))
        keep_pair = np.empty(rank.size, dtype=bool)
        keep_pair[pairs["__dpkit_p"].to_numpy()] = rank < max_groups
        keep &= keep_pair[np.cumsum(pair_start) - 1]
        per_unit = max_groups * max_rows_per_group
    kept = s.filter(pl.Series(keep))
    if per_unit is None or per_unit > max_rows:  # the M bound is not implied: apply it
        kept = kept.sort([unit, key])
        kept = kept.filter(pl.Series(_run_position(_run_starts(kept, [unit])) < max_rows))
    return frame[kept["__dpkit_i"].sort()]


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
