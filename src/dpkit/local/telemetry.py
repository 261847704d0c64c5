"""Microsoft's telemetry collection: 1BitMean and dBitFlip, with α-point rounding and
memoisation for counters collected repeatedly.

Source: Ding, Kulkarni & Yekhanin, "Collecting Telemetry Data Privately", NeurIPS 2017:
§2.1 (1BitMean, its estimator and Theorem 1), §2.2 (dBitFlip, its estimator and
Theorem 2), §3 (repeated collection: α-point rounding and memoisation, §3.1–3.2).

Exact probabilities. The paper's e^ε/(e^ε + 1) (resp. e^{ε/2}/(e^{ε/2} + 1)) is rounded
*down* to a multiple of 2^-32 (p), and q = 1 − p, so p/q ≤ e^ε (resp. e^{ε/2}) and each
report is ε-LDP as claimed; the estimators use the exact p, q that were sampled with.

What memoisation protects (and what it does not), as in the paper's §3. A user of a
:meth:`OneBitMean.memoized` (or :meth:`DBitFlip.memoized`) collection draws, once: α
(1BitMean: the offset of α-point rounding; dBitFlip: the d buckets it reports on) and one
randomized answer for every *memo key* (1BitMean: each of the s + 1 rounding points
0, m/s, …, m; dBitFlip: "my value is the j-th of my buckets", j < d, or "none of them").
Every later collection reports the memoised answer of the current key. Hence, for one user
and any number T of collections:

- protected: the values, given when the key changes. If two value sequences x_1…x_T and
  x′_1…x′_T make the key change at the same times (under the user's α, resp. buckets),
  with c distinct keys, the transcripts' likelihood ratio is at most e^{c·ε}: the loss is
  ε per *distinct key*, not per collection. A user whose key never changes (a counter
  that stays in its rounding cell, a bucket that stays the same) loses ε over the whole
  campaign, however long it runs;
  averaging repeated reports of one key reveals nothing (they are one draw).
- not protected: *whether and when* the key changes. A changed key may give a different
  answer, and two sequences with different change patterns may have transcripts of
  incomparable support (no ε bounds their ratio). The memoised answers are also stable
  per user, so they can link a user's reports over time; the paper's output perturbation
  (§3.3), which trades some of that back, is not built here.
- α-point rounding makes the key change rarely for a slowly drifting counter: the user's
  value x ∈ [L, L + m/s] rounds up iff x − L + α·m/s ≥ m/s with α fixed, so a counter that
  moves within its cell mostly keeps its key, and the rounding is unbiased over α
  (P[up] = (x − L)/(m/s)).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from dpkit.core import rng
from dpkit.core.numbers import Number, integer, positive
from dpkit.core.renamed import complement, renamed
from dpkit.errors import DomainError
from dpkit.local.base import check_k_epsilon, dyadic_down, exp_lower, to_index
from dpkit.local.values import (
    bernoulli_float,
    check_level,
    local_measurement,
    mean_frame,
    normal_z,
    to_interval,
)
from dpkit.mechanisms.randomized_response import response_coins
from dpkit.mechanisms.registry import register

__all__ = ["OneBitMean", "DBitFlip", "MemoizedOneBitMean", "MemoizedDBitFlip"]

_MAX_POINTS = 1 << 12  # rounding points per user (the memo table is n × (s + 1) bits)


def _rr_probability(eps: Fraction) -> Fraction:
    """p = e^ε/(e^ε + 1) rounded down to a multiple of 2^-32 (so p/(1 − p) ≤ e^ε)."""
    e = exp_lower(eps)
    return dyadic_down(e / (e + 1))


def _audit_onebit() -> list[Any]:
    from dpkit.mechanisms.registry import AuditCase

    def once(epsilon: int) -> Any:
        mech = OneBitMean(1, epsilon)
        return lambda value, n: mech.randomize(np.full(n, float(value))).astype(np.int64)

    def memo(fresh: bool) -> Any:
        """Four collections of a constant value, coded as a 4-bit integer. Broken: no
        memoisation (a fresh report each time, the loss composing to 4ε)."""
        mech = OneBitMean(1, 1)

        def sample(value: float, n: int) -> np.ndarray:
            values = np.full(n, float(value))
            if fresh:
                bits = [mech.randomize(values) for _ in range(4)]
            else:
                client = mech.memoized(n, s=4)
                bits = [client.collect(values) for _ in range(4)]
            out = np.zeros(n, dtype=np.int64)
            for j, b in enumerate(bits):
                out += b.astype(np.int64) << j
            return out

        return sample

    measurement = OneBitMean(1, 1).measurement
    return [AuditCase("local_1bitmean", measurement, once(1), once(2), 0.0, 1.0),
            AuditCase("local_1bitmean_memoized", measurement, memo(False), memo(True),
                      0.0, 1.0)]


@register(audit=_audit_onebit)
class OneBitMean:
    """1BitMean: each user sends one bit about a counter x ∈ [0, m]; the collector estimates
    the mean (Ding, Kulkarni & Yekhanin 2017, §2.1).

    Exact output law: P[b = 1 | x] = q + (x/m)(p − q), p = e^ε/(e^ε + 1) rounded down to a
    multiple of 2^-32, q = 1 − p. Sampled as an unbiased rounding of x to {0, m}
    (Bernoulli(x/m), the float x/m truncated to a multiple of 2^-64) followed by binary
    randomized response that keeps the rounded bit with probability p: for any x, x′ and b,
    P[b | x]/P[b | x′] ≤ p/q ≤ e^ε (ε-LDP).

    Estimator (their §2.1): σ̂ = (m/n) Σ_i (b_i − q)/(p − q), unbiased for the mean σ of
    the values, with

        Var[σ̂] = m² Σ_i π_i(1 − π_i) / (n² (p − q)²) ≤ m² / (4 n (p − q)²),

    π_i = q + (x_i/m)(p − q) (the bits are independent Bernoulli(π_i)); 1/(p − q) is the
    paper's (e^ε + 1)/(e^ε − 1). The standard error plugs in b̄(1 − b̄) for the mean of
    π_i(1 − π_i), which overstates it (concavity) and so errs on the wide side; Theorem 1's
    Hoeffding bound is :meth:`hoeffding`.

    Parameters
    ----------
    m : number
        The declared upper bound of the counter (> 0); values lie in [0, m].
    epsilon : number
        ε > 0 in nats, per report (a float is rounded down).
    fallback : number
        What a non-finite or non-numeric value is replaced by (default 0); finite values
        outside [0, m] are clamped (see :mod:`dpkit.local.values`).

    Raises
    ------
    DomainError
        If m ≤ 0, ε ≤ 0 or the fallback is outside [0, m].
    """

    name = "1bitmean"

    def __init__(self, m: Number, epsilon: Number, fallback: Number = 0) -> None:
        self.m = positive(m, "m")
        self.m_float = float(self.m)
        self.epsilon = positive(epsilon, "epsilon", up=False)
        if isinstance(fallback, bool) or not isinstance(fallback, int | float) or not (
                0 <= fallback <= self.m_float):
            raise DomainError(f"fallback must be a number in [0, m], got {fallback!r}")
        self.fallback = float(fallback)
        self.p = _rr_probability(self.epsilon)
        self.q = 1 - self.p

    def __repr__(self) -> str:
        return f"OneBitMean(m={self.m_float:.6g}, epsilon={float(self.epsilon):.6g})"

    def values(self, values: npt.ArrayLike) -> np.ndarray:
        """The out-of-bounds rule applied: floats in [0, m]."""
        return to_interval(values, 0.0, self.m_float, self.fallback)

    def randomize(self, values: npt.ArrayLike) -> np.ndarray:
        """Client side: one bit per value (a boolean array; exact randomness from
        :mod:`dpkit.core.rng`)."""
        x = self.values(values)
        up = bernoulli_float(x / self.m_float)
        return ~(up ^ response_coins(self.p, x.size))  # keep the rounded bit with probability p

    def memoized(self, n_users: int, s: int = 16) -> MemoizedOneBitMean:
        """A population of ``n_users`` clients with α-point rounding to s + 1 points and
        memoisation (§3 of the paper; what it protects: the module docstring)."""
        return MemoizedOneBitMean(self, n_users, s)

    @renamed(alpha=("confidence", complement))
    def estimate(self, reports: npt.ArrayLike, *, confidence: float = 0.95) -> pl.DataFrame:
        """Server side: the mean with its standard error and a normal CI at level
        ``confidence`` (a Polars frame of one row: estimate, std_error, ci_low, ci_high, n).

        Raises
        ------
        DomainError
            If there are no reports or confidence ∉ (0, 1).
        """
        b = np.asarray(reports, dtype=bool).reshape(-1)
        check_level(confidence)
        if b.size == 0:
            raise DomainError("no reports to estimate from")
        p, q, n = float(self.p), float(self.q), b.size
        mean_b = b.mean()
        est = self.m_float * (mean_b - q) / (p - q)
        var = self.m_float**2 * mean_b * (1 - mean_b) / (n * (p - q) ** 2)
        return mean_frame(est, var, n, confidence)

    def variance(self, values: npt.ArrayLike) -> float:
        """Closed-form Var[σ̂] for the population ``values`` (class docstring)."""
        x = self.values(values)
        p, q = float(self.p), float(self.q)
        pi = q + x / self.m_float * (p - q)
        return float(self.m_float**2 * (pi * (1 - pi)).sum() / (x.size**2 * (p - q) ** 2))

    def hoeffding(self, n: int, beta: float = 0.05) -> float:
        """Theorem 1's half-width: |σ̂ − σ| ≤ (m/(p − q))·√(ln(2/β)/(2n)) with probability
        ≥ 1 − β."""
        return self.m_float / float(self.p - self.q) * float(
            np.sqrt(np.log(2 / check_level(beta, "beta")) / (2 * n)))

    @property
    def measurement(self) -> Any:
        """One collection as a Measurement: d_in ↦ PureDP(d_in · ε) under HammingDistance."""
        return local_measurement(self.randomize, self.epsilon, self.name)


class MemoizedOneBitMean:
    """Repeated 1BitMean collection for a fixed population of n users (§3 of Ding et al.).

    Each user draws once α ∈ [0, 1) (a uniform 64-bit fraction) and, for each rounding point
    j·m/s (j = 0 … s), one memoised bit with P[1] = q + (j/s)(p − q) (exactly: an exact
    Bernoulli(j/s) kept with probability p). At each collection the value x is rounded to
    L = ⌊x·s/m⌋·m/s or L + m/s (up iff frac + α ≥ 1, frac = (x − L)·s/m; P[up] = frac up to
    the 2^-64 truncation of frac) and the bit memoised for that point is reported. Each
    user's bit is marginally Bernoulli(q + (x/m)(p − q)), so :meth:`OneBitMean.estimate` of
    one collection is unbiased with the same variance as one-shot 1BitMean. Privacy over
    all collections: the module docstring (ε per distinct rounding point visited; a
    constant value costs ε in total).

    Raises
    ------
    DomainError
        If n_users < 1 or s ∉ [1, 4096].
    """

    def __init__(self, mechanism: OneBitMean, n_users: int, s: int) -> None:
        self.mechanism = mechanism
        self.n = integer(n_users, "n_users", minimum=1)
        self.s = integer(s, "s", minimum=1, maximum=_MAX_POINTS)
        self.alpha = rng.words(self.n, 64)
        up = rng.uniform_below(self.s, self.n * (self.s + 1)).reshape(self.n, self.s + 1)
        up = up < np.arange(self.s + 1, dtype=np.uint64)[None, :]  # Bernoulli(j/s)
        self.memo = ~(up ^ response_coins(mechanism.p, (self.n, self.s + 1)))

    def points(self, values: npt.ArrayLike) -> np.ndarray:
        """Each user's rounding point index j ∈ [0, s] for the current values (length n)."""
        x = self.mechanism.values(values)
        if x.size != self.n:
            raise DomainError(f"expected {self.n} values (one per user), got {x.size}")
        y = x * (self.s / self.mechanism.m_float)
        low = np.minimum(np.floor(y), self.s)
        frac = np.clip(y - low, 0.0, 1.0 - 2.0**-53)
        f = np.floor(np.ldexp(frac, 64)).astype(np.uint64)
        up = self.alpha > (np.uint64(0xFFFF_FFFF_FFFF_FFFF) - f)  # α + frac ≥ 1
        return np.minimum(low.astype(np.int64) + up, self.s)

    def collect(self, values: npt.ArrayLike) -> np.ndarray:
        """One collection: each user's memoised bit for their current rounding point."""
        return self.memo[np.arange(self.n), self.points(values)]


def _audit_dbitflip() -> list[Any]:
    from dpkit.mechanisms.registry import AuditCase

    weights = 1 << np.arange(4, dtype=np.int64)

    def once(epsilon: int) -> Any:
        mech = DBitFlip(4, epsilon, d=2)

        def sample(value: int, n: int) -> np.ndarray:
            buckets, bits = mech.randomize(np.full(n, value))
            order = np.argsort(buckets, axis=1)  # bits in bucket order
            b = np.take_along_axis(bits, order, axis=1).astype(np.int64)
            return weights[buckets].sum(axis=1) * 4 + b[:, 0] + 2 * b[:, 1]

        return sample

    def memo(fresh: bool) -> Any:
        """k = d = 2 (both bits reported), two collections of a constant value coded as a
        4-bit integer. Broken: a fresh report each time (2ε)."""
        mech = DBitFlip(2, 1, d=2)

        def sample(value: int, n: int) -> np.ndarray:
            values = np.full(n, value)
            if fresh:
                rounds = [mech.randomize(values) for _ in range(2)]
            else:
                client = mech.memoized(n)
                rounds = [client.collect(values) for _ in range(2)]
            out = np.zeros(n, dtype=np.int64)
            for j, (buckets, bits) in enumerate(rounds):
                order = np.argsort(buckets, axis=1)  # bit of bucket 0, bit of bucket 1
                b = np.take_along_axis(bits, order, axis=1).astype(np.int64)
                out += (b[:, 0] + 2 * b[:, 1]) << (2 * j)
            return out

        return sample

    return [AuditCase("local_dbitflip", DBitFlip(4, 1, d=2).measurement, once(1), once(2),
                      0, 1),
            AuditCase("local_dbitflip_memoized", DBitFlip(2, 1, d=2).measurement,
                      memo(False), memo(True), 0, 1)]


def sample_buckets(n: int, k: int, d: int) -> np.ndarray:
    """n uniformly random d-subsets of {0, …, k − 1}, as an int64 matrix (n, d) (Floyd's
    algorithm run for all rows at once: step j draws uniform_below(j + 1) and takes j if
    the draw is already chosen; exact)."""
    chosen = np.empty((n, d), dtype=np.int64)
    for col, j in enumerate(range(k - d, k)):
        t = rng.uniform_below(j + 1, n).astype(np.int64)
        seen = (chosen[:, :col] == t[:, None]).any(axis=1)
        chosen[:, col] = np.where(seen, j, t)
    return chosen


@register(audit=_audit_dbitflip)
class DBitFlip:
    """dBitFlip: histograms over k buckets; each user reports d randomly sampled buckets
    with one randomized bit each (Ding, Kulkarni & Yekhanin 2017, §2.2). On held-out real data
    (bench/floor.py: the first page of MSNBC's 989,818 sessions, k = 17, d = 1, ε = 0.1) its
    frequencies' L1 error was 1.6–1.7× the uniform answer's (0.14× at ε = 1): one bit per user
    carries little at low ε; prefer a larger d or a frequency oracle (local.auto) there.

    Exact output law: the buckets j_1 … j_d are a uniformly random d-subset S (independent
    of the value); bit b_j = 1 with probability p if the value is j and q = 1 − p
    otherwise, p = e^{ε/2}/(e^{ε/2} + 1) rounded down to a multiple of 2^-32, independently.
    Two values change at most two bits' laws, each by a ratio ≤ p/q ≤ e^{ε/2}: ε-LDP.

    Estimator (their §2.2): ĥ(v) = (k/(n d)) Σ_{i : v ∈ S_i} (b_{i,v} − q)/(p − q), the
    frequency of v, unbiased, with

        Var[ĥ(v)] = ((k/d)·pq/(p − q)² + f(v)(k/d − 1)) / n

    (each user adds Z = (k/d)·1[v ∈ S](b − q)/(p − q), E[Z] = 1[x = v] and
    E[Z²] = (k/d)(pq/(p − q)² + 1[x = v])); pq/(p − q)² is e^{ε/2}/(e^{ε/2} − 1)². The
    standard error plugs in the estimate clipped to [0, 1]. d = k is symmetric unary
    encoding.

    Parameters
    ----------
    k : int
        Number of buckets, ≥ 2.
    epsilon : number
        ε > 0 in nats, per report.
    d : int
        Buckets reported per user, in [1, k] (default 1).
    fallback : int
        The bucket an out-of-domain value is replaced by (see
        :func:`dpkit.local.base.to_index`); default 0.

    Raises
    ------
    DomainError
        If k < 2, ε ≤ 0, d ∉ [1, k] or fallback ∉ [0, k).
    """

    name = "dbitflip"

    def __init__(self, k: int, epsilon: Number, d: int = 1, fallback: int = 0) -> None:
        self.k, self.epsilon = check_k_epsilon(k, epsilon)
        self.d = integer(d, "d", minimum=1, maximum=self.k)
        self.fallback = integer(fallback, "fallback", minimum=0, maximum=self.k - 1)
        self.p = _rr_probability(self.epsilon / 2)
        self.q = 1 - self.p

    def __repr__(self) -> str:
        return f"DBitFlip(k={self.k}, epsilon={float(self.epsilon):.6g}, d={self.d})"

    def randomize(self, values: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Client side: per value, the sampled buckets (int64 (n, d)) and their bits (bool
        (n, d))."""
        idx = to_index(values, self.k, self.fallback)
        buckets = sample_buckets(idx.size, self.k, self.d)
        return buckets, self._bits(buckets == idx[:, None])

    def _bits(self, mine: np.ndarray) -> np.ndarray:
        q = response_coins(self.q, mine.shape)  # Bernoulli(q) everywhere, ...
        p = response_coins(self.p, mine.shape)  # ... Bernoulli(p) on the user's own bucket
        return np.where(mine, p, q)

    def memoized(self, n_users: int) -> MemoizedDBitFlip:
        """A population of ``n_users`` clients with memoisation (module docstring)."""
        return MemoizedDBitFlip(self, n_users)

    def sums(self, reports: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Σ_{i : v ∈ S_i} b_{i,v} − q·#{i : v ∈ S_i} per bucket v (float64, length k); add
        these over batches and pass them to :meth:`estimate_from_sums`."""
        buckets, bits = (np.asarray(r) for r in reports)
        ones = np.bincount(buckets.reshape(-1), weights=bits.reshape(-1), minlength=self.k)
        seen = np.bincount(buckets.reshape(-1), minlength=self.k)
        return ones[: self.k] - float(self.q) * seen[: self.k]

    @renamed(alpha=("confidence", complement))
    def estimate(self, reports: tuple[np.ndarray, np.ndarray], *, confidence: float = 0.95
                 ) -> pl.DataFrame:
        """Server side: a Polars frame, one row per bucket: value, estimate, std_error,
        ci_low, ci_high (normal (level ``confidence``) interval).

        Raises
        ------
        DomainError
            If there are no reports or confidence ∉ (0, 1).
        """
        return self.estimate_from_sums(self.sums(reports), len(reports[0]), confidence=confidence)

    @renamed(alpha=("confidence", complement))
    def estimate_from_sums(self, sums: np.ndarray, n: int, *, confidence: float = 0.95
                           ) -> pl.DataFrame:
        """The estimate from :meth:`sums` added over batches of n reports in all."""
        check_level(confidence)
        if n < 1:
            raise DomainError("no reports to estimate from")
        est = self.k / (n * self.d) * np.asarray(sums, dtype=np.float64) / float(
            self.p - self.q)
        se = np.sqrt(self.variance(n, np.clip(est, 0, 1)))
        z = normal_z(confidence)
        return pl.DataFrame({"value": np.arange(self.k), "estimate": est, "std_error": se,
                             "ci_low": est - z * se, "ci_high": est + z * se})

    def variance(self, n: int, f: npt.ArrayLike = 0.0) -> Any:
        """Closed-form Var[ĥ(v)] with n reports and true frequency f (class docstring)."""
        p, q, r = float(self.p), float(self.q), self.k / self.d
        return (r * p * q / (p - q) ** 2 + np.asarray(f) * (r - 1)) / n

    @property
    def measurement(self) -> Any:
        """One collection as a Measurement: d_in ↦ PureDP(d_in · ε) under HammingDistance."""
        return local_measurement(self.randomize, self.epsilon, self.name)


class MemoizedDBitFlip:
    """Repeated dBitFlip collection for a fixed population of n users (§3 of Ding et al.).

    Each user draws once its d buckets S and, for each memo key κ ∈ {0, …, d} (κ < d: "my
    value is S[κ]", κ = d: "my value is none of S"), one answer of d bits (bit j ~
    Bernoulli(p) if j = κ else Bernoulli(q)). A collection reports S and the answer of the
    current key. Changes among values outside S change nothing, so a user's loss over all
    collections is ε per distinct key visited (at most (d + 1)ε for a fixed change pattern;
    ε for a constant value); what is not protected: the module docstring. Each collection
    alone has the law of a one-shot report, so :meth:`DBitFlip.estimate` is unbiased with
    the same variance.

    Raises
    ------
    DomainError
        If n_users < 1.
    """

    def __init__(self, mechanism: DBitFlip, n_users: int) -> None:
        self.mechanism = mechanism
        self.n = integer(n_users, "n_users", minimum=1)
        d = mechanism.d
        self.buckets = sample_buckets(self.n, mechanism.k, d)
        keys = np.arange(d + 1)[:, None] == np.arange(d)[None, :]  # (d + 1, d): own bucket
        self.memo = mechanism._bits(np.broadcast_to(keys, (self.n, d + 1, d)))

    def keys(self, values: npt.ArrayLike) -> np.ndarray:
        """Each user's memo key for the current values (length n)."""
        m = self.mechanism
        idx = to_index(values, m.k, m.fallback)
        if idx.size != self.n:
            raise DomainError(f"expected {self.n} values (one per user), got {idx.size}")
        match = self.buckets == idx[:, None]
        return np.where(match.any(axis=1), match.argmax(axis=1), m.d)

    def collect(self, values: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """One collection: (buckets, bits) as :meth:`DBitFlip.randomize` returns them."""
        return self.buckets, self.memo[np.arange(self.n), self.keys(values)]
