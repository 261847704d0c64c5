"""Principal component analysis by Analyze Gauss (Dwork, Talwar, Thakurta & Zhang, STOC
2014, Alg. 1): the second-moment matrix of the centred, norm-bounded rows plus symmetric
Gaussian noise (:func:`dpkit.mechanisms.covariance.make_analyze_gauss`, exact grid noise),
then its top eigenvectors — post-processing. ρ-zCDP, reported as the (ε, δ) it implies.

DTTZ14 assume centred data, so a fit first releases a private mean and centres on it
(issue 34: centring on the bounds' midpoint captured 0.66 of scikit-learn's variance on
Adult at every ε, noise or not). ρ is the largest with ρ-zCDP ⇒ (ε, δ)-DP (Canonne, Kamath
& Steinke 2020, Cor. 13; :func:`dpkit.core.measures.largest_rho`), split in two releases
that compose to ρ (Bun & Steinke 2016, Lemma 2.3), so the debit is the one (ε, δ) (or ρ):

1. the mean, at ρ_μ = s·ρ (``mean_share`` s, default 0.1): rows clipped to the box
   [l, u], m = (l + u)/2, h = (u − l)/2, B = ‖h‖₂; the vector (Σᵢ(xᵢ − m), c·n) with
   c ≈ B/√d (a power of two) has L2 sensitivity Δ_μ = √(B² + c²) (one row added or
   removed), released by the Gaussian mechanism at ρ_μ
   (:func:`dpkit.mechanisms.frontend.noisy`, exact grid noise);
   n̂ = max(released count / c, 1) and μ̂ = m + Ŝ/n̂ clamped into [l, u] (post-processing);
2. the covariance, at ρ − ρ_μ: Analyze Gauss on the rows xᵢ − μ̂ (x clipped to the box),
   each scaled down to L2 norm ≤ B if it is longer (``clip=True``: only rows farther than B
   from μ̂, which cannot happen when μ̂ = m) — B is declared, not measured, and μ̂ is public
   by then, so the sensitivity is the declared one.

The default s = 0.1 was chosen on synthetic data (``bench/learn_pca_centred.py --choose``:
correlated Gaussian rows with an off-centre mean in [0, 1]^6), never on Adult, the held-out
evaluation set. ``centre="midpoint"`` keeps the old fit (no mean release, all of ρ on the
covariance, centred on m) for reproducibility.

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

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from dpkit.core.component import Measurement
from dpkit.core.measures import ZCDP, ApproxDP, largest_rho
from dpkit.core.numbers import dyadic_up, positive, sqrt_up, to_fraction
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.learn._privacy import CACHE_SIZE, check_bounds, check_epsilon, exact_sums
from dpkit.learn._validation import ArrayLike, fit_features, predict_features
from dpkit.mechanisms import frontend
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


CENTRES = ("mean", "midpoint")
MEAN_SHARE = Fraction(1, 10)  # chosen on synthetic data (module docstring), not on Adult
MEAN_SUMS = "Σ(x − m), c·n"


class PCA(TransformerMixin, BaseEstimator):
    """(ε, δ)-DP PCA by Analyze Gauss, centred on a private mean (module docstring).

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
        Debited (ε, δ), or ρ for a zCDP accountant, once, before the data are read.
    method : {"analyze_gauss"}
        The mechanism. Privacy: ρ-zCDP for one added or removed row, ρ = ``largest_rho(ε, δ)``
        so that ρ-zCDP ⇒ (ε, δ)-DP (DTTZ14 Alg. 1; Bun & Steinke 2016 Prop. 1.6 and
        Lemma 2.3; CKS20 Cor. 13). ``"wishart"`` is refused (module docstring: it is not
        differentially private).
    centre : {"mean", "midpoint"}
        ``"mean"`` (default): centre on a private mean released at ``mean_share``·ρ;
        ``"midpoint"``: centre on the bounds' midpoint, as before issue 34 (biased whenever
        the data's mean is off the midpoint; kept for reproducibility).
    mean_share : float
        s in (0, 1), the share of ρ spent on the mean (default 0.1; ignored for
        ``centre="midpoint"``).

    Attributes
    ----------
    components_ : ndarray (n_components, d), rows orthonormal
    singular_values_ : ndarray (n_components,), √ of the noisy eigenvalues (clamped at 0)
    mean_ : ndarray (d,), the private mean μ̂ (in the declared bounds), or the midpoint for
        ``centre="midpoint"``; ``transform`` centres on it
    n_samples_seen_ : float, the released count n̂ (≥ 1; NaN for ``centre="midpoint"``)

    Raises
    ------
    DomainError
        Missing bounds, bad ε/δ, n_components outside 1 … d, an unknown method or centre,
        ``mean_share`` outside (0, 1), or ``method="wishart"`` — all before any budget is
        debited.
    """

    def __init__(self, n_components: int = 2, epsilon: float = 1.0, delta: float = 1e-6,
                 bounds: Any = None, accountant: AccountantLike = None,
                 method: str = "analyze_gauss", centre: str = "mean",
                 mean_share: float = float(MEAN_SHARE)) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.accountant = accountant
        self.method = method
        self.centre = centre
        self.mean_share = mean_share

    def _check_centre(self) -> Fraction:
        """The share of ρ for the mean (0 for the midpoint), checked at plan time."""
        if self.centre not in CENTRES:
            raise DomainError(f"centre must be one of {CENTRES}, got {self.centre!r}")
        if self.centre == "midpoint":
            return Fraction(0)
        share = to_fraction(self.mean_share).limit_denominator(1 << 20)
        if not 0 < share < 1:
            raise DomainError("mean_share must be in (0, 1)")
        return share

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> PCA:
        if self.method == "wishart":
            raise DomainError(WISHART_REFUSAL)
        if self.method not in METHODS:
            raise DomainError(f"method must be one of {METHODS}, got {self.method!r}")
        share = self._check_centre()
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
        rho_mean = rho * share
        mid = (lower + upper) / 2
        bound = Fraction(float(np.linalg.norm((upper - lower) / 2))) * (1 + Fraction(1, 1 << 30))
        # Analyze Gauss calibrates its σ itself (make_analyze_gauss): the row states Δ = B
        rows: tuple[NoiseRow, ...] = (NoiseRow("Analyze Gauss", None, bound, "XᵀX"),)
        if rho_mean:
            rows = (_mean_row(d, bound, rho_mean), *rows)

        def compute() -> PCA:
            clipped = np.clip(x, lower, upper)
            centre, n_hat = mid, float("nan")
            if rho_mean:
                centre, n_hat = _private_mean(clipped, lower, upper, bound, rho_mean)
            gram = np.asarray(_calibrated(d, bound, rho - rho_mean)(clipped - centre))
            values, vectors = np.linalg.eigh((gram + gram.T) / 2)
            order = np.argsort(values)[::-1][:k]
            self.components_ = vectors[:, order].T
            self.singular_values_ = np.sqrt(np.maximum(values[order], 0))
            self.mean_ = centre
            self.n_samples_seen_ = n_hat
            self.n_features_in_ = d
            return self

        text = f"PCA(ε={eps}, δ={delta}, d={d}, k={k}" + (
            f", mean at ρ·{share})" if rho_mean else ", midpoint)")
        return charge(self.accountant, ApproxDP(eps, delta), text, compute, rows,
                      alternatives=(ZCDP(rho),))

    def transform(self, X: ArrayLike) -> np.ndarray:
        return (predict_features(self, X) - self.mean_) @ self.components_.T


def _count_weight(d: int, bound: Fraction) -> Fraction:
    """c, the power of two at or below B/√d (the root-mean-square half-width): n̂'s error
    then moves μ̂ about as much as a sum's, and c·n is exact in float64 (n < 2^53)."""
    return Fraction(2) ** math.floor(math.log2(float(bound) / math.sqrt(d)))


def _mean_sensitivity(d: int, bound: Fraction) -> Fraction:
    """Δ_μ ≥ √(B² + c²), the L2 sensitivity of (Σ(x − m), c·n), rounded up (to 2^-30)."""
    return dyadic_up(sqrt_up(bound * bound + _count_weight(d, bound) ** 2), 30)


def _mean_row(d: int, bound: Fraction, rho: Fraction) -> NoiseRow:
    """The planned row of :func:`_private_mean`'s draw."""
    return frontend.noise_row(_mean_sensitivity(d, bound), ZCDP(rho), MEAN_SUMS, norm="l2",
                              output="grid", count=d + 1)


def _private_mean(clipped: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                  bound: Fraction, rho: Fraction) -> tuple[np.ndarray, float]:
    """μ̂ and n̂ from one Gaussian release of (Σ(x − m), c·n) at ρ (module docstring, 1).
    The sums are exact (:func:`exact_sums`: values cut towards zero, so ‖x − m‖₂ ≤ B
    still holds). Total: nothing here raises or branches on the data."""
    d = clipped.shape[1]
    mid, half = (lower + upper) / 2, (upper - lower) / 2
    groups = np.zeros(clipped.shape[0], dtype=np.int64)
    sums = [exact_sums(groups, clipped[:, j] - mid[j], float(half[j]), 1)[0] for j in range(d)]
    weight = float(_count_weight(d, bound))
    vector = np.array([*sums, weight * clipped.shape[0]])
    released = frontend.noisy(vector, _mean_sensitivity(d, bound), ZCDP(rho), norm="l2",
                              output="grid", statistic=MEAN_SUMS).value
    n_hat = max(float(released[-1]) / weight, 1.0)
    return np.clip(mid + released[:d] / n_hat, lower, upper), n_hat
