"""Linear regression by sufficient-statistics perturbation — for the squared loss this is
the functional mechanism of Zhang, Zhang, Xiao, Yang & Winslett ("Functional mechanism:
regression analysis under differential privacy", PVLDB 2012, Alg. 1): the objective
Σᵢ (yᵢ − ⟨w, x̃ᵢ⟩)² is a polynomial in w whose coefficients are X̃ᵀX̃ and X̃ᵀy (yᵀy does not
move the minimiser), and those are released with Laplace noise. Pure ε-DP.

Rows are clipped to the declared bounds and centred on their midpoints (x̃ = (x − m, 1),
the constant carrying the intercept; y likewise), so |x̃_j| ≤ h_j = (u_j − l_j)/2 (h = 1 for
the constant) and |ỹ| ≤ h_y. One row moves the upper triangle of X̃ᵀX̃ by at most
Σ_{i≤j} h_i h_j in L1 and X̃ᵀy by Σ_j h_j h_y: each block is released with the grid Laplace
mechanism at ε/2. The solve — the noisy matrix projected onto the positive semi-definite
cone, plus ``alpha``·I (ridge, also Zhang et al.'s §5 regularisation) — is post-processing.
The default ridge is λ = ½·b·√(d + 1), b = 2Δ_XX/ε the Laplace scale on the Gram entries:
the noise matrix's spectral norm grows like b·√(d + 1), and a ridge below it leaves the
projected matrix near-singular (a fixed λ = 1 gave RMSE 7·10⁴ at ε = 0.1 on Adult's
hours-per-week, against 12.6 with this default and 12.3 non-private). It depends on ε,
the declared bounds and d only.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from dpkit.core.measures import PureDP
from dpkit.core.numbers import positive
from dpkit.errors import DomainError
from dpkit.learn._amp import amp_plan, amp_rows, huber_regression, solve_amp
from dpkit.learn._baseline import FLAT_FRACTION, flat, warn
from dpkit.learn._privacy import check_bounds, check_epsilon
from dpkit.learn._validation import ArrayLike, fit_regression, predict_features
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["LinearRegression"]


class LinearRegression(RegressorMixin, BaseEstimator):
    """ε-DP linear regression (module docstring).

    Parameters
    ----------
    epsilon : float
        ε > 0 (nats).
    bounds : (lower, upper)
        Declared feature bounds; required.
    y_bounds : (lower, upper)
        Declared target bounds; required.
    alpha : float or None
        Ridge added to the noisy X̃ᵀX̃ after the PSD projection, in the centred rows' units
        (default None: ½·b·√(d + 1), module docstring).
    accountant : None, PrivacyFilter or Session
    method : {"functional", "amp"}
        Sufficient-statistics perturbation (pure ε, the default) or approximate minima
        perturbation ((ε, δ), module docstring).
    delta : float, optional
        ``"amp"`` only (required there): δ ∈ (0, 1).
    huber : float
        ``"amp"``: Huber's threshold k > 0 in units of the scaled target (default 1).
    gamma : float, optional
        ``"amp"``: the solver's gradient-norm tolerance γ (default 2^-20·Λ).

    Notes
    -----
    ``"amp"``: (ε, δ)-DP for add/remove neighbours, ε = ε₁ + ε₂ + ε₃, δ = e^ε₃·δ₁ + δ₂
    (Iyengar et al. 2019 Thm 1, add/remove form of :mod:`dpkit.learn._amp`), L = k·R′,
    β = R′², Λ = β/ε₁, b₁ of scale σ₁ ≥ L(1 + √(2 ln(1/δ₁)))/ε₂, b₂ of scale
    (2γ/Λ)(1 + √(2 ln(1/δ₂)))/ε₃. ‖∇J_b(ŵ)‖ ≤ γ by a number of accelerated gradient steps
    fixed before the debit (:func:`dpkit.learn._amp.solver_steps`), so one proof covers
    every run; ``converged_`` reports the floating-point check of it. Nothing raises after
    the debit.

    Attributes
    ----------
    coef_ : ndarray (d,), intercept_ : float

    Warns
    -----
    TrivialResultWarning
        After the fit, when the released model predicts a constant at the declared scale:
        Σⱼ |wⱼ|·(uⱼ − lⱼ), the spread of its predictions over the declared feature box, is
        below 1% of the declared target range (u_y − l_y). Decided from the released
        coefficients and the declared bounds only (post-processing).

    Raises
    ------
    DomainError
        Missing bounds, ε ≤ 0; ``"amp"``: δ ∉ (0, 1), k ≤ 0, γ ≤ 0 (before the debit).
    """

    def __init__(self, epsilon: float = 1.0, bounds: Any = None, y_bounds: Any = None,
                 alpha: float | None = None, accountant: AccountantLike = None,
                 method: str = "functional", delta: float | None = None, huber: float = 1.0,
                 gamma: float | None = None) -> None:
        self.method = method
        self.delta = delta
        self.huber = huber
        self.gamma = gamma
        self.epsilon = epsilon
        self.bounds = bounds
        self.y_bounds = y_bounds
        self.alpha = alpha
        self.accountant = accountant

    def fit(self, X: ArrayLike, y: ArrayLike) -> LinearRegression:
        x, t = fit_regression(X, y)
        eps = check_epsilon(self.epsilon)
        lower, upper = check_bounds(self.bounds, x.shape[1])
        y_lower, y_upper = check_bounds(self.y_bounds, 1)
        if self.method not in ("functional", "amp"):
            raise DomainError(f"method must be 'functional' or 'amp', not {self.method!r}")
        if self.method == "amp":
            return self._fit_amp(x, t, eps, (lower, upper), (y_lower, y_upper))
        d = x.shape[1] + 1
        h = np.append((upper - lower) / 2, 1.0)
        h_y = float((y_upper - y_lower)[0] / 2)
        iu = np.triu_indices(d)
        sens_xx = float(np.sum(np.outer(h, h)[iu]))
        sens_xy = float(h.sum() * h_y)
        mid, y_mid = (lower + upper) / 2, float((y_lower + y_upper)[0] / 2)
        ridge = (0.5 * sens_xx / float(eps / 2) * math.sqrt(d) if self.alpha is None
                 else float(self.alpha))
        if not ridge >= 0:
            raise DomainError("alpha must be ≥ 0")

        def compute() -> LinearRegression:
            rows = np.column_stack([np.clip(x, lower, upper) - mid, np.ones(x.shape[0])])
            target = np.clip(t, y_lower[0], y_upper[0]) - y_mid
            xx = frontend.noisy((rows.T @ rows)[iu], sens_xx, eps / 2, output="grid",
                                statistic="XᵀX").value
            xy = frontend.noisy(rows.T @ target, sens_xy, eps / 2, output="grid",
                                statistic="Xᵀy").value
            gram = np.zeros((d, d))
            gram[iu] = xx
            gram = gram + np.triu(gram, 1).T
            values, vectors = np.linalg.eigh(gram)
            gram = (vectors * np.maximum(values, 0)) @ vectors.T + ridge * np.eye(d)
            w = np.linalg.solve(gram, xy)
            self.coef_ = w[:-1]
            self.intercept_ = float(w[-1] + y_mid - mid @ w[:-1])
            self.n_features_in_ = d - 1
            return self

        plan = (frontend.noise_row(sens_xx, eps / 2, "XᵀX", output="grid", count=len(iu[0])),
                frontend.noise_row(sens_xy, eps / 2, "Xᵀy", output="grid", count=d))  # as drawn
        charge(self.accountant, PureDP(eps), f"LinearRegression(ε={eps}, d={d - 1})",
               compute, plan)
        self._warn_flat(upper - lower, float((y_upper - y_lower)[0]))
        return self

    def _warn_flat(self, widths: np.ndarray, target_range: float) -> None:
        spread = float(np.abs(self.coef_) @ widths)
        if flat(spread, target_range):
            warn("LinearRegression", f"its predictions over the declared feature box span "
                 f"{spread:.3g}, under {FLAT_FRACTION:.0%} of the declared target range")

    def _fit_amp(self, x: np.ndarray, t: np.ndarray, eps: Fraction,
                 box: tuple[np.ndarray, np.ndarray], y_box: tuple[np.ndarray, np.ndarray]
                 ) -> LinearRegression:
        """Approximate minima perturbation on Huber's loss (module docstring)."""
        if self.delta is None:
            raise DomainError("method='amp' needs delta (0 < δ < 1)")
        (lower, upper), (y_lower, y_upper) = box, y_box
        d = x.shape[1] + 1
        root = math.sqrt(d - 1)
        loss = huber_regression(float(positive(self.huber, "huber", up=False)))
        gamma = None if self.gamma is None else positive(self.gamma, "gamma", up=False)
        r2 = 1 + Fraction(1, d - 1)  # ‖x̃‖² ≤ (d − 1)/(d − 1) + 1/(d − 1)
        plan = amp_plan(eps, positive(self.delta, "delta", up=False), loss,
                        r2 * (1 + Fraction(1, 1 << 20)), d, gamma)  # float rounding of the map
        mid, half = (lower + upper) / 2, (upper - lower) / 2
        y_mid, y_half = float((y_lower + y_upper)[0] / 2), float((y_upper - y_lower)[0] / 2)

        def compute() -> LinearRegression:
            rows = np.column_stack([(np.clip(x, lower, upper) - mid) / half / root,
                                    np.full(x.shape[0], 1 / root)])
            target = (np.clip(t, y_lower[0], y_upper[0]) - y_mid) / y_half
            w, self.converged_ = solve_amp(rows, target, loss, plan)
            self.coef_ = y_half * w[:-1] / (half * root)
            self.intercept_ = float(y_mid + y_half * (w[-1] / root) - self.coef_ @ mid)
            self.n_features_in_ = d - 1
            return self

        charge(self.accountant, plan.loss, f"LinearRegression(amp, ε={eps}, δ={plan.delta}, "
               f"d={d - 1})", compute, amp_rows(plan))
        self._warn_flat(upper - lower, 2 * y_half)
        return self

    def predict(self, X: ArrayLike) -> np.ndarray:
        return predict_features(self, X) @ self.coef_ + self.intercept_
