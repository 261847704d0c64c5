import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpkit.core import numbers as N  # noqa: N812
from dpkit.errors import DomainError


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300))
def test_float_conversion_brackets_both_readings(x):
    up, down = N.fraction_up(x), N.fraction_down(x)
    assert down <= Fraction(x) <= up
    assert down <= Fraction(repr(x)) <= up


def test_user_floats_mean_what_was_typed_when_conservative():
    assert N.fraction_down(0.1) == Fraction(1, 10)  # binary 0.1 is slightly above
    assert N.fraction_up(0.1) == Fraction(0.1)
    assert N.fraction_down(1.0) == N.fraction_up(1.0) == 1


@given(st.fractions(min_value=Fraction(-50), max_value=Fraction(50), max_denominator=10**6))
def test_exp_directed(x):
    assert N.exp_down(x) <= Fraction(math.exp(float(x))) * (1 + Fraction(1, 10**12))
    assert N.exp_down(x) <= N.exp_up(x)
    assert N.exp_up(x) >= Fraction(math.exp(float(x))) * (1 - Fraction(1, 10**12))


@given(st.fractions(min_value=Fraction(1, 10**6), max_value=Fraction(10**9),
                    max_denominator=10**6))
def test_log_and_sqrt_directed(x):
    assert N.log_down(x) <= N.log_up(x)
    assert N.sqrt_down(x) ** 2 <= x <= N.sqrt_up(x) ** 2


def test_exact_squares_are_exact():
    assert N.sqrt_up(Fraction(9, 4)) == Fraction(3, 2) == N.sqrt_down(Fraction(9, 4))


def test_bad_numbers():
    for bad in (math.nan, math.inf, "1", True):
        with pytest.raises(DomainError):
            N.fraction_up(bad)
    with pytest.raises(DomainError):
        N.positive(0, "epsilon")
    with pytest.raises(DomainError):
        N.exact(0.1)


def test_float_up_down():
    third = Fraction(1, 3)
    assert Fraction(N.float_down(third)) <= third <= Fraction(N.float_up(third))
