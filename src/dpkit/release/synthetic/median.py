"""The median mechanism (Roth & Roughgarden, "Interactive privacy via the median mechanism",
STOC 2010, Alg. 1), online, on the sparse-vector skeleton of
:class:`~dpkit.release.synthetic.pmw.PrivateMultiplicativeWeights`. Exponential time: for small
domains only.

The hypothesis is a *set* of candidate databases — every multiset of m records from the
domain, C(|X| + m − 1, m) of them (m = ⌈ln|Q|/α̂²⌉ in the paper, α̂ the normalised error;
here ``size``) — and the estimate of a counting query q is ñ times the median of q's
normalised answer over the candidates still alive. The sparse vector compares the data's
answer with that estimate; a hard query (above the threshold α/2) is measured with Laplace
noise and kills every candidate whose scaled answer is more than α from the measurement.
If the median was off by more than α, at least half the candidates die, so there are at
most log₂|C| hard queries while the data stay α-close to some candidate (R&R Lemma 4.2):
``update_bound``.

Privacy: exactly PMW's (pure ε-DP, module :mod:`dpkit.release.synthetic.pmw`): ñ, the sparse vector
with c positives and c Laplace measurements compose to ε; the candidate set and the free
answers depend only on earlier outputs (post-processing). If every candidate dies (the data
are far from all of them), the ones closest to the measurement are kept — also
post-processing.
"""

from __future__ import annotations

import math
from math import comb
from typing import Any

import numpy as np

from dpkit.errors import DomainError
from dpkit.release.synthetic.pmw import PrivateMultiplicativeWeights

__all__ = ["MedianMechanism", "candidate_databases"]


def candidate_databases(cells: int, size: int) -> np.ndarray:
    """Every histogram of ``size`` records over ``cells`` cells, shape (C(cells+size−1,
    size), cells), by stars and bars: the first cell's count from ``size`` down to 0, then
    the rest in the same order. Built cell by cell from the tables of every smaller total
    (each sub-table once, so the work is linear in the output)."""
    if size == 0:
        return np.zeros((1, cells), dtype=np.int64)
    # tables[s]: every histogram of s records over the last k cells (k grows to ``cells``)
    tables = [np.full((1, 1), s, dtype=np.int64) for s in range(size + 1)]
    for k in range(2, cells + 1):
        totals = [size] if k == cells else range(size + 1)  # the last cell: one total
        tables = [_prepend(tables, s) for s in totals]
    return tables[-1]


def _prepend(tables: list[np.ndarray], total: int) -> np.ndarray:
    """Every histogram of ``total`` records: a first count f from ``total`` down to 0, then
    each row of ``tables[total − f]``."""
    return np.concatenate([np.concatenate(
        [np.full((len(tables[total - f]), 1), f, dtype=np.int64), tables[total - f]], axis=1)
        for f in range(total, -1, -1)], axis=0)


class MedianMechanism(PrivateMultiplicativeWeights):
    """The median mechanism (module docstring); parameters as
    :class:`~dpkit.release.synthetic.pmw.PrivateMultiplicativeWeights`, plus:

    Parameters
    ----------
    size : int
        m, the records of each candidate database (default 8).
    max_candidates : int
        Refuse domains whose candidate set is larger (default 2·10^6; the set is
        C(|X| + m − 1, m)).

    Raises
    ------
    DomainError
        Too many candidates, m < 1, and PMW's errors.
    """

    @staticmethod
    def check(domain: Any, epsilon: Any, alpha: Any, *, size: int = 8,
              max_candidates: int = 2_000_000, **options: Any) -> None:
        """Everything the constructor refuses, checked without the records (a session runs
        it before the debit): m, the number of candidates, and PMW's checks.

        Raises
        ------
        DomainError
            m < 1, more than ``max_candidates`` candidates, PMW's errors; TypeError for an
            option neither takes."""
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            raise DomainError("size must be a positive integer")
        count = comb(domain.size() + int(size) - 1, int(size))
        if count > max_candidates:
            raise DomainError(f"the median mechanism enumerates {count} candidate databases "
                              f"(C(|X| + m − 1, m)), more than max_candidates="
                              f"{max_candidates}; use a smaller domain or size")
        PrivateMultiplicativeWeights.check(domain, epsilon, alpha, **options)

    def __init__(self, codes: np.ndarray, domain: Any, epsilon: Any, alpha: Any, *,
                 size: int = 8, max_candidates: int = 2_000_000, **options: Any) -> None:
        MedianMechanism.check(domain, epsilon, alpha, size=size,
                              max_candidates=max_candidates, **options)
        self.size = int(size)
        self._count = comb(domain.size() + self.size - 1, self.size)
        super().__init__(codes, domain, epsilon, alpha, **options)

    def _update_bound(self, n: int, cells: int) -> int:
        return max(1, math.ceil(math.log2(self._count)) + 1)

    def _start(self, n: int, cells: int) -> None:
        self.candidates = candidate_databases(cells, self.size).astype(np.float32)
        self.alive = np.ones(self.candidates.shape[0], dtype=bool)

    def _scaled(self, q: np.ndarray) -> np.ndarray:
        """Each live candidate's answer scaled to ñ records."""
        scale = max(self.noisy_total, 1) / self.size
        return (self.candidates[self.alive] @ q.astype(np.float32)).astype(np.float64) * scale

    def _estimate(self, q: np.ndarray) -> float:
        return float(np.median(self._scaled(q)))

    def _update(self, q: np.ndarray, value: float, estimate: float) -> None:
        gap = np.abs(self._scaled(q) - value)
        keep = gap <= self.alpha
        if not keep.any():
            keep = gap <= gap.min()
        idx = np.flatnonzero(self.alive)
        self.alive[idx[~keep]] = False

    def mean_candidate(self) -> np.ndarray:
        """The live candidates' mean histogram scaled to ñ records (for inspection)."""
        live = self.candidates[self.alive].mean(axis=0).astype(np.float64)
        return live * max(self.noisy_total, 1) / self.size
