"""PrivBasis: private top-k frequent itemsets of any size through a basis set (Li, Qardaji,
Su & Cao, "PrivBasis: Frequent itemset mining with differential privacy", PVLDB 5(11),
2012, §4). Pure ε-DP (ε in nats), one transaction added or removed.

A θ-basis set B = {B₁, …, B_w} is a family of item sets such that every itemset of support
≥ θ is a subset of some Bᵢ; counting the 2^|Bᵢ| *bins* of each basis (bin S ⊆ Bᵢ holds the
transactions t with t ∩ Bᵢ = S) then answers the support of every subset X of Bᵢ as the
sum of the bins S ⊇ X. Four steps, budget ε = ε₁ + ε₂ + ε₃ + ε₄ (``split`` gives
α₁, α₂, α₃ with εᵢ = αᵢ·ε; ε₄ is the rest):

1. λ, the number of distinct items in the top-k itemsets, by the exponential mechanism
   over λ ∈ {1, …, min(k, M)} with score q(λ) = −|f_k − s_(λ)|, where f_k is the k-th
   largest support among the candidate itemsets (all non-empty ones, or those of at most
   ``max_size`` items) and s_(λ) the λ-th largest item support (every item of a top-k
   itemset has support ≥ f_k, so λ ≈ #{items with s ≥ f_k}). Adding or removing a
   transaction moves every support by 0 or 1 in the same direction, so every order
   statistic of a fixed family of supports moves by at most 1 and so does q: sensitivity
   Δ = 1, weight ∝ exp(ε₁·q/(2Δ)), ε₁-DP (McSherry & Talwar 2007; Dwork & Roth 2014,
   Thm 3.10).
2. F, the λ most frequent items: λ rounds of the exponential mechanism without
   replacement on the item supports, each at ε₂/λ, weight ∝ exp((ε₂/λ)·s(i)) (monotone
   counting scores of sensitivity 1: the ε/Δ form, as in
   :func:`dpkit.learn.itemsets.top_k_itemsets`).
3. If λ ≤ ℓ (``max_basis_size``) the basis set is {F} and ε₃ joins ε₄. Otherwise
   λ₂ = min(k − λ, λ(λ−1)/2) frequent pairs among F are selected the same way (λ₂ rounds
   at ε₃/λ₂; a top-k itemset of two or more items has all its pairs in the top-k, and
   the top-k holds ≈ λ singletons, so ≤ k − λ pairs; none when ``max_size=1``), and B is
   built from the graph (F, P) with no further access to the data: its maximal cliques
   (Bron & Kerbosch 1973; every itemset whose pairs are all selected lies in one),
   cliques larger than ℓ split into ℓ-subsets covering their edges, subsumed bases
   dropped, and bases merged greedily while the merge lowers w²·Σᵢ 2^|Bᵢ| (the summed
   variance of the bin noise) and the union has ≤ ℓ items. If λ₂ = 0 no pair is
   selected and ε₃ joins ε₄.
4. The bin counts of all w bases, a vector of Σᵢ 2^|Bᵢ| counts: a transaction falls in
   exactly one bin of each basis, so adding or removing one changes w counts by 1 each,
   L1 sensitivity w. Released with exact discrete Laplace noise of scale w/ε₄, ε₄-DP
   (Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke 2020, Thm 1). The
   support of every non-empty subset X of a basis is the sum of its bins S ⊇ X (a
   superset-sum transform, post-processing); an itemset under several bases gets the
   inverse-variance average (the estimate from Bᵢ sums 2^(|Bᵢ|−|X|) noisy bins). The k
   largest estimates are released with those estimates as their supports.

Privacy map: the output is (ε₁ + ε₂ + ε₃ + ε₄)-DP = ε-DP by sequential composition
(McSherry 2009, Thm 1; Dwork & Roth 2014, Thm 3.16), each step's budget depending only on
earlier outputs (λ, then whether pairs are selected). The paper's PrivBasis (its §4,
Algorithms 1–3, and its privacy theorem for the composed algorithm) is followed in these
steps; the oversize-clique split and the merge rule are dpkit's (data-independent given
F and P, so they cost nothing). Defaults α₁ = 0.1, α₂ = 0.4, α₃ = 0.1 (ε₄ = 0.4ε).

Only the item universe declared by ``items`` is used (never inferred); transactions are
parsed and checked against it before the debit, and no statistic is computed until after.
Every count is taken on the sparse incidence (:func:`dpkit.learn.itemsets.sparse_incidence`:
f_k by a pruned best-first search, pairs from the selected columns, cells from each basis's
columns), and subsets are keyed by their item indices, so memory grows with the items
present and the bases, not with n·M.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.measures import PureDP
from dpkit.core.numbers import to_fraction
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_epsilon
from dpkit.learn.itemsets import (
    FrequentItemsets,
    as_csr,
    count_candidates,
    item_supports,
    peel,
    sparse_incidence,
    top_supports,
)
from dpkit.learn.itemsets import incidence as incidence  # re-exported (tests, callers)
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.release.measure import laplace_integer

__all__ = ["privbasis", "exact_top_k_all", "basis_bin_counts", "basis_set",
           "reconstruct_keys", "DEFAULT_SPLIT"]

LAMBDA, REST = "λ", "items, pairs and basis bin counts (calibrated as λ is released)"
DEFAULT_SPLIT = (Fraction(1, 10), Fraction(4, 10), Fraction(1, 10))
_MAX_THETA = 16  # 2^16 bins per basis


def _top_supports(matrix: Any, k: int, max_size: int | None = None
                  ) -> list[tuple[int, tuple[int, ...]]]:
    """The k non-empty itemsets of largest support, exactly (sparse best-first search:
    :func:`dpkit.learn.itemsets.top_supports`)."""
    return top_supports(matrix, k, max_size)


def exact_top_k_all(transactions: Any, items: Sequence[Any], k: int,
                    max_size: int | None = None) -> list[tuple[Any, ...]]:
    """The true top-k itemsets of any size (or of ≤ ``max_size`` items; ties: smaller
    first, then by position in ``items``). Not private: for evaluation."""
    universe = list(items)
    return [tuple(universe[i] for i in s)
            for _, s in _top_supports(sparse_incidence(transactions, universe), int(k),
                                      max_size)]


def _lambda_scores(item_supports: np.ndarray, fk: int, k: int) -> np.ndarray:
    """q(λ) = −|f_k − s_(λ)| for λ = 1 … min(k, M) (sensitivity 1: module docstring)."""
    ordered = np.sort(np.asarray(item_supports, dtype=np.int64))[::-1][:k]
    return -np.abs(fk - ordered)


def _maximal_cliques(n: int, adj: list[int]) -> list[int]:
    """Maximal cliques (as bitmasks) of the graph on 0 … n−1 with neighbour masks ``adj``:
    Bron–Kerbosch with pivoting (isolated vertices are cliques of one)."""
    out: list[int] = []
    stack = [(0, (1 << n) - 1, 0)]
    while stack:
        r, p, x = stack.pop()
        if not p:
            if not x:
                out.append(r)
            continue
        pivot = max(_bits(p | x), key=lambda u: (adj[u] & p).bit_count())
        for v in _bits(p & ~adj[pivot]):
            bit = 1 << v
            stack.append((r | bit, p & adj[v], x & adj[v]))
            p &= ~bit
            x |= bit
    return out


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _split_clique(clique: int, pair_rank: dict[tuple[int, int], int], theta: int
                  ) -> list[int]:
    """θ-subsets of an oversize clique covering all its edges: each starts from the
    best-ranked uncovered edge and grows by the vertex closing most uncovered edges."""
    verts = _bits(clique)
    uncovered = {(u, v) for i, u in enumerate(verts) for v in verts[i + 1:]}
    out = []
    while uncovered:
        u, v = min(uncovered, key=lambda e: (pair_rank.get(e, len(pair_rank)), e))
        basis = [u, v]
        while len(basis) < theta:
            rest = [x for x in verts if x not in basis]
            if not rest:
                break
            gains = [sum((min(x, b), max(x, b)) in uncovered for b in basis) for x in rest]
            basis.append(rest[int(np.argmax(gains))])
        for i, a in enumerate(basis):
            for b in basis[i + 1:]:
                uncovered.discard((min(a, b), max(a, b)))
        out.append(sum(1 << x for x in basis))
    return out


def _cost(masks: list[int]) -> int:
    return len(masks) ** 2 * sum(1 << m.bit_count() for m in masks)


def basis_set(n_items: int, pairs: Sequence[tuple[int, int]], theta: int) -> list[tuple[int, ...]]:
    """A basis set over items 0 … n_items−1 from the selected pairs (in selection order),
    no basis larger than ``theta`` (module docstring, step 3). Every item and every pair is
    in some basis, and so is every maximal clique of ≤ θ items of the pair graph."""
    adj = [0] * n_items
    rank: dict[tuple[int, int], int] = {}
    for r, (a, b) in enumerate(pairs):
        a, b = min(a, b), max(a, b)
        adj[a] |= 1 << b
        adj[b] |= 1 << a
        rank.setdefault((a, b), r)
    masks: list[int] = []
    for c in _maximal_cliques(n_items, adj):
        masks += [c] if c.bit_count() <= theta else _split_clique(c, rank, theta)
    masks = sorted(set(masks), key=lambda m: (-m.bit_count(), m))
    kept: list[int] = []
    for m in masks:  # drop bases inside a larger one
        if not any(m & big == m for big in kept):
            kept.append(m)
    while len(kept) > 1:
        best, pair = _cost(kept), None
        for i in range(len(kept)):
            for j in range(i + 1, len(kept)):
                union = kept[i] | kept[j]
                if union.bit_count() > theta:
                    continue
                merged = [m for t, m in enumerate(kept) if t not in (i, j)] + [union]
                cost = _cost(merged)
                if cost < best:
                    best, pair = cost, (i, j)
        if pair is None:
            break
        union = kept[pair[0]] | kept[pair[1]]
        kept = [m for t, m in enumerate(kept) if t not in pair and m & union != m] + [union]
    return [tuple(_bits(m)) for m in kept]


def basis_bin_counts(matrix: Any, bases: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Exact bin counts of each basis (column indices of the incidence matrix, dense or
    sparse): entry S of basis B counts the transactions t with t ∩ B = S, S as the bitmask
    Σ_{j: B_j ∈ S} 2^j. Each transaction is in exactly one bin per basis."""
    x = as_csr(matrix)
    out = []
    for basis in bases:
        b = len(basis)
        codes = x[:, list(basis)] @ (np.int64(1) << np.arange(b, dtype=np.int64))
        out.append(np.bincount(np.asarray(codes, dtype=np.int64).ravel(),
                               minlength=1 << b).astype(np.int64))
    return out


def _bin_sensitivity(bases: Sequence[Sequence[int]]) -> Fraction:
    """L1 sensitivity of the concatenated bin counts: one bin per basis moves by 1."""
    return Fraction(len(bases))


def _noisy_bins(matrix: np.ndarray, bases: Sequence[Sequence[int]], epsilon: Fraction
                ) -> list[np.ndarray]:
    """The bin counts plus discrete Laplace noise of scale w/ε (module docstring, step 4)."""
    counts = basis_bin_counts(matrix, bases)
    noisy = laplace_integer(np.concatenate(counts), _bin_sensitivity(bases), epsilon)
    return np.split(noisy, np.cumsum([c.size for c in counts])[:-1])


def _superset_sums(counts: np.ndarray, b: int) -> np.ndarray:
    """f[S] = Σ_{T ⊇ S} counts[T] over the 2^b bitmasks (one bit at a time, in place on a
    copy: b vectorised passes)."""
    f = np.array(counts, dtype=np.int64)
    for j in range(b):
        view = f.reshape(-1, 2, 1 << j)  # axis 1 is bit j
        view[:, 0, :] += view[:, 1, :]
    return f


def reconstruct_keys(bins: Sequence[np.ndarray], bases: Sequence[Sequence[int]]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every non-empty subset of a basis and its support estimate: superset sums of the
    bins, inverse-variance averaged across bases (module docstring, step 4).

    Returns ``(keys, sizes, estimates)``: ``keys`` (u, ℓ) int64 rows, each subset's column
    indices ascending and padded with −1 at the end (ℓ the largest basis), one row per
    distinct subset in lexicographic order of the padded rows' non-negative part."""
    width = max((len(b) for b in bases), default=1)
    keys, estimates, weights = [], [], []
    for counts, basis in zip(bins, bases, strict=True):
        b = len(basis)
        f = _superset_sums(counts, b)
        masks = np.arange(1, 1 << b)
        bits = ((masks[:, None] >> np.arange(b)) & 1).astype(bool)
        cols = np.where(bits, np.asarray(basis, dtype=np.int64)[None, :], np.int64(-1))
        # basis ascending: stable-sort each row's present columns to the front
        order = np.argsort(~bits, axis=1, kind="stable")
        key = np.full((masks.size, width), -1, dtype=np.int64)
        key[:, :b] = np.take_along_axis(cols, order, axis=1)
        keys.append(key)
        estimates.append(f[1:].astype(np.float64))
        weights.append(np.exp2(bits.sum(axis=1) - b))  # 1 / (number of bins summed)
    allkeys = np.concatenate(keys)
    sortable = np.where(allkeys < 0, np.iinfo(np.int64).max, allkeys)
    uniq, first, inverse = np.unique(sortable, axis=0, return_index=True,
                                     return_inverse=True)
    inverse = inverse.reshape(-1)
    w = np.concatenate(weights)
    est = (np.bincount(inverse, w * np.concatenate(estimates), minlength=first.size)
           / np.bincount(inverse, w, minlength=first.size))
    out = allkeys[first]
    return out, (out >= 0).sum(axis=1), est


def _reconstruct(bins: Sequence[np.ndarray], bases: Sequence[Sequence[int]], m: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`reconstruct_keys` with each subset as a boolean row over the M items."""
    keys, _, est = reconstruct_keys(bins, bases)
    member = np.zeros((keys.shape[0], m), dtype=bool)
    row, col = np.nonzero(keys >= 0)
    member[row, keys[row, col]] = True
    return member, est


def privbasis(transactions: Any, items: Sequence[Any], k: int,
              epsilon: Any, *, accountant: AccountantLike = None, max_size: int | None = None,
              max_basis_size: int = 12, split: Sequence[Any] = DEFAULT_SPLIT
              ) -> FrequentItemsets:
    """The k most frequent itemsets of any size by PrivBasis, ε-DP (module docstring).

    Parameters
    ----------
    transactions : iterable of iterables
        One per privacy unit; every item must be in ``items``.
    items : sequence
        The declared item universe (public, distinct).
    k : int
        Number of itemsets, 1 ≤ k ≤ the number of candidates (2^M − 1, or Σ_{s ≤ max_size}
        C(M, s)).
    epsilon : number
        ε > 0 (nats). Privacy map: one transaction added or removed ↦ PureDP(ε), ε = ε₁ +
        ε₂ + ε₃ + ε₄ by sequential composition (Li et al. 2012, Algorithm 1 and its privacy
        theorem; McSherry 2009, Thm 1).
    accountant : None, PrivacyFilter or Session
        Debited ε (PureDP) before any statistic is computed.
    max_size : int, optional
        Only itemsets of at most this many items (f_k in step 1 is then the k-th largest
        support among them: still an order statistic of a fixed family of counts,
        sensitivity 1); None (default) for any size.
    max_basis_size : int
        ℓ, the largest basis (2^ℓ bins each), 1 … 16.
    split : (α₁, α₂, α₃)
        Budget shares of steps 1–3 (each > 0, sum < 1); step 4 gets the rest, and any
        share of a skipped step 3.

    Returns
    -------
    FrequentItemsets
        Itemsets (label tuples in ``items`` order) by estimated support, descending, and
        their estimates rounded to int64 (noisy counts). Fewer than k when the basis set
        has fewer non-empty subsets.

    Raises
    ------
    DomainError
        Bad k, ε, split or max_basis_size, repeated items, or an item outside ``items``
        (raised before the debit).
    """
    eps = check_epsilon(epsilon)
    universe = list(items)
    m = len(universe)
    if m == 0 or len(set(universe)) != m:
        raise DomainError("items must be a non-empty sequence of distinct items")
    if max_size is not None and (isinstance(max_size, bool)
                                 or not isinstance(max_size, int | np.integer)
                                 or max_size < 1):
        raise DomainError("max_size must be a positive integer or None")
    size_cap = m if max_size is None else min(int(max_size), m)
    total = count_candidates(m, size_cap, limit=k if isinstance(k, int | np.integer) else None)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= total:
        raise DomainError("k must be a positive integer, at most the number of candidate "
                          "itemsets")
    k = int(k)
    if isinstance(max_basis_size, bool) or not 1 <= int(max_basis_size) <= _MAX_THETA:
        raise DomainError(f"max_basis_size must be in 1 … {_MAX_THETA}")
    theta = int(max_basis_size)
    try:
        a1, a2, a3 = (to_fraction(a) for a in split)
    except (TypeError, ValueError, DomainError):
        raise DomainError("split must be three positive numbers (α₁, α₂, α₃)") from None
    if min(a1, a2, a3) <= 0 or a1 + a2 + a3 >= 1:
        raise DomainError("split must be three positive shares summing to less than 1")
    matrix = sparse_incidence(transactions, universe)  # parsing only: no statistic yet
    eps1, eps2, eps3 = a1 * eps, a2 * eps, a3 * eps
    rows = (frontend.selection_row(1, eps1, LAMBDA), NoiseRow("privbasis", None, None, REST))

    def compute() -> FrequentItemsets:
        item_sup = item_supports(matrix)
        top = _top_supports(matrix, k, size_cap)
        fk = top[k - 1][0] if len(top) >= k else 0
        # step 1: λ by the exponential mechanism, sensitivity 1, not monotone: scale 2/ε₁
        lam = 1 + int(frontend.select(_lambda_scores(item_sup, fk, k), 1, eps1,
                                      statistic=LAMBDA).value)
        # step 2: the λ most frequent items
        chosen = peel(item_sup, lam, eps2, REST)
        spent = eps1 + eps2
        if lam <= theta:
            bases = [tuple(sorted(chosen))]
        else:
            n_pairs = 0 if size_cap == 1 else min(k - lam, lam * (lam - 1) // 2)
            pairs: list[tuple[int, int]] = []
            if n_pairs > 0:
                sub = matrix[:, chosen]
                counts = (sub.T @ sub).toarray().astype(np.int64)
                iu = np.triu_indices(lam, 1)
                picks = peel(counts[iu], n_pairs, eps3, REST)
                pairs = [(int(iu[0][p]), int(iu[1][p])) for p in picks]
                spent += eps3
            bases = [tuple(sorted(chosen[i] for i in b))
                     for b in basis_set(lam, pairs, theta)]
        # step 4: bin counts at the rest of the budget, then supports of every subset
        bins = _noisy_bins(matrix, bases, eps - spent)
        keys, sizes, est = reconstruct_keys(bins, bases)
        keep = sizes <= size_cap
        keys, est, sizes = keys[keep], est[keep], sizes[keep]
        order = np.lexsort((sizes, -est))[:k]
        return FrequentItemsets(
            [tuple(universe[i] for i in keys[c] if i >= 0) for c in order],
            np.rint(est[order]).astype(np.int64), eps)

    return charge(accountant, PureDP(eps), f"privbasis(k={k}, ε={eps})", compute, rows)
