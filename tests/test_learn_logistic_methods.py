"""LogisticRegression(method="functional"): declarations checked before anything is spent,
the released statistics' L1 sensitivity on neighbouring datasets, the noise on them
calibrated to that sensitivity at ε/2 each, and a model that learns.

Every statistical test here rejects a correct implementation with probability at most
FALSE_POSITIVE_RATE = 1e-6 and is paired with a deliberately broken variant it catches.
Randomness in the *inputs* is seeded; the production noise never is.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import numpy as np
import pytest

pytest.importorskip("sklearn")

from learn_spies import (  # noqa: E402
    grid_mechanism,
    laplace_noise,
    patch_laplace_noise,
    spy_laplace_noise,
)
from scipy import stats  # noqa: E402
from sklearn.base import clone  # noqa: E402

from dpkit.core.compose import PrivacyFilter  # noqa: E402
from dpkit.core.measures import PureDP  # noqa: E402
from dpkit.errors import BudgetExceededError, DomainError  # noqa: E402
from dpkit.learn import LogisticRegression  # noqa: E402
from dpkit.learn import logistic as L  # noqa: E402, N812

FALSE_POSITIVE_RATE = 1e-6

# 3 numeric columns in [0, 10], then one-hot groups of 4 and 3 columns
GROUPS = [[3, 4, 5, 6], [7, 8, 9]]
D = 10
LOWER = np.array([0.0] * 3 + [0.0] * 7)
UPPER = np.array([10.0] * 3 + [1.0] * 7)


def _data(n=3000, seed=5):
    """Separable by a margin: y = 1 iff x₀ − 5 + 3·[group 0 is category 0] − 3·[group 1
    is category 2] > 0, with |that| ≥ 1 (points inside the margin are dropped)."""
    rng = np.random.default_rng(seed)  # test input, not noise
    num = rng.uniform(0, 10, (n, 3))
    a, b = rng.integers(0, 4, n), rng.integers(0, 3, n)
    cats = np.zeros((n, 7))
    cats[np.arange(n), a] = 1
    cats[np.arange(n), 4 + b] = 1
    score = num[:, 0] - 5 + 3 * (a == 0) - 3 * (b == 2)
    keep = np.abs(score) >= 1
    return np.column_stack([num, cats])[keep], np.where(score[keep] > 0, "yes", "no")


def _model(eps=1.0, **kw):
    kw.setdefault("bounds", (LOWER, UPPER))
    kw.setdefault("one_hot", GROUPS)
    kw.setdefault("method", "functional")
    return LogisticRegression(eps, classes=["no", "yes"], **kw)


# -- declarations and bad input: DomainError, nothing spent ------------------------------

def test_bad_declarations_and_input_raise_before_anything_is_spent():
    x, y = _data(400)
    acct = PrivacyFilter(PureDP(1))
    two_hot = x.copy()
    two_hot[0, 3:7] = [1, 1, 0, 0]
    fractional = x.copy()
    fractional[1, 7:10] = [0.5, 0.5, 0]
    nan = x.copy()
    nan[2, 1] = np.nan
    bad_bounds = (LOWER, np.where(np.arange(D) == 4, 2.0, UPPER))
    cases = [
        (_model(bounds=None, accountant=acct), x, y, "bounds"),
        (_model(one_hot=[[3, 4], [4, 5]], accountant=acct), x, y, "two groups"),
        (_model(one_hot=[[3, 99]], accountant=acct), x, y, "indices"),
        (_model(bounds=bad_bounds, accountant=acct), x, y, "group 0.*bounds"),
        (_model(accountant=acct), two_hot, y, "group 0"),
        (_model(accountant=acct), fractional, y, "group 1"),
        (_model(accountant=acct), nan, y, "contains NaN"),
        (_model(accountant=acct), x, np.where(y == "yes", "maybe", y), "declared classes"),
        (_model(accountant=acct), x[:, :3], y, None),  # one-hot indices out of range
        (_model(accountant=acct, method="objective"), x, y, "method"),
        (_model(accountant=acct, C=-1), x, y, "C must"),
        (LogisticRegression(1, data_norm=1, classes=["no", "yes"], one_hot=GROUPS,
                            accountant=acct), x, y, "one_hot"),
    ]
    for model, xx, yy, match in cases:
        with pytest.raises(DomainError, match=match):
            model.fit(xx, yy)
    assert acct.spent == PureDP(0)
    # the broken variant: a group with two 1s would break the sensitivity bound below
    phi = np.column_stack([two_hot, np.ones(len(x))])[:1]
    assert np.sum(np.abs(L._functional_statistics(
        phi, np.ones(1), L._released_pairs(D, [np.array(g) for g in GROUPS]))[0])) > \
        L.functional_sensitivities(2, 3)[0]


def test_accountant_is_debited_before_any_statistic_and_overrun_fits_nothing(monkeypatch):
    x, y = _data(400)
    acct = PrivacyFilter(PureDP(1))
    spent_at = []
    real = L._functional_statistics

    def spy(*args):
        spent_at.append(acct.spent)
        return real(*args)

    monkeypatch.setattr(L, "_functional_statistics", spy)
    _model(Fraction(3, 4), accountant=acct).fit(x, y)
    assert spent_at == [PureDP(Fraction(3, 4))]
    late = _model(Fraction(1, 2), accountant=acct)
    with pytest.raises(BudgetExceededError):
        late.fit(x, y)
    assert not hasattr(late, "coef_") and len(spent_at) == 1
    assert acct.spent == PureDP(Fraction(3, 4))


# -- sensitivity of the released statistics on neighbouring datasets ----------------------

def _extreme_rows(groups, numeric, d):
    """Rows at the corners of the declared domain: numeric coordinates ±1 (after the map),
    every combination of one category or none per group, y ∈ {0, 1}."""
    rows = []
    for signs in product([-1.0, 1.0], repeat=len(numeric)):
        for picks in product(*[[None, *g] for g in groups]):
            phi = np.zeros(d + 1)
            phi[numeric] = signs
            for j in picks:
                if j is not None:
                    phi[j] = 1.0
            phi[d] = 1.0
            rows.append(phi)
    return rows


def _max_neighbour_change(statistics, groups, numeric, d):
    """The largest L1 change of each released statistic when one row is added to a
    dataset (add/remove neighbours), over the extreme rows and a random dataset."""
    rng = np.random.default_rng(11)  # test input
    base_rows = rng.choice(_extreme_rows(groups, numeric, d), 50)
    base_t = rng.integers(0, 2, 50).astype(float)
    pairs = L._released_pairs(d, groups)
    g0, u0 = statistics(np.array(base_rows), base_t, pairs)
    worst_g = worst_u = 0.0
    for row in _extreme_rows(groups, numeric, d):
        for label in (0.0, 1.0):
            g1, u1 = statistics(np.vstack([base_rows, row]), np.append(base_t, label), pairs)
            worst_g = max(worst_g, float(np.abs(g1 - g0).sum()))
            worst_u = max(worst_u, float(np.abs(u1 - u0).sum()))
    return worst_g, worst_u


def test_released_statistics_have_the_stated_sensitivity_and_it_is_tight():
    groups, numeric = L._layout(D, GROUPS)
    sens_g, sens_u = L.functional_sensitivities(len(groups), numeric.size)
    assert (sens_g, sens_u) == (6 * 7 // 2 - 2, Fraction(3))  # a = 2 + 3 + 1 = 6
    assert L.functional_sensitivities(8, 5) == (97, Fraction(7))  # Adult, one-hot
    worst_g, worst_u = _max_neighbour_change(L._functional_statistics, groups, numeric, D)
    assert worst_g == sens_g and worst_u == sens_u  # within the bound, and attained

    def broken(phi, t, pairs):  # releases the one-hot diagonals, which the bound omits
        i, j = np.triu_indices(phi.shape[1])
        return (phi.T @ phi)[i, j], phi.T @ (t - 0.5)

    assert _max_neighbour_change(broken, groups, numeric, D)[0] > sens_g


def test_features_stay_in_the_declared_domain_whatever_the_input():
    rng = np.random.default_rng(2)  # test input
    x = rng.uniform(-100, 100, (500, D))
    x[:, 3:] = 0
    x[np.arange(500), 3 + rng.integers(0, 4, 500)] = 1
    phi = _model()._features(x, strict=True)
    assert np.all(np.abs(phi) <= 1) and np.all(phi[:, -1] == 1)
    assert np.all(phi[:, :3] * 2**L.GRID_BITS == np.round(phi[:, :3] * 2**L.GRID_BITS))


# -- the noise on the releases --------------------------------------------------------------

def _released_noise(monkeypatch, wrap=None, fits=40):
    """The noise each fit added to G (exact statistic subtracted), pooled over fits."""
    x, y = _data(600)
    captured: list[np.ndarray] = []
    exact: list[np.ndarray] = []
    real_stats = L._functional_statistics
    real_noise = wrap or laplace_noise

    def stats_spy(*args):
        out = real_stats(*args)
        exact.append(out[0])
        return out

    def noise_spy(values, sensitivity, epsilon):
        out = real_noise(values, sensitivity, epsilon)
        if len(captured) < len(exact):
            captured.append(out - values)
        return out

    monkeypatch.setattr(L, "_functional_statistics", stats_spy)
    patch_laplace_noise(monkeypatch, noise_spy)
    for _ in range(fits):
        _model(1.0).fit(x, y)
    return np.concatenate(captured), exact[0].size


def _noise_pvalue(noise, size):
    sens_g = L.functional_sensitivities(2, 3)[0]
    padded = 1 << max(size - 1, 0).bit_length()
    scale = float(grid_mechanism(Fraction(sens_g), Fraction(1, 2), padded).scale)
    return float(stats.kstest(noise, "laplace", args=(0, scale)).pvalue)


def test_noise_on_the_gram_is_laplace_at_its_sensitivity_over_half_epsilon(monkeypatch):
    noise, size = _released_noise(monkeypatch)
    assert _noise_pvalue(noise, size) > FALSE_POSITIVE_RATE


def test_noise_test_catches_a_model_that_spends_epsilon_on_each_release(monkeypatch):
    real = laplace_noise
    noise, size = _released_noise(monkeypatch, lambda v, s, e: real(v, s, 2 * e))
    assert _noise_pvalue(noise, size) < FALSE_POSITIVE_RATE


def test_the_two_releases_compose_to_epsilon(monkeypatch):
    calls = spy_laplace_noise(monkeypatch, L)
    x, y = _data(400)
    _model(Fraction(3, 10)).fit(x, y)
    (n_g, s_g, e_g), (n_u, s_u, e_u) = calls
    pairs = L._released_pairs(D, [np.array(g) for g in GROUPS])
    assert n_g == pairs[0].size == 66 - 10 - 6 and n_u == D + 1
    assert (s_g, s_u) == (19, 3) and e_g + e_u == Fraction(3, 10) and e_g == e_u


# -- it learns --------------------------------------------------------------------------------

def test_separable_data_is_learned_at_large_epsilon():
    """At ε = 10⁴ the Laplace scales are b_G = 19/5000 and b_u = 3/5000 against sums of
    order n = 2,300: P(a noise draw > 1) < 66·e^-260, so failure means a wrong fit."""
    x, y = _data()
    xt, yt = _data(2000, seed=9)
    model = _model(10_000, C=1e3).fit(x, y)
    assert (model.predict(xt) == yt).mean() >= 0.95
    assert set(model.predict(xt)) == {"no", "yes"}
    proba = model.predict_proba(xt)
    assert proba.shape == (len(xt), 2) and np.allclose(proba.sum(1), 1)
    # broken variant: a sign error in the linear coefficients learns the opposite rule
    real = L._functional_statistics
    try:
        L._functional_statistics = lambda *a: (real(*a)[0], -real(*a)[1])
        bad = _model(10_000, C=1e3).fit(x, y)
    finally:
        L._functional_statistics = real
    assert (bad.predict(xt) == yt).mean() <= 0.05


def test_default_ridge_keeps_small_epsilon_at_the_majority_class():
    """ε = 0.01 on a 90/10 problem: the intercept comes from the noisy class balance, not
    from a noisy weight that can flip every prediction. Statistic: the mean, over 100 fits,
    of the share of rows predicted "no" (each share in [0, 1]). Per-fit means measured over
    30 fits: 0.99 (correct) and 0.22 (broken variant below). Hoeffding: the mean of 100
    crosses 0.5 with probability ≤ exp(−2·100·0.28²) < 2e-7 ≤ FALSE_POSITIVE_RATE, either
    way."""
    rng = np.random.default_rng(4)  # test input
    n = 20_000
    x = np.column_stack([rng.uniform(0, 10, (n, 3)), np.zeros((n, 7))])
    x[np.arange(n), 3 + rng.integers(0, 4, n)] = 1
    x[np.arange(n), 7 + rng.integers(0, 3, n)] = 1
    y = np.where(rng.uniform(size=n) < 0.1, "yes", "no")

    def share_no():
        return np.mean([(_model(0.01).fit(x, y).predict(x) == "no").mean()
                        for _ in range(100)])

    assert share_no() > 0.5
    # broken variant: the class balance's sign flipped makes the minority the default
    real = L._functional_statistics
    flip = np.append(np.ones(D), -1.0)
    try:
        L._functional_statistics = lambda *a: (real(*a)[0], real(*a)[1] * flip)
        assert share_no() < 0.5
    finally:
        L._functional_statistics = real


def test_auto_is_the_default_and_clone_keeps_the_method():
    assert LogisticRegression().method == "auto"
    assert LogisticRegression(bounds=(0, 1))._method() == "functional"
    assert LogisticRegression(data_norm=1.0)._method() == "objective"  # issue 34
    assert LogisticRegression(data_norm=1.0, n_hint=100)._method() == "output"  # the old form
    model = clone(_model(0.5))
    assert model.method == "functional" and model.one_hot == GROUPS
