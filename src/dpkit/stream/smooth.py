"""The smooth binary mechanism (Andersson & Pagh 2023, *A Smooth Binary Mechanism for
Efficient Private Continual Observation*, NeurIPS 2023, §3 and Thm 1–2).

A binary tree with 2^k leaves, of which only the leaves whose k-bit label has exactly w ones
are used, in increasing order: step t (1-based) is leaf ℓ_{t−1}, the t-th such label. The
prefix through step t is the sum of all leaves before ℓ_t, i.e. for each bit j set in ℓ_t the
left sibling at level j of ℓ_t's path: node (ℓ_t >> j) − 1 of level j, always a left child.
So *every* prefix is a sum of exactly w node noises: the error is the same at every step,
Var_t = w·v.

Privacy. A node is used only if it is a left child; a leaf is in a left child at level j
exactly when bit j of its label is 0, so every step lies in k − w used nodes: c₁ = k − w,
c₂² = k − w. The whole stream is ε-DP with discrete Laplace noise of scale w'·Δ·(k − w)/ε, or
ρ-zCDP with σ = w'·Δ·√(k − w)/√(2ρ) (w' the contributions per user; :mod:`.base`). With
ρ: Var_t = w(k − w)/(2ρ)·(w'Δ)², which for w = k/2 is k²/(8ρ) = (1 + o(1))·log₂²T/(8ρ)
(Andersson & Pagh, Thm 2): the binary mechanism's worst case is L²/(2ρ) and its average
L²/(4ρ), with L = ⌈log₂(T + 1)⌉ < k.

(k, w) is chosen to minimise the variance — w·(k − w) for ρ, w·(k − w)² for ε — among the
pairs with C(k, w) ≥ T + 1 and k ≤ 62, the smallest k on ties. Labels are computed by
unranking in the combinatorial number system (numeric order = colex order), vectorised.

Memory of a stream: O(k) numbers.
"""

from __future__ import annotations

from bisect import bisect_right
from math import comb
from typing import Any

import numpy as np

from dpkit.errors import DomainError
from dpkit.stream.base import Budget, Counter, Unit

__all__ = ["SmoothBinary", "choose_shape", "leaves", "leaf"]

_MAX_BITS = 62


def choose_shape(horizon: int, gaussian: bool) -> tuple[int, int]:
    """(k, w) minimising w·(k − w) (Gaussian) or w·(k − w)² (Laplace) with C(k, w) ≥ T + 1."""
    best: tuple[int, int, int] | None = None
    for k in range(1, _MAX_BITS + 1):
        for w in range(1, k):
            if comb(k, w) < horizon + 1:
                continue
            cost = w * (k - w) ** (1 if gaussian else 2)
            if best is None or cost < best[0]:
                best = (cost, k, w)
    if best is None:
        raise DomainError("horizon too large for the smooth binary mechanism")
    return best[1], best[2]


def leaves(k: int, w: int, n: int) -> np.ndarray:
    """The first ``n`` k-bit labels with exactly w ones, increasing (int64): unranking
    r ↦ {c_w > … > c_1} with r = Σ C(c_i, i) (the combinatorial number system)."""
    r = np.arange(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    for i in range(w, 0, -1):
        table = np.array([comb(c, i) for c in range(k)], dtype=np.int64)
        c = np.searchsorted(table, r, side="right") - 1
        out |= np.left_shift(np.int64(1), c.astype(np.int64))
        r -= table[c]
    return out


def leaf(k: int, w: int, r: int) -> int:
    """The r-th (0-based) k-bit label with exactly w ones (scalar :func:`leaves`)."""
    out = 0
    for i in range(w, 0, -1):
        table = [comb(c, i) for c in range(k)]
        c = bisect_right(table, r) - 1
        out |= 1 << c
        r -= table[c]
    return out


def _cover(label: int) -> set[tuple[int, int]]:
    return {(j, (label >> j) - 1) for j in range(label.bit_length()) if label >> j & 1}


def _next(v: int) -> int:
    """The next integer with the same number of ones (Gosper's hack)."""
    c = v & -v
    r = v + c
    return (((r ^ v) >> 2) // c) | r


class SmoothBinary(Counter):
    """The smooth binary mechanism (module docstring). On held-out real data (bench/floor.py:
    NYT COVID daily cases, T = 100, ε ∈ {0.1, 1}) its RMSE was 1.0–1.1× per-step noise's
    ("increments"; 0.6× at T = 731): below about 100 steps "increments" is as accurate."""

    name = "smooth"

    def __init__(self, horizon: int | None, unit: Unit, budget: Budget) -> None:
        if horizon is None:
            raise DomainError("smooth needs a horizon; use mechanism='hybrid' for an unknown one")
        self.k, self.w = choose_shape(int(horizon), budget.gaussian)
        super().__init__(horizon, unit, budget)

    def _norms(self) -> tuple[int, int]:
        return self.k - self.w, self.k - self.w

    def weights(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shape = np.shape(t)
        return np.full(shape, float(self.w)), np.ones(shape)

    def window_terms(self, t: int, u: int) -> list[tuple[float, Any, float]]:
        """The nodes of the two covers (of ℓ_t and ℓ_u) that differ; shared ones cancel."""
        a = _cover(leaf(self.k, self.w, t))
        b = _cover(leaf(self.k, self.w, u)) if u else set()
        return [(float(len(a ^ b)), self.noise, 1.0)]

    def release(self, x: np.ndarray) -> np.ndarray:
        return self.release_many(x, 1)[0]

    def release_many(self, x: np.ndarray, copies: int) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        n, copies = len(x), int(copies)
        after = leaves(self.k, self.w, n + 1)[1:]  # ℓ_t for t = 1 … n
        err = np.zeros((copies, n), dtype=np.int64)
        for j in range(self.k):
            mask = (after >> j & 1).astype(bool)
            if not mask.any():
                continue
            ids = (after[mask] >> j) - 1  # non-decreasing: one draw per distinct node
            new = np.empty(ids.size, dtype=bool)
            new[0], new[1:] = True, ids[1:] != ids[:-1]
            which = np.cumsum(new) - 1
            m = int(which[-1]) + 1
            err[:, mask] += self._noise(copies * m, j).reshape(copies, m)[:, which]
        return np.cumsum(x).astype(np.float64) + err

    def start(self) -> dict[str, Any]:
        k = self.k
        return {"t": 0, "leaf": (1 << self.w) - 1, "acc": [0] * k, "acc_id": [-1] * k,
                "done": [0] * k, "done_id": [-1] * k}

    def step(self, state: dict[str, Any], x: int) -> float:
        state["t"] += 1
        leaf = state["leaf"]
        nxt = _next(leaf)
        acc, acc_id, done, done_id = (state[n] for n in ("acc", "acc_id", "done", "done_id"))
        for j in range(self.k):
            node = leaf >> j
            if acc_id[j] != node:
                acc_id[j], acc[j] = node, 0
            acc[j] += int(x)
            if nxt >> j != node and node % 2 == 0:  # a left node is complete: noise it
                done_id[j], done[j] = node, acc[j] + int(self._noise(1, j)[0])
        total = 0
        for j in range(self.k):
            if nxt >> j & 1:
                node = (nxt >> j) - 1
                if done_id[j] != node:  # a left node no step fell in: its sum is 0
                    done_id[j], done[j] = node, int(self._noise(1, j)[0])
                total += done[j]
        state["leaf"] = nxt
        return float(total)
