"""The data side of interface mode, written once against the narwhals lazy API.

The engine turns the private table into small exact integer arrays (counts, grid-integer sums,
binned counts per public group); it never decides a sensitivity and never draws noise. Its
only randomness is the choice of rows in contribution bounding, whose random column comes
from :mod:`dpkit.core.rng`. Polars is the embedded backend; any narwhals-supported lazy
frame goes through the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import narwhals as nw
import numpy as np
import polars as pl

from dpkit.core import rng
from dpkit.errors import ColumnError, DomainError
from dpkit.frame.aggregates import Statistic
from dpkit.frame.privacy_unit import PrivacyUnit
from dpkit.frame.rowwise import check_rowwise, check_unit_column

__all__ = ["to_lazy", "apply_steps", "bound_contributions", "compute"]

_RAND = "__dpkit_rand"
_ROW = "__dpkit_row"
_BIN = "__dpkit_bin"
_LEN = "__dpkit_len"


def to_lazy(data: Any) -> nw.LazyFrame:
    """A narwhals LazyFrame over a Polars frame, a CSV/Parquet path or any native frame."""
    if isinstance(data, str | Path):
        path = Path(data)
        if not path.exists():
            raise DomainError(f"no such file: {path}")
        if path.suffix.lower() == ".csv":
            return nw.from_native(pl.scan_csv(path))
        if path.suffix.lower() in (".parquet", ".pq"):
            return nw.from_native(pl.scan_parquet(path))
        raise DomainError(f"unsupported file type {path.suffix!r}; use .csv or .parquet")
    if isinstance(data, pl.DataFrame):
        return nw.from_native(data.lazy())
    frame = nw.from_native(data)
    return frame.lazy() if isinstance(frame, nw.DataFrame) else frame


def apply_steps(lf: nw.LazyFrame, steps: Sequence[tuple[str, tuple[Any, ...], dict[str, Any]]],
                check: bool = True, unit: str | None = None) -> nw.LazyFrame:
    """Apply filter / with_columns / select steps. Polars expressions run natively on the
    Polars backend; narwhals expressions run on any backend. Each step is first checked to be
    row-wise (:mod:`dpkit.frame.rowwise`), since only row-wise steps are 1-stable."""
    for op, args, kwargs in steps:
        if check:
            check_unit_column(op, args, kwargs, unit)
            check_rowwise(op, args, kwargs, lf.collect_schema())
        native = any(isinstance(a, pl.Expr) for a in (*args, *kwargs.values()))
        if native:
            inner = nw.to_native(lf)
            if not isinstance(inner, pl.LazyFrame):
                raise DomainError("Polars expressions need a Polars-backed session; use "
                                  "narwhals expressions (import narwhals as nw) for others")
            lf = nw.from_native(getattr(inner, op)(*args, **kwargs))
        else:
            lf = getattr(lf, op)(*args, **kwargs)
    return lf


def bound_contributions(lf: nw.LazyFrame, unit: PrivacyUnit, columns: Sequence[str]
                        ) -> nw.LazyFrame:
    """Keep at most ``unit.max_rows`` rows per unit, chosen uniformly at random.

    The table (restricted to ``columns``) is materialised once, a random 64-bit key from the
    CSPRNG is attached to every row, and the rows of rank ≤ max_rows within each unit are
    kept; every statistic of a release then reads the same bounded rows.
    """
    if unit.column is None:
        return lf.select(list(dict.fromkeys(columns))) if columns else lf
    keep = list(dict.fromkeys([*columns, unit.column]))
    frame = lf.select(keep).collect()
    rand = nw.new_series(_RAND, rng.words(len(frame)), nw.UInt64,
                         backend=nw.get_native_namespace(frame))
    bounded = (
        frame.with_columns(rand)
        .filter(nw.col(_RAND).rank("ordinal").over(unit.column) <= unit.max_rows)
        .drop(_RAND)
    )
    return bounded.lazy()


def _to_polars(frame: Any) -> pl.DataFrame:
    return frame.to_polars() if hasattr(frame, "to_polars") else pl.DataFrame(frame)


def _key_index(keys: pl.DataFrame, result: pl.DataFrame, key_cols: list[str]) -> pl.DataFrame:
    """Join a result onto the public keys; the row index ``_ROW`` gives each key's position."""
    casts = [pl.col(c).cast(result.schema[c]) for c in key_cols]
    indexed = keys.with_columns(casts).with_row_index(_ROW)
    return result.join(indexed, on=key_cols, how="inner")


def compute(lf: nw.LazyFrame, keys: pl.DataFrame | None, stats: Sequence[Statistic]
            ) -> dict[str, np.ndarray]:
    """Exact statistics per public group, aligned with the rows of ``keys``.

    Returns arrays of int64: shape (G,) for ``count``/``sum`` statistics and (G, n_bins) for
    ``bins`` statistics, G = len(keys) (1 without group-by). Rows whose keys are not in
    ``keys`` are dropped; keys absent from the data get zeros.
    """
    key_cols = list(keys.columns) if keys is not None else []
    groups = len(keys) if keys is not None else 1
    out: dict[str, np.ndarray] = {}
    scalar = [s for s in stats if s.kind in ("count", "sum")]
    if scalar:
        exprs = [s.expr.alias(s.key) for s in scalar]
        if key_cols:
            res = _to_polars(lf.group_by(key_cols).agg(*exprs).collect())
            joined = _key_index(keys, res, key_cols)  # type: ignore[arg-type]
            rows = joined[_ROW].to_numpy()
        else:
            joined = _to_polars(lf.select(*exprs).collect())
            rows = np.zeros(len(joined), dtype=np.int64)
        for s in scalar:
            arr = np.zeros(groups, dtype=np.int64)
            arr[rows] = joined[s.key].fill_null(0).to_numpy().astype(np.int64)
            out[s.key] = arr
    for s in (s for s in stats if s.kind == "bins"):
        binned = lf.with_columns(s.bin_expr.alias(_BIN)).group_by([*key_cols, _BIN]).agg(
            nw.len().alias(_LEN))
        res = _to_polars(binned.collect()).filter(
            (pl.col(_BIN) >= 0) & (pl.col(_BIN) < s.n_bins))
        if key_cols:
            res = _key_index(keys, res, key_cols)  # type: ignore[arg-type]
            rows = res[_ROW].to_numpy()
        else:
            rows = np.zeros(len(res), dtype=np.int64)
        arr = np.zeros((groups, s.n_bins), dtype=np.int64)
        np.add.at(arr, (rows, res[_BIN].to_numpy()), res[_LEN].to_numpy().astype(np.int64))
        out[s.key] = arr
    return out


def check_columns(schema: Any, columns: Sequence[str]) -> None:
    """Raise :class:`ColumnError` naming any column missing from ``schema``."""
    for c in columns:
        if c not in schema:
            raise ColumnError(f"unknown column {c!r}; available: {', '.join(schema)}")
