"""Numbers of every type, and numbers beyond the grid's fast range (issue 16, finding 9).

Attacks: ``make_discrete_laplace(scale=np.float64(2.0))`` raised ``ValueError: Invalid literal
for Fraction: 'np.float64(2.0)'`` (a float subclass whose repr is not a literal), and
``np.float32`` / ``np.int64`` parameters failed in other conversions; ``make_laplace(1.0)(1e15)``
returned about 2^32 (clamped at 2^62 grid steps) while reporting an accuracy of 3.0.
Defences: one conversion (``dpkit.core.numbers``) reads every numeric type as the Python
number of the same value; the grid mechanisms release every finite input exactly
(``dpkit.core.samplers.add_on_grid``), with no clamping.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dpkit as dp
from dpkit import mechanisms as mech
from dpkit.core import numbers as nums
from dpkit.core import samplers
from dpkit.errors import DomainError

CONVERSIONS = (nums.fraction_up, nums.fraction_down, nums.to_fraction, nums.as_typed)
FLOAT_TYPES = {16: np.float16, 32: np.float32, 64: np.float64}
INT_TYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)


@given(st.data(), st.sampled_from(sorted(FLOAT_TYPES)))
def test_numpy_floats_convert_as_the_python_float_of_the_same_value(data, width):
    x = data.draw(st.floats(width=width, allow_nan=False, allow_infinity=False))
    value = FLOAT_TYPES[width](x)
    assert float(value) == x
    for convert in CONVERSIONS:
        assert convert(value) == convert(x)
    assert nums.fraction_down(value) <= Fraction(x) <= nums.fraction_up(value)


@given(st.data(), st.sampled_from(INT_TYPES))
def test_numpy_integers_convert_as_python_ints(data, dtype):
    info = np.iinfo(dtype)
    x = data.draw(st.integers(int(info.min), int(info.max)))
    for convert in CONVERSIONS:
        assert convert(dtype(x)) == convert(x) == Fraction(x)
    assert nums.exact(dtype(x)) == x
    assert nums.integer(dtype(x), "k") == x and type(nums.integer(dtype(x), "k")) is int


@given(st.decimals(allow_nan=False, allow_infinity=False),
       st.fractions(max_denominator=10**12))
def test_decimals_and_fractions_are_exact(d, f):
    for convert in CONVERSIONS:
        assert convert(d) == Fraction(d)
        assert convert(f) == f
    assert nums.exact(d) == Fraction(d)


def test_longdouble_finer_than_a_float_is_taken_exactly():
    x = np.longdouble(1) + np.finfo(np.longdouble).eps  # 1 + 2^-63 on x86 (1 + 2^-52 elsewhere)
    assert nums.fraction_up(x) == nums.fraction_down(x) == Fraction(*x.as_integer_ratio())


@pytest.mark.parametrize("bad", [True, np.bool_(True), np.float32("nan"), np.float16("inf"),
                                 np.float64("-inf"), "1", None, 1j])
def test_refused(bad):
    for convert in CONVERSIONS:
        with pytest.raises(DomainError):
            convert(bad)


@pytest.mark.parametrize("bad", [True, np.bool_(True), 2.0, np.float64(2.0), "2", 0])
def test_integer_parameters_refuse_non_integers(bad):
    with pytest.raises(DomainError):
        nums.integer(bad, "k", minimum=1)


# -- every public make_* constructor with NumPy parameters --------------------------------

def _sweep(t):
    """(constructor name, measurement built with numbers of type t, an input)."""
    x, ints = np.array([0.25, 0.5]), np.array([1, 2])
    return {
        "make_laplace": (mech.make_laplace(t(1.5)), x),
        "make_discrete_laplace": (mech.make_discrete_laplace(t(2.0)), ints),
        "make_gaussian": (mech.make_gaussian(t(1.5)), x),
        "make_discrete_gaussian": (mech.make_discrete_gaussian(t(2.0)), ints),
        "make_approx_gaussian": (mech.make_approx_gaussian(t(1.0), t(1e-6)), x),
        "make_exponential": (mech.make_exponential(t(1.0)), x),
        "make_randomized_response": (mech.make_randomized_response([0, 1], t(1.0)), ints - 1),
        "make_binary_randomized_response": (mech.make_binary_randomized_response(t(1.0)),
                                            np.array([True, False])),
        "make_geometric": (mech.make_geometric(t(1.0), t(2.0)), ints),
        "make_permute_and_flip": (mech.make_permute_and_flip(t(1.0)), x),
        "make_top_k": (mech.make_top_k(np.int64(2), t(1.0)), np.array([0.1, 0.2, 0.3])),
        "make_report_noisy_max": (mech.make_report_noisy_max(t(1.0)), x),
        "make_staircase": (mech.make_staircase(t(1.0), t(1.0)), x),
        "make_analyze_gauss": (mech.make_analyze_gauss(np.int64(2), t(1.0), rho=t(0.5)),
                               np.array([[0.1, 0.2]])),
        "make_vector_laplace": (mech.make_vector_laplace(t(1.0), np.int64(2)), x),
        "make_gaussian_mahalanobis": (mech.make_gaussian_mahalanobis(
            t(1.5), [[t(2.0), t(0.5)], [t(0.5), t(1.0)]]), x),
        "make_knorm": (mech.make_knorm([[t(1.0), t(0.5)], [t(0.0), t(1.0)]], t(1.0)), ints),
        "make_ptr_median": (mech.make_ptr_median((t(0.0), t(1.0)), t(0.1), t(1.0), t(1e-6)),
                            np.linspace(0, 1, 50)),
        "make_sample_and_aggregate": (mech.make_sample_and_aggregate(
            np.mean, np.int64(4), (t(0.0), t(1.0)), t(1.0)), np.linspace(0, 1, 40)),
        "make_smooth_median": (mech.make_smooth_median((t(0.0), t(1.0)), t(1.0), t(1e-6)),
                               np.linspace(0, 1, 50)),
        "make_smooth_trimmed_mean": (mech.make_smooth_trimmed_mean(
            (t(0.0), t(1.0)), t(0.1), t(1.0), t(1e-6)), np.linspace(0, 1, 50)),
    }


def test_the_sweep_covers_every_public_constructor():
    public = {name for name in mech.__all__ if name.startswith("make_")}
    assert public == set(_sweep(float))


@pytest.mark.parametrize("numpy_type", [np.float64, np.float32, np.float16])
def test_every_constructor_takes_numpy_floats(numpy_type):
    reference = _sweep(float)
    for name, (measurement, data) in _sweep(numpy_type).items():
        measurement(data)  # runs
        d_in = np.float64(1.0) if name not in ("make_analyze_gauss",) else np.int64(1)
        same_value = _sweep(lambda v, t=numpy_type: float(t(v)))[name][0]
        assert measurement.map(d_in) == same_value.map(1), name
        if numpy_type is np.float64:  # float64 values are the Python floats themselves
            assert measurement.map(d_in) == reference[name][0].map(1), name


def test_other_entry_points_take_numpy_numbers():
    from dpkit.learn import GaussianNB
    from dpkit.release import release_histogram
    from dpkit.release.synthetic.synthesize import synthesize

    assert release_histogram(np.arange(8), np.float32(1.0), "hb").epsilon == Fraction(
        float(np.float32(1.0)))
    s = dp.Session(pl.DataFrame({"a": [1, 2, 3]}), budget=dp.PureDP(np.float64(2.0)))
    s.query().count().release(epsilon=np.float32(0.5))
    assert s.spent == dp.PureDP(Fraction(1, 2))
    x = np.array([[0.1], [0.9], [0.5], [0.3]])
    GaussianNB(np.float64(1.0), bounds=(np.float32(0), np.float64(1)), classes=[0, 1],
               count_share=np.float32(0.25)).fit(x, np.array([0, 1, 0, 1]))
    frame = pl.DataFrame({"a": [0, 1, 2] * 10})
    synthesize(frame, {"a": [0, 1, 2]}, method="mwem", epsilon=np.float64(1.0),
               total_share=np.float32(0.25), rounds=np.int64(2))


# -- floats beyond the grid's fast range: exact, never clamped --------------------------

BETA = 1e-9  # per assertion below: P(|noise| > accuracy(β)) ≤ β, so each fails w.p. ≤ 1e-9


@pytest.mark.parametrize("make", [
    lambda: mech.make_laplace(1.0), lambda: mech.make_gaussian(1.0),
    lambda: mech.make_approx_gaussian(1.0, 1e-6), lambda: mech.make_staircase(1, 1)])
@pytest.mark.parametrize("x", [1e15, -1e15, 3e9, 1e300, -1.5e308, 2.0**62, 2.0**62 + 2**10])
def test_large_inputs_are_released_within_the_reported_accuracy(make, x):
    """Old code: make_laplace(1.0)(1e15) ≈ 4.29e9 (clamped at 2^62 grid steps of 2^-30)."""
    m = make()
    a = m.accuracy(BETA)
    out = m(np.array([x]))[0]
    assert abs(out - x) <= a or out == x  # exact at 1e300: the noise is below an ulp
    assert math.isfinite(out)


def test_vector_laplace_large_inputs():
    m = mech.make_vector_laplace(1.0, 2)
    out = m(np.array([1e15, -1e12]))
    assert np.linalg.norm(out - np.array([1e15, -1e12])) <= m.accuracy(BETA) + 1.0


def test_infinity_is_read_as_the_largest_float():
    out = mech.make_laplace(1)(np.array([np.inf, -np.inf]))
    assert (out == np.array([np.finfo(np.float64).max, -np.finfo(np.float64).max])).all()


@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(-2**40, 2**40),
       st.integers(-40, 10), st.sampled_from([0, 1]))
def test_add_on_grid_is_the_nearest_float_to_the_exact_noisy_grid_value(x, n, k, shift):
    """Both paths (vectorised int64 and exact integers) compute fl((2^s·⌊x/2^k⌉ + n)·2^(k−s))."""
    got = samplers.add_on_grid(np.array([x]), k, np.array([n]), shift)[0]
    exact = (Fraction(2) ** shift * round(Fraction(x) / Fraction(2) ** k) + n) * Fraction(
        2) ** (k - shift)
    try:
        want = float(exact)
    except OverflowError:
        want = math.copysign(math.inf, exact)
    assert got == want


def test_grid_outputs_stay_on_the_grid_beyond_the_fast_range():
    m = mech.make_laplace(1.0)  # grid 2^-30
    out = m(np.array([2.0**31 + 0.5, 2.0**40 + 0.25, 1e15]))
    assert (np.ldexp(out, 30) == np.rint(np.ldexp(out, 30))).all()


def test_sparse_vector_numeric_answers_beyond_the_fast_range():
    sv = mech.SparseVector(1e15, 1, 1, 2, numeric_epsilon=1)
    value = sv.ask(1e15 + 1e6)  # far above the threshold: answered, w.p. ≥ 1 − 1e-9
    assert value is not False and abs(value - (1e15 + 1e6)) < 100
    big = mech.SparseVector(10, 1, 1, 1, integer=True)
    with pytest.raises(DomainError):
        big.ask(True)
    assert big.ask(10**30) is True


def test_discrete_mechanisms_never_wrap():
    top = np.iinfo(np.int64).max
    out = mech.make_discrete_laplace(2)(np.array([top, -top - 1], dtype=np.int64))
    assert out[0] > 2**62 and out[1] < -(2**62)  # saturated, not wrapped to the other sign
    assert mech.make_discrete_gaussian(2)(np.array([2**64 - 1], dtype=np.uint64))[0] > 2**62
