"""Standardisation with ε-DP means and variances (the per-feature moments of
:func:`dpkit.learn._privacy.noisy_moments` with one group). Pure ε-DP.

Releases: the record count (L1 sensitivity 1, ``count_share``·ε), then per feature the
clipped sum around the declared midpoint and the sum of squared deviations from the noisy
mean, each at an equal part of the rest (sequential composition over 2d + 1 releases).
Transforming data with the released mean and scale is post-processing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from dpkit.core.measures import PureDP
from dpkit.core.numbers import to_fraction
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_bounds, check_epsilon, moment_rows, noisy_moments, plan
from dpkit.learn._validation import ArrayLike, fit_features, predict_features
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["StandardScaler"]


class StandardScaler(TransformerMixin, BaseEstimator):
    """(x − mean_)/scale_ with ε-DP mean_ and var_ (module docstring).

    Parameters
    ----------
    epsilon : float
        ε > 0 (nats).
    bounds : (lower, upper)
        Declared feature bounds; required.
    count_share : float
        Share of ε for the record count (default 0.05).
    accountant : None, PrivacyFilter or Session

    Attributes
    ----------
    mean_, var_, scale_ : ndarray (d,)
    n_samples_seen_ : float, the noisy count

    Raises
    ------
    DomainError
        Missing bounds, ε ≤ 0, a bad count_share.
    """

    def __init__(self, epsilon: float = 1.0, bounds: Any = None, count_share: float = 0.05,
                 accountant: AccountantLike = None) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.count_share = count_share
        self.accountant = accountant

    def fit(self, X: ArrayLike, y: ArrayLike | None = None) -> StandardScaler:
        x = fit_features(X)
        eps = check_epsilon(self.epsilon)
        lower, upper = check_bounds(self.bounds, x.shape[1])
        count_eps = eps * to_fraction(self.count_share).limit_denominator(1 << 20)
        if not 0 < count_eps < eps:
            raise DomainError("count_share must be in (0, 1)")
        part = (eps - count_eps) / (2 * x.shape[1])
        rows = plan(frontend.noise_row(1, count_eps, "rows", output="grid", count=1),
                    *moment_rows(lower, upper, 1, part))

        def compute() -> StandardScaler:
            count = frontend.noisy(np.array([float(x.shape[0])]), 1, count_eps, output="grid",
                                   statistic="rows")
            n_hat = np.maximum(count.value, 1.0)
            mean, var = noisy_moments(x, np.zeros(x.shape[0], dtype=np.int64), n_hat, lower,
                                      upper, part)
            self.mean_, self.var_ = mean[0], var[0]
            self.scale_ = np.sqrt(self.var_)
            self.n_samples_seen_ = float(n_hat[0])
            self.n_features_in_ = x.shape[1]
            return self

        return charge(self.accountant, PureDP(eps), f"StandardScaler(ε={eps}, d={x.shape[1]})",
                      compute, rows)

    def transform(self, X: ArrayLike) -> np.ndarray:
        return (predict_features(self, X) - self.mean_) / self.scale_
