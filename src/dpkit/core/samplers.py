"""Exact, vectorised noise samplers (DESIGN.md §3.2).

Every sampler here draws its randomness from :mod:`dpkit.core.rng` and decides with integer and
rational arithmetic; no floating-point noise appears in a sampling path. A float may *guide*
a decision (the discrete Gaussian's acceptance test) only where its error is certified far
below a margin ``_TOL``; every case within that margin is decided with exact integers, so
the output law is exact. Each loop of the papers' algorithms runs over NumPy arrays of
candidates, so the cost per value is a few vectorised passes. The discrete Laplace, the
geometric and the discrete Gaussian run in passes of at most ``_CHUNK`` (2^15) candidates
written into one preallocated ``int64`` output: beyond the output, a call holds O(_CHUNK)
bytes (about 1–2 bytes per value at 10^6 values, ``bench/sampler_memory.py``).

Sources
-------
Canonne, Kamath & Steinke (2020), *The Discrete Gaussian for Differential Privacy*,
NeurIPS 2020 / arXiv:2004.00010: Algorithm 1 (Bernoulli(exp(−γ))), Algorithm 2 (discrete
Laplace), Algorithm 3 (discrete Gaussian). Continuous noise is released on a grid of width
2^k (Mironov 2012, *On Significance of the Least Significant Bits for Differential Privacy*;
Haney et al. 2022, *Precision-based attacks and interval refining*): see :func:`to_grid`.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpkit.core import rng
from dpkit.core.numbers import Number, as_typed, positive, to_fraction
from dpkit.core.renamed import renamed
from dpkit.errors import DomainError

__all__ = [
    "bernoulli",
    "bernoulli_dyadic",
    "bernoulli_packed",
    "bernoulli_exp",
    "geometric",
    "discrete_laplace",
    "discrete_gaussian",
    "discrete_gaussian_variance",
    "GRID_BITS",
    "grid_exponent",
    "to_grid",
    "from_grid",
    "add_on_grid",
    "grid_int",
    "grid_float",
    "MAX_NUMERATOR",
    "MAX_DENOMINATOR",
]

MAX_NUMERATOR = 1 << 44  # keeps t·K and U + t·V far inside uint64 in Algorithm 2
MAX_DENOMINATOR = 1 << 32
GRID_BITS = 30  # grid width 2^k ≈ scale · 2^-30: rounding costs ~1e-9 of a scale
_GRID_LIMIT = float(1 << 62)

Bern = Callable[[np.ndarray], np.ndarray]


def bernoulli(p: Number, size: int) -> np.ndarray:
    """Draw ``size`` exact Bernoulli(p) values for a rational ``p`` ∈ [0, 1].

    A dyadic p (denominator 2^b, b ≤ 64) takes the fast path :func:`bernoulli_dyadic`
    (about one random byte per draw); any other p compares ``uniform_below(denominator)``
    with the numerator. Both laws are exactly Bernoulli(p).

    Raises
    ------
    DomainError
        If p ∉ [0, 1] or its denominator is 2^64 or more.
    """
    prob = as_typed(p)
    if not 0 <= prob <= 1:
        raise DomainError(f"p must be in [0, 1], got {p!r}")
    den = prob.denominator
    if den & (den - 1) == 0 and den <= 1 << 64:  # dyadic: the byte-wise fast path
        bits = max(8, -(-(den.bit_length() - 1) // 8) * 8)
        return bernoulli_dyadic(prob.numerator << (bits - den.bit_length() + 1), size, bits)
    if den >= 1 << 64:
        raise DomainError("p's denominator must be below 2**64")
    return rng.bernoulli_rational(prob.numerator, den, size)


def bernoulli_dyadic(numer: int, size: int | tuple[int, ...], bits: int = 32) -> np.ndarray:
    """Exact Bernoulli(numer / 2^bits) draws (``bits`` a multiple of 8), about one random
    byte per draw: compare a uniform word W with ``numer`` byte by byte, most significant
    first; the first differing byte decides W < numer (returns True), equal bytes draw the
    next byte. P[True] = P[W < numer] = numer / 2^bits exactly. ``size`` may be a shape.

    Raises
    ------
    DomainError
        Unless 0 ≤ numer ≤ 2^bits and ``bits`` is a positive multiple of 8.
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    n = int(np.prod(shape))
    if not 0 <= numer <= 1 << bits or bits % 8 or bits <= 0:
        raise DomainError("need 0 ≤ numer ≤ 2^bits and bits a positive multiple of 8")
    if numer == 1 << bits:
        rng.words(0, 8)  # no bit is read, but a test stream is refused all the same
        return np.ones(shape, dtype=bool)
    digits = numer.to_bytes(bits // 8, "big")
    w = rng.words(n, 8)
    out = w < np.uint8(digits[0])  # the first byte decides all but 1/256 of the draws
    todo = np.flatnonzero(w == np.uint8(digits[0]))
    for digit in digits[1:]:
        if not todo.size:
            break
        w = rng.words(todo.size, 8)
        d = np.uint8(digit)
        out[todo[w < d]] = True
        todo = todo[w == d]
    return out.reshape(shape)


def _bernoulli_exp_fraction(n: int, bern: Bern, k0: int = 1) -> np.ndarray:
    """Algorithm 1 of CKS20 for γ ∈ [0, 1]: Bernoulli(exp(−γ)) for ``n`` elements.

    ``bern(idx)`` returns Bernoulli(γ_i) for the indices ``idx``. Step K draws
    A ~ Bernoulli(γ/K) as Bernoulli(γ) ∧ Bernoulli(1/K), the two being independent;
    the result is 1 iff the first K with A = 0 is odd. All elements still running share the
    same K, so Bernoulli(1/K) is a scalar-bound draw. ``k0`` > 1 resumes elements that have
    already passed steps 1 … k0 − 1.
    """
    result = np.empty(n, dtype=bool)
    active = np.arange(n)
    k = k0
    while active.size:
        a = bern(active)
        if k == 2:
            a &= rng.coins(active.size)
        elif k > 2:
            a &= rng.uniform_below(k, active.size) == 0
        result[np.compress(~a, active)] = bool(k & 1)
        active = np.compress(a, active)
        k += 1
    return result


def _always(idx: np.ndarray) -> np.ndarray:
    return np.ones(idx.size, dtype=bool)


def _bernoulli_exp_one(n: int) -> np.ndarray:
    """Bernoulli(exp(−1)) draws (Algorithm 1 with γ = 1; step 1 always passes)."""
    result = np.zeros(n, dtype=bool)
    go = np.flatnonzero(rng.coins(n))  # step 2: Bernoulli(1/2); failing there gives 0
    result[go] = _bernoulli_exp_fraction(go.size, _always, k0=3)
    return result


def _all_succeed(counts: np.ndarray) -> np.ndarray:
    """For each element, whether ``counts[i]`` independent Bernoulli(exp(−1)) all succeed."""
    alive = np.ones(counts.size, dtype=bool)
    step = 0
    todo = np.flatnonzero(counts > 0)
    while todo.size:
        ok = _bernoulli_exp_one(todo.size)
        alive[todo[~ok]] = False
        step += 1
        todo = todo[ok]
        todo = todo[counts[todo] > step]
    return alive


def bernoulli_exp(numer: np.ndarray | int, denom: int, size: int | None = None) -> np.ndarray:
    """Bernoulli(exp(−γ)) for γ = numer/denom ≥ 0, exactly, one draw per element.

    Parameters
    ----------
    numer : array of Python ints (object) or uint64, or int
        Numerators γ_i · denom, ≥ 0; any size.
    denom : int
        Common positive denominator; any size.
    size : int, optional
        Number of draws when ``numer`` is a scalar.

    Notes
    -----
    exp(−γ) = exp(−1)^⌊γ⌋ · exp(−{γ}) (Algorithm 1 of CKS20 for both factors). The
    fractional part's Bernoulli({γ}) compares a 64-bit word W with T = ⌊{γ}·2^64⌋; the tie
    W = T (probability 2^-64) is resolved exactly with arbitrary-size integers.
    """
    denom = int(denom)
    if denom <= 0:
        raise DomainError("denominator must be positive")
    if isinstance(numer, np.ndarray) and numer.dtype.kind in "iu":
        if numer.size and numer.min() < 0:
            raise DomainError("γ must be ≥ 0")
        nums = numer  # machine integers: below 2^63 by their type
    else:
        nums = (numer.astype(object) if isinstance(numer, np.ndarray)
                else np.full(int(size or 1), int(numer), dtype=object))
        if nums.size and min(nums) < 0:
            raise DomainError("γ must be ≥ 0")
    if denom < 1 << 63 and (nums.dtype != object or not nums.size or max(nums) < 1 << 63):
        small = nums.astype(np.uint64)  # fast path: everything fits in 64-bit words
        rem = small % np.uint64(denom)
        frac = _bernoulli_exp_fraction(
            small.size, lambda idx: rng.uniform_below(denom, idx.size) < rem[idx])
        return frac & _all_succeed((small // np.uint64(denom)).astype(np.int64))
    whole = nums // denom
    rem = nums - whole * denom
    thresh = ((rem * (1 << 64)) // denom).astype(np.uint64) if nums.size else np.zeros(
        0, np.uint64)
    frac_ok = _bernoulli_exp_fraction(nums.size, _threshold_bernoulli(thresh, rem, denom))
    return frac_ok & _all_succeed(whole.astype(np.int64))


def _threshold_bernoulli(thresh: np.ndarray, rem: np.ndarray, denom: int) -> Bern:
    """Bernoulli(remᵢ/denom) from one 64-bit word W: 1 if W < ⌊remᵢ·2^64/denom⌋, 0 above it,
    and the tie (probability 2^-64) resolved exactly by :func:`_below_given_word`."""
    def bern(idx: np.ndarray) -> np.ndarray:
        w = rng.words(idx.size)
        t = thresh[idx]
        out = w < t
        for j in np.flatnonzero(w == t):
            out[j] = _below_given_word(int(w[j]), int(rem[idx[j]]), denom)
        return out

    return bern


def _below_given_word(word: int, numer: int, denom: int) -> bool:
    """Exact Bernoulli(numer/denom) given that the uniform U lies in [W, W + 1)/2^64."""
    scaled, low = numer << 64, word * denom
    if scaled >= low + denom:  # numer/denom ≥ (W + 1)/2^64: U is below
        return True
    # otherwise P(U < numer/denom | W) = (numer·2^64 − W·denom)/denom, possibly 0
    return scaled > low and rng.uniform_below_int(denom) < scaled - low


def _check_scale(scale: Fraction) -> tuple[int, int]:
    t, s = scale.numerator, scale.denominator
    if t >= MAX_NUMERATOR or s >= MAX_DENOMINATOR:
        raise DomainError(
            f"scale {scale} has too long a representation for the exact sampler; "
            "round it up first with dpkit.mechanisms' representable_scale"
        )
    return t, s


def geometric(scale: Number, size: int) -> np.ndarray:
    """Draw Y ∈ ℕ with P(Y = y) ∝ exp(−y/scale), exactly, as ``int64``.

    The geometric distribution with ratio exp(−s/t), ``scale = t/s`` in lowest terms; drawn
    as the magnitude of :class:`_LaplaceSampler` (CKS20 Algorithm 2, steps 1–9, restructured),
    in passes of at most ``_CHUNK`` candidates: beyond the output, memory stays O(_CHUNK).

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0 or its numerator/denominator exceed 2^44 / 2^32.
    """
    t, s = _check_scale(positive(scale, "scale"))
    sampler = _laplace_sampler(t, s)
    return _chunked_draw(size, sampler.magnitudes)


def discrete_laplace(scale: Number, size: int) -> np.ndarray:
    """Draw ``size`` values of the discrete Laplace distribution, exactly, as ``int64``.

    P(Z = z) ∝ exp(−|z|/scale) for z ∈ ℤ, ``scale = t/s`` in lowest terms. CKS20 Algorithm 2
    with its loops vectorised over passes of at most ``_CHUNK`` candidates written into the
    preallocated output (see :class:`_LaplaceSampler`): beyond the ``int64`` output, memory
    stays O(_CHUNK) (about 2 MB), whatever ``size``.

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0 or its numerator/denominator exceed 2^44 / 2^32.
    """
    t, s = _check_scale(positive(scale, "scale"))
    return _chunked_draw(size, _laplace_sampler(t, s).candidates)


@renamed(sigma="scale")
def discrete_gaussian(scale: Number, size: int) -> np.ndarray:
    """Draw ``size`` values of the discrete Gaussian N_ℤ(0, σ²), exactly, as ``int64``.

    P(Z = z) ∝ exp(−z²/(2σ²)) for z ∈ ℤ. CKS20 Algorithm 3 (a discrete Laplace candidate Y
    accepted with probability exp(−(|Y| − σ²/t)²/(2σ²))), with the Laplace draw's own
    rejection step folded into that test: one Bernoulli(exp(−γ)) per candidate, see
    :class:`_GaussianSampler`. ``scale`` is σ, the standard deviation parameter (σ² is
    used exactly), named as every sampler's and constructor's scale (``sigma=``, deprecated).

    Raises
    ------
    DomainError
        If σ ≤ 0 or σ ≥ 2^44.
    """
    sig = positive(scale, "scale")
    if sig >= MAX_NUMERATOR:
        raise DomainError(f"scale σ = {float(sig):.6g} is beyond the exact sampler's range "
                          "(< 2^44)")
    return _gaussian_sampler(sig * sig).draw(size)


def discrete_gaussian_variance(variance: Number, size: int) -> np.ndarray:
    """Draw ``size`` values of N_ℤ(0, v) given the variance parameter v itself, exactly.

    P(Z = z) ∝ exp(−z²/(2v)) for z ∈ ℤ; as :func:`discrete_gaussian` with σ² = v, for a
    rational v whose square root is irrational (the Mahalanobis Gaussian's per-coordinate
    variances c²·dᵢ). CKS20 Algorithm 3.

    Raises
    ------
    DomainError
        If v ≤ 0 or √v ≥ 2^44.
    """
    var = positive(variance, "variance")
    if var >= MAX_NUMERATOR * MAX_NUMERATOR:
        raise DomainError(f"variance {float(var):.6g} is beyond the exact sampler's range "
                          "(< 2^88)")
    return _gaussian_sampler(var).draw(size)


_TOL = 1e-9  # far above the float error of exp(−γ) (< 2^-40); decisions this close go exact
_SPLIT = 16  # the Laplace magnitude is U + step·V with step ≈ t/16: U is accepted 97% of the time
_CHUNK = 1 << 15  # candidates per vectorised pass: every temporary stays in the L2 cache
_ODD = 0xFFFF  # marks a bucket of the geometric lookup table that holds a threshold
_TABLE_MIN = 1 << 13  # smaller passes search the thresholds rather than build the table
# ...until a sampler has searched this many words in all: a scale used again and again
# (a server's repeated release) then builds its table once and looks every word up
_SEARCHED_MAX = 1 << 16


def _chunked_draw(size: int, candidates: Callable[[int], np.ndarray]) -> np.ndarray:
    """``size`` values from ``candidates(n)`` (the accepted values among n independent
    candidates), in passes of at most ``_CHUNK`` candidates written into one preallocated
    ``int64`` output. Accepted values are i.i.d. with the target law, so taking them in order
    until the output is full gives i.i.d. values; the surplus of the last pass is dropped."""
    out = np.empty(size, dtype=np.int64)
    filled = tried = accepted = 0
    while filled < size:
        need = size - filled
        rate = max(accepted / tried, 0.05) if tried else 0.5
        n = min(_CHUNK, int(need / rate * 1.05) + 16)  # a short last pass, rarely two
        got = candidates(n)
        take = min(got.size, need)
        out[filled : filled + take] = got[:take]
        filled, tried, accepted = filled + take, tried + n, accepted + got.size
    return out


class _SteppedGeometric:
    """V with P(V ≥ v) = exp(−v·θ), θ = step·(s/t) > 0, from one 32-bit word per draw.

    V = #{v ≥ 1 : U' < exp(−v·θ)} for a uniform U' (the events are nested, so
    P(V ≥ v) = exp(−v·θ)). U' lies in [W, W + 1)/2^32 for its first 32-bit word W, and the
    integer thresholds T_v = ⌊2^32·exp(−v·θ)⌋ are computed exactly once: W < T_v means
    U' < exp(−v·θ), W > T_v the opposite, and W = T_v is decided by :meth:`_v_given_word`.
    """

    def __init__(self, step: int, theta: Fraction) -> None:
        self.step = step
        self.theta = theta.numerator, theta.denominator
        self.thresholds = _geometric_thresholds(*self.theta)
        self.ascending = np.array(self.thresholds[::-1], dtype=np.uint32)
        self.v_max = ((1 << 62) - self.step) // self.step  # keeps U + step·V below 2^62
        self.searched = 0  # words searched so far (a race only moves when the table is built)

    @functools.cached_property
    def table(self) -> np.ndarray:
        """The lookup table over a word's top 16 bits (built once, ~1–3 ms)."""
        return _bucket_table(self.ascending)

    def _geometric(self, w: np.ndarray) -> np.ndarray:
        """V from 32-bit words W: #{v : T_v > W} by a table over W's top 16 bits, or by
        binary search for the few words sharing their bucket with a threshold (and for every
        word of a small pass while the table is not built: one new scale, a few values;
        after ``_SEARCHED_MAX`` searched words the table is built). Both give the same V
        for every word, so which one runs never changes the law."""
        if (w.size < _TABLE_MIN and self.searched < _SEARCHED_MAX
                and "table" not in self.__dict__):
            self.searched += w.size
            return self._search(w)
        v = self.table[w >> 16].astype(np.int64)
        odd = np.flatnonzero(v == _ODD)
        if odd.size:
            v[odd] = self._search(w[odd])
        return v

    def _search(self, w: np.ndarray) -> np.ndarray:
        """#{v : T_v > W} by binary search; a word equal to a threshold goes to
        :meth:`_v_given_word`."""
        below = np.searchsorted(self.ascending, w, side="right")  # ≥ 1: T_last = 0
        v = (self.ascending.size - below).astype(np.int64)
        for j in np.flatnonzero(self.ascending[below - 1] == w):
            v[j] = self._v_given_word(int(w[j]), int(v[j]))
        return v

    def _v_given_word(self, word: int, v: int) -> int:
        """V exactly, given that U' ∈ [W, W + 1)/2^32 and that v = #{v : T_v > W}.

        Events v' ≤ v hold and those with T_v' < W fail (thresholds never increase); while
        the next threshold equals W, U' is compared with exp(−v'·θ) exactly.
        """
        uniform = _LazyUniform(word, 32)
        n, d = self.theta
        size = len(self.thresholds)
        while (self.thresholds[v] if v < size else 0) == word and uniform.below_exp(
                (v + 1) * n, d):
            v += 1
            if v > self.v_max:  # probability below exp(−2^17): no int64 result exists
                raise OverflowError("sampler candidate beyond 2^62")
        return v


@functools.lru_cache(maxsize=32)
def _gaussian_sampler(var: Fraction) -> _GaussianSampler:
    return _GaussianSampler(var)


class _GaussianSampler(_SteppedGeometric):
    """CKS20 Algorithm 3 for one σ² = a/b, with one acceptance test per candidate.

    Candidate. With t = (⌊4σ⌋ + 1)/4 (≈ σ + 1/4, close to the t that maximises acceptance)
    and an integer step = max(⌊t/16⌋, 1): U uniform on {0, …, step − 1}, V with
    P(V ≥ v) = exp(−v·step/t), a fair sign S, and the magnitude G = U + step·V.

    Test. Accept with probability exp(−γ), γ = U/t + (G − σ²/t)²/(2σ²), but never when
    S = 1 and G = 0. P(U = u, V = v)·exp(−u/t) ∝ exp(−g/t) with g = u + step·v, so an
    accepted (G, S) has P ∝ exp(−g/t − (g − σ²/t)²/(2σ²)) = exp(−(g² + σ⁴/t²)/(2σ²)) ∝
    exp(−g²/(2σ²)) for every (g, s) ≠ (0, 1): ±G is the discrete Gaussian. This is CKS20's
    sampler (Algorithm 2's "accept U with probability exp(−U/t)" followed by Algorithm 3's
    test) with the two independent acceptances merged into one; t > 0 need not be ⌊σ⌋ + 1.

    Exactness of the fast path. V = #{v ≥ 1 : U' < exp(−v·step/t)} for a uniform U' (the
    events are nested, so P(V ≥ v) = exp(−v·step/t)). U' lies in [W, W + 1)/2^32 for its
    first 32-bit word W, and the integer thresholds T_v = ⌊2^32·exp(−v·step/t)⌋ are computed
    exactly once: W < T_v means U' < exp(−v·step/t), W > T_v the opposite, and W = T_v is
    decided by :meth:`_v_given_word`. The test is "U'' < exp(−γ)" for a second uniform
    U'' ∈ [W'', W'' + 1)/2^32, steered by a float p ≈ exp(−γ). The float γ comes from a
    handful of correctly rounded operations on exact inputs, and σ/t < 1 bounds the
    cancellation in G − σ²/t, so it is within 2^-49·(1 + γ) of γ; hence
    |p − exp(−γ)| ≤ |Δγ|·exp(−min γ) + exp's few ulp < 2^-40, far inside _TOL. A word
    within _TOL of p is decided by :meth:`_accept_given_word` with exact integers,
    continuing the same U'' (a conditional decision, not a redraw). So a candidate is
    accepted exactly when U'' < exp(−γ): with probability exp(−γ).
    """

    def __init__(self, var: Fraction) -> None:
        a, b = var.numerator, var.denominator
        t = Fraction(math.isqrt(16 * a // b) + 1, 4)  # ⌊4σ⌋ = ⌊√⌊16σ²⌋⌋
        tn, td = t.numerator, t.denominator
        step = max(tn // (td * _SPLIT), 1)
        super().__init__(step, Fraction(step) / t)  # V's ratio is exp(−step/t)
        # γ = N/D exactly, N = 2ab·tn·td·U + (G·b·tn − a·td)², D = 2ab·tn²
        self.k_u, self.k_g, self.k_0 = 2 * a * b * tn * td, b * tn, a * td
        self.denom = 2 * a * b * tn * tn
        # float guide: γ ≈ (G − centre)²·half_inv_var + U·inv_t (NaN, i.e. every decision
        # exact, for σ² < 2^-256, where the float error bound would need subnormals)
        self.centre = float(Fraction(a * td, b * tn))  # σ²/t
        self.half_inv_var = float(Fraction(b, 2 * a)) if var >= Fraction(1, 1 << 256) else (
            math.nan)
        self.inv_t = float(Fraction(td, tn))

    def draw(self, size: int) -> np.ndarray:
        return _chunked_draw(size, self.candidates)

    def candidates(self, n: int) -> np.ndarray:
        """The accepted values among ``n`` independent candidates (see the class notes)."""
        g = self._geometric(rng._word_view(n, 32))  # V
        u = None
        if self.step > 1:
            u = rng.uniform_below(self.step, n).astype(np.int64)
            g *= self.step
            g += u  # G = U + step·V < 2^62
        gamma = g.astype(np.float64)  # exact below 2^53
        gamma -= self.centre
        gamma *= gamma
        gamma *= self.half_inv_var  # (G − σ²/t)²/(2σ²)
        if u is not None:
            gamma += u * self.inv_t  # + U/t
        p = np.exp(np.negative(gamma, out=gamma), out=gamma)
        p *= 2.0**32  # exp(−γ) in units of the word (exact scaling)
        w = rng._word_view(n, 32)
        diff = w - p  # W − 2^32·p, rounding error ≤ 2^-21
        tol = _TOL * 2.0**32
        keep = diff < -(tol + 1)  # W + 1 ≤ 2^32·exp(−γ): U'' < exp(−γ)
        unsure = np.flatnonzero(~(keep | (diff >= tol)))  # neither settled (NaN included)
        for j in unsure:
            keep[j] = self._accept_given_word(int(w[j]), int(g[j]), 0 if u is None else int(u[j]))
        sign = rng.coins(n)
        keep &= ~(sign & (g == 0))  # −0 is rejected: 0 is as likely as each of ±g
        return np.compress(keep, np.where(sign, -g, g))

    def _accept_given_word(self, word: int, g: int, u: int) -> bool:
        """Whether U'' < exp(−γ) exactly, given U'' ∈ [W, W + 1)/2^32 (γ from G and U)."""
        diff = g * self.k_g - self.k_0
        return _LazyUniform(word, 32).below_exp(self.k_u * u + diff * diff, self.denom)


@functools.lru_cache(maxsize=32)
def _laplace_sampler(t: int, s: int) -> _LaplaceSampler:
    return _LaplaceSampler(t, s)


class _LaplaceSampler(_SteppedGeometric):
    """CKS20 Algorithm 2 for one scale t/s, one 32-bit word per geometric draw.

    Magnitude. Y with P(Y = y) ∝ exp(−y·s/t), y ∈ ℕ, as Y = U + step·V: step a power of two
    with t/(32s) < step ≤ t/(16s) (1 when t < 32s), U uniform on {0, …, step − 1} accepted
    with probability exp(−U·s/t), V with P(V ≥ v) = exp(−v·step·s/t) (the base class).
    P(U = u, accepted)·P(V = v) ∝ exp(−u·s/t)·exp(−v·step·s/t) = exp(−y·s/t), so an
    accepted Y has the geometric law with ratio exp(−s/t): the law of ⌊X/s⌋ in Algorithm 2
    (X ∝ exp(−x/t)). Since U·s/t < 1/16, U is accepted at least 94% of the time.

    Sign. A fair sign S; (S, Y) = (1, 0) is rejected, so ±Y has P(z) ∝ exp(−|z|·s/t) on ℤ,
    the discrete Laplace (Algorithm 2, steps 10–12).

    Exactness of the acceptance test. It is "U'' < exp(−γ)", γ = U·s/t, for a uniform
    U'' ∈ [W, W + 1)/2^32. W < T_1 = ⌊2^32·exp(−step·s/t)⌋ accepts at once, exactly
    (exp(−γ) > exp(−step·s/t)); the rest (< 6%) are steered by a float p ≈ exp(−γ), within
    2^-50 of it (γ < 1/16 from one correctly rounded product), and a word within _TOL of p is
    decided with exact integers by :class:`_LazyUniform`, as in :class:`_GaussianSampler`.
    """

    def __init__(self, t: int, s: int) -> None:
        ratio = t // (2 * _SPLIT * s)  # step ≤ t/(16s) as a power of two, or 1
        step = 1 << ratio.bit_length() if ratio else 1
        super().__init__(step, Fraction(step * s, t))
        self.t, self.s = t, s
        self.inv = float(Fraction(s, t))
        self.first = np.uint32(self.thresholds[0])

    def magnitudes(self, n: int) -> np.ndarray:
        """The accepted magnitudes Y among ``n`` candidates, ``int64``."""
        y = self._geometric(rng._word_view(n, 32))  # V
        if self.step == 1:
            return y
        u = rng.uniform_below(self.step, n)  # a power of two: masked words, no rejection
        y *= self.step
        y += u.astype(np.int64)  # Y = U + step·V < 2^62
        return np.compress(self._accept(u), y)

    def candidates(self, n: int) -> np.ndarray:
        """The accepted discrete Laplace values among ``n`` candidates, ``int64``."""
        y = self.magnitudes(n)
        sign = rng.coins(y.size)
        keep = ~(sign & (y == 0))  # −0 is rejected: 0 is as likely as each of ±y
        np.negative(y, out=y, where=sign)
        return np.compress(keep, y)

    def _accept(self, u: np.ndarray) -> np.ndarray:
        """Bernoulli(exp(−u_i·s/t)) per element, exactly (see the class notes)."""
        w = rng._word_view(u.size, 32)
        keep = w < self.first  # W + 1 ≤ 2^32·exp(−step·s/t) < 2^32·exp(−γ)
        rest = np.flatnonzero(~keep)
        wr, ur = w[rest], u[rest]
        p = ur.astype(np.float64)
        p *= -self.inv
        np.exp(p, out=p)
        p *= 2.0**32  # exp(−γ) in units of the word (exact scaling)
        diff = wr - p
        tol = _TOL * 2.0**32
        ok = diff < -(tol + 1)
        for j in np.flatnonzero(~(ok | (diff >= tol))):  # neither settled: decide exactly
            ok[j] = _LazyUniform(int(wr[j]), 32).below_exp(int(ur[j]) * self.s, self.t)
        keep[rest] = ok
        return keep


class _LazyUniform:
    """A uniform U ∈ [0, 1) known to ``bits`` bits: U ∈ [num, num + 1)/2^bits. Further bits
    are drawn from :mod:`dpkit.core.rng`, 64 at a time, only when a comparison needs them."""

    __slots__ = ("num", "bits")

    def __init__(self, num: int, bits: int) -> None:
        self.num, self.bits = num, bits

    def below_exp(self, n: int, d: int) -> bool:
        """Whether U < exp(−n/d), exactly (n ≥ 0, d ≥ 1).

        U's interval is compared with integer bounds lo ≤ 2^prec·exp(−n/d) ≤ hi, 32 bits
        finer than U's; while they overlap, U gets 64 more bits. Each answer is certain, and
        the loop ends with probability 1 (U has no atoms, and hi − lo stays a few units).
        """
        while True:
            prec = self.bits + 32
            lo, hi = _exp_neg_bounds(n, d, prec)
            if (self.num + 1) << 32 <= lo:  # U < (num + 1)/2^bits ≤ exp(−n/d)
                return True
            if self.num << 32 >= hi:  # U ≥ num/2^bits ≥ exp(−n/d)
                return False
            self.num = (self.num << 64) | int(rng.words(1)[0])
            self.bits += 64


def _exp_neg_bounds(n: int, d: int, prec: int) -> tuple[int, int]:
    """Integers lo ≤ 2^prec·exp(−n/d) ≤ hi, exactly, with hi − lo at most a few units.

    exp(−n/d) = exp(−x)^m with m = ⌈n/d⌉ and x = n/(d·m) ∈ (0, 1]. For x ≤ 1 the terms
    x^i/i! of exp(−x) = Σ (−x)^i/i! never increase, so the partial sums S_j alternate around
    the limit: S_j ≤ exp(−x) for odd j and ≥ for even j. Each term is bounded by integers at
    scale 2^q (floor and ceiling of the previous bound times x/i), the m-th power is taken
    by squaring with floors for the lower bound and ceilings for the upper one: every step
    keeps both bounds valid, and the guard bits of q keep the final gap small.
    """
    one = 1 << prec
    if n == 0:
        return one, one
    m = -(-n // d)
    q = prec + m.bit_length() + 12
    unit, dm = 1 << q, d * m
    t_lo = t_hi = s_lo = s_hi = unit  # bounds on the term x^i/i! and on S_i, here i = 0
    low, i = 0, 0
    while True:
        i += 1
        t_lo = t_lo * n // (dm * i)
        t_hi = -(-t_hi * n // (dm * i))
        if i & 1:
            s_lo, s_hi = s_lo - t_hi, s_hi - t_lo
            low = s_lo  # S_i ≤ exp(−x) for odd i
        else:
            s_lo, s_hi = s_lo + t_lo, s_hi + t_hi
            if t_hi <= 1:  # exp(−x) ≤ S_i ≤ s_hi, within a unit of S_{i−1} ≥ low
                break
    lo, hi = max(low, 0), min(s_hi, unit)
    r_lo = r_hi = unit
    while True:
        if m & 1:
            r_lo, r_hi = r_lo * lo >> q, -(-(r_hi * hi) >> q)
        m >>= 1
        if not m:
            break
        lo, hi = lo * lo >> q, -(-(hi * hi) >> q)
    shift = q - prec
    return r_lo >> shift, -(-r_hi >> shift)


def _floor_exp_neg(n: int, d: int, bits: int) -> int:
    """⌊2^bits·exp(−n/d)⌋ exactly, n > 0 (exp(−n/d) is irrational: some precision decides)."""
    prec = bits + 64
    while True:
        lo, hi = _exp_neg_bounds(n, d, prec)
        if lo >> (prec - bits) == hi >> (prec - bits):
            return lo >> (prec - bits)
        prec *= 2


def _geometric_thresholds(n: int, d: int) -> list[int]:
    """T_v = ⌊2^32·exp(−v·n/d)⌋ for v = 1, 2, … up to the first T_v = 0, exactly.

    Bounds on exp(−v·n/d) at 2^-160 come from powers of those on exp(−n/d) (floors below,
    ceilings above); a floor they do not settle is recomputed by :func:`_floor_exp_neg`.
    """
    q, shift = 160, 128
    r_lo, r_hi = _exp_neg_bounds(n, d, q)
    lo, hi = r_lo, r_hi
    out: list[int] = []
    while True:
        floor = lo >> shift
        if floor != hi >> shift:
            floor = _floor_exp_neg((len(out) + 1) * n, d, 32)
        out.append(floor)
        if floor == 0:
            return out
        lo, hi = lo * r_lo >> q, -(-(hi * r_hi) >> q)


def _bucket_table(ascending: np.ndarray) -> np.ndarray:
    """For each 16-bit prefix h: #{v : T_v > W}, the same for every word W = h·2^16 + r, or
    _ODD when some threshold lies in the bucket [h·2^16, h·2^16 + 2^16)."""
    size = ascending.size
    bottom = np.arange(1 << 16, dtype=np.uint64) << np.uint64(16)
    above = size - np.searchsorted(ascending, bottom + np.uint64(0xFFFF), side="right")
    from_bottom = size - np.searchsorted(ascending, bottom, side="left")
    return np.where(from_bottom > above, _ODD, above).astype(np.uint16)


def grid_exponent(scale: Fraction) -> int:
    """The grid exponent k for a noise scale: 2^k ≤ scale · 2^-30 < 2^(k+1)."""
    floor_log2 = scale.numerator.bit_length() - scale.denominator.bit_length()
    if Fraction(2) ** floor_log2 > scale:
        floor_log2 -= 1
    return floor_log2 - GRID_BITS


def to_grid(x: np.ndarray, k: int) -> np.ndarray:
    """Round floats to the nearest multiple of 2^k, as integers (multiples of 2^k).

    ``ldexp`` by a power of two is exact, and so is ``rint``; values beyond ±2^62 grid steps
    (including ±inf) are clamped there, a 1-Lipschitz map that costs no privacy. For inputs
    whose range is declared (bounded products, say); the mechanisms release user floats with
    :func:`add_on_grid`, which never clamps.
    Raises :class:`DomainError` on NaN.
    """
    arr = np.asarray(x, dtype=np.float64)
    if np.isnan(arr).any():
        raise DomainError("NaN in the input to a noise mechanism; drop or fill it first")
    scaled = np.clip(np.rint(np.ldexp(arr, -k)), -_GRID_LIMIT, _GRID_LIMIT)
    return scaled.astype(np.int64)


def from_grid(z: np.ndarray, k: int) -> np.ndarray:
    """Map grid integers back to floats: z · 2^k."""
    return np.ldexp(z.astype(np.float64), k)


_FAST_BITS = 60  # |x| ≤ 2^(60+k): grid values and their noisy sums fit int64 (and shifts)


def add_on_grid(x: np.ndarray, k: int, noise: np.ndarray, shift: int = 0) -> np.ndarray:
    """Release ``fl((2^shift·⌊x/2^k⌉ + n)·2^(k − shift))`` per coordinate, for every float x.

    ``⌊·⌉`` rounds half to even and ``fl`` to the nearest float (±inf past the largest): the
    output is a post-processing of the exact integer ``2^shift·⌊x/2^k⌉ + n``, so the privacy
    of integer noise ``n`` on the grid value holds for every finite input, nothing is
    clamped, and the accuracy of ``n`` holds for every input (Mironov 2012's grid, without
    a range limit). Coordinates with ``|x| ≤ 2^(60+k)`` (≈ scale·2^30 with the default grid)
    take a vectorised int64 path; larger ones (there x is already a multiple of 2^k) are
    computed exactly with Python integers, one by one. ±inf is read as ±the largest float
    (a 1-Lipschitz map), so the output is finite unless the noise pushes past it.

    Parameters
    ----------
    x : ndarray of float64
        Inputs, no NaN.
    k : int
        Grid exponent.
    noise : ndarray of int64
        Integer noise in units of 2^(k − shift), one per coordinate.
    shift : int
        0 for noise in grid steps; 1 for half steps (the staircase's cell centres).

    Raises
    ------
    DomainError
        On NaN.
    """
    arr = np.asarray(x, dtype=np.float64).reshape(-1)
    noise = np.asarray(noise, dtype=np.int64).reshape(-1)
    if np.isnan(arr).any():
        raise DomainError("NaN in the input to a noise mechanism; drop or fill it first")
    limit = math.ldexp(1.0, _FAST_BITS + k) if _FAST_BITS + k < 1024 else math.inf
    big = ~(np.abs(arr) <= limit)
    z = np.rint(np.ldexp(np.where(big, 0.0, arr), -k)).astype(np.int64)
    out = np.ldexp(((z << np.int64(shift)) + noise).astype(np.float64), k - shift)
    for i in np.flatnonzero(big):
        out[i] = grid_float((grid_int(float(arr[i]), k) << shift) + int(noise[i]), k - shift)
    return out


def grid_int(x: Number, k: int) -> int:
    """``⌊x/2^k⌉`` (half to even) as an exact Python integer, for any finite number;
    ±inf is read as ±the largest float. No clamping."""
    if isinstance(x, float | np.floating) and math.isinf(float(x)):
        x = math.copysign(sys.float_info.max, float(x))
    if isinstance(x, float | np.floating) and float(x) == x:
        p, q = float(x).as_integer_ratio()
    else:
        value = to_fraction(x)
        p, q = value.numerator, value.denominator
    num = p << max(-k, 0)
    den = q << max(k, 0)
    q, r = divmod(num, den)
    if 2 * r > den or (2 * r == den and q & 1):
        q += 1
    return q


def grid_float(z: int, k: int) -> float:
    """``fl(z·2^k)``: the float nearest to the grid value (correctly rounded, as CPython's
    int-to-float conversion and int true division are; ±inf past the largest float)."""
    try:
        return float(z << k) if k >= 0 else z / (1 << -k)
    except OverflowError:
        return math.copysign(math.inf, z)


_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _dyadic(x: Fraction, bits: int = 32) -> tuple[int, int]:
    """(c, b) with x = c / 2^b, b ≤ ``bits`` minimal. Raises DomainError if x is not such a
    dyadic rational in [0, 1]."""
    if not 0 <= x <= 1:
        raise DomainError("a probability must lie in [0, 1]")
    d = x.denominator
    if d & (d - 1) or d.bit_length() - 1 > bits:
        raise DomainError(f"the probability {x} is not a multiple of 2^-{bits}")
    return x.numerator, d.bit_length() - 1


def _random_words(n: int) -> np.ndarray:
    """n uniform uint64 words, a read-only view of :func:`dpkit.core.rng.random_bytes`."""
    return np.frombuffer(rng.random_bytes(8 * n), dtype=np.uint64)


def bernoulli_packed(prob: Fraction, nwords: int) -> np.ndarray:
    """``nwords`` uint64 words whose 64·nwords bits are independent exact Bernoulli(prob)
    draws, ``prob`` a multiple of 2^-32 in [0, 1].

    Bit-sliced: a Bernoulli(c / 2^b) bit is the event W < c for W uniform on
    {0, …, 2^b − 1}. Each of the 64 lanes of a word holds one W, drawn one binary digit at a
    time, most significant first, as one random word per digit; W < c is evaluated
    lane-parallel with two masks (``lt``: decided, W < c; ``eq``: undecided, every digit so
    far equal to c's), and a word stops drawing once none of its lanes is undecided. Every
    lane is an exact, independent Bernoulli(c/2^b) draw; a probability with few significant
    digits (1/2, 3/4) costs one or two random bits per draw.

    Raises
    ------
    DomainError
        If ``prob`` is not a multiple of 2^-32 in [0, 1].
    """
    c, b = _dyadic(Fraction(prob))
    if c == 0:
        return np.zeros(nwords, dtype=np.uint64)
    if c == 1 << b:
        return np.full(nwords, _ONES, dtype=np.uint64)
    digits = [(c >> (b - 1 - j)) & 1 for j in range(b)]
    last = max(j for j, d in enumerate(digits) if d)  # after c's last 1, W < c cannot happen
    lt = np.zeros(nwords, dtype=np.uint64)
    eq = np.full(nwords, _ONES, dtype=np.uint64)
    active: np.ndarray | None = None  # None: every word is still drawing (no indexing)
    for j in range(last + 1):
        r = _random_words(nwords if active is None else active.size)
        below = np.invert(r)  # lanes whose digit is 0
        if digits[j]:
            below &= eq  # undecided lanes with digit 0 < 1: W < c decided
            if active is None:
                lt |= below
            else:
                lt[active] |= below
            eq &= r
        else:
            eq &= below
        count = int(np.count_nonzero(eq))
        if count == eq.size or active is None and count > nwords // 2:
            continue  # dead words have eq = 0 and stay unchanged: keep the dense form
        alive = np.flatnonzero(eq)
        active = alive if active is None else active[alive]
        eq = eq[alive]
        if not active.size:
            break
    return lt
