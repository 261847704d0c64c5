"""Exact, vectorised noise samplers (DESIGN.md §3.2).

Every sampler here uses only integer and rational arithmetic on random words from
:mod:`dpkit.core.rng`; no ``exp``, ``log`` or floating-point noise appears in a sampling path.
Each loop of the papers' algorithms runs over NumPy arrays of candidates, so the cost per
value is a few vectorised passes.

Sources
-------
Canonne, Kamath & Steinke (2020), *The Discrete Gaussian for Differential Privacy*,
NeurIPS 2020 / arXiv:2004.00010: Algorithm 1 (Bernoulli(exp(−γ))), Algorithm 2 (discrete
Laplace), Algorithm 3 (discrete Gaussian). Continuous noise is released on a grid of width
2^k (Mironov 2012, *On Significance of the Least Significant Bits for Differential Privacy*;
Haney et al. 2022, *Precision-based attacks and interval refining*): see :func:`to_grid`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpkit.core import rng
from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError

__all__ = [
    "bernoulli",
    "bernoulli_exp",
    "geometric",
    "discrete_laplace",
    "discrete_gaussian",
    "GRID_BITS",
    "grid_exponent",
    "to_grid",
    "from_grid",
    "MAX_NUMERATOR",
    "MAX_DENOMINATOR",
]

MAX_NUMERATOR = 1 << 44  # keeps t·K and U + t·V far inside uint64 in Algorithm 2
MAX_DENOMINATOR = 1 << 32
GRID_BITS = 30  # grid width 2^k ≈ scale · 2^-30: rounding costs ~1e-9 of a scale
_GRID_LIMIT = float(1 << 62)

Bern = Callable[[np.ndarray], np.ndarray]


def bernoulli(p: Number, size: int) -> np.ndarray:
    """Draw ``size`` exact Bernoulli(p) values for a rational ``p`` ∈ [0, 1]."""
    prob = Fraction(p) if not isinstance(p, float) else Fraction(repr(p))
    if not 0 <= prob <= 1:
        raise DomainError(f"p must be in [0, 1], got {p!r}")
    if prob.denominator >= 1 << 64:
        raise DomainError("p's denominator must be below 2**64")
    return rng.bernoulli_rational(prob.numerator, prob.denominator, size)


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


def _accept_exp_ratio(u: np.ndarray, t: int) -> np.ndarray:
    """Bernoulli(exp(−u_i/t)) for integers 0 ≤ u_i < t: Algorithm 1 with steps 1–2 unrolled."""
    res = ~(rng.uniform_below(t, u.size) < u)  # step 1 fails: result 1
    idx = np.flatnonzero(~res)
    uu = u[idx]
    pass2 = (rng.uniform_below(t, idx.size) < uu) & rng.coins(idx.size)  # fails: result 0
    idx, uu = np.compress(pass2, idx), np.compress(pass2, uu)
    if idx.size:
        res[idx] = _bernoulli_exp_fraction(
            idx.size, lambda j: rng.uniform_below(t, j.size) < uu[j], k0=3
        )
    return res


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


def _geometric_batch(t: int, m: int) -> np.ndarray:
    """Up to ``m`` draws of X with P(X = x) ∝ exp(−x/t), x ∈ ℕ (CKS20 Alg. 2, steps 1–9)."""
    u = rng.uniform_below(t, m).astype(np.uint64)
    if t > 1:
        u = np.compress(_accept_exp_ratio(u, t), u)
    return u + np.uint64(t) * _successes_before_failure(u.size)


def _successes_before_failure(n: int) -> np.ndarray:
    """V with P(V ≥ v) = e^{-v}: Bernoulli(exp(−1)) successes before the first failure.

    Small batches draw R = 8 trials per element per round (fewer, larger vectorised passes);
    an element whose R trials all succeed adds R and continues (memorylessness).
    """
    v = np.zeros(n, dtype=np.uint64)
    active = np.arange(n)
    if n > 1 << 15:  # large batches: one trial per element per round
        while active.size:
            active = np.compress(_bernoulli_exp_one(active.size), active)
            v[active] += np.uint64(1)
        return v
    width = 8
    while active.size:
        fails = ~_bernoulli_exp_one(active.size * width).reshape(-1, width)
        first = np.where(fails.any(axis=1), fails.argmax(axis=1), width).astype(np.uint64)
        v[active] += first
        active = np.compress(first == width, active)
    return v


def _fill(size: int, batch: Callable[[int], np.ndarray], rate: float, dtype: type) -> np.ndarray:
    out: np.ndarray = np.empty(size, dtype=dtype)
    filled = 0
    while filled < size:
        need = size - filled
        got = batch(int(need / rate) + 64)
        take = min(got.size, need)
        out[filled : filled + take] = got[:take]
        filled += take
    return out


def geometric(scale: Number, size: int) -> np.ndarray:
    """Draw Y ∈ ℕ with P(Y = y) ∝ exp(−y/scale), exactly, as ``int64``.

    ``scale = t/s`` (lowest terms); X with P(X = x) ∝ exp(−x/t) is drawn by CKS20 Alg. 2
    and Y = ⌊X/s⌋ (the geometric distribution with ratio exp(−s/t)).
    """
    t, s = _check_scale(positive(scale, "scale"))
    return _fill(size, lambda m: _geometric_batch(t, m) // np.uint64(s), 0.55, np.int64)


def discrete_laplace(scale: Number, size: int) -> np.ndarray:
    """Draw ``size`` values of the discrete Laplace distribution, exactly, as ``int64``.

    P(Z = z) ∝ exp(−|z|/scale) for z ∈ ℤ. CKS20 Algorithm 2 with scale = t/s.

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0 or its numerator/denominator exceed 2^44 / 2^32.
    """
    t, s = _check_scale(positive(scale, "scale"))

    def batch(m: int) -> np.ndarray:
        x = _geometric_batch(t, m)
        y = (x if s == 1 else x // np.uint64(s)).view(np.int64)  # values < 2^63
        b = rng.coins(y.size)
        keep = ~(b & (y == 0))
        return np.compress(keep, np.where(b, -y, y))

    # acceptance is 0.53–0.68 by scale; a slightly short first batch and a small second one
    # beat one oversized batch whose surplus is thrown away
    return _fill(size, batch, 0.66, np.int64)


def discrete_gaussian(sigma: Number, size: int) -> np.ndarray:
    """Draw ``size`` values of the discrete Gaussian N_ℤ(0, σ²), exactly, as ``int64``.

    P(Z = z) ∝ exp(−z²/(2σ²)) for z ∈ ℤ. CKS20 Algorithm 3: candidates Y from the discrete
    Laplace with scale t = max(⌊σ⌋, 1), accepted with probability exp(−(|Y| − σ²/t)²/(2σ²)).
    ``sigma`` is the standard deviation parameter σ (σ² is used exactly).
    """
    sig = positive(sigma, "sigma")
    var = sig * sig
    return _discrete_gaussian_var(var, size)


def _discrete_gaussian_var(var: Fraction, size: int) -> np.ndarray:
    a, b = var.numerator, var.denominator
    # Alg. 3 is exact for any t > 0 (the acceptance ratio cancels the Laplace envelope); CKS
    # take ⌊σ⌋ + 1, we take max(⌊σ⌋, 1): as efficient, and a power of two when σ is one
    # (the grid Gaussian's usual case), which uniform_below draws without rejection
    t = max(math.isqrt(a // b), 1)
    denom = 2 * a * b * t * t
    centre_f, var_f = float(Fraction(a, t * b)), float(var)  # σ²/t and σ², huge ints safe

    def batch(m: int) -> np.ndarray:
        y = discrete_laplace(t, m)
        mag = np.abs(y)
        if denom < 1 << 62 and int(mag.max(initial=0)) * t * b + a < 1 << 31:
            diff = mag.astype(np.int64) * (t * b) - a  # small σ: exact in 64-bit words
            return np.compress(bernoulli_exp(diff * diff, denom), y)
        gamma = (mag - centre_f) ** 2 / (2 * var_f)  # ≈ (|Y| − σ²/t)²/(2σ²), error ≪ 1e-9

        def exact(idx: np.ndarray) -> np.ndarray:
            diff = mag[idx].astype(object) * (t * b) - a
            return diff * diff

        return np.compress(_bernoulli_exp_guided(gamma, exact, denom), y)

    return _fill(size, batch, 0.5, np.int64)


_TOL = 1e-9  # far above the float error of γ; decisions this close go to exact integers


def _bernoulli_exp_guided(gamma: np.ndarray, exact: Callable[[np.ndarray], np.ndarray],
                          denom: int) -> np.ndarray:
    """Bernoulli(exp(−γᵢ)), exactly, steered by a float approximation of γ.

    ``gamma`` approximates γᵢ = nᵢ/denom within ``_TOL``, where ``exact(idx)`` returns the
    integer numerators nᵢ (object array). Every decision the float cannot settle with that
    margin — an integer part near an integer, or a uniform draw within ``_TOL`` of the
    fractional part — is made with the exact integers, so the result has exactly the
    Bernoulli(exp(−nᵢ/denom)) law.
    """
    out = np.empty(gamma.size, dtype=bool)
    whole = np.floor(gamma)
    frac = gamma - whole
    risky = (frac < _TOL) | (frac > 1 - _TOL) | ~(gamma < 2.0**50)
    hard = np.flatnonzero(risky)
    if hard.size:
        out[hard] = bernoulli_exp(exact(hard), denom)
    safe = np.flatnonzero(~risky)
    f = frac[safe]

    def bern(idx: np.ndarray) -> np.ndarray:  # Bernoulli(frac) for safe[idx]
        w = rng._word_view(idx.size, 64)
        u = (w >> np.uint64(11)).astype(np.float64) * 2.0**-53  # U ∈ [u, u + 2^-53)
        ff = f[idx]
        res = u + 2.0**-53 < ff - _TOL
        unsure = np.flatnonzero(~res & (u < ff + _TOL))
        if unsure.size:
            nums = exact(safe[idx[unsure]])
            for j, n in zip(unsure, nums, strict=True):  # exact fractional part r/denom
                res[j] = _below_given_word(int(w[j]), int(n) % denom, denom)
        return res

    out[safe] = _bernoulli_exp_fraction(safe.size, bern) & _all_succeed(
        whole[safe].astype(np.int64))
    return out


def grid_exponent(scale: Fraction) -> int:
    """The grid exponent k for a noise scale: 2^k ≤ scale · 2^-30 < 2^(k+1)."""
    floor_log2 = scale.numerator.bit_length() - scale.denominator.bit_length()
    if Fraction(2) ** floor_log2 > scale:
        floor_log2 -= 1
    return floor_log2 - GRID_BITS


def to_grid(x: np.ndarray, k: int) -> np.ndarray:
    """Round floats to the nearest multiple of 2^k, as integers (multiples of 2^k).

    ``ldexp`` by a power of two is exact, and so is ``rint``; values beyond ±2^62 grid steps
    (including ±inf) are clamped there, a 1-Lipschitz map that costs no privacy.
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
