"""Hierarchical histograms: noisy counts of every node of a b-ary tree over the cells, made
consistent by least squares (Hay, Rastogi, Miklau & Suciu, VLDB 2010), and HB, the same with
the branching factor chosen for range queries (Qardaji, Yang & Li, VLDB 2013).

Privacy. The n cells are padded with structural zeros to b^h leaves; the tree has h + 1
levels (leaves to root) and a record adds 1 to exactly one node per level, so the vector of
all node counts has L1 sensitivity h + 1. Discrete Laplace noise of scale (h + 1)/ε on
every node is ε-DP (Dwork et al. 2006); the consistent estimate is post-processing.

Inference. Hay et al. 2010 Thm 3: with equal noise on every node the least-squares estimate
is computed in two passes — bottom-up
z_v = (b^i − b^{i−1})/(b^i − 1)·y_v + (b^{i−1} − 1)/(b^i − 1)·Σ_{u child of v} z_u for a
node at height i (leaves i = 1, z = y), then top-down x̄_root = z_root,
x̄_u = z_u + (x̄_v − Σ_{w child of v} z_w)/b for each child u of v.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from dpkit.core.numbers import integer
from dpkit.mechanisms import frontend
from dpkit.release.ranges.switch import clamp_cells
from dpkit.release.workload import RangeWorkload

__all__ = ["hierarchical", "hb", "hierarchical_options", "hb_branching", "tree_height",
           "tree_strategy", "tree_counts", "tree_inference"]


def tree_height(n: int, branching: int) -> int:
    """h = ⌈log_b n⌉, the number of levels above the leaves (at least 1)."""
    h, size = 0, 1
    while size < n:
        size, h = size * branching, h + 1
    return max(h, 1)


def tree_counts(x: np.ndarray, branching: int) -> list[np.ndarray]:
    """Node counts per level, leaves first (padded to b^h with zeros), root last."""
    h = tree_height(x.size, branching)
    level = np.zeros(branching ** h, dtype=np.int64)
    level[: x.size] = x
    levels = [level]
    for _ in range(h):
        level = level.reshape(-1, branching).sum(axis=1)
        levels.append(level)
    return levels


def tree_inference(noisy: list[np.ndarray], branching: int) -> np.ndarray:
    """Least-squares leaf estimates from equally noisy node counts (Hay et al. 2010 Thm 3)."""
    b = branching
    z = [noisy[0].astype(np.float64)]
    for i, y in enumerate(noisy[1:], start=2):  # height i (leaves are height 1)
        child_sum = z[-1].reshape(-1, b).sum(axis=1)
        bi, bi1 = float(b) ** i, float(b) ** (i - 1)
        z.append((bi - bi1) / (bi - 1) * y + (bi1 - 1) / (bi - 1) * child_sum)
    est = z[-1]
    for zl in reversed(z[:-1]):
        sibling_sum = zl.reshape(-1, b).sum(axis=1)
        est = zl + np.repeat((est - sibling_sum) / b, b)
    return est


def tree_strategy(n: int, branching: int) -> sp.csr_matrix:
    """The node-count strategy matrix (rows: nodes leaves-first; columns: the n cells)."""
    h = tree_height(n, branching)
    blocks = []
    for level in range(h + 1):
        width = branching ** level
        nodes = -(-n // width)
        cols = np.arange(n)
        blocks.append(sp.csr_matrix((np.ones(n), (cols // width, cols)), shape=(nodes, n)))
    return sp.vstack(blocks).tocsr()


def hierarchical_options(shape: tuple[int, ...], branching: object = 2) -> int:
    """``branching`` as an int after checking it (an integer ≥ 2): no data, no noise.

    Raises
    ------
    DomainError
        Another value."""
    return integer(branching, "branching", minimum=2)


def hierarchical(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
                 branching: int = 2) -> np.ndarray:
    """Hierarchical tree (H_b): noisy counts of every node of a b-ary tree, scale (h+1)/ε
    for h = ⌈log_b n⌉, then least-squares consistency (Hay et al. VLDB 2010). ε-DP. On held-out
    real data (bench/floor.py: bike-sharing days, 731 cells, ε = 1) its range error was 1.1×
    Identity's; prefer "hb" (branching by formula) or HDMM ("mm") on short domains. Any
    magnitude: cells are clamped to ⌊(2^62 − 1)/n⌋ first (:func:`~dpkit.release.ranges.
    switch.clamp_cells`, from n alone; same neighbours), so no node sum wraps in int64."""
    b = hierarchical_options(x.shape, branching)
    levels = tree_counts(clamp_cells(x), b)  # declared clamp: node sums below 2^62
    noisy = frontend.noisy(np.concatenate(levels), Fraction(len(levels)), epsilon).value
    return tree_inference(np.split(noisy, np.cumsum([lv.size for lv in levels])[:-1]),
                          b)[: x.size]


def hb_branching(n: int) -> int:
    """HB's branching factor: the b minimising (b − 1)·h(b)³, h(b) = ⌈log_b n⌉ — the
    leading term of the average range-query variance of a b-ary tree with constrained
    inference (Qardaji, Yang & Li VLDB 2013, §4); ties to the smaller b."""
    best, best_cost = 2, None
    for b in range(2, max(n, 2) + 1):
        cost = (b - 1) * tree_height(n, b) ** 3
        if best_cost is None or cost < best_cost:
            best, best_cost = b, cost
        if tree_height(n, b) == 1:
            break
    return best


def hb(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None
       ) -> np.ndarray:
    """HB: a hierarchical tree with the branching factor of :func:`hb_branching` (Qardaji,
    Yang & Li VLDB 2013). ε-DP as :func:`hierarchical`."""
    return hierarchical(x, epsilon, workload, branching=hb_branching(x.size))
