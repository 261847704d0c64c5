"""Local hashing: optimised (OLH) and binary (BLH) local hashing.

Sources: Wang, Blocki, Li & Jha, USENIX Security 2017, §4.4 (OLH with g = e^ε + 1 hash
buckets, BLH with g = 2; estimator and variances); Bassily & Smith, STOC 2015 (BLH's
origin). Hash family: Carter & Wegman (1979), h_{a,b}(v) = bucket((a v + b) mod P) for the
prime P = 65521, a uniform in [1, P), b uniform in [0, P), bucket(u) = ⌊u g / 2^16⌋.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit.core import rng
from dpkit.core.numbers import Number
from dpkit.errors import DomainError
from dpkit.local.base import (
    FrequencyOracle,
    audit_cases,
    dyadic_down,
    exp_lower,
)
from dpkit.mechanisms.randomized_response import response_coins
from dpkit.mechanisms.registry import register

__all__ = ["OLH", "BLH", "PRIME"]

PRIME = 65521  # the largest prime below 2^16: a v + b < 2^32 for a, b, v < PRIME
_CHUNK = 1 << 18  # hash evaluations per block of the aggregator (fits in cache)


def _bucket_sizes(g: int) -> np.ndarray:
    return np.bincount((np.arange(PRIME, dtype=np.int64) * g) >> 16, minlength=g)


def _hash(a: np.ndarray, b: np.ndarray, v: np.ndarray, g: int) -> np.ndarray:
    t = a * v + b  # uint32, no overflow below PRIME²
    t %= np.uint32(PRIME)
    t *= np.uint32(g)
    t >>= np.uint32(16)
    return t


@register(audit=lambda: audit_cases(OLH, "olh"))
class OLH(FrequencyOracle):
    """Optimised local hashing: hash the value into g buckets with a per-user hash, then
    randomized response over the g buckets.

    Report: (a, b, y) as a uint32 row; y = h_{a,b}(x) with probability p and otherwise one
    of the other g − 1 buckets uniformly, p = e^ε/(e^ε + g − 1) rounded down to a
    multiple of 2^-32. The report supports v iff h_{a,b}(v) = y; p* = p and, for v ≠ x,

        q* = c p + (1 − c)(1 − p)/(g − 1),   c = Σ_j n_j (n_j − 1) / (P (P − 1)),

    where c = P[h(x) = h(v)] exactly (n_j = number of u ∈ [0, P) with bucket(u) = j; the
    pair ((a x + b) mod P, (a v + b) mod P) is uniform over distinct pairs), so the
    estimator is exactly unbiased. With c = 1/g this is Wang et al.'s q* = 1/g, and

        Var[f̂(v)] = 4e^ε/(n (e^ε − 1)²) + f(v)(1 − p* − q*)/(n (p* − q*))

    at g = e^ε + 1 (Wang et al. 2017, §4.4, Var* of OLH; the code uses the exact p*, q*).

    Parameters
    ----------
    k, epsilon, fallback :
        See :class:`~dpkit.local.base.FrequencyOracle`; k ≤ 65521.
    g : int, optional
        Number of buckets (default: e^ε + 1 rounded to the nearest integer, at least 2).

    Raises
    ------
    DomainError
        If k < 2, k > 65521, ε ≤ 0 or g ∉ [2, 2^15].

    Notes
    -----
    The aggregator evaluates every user's hash at every value, in cache-sized uint32
    blocks of 2^18 evaluations (n·k work, no Python loop per user).
    """

    name = "olh"

    def __init__(self, k: int, epsilon: Number, fallback: int = 0, g: int | None = None
                 ) -> None:
        super().__init__(k, epsilon, fallback)
        if self.k > PRIME:
            raise DomainError(f"local hashing supports k ≤ {PRIME}")
        e = exp_lower(self.epsilon)
        self.g = max(2, round(float(e)) + 1) if g is None else int(g)
        if not 2 <= self.g <= 1 << 15:
            raise DomainError("g must be in [2, 2^15]")
        self.p_grr = dyadic_down(e / (e + self.g - 1))
        sizes = _bucket_sizes(self.g).astype(object)
        self.collision = Fraction(int((sizes * (sizes - 1)).sum()), PRIME * (PRIME - 1))
        self.p = self.p_grr
        self.q = (self.collision * self.p_grr
                  + (1 - self.collision) * (1 - self.p_grr) / (self.g - 1))

    def _randomize(self, idx: np.ndarray) -> np.ndarray:
        n = idx.size
        a = (rng.uniform_below(PRIME - 1, n).astype(np.uint32) + np.uint32(1))
        b = rng.uniform_below(PRIME, n).astype(np.uint32)
        h = _hash(a, b, idx.astype(np.uint32), self.g)
        keep = response_coins(self.p_grr, n)
        other = rng.uniform_below(self.g - 1, n).astype(np.uint32)
        other += other >= h
        return np.stack([a, b, np.where(keep, h, other)], axis=1)

    def support(self, reports: np.ndarray) -> np.ndarray:
        rep = np.asarray(reports, dtype=np.uint32)
        values = np.arange(self.k, dtype=np.uint32)[None, :]
        out = np.zeros(self.k, dtype=np.int64)
        rows = min(max(1, _CHUNK // self.k), 65535)  # the hit counts of a block fit uint16
        block = np.empty((rows, self.k), dtype=np.uint32)  # cache-sized, reused
        quot = np.empty((rows, self.k), dtype=np.uint32)
        hit = np.empty((rows, self.k), dtype=bool)
        for s in range(0, rep.shape[0], rows):
            part = rep[s: s + rows]
            t, m, d = block[: part.shape[0]], hit[: part.shape[0]], quot[: part.shape[0]]
            np.multiply(part[:, :1], values, out=t)
            t += part[:, 1:2]
            # t mod P as t − ⌊t/P⌋P: NumPy divides by a scalar with a multiply-shift
            # (libdivide), about 5× faster than its remainder; exact on uint32
            np.floor_divide(t, np.uint32(PRIME), out=d)
            d *= np.uint32(PRIME)
            t -= d
            t *= np.uint32(self.g)
            t >>= np.uint32(16)
            np.equal(t, part[:, 2:3], out=m)
            out += m.view(np.uint8).sum(axis=0, dtype=np.uint16)
        return out

    def supports(self, reports: np.ndarray) -> np.ndarray:
        rep = np.asarray(reports, dtype=np.uint32)
        h = _hash(rep[:, :1], rep[:, 1:2], np.arange(self.k, dtype=np.uint32)[None, :], self.g)
        return h == rep[:, 2:3]

    def shift_law(self) -> np.ndarray:
        """P[(y − h(x)) mod g = s] for s = 0 … g − 1 (exact): p at 0, (1 − p)/(g − 1) else."""
        law = np.full(self.g, (1 - self.p_grr) / (self.g - 1), dtype=object)
        law[0] = self.p_grr
        return law

    def shifts(self, reports: np.ndarray, values: np.ndarray) -> np.ndarray:
        """(y − h_{a,b}(x)) mod g for each report and its input (tests of the law)."""
        rep = np.asarray(reports, dtype=np.uint32)
        h = _hash(rep[:, 0], rep[:, 1], np.asarray(values, dtype=np.uint32), self.g)
        return (rep[:, 2].astype(np.int64) - h.astype(np.int64)) % self.g


@register(audit=lambda: audit_cases(BLH, "blh"))
class BLH(OLH):
    """Binary local hashing: :class:`OLH` with g = 2 buckets.

        Var[f̂(v)] = (e^ε + 1)²/(n (e^ε − 1)²) + f(v)(1 − p* − q*)/(n (p* − q*))

    (Wang et al. 2017, §4.4, Var* of BLH, with q* = 1/2; the code uses the exact q*).

    Raises
    ------
    DomainError
        If k < 2, k > 65521 or ε ≤ 0.
    """

    name = "blh"

    def __init__(self, k: int, epsilon: Number, fallback: int = 0) -> None:
        super().__init__(k, epsilon, fallback, g=2)
