"""The generic private learner (dpkit.learn.hypothesis): vectorised mistakes against brute
force, the exact law of the choice, the neighbour ratio, plan-time checks, the bound, and the
learning guarantee at the bound's n.

False-positive rates: the χ² law test rejects a correct sampler with probability ≤ 1e-6
(tests/stats.py) and is paired with the broken variant (Δu halved) it must reject; the
learning check's one-sided binomial test rejects a learner meeting the theorem with
probability ≤ 1e-6 and is paired with a learner that ignores the data. Everything else is
deterministic (enumeration)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

pytest.importorskip("sklearn")

from stats import FALSE_POSITIVE_RATE, chi2_pvalue  # noqa: E402

import dpkit as dp  # noqa: E402
from dpkit.core import rng  # noqa: E402
from dpkit.core.compose import PrivacyFilter  # noqa: E402
from dpkit.errors import DomainError  # noqa: E402
from dpkit.learn import PrivateLearner  # noqa: E402
from dpkit.learn import hypothesis as hyp  # noqa: E402

GEN = np.random.default_rng(37)  # test inputs only, never production noise

CLASSES = [
    (hyp.Thresholds([0, 1, 2.5, 3]), lambda n: GEN.integers(-1, 5, (n, 1)).astype(float)),
    (hyp.Intervals([0, 1, 2.5, 3]), lambda n: GEN.integers(-1, 5, (n, 1)).astype(float)),
    (hyp.Conjunctions(3), lambda n: GEN.integers(0, 2, (n, 3)).astype(float)),
    (hyp.Stumps([[0, 1], [0.5, 2, 3]]), lambda n: GEN.integers(-1, 4, (n, 2)).astype(float)),
]


def brute_mistakes(h: hyp.HypothesisClass, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array([int((h.predict(i, x) != y).sum()) for i in range(h.size)])


@pytest.mark.parametrize("h, draw", CLASSES, ids=lambda c: type(c).__name__)
def test_vectorised_mistakes_match_brute_force(h, draw):
    for n in (0, 1, 7, 40):
        x, y = draw(n), GEN.integers(0, 2, n)
        assert np.array_equal(h.mistakes(x, y), brute_mistakes(h, x, y))


def test_class_sizes():
    assert hyp.Thresholds(range(16)).size == 17
    assert hyp.Intervals(range(10)).size == 10 * 11 // 2 + 1
    assert hyp.Conjunctions(12).size == 3 ** 12
    assert hyp.Stumps([range(4), range(6)]).size == 2 * (4 + 6)
    # every hypothesis of a class is a distinct function on the grid (|H| restricted)
    for h in (hyp.Thresholds(range(5)), hyp.Intervals(range(5))):
        grid = np.arange(5, dtype=float)[:, None]
        assert len({tuple(h.predict(i, grid)) for i in range(h.size)}) == h.size


def test_choice_law_is_the_exponential_mechanism_by_enumeration():
    """Pr[h] ∝ exp(−ε·mistakes(h)/2): choice_law against the formula, written out."""
    h, x, y = hyp.Thresholds([0, 1, 2]), np.array([[0.], [1.], [2.], [2.]]), np.array([0, 1, 0, 1])
    m = brute_mistakes(h, x, y)
    weights = [math.exp(-0.7 * k / 2) for k in m]
    assert np.allclose(hyp.choice_law(m, 0.7), np.array(weights) / sum(weights), rtol=1e-12)


def _draws(m: np.ndarray, sensitivity: Fraction, n: int = 40_000) -> np.ndarray:
    return np.asarray(hyp.draw_hypothesis(m, Fraction(1), sensitivity=sensitivity, size=n))


def test_sampled_choice_follows_the_law_and_the_broken_variant_does_not():
    h = hyp.Thresholds([0, 1, 2, 3])
    x, y = np.array([[0.], [1.], [1.], [3.], [2.]]), np.array([1, 0, 1, 1, 0])
    m = h.mistakes(x, y)
    support, law = np.arange(h.size), hyp.choice_law(m, 1)
    assert chi2_pvalue(_draws(m, Fraction(1)), support, law) > FALSE_POSITIVE_RATE
    assert chi2_pvalue(_draws(m, Fraction(1, 2)), support, law) < FALSE_POSITIVE_RATE


def test_fit_draws_through_the_law():
    """The estimator's own path: fits on one tiny sample, χ² against the law."""
    h = hyp.Thresholds([0, 1, 2])
    x, y = np.array([[0.], [1.], [2.]]), np.array([0, 1, 1])
    picks = np.array([PrivateLearner(h, 1).fit(x, y).hypothesis_ for _ in range(1500)])
    law = hyp.choice_law(h.mistakes(x, y), 1)
    assert chi2_pvalue(picks, np.arange(h.size), law) > FALSE_POSITIVE_RATE


def _neighbours(y: np.ndarray, x: np.ndarray):
    """Every substitute-one (label flipped, row moved on the grid) and add/remove-one
    neighbour of a tiny sample."""
    n = y.size
    for i in range(n):
        yield np.delete(x, i, 0), np.delete(y, i)  # remove
        flipped = y.copy()
        flipped[i] ^= 1
        yield x, flipped
        for v in range(-1, 4):
            moved = x.copy()
            moved[i] = v
            yield moved, y
    for v in range(-1, 4):
        for label in (0, 1):  # add
            yield np.vstack([x, [[v]]]), np.append(y, label)


def _worst_ratio(sensitivity: float, eps: float = 1.0) -> float:
    h = hyp.Intervals([0, 1, 2])
    worst = 0.0
    for _ in range(30):
        n = int(GEN.integers(1, 5))
        x, y = GEN.integers(-1, 4, (n, 1)).astype(float), GEN.integers(0, 2, n)
        p = hyp.choice_law(h.mistakes(x, y), eps, sensitivity)
        for x2, y2 in _neighbours(y, x):
            q = hyp.choice_law(h.mistakes(x2, y2), eps, sensitivity)
            worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(q)))))
    return worst


def test_neighbour_ratio_at_most_e_to_the_epsilon():
    assert _worst_ratio(1) <= 1 + 1e-12
    assert _worst_ratio(0.5) > 1.2  # the broken variant (Δu halved) exceeds it


def test_audit_case_registered():
    from dpkit.audit import CASES

    case = CASES["generic_private_learner"]
    assert case.measurement.privacy_map(1) == dp.PureDP(1)
    x, x2 = (np.asarray(v) for v in (case.x, case.x_prime))
    m, m2 = (hyp.AUDIT_CLASS.mistakes(np.zeros((1, 1)), v) for v in (x, x2))
    assert np.all(np.abs(m - m2) == 1)  # substitute-one: every score moves by one
    good = np.log(hyp.choice_law(m, 1)) - np.log(hyp.choice_law(m2, 1))
    broken = np.log(hyp.choice_law(m, 1, 0.5)) - np.log(hyp.choice_law(m2, 1, 0.5))
    assert np.abs(good).max() <= 1 and np.abs(broken).max() > 1.6


def test_sample_complexity_formula_and_inverse():
    n = hyp.sample_complexity(17, 1, 0.1, 0.1)
    stat = 8 * (math.log(17) + math.log(40)) / 0.01
    priv = 4 * (math.log(17) + math.log(20)) / 0.1
    assert n == math.ceil(max(stat, priv) * (1 + 1e-9))
    assert hyp.error_bound(17, 1, n, 0.1) <= 0.1
    assert hyp.error_bound(17, 1, n - 2, 0.1) > 0.1
    small_eps = hyp.sample_complexity(17, 0.01, 0.1, 0.1)  # the privacy term dominates
    assert small_eps == math.ceil(4 * (math.log(17) + math.log(20)) / 0.001 * (1 + 1e-9))


def test_fit_reports_bound_and_debits_once():
    f = PrivacyFilter(dp.PureDP(1))
    x = GEN.integers(0, 2, (200, 4)).astype(float)
    m = PrivateLearner(hyp.Conjunctions(4), 0.5, alpha=0.1, beta=0.05,
                       accountant=f).fit(x, x[:, 0].astype(int))
    assert m.bound_ == hyp.LearningBound(81, Fraction(1, 2), Fraction(1, 10), Fraction(1, 20),
                                         hyp.sample_complexity(81, 0.5, 0.1, 0.05))
    assert m.release_.loss == dp.PureDP(Fraction(1, 2))
    assert [r.statistic for r in m.release_.noise] == ["hypothesis"]
    assert m.predict(x).shape == (200,) and set(m.predict(x)) <= {0, 1}
    assert m.sample_complexity(0.1, 0.05) == m.bound_.n


@pytest.mark.parametrize("kwargs, message", [
    ({"hypothesis_class": None}, "hypothesis_class"),
    ({"epsilon": 0}, "epsilon"),
    ({"alpha": 1.5}, "alpha"),
    ({"beta": 0}, "beta"),
    ({"classes": [0, 1, 2]}, "two"),
    ({"hypothesis_class": hyp.Stumps([range(3)] * 5)}, "reads 5"),
])
def test_validation_before_the_debit(kwargs, message):
    f = PrivacyFilter(dp.PureDP(1))
    args = {"hypothesis_class": hyp.Thresholds(range(3)), "epsilon": 1, "accountant": f}
    with pytest.raises(DomainError, match=message):
        PrivateLearner(**{**args, **kwargs}).fit(np.zeros((4, 2)), [0, 1, 0, 1])
    PrivateLearner(hyp.Thresholds(range(3)), 1, accountant=f).fit(np.zeros((4, 2)),
                                                                  [0, 1, 0, 1])  # ε intact


def test_plan_time_limits():
    with pytest.raises(DomainError):
        hyp.Conjunctions(13)
    with pytest.raises(DomainError):
        hyp.Thresholds([1, 1, 2])
    with pytest.raises(DomainError, match="2\\^22"):
        PrivateLearner(hyp.Thresholds(np.arange(1 << 22)), 1).fit(np.zeros((2, 1)), [0, 1])


def test_session_is_charged():
    import polars as pl

    df = pl.DataFrame({"x": [0.0, 1.0, 2.0, 3.0], "y": [0, 0, 1, 1]})
    session = dp.Session(df, privacy_unit=dp.PrivacyUnit.rows(), budget=dp.PureDP(1))
    PrivateLearner(hyp.Thresholds(range(4)), 0.25, accountant=session).fit(
        df.select("x").to_numpy(), df["y"].to_numpy())
    assert session.last_release.loss == dp.PureDP(Fraction(1, 4))


# -- the learning guarantee at the bound's n (KLNRS Thm 3.4) ---------------------------------
GRID = np.arange(8, dtype=float)
TARGET, NOISE = 3, 0.1  # y = [x ≥ 3] flipped with probability 0.1, x uniform on the grid


def true_errors(h: hyp.HypothesisClass) -> np.ndarray:
    """err_D(h) for every hypothesis, exactly from the known distribution."""
    clean = (GRID >= TARGET).astype(int)
    return np.array([float(np.mean(np.where(h.predict(i, GRID[:, None]) == clean,
                                            NOISE, 1 - NOISE))) for i in range(h.size)])


def failures(choose, alpha: float, beta: float, draws: int = 200) -> int:
    h = hyp.Thresholds(GRID)
    err = true_errors(h)
    n = hyp.sample_complexity(h.size, 1, alpha, beta)
    bad = 0
    for _ in range(draws):
        x = rng.uniform_below(GRID.size, n).astype(float)[:, None]  # data, not noise
        y = (x[:, 0] >= TARGET).astype(int) ^ (rng.uniform_below(10, n) == 0).astype(int)
        bad += err[choose(h, x, y)] > err.min() + alpha
    return bad


def binomial_pvalue(k: int, draws: int, beta: float) -> float:
    """Pr[Bin(draws, β) ≥ k]: small when failures are more frequent than β allows."""
    return float(sps.binom.sf(k - 1, draws, beta))


@pytest.mark.slow
def test_error_within_alpha_of_opt_at_the_bounds_n():
    alpha, beta = 0.15, 0.1

    def private(h, x, y):
        return PrivateLearner(h, 1).fit(x, y).hypothesis_

    def ignores_data(h, x, y):  # broken: the choice without the scores
        return int(rng.uniform_below(h.size, 1)[0])

    assert binomial_pvalue(failures(private, alpha, beta), 200, beta) > FALSE_POSITIVE_RATE
    assert binomial_pvalue(failures(ignores_data, alpha, beta), 200, beta) < FALSE_POSITIVE_RATE
