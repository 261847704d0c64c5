"""SmartTrunc: private top-k frequent itemsets of any size on transaction data, from small
dense tables to retail-sized universes, by truncation (Zeng, Naughton & Cai, "On
differentially private frequent itemset mining", PVLDB 6(1), 2012) and PrivBasis's basis
cells (Li, Qardaji, Su & Cao, PVLDB 5(11), 2012). Pure ε-DP (ε in nats), one transaction
added or removed. Also the front door :func:`frequent_itemsets` over dpkit's three methods.

Steps, budget ε = ε_n + ε_λ + ε_F + ε_m + ε_P + ε_S (``split`` = (α_n, α_λ, α_F, α_m, α_P),
εᵢ = αᵢ·ε, ε_S the rest):

1. n̂ = n + discrete Laplace(1/ε_n): a count, sensitivity 1 (Ghosh, Roughgarden &
   Sundararajan 2009; Canonne, Kamath & Steinke 2020, Thm 1). It sizes the next steps.
2. λ, the number of candidate items: the exponential mechanism over λ ∈ [λ_lo, λ_hi] with
   PrivBasis's score q(λ) = −|f_k − s_(λ)| (Li et al. §4: f_k the k-th largest support
   among the candidate itemsets, s_(λ) the λ-th largest item support; each order statistic
   moves by ≤ 1, Δq = 1, not monotone: weight exp(ε_λ·q/2); McSherry & Talwar 2007, Dwork &
   Roth Thm 3.10). λ_lo is the least λ whose itemsets (≤ ``max_size`` items) number ≥ k;
   λ_hi = max(λ_lo, min(k, M)) (a top-k itemset's items have support ≥ f_k: at most k).
3. The cap on a basis: the largest b ≤ 16 with 2^(b/2)/ε_S ≤ ``noise_share``·n̂ (a singleton
   estimated from 2^b cells sums 2^(b−1) of them: its noise stays a bounded share of the
   data), at least λ_lo; none when λ_lo > 16. r = min(λ, cap).
4. The candidate items F. m̄ = (Σ_t min(|t|, 2r) + discrete Laplace(2r/ε_m))/n̂ (the sum
   has sensitivity 2r). Dense data (m̄ ≥ r): F is r items drawn by r rounds of the
   exponential mechanism without replacement on the item supports, ε_F/r each (monotone
   counts, Δ = 1). Otherwise *random truncation* to one item (Zeng et al.: truncating
   transactions lowers the sensitivity of support counts): each non-empty transaction
   keeps one of its items uniformly at random (dpkit's generator; a map of each record
   alone, stability 1), the M item counts (L1 sensitivity 1) get discrete Laplace(1/ε_F)
   once, and F is the λ largest — its noise, 1/ε_F on counts diluted by the mean length,
   beats peeling's r/ε_F when m̄ < r. F is ranked by drawing order or noisy count.
5. The bases (no further budget if |F| ≤ cap: one basis F, ε_P joins the cells).
   Otherwise ("bins"): λ₂ = min(k − λ, C(λ, 2)) pairs of F (PrivBasis's count; none if
   ``max_size`` = 1) by random truncation to one pair (each transaction holding two or more
   items of F keeps one such pair uniformly at random: pair counts of L1 sensitivity 1,
   discrete Laplace(1/ε_P), the λ₂ largest), then PrivBasis's basis set over (F, pairs)
   with bases of ≤ cap items (:func:`dpkit.learn.privbasis.basis_set`; post-processing).
6. The cells: each transaction t falls in the cell t ∩ B of every basis B (smart
   truncation to the released items), so the Σ_B 2^|B| cell counts have L1 sensitivity w
   (the number of bases): discrete Laplace(w/ε_S). Cells below θ = ``threshold``·scale·ln N
   (N cells) are set to 0 — the high-pass filter of Cormode, Procopiuc, Srivastava, Shen &
   Yu (ICDT 2012), which at factor 1 lets ½ false cell through in expectation and at the
   default 7/20 about ½N^(13/20): most of the noise of the empty cells goes, little of the
   mass. Each subset of
   a basis gets the sum of its superset cells, averaged across bases by inverse variance
   (post-processing; Li et al. §4). The k largest estimates are released as supports.

``counting="levels"`` replaces steps 5–6 when |F| > cap by Zeng et al.'s level-wise counting
(their truncation-based Apriori, dpkit's variant): ℓ ∈ [1, λ] by the exponential mechanism
at ε_P with score −|#{t : |t ∩ F| ≤ ℓ} − ⌊q·n̂⌉| (q = ``length_quantile``; Δ = 1, not
monotone); smart truncation t ↦ the first ℓ items of t ∩ F in F's order (a per-record map,
stability 1); L = min(max_size, ℓ, ⌊log₂(k+1)⌋) levels at ε_S/L each (an itemset of s items
has 2^s − 1 non-empty subsets at least as frequent, so s ≤ log₂(k+1) in the top-k). Level i
counts its candidates C_i in the truncated data, L1 sensitivity Δ_i = min(C(ℓ, i), |C_i|) (a
transaction of ≤ ℓ items holds at most that many), discrete Laplace Δ_i·L/ε_S; C_1 = F, and
C_{i+1} joins the i-itemsets within Δ_i·(L/ε_S)·ln|C_i| of the k-th largest noisy support so
far (Apriori pruned by noisy support: Bhaskar et al. 2010's truncation below f_k − γ in
noisy form; Agrawal & Srikant 1994's join), at most ``max_candidates``. It was evaluated
against the cells on the held-out tuning data and lost (bench/results/itemsets.md).

Privacy map: one transaction added or removed ↦ PureDP(ε). Every budget and every choice
(λ, the cap, dense or sparse, F, the pairs, the bases, ℓ, each level's candidates) is a
function of earlier outputs and public numbers, and each truncation maps one record alone,
so the output is ε_n + ε_λ + ε_F + ε_m + ε_P + ε_S = ε-DP by sequential composition
(McSherry 2009, Thm 1; Dwork & Roth 2014, Thm 3.16). Every scale comes from the one
calibrated entry (:func:`dpkit.mechanisms.make_noise`, :func:`~dpkit.mechanisms.make_selection`).

Defaults ``split`` = (1/20, 1/10, 2/5, 1/20, 1/10), ``noise_share`` = 1/5 and ``threshold``
= 7/20 have the lowest mean top-50 false-negative rate over a 12-point grid on held-out data
only: UCI Adult as transactions, and the synthetic ``retail_like`` and ``dense_like``
transactions of bench/itemsets.py with seeds 1 and 2, at ε ∈ {0.1, 1} (chess, mushroom,
MSNBC and the benchmark's retail-like seed were not used; ``python bench/itemsets.py
--tune``; the grid's spread was 0.20–0.25, PrivBasis 0.31).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import scipy.sparse as sp

from dpkit.core import rng
from dpkit.core.measures import PureDP
from dpkit.core.numbers import to_fraction
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_epsilon
from dpkit.learn.itemsets import (
    FrequentItemsets,
    count_candidates,
    item_supports,
    sparse_incidence,
    top_k_itemsets,
    top_supports,
)
from dpkit.learn.privbasis import basis_bin_counts, basis_set, privbasis, reconstruct_keys
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.release.measure import laplace_integer

__all__ = ["smarttrunc", "frequent_itemsets", "truncate", "one_item", "one_pair",
           "level_counts", "apriori_gen",
           "DEFAULT_SPLIT", "DEFAULT_METHOD", "METHODS", "NOISE_SHARE", "THRESHOLD",
           "LENGTH_QUANTILE"]

LAMBDA, REST = "λ", "items, lengths, pairs and supports (calibrated as λ is released)"
DEFAULT_SPLIT = (Fraction(1, 20), Fraction(1, 10), Fraction(2, 5), Fraction(1, 20),
                 Fraction(1, 10))  # ε_S = 3ε/10 (+ ε_P without pairs)
NOISE_SHARE = Fraction(1, 5)
THRESHOLD = Fraction(7, 20)
LENGTH_QUANTILE = Fraction(9, 10)
MAX_BIN_ITEMS = 16
METHODS = ("smarttrunc", "privbasis", "tf")
DEFAULT_METHOD = "smarttrunc"
_KEY_LIMIT = 1 << 62
_ENUM_LIMIT = 1 << 25  # i-subsets enumerated at once; a sparse product beyond


def _select(scores: np.ndarray, epsilon: Fraction, monotonic: bool, statistic: str = REST
            ) -> int:
    """One draw of the exponential mechanism at ε on scores of sensitivity 1, through the
    calibrated entry's measurement."""
    return int(frontend.select(scores, 1, epsilon, monotonic=monotonic,
                               statistic=statistic).value)


def _peel(scores: np.ndarray, count: int, epsilon: Fraction,
          exclude: Sequence[int] = ()) -> list[int]:
    """``count`` rounds without replacement at ε/count each (monotone, Δ = 1)."""
    alive = np.ones(scores.size, dtype=bool)
    alive[list(exclude)] = False
    chosen = []
    for _ in range(count):
        idx = np.flatnonzero(alive)
        pick = int(idx[_select(scores[idx], epsilon / count, True)])
        chosen.append(pick)
        alive[pick] = False
    return chosen


def one_item(x: sp.csr_matrix) -> np.ndarray:
    """Random truncation to one item: for each non-empty row (in order), one of its columns,
    uniformly at random (dpkit's generator, exact). A map of each row alone."""
    lengths = np.diff(x.indptr)
    full = np.flatnonzero(lengths)
    pick = rng.uniform_below(lengths[full].astype(np.uint64)).astype(np.int64)
    return np.asarray(x.indices[x.indptr[full] + pick], dtype=np.int64)


def one_pair(t: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Random truncation to one pair: for each row of two or more columns (in order), one
    pair of them (i < j), uniformly among its C(|t|, 2) pairs (dpkit's generator, exact)."""
    lengths = np.diff(t.indptr)
    rows = np.flatnonzero(lengths >= 2)
    size = lengths[rows].astype(np.uint64)
    a = rng.uniform_below(size).astype(np.int64)
    b = rng.uniform_below(size - np.uint64(1)).astype(np.int64)
    b += b >= a  # a uniform second position ≠ a: the unordered pair is uniform
    start = t.indptr[rows]
    return (np.asarray(t.indices[start + np.minimum(a, b)], dtype=np.int64),
            np.asarray(t.indices[start + np.maximum(a, b)], dtype=np.int64))


def _laplace_top(x: sp.csr_matrix, count: int, epsilon: Fraction) -> list[int]:
    """The ``count`` items of largest noisy support after random truncation to one item:
    each non-empty transaction keeps one of its items, uniformly at random (dpkit's
    generator; a per-record map independent of the data, stability 1), so the item counts
    have L1 sensitivity 1 and get discrete Laplace noise 1/ε once (Zeng et al. 2012:
    truncation lowers the sensitivity; Dwork & Roth Thm 3.6). Ranked by noisy count (ties
    by index)."""
    counts = np.bincount(one_item(x), minlength=x.shape[1])
    noisy = laplace_integer(counts, Fraction(1), epsilon)
    return [int(i) for i in np.argsort(-noisy, kind="stable")[:count]]


def _bins_cap(n_hat: int, eps_s: Fraction, share: Fraction) -> int:
    """The largest b ≤ 16 with 2^(b/2)/ε_S ≤ share·n̂ (0 if none): floats, public."""
    bound = float(share) * n_hat * float(eps_s)
    return max((b for b in range(1, MAX_BIN_ITEMS + 1) if 2.0 ** (b / 2) <= bound), default=0)


def truncate(x: sp.csr_matrix, ranked: Sequence[int], ell: int | None) -> sp.csr_matrix:
    """Smart truncation: each row restricted to the columns ``ranked`` (re-indexed 0 … λ−1
    in that order) and cut to its first ``ell`` of them (all if None). One row in, one row
    out: a fixed map of each record."""
    sub = x[:, list(ranked)].tocsr()
    sub.sort_indices()
    if ell is None:
        return sub
    pos = np.arange(sub.indices.size) - np.repeat(sub.indptr[:-1], np.diff(sub.indptr))
    keep = pos < ell
    rows = np.repeat(np.arange(sub.shape[0]), np.diff(sub.indptr))[keep]
    return sp.csr_matrix((sub.data[keep], (rows, sub.indices[keep])), shape=sub.shape)


def _row_items(t: sp.csr_matrix, r: int) -> np.ndarray:
    """The rows of exactly r items as an (n_r, r) array of their columns, ascending."""
    lengths = np.diff(t.indptr)
    starts = t.indptr[:-1][lengths == r]
    return t.indices[starts[:, None] + np.arange(r)[None, :]]


def level_counts(t: sp.csr_matrix, candidates: np.ndarray) -> np.ndarray:
    """Supports in ``t`` (CSR, sorted indices) of the i-itemsets ``candidates`` ((c, i)
    column arrays, ascending rows): every i-subset of every row encoded as one integer and
    counted (rows grouped by length, vectorised), or, when that is larger or the codes
    would overflow, one sparse product t·Aᵀ per block of rows (an entry equal to i is a row
    holding the candidate)."""
    c, i = candidates.shape
    lam = t.shape[1]
    lengths = np.diff(t.indptr)
    top = int(lengths.max(initial=0))
    enum = sum(int((lengths == r).sum()) * math.comb(r, i) for r in range(i, top + 1))
    if float(lam) ** i < _KEY_LIMIT and enum <= _ENUM_LIMIT:
        radix = np.int64(lam) ** np.arange(i - 1, -1, -1, dtype=np.int64)
        codes = [np.zeros(0, dtype=np.int64)]
        for r in range(i, top + 1):
            rows = _row_items(t, r)
            if rows.size:
                combos = np.array(list(itertools.combinations(range(r), i)), dtype=np.int64)
                codes.append((rows[:, combos].astype(np.int64) @ radix).ravel())
        values, counts = np.unique(np.concatenate(codes), return_counts=True)
        if values.size == 0:
            return np.zeros(c, dtype=np.int64)
        want = candidates.astype(np.int64) @ radix
        at = np.minimum(np.searchsorted(values, want), values.size - 1)
        return np.where(values[at] == want, counts[at], 0).astype(np.int64)
    a = sp.csr_matrix((np.ones(c * i, dtype=np.int32), (np.repeat(np.arange(c), i),
                                                        candidates.ravel())), shape=(c, lam))
    out = np.zeros(c, dtype=np.int64)
    block = max(1, (1 << 22) // max(c, 1))
    for start in range(0, t.shape[0], block):
        p = (t[start:start + block] @ a.T).tocsr()
        out += np.bincount(p.indices[p.data == i], minlength=c)
    return out


def apriori_gen(kept: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """The (i+1)-itemsets all of whose i-subsets are in ``kept`` (sorted tuples): joins of
    two kept itemsets sharing their first i−1 items (Agrawal & Srikant 1994)."""
    keep = set(kept)
    groups: dict[tuple[int, ...], list[int]] = {}
    for s in sorted(keep):
        groups.setdefault(s[:-1], []).append(s[-1])
    out = []
    for prefix, lasts in groups.items():
        for a, b in itertools.combinations(lasts, 2):
            cand = prefix + (a, b)
            if all(cand[:j] + cand[j + 1:] in keep for j in range(len(cand) - 2)):
                out.append(cand)
    return out


def _level_sensitivity(ell: int, i: int, n_candidates: int) -> int:
    """L1 sensitivity of the counts of ``n_candidates`` i-itemsets over transactions of at
    most ℓ items: one transaction holds at most min(C(ℓ, i), |C_i|) of them."""
    return min(math.comb(ell, i), n_candidates)


def _cells_sensitivity(bases: Sequence[Sequence[int]]) -> Fraction:
    """L1 sensitivity of the cells of all bases: a transaction is in one cell of each."""
    return Fraction(len(bases))


def _bins_mode(x: sp.csr_matrix, bases: Sequence[Sequence[int]], eps_s: Fraction,
               size_cap: int, threshold: Fraction
               ) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray]:
    """Step 6, bins: the cells of every basis (w bases: L1 sensitivity w, discrete Laplace
    w/ε), the high-pass filter at θ = scale·ln(total cells), superset sums averaged across
    bases (:func:`dpkit.learn.privbasis.reconstruct_keys`). Returns (itemsets as column
    tuples, sizes, estimates)."""
    bases = [tuple(sorted(b)) for b in bases]
    counts = basis_bin_counts(x, bases)
    w = _cells_sensitivity(bases)
    noisy = laplace_integer(np.concatenate(counts), w, eps_s)
    scale = frontend.noise_row(w, eps_s).scale  # the scale laplace_integer drew at
    assert scale is not None
    noisy = np.where(noisy >= float(threshold * scale) * math.log(noisy.size), noisy, 0)
    cells = np.split(noisy, np.cumsum([c.size for c in counts])[:-1])
    keys, sizes, est = reconstruct_keys(cells, bases)
    keep = sizes <= size_cap
    return [tuple(int(v) for v in row if v >= 0) for row in keys[keep]], sizes[keep], est[keep]


def _random_pair_top(x: sp.csr_matrix, ranked: Sequence[int], count: int,
                     epsilon: Fraction) -> list[tuple[int, int]]:
    """The ``count`` pairs of positions in ``ranked`` with the largest noisy counts after
    random truncation to one pair: each transaction with two or more items of F keeps one
    pair of them, uniformly at random (dpkit's generator; a per-record map, stability 1),
    so the pair counts have L1 sensitivity 1: discrete Laplace 1/ε once."""
    if count <= 0:
        return []
    lam = len(ranked)
    i, j = one_pair(truncate(x, ranked, None))
    iu = np.triu_indices(lam, 1)
    counts = np.bincount(i * lam + j, minlength=lam * lam).reshape(lam, lam)[iu]
    noisy = laplace_integer(counts, Fraction(1), epsilon)
    return [(int(iu[0][p]), int(iu[1][p])) for p in np.argsort(-noisy, kind="stable")[:count]]


def _levels_mode(x: sp.csr_matrix, ranked: Sequence[int], ell: int, levels: int, k: int,
                 eps_s: Fraction, max_candidates: int
                 ) -> tuple[list[tuple[int, ...]], np.ndarray, np.ndarray]:
    """Step 6, levels: (itemsets as column tuples, sizes, estimates)."""
    t = truncate(x, ranked, ell)
    eps_level = eps_s / levels
    sets: list[tuple[int, ...]] = []
    est: list[np.ndarray] = []
    cands: list[tuple[int, ...]] = [(j,) for j in range(len(ranked))]
    for i in range(1, levels + 1):
        arr = np.array(cands, dtype=np.int64).reshape(len(cands), i)
        sensitivity = _level_sensitivity(ell, i, len(cands))
        noisy = laplace_integer(level_counts(t, arr), Fraction(sensitivity), eps_level)
        sets += cands
        est.append(noisy.astype(np.float64))
        if i == levels:
            break
        released = np.concatenate(est)
        kth = np.partition(released, -k)[-k] if released.size >= k else -np.inf
        row = frontend.noise_row(sensitivity, eps_level)  # the scale laplace_integer drew at
        margin = float(row.scale or 0) * math.log(max(len(cands), 2))
        kept = [c for c, v in zip(cands, noisy.tolist(), strict=True) if v >= kth - margin]
        value = dict(zip(cands, noisy.tolist(), strict=True))
        nxt = apriori_gen(kept)
        if len(nxt) > max_candidates:  # post-processing: the strongest weakest subsets
            weakest = [min(value[c[:j] + c[j + 1:]] for j in range(len(c))) for c in nxt]
            nxt = [nxt[j] for j in heapq.nlargest(max_candidates, range(len(nxt)),
                                                  key=weakest.__getitem__)]
        if not nxt:
            break
        cands = sorted(nxt)
    columns = np.asarray(ranked)
    itemsets = [tuple(sorted(int(columns[j]) for j in s)) for s in sets]
    return itemsets, np.array([len(s) for s in sets]), np.concatenate(est)


def _check_split(split: Sequence[Any]) -> tuple[Fraction, ...]:
    try:
        shares = tuple(to_fraction(a) for a in split)
    except (TypeError, ValueError, DomainError):
        raise DomainError("split must be five positive numbers (α_n, α_λ, α_F, α_m, α_P)"
                          ) from None
    if len(shares) != 5 or min(shares) <= 0 or sum(shares) >= 1:
        raise DomainError("split must be five positive shares summing to less than 1")
    return shares


def _positive_int(value: Any, name: str, lower: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < lower:
        raise DomainError(f"{name} must be an integer ≥ {lower}")
    return int(value)


def smarttrunc(transactions: Any, items: Sequence[Any], k: int, epsilon: Any, *,
               max_size: int | None = None, split: Sequence[Any] = DEFAULT_SPLIT,
               noise_share: Any = NOISE_SHARE, threshold: Any = THRESHOLD,
               counting: str = "bins",
               length_quantile: Any = LENGTH_QUANTILE, max_candidates: int = 100_000,
               accountant: AccountantLike = None) -> FrequentItemsets:
    """The k most frequent itemsets of any size by SmartTrunc, ε-DP (module docstring).

    Parameters
    ----------
    transactions : iterable of iterables, or a SciPy sparse incidence matrix
        One per privacy unit; every item must be in ``items`` (a sparse matrix: one column
        per item, nonzero = present).
    items : sequence
        The declared item universe (public, distinct).
    k : int
        1 ≤ k ≤ the number of candidate itemsets.
    epsilon : number
        ε > 0 (nats). Privacy map: one transaction added or removed ↦ PureDP(ε), ε = ε_n +
        ε_λ + ε_F + ε_m + ε_P + ε_S by sequential composition (McSherry 2009, Thm 1).
    max_size : int, optional
        Only itemsets of at most this many items; None for any size.
    split : (α_n, α_λ, α_F, α_m, α_P)
        Budget shares of n̂, λ, the items F, the density m̄ and the pairs (or ℓ), each > 0,
        summing to < 1; the cells get the rest (and α_P when no pair is drawn).
    noise_share : number
        The bound on a singleton's noise from one basis, as a share of n̂ (step 3); > 0.
    threshold : number
        The high-pass filter's factor (step 6); ≥ 0, 0 keeps every cell.
    counting : {"bins", "levels"}
        Steps 5–6 when F exceeds the cap: basis cells (default) or level-wise counts.
    length_quantile : number
        ``counting="levels"``: the share of transactions whose |t ∩ F| the truncation
        length ℓ covers, in (0, 1].
    max_candidates : int
        ``counting="levels"``: the most candidates one level counts.
    accountant : None, PrivacyFilter or Session
        Debited ε (PureDP) before any statistic is computed.

    Returns
    -------
    FrequentItemsets
        Itemsets (label tuples in ``items`` order) by estimated support, descending (ties:
        smaller first), and the estimates rounded to int64 (noisy counts); fewer than k if
        fewer itemsets were estimated.

    Raises
    ------
    DomainError
        Bad k, ε, split, shares or sizes, repeated items, or an item outside ``items``
        (all before the debit).
    """
    eps = check_epsilon(epsilon)
    universe = list(items)
    m = len(universe)
    if m == 0 or len(set(universe)) != m:
        raise DomainError("items must be a non-empty sequence of distinct items")
    size_cap = m if max_size is None else min(_positive_int(max_size, "max_size"), m)
    total = count_candidates(m, size_cap, limit=k if isinstance(k, int | np.integer) else None)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= total:
        raise DomainError("k must be a positive integer, at most the number of candidate "
                          "itemsets")
    k = int(k)
    shares = _check_split(split)
    share = to_fraction(noise_share)
    quantile = to_fraction(length_quantile)
    theta = to_fraction(threshold)
    if share <= 0 or theta < 0 or not 0 < quantile <= 1:
        raise DomainError("noise_share must be > 0, threshold ≥ 0 and length_quantile in "
                          "(0, 1]")
    max_candidates = _positive_int(max_candidates, "max_candidates")
    if counting not in ("bins", "levels"):
        raise DomainError("counting must be 'bins' or 'levels'")
    x = sparse_incidence(transactions, universe)  # parsing only: no statistic yet
    lo = next(lam for lam in range(1, m + 1) if count_candidates(lam, size_cap) >= k)
    hi = max(lo, min(k, m))
    e_n, e_lam, e_f, e_m, e_p = (a * eps for a in shares)
    e_s = eps - e_n - e_lam - e_f - e_m - e_p
    # the size and λ steps are data-free; the later steps' calibrations follow λ
    rows = (frontend.noise_row(1, e_n, "transactions"),
            frontend.selection_row(1, e_lam, LAMBDA), NoiseRow("smarttrunc", None, None, REST))

    def compute() -> FrequentItemsets:
        n_hat = max(1, int(laplace_integer(np.array([x.shape[0]]), Fraction(1), e_n)[0]))
        item_sup = item_supports(x)
        top = top_supports(x, k, size_cap)
        fk = top[k - 1][0] if len(top) >= k else 0
        ordered = np.sort(item_sup)[::-1]
        lam = lo + _select(-np.abs(fk - ordered[lo - 1:hi]), e_lam, False, LAMBDA)
        cap = max(_bins_cap(n_hat, e_s, share), lo) if lo <= MAX_BIN_ITEMS else 0
        rounds = min(lam, cap) if cap else lam
        # the mean of min(|t|, 2·rounds): their sum has sensitivity 2·rounds
        clip = 2 * rounds
        total = laplace_integer(np.array([np.minimum(np.diff(x.indptr), clip).sum()]),
                                Fraction(clip), e_m)[0]
        if cap and max(float(total), 0.0) / n_hat >= rounds:  # dense: peel r items
            ranked = _peel(item_sup, rounds, e_f)
        else:
            ranked = _laplace_top(x, lam, e_f)
        if cap and len(ranked) <= cap:
            sets, sizes, est = _bins_mode(x, [ranked], e_s + e_p, size_cap, theta)
        elif counting == "levels":
            lengths = np.diff(truncate(x, ranked, None).indptr)
            below = np.cumsum(np.bincount(lengths, minlength=lam + 1))[1:]  # ℓ = 1 … λ
            ell = 1 + _select(-np.abs(below - round(float(quantile) * n_hat)), e_p, False)
            levels = min(size_cap, ell, int(math.log2(k + 1)))
            sets, sizes, est = _levels_mode(x, ranked, ell, levels, k, e_s, max_candidates)
        else:
            pairs = _random_pair_top(x, ranked, 0 if size_cap == 1 else min(
                k - lam, lam * (lam - 1) // 2), e_p)
            bases = [[ranked[i] for i in b]
                     for b in basis_set(lam, pairs, cap or MAX_BIN_ITEMS)]
            sets, sizes, est = _bins_mode(x, bases, e_s + (0 if pairs else e_p), size_cap,
                                          theta)
        order = np.lexsort((np.arange(len(sets)), sizes, -est))[:k]
        return FrequentItemsets([tuple(universe[i] for i in sets[c]) for c in order],
                                np.rint(est[order]).astype(np.int64), eps)

    return charge(accountant, PureDP(eps), f"smarttrunc(k={k}, ε={eps})", compute, rows)


def frequent_itemsets(transactions: Any, items: Sequence[Any], k: int, epsilon: Any, *,
                      method: str = DEFAULT_METHOD, max_size: int | None = None,
                      accountant: AccountantLike = None, **options: Any) -> FrequentItemsets:
    """The k most frequent itemsets, ε-DP, by one of dpkit's methods.

    Parameters
    ----------
    transactions, items, k, epsilon, accountant
        As for :func:`smarttrunc`.
    method : {"smarttrunc", "privbasis", "tf"}
        :func:`smarttrunc` (default: the most accurate at ε ∈ {0.1, 1} on the held-out
        tuning data, bench/results/itemsets.md), :func:`dpkit.learn.privbasis.privbasis`
        (Li et al. 2012) or :func:`dpkit.learn.itemsets.top_k_itemsets` (TF, Bhaskar et
        al. 2010; ≤ 3 items, with candidate pruning so that any universe runs).
    max_size : int, optional
        Largest itemset size (None: any size; TF: 3).
    **options
        Passed to the method.

    Returns
    -------
    FrequentItemsets

    Raises
    ------
    DomainError
        An unknown method, or the method's own errors (before the debit).
    """
    if method == "smarttrunc":
        return smarttrunc(transactions, items, k, epsilon, max_size=max_size,
                          accountant=accountant, **options)
    if method == "privbasis":
        return privbasis(transactions, items, k, epsilon, max_size=max_size,
                         accountant=accountant, **options)
    if method == "tf":
        options.setdefault("prune", True)
        return top_k_itemsets(transactions, items, k, epsilon,
                              max_size=3 if max_size is None else max_size,
                              accountant=accountant, **options)
    raise DomainError(f"method must be one of {METHODS}; got {method!r}")
