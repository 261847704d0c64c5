"""The data side of interface mode, written once against the narwhals lazy API.

The engine turns the private table into small exact integer arrays (counts, grid-integer sums,
binned counts per public group); it never decides a sensitivity and never draws noise. Its
only randomness is the choice of rows in contribution bounding, whose random column comes
from :mod:`dpkit.core.rng`. Polars is the embedded backend; any narwhals-supported lazy
frame goes through the same code.

Larger than memory. A Polars plan that reads a file (a CSV/Parquet path or a lazy scan
given to the session; :func:`is_scan`) stays lazy through the whole release: contribution
bounding is a lazy plan (:func:`backend.bound_polars_lazy`) instead of a table collected in
memory, and every collect of a release — the dry run, partition selection's counts, the
statistics — runs with Polars' streaming engine and returns only aggregated rows
(:func:`collect`). In-memory frames keep the in-memory path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import narwhals as nw
import numpy as np
import polars as pl

from dpkit.errors import ColumnError, DomainError
from dpkit.frame import backend
from dpkit.frame.aggregates import Statistic, StatKind
from dpkit.frame.privacy_unit import PrivacyUnit
from dpkit.frame.rowwise import check_step

__all__ = ["to_lazy", "to_polars", "apply_steps", "bound_contributions", "compute",
           "is_scan", "collect", "native_aggregates"]

_RAND = "__dpkit_rand"
_ROW = "__dpkit_row"
_PAIR = "__dpkit_pair"
_BIN = "__dpkit_bin"
_LEN = "__dpkit_len"
_FLAT = "__dpkit_flat"
_SCAN = re.compile(r"^\s*\w+ SCAN \[", re.MULTILINE)  # a file scan in Polars' plan text


def is_scan(lf: nw.LazyFrame) -> bool:
    """True when ``lf`` is a Polars plan that reads a file (``scan_parquet``, ``scan_csv``,
    ``scan_ipc``…, as the source or a joined table): such a plan is run with the streaming
    engine and never materialised. Reads no data (the unoptimised plan's text)."""
    if lf.implementation is not nw.Implementation.POLARS:
        return False
    return _SCAN.search(nw.to_native(lf).explain(optimized=False)) is not None


def collect(lf: nw.LazyFrame, streaming: bool | None = None) -> Any:
    """Collect ``lf`` (aggregated rows): with Polars' streaming engine when it reads a file
    (:func:`is_scan`; or when ``streaming`` says so), else with the backend's default."""
    if is_scan(lf) if streaming is None else streaming:
        return nw.from_native(nw.to_native(lf).collect(engine="streaming"))
    return lf.collect()


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
    try:
        frame = nw.from_native(data)
    except TypeError:
        raise DomainError(f"unsupported data of type {type(data).__name__}; pass a Polars "
                          "frame, a DuckDB relation, a Spark DataFrame or a CSV/Parquet "
                          "path") from None
    lazy = frame.lazy() if isinstance(frame, nw.DataFrame) else frame
    if lazy.implementation not in backend.SUPPORTED:
        lazy = nw.from_native(lazy.collect(backend="polars").to_native().lazy())
    return lazy


def apply_steps(lf: nw.LazyFrame, steps: Sequence[tuple[str, tuple[Any, ...], dict[str, Any]]],
                check: bool = True, unit: PrivacyUnit | str | None = None,
                bound_joins: bool = False, empty: bool = False) -> nw.LazyFrame:
    """Apply filter / with_columns / select steps. Polars expressions run natively on the
    Polars backend; narwhals expressions run on any backend. Each step is first checked to be
    row-wise (:mod:`dpkit.frame.rowwise`), since only row-wise steps are 1-stable. A private
    join bounds both sides to ``max_rows`` rows per unit first (see ``Query.join``) when
    ``bound_joins`` (at release; that reads the data) — planning only needs the schema.
    ``empty``: a private join's other side is taken on zero rows too (for dry runs)."""
    privacy_unit = unit if isinstance(unit, PrivacyUnit) else None
    unit = unit.column if isinstance(unit, PrivacyUnit) else unit
    for op, args, kwargs in steps:
        if op == "join_private":
            if privacy_unit is None:
                raise DomainError("a private join needs the session's privacy unit")
            other = args[0].lazy(bound_joins, empty=empty)
            if bound_joins:
                lf = bound_contributions(lf, privacy_unit, lf.collect_schema().names())
                other = bound_contributions(other, privacy_unit, other.collect_schema().names())
            lf = lf.join(other, on=kwargs["on"], how="inner")
            continue
        if op == "join":  # a public table with unique keys (checked by Query.join)
            lf = lf.join(backend.public_like(lf, args[0]), **kwargs)
            continue
        if op == "sample":  # a fresh key per call: every release draws its own sample
            lf = backend.sample_units(lf, unit, args[0])
            continue
        if op == "drop_nulls":
            lf = lf.drop_nulls()
            continue
        if check:
            check_step(op, args, kwargs, lf.collect_schema(), unit,
                       integers_wrap=lf.implementation is nw.Implementation.POLARS)
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


def bound_contributions(lf: nw.LazyFrame, unit: PrivacyUnit, columns: Sequence[str],
                        key_columns: Sequence[str] = ()) -> nw.LazyFrame:
    """Enforce the unit's contribution bounds in one pass over the data.

    Every row gets a unique random key (:func:`backend.with_row_keys`). Then, per unit: keep
    the G groups (of ``key_columns``) whose smallest row key is smallest, the R rows with the
    smallest keys in each kept group, and the M rows with the smallest keys overall. Keys
    are unique, so no rank ties and no unit can exceed a bound. The bounded table is
    materialised once (:func:`backend.materialise`), so every statistic of a release reads
    the same rows. Without ``key_columns`` the table is one group: min(M, R) rows per unit.
    A Polars plan over a file (:func:`is_scan`) is not materialised: it is bounded by a
    lazy plan with the same rule (:func:`backend.bound_polars_lazy`), deterministic given
    its salts, so that every collect of the release reads the same rows; the units are
    split into buckets bounded one after another to cap the memory
    (:func:`backend.stream_buckets`; one row count first). A Spark frame is bounded by one
    lazy plan too (:func:`backend.bound_spark`: one shuffle by unit, windows within it,
    row keys from a salted hash of the row, so every job of the release recomputes the
    same rows without a checkpoint).
    """
    if unit.column is None:
        return lf.select(list(dict.fromkeys(columns))) if columns else lf
    keep = list(dict.fromkeys([*columns, *key_columns, unit.column]))
    b = unit.bounds if key_columns else unit.bounds.single_group()
    if is_scan(lf) and pl.get_index_type() == pl.UInt32:
        native = nw.to_native(lf.select(keep))
        return nw.from_native(backend.bound_polars_lazy(
            native, unit.column, list(key_columns), b.max_groups, b.max_rows_per_group,
            b.max_rows, buckets=backend.stream_buckets(native)))
    if lf.implementation is nw.Implementation.POLARS:
        fast = backend.bound_polars(lf.select(keep).collect().to_native(), unit.column,
                                    list(key_columns), b.max_groups, b.max_rows_per_group,
                                    b.max_rows)
        return nw.from_native(fast.lazy())
    if lf.implementation is nw.Implementation.PYSPARK:
        return nw.from_native(backend.bound_spark(
            nw.to_native(lf.select(keep)), unit.column, list(key_columns), b.max_groups,
            b.max_rows_per_group, b.max_rows))
    frame = backend.with_row_keys(lf.select(keep), _RAND)
    pair = [unit.column, *key_columns]
    if key_columns and b.max_groups < b.max_rows:
        # a group's key is its smallest row key; keep the unit's G smallest
        frame = frame.with_columns(nw.col(_RAND).min().over(*pair).alias(_PAIR))
        frame = frame.filter(nw.col(_PAIR).rank("dense").over(unit.column) <= b.max_groups)
        frame = frame.drop(_PAIR)
    if key_columns and b.max_rows_per_group < b.max_rows:
        frame = frame.filter(nw.col(_RAND).rank("ordinal").over(*pair) <= b.max_rows_per_group)
    frame = frame.filter(nw.col(_RAND).rank("ordinal").over(unit.column) <= b.max_rows)
    return backend.materialise(frame.drop(_RAND))


def to_polars(frame: Any) -> pl.DataFrame:
    """A collected frame of any backend (narwhals, DuckDB, Spark result) as a Polars frame."""
    return frame.to_polars() if hasattr(frame, "to_polars") else pl.DataFrame(frame)


def _key_index(keys: pl.DataFrame, result: pl.DataFrame, key_cols: list[str]) -> pl.DataFrame:
    """Join a result onto the public keys; the row index ``_ROW`` gives each key's position."""
    casts = [pl.col(c).cast(result.schema[c]) for c in key_cols]
    indexed = keys.with_columns(casts).with_row_index(_ROW)
    return result.join(indexed, on=key_cols, how="inner")


def _scalar_exprs(stats: Sequence[Statistic], unit_column: str | None, filled: bool
                  ) -> list[nw.Expr]:
    """The aggregate expressions of the scalar statistics, named by their keys (nulls filled
    in the aggregate itself when ``filled``: the Polars backend)."""
    distinct = nw.col(unit_column).n_unique() if unit_column else nw.len()
    return [_filled(distinct if s.kind is StatKind.DISTINCT else s.expr, filled).alias(s.key)
            for s in stats if s.kind is not StatKind.BINS]


def native_aggregates(lf: nw.LazyFrame, stats: Sequence[Statistic],
                      unit_column: str | None = None) -> list[pl.Expr] | None:
    """The scalar statistics' aggregates of :func:`compute` as Polars expressions, or None
    (not a Polars plan, or a narwhals without the translation used here).

    Narwhals translates an expression anew on every ``select`` / ``agg`` (~1.5 ms for a
    mean or a grouped count and sum), although the translation is a function of the
    expression and the backend alone; a session translates once per plan key
    (:meth:`dpkit.frame.session.PlanMemo.value`) and :func:`compute` hands the result to
    Polars. A statistic that carries its own Polars form (:attr:`Statistic.native`, built
    by the code that built its narwhals form) is taken as it is. Reads no data.
    """
    if lf.implementation is not nw.Implementation.POLARS:
        return None
    scalar = [s for s in stats if s.kind is not StatKind.BINS]
    exprs = _scalar_exprs(scalar, unit_column, filled=True)
    out: list[pl.Expr] = []
    try:
        namespace = lf.__narwhals_namespace__()
        for s, e in zip(scalar, exprs, strict=True):
            if s.native is not None:  # built in Polars' own form too (aggregates._ns)
                out.append(s.native.fill_null(0).alias(s.key))
            else:  # narwhals' expression → its Polars form (the step of its own select)
                compliant: Any = e._to_compliant_expr(namespace)
                out.append(compliant.native)
    except AttributeError:  # another narwhals: compute translates through narwhals
        return None
    return out


def _native_plan(lf: nw.LazyFrame, keys: pl.DataFrame | None, native: list[pl.Expr]
                 ) -> pl.LazyFrame:
    """The Polars plan of :func:`compute`'s scalar statistics: the aggregate, and with
    ``keys`` its join onto them (as :func:`_key_index`, in the same collect)."""
    inner = nw.to_native(lf)
    if keys is None or not keys.columns:
        return inner.select(native)
    key_cols = list(keys.columns)
    schema = inner.collect_schema()  # the result's key types: the grouped columns'
    index = keys.lazy().with_columns(pl.col(c).cast(schema[c]) for c in key_cols)
    return inner.group_by(key_cols).agg(native).join(index.with_row_index(_ROW),
                                                     on=key_cols, how="inner")


def _flat_plan(lf: nw.LazyFrame, stats: Sequence[Statistic]) -> pl.LazyFrame | None:
    """The statistics' flat forms (:attr:`Statistic.flat`: numpy kernels over the whole
    table, the same integers as their Polars forms) as one Polars plan, each shared
    kernel evaluated once (Polars does not merge equal Python calls); None unless every
    statistic has one.

    For an ungrouped plan over a table in memory only: in a group-by Polars would call a
    kernel once per group, and over a scan it would gather the column. :func:`compute`
    collects it with Polars' in-memory engine: the streaming engine (the default) splits
    the column into morsels and costs ~0.4 ms more per call (Polars 2.1, 10^6 values). A
    plan with any other statistic keeps the Polars forms."""
    columns: dict[int, str] = {}  # a kernel's identity → its column
    kernels: list[pl.Expr] = []
    fields: list[pl.Expr] = []
    for s in stats:
        if s.flat is None:
            return None
        expr, name = s.flat
        if id(expr) not in columns:  # a kernel two statistics share is evaluated once
            columns[id(expr)] = f"{_FLAT}{len(columns)}"
            kernels.append(expr.alias(columns[id(expr)]))
        value = pl.col(columns[id(expr)])
        fields.append((value if name is None else value.struct.field(name)).alias(s.key))
    return nw.to_native(lf).select(kernels).select(fields)


def compute(lf: nw.LazyFrame, keys: pl.DataFrame | None, stats: Sequence[Statistic],
            unit_column: str | None = None, streaming: bool | None = None,
            native: list[pl.Expr] | None = None) -> dict[str, np.ndarray]:
    """Exact statistics per public group, aligned with the rows of ``keys``.

    Returns arrays of int64: shape (G,) for ``count``/``sum``/``distinct`` (privacy units:
    ``unit_column``'s distinct values, or rows) statistics and (G, n_bins) for ``bins``
    statistics, G = len(keys) (1 without group-by). Rows whose keys are not in
    ``keys`` are dropped; keys absent from the data get zeros. Each collect streams as
    :func:`collect` decides (``streaming``: None for "when ``lf`` reads a file").
    ``native``: :func:`native_aggregates` of the same statistics, when ``lf`` is a Polars
    plan (the aggregation then skips narwhals' translation; without ``keys``, over a table
    in memory, the statistics' flat forms are collected instead when all have one,
    :func:`_flat_plan`).
    """
    key_cols = list(keys.columns) if keys is not None else []
    groups = len(keys) if keys is not None else 1
    out: dict[str, np.ndarray] = {}
    scalar = [s for s in stats if s.kind is not StatKind.BINS]
    if scalar:
        # on Polars the nulls are filled in the aggregate's own collect (one collect, no
        # per-column pass afterwards); the fill depends on the backend, never on the data
        filled = lf.implementation is nw.Implementation.POLARS
        if filled and native is not None:
            stream = is_scan(lf) if streaming is None else streaming
            flat = None if key_cols or stream else _flat_plan(lf, scalar)
            if flat is not None:  # one group, in memory, every statistic a numpy kernel
                joined = flat.collect(engine="in-memory")
            else:
                plan = _native_plan(lf, keys, native)  # collected as collect() would
                joined = plan.collect(engine="streaming") if stream else plan.collect()
        elif key_cols:
            exprs = _scalar_exprs(stats, unit_column, filled)
            res = to_polars(collect(lf.group_by(key_cols).agg(*exprs), streaming))
            joined = _key_index(keys, res, key_cols)  # type: ignore[arg-type]
        else:
            exprs = _scalar_exprs(stats, unit_column, filled)
            joined = to_polars(collect(lf.select(*exprs), streaming))
        rows = joined[_ROW].to_numpy() if key_cols else np.zeros(len(joined), np.int64)
        for s in scalar:
            arr = np.zeros(groups, dtype=np.int64)
            arr[rows] = _saturated(joined[s.key], filled)
            out[s.key] = arr
    for s in (s for s in stats if s.kind is StatKind.BINS):
        binned = lf.with_columns(s.bin_expr.alias(_BIN)).group_by([*key_cols, _BIN]).agg(
            nw.len().alias(_LEN))
        res = to_polars(collect(binned, streaming)).filter(
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


_SATURATE = (1 << 62) - 1  # |exact statistic| beyond this is reported as ±this


def _filled(expr: nw.Expr, filled: bool) -> nw.Expr:
    """``expr`` with nulls as 0 when ``filled`` (the Polars backend), else ``expr``."""
    return expr.fill_null(0) if filled else expr


def _saturated(values: pl.Series, filled: bool = False) -> np.ndarray:
    """Exact integer statistics as int64, nulls as 0, anything beyond ±(2^62 − 1) saturated
    there (a 1-Lipschitz map: it never increases a sensitivity). A backend may return a
    wider type than Int64 (DuckDB sums to HUGEINT), and converting such a value must not
    fail on the data after the debit. ``filled``: the collect already filled the nulls
    (:func:`_filled`), so the integer path is numpy only (no Polars pass per column)."""
    if values.dtype in (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32):
        ints = (values if filled else values.fill_null(0)).to_numpy().astype(np.int64)
        return np.clip(ints, -_SATURATE, _SATURATE, out=ints)
    v = pl.col("v")
    wide = v.cast(pl.Int128, strict=False)  # exact for every integer below 2^127
    sign = v.cast(pl.Float64, strict=False)  # beyond: only the sign matters
    out = pl.DataFrame({"v": values}).select(
        pl.when(v.is_null()).then(0)
        .when(wide.is_not_null()).then(wide.clip(-_SATURATE, _SATURATE))
        .when(sign > 0).then(_SATURATE).otherwise(-_SATURATE).cast(pl.Int64))
    return out.to_series().to_numpy()


def dry_run(empty: nw.LazyFrame, keys: pl.DataFrame | None, stats: Sequence[Statistic],
            unit_column: str | None, key_columns: Sequence[str] = (),
            streaming: bool = False,
            native: Callable[[], list[pl.Expr] | None] | None = None) -> None:
    """Run the data side on ``empty``, the query's steps applied to zero rows of its tables
    (:meth:`dpkit.frame.Query.lazy` with ``empty=True``; reads no row), so that every
    failure that does not depend on the data (a type mismatch, a bound the column type
    cannot hold, a backend's binding error) refuses the release *before* its debit. With
    ``streaming`` (the release reads a file, :func:`is_scan` of its plan: Polars turns zero
    rows of a scan into an in-memory frame) it runs the streaming engine and the streaming
    bounding plan (every rule of it) as the release will; a Spark plan is bounded by the
    Spark plan (:func:`backend.bound_spark`, every rule) on its zero rows. ``native``:
    gives the statistics' Polars forms that the release will collect
    (:func:`native_aggregates`), asked for once the narwhals forms ran (a refused plan is
    never translated); they run too (an ungrouped plan in memory runs its flat forms,
    :func:`_flat_plan`), as the release will.

    Raises
    ------
    DomainError
        Naming the failure's type and its first line (no data has been read).
    """
    try:
        if keys is None and key_columns:  # keys chosen later by partition selection
            keys = to_polars(collect(empty.select(list(key_columns)), streaming))
        if unit_column is not None and streaming and pl.get_index_type() == pl.UInt32:
            empty = nw.from_native(backend.bound_polars_lazy(  # as the release will bound
                nw.to_native(empty), unit_column, list(key_columns), 2, 2, 3,
                words=pl.lit(0, pl.UInt32), buckets=2))
        if unit_column is not None and empty.implementation is nw.Implementation.PYSPARK:
            empty = nw.from_native(backend.bound_spark(  # Spark analyses the plan here
                nw.to_native(empty), unit_column, list(key_columns), 2, 2, 3, salt=0))
        compute(empty, keys, stats, unit_column, streaming)
        forms = None if native is None else native()  # translated once this passed
        if forms is not None:  # the Polars forms (or the flat ones), as the release runs
            compute(empty, keys, stats, unit_column, streaming, native=forms)
    except DomainError:
        raise
    except (Exception, pl.exceptions.PanicException) as exc:  # zero rows: no data to quote
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise DomainError(f"the query does not run on this table's schema: "
                          f"{type(exc).__name__}: {first}") from None


def partition_counts(lf: nw.LazyFrame, key_columns: Sequence[str], unit_column: str | None,
                     streaming: bool | None = None) -> pl.DataFrame:
    """Distinct privacy units per group key present in the data (column ``__dpkit_units``);
    rows are units when ``unit_column`` is None. Collected as :func:`collect` decides."""
    n = nw.col(unit_column).n_unique() if unit_column else nw.len()
    res = collect(lf.group_by(list(key_columns)).agg(n.alias("__dpkit_units")), streaming)
    return to_polars(res).sort(list(key_columns), nulls_last=True)


def check_columns(schema: nw.Schema, columns: Sequence[str]) -> None:
    """Raise :class:`ColumnError` naming any column missing from ``schema``."""
    for c in columns:
        if c not in schema:
            raise ColumnError(f"unknown column {c!r}; available: {', '.join(schema)}")
