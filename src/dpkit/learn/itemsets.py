"""Private top-k frequent itemsets by TF (Bhaskar, Laxman, Smith & Thakurta, "Discovering
frequent patterns in sensitive data", KDD 2010, §3), and the sparse supports every itemset
method of dpkit shares. Pure ε-DP, one transaction added or removed.

Data: transactions become a SciPy CSR incidence matrix (n × M, one 1 per distinct item of a
transaction; :func:`sparse_incidence`), so memory and time grow with the number of items
present, not with n·M. Supports come from sparse products and row intersections
(:func:`candidate_supports`, :func:`top_supports`).

TF. Candidates: every itemset of 1 … ``max_size`` items over the candidate items. Half of
the selection budget ε_s selects k itemsets, half releases their supports:

- ``method="exponential"``: k rounds of the exponential mechanism without replacement, each
  at ε_s/(2k) on the support counts (sensitivity 1, monotone under adding or removing a
  transaction), weight ∝ exp(ε/(2k)·s(I)) (McSherry & Talwar 2007, §3 for monotone scores;
  sequential composition over the k rounds).
- ``method="laplace"``: every candidate's support plus discrete Laplace noise of scale
  4k/ε_s, the k largest noisy supports selected (Bhaskar et al.'s Laplace variant: the
  noisy top-k of monotone counting queries is ε_s/2-DP at that scale).

Then the k selected supports get discrete Laplace noise of scale 2k/ε_s (L1 sensitivity k: a
transaction is in at most all k).

Candidate items. ``prune=False`` (default): every item of the declared universe, so the
candidates are Σ_{s ≤ max_size} C(M, s), refused above ``max_candidates``. ``prune=True``:
Bhaskar et al. truncate the frequencies below f_k − γ so that only the candidates above
need be enumerated; sampling the truncated remainder exactly needs an exponential mechanism
over a multiset of ~10^11 equal scores, which dpkit's exact samplers do not offer, so dpkit
prunes by noisy support instead: ε/4 first selects λ_p = min(M, k) items by λ_p rounds of
the exponential mechanism without replacement on the item supports (each at ε/(4λ_p),
monotone, sensitivity 1 — report-noisy-max with Gumbel noise), reduced until the candidates
over them fit ``max_candidates``; TF then runs on the itemsets over those items with
ε_s = 3ε/4. An itemset of the top-k has every item of support ≥ f_k, and at most k such
items occur in the top-k, so the pruning only loses what the item selection misses. The
candidate set is a function of released items, so the total is ε/4 + 3ε/4 = ε by
sequential composition (McSherry 2009, Thm 1).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_epsilon
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.release.measure import laplace_integer

__all__ = ["read_fimi", "transactions_from_table", "incidence", "sparse_incidence",
           "as_csr", "item_supports", "candidate_supports", "top_supports", "top_k_itemsets",
           "FrequentItemsets", "exact_top_k", "false_negative_rate", "count_candidates", "peel"]

ITEMS, TOP, SUPPORTS = "candidate items", "top-k itemsets", "supports"


def read_fimi(path: str | Path) -> list[list[int]]:
    """Transactions of a FIMI file (one per line, space-separated integer item ids)."""
    with open(path) as f:
        return [[int(v) for v in line.split()] for line in f if line.strip()]


def transactions_from_table(table: Any, columns: Sequence[str]) -> list[list[str]]:
    """A Polars table as transactions of ``"column=value"`` items (nulls skipped)."""
    rows = table.select(list(columns)).to_dicts()
    return [[f"{c}={r[c]}" for c in columns if r[c] is not None] for r in rows]


def as_csr(matrix: Any) -> sp.csr_matrix:
    """An incidence matrix (dense 0/1 or boolean array, or any SciPy sparse matrix; a
    nonzero entry means "present") as a CSR matrix of int32 ones with sorted column indices
    and no duplicates: the form every support computation here takes."""
    if sp.issparse(matrix):
        x = sp.csr_matrix(matrix, copy=True)
        x.sum_duplicates()
        x.eliminate_zeros()
    else:
        x = sp.csr_matrix(np.asarray(matrix).astype(bool))
    x = sp.csr_matrix((np.ones(x.indices.size, dtype=np.int32), x.indices.astype(np.int32),
                       x.indptr.astype(np.int64)), shape=x.shape)
    x.sort_indices()
    return x


def sparse_incidence(transactions: Any, universe: Sequence[Any], strict: bool = True
                     ) -> sp.csr_matrix:
    """The (n, M) incidence matrix over the declared ``universe`` as CSR (int32 ones, a
    repeated item counted once).

    Parameters
    ----------
    transactions : iterable of iterables, or a SciPy sparse matrix
        One transaction per privacy unit. A sparse matrix is taken as the incidence itself
        (its columns are ``universe``, nonzero = present).
    universe : sequence
        The declared items (public).
    strict : bool
        An item outside ``universe`` raises DomainError; otherwise it is dropped.

    Raises
    ------
    DomainError
        Transactions that are not iterables of items, an unknown item (``strict``), or a
        sparse matrix whose width is not ``len(universe)``.
    """
    m = len(universe)
    if sp.issparse(transactions):
        if transactions.ndim != 2 or transactions.shape[1] != m:
            raise DomainError(f"a sparse incidence matrix must have {m} columns (the items)")
        if transactions.dtype.kind not in "biuf":
            raise DomainError("a sparse incidence matrix must hold numbers")
        return as_csr(transactions)
    index = {v: i for i, v in enumerate(universe)}
    try:
        rows = transactions if isinstance(transactions, list | tuple) else list(transactions)
        try:  # sized rows are read in place (no copy of a large list of lists)
            lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        except TypeError:
            rows = [list(t) for t in rows]
            lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    except TypeError:
        raise DomainError("transactions must be an iterable of iterables of items") from None
    try:
        cols = np.fromiter((index[v] if strict else index.get(v, -1)
                            for v in chain.from_iterable(rows)), dtype=np.int64,
                           count=int(lengths.sum()))
    except (KeyError, TypeError):
        raise DomainError("a transaction holds an item outside the declared universe "
                          "(items=); declare every item") from None
    row = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    known = cols >= 0
    x = sp.csr_matrix((np.ones(int(known.sum()), dtype=np.int32), (row[known], cols[known])),
                      shape=(len(rows), m))
    return as_csr(x)


def incidence(transactions: Iterable[Iterable[Any]], universe: Sequence[Any],
              strict: bool = True) -> np.ndarray:
    """The (n, M) boolean incidence matrix over the declared ``universe``, dense (small
    data and tests; the methods use :func:`sparse_incidence`). ``strict``: an item outside
    it raises DomainError; otherwise such items are dropped."""
    return sparse_incidence(transactions, universe, strict).toarray().astype(bool)


def item_supports(x: sp.csr_matrix) -> np.ndarray:
    """The support of every column of a CSR incidence matrix (int64)."""
    return np.bincount(x.indices, minlength=x.shape[1]).astype(np.int64)


def count_candidates(m: int, max_size: int, limit: int | None = None) -> int:
    """Σ_{s=1}^{max_size} C(m, s), the itemsets of at most ``max_size`` of m items (2^m − 1
    when max_size ≥ m); with ``limit``, the sum stops once it exceeds ``limit`` (a value
    above ``limit`` then means "more than ``limit``")."""
    if max_size >= m:
        return (1 << m) - 1
    total = 0
    for s in range(1, max_size + 1):
        total += math.comb(m, s)
        if limit is not None and total > limit:
            break
    return total


def candidate_supports(matrix: Any, max_size: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """Every itemset of 1 … max_size (≤ 3) column indices and its support (int64), in the
    order singletons, pairs, triples (each lexicographic). ``matrix``: dense or sparse
    incidence; pairs from XᵀX, triples from the pair counts within each item's rows."""
    if not 1 <= max_size <= 3:
        raise DomainError("max_size must be 1, 2 or 3")
    x = as_csr(matrix)
    m = x.shape[1]
    sets: list[tuple[int, ...]] = [(i,) for i in range(m)]
    counts = [item_supports(x)]
    if max_size >= 2:
        pairs = (x.T @ x).toarray()
        iu = np.triu_indices(m, 1)
        sets += list(zip(*(a.tolist() for a in iu), strict=True))
        counts.append(pairs[iu].astype(np.int64))
    if max_size >= 3:
        csc = x.tocsc()
        for i in range(m - 2):
            rows = csc.indices[csc.indptr[i]:csc.indptr[i + 1]]
            sub = x[rows][:, i + 1:]
            triple = (sub.T @ sub).toarray()  # rows j > i, columns l > i (offset i + 1)
            for a, j in enumerate(range(i + 1, m - 1)):
                sets += [(i, j, ll) for ll in range(j + 1, m)]
                counts.append(triple[a, a + 1:].astype(np.int64))
    return sets, np.concatenate(counts)


def top_supports(matrix: Any, k: int, max_size: int | None = None
                 ) -> list[tuple[int, tuple[int, ...]]]:
    """The k non-empty itemsets (column-index tuples, at most ``max_size`` items) of largest
    support, exactly, in the order (support descending, size, indices): best-first search of
    the set-enumeration tree, whose children never beat their parent, so pops come out in
    that order. A child whose support is below the k-th largest support seen so far cannot
    enter the top-k and is not pushed. The rows holding an itemset are the intersection of
    its parent's rows with its last item's (CSC), and its children's supports one
    ``bincount`` over those rows. Itemsets of support 0 are not listed (fewer than k may
    come back)."""
    x = as_csr(matrix)
    m = x.shape[1]
    csc = x.tocsc()
    first = item_supports(x)
    found = heapq.nlargest(k, first.tolist())  # k largest supports seen (a min-heap below)
    heapq.heapify(found)

    def floor() -> int:
        return max(found[0], 1) if len(found) >= k else 1

    heap: list[tuple[int, int, tuple[int, ...]]] = [
        (-int(first[j]), 1, (j,)) for j in np.flatnonzero(first >= floor()).tolist()]
    heapq.heapify(heap)
    rows_of: dict[tuple[int, ...], np.ndarray] = {}
    out: list[tuple[int, tuple[int, ...]]] = []
    while heap and len(out) < k:
        neg, size, items = heapq.heappop(heap)
        out.append((-neg, items))
        last = items[-1]
        col = csc.indices[csc.indptr[last]:csc.indptr[last + 1]]
        rows = col if size == 1 else np.intersect1d(rows_of[items[:-1]], col,
                                                    assume_unique=True)
        if last + 1 >= m or (max_size is not None and size >= max_size):
            continue
        rows_of[items] = rows
        sup = np.bincount(x[rows].indices, minlength=m)[last + 1:]
        for j in np.flatnonzero(sup >= floor()).tolist():
            s = int(sup[j])
            if len(found) < k:
                heapq.heappush(found, s)
            elif s > found[0]:
                heapq.heapreplace(found, s)
            heapq.heappush(heap, (-s, size + 1, items + (last + 1 + j,)))
    return out


@dataclass(frozen=True)
class FrequentItemsets:
    """The released itemsets (tuples of item labels), their noisy supports, and ε."""

    itemsets: list[tuple[Any, ...]]
    supports: np.ndarray
    epsilon: Fraction


def _prune_pool(m: int, k: int, max_size: int, max_candidates: int) -> int:
    """λ_p: min(M, k) items, fewer until their candidates fit ``max_candidates``."""
    lam = min(m, k)
    while lam > 1 and count_candidates(lam, max_size) > max_candidates:
        lam -= 1
    return lam


def peel(scores: np.ndarray, count: int, epsilon: Fraction, statistic: str = ITEMS
         ) -> list[int]:
    """``count`` rounds of the exponential mechanism without replacement, each at
    ε/count, on monotone counting scores of sensitivity 1 (temperature count/ε from
    :func:`dpkit.mechanisms.make_selection`)."""
    return [int(i) for i in frontend.select(scores, 1, epsilon, k=count, monotonic=True,
                                            statistic=statistic).value]


def top_k_itemsets(transactions: Any, items: Sequence[Any], k: int, epsilon: Any, *,
                   max_size: int = 3, method: str = "exponential",
                   max_candidates: int = 2_000_000, prune: bool = False,
                   accountant: AccountantLike = None) -> FrequentItemsets:
    """The k most frequent itemsets of up to ``max_size`` items, ε-DP (module docstring).

    Parameters
    ----------
    transactions : iterable of iterables, or a SciPy sparse incidence matrix
        One per privacy unit; items outside ``items`` are ignored.
    items : sequence
        The declared item universe (public).
    k : int
    epsilon : number
        ε > 0 (nats). Without pruning ε/2 selection, ε/2 supports; with ``prune`` ε/4
        selects the candidate items, then 3ε/8 and 3ε/8. Privacy map: one transaction added
        or removed ↦ PureDP(ε) (Bhaskar et al. 2010, §3; sequential composition, McSherry 2009,
        Thm 1).
    max_size : int
        Largest itemset size (1 … 3).
    method : {"exponential", "laplace"}
    max_candidates : int
        Refuse universes whose candidate count exceeds it (without ``prune``); with
        ``prune``, the cap on the candidates over the selected items.
    prune : bool
        Select the candidate items first by noisy support (module docstring), so any
        universe size runs.
    accountant : None, PrivacyFilter or Session

    Returns
    -------
    FrequentItemsets
        In selection order, supports as noisy counts (int64).

    Raises
    ------
    DomainError
        Bad k, ε, method or size, too many candidates, transactions that are not
        iterables (all before the debit).
    """
    eps = check_epsilon(epsilon)
    universe = list(items)
    m = len(universe)
    if not 1 <= max_size <= 3:
        raise DomainError("max_size must be 1, 2 or 3")
    pool = _prune_pool(m, int(k), max_size, max_candidates) if prune and m else m
    total = count_candidates(pool, max_size)
    if total > max_candidates:
        raise DomainError(f"{total} candidate itemsets exceed max_candidates={max_candidates}")
    if not 1 <= int(k) <= total:
        raise DomainError(f"k must be in 1 … {total}")
    if method not in ("exponential", "laplace"):
        raise DomainError("method must be 'exponential' or 'laplace'")
    k = int(k)
    x = sparse_incidence(transactions, universe, strict=False)  # parsing: no statistic yet
    half = (eps - eps / 4) / 2 if prune else eps / 2
    rows = ((frontend.selection_row(1, eps / 4, ITEMS, k=pool, monotonic=True),) if prune
            else ()) + (frontend.selection_row(1, half, TOP, k=k, monotonic=True)
                        if method == "exponential" else frontend.noise_row(2 * k, half, TOP),
                        frontend.noise_row(k, half, SUPPORTS))

    def compute() -> FrequentItemsets:
        if prune:
            chosen = sorted(peel(item_supports(x), pool, eps / 4))
            sub, columns = x[:, chosen], np.asarray(chosen)
        else:
            sub, columns = x, np.arange(m)
        sets, counts = candidate_supports(sub, max_size)
        if method == "exponential":
            # supports are monotone under adding/removing a transaction, so weight
            # exp(ε_round·s/Δ) is ε_round-DP (McSherry & Talwar 2007, §3; Dwork & Roth
            # Thm 3.10's remark): scale Δ/ε_round = k/(ε/2)
            picks = peel(counts, k, half, TOP)
        else:
            noisy = laplace_integer(counts, Fraction(2 * k), half)
            picks = [int(i) for i in np.argsort(-noisy, kind="stable")[:k]]
        supports = laplace_integer(counts[picks], Fraction(k), half)
        return FrequentItemsets(
            [tuple(universe[int(columns[i])] for i in sets[c]) for c in picks], supports, eps)

    return charge(accountant, PureDP(eps),
                  f"top_k_itemsets(k={k}, ε={eps}, {method}{', pruned' if prune else ''})",
                  compute, rows)


def exact_top_k(transactions: Any, items: Sequence[Any], k: int, max_size: int = 3
                ) -> list[tuple[Any, ...]]:
    """The true top-k of at most ``max_size`` items (ties: smaller first, then by position
    in ``items``; itemsets of support 0 follow in that order if fewer than k have support).
    Not private: for evaluation."""
    universe = list(items)
    top = [s for _, s in top_supports(sparse_incidence(transactions, universe, strict=False),
                                      int(k), max_size)]
    if len(top) < k:  # pad with support-0 itemsets in enumeration order
        seen = set(top)
        more = (c for size in range(1, max_size + 1)
                for c in itertools.combinations(range(len(universe)), size) if c not in seen)
        top += list(itertools.islice(more, int(k) - len(top)))
    return [tuple(universe[i] for i in s) for s in top]


def false_negative_rate(released: Sequence[tuple[Any, ...]], truth: Sequence[tuple[Any, ...]]
                        ) -> float:
    """Share of the true top-k missing from the release (itemsets as sets)."""
    got = {frozenset(s) for s in released}
    return sum(frozenset(t) not in got for t in truth) / max(len(truth), 1)
