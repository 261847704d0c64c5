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

Sharing. A server builds a session per request; it passes one cache per served dataset
(``Session(..., bounded_cache=...)``) so that requests reuse each other's bounded tables, as
the releases of one session do (the privacy argument above holds for any sequence of
releases over the same fixed keys, whoever asks them). A cache is bound to the first
session's tables (by identity) and privacy unit: a session over other tables or another
unit is refused (:meth:`BoundedCache.bind`).

Exact answers. The same cache remembers the exact statistics (before any noise) of the last
releases computed on each bounded table, keyed by the bounded table's key and the release's
canonical plan (its JSON form, the statistics' arguments, the schemas, the privacy unit and
the backend: :meth:`dpkit.frame.session.Session.plan_key`), and drops them with their table.
A release of a plan already answered on that table then draws fresh noise around the same
exact values instead of recomputing them: the released distribution is unchanged, since the
exact values are a deterministic function of the (fixed) bounded table. Whether a release
hits depends only on the plans asked before, never on the data. Releases with private
partition selection or a private join are not remembered.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

__all__ = ["BoundedCache"]

_PLAIN = (str, int, float, bool, Fraction, type(None))


class BoundedCache:
    """A small LRU of bounded tables, keyed as in the module docstring."""

    def __init__(self, entries: int = 2, answers: int = 64) -> None:
        self.entries, self.answers = entries, answers
        self._items: OrderedDict[tuple, tuple[Any, list[Any]]] = OrderedDict()
        self._answers: OrderedDict[tuple[tuple, Any], dict[str, Any]] = OrderedDict()
        self.hits = self.answer_hits = 0
        self._owner: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    def bind(self, tables: Sequence[Any], privacy_unit: str) -> None:
        """Bind the cache to these in-memory tables (by identity, kept alive) and this
        privacy unit on first use; later calls must give the same ones.

        Raises
        ------
        DomainError
            If the cache is already bound to other tables or another privacy unit.
        """
        owner = (tuple(tables), privacy_unit)
        with self._lock:
            if self._owner is None:
                self._owner = owner
                return
        same = (len(self._owner[0]) == len(owner[0]) and self._owner[1] == owner[1]
                and all(a is b for a, b in zip(self._owner[0], owner[0], strict=True)))
        if not same:
            from dpkit.errors import DomainError

            raise DomainError("this bounded-table cache belongs to sessions over other tables "
                              "or another privacy unit; give each dataset its own cache")

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
        # a server's worker threads share one cache: the dictionary is guarded, the
        # computation is not (two threads may both compute a missing entry; either is valid)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return hit[0]
        value = compute()
        with self._lock:
            self._items[key] = (value, refs)
            self._forget(key)  # answers computed on an earlier table under this key
            while len(self._items) > self.entries:
                self._forget(self._items.popitem(last=False)[0])
        return value

    def _forget(self, key: tuple) -> None:
        for found in [k for k in self._answers if k[0] == key]:
            del self._answers[found]

    def answer(self, key: tuple, plan: Any, compute: Callable[[], dict[str, Any]]
               ) -> dict[str, Any]:
        """The exact statistics of release plan ``plan`` on the bounded table ``key``
        (module docstring: "Exact answers"): remembered, else ``compute()``. Arrays are
        returned as copies, so a caller can never change what is remembered."""
        with self._lock:
            hit = self._answers.get((key, plan))
            if hit is not None:
                self._answers.move_to_end((key, plan))
                self.answer_hits += 1
                return {k: v.copy() for k, v in hit.items()}
        value = compute()
        with self._lock:
            if key in self._items:  # only answers of a table the cache still holds
                self._answers[(key, plan)] = {k: v.copy() for k, v in value.items()}
                while len(self._answers) > self.answers:
                    self._answers.popitem(last=False)
        return value
