"""dpkit.apps.posterior: one posterior sample (Beta–Bernoulli) on an exact grid.

False-positive rates: χ² of the sampled law ≤ 1e-6 (tests/stats.py); the audit of the
correct sampler fails with probability ≤ 1e-6 (histogram majority < 1e-11, lower bound
certified at 1 − 1e-6). Each is paired with a broken variant that must be caught."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.apps.posterior import (
    audit_cases,
    beta_bernoulli_grid,
    one_posterior_sample,
    posterior_law,
)
from dpkit.audit import run_audit
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms import make_selection
from dpkit.mechanisms.exponential import sample_exponential

CONFIDENCE = 1 - 1e-6


def test_debit_is_the_declared_epsilon() -> None:
    f = PrivacyFilter(PureDP(2))
    theta = one_posterior_sample([1, 0, 1], epsilon=Fraction(3, 4), accountant=f)
    assert f.spent == PureDP(Fraction(3, 4))
    assert 0.01 <= theta <= 0.99


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 0}, {"prior": (0, 1)}, {"prior": ("a", 1)}, {"truncation": 0},
    {"truncation": Fraction(1, 2)}, {"size": 1}, {"size": 1 << 20}, {"x": [[1, 0]]},
    {"x": ["a", "b"]}, {"accountant": object()},
])
def test_bad_input_raises_before_any_debit(kwargs: dict) -> None:
    f = PrivacyFilter(PureDP(2))
    args = {"x": [1, 0, 1], "epsilon": 1, "accountant": f} | kwargs
    with pytest.raises(DomainError):
        one_posterior_sample(args.pop("x"), **args)
    assert f.spent == PureDP(0)


def test_over_budget_is_refused() -> None:
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(BudgetExceededError):
        one_posterior_sample([1], epsilon=2, accountant=f)
    assert f.spent == PureDP(0)


def test_score_sensitivity_on_neighbours() -> None:
    """Substituting one record moves the log-likelihood at every θ by ≤ Δ; Δ ≤ log(99)."""
    grid = beta_bernoulli_grid((1, 1), Fraction(1, 100), 256)
    assert np.log(99) - 0.2 < float(grid.sensitivity) <= np.log(99)  # grid midpoints
    for ones in (0, 5, 9):
        a = [ones * l1 + (10 - ones) * l0 for l1, l0 in zip(grid.ell1, grid.ell0, strict=True)]
        b = [(ones + 1) * l1 + (9 - ones) * l0
             for l1, l0 in zip(grid.ell1, grid.ell0, strict=True)]
        assert max(abs(u - v) for u, v in zip(a, b, strict=True)) <= grid.sensitivity


def test_exact_law_meets_the_privacy_map_on_neighbours() -> None:
    grid = beta_bernoulli_grid((2, 3), Fraction(1, 50), 128)
    eps = 0.8
    for ones in range(0, 40, 3):
        p = posterior_law(grid, ones, 40, eps)
        q = posterior_law(grid, ones + 1, 40, eps)
        assert np.max(np.abs(np.log(p) - np.log(q))) <= eps + 1e-9


def _law_pvalue(broken: bool) -> float:
    grid = beta_bernoulli_grid((1, 1), Fraction(1, 20), 32)
    scale = make_selection(grid.sensitivity, 1).scale
    ones, n = 7, 20
    scores = [ones * a + (n - ones) * b + scale * c
              for a, b, c in zip(grid.ell1, grid.ell0, grid.log_prior, strict=True)]
    draws = sample_exponential(scores, scale / 2 if broken else scale, size=40_000)
    return chi2_pvalue(np.asarray(draws), np.arange(32), posterior_law(grid, ones, n, 1))


def test_samples_follow_the_tempered_posterior() -> None:
    assert _law_pvalue(False) > FALSE_POSITIVE_RATE


def test_law_test_catches_a_colder_sampler() -> None:
    assert _law_pvalue(True) < FALSE_POSITIVE_RATE


def test_large_n_concentrates_near_the_truth() -> None:
    x = (np.arange(20_000) % 10 < 3).astype(int)
    draws = [one_posterior_sample(x, epsilon=1) for _ in range(5)]
    assert all(abs(t - 0.3) < 0.05 for t in draws)


@pytest.mark.slow
def test_audit_correct_sampler_passes() -> None:
    result = run_audit(audit_cases()[0], 50_000, confidence=CONFIDENCE)
    assert result.histogram_passed
    assert result.lower_bound <= result.claimed_epsilon


@pytest.mark.slow
def test_audit_broken_sampler_is_flagged() -> None:
    result = run_audit(audit_cases()[0], 50_000, broken=True, confidence=CONFIDENCE)
    assert (not result.histogram_passed) or result.lower_bound > result.claimed_epsilon
