"""Logistic regression by output perturbation (Chaudhuri, Monteleoni & Sarwate, "Differentially
private empirical risk minimization", JMLR 2011, Alg. 1 / Thm 6, in the add/remove form).
Pure ε-DP.

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

Trade-off: the noise grows with C while the regularisation bias shrinks with it; the
default C = 1/√n̂ is not data-derived when n̂ is declared (``n_hint``). The solver's
tolerance adds an error ‖ŵ − w*‖ ≤ ‖∇J(ŵ)‖ (strong convexity) that is checked against
2^-20·Δ₂ and then counted in the sensitivity.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit.core.compose import calibrate_scale
from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.learn._privacy import (
    charge,
    check_bounds,
    check_epsilon,
    clip_rows,
    laplace_noise,
)
from dpkit.mechanisms.vector import make_vector_laplace

__all__ = ["LogisticRegression"]

MAX_VECTOR_DIM = 40


def _fit_exact(x: np.ndarray, s: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    """argmin C·Σ log(1 + exp(−sᵢ⟨w, xᵢ⟩)) + ½‖w‖², and the final gradient norm."""

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = s * (x @ w)
        value = -c * float(np.sum(log_expit(z))) + 0.5 * float(w @ w)
        grad = -c * (x.T @ (s * expit(-z))) + w
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
        hessian = c * (x.T * (p * (1 - p))) @ x + np.eye(x.shape[1])
        w = w - np.linalg.solve(hessian, grad)
    return w, float(np.linalg.norm(objective(w)[1]))


class LogisticRegression(ClassifierMixin, BaseEstimator):
    """ε-DP binary logistic regression by output perturbation (module docstring).

    Parameters
    ----------
    epsilon : float
        ε > 0 (nats).
    data_norm : float
        Declared R: rows are scaled into the L2 ball of radius R (never read off the data).
    classes : sequence of two labels
        Declared labels; the second is the positive class.
    C : float, optional
        Inverse regularisation strength (scikit-learn's); default 1/√``n_hint``.
    n_hint : int
        A public guess of the number of records for the default C (default 10,000).
    accountant : None, PrivacyFilter or Session
    intercept_scaling : float
        s, the value of the constant feature that carries the intercept (scikit-learn's
        liblinear parameter): R′ = √(R² + s²); a smaller s puts less noise on the decision
        function's offset and regularises the intercept more.
    bounds : (lower, upper), optional
        Declared per-feature bounds instead of ``data_norm``: features are clipped, centred
        and scaled to [−1, 1], divided by √d (so R = 1); prediction applies the same map.

    Attributes
    ----------
    coef_ : ndarray (1, d), intercept_ : ndarray (1,), classes_ : ndarray (2,)

    Raises
    ------
    DomainError
        Missing data_norm or classes, ε ≤ 0, labels outside ``classes``.
    """

    def __init__(self, epsilon: float = 1.0, data_norm: float | None = None,
                 classes: Any = None, C: float | None = None, n_hint: int = 10_000,
                 accountant: Any = None, bounds: Any = None,
                 intercept_scaling: float = 1.0) -> None:
        self.intercept_scaling = intercept_scaling
        self.epsilon = epsilon
        self.data_norm = data_norm
        self.bounds = bounds
        self.classes = classes
        self.C = C
        self.n_hint = n_hint
        self.accountant = accountant

    def fit(self, X: Any, y: Any) -> LogisticRegression:
        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2:
            raise DomainError("X must be 2-D (n_samples, n_features)")
        eps = check_epsilon(self.epsilon)
        x = self._standardise(x)
        norm = self._norm()
        if norm is None or not norm > 0:
            raise DomainError("declare data_norm (the rows' L2 bound) or bounds: dpkit "
                              "never reads them off the data")
        if self.classes is None or len(self.classes) != 2:
            raise DomainError("declare the two class labels: classes=[negative, positive]")
        classes = np.asarray(self.classes)
        labels = np.asarray(y)
        neg, pos = labels == classes[0], labels == classes[1]
        if not np.all(neg | pos):
            raise DomainError("a label is not among the declared classes")
        c = float(self.C) if self.C is not None else 1 / math.sqrt(self.n_hint)
        if not c > 0:
            raise DomainError("C must be positive")
        r = float(norm)
        d = x.shape[1] + 1
        b = float(self.intercept_scaling)
        if not b > 0:
            raise DomainError("intercept_scaling must be positive")
        delta = Fraction(c) * Fraction(math.sqrt(r * r + b * b)) * (1 + Fraction(1, 1 << 20))

        def compute() -> LogisticRegression:
            rows = np.column_stack([clip_rows(x, r), np.full(x.shape[0], b)])
            s = np.where(pos, 1.0, -1.0)
            w, grad = _fit_exact(rows, s, c)
            if grad > float(delta) * 2.0 ** -21:
                raise DomainError("the solver did not converge tightly enough for the "
                                  "sensitivity allowance; lower C or rescale the data")
            if d <= MAX_VECTOR_DIM:
                scale = calibrate_scale(lambda t: make_vector_laplace(t, d), delta,
                                        PureDP(eps), start=delta / eps)
                noisy = np.asarray(make_vector_laplace(scale, d)(w), dtype=np.float64)
            else:
                noisy = laplace_noise(w, delta * Fraction(math.sqrt(d)) * (
                    1 + Fraction(1, 1 << 20)), eps)
            self.coef_ = noisy[None, :-1]
            self.intercept_ = noisy[-1:] * b
            self.classes_ = classes
            self.n_features_in_ = x.shape[1]
            return self

        return charge(self.accountant, PureDP(eps),
                      f"LogisticRegression(ε={eps}, d={d - 1}, C={c:g})", compute)

    def _norm(self) -> float | None:
        if self.bounds is not None:
            return 1.0
        return None if self.data_norm is None else float(self.data_norm)

    def _standardise(self, x: np.ndarray) -> np.ndarray:
        if self.bounds is None:
            return x
        lower, upper = check_bounds(self.bounds, x.shape[1])
        mid, half = (lower + upper) / 2, (upper - lower) / 2
        return (np.clip(x, lower, upper) - mid) / half / math.sqrt(x.shape[1])

    def decision_function(self, X: Any) -> np.ndarray:
        x = self._standardise(np.asarray(X, dtype=np.float64))
        x = clip_rows(x, float(self._norm()))  # type: ignore[arg-type]
        return x @ self.coef_[0] + self.intercept_[0]

    def predict_proba(self, X: Any) -> np.ndarray:
        p = expit(self.decision_function(X))
        return np.column_stack([1 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[(self.decision_function(X) > 0).astype(int)]
