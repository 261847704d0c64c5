"""Approximate minima perturbation (Iyengar et al., S&P 2019, Alg. 1; dpkit.learn._amp):
the calibration recomputed from the paper's formulas in exact arithmetic, the quantities the
proof rests on checked by brute force on small neighbouring datasets (each check paired with
a broken constant it catches), the solver's fixed, proven number of steps (Bubeck 2015
Thm 3.18) and the estimators' charge. Deterministic except where noise is drawn; no statistical
assertion here."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dpkit as dp
from dpkit.core.compose import PrivacyFilter
from dpkit.core.numbers import dyadic_up, exp_down, exp_up, log_up, sqrt_down, sqrt_up
from dpkit.errors import DomainError
from dpkit.learn import LinearRegression, LinearSVC, LogisticRegression, _amp
from dpkit.learn._amp import (
    HUBER_HINGE,
    LOGISTIC,
    amp_plan,
    amp_rows,
    huber_regression,
    objective_noise_ok,
    paper_sigma,
    solver_steps,
)

BUDGETS = [(Fraction(1, 10), Fraction(1, 10**6)), (Fraction(1), Fraction(1, 10**6)),
           (Fraction(5), Fraction(1, 10**6))]
LOSSES = [LOGISTIC, HUBER_HINGE, huber_regression(1.0)]


def recomputed(eps, delta, a, c, r2):
    """Alg. 1's constants from the module's formulas, written out again."""
    e3 = eps / 100
    e2 = Fraction(9, 10) * (eps - e3)
    e1 = eps - e3 - e2
    d2 = delta / 100
    d1 = (delta - d2) / exp_up(e3)
    lip = a * dyadic_up(sqrt_up(r2), 40)
    beta = c * r2
    ridge = beta / e1
    gamma = ridge / 2**20
    sens3 = 2 * gamma / ridge
    sigma2 = dyadic_up(sens3 * (1 + sqrt_up(2 * log_up(1 / d2))) / e3, 60)
    return e1, e2, e3, d1, d2, lip, beta, ridge, gamma, sens3, sigma2


@pytest.mark.parametrize("eps, delta", BUDGETS)
@pytest.mark.parametrize("loss", LOSSES, ids=lambda loss: loss.name)
def test_plan_is_the_papers_calibration_exactly(eps, delta, loss):
    r2 = Fraction(5, 4)
    plan = amp_plan(eps, delta, loss, r2, 3)
    e1, e2, e3, d1, d2, lip, beta, ridge, gamma, sens3, sigma2 = recomputed(
        eps, delta, loss.slope, loss.curvature, r2)
    assert (plan.eps1, plan.eps2, plan.eps3, plan.delta1, plan.delta2) == (e1, e2, e3, d1, d2)
    assert (plan.lipschitz, plan.smoothness, plan.ridge) == (lip, beta, ridge)
    assert (plan.gamma, plan.output_sensitivity, plan.sigma2) == (gamma, sens3, sigma2)
    assert sens3 == Fraction(1, 2**19)
    # the guarantees, exactly: ε adds up, δ = e^ε₃·δ₁ + δ₂ ≤ δ, the Jacobian's log ≤ ε₁
    assert e1 + e2 + e3 == eps and e1 > 0
    assert exp_up(e3) * d1 + d2 <= delta
    assert log_up(1 + beta / ridge) <= e1
    # b₁: the paper's σ₁ (rounded up) when it passes the varying-shift check
    paper = paper_sigma(lip, e2, d1)
    assert plan.sigma1 >= paper and objective_noise_ok(plan.sigma1, lip, e2, d1)
    if objective_noise_ok(dyadic_up(paper, 40), lip, e2, d1):
        assert plan.sigma1 == dyadic_up(paper, 40)


def test_a_worked_example_by_hand():
    """ε = 1, δ = 10⁻⁶, logistic, R′ = 1: ε₃ = 0.01, ε₂ = 0.891, ε₁ = 0.099, Λ = 0.25/0.099,
    δ₂ = 10⁻⁸, δ₁ = 0.99·10⁻⁶/e^0.01, σ₁ = (1 + √(2 ln(1/δ₁)))/0.891 (floats, by hand)."""
    plan = amp_plan(Fraction(1), Fraction(1, 10**6), LOGISTIC, Fraction(1), 2)
    d1 = 0.99e-6 / math.exp(0.01)
    assert float(plan.ridge) == pytest.approx(0.25 / 0.099, rel=1e-12)
    assert float(plan.delta1) == pytest.approx(d1, rel=1e-12)
    assert float(plan.sigma1) == pytest.approx((1 + math.sqrt(2 * math.log(1 / d1))) / 0.891,
                                               rel=1e-9)
    assert float(plan.sigma2) == pytest.approx(
        2**-19 * (1 + math.sqrt(2 * math.log(1e8))) / 0.01, rel=1e-9)


def test_the_noise_check_catches_a_small_sigma_and_a_large_epsilon():
    plan = amp_plan(Fraction(1), Fraction(1, 10**6), LOGISTIC, Fraction(1), 2)
    assert not objective_noise_ok(plan.sigma1 / 2, plan.lipschitz, plan.eps2, plan.delta1)
    # at ε₂ ≈ 24 the paper's σ₁ (the (1 + √(2 ln 1/δ))/ε form) fails the check: widened
    big = amp_plan(Fraction(27), Fraction(1, 10**6), LOGISTIC, Fraction(1), 2)
    paper = dyadic_up(paper_sigma(big.lipschitz, big.eps2, big.delta1), 40)
    assert not objective_noise_ok(paper, big.lipschitz, big.eps2, big.delta1)
    assert big.sigma1 > paper
    assert objective_noise_ok(big.sigma1, big.lipschitz, big.eps2, big.delta1)


def test_planned_rows_are_the_kits_gaussians_at_the_plans_scales():
    plan = amp_plan(Fraction(1), Fraction(1, 10**6), HUBER_HINGE, Fraction(2), 4)
    b1, b2 = amp_rows(plan)  # no fallback: every run releases ŵ + b₂
    # the entry keeps a short representation of the scale, rounded up (never less noise)
    assert plan.sigma1 <= b1.scale <= plan.sigma1 * (1 + Fraction(1, 10**6))
    assert plan.sigma2 <= b2.scale <= plan.sigma2 * (1 + Fraction(1, 10**6))
    assert (b1.sensitivity, b2.sensitivity) == (plan.lipschitz, plan.output_sensitivity)
    assert "Gaussian" in b1.name and "Gaussian" in b2.name


# -- brute force on small neighbours: the two facts the objective part's proof uses --------
def _rows(seed_rows, r):
    x = np.asarray(seed_rows, dtype=float)
    return x * np.minimum(1.0, r / np.linalg.norm(x, axis=1))[:, None]


NEIGHBOURS = {  # D's rows (x̃ in the ball of radius 1) and targets; x′ adds the last one
    "logistic": (LOGISTIC, [[0.6, 0.3], [-0.2, 0.9], [1.0, 0.0]], [1.0, -1.0, -1.0]),
    "huber hinge": (HUBER_HINGE, [[0.6, 0.3], [-0.2, 0.9], [0.8, 0.6]], [1.0, -1.0, 1.0]),
    "huber regression": (huber_regression(1.0), [[0.6, 0.3], [-0.2, 0.9], [0.0, 1.0]],
                         [0.5, -1.0, 1.0]),
}


def _worst(loss, rows, t, ridge):
    """Over a grid of w: max ‖b_{D′}(w) − b_D(w)‖ and max log det(H_{D′})/det(H_D), where
    b_D(w) = −∇(Σ_D φ + (Λ/2)‖w‖²) and D′ = D plus the last row."""
    grid = np.linspace(-4, 4, 81)
    shift, jac = 0.0, 0.0
    x = rows[-1]
    for w in (np.array([a, b]) for a in grid for b in grid):
        _, slope, curve = loss.derivs(rows @ w, t)
        shift = max(shift, abs(slope[-1]) * float(np.linalg.norm(x)))
        h = (rows[:-1].T * curve[:-1]) @ rows[:-1] + ridge * np.eye(2)
        jac = max(jac, math.log(np.linalg.det(h + curve[-1] * np.outer(x, x))
                                / np.linalg.det(h)))
    return shift, jac


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_one_row_moves_b_by_at_most_L_and_the_jacobian_by_at_most_eps1(name):
    loss, seed, t = NEIGHBOURS[name]
    rows, t = _rows(seed, 1.0), np.asarray(t)
    plan = amp_plan(Fraction(1, 2), Fraction(1, 10**6), loss, Fraction(1), 2)
    shift, jac = _worst(loss, rows, t, float(plan.ridge))
    assert shift <= float(plan.lipschitz) + 1e-12
    assert jac <= float(plan.eps1) + 1e-12
    # broken: a quarter of the paper's Λ lets one row move the Jacobian beyond e^ε₁
    assert _worst(loss, rows, t, float(plan.ridge) / 4)[1] > float(plan.eps1)


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_the_approximate_minimiser_is_within_gamma_over_lambda(name):
    loss, seed, t = NEIGHBOURS[name]
    rows, t = _rows(seed, 1.0), np.asarray(t)
    plan = amp_plan(Fraction(1), Fraction(1, 10**6), loss, Fraction(1), 2)
    lam, gamma, k = float(plan.ridge), float(plan.gamma), solver_steps(plan, 3)
    for b in ([0.0, 0.0], [3.0, -2.0], [-7.0, 1.0]):
        b = np.asarray(b)
        approx = _amp.accelerated(rows, t, loss, plan, b, k)
        exact = _amp.accelerated(rows, t, loss, plan, b, 4 * k)  # at the float floor
        assert np.linalg.norm(_amp.gradient(rows, t, loss, lam, b, approx)) <= gamma
        assert np.linalg.norm(approx - exact) <= gamma / lam * (1 + 1e-9) + 1e-12


# -- the solver: a fixed, proven number of steps; the check is a report ---------------------
def _data(n=400, d=3, seed=7):
    rng = np.random.default_rng(seed)  # the data only; the noise is the CSPRNG's
    x = rng.normal(size=(n, d))
    return x, (x @ np.ones(d) > 0).astype(int)


def _logistic_gradient(rows, s, ridge, b, w):
    """∇J_b written out independently of the module (logistic loss)."""
    z = s * (rows @ w)
    return -(rows.T @ (s / (1 + np.exp(z)))) + ridge * w + b


def test_the_released_fit_reached_gamma(monkeypatch):
    seen = []
    real = _amp.accelerated

    def spy(rows, t, loss, plan, b1, steps):
        w = real(rows, t, loss, plan, b1, steps)
        seen.append((rows, t, plan, b1, steps, w))
        return w

    monkeypatch.setattr(_amp, "accelerated", spy)
    x, y = _data()
    model = LogisticRegression(epsilon=1, delta=1e-6, data_norm=2, classes=[0, 1],
                               method="amp").fit(x, y)
    assert model.converged_
    rows, t, plan, b, steps, w = seen[-1]
    ridge, gamma = float(plan.ridge), float(plan.gamma)
    assert steps == solver_steps(plan, len(y))
    assert np.linalg.norm(_logistic_gradient(rows, t, ridge, b, w)) <= gamma
    # broken: one step from −b₁/Λ does not reach γ, and the independent check sees it
    w1 = real(rows, t, _amp.LOGISTIC, plan, b, 1)
    assert np.linalg.norm(_logistic_gradient(rows, t, ridge, b, w1)) > gamma


def _counting(loss, calls):
    """``loss`` whose φ′ evaluations (one per gradient) are counted in ``calls``."""
    def derivs(u, t):
        calls.append(1)
        return loss.derivs(u, t)
    return _amp.GLMLoss(loss.name, derivs, loss.slope, loss.curvature)


@pytest.mark.parametrize("loss", LOSSES, ids=lambda loss: loss.name)
def test_the_number_of_gradient_steps_is_the_plans_whatever_the_data(loss):
    """Two datasets with the same n and d (one easy, one with every row on one line, the
    worst conditioning): the same K + 1 gradients (K steps and the reported check). The old
    capped Newton stopped at a data-dependent step."""
    plan = amp_plan(Fraction(1), Fraction(1, 10**6), loss, Fraction(1), 3)
    n = 300
    easy = _rows(np.random.default_rng(1).normal(size=(n, 3)), 1.0)  # test input
    line = np.tile([0.6, 0.8, 0.0], (n, 1))
    counts = []
    for rows, t in ((easy, np.sign(easy[:, 0])), (line, np.where(np.arange(n) % 2, 1.0, -1.0))):
        calls = []
        _amp.solve_amp(rows, t, _counting(loss, calls), plan)
        counts.append(len(calls))
    assert counts == [solver_steps(plan, n) + 1] * 2


def test_a_hard_instance_reaches_gamma_and_fewer_steps_would_not():
    """Every row the same x̃ (so the data's Hessian is rank one at the declared bound, the
    conditioning the proof pays for) with balanced labels, on the Huber hinge: the plan's K
    reaches γ (independent gradient), K/20 steps do not (the instance is not trivial)."""
    loss = HUBER_HINGE
    n = 2000
    plan = amp_plan(Fraction(5), Fraction(1, 10**6), loss, Fraction(1), 3)
    rows = np.tile([0.6, 0.8, 0.0], (n, 1))
    t = np.where(np.arange(n) % 2, 1.0, -1.0)
    b = np.array([1.0, -2.0, 0.5]) * float(plan.sigma1)
    k, ridge, gamma = solver_steps(plan, n), float(plan.ridge), float(plan.gamma)

    def grad(w):  # the Huber hinge's gradient written out again
        z = t * (rows @ w)
        slope = np.where(z > 1.5, 0.0, np.where(np.abs(1 - z) <= 0.5, -(1.5 - z), -1.0))
        return rows.T @ (t * slope) + ridge * w + b

    assert np.linalg.norm(grad(_amp.accelerated(rows, t, loss, plan, b, k))) <= gamma
    assert np.linalg.norm(grad(_amp.accelerated(rows, t, loss, plan, b, k // 20))) > gamma


@pytest.mark.parametrize("eps", [Fraction(1, 10), Fraction(1), Fraction(5), Fraction(100)])
@pytest.mark.parametrize("loss", LOSSES, ids=lambda loss: loss.name)
@pytest.mark.parametrize("n", [1, 17, 30169, 10**7])
def test_the_step_count_satisfies_the_bound_exactly(eps, loss, n):
    """exp(−K/√κ)·X ≤ 1 with X = M(Λ + M)(nL)²/(Λγ)², checked in Fractions with rounding
    against K (e^(−K/√κ) ≤ exp_up(−K/sqrt_up κ)); K − 1 fails it (rounded the other way);
    a broken K that forgets the factor M(Λ + M)/Λ² (≥ 4 when n > 1) fails it."""
    plan = amp_plan(eps, Fraction(1, 10**6), loss, Fraction(5, 4), 4)
    k = solver_steps(plan, n)
    lam = plan.ridge
    m = lam + n * plan.smoothness
    x = m * (lam + m) * (n * plan.lipschitz) ** 2 / (lam * plan.gamma) ** 2
    assert exp_up(-k / sqrt_up(m / lam)) * x <= 1
    assert exp_down(-(k - 1) / sqrt_down(m / lam)) * x > 1
    broken = math.ceil(sqrt_up(m / lam) * log_up((n * plan.lipschitz / plan.gamma) ** 2))
    assert n == 1 or exp_down(-broken / sqrt_down(m / lam)) * x > 1


def test_the_scheme_meets_bubecks_bound_along_the_path():
    """Thm 3.18 itself on quadratics (Huber's loss with a threshold no residual reaches):
    f(y_t) − f* ≤ ((Λ + M)/2)·‖x₁ − x*‖²·exp(−(t − 1)/√κ) at every t ≤ K + 1, f* from a
    linear solve. Broken: a step of 4/M (the smoothness under-declared fourfold) breaks it."""
    loss = huber_regression(1e6)
    rows = _rows(np.random.default_rng(4).normal(size=(40, 3)), 1.0)  # test input
    rows[:20] = rows[0]  # a long thin valley
    t = np.random.default_rng(5).uniform(-1, 1, size=40)
    plan = amp_plan(Fraction(1), Fraction(1, 10**6), loss, Fraction(1), 3)
    lam, b = float(plan.ridge), np.array([0.3, -1.0, 2.0])
    m = lam + 40 * float(plan.smoothness)

    def f(w):
        return 0.5 * np.sum((t - rows @ w) ** 2) + 0.5 * lam * w @ w + b @ w

    star = np.linalg.solve(rows.T @ rows + lam * np.eye(3), rows.T @ t - b)
    start = -b / lam
    scale = (lam + m) / 2 * float(np.sum((start - star) ** 2))

    def worst(momentum, smooth):
        x, y, gap = start, start, []
        for s in range(1, 60):
            gap.append((f(y) - f(star)) / (scale * math.exp(-(s - 1) / math.sqrt(m / lam))))
            y_next = x - (rows.T @ (rows @ x - t) + lam * x + b) / smooth
            x, y = (1 + momentum) * y_next - momentum * y, y_next
        return max(gap)

    root = math.sqrt(m / lam)
    assert worst((root - 1) / (root + 1), m) <= 1 + 1e-9
    assert worst((root - 1) / (root + 1), m / 4) > 1
    # the module's loop is that scheme: same iterate after 59 steps
    x, y = start, start
    for _ in range(59):
        y_next = x - (rows.T @ (rows @ x - t) + lam * x + b) / m
        x, y = (1 + (root - 1) / (root + 1)) * y_next - (root - 1) / (root + 1) * y, y_next
    assert np.allclose(_amp.accelerated(rows, t, loss, plan, b, 59), y, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: LogisticRegression(epsilon=1, delta=1e-6, data_norm=2, classes=[0, 1],
                               method="amp"),
    lambda: LinearSVC(epsilon=1, delta=1e-6, data_norm=2, classes=[0, 1]),
    lambda: LinearRegression(epsilon=1, delta=1e-6, bounds=(-3, 3), y_bounds=(0, 1),
                             method="amp"),
])
def test_a_failed_check_is_reported_and_changes_nothing_released(monkeypatch, make):
    """``converged_`` is a report: a check that fails (as floating point could make it)
    releases the same kind of output, charged the same, with the same two noise rows."""
    monkeypatch.setattr(_amp, "converged", lambda *args: False)
    x, y = _data()
    budget = PrivacyFilter(dp.ApproxDP(2, 1e-5))
    model = make().set_params(accountant=budget).fit(x, y)
    assert model.converged_ is False
    assert np.all(np.isfinite(model.coef_))
    assert budget.spent == dp.ApproxDP(1, Fraction(1e-6))
    assert [r.statistic for r in model.release_.noise] == [_amp.OBJECTIVE_NOISE,
                                                           _amp.OUTPUT_NOISE]


def test_a_converged_fit_is_charged_its_plan():
    x, y = _data()
    budget = PrivacyFilter(dp.ApproxDP(3, 1e-5))
    for model in (LinearSVC(epsilon=1, delta=1e-6, data_norm=2, classes=[0, 1],
                            accountant=budget),
                  LinearRegression(epsilon=1, delta=1e-6, bounds=(-3, 3), y_bounds=(0, 1),
                                   method="amp", accountant=budget)):
        model.fit(x, y)
        assert model.converged_
        assert [r.statistic for r in model.release_.noise] == [
            _amp.OBJECTIVE_NOISE, _amp.OUTPUT_NOISE]
    assert budget.spent == dp.ApproxDP(2, 2 * Fraction(1e-6))


@pytest.mark.parametrize("make, message", [
    (lambda: LogisticRegression(epsilon=1, data_norm=2, classes=[0, 1], method="amp"),
     "delta"),
    (lambda: LinearSVC(epsilon=1, data_norm=2, classes=[0, 1]), "delta"),
    (lambda: LinearSVC(epsilon=1, delta=1e-6, classes=[0, 1]), "data_norm"),
    (lambda: LinearSVC(epsilon=1, delta=1e-6, data_norm=2, classes=[0, 1], huber=0), "huber"),
    (lambda: LinearSVC(epsilon=1, delta=2, data_norm=2, classes=[0, 1]), "delta"),
    (lambda: LinearRegression(epsilon=1, bounds=(-3, 3), y_bounds=(0, 1), method="amp"),
     "delta"),
    (lambda: LinearRegression(epsilon=1, delta=1e-6, bounds=(-3, 3), y_bounds=(0, 1),
                              method="amp", gamma=-1), "gamma"),
])
def test_bad_declarations_raise_before_the_debit(make, message):
    x, y = _data()
    budget = PrivacyFilter(dp.ApproxDP(3, 1e-5))
    with pytest.raises(DomainError, match=message):
        make().set_params(accountant=budget).fit(x, y)
    assert budget.spent == dp.ApproxDP(0, 0)


def test_convergence_allows_for_the_rounding_of_the_gradient():
    plan = amp_plan(Fraction(1), Fraction(1, 10**6), LOGISTIC, Fraction(1), 3)
    gamma, w, b = float(plan.gamma), np.zeros(3), np.ones(3)
    assert _amp.converged(gamma / 2, w, b, 1000, plan)
    # just under γ as computed, but the rounding of a sum of 10⁹ rows could hide the excess
    assert not _amp.converged(gamma * (1 - 1e-9), w, b, 10**9, plan)
    assert not _amp.converged(float("nan"), w, b, 10, plan)
    assert not _amp.converged(gamma / 2, np.array([np.inf, 0, 0]), b, 10, plan)
