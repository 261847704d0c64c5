"""Approximate minima perturbation (AMP; Iyengar, Near, Song, Thakkar, Thakurta & Wang,
"Towards practical differentially private convex optimization", IEEE S&P 2019, Alg. 1 and
Thm 1), shared by ``LogisticRegression``, ``LinearRegression`` and ``LinearSVC``
(``method="amp"``). (ε, δ)-DP, add/remove neighbours, unnormalised (n never enters).

Rows are x̃ (‖x̃‖ ≤ R′, intercept column included) with targets t; the loss of a row is a
generalised linear φ(⟨w, x̃⟩, t) with |φ′| ≤ a and 0 ≤ φ″ ≤ c, so one row's gradient has norm
≤ L = a·R′ and its Hessian ≼ β·I with β = c·R′² (rank one). The release is

    w̃ = ŵ + b₂,   ‖∇J_b(ŵ)‖ ≤ γ,   J_b(w) = Σᵢ φ(⟨w, x̃ᵢ⟩, tᵢ) + (Λ/2)‖w‖² + ⟨b₁, w⟩,

with the budget split ε = ε₁ + ε₂ + ε₃ and δ₁, δ₂ (:func:`amp_plan`):

- Λ = β/ε₁ (the paper's bound rβ/ε₁ with r = 1 for add/remove: one row adds a rank-one
  Hessian, so the Jacobian ratio of w ↦ b is 1 + φ″x̃ᵀH⁻¹x̃ ≤ 1 + β/Λ ≤ e^ε₁);
- b₁ Gaussian at L2 sensitivity L and budget (ε₂, δ₁): the exact minimiser w* of J_b is
  (ε₁ + ε₂, δ₁)-DP (paper Thm 1's objective part; Kifer, Smith & Thakurta 2012 Thm 2);
- ŵ within γ/Λ of w* (J_b is Λ-strongly convex), so for two neighbours whose exact
  minimisers agree the approximate ones differ by ≤ Δ₃ = 2γ/Λ; b₂ Gaussian at L2
  sensitivity Δ₃ and budget (ε₃, δ₂) makes the release (ε, e^ε₃·δ₁ + δ₂)-DP (the
  output part conditioned on w*; δ₁ is taken as (δ − δ₂)·e^−ε₃ so the total is ≤ δ).

Both Gaussians have the paper's scale σ = Δ·(1 + √(2 ln(1/δ)))/ε (Alg. 1 lines 4 and 7;
:func:`paper_sigma`) and are drawn through the calibrated-noise entry
(:func:`dpkit.mechanisms.make_noise` with ``scale=σ``: the kit's exact lattice Gaussian,
whose map check certifies b₂'s (ε₃, δ₂) as a Gaussian mechanism). b₁ needs more than the
Gaussian mechanism's guarantee, because the shift b_{D′}(w) − b_D(w) = φ′·x̃ varies with w:
its direction u = x̃/‖x̃‖ is fixed, so with A = √(2 ln(2/δ₁)) the event |⟨b₁, u⟩| > σ₁A has
probability ≤ δ₁ and outside it the log density ratio is ≤ (2L·|⟨b₁, u⟩| + L²)/(2σ₁²) ≤
L·A/σ₁ + L²/(2σ₁²); :func:`objective_noise_ok` checks that this is ≤ ε₂ exactly, and
:func:`amp_plan` widens σ₁ by 1/8 steps until it is (the paper's σ₁ passes for ε₂ up to
about 11 at δ₁ ≈ 10⁻⁶: ε = 12 passes, 15 does not). The caveat of the lattice for
objective perturbation is the pure-ε method's (logistic module docstring): the argument is
for b₁ plus a uniform offset in its grid cell of side 2^k, k = ⌊log₂ σ₁⌋ − 30.

The solver runs a number K of iterations fixed before the debit from declared quantities
and n, never a convergence test: Nesterov's accelerated gradient method for a Λ-strongly
convex, M-smooth f (M = Λ + n·β, condition number κ = M/Λ), in the form and with the bound of
Bubeck, "Convex optimization: algorithms and complexity", Found. Trends ML 2015, Thm 3.18
(after Nesterov 2004, §2.2, constant step scheme III):

    y_{s+1} = x_s − ∇f(x_s)/M,   x_{s+1} = (1 + q)·y_{s+1} − q·y_s,   q = (√κ − 1)/(√κ + 1),
    f(y_{t}) − f* ≤ ((Λ + M)/2)·‖x₁ − x*‖²·exp(−(t − 1)/√κ).

It starts at x₁ = y₁ = −b₁/Λ, where Λx₁ + b₁ = 0, so ‖∇J_b(x₁)‖ = ‖Σᵢ φ′·x̃ᵢ‖ ≤ n·L and, by
strong convexity, ‖x₁ − w*‖ ≤ n·L/Λ; with ‖∇f‖² ≤ 2M(f − f*) (M-smoothness) the released
ŵ = y_{K+1} has

    ‖∇J_b(ŵ)‖² ≤ M·(Λ + M)·(n·L/Λ)²·exp(−K/√κ) ≤ γ²   for   K = ⌈√κ·ln(M(Λ + M)(nL)²/(Λγ)²)⌉

(:func:`solver_steps`, exact with directed rounding). So every run releases ŵ + b₂ with
‖∇J_b(ŵ)‖ ≤ γ, which is all the output part of the proof needs (Iyengar et al. Thm 1: it does
not care how ŵ was found): one mechanism, one proof, no branch. The work is K gradients of
the n rows whatever the data (K depends on n, ε, γ, the loss and the declared bounds only;
there is no early exit), K = √κ·ln(…) ≈ √(n·ε₁)·60: on Adult (n = 30,169) about 900
gradients at ε = 0.1 and 8,400 at ε = 5, where Newton took a handful (the proof pays for the
worst conditioning a dataset of n rows could have, every row on one line; the times are in
bench/results/learn_amp.md). As for every ERM mechanism here the solver's arithmetic is
floating point (Mironov 2012): ``converged_`` on the model reports the check ‖∇J_b(ŵ)‖ ≤ γ
on the computed gradient with an allowance for its rounding (:func:`converged`). It decides
nothing: the release is ŵ + b₂ either way; False would mean that rounding, not the theorem,
left ŵ outside γ, so the (ε, δ) then holds only up to the floating-point caveat shared by
every solver here.
The plan (``release_.noise``) lists b₁ and b₂.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpkit.core.measures import ApproxDP
from dpkit.core.numbers import dyadic_up, exp_up, log_up, sqrt_up
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.learn._privacy import clip_rows, single_threaded_blas
from dpkit.mechanisms import CalibratedNoise, frontend, make_noise
from dpkit.mechanisms.registry import AuditCase, register

__all__ = ["AmpPlan", "amp_plan", "paper_sigma", "solve_amp", "amp_rows", "GLMLoss",
           "LOGISTIC", "HUBER_HINGE", "huber_regression", "OBJECTIVE_NOISE", "OUTPUT_NOISE",
           "objective_noise_ok", "huber_hinge", "converged", "solver_steps", "accelerated",
           "gradient", "AmpClassifier"]

OBJECTIVE_NOISE = "b₁ (AMP objective)"
OUTPUT_NOISE = "b₂ (AMP output)"
OUTPUT_SHARE = Fraction(1, 100)  # ε₃ = ε/100 and δ₂ = δ/100 (the paper's code)
NOISE_SHARE = Fraction(9, 10)  # ε₂ = 0.9·(ε − ε₃), ε₁ the rest (the paper's code)
GAMMA_BITS = 20  # default γ = 2^-20·Λ: Δ₃ = 2^-19


Derivs = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]
Slope = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class GLMLoss:
    """A per-row loss φ(u, t) of u = ⟨w, x̃⟩: ``derivs(u, t)`` returns (φ, φ′, φ″) as
    arrays; ``slope`` a ≥ |φ′| and ``curvature`` c ≥ φ″ (exact); ``first(u, t)``, if given,
    φ′ alone (the solver's inner loop needs nothing else)."""

    name: str
    derivs: Derivs
    slope: Fraction
    curvature: Fraction
    first: Slope | None = None

    def derivative(self, u: np.ndarray, t: np.ndarray) -> np.ndarray:
        """φ′(u, t), shape of u."""
        return self.derivs(u, t)[1] if self.first is None else self.first(u, t)


def _logistic(u: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = t * u  # t = ±1
    p = 0.5 * (1 + np.tanh(-z / 2))  # σ(−z), stable
    return np.logaddexp(0, -z), -t * p, p * (1 - p)


def _logistic_slope(u: np.ndarray, t: np.ndarray) -> np.ndarray:
    # −t·σ(−tu) = (tanh(u/2) − t)/2 for t = ±1 (tanh is odd): two passes, not five
    return (np.tanh(u / 2) - t) / 2


def _huber_hinge_slope(h: float) -> Slope:
    """φ′ of :func:`_huber_hinge`: −t·clip((1 + h − z)/(2h), 0, 1)."""
    def first(u: np.ndarray, t: np.ndarray) -> np.ndarray:
        return -t * np.clip((1 + h - t * u) / (2 * h), 0.0, 1.0)
    return first


def _huber_slope(k: float) -> Slope:
    def first(u: np.ndarray, t: np.ndarray) -> np.ndarray:
        return -np.clip(t - u, -k, k)
    return first


def _huber_hinge(h: float) -> Derivs:
    """Chaudhuri et al. 2011 §3.4.2: 0 above 1 + h, (1 + h − z)²/(4h) within h of 1, 1 − z
    below; |ℓ′| ≤ 1, ℓ″ ≤ 1/(2h)."""
    def derivs(u: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z = t * u
        mid = np.abs(1 - z) <= h
        value = np.where(z > 1 + h, 0.0, np.where(mid, (1 + h - z) ** 2 / (4 * h), 1 - z))
        slope = np.where(z > 1 + h, 0.0, np.where(mid, -(1 + h - z) / (2 * h), -1.0))
        return value, t * slope, np.where(mid, 1 / (2 * h), 0.0)
    return derivs


def _huber(k: float) -> Derivs:
    """Huber's loss of the residual r = t − u: r²/2 for |r| ≤ k, k|r| − k²/2 beyond."""
    def derivs(u: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r = t - u
        inside = np.abs(r) <= k
        value = np.where(inside, r * r / 2, k * np.abs(r) - k * k / 2)
        return value, -np.clip(r, -k, k), inside.astype(np.float64)
    return derivs


LOGISTIC = GLMLoss("logistic", _logistic, Fraction(1), Fraction(1, 4), _logistic_slope)
HUBER_HINGE = GLMLoss("huber hinge (h = 1/2)", _huber_hinge(0.5), Fraction(1), Fraction(1),
                      _huber_hinge_slope(0.5))


def huber_hinge(h: float) -> GLMLoss:
    """The smoothed hinge with width h > 0: L-slope 1, curvature 1/(2h)."""
    return GLMLoss(f"huber hinge (h = {h:g})", _huber_hinge(h), Fraction(1),
                   1 / (2 * Fraction(h)), _huber_hinge_slope(h))


def huber_regression(k: float) -> GLMLoss:
    """Huber regression at threshold k > 0: slope k, curvature 1."""
    return GLMLoss(f"huber (k = {k:g})", _huber(k), Fraction(k), Fraction(1), _huber_slope(k))


@dataclass(frozen=True)
class AmpPlan:
    """The data-free constants of one AMP fit (exact Fractions; :func:`amp_plan`)."""

    epsilon: Fraction
    delta: Fraction
    eps1: Fraction  # the Jacobian's share: Λ = β/ε₁
    eps2: Fraction  # b₁'s
    eps3: Fraction  # b₂'s
    delta1: Fraction  # b₁'s
    delta2: Fraction  # b₂'s
    lipschitz: Fraction  # L = a·R′
    smoothness: Fraction  # β = c·R′²
    ridge: Fraction  # Λ
    gamma: Fraction  # γ, the gradient-norm tolerance
    output_sensitivity: Fraction  # Δ₃ = 2γ/Λ
    sigma1: Fraction  # b₁'s scale
    sigma2: Fraction  # b₂'s scale
    dim: int

    @property
    def loss(self) -> ApproxDP:
        return ApproxDP(self.epsilon, self.delta)


def amp_plan(epsilon: Fraction, delta: Fraction, loss: GLMLoss, r2: Fraction, dim: int,
             gamma: Fraction | None = None) -> AmpPlan:
    """The budget split and constants of AMP (module docstring), exact.

    Parameters
    ----------
    epsilon, delta : Fraction
        The whole (ε, δ), ε > 0, 0 < δ < 1.
    loss : GLMLoss
        Its slope a and curvature c.
    r2 : Fraction
        R′², the squared L2 bound of an augmented row.
    dim : int
        The number of weights (d + 1 with the intercept).
    gamma : Fraction, optional
        γ > 0; default 2^-20·Λ (so Δ₃ = 2^-19, data-free).

    Returns
    -------
    AmpPlan
        ε₃ = ε/100, ε₂ = (9/10)(ε − ε₃), ε₁ = ε − ε₃ − ε₂; δ₂ = δ/100,
        δ₁ = (δ − δ₂)/e^ε₃ (e^ε₃ rounded up, so δ₁ down); L = a·√R′² (rounded up to 2^-40),
        β = c·R′², Λ = β/ε₁, Δ₃ = 2γ/Λ, σ₂ = :func:`paper_sigma` (Δ₃, ε₃, δ₂) and σ₁ the
        paper's σ at (L, ε₂, δ₁), widened by factors 9/8 until :func:`objective_noise_ok`.

    Raises
    ------
    DomainError
        δ not in (0, 1), γ ≤ 0.
    """
    if not 0 < delta < 1:
        raise DomainError("method='amp' needs 0 < delta < 1")
    eps3 = epsilon * OUTPUT_SHARE
    eps2 = (epsilon - eps3) * NOISE_SHARE
    eps1 = epsilon - eps3 - eps2
    delta2 = delta * OUTPUT_SHARE
    delta1 = (delta - delta2) / exp_up(eps3)
    lipschitz = loss.slope * dyadic_up(sqrt_up(r2), 40)
    beta = loss.curvature * r2
    ridge = beta / eps1
    g = ridge / (1 << GAMMA_BITS) if gamma is None else Fraction(gamma)
    if not g > 0:
        raise DomainError("gamma must be positive")
    sigma1 = dyadic_up(paper_sigma(lipschitz, eps2, delta1), 40)
    while not objective_noise_ok(sigma1, lipschitz, eps2, delta1):
        sigma1 = sigma1 * Fraction(9, 8)
    sens3 = 2 * g / ridge
    return AmpPlan(epsilon, delta, eps1, eps2, eps3, delta1, delta2, lipschitz, beta, ridge,
                   g, sens3, sigma1, dyadic_up(paper_sigma(sens3, eps3, delta2), 60), dim)


def objective_noise_ok(sigma: Fraction, lipschitz: Fraction, epsilon: Fraction,
                       delta: Fraction) -> bool:
    """Whether b₁ of scale σ gives objective perturbation's noise part (ε, δ) for shifts
    c·u, |c| ≤ L, u a fixed unit vector (module docstring): L·A/σ + L²/(2σ²) ≤ ε with
    A = √(2 ln(2/δ)) rounded up, exactly."""
    a = sqrt_up(2 * log_up(2 / delta))
    return lipschitz * a / sigma + lipschitz ** 2 / (2 * sigma ** 2) <= epsilon


def paper_sigma(sensitivity: Fraction, epsilon: Fraction, delta: Fraction) -> Fraction:
    """The paper's Gaussian scale Δ·(1 + √(2 ln(1/δ)))/ε (Alg. 1, lines 4 and 7), rounded
    up: the kit's calibration at (ε, δ) must not exceed it (tests)."""
    return sensitivity * (1 + sqrt_up(2 * log_up(1 / delta))) / epsilon


def _mechanisms(plan: AmpPlan) -> tuple[CalibratedNoise, CalibratedNoise]:
    """b₁'s and b₂'s measurements from the calibrated-noise entry at the plan's scales (its
    map check: each Gaussian is within its (ε, δ) as a Gaussian mechanism)."""
    d = plan.dim
    return (make_noise(plan.lipschitz, epsilon=plan.eps2, delta=plan.delta1, norm="l2",
                       output="grid", size=d, scale=plan.sigma1),
            make_noise(plan.output_sensitivity, epsilon=plan.eps3, delta=plan.delta2,
                       norm="l2", output="grid", size=d, scale=plan.sigma2))


def amp_rows(plan: AmpPlan) -> tuple[NoiseRow, NoiseRow]:
    """The planned noise rows, written with the debit: b₁ and b₂ (both always drawn)."""
    b1, b2 = _mechanisms(plan)
    return frontend.row_of(b1, OBJECTIVE_NOISE), frontend.row_of(b2, OUTPUT_NOISE)


def _draw(mechanism: CalibratedNoise, d: int) -> np.ndarray:
    return np.asarray(mechanism(np.zeros(d)), dtype=np.float64)


def solver_steps(plan: AmpPlan, n: int) -> int:
    """K, the solver's number of gradient steps (module docstring), from the plan and n.

    Parameters
    ----------
    plan : AmpPlan
        Λ, β, L and γ (exact).
    n : int
        The number of rows (≥ 0).

    Returns
    -------
    int
        K = max(0, ⌈√κ·ln X⌉) with κ = M/Λ, M = Λ + n·β, X = M(Λ + M)(nL)²/(Λγ)², √ and
        ln rounded up: then exp(−K/√κ)·X ≤ 1, i.e. Bubeck 2015 Thm 3.18 with ‖x₁ − w*‖ ≤
        nL/Λ and ‖∇f‖² ≤ 2M(f − f*) gives ‖∇J_b(y_{K+1})‖ ≤ γ. Data-free beyond n.
    """
    if n == 0:
        return 0  # J_b = (Λ/2)‖w‖² + ⟨b₁, w⟩: the start −b₁/Λ is its minimiser
    lam = plan.ridge
    m = lam + n * plan.smoothness
    x = m * (lam + m) * (n * plan.lipschitz) ** 2 / (lam * plan.gamma) ** 2
    return max(0, math.ceil(sqrt_up(m / lam) * log_up(x)))


def gradient(rows: np.ndarray, t: np.ndarray, loss: GLMLoss, ridge: float,
             linear: np.ndarray, w: np.ndarray) -> np.ndarray:
    """∇J_b(w) = Σᵢ φ′(⟨w, x̃ᵢ⟩, tᵢ)·x̃ᵢ + ridge·w + linear, of w's shape: (d,), or (m, d)
    for a batch of m problems on the same rows (with ``linear`` of the same shape)."""
    return loss.derivative(w @ rows.T, t) @ rows + ridge * w + linear


def accelerated(rows: np.ndarray, t: np.ndarray, loss: GLMLoss, plan: AmpPlan,
                b1: np.ndarray, steps: int) -> np.ndarray:
    """Exactly ``steps`` iterations of Nesterov's accelerated gradient method on J_b from
    x₁ = −b₁/Λ (module docstring; Bubeck 2015 Thm 3.18's scheme), no test, no exit: y_{K+1}.
    Time depends on n, d and ``steps`` only. ``b1`` is (d,) or a batch (m, d) of independent
    problems on the same rows (the audit's sampler, :mod:`dpkit.learn._amp_audit`); the
    result has its shape."""
    ridge = float(plan.ridge)
    smooth = ridge + rows.shape[0] * float(plan.smoothness)
    root = math.sqrt(smooth / ridge)
    q = (root - 1) / (root + 1)
    x = -b1 / ridge
    y = x
    for _ in range(steps):
        y_next = x - gradient(rows, t, loss, ridge, b1, x) / smooth
        x = (1 + q) * y_next - q * y
        y = y_next
    return y


def converged(norm: float, w: np.ndarray, b1: np.ndarray, n: int, plan: AmpPlan) -> bool:
    """‖∇J_b(w)‖ ≤ γ for the exact gradient, given the computed norm: the computed
    gradient sums n row gradients (each of norm ≤ L), Λw and b₁ in float64, so it is
    within 2^-50·(n·d·L + Λ‖w‖ + ‖b₁‖) of the exact one (a generous bound on the
    rounding of d-coordinate sums of n terms). A report, never a branch (module docstring)."""
    if not (np.isfinite(norm) and np.all(np.isfinite(w))):
        return False
    rounding = 2.0 ** -50 * (n * plan.dim * float(plan.lipschitz)
                             + float(plan.ridge) * float(np.linalg.norm(w))
                             + float(np.linalg.norm(b1)))
    return norm + rounding <= float(plan.gamma)


def _audit() -> list[AuditCase]:
    # the fixed-step solver's case (dpkit.learn._amp_audit), built when the battery reads it
    from dpkit.learn._amp_audit import audit_cases
    return audit_cases()


@register(audit=_audit)
def solve_amp(rows: np.ndarray, t: np.ndarray, loss: GLMLoss, plan: AmpPlan,
              steps: int | None = None) -> tuple[np.ndarray, bool]:
    """The data side of AMP (module docstring), total: ŵ + b₂ with ŵ after ``steps`` (default
    :func:`solver_steps`) accelerated gradient steps, and the floating-point check of
    ‖∇J_b(ŵ)‖ ≤ γ (:func:`converged`; reported, it changes nothing released). ``rows`` are
    already clipped to ‖x̃‖ ≤ R′."""
    d, n = plan.dim, rows.shape[0]
    k = solver_steps(plan, n) if steps is None else steps
    with single_threaded_blas():
        objective, output = _mechanisms(plan)
        b1 = _draw(objective, d)
        w = accelerated(rows, t, loss, plan, b1, k)
        norm = float(np.linalg.norm(gradient(rows, t, loss, float(plan.ridge), b1, w)))
        ok = converged(norm, w, b1, n, plan)
        return np.nan_to_num(w) + _draw(output, d), ok


class AmpClassifier:
    """The data side shared by ``LogisticRegression(method="amp")`` and ``LinearSVC`` (a
    mixin): rows clipped to the declared norm with the intercept column, :func:`solve_amp`,
    and the fitted attributes."""

    coef_: np.ndarray  # (1, d)
    intercept_: np.ndarray  # (1,)
    classes_: np.ndarray  # (2,)
    n_features_in_: int
    converged_: bool

    def _amp_compute(self, x: np.ndarray, norm: float, scaling: float, signs: np.ndarray,
                     loss: GLMLoss, plan: AmpPlan, classes: np.ndarray
                     ) -> Callable[[], AmpClassifier]:
        """The closure to charge: x (n, d) clipped to ``norm`` plus the column ``scaling``,
        targets ``signs`` = ±1; sets the attributes above and returns the model."""
        def compute() -> AmpClassifier:
            rows = np.column_stack([clip_rows(x, norm), np.full(x.shape[0], scaling)])
            w, self.converged_ = solve_amp(rows, signs, loss, plan)
            self.coef_ = w[None, :-1]
            self.intercept_ = w[-1:] * scaling
            self.classes_ = classes
            self.n_features_in_ = x.shape[1]
            return self
        return compute
