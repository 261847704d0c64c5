"""Random decision trees (Jagannathan, Pillaipakkamnatt & Wright, "A practical differentially
private random decision tree classifier", ICDM Workshops 2009, §4). Pure ε-DP.

Each tree's structure is drawn without looking at the data: a complete binary tree of
depth D whose internal nodes split a uniformly chosen feature at a threshold drawn
uniformly inside that feature's declared bounds (CSPRNG). The data only fill the leaves:
every record lands in exactly one leaf of each tree, so a tree's (leaf × class) count table
has L1 sensitivity 1 and gets grid-Laplace noise at ε/T (sequential composition over the
T trees). Prediction averages the trees' class distributions at the leaves a point reaches
(noisy counts clamped at 0, plus one) — post-processing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit.core import rng
from dpkit.core.measures import PureDP
from dpkit.core.rng import uniforms
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_bounds, check_epsilon
from dpkit.learn._validation import ArrayLike, fit_labelled, predict_features
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge

__all__ = ["RandomForestClassifier", "random_tree", "leaves"]

LEAVES = "leaf class counts"


def random_tree(depth: int, lower: np.ndarray, upper: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """A data-independent complete binary tree of depth D, stored level-wise: the feature
    (uniform over the d declared ones) and threshold (uniform inside that feature's declared
    bounds) of each of its 2^D − 1 internal nodes (CSPRNG; no row is read). Also the
    structure of :mod:`dpkit.learn.forest`'s trees."""
    inner = 2 ** depth - 1
    features = rng.uniform_below(lower.size, inner).astype(np.int64)
    return features, lower[features] + uniforms(inner) * (upper - lower)[features]


def leaves(x: np.ndarray, features: np.ndarray, thresholds: np.ndarray, depth: int
           ) -> np.ndarray:
    """The leaf (0 … 2^depth − 1) each row reaches in a complete tree stored level-wise."""
    node = np.zeros(x.shape[0], dtype=np.int64)
    rows = np.arange(x.shape[0])
    for _ in range(depth):
        right = x[rows, features[node]] > thresholds[node]
        node = 2 * node + 1 + right
    return node - (2 ** depth - 1)


class RandomForestClassifier(ClassifierMixin, BaseEstimator):
    """ε-DP forest of random decision trees (module docstring).

    Parameters
    ----------
    n_estimators : int
        T trees (default 10).
    max_depth : int
        D (default: half the number of features, at least 2; Jagannathan et al. §5).
    epsilon : float
        ε > 0 (nats) for the forest.
    bounds : (lower, upper)
        Declared feature bounds; required (categorical features as codes 0 … m−1).
    classes : sequence
        Declared labels.
    accountant : None, PrivacyFilter or Session

    Raises
    ------
    DomainError
        Missing bounds or classes, labels outside them, ε ≤ 0, T < 1.
    """

    def __init__(self, n_estimators: int = 10, max_depth: int | None = None,
                 epsilon: float = 1.0, bounds: Any = None, classes: Any = None,
                 accountant: AccountantLike = None) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.epsilon = epsilon
        self.bounds = bounds
        self.classes = classes
        self.accountant = accountant

    def fit(self, X: ArrayLike, y: ArrayLike) -> RandomForestClassifier:
        x, classes, label = fit_labelled(X, y, self.classes)
        eps = check_epsilon(self.epsilon)
        lower, upper = check_bounds(self.bounds, x.shape[1])
        t = int(self.n_estimators)
        if t < 1:
            raise DomainError("n_estimators must be positive")
        d, k = x.shape[1], classes.size
        depth = int(self.max_depth) if self.max_depth is not None else max(2, d // 2)
        inner = 2 ** depth - 1
        rows = (frontend.noise_row(1, eps / t, LEAVES, output="grid", count=(inner + 1) * k),)

        def compute() -> RandomForestClassifier:
            clipped = np.clip(x, lower, upper)
            self.trees_: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            for _ in range(t):
                features, thresholds = random_tree(depth, lower, upper)
                leaf = leaves(clipped, features, thresholds, depth)
                counts = np.bincount(leaf * k + label, minlength=(inner + 1) * k)
                noisy = frontend.noisy(counts.astype(float), 1, eps / t, output="grid",
                                       statistic=LEAVES).value.reshape(-1, k)
                self.trees_.append((features, thresholds, np.maximum(noisy, 0)))
            self.classes_ = classes
            self.depth_ = depth
            self.n_features_in_ = d
            return self

        return charge(self.accountant, PureDP(eps), f"RandomForestClassifier(ε={eps}, "
                      f"T={t}, D={depth})", compute, rows)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        x = predict_features(self, X)
        total = np.zeros((x.shape[0], self.classes_.size))
        for features, thresholds, counts in self.trees_:
            reached = counts[leaves(x, features, thresholds, self.depth_)] + 1.0  # smoothing
            total += reached / reached.sum(axis=1, keepdims=True)
        return total / len(self.trees_)

    def predict(self, X: ArrayLike) -> np.ndarray:
        proba = self.predict_proba(X)  # checks the fit before classes_ is read
        return self.classes_[np.argmax(proba, axis=1)]


