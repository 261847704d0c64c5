"""Private top-k frequent itemsets (Bhaskar, Laxman, Smith & Thakurta, "Discovering frequent
patterns in sensitive data", KDD 2010, §3). Pure ε-DP, one transaction per privacy unit.

Candidates: every itemset of 1 … ``max_size`` items over the declared item universe (M of
them, enumerated exactly; supports by bitset products). Half of ε selects k itemsets, half
releases their supports:

- ``method="exponential"``: k rounds of the exponential mechanism without replacement,
  each at ε/(2k) on the support counts (sensitivity 1 and monotone under adding or
  removing a transaction), weight ∝ exp(ε/(2k)·s(I)) (McSherry & Talwar 2007, §3 for
  monotone scores; sequential composition over the k rounds).
- ``method="laplace"``: every candidate's support plus discrete Laplace noise of scale
  4k/ε, the k largest noisy supports selected (Bhaskar et al.'s Laplace variant: the
  noisy top-k of monotone counting queries is ε/2-DP at that scale).

Then the k selected supports get discrete Laplace noise of scale 2k/ε (L1 sensitivity k:
a transaction is in at most all k). Bhaskar et al. truncate the frequencies below the k-th
minus a margin so that the candidates need not be enumerated; dpkit enumerates them (up to
``max_candidates``), which the truncation only approximates, so the scores here are the
exact supports.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.learn._privacy import charge, check_epsilon
from dpkit.mechanisms import make_selection
from dpkit.mechanisms.exponential import sample_exponential
from dpkit.release.measure import laplace_integer

__all__ = ["read_fimi", "transactions_from_table", "incidence", "candidate_supports",
           "top_k_itemsets", "FrequentItemsets", "exact_top_k", "false_negative_rate"]


def read_fimi(path: str | Path) -> list[list[int]]:
    """Transactions of a FIMI file (one per line, space-separated integer item ids)."""
    with open(path) as f:
        return [[int(v) for v in line.split()] for line in f if line.strip()]


def transactions_from_table(table: Any, columns: Sequence[str]) -> list[list[str]]:
    """A Polars table as transactions of ``"column=value"`` items (nulls skipped)."""
    rows = table.select(list(columns)).to_dicts()
    return [[f"{c}={r[c]}" for c in columns if r[c] is not None] for r in rows]


def incidence(transactions: Iterable[Iterable[Any]], universe: Sequence[Any],
              strict: bool = True) -> np.ndarray:
    """The (n, M) boolean incidence matrix over the declared ``universe``. ``strict``: an
    item outside it raises DomainError; otherwise such items are dropped."""
    index = {v: i for i, v in enumerate(universe)}
    try:
        rows = [list(t) for t in transactions]
    except TypeError:
        raise DomainError("transactions must be an iterable of iterables of items") from None
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    try:
        cols = np.fromiter((index[v] if strict else index.get(v, -1)
                            for v in chain.from_iterable(rows)), dtype=np.int64,
                           count=int(lengths.sum()))
    except (KeyError, TypeError):
        raise DomainError("a transaction holds an item outside the declared universe "
                          "(items=); declare every item") from None
    out = np.zeros((len(rows), len(universe)), dtype=bool)
    row = np.repeat(np.arange(len(rows)), lengths)
    known = cols >= 0
    out[row[known], cols[known]] = True
    return out


def candidate_supports(matrix: np.ndarray, max_size: int
                       ) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Every itemset of 1 … max_size (≤ 3) item indices and its support (int64)."""
    if not 1 <= max_size <= 3:
        raise DomainError("max_size must be 1, 2 or 3")
    matrix = np.asarray(matrix, dtype=np.float32)  # counts < 2^24 are exact
    m = matrix.shape[1]
    sets: list[tuple[int, ...]] = [(i,) for i in range(m)]
    counts = [matrix.sum(axis=0)]
    if max_size >= 2:
        pairs = matrix.T @ matrix
        iu = np.triu_indices(m, 1)
        sets += list(zip(*(a.tolist() for a in iu), strict=True))
        counts.append(pairs[iu])
    if max_size >= 3:
        for i in range(m - 2):
            both = matrix[:, i:i + 1] * matrix[:, i + 1:]  # (n, m − i − 1)
            triple = both.T @ matrix  # rows j > i, columns l
            for a, j in enumerate(range(i + 1, m - 1)):
                sets += [(i, j, ll) for ll in range(j + 1, m)]
                counts.append(triple[a, j + 1:])
    return sets, np.rint(np.concatenate(counts)).astype(np.int64)


@dataclass(frozen=True)
class FrequentItemsets:
    """The released itemsets (tuples of item labels), their noisy supports, and ε."""

    itemsets: list[tuple[Any, ...]]
    supports: np.ndarray
    epsilon: Fraction


def top_k_itemsets(transactions: Iterable[Iterable[Any]], items: Sequence[Any], k: int,
                   epsilon: Any, *, max_size: int = 3, method: str = "exponential",
                   max_candidates: int = 2_000_000, accountant: Any = None
                   ) -> FrequentItemsets:
    """The k most frequent itemsets of up to ``max_size`` items, ε-DP (module docstring).

    Parameters
    ----------
    transactions : iterable of iterables
        One per privacy unit; items outside ``items`` are ignored.
    items : sequence
        The declared item universe (public).
    k : int
    epsilon : number
        ε > 0 (nats): ε/2 selection, ε/2 supports.
    max_size : int
        Largest itemset size (1 … 3).
    method : {"exponential", "laplace"}
    max_candidates : int
        Refuse universes whose candidate count exceeds it.
    accountant : None, PrivacyFilter or Session

    Returns
    -------
    FrequentItemsets
        In selection order, supports as noisy counts (int64).

    Raises
    ------
    DomainError
        Bad k, ε, method or size, too many candidates.
    """
    eps = check_epsilon(epsilon)
    universe = list(items)
    m = len(universe)
    total = sum(math.comb(m, s) for s in range(1, max_size + 1))
    if total > max_candidates:
        raise DomainError(f"{total} candidate itemsets exceed max_candidates={max_candidates}")
    if not 1 <= int(k) <= total:
        raise DomainError(f"k must be in 1 … {total}")
    if method not in ("exponential", "laplace"):
        raise DomainError("method must be 'exponential' or 'laplace'")
    k = int(k)
    half = eps / 2

    def compute() -> FrequentItemsets:
        sets, counts = candidate_supports(incidence(transactions, universe, strict=False), max_size)
        if method == "exponential":
            # supports are monotone under adding/removing a transaction, so weight
            # exp(ε_round·s/Δ) is ε_round-DP (McSherry & Talwar 2007, §3; Dwork & Roth
            # Thm 3.10's remark): scale Δ/ε_round = k/(ε/2)
            scale = make_selection(k, half, monotonic=True).scale  # k/(ε/2), checked
            alive = np.ones(counts.size, dtype=bool)
            chosen = []
            for _ in range(k):
                idx = np.flatnonzero(alive)
                pick = idx[sample_exponential(counts[idx], scale)]
                chosen.append(int(pick))
                alive[pick] = False
        else:
            noisy = laplace_integer(counts, Fraction(2 * k), half)
            chosen = [int(i) for i in np.argsort(-noisy, kind="stable")[:k]]
        supports = laplace_integer(counts[chosen], Fraction(k), half)
        return FrequentItemsets([tuple(universe[i] for i in sets[c]) for c in chosen],
                                supports, eps)

    return charge(accountant, PureDP(eps), f"top_k_itemsets(k={k}, ε={eps}, {method})",
                  compute)


def exact_top_k(transactions: Iterable[Iterable[Any]], items: Sequence[Any], k: int,
                max_size: int = 3) -> list[tuple[Any, ...]]:
    """The true top-k (ties broken by enumeration order; not private: for evaluation)."""
    universe = list(items)
    sets, counts = candidate_supports(incidence(transactions, universe, strict=False), max_size)
    order = np.argsort(-counts, kind="stable")[:k]
    return [tuple(universe[i] for i in sets[c]) for c in order]


def false_negative_rate(released: Sequence[tuple[Any, ...]], truth: Sequence[tuple[Any, ...]]
                        ) -> float:
    """Share of the true top-k missing from the release (itemsets as sets)."""
    got = {frozenset(s) for s in released}
    return sum(frozenset(t) not in got for t in truth) / max(len(truth), 1)


