"""dpkit.learn.bounds.private_bounds: ε-DP per-feature bounds from a log-scale histogram.

Production noise is never seeded (test *inputs* are). Statistical tests reject a correct
implementation with probability ≤ FALSE_POSITIVE_RATE = 1e-6, stated per test, and each is
paired with a deliberately broken variant that the same check must catch. Tests at
ε = 1000 are deterministic up to events of probability < e^(−900) (discrete Laplace noise
of scale ≤ 1/1000 is nonzero with probability 2q/(1 + q), q = e^(−1000)).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps
from stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_laplace_pmf

import dpkit.learn.bounds as bounds_mod
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.learn import GaussianNB, private_bounds
from dpkit.learn.bounds import (
    bin_edges,
    bin_index,
    histogram_sensitivity,
    histograms,
    threshold,
)
from dpkit.mechanisms import frontend

GEN = np.random.default_rng(8)  # test inputs only, never noise
B = 2 * (bounds_mod.MAX_EXPONENT - bounds_mod.MIN_EXPONENT) + 2
BIG_EPS = 1000


def tricky_data(n: int, d: int) -> np.ndarray:
    """Values at and around bin edges: exact powers of two, ±0, tiny and huge magnitudes."""
    pool = np.concatenate([
        np.ldexp(1.0, np.arange(-40, 70)), -np.ldexp(1.0, np.arange(-40, 70)),
        [0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, 3.0, -3.0, 0.75, 90.0],
        GEN.normal(0, 100, 200),
    ])
    return GEN.choice(pool, size=(n, d))


# --- the bins -----------------------------------------------------------------------------

def test_every_value_lies_in_its_bin_and_the_bins_are_fixed():
    edges = bin_edges()
    assert edges.size == B + 1 and np.all(np.diff(edges) > 0)
    assert edges[0] == -(2.0 ** 64) and edges[-1] == 2.0 ** 64 and 0.0 in edges
    x = tricky_data(2000, 1).ravel()
    idx = bin_index(x)
    assert idx.min() >= 0 and idx.max() < B
    inner = (idx > 0) & (idx < B - 1)  # the extreme bins absorb anything beyond ∓2^63
    lo, hi = edges[idx], edges[idx + 1]
    pos, neg = x >= 0, x < 0
    assert np.all(((lo <= x) & (x < hi))[inner & pos])  # [2^i, 2^(i+1)), [0, 2^a)
    assert np.all(((lo < x) & (x <= hi))[inner & neg])  # (−2^(i+1), −2^i], (−2^a, 0)
    assert np.all(x[idx == 0] <= -(2.0 ** 63)) and np.all(x[idx == B - 1] >= 2.0 ** 63)


def max_neighbour_distance(hist, x: np.ndarray) -> int:
    """max over the rows r of ‖hist(X) − hist(X without r)‖₁ (add/remove one row)."""
    full = hist(x)
    return max(int(np.abs(full - hist(np.delete(x, r, axis=0))).sum())
               for r in range(x.shape[0]))


def assert_sensitivity(hist, claimed: Fraction, x: np.ndarray) -> None:
    """The claimed Δ is what neighbouring datasets actually show (equal: the bound is met
    by every row, since every row lands in one bin per feature)."""
    assert max_neighbour_distance(hist, x) == claimed


def closed_bins_histograms(x: np.ndarray) -> np.ndarray:
    """Broken: bins closed on both sides, so a value on an edge counts twice."""
    edges = bin_edges()
    return np.stack([((edges[:-1][None, :] <= col[:, None])
                      & (col[:, None] <= edges[1:][None, :])).sum(axis=0) for col in x.T])


def test_histogram_sensitivity_is_d_on_neighbours_and_broken_claims_are_caught():
    for d in (1, 3, 5):
        x = tricky_data(60, d)
        assert_sensitivity(histograms, histogram_sensitivity(d), x)
        # broken: one histogram's sensitivity claimed for all d together (scale 1/ε)
        if d > 1:
            with pytest.raises(AssertionError):
                assert_sensitivity(histograms, Fraction(1), x)
        # broken: an edge value counted in two bins
        with pytest.raises(AssertionError):
            assert_sensitivity(closed_bins_histograms, histogram_sensitivity(d), x)


# --- the noise ----------------------------------------------------------------------------

def released_noise(monkeypatch, calls: int, d: int, epsilon: float) -> np.ndarray:
    """noisy − exact counts of the histograms private_bounds releases."""
    real = frontend.noisy
    noise: list[np.ndarray] = []

    def recording(values, sensitivity, eps, **kw):
        out = real(values, sensitivity, eps, **kw)
        noise.append((out.value - values).ravel())
        return out

    monkeypatch.setattr(frontend, "noisy", recording)
    x = GEN.uniform(-50, 50, (300, d))
    for _ in range(calls):
        private_bounds(x, epsilon)
    return np.concatenate(noise)


def test_released_histograms_carry_discrete_laplace_noise_of_scale_d_over_epsilon(
        monkeypatch):
    """χ² goodness of fit of ~7,800 noise draws to discrete Laplace at scale d/ε = 2;
    false-positive rate ≤ 1e-6 (the p-value threshold). Broken variant: the sensitivity of
    one histogram (1) used for all d = 4 (scale 1/2) must give p < 1e-6."""
    d, eps = 4, 2.0
    support = np.arange(-40, 41)
    pmf = discrete_laplace_pmf(support, d / eps)
    noise = released_noise(monkeypatch, 10, d, eps)
    assert chi2_pvalue(noise, support, pmf) >= FALSE_POSITIVE_RATE

    monkeypatch.setattr(bounds_mod, "histogram_sensitivity", lambda d: Fraction(1))
    broken = released_noise(monkeypatch, 10, d, eps)
    assert chi2_pvalue(broken, support, pmf) < FALSE_POSITIVE_RATE


# --- the threshold ------------------------------------------------------------------------

def union_bound_holds(tau: int, scale: float, n_bins: int, beta: float) -> bool:
    """N·P(Z ≥ τ) ≤ β for discrete Laplace Z of scale s: P(Z ≥ τ) = q^τ/(1 + q)."""
    q = math.exp(-1 / scale)
    return n_bins * q ** tau / (1 + q) <= beta


@pytest.mark.parametrize("scale", [Fraction(1, 1000), Fraction(1, 3), Fraction(1), Fraction(5),
                                   Fraction(50), Fraction(1234, 7)])
@pytest.mark.parametrize("beta", [1e-1, 1e-3, 1e-9])
def test_threshold_meets_the_union_bound_and_is_not_loose(scale, beta):
    for n_bins in (B, 5 * B, 40 * B):
        tau = threshold(scale, n_bins, beta)
        assert union_bound_holds(tau, float(scale), n_bins, beta)
        assert tau <= max(1.0, float(scale) * math.log(n_bins / beta) + 1)
        # broken: the tail bound of one bin, no union over the N bins
        naive = max(1, math.ceil(float(scale) * math.log(1 / beta)))
        if float(scale) >= 1:
            assert not union_bound_holds(naive, float(scale), n_bins, beta)


def outlier_selections(trials: int) -> int:
    """How often a bin holding one planted row (10⁶ ∈ [2^19, 2^20)) ends up inside the
    upper bound, beside 2,000 rows in [3, 90]; ε = 1, d = 1, β = 10⁻³."""
    x = np.concatenate([GEN.uniform(3, 90, 2000), [1e6]])[:, None]
    return sum(int(private_bounds(x, 1.0)[1][0] >= 2.0 ** 20) for _ in range(trials))


def test_a_one_row_outlier_bin_is_selected_only_with_the_stated_probability(monkeypatch):
    """s = 1, N = 194 bins, τ = ⌈ln(194/10⁻³)⌉ = 13. The upper bound reaches 2^20 only if
    the outlier's bin passes (1 + Z ≥ 13: q^12/(1 + q)) or one of the 44 empty bins above
    it does (each q^13/(1 + q)); p ≤ 7.7·10⁻⁵ per trial. Over 2,000 trials the test fails
    when the count reaches k, the smallest with P(Binomial(2000, p) ≥ k) ≤ 1e-6.
    Broken variants — no noise margin (τ = 1) and no union bound (τ = ⌈ln(1/β)⌉ = 7,
    p ≈ 0.03) — must reach k."""
    q = math.exp(-1)
    assert threshold(Fraction(1), B, 1e-3) == 13
    p = (q ** 12 + 44 * q ** 13) / (1 + q)
    trials = 2000
    k = next(k for k in range(1, trials) if sps.binom.sf(k - 1, trials, p) <= FALSE_POSITIVE_RATE)
    assert outlier_selections(trials) < k

    for broken in (lambda scale, n, beta: 1,
                   lambda scale, n, beta: math.ceil(float(scale) * math.log(1 / beta))):
        monkeypatch.setattr(bounds_mod, "threshold", broken)
        assert outlier_selections(trials) >= k


# --- accuracy at large ε -------------------------------------------------------------------

def assert_brackets(x: np.ndarray, lower: list[float], upper: list[float]) -> None:
    lo, hi = private_bounds(x, BIG_EPS)
    assert lo.tolist() == lower and hi.tolist() == upper


def test_large_epsilon_gives_the_powers_of_two_bracketing_the_data(monkeypatch):
    """At ε = 1000 (τ = 1, every nonempty bin passes, no empty one) data in [3, 90] gets
    [2, 128]; its mirror [−128, −2]; non-negative counts start at 0 exactly; [−0.3, 5] gets
    [−0.5, 8]. Broken variant: bins from a rounded log₂ (3 → [4, 8)) must be caught."""
    x = np.column_stack([np.concatenate([[3.0, 90.0], GEN.uniform(3, 90, 500)]),
                         -np.concatenate([[3.0, 90.0], GEN.uniform(3, 90, 500)]),
                         GEN.integers(0, 50, 502).astype(float),
                         np.concatenate([[-0.3, 5.0], GEN.uniform(-0.3, 5, 500)])])
    expected = ([2.0, -128.0, 0.0, -0.5], [128.0, -2.0, 64.0, 8.0])
    assert_brackets(x, *expected)

    def rounded(values, a=bounds_mod.MIN_EXPONENT, b=bounds_mod.MAX_EXPONENT):
        v = np.asarray(values, dtype=np.float64)
        k = b - a
        level = np.where(np.abs(v) < 2.0 ** a, 0, np.clip(
            np.round(np.log2(np.maximum(np.abs(v), 1e-300))).astype(np.int64) - a, 0, k - 1)
            + 1)
        return np.where(v >= 0, k + 1 + level, k - level)

    monkeypatch.setattr(bounds_mod, "bin_index", rounded)
    with pytest.raises(AssertionError):
        assert_brackets(x, *expected)


def test_trim_cuts_a_sparse_tail_and_no_passing_bin_gives_the_default():
    x = np.concatenate([GEN.uniform(3, 90, 1000), np.full(20, 1e6)])[:, None]  # 2 % at 10⁶
    assert private_bounds(x, BIG_EPS)[1].tolist() == [2.0 ** 20]
    assert private_bounds(x, BIG_EPS, trim=0.05)[1].tolist() == [128.0]
    with pytest.warns(UserWarning, match="no bin passed"):
        lo, hi = private_bounds(np.empty((0, 2)), BIG_EPS, default=(-4, 4))
    assert lo.tolist() == [-4, -4] and hi.tolist() == [4, 4]


# --- the budget ----------------------------------------------------------------------------

def test_the_accountant_is_debited_exactly_epsilon_before_the_data_is_read(monkeypatch):
    budget = PrivacyFilter(PureDP(Fraction(1)))
    at_read: list[object] = []
    real = bounds_mod.histograms

    def reading(*args):
        at_read.append(budget.spent)
        return real(*args)

    monkeypatch.setattr(bounds_mod, "histograms", reading)
    x = GEN.uniform(0, 10, (5000, 3))
    private_bounds(x, Fraction(1, 4), accountant=budget)
    assert at_read == [PureDP(Fraction(1, 4))]
    assert budget.spent == PureDP(Fraction(1, 4))
    private_bounds(x, 0.5, accountant=budget)
    assert budget.spent == PureDP(Fraction(3, 4))
    with pytest.raises(BudgetExceededError):
        private_bounds(x, 0.5, accountant=budget)
    assert budget.spent == PureDP(Fraction(3, 4)) and len(at_read) == 2


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.array([[1.0, 2.0], [3.0, np.nan]]), 1.0), {}, "feature.*1.*NaN"),
    ((np.array([[np.inf, 2.0]]), 1.0), {}, "feature.*0"),
    ((np.arange(5.0), 1.0), {}, "2-D"),
    ((np.zeros((2, 2, 2)), 1.0), {}, "2-D"),
    ((np.zeros((3, 0)), 1.0), {}, "2-D"),
    ((np.array([["a", "b"]]), 1.0), {}, "numeric"),
    ((np.ones((3, 2)), 0), {}, "epsilon"),
    ((np.ones((3, 2)), -1.0), {}, "epsilon"),
    ((np.ones((3, 2)), 1.0), {"beta": 0}, "beta"),
    ((np.ones((3, 2)), 1.0), {"beta": 1}, "beta"),
    ((np.ones((3, 2)), 1.0), {"trim": 0.5}, "trim"),
    ((np.ones((3, 2)), 1.0), {"default": (1, -1)}, "default"),
    ((np.ones((3, 2)), 1.0), {"min_exponent": 3, "max_exponent": 3}, "exponent"),
])
def test_bad_input_raises_before_anything_is_spent(monkeypatch, args, kwargs, match):
    budget = PrivacyFilter(PureDP(Fraction(10)))
    monkeypatch.setattr(bounds_mod, "histograms", lambda *a: pytest.fail("data was read"))
    with pytest.raises(DomainError, match=match):
        private_bounds(*args, accountant=budget, **kwargs)
    assert budget.spent == PureDP(Fraction(0))


# --- with a model --------------------------------------------------------------------------

def test_bounds_feed_gaussian_nb_and_the_accountant_is_charged_for_both():
    n = 4000
    y = GEN.integers(0, 2, n)
    x = np.column_stack([GEN.normal(20 + 30 * y, 8), GEN.normal(-300 * y, 50),
                         GEN.poisson(0.5 + 5 * y).astype(float)])
    budget = PrivacyFilter(PureDP(Fraction(2)))
    with pytest.raises(DomainError, match=r"private_bounds\(X, epsilon\)"):
        GaussianNB(1.5, classes=[0, 1], accountant=budget).fit(x, y)
    assert budget.spent == PureDP(Fraction(0))
    bounds = private_bounds(x, Fraction(1, 2), accountant=budget, beta=1e-9)
    model = GaussianNB(Fraction(3, 2), bounds=bounds, classes=[0, 1],
                       accountant=budget).fit(x, y)
    assert budget.spent == PureDP(Fraction(2))
    assert model.predict(x).shape == (n,)
    lower, upper = bounds
    assert np.all(lower < upper) and lower[2] == 0.0  # counts: 0 exactly
    # (fails only if an empty negative bin passes, ≤ β = 1e-9, or the ~1,200-row bin
    # [0, 2^-32) falls below τ = 163, probability < e^(-170))
