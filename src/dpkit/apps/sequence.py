"""Private sequence data: the noisy prefix tree of Chen, Fung, Desai & Sossou, "Differentially
private transit data publication: a case study on the Montreal transportation system", KDD
2012 (their Algorithm 1), with consistency post-processing and synthetic sequences.

Data: a Polars frame with one row per **sequence** (the privacy unit: one user's sequence;
add/remove-one neighbours) and a list column of symbols in the declared universe [0, k).
Symbols outside the universe (and nulls) are dropped from their sequence, and each sequence
is cut to its first ``height`` symbols — per-sequence transformations, documented, never an
error; an empty sequence is valid (it ends at the root).

The tree. Level i (1 ≤ i ≤ h) holds the prefixes of length i and the *end* nodes "prefix of
length i − 1, then the end". Starting from the root, every surviving (non-end) node of level
i − 1 gets all its k + 1 children (k symbols and the end) as candidates, whatever their true
count; the candidates' counts are released with discrete Laplace noise at ε/h and those
below the threshold are pruned (not expanded further). Candidates are chosen from released
values only. One sequence adds 1 to at most one node per level (its prefix of length i, or
its end node once), so each level's count vector has L1 sensitivity 1 (Chen et al. Thm 4.1's
argument; parallel composition within a level), and the h levels compose sequentially:
ε-DP in total (Dwork & Roth Thm 3.16). Noise from :func:`dpkit.mechanisms.make_noise`
(integer output).

Consistency (post-processing, Chen et al. §4.4): counts are clipped at 0, pruned nodes set to
0, and top-down the children of a node (the end node included) are rescaled to sum to their
parent's consistent count — in the true tree every sequence through a node ends there or
continues to exactly one child. The root's count is the sum of level 1. A node whose children
were all pruned sends its count to its end node. The consistent tree gives prefix counts
(:meth:`PrefixTree.count`) and synthetic sequences (:meth:`PrefixTree.synthesize`).

:func:`ngram_model` releases the variable-length n-gram model of Chen, Ács & Castelluccia
(CCS 2012) instead (its docstring: the argument).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from dpkit.core.measures import PureDP
from dpkit.core.numbers import Number, integer, non_negative, positive
from dpkit.errors import ColumnError, DomainError
from dpkit.mechanisms import frontend, make_noise
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["PrefixTree", "prefix_tree", "NGramModel", "ngram_model", "prefix_matrix", "MAX_CODES"]

MAX_CODES = 1 << 62  # node codes are integers in base k + 2 with h digits
_MAX_NODES = 1 << 22  # candidates per level (memory); more survivors: the largest kept


@dataclass(frozen=True)
class PrefixTree:
    """A released prefix tree (every count in it is differentially private).

    Attributes
    ----------
    codes : ndarray of int64, shape (m,)
        Node codes: the prefix s₁…s_i is Σ_j (s_j + 1)·B^(i−j) (B = k + 2), its end node
        the prefix's code·B + k + 1. Sorted.
    levels : ndarray of int64
        Each node's level (1..h).
    noisy : ndarray of int64
        The released noisy counts.
    counts : ndarray of float64
        The consistent counts (post-processing).
    alphabet, height : int
        k and h.
    """

    codes: np.ndarray
    levels: np.ndarray
    noisy: np.ndarray
    counts: np.ndarray
    alphabet: int
    height: int

    @property
    def base(self) -> int:
        return self.alphabet + 2

    def encode(self, prefix: Sequence[int]) -> int:
        """The code of a prefix (a sequence of symbols in [0, k), length 1..h)."""
        symbols = [integer(s, "symbol", minimum=0, maximum=self.alphabet - 1) for s in prefix]
        if not 1 <= len(symbols) <= self.height:
            raise DomainError(f"a prefix has 1 to {self.height} symbols")
        code = 0
        for s in symbols:
            code = code * self.base + s + 1
        return code

    def count(self, prefixes: Iterable[Sequence[int]]) -> np.ndarray:
        """Estimated numbers of sequences starting with each prefix (0 for a pruned one).

        ``prefixes``: an iterable of symbol sequences (length 1..h). Post-processing."""
        codes = np.array([self.encode(p) for p in prefixes], dtype=np.int64)
        return self.count_codes(codes)

    def count_codes(self, codes: np.ndarray) -> np.ndarray:
        pos = np.clip(np.searchsorted(self.codes, codes), 0, max(self.codes.size - 1, 0))
        if self.codes.size == 0:
            return np.zeros(codes.shape)
        return np.where(self.codes[pos] == codes, self.counts[pos], 0.0)

    def synthesize(self) -> pl.DataFrame:
        """Synthetic sequences from the consistent tree: each end node's count (rounded)
        copies of its prefix, and each level-h prefix's count copies of it. A frame with a
        list column "sequence". Post-processing."""
        b, k = self.base, self.alphabet
        is_end = self.codes % b == k + 1
        leaf = is_end | (self.levels == self.height)
        reps = np.rint(np.where(leaf, self.counts, 0)).astype(np.int64)
        codes = np.where(is_end, self.codes // b, self.codes)
        lengths = np.where(is_end, self.levels - 1, self.levels)
        digits = np.zeros((codes.size, self.height), dtype=np.int64)
        rest = codes.copy()
        for j in range(self.height - 1, -1, -1):  # h digit columns, vectorised over nodes
            digits[:, j] = rest % b
            rest //= b
        # right-aligned digits: shift each row so the prefix starts at column 0
        shift = self.height - lengths
        cols = (np.arange(self.height)[None, :] + shift[:, None]) % self.height
        aligned = np.take_along_axis(digits, cols, 1) - 1
        keep = reps > 0
        seqs = [row[:n].tolist() for row, n in zip(aligned[keep], lengths[keep], strict=True)]
        frame = pl.DataFrame({"sequence": seqs, "n": reps[keep]},
                             schema={"sequence": pl.List(pl.Int64), "n": pl.Int64})
        return frame.select(pl.col("sequence").repeat_by("n").explode())


def _check_frame(frame: Any, column: str) -> None:
    if not isinstance(frame, pl.DataFrame):
        raise DomainError("sequences must be a Polars DataFrame")
    if column not in frame.columns:
        raise ColumnError(f"missing column {column!r}")
    dtype = frame.schema[column]
    if not (isinstance(dtype, pl.List) and dtype.inner.is_integer()):
        raise DomainError(f"column {column!r} must be a list of integers; got {dtype}")


def prefix_matrix(frame: pl.DataFrame, column: str, alphabet: int, height: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(symbols, lengths): each sequence's first ``height`` in-universe symbols in an
    (n, height) int64 matrix (−1 after the end) and its length. Not a release."""
    n = frame.height
    df = (frame.select(pl.col(column)).with_row_index("row").explode(column)
          .filter(pl.col(column).is_between(0, alphabet - 1))
          .with_columns(pl.int_range(pl.len()).over("row").alias("pos"))
          .filter(pl.col("pos") < height))
    mat = np.full((n, height), -1, dtype=np.int64)
    rows, pos = df["row"].to_numpy().astype(np.int64), df["pos"].to_numpy().astype(np.int64)
    mat[rows, pos] = df[column].to_numpy()
    return mat, np.bincount(rows, minlength=n)


def prefix_tree(sequences: pl.DataFrame, *, alphabet: int, height: int, epsilon: Number,
                threshold: Number = 2, accountant: AccountantLike = None, column: str = "sequence"
                ) -> PrefixTree:
    """Release a noisy prefix tree of ``sequences`` (module docstring: algorithm, privacy).

    Parameters
    ----------
    sequences : polars.DataFrame
        One row per sequence (the privacy unit), ``column`` a list of integer symbols.
    alphabet : int
        k ≥ 1, the declared universe [0, k).
    height : int
        h ≥ 1, the tree's height (sequences are cut to h symbols).
    epsilon : number
        ε > 0 (nats), split evenly over the h levels.
    threshold : number
        Prune candidates whose noisy count is below ``threshold`` noise standard deviations
        (≥ 0; the deviation √2·b of the level's discrete Laplace, b its scale).
    accountant : Session, PrivacyFilter, Accountant or None

    Returns
    -------
    PrefixTree
        ε-DP for add/remove of one sequence.

    Raises
    ------
    DomainError, ColumnError
        Bad parameters or schema (before any debit), including (k + 2)^h ≥ 2^62.
    """
    k = integer(alphabet, "alphabet", minimum=1, maximum=1 << 16)
    h = integer(height, "height", minimum=1, maximum=64)
    if (k + 2) ** h >= MAX_CODES:
        raise DomainError("(alphabet + 2)^height must stay below 2^62")
    eps = positive(epsilon, "epsilon", up=False)
    cut = float(non_negative(threshold, "threshold"))
    _check_frame(sequences, column)
    noise = make_noise(1, epsilon=eps / h)
    # Python floats: a huge declared threshold × scale is +inf (nothing kept), not a warning
    floor = cut * float(frontend.row_of(noise).scale or 0) * math.sqrt(2.0)
    rows = [frontend.row_of(noise, f"level {i}")
            for i in range(1, h + 1)]

    def compute() -> PrefixTree:
        mat, lengths = prefix_matrix(sequences, column, k, h)
        return _build(mat, lengths, k, h, noise, floor)

    return charge(accountant, PureDP(eps),
                  f"apps.sequence.prefix_tree(alphabet={k}, height={h}, threshold={cut:g}, "
                  f"unit=sequence)", compute, rows)


def _build(mat: np.ndarray, lengths: np.ndarray, k: int, h: int, noise: Any, floor: float
           ) -> PrefixTree:
    b = k + 2
    digits = np.arange(1, k + 2, dtype=np.int64)  # k symbols, then the end marker k + 1
    code = np.zeros(mat.shape[0], dtype=np.int64)  # each sequence's prefix code so far
    parents = np.zeros(1, dtype=np.int64)  # the root
    out_codes, out_levels, out_noisy = [], [], []
    for i in range(1, h + 1):
        if parents.size == 0:
            break
        cand = (parents[:, None] * b + digits[None, :]).reshape(-1)  # sorted: parents sorted
        step = np.where(lengths >= i, mat[:, i - 1] + 1, k + 1)
        child = (code * b + step)[lengths >= i - 1]  # ended earlier: in no node of level i
        values, counts = np.unique(child, return_counts=True)
        pos = np.searchsorted(cand, values)
        hit = (pos < cand.size) & (cand[np.minimum(pos, cand.size - 1)] == values)
        true = np.zeros(cand.size, dtype=np.int64)
        true[pos[hit]] = counts[hit]
        noisy = np.asarray(noise(true), dtype=np.int64)
        out_codes.append(cand)
        out_levels.append(np.full(cand.size, i, dtype=np.int64))
        out_noisy.append(noisy)
        survive = (noisy >= floor) & (cand % b != k + 1) & (noisy > 0)
        parents = cand[survive]
        if parents.size * (k + 1) > _MAX_NODES:  # post-processing of released counts
            order = np.argsort(-noisy[survive], kind="stable")[: _MAX_NODES // (k + 1)]
            parents = np.sort(parents[order])
        code = np.where(lengths >= i, code * b + step, code)
    codes = np.concatenate(out_codes) if out_codes else np.zeros(0, dtype=np.int64)
    levels = np.concatenate(out_levels) if out_levels else np.zeros(0, dtype=np.int64)
    noisy = np.concatenate(out_noisy) if out_noisy else np.zeros(0, dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    codes, levels, noisy = codes[order], levels[order], noisy[order]
    return PrefixTree(codes, levels, noisy, _consistent(codes, levels, noisy, k, h, floor),
                      k, h)


def _consistent(codes: np.ndarray, levels: np.ndarray, noisy: np.ndarray, k: int, h: int,
                floor: float) -> np.ndarray:
    """Top-down: children (end included) rescaled to sum to the parent's count; pruned or
    negative counts are 0; a node whose children are all 0 sends its count to its end."""
    b = k + 2
    raw = np.where((noisy >= floor) & (noisy > 0), noisy, 0).astype(np.float64)
    out = np.zeros(codes.size)
    first = levels == 1
    out[first] = raw[first]
    for i in range(2, h + 1):
        idx = np.flatnonzero(levels == i)
        if idx.size == 0:
            break
        parent_code = codes[idx] // b
        pidx = np.searchsorted(codes, parent_code)
        groups, inverse = np.unique(pidx, return_inverse=True)
        sums = np.bincount(inverse, raw[idx], minlength=groups.size)
        parent = out[groups]
        share = np.where(sums[inverse] > 0, raw[idx] / np.maximum(sums[inverse], 1e-300),
                         (codes[idx] % b == k + 1).astype(np.float64))
        out[idx] = parent[inverse] * share
    return out


@dataclass(frozen=True)
class NGramModel:
    """A released n-gram model (Chen, Ács & Castelluccia, CCS 2012): noisy counts of the
    grams of ^s& (start and end markers) up to length ``order``, pruned by threshold.

    Attributes
    ----------
    grams : dict[int, tuple[ndarray, ndarray]]
        For each length i, the sorted codes (base k + 3: symbol s is s + 1, the end k + 1,
        the start k + 2) and their noisy counts (int64) of the grams that were released.
    alphabet, order, max_length : int
    """

    grams: dict[int, tuple[np.ndarray, np.ndarray]]
    alphabet: int
    order: int
    max_length: int

    def _counts(self, codes: np.ndarray, length: int) -> np.ndarray:
        table, counts = self.grams.get(length, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        if table.size == 0:
            return np.zeros(codes.shape)
        pos = np.clip(np.searchsorted(table, codes), 0, table.size - 1)
        return np.where(table[pos] == codes, np.maximum(counts[pos], 0), 0).astype(float)

    def prefix_tree(self, height: int, min_count: float = 0.5) -> PrefixTree:
        """The expected prefix tree of the model's Markov chain (variable order: the
        longest released context, backing off): level-1 counts from the grams ^x, then
        count(p·x) = count(p)·P(x | context). Nodes under ``min_count`` are not expanded.
        Post-processing; answers prefix counts and synthesizes like a released tree."""
        h = integer(height, "height", minimum=1, maximum=64)
        k, g = self.alphabet, self.alphabet + 3
        b = k + 2
        digits = np.arange(1, k + 2, dtype=np.int64)  # symbols then the end (k + 1)
        start = k + 2
        # nodes carry their tree code (base b) and their gram history (base g, with ^)
        tree_code = np.zeros(1, dtype=np.int64)
        history = [np.array([start], dtype=np.int64)]  # last symbols, oldest first
        count = np.array([np.nan])
        codes, levels, counts = [], [], []
        for level in range(1, h + 1):
            hist = np.stack(history, axis=1)  # (m, len)
            probs = self._next(hist)  # (m, k + 1)
            if level == 1:
                base = self._counts(start * g + digits, 2) if self.order >= 2 else (
                    self._counts(digits, 1))
                child = base[None, :]
            else:
                child = count[:, None] * probs
            child_code = (tree_code[:, None] * b + digits[None, :]).reshape(-1)
            child = child.reshape(-1)
            codes.append(child_code)
            levels.append(np.full(child_code.size, level, dtype=np.int64))
            counts.append(child)
            expand = (child >= min_count) & (child_code % b != k + 1)
            if not expand.any() or level == h:
                break
            parent = np.repeat(np.arange(tree_code.size), k + 1)[expand]
            sym = np.tile(digits, tree_code.size)[expand]
            keep = max(self.order - 1, 1)
            history = [h_[parent] for h_ in history][-(keep - 1):] if keep > 1 else []
            history.append(sym)
            tree_code, count = child_code[expand], child[expand]
        all_codes = np.concatenate(codes)
        order = np.argsort(all_codes, kind="stable")
        c = np.concatenate(counts)[order]
        return PrefixTree(all_codes[order], np.concatenate(levels)[order],
                          np.rint(c).astype(np.int64), c, k, h)

    def _next(self, hist: np.ndarray) -> np.ndarray:
        """P(x | context) for each row's context (its symbols, oldest first), x the k
        symbols and the end: the longest context whose extensions have a positive
        released total, backing off to shorter ones, then to the unigrams."""
        k, g = self.alphabet, self.alphabet + 3
        ext = np.arange(1, k + 2, dtype=np.int64)
        m, width = hist.shape
        out = np.zeros((m, k + 1))
        done = np.zeros(m, dtype=bool)
        for ctx_len in range(min(width, self.order - 1), -1, -1):
            rows = np.flatnonzero(~done)
            if rows.size == 0:
                break
            ctx = np.zeros(rows.size, dtype=np.int64)
            for j in range(width - ctx_len, width):
                ctx = ctx * g + hist[rows, j]
            c = self._counts((ctx[:, None] * g + ext[None, :]).reshape(-1), ctx_len + 1)
            c = c.reshape(rows.size, k + 1)
            total = c.sum(axis=1)
            ok = total > 0
            out[rows[ok]] = c[ok] / total[ok, None]
            done[rows[ok]] = True
        out[~done, -1] = 1.0  # nothing known: the sequence ends
        return out


def ngram_model(sequences: pl.DataFrame, *, alphabet: int, order: int, max_length: int,
                epsilon: Number, threshold: Number = 2, accountant: AccountantLike = None,
                column: str = "sequence") -> NGramModel:
    """Release an n-gram model of ``sequences`` (Chen, Ács & Castelluccia, "Differentially
    private sequential data publication via variable-length n-grams", CCS 2012).

    Each sequence is cut to ``max_length`` = ℓ symbols (out-of-universe symbols dropped)
    and framed as ^s&. Level i (1 ≤ i ≤ n = ``order``) releases the counts of candidate
    grams of length i — all k + 3 single symbols at level 1, then every extension g·x
    (x a symbol or the end) of a released gram g of level i − 1 that passed the threshold
    and does not end with & — with discrete Laplace noise at ε/n
    (:func:`dpkit.mechanisms.make_noise`). A framed sequence has ℓ + 2 symbols, so it holds
    at most ℓ + 2 grams of any length: each level's count vector has L1 sensitivity ℓ + 2,
    the candidates depend on released values only, and the n levels compose: ε-DP for
    add/remove of one sequence (CCS 2012 §4; their ℓ-truncation bounds the sensitivity the
    same way).

    Parameters
    ----------
    alphabet : int
        k, the universe [0, k).
    order : int
        n ≥ 1, the longest gram.
    max_length : int
        ℓ ≥ 1 (public).
    epsilon, threshold, accountant, column
        As :func:`prefix_tree`.

    Returns
    -------
    NGramModel
        Its :meth:`NGramModel.prefix_tree` answers prefix counts and synthesizes.

    Raises
    ------
    DomainError, ColumnError
        Bad parameters or schema (before any debit).
    """
    k = integer(alphabet, "alphabet", minimum=1, maximum=1 << 12)
    n = integer(order, "order", minimum=1, maximum=8)
    ell = integer(max_length, "max_length", minimum=1, maximum=1 << 12)
    if (k + 3) ** n >= MAX_CODES:
        raise DomainError("(alphabet + 3)^order must stay below 2^62")
    eps = positive(epsilon, "epsilon", up=False)
    cut = float(non_negative(threshold, "threshold"))
    _check_frame(sequences, column)
    noise = make_noise(ell + 2, epsilon=eps / n)
    # Python floats: a huge declared threshold × scale is +inf (nothing kept), not a warning
    floor = cut * float(frontend.row_of(noise).scale or 0) * math.sqrt(2.0)
    rows = [frontend.row_of(noise, f"{i}-grams")
            for i in range(1, n + 1)]

    def compute() -> NGramModel:
        mat, lengths = prefix_matrix(sequences, column, k, ell)
        framed = _framed(mat, lengths, k)
        return NGramModel(_grams(framed, k, n, noise, floor), k, n, ell)

    return charge(accountant, PureDP(eps),
                  f"apps.sequence.ngram_model(alphabet={k}, order={n}, max_length={ell}, "
                  f"threshold={cut:g}, unit=sequence)", compute, rows)


def _framed(mat: np.ndarray, lengths: np.ndarray, k: int) -> np.ndarray:
    """^s& in gram digits (symbol s → s + 1, & → k + 1, ^ → k + 2), −1 after the end."""
    m, ell = mat.shape
    out = np.full((m, ell + 2), -1, dtype=np.int64)
    out[:, 0] = k + 2
    out[:, 1:ell + 1] = np.where(mat >= 0, mat + 1, -1)
    out[np.arange(m), lengths + 1] = k + 1
    return out


def _grams(framed: np.ndarray, k: int, n: int, noise: Any, floor: float
           ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    g = k + 3
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    cand = np.arange(1, k + 3, dtype=np.int64)  # level 1: every symbol, & and ^
    ext = np.arange(1, k + 2, dtype=np.int64)
    width = framed.shape[1]
    for i in range(1, n + 1):
        if cand.size == 0:
            break
        found = []
        for j in range(width - i + 1):  # windows: one column pass per offset, vectorised
            win = framed[:, j:j + i]
            ok = np.all(win >= 0, axis=1)
            code = np.zeros(int(ok.sum()), dtype=np.int64)
            for c in range(i):
                code = code * g + win[ok, c]
            found.append(code)
        values, counts = np.unique(np.concatenate(found), return_counts=True)
        pos = np.clip(np.searchsorted(cand, values), 0, cand.size - 1)
        hit = cand[pos] == values
        true = np.zeros(cand.size, dtype=np.int64)
        true[pos[hit]] = counts[hit]
        noisy = np.asarray(noise(true), dtype=np.int64)
        out[i] = (cand, noisy)
        grow = cand[(noisy >= floor) & (noisy > 0) & (cand % g != k + 1)]
        if grow.size * (k + 1) > _MAX_NODES:  # post-processing of released counts
            top = np.argsort(-noisy[np.isin(cand, grow)], kind="stable")
            grow = np.sort(grow[top[: _MAX_NODES // (k + 1)]])
        cand = (grow[:, None] * g + ext[None, :]).reshape(-1)
    return out
