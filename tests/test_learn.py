"""dpkit.learn: declared bounds and labels, budgets debited before fitting, the noise each
model adds calibrated to its stated sensitivity and ε, and models that learn."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("sklearn")

from kit_spies import spy_noisy, spy_select  # noqa: E402
from learn_spies import laplace_noise, patch_laplace_noise, spy_laplace_noise  # noqa: E402

from dpkit.core.compose import PrivacyFilter  # noqa: E402
from dpkit.core.measures import PureDP  # noqa: E402
from dpkit.errors import BudgetExceededError, DomainError  # noqa: E402
from dpkit.learn import (  # noqa: E402
    GaussianNB,
    LogisticRegression,
    _privacy,  # noqa: E402
)
from dpkit.learn import naive_bayes as NB  # noqa: E402, N812


def _data(n=4000):
    rng = np.random.default_rng(3)  # test input
    y = rng.integers(0, 2, n)
    x = rng.normal(0, 1, (n, 3)) + 1.5 * y[:, None]
    return np.clip(x, -4, 6), np.where(y == 1, "yes", "no")


def test_declarations_are_required_and_nothing_is_spent():
    x, y = _data()
    acct = PrivacyFilter(PureDP(1))
    for model in (GaussianNB(1, classes=["no", "yes"], accountant=acct),
                  GaussianNB(1, bounds=(-4, 6), accountant=acct),
                  LogisticRegression(1, classes=["no", "yes"], accountant=acct),
                  LogisticRegression(1, data_norm=5, accountant=acct)):
        with pytest.raises(DomainError):
            model.fit(x, y)
    with pytest.raises(DomainError, match="declared classes"):
        GaussianNB(1, bounds=(-4, 6), classes=["no", "maybe"], accountant=acct).fit(x, y)
    assert acct.spent == PureDP(0)


def test_accountant_is_debited_before_fitting_and_overrun_fits_nothing():
    x, y = _data()
    acct = PrivacyFilter(PureDP(1))
    GaussianNB(Fraction(3, 4), bounds=(-4, 6), classes=["no", "yes"], accountant=acct).fit(x, y)
    assert acct.spent == PureDP(Fraction(3, 4))
    late = GaussianNB(Fraction(1, 2), bounds=(-4, 6), classes=["no", "yes"], accountant=acct)
    with pytest.raises(BudgetExceededError):
        late.fit(x, y)
    assert not hasattr(late, "theta_") and acct.spent == PureDP(Fraction(3, 4))


def test_naive_bayes_noise_matches_its_sensitivities_and_sums_to_epsilon(monkeypatch):
    calls = spy_laplace_noise(monkeypatch, NB, _privacy)
    x, y = _data()
    GaussianNB(1, bounds=([-4, -4, -4], [6, 6, 6]), classes=["no", "yes"]).fit(x, y)
    assert len(calls) == 1 + 2 * 3 and sum(c[2] for c in calls) == 1
    assert calls[0][1] == 1  # class counts
    assert all(c[1] == 5 for c in calls[1::2])  # sums around the midpoint: (u − l)/2
    # squared deviations from a mean inside [−4, 6]: at least 25, at most 100
    assert all(25 <= c[1] <= 100 for c in calls[2::2])


def test_logistic_noise_scale_is_c_times_the_row_bound():
    x, y = _data()
    model = LogisticRegression(2, data_norm=3, classes=["no", "yes"], C=0.5,
                               method="output").fit(x, y)  # auto: objective (issue 34)
    (row,) = model.release_.noise  # the fit records the vector mechanism it drew through
    s = 3 / np.sqrt(x.shape[1])  # the default intercept_scaling R/√d
    delta = 0.5 * np.sqrt(3 ** 2 + s ** 2)
    assert row.name == "vector Laplace (grid)" and float(row.sensitivity) >= delta
    # calibrated: at least Δ₂/ε, at most a hair more (grid rounding)
    assert delta / 2 <= float(row.scale) <= delta / 2 * (1 + 1e-4)


def test_models_learn_at_a_large_epsilon():
    x, y = _data()
    nb = GaussianNB(50, bounds=(-4, 6), classes=["no", "yes"]).fit(x, y)
    lr = LogisticRegression(50, bounds=(-4, 6), classes=["no", "yes"], C=0.05,
                            method="output").fit(x, y)
    auto = LogisticRegression(50, bounds=(-4, 6), classes=["no", "yes"]).fit(x, y)
    for model in (nb, lr, auto):
        assert (model.predict(x) == y).mean() > 0.85
        p = model.predict_proba(x[:5])
        assert p.shape == (5, 2) and np.allclose(p.sum(axis=1), 1)


def test_kmeans_budget_schedules_and_noise(monkeypatch):
    from dpkit.learn import cluster as KM  # noqa: N812

    for schedule in ("fixed", "halving"):
        parts = KM.budget_schedule(Fraction(1), 4, schedule)
        assert len(parts) == 4 and sum(parts) == 1 and all(p > 0 for p in parts)
    with pytest.raises(DomainError):
        KM.budget_schedule(Fraction(1), 3, "doubling")
    calls = []
    real = laplace_noise

    def spy(values, sensitivity, epsilon):
        calls.append((Fraction(sensitivity), Fraction(epsilon)))
        return real(values, sensitivity, epsilon)

    patch_laplace_noise(monkeypatch, spy)
    x, _ = _data()
    acct = PrivacyFilter(PureDP(2))
    with pytest.raises(DomainError):
        KM.KMeans(3, 1, accountant=acct).fit(x)
    assert acct.spent == PureDP(0)
    KM.KMeans(3, 1, bounds=(-4, 6), max_iter=4, schedule="halving", init="sphere_packing",
              accountant=acct).fit(x)
    assert acct.spent == PureDP(1) and len(calls) == 4 * (3 + 1)
    assert sum(e for _, e in calls) == 1 and {s for s, _ in calls} == {1, 5}


def test_kmeans_finds_separated_clusters_at_a_large_epsilon():
    from dpkit.learn import KMeans

    rng = np.random.default_rng(4)  # test input
    centres = np.array([[-3.0, -3.0], [3.0, 3.0], [-3.0, 3.0]])
    x = np.concatenate([c + rng.normal(0, 0.3, (2000, 2)) for c in centres])
    # the true centres give ≈ 6000·2·0.09 = 1080; a merged pair costs > 6000. A random
    # data-independent start ends in a bad local optimum in 38% of 200 runs: the best of
    # 20 misses with probability < 0.45^20 ≈ 1e-7
    best = min(KMeans(3, 100, bounds=(-5, 5), max_iter=8).fit(x).inertia(x)
               for _ in range(20))
    assert best < 1500


def test_pca_debits_in_the_accountants_measure_and_finds_the_main_axis():
    from dpkit.core.measures import ZCDP, ApproxDP
    from dpkit.errors import MeasureError
    from dpkit.learn.decomposition import PCA

    rng = np.random.default_rng(6)  # test input: variance 9 along (1, 1)/√2, 0.25 across
    z = rng.normal(0, 1, (20000, 2)) * [3.0, 0.5]
    x = np.clip(z @ (np.array([[1, 1], [-1, 1]]) / np.sqrt(2)), -10, 10)
    with pytest.raises(DomainError):
        PCA(1, 1).fit(x)
    pure = PrivacyFilter(PureDP(10))
    with pytest.raises(MeasureError):
        PCA(1, 1, bounds=(-10, 10), accountant=pure).fit(x)
    assert pure.spent == PureDP(0)
    approx = PrivacyFilter(ApproxDP(5, Fraction(1, 1000)))
    p = PCA(1, 2, 1e-6, bounds=(-10, 10), accountant=approx).fit(x)
    assert approx.spent.epsilon == 2 and approx.spent.delta <= Fraction(1, 10 ** 6)
    zc = PrivacyFilter(ZCDP(1))
    PCA(2, 2, 1e-6, bounds=(-10, 10), accountant=zc).fit(x)
    assert Fraction(0) < zc.spent.rho < Fraction(2)
    # the noise on XᵀX (σ ≈ 200·√(1/(2ρ)) ≪ the gap 20000·(9 − 0.25)) cannot swap the axes
    assert abs(abs(p.components_[0] @ (np.array([1, 1]) / np.sqrt(2))) - 1) < 1e-3
    assert p.transform(x[:3]).shape == (3, 1)


def test_standard_scaler_spends_epsilon_and_standardises():
    from dpkit.learn import StandardScaler

    rng = np.random.default_rng(8)  # test input
    x = np.clip(rng.normal([10.0, -2.0], [3.0, 0.5], (50000, 2)), [-10, -5], [30, 1])
    acct = PrivacyFilter(PureDP(2))
    with pytest.raises(DomainError):
        StandardScaler(1, accountant=acct).fit(x)
    s = StandardScaler(1, bounds=([-10, -5], [30, 1]), accountant=acct).fit(x)
    assert acct.spent == PureDP(1)
    # Laplace scales over 50,000 rows at ε = 0.95/4 per release: means ≤ 0.0017 (0.05 is
    # 30 scales), variances 0.034 and 0.0008 (10% of the scale is ≥ 56 scales): a miss
    # has probability far below 1e-6
    assert np.allclose(s.mean_, [10, -2], atol=0.05)
    assert np.allclose(s.scale_, [3, 0.5], rtol=0.1)
    assert abs(s.transform(x).mean()) < 0.05


def test_categorical_nb_one_release_at_sensitivity_d_plus_one(monkeypatch):
    from dpkit.learn import CategoricalNB

    calls = spy_laplace_noise(monkeypatch, NB)
    rng = np.random.default_rng(7)  # test input: feature 0 copies the label 90% of the time
    y = rng.integers(0, 2, 5000)
    x = np.column_stack([np.where(rng.random(5000) < 0.9, y, 1 - y),
                         rng.integers(0, 3, 5000)]).astype(object)
    x[:, 0] = np.where(x[:, 0] == 1, "a", "b")
    cats = [["a", "b"], [0, 1, 2]]
    with pytest.raises(DomainError, match="not declared"):
        CategoricalNB(1, [["a"], [0, 1, 2]], [0, 1]).fit(x, y)
    model = CategoricalNB(5, cats, [0, 1]).fit(x, y)
    assert calls == [(2 + 2 * 2 + 2 * 3, Fraction(3), Fraction(5))]
    assert (model.predict(x) == np.where(x[:, 0] == "a", 1, 0)).mean() > 0.99
    assert np.allclose(model.predict_proba(x[:4]).sum(axis=1), 1)


def test_candidate_supports_match_brute_force():
    import itertools

    from dpkit.learn.itemsets import candidate_supports, incidence

    rng = np.random.default_rng(9)  # test input
    tx = [list(np.flatnonzero(rng.random(7) < 0.4)) for _ in range(300)]
    sets, counts = candidate_supports(incidence(tx, list(range(7)), strict=False), 3)
    assert len(sets) == 7 + 21 + 35
    for s, c in zip(sets, counts, strict=True):
        assert c == sum(set(s) <= set(t) for t in tx)
    assert sorted(sets) == sorted(c for r in (1, 2, 3)
                                  for c in itertools.combinations(range(7), r))


def test_top_k_itemsets_budget_and_recall(monkeypatch):
    from dpkit.learn import itemsets as IS  # noqa: N812

    seen = {"scales": [], "laplace": []}

    def expo(scores, scale, k):  # peeling: k rounds at the per-pick temperature
        seen["scales"].extend([scale] * k)

    def lap(values, sensitivity, epsilon):
        seen["laplace"].append((np.asarray(values).size, Fraction(sensitivity),
                                Fraction(epsilon)))

    spy_select(monkeypatch, expo)
    spy_noisy(monkeypatch, lap)
    rng = np.random.default_rng(10)  # test input: items 0–3 in 90% of transactions, rest 10%
    tx = [[i for i in range(12) if rng.random() < (0.9 if i < 4 else 0.1)]
          for _ in range(4000)]
    acct = PrivacyFilter(PureDP(1))
    out = IS.top_k_itemsets(tx, range(12), 5, 1, max_size=2, accountant=acct)
    assert acct.spent == PureDP(1)
    # 5 rounds at ε/(2k) = 1/10 each, monotone scores: scale Δ/ε_round = 10
    assert seen["scales"] == [Fraction(10)] * 5
    assert seen["laplace"] == [(5, Fraction(5), Fraction(1, 2))]
    truth = IS.exact_top_k(tx, range(12), 5, max_size=2)
    # the four singletons (≈ 3600) lead every pair (≤ ≈ 3240) by ≈ 360 counts at scale 10
    # (relative weight e^-36), and six pairs tie for fifth place: the false-negative rate is
    # 0 or 0.2 except with probability < 1e-12
    assert IS.false_negative_rate(out.itemsets, truth) <= 0.2
    lap_out = IS.top_k_itemsets(tx, range(12), 5, 1, max_size=2, method="laplace")
    assert len(lap_out.itemsets) == 5 and lap_out.supports.shape == (5,)
    with pytest.raises(DomainError):
        IS.top_k_itemsets(tx, range(12), 5, 1, method="gumbel")
    with pytest.raises(DomainError):
        IS.top_k_itemsets(tx, range(200), 5, 1, max_size=3, max_candidates=1000)


def test_linear_regression_sensitivities_and_fit(monkeypatch):
    from dpkit.learn import linear as LIN  # noqa: N812

    calls = spy_laplace_noise(monkeypatch, LIN)
    rng = np.random.default_rng(11)  # test input: y = 2·x0 − x1 + 3 + small noise
    x = rng.uniform(-1, 1, (20000, 2))
    y = np.clip(2 * x[:, 0] - x[:, 1] + 3 + rng.normal(0, 0.1, 20000), -2, 8)
    with pytest.raises(DomainError):
        LIN.LinearRegression(1, bounds=(-1, 1)).fit(x, y)
    model = LIN.LinearRegression(20, bounds=(-1, 1), y_bounds=(-2, 8), alpha=0.1).fit(x, y)
    # h = (1, 1, 1) with the constant: Σ_{i≤j} h_i h_j = 6; Σ h_j·h_y = 3·5 = 15
    assert calls == [(6, Fraction(6), Fraction(10)), (3, Fraction(15), Fraction(10))]
    # noise on the statistics ≈ 6/10 and 15/10 against sums of ~6,700 (x²) and 20,000:
    # coefficients within 0.05 except with probability far below 1e-6
    assert np.allclose(model.coef_, [2, -1], atol=0.05)
    assert abs(model.intercept_ - 3) < 0.05
    assert model.score(x, y) > 0.95


def test_random_forest_structure_is_data_free_and_leaves_get_their_share(monkeypatch):
    from dpkit.learn import tree as TR  # noqa: N812

    calls = spy_laplace_noise(monkeypatch, TR)
    x, y = _data()
    acct = PrivacyFilter(PureDP(1))
    with pytest.raises(DomainError):
        TR.RandomForestClassifier(5, 3, 1, classes=["no", "yes"], accountant=acct).fit(x, y)
    assert acct.spent == PureDP(0) and not calls
    model = TR.RandomForestClassifier(40, 4, 1, bounds=(-4, 6), classes=["no", "yes"],
                                      accountant=acct).fit(x, y)
    assert acct.spent == PureDP(1)
    assert calls == [(2 ** 4 * 2, Fraction(1), Fraction(1, 40))] * 40
    # 3 informative features shifted by 1.5σ: a forest of random splits separates them
    assert (model.predict(x) == y).mean() > 0.75
    assert np.allclose(model.predict_proba(x[:3]).sum(axis=1), 1)


def test_linear_regression_default_ridge_scales_with_the_noise(monkeypatch):
    """With the noise switched off (a spy), the fit equals the ridge solve at the documented
    default λ = ½·(2Δ_XX/ε)·√(d + 1); a fixed λ = 1 (the old default, near-singular under
    noise at small ε) gives another answer."""
    import math

    import dpkit.learn.linear as LIN  # noqa: N812

    patch_laplace_noise(monkeypatch, lambda values, sensitivity, epsilon: values)
    x = np.column_stack([np.linspace(0, 1, 200), np.linspace(0, 1, 200) ** 2])
    y = 3 * x[:, 0] - x[:, 1] + 0.5
    eps = 0.1
    rows = np.column_stack([x - 0.5, np.ones(200)])
    h = np.array([0.5, 0.5, 1.0])
    sens_xx = float(np.sum(np.outer(h, h)[np.triu_indices(3)]))
    ridge = 0.5 * sens_xx / (eps / 2) * math.sqrt(3)
    w = np.linalg.solve(rows.T @ rows + ridge * np.eye(3), rows.T @ (y - 0.0))
    model = LIN.LinearRegression(eps, bounds=(0, 1), y_bounds=(-5, 5)).fit(x, y)
    np.testing.assert_allclose(model.coef_, w[:2], rtol=1e-9)
    fixed = LIN.LinearRegression(eps, bounds=(0, 1), y_bounds=(-5, 5), alpha=1.0).fit(x, y)
    assert not np.allclose(fixed.coef_, w[:2], rtol=1e-3)
    with pytest.raises(DomainError):
        LIN.LinearRegression(eps, bounds=(0, 1), y_bounds=(-5, 5), alpha=-1).fit(x, y)


def test_exact_sums_stay_within_the_bound_and_are_exact():
    """The per-group sums of grid-cut values equal the exact rational sums (so the released
    sum is a sum of per-record values within the declared bound); a plain float sum of the
    same values is not exact (the broken variant the helper replaces)."""
    from dpkit.learn._privacy import exact_sums

    bound = 49999.5
    values = np.concatenate([np.full(1000, 0.1), [bound, -bound, bound * (1 + 2 ** -52)],
                             np.linspace(-bound, bound, 997)])
    groups = np.zeros(values.size, dtype=np.int64)
    got = exact_sums(groups, values, bound, 1)[0]
    unit = 2.0 ** (math.ceil(math.log2(bound)) - 20)
    cut = [Fraction(float(np.trunc(v / unit) * unit)) for v in values]
    assert all(abs(c) <= Fraction(bound) for c in cut)
    assert Fraction(got) == sum(cut)
    assert Fraction(float(np.bincount(groups, values)[0])) != sum(Fraction(v) for v in values)
    with pytest.raises(DomainError):
        exact_sums(np.zeros(1, dtype=np.int64), np.broadcast_to(np.float64(0), (1 << 32,)),
                   1.0, 1)
