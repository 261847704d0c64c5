"""SmoothRandomForestClassifier (Fletcher & Islam 2017): the leaf label's exact law, the
smooth bound brute-forced on small count vectors, the neighbours' divergence against the
computed δ, fit/predict shapes, plan-time validation and the accountant.

Statistical tests: a chi-square goodness of fit at α = 1e-6 (the false-positive rate), each
paired with a broken law that it rejects."""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("sklearn")

from stats import chi2_pvalue  # noqa: E402

from dpkit.core.compose import PrivacyFilter  # noqa: E402
from dpkit.core.measures import ApproxDP  # noqa: E402
from dpkit.errors import DomainError, TrivialResultWarning  # noqa: E402
from dpkit.learn import SmoothRandomForestClassifier  # noqa: E402
from dpkit.learn import forest as fo  # noqa: E402
from dpkit.mechanisms import frontend  # noqa: E402

ALPHA = 1e-6
EPS, DELTA = Fraction(1), Fraction(1, 10**6)


def vectors(k: int, n: int) -> list[np.ndarray]:
    """Every count vector of k classes with each count ≤ n."""
    return [np.array(v) for v in itertools.product(range(n + 1), repeat=k)]


def neighbours(counts: np.ndarray) -> list[np.ndarray]:
    """The count vectors one added or removed record away."""
    out = []
    for i in range(counts.size):
        for step in (1, -1):
            y = counts.copy()
            y[i] += step
            if y[i] >= 0:
                out.append(y)
    return out


def modes(counts: np.ndarray) -> np.ndarray:
    return (counts == counts.max()).astype(int)


def brute_local_within(counts: np.ndarray, k: int) -> int:
    """max over y within k records of n, over y's neighbours z, of ‖u(y) − u(z)‖∞."""
    frontier, seen = [counts], {tuple(counts)}
    for _ in range(k):
        frontier = [z for y in frontier for z in neighbours(y) if tuple(z) not in seen]
        seen |= {tuple(z) for z in frontier}
    return max(int(np.abs(modes(np.array(y)) - modes(z)).max())
               for y in seen for z in neighbours(np.array(y)))


def hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.maximum(0, p - math.exp(eps) * q).sum())


# ----------------------------------------------------------------- the smooth bound
@pytest.mark.parametrize("k", [2, 3])
def test_local_sensitivity_within_matches_brute_force(k):
    for counts in vectors(k, 4):
        for dist in range(4):
            assert fo.local_sensitivity_within(counts, dist) == brute_local_within(counts, dist)


def test_smooth_bound_upper_bounds_every_distance():
    """S(n) ≥ r^k·A_k(n) for every k (NRS07 Def. 2.1 with r = e^{−β}); the paper's published
    e^{−ε·gap} (with β = ε) fails it: the check can fail."""
    ratio = fo.smooth_ratio(EPS, DELTA, 2)
    failures = 0
    for counts in vectors(2, 7) + vectors(3, 4):
        bound = fo.smooth_scale(counts, EPS, ratio)
        paper = fo.paper_scale(counts, EPS)
        for dist in range(9):
            need = ratio ** dist * fo.local_sensitivity_within(counts, dist)
            assert bound >= need
            failures += paper < Fraction(math.exp(-float(EPS) * dist)) * \
                fo.local_sensitivity_within(counts, dist)
    assert failures > 0


def test_smooth_bound_is_smooth():
    """S(n)·r ≤ S(y) for neighbours (β-smoothness, up to the relative 2^-39 of rounding S
    up; δ is computed on the scales as drawn, so privacy does not rest on it)."""
    ratio = fo.smooth_ratio(EPS, DELTA, 3)
    for counts in vectors(3, 5):
        for y in neighbours(counts):
            assert (fo.smooth_scale(counts, EPS, ratio) * ratio
                    <= fo.smooth_scale(y, EPS, ratio) * (1 + Fraction(1, 1 << 39)))


# ----------------------------------------------------------------- the leaf law
def test_leaf_law_matches_the_formula():
    ratio = fo.smooth_ratio(EPS, DELTA, 3)
    for counts in vectors(3, 3):
        law = fo.leaf_law(counts, EPS, ratio)
        s = float(fo.smooth_scale(counts, EPS, ratio))
        w = np.exp(float(EPS) * modes(counts) / (2 * s))
        np.testing.assert_allclose(law, w / w.sum(), rtol=1e-12)
        c = np.exp(float(EPS) * (counts - counts.max()))
        np.testing.assert_allclose(fo.leaf_law(counts, EPS, None), c / c.sum(), rtol=1e-12)


@pytest.mark.parametrize("k", [2, 3])
def test_neighbours_within_the_computed_delta(k):
    """Every neighbouring pair of small count vectors: H_ε(P_x ‖ P_y) ≤ δ(ε) (the module's
    theorem) for the smooth leaf and 0 (ratio ≤ e^ε) for the count leaf. The paper's own
    calibration exceeds δ on the same pairs: the check can fail."""
    ratio = fo.smooth_ratio(EPS, DELTA, k)
    delta = float(fo.leaf_delta(EPS, k, ratio=ratio))
    assert delta <= float(DELTA)
    worst_paper = 0.0
    for counts in vectors(k, 6 if k == 2 else 4):
        for y in neighbours(counts):
            assert hockey(fo.leaf_law(counts, EPS, ratio), fo.leaf_law(y, EPS, ratio),
                          float(EPS)) <= delta + 1e-15
            assert hockey(fo.leaf_law(counts, EPS, None), fo.leaf_law(y, EPS, None),
                          float(EPS)) <= 1e-15
            worst_paper = max(worst_paper, hockey(_paper_law(counts), _paper_law(y),
                                                  float(EPS)))
    assert worst_paper > 1e-3


def _paper_law(counts: np.ndarray) -> np.ndarray:
    w = np.exp(np.minimum(700, float(EPS) * modes(counts) / (2 * float(fo.paper_scale(counts,
                                                                                      EPS)))))
    return w / w.sum()


def test_leaf_delta_of_the_papers_calibration_is_large():
    scales = np.array([math.exp(-float(EPS) * g) for g in range(1, 40)])
    assert fo.leaf_delta(EPS, 2, scales=scales) > Fraction(1, 10)


def _drawn(counts: np.ndarray, scale: Fraction, n: int) -> np.ndarray:
    return np.asarray(frontend.select(fo.leaf_scores(counts, scale), 1, EPS, size=n).value)


def test_sampled_labels_follow_the_law():
    """50 000 exact draws (the kit's select, as fit draws) against the exact law; a draw at
    the paper's scale is rejected against the same law."""
    counts = np.array([3, 1, 1])
    ratio = fo.smooth_ratio(EPS, DELTA, 3)
    law = fo.leaf_law(counts, EPS, ratio)
    support = np.arange(3)
    good = _drawn(counts, fo.smooth_scale(counts, EPS, ratio), 50_000)
    assert chi2_pvalue(good, support, law) > ALPHA
    broken = _drawn(counts, fo.paper_scale(counts, EPS), 50_000)
    assert chi2_pvalue(broken, support, law) < ALPHA


# ----------------------------------------------------------------- the model
def _data(n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    x = np.linspace(0, 1, n * 3).reshape(n, 3)[np.argsort(np.arange(n) % 7)]
    return x, (x[:, 0] > 0.5).astype(int)


@pytest.mark.parametrize("leaf", fo.LEAF_RULES)
def test_fit_predict_shapes(leaf):
    x, y = _data()
    model = SmoothRandomForestClassifier(5, 3, epsilon=2, delta=1e-6, leaf=leaf, bounds=(0, 1),
                                         classes=[0, 1]).fit(x, y)
    proba = model.predict_proba(x[:10])
    assert proba.shape == (10, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    assert model.predict(x[:10]).shape == (10,)
    assert len(model.trees_) == 5 and model.trees_[0][2].shape == (8,)
    assert model.release_.noise


def test_paper_depth():
    assert fo.paper_depth(1) == 1
    assert fo.paper_depth(40) == fo.MAX_DEPTH  # capped
    for m in range(2, 24):
        d = fo.paper_depth(m)
        assert m * (1 - 1 / m) ** d <= m / 2 < m * (1 - 1 / m) ** (d - 1)


@pytest.mark.parametrize("kwargs", [
    {"bounds": None}, {"epsilon": 0}, {"n_estimators": 0}, {"max_depth": 0},
    {"max_depth": 17}, {"leaf": "laplace"}, {"leaf": "smooth_sensitivity", "delta": None},
    {"leaf": "smooth_sensitivity", "delta": 1}, {"classes": None}])
def test_validation_before_the_debit(kwargs):
    x, y = _data(50)
    budget = PrivacyFilter(ApproxDP(10, Fraction(1, 1000)))
    params = {"epsilon": 1, "delta": 1e-6, "bounds": (0, 1), "classes": [0, 1],
              "accountant": budget, **kwargs}
    with pytest.raises(DomainError):
        SmoothRandomForestClassifier(**params).fit(x, y)
    assert budget.spent.epsilon == 0


def test_smooth_fit_debits_epsilon_delta_once():
    x, y = _data(200)
    budget = PrivacyFilter(ApproxDP(10, Fraction(1, 1000)))
    SmoothRandomForestClassifier(3, 2, epsilon=1, delta=1e-6, leaf="smooth_sensitivity",
                                 bounds=(0, 1), classes=[0, 1], accountant=budget).fit(x, y)
    spent = budget.spent  # δ: the float 1e-6 rounded down to a rational
    assert spent.epsilon == 1 and 0.999e-6 < spent.delta <= Fraction(1, 10**6)


def test_constant_forest_warns():
    """Only label 0 present and ε = 50: both leaves of a depth-1 tree hold rows (x ∈ {0, 1},
    threshold in [0, 1)), so each is labelled 0 but with probability ≤ e^-50, and the
    constant classifier is announced."""
    x = np.repeat([[0.0], [1.0]], 200, axis=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SmoothRandomForestClassifier(1, 1, epsilon=50, bounds=(0, 1),
                                     classes=[0, 1]).fit(x, np.zeros(400, dtype=int))
    assert any(issubclass(w.category, TrivialResultWarning) for w in caught)
