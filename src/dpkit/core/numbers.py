"""Exact numbers for privacy arithmetic (DESIGN.md §3.3).

ε, δ, ρ, noise scales and sensitivities are :class:`fractions.Fraction`. Every conversion
that cannot be exact says which way it rounds: ``*_up`` never returns less than the true
value, ``*_down`` never more. A privacy loss or a sensitivity is rounded up, a budget cap
down, a noise scale up.

User floats. A float is a dyadic rational; the number a user typed (``0.1``) is the shortest
decimal that prints as that float. The two differ by less than one unit in the last place;
:func:`fraction_up` takes the larger of the two and :func:`fraction_down` the smaller, so a
conversion is conservative whichever the user meant.

Accepted types. Every parameter that takes a number goes through :func:`_candidates`: Python
``int``, ``float``, :class:`~fractions.Fraction` (any :class:`numbers.Rational`),
:class:`decimal.Decimal`, and NumPy scalars (``np.int8`` … ``np.uint64``, ``np.float16`` …
``np.float64``, ``np.longdouble``). A NumPy integer is its Python ``int``; a NumPy float is
read as the Python float of the same value (exact for float16/32/64), so it converts exactly
as that float does; a ``longdouble`` with more precision than a float is taken at its exact
binary value. Booleans (``bool``, ``np.bool_``), strings, NaN and infinities are refused with
:class:`~dpkit.errors.DomainError`. :func:`to_fraction` is the exact value, for parameters
whose rounding direction does not matter (shares of a budget, orders, weights).

Numbers for people. :func:`readable` is the one decimal text of an exact value (a loss, a
budget, a parameter) that dpkit prints, :func:`shown` the float of that text (a JSON value),
and :func:`exact_text` the short exact form (a terminating decimal, else ``p/q``): every
front end shows ``readable`` and keeps the exact rational in a separate field for auditors.
"""

from __future__ import annotations

import decimal
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from numbers import Rational

import numpy as np

from dpkit.errors import DomainError

__all__ = [
    "Number",
    "Numbers",
    "fraction_up",
    "fraction_down",
    "exact",
    "to_fraction",
    "as_typed",
    "integer",
    "positive",
    "non_negative",
    "float_up",
    "float_down",
    "exp_up",
    "exp_down",
    "log_up",
    "log_down",
    "sqrt_up",
    "sqrt_down",
    "dyadic_up",
    "SHOWN_DIGITS",
    "readable",
    "shown",
    "is_shown_exactly",
    "exact_text",
    "ExactNumbers",
]

Number = int | float | Fraction | decimal.Decimal | np.integer | np.floating
Numbers = Sequence[Number] | np.ndarray  # a vector of numbers: scores, counts, values

_DIGITS = 50
_SLACK = Fraction(1, 10**45)  # relative margin far above decimal's rounding error at 50 digits


def _float_candidates(x: float) -> tuple[Fraction, Fraction]:
    if not math.isfinite(x):
        raise DomainError(f"expected a finite number, got {x!r}")
    return Fraction(x), Fraction(repr(x))


def _candidates(x: object) -> tuple[Fraction, Fraction]:
    """The binary value and the decimal the user typed (equal unless ``x`` is a float)."""
    if isinstance(x, bool | np.bool_):
        raise DomainError("booleans are not numbers here")
    if isinstance(x, np.floating):  # np.float64 is also a float: read it as one
        value = float(x)
        if not math.isfinite(value) or Fraction(value) == Fraction(*x.as_integer_ratio()):
            return _float_candidates(value)
        exact_value = Fraction(*x.as_integer_ratio())  # a longdouble finer than a float
        return exact_value, exact_value
    if isinstance(x, float):
        return _float_candidates(x)
    if isinstance(x, np.integer):
        f = Fraction(int(x))
        return f, f
    if isinstance(x, Rational | int):
        f = Fraction(x)
        return f, f
    if isinstance(x, decimal.Decimal):
        if not x.is_finite():
            raise DomainError(f"expected a finite number, got {x!r}")
        f = Fraction(x)
        return f, f
    raise DomainError(f"expected a number, got {type(x).__name__}")


def fraction_up(x: Number) -> Fraction:
    """Exact rational ≥ both the float's binary value and the decimal the user typed."""
    return max(_candidates(x))


def fraction_down(x: Number) -> Fraction:
    """Exact rational ≤ both the float's binary value and the decimal the user typed."""
    return min(_candidates(x))


def exact(x: Number) -> Fraction:
    """Exact value of an int, Fraction or Decimal; raises for floats that are not exact ints."""
    lo, hi = _candidates(x)
    if lo != hi:
        raise DomainError(f"{x!r} has no exact rational value; pass a Fraction or an int")
    return lo


def to_fraction(x: object) -> Fraction:
    """The exact value of a number (a float's binary value), for parameters whose rounding
    direction does not matter. Refuses what :func:`fraction_up` refuses."""
    if type(x) is float and math.isfinite(x):  # the common case, without the decimal reading
        return Fraction(x)
    return _candidates(x)[0]


def as_typed(x: object) -> Fraction:
    """The number as the user typed it: a float's shortest decimal (``0.1`` → 1/10), any
    other number's exact value. For parameters such as a probability or a quantile level,
    where neither rounding direction is the conservative one."""
    return _candidates(x)[1]


def integer(x: object, name: str, *, minimum: int | None = None,
            maximum: int | None = None) -> int:
    """An integer parameter (``int`` or a NumPy integer; not a bool, not a float) as a Python
    ``int``, checked against ``[minimum, maximum]``.

    Raises
    ------
    DomainError
        For another type or a value out of range (the message names ``name``).
    """
    if isinstance(x, bool | np.bool_) or not isinstance(x, int | np.integer):
        raise DomainError(f"{name} must be an integer, got {x!r}")
    value = int(x)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "" if minimum is None else f" ≥ {minimum}"
        high = "" if maximum is None else f" ≤ {maximum}"
        raise DomainError(f"{name} must be an integer{low}{' and' if low and high else ''}"
                          f"{high}, got {x!r}")
    return value


def positive(x: Number, name: str, *, up: bool = True) -> Fraction:
    """Convert ``x`` (rounding up or down) and check that it is > 0."""
    value = fraction_up(x) if up else fraction_down(x)
    if value <= 0:
        raise DomainError(f"{name} must be > 0, got {x!r}")
    return value


def non_negative(x: Number, name: str, *, up: bool = True) -> Fraction:
    """Convert ``x`` (rounding up or down) and check that it is ≥ 0."""
    value = fraction_up(x) if up else fraction_down(x)
    if value < 0:
        raise DomainError(f"{name} must be ≥ 0, got {x!r}")
    return value


def float_up(x: Fraction) -> float:
    """Smallest float ≥ ``x``."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def float_down(x: Fraction) -> float:
    """Largest float ≤ ``x``."""
    f = float(x)
    return f if Fraction(f) <= x else math.nextafter(f, -math.inf)


def _context(digits: int = _DIGITS) -> decimal.Context:
    return decimal.Context(prec=digits, Emax=10**6, Emin=-(10**6))


def _dec(x: Fraction, ctx: decimal.Context) -> decimal.Decimal:
    return ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))


def _widen(approx: decimal.Decimal, up: bool, digits: int) -> Fraction:
    f = Fraction(approx)
    # decimal rounds each operation correctly; 10^(5−digits) relative is far above that
    margin = abs(f) * _SLACK * Fraction(10) ** (_DIGITS - digits) + Fraction(1, 10**(digits * 4))
    return f + margin if up else f - margin


def _directed(x: Fraction, op: str, up: bool, digits: int = _DIGITS) -> Fraction:
    """op(x) ∈ {exp, ln, sqrt} at ``digits`` digits, widened to a certified bound."""
    ctx = _context(digits)
    value = _widen(getattr(_dec(x, ctx), op)(ctx), up, digits)
    return value if up or op == "ln" else max(Fraction(0), value)


def exp_up(x: Fraction, digits: int = _DIGITS) -> Fraction:
    """A rational ≥ e^x (``digits`` significant digits of working precision)."""
    return _directed(x, "exp", True, digits)


def exp_down(x: Fraction, digits: int = _DIGITS) -> Fraction:
    """A rational ≤ e^x (and ≥ 0)."""
    return _directed(x, "exp", False, digits)


def log_up(x: Fraction) -> Fraction:
    """A rational ≥ ln x, for x > 0."""
    if x <= 0:
        raise DomainError("log of a non-positive number")
    return _directed(x, "ln", True)


def log_down(x: Fraction) -> Fraction:
    """A rational ≤ ln x, for x > 0."""
    if x <= 0:
        raise DomainError("log of a non-positive number")
    return _directed(x, "ln", False)


def sqrt_up(x: Fraction) -> Fraction:
    """A rational ≥ √x (exact when x is the square of a rational)."""
    return _sqrt(x, True)


def sqrt_down(x: Fraction) -> Fraction:
    """A rational ≤ √x (exact when x is the square of a rational)."""
    return _sqrt(x, False)


def _sqrt(x: Fraction, up: bool) -> Fraction:
    if x < 0:
        raise DomainError("sqrt of a negative number")
    root = _exact_sqrt(x)
    return root if root is not None else _directed(x, "sqrt", up)


def _exact_sqrt(x: Fraction) -> Fraction | None:
    n, d = math.isqrt(x.numerator), math.isqrt(x.denominator)
    if n * n == x.numerator and d * d == x.denominator:
        return Fraction(n, d)
    return None


def dyadic_up(x: Fraction, bits: int) -> Fraction:
    """Smallest multiple of 2^-bits that is ≥ x (a short representation, rounded up)."""
    scale = 1 << bits
    return Fraction(-((-x.numerator * scale) // x.denominator), scale)


SHOWN_DIGITS = 6  # significant digits a person reads; the exact value is printed beside


def readable(x: Number, digits: int = SHOWN_DIGITS) -> str:
    """The decimal text of ``x`` for people: ``digits`` significant digits, rounded to
    nearest (``1/10`` → ``"0.1"``, ``0.09999999999845…`` → ``"0.1"``, ``1/3`` →
    ``"0.333333"``, ``1/10**6`` → ``"1e-06"``).

    Parameters
    ----------
    x : number
        Any number :func:`to_fraction` takes (a float at its binary value).
    digits : int
        Significant digits, ≥ 1.

    Returns
    -------
    str
        Python's ``g`` format of the nearest float; :func:`is_shown_exactly` says whether it
        equals ``x``. Beyond the floats' normal range (|x| > the largest float, or
        0 < |x| < 2^-1022, where a float would overflow or lose digits) the same format of
        the exact value, correctly rounded in decimal (``2^1074`` → ``"2.02402e+323"``).

    Raises
    ------
    DomainError
        For what :func:`to_fraction` refuses.
    """
    value = to_fraction(x)
    if value == 0 or _FLOAT_TINY <= abs(value) <= _FLOAT_MAX:
        return f"{float(value):.{digits}g}"
    return _readable_decimal(value, digits)


_FLOAT_MAX = Fraction(sys.float_info.max)
_FLOAT_TINY = Fraction(2) ** -1022  # the smallest normal float


def _readable_decimal(value: Fraction, digits: int) -> str:
    """``g`` text of a value outside the normal floats, from a decimal division correctly
    rounded to ``digits`` significant digits (half to even, as the float path)."""
    ctx = decimal.Context(prec=digits, rounding=decimal.ROUND_HALF_EVEN,
                          Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    d = ctx.divide(decimal.Decimal(value.numerator), decimal.Decimal(value.denominator))
    mantissa, exponent = f"{d:.{digits - 1}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent):+03d}"


def shown(x: Number, digits: int = SHOWN_DIGITS) -> float:
    """The float of :func:`readable` (``0.09999999999845…`` → ``0.1``): a JSON value for
    people; never an input to privacy arithmetic (that is the exact value)."""
    return float(readable(x, digits))


def is_shown_exactly(x: Number, digits: int = SHOWN_DIGITS) -> bool:
    """Whether :func:`readable` is the exact value of ``x`` (``1/10`` yes, ``1/3`` no)."""
    return Fraction(readable(x, digits)) == to_fraction(x)


def exact_text(x: Number) -> str:
    """The exact value as short text: a terminating decimal when it has one of at most 20
    significant digits (``1/2`` → ``"0.5"``, ``1985`` → ``"1985"``), else ``"p/q"``.
    A float is its ``repr`` (the shortest text that reads back as it). Deterministic (a
    plan's description compares it)."""
    if isinstance(x, float | np.floating) and not isinstance(x, np.longdouble):
        return repr(float(x))
    value = to_fraction(x)
    d = value.denominator
    twos, fives = _multiplicity(d, 2), _multiplicity(d, 5)
    if d != 2**twos * 5**fives:
        return str(value)
    places = max(twos, fives)
    digits = str(abs(value.numerator) * 10**places // d)
    if len(digits.lstrip("0")) > 20:
        return str(value)
    whole, frac = (digits[:-places] or "0", digits[-places:].rjust(places, "0")) if places \
        else (digits, "")
    sign = "-" if value < 0 else ""
    return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}"


def _multiplicity(n: int, p: int) -> int:
    k = 0
    while n % p == 0:
        n //= p
        k += 1
    return k


class ExactNumbers(Mapping[str, Fraction]):
    """Named exact numbers that print as decimals: what :meth:`Query.calibrate
    <dpkit.frame.Query.calibrate>` returns.

    Indexing gives the exact :class:`~fractions.Fraction` (``result["epsilon"]``, as before
    issue 33, so ``release(**result)`` spends exactly the calibrated budget); the repr shows
    decimals with the exact value beside (``ExactNumbers(epsilon≈0.146003,
    exact=2449531/16777216)``); :attr:`floats` are the decimals as floats and
    :meth:`as_json` the one JSON shape of a loss (``{"epsilon": 0.146003, "exact":
    {"epsilon": "2449531/16777216"}}``).

    Parameters
    ----------
    values : mapping of str to number
        Converted exactly (:func:`to_fraction`).

    Raises
    ------
    DomainError
        For a value :func:`to_fraction` refuses.
    """

    def __init__(self, values: Mapping[str, object]) -> None:
        self._values = {str(k): to_fraction(v) for k, v in values.items()}

    def __getitem__(self, key: str) -> Fraction:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def floats(self) -> dict[str, float]:
        """Each value as the float of its :func:`readable` text."""
        return {k: shown(v) for k, v in self._values.items()}

    def as_json(self) -> dict[str, object]:
        """Decimals for people, the exact values as ``"p/q"`` strings under ``exact``."""
        return {**self.floats, "exact": {k: str(v) for k, v in self._values.items()}}

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={readable(v)}" if is_shown_exactly(v)
                          else f"{k}≈{readable(v)}, exact={v}" for k, v in self._values.items())
        return f"{type(self).__name__}({inner})"
