"""A bounded, thread-safe LRU cache of optimised matrix-mechanism strategies, keyed by the
workload's structure (:func:`dpkit.release.workload.structure`); shared by
:mod:`~dpkit.release.ranges.matrix` and :mod:`~dpkit.release.ranges.gaussian_mm`."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from dpkit.errors import DomainError

__all__ = ["StrategyCache"]


class StrategyCache:
    """A bounded, thread-safe LRU cache of optimised strategies keyed by structure.

    Holds tuples of read-only arrays (the optimiser's Θ). The strategy search depends only on
    the public workload and the options, never on the data, so a hit changes no privacy
    guarantee: each release still computes its sensitivity from the strategy it uses.
    ``hits`` and ``misses`` count lookups (for tests and benchmarks, not timing).

    Parameters
    ----------
    maxsize : int
        The most entries kept; the least recently used is dropped first.
    """

    def __init__(self, maxsize: int) -> None:
        if int(maxsize) != maxsize or maxsize < 1:
            raise DomainError(f"maxsize must be a positive integer; got {maxsize!r}")
        self.maxsize = int(maxsize)
        self.hits = self.misses = 0
        self._entries: OrderedDict[Hashable, tuple[np.ndarray, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], Sequence[np.ndarray]]
            ) -> tuple[np.ndarray, ...]:
        """The entry for ``key``, computing and storing ``compute()`` on a miss (outside the
        lock: two threads may both compute a missing key; they store the same value)."""
        with self._lock:
            if key in self._entries:
                self.hits += 1
                self._entries.move_to_end(key)
                return self._entries[key]
            self.misses += 1
        value = tuple(np.array(a, dtype=np.float64) for a in compute())
        for a in value:
            a.setflags(write=False)
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def info(self) -> dict[str, int]:
        """``{"hits", "misses", "size", "maxsize"}``."""
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "size": len(self._entries),
                    "maxsize": self.maxsize}
