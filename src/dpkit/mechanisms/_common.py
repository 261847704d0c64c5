"""Helpers shared by the noise mechanisms: scale representation, input checks, tails."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.numbers import Number, positive, readable, sqrt_up
from dpkit.core.samplers import MAX_DENOMINATOR, MAX_NUMERATOR, add_on_grid, grid_exponent
from dpkit.errors import DomainError

DEFAULT_MAX_SIZE = 1 << 16
AUDIT_MAX_SIZE = 1 << 20  # the audit draws up to this many outputs in one vector

# input domains shared by the noise mechanisms (vectors of atoms are read flat)
INTEGERS = VectorDomain(AtomDomain(Kind.INTEGER))  # the integer mechanisms: ints and bools
# one value per individual, NaN allowed (robust statistics count it as the lower bound)
VALUES = VectorDomain(AtomDomain(Kind.FLOAT, nan=True))


def floats(max_size: int | None = None) -> VectorDomain:
    """The grid mechanisms' input domain: numbers (NaN excluded, ±inf read as ±the largest
    float), at most ``max_size`` of them."""
    return VectorDomain(AtomDomain(Kind.FLOAT), max_size=max_size)


def representable_scale(scale: Number) -> Fraction:
    """Round a positive scale *up* to a rational the exact samplers accept.

    Scales whose numerator or denominator is too long become the next multiple of a power of
    two 2^j, j ≥ −31, with a numerator of at most ~42 bits (a relative increase below 2^-40
    for scales above 2^-10: more noise, never less).
    """
    value = positive(scale, "scale")
    if value.numerator < MAX_NUMERATOR and value.denominator < MAX_DENOMINATOR:
        return value
    step = Fraction(2) ** max(grid_exponent(value) + 30 - 41, -31)
    rounded = math.ceil(value / step) * step
    if rounded.numerator >= MAX_NUMERATOR or rounded.denominator >= MAX_DENOMINATOR:
        raise DomainError(f"scale {readable(value)} is outside the range of the exact samplers; "
                          "rescale the values (a larger ε or a smaller sensitivity)")
    return rounded


def as_vector(x: Any, *, integer: bool) -> tuple[np.ndarray, bool]:
    """Validate a mechanism input; return (1-D array, was_scalar)."""
    arr = np.asarray(x)
    scalar = arr.ndim == 0
    arr = arr.reshape(-1)
    if integer:
        if arr.dtype.kind not in "iub":
            raise DomainError(
                f"this mechanism takes integers, got dtype {arr.dtype}; use the grid "
                "(continuous) variant for floats"
            )
        if arr.dtype == np.uint64 and arr.size and int(arr.max()) > _INT64_MAX:
            return arr.astype(object), scalar  # exact Python ints (add_integer_noise)
        return arr.astype(np.int64), scalar
    if arr.dtype.kind not in "iufb":
        raise DomainError(f"this mechanism takes numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if np.isnan(arr).any():
        raise DomainError("NaN in the input; drop or fill it before adding noise")
    return arr, scalar


_INT64_MAX = (1 << 63) - 1
_SAFE = 1 << 62  # |x| ≤ 2^62: x + noise cannot leave int64 (noise below 2^62 by far)


def add_integer_noise(arr: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """``arr + noise`` as int64, never wrapping: inputs beyond ±2^62 (rare) are added as
    exact Python integers and the sum saturates at the int64 range (post-processing)."""
    if arr.dtype != object and (not arr.size or -_SAFE <= int(arr.min()) <= int(arr.max())
                                <= _SAFE):
        return arr + noise
    exact = arr.astype(object) + noise.astype(object)
    return np.array([min(max(int(v), -_INT64_MAX - 1), _INT64_MAX) for v in exact],
                    dtype=np.int64)


def unwrap(out: np.ndarray, scalar: bool) -> Any:
    return out[0].item() if scalar else out


def grid_relaxation(k: int, size: int, norm: str) -> Fraction:
    """Extra sensitivity from rounding each of ``size`` coordinates to the 2^k grid."""
    g = Fraction(2) ** k
    return g * size if norm == "l1" else g * sqrt_up(Fraction(size))


def check_size(arr: np.ndarray, max_size: int) -> None:
    if arr.size > max_size:
        raise DomainError(f"input has {arr.size} coordinates; this mechanism accepts at most "
                          f"max_size={max_size}")


def grid_steps(scale: Number, k: int | None = None) -> tuple[int, int]:
    """``(k, steps)``: the grid exponent (default ⌊log₂ s⌋ − 30 of ``scale`` rounded up by
    :func:`representable_scale`) and the scale rounded *up* to a whole number of grid steps
    2^k — the effective scale of a grid mechanism is ``steps · 2^k``."""
    s0 = representable_scale(scale)
    kk = grid_exponent(s0) if k is None else int(k)
    return kk, math.ceil(s0 / Fraction(2) ** kk)


def make_grid_release(scale: Number, k: int | None, max_size: int,
                      noise: Callable[[int, int], np.ndarray]
                      ) -> tuple[Callable[[Any], Any], int, Fraction, Fraction]:
    """The data side shared by the grid (continuous) mechanisms.

    Rounds ``scale`` up to an integer number of grid steps 2^k (k defaults to
    ⌊log₂ scale⌋ − 30) and returns ``(function, k, effective scale, grid width)``; ``function``
    rounds each input to the grid, adds ``noise(steps, n)`` (integer noise in grid units) and
    maps back to the nearest floats (:func:`dpkit.core.samplers.add_on_grid`: exact for every
    finite input, nothing clamped; ±inf is read as ±the largest float).
    """
    kk, steps = grid_steps(scale, k)
    grid = Fraction(2) ** kk

    def function(x: Any) -> Any:
        arr, scalar = as_vector(x, integer=False)
        check_size(arr, max_size)
        return unwrap(add_on_grid(arr, kk, noise(steps, arr.size)), scalar)

    return function, kk, steps * grid, grid
