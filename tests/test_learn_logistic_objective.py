"""LogisticRegression(method="objective"): objective perturbation (Chaudhuri, Monteleoni &
Sarwate 2011, Alg. 2, add/remove form), issue 34.

Deterministic checks read the noise plan, the loss and the exact budget split; the one
statistical test (the law of the noise vector b the fit draws) has false-positive rate
FALSE_POSITIVE_RATE = 1e-6 and is paired with a broken variant (noise scale halved) it must
catch.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import log_expit

from dpkit.core.measures import PureDP
from dpkit.core.numbers import exp_down, exp_up, log_up
from dpkit.errors import DomainError, TrivialResultWarning
from dpkit.learn import LogisticRegression
from dpkit.learn import logistic as L  # noqa: N812
from dpkit.mechanisms import frontend

FALSE_POSITIVE_RATE = 1e-6
C4 = Fraction(1, 4)
_gen = np.random.default_rng(341)  # test input, never noise
X = _gen.uniform(0, 1, (300, 2)) / 2
Y = (X.sum(1) + _gen.normal(0, 0.1, 300) > 0.5).astype(int)


def _fit(eps=1.0, **kw) -> LogisticRegression:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrivialResultWarning)  # not what is tested here
        return LogisticRegression(eps, data_norm=1.0, classes=[0, 1], method="objective",
                                  **kw).fit(X, Y)


def _r2(d: int = 2) -> Fraction:
    s = Fraction(L.default_intercept_scaling(1.0, d))
    return (1 + s * s) * L.SLACK ** 2


# -- the exact budget split ---------------------------------------------------------------


def test_first_branch_spends_the_jacobian_term_and_the_rest_on_b():
    eps, ridge = Fraction(2), Fraction(1)
    eps_b, delta = L.objective_budget(eps, ridge, _r2())
    assert delta == 0 and eps_b > 0
    assert eps_b + log_up(1 + C4 * _r2() / ridge) == eps  # ε′ = ε − log(1 + c·R′²/λ)


def test_second_branch_is_the_papers_delta_exactly_in_fractions():
    # CMS11 Alg. 2: if ε′ ≤ 0, ε′ = ε/2 and Δ = c/(e^(ε/4) − 1) − Λ (replace-one, n-normalised:
    # (1 + c/(nΛ))² = e^(ε/2)); in the add/remove, unnormalised form one factor: Δ makes
    # 1 + c·R′²/(λ + Δ) = e^(ε/2)
    eps, ridge, r2 = Fraction(1, 2), Fraction(1, 100), _r2()
    assert log_up(1 + C4 * r2 / ridge) >= eps  # ε′ ≤ 0: the second branch
    eps_b, delta = L.objective_budget(eps, ridge, r2)
    assert eps_b == eps / 2
    assert delta == C4 * r2 / (exp_down(eps / 2) - 1) - ridge  # e^(ε/2) rounded down: Δ up
    assert delta >= C4 * r2 / (exp_up(eps / 2) - 1) - ridge > 0  # ≥ the real-number Δ
    assert 1 + C4 * r2 / (ridge + delta) == exp_down(eps / 2)  # Jacobian term ≤ ε/2
    assert L.objective_budget(eps, Fraction(0), r2) == (eps / 2, delta + ridge)  # no C: λ = 0


# -- the plan, the loss, the choice of auto -------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"C": 0.5}])
def test_noise_plan_and_loss(kw):
    eps = Fraction(3, 2)
    model = _fit(1.5, **kw)
    ridge = Fraction(0) if not kw else 1 / Fraction(kw["C"])
    eps_b, _ = L.objective_budget(eps, ridge, _r2())
    (row,) = model.release_.noise
    assert row.statistic == L.OBJECTIVE_NOISE and row.name == "vector Laplace (grid)"
    assert row.sensitivity >= math.sqrt(_r2())  # ‖∂b‖ ≤ R′ for one row added or removed
    assert math.sqrt(_r2()) / float(eps_b) <= float(row.scale) \
        <= math.sqrt(_r2()) / float(eps_b) * (1 + 1e-4)  # calibrated at ε′ (+ grid)
    assert model.release_.loss == PureDP(eps)


def test_auto_with_data_norm_only_is_objective_and_output_stays_selectable():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrivialResultWarning)
        auto = LogisticRegression(1.0, data_norm=1.0, classes=[0, 1]).fit(X, Y)
        out = LogisticRegression(1.0, data_norm=1.0, classes=[0, 1], method="output").fit(X, Y)
    assert auto.release_.noise[0].statistic == L.OBJECTIVE_NOISE
    assert out.release_.noise[0].statistic == L.WEIGHTS


@pytest.mark.parametrize("c", [0, -1, float("inf"), float("nan")])
def test_a_bad_c_is_refused_before_the_debit(c):
    from dpkit.core.compose import PrivacyFilter
    acct = PrivacyFilter(PureDP(2))
    with pytest.raises(DomainError, match="C must"):
        LogisticRegression(1.0, data_norm=1.0, classes=[0, 1], method="objective", C=c,
                           accountant=acct).fit(X, Y)
    assert acct.spent == PureDP(0)


# -- the minimiser --------------------------------------------------------------------------


def _captured_b(monkeypatch) -> list[np.ndarray]:
    drawn: list[np.ndarray] = []
    real = frontend.noisy

    def spy(values, *args, **kw):
        out = real(values, *args, **kw)
        if kw.get("statistic") == L.OBJECTIVE_NOISE:
            drawn.append(np.asarray(out.value) - np.asarray(values))
        return out

    monkeypatch.setattr(frontend, "noisy", spy)
    return drawn


def test_released_weights_are_the_brute_force_minimiser_of_the_perturbed_objective(monkeypatch):
    x, y = X[:40, :1], Y[:40]
    drawn = _captured_b(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrivialResultWarning)
        model = LogisticRegression(1.0, data_norm=1.0, classes=[0, 1], method="objective",
                                   C=2.0).fit(x, y)
    (b,) = drawn
    s = L.default_intercept_scaling(1.0, 1)
    ridge = float(Fraction(1, 2) + L.objective_budget(Fraction(1), Fraction(1, 2),
                                                      _r2(1))[1])
    rows = np.column_stack([x, np.full(len(x), s)])
    sign = np.where(y == 1, 1.0, -1.0)

    def objective(w):  # Σ ℓ(yᵢ⟨w, x̃ᵢ⟩) + ((λ + Δ)/2)‖w‖² + ⟨b, w⟩
        return -np.sum(log_expit(sign * (rows @ w))) + 0.5 * ridge * (w @ w) + b @ w

    coarse = optimize.brute(objective, [(-60, 60), (-60, 60)], Ns=241, finish=None)
    best = optimize.minimize(objective, coarse, method="Nelder-Mead",
                             options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000}).x
    released = np.array([model.coef_[0, 0], model.intercept_[0] / s])
    assert np.allclose(released, best, atol=1e-5)


# -- the law of b: statistical test and its broken variant ----------------------------------


def _norm_pvalue(monkeypatch, fits: int = 200) -> float:
    drawn = _captured_b(monkeypatch)
    for _ in range(fits):
        _fit(1.0, C=0.5)
    eps_b = float(REAL_BUDGET(Fraction(1), Fraction(2), _r2())[0])
    scale = math.sqrt(_r2()) / eps_b  # density ∝ exp(−ε′‖b‖/R′): ‖b‖ ~ Gamma(3, R′/ε′)
    norms = np.linalg.norm(np.array(drawn), axis=1)
    return float(stats.kstest(norms, "gamma", args=(3, 0, scale)).pvalue)


REAL_BUDGET = L.objective_budget


def test_noise_vector_has_the_planned_law(monkeypatch):
    assert _norm_pvalue(monkeypatch) > FALSE_POSITIVE_RATE


def test_the_law_test_catches_noise_at_half_the_scale(monkeypatch):
    monkeypatch.setattr(L, "objective_budget",
                        lambda e, r, r2: (2 * REAL_BUDGET(e, r, r2)[0], REAL_BUDGET(e, r, r2)[1]))
    assert _norm_pvalue(monkeypatch) < FALSE_POSITIVE_RATE


# -- the training-rows rule -----------------------------------------------------------------


def _fitted(intercept: float) -> LogisticRegression:
    model = LogisticRegression(1.0, data_norm=1.0, classes=[0, 1], method="output")
    model.coef_, model.intercept_ = np.array([[1.0, 0.0]]), np.array([intercept])
    model.classes_, model.n_features_in_ = np.array([0, 1]), 2
    return model


def test_one_class_on_the_training_rows_warns_although_the_domain_has_both():
    rows = np.column_stack([np.linspace(0, 0.4, 100), np.zeros(100)])
    model = _fitted(-0.5)  # positive on part of the unit ball, negative on every row
    with pytest.warns(TrivialResultWarning, match="training rows"):
        model._warn_one_class_on_training_rows(rows, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fitted(-0.35)._warn_one_class_on_training_rows(rows, 1.0)  # 12% of the rows positive
