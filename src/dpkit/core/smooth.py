"""β-smooth upper bounds on local sensitivity (Nissim, Raskhodnikova & Smith 2007, §2–3).

A function S is a β-smooth upper bound on the local sensitivity LS_f if LS_f(x) ≤ S(x) and
S(x) ≤ e^β·S(y) for neighbours x, y (NRS07 Def. 2.1). For order statistics and trimmed
means of n values clamped to [L, U] (sorted x₁ ≤ … ≤ xₙ, padded x_i = L for i < 1 and
x_i = U for i > n, substitution neighbours),

    A_k(x) = max_{0 ≤ ℓ ≤ k+1} (x_{a+k−ℓ} − x_{b−ℓ}) / w

bounds the local sensitivity of every dataset within k substitutions of x: the median
x_m has a = m + 1, b = m, w = 1 (NRS07 Prop. 3.4); the t-trimmed mean has a = n − t + 1,
b = t + 1, w = n − 2t (Bun & Steinke 2019, *Average-Case Averages*, §3: k substitutions move
j values to the top and k − j to the bottom). A_k(x) ≤ A_{k+1}(y) for neighbours: if the
changed value moved up, y_{i−1} ≤ x_i ≤ y_i, so x_{a+k−ℓ} − x_{b−ℓ} ≤ y_{a+k−ℓ} − y_{b−ℓ−1},
a window of A_{k+1}(y) (ℓ + 1); if it moved down, x_{a+k−ℓ} − x_{b−ℓ} ≤ y_{a+k+1−ℓ} − y_{b−ℓ}
(ℓ). Hence S(x) = max_{k ≥ 0} r^k·A_k(x) with a rational r ≥ e^{−β} is β-smooth (NRS07
Prop. 3.3: S(x) ≤ r^{−1}·S(y)). A_k is non-decreasing in k and equals U − L once k ≥ n.

:func:`smooth_upper_bound` returns S̃ with S ≤ S̃ ≤ (1 + 2^-100)·S, computed exactly in
rationals (r^k rounded up at 128 bits); S̃ is then (β + 2^-99)-smooth. Floats only choose
which k to evaluate exactly (a branch-and-bound over k using that A_k is monotone).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpkit.core.numbers import dyadic_up, exp_up
from dpkit.errors import DomainError

__all__ = ["smooth_upper_bound", "SMOOTH_SLACK"]

SMOOTH_SLACK = Fraction(1, 1 << 99)  # extra smoothness from rounding S up (see above)
_PRECISION = 128  # significant bits kept when rounding r^k up
_TOL = 1e-9  # float candidates within this (log scale) of the best are compared exactly


def smooth_upper_bound(values: np.ndarray, a: int, b: int, width: int,
                       bounds: tuple[Fraction, Fraction], beta: Fraction) -> Fraction:
    """S̃(x) ≥ max_k e^{−kβ}·A_k(x), a (β + 2^-99)-smooth bound on local sensitivity.

    Parameters
    ----------
    values : ndarray of shape (n,)
        Sorted float values inside ``bounds``.
    a, b : int
        1-based window ends (see the module docstring).
    width : int
        The divisor w ≥ 1.
    bounds : (L, U)
        The declared range, used as padding.
    beta : Fraction
        β > 0.

    Returns
    -------
    Fraction
        S̃ with max_k r^k·A_k ≤ S̃ ≤ (1 + 2^-100)·max_k r^k·A_k, r = e^{−β} rounded up.

    Raises
    ------
    DomainError
        If β ≤ 0, the width is < 1, or the values are empty.
    """
    if beta <= 0 or width < 1 or values.size == 0:
        raise DomainError("smooth_upper_bound needs β > 0, width ≥ 1 and n ≥ 1 values")
    lo, hi = bounds
    ratio = dyadic_up(exp_up(-beta), 64)
    n = values.size
    padded = np.concatenate([np.full(n + 3, float(lo)), values, np.full(2 * n + 6, float(hi))])
    windows = _Windows(padded, n + 2, a, b)
    candidates = _candidate_ks(windows, math.log(float(ratio)), n + 1)

    def at(i: int) -> Fraction:
        return lo if i < 1 else hi if i > n else Fraction(float(values[i - 1]))

    best = Fraction(0)
    for k in candidates:
        window = max(at(a + k - ell) - at(b - ell) for ell in map(int, windows.near_max(k)))
        best = max(best, _pow_up(ratio, k) * window)
    return best / width


class _Windows:
    """Float A_k·w values, memoised (``offset`` maps 1-based index i to padded[offset + i])."""

    def __init__(self, padded: np.ndarray, offset: int, a: int, b: int) -> None:
        self.padded, self.offset, self.a, self.b = padded, offset, a, b
        self.cache: dict[int, float] = {}

    def diffs(self, k: int) -> np.ndarray:
        ell = np.arange(k + 2)
        return self.padded[self.offset + self.a + k - ell] - self.padded[self.offset + self.b - ell]

    def near_max(self, k: int) -> np.ndarray:
        """The ℓ whose float difference could be the exact maximum (a float difference of
        two floats is within a relative 2^-53 of the exact one)."""
        d = self.diffs(k)
        return np.flatnonzero(d >= d.max() * (1 - 2.0**-50))

    def log_term(self, k: int, log_r: float) -> float:
        if k not in self.cache:
            self.cache[k] = float(self.diffs(k).max())
        value = self.cache[k]
        return k * log_r + math.log(value) if value > 0 else -math.inf


def _candidate_ks(windows: _Windows, log_r: float, k_max: int) -> list[int]:
    """Every k ≤ k_max whose float term is within _TOL of the largest (terms beyond k_max
    are smaller: A_k is constant there and r < 1). Blocks [k1, k2] are skipped when their
    bound r^{k1}·A_{k2} (A is non-decreasing) is clearly below the best term found."""
    best = max(windows.log_term(0, log_r), windows.log_term(k_max, log_r))
    stack = [(0, k_max)]
    while stack:
        k1, k2 = stack.pop()
        if k2 - k1 <= 1:
            continue
        bound = windows.log_term(k2, log_r) - (k2 - k1) * log_r  # log(r^{k1}·A_{k2})
        if bound < best - _TOL:
            continue
        mid = (k1 + k2) // 2
        best = max(best, windows.log_term(mid, log_r))
        stack += [(k1, mid), (mid, k2)]
    return [k for k in windows.cache if windows.log_term(k, log_r) >= best - _TOL]


def _pow_up(r: Fraction, k: int) -> Fraction:
    """A rational ≥ r^k, within a factor (1 + 2^-120) of it for k < 2^64 (rounding up at
    128 significant bits after each of at most 128 multiplications)."""
    result, base = Fraction(1), r
    while k:
        if k & 1:
            result = _round_up(result * base)
        base = _round_up(base * base)
        k >>= 1
    return result


def _round_up(x: Fraction) -> Fraction:
    shift = _PRECISION - (x.numerator.bit_length() - x.denominator.bit_length())
    scaled = Fraction(x.numerator << max(shift, 0), x.denominator << max(-shift, 0))
    return Fraction(math.ceil(scaled)) / Fraction(2) ** shift
