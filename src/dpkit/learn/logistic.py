"""Logistic regression by output perturbation (Chaudhuri, Monteleoni & Sarwate, "Differentially
private empirical risk minimization", JMLR 2011, Alg. 1 / Thm 6, in the add/remove form),
objective perturbation (Alg. 2 / Thm 9) or the functional mechanism, pure ε-DP; or
approximate minima perturbation, (ε, δ)-DP.

The model minimises J(w) = C·Σᵢ ℓ(yᵢ⟨w, x̃ᵢ⟩) + ½‖w‖² (scikit-learn's parametrisation),
ℓ the logistic loss, x̃ᵢ = (xᵢ, s) with xᵢ scaled into the L2 ball of the declared
``data_norm`` R and the intercept column equal to s (``intercept_scaling``), so
‖x̃ᵢ‖ ≤ R′ = √(R² + s²). J is
1-strongly convex and adding or removing one record adds or removes a term whose gradient
is at most C·R′ in norm, so the minimiser moves by at most Δ₂ = C·R′ (CMS11 Cor. 8 without
the factor 2 of replace-one neighbours). The released weights are the exact minimiser
(L-BFGS to a tight tolerance) plus vector-mechanism noise of scale Δ₂/ε
(:func:`dpkit.mechanisms.vector.make_vector_laplace`; density ∝ exp(−ε‖b‖/Δ₂)) when
d + 1 ≤ 40, else grid Laplace per coordinate with L1 sensitivity √(d+1)·Δ₂.

Trade-off: the noise grows with C while the regularisation bias shrinks with it. The
defaults are data-independent (ε, d, R declared): C = ε/((d + 1)·R·R′), which puts the
planned noise on w at mean norm 1/R, and s = R/√d (issue 34; the old C = 1/√n̂ with s = 1
stayed at the majority class on uncentred features at every ε, and is reachable by passing
them). Chosen on synthetic data, evaluated on Adult (bench/learn_logistic_peers.py). The solver's
tolerance adds an error ‖ŵ − w*‖ ≤ ‖∇J(ŵ)‖ (strong convexity) that is checked against
2^-20·Δ₂ and then counted in the sensitivity.

``method="objective"`` (the default ``"auto"`` with only ``data_norm``): objective
perturbation (CMS11 Alg. 2 / Thm 9, here in the add/remove form and unnormalised, so n never
enters). The released w is the minimiser of

    J_b(w) = Σᵢ ℓ(yᵢ⟨w, x̃ᵢ⟩) + ((λ + Δ)/2)‖w‖² + ⟨b, w⟩,   λ = 1/C (0 without C),

with ℓ the logistic loss (|ℓ′| ≤ 1, 0 ≤ ℓ″ ≤ c = 1/4) and ‖x̃ᵢ‖ ≤ R′ (intercept column
included and penalised: the Jacobian bound needs λ + Δ > 0 on every coordinate). Privacy:
b = −∇(J_b − ⟨b, ·⟩)(w) is a bijection of w; adding or removing one row moves b(w) by
ℓ′·y·x̃, of norm ≤ R′, and multiplies the Jacobian determinant by 1 + ℓ″·x̃ᵀH⁻¹x̃ ≤
1 + c·R′²/(λ + Δ) (matrix determinant lemma, H ⪰ (λ + Δ)I), so with b of density
∝ exp(−ε′‖b‖/R′) the output density ratio is ≤ exp(ε′ + log(1 + c·R′²/(λ + Δ))) ≤ e^ε.
The split (:func:`objective_budget`) is the paper's: ε′ = ε − log(1 + c·R′²/λ) when
positive, else ε′ = ε/2 and Δ = c·R′²/(e^(ε/2) − 1) − λ (the paper's replace-one form has
the square of that factor and ‖b‖'s scale 2/ε′; add/remove needs one factor and R′/ε′).
Default (no C): λ = 0, i.e. the second branch, half of ε on each term (chosen on synthetic
data, bench/learn_logistic_synthetic.py: it beat output perturbation in every cell and
the splits ¼ and ¾ were no better; Adult held out). b is drawn through
:func:`~dpkit.mechanisms.frontend.noisy` (the vector mechanism at L2 sensitivity R′ and
budget ε′; Laplace per coordinate at √(d + 1)·R′ in L1 beyond 40 weights), i.e. exactly
from the lattice law P(b) ∝ exp(−‖b‖/σ) on the grid 2^k·ℤ^(d+1), k = ⌊log₂ σ⌋ − 30, whose
calibration already covers (R′ + 2^k·√(d + 1))/σ ≤ ε′. Exactness and its caveat: the
argument above needs a density for b; b + U (U uniform on b's grid cell) has one, with
ratio ≤ exp((‖Δb‖ + 2^k√(d+1))/σ) ≤ e^ε′, so the guarantee is for the exact minimiser of
J_{b+U}; the release is the minimiser of J_b (‖w_b − w_{b+U}‖ ≤ 2^(k−1)√(d+1)/(λ + Δ)),
computed by Newton/L-BFGS to ‖∇J_b‖ < 10⁻¹²·max(1, n) (so within that/(λ + Δ) of the exact
minimiser). Like every implementation of objective perturbation (diffprivlib's
included) the proof covers the exact minimiser only: an approximate one is not covered
(Iyengar, Near, Song, Thakkar, Thakurta & Wang, "Towards practical differentially private
convex optimization", IEEE S&P 2019, §3, approximate minima perturbation: ``"amp"``
below), nor are floating-point effects (Mironov 2012). Charged: PureDP(ε), one noise row
(b's).

``method="amp"``: approximate minima perturbation (Iyengar, Near, Song, Thakkar, Thakurta &
Wang, IEEE S&P 2019, Alg. 1 / Thm 1; :mod:`dpkit.learn._amp`), (ε, δ)-DP with ``delta``:
the objective above with a Gaussian b₁, Λ = β/ε₁ (β = R′²/4), solved only to ‖∇J_b‖ ≤ γ,
plus a Gaussian b₂ at sensitivity 2γ/Λ that covers the solver's error — so, unlike
``"objective"``, its guarantee does not assume the exact minimiser.

``method="functional"``: the functional mechanism (Zhang, Zhang, Xiao, Yang & Winslett,
"Functional mechanism: regression analysis under differential privacy", PVLDB 2012, §5 for
the logistic loss, §6 for the regularisation/spectral trimming). Pure ε-DP, add/remove
neighbours. Each row becomes φ = (numeric part, one-hot part, 1): a numeric column is
clipped to its declared [l, u] and mapped to [−1, 1], rounded to the grid 2^-10; a declared
one-hot group keeps its 0/1 columns (at most one 1; all zeros is a missing category); the
constant 1 carries the intercept. The second-order Taylor expansion of the logistic loss
at 0, log(1 + e^z) − y·z ≈ log 2 − (y − ½)·z + z²/8 with z = ⟨w, φ⟩, makes the objective

    Σᵢ [⅛ wᵀφᵢφᵢᵀw − (yᵢ − ½)⟨w, φᵢ⟩] = ⅛ wᵀGw − ⟨w, u⟩,   G = Σ φφᵀ,  u = Σ (y − ½)φ,

a polynomial whose coefficients are released with the grid Laplace mechanism:

- G at ε/2, on the pairs P = {(i, j): i ≤ j} minus the pairs that are identically zero or
  repeated under the declared structure (two columns of one group; the diagonal (j, j) of a
  one-hot column equals (j, 1) since φ_j² = φ_j). One row touches at most
  a = k + m + 1 non-zero coordinates (k groups, m numeric columns, the constant), each of
  magnitude ≤ 1, so it adds at most Δ_G = a(a + 1)/2 − k to the L1 norm of G|_P
  (97 for Adult's 8 groups and 5 numeric columns).
- u at ε/2: one row adds (y − ½)φ, so Δ_u = a/2 in L1; its constant coordinate is the
  noisy class balance Σ(y − ½), which sets the intercept.

Both sums are exact (multiples of 2^-20 below 2^33 in magnitude are exact in float64 in any
summation order; n < 2^32 is checked), so the L1 bounds are those of the released values,
and :func:`~dpkit.mechanisms.frontend.noisy` folds its grid rounding into the
calibration: the pair of releases is (ε/2 + ε/2)-DP by basic composition, everything after
is post-processing. The noisy G̃ is symmetrised, its negative eigenvalues are set to zero
(§6's spectral trimming: the noisy objective must be bounded below) and a ridge λ is added
on every coordinate but the intercept's (§6's regularisation); the weights solve
(G̃₊ + λ·I′)·w = 4ũ, the minimiser of ⅛ wᵀG̃₊w − ⟨w, ũ⟩ + (λ/8)‖w′‖². Default λ =
½·b_G·√(d + 1) with b_G = Δ_G/(ε/2) the Laplace scale on G: the noise matrix's spectral norm
is of order 2√2·b_G·√(d + 1), so λ sits below it by a data-free constant (chosen on Adult,
a public benchmark); ``C`` overrides it as λ = 4/C (scikit-learn's C·Σℓ + ½‖w‖² on the
Taylor objective). Noise on G is O(a²/ε) and on u O(a/ε) whatever d is, unlike output
perturbation's, which grows with √d; the price is the Taylor bias (the fit is the
least-squares classifier, not the logistic one).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit.core.measures import PureDP
from dpkit.core.numbers import dyadic_up, exp_down, log_up, positive, sqrt_up
from dpkit.errors import DomainError
from dpkit.learn._amp import LOGISTIC, AmpClassifier, amp_plan, amp_rows
from dpkit.learn._baseline import LEVEL, one_sign, warn, within_noise
from dpkit.learn._privacy import (
    check_bounds,
    check_epsilon,
    clip_rows,
    single_threaded_blas,
    standardise,
)
from dpkit.learn._validation import ArrayLike, fit_binary, predict_features
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["LogisticRegression"]

MAX_VECTOR_DIM = 40
WEIGHTS, GRAM, LINEAR = "weights", "ΦᵀΦ (released pairs)", "Σ (y − ½)φ"
METHODS = ("auto", "output", "functional", "objective", "amp")
CURVATURE = Fraction(1, 4)  # c ≥ ℓ″ = σ(z)σ(−z) for the logistic loss
OBJECTIVE_NOISE = "b (objective perturbation)"
SLACK = 1 + Fraction(1, 1 << 20)  # allowance for the float rounding of clip_rows
ONE_CLASS = 0.95  # training-rows rule: agreeing with a constant on ≥ 95% of the rows fitted
GRID_BITS = 10  # numeric features are rounded to multiples of 2^-10 (exact Gram sums)
RIDGE_FACTOR = 0.5  # default λ = RIDGE_FACTOR · b_G · √(d + 1)


def _fit_exact(x: np.ndarray, s: np.ndarray, c: float, ridge: float = 1.0,
               linear: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """argmin C·Σ log(1 + exp(−sᵢ⟨w, xᵢ⟩)) + (ridge/2)‖w‖² + ⟨linear, w⟩, and the final
    gradient norm (``ridge`` 1 and no ``linear`` term: scikit-learn's objective).

    Newton's method from 0 with step halving (the objective is ridge-strongly convex and
    smooth: few steps, each one pass for the gradient and one for the (d × d) Hessian),
    until ‖∇J‖ < 10⁻¹²·max(1, C·n); L-BFGS then Newton polish if that fails to converge.
    The caller checks the returned gradient norm, whichever path produced it."""
    n, d = x.shape
    signed = x * s[:, None]  # margins zᵢ = sᵢ⟨w, xᵢ⟩ = ⟨w, sᵢxᵢ⟩; sᵢ² = 1
    tol = 1e-12 * max(1.0, c * n)
    lin = np.zeros(d) if linear is None else linear

    def evaluate(w: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        z = signed @ w
        value = -c * float(np.sum(log_expit(z))) + 0.5 * ridge * float(w @ w) + float(lin @ w)
        return value, -c * (signed.T @ expit(-z)) + ridge * w + lin, z

    with single_threaded_blas():
        w = np.zeros(d)
        value, grad, z = evaluate(w)
        for _ in range(100):
            if float(np.linalg.norm(grad)) < tol:
                return w, float(np.linalg.norm(grad))
            curvature = expit(z) * expit(-z)
            hessian = c * (signed.T * curvature) @ signed + ridge * np.eye(d)
            step = np.linalg.solve(hessian, grad)
            t = 1.0
            while t > 1e-12:
                trial = evaluate(w - t * step)
                # a decrease, up to the rounding of the sum near the optimum
                if trial[0] <= value + 1e-14 * max(1.0, abs(value)):
                    break
                t /= 2
            else:
                break
            w = w - t * step
            value, grad, z = trial
        return _fit_lbfgs(x, s, c, ridge, lin)


def _fit_lbfgs(x: np.ndarray, s: np.ndarray, c: float, ridge: float,
               lin: np.ndarray) -> tuple[np.ndarray, float]:
    """The fallback of :func:`_fit_exact`: L-BFGS to a tight tolerance, Newton polish."""

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = s * (x @ w)
        value = -c * float(np.sum(log_expit(z))) + 0.5 * ridge * float(w @ w) + float(lin @ w)
        grad = -c * (x.T @ (s * expit(-z))) + ridge * w + lin
        return value, grad

    w0 = np.zeros(x.shape[1])
    res = minimize(objective, w0, jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-10, "ftol": 0})
    w = res.x
    for _ in range(20):  # Newton polish: the sensitivity allowance needs a tiny gradient
        grad = objective(w)[1]
        if np.linalg.norm(grad) < 1e-12 * max(1.0, c * x.shape[0]):
            break
        p = expit(s * (x @ w))
        hessian = c * (x.T * (p * (1 - p))) @ x + ridge * np.eye(x.shape[1])
        w = w - np.linalg.solve(hessian, grad)
    return w, float(np.linalg.norm(objective(w)[1]))


def default_intercept_scaling(norm: float, n_features: int) -> float:
    """The default intercept_scaling s = R/√d: the constant column has the size of an
    average coordinate of a row on the sphere of radius R in d dimensions, so the intercept
    is penalised and noised like one more feature (chosen on synthetic data, bench/
    learn_logistic_peers.py; never on Adult)."""
    return norm / math.sqrt(max(n_features, 1))


def default_c(epsilon: Fraction, norm: float, intercept_scaling: float, dim: int) -> float:
    """The default C of output perturbation: C = ε / (D·R·R′), D = d + 1 weights,
    R′ = √(R² + s²).

    The noise's L2 norm has mean D·Δ₂/ε = D·C·R′/ε (Gamma(D, Δ₂/ε), CMS11 Alg. 1), so this C
    puts the noise on w at mean norm 1/R, i.e. a mean shift of at most about 1 in the
    log-odds of a row of norm R, whatever ε, d and R: the regularisation then weakens as ε
    grows instead of staying at the old 1/√n̂, which kept the model at the majority class
    on uncentred features at every ε. Data-independent (declared R, s, ε, d only); the
    constant 1 was chosen on synthetic data (bench/learn_logistic_peers.py), not on Adult.
    """
    r_prime = math.sqrt(norm * norm + intercept_scaling * intercept_scaling)
    return float(epsilon) / (dim * norm * r_prime)


def objective_budget(epsilon: Fraction, ridge: Fraction, r2: Fraction,
                     curvature: Fraction = CURVATURE) -> tuple[Fraction, Fraction]:
    """(ε′, Δ) of objective perturbation (CMS11 Alg. 2 in the add/remove form, module
    docstring): ε′ = ε − log(1 + c·R′²/λ) (log rounded up, so ε′ down); when that is ≤ 0
    (or λ = 0, no declared regularisation), the paper's second branch: ε′ = ε/2 and
    Δ = c·R′²/(e^(ε/2) − 1) − λ (e^(ε/2) rounded down, so Δ up), which makes
    log(1 + c·R′²/(λ + Δ)) ≤ ε/2. Exact Fractions throughout.

    Parameters
    ----------
    epsilon : Fraction
        ε > 0 (nats), the whole budget.
    ridge : Fraction
        λ ≥ 0, the declared ridge of Σℓ + (λ/2)‖w‖² (λ = 1/C).
    r2 : Fraction
        R′², the squared L2 bound of an augmented row (x, s).
    curvature : Fraction
        c ≥ ℓ″ (1/4 for the logistic loss).

    Returns
    -------
    (Fraction, Fraction)
        ε′ > 0, the budget of the noise vector b (density ∝ exp(−ε′‖b‖/R′)), and Δ ≥ 0,
        the ridge added to λ.
    """
    if ridge > 0:
        eps_b = epsilon - log_up(1 + curvature * r2 / ridge)
        if eps_b > 0:
            return eps_b, Fraction(0)
    delta = curvature * r2 / (exp_down(epsilon / 2) - 1) - ridge
    return epsilon / 2, max(delta, Fraction(0))


def functional_sensitivities(k: int, m: int) -> tuple[int, Fraction]:
    """L1 sensitivities (Δ_G, Δ_u) of the functional mechanism's two releases for ``k``
    one-hot groups and ``m`` numeric columns (module docstring): a = k + m + 1 non-zero
    coordinates of magnitude ≤ 1 per row, a(a + 1)/2 pairs among them of which the k
    one-hot diagonals are not released; Δ_u = a/2 since |y − ½| = ½."""
    a = k + m + 1
    return a * (a + 1) // 2 - k, Fraction(a, 2)


def _layout(d: int, one_hot: Any) -> tuple[list[np.ndarray], np.ndarray]:
    """The declared one-hot groups (index arrays) and the remaining, numeric, columns."""
    groups: list[np.ndarray] = []
    seen: set[int] = set()
    for g, group in enumerate(one_hot or ()):
        idx = np.asarray(list(group), dtype=np.int64)
        if idx.ndim != 1 or idx.size == 0 or np.any(idx < 0) or np.any(idx >= d):
            raise DomainError(f"one_hot group {g}: column indices must lie in [0, {d})")
        if seen & set(idx.tolist()) or len(set(idx.tolist())) != idx.size:
            raise DomainError(f"one_hot group {g}: a column appears in two groups or twice")
        seen |= set(idx.tolist())
        groups.append(idx)
    numeric = np.array([j for j in range(d) if j not in seen], dtype=np.int64)
    return groups, numeric


def _released_pairs(d: int, groups: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs P of the augmented (d + 1)² matrix G that are released (module
    docstring): i ≤ j, not two columns of one group, not a one-hot diagonal."""
    label = np.full(d + 1, -1)
    for g, idx in enumerate(groups):
        label[idx] = g
    i, j = np.triu_indices(d + 1)
    same_group = (label[i] >= 0) & (label[i] == label[j])
    return i[~same_group], j[~same_group]


def _functional_statistics(phi: np.ndarray, t: np.ndarray, pairs: tuple[np.ndarray, np.ndarray]
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The exact, pre-noise statistics: G = Σ φφᵀ on ``pairs`` and u = Σ (y − ½)φ."""
    return (phi.T @ phi)[pairs], phi.T @ (t - 0.5)


class LogisticRegression(AmpClassifier, ClassifierMixin, BaseEstimator):
    """ε-DP binary logistic regression (module docstring): output perturbation
    (``method="output"``), objective perturbation (``"objective"``; the default ``"auto"``
    picks it with only ``data_norm``) or the functional mechanism (``"functional"``;
    ``"auto"`` picks it when bounds are declared).

    Parameters
    ----------
    epsilon : float
        ε > 0 (nats).
    data_norm : float
        Declared R: rows are scaled into the L2 ball of radius R (never read off the data).
    classes : sequence of two labels
        Declared labels; the second is the positive class.
    C : float, optional
        Inverse regularisation strength (scikit-learn's). Default (``"output"``)
        C = ε/((d + 1)·R·R′) (:func:`default_c`: the planned noise on w has mean norm 1/R);
        before issue 34 it was 1/√``n_hint``, which kept the model at the majority class.
    n_hint : int, optional
        Deprecated: a public guess of the number of records; without ``C`` it restores the
        old default C = 1/√n_hint with a DeprecationWarning.
    accountant : None, PrivacyFilter or Session
    intercept_scaling : float, optional
        s, the value of the constant feature that carries the intercept (scikit-learn's
        liblinear parameter): R′ = √(R² + s²); a smaller s puts less noise on the decision
        function's offset and regularises the intercept more. Default R/√d (the size of
        an average coordinate of a row of norm R; :func:`default_intercept_scaling`); it
        was 1.0 before issue 34.
    bounds : (lower, upper), optional
        Declared per-feature bounds instead of ``data_norm``: features are clipped, centred
        and scaled to [−1, 1], divided by √d (so R = 1); prediction applies the same map.
        Required by ``method="functional"`` (there without the √d; one-hot columns must
        be declared (0, 1)).
    method : {"auto", "output", "objective", "functional", "amp"}
        Output perturbation (CMS11 Alg. 1), objective perturbation (CMS11 Alg. 2; ``C``
        sets λ = 1/C, default λ = 0 and the paper's Δ: module docstring) or the functional
        mechanism (Zhang et al. 2012), all pure ε-DP. ``"auto"`` (default): the functional
        mechanism when ``bounds`` are declared (it was the more accurate on every Adult
        setting of bench/learn.py, most at small ε and in high dimension), else objective
        perturbation on ``data_norm`` (issue 34: more accurate than output perturbation on
        every synthetic task of bench/learn_logistic_synthetic.py), or output perturbation
        when the deprecated ``n_hint`` is passed (the old behaviour).
        The functional mechanism needs ``bounds`` and ignores ``data_norm``, ``n_hint``
        and ``intercept_scaling``; its ``C`` sets the ridge λ = 4/C (default
        λ = ½·b_G·√(d + 1), module docstring).
    one_hot : sequence of sequences of int, optional
        ``method="functional"`` only: declared one-hot groups, each the column indices of
        one categorical feature's indicators (0/1, at most one 1 per row; all zeros for a
        missing value). Other columns are numeric.
    delta : float, optional
        ``method="amp"`` only (required there): δ ∈ (0, 1) of the (ε, δ) guarantee.
    gamma : float, optional
        ``method="amp"``: the solver's gradient-norm tolerance γ (default 2^-20·Λ).

    Notes
    -----
    ``method="amp"``: approximate minima perturbation (Iyengar et al., IEEE S&P 2019,
    Alg. 1 / Thm 1; :mod:`dpkit.learn._amp`), (ε, δ)-DP: the minimiser, to ‖∇J_b‖ ≤ γ, of
    Σℓ + (Λ/2)‖w‖² + ⟨b₁, w⟩ plus Gaussian b₂, with L = R′, β = R′²/4, Λ = β/ε₁,
    b₁ ~ Gaussian at L2 sensitivity L and (ε₂, δ₁), b₂ at 2γ/Λ and (ε₃, δ₂),
    ε = ε₁ + ε₂ + ε₃, δ = e^ε₃·δ₁ + δ₂. The solver runs a number of accelerated gradient
    steps fixed before the debit from n and the declared quantities, proven to reach γ
    (Bubeck 2015 Thm 3.18; :func:`dpkit.learn._amp.solver_steps`): one release, no branch,
    nothing raises after the debit. ``converged_`` reports the floating-point check of
    ‖∇J_b‖ ≤ γ at the released ŵ (True unless rounding defeated the proof).

    Warns
    -----
    TrivialResultWarning
        After the fit, when the released model is its trivial baseline, decided from the
        released weights w, intercept b, the declared domain and the planned noise only
        (post-processing; :mod:`dpkit.learn._baseline`): (1) b + ⟨w, φ⟩ has one sign over
        the whole declared domain — ``"output"``: |b| ≥ R·‖w‖₂ (rows lie in the ball of
        radius R); ``"functional"``: b + Σ_numeric ±|w_j| + Σ_groups (min or max of the
        group's weights and 0) does not cross 0 — so every input gets one class (at best the
        majority rate); or (2) ``"output"`` only: ‖w‖₂ is at most the 95% quantile of the
        planned noise's norm, Gamma(d + 1, Δ/ε), so the weights cannot be told from noise
        around 0 (a test of w = 0 at level 0.05). ``"objective"``: rule (1). For
        ``"output"`` and ``"objective"`` when neither fires, (3) the model predicts one
        class on at least 95% of the rows it was fitted on (its accuracy is then within 5
        points of a constant's on them). Rule (3) reads the training rows after the
        release: it is not post-processing, so the warning is shown to the curator who
        calls ``fit`` with the data (it never enters the release record, the ledger or a
        server response) and leaves the released model unchanged; it cannot raise.

    Attributes
    ----------
    coef_ : ndarray (1, d), intercept_ : ndarray (1,), classes_ : ndarray (2,)
        With ``bounds`` the coefficients apply to the mapped features (as
        ``decision_function`` computes them), not to the raw columns.

    Raises
    ------
    DomainError
        Missing data_norm or classes, ε ≤ 0, labels outside ``classes``, ``C`` not
        positive (``"objective"``: not finite either); for
        ``"functional"``: missing bounds, malformed ``one_hot``, one-hot columns not
        declared (0, 1) or not 0/1 with at most one 1 per row (the group is named),
        non-finite X; all before anything is spent.
    """

    def __init__(self, epsilon: float = 1.0, data_norm: float | None = None,
                 classes: Any = None, C: float | None = None, n_hint: int | None = None,
                 accountant: AccountantLike = None, bounds: Any = None,
                 intercept_scaling: float | None = None, method: str = "auto",
                 one_hot: Any = None, delta: float | None = None,
                 gamma: float | None = None) -> None:
        self.delta = delta
        self.gamma = gamma
        self.intercept_scaling = intercept_scaling
        self.method = method
        self.one_hot = one_hot
        self.epsilon = epsilon
        self.data_norm = data_norm
        self.bounds = bounds
        self.classes = classes
        self.C = C
        self.n_hint = n_hint
        self.accountant = accountant

    def fit(self, X: ArrayLike, y: ArrayLike) -> LogisticRegression:
        x, classes, label = fit_binary(X, y, self.classes)
        eps = check_epsilon(self.epsilon)
        if self.method not in METHODS:
            raise DomainError(f"method must be one of {METHODS}, not {self.method!r}")
        if self._method() == "functional":
            return self._fit_functional(x, classes, label, eps)
        if self.one_hot is not None:
            raise DomainError("one_hot applies to method='functional' only")
        x = self._standardise(x)
        norm = self._norm()
        if norm is None or not norm > 0:
            raise DomainError("declare data_norm (the rows' L2 bound) or bounds: dpkit "
                              "never reads them off the data")
        pos = label == 1
        r = float(norm)
        d = x.shape[1] + 1
        b = default_intercept_scaling(r, d - 1) if self.intercept_scaling is None \
            else float(self.intercept_scaling)
        if not b > 0:
            raise DomainError("intercept_scaling must be positive")
        if self._method() == "objective":
            return self._fit_objective(x, pos, classes, eps, r, b)
        if self._method() == "amp":
            return self._fit_amp(x, pos, classes, eps, r, b)
        c = self._output_c(eps, r, b, d)
        if not c > 0:
            raise DomainError("C must be positive")
        slack = SLACK
        sensitivity = Fraction(c) * Fraction(math.sqrt(r * r + b * b)) * slack
        # the vector mechanism through the entry; beyond it grid Laplace per coordinate at
        # the L1 bound √d·Δ₂
        vector = d <= MAX_VECTOR_DIM
        noise_sens = sensitivity if vector else sensitivity * Fraction(math.sqrt(d)) * slack
        metric = "l2" if vector else "l1"
        row = frontend.noise_row(noise_sens, eps, WEIGHTS, norm=metric, output="grid", size=d,
                                 count=None if vector else d)

        def compute() -> LogisticRegression:
            rows = np.column_stack([clip_rows(x, r), np.full(x.shape[0], b)])
            s = np.where(pos, 1.0, -1.0)
            w, grad = _fit_exact(rows, s, c)
            if grad > float(sensitivity) * 2.0 ** -21:
                raise DomainError("the solver did not converge tightly enough for the "
                                  "sensitivity allowance; lower C or rescale the data")
            noisy = frontend.noisy(w, noise_sens, eps, norm=metric, output="grid",
                                   size=d if vector else None, statistic=WEIGHTS).value
            self.coef_ = noisy[None, :-1]
            self.intercept_ = noisy[-1:] * b
            self.classes_ = classes
            self.n_features_in_ = x.shape[1]
            return self

        charge(self.accountant, PureDP(eps), f"LogisticRegression(ε={eps}, d={d - 1}, C={c:g})",
               compute, (row,))
        w, b0 = self.coef_[0], float(self.intercept_[0])
        if one_sign(b0, -r * float(np.linalg.norm(w)), r * float(np.linalg.norm(w))):
            warn("LogisticRegression", "it predicts one class for every input in the "
                 "declared domain")
        elif within_noise(w, d, float(noise_sens / eps)):
            warn("LogisticRegression", f"the weights are within the noise planned for them "
                 f"(a test of w = 0 at level {LEVEL})")
        else:
            self._warn_one_class_on_training_rows(x, r)
        return self

    def _fit_objective(self, x: np.ndarray, pos: np.ndarray, classes: np.ndarray,
                       eps: Fraction, r: float, scaling: float) -> LogisticRegression:
        """Objective perturbation (module docstring): pure ε-DP, add/remove neighbours."""
        ridge = Fraction(0) if self.C is None else 1 / self._declared_c()
        r2 = (Fraction(r) ** 2 + Fraction(scaling) ** 2) * SLACK ** 2  # clip_rows' rounding
        eps_b, delta = objective_budget(eps, ridge, r2)
        total = float(ridge + delta)
        d = x.shape[1] + 1
        vector = d <= MAX_VECTOR_DIM  # as output perturbation: beyond, Laplace at √d·R′ in L1
        noise_sens = dyadic_up(sqrt_up(r2 if vector else r2 * d), 40)  # a short bound
        metric = "l2" if vector else "l1"
        row = frontend.noise_row(noise_sens, eps_b, OBJECTIVE_NOISE, norm=metric,
                                 output="grid", size=d, count=None if vector else d)

        def compute() -> LogisticRegression:
            rows = np.column_stack([clip_rows(x, r), np.full(x.shape[0], scaling)])
            b = frontend.noisy(np.zeros(d), noise_sens, eps_b, norm=metric, output="grid",
                               size=d if vector else None, statistic=OBJECTIVE_NOISE).value
            w = _fit_exact(rows, np.where(pos, 1.0, -1.0), 1.0, total, b)[0]
            self.coef_ = w[None, :-1]
            self.intercept_ = w[-1:] * scaling
            self.classes_ = classes
            self.n_features_in_ = x.shape[1]
            return self

        charge(self.accountant, PureDP(eps), f"LogisticRegression(objective, ε={eps}, "
               f"d={d - 1}, λ={total:g})", compute, (row,))
        w, b0 = self.coef_[0], float(self.intercept_[0])
        if one_sign(b0, -r * float(np.linalg.norm(w)), r * float(np.linalg.norm(w))):
            warn("LogisticRegression", "it predicts one class for every input in the "
                 "declared domain")
        else:
            self._warn_one_class_on_training_rows(x, r)
        return self

    def _fit_amp(self, x: np.ndarray, pos: np.ndarray, classes: np.ndarray,
                 eps: Fraction, r: float, scaling: float) -> LogisticRegression:
        """Approximate minima perturbation (:mod:`dpkit.learn._amp`): (ε, δ)-DP."""
        if self.delta is None:
            raise DomainError("method='amp' needs delta (0 < δ < 1)")
        r2 = (Fraction(r) ** 2 + Fraction(scaling) ** 2) * SLACK ** 2  # clip_rows' rounding
        d = x.shape[1] + 1
        gamma = None if self.gamma is None else positive(self.gamma, "gamma", up=False)
        plan = amp_plan(eps, positive(self.delta, "delta", up=False), LOGISTIC, r2, d, gamma)
        compute = self._amp_compute(x, r, scaling, np.where(pos, 1.0, -1.0), LOGISTIC, plan,
                                    classes)
        charge(self.accountant, plan.loss, f"LogisticRegression(amp, ε={eps}, "
               f"δ={plan.delta}, d={d - 1}, Λ={float(plan.ridge):g})", compute, amp_rows(plan))
        w, b0 = self.coef_[0], float(self.intercept_[0])
        if one_sign(b0, -r * float(np.linalg.norm(w)), r * float(np.linalg.norm(w))):
            warn("LogisticRegression", "it predicts one class for every input in the "
                 "declared domain")
        else:
            self._warn_one_class_on_training_rows(x, r)
        return self

    def _warn_one_class_on_training_rows(self, x: np.ndarray, norm: float) -> None:
        """The curator's rule (class docstring): one class on ≥ ONE_CLASS of the rows fitted
        (``x`` as mapped for the fit). Reads the training rows after the release, never into
        the record; total and linear."""
        scores = clip_rows(x, norm) @ self.coef_[0] + self.intercept_[0]
        share = float(np.mean(scores > 0)) if scores.size else 0.5
        share = max(share, 1 - share)
        if share >= ONE_CLASS:
            warn("LogisticRegression", f"it predicts one class on {share:.1%} of the "
                 "training rows (read by this check, shown to the curator only)")

    def _declared_c(self) -> Fraction:
        """The declared C as an exact positive Fraction (plan time)."""
        c = float(self.C)  # type: ignore[arg-type]
        if not (c > 0 and math.isfinite(c)):
            raise DomainError("C must be positive and finite")
        return Fraction(c)

    def _features(self, x: np.ndarray, strict: bool) -> np.ndarray:
        """φ(x) of the functional mechanism (module docstring), with the constant last; x is
        finite (checked by fit_labelled / predict_features). ``strict`` (fitting): one-hot
        columns must be 0/1 with at most one 1 per group, else DomainError; otherwise
        (prediction) they are clipped to [0, 1]."""
        d = x.shape[1]
        groups, numeric = _layout(d, self.one_hot)
        lower, upper = check_bounds(self.bounds, d)
        for g, idx in enumerate(groups):
            if np.any(lower[idx] != 0) or np.any(upper[idx] != 1):
                raise DomainError(f"one_hot group {g}: declare its columns' bounds as (0, 1)")
        phi = np.empty((x.shape[0], d + 1))
        lo, hi = lower[numeric], upper[numeric]
        scaled = 2 * (np.clip(x[:, numeric], lo, hi) - lo) / (hi - lo) - 1
        phi[:, numeric] = np.clip(np.round(scaled * 2.0**GRID_BITS) / 2.0**GRID_BITS, -1, 1)
        for g, idx in enumerate(groups):
            block = x[:, idx]
            if strict and (np.any((block != 0) & (block != 1)) or np.any(block.sum(1) > 1)):
                raise DomainError(f"one_hot group {g} (columns {idx.tolist()}): every entry "
                                  f"must be 0 or 1 with at most one 1 per row")
            phi[:, idx] = np.clip(block, 0, 1)
        phi[:, d] = 1.0
        return phi

    def _fit_functional(self, x: np.ndarray, classes: np.ndarray, label: np.ndarray,
                        eps: Fraction) -> LogisticRegression:
        """The functional mechanism (module docstring): (ε/2 + ε/2)-DP."""
        if self.bounds is None:
            raise DomainError("method='functional' needs declared bounds=(lower, upper): "
                              "dpkit never reads them off the data")
        t = label.astype(np.float64)
        phi = self._features(x, strict=True)
        if x.shape[0] >= 1 << 32:
            raise DomainError("method='functional' sums at most 2^32 rows exactly")
        d = x.shape[1]
        groups, numeric = _layout(d, self.one_hot)
        pairs = _released_pairs(d, groups)
        sens_g, sens_u = functional_sensitivities(len(groups), numeric.size)
        eps_g = eps / 2
        if self.C is not None:
            if not float(self.C) > 0:
                raise DomainError("C must be positive")
            ridge = 4 / float(self.C)
        else:
            ridge = RIDGE_FACTOR * float(sens_g / eps_g) * math.sqrt(d + 1)

        rows = (frontend.noise_row(sens_g, eps_g, GRAM, output="grid", count=pairs[0].size),
                frontend.noise_row(sens_u, eps - eps_g, LINEAR, output="grid", count=d + 1))

        def compute() -> LogisticRegression:
            gram, lin = _functional_statistics(phi, t, pairs)
            noisy = np.zeros((d + 1, d + 1))
            noisy[pairs] = frontend.noisy(gram, sens_g, eps_g, output="grid",
                                          statistic=GRAM).value
            u = frontend.noisy(lin, sens_u, eps - eps_g, output="grid", statistic=LINEAR).value
            for idx in groups:  # φ_j² = φ_j: the diagonal is the (j, constant) entry
                noisy[idx, idx] = noisy[idx, d]
            noisy = np.triu(noisy) + np.triu(noisy, 1).T
            values, vectors = np.linalg.eigh(noisy)
            penalty = np.full(d + 1, ridge)
            penalty[d] = 0.0  # the intercept is not shrunk
            h = (vectors * np.maximum(values, 0.0)) @ vectors.T + np.diag(penalty)
            w = np.linalg.lstsq(h, 4 * u, rcond=None)[0]
            self.coef_ = w[None, :d]
            self.intercept_ = w[d:]
            self.classes_ = classes
            self.n_features_in_ = d
            return self

        charge(self.accountant, PureDP(eps),
               f"LogisticRegression(functional, ε={eps}, d={d}, groups={len(groups)})",
               compute, rows)
        w = self.coef_[0]
        reach = float(np.abs(w[numeric]).sum())  # φ ∈ [−1, 1] on numeric columns
        low = -reach + sum(min(0.0, float(w[idx].min())) for idx in groups)  # ≤ one 1
        high = reach + sum(max(0.0, float(w[idx].max())) for idx in groups)
        if one_sign(float(self.intercept_[0]), low, high):
            warn("LogisticRegression", "it predicts one class for every input in the "
                 "declared domain")
        return self

    def _output_c(self, eps: Fraction, norm: float, scaling: float, dim: int) -> float:
        """C of output perturbation: declared, else the old 1/√n_hint when ``n_hint`` is
        passed (deprecated), else :func:`default_c`."""
        if self.C is not None:
            return float(self.C)
        if self.n_hint is not None:
            warnings.warn("LogisticRegression(n_hint=...) without C is deprecated: the old "
                          "default C = 1/√n_hint over-regularises; pass C explicitly "
                          "(C=1/√n_hint keeps the old behaviour) or neither for the new "
                          "default C = ε/((d + 1)·R·R′)", DeprecationWarning, stacklevel=4)
            if not float(self.n_hint) > 0:
                raise DomainError("n_hint must be positive")
            return 1 / math.sqrt(float(self.n_hint))
        return default_c(eps, norm, scaling, dim)

    def _norm(self) -> float | None:
        if self.bounds is not None:
            return 1.0
        return None if self.data_norm is None else float(self.data_norm)

    def _standardise(self, x: np.ndarray) -> np.ndarray:
        return standardise(x, self.bounds)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # two declared classes
        return tags

    def _method(self) -> str:
        """The method ``"auto"`` stands for: functional with declared bounds."""
        if self.method != "auto":
            return str(self.method)
        if self.bounds is not None:
            return "functional"
        return "output" if self.n_hint is not None else "objective"

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        if self._method() == "functional":
            phi = self._features(predict_features(self, X), strict=False)
            return phi[:, :-1] @ self.coef_[0] + self.intercept_[0]
        x = self._standardise(predict_features(self, X))
        x = clip_rows(x, float(self._norm()))  # type: ignore[arg-type]
        return x @ self.coef_[0] + self.intercept_[0]

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        p = expit(self.decision_function(X))
        return np.column_stack([1 - p, p])

    def predict(self, X: ArrayLike) -> np.ndarray:
        positive = self.decision_function(X) > 0  # checks the fit before classes_ is read
        return self.classes_[positive.astype(int)]
