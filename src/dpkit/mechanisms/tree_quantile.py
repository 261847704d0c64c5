"""Quantiles from a noisy hierarchical histogram (Hay, Rastogi, Miklau & Suciu 2010 trees;
the quantile search of Cormode et al. 2012 §4 / Smith-style descent).

Input: for each group, exact counts over n ordered leaf cells. A b-ary tree is built over the
cells (padded to b^L leaves); each of its L + 1 levels (the root included) gets discrete
Laplace noise of scale (L + 1)·Δ/ε on its node counts, where Δ bounds the L1 change a
privacy unit makes to one level's count vector (summed over groups). Levels compose
sequentially: ε in total (Dwork & Roth Thm 3.6, 3.16). The
q-quantile is found by descending from the root: at each node, the first child whose
cumulative noisy count reaches the remaining target rank q·n̂ (n̂ the root's noisy count).

Accuracy: the chosen leaf's rank differs from q·n by at most q·|Z_root| plus, at each level,
the noise of the (at most b − 1) children summed before the pick: a sum of at most
K = 1 + L·(b − 1) discrete Laplace magnitudes, each drawn independently of the earlier
choices, so below K + Gamma(K, s) (:func:`~dpkit.core.accuracy.laplace_abs_sum_tail`).
``rank_error`` is its 1 − β quantile, reported alongside the value.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit.core import samplers
from dpkit.core.accuracy import laplace_abs_sum_tail
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import L1Distance
from dpkit.core.numbers import Number, as_typed, non_negative, positive
from dpkit.errors import DomainError
from dpkit.mechanisms.calibrated import make_noise
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["make_tree_quantile", "tree_plan"]

# the audit's neighbours: 16 cells, one unit's count added to cell 8 (Δ = 1)
_TREE_X = np.array([0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0])
_TREE_X_PRIME = np.array([0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0])


def _audit() -> list[AuditCase]:
    """The median leaf of 16 cells, b = 4, ε = 1, Δ = 1, on counts with one record added;
    broken: 4ε (a quarter of the noise) for the same claim. n outputs are n groups."""
    def sampler(epsilon: int) -> Sampler:
        m = make_tree_quantile(16, Fraction(1, 2), epsilon, 1, branching=4)
        return lambda hist, n: np.asarray(m(np.tile(np.asarray(hist), (n, 1))))

    return [AuditCase("tree_quantile", make_tree_quantile(16, Fraction(1, 2), 1, 1, branching=4),
                      sampler(1), sampler(4), _TREE_X, _TREE_X_PRIME)]


def tree_plan(cells: int, epsilon: Number, sensitivity: Number, branching: int = 16
              ) -> tuple[int, Fraction]:
    """(depth L, noise scale s = (L + 1)·Δ/ε rounded up) of the tree over ``cells`` leaves:
    the root and L levels below it are each noisy."""
    eps = positive(epsilon, "epsilon", up=False)
    sens = positive(sensitivity, "sensitivity")
    depth = 1
    while branching**depth < cells:
        depth += 1
    return depth, make_noise((depth + 1) * sens, epsilon=eps).scale  # L + 1 noisy levels


@register(audit=_audit)
def make_tree_quantile(cells: int, q: Number, epsilon: Number, sensitivity: Number, *,
                       branching: int = 16) -> Measurement:
    """Noisy b-ary tree over ``cells`` leaf counts; release the q-quantile leaf per group.

    Parameters
    ----------
    cells : int
        Number n of ordered leaf cells.
    q : number
        Quantile level in [0, 1].
    epsilon : number
        ε > 0 (nats) for the whole tree.
    sensitivity : number
        Δ: the largest L1 change one privacy unit makes to the leaf counts of all groups
        (every level's counts change by at most Δ in L1, since a node sums leaves).
    branching : int
        b ≥ 2 (default 16).

    Returns
    -------
    Measurement
        Input: int array of shape (G, n) under :class:`L1Distance` (d_in = Δ·units; input
        domain: rows of n integers);
        output: int array of shape (G,), the chosen leaf index per group. Privacy map:
        d_in ↦ PureDP((L + 1)·d_in/s) with s = (L + 1)·Δ/ε (so ε at d_in = Δ). ``accuracy(beta)``:
        the rank error in the module docstring.

    Raises
    ------
    DomainError
        For ε ≤ 0, Δ ≤ 0, q ∉ [0, 1], cells < 1 or branching < 2.
    """
    if cells < 1 or branching < 2:
        raise DomainError("a tree quantile needs cells ≥ 1 and branching ≥ 2")
    level = as_typed(q)
    if not 0 <= level <= 1:
        raise DomainError("q must be in [0, 1]")
    depth, scale = tree_plan(cells, epsilon, sensitivity, branching)
    b = branching

    def release(hist: np.ndarray) -> np.ndarray:
        counts = np.asarray(hist, dtype=np.int64)
        groups = counts.shape[0]
        if groups == 0:  # no group (e.g. none passed partition selection): nothing to draw
            return np.zeros(0, dtype=np.int64)
        leaves = np.zeros((groups, b**depth), dtype=np.int64)
        leaves[:, :cells] = counts
        levels = []  # level l has b^l nodes; level `depth` is the leaves
        for lv in range(depth, -1, -1):
            node = leaves.reshape(groups, b**lv, -1).sum(axis=2)
            levels.append(node + samplers.discrete_laplace(scale, node.size).reshape(node.shape))
        levels.reverse()
        rows = np.arange(groups)
        remaining = float(level) * np.maximum(levels[0][:, 0], 0).astype(np.float64)
        index = np.zeros(groups, dtype=np.int64)
        for lv in range(1, depth + 1):  # all groups descend together
            children = levels[lv][rows[:, None], index[:, None] * b + np.arange(b)]
            cum = np.cumsum(np.maximum(children, 0), axis=1).astype(np.float64)
            reached = cum >= remaining[:, None]
            pick = np.where(reached.any(axis=1), reached.argmax(axis=1), b - 1)
            before = np.where(pick > 0, cum[rows, np.maximum(pick - 1, 0)], 0.0)
            remaining = remaining - before
            index = index * b + pick
        return np.minimum(index, cells - 1)

    summed = 1 + depth * (b - 1)

    def rank_error(beta: float) -> float:
        return laplace_abs_sum_tail(float(scale), summed, beta)

    return Measurement(
        release, L1Distance(), PureDP,
        lambda d_in: PureDP((depth + 1) * non_negative(d_in, "d_in") / scale),
        f"tree_quantile(b={b}, levels={depth}, scale={float(scale):.6g})",
        accuracy=rank_error,
        input_domain=VectorDomain(VectorDomain(AtomDomain(Kind.INTEGER), size=cells)),
    )
