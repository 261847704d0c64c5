"""Real-valued increments on a grid of width 2^k (the rule of :mod:`dpkit.stream.frames` for
step totals, shared by :class:`~dpkit.stream.Stream` and
:func:`~dpkit.stream.release_prefix_sums` when ``grid_bits`` is given).

A step's real total x is clamped to [lower, upper] and floored to the grid:
n = ⌊x·2^−k⌋ grid steps, k = ⌊log₂ Δ⌋ − ``grid_bits`` (Δ the declared real sensitivity: one
event moves a step's total by at most Δ). The counters sum the integers n exactly. The
rounding is charged to the sensitivity: if one event moves x by at most Δ, it moves n by at
most ⌈Δ·2^−k⌉ (⌊a⌋ − ⌊b⌋ < a − b + 1, an integer), so the counter is calibrated at Δ_grid =
⌈Δ·2^−k⌉ grid steps (≤ 2^grid_bits + 1) and every release is multiplied back by 2^k. The
clamp to [lower, upper] is 1-Lipschitz, so it keeps the bound. Flooring moves each step's
total down by less than 2^k (≤ 2^−grid_bits·Δ). Grid totals are clamped to ±(2^31 − 1) as
integer increments are: with ``grid_bits`` = b a step's total may reach about 2^(31−b)·Δ.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.numbers import Number, integer, positive, to_fraction
from dpkit.errors import DomainError
from dpkit.stream.factorization import MAX_VALUE

__all__ = ["Grid", "floor_log2"]


def floor_log2(x: Fraction) -> int:
    """⌊log₂ x⌋ of a positive rational, exactly."""
    out = x.numerator.bit_length() - x.denominator.bit_length()
    return out - (Fraction(2) ** out > x)


@dataclass(frozen=True)
class Grid:
    """The grid of a real-valued series (module docstring).

    Attributes
    ----------
    k : int
        The grid is 2^k.
    sensitivity : int
        Δ_grid = ⌈Δ·2^−k⌉: the counter's sensitivity, in grid steps (``delta``, deprecated,
        is the same number: in dpkit ``delta`` is δ).
    low, high : int
        The clamp range in grid steps.
    lower, upper : float
        The clamp bounds of a step's total (real).
    """

    k: int
    sensitivity: int
    low: int
    high: int
    lower: float
    upper: float

    @property
    def delta(self) -> int:
        """Deprecated name of :attr:`sensitivity` (``delta`` is δ in dpkit)."""
        warnings.warn("Grid.delta is deprecated: use Grid.sensitivity (delta is δ)",
                      DeprecationWarning, stacklevel=2)
        return self.sensitivity

    @classmethod
    def plan(cls, grid_bits: int, sensitivity: Number, lower: Number, upper: Number) -> Grid:
        """The grid for ``grid_bits`` (0 … 24), a real sensitivity Δ and clamp bounds.

        Raises
        ------
        DomainError
            At plan time: bits out of range, Δ ≤ 0, or bounds not finite and ordered.
        """
        bits = integer(grid_bits, "grid_bits", minimum=0, maximum=24)
        sens = positive(sensitivity, "sensitivity")
        lo, hi = to_fraction(lower), to_fraction(upper)
        if lo > hi:
            raise DomainError(f"lower ({lower}) must be at most upper ({upper})")
        k = floor_log2(sens) - bits
        unit = Fraction(2) ** -k
        low = max(math.floor(lo * unit), -MAX_VALUE)
        high = min(math.floor(hi * unit), MAX_VALUE)
        if low > high:
            raise DomainError("the bounds leave no grid value within ±(2^31 − 1) steps")
        return cls(k, math.ceil(sens * unit), low, high, float(lo), float(hi))

    @property
    def step(self) -> float:
        """2^k as a float (exact)."""
        return 2.0**self.k

    def ints(self, values: Sequence[object] | np.ndarray) -> np.ndarray:
        """Totals in grid steps (int64), vectorised; a non-finite or non-numeric value is
        ``lower`` (the clamp rule of :mod:`dpkit.stream.stream`); never raises."""
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            arr = np.array([_number(v) for v in values], dtype=np.float64)
        arr = np.where(np.isfinite(arr), arr, self.lower)
        scaled = np.floor(np.clip(arr, self.lower, self.upper) * 2.0**-self.k)
        return np.clip(scaled, self.low, self.high).astype(np.int64)

    def one(self, value: Number) -> int:
        """One total in grid steps (as :meth:`ints`)."""
        return int(self.ints(np.array([_number(value)]))[0])


def _number(value: Any) -> float:
    if isinstance(value, bool | np.bool_):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan
