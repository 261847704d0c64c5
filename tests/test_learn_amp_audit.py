"""The audit case of approximate minima perturbation as it runs (dpkit.learn._amp_audit):
the case is in the battery and samples through the production solver; deterministic checks
of the faults it is built around; the audits themselves.

False-positive rates: every lower bound is certified at confidence 1 − 1e-6 (a correct
mechanism's bound exceeds its ε with probability ≤ 1e-6); the histogram test's majority of 9
votes fails a correct mechanism with probability < 1e-11. Each audit is paired with a broken
variant it must catch. The deterministic checks feed the solver chosen b₁ (not noise)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.audit import CASES, claimed_epsilon_delta, epsilon_lower_bound, run_audit
from dpkit.core.numbers import exp_up
from dpkit.learn import _amp, _amp_audit
from dpkit.learn._amp import LOGISTIC, accelerated, solver_steps
from dpkit.learn._amp_audit import AUDIT_X, AUDIT_X_PRIME, audit_plan, broken_plan, sampler

CONFIDENCE = 1 - 1e-6
CASE = "amp_fixed_steps"


def rows_of(table: list[list[float]], clip: bool = True) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(table)
    rows = t[:, :2] / np.maximum(1.0, np.linalg.norm(t[:, :2], axis=1))[:, None] if clip \
        else t[:, :2]
    return rows, t[:, 2]


def test_the_case_is_in_the_battery_and_claims_the_plans_loss():
    case = CASES[CASE]
    plan = audit_plan()
    assert claimed_epsilon_delta(case) == (float(plan.epsilon), float(plan.delta))
    assert (plan.epsilon, plan.delta) == (Fraction(1, 10), Fraction(1, 10**6))
    assert len(AUDIT_X_PRIME) == len(AUDIT_X) + 1 and AUDIT_X_PRIME[:-1] == AUDIT_X


@pytest.mark.parametrize("broken", [False, True])
def test_the_sampler_runs_the_production_solver_its_k_steps(monkeypatch, broken):
    """Every draw goes through _amp.accelerated with K = solver_steps(plan, n) on the
    clipped rows (the broken variant: unclipped), one batch of b₁ of shape (n, 2)."""
    calls = []
    real = _amp_audit.accelerated

    def spy(rows, t, loss, plan, b1, steps):
        calls.append((rows.copy(), b1.shape, steps, plan))
        return real(rows, t, loss, plan, b1, steps)

    monkeypatch.setattr(_amp_audit, "accelerated", spy)
    case = CASES[CASE]
    out = (case.broken if broken else case.sample)(AUDIT_X_PRIME, 7)
    assert out.shape == (7,) and np.all(np.isfinite(out))
    (rows, shape, steps, plan), = calls
    assert shape == (7, 2) and steps == solver_steps(plan, 4) and plan == audit_plan()
    assert np.array_equal(rows, rows_of(AUDIT_X_PRIME, clip=not broken)[0])
    assert np.linalg.norm(rows[-1]) == (10.0 if broken else 1.0)


def test_a_batch_is_solved_as_its_problems_one_by_one():
    plan = audit_plan()
    rows, t = rows_of(AUDIT_X_PRIME)
    b1 = np.array([[-3.0, 0.5], [40.0, -70.0], [0.0, 0.0]])  # chosen, not drawn
    k = solver_steps(plan, 4)
    batch = accelerated(rows, t, LOGISTIC, plan, b1, k)
    one = np.array([accelerated(rows, t, LOGISTIC, plan, b, k) for b in b1])
    assert batch.shape == (3, 2)
    assert np.allclose(batch, one, rtol=1e-12, atol=1e-12)


def jacobian_ratio(plan: _amp.AmpPlan, b: float) -> float:
    """|dŵ₂/db₂| on x over that on x′ at b₂ = b, by central differences through the
    production solver: the density ratio of ŵ₂ between x′ and x at the points b maps to,
    up to the b-shift (whose part the noise check bounds)."""
    h = 1e-3
    b1 = np.array([[0.0, b - h], [0.0, b + h]])
    slopes = []
    for table in (AUDIT_X, AUDIT_X_PRIME):
        rows, t = rows_of(table)
        w = accelerated(rows, t, LOGISTIC, plan, b1, solver_steps(plan, rows.shape[0]))
        slopes.append(abs(w[1, 1] - w[0, 1]) / (2 * h))
    return slopes[0] / slopes[1]


def test_lambda_not_scaled_with_eps1_breaks_the_jacobian_bound():
    """The fault the battery's sample size cannot certify (module docstring of
    _amp_audit), checked deterministically: the planned Λ = β/ε₁ keeps the Jacobian's
    factor 1 + φ″/Λ ≤ 1 + ε₁ ≤ e^ε₁ at every point; Λ = β lets it reach 2 > e^ε at the
    point b₂ = −1/2 that x′'s minimiser maps to w₂ = 0 (where φ″ = β)."""
    plan = audit_plan()
    bad = broken_plan(plan)
    assert bad.ridge == plan.smoothness == Fraction(1, 4)
    assert 1 + plan.smoothness / plan.ridge == 1 + plan.eps1
    for b in np.linspace(-60.0, 60.0, 41):
        assert jacobian_ratio(plan, float(b)) <= 1 + float(plan.eps1) + 1e-6
    worst = jacobian_ratio(bad, -0.5)  # ŵ₂ = 0 on x′: φ′(0, −1) = 1/2 = −b
    assert worst == pytest.approx(2.0, rel=1e-4)
    assert worst > float(exp_up(plan.epsilon)) + 0.5  # e^0.1 ≈ 1.105


def test_the_audit_passes_the_case_and_catches_its_broken_variant():
    """The battery's run (tests/test_audit.py), here at 20,000 samples (about 2 s): the
    correct sampler's certified lower bound is ≤ ε = 0.1, the unclipped row's > 0.1
    (≈ 0.3 observed)."""
    good = run_audit(CASES[CASE], 20_000, confidence=CONFIDENCE)
    bad = run_audit(CASES[CASE], 20_000, broken=True, confidence=CONFIDENCE)
    assert good.histogram_passed and good.lower_bound <= good.claimed_epsilon
    assert (not bad.histogram_passed) or bad.lower_bound > bad.claimed_epsilon


@pytest.mark.slow
def test_a_large_audit_catches_lambda_not_scaled_with_eps1():
    """Λ = β with 400,000 samples per input and 512 bins (about a minute): the outputs near
    w₂ = 0 where the Jacobian's factor is ≈ 2 (≈ 1 % of them) fill a few bins, which this
    sample certifies (bound ≈ 0.39 observed); the planned Λ on the same run stays ≤ ε (0.0
    observed). The bound is valid for any partition chosen on the first half."""
    plan = audit_plan()
    for tested, caught in ((plan, False), (broken_plan(plan), True)):
        bound = epsilon_lower_bound(sampler(tested), AUDIT_X, AUDIT_X_PRIME,
                                    delta=float(plan.delta), samples=400_000,
                                    confidence=CONFIDENCE, max_bins=512)
        assert (bound.epsilon > float(plan.epsilon)) == caught, (caught, bound)
