"""A private coreset for k-means: a weighted point set released under pure ε-DP.

After Feldman, Xiang, Zhu & Rus, "Coresets for differentially private k-means clustering
and applications to privacy in mobile sensor networks", IPSN 2017 (the private coreset: a
small weighted set of points, released once, on which *any* k-means solver runs as
post-processing), built here as its core step at small scale: noisy counts of the cells of
a hierarchical grid (the private-coreset construction of Feldman, Fiat, Kaplan & Nissim,
"Private coresets", STOC 2009, §4, that the IPSN paper refines). Simplified: the paper's
dimension reduction (which makes its error sub-linear in d) is not built; the grid is the
dyadic one of the declared box, split along s = min(d, ⌊log₂ max_cells⌋) coordinates a
level in cyclic order (all of them when 2^d ≤ max_cells), and a cell is refined when its
noisy count clears a threshold fixed by the declared (ε, levels) only.

Construction on rows z ∈ [−1, 1]^d (clipped and scaled by the declared bounds, a public
map of each row). Level ℓ = 1 … L has the dyadic cells of side 2^{1−ℓ}. The candidates of
level 1 are its 2^d cells; level ℓ's counts of the rows in each candidate cell are
released with discrete Laplace noise at ε/L (each row lies in at most one candidate cell
of a level: L1 sensitivity 1); the candidates of level ℓ + 1 are the 2^s children of the
≤ ``max_cells``/2^s candidates whose noisy count is ≥ θ = 4L/ε, largest first (a function
of released values and declared quantities only). The coreset is every released cell that
was not refined, at its centre, weighted by its noisy count where positive.

Privacy (add/remove one row): level ℓ's release is ε/L-DP given the public candidates
(Dwork & Roth Thm 3.6, discrete Laplace: Canonne, Kamath & Steinke 2020); the candidates
are chosen from earlier outputs, so the L levels compose adaptively to ε-DP (Dwork & Roth
Thm 3.16). Everything after (weights, centres, Lloyd on the coreset) is post-processing
(Dwork & Roth Prop. 2.1). The cost is bounded by n·L·d and L·max_cells, declared
quantities and the row count only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit.mechanisms import frontend

__all__ = ["private_coreset", "level_counts", "refine_threshold", "split_width", "resolution",
           "MAX_DEPTH_BITS", "COUNTS"]

MAX_DEPTH_BITS = 62  # a level's cell code ℓ·d must fit an int64
COUNTS = "coreset cell counts"


def split_width(d: int, max_cells: int) -> int:
    """s = min(d, ⌊log₂ max_cells⌋): coordinates split per level (2^s children a cell)."""
    return min(d, max_cells.bit_length() - 1)


def refine_threshold(epsilon: Fraction, levels: int) -> Fraction:
    """θ = 4L/ε: four noise scales of a level's counts (declared quantities only)."""
    return 4 * levels / epsilon


def resolution(d: int, split: int, level: int) -> np.ndarray:
    """Splits per coordinate after ``level`` levels, ``split`` coordinates split a level in
    cyclic order (all d at once when split = d: the dyadic grid)."""
    slots = np.arange(level * split) % d
    return np.bincount(slots, minlength=d).astype(np.int64)


def _shape(d: int, split: int, level: int) -> tuple[int, ...]:
    return tuple(int(1 << r) for r in resolution(d, split, level))


def _codes(z: np.ndarray, level: int, split: int) -> np.ndarray:
    """Each row's cell at ``level``, as one int64 code."""
    shape = _shape(z.shape[1], split, level)
    cells = [np.clip(((z[:, j] + 1) * (side / 2)).astype(np.int64), 0, side - 1)
             for j, side in enumerate(shape)]
    return np.ravel_multi_index(cells, shape).astype(np.int64)


def _children(codes: np.ndarray, level: int, d: int, split: int) -> np.ndarray:
    """The 2^split children at ``level + 1`` of the cells ``codes`` of ``level``."""
    cells = np.array(np.unravel_index(codes, _shape(d, split, level))).T  # (c, d)
    grows = resolution(d, split, level + 1) > resolution(d, split, level)
    offsets = np.zeros((1 << split, d), dtype=np.int64)
    offsets[:, grows] = np.array(np.unravel_index(np.arange(1 << split), (2,) * split)).T
    kids = (np.where(grows, 2, 1) * cells[:, None, :] + offsets[None, :, :]).reshape(-1, d)
    return np.ravel_multi_index(kids.T, _shape(d, split, level + 1)).astype(np.int64)


def _centres(codes: np.ndarray, level: int, d: int, split: int) -> np.ndarray:
    shape = _shape(d, split, level)
    cells = np.array(np.unravel_index(codes, shape), dtype=np.float64).T
    return (cells + 0.5) * (2 / np.array(shape, dtype=np.float64)) - 1


def level_counts(z: np.ndarray, candidates: np.ndarray, level: int, split: int
                 ) -> np.ndarray:
    """The rows in each candidate cell (sorted codes) of ``level``; a row outside every
    candidate is not counted (each row adds 1 to at most one count: L1 sensitivity 1)."""
    codes = _codes(z, level, split)
    slot = np.minimum(np.searchsorted(candidates, codes), candidates.size - 1)
    inside = candidates[slot] == codes
    return np.bincount(slot[inside], minlength=candidates.size).astype(np.int64)


def private_coreset(z: np.ndarray, epsilon: Fraction, levels: int, max_cells: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The ε-DP weighted coreset of rows in [−1, 1]^d (module docstring).

    Parameters
    ----------
    z : ndarray of shape (n, d)
        Rows clipped and scaled to [−1, 1]^d.
    epsilon : Fraction
        ε > 0 (nats) for the whole coreset: ε/L per level.
    levels : int
        L ≥ 1 levels; L·s ≤ 62, s = :func:`split_width` (d, max_cells).
    max_cells : int
        Candidate cells per level ≥ 2 (at most max_cells/2^s cells are refined).

    Returns
    -------
    points : ndarray of shape (c, d)
        Cell centres in [−1, 1]^d.
    weights : ndarray of shape (c,)
        Their positive noisy counts (float).

    Notes
    -----
    Guarantee: ε-DP under add/remove one row (module docstring). Source: Feldman, Xiang,
    Zhu & Rus, IPSN 2017 (private coreset, post-processing by any solver); the grid
    construction after Feldman, Fiat, Kaplan & Nissim, STOC 2009, §4.
    The caller checks ``levels``, ``max_cells`` and ε before any debit.
    """
    d = z.shape[1]
    split = split_width(d, max_cells)
    share = epsilon / levels
    theta = float(refine_threshold(epsilon, levels))
    keep = max(max_cells >> split, 1)
    candidates = np.arange(1 << split, dtype=np.int64)
    points, weights = [], []
    for level in range(1, levels + 1):
        counts = level_counts(z, candidates, level, split)
        noisy = np.asarray(frontend.noisy(counts, 1, share, statistic=COUNTS).value)
        heavy = np.flatnonzero(noisy >= theta)
        if level == levels:
            heavy = heavy[:0]
        heavy = heavy[np.argsort(-noisy[heavy], kind="stable")[:keep]]
        leaf = np.ones(candidates.size, dtype=bool)
        leaf[heavy] = False
        leaf &= noisy > 0
        points.append(_centres(candidates[leaf], level, d, split))
        weights.append(noisy[leaf].astype(np.float64))
        if heavy.size == 0:
            break
        candidates = np.sort(_children(candidates[heavy], level, d, split))
    return np.concatenate(points), np.concatenate(weights)
