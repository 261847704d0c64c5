"""A linear support-vector classifier by approximate minima perturbation (Iyengar, Near,
Song, Thakkar, Thakurta & Wang, "Towards practical differentially private convex
optimization", IEEE S&P 2019, Alg. 1 / Thm 1; :mod:`dpkit.learn._amp`). (ε, δ)-DP,
add/remove neighbours.

The hinge loss is not smooth, so the fit uses Chaudhuri, Monteleoni & Sarwate's Huber hinge
("Differentially private empirical risk minimization", JMLR 2011, §3.4.2) of width h, on
the margin z = y⟨w, x̃⟩:

    ℓ_h(z) = 0 (z > 1 + h),   (1 + h − z)²/(4h) (|1 − z| ≤ h),   1 − z (z < 1 − h),

with |ℓ′| ≤ 1 and 0 ≤ ℓ″ ≤ 1/(2h). Rows x̃ = (x, s) are scaled into the L2 ball of the
declared R (the intercept column s, default R/√d, as ``LogisticRegression``), ‖x̃‖ ≤ R′ =
√(R² + s²): per row the gradient is at most L = R′ in norm and the Hessian at most
β = R′²/(2h) (rank one), which set AMP's regulariser Λ = β/ε₁ and its noise (module
docstring of :mod:`dpkit.learn._amp`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ApproxDP
from dpkit.core.metrics import AddRemoveDistance
from dpkit.core.numbers import positive
from dpkit.errors import DomainError
from dpkit.learn._amp import (
    HUBER_HINGE,
    AmpClassifier,
    AmpPlan,
    amp_plan,
    amp_rows,
    huber_hinge,
)
from dpkit.learn._baseline import one_sign, warn
from dpkit.learn._privacy import check_epsilon, clip_rows, standardise
from dpkit.learn._validation import ArrayLike, fit_binary, predict_features
from dpkit.mechanisms import make_noise
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["LinearSVC"]

SLACK = 1 + Fraction(1, 1 << 20)  # allowance for the float rounding of clip_rows


AUDIT_EPSILON, AUDIT_DELTA = Fraction(1), Fraction(1, 10**6)
BISECTIONS = 60  # the audit's 1-D solver: the bracket shrinks to 2^-60 of its width


def _audit_minimisers(rows: np.ndarray, b: np.ndarray, ridge: float) -> np.ndarray:
    """The exact minimisers (to 2^-60 of the bracket) of the 1-D AMP objectives
    Σ ℓ_h(yᵢxᵢw) + (Λ/2)w² + b·w, one per b, by bisection on the increasing gradient."""
    x, y = rows[:, 0], rows[:, 1]
    reach = (np.abs(b) + np.abs(x).sum()) / ridge  # |w*| ≤ (|b| + Σ|ℓ′||x|)/Λ
    low, high = -reach, reach
    for _ in range(BISECTIONS):
        mid = (low + high) / 2
        slopes = HUBER_HINGE.derivs(np.outer(mid, x), y[None, :])[1]
        grad = (slopes * x).sum(axis=1) + ridge * mid + b
        low, high = np.where(grad > 0, low, mid), np.where(grad > 0, mid, high)
    return (low + high) / 2


def _audit_sampler(plan: AmpPlan, shrink: int) -> Sampler:
    """n releases of 1-D AMP on ``data`` (rows (x, y), |x| ≤ 1, y = ±1): b₁ and b₂ from the
    entry at the plan's scales divided by ``shrink`` (1: the mechanism; more: broken)."""
    def sample(data: object, n: int) -> np.ndarray:
        rows = np.asarray(data, dtype=np.float64).reshape(-1, 2)
        # broken: scale and declared sensitivity both shrunk (the entry's map still holds
        # for the declared one; the data move b by the real L)
        b1 = make_noise(plan.lipschitz / shrink, epsilon=plan.eps2, delta=plan.delta1,
                        norm="l2", output="grid", size=n,
                        scale=plan.sigma1 / shrink)(np.zeros(n))
        b2 = make_noise(plan.output_sensitivity / shrink, epsilon=plan.eps3,
                        delta=plan.delta2, norm="l2", output="grid", size=n,
                        scale=plan.sigma2 / shrink)(np.zeros(n))
        w = _audit_minimisers(rows, np.asarray(b1, dtype=np.float64), float(plan.ridge))
        return w + np.asarray(b2, dtype=np.float64)
    return sample


def _audit() -> list[AuditCase]:
    """AMP on the Huber hinge in one dimension (x̃ = x, |x| ≤ 1, so R′ = 1, L = 1, β = 1,
    h = 1/2) at (ε, δ) = (1, 10⁻⁶): x is one row (1, +1), x′ adds (1, −1), whose gradient
    −ℓ′ pushes b_D(w) by the full L at every w near 0. Broken: both Gaussians at a tenth of
    their scale while the claim stays (1, 10⁻⁶) (b₁'s σ₁ ≈ 7 becomes ≈ 0.7 against a shift
    of w* by ≈ 1/Λ ≈ 0.1 per unit of b: a loss far above 1)."""
    plan = amp_plan(AUDIT_EPSILON, AUDIT_DELTA, HUBER_HINGE, Fraction(1), 1)
    rows = VectorDomain(VectorDomain(AtomDomain(Kind.FLOAT, infinity=False), size=2))
    claim = Measurement(lambda d: _audit_sampler(plan, 1)(d, 1), AddRemoveDistance(),
                        ApproxDP, lambda d: ApproxDP(AUDIT_EPSILON * d, AUDIT_DELTA * d),
                        "amp_svm", input_domain=rows)
    x = [[1.0, 1.0]]
    return [AuditCase("amp_svm", claim, _audit_sampler(plan, 1), _audit_sampler(plan, 10),
                      x, x + [[1.0, -1.0]])]


@register(audit=_audit)
class LinearSVC(AmpClassifier, ClassifierMixin, BaseEstimator):
    """(ε, δ)-DP linear SVM: approximate minima perturbation on the Huber hinge (module
    docstring).

    Parameters
    ----------
    epsilon : float
        ε > 0 (nats).
    delta : float
        δ ∈ (0, 1).
    data_norm : float, optional
        Declared R: rows are scaled into the L2 ball of radius R (never read off the data).
    classes : sequence of two labels
        Declared labels; the second is the positive class.
    bounds : (lower, upper), optional
        Declared per-feature bounds instead of ``data_norm``: features are clipped, centred
        and scaled to [−1, 1], divided by √d (so R = 1); prediction applies the same map.
    intercept_scaling : float, optional
        s, the constant feature carrying the intercept (default R/√d).
    huber : float
        The hinge's smoothing width h > 0 (default 1/2; β = R′²/(2h)).
    gamma : float, optional
        The solver's gradient-norm tolerance γ (default 2^-20·Λ).
    accountant : None, PrivacyFilter, Accountant or Session

    Notes
    -----
    Privacy: (ε, δ)-DP for add/remove neighbours, ε = ε₁ + ε₂ + ε₃ and δ = e^ε₃·δ₁ + δ₂
    (Iyengar et al. 2019 Thm 1, in the add/remove form of :mod:`dpkit.learn._amp`): L = R′,
    β = R′²/(2h), Λ = β/ε₁, b₁ Gaussian of scale σ₁ ≥ L(1 + √(2 ln(1/δ₁)))/ε₂, b₂ of scale
    (2γ/Λ)(1 + √(2 ln(1/δ₂)))/ε₃. ‖∇J_b(ŵ)‖ ≤ γ by a number of accelerated gradient steps
    fixed before the debit (:func:`dpkit.learn._amp.solver_steps`), so one proof covers
    every run; ``converged_`` reports the floating-point check of it. Nothing raises after
    the debit.

    Attributes
    ----------
    coef_ : ndarray (1, d), intercept_ : ndarray (1,), classes_ : ndarray (2,),
    converged_ : bool

    Warns
    -----
    TrivialResultWarning
        When b + ⟨w, x⟩ has one sign over the declared ball (|b| ≥ R‖w‖): one class for
        every input. Post-processing of the release and the declared R.

    Raises
    ------
    DomainError
        Missing data_norm/bounds or classes, ε ≤ 0, δ ∉ (0, 1), h ≤ 0, γ ≤ 0, labels outside
        ``classes``; all before anything is spent.
    """

    def __init__(self, epsilon: float = 1.0, delta: float | None = None,
                 data_norm: float | None = None, classes: Any = None, bounds: Any = None,
                 intercept_scaling: float | None = None, huber: float = 0.5,
                 gamma: float | None = None, accountant: AccountantLike = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.classes = classes
        self.bounds = bounds
        self.intercept_scaling = intercept_scaling
        self.huber = huber
        self.gamma = gamma
        self.accountant = accountant

    def fit(self, X: ArrayLike, y: ArrayLike) -> LinearSVC:
        x, classes, label = fit_binary(X, y, self.classes)
        eps = check_epsilon(self.epsilon)
        if self.delta is None:
            raise DomainError("declare delta (0 < δ < 1)")
        x = self._standardise(x)
        r = self._norm()
        d = x.shape[1] + 1
        s = r / math.sqrt(max(d - 1, 1)) if self.intercept_scaling is None \
            else float(self.intercept_scaling)
        if not s > 0:
            raise DomainError("intercept_scaling must be positive")
        loss = huber_hinge(float(positive(self.huber, "huber", up=False)))
        gamma = None if self.gamma is None else positive(self.gamma, "gamma", up=False)
        r2 = (Fraction(r) ** 2 + Fraction(s) ** 2) * SLACK ** 2
        plan = amp_plan(eps, positive(self.delta, "delta", up=False), loss, r2, d, gamma)
        compute = self._amp_compute(x, r, s, np.where(label == 1, 1.0, -1.0), loss, plan,
                                    classes)
        charge(self.accountant, plan.loss, f"LinearSVC(amp, ε={eps}, δ={plan.delta}, "
               f"d={d - 1}, h={self.huber:g})", compute, amp_rows(plan))
        reach = r * float(np.linalg.norm(self.coef_[0]))
        if one_sign(float(self.intercept_[0]), -reach, reach):
            warn("LinearSVC", "it predicts one class for every input in the declared domain")
        return self

    def _norm(self) -> float:
        if self.bounds is not None:
            return 1.0
        if self.data_norm is None or not float(self.data_norm) > 0:
            raise DomainError("declare data_norm (the rows' L2 bound) or bounds: dpkit "
                              "never reads them off the data")
        return float(self.data_norm)

    def _standardise(self, x: np.ndarray) -> np.ndarray:
        return standardise(x, self.bounds)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # two declared classes
        return tags

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        x = clip_rows(self._standardise(predict_features(self, X)), self._norm())
        return x @ self.coef_[0] + self.intercept_[0]

    def predict(self, X: ArrayLike) -> np.ndarray:
        positive_side = self.decision_function(X) > 0
        return self.classes_[positive_side.astype(int)]
