"""Public keys in canonical form: converted to the private column's type, then checked.

Every path that takes public key values from a user — ``group_by(keys=...)`` (sequences,
mappings, :class:`~dpkit.frame.query.KeySet` products, key frames), ``partition(col, keys)``
and the key columns of a public ``join`` — goes through :func:`canonical_keys`. The keys are
matched against the data *after* conversion to the column's type, so distinctness must be
checked on the converted values: ``[1.0, 1.0001]`` are two keys as floats but one key on an
Int64 column, and listing one group K times would release K independently noised copies of
the same exact statistic while charging as if each row touched one group.

Rules (an allow-list; anything else is a plan-time :class:`~dpkit.errors.DomainError`):

- the key's kind must match the column's: numbers for numeric columns, strings for string,
  categorical and enum columns, booleans for boolean columns, dates/times for temporal ones;
- the conversion must be lossless: converting back gives the key as given (so ``1.0001``
  or ``2**60 + 1`` on a Float64 column, or ``"01"`` anywhere, are refused rather than
  rounded onto another key), and values outside the type (an enum's categories, an integer
  range) are refused;
- no nulls or NaN; -0.0 becomes 0.0 (they match the same rows);
- the converted keys must be distinct.
"""

from __future__ import annotations

from typing import Any

import narwhals as nw
import polars as pl

from dpkit.errors import ColumnError, DomainError

__all__ = ["canonical_keys", "canonical_values"]


def _kind(dtype: Any) -> str:
    """The key kind a (narwhals or Polars) dtype accepts."""
    if dtype.is_numeric():
        return "number"
    if dtype == nw.Boolean or dtype == pl.Boolean:
        return "boolean"
    if dtype.is_temporal():
        return "temporal"
    if dtype in (nw.String, nw.Categorical, pl.String, pl.Categorical) or isinstance(
            dtype, nw.Enum | pl.Enum):
        return "string"
    return str(dtype)


def _convert(values: pl.Series, dtype: Any, column: str, what: str) -> pl.Series:
    """``values`` cast to the column's narwhals ``dtype`` through narwhals (strict), then
    checked to convert back to themselves."""
    if values.dtype == pl.Null:
        raise DomainError(f"{what} for {column!r} are all null")
    given, wanted = _kind(values.dtype), _kind(dtype)
    if given != wanted:
        raise ColumnError(f"{what} for {column!r} have type {values.dtype} but the column is "
                          f"{dtype}: give {wanted} keys")
    if values.null_count():
        raise DomainError(f"{what} for {column!r} contain nulls; rows with a null key are "
                          "never matched — fill_null() the column and list the fill value")
    if values.dtype.is_float() and values.is_nan().any():
        raise DomainError(f"{what} for {column!r} contain NaN, which matches no row")
    polars_type = isinstance(dtype, pl.DataType) or (
        isinstance(dtype, type) and issubclass(dtype, pl.DataType))
    if str(values.dtype) == str(dtype):  # already the column's type: nothing to convert
        return canonical_values(values.rename(column))
    frame = nw.from_native(pl.DataFrame({"k": values}))
    try:
        converted = values.cast(dtype) if polars_type else nw.to_native(
            frame.select(nw.col("k").cast(dtype)))["k"]
        back = converted.cast(values.dtype, strict=False)
    except Exception:  # a user value that the column type cannot hold
        raise DomainError(f"{what} for {column!r} cannot all be represented as {dtype}"
                          ) from None
    if not bool(back.eq_missing(values).all()):
        raise DomainError(f"{what} for {column!r} are not exactly representable as {dtype} "
                          "(e.g. a fraction on an integer column, an integer beyond 2^53 on "
                          "a float column, or a value outside the type): list the column's "
                          "own values")
    return canonical_values(converted.rename(column))


def canonical_values(values: pl.Series) -> pl.Series:
    """The values by which rows are matched and grouped: -0.0 becomes 0.0, as Polars'
    grouping and sorting see them; other values unchanged. Total: never raises (nulls and NaN
    stay as they are). Keys (:func:`canonical_keys`) and the units of a continual release
    (:mod:`dpkit.stream.frames`) go through it."""
    if not values.dtype.is_float():
        return values
    # a select, not ``+ 0.0``: Polars keeps -0.0 + 0.0 as -0.0
    v = pl.col("v")
    out = values.to_frame("v").select(
        pl.when(v == 0).then(pl.lit(0.0, dtype=values.dtype)).otherwise(v).alias("v"))
    return out.get_column("v").rename(values.name)


def canonical_keys(keys: pl.DataFrame, schema: nw.Schema, what: str = "keys") -> pl.DataFrame:
    """Public keys converted to the columns' types, checked lossless and distinct.

    Parameters
    ----------
    keys : polars.DataFrame
        One column per key column, one row per key (as the user gave them).
    schema : mapping of column name → dtype
        The private table's (narwhals or Polars) schema at the point the keys are used.
    what : str
        How to name the keys in errors ("keys", "partition keys", "join keys").

    Returns
    -------
    polars.DataFrame
        The same rows, each column in its private column's type.

    Raises
    ------
    ColumnError
        If a key column is not in ``schema`` or its keys have another kind than the column.
    DomainError
        If keys are empty, null or NaN, lose information in the conversion, or are not
        distinct after it.
    """
    if keys.height == 0:
        raise DomainError(f"{what} must not be empty")
    columns = []
    for c in keys.columns:
        if c not in schema:
            raise ColumnError(f"unknown key column {c!r}; available: {', '.join(schema)}")
        columns.append(_convert(keys[c], schema[c], c, what))
    out = pl.DataFrame(columns)
    if out.is_duplicated().any():
        raise DomainError(f"{what} must be distinct in the column's type: two listed keys "
                          "match the same rows")
    return out
