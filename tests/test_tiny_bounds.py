"""Subnormal and tiny bounds or scales get a clear error at plan time, never a raw
OverflowError (issue 35, known residuals): the grid step 2^-k of a bound below 2^-993 does
not fit a float, and an error message that formatted a scale beyond the floats as a float
overflowed while being written. On the old code each case raised OverflowError."""

from __future__ import annotations

import decimal
from fractions import Fraction

import polars as pl
import pytest

import dpkit as dp
from dpkit.core.numbers import readable, shown
from dpkit.errors import BoundsError, DomainError
from dpkit.mechanisms import make_noise


@pytest.mark.parametrize("value", [Fraction(2) ** 1074, Fraction(2) ** -1074,
                                   -Fraction(1, 3) * Fraction(10) ** -330, Fraction(10) ** 400,
                                   Fraction(123456789) * Fraction(10) ** 320])
def test_readable_is_total_beyond_the_floats(value):
    """The exact value correctly rounded to 6 significant digits (checked against decimal at
    60 digits), where float() overflows or loses digits."""
    text = readable(value)
    ref = decimal.Context(prec=60).divide(decimal.Decimal(value.numerator),
                                          decimal.Decimal(value.denominator))
    assert abs(decimal.Decimal(text) - ref) <= abs(ref) * decimal.Decimal("5e-6")
    assert "e" in text and not text.startswith("inf")
    shown(value)  # a float or ±inf/0 for JSON, never an exception


def test_readable_keeps_the_float_format_in_range():
    assert readable(Fraction(1, 10)) == "0.1" and readable(1e300) == "1e+300"
    assert readable(Fraction(1, 3)) == "0.333333" and readable(0) == "0"


@pytest.mark.parametrize("epsilon", [5e-324, 1e-300])
def test_make_noise_with_a_scale_beyond_the_floats_is_a_domain_error(epsilon):
    with pytest.raises(DomainError, match="outside the range of the exact samplers"):
        make_noise(1, epsilon=epsilon)


@pytest.mark.parametrize("agg", ["sum", "mean", "variance", "std", "median"])
@pytest.mark.parametrize("bounds", [(0, 5e-324), (-5e-324, 5e-324), (0, 1e-300),
                                    (0, Fraction(1, 2**2000))])
def test_tiny_bounds_are_refused_at_plan_time(agg, bounds):
    df = pl.DataFrame({"a": [0.0, 1e-320, 5e-324]})
    s = dp.Session(df, privacy_unit=dp.PrivacyUnit.rows(), budget=dp.PureDP(10))
    with pytest.raises(BoundsError, match="rescale the column"):  # not an OverflowError
        s.query().agg(getattr(dp, agg)("a", bounds=bounds)).release(epsilon=1)
    assert s.accountant.spent == dp.PureDP(0)


@pytest.mark.parametrize("agg", ["sum", "mean", "variance", "std", "median"])
@pytest.mark.parametrize("bounds", [(0, 1e-200)])
def test_bounds_whose_square_is_too_small_are_refused_for_variance_only(agg, bounds):
    """A variance sums squares: (1e-200/2)^2 is below 2^-960, refused; the others release."""
    df = pl.DataFrame({"a": [0.0, 1e-320, 5e-324]})
    s = dp.Session(df, privacy_unit=dp.PrivacyUnit.rows(), budget=dp.PureDP(10))
    query = s.query().agg(getattr(dp, agg)("a", bounds=bounds))
    if agg in ("variance", "std"):
        with pytest.raises(BoundsError, match="rescale the column"):
            query.release(epsilon=1)
        assert s.accountant.spent == dp.PureDP(0)
    else:
        assert query.release(epsilon=1).height == 1


@pytest.mark.parametrize("bounds", [(0, 2.0 ** -400), (-1e-300, 1.0), (0, 0)])
def test_small_but_representable_bounds_still_release(bounds):
    df = pl.DataFrame({"a": [0.0, 1e-320, 5e-324]})
    s = dp.Session(df, privacy_unit=dp.PrivacyUnit.rows(), budget=dp.PureDP(10))
    out = s.query().agg(dp.sum("a", bounds=bounds), dp.variance("a", bounds=bounds)
                        ).release(epsilon=1)
    assert out.height == 1
