"""dpkit.apps.posterior: one posterior sample (Beta–Bernoulli, Dirichlet–categorical) on an
exact grid.

False-positive rates: χ² of the sampled law ≤ 1e-6 (tests/stats.py); the audit of the
correct sampler fails with probability ≤ 1e-6 (histogram majority < 1e-11, lower bound
certified at 1 − 1e-6). Each is paired with a broken variant that must be caught."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.apps.posterior import (
    MAX_SIMPLEX,
    PosteriorGrid,
    _draw,
    audit_cases,
    beta_bernoulli_grid,
    dirichlet_categorical_grid,
    one_posterior_sample,
    one_posterior_sample_categorical,
    posterior_law,
)
from dpkit.audit import CASES
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms import make_selection
from dpkit.mechanisms.exponential import exact_gaps, sample_exponential


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


def _ell(grid: PosteriorGrid) -> list[list[Fraction]]:
    """ℓ_k(θ_j) as Fractions, column by column (independent of the module's integer path)."""
    return [[Fraction(int(grid.levels[i]), 1 << grid.shift) for i in grid.index[:, k]]
            for k in range(grid.index.shape[1])]


def test_score_sensitivity_on_neighbours() -> None:
    """Substituting one record moves the log-likelihood at every θ by ≤ Δ; Δ ≤ log(99)."""
    grid = beta_bernoulli_grid((1, 1), Fraction(1, 100), 256)
    assert np.log(99) - 0.2 < float(grid.sensitivity) <= np.log(99)  # grid midpoints
    ell1, ell0 = _ell(grid)
    for ones in (0, 5, 9):
        a = [ones * l1 + (10 - ones) * l0 for l1, l0 in zip(ell1, ell0, strict=True)]
        b = [(ones + 1) * l1 + (9 - ones) * l0 for l1, l0 in zip(ell1, ell0, strict=True)]
        assert max(abs(u - v) for u, v in zip(a, b, strict=True)) <= grid.sensitivity


def test_exact_law_meets_the_privacy_map_on_neighbours() -> None:
    grid = beta_bernoulli_grid((2, 3), Fraction(1, 50), 128)
    eps = 0.8
    for ones in range(0, 40, 3):
        p = posterior_law(grid, (ones, 40 - ones), eps)
        q = posterior_law(grid, (ones + 1, 39 - ones), eps)
        assert np.max(np.abs(np.log(p) - np.log(q))) <= eps + 1e-9


def _law_pvalue(broken: bool) -> float:
    grid = beta_bernoulli_grid((1, 1), Fraction(1, 20), 32)
    scale = make_selection(grid.sensitivity, 1).scale
    ones, n = 7, 20
    ell1, ell0 = _ell(grid)  # uniform prior: no prior term
    scores = [ones * a + (n - ones) * b for a, b in zip(ell1, ell0, strict=True)]
    draws = sample_exponential(scores, scale / 2 if broken else scale, size=40_000)
    return chi2_pvalue(np.asarray(draws), np.arange(32),
                       posterior_law(grid, (ones, n - ones), 1))


def test_samples_follow_the_tempered_posterior() -> None:
    assert _law_pvalue(False) > FALSE_POSITIVE_RATE


def test_law_test_catches_a_colder_sampler() -> None:
    assert _law_pvalue(True) < FALSE_POSITIVE_RATE


def test_large_n_concentrates_near_the_truth() -> None:
    x = (np.arange(20_000) % 10 < 3).astype(int)
    draws = [one_posterior_sample(x, epsilon=1) for _ in range(5)]
    assert all(abs(t - 0.3) < 0.05 for t in draws)


def test_audit_cases_run_in_the_battery() -> None:
    """The correct and broken variants run in tests/test_audit.py (dpkit.audit.CASES)."""
    assert {case.name for case in audit_cases()} <= set(CASES)



# --- Dirichlet–categorical ----------------------------------------------------------------


def test_simplex_grid_is_every_composition() -> None:
    grid = dirichlet_categorical_grid(3, 1, 10)
    c = np.rint(grid.theta * 10).astype(int)
    want = sorted(p for p in itertools.product(range(1, 9), repeat=3) if sum(p) == 10)
    assert [tuple(r) for r in c.tolist()] == want  # lexicographic, C(9, 2) = 36 points
    assert np.array_equal(grid.index, c - 1)
    big = dirichlet_categorical_grid(4, (1, 2, 3, 4), 64)
    assert big.theta.shape == (math.comb(63, 3), 4)
    assert np.allclose(big.theta.sum(axis=1), 1) and big.theta.min() == 1 / 64
    assert big.prior == (1, 2, 3, 4)


def test_simplex_log_terms_are_the_exact_float_logs() -> None:
    grid = dirichlet_categorical_grid(4, 1, 30)
    for c, level in enumerate(grid.levels.tolist(), start=1):
        assert Fraction(level, 1 << grid.shift) == Fraction(float(np.log(c / 30)))


def test_categorical_score_sensitivity_on_neighbours() -> None:
    """Every substitution x → y of one record moves every score by at most Δ, and some by
    exactly Δ = log(m − K + 1) (exact binary values); dropping a record (an out-of-domain
    value) moves the scores by −ℓ_x, whose range over the grid is Δ too."""
    grid = dirichlet_categorical_grid(3, 1, 20)
    assert abs(float(grid.sensitivity) - np.log(18)) < 1e-12
    ell = _ell(grid)
    counts = (4, 3, 2)

    def u(n: tuple[int, ...]) -> list[Fraction]:
        return [sum(nk * col[j] for nk, col in zip(n, ell, strict=True))
                for j in range(len(ell[0]))]

    base = u(counts)
    worst = Fraction(0)
    for x, y in itertools.permutations(range(3), 2):
        moved = list(counts)
        moved[x] -= 1
        moved[y] += 1
        worst = max(worst, max(abs(a - b) for a, b in zip(u(tuple(moved)), base, strict=True)))
    assert worst == grid.sensitivity
    for x in range(3):
        dropped = list(counts)
        dropped[x] -= 1
        f = [a - b for a, b in zip(u(tuple(dropped)), base, strict=True)]
        assert max(f) - min(f) == grid.sensitivity


def test_categorical_law_meets_the_privacy_map_on_neighbours() -> None:
    grid = dirichlet_categorical_grid(3, (2, 1, 1), 16)
    eps = 0.7
    counts = (6, 3, 1)
    p = posterior_law(grid, counts, eps)
    for x in range(3):
        for y in (*range(3), None):  # None: the record becomes out-of-domain (dropped)
            if y == x:
                continue
            moved = list(counts)
            moved[x] -= 1
            if y is not None:
                moved[y] += 1
            q = posterior_law(grid, moved, eps)
            assert np.max(np.abs(np.log(p) - np.log(q))) <= eps + 1e-9


def test_categorical_law_is_the_tempered_dirichlet_posterior() -> None:
    """posterior_law (integer scores) against Π θ_k^(α_k − 1 + t·n_k) in floats."""
    grid = dirichlet_categorical_grid(4, (1, 2, Fraction(1, 2), 3), 20)
    counts = (30, 5, 0, 12)
    t = 1 / float(make_selection(grid.sensitivity, 2).scale)
    log_w = np.log(grid.theta) @ (np.array([0, 1, -0.5, 2]) + t * np.array(counts))
    w = np.exp(log_w - log_w.max())
    assert np.allclose(posterior_law(grid, counts, 2), w / w.sum(), rtol=1e-9, atol=1e-15)


def _categorical_law_pvalue(broken: bool) -> float:
    """The module's own draw path (integer scores, exact sampler) on K = 3, m = 24 (253
    points); broken: twice the temperature's inverse (a colder sampler)."""
    grid = dirichlet_categorical_grid(3, (1, 2, 1), 24)
    counts = (9, 4, 2)
    selection = make_selection(grid.sensitivity / 2 if broken else grid.sensitivity, 1)
    draws = _draw(grid, counts, selection, size=40_000)
    return chi2_pvalue(np.asarray(draws), np.arange(253), posterior_law(grid, counts, 1))


def test_categorical_samples_follow_the_tempered_posterior() -> None:
    assert _categorical_law_pvalue(False) > FALSE_POSITIVE_RATE


def test_categorical_law_test_catches_a_colder_sampler() -> None:
    assert _categorical_law_pvalue(True) < FALSE_POSITIVE_RATE


def test_categorical_debit_is_the_declared_epsilon() -> None:
    f = PrivacyFilter(PureDP(2))
    theta = one_posterior_sample_categorical([0, 2, 2, 1, 7, -3], epsilon=Fraction(3, 4),
                                             categories=3, resolution=40, accountant=f)
    assert f.spent == PureDP(Fraction(3, 4))
    assert theta.shape == (3,) and np.isclose(theta.sum(), 1) and theta.min() >= 1 / 40
    assert np.allclose(theta * 40, np.rint(theta * 40))


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 0}, {"categories": 1}, {"categories": 2.0}, {"categories": 5000},
    {"prior": 0}, {"prior": (1, 1)}, {"prior": ("a", 1, 1)}, {"resolution": 2},
    {"resolution": 10_000}, {"resolution": 3.5}, {"x": [[0, 1]]}, {"x": [0.0, 1.0]},
    {"x": ["a", "b"]}, {"accountant": object()},
])
def test_categorical_bad_input_raises_before_any_debit(kwargs: dict) -> None:
    f = PrivacyFilter(PureDP(2))
    args = {"x": [0, 1, 2], "epsilon": 1, "categories": 3, "accountant": f} | kwargs
    with pytest.raises(DomainError):
        one_posterior_sample_categorical(args.pop("x"), **args)
    assert f.spent == PureDP(0)


def test_categorical_grid_cap_names_the_allowed_resolutions() -> None:
    with pytest.raises(DomainError, match=r"for K = 4 the resolution must be in \[4, 94\]"):
        dirichlet_categorical_grid(4, 1, 95)
    assert math.comb(93, 3) <= MAX_SIMPLEX < math.comb(94, 3)
    assert dirichlet_categorical_grid(4, 1, 94).theta.shape[0] == math.comb(93, 3)


def test_categorical_over_budget_is_refused() -> None:
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(BudgetExceededError):
        one_posterior_sample_categorical([0, 1], epsilon=2, categories=2, accountant=f)
    assert f.spent == PureDP(0)


def test_categorical_concentrates_and_drops_out_of_domain_values() -> None:
    """θ = (0.5, 0.3, 0.2) with as many out-of-domain records (3 and −1): they count in no
    category, so the draws stay near θ (were they clipped into 0 or 2, they would not)."""
    x = np.r_[np.repeat([0, 1, 2], [10_000, 6_000, 4_000]), np.repeat([3, -1], 10_000)]
    for _ in range(3):
        theta = one_posterior_sample_categorical(x, epsilon=1, categories=3)
        assert np.abs(theta - [0.5, 0.3, 0.2]).max() < 0.04


def test_exact_gaps_of_python_integers_are_exact() -> None:
    """The exponential sampler's arbitrary-size integer path (the grid's scores) equals its
    Fraction path."""
    big = [3 << 90, -(5 << 88) + 7, 1, 0]
    scale = Fraction(7, 3 << 60)
    numer, denom = exact_gaps(np.array(big, dtype=object), scale)
    ref, rden = exact_gaps(np.array([Fraction(v) for v in big], dtype=object), scale)
    assert [Fraction(a, denom) for a in numer] == [Fraction(b, rden) for b in ref]

