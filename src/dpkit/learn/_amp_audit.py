"""The audit case of approximate minima perturbation as it runs (``amp_fixed_steps``): the
fixed-step solver of :mod:`dpkit.learn._amp` (K = :func:`~dpkit.learn._amp.solver_steps`
accelerated gradient steps from −b₁/Λ, then + b₂), batched over the audit's samples, on a
tiny 2-D instance. (``amp_svm`` in :mod:`dpkit.learn.svm` audits the exact minimiser of the
Huber hinge in 1-D; this one audits the solver that ships.)

The instance (logistic loss, rows x̃ with ‖x̃‖ ≤ R′ = 1, so L = 1, β = 1/4, no intercept,
(ε, δ) = (1/10, 10⁻⁶)): x holds three rows along e₁; x′ adds one row (10·e₂, −1), which the
production ``clip_rows`` brings to (e₂, −1), as ``AmpClassifier`` does. The added row moves
the minimiser most where nothing else holds it: along e₂ the objective of x is
(Λ/2)w₂² + b₁₂w₂ alone, so w₂ = −b₁₂/Λ, and for x′ it gains φ(w₂, −1) with φ″ up to β, so
the Jacobian of w ↦ b gains the factor 1 + φ″/Λ ≤ 1 + β/Λ at w₂ near 0 (module docstring of
``_amp``). The released statistic is the projection ⟨w̃, e₂⟩.

The registered broken variant: the declared bound not enforced, i.e. the rows reach the
solver unclipped. x′'s row (0, 10) then moves b by up to 10 = 10·L against b₁'s σ₁ ≈ 70
(planned for a shift of L) and adds up to 100·β/4 to the Jacobian. At the battery's 50,000
samples the audited lower bound is ≈ 0.37 against the claim 0.1 (the correct case: 0.0).

Λ not scaled with ε₁ (Λ = β instead of β/ε₁; :func:`broken_plan`, K recomputed for that Λ
so ‖∇J_b(ŵ)‖ ≤ γ still holds) costs the Jacobian factor 1 + φ″/Λ ≤ 2, a loss of up to
ln 2 > 0.1, but only where φ″ is large, |w₂| ≲ 2: about 1 % of the outputs (w₂ spreads as
σ₁/Λ ≈ 280). The battery's 50,000 samples in 64 bins do not certify it (lower bound 0.0;
0.13 with 10⁶ samples). ``tests/test_learn_amp_audit.py`` checks the factor through the
solver deterministically (fast) and audits it with 400,000 samples in 512 bins (slow; lower
bound ≈ 0.39, the planned Λ 0.0). Dropping b₂ or stopping after one step cannot be seen by
a black-box audit: either changes ŵ by a small smooth function of b₁ (an early stop moves ŵ
toward the data-free start −b₁/Λ); the proof needs them, the samples do not show them.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ApproxDP
from dpkit.core.metrics import AddRemoveDistance
from dpkit.learn._amp import LOGISTIC, AmpPlan, accelerated, amp_plan, solver_steps
from dpkit.learn._privacy import clip_rows
from dpkit.mechanisms import make_noise
from dpkit.mechanisms.registry import AuditCase, Sampler

__all__ = ["AUDIT_EPSILON", "AUDIT_DELTA", "AUDIT_X", "AUDIT_X_PRIME", "audit_plan",
           "broken_plan", "sampler", "audit_cases"]

AUDIT_EPSILON, AUDIT_DELTA = Fraction(1, 10), Fraction(1, 10**6)
AUDIT_X = [[1.0, 0.0, 1.0], [1.0, 0.0, -1.0], [0.5, 0.0, 1.0]]  # rows (x₁, x₂, t)
AUDIT_X_PRIME = AUDIT_X + [[0.0, 10.0, -1.0]]  # adds one row along e₂, outside R′ = 1
DIM = 2


def audit_plan() -> AmpPlan:
    """The plan of the case: logistic loss, R′² = 1, d = 2, (ε, δ) = (1/10, 10⁻⁶)."""
    return amp_plan(AUDIT_EPSILON, AUDIT_DELTA, LOGISTIC, Fraction(1), DIM)


def broken_plan(plan: AmpPlan) -> AmpPlan:
    """The plan with Λ = β, not β/ε₁ (everything else, γ included, as planned)."""
    return replace(plan, ridge=plan.smoothness)


def _gaussian(sensitivity: Fraction, epsilon: Fraction, delta: Fraction, scale: Fraction,
              shape: tuple[int, int]) -> np.ndarray:
    size = shape[0] * shape[1]
    draw = make_noise(sensitivity, epsilon=epsilon, delta=delta, norm="l2", output="grid",
                      size=size, scale=scale)(np.zeros(size))
    return np.asarray(draw, dtype=np.float64).reshape(shape)


def sampler(plan: AmpPlan, clip: bool = True) -> Sampler:
    """n releases ⟨w̃, e₂⟩ of AMP under ``plan`` on ``data`` (rows (x₁, x₂, t)): rows
    clipped to R′ = 1 (``clip=False``: the broken variant), b₁ and b₂ drawn through the
    calibrated-noise entry at the plan's scales, ŵ after exactly ``solver_steps(plan, n)``
    accelerated steps (:func:`dpkit.learn._amp.accelerated`, the production solver, batched
    over the n problems)."""
    def sample(data: object, n: int) -> np.ndarray:
        table = np.asarray(data, dtype=np.float64).reshape(-1, DIM + 1)
        rows, t = table[:, :DIM], table[:, DIM]
        rows = clip_rows(rows, 1.0) if clip else rows
        b1 = _gaussian(plan.lipschitz, plan.eps2, plan.delta1, plan.sigma1, (n, DIM))
        b2 = _gaussian(plan.output_sensitivity, plan.eps3, plan.delta2, plan.sigma2, (n, DIM))
        w = accelerated(rows, t, LOGISTIC, plan, b1, solver_steps(plan, rows.shape[0]))
        return (w + b2)[:, 1]
    return sample


def audit_cases() -> list[AuditCase]:
    """The case ``amp_fixed_steps`` (module docstring): claim the plan's (ε, δ) =
    (1/10, 10⁻⁶) for add/remove neighbours; broken: rows not clipped to R′."""
    plan = audit_plan()
    good = sampler(plan)
    rows = VectorDomain(VectorDomain(AtomDomain(Kind.FLOAT, infinity=False), size=DIM + 1))
    claim = Measurement(lambda data: good(data, 1)[0], AddRemoveDistance(), ApproxDP,
                        lambda d: ApproxDP(plan.epsilon * d, plan.delta * d),
                        "amp_fixed_steps", input_domain=rows)
    return [AuditCase("amp_fixed_steps", claim, good, sampler(plan, clip=False),
                      AUDIT_X, AUDIT_X_PRIME)]
