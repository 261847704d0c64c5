"""Hadamard response (Acharya, Sun & Zhang, "Hadamard Response: Estimating Distributions
Privately, Efficiently, and with Little Communication", AISTATS 2019; the one-block
version of their §3).

Values x ∈ [0, k) are rows r = x + 1 of the K × K Sylvester–Hadamard matrix,
K = 2^⌈log2(k + 1)⌉ (row 0, all ones, is skipped). C_x = {j : popcount(r & j) even} has
K/2 elements and any two such sets meet in K/4.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit.core import rng
from dpkit.core.numbers import Number
from dpkit.local.base import (
    FrequencyOracle,
    audit_cases,
    dyadic_down,
    exp_lower,
)
from dpkit.mechanisms.randomized_response import response_coins
from dpkit.mechanisms.registry import register

__all__ = ["HadamardResponse", "fwht"]


def fwht(x: np.ndarray) -> np.ndarray:
    """Fast Walsh–Hadamard transform (Sylvester order) of a length-2^m vector:
    out[r] = Σ_j x[j] (−1)^{popcount(r & j)}; O(K log K), exact on int64."""
    out = np.array(x, dtype=np.int64)
    h = 1
    while h < out.size:
        view = out.reshape(-1, 2, h)
        a, b = view[:, 0, :].copy(), view[:, 1, :].copy()
        view[:, 0, :], view[:, 1, :] = a + b, a - b
        h *= 2
    return out


@register(audit=lambda: audit_cases(HadamardResponse, "hadamard"))
class HadamardResponse(FrequencyOracle):
    """Hadamard response: report one index j ∈ [0, K), a log2 K-bit message.

    Exact output law: P[j | x] = 2p/K for j ∈ C_x and 2(1 − p)/K otherwise, with
    p = e^ε/(e^ε + 1) rounded down to a multiple of 2^-32 (ratio p/(1 − p) ≤ e^ε). A
    report supports v iff j ∈ C_v: p* = p and q* = 1/2 exactly (C_x ∩ C_v has K/4
    elements), so f̂(v) = (ŷ(v) − 1/2)/(p − 1/2) and

        Var[f̂(v)] = (e^ε + 1)²/(n (e^ε − 1)²) + f(v)(1/2 − p)/(n (p − 1/2))

    (Wang et al. 2017's pure-protocol variance, §3, with these p*, q*; the same Var* as
    BLH; Acharya et al. 2019 analyse the error of this one-block scheme).
    The server's support counts for all k values cost one histogram of j and one fast
    Walsh–Hadamard transform (O(n + K log K)).

    Raises
    ------
    DomainError
        If k < 2 or ε ≤ 0.
    """

    name = "hadamard"

    def __init__(self, k: int, epsilon: Number, fallback: int = 0) -> None:
        super().__init__(k, epsilon, fallback)
        self.K = 1 << self.k.bit_length()  # the smallest power of two > k
        e = exp_lower(self.epsilon)
        self.p = dyadic_down(e / (e + 1))
        self.q = Fraction(1, 2)

    def _randomize(self, idx: np.ndarray) -> np.ndarray:
        n = idx.size
        r = (idx + 1).astype(np.int64)
        j = rng.uniform_below(self.K, n).astype(np.int64)
        inside = (np.bitwise_count(r & j) & 1) == 0
        want = response_coins(self.p, n)
        flip = inside != want
        j[flip] ^= (r & -r)[flip]  # flipping the lowest set bit of r moves j across C_x
        return j

    def support(self, reports: np.ndarray) -> np.ndarray:
        j = np.asarray(reports, dtype=np.int64)
        w = fwht(np.bincount(j, minlength=self.K)[: self.K])
        return (j.size + w[1: self.k + 1]) // 2

    def supports(self, reports: np.ndarray) -> np.ndarray:
        j = np.asarray(reports, dtype=np.int64)[:, None]
        r = np.arange(1, self.k + 1, dtype=np.int64)[None, :]
        return (np.bitwise_count(r & j) & 1) == 0

    def output_law(self, x: int) -> np.ndarray:
        """P[j | x] for j = 0 … K − 1 (exact Fractions)."""
        j = np.arange(self.K)
        inside = (np.bitwise_count((x + 1) & j) & 1) == 0
        law = np.full(self.K, 2 * (1 - self.p) / self.K, dtype=object)
        law[inside] = 2 * self.p / self.K
        return law
