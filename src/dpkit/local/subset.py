"""Subset selection (k-subset mechanism).

Sources: Wang, Wu & Hu, "Mutual information optimal local differential privacy", 2016
(arXiv:1607.05886); Ye & Barg, "Optimal schemes for discrete distribution estimation under
locally differential privacy", IEEE Trans. Inf. Theory 64(8), 2018 (the subset size
d ≈ k/(e^ε + 1) and its error).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np

from dpkit.core import rng
from dpkit.core.numbers import Number, integer
from dpkit.local.base import (
    BitReports,
    audit_cases,
    dyadic_down,
    exp_lower,
)
from dpkit.mechanisms.randomized_response import response_coins
from dpkit.mechanisms.registry import register

__all__ = ["SubsetSelection"]

_BLOCK = 1 << 23  # matrix cells per block of users (8 MB of bools)


def _random_subsets(sizes: np.ndarray, skip: np.ndarray, k: int) -> np.ndarray:
    """Row i: a uniformly random subset of size ``sizes[i]`` of {0, …, k − 1} without
    ``skip[i]`` (a boolean matrix (n, k), column ``skip[i]`` False), by Floyd's algorithm
    on the k − 1 slots t ↦ t + (t ≥ skip[i]), run for all rows at once (exact: step j
    draws uniform_below(j + 1)). Above half of the slots, the complement is drawn."""
    n, universe = sizes.size, k - 1
    flip = bool(n) and int(sizes.max()) > universe // 2
    m = universe - sizes if flip else sizes
    chosen = np.zeros((n, k), dtype=bool)
    flat = chosen.reshape(-1)
    base = np.arange(n, dtype=np.int64) * k  # row offsets into the flat matrix
    top = int(m.max()) if n else 0
    full_from = universe - int(m.min()) if n else universe  # from here every row is active
    for j in range(universe - top, universe):
        t = rng.uniform_below(j + 1, n).astype(np.int64)
        t += t >= skip
        t += base
        jj = base + j
        jj += j >= skip
        pick = np.where(flat[t], jj, t)
        if j < full_from:  # row i runs steps universe − m_i … universe − 1
            pick = pick[j >= universe - m]
        flat[pick] = True
    if flip:
        np.logical_not(chosen, out=chosen)
        chosen[np.arange(n), skip] = False
    return chosen


@register(audit=lambda: audit_cases(SubsetSelection, "subset"))
class SubsetSelection(BitReports):
    """Report a subset S of size d of the domain (a boolean row of length k).

    Exact output law: P[S | x] = π/C(k−1, d−1) if x ∈ S and (1 − π)/C(k−1, d) otherwise,
    with π = d e^ε/(d e^ε + k − d) rounded down to a multiple of 2^-32, so the ratio
    π(k − d)/((1 − π) d) ≤ e^ε. Sampling: x ∈ S with probability π, then the other
    d − 1 (or d) members uniformly among the k − 1 other values (Floyd's algorithm,
    exact uniform draws).
    A report supports its members: p* = π and q* = (π(d − 1) + (1 − π) d)/(k − 1), and

        Var[f̂(v)] = q*(1 − q*)/(n (p* − q*)²) + f(v)(1 − p* − q*)/(n (p* − q*))

    (Wang et al. 2017, §3, for a pure protocol; Ye & Barg 2018 for the choice of d).

    Parameters
    ----------
    k, epsilon, fallback :
        See :class:`~dpkit.local.base.FrequencyOracle`.
    d : int, optional
        Subset size in [1, k − 1]; default ⌈k/(e^ε + 1)⌉ (at most k − 1).

    Raises
    ------
    DomainError
        If k < 2, ε ≤ 0 or d ∉ [1, k − 1].
    """

    name = "subset"

    def __init__(self, k: int, epsilon: Number, fallback: int = 0, d: int | None = None
                 ) -> None:
        super().__init__(k, epsilon, fallback)
        e = exp_lower(self.epsilon)
        if d is None:
            d = min(self.k - 1, max(1, int(np.ceil(self.k / (float(e) + 1)))))
        self.d = integer(d, "d", minimum=1, maximum=self.k - 1)
        self.p = dyadic_down(self.d * e / (self.d * e + self.k - self.d))
        self.q = (self.p * (self.d - 1) + (1 - self.p) * self.d) / (self.k - 1)

    def _randomize(self, idx: np.ndarray) -> np.ndarray:
        n, k = idx.size, self.k
        member = response_coins(self.p, n)
        need = np.where(member, self.d - 1, self.d).astype(np.int64)
        rows = max(1, _BLOCK // k)  # users per block: the block's matrix stays in cache
        out = np.concatenate([_random_subsets(need[s: s + rows], idx[s: s + rows], k)
                              for s in range(0, n, rows)]) if n else np.zeros((0, k), bool)
        out[np.arange(n), idx] = member
        return out

    def output_law(self, x: int) -> np.ndarray:
        """P[S | x] for the bitmask codes c = 0 … 2^k − 1 (exact Fractions; small k)."""
        law = np.zeros(1 << self.k, dtype=object)
        for c in range(1 << self.k):
            if bin(c).count("1") != self.d:
                law[c] = Fraction(0)
            elif (c >> x) & 1:
                law[c] = self.p / comb(self.k - 1, self.d - 1)
            else:
                law[c] = (1 - self.p) / comb(self.k - 1, self.d)
        return law
