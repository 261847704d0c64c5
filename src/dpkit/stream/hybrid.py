"""The hybrid mechanism for a stream of unknown length (Chan, Shi & Song 2011, *Private and
Continual Release of Statistics*, ACM TISSEC 14(3), §4: the logarithmic mechanism, Thm 4.1,
and the hybrid mechanism, Thm 4.3). The p-sums are those of :func:`dpkit.stream.tree.psums`.

Half of the budget runs the *logarithmic mechanism*: at the checkpoints t = 2^m it releases
the noisy p-sum P_m of the block (2^(m−1), 2^m] (P_0 = x_1) and the running total
Σ_{m' ≤ m} P̂_m'. Every step lies in exactly one block: c₁ = c₂² = 1 at ε/2 (ρ/2).

The other half runs, between checkpoints, a binary mechanism (:class:`~dpkit.stream.tree.
BinaryTree`) on the segment (2^k, 2^(k+1)) with horizon 2^k − 1 (k levels), at ε/2 (ρ/2),
each segment calibrated on its own. The release at 2^k < t < 2^(k+1) is the last checkpoint's
total plus the segment's estimate at t − 2^k.

Privacy (for any number of steps). A step t lies in one block and in at most one segment:
its loss is map_log(w·Δ) + map_seg(k)(w·Δ·k) ≤ ε/2 + ε/2 (resp. ρ/2 + ρ/2), each term checked
exactly by :func:`dpkit.mechanisms.make_noise`; segments are disjoint (parallel composition).
So the budget is spent once for an unbounded stream: :attr:`Hybrid.loss` = map_log + the
segments' cap ε/2 (ρ/2), and :meth:`Hybrid.step_loss` states each step's exact loss.

Error at t (2^k ≤ t < 2^(k+1)): Var_t = (k + 1)·v_log + popcount(t − 2^k)·v_k, with v_log and
v_k the exact variances of the checkpoint and segment-k noises: O(log² t) with ρ.

Memory of a stream: O(log t) numbers.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.measures import PrivacyLoss
from dpkit.core.record import NoiseRow
from dpkit.mechanisms import CalibratedNoise, frontend
from dpkit.stream.base import (
    Budget,
    Counter,
    Unit,
    half_width,
    noise_variance,
    scale_of,
)
from dpkit.stream.tree import BinaryTree, cover

__all__ = ["Hybrid"]

_HALF = Fraction(1, 2)


class Hybrid(Counter):
    """Chan, Shi & Song's hybrid mechanism; ``horizon`` may be None (module docstring). On
    held-out real data (bench/floor.py: ε ∈ {0.1, 1}) the running totals' RMSE was 2.4× per-step
    noise's ("increments") at T = 100 and 1.6× at T = 731: it pays for not knowing the horizon;
    with a known horizon prefer "smooth", or "factorization" under ρ."""

    name = "hybrid"
    share = _HALF  # the checkpoints' half; the segments' binary mechanisms take the other

    def __init__(self, horizon: int | None, unit: Unit, budget: Budget) -> None:
        self._segments: dict[int, BinaryTree] = {}
        super().__init__(horizon, unit, budget)

    def _norms(self) -> tuple[int, int]:
        return 1, 1  # one checkpoint per block: a unit's events move it by w·Δ

    def segment(self, k: int) -> BinaryTree:
        """The binary mechanism of segment k ≥ 1 (steps 2^k + 1 … 2^(k+1) − 1)."""
        tree = self._segments.get(k)
        if tree is None:
            tree = self._segments[k] = BinaryTree((1 << k) - 1, self.unit,
                                                  self.budget.part(_HALF))
        return tree

    @property
    def map_loss(self) -> PrivacyLoss:
        """map_log(w·Δ) + the segments' cap (half the budget): the loss of every step of an
        unbounded stream is at most this (:meth:`step_loss`), and this is at most the
        budget, which is what the stream is charged (:attr:`loss`)."""
        assert self.noise.loss is not None
        return self.noise.loss + self.budget.part(_HALF).loss

    def step_loss(self, t: int) -> PrivacyLoss:
        """The exact loss of step t: its block's and (if any) its segment's map."""
        assert self.noise.loss is not None
        k = int(t).bit_length() - 1
        if t == 1 << k:
            return self.noise.loss
        seg = self.segment(k).noise.loss
        assert seg is not None
        return self.noise.loss + seg

    def noise_rows(self) -> tuple[NoiseRow, ...]:
        row = frontend.row_of(self.noise, "prefix sums")
        return (NoiseRow(f"hybrid checkpoints ({row.name})", row.scale, row.sensitivity,
                         "prefix sums"),
                NoiseRow("hybrid segments (binary mechanism, half the budget)", None, None,
                         "prefix sums"))

    def _parts(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t = np.asarray(t, dtype=np.int64)
        k = np.floor(np.log2(t)).astype(np.int64)
        k = np.where(np.left_shift(np.int64(1), k) > t, k - 1, k)
        k = np.where(np.left_shift(np.int64(1), k + 1) <= t, k + 1, k)
        inner = np.bitwise_count(t - np.left_shift(np.int64(1), k)).astype(np.float64)
        return k, inner, (k + 1).astype(np.float64)

    def weights(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError("the hybrid mechanism has two noise scales: see variance()")

    def _per_segment(self, k: np.ndarray, what: str) -> np.ndarray:
        out = np.zeros(k.shape)
        for kk in np.unique(k):
            if kk >= 1:
                seg = self.segment(int(kk)).noise
                out[k == kk] = noise_variance(seg) if what == "var" else scale_of(seg)
        return out

    def variance(self, t: np.ndarray) -> np.ndarray:
        k, inner, blocks = self._parts(t)
        return blocks * noise_variance(self.noise) + inner * self._per_segment(k, "var")

    def half_widths(self, t: np.ndarray, beta: float) -> np.ndarray:
        k, inner, blocks = self._parts(t)
        b, s = scale_of(self.noise), self._per_segment(k, "scale")
        s2 = blocks * b * b + inner * s * s
        return half_width(self.gaussian, s2, np.maximum(b, np.where(inner > 0, s, 0)), beta)

    def window_terms(self, t: int, u: int) -> list[tuple[float, CalibratedNoise, float]]:
        """S_t − S_u: the checkpoint noises of blocks k_u + 1 … k_t, and the segment
        trees' noises — the covers' symmetric difference within one segment, both covers
        in two."""
        kt = int(t).bit_length() - 1
        ku = int(u).bit_length() - 1  # −1 for u = 0
        ti, ui = t - (1 << kt), (u - (1 << ku) if u else 0)
        terms = [(float(kt - ku), self.noise, 1.0)]
        if u and kt == ku:
            terms.append((float(len(cover(ti) ^ cover(ui))), self.segment(kt).noise, 1.0))
        else:
            if ti:
                terms.append((float(len(cover(ti))), self.segment(kt).noise, 1.0))
            if ui:
                terms.append((float(len(cover(ui))), self.segment(ku).noise, 1.0))
        return [term for term in terms if term[0] > 0]

    def release(self, x: np.ndarray) -> np.ndarray:
        return self.release_many(x, 1)[0]

    def release_many(self, x: np.ndarray, copies: int) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        n, copies = len(x), int(copies)
        prefix = np.concatenate([[0], np.cumsum(x)])
        top = n.bit_length() - 1
        ends = np.left_shift(1, np.arange(top + 1))
        starts = np.concatenate([[0], ends[:-1]])
        blocks = (prefix[ends] - prefix[starts]) + self._noise(copies * (top + 1)).reshape(
            copies, top + 1)
        checkpoints = np.cumsum(blocks, axis=1)
        out = np.zeros((copies, n), dtype=np.float64)
        for k in range(top + 1):
            lo, hi = 1 << k, min((1 << (k + 1)) - 1, n)  # steps lo … hi use checkpoint k
            out[:, lo - 1:hi] = checkpoints[:, k:k + 1]
            if hi > lo:
                out[:, lo:hi] += self.segment(k).release_many(x[lo:hi], copies)
        return out

    def start(self) -> dict[str, Any]:
        return {"t": 0, "total": 0, "block": 0, "seg": None}

    def step(self, state: dict[str, Any], x: int) -> float:
        state["t"] = t = state["t"] + 1
        state["block"] += int(x)
        k = t.bit_length() - 1
        if t == 1 << k:
            state["total"] += state["block"] + int(self._noise(1)[0])
            state["block"] = 0
            state["seg"] = self.segment(k).start() if k >= 1 else None
            return float(state["total"])
        return float(state["total"]) + self.segment(k).step(state["seg"], int(x))
