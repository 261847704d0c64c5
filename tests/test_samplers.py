"""Distribution tests of the exact samplers (χ² against the exact pmf; FPR ≤ 1e-6 each),
each paired with a mis-scaled variant that the same test must reject."""

from fractions import Fraction

import numpy as np
import pytest
from stats import (
    FALSE_POSITIVE_RATE,
    chi2_pvalue,
    discrete_gaussian_pmf,
    discrete_laplace_pmf,
)

from dpkit.core import samplers
from dpkit.errors import DomainError

N = 200_000
pytestmark = pytest.mark.slow  # large-sample statistical tests (run in CI; ~10 s)


@pytest.mark.parametrize("scale", [Fraction(1, 3), 1, Fraction(5, 2), 10])
def test_discrete_laplace_matches_pmf(scale):
    z = samplers.discrete_laplace(scale, N)
    assert z.dtype == np.int64 and z.size == N
    width = int(30 * float(scale)) + 5
    support = np.arange(-width, width + 1)
    assert chi2_pvalue(z, support, discrete_laplace_pmf(support, float(scale))) > (
        FALSE_POSITIVE_RATE)


@pytest.mark.parametrize("scale", [1, 10])
def test_discrete_laplace_test_rejects_misscaled(scale):
    z = samplers.discrete_laplace(Fraction(scale) * Fraction(11, 10), N)
    width = int(30 * scale) + 5
    support = np.arange(-width, width + 1)
    assert chi2_pvalue(z, support, discrete_laplace_pmf(support, scale)) < FALSE_POSITIVE_RATE


@pytest.mark.parametrize("sigma", [Fraction(1, 2), 1, Fraction(7, 2), 20])
def test_discrete_gaussian_matches_pmf(sigma):
    z = samplers.discrete_gaussian(sigma, N)
    width = int(12 * float(sigma)) + 3
    support = np.arange(-width, width + 1)
    assert chi2_pvalue(z, support, discrete_gaussian_pmf(support, float(sigma))) > (
        FALSE_POSITIVE_RATE)


@pytest.mark.parametrize("sigma", [1, 20])
def test_discrete_gaussian_test_rejects_misscaled(sigma):
    z = samplers.discrete_gaussian(Fraction(sigma) * Fraction(11, 10), N)
    width = int(12 * sigma) + 3
    support = np.arange(-width, width + 1)
    assert chi2_pvalue(z, support, discrete_gaussian_pmf(support, sigma)) < FALSE_POSITIVE_RATE


@pytest.mark.parametrize("scale", [Fraction(1, 2), 3])
def test_geometric_matches_pmf(scale):
    y = samplers.geometric(scale, N)
    assert y.min() >= 0
    support = np.arange(0, int(40 * float(scale)) + 5)
    pmf = np.exp(-support / float(scale))
    assert chi2_pvalue(y, support, pmf) > FALSE_POSITIVE_RATE
    wrong = np.exp(-support / (float(scale) * 1.1))
    assert chi2_pvalue(y, support, wrong) < FALSE_POSITIVE_RATE


def test_bernoulli_rational_and_exp():
    b = samplers.bernoulli(Fraction(2, 7), N)
    support = np.array([0, 1])
    assert chi2_pvalue(b.astype(int), support, np.array([5 / 7, 2 / 7])) > FALSE_POSITIVE_RATE
    assert chi2_pvalue(b.astype(int), support, np.array([0.7, 0.3])) < FALSE_POSITIVE_RATE
    gamma = Fraction(7, 3)  # integer part and fraction both exercised
    e = samplers.bernoulli_exp(gamma.numerator, gamma.denominator, size=N).astype(int)
    p = np.exp(-7 / 3)
    assert chi2_pvalue(e, support, np.array([1 - p, p])) > FALSE_POSITIVE_RATE
    q = np.exp(-2.2)
    assert chi2_pvalue(e, support, np.array([1 - q, q])) < FALSE_POSITIVE_RATE


def test_bernoulli_exp_handles_huge_rationals():
    num = np.array([(10**40 + 7) * 3] * 50_000, dtype=object)
    e = samplers.bernoulli_exp(num, 10**40 * 2).astype(int)  # γ ≈ 1.5
    p = np.exp(-1.5)
    assert chi2_pvalue(e, np.array([0, 1]), np.array([1 - p, p])) > FALSE_POSITIVE_RATE


def test_grid_round_trip_is_exact():
    k = -7
    x = np.array([0.0, 1.0, -3.5, 2.0**-7 * 5, np.inf, -np.inf])
    z = samplers.to_grid(x, k)
    assert z[:4].tolist() == [0, 128, -448, 5]
    assert z[4] == 2**62 and z[5] == -(2**62)
    assert samplers.from_grid(z[:4], k).tolist() == [0.0, 1.0, -3.5, 5 * 2.0**-7]
    with pytest.raises(DomainError):
        samplers.to_grid(np.array([np.nan]), k)


def test_grid_exponent_brackets_scale():
    for scale in (Fraction(1, 3), Fraction(1), Fraction(1000), Fraction(2**20 + 1)):
        k = samplers.grid_exponent(scale)
        assert Fraction(2) ** (k + samplers.GRID_BITS) <= scale < Fraction(2) ** (
            k + samplers.GRID_BITS + 1)


def test_bad_scales_raise():
    with pytest.raises(DomainError):
        samplers.discrete_laplace(0, 10)
    with pytest.raises(DomainError):
        samplers.discrete_laplace(Fraction(1, 3**40), 10)
    with pytest.raises(DomainError):
        samplers.discrete_gaussian(-1, 10)


@pytest.mark.parametrize("sigma", [Fraction(3, 2), 2**30])
def test_discrete_gaussian_exact_fallbacks(monkeypatch, sigma):
    """Widen the float margin so most decisions take the exact-integer branches (normally
    hit with probability ~1e-9) and check that the law is still the discrete Gaussian."""
    monkeypatch.setattr(samplers, "_TOL", 0.2)
    n = 20_000 if sigma == 2**30 else N // 4
    z = samplers.discrete_gaussian(sigma, n)
    if sigma == 2**30:  # compare in units of σ: KS against the normal law
        from stats import ks_pvalue
        assert ks_pvalue(z / float(sigma), "norm", 0, 1) > FALSE_POSITIVE_RATE
        return
    support = np.arange(-15, 16)
    assert chi2_pvalue(z, support, discrete_gaussian_pmf(support, float(sigma))) > (
        FALSE_POSITIVE_RATE)
    assert chi2_pvalue(z, support, discrete_gaussian_pmf(support, 1.8)) < FALSE_POSITIVE_RATE
