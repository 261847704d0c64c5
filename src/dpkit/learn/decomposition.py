"""Principal component analysis by Analyze Gauss (Dwork, Talwar, Thakurta & Zhang, STOC
2014, Alg. 1): the second-moment matrix of the centred, norm-bounded rows plus symmetric
Gaussian noise (:func:`dpkit.mechanisms.covariance.make_analyze_gauss`, exact grid noise),
then its top eigenvectors — post-processing. ρ-zCDP, reported as the (ε, δ) it implies.

Rows are centred on the declared bounds' midpoint m (never on the data mean) and clipped
to the box, so ‖x − m‖₂ ≤ B = ‖(u − l)/2‖₂ is declared, not measured. ρ is the largest
with ρ-zCDP ⇒ (ε, δ)-DP (Canonne, Kamath & Steinke 2020, Cor. 13;
:func:`dpkit.core.measures.largest_rho`).

Calibration is a function of public parameters only — (ε, δ) ↦ ρ and (d, B, ρ) ↦ σ — and is
memoised (:func:`_calibrated`): a refit with the same parameters skips the exact-arithmetic
searches, which were most of a fit's time; the mechanism built from the cached σ is the one
the search certified, so the privacy argument is unchanged.

No Wishart method
-----------------
``method="wishart"`` (Jiang, Xie & Zhang, AAAI 2016: XᵀX/n + W, W ~ W_d(d + 1, 3/(2nε)·I),
claimed ε-DP) is refused with a DomainError. W is positive semi-definite, so the output B
satisfies B − XᵀX/n ⪰ 0: B = XᵀX/n + tI (t > 0 small) has positive density on X, but on the
neighbour X' = X plus a row x, B − X'ᵀX'/n = tI − xxᵀ/n has the negative eigenvalue
t − ‖x‖²/n, so that output is impossible — the privacy loss is unbounded, no ε holds.
:mod:`dpkit.mechanisms.covariance` records the retraction (Sarwate 2017; Sheffet, ALT 2019,
fn. 4; Amin et al., NeurIPS 2019, §1.2).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from dpkit.core.component import Measurement
from dpkit.core.measures import ZCDP, ApproxDP, largest_rho
from dpkit.core.numbers import positive
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.learn._privacy import CACHE_SIZE, check_bounds, check_epsilon
from dpkit.learn._validation import ArrayLike, fit_features, predict_features
from dpkit.mechanisms.covariance import make_analyze_gauss
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["PCA"]

METHODS = ("analyze_gauss",)
WISHART_REFUSAL = (
    "method='wishart' is not offered: the Wishart mechanism (Jiang, Xie & Zhang, AAAI 2016) "
    "adds a positive semi-definite matrix, so whether an output is possible depends on the "
    "data and no ε bounds its privacy loss (retracted; see dpkit.mechanisms.covariance). "
    "Use method='analyze_gauss'")


@lru_cache(maxsize=CACHE_SIZE)
def _rho(epsilon: Fraction, delta: Fraction) -> Fraction:
    """The largest ρ with ρ-zCDP ⇒ (ε, δ)-DP (:func:`largest_rho`), memoised."""
    return largest_rho(epsilon, delta)


@lru_cache(maxsize=CACHE_SIZE)
def _calibrated(d: int, bound: Fraction, rho: Fraction) -> Measurement:
    """``make_analyze_gauss(d, B, rho=ρ, clip=True)`` — its σ search — done once per public
    (d, B, ρ). The Measurement holds no state between calls (each call draws fresh noise),
    so reusing it releases exactly what a fresh one would. Re-checked before caching."""
    measurement = make_analyze_gauss(d, bound, rho=rho, clip=True)
    if not measurement.check(1, ZCDP(rho)):  # guaranteed by calibrate_scale; never trust a cache
        raise AssertionError("Analyze Gauss calibration failed its own check")
    return measurement


class PCA(TransformerMixin, BaseEstimator):
    """(ε, δ)-DP PCA by Analyze Gauss (module docstring).

    Parameters
    ----------
    n_components : int
        k, 1 ≤ k ≤ d.
    epsilon : float
        ε > 0 (nats).
    delta : float
        δ in (0, 1) (default 1e-6).
    bounds : (lower, upper)
        Declared feature bounds; required.
    accountant : None, PrivacyFilter or Session
        Debited (ε, δ), or ρ for a zCDP accountant, before the data are read.
    method : {"analyze_gauss"}
        The mechanism. Privacy: ρ-zCDP for one added or removed row, ρ = ``largest_rho(ε, δ)``
        so that ρ-zCDP ⇒ (ε, δ)-DP (DTTZ14 Alg. 1; Bun & Steinke 2016 Prop. 1.6; CKS20
        Cor. 13). ``"wishart"`` is refused (module docstring: it is not differentially
        private).

    Attributes
    ----------
    components_ : ndarray (n_components, d), rows orthonormal
    singular_values_ : ndarray (n_components,), √ of the noisy eigenvalues (clamped at 0)
    mean_ : ndarray (d,), the declared midpoint used for centring

    Raises
    ------
    DomainError
        Missing bounds, bad ε/δ, n_components outside 1 … d, an unknown method or
        ``method="wishart"`` — all before any budget is debited.
    """

    def __init__(self, n_components: int = 2, epsilon: float = 1.0, delta: float = 1e-6,
                 bounds: Any = None, accountant: AccountantLike = None,
                 method: str = "analyze_gauss") -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.accountant = accountant
        self.method = method

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> PCA:
        if self.method == "wishart":
            raise DomainError(WISHART_REFUSAL)
        if self.method not in METHODS:
            raise DomainError(f"method must be one of {METHODS}, got {self.method!r}")
        x = fit_features(X)
        eps = check_epsilon(self.epsilon)
        delta = positive(self.delta, "delta", up=False)
        if not delta < 1:
            raise DomainError("delta must be below 1")
        lower, upper = check_bounds(self.bounds, x.shape[1])
        d, k = x.shape[1], int(self.n_components)
        if not 1 <= k <= d:
            raise DomainError(f"n_components must be in 1 … {d}")
        rho = _rho(eps, Fraction(delta))
        mid = (lower + upper) / 2
        bound = Fraction(float(np.linalg.norm((upper - lower) / 2))) * (1 + Fraction(1, 1 << 30))

        def compute() -> PCA:
            centred = np.clip(x, lower, upper) - mid
            gram = np.asarray(_calibrated(d, bound, rho)(centred))
            values, vectors = np.linalg.eigh((gram + gram.T) / 2)
            order = np.argsort(values)[::-1][:k]
            self.components_ = vectors[:, order].T
            self.singular_values_ = np.sqrt(np.maximum(values[order], 0))
            self.mean_ = mid
            self.n_features_in_ = d
            return self

        # Analyze Gauss calibrates its σ itself (make_analyze_gauss): the row states Δ = B
        rows = (NoiseRow("Analyze Gauss", None, bound, "XᵀX"),)
        return charge(self.accountant, ApproxDP(eps, delta), f"PCA(ε={eps}, δ={delta}, d={d}, "
                      f"k={k})", compute, rows, alternatives=(ZCDP(rho),))

    def transform(self, X: ArrayLike) -> np.ndarray:
        return (predict_features(self, X) - self.mean_) @ self.components_.T
