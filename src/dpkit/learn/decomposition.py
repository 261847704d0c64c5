"""Principal component analysis by Analyze Gauss (Dwork, Talwar, Thakurta & Zhang, STOC
2014, Alg. 1): the second-moment matrix of the centred, norm-bounded rows plus symmetric
Gaussian noise (:func:`dpkit.mechanisms.covariance.make_analyze_gauss`, exact grid noise),
then its top eigenvectors — post-processing. ρ-zCDP, reported as the (ε, δ) it implies.

Rows are centred on the declared bounds' midpoint m (never on the data mean) and clipped
to the box, so ‖x − m‖₂ ≤ B = ‖(u − l)/2‖₂ is declared, not measured. ρ is the largest
with ρ-zCDP ⇒ (ε, δ)-DP (Canonne, Kamath & Steinke 2020, Cor. 13;
:func:`dpkit.core.measures.largest_rho`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from dpkit.core.measures import ZCDP, ApproxDP, largest_rho
from dpkit.core.numbers import positive
from dpkit.errors import DomainError
from dpkit.learn._privacy import charge, check_bounds, check_epsilon
from dpkit.mechanisms.covariance import make_analyze_gauss

__all__ = ["PCA"]


class PCA(TransformerMixin, BaseEstimator):
    """(ε, δ)-DP PCA by Analyze Gauss (module docstring).

    Parameters
    ----------
    n_components : int
    epsilon : float
        ε > 0 (nats).
    delta : float
        δ in (0, 1) (default 1e-6).
    bounds : (lower, upper)
        Declared feature bounds; required.
    accountant : None, PrivacyFilter or Session
        Debited (ε, δ), or ρ for a zCDP accountant.

    Attributes
    ----------
    components_ : ndarray (n_components, d), rows orthonormal
    singular_values_ : ndarray (n_components,), √ of the noisy eigenvalues (clamped at 0)
    mean_ : ndarray (d,), the declared midpoint used for centring

    Raises
    ------
    DomainError
        Missing bounds, bad ε/δ, n_components outside 1 … d.
    """

    def __init__(self, n_components: int = 2, epsilon: float = 1.0, delta: float = 1e-6,
                 bounds: Any = None, accountant: Any = None) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.accountant = accountant

    def fit(self, X: Any, y: Any = None) -> PCA:
        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2:
            raise DomainError("X must be 2-D (n_samples, n_features)")
        eps = check_epsilon(self.epsilon)
        delta = positive(self.delta, "delta", up=False)
        if not delta < 1:
            raise DomainError("delta must be below 1")
        lower, upper = check_bounds(self.bounds, x.shape[1])
        d, k = x.shape[1], int(self.n_components)
        if not 1 <= k <= d:
            raise DomainError(f"n_components must be in 1 … {d}")
        rho = largest_rho(eps, Fraction(delta))
        mid = (lower + upper) / 2
        bound = Fraction(float(np.linalg.norm((upper - lower) / 2))) * (1 + Fraction(1, 1 << 30))

        def compute() -> PCA:
            centred = np.clip(x, lower, upper) - mid
            gram = np.asarray(make_analyze_gauss(d, bound, rho=rho, clip=True)(centred))
            values, vectors = np.linalg.eigh((gram + gram.T) / 2)
            order = np.argsort(values)[::-1][:k]
            self.components_ = vectors[:, order].T
            self.singular_values_ = np.sqrt(np.maximum(values[order], 0))
            self.mean_ = mid
            self.n_features_in_ = d
            return self

        return charge(self.accountant, ApproxDP(eps, delta), f"PCA(ε={eps}, δ={delta}, d={d}, "
                      f"k={k})", compute, alternatives=(ZCDP(rho),))

    def transform(self, X: Any) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) - self.mean_) @ self.components_.T
