"""Reuse of a session's bounded tables across releases (DESIGN.md §2: caching).

Contribution bounding is the most expensive step of a release (one sort of the table). A
session over in-memory Polars tables keeps the bounded tables of its last few releases and
reuses one when a later release reads the same table through the same steps, columns and
grouping.

Privacy. Fix the random row keys. Bounding is then a deterministic transformation B whose
output on neighbouring inputs differs only in the one unit's rows, within its declared
bounds (the keys of the other units' rows are the same in both worlds). Releases
M₁(B(x)), M₂(B(x)), … therefore compose sequentially exactly as with fresh keys, for every
fixed key assignment, hence also averaged over the keys (Dwork & Roth Thm 3.16 applied
conditionally). What changes is only statistical: releases that share a bounded table drop
the same rows, so their bounding errors are correlated (the noise is fresh every time).

A cache key holds the table name, each step with its plain arguments (strings, numbers,
booleans, None and containers of them) by value and anything else (Polars expressions,
public tables, functions) by identity — a Python function inside an expression has no
printable identity, so equal-looking steps built from different objects never share an
entry. The entry keeps those objects alive so that an identity is never reused.

Scans are never cached. A session over a file or a lazy Polars scan (larger than memory)
does not materialise its bounded table: bounding is a lazy plan that Polars' streaming engine
runs inside each release (:func:`dpkit.frame.engine.bound_contributions`), with fresh salts
each time, and keeping its rows here would defeat the point. ``Session.bounded`` consults
the cache only for in-memory Polars frames (which also cannot change under the session).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

__all__ = ["BoundedCache"]

_PLAIN = (str, int, float, bool, Fraction, type(None))


class BoundedCache:
    """A small LRU of bounded tables, keyed as in the module docstring."""

    def __init__(self, entries: int = 2) -> None:
        self.entries = entries
        self._items: OrderedDict[tuple, tuple[Any, list[Any]]] = OrderedDict()
        self.hits = 0

    @staticmethod
    def key(table: str, steps: Sequence[tuple[str, tuple, dict]], columns: Sequence[str],
            key_columns: Sequence[str]) -> tuple[tuple, list[Any]]:
        """The cache key of a bounded table and the objects it refers to by identity."""
        refs: list[Any] = []

        def norm(v: Any) -> Any:
            if isinstance(v, _PLAIN):
                return (type(v).__name__, v)
            if isinstance(v, tuple | list):
                return (type(v).__name__, tuple(norm(i) for i in v))
            if isinstance(v, dict):
                return ("dict", tuple((k, norm(i)) for k, i in sorted(v.items())))
            refs.append(v)
            return ("id", id(v))

        steps_key = tuple((op, norm(args), norm(kwargs)) for op, args, kwargs in steps)
        return (table, steps_key, tuple(columns), tuple(key_columns)), refs

    def get_or_compute(self, key: tuple, refs: list[Any], compute: Callable[[], Any]) -> Any:
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
            self.hits += 1
            return hit[0]
        value = compute()
        self._items[key] = (value, refs)
        while len(self._items) > self.entries:
            self._items.popitem(last=False)
        return value
