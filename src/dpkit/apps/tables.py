"""The applications' one check of an input table: a Polars DataFrame with the named columns,
each of an accepted type (typed errors, before anything is read or spent)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from dpkit.errors import ColumnError, DomainError

__all__ = ["require_columns"]


def require_columns(frame: Any, names: Sequence[str], *, what: str,
                    accepts: Callable[[Any], bool], kind: str) -> None:
    """Check ``frame`` (called ``what`` in messages) and its columns ``names``.

    Raises
    ------
    DomainError
        ``frame`` is not a Polars DataFrame, or a column's type fails ``accepts`` (the
        message says it must ``kind``).
    ColumnError
        A column is missing.
    """
    if not isinstance(frame, pl.DataFrame):
        raise DomainError(f"{what} must be a Polars DataFrame")
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise ColumnError(f"missing columns: {missing}")
    for c in names:
        if not accepts(frame.schema[c]):
            raise DomainError(f"column {c!r} must {kind}; got {frame.schema[c]}")
