"""The square-root factorisation counter (Fichtenberger, Henzinger & Upadhyay 2023, *Constant
matters: fine-grained error bound on differentially private continual observation*, ICML
2023, Thm 1; Henzinger, Upadhyay & Upadhyay 2023, *Almost tight error bounds on
differentially private continual counting*, SODA 2023, Thm 1).

The prefix-sum matrix A (lower-triangular ones) is C·C with C lower-triangular Toeplitz,
C_{t,i} = c_{t−i}, c_m = C(2m, m)/4^m, the Taylor coefficients of (1 − x)^(−1/2). The
mechanism releases R·x + z and outputs A·R⁻¹·(R·x + z) = A·x + A·R⁻¹·z with R ≈ C.

Where the noise enters (exact sampling). Adding integer noise to the real vector C·x, or
outputting A·x + C·z for an integer z, would not be private: both put the outputs of
neighbouring streams on different shifted lattices (C·(x − x') is not an integer vector), and
the fractional parts of C⁻¹·output tell them apart. So R is an *integer* matrix: R = C̃ with
c̃_m = round(c_m·2^P), P chosen so that no int64 sum can overflow (|x_t| ≤ 2^31 − 1). R·x is
computed exactly in integers and the discrete Gaussian is added to it exactly (CKS20). The
privacy map is that of R's exact integer column norm: c₂² = Σ_m c̃_m² (the first column is the
longest), so the stream is ρ-zCDP at σ = w'·Δ·√(Σ c̃_m²)/√(2ρ) (:mod:`.base`). A·R⁻¹ is then
applied in floating point: post-processing, which touches accuracy only. (Pure ε is not
offered: the L1 column norm grows like √T.)

Error. With g the coefficients of A·R⁻¹ (the series of 1/((1 − x)·c̃(x))), the error at t is
Σ_{i<t} g_i·z_{t−i}: Var_t = v·Σ_{i<t} g_i². With g ≈ c/2^P and v ≈ 2^(2P)·Σ_{m<T} c_m²/(2ρ)
this is the real-valued factorisation's (Σ_{m<T} c_m²)·(Σ_{m<t} c_m²)/(2ρ)·(w'Δ)², where
Σ_{m<T} c_m² = ln(T)/π + O(1) (FHU23; HUU23): the best known constant for continual counting
under zCDP. The integer rounding costs nothing visible (equal to 4 digits at T = 365 and
10^4: bench/stream.py).

Cost. R·x is an exact integer convolution (:func:`exact_convolve`: 8-bit limbs through a
float64 FFT, exact by Percival's error bound with a wide margin), O(T log T): horizons up to
2^21. A stream keeps its history: O(T) memory and O(t) time per step (exact int64 dot
products) — inherent to this factorisation.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import scipy.fft as sfft

from dpkit.errors import DomainError
from dpkit.stream.base import Budget, Counter, Unit, check_horizon

__all__ = ["SqrtFactorization", "sqrt_coefficients", "exact_convolve", "MAX_VALUE",
           "MAX_FACTOR_HORIZON"]

MAX_VALUE = (1 << 31) - 1  # increments are clamped to |x| ≤ this (:mod:`dpkit.stream.stream`)
MAX_FACTOR_HORIZON = 1 << 21


def sqrt_coefficients(n: int) -> np.ndarray:
    """c_0 … c_{n−1}: C(2m, m)/4^m, the coefficients of (1 − x)^(−1/2) (float64)."""
    m = np.arange(1, n, dtype=np.float64)
    return np.concatenate([[1.0], np.cumprod((2 * m - 1) / (2 * m))])


def _convolve(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    size = 1 << max(1, (a.shape[-1] + len(b) - 1).bit_length())
    return np.asarray(sfft.irfft(sfft.rfft(a, size) * sfft.rfft(b, size), size)[..., :n])


_LIMB = 8  # bits per limb of the exact convolution
_OFFSET = 1 << 31  # x + 2^31 ≥ 0 for |x| ≤ 2^31 − 1


def exact_convolve(x: np.ndarray, coef: np.ndarray, n: int,
                   cache: dict[int, list[np.ndarray]] | None = None) -> np.ndarray:
    """The first n terms of the convolution of int64 ``x`` (|x| ≤ 2^31 − 1) with int64
    ``coef`` (0 ≤ coef < 2^24), exactly, when the result fits in int64.

    Short inputs: ``numpy.convolve`` on int64 (exact). Long ones: x + 2^31 and ``coef`` are
    split into 8-bit limbs (4 and 3), each limb product is a convolution of non-negative
    integers below 2^8 computed by a float64 FFT and rounded; partial sums with the same shift
    (at most 3 products) stay below 3·n·2^16 < 2^53. The FFT's error is at most
    ‖a‖₂‖b‖₂·((1 + u)^(3m)(1 + u√5)^(3m+1)(1 + β)^(3m) − 1) for size 2^m (Percival 2003,
    *Rapid multiplication modulo the sum and difference of highly composite numbers*, Math.
    Comp. 72, Thm 5.1; u = 2^-53, β the twiddles' error): for ‖a‖₂‖b‖₂ ≤ 3·2^37 and m ≤ 22
    below 2^-6, so rounding each part to the nearest integer is exact with a margin of 30×.
    (scipy's pocketfft is a mixed-radix FFT with accurately computed twiddles; the bound is
    the radix-2 one.) The offset is then removed exactly: Σ_{i≤t} coef_{t−i}·2^31.
    ``cache`` keeps the coefficient limbs' spectra by FFT size (public values).
    """
    x = np.asarray(x, dtype=np.int64)[:n]
    coef = np.asarray(coef, dtype=np.int64)[:n]
    if n <= 4096:
        return np.convolve(x, coef)[:n]
    size = 1 << (2 * n - 1).bit_length()
    mask = (1 << _LIMB) - 1
    cs = None if cache is None else cache.get(size)
    if cs is None or len(cs[0]) != size // 2 + 1:
        cs = [sfft.rfft(((coef >> (_LIMB * j)) & mask).astype(np.float64), size)
              for j in range(3)]
        if cache is not None:
            cache[size] = cs
    shifted = x + _OFFSET
    xs = [sfft.rfft(((shifted >> (_LIMB * i)) & mask).astype(np.float64), size)
          for i in range(4)]
    total = np.zeros(n, dtype=np.int64)
    for shift in range(6):
        spec = sum(xs[i] * cs[shift - i] for i in range(4) if 0 <= shift - i < 3)
        part = np.rint(sfft.irfft(spec, size)[:n]).astype(np.int64)
        total += part << (_LIMB * shift)
    return total - _OFFSET * np.cumsum(coef)


def _series_inverse(a: np.ndarray, n: int) -> np.ndarray:
    """The first n coefficients of 1/a(x) (Newton's iteration; floating point)."""
    inv = np.array([1.0 / a[0]])
    m = 1
    while m < n:
        m = min(2 * m, n)
        corr = -_convolve(a[:m], inv, m)
        corr[0] += 2.0
        inv = _convolve(inv, corr, m)
    return inv[:n]


@functools.lru_cache(maxsize=4)
def _plan(horizon: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                 dict[int, list[np.ndarray]]]:
    """R's integer coefficients, A·R⁻¹'s, and a cache of R's limb spectra, for a horizon
    (public values; the four most recent horizons are kept)."""
    c = sqrt_coefficients(horizon)
    # every sum Σ coef·(x + 2^31) stays below 2^61 (exact_convolve), and coef < 2^24
    room = 61 - 32 - math.ceil(math.log2(c.sum() * 1.01 + 1))
    bits = max(8, min(23, room))
    coef = np.round(c * 2.0**bits).astype(np.int64)
    g = np.cumsum(_series_inverse(coef.astype(np.float64), horizon))  # A·R⁻¹
    for a in (coef, g):
        a.setflags(write=False)
    return bits, coef, g, np.cumsum(g**2), np.maximum.accumulate(np.abs(g)), {}


class SqrtFactorization(Counter):
    """The square-root factorisation counter with exact discrete Gaussian noise (module
    docstring)."""

    name = "factorization"

    def __init__(self, horizon: int | None, unit: Unit, budget: Budget) -> None:
        if horizon is None:
            raise DomainError("factorization needs a horizon")
        horizon = check_horizon(horizon)
        if not budget.gaussian:
            raise DomainError("factorization takes a rho= budget (Gaussian noise)")
        if horizon > MAX_FACTOR_HORIZON:
            raise DomainError(f"factorization supports horizons up to {MAX_FACTOR_HORIZON} "
                              "(the exact convolution's error bound)")
        self.bits, self.coef, self.g, self._sq, self._amax, self._spectra = _plan(horizon)
        super().__init__(horizon, unit, budget)

    def _norms(self) -> tuple[int, int]:
        # exact: Python ints for the 64 leading terms; beyond them c̃_m < 2^23·c_64 < 2^20,
        # squares < 2^40, at most 2^21 of them: the int64 sum stays below 2^61
        head = self.coef[:64]
        tail = self.coef[64:]
        l2 = sum(int(v) * int(v) for v in head) + int(np.sum(tail * tail, dtype=np.int64))
        return int(np.sum(self.coef, dtype=np.int64)), l2

    def weights(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = np.asarray(t, dtype=np.int64)
        return self._sq[t - 1], self._amax[t - 1]

    def window_terms(self, t: int, u: int) -> list[tuple[float, Any, float]]:
        """e_t = Σ_k g_k z_{t−k}: the window's coefficients are g_0 … g_{t−u−1} on the newest
        t − u noises and g_{k} − g_{k−(t−u)} on the older ones."""
        g = self.g
        a = np.concatenate([g[:t - u], g[t - u:t] - g[:u]])
        return [(float(np.sum(a * a)), self.noise, float(np.max(np.abs(a))))]

    def release(self, x: np.ndarray) -> np.ndarray:
        return self.release_many(x, 1)[0]

    def release_many(self, x: np.ndarray, copies: int) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        n = len(x)
        u = exact_convolve(x, self.coef, n, self._spectra)  # R·x, exact (no overflow: bits)
        # the private release (each row): everything below reads only it
        noisy = u + self._noise(int(copies) * n).reshape(int(copies), n)
        return _convolve(noisy.astype(np.float64), self.g[:n], n)  # A·R⁻¹·(R·x + z)

    def start(self) -> dict[str, Any]:
        return {"t": 0, "x": [], "noisy": []}

    def step(self, state: dict[str, Any], x: int) -> float:
        state["t"] = t = state["t"] + 1
        state["x"].append(int(x))
        past = np.array(state["x"], dtype=np.int64)
        u = int(np.dot(self.coef[:t][::-1], past))  # (R·x)_t, exact
        state["noisy"].append(u + int(self._noise(1)[0]))
        noisy = np.array(state["noisy"], dtype=np.float64)
        return float(np.dot(self.g[:t][::-1], noisy))
