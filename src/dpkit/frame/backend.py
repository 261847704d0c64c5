"""The only backend-specific code of the data side (DESIGN.md §2): unique random row keys for
contribution bounding, materialising the bounded table, and public tables for joins.

Row keys must be *unique* (so that "the G groups with the smallest key" never ties) and
their order random and independent of other units' data. All randomness comes from
:mod:`dpkit.core.rng`:

- Polars (:func:`bound_polars`): a CSPRNG word per row, ties broken by the row index.
- Polars over a scan (:func:`bound_polars_lazy`, streaming): the same layout, the word being
  the high 32 bits of Polars' ``hash`` of (row index XOR a CSPRNG salt) under a second
  CSPRNG salt — a keyed pseudo-random order, like DuckDB's; the plan stays lazy.
- DuckDB: the same layout with the high bits from DuckDB's ``hash`` of (CSPRNG salt,
  row number) — a keyed pseudo-random order; the row number makes keys unique.
- Spark (:func:`bound_spark`): the key is (``xxhash64(salt, row)``, the row's values), a
  keyed pseudo-random order that is a total order on distinct rows and needs no row number,
  so the plan is recomputed identically by every job of a release (no checkpoint, no cache);
  one shuffle (rows repartitioned by unit) and window functions within each partition.

The salt only decides which rows are kept; privacy never depends on the choice being
uniform, only on every unit respecting the bounds, which uniqueness guarantees.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import narwhals as nw
import numpy as np
import polars as pl

from dpkit.core import rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import AddRemoveDistance, HammingDistance
from dpkit.core.subsampling import amplified_epsilon
from dpkit.errors import DomainError
from dpkit.mechanisms import make_noise
from dpkit.mechanisms.registry import AuditCase, register

__all__ = ["sample_units", "sample_fixed_units", "keep_threshold", "with_row_keys",
           "materialise", "public_like",
           "bound_polars", "bound_polars_lazy",
           "bound_spark", "stream_buckets", "SUPPORTED"]

SUPPORTED = (nw.Implementation.POLARS, nw.Implementation.DUCKDB, nw.Implementation.PYSPARK)
_SAMPLE_ROW = "__dpkit_sample_row"  # DuckDB's row number while sampling row-level units
_DUCKDB_ROW_BITS = 40  # row numbers below 2^40 (10^12 rows)


def _salt() -> int:
    return int(rng.words(1)[0] >> np.uint64(2))  # fits a signed 64-bit literal


def keep_threshold(rate: Fraction) -> int:
    """⌊p · 2⁶⁴⌋: a uniform 64-bit word is below it with probability ≤ p (within 2⁻⁶⁴), so
    the amplification charged at p is never too small (it is increasing in p)."""
    return rate.numerator * (1 << 64) // rate.denominator


def sample_units(lf: nw.LazyFrame, unit: str | None, rate: Fraction) -> nw.LazyFrame:
    """Poisson sampling of the privacy units (``Query.sample``): keep a unit's rows when a
    keyed 64-bit hash of its id (of the row index for row-level units, ``unit`` None) is below
    :func:`keep_threshold`. The key is drawn from :mod:`dpkit.core.rng` on every call, so
    every release draws its own sample; within a release the lazy plan holds one key, so
    every read of it sees the same sample (as contribution bounding's row keys). A null id
    is one unit. The hash is the backend's own keyed hash (Polars' ``hash`` of the id's hash XOR a
    CSPRNG word, under CSPRNG seeds, DuckDB's ``hash`` of (key, id), Spark's ``xxhash64``):
    pseudo-random, not a PRF —
    its law (each unit kept with probability p) is what ``tests/test_sampling.py`` checks."""
    if rate == 1:
        return lf
    limit = keep_threshold(rate)
    impl = lf.implementation
    if impl is nw.Implementation.POLARS:
        keep = _keyed(_ident(unit)) < pl.lit(limit, pl.UInt64)
        return nw.from_native(nw.to_native(lf).filter(keep))
    if impl is nw.Implementation.DUCKDB:
        rel = nw.to_native(lf)
        below = f"< {limit}::UBIGINT"
        if unit is not None:
            quoted = unit.replace('"', '""')
            return nw.from_native(rel.filter(f'hash({_salt()}::UBIGINT, "{quoted}") {below}'))
        # a window cannot sit in WHERE: number the rows first, then drop the number
        columns = ", ".join('"' + c.replace('"', '""') + '"' for c in rel.columns)
        numbered = rel.project(f'*, row_number() OVER () AS "{_SAMPLE_ROW}"')
        kept = numbered.filter(f'hash({_salt()}::UBIGINT, "{_SAMPLE_ROW}") {below}')
        return nw.from_native(kept.project(columns))
    if impl is nw.Implementation.PYSPARK:
        from pyspark.sql import functions as F  # noqa: N812 - the usual alias
        if unit is None:  # Spark has no stable row number; equal rows would be sampled alike
            raise DomainError("sample() on Spark needs a privacy unit column "
                              "(PrivacyUnit.by(...))")
        ident_col = F.col(unit)
        signed = F.xxhash64(F.lit(_salt()), ident_col)  # a signed word: shift to unsigned
        return nw.from_native(nw.to_native(lf).filter(signed < F.lit(limit - (1 << 63))))
    raise DomainError(f"backend {impl} is not supported; use Polars, DuckDB or Spark")


def _ident(unit: str | None) -> pl.Expr:
    """The unit id of a row: its unit column, or its row index for row-level units."""
    return pl.col(unit) if unit is not None else pl.int_range(pl.len(), dtype=pl.UInt64)


def _keyed(ident: pl.Expr) -> pl.Expr:
    """A keyed 64-bit hash of ``ident`` under three fresh CSPRNG words (as
    bound_polars_lazy's row keys): one key per call, so one per release."""
    s0, s1, s2 = (int(w) for w in rng.words(3))
    return (ident.hash(s0) ^ pl.lit(s1, pl.UInt64)).hash(s2)


def _keyed_rank(ident: pl.Expr) -> pl.Expr:
    """The dense rank (1, 2, …) of ``ident``'s keyed hash (:func:`_keyed`, a fresh key):
    rows of one unit share it, so rank ≤ n keeps the n units of smallest hash (all of them
    when fewer exist)."""
    return _keyed(ident).rank("dense")


def sample_fixed_units(lf: nw.LazyFrame, unit: str | None, n: int) -> nw.LazyFrame:
    """Sampling of n privacy units without replacement: the units (all rows of each) whose
    keyed 64-bit hash (:func:`sample_units`' hash under a fresh CSPRNG key) ranks among the n
    smallest; every unit when fewer than n exist (the data side is total).

    If the keyed hash were a PRF the ranking would be a uniformly random order of the units,
    so the kept set is uniform over the n-subsets, up to hash collisions between distinct
    units (probability ≤ N²/2⁶⁵; two colliding units share a rank and are kept or dropped
    together). Polars' hash is pseudo-random, not a PRF: the law is what
    ``tests/test_sampling.py`` checks (a χ² test over every n-subset of a small population).
    The amplification it carries holds for substitute-one neighbours on a public population
    of N units only (:func:`dpkit.core.subsampling.amplify_without_replacement`), which is
    why ``Query.sample(n=…)`` refuses a session (add/remove-one units): this function is
    the data side of the audit case and of library code that states that relation.

    Raises
    ------
    DomainError
        n < 1, or a backend other than Polars (no session reaches it, see above).
    """
    size = int(n)
    if size < 1:
        raise DomainError(f"the sample size must be ≥ 1, got {n!r}")
    if lf.implementation is not nw.Implementation.POLARS:
        raise DomainError("sampling without replacement runs on Polars frames only")
    keep = _keyed_rank(_ident(unit)) <= size
    return nw.from_native(nw.to_native(lf).filter(keep))


def with_row_keys(lf: nw.LazyFrame, name: str) -> nw.LazyFrame:
    """``lf`` (DuckDB) with a column ``name`` of unique keys in random order (module
    docstring); Polars frames are bounded by :func:`bound_polars` and Spark frames by
    :func:`bound_spark` directly."""
    impl = lf.implementation
    if impl is nw.Implementation.DUCKDB:
        rel = nw.to_native(lf)
        bits = _DUCKDB_ROW_BITS
        rn = "(row_number() OVER ())::UBIGINT"
        expr = (f"((hash({_salt()}::UBIGINT, {rn}) >> {bits}) << {bits}) | {rn}")
        return nw.from_native(rel.project(f'*, {expr} AS "{name}"'))
    raise DomainError(f"backend {impl} is not supported; use Polars, DuckDB or Spark")


def _run_starts(frame: pl.DataFrame, columns: list[str]) -> np.ndarray:
    """True where a row starts a new run of equal ``columns`` (nulls equal to nulls)."""
    cond = None
    for c in columns:
        changed = pl.col(c).ne_missing(pl.col(c).shift(1))
        cond = changed if cond is None else cond | changed
    assert cond is not None
    starts = np.asarray(frame.select(cond.fill_null(True)).to_series().to_numpy(), dtype=bool)
    starts[:1] = True  # row 0 starts a run even when its values are null (shift gives null)
    return starts


def _changes(values: np.ndarray) -> np.ndarray:
    """True where a sorted array's value differs from the previous one (and at 0)."""
    starts = np.empty(values.size, dtype=bool)
    starts[:1] = True
    np.not_equal(values[1:], values[:-1], out=starts[1:])
    return starts


def _run_position(starts: np.ndarray) -> np.ndarray:
    """0, 1, 2, … within each run."""
    index = np.arange(starts.size)
    run_first = index * starts  # a run's first index, carried forward by the running max
    np.maximum.accumulate(run_first, out=run_first)
    return np.subtract(index, run_first, out=run_first)


def _offsets(column: pl.Series) -> tuple[np.ndarray, int] | None:
    """An integer column without nulls as uint64 offsets from its minimum and their bit
    width; None for other columns (they take the sort path)."""
    if not column.dtype.is_integer() or column.null_count() or column.len() == 0:
        return None
    low, high = int(column.min()), int(column.max())  # type: ignore[arg-type]
    if high >= 1 << 63:
        return None
    values = column.cast(pl.Int64).to_numpy()  # a uint64 column above 2^63 fails its range
    return (values - low).view(np.uint64), max((high - low).bit_length(), 1)


def _sort_packed(high: np.ndarray, high_bits: int, rand: np.ndarray, rand_bits: int,
                 index: np.ndarray | None = None, index_bits: int = 0,
                 ) -> tuple[np.ndarray, int]:
    """Items packed as (``high``, low ``rand_bits`` of ``rand``, ``index`` — by default the
    position) into one uint64 and sorted (one ``np.sort`` instead of a multi-column sort);
    also the index's bit width."""
    if index is None:
        index, index_bits = np.arange(high.size, dtype=np.uint64), (high.size - 1).bit_length()
    index_bits = max(index_bits, 1)
    assert high_bits + rand_bits + index_bits <= 64
    packed = high << np.uint64(rand_bits + index_bits)
    low = rand & np.uint64((1 << rand_bits) - 1)
    low <<= np.uint64(index_bits)
    low |= index
    packed |= low
    packed.sort()
    return packed, index_bits


def _field(packed: np.ndarray, shift: int, bits: int | None = None) -> np.ndarray:
    """Bits ``shift`` … ``shift + bits`` of each packed word (to the top when ``bits`` is None)."""
    out = packed >> np.uint64(shift)
    if bits is not None:
        out &= np.uint64((1 << bits) - 1)
    return out


_MIN_RAND_BITS = 8


def _bound_packed(frame: pl.DataFrame, unit: str, key_columns: list[str], max_groups: int,
                  max_rows_per_group: int, max_rows: int, rand: np.ndarray,
                  ) -> np.ndarray | None:
    """A mask of the rows kept by the bounding rule, with (unit, group, random bits, row) packed
    into one uint64 per row; None unless the columns are null-free integers whose ranges
    leave at least ``_MIN_RAND_BITS`` random bits."""
    found = [_offsets(frame[c]) for c in (unit, *key_columns)]
    codes = [c for c in found if c is not None]
    if len(codes) != len(found):
        return None
    n = frame.height
    (pair, unit_bits), *groups = codes
    group_bits = sum(b for _, b in groups)
    rand_bits = min(64 - unit_bits - group_bits - max((n - 1).bit_length(), 1), 32)
    if rand_bits < _MIN_RAND_BITS:
        return None
    rand = rand.astype(np.uint64)
    for code, bits in groups:  # (unit, group) as one integer
        pair = (pair << np.uint64(bits)) | code
    packed, index_bits = _sort_packed(pair, unit_bits + group_bits, rand, rand_bits)
    starts = _changes(_field(packed, rand_bits + index_bits))  # a (unit, group) run starts
    keep = _run_position(starts) < max_rows_per_group
    per_unit = max_rows_per_group if not key_columns else None
    unit_shift = rand_bits + index_bits + group_bits
    if key_columns and max_groups < max_rows:
        # each (unit, group)'s first row carries its smallest key; rank a unit's groups by
        # it and keep the first G
        first = packed[starts]
        by_unit, bits = _sort_packed(_field(first, unit_shift), unit_bits,
                                     _field(first, index_bits), rand_bits)
        rank = _run_position(_changes(_field(by_unit, rand_bits + bits)))
        keep_pair = np.empty(first.size, dtype=bool)
        keep_pair[_field(by_unit, 0, bits)] = rank < max_groups
        keep &= keep_pair[np.cumsum(starts) - 1]
        per_unit = max_groups * max_rows_per_group
    packed = packed[keep]
    if per_unit is None or per_unit > max_rows:  # the M bound is not implied: apply it
        packed, _ = _sort_packed(_field(packed, unit_shift), unit_bits, _field(
            packed, index_bits), rand_bits, _field(packed, 0, index_bits), index_bits)
        packed = packed[_run_position(_changes(_field(packed, rand_bits + index_bits)))
                        < max_rows]
    mask = np.zeros(n, dtype=bool)
    mask[_field(packed, 0, index_bits).view(np.int64)] = True
    return mask


def _bound_sorted(frame: pl.DataFrame, unit: str, key_columns: list[str], max_groups: int,
                  max_rows_per_group: int, max_rows: int, rand: np.ndarray) -> np.ndarray:
    """A mask of the rows kept by the bounding rule, by Polars multi-column sorts (any column
    types, nulls equal to nulls); a row's key is (``rand``, row index)."""
    key = ["__dpkit_r", "__dpkit_i"]
    s = frame.select(unit, *key_columns).with_columns(
        pl.Series("__dpkit_r", rand)).with_row_index("__dpkit_i").sort(
        [unit, *key_columns, *key])
    pair_start = _run_starts(s, [unit, *key_columns])
    keep = _run_position(pair_start) < max_rows_per_group
    per_unit = max_rows_per_group if not key_columns else None  # rows a unit can still have
    if key_columns and max_groups < max_rows:
        # each group's first row (in key order) carries its smallest key; rank the groups
        # of each unit by it and keep the first G
        pairs = s.filter(pl.Series(pair_start)).select(unit, "__dpkit_r").with_row_index(
            "__dpkit_p").sort([unit, "__dpkit_r", "__dpkit_p"])  # ties: the group order
        rank = _run_position(_run_starts(pairs, [unit]))
        keep_pair = np.empty(rank.size, dtype=bool)
        keep_pair[pairs["__dpkit_p"].to_numpy()] = rank < max_groups
        keep &= keep_pair[np.cumsum(pair_start) - 1]
        per_unit = max_groups * max_rows_per_group
    kept = s.filter(pl.Series(keep))
    if per_unit is None or per_unit > max_rows:  # the M bound is not implied: apply it
        kept = kept.sort([unit, *key])
        kept = kept.filter(pl.Series(_run_position(_run_starts(kept, [unit])) < max_rows))
    mask = np.zeros(frame.height, dtype=bool)
    mask[kept["__dpkit_i"].to_numpy()] = True
    return mask


def bound_polars(frame: pl.DataFrame, unit: str, key_columns: list[str], max_groups: int,
                 max_rows_per_group: int, max_rows: int, rand: np.ndarray | None = None,
                 ) -> pl.DataFrame:
    """Polars fast path of contribution bounding: the rule of the narwhals window version
    in :func:`dpkit.frame.engine.bound_contributions` (per unit the G groups whose smallest
    row key is smallest, R rows with the smallest keys in each, M in all), computed with
    sorts and run arithmetic instead of windows (Polars' windows over ~10^5 units are slow).

    A row's key is (random word, row index): ``rand`` holds one uniform 32-bit CSPRNG word
    per row (drawn here when None; tests pass their own, below 2^8 for the packed path).
    With null-free integer unit and group columns, (unit, group, the word's low r bits,
    row) are packed into one uint64 and sorted with ``np.sort`` (~10× faster than the
    three-column sort), r = min(32, 64 − bits(unit) − bits(group) − ⌈log₂ n⌉); r ≥ 8 is
    required, so two rows' random keys tie with probability 2^−r ≤ 1/256 and the earlier
    row wins the tie (privacy does not depend on uniformity, only on unique keys). A
    group's key is its first row's word, ties broken by the groups' sort order. Other
    columns take Polars sorts on the full word. For the same words both keep the same rows.
    """
    rand = rng.words(frame.height, 32) if rand is None else rand
    kept = _bound_packed(frame, unit, key_columns, max_groups, max_rows_per_group, max_rows,
                         rand)
    if kept is None:
        kept = _bound_sorted(frame, unit, key_columns, max_groups, max_rows_per_group,
                             max_rows, rand)
    return frame.filter(pl.Series(kept))


_HIGH32 = 0xFFFF_FFFF_0000_0000


def bound_polars_lazy(lf: pl.LazyFrame, unit: str, key_columns: list[str], max_groups: int,
                      max_rows_per_group: int, max_rows: int, words: pl.Expr | None = None,
                      buckets: int = 1) -> pl.LazyFrame:
    """Contribution bounding of a Polars scan as a lazy plan (window filters) for Polars'
    streaming engine, optionally in buckets of units to cap its memory; collects nothing.

    The rule is :func:`bound_polars`'s: per unit the G groups whose smallest row key is
    smallest, the R rows with the smallest keys in each kept group, M in all. A row's key is
    (word, row index) packed into one uint64 (the index in the low 32 bits: Polars' row
    index type must be UInt32, so keys are unique); ``words`` gives the 32-bit words (tests
    pass their own; by default the high bits of a keyed hash, module docstring). The plan
    is a deterministic function of the data and the two salts drawn here, so every collect
    of it within a release reads the same rows, as a materialised table would. A group's key
    is its smallest row key (ties between equal words broken by the row index).

    Memory. Polars' window state holds its whole input, so with ``buckets`` > 1 the units are
    split by a hash of the unit into that many buckets, each bounded by its own windows and
    the results concatenated in order (``parallel=False``: Polars runs one bucket's windows
    after the other): a unit's rows all fall in one bucket and row keys are computed before
    the split, so the kept rows are the same for every number of buckets; peak memory is
    about 1/``buckets`` of the unsplit plan's and each bucket re-reads the source
    (:func:`stream_buckets` chooses the number).

    Parameters
    ----------
    lf : polars.LazyFrame
        The rows to bound (the unit, group and statistic columns).
    unit, key_columns : str, list of str
        The privacy unit column and the group-by columns (none: one group).
    max_groups, max_rows_per_group, max_rows : int
        G, R and M (positive).
    words : polars.Expr, optional
        Unsigned words below 2^32, one per row (tests only).
    buckets : int, default 1
        Unit buckets bounded one after the other (see Memory).

    Returns
    -------
    polars.LazyFrame
        ``lf``'s columns, the kept rows only.

    Raises
    ------
    DomainError
        If Polars' row index is not 32-bit (a ``polars-u64-idx`` build); the engine checks
        this before using the function.
    """
    if pl.get_index_type() != pl.UInt32:
        raise DomainError("streaming contribution bounding needs Polars' 32-bit row index")
    idx, rand, pair_key = "__dpkit_idx", "__dpkit_rand", "__dpkit_pair"
    i = pl.col(idx).cast(pl.UInt64)
    if words is None:
        s0, s1 = (int(w) for w in rng.words(2))
        high = (i ^ pl.lit(s0, pl.UInt64)).hash(s1) & pl.lit(_HIGH32, pl.UInt64)
    else:
        high = words.cast(pl.UInt64) * pl.lit(1 << 32, pl.UInt64)
    keyed = lf.with_row_index(idx).with_columns((high | i).alias(rand)).drop(idx)
    parts = [keyed] if buckets <= 1 else [
        keyed.filter(pl.col(unit).hash(0) % buckets == b) for b in range(buckets)]
    out = [_window_rule(part, unit, key_columns, max_groups, max_rows_per_group, max_rows,
                        rand, pair_key).drop(rand) for part in parts]
    return out[0] if len(out) == 1 else pl.concat(out, parallel=False)


def _window_rule(frame: pl.LazyFrame, unit: str, key_columns: list[str], max_groups: int,
                 max_rows_per_group: int, max_rows: int, rand: str, pair_key: str,
                 ) -> pl.LazyFrame:
    """The G, R and M rules of :func:`bound_polars_lazy` as window filters on ``rand``."""
    pair = [unit, *key_columns]
    if not key_columns:
        limit = min(max_rows, max_rows_per_group)
        return frame.filter(pl.col(rand).rank("ordinal").over(unit) <= limit)
    g_rule, r_rule = max_groups < max_rows, max_rows_per_group < max_rows
    if g_rule:
        frame = frame.with_columns(pl.col(rand).min().over(pair).alias(pair_key))
        frame = frame.filter(pl.col(pair_key).rank("dense").over(unit) <= max_groups)
        frame = frame.drop(pair_key)
    if r_rule:
        frame = frame.filter(pl.col(rand).rank("ordinal").over(pair) <= max_rows_per_group)
    if not (g_rule and r_rule and max_groups * max_rows_per_group <= max_rows):
        frame = frame.filter(pl.col(rand).rank("ordinal").over(unit) <= max_rows)  # M
    return frame


_BUCKET_BYTES = 3 << 28  # 768 MiB of window input (8 bytes a cell) per bucket
_MAX_BUCKETS = 64


def stream_buckets(lf: pl.LazyFrame) -> int:
    """How many unit buckets :func:`bound_polars_lazy` should split ``lf`` into so that one
    bucket's window input stays near 768 MiB (8 bytes per cell, one more column for the
    key), 1 to 64: counts ``lf``'s rows with the streaming engine (a Parquet file's
    metadata when no step filters it)."""
    rows = int(lf.select(pl.len()).collect(engine="streaming").item())
    width = 8 * (len(lf.collect_schema()) + 1)
    return max(1, min(_MAX_BUCKETS, -(-rows * width // _BUCKET_BYTES)))


def bound_spark(df: Any, unit: str, key_columns: list[str], max_groups: int,
                max_rows_per_group: int, max_rows: int, salt: int | None = None) -> Any:
    """Contribution bounding of a Spark DataFrame as one lazy plan: one shuffle, no
    checkpoint, no cache, nothing collected.

    The rule is :func:`bound_polars`'s: per unit the G groups (of ``key_columns``) whose
    smallest row key is smallest, the R rows with the smallest keys in each kept group, and
    the M rows with the smallest keys among those; without ``key_columns``, min(M, R) rows
    per unit. A row's key is (``xxhash64(salt, row)``, the row's values): the hash of the
    row's atomic columns under a CSPRNG salt (:mod:`dpkit.core.rng`), ties broken by the
    values themselves, so distinct rows never tie and identical rows are interchangeable.
    The rows are repartitioned by unit (the one shuffle); within a partition, a window by
    (unit, group) ordered by key gives each row its rank R and each group its first key,
    and a window by unit ranks the groups by (first key, group) — ``dense_rank`` on a
    total order of groups, so a unit never keeps more than G — then the M rule is a
    ``row_number`` by unit. Each rule is skipped when the others imply it.

    Determinism. The plan is a function of the rows' values and the salt only (no row
    number, no partition id), so every job that reads it within a release — partition
    selection's counts, each statistic — keeps the same rows as long as ``df`` yields the
    same rows each time it is read (a file or a table that does not change; for a
    nondeterministic source, ``df.localCheckpoint()`` it first).

    Privacy. Whatever the salt and the hash's quality, every unit keeps at most G groups,
    R rows per group and M rows (ranks over a total order), and which rows a unit keeps
    depends only on its own rows and the salt: adding or removing one unit changes only
    that unit's kept rows, so the bounded table is a stable transformation with the
    declared per-unit bounds, on which the sensitivities are computed. The salt is secret
    and fresh per call, so the choice is not predictable from the data.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The rows to bound (the unit, group and statistic columns).
    unit, key_columns : str, list of str
        The privacy unit column and the group-by columns (none: one group).
    max_groups, max_rows_per_group, max_rows : int
        G, R and M (positive).
    salt : int, optional
        The hash salt, below 2^62 (tests only; by default drawn from the CSPRNG).

    Returns
    -------
    pyspark.sql.DataFrame
        ``df``'s columns, the kept rows only (a lazy plan).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812 - Spark's convention
    from pyspark.sql.types import AtomicType

    rand, rank, first, grank = "__dpkit_rand", "__dpkit_r", "__dpkit_first", "__dpkit_g"
    columns = df.columns
    atomic = [F.col(f.name) for f in df.schema.fields if isinstance(f.dataType, AtomicType)]
    salt = _salt() if salt is None else salt
    # hashed after the shuffle (it is a function of the row): one column less to move
    df = df.repartition(F.col(unit)).withColumn(rand, F.xxhash64(F.lit(salt), *atomic))
    order = [F.col(rand), *atomic]  # a total order on distinct rows
    by_unit = Window.partitionBy(unit)
    if not key_columns:
        limit = min(max_rows, max_rows_per_group)
        df = df.withColumn(rank, F.row_number().over(by_unit.orderBy(*order)))
        return df.filter(F.col(rank) <= limit).select(columns)
    g_rule, r_rule = max_groups < max_rows, max_rows_per_group < max_rows
    if g_rule or r_rule:
        pair = Window.partitionBy(unit, *key_columns).orderBy(*order)
        df = df.withColumn(rank, F.row_number().over(pair))
        if g_rule:  # the first row of a group in key order carries its smallest key
            rows = pair.rowsBetween(Window.unboundedPreceding, Window.currentRow)
            df = df.withColumn(first, F.first(rand).over(rows))
            df = df.withColumn(grank, F.dense_rank().over(
                by_unit.orderBy(F.col(first), *[F.col(c) for c in key_columns])))
            df = df.filter(F.col(grank) <= max_groups)
        if r_rule:
            df = df.filter(F.col(rank) <= max_rows_per_group)
    if not (g_rule and r_rule and max_groups * max_rows_per_group <= max_rows):
        df = df.withColumn(rank, F.row_number().over(by_unit.orderBy(*order)))
        df = df.filter(F.col(rank) <= max_rows)
    return df.select(columns)


def materialise(lf: nw.LazyFrame) -> nw.LazyFrame:
    """Compute ``lf`` once, so every statistic of a release reads the same rows."""
    impl = lf.implementation
    if impl is nw.Implementation.POLARS:
        return lf.collect().lazy()
    if impl is nw.Implementation.DUCKDB:
        import duckdb

        return nw.from_native(duckdb.from_arrow(nw.to_native(lf).to_arrow_table()))
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


def _sampled_count_audit() -> list[AuditCase]:
    """The audit case of :func:`sample_units`: a count of one unit (x = 0 or x′ = 1) on a
    Poisson sample of rate p = 1/10, with geometric noise for ε = 2 (``make_noise``),
    claimed ln(1 + p(e^ε − 1)) ≈ 0.49 (Balle, Barthe & Gaboardi 2018, Thm 8). Broken: the
    same claim without the sampling step (amplification claimed, no unit dropped: ε = 2)."""
    eps, rate = Fraction(2), Fraction(1, 10)
    noise = make_noise(1, epsilon=eps)
    claimed = amplified_epsilon(eps, rate)

    def kept(n: int) -> np.ndarray:  # n independent draws of the unit's inclusion
        units = nw.from_native(pl.LazyFrame({"u": np.arange(n, dtype=np.int64)}))
        ids = nw.to_native(sample_units(units, "u", rate)).collect()["u"].to_numpy()
        mask = np.zeros(n, dtype=np.int64)
        mask[ids] = 1
        return mask

    return _sampled_count_case("poisson_sampled_count", noise, claimed, kept,
                               AddRemoveDistance())


def _sampled_count_case(name: str, noise: Any, claimed: Fraction,
                        kept: Callable[[int], np.ndarray], metric: Any) -> list[AuditCase]:
    """A noisy count of one unit's bit on a sample (``kept``: its inclusion per draw),
    claimed ``claimed``; broken: the same claim without the sampling step."""
    def sampled(data: object, n: int) -> np.ndarray:
        return np.asarray(noise(int(data) * kept(n)))  # type: ignore[call-overload]

    def unsampled(data: object, n: int) -> np.ndarray:
        return np.asarray(noise(np.full(n, int(data))))  # type: ignore[call-overload]

    claim = Measurement(lambda d: sampled(d, 1), metric, PureDP,
                        lambda d: PureDP(claimed * d), name,
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase(name, claim, sampled, unsampled, 0, 1)]


register(audit=_sampled_count_audit)(sample_units)


def _fixed_sample_audit() -> list[AuditCase]:
    """The audit case of :func:`sample_fixed_units`: a population of N = 10 units holding
    one bit each, all 0 (x) or unit 0's bit 1 (x′: substitute-one neighbours, N public); the
    sum of the bits of n = 2 units drawn without replacement, with geometric noise for ε = 2
    (``make_noise``), claimed ln(1 + (n/N)(e^ε − 1)) ≈ 0.85 (Balle, Barthe & Gaboardi 2018,
    Thm 9). Broken: the same claim on the whole population (amplification claimed, no
    sampling: ε = 2)."""
    eps, size, total = Fraction(2), 2, 10
    noise = make_noise(1, epsilon=eps)
    claimed = amplified_epsilon(eps, Fraction(size, total))  # amplify_without_replacement's ε

    def kept(draws: int) -> np.ndarray:  # unit 0's inclusion in each of `draws` samples
        table = pl.LazyFrame({"draw": np.repeat(np.arange(draws), total),
                              "u": np.tile(np.arange(total), draws)})
        # one key for all draws, so each draw ranks its own ids (draw, u) — fresh per draw
        rank = _keyed_rank(pl.col("draw") * total + pl.col("u")).over("draw")
        first = table.filter((rank <= size) & (pl.col("u") == 0)).collect()["draw"]
        mask = np.zeros(draws, dtype=np.int64)
        mask[first.to_numpy()] = 1
        return mask

    return _sampled_count_case("without_replacement_count", noise, claimed, kept,
                               HammingDistance())


register(audit=_fixed_sample_audit)(sample_fixed_units)
