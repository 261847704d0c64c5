"""Gaussian naive Bayes with noisy sufficient statistics (Vaidya, Shafiq, Basu & Hong,
"Differentially private naive Bayes classification", WI 2013, §4). Pure ε-DP.

Statistics, each released once with the grid Laplace mechanism (exact; :mod:`dpkit.learn.
_privacy`), x clipped to the declared [l_j, u_j]: the class counts (a record is in one
class: L1 sensitivity 1); per feature j the per-class sums of x_j − m_j, m_j = (l_j + u_j)/2
(sensitivity (u_j − l_j)/2; a record adds to one class only, so each feature's per-class
vector has that L1 sensitivity), giving noisy means μ̂; then the per-class sums of
(x_j − μ̂_cj)² (sensitivity max_c max((u_j − μ̂_cj)², (μ̂_cj − l_j)²); μ̂ is public by then).
Centring on the noisy mean avoids the cancellation of E[x²] − E[x]² when a feature sits at
one end of wide bounds (Adult's capital-gain). Post-processing: means clamped into the
bounds; each variance floored at the standard deviation of its own noise (a public
number), so noise cannot make a class look overconfident; prediction.

Budget (sequential composition over the 1 + 2d releases, exact in rationals):

    ε = ε_n + d·ε_μ + d·ε_σ²,   ε_n = c·ε,   ε_μ = m·(ε − ε_n)/d,   ε_σ² = (1 − m)·(ε − ε_n)/d

with c = ``count_share`` (default 1/20) and m = ``mean_share`` (default 1/4); each release's
Laplace scale is its sensitivity over its part (1/ε_n, ((u_j − l_j)/2)/ε_μ, spread_j/ε_σ²).
Vaidya et al. split the budget evenly; here the variances get three times the means'
part. Why: an error δμ moves a log-likelihood term by (x − μ)δμ/σ² (variance (δμ/σ)²),
an error δv by ½((x − μ)²/σ² − 1)δv/σ² (variance ½(δv/σ²)²); the noise has δμ ∝ h/ε_μ
(h = (u − l)/2) and δv ∝ R²/ε_σ² (R = the largest deviation the bounds allow, h ≤ R ≤ 2h),
so the sum is least at ε_σ²/ε_μ = (R⁴/(2σ²h²))^{1/3}: 1.1 for a feature filling its bounds
uniformly, ≈ 1.8 for a bell at ±3.5σ, more when the mean sits off-centre or the bounds are
loose (declared bounds usually are). 3 is a data-free value in that range (Adult's
features give 1.4 to 27); it was compared with ½, 1, 2 and 4 on a held-out part of Adult's
training split, not on its test split.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpkit.core.measures import PureDP
from dpkit.core.numbers import to_fraction
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_bounds, check_epsilon, moment_rows, noisy_moments, plan
from dpkit.learn._validation import ArrayLike, declared_labels, fit_labelled, predict_features
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["GaussianNB", "CategoricalNB"]

COUNTS, TABLES = "class counts", "class and category counts"


def budget_split(eps: Fraction, count_eps: Fraction, mean_share: Any, d: int
                 ) -> tuple[Fraction, Fraction]:
    """(ε_μ, ε_σ²) of the module docstring, exact: ε_n + d·ε_μ + d·ε_σ² = ε. The share m is
    rounded to a rational (denominator ≤ 2^20) and must lie in (0, 1)."""
    m = to_fraction(mean_share).limit_denominator(1 << 20)
    if not 0 < m < 1:
        raise DomainError("mean_share must be in (0, 1)")
    rest = eps - count_eps
    mean_eps = rest * m / d
    return mean_eps, (rest - d * mean_eps) / d


class _NaiveBayes(ClassifierMixin, BaseEstimator):
    """Prediction from a subclass's joint log-likelihood (post-processing of its fit)."""

    classes_: np.ndarray

    def _joint_log_likelihood(self, X: ArrayLike) -> np.ndarray:
        raise NotImplementedError

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        jll = self._joint_log_likelihood(X)
        jll -= jll.max(axis=1, keepdims=True)
        p = np.exp(jll)
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X: ArrayLike) -> np.ndarray:
        jll = self._joint_log_likelihood(X)  # checks the fit before classes_ is read
        return self.classes_[np.argmax(jll, axis=1)]


class GaussianNB(_NaiveBayes):
    """ε-DP Gaussian naive Bayes (module docstring).

    Parameters
    ----------
    epsilon : float
        ε > 0 (nats) for the whole fit.
    bounds : (lower, upper)
        Declared feature bounds (scalars or arrays of length d); values outside are clipped.
        Required: ``fit`` raises without them.
    classes : sequence
        The declared class labels (the label set is not read off the data); labels outside
        it raise.
    accountant : None, PrivacyFilter or Session
        Where ε is debited before anything is computed.
    count_share : float
        c, the share of ε for the class counts (default 0.05: counts are large, sums are
        not).
    mean_share : float
        m, the share of the rest for the d means (equal parts); the d variances share
        1 − m (default 1/4; module docstring).
    var_smoothing : float
        Added to every variance, as a share of its feature's declared ((u − l)/2)².

    Attributes
    ----------
    class_count_ : ndarray (k,), noisy counts (≥ 1)
    theta_, var_ : ndarray (k, d), per-class means and variances
    class_prior_ : ndarray (k,)

    Raises
    ------
    DomainError
        Missing bounds or classes, ε ≤ 0, labels outside ``classes``.
    """

    def __init__(self, epsilon: float = 1.0, bounds: Any = None, classes: Any = None,
                 accountant: AccountantLike = None, var_smoothing: float = 1e-9,
                 count_share: float = 0.05, mean_share: float = 0.25) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.accountant = accountant
        self.var_smoothing = var_smoothing
        self.count_share = count_share
        self.mean_share = mean_share

    def fit(self, X: ArrayLike, y: ArrayLike) -> GaussianNB:
        x, classes, codes = fit_labelled(X, y, self.classes)
        eps = check_epsilon(self.epsilon)
        lower, upper = check_bounds(self.bounds, x.shape[1])
        d, k = x.shape[1], classes.size
        count_eps = eps * to_fraction(self.count_share).limit_denominator(1 << 20)
        if not 0 < count_eps < eps:
            raise DomainError("count_share must be in (0, 1)")
        mean_eps, var_eps = budget_split(eps, count_eps, self.mean_share, d)
        rows = plan(frontend.noise_row(1, count_eps, COUNTS, output="grid", count=k),
                    *moment_rows(lower, upper, k, mean_eps))

        def compute() -> GaussianNB:
            counts = np.bincount(codes, minlength=k).astype(np.float64)
            n_hat = np.maximum(frontend.noisy(counts, 1, count_eps, output="grid",
                                              statistic=COUNTS).value, 1.0)
            theta, var = noisy_moments(x, codes, n_hat, lower, upper, mean_eps, var_eps)
            self.classes_ = classes
            self.class_count_ = n_hat
            self.class_prior_ = n_hat / n_hat.sum()
            self.theta_ = theta
            self.var_ = var + self.var_smoothing * ((upper - lower) / 2)[None, :] ** 2 + 1e-12
            self.n_features_in_ = d
            return self

        return charge(self.accountant, PureDP(eps), f"GaussianNB(ε={eps}, d={d}, k={k})",
                      compute, rows)

    def _joint_log_likelihood(self, X: ArrayLike) -> np.ndarray:
        x = predict_features(self, X)
        out = np.log(self.class_prior_)[None, :] - 0.5 * np.sum(
            np.log(2 * np.pi * self.var_), axis=1)[None, :]
        diff = x[:, None, :] - self.theta_[None, :, :]
        return out - 0.5 * np.sum(diff ** 2 / self.var_[None, :, :], axis=2)

class CategoricalNB(_NaiveBayes):
    """ε-DP categorical naive Bayes: the class counts and, per feature, the class ×
    category counts, all in one grid-Laplace release. A record adds 1 to its class count
    and to one cell of each feature's table: L1 sensitivity d + 1, noise scale (d + 1)/ε
    (the same as splitting ε equally). Smoothed probabilities from the clamped noisy
    counts and prediction are post-processing.

    Parameters
    ----------
    epsilon : float
        ε > 0 (nats).
    categories : sequence of sequences
        The declared values of each feature (position = code); values outside raise.
    classes : sequence
        Declared class labels.
    alpha : float
        Additive (Laplace) smoothing of the noisy counts (default 1).
    accountant : None, PrivacyFilter or Session

    Attributes
    ----------
    class_count_ : ndarray (k,), category_count_ : list of ndarray (k, m_j), noisy, ≥ 0
    class_log_prior_, feature_log_prob_ : as scikit-learn's CategoricalNB

    Raises
    ------
    DomainError
        Missing categories or classes, undeclared values, ε ≤ 0.
    """

    def __init__(self, epsilon: float = 1.0, categories: Any = None, classes: Any = None,
                 alpha: float = 1.0, accountant: AccountantLike = None) -> None:
        self.epsilon = epsilon
        self.categories = categories
        self.classes = classes
        self.alpha = alpha
        self.accountant = accountant

    def _codes(self, X: ArrayLike) -> np.ndarray:
        x = np.asarray(X, dtype=object)
        if x.ndim != 2 or self.categories is None or x.shape[1] != len(self.categories):
            raise DomainError("X must be 2-D with one declared category list per column")
        out = np.empty(x.shape, dtype=np.int64)
        for j, cats in enumerate(self.categories):
            index = {v: i for i, v in enumerate(cats)}
            try:
                out[:, j] = [index[v] for v in x[:, j].tolist()]
            except KeyError as exc:
                raise DomainError(f"value {exc.args[0]!r} of feature {j} is not declared"
                                  ) from None
        return out

    def fit(self, X: ArrayLike, y: ArrayLike) -> CategoricalNB:
        eps = check_epsilon(self.epsilon)
        if self.categories is None or self.classes is None:
            raise DomainError("declare categories=[[...], ...] and classes=[...]")
        codes = self._codes(X)
        classes, label = declared_labels(self.classes, y)
        if label.size != codes.shape[0]:
            raise DomainError(f"y has {label.size} labels for {codes.shape[0]} rows of X")
        k, sizes = classes.size, [len(c) for c in self.categories]
        rows = (frontend.noise_row(len(sizes) + 1, eps, TABLES, output="grid",
                                   count=k * (1 + sum(sizes))),)

        def compute() -> CategoricalNB:
            tables = [np.bincount(label * m + codes[:, j], minlength=k * m)
                      for j, m in enumerate(sizes)]
            exact = np.concatenate([np.bincount(label, minlength=k), *tables]).astype(float)
            noisy = np.maximum(frontend.noisy(exact, len(sizes) + 1, eps, output="grid",
                                              statistic=TABLES).value, 0)
            self.class_count_ = noisy[:k]
            pos, tables_out = k, []
            for m in sizes:
                tables_out.append(noisy[pos: pos + k * m].reshape(k, m))
                pos += k * m
            self.category_count_ = tables_out
            prior = self.class_count_ + self.alpha
            self.class_log_prior_ = np.log(prior / prior.sum())
            self.feature_log_prob_ = [np.log((t + self.alpha) / (t + self.alpha).sum(
                axis=1, keepdims=True)) for t in self.category_count_]
            self.classes_ = classes
            self.n_features_in_ = len(sizes)
            return self

        return charge(self.accountant, PureDP(eps), f"CategoricalNB(ε={eps}, d={len(sizes)}, "
                      f"k={k})", compute, rows)

    def _joint_log_likelihood(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self, "n_features_in_")
        codes = self._codes(X)
        out = np.tile(self.class_log_prior_, (codes.shape[0], 1))
        for j, logp in enumerate(self.feature_log_prob_):
            out += logp[:, codes[:, j]].T
        return out

