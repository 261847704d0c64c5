"""Finite data domains for query release and synthetic data (Dwork & Roth §4: a database is
a histogram over a finite universe X).

A :class:`Domain` names the attributes and their numbers of values; records are integer codes
``0 … size−1`` per attribute. Domains are *declared* — from a mapping, a Private-PGM style
JSON file, or a :class:`Codec` built from declared categories and bin edges — and never
inferred from the data: a value outside its declared domain is an error
(docs/security.md#declared-never-inferred).
A :class:`Codec` also maps codes back to the original column types for synthetic data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from dpkit.errors import ColumnError, DomainError

__all__ = ["Domain", "Bins", "Codec", "records", "marginal_counts"]


@dataclass(frozen=True)
class Domain:
    """Attributes and their sizes: records are codes in 0 … size−1 per attribute."""

    attributes: tuple[str, ...]
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.attributes) != len(self.sizes) or not self.attributes:
            raise DomainError("a domain needs one size per attribute, at least one attribute")
        if len(set(self.attributes)) != len(self.attributes):
            raise DomainError("attribute names must be unique")
        if any(int(s) != s or s < 1 for s in self.sizes):
            raise DomainError("attribute sizes must be positive integers")

    @classmethod
    def from_dict(cls, sizes: Mapping[str, int]) -> Domain:
        return cls(tuple(sizes), tuple(int(v) for v in sizes.values()))

    @classmethod
    def from_json(cls, path: str | Path) -> Domain:
        """A Private-PGM domain file: ``{"attribute": size, …}``."""
        return cls.from_dict(json.loads(Path(path).read_text()))

    def size(self, attrs: Sequence[str] | None = None) -> int:
        """Number of cells of the (sub)domain (a Python int: it may exceed 2^63)."""
        out = 1
        for s in self.shape(attrs):
            out *= s
        return out

    def shape(self, attrs: Sequence[str] | None = None) -> tuple[int, ...]:
        return tuple(self.sizes[i] for i in self.axes(attrs))

    def axes(self, attrs: Sequence[str] | None = None) -> tuple[int, ...]:
        if attrs is None:
            return tuple(range(len(self.attributes)))
        unknown = [a for a in attrs if a not in self.attributes]
        if unknown:
            raise ColumnError(f"unknown attribute {unknown[0]!r}; domain has "
                              f"{', '.join(self.attributes)}")
        return tuple(self.attributes.index(a) for a in attrs)

    def project(self, attrs: Sequence[str]) -> Domain:
        return Domain(tuple(attrs), self.shape(attrs))


def records(table: pl.DataFrame, domain: Domain) -> np.ndarray:
    """The table's domain columns as an int64 array (n, d) of codes, checked against the
    declared sizes (nulls and values outside 0 … size−1 raise :class:`DomainError`)."""
    missing = [a for a in domain.attributes if a not in table.columns]
    if missing:
        raise ColumnError(f"unknown column {missing[0]!r}; table has {', '.join(table.columns)}")
    out = np.empty((table.height, len(domain.attributes)), dtype=np.int64)
    for j, (a, size) in enumerate(zip(domain.attributes, domain.sizes, strict=True)):
        col = table[a]
        if not col.dtype.is_integer():
            raise DomainError(f"column {a!r} must hold integer codes (dtype {col.dtype}); "
                              "encode it with a Codec")
        if col.null_count():
            raise DomainError(f"column {a!r} has nulls; encode them as a category")
        values = col.to_numpy().astype(np.int64)
        if values.size and (values.min() < 0 or values.max() >= size):
            raise DomainError(f"column {a!r} has codes outside its declared domain 0 … "
                              f"{size - 1}")
        out[:, j] = values
    return out


def marginal_counts(codes: np.ndarray, domain: Domain, attrs: Sequence[str]) -> np.ndarray:
    """Exact counts of the marginal on ``attrs``: an int64 array of shape sizes(attrs)."""
    axes = domain.axes(attrs)
    shape = domain.shape(attrs)
    if not axes:
        return np.array(codes.shape[0], dtype=np.int64)
    flat = np.ravel_multi_index(tuple(codes[:, j] for j in axes), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(np.int64)


@dataclass(frozen=True)
class Bins:
    """Declared bin edges e₀ < … < e_m of a numeric column: code i is [eᵢ, eᵢ₊₁), the last
    bin closed; values outside [e₀, e_m] are an error."""

    edges: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.edges) < 2 or any(b <= a for a, b in zip(self.edges, self.edges[1:],
                                                             strict=False)):
            raise DomainError("bin edges must be increasing, at least two")


@dataclass(frozen=True)
class Codec:
    """Declared encodings of table columns into domain codes, and back.

    ``spec`` maps a column to a sequence of categories (code = position; a null can be a
    category) or to :class:`Bins`. Decoding maps a category code to its value and a bin code
    to the bin's midpoint (rounded down for integer columns), in the column's original dtype.
    """

    spec: Mapping[str, Any]
    dtypes: Mapping[str, Any]

    @classmethod
    def declare(cls, table: pl.DataFrame, spec: Mapping[str, Any]) -> Codec:
        for c in spec:
            if c not in table.columns:
                raise ColumnError(f"unknown column {c!r}; table has {', '.join(table.columns)}")
        return cls(dict(spec), {c: table.schema[c] for c in spec})

    @property
    def domain(self) -> Domain:
        return Domain(tuple(self.spec), tuple(
            len(v.edges) - 1 if isinstance(v, Bins) else len(v) for v in self.spec.values()))

    def encode(self, table: pl.DataFrame) -> pl.DataFrame:
        """Integer codes for the declared columns; an undeclared value raises."""
        out = {}
        for c, how in self.spec.items():
            col = table[c]
            if isinstance(how, Bins):
                x = col.cast(pl.Float64).to_numpy()
                e = np.asarray(how.edges, dtype=np.float64)
                if np.any(~np.isfinite(x)) or np.any((x < e[0]) | (x > e[-1])):
                    raise DomainError(f"column {c!r} has values outside its bins "
                                      f"[{e[0]:g}, {e[-1]:g}] (or null/NaN)")
                out[c] = np.clip(np.searchsorted(e, x, side="right") - 1, 0, e.size - 2)
            else:
                lookup = {v: i for i, v in enumerate(how)}
                values = col.to_list()
                bad = next((v for v in values if v not in lookup), _MISSING)
                if bad is not _MISSING:
                    raise DomainError(f"column {c!r} has the undeclared value {bad!r}")
                out[c] = np.fromiter((lookup[v] for v in values), dtype=np.int64,
                                     count=len(values))
        return pl.DataFrame({c: np.asarray(v, dtype=np.int64) for c, v in out.items()})

    def decode(self, codes: pl.DataFrame) -> pl.DataFrame:
        """Codes back to values of the original dtypes (bins → midpoints)."""
        out = []
        for c, how in self.spec.items():
            k = codes[c].to_numpy()
            if isinstance(how, Bins):
                e = np.asarray(how.edges, dtype=np.float64)
                values = (e[k] + e[k + 1]) / 2
                series = pl.Series(c, values)
                if self.dtypes[c].is_integer():
                    series = pl.Series(c, np.floor(values)).cast(self.dtypes[c])
                out.append(series.cast(self.dtypes[c]))
            else:
                out.append(pl.Series(c, [how[i] for i in k], dtype=self.dtypes[c]))
        return pl.DataFrame(out)


_MISSING = object()
