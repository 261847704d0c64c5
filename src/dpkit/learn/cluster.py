"""k-means by noisy Lloyd iterations (SuLQ k-means: Blum, Dwork, McSherry & Nissim, PODS
2005, §5; budget schedules after Dwork, "A firm foundation for private data analysis",
CACM 2011). Pure ε-DP.

Each iteration assigns the points to their nearest current centre (the centres are public:
earlier outputs) and releases, with the grid Laplace mechanism, the per-cluster counts
(a point is in one cluster: L1 sensitivity 1) and, for every feature j, the per-cluster sums
of x_j − m_j, x clipped to the declared [l_j, u_j] and m_j the midpoint (sensitivity
(u_j − l_j)/2). The iteration's ε_t is split equally over these d + 1 releases; the new
centre is the noisy sum over the noisy count (kept where the noisy count is below 1),
clamped into the bounds — post-processing. The iterations compose sequentially:
``schedule="fixed"`` gives each ε/T, ``"halving"`` ε/2, ε/4, … with the last taking the
rest (early iterations move centres far, later ones refine). The initial centres are
data-independent, drawn from the CSPRNG: ``init="sphere_packing"`` (Su, Cao, Li, Bertino &
Jin, "Differentially private k-means clustering", CODASPY 2016, §4.1) places k centres in
the box scaled to [−1, 1]^d at distance ≥ 2r from each other and r from the faces, for the
largest r (shrinking by 10%) at which random placement succeeds; ``"random"`` draws them
uniformly in the box.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin

from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.learn._privacy import charge, check_bounds, check_epsilon, laplace_noise
from dpkit.release.pgm_sample import uniforms

__all__ = ["KMeans", "budget_schedule", "sphere_packing"]


def sphere_packing(k: int, lower: np.ndarray, upper: np.ndarray, tries: int = 5
                   ) -> np.ndarray:
    """k centres spread as in Su et al. 2016 §4.1 (module docstring); data-independent."""
    d = lower.size
    mid, half = (lower + upper) / 2, (upper - lower) / 2
    r = 1.0
    while r > 1e-3:
        for _ in range(tries):
            points: list[np.ndarray] = []
            for _ in range(50 * k):
                c = (uniforms(d) * 2 - 1) * (1 - r)
                if all(np.linalg.norm(c - p) >= 2 * r for p in points):
                    points.append(c)
                    if len(points) == k:
                        return mid + np.array(points) * half
        r *= 0.9
    return lower + uniforms(k * d).reshape(k, d) * (upper - lower)


def budget_schedule(epsilon: Fraction, iterations: int, schedule: str) -> list[Fraction]:
    """ε per iteration: equal parts, or halving with the last taking the rest (sum = ε)."""
    if iterations < 1:
        raise DomainError("max_iter must be positive")
    if schedule == "fixed":
        return [epsilon / iterations] * iterations
    if schedule == "halving":
        parts = [epsilon / 2 ** (t + 1) for t in range(iterations - 1)]
        return parts + [epsilon - sum(parts, Fraction(0))]
    raise DomainError("schedule must be 'fixed' or 'halving'")


class KMeans(ClusterMixin, BaseEstimator):
    """ε-DP k-means (module docstring).

    Parameters
    ----------
    n_clusters : int
    epsilon : float
        ε > 0 (nats) for the whole fit.
    bounds : (lower, upper)
        Declared feature bounds; required.
    max_iter : int
        T, the noisy Lloyd iterations (default 5).
    schedule : {"fixed", "halving"}
    init : {"sphere_packing", "random"}
    accountant : None, PrivacyFilter or Session

    Attributes
    ----------
    cluster_centers_ : ndarray (k, d)
    labels_ : ndarray (n,), the training points' nearest centres (not released by the
        mechanism: computed from the private data and the public centres, for sklearn
        compatibility; do not publish them)

    Raises
    ------
    DomainError
        Missing bounds, ε ≤ 0, k < 1, a bad schedule.
    """

    def __init__(self, n_clusters: int = 8, epsilon: float = 1.0, bounds: Any = None,
                 max_iter: int = 5, schedule: str = "fixed", accountant: Any = None,
                 init: str = "sphere_packing") -> None:
        self.init = init
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.max_iter = max_iter
        self.schedule = schedule
        self.accountant = accountant

    def fit(self, X: Any, y: Any = None) -> KMeans:
        x = np.asarray(X, dtype=np.float64)
        if x.ndim != 2:
            raise DomainError("X must be 2-D (n_samples, n_features)")
        eps = check_epsilon(self.epsilon)
        lower, upper = check_bounds(self.bounds, x.shape[1])
        k, d = int(self.n_clusters), x.shape[1]
        if k < 1:
            raise DomainError("n_clusters must be positive")
        parts = budget_schedule(eps, int(self.max_iter), self.schedule)
        if self.init not in ("sphere_packing", "random"):
            raise DomainError("init must be 'sphere_packing' or 'random'")

        def compute() -> KMeans:
            mid, half = (lower + upper) / 2, (upper - lower) / 2
            clipped = np.clip(x, lower, upper)
            centres = (sphere_packing(k, lower, upper) if self.init == "sphere_packing"
                       else lower + uniforms(k * d).reshape(k, d) * (upper - lower))
            for eps_t in parts:
                share = eps_t / (d + 1)
                label = self._nearest(clipped, centres)
                counts = laplace_noise(np.bincount(label, minlength=k).astype(float), 1, share)
                for j in range(d):
                    sums = laplace_noise(np.bincount(label, clipped[:, j] - mid[j],
                                                     minlength=k), half[j], share)
                    moved = counts >= 1
                    centres[moved, j] = np.clip(sums[moved] / counts[moved] + mid[j],
                                                lower[j], upper[j])
            self.cluster_centers_ = centres
            self.labels_ = self._nearest(clipped, centres)
            self.n_features_in_ = d
            return self

        return charge(self.accountant, PureDP(eps), f"KMeans(ε={eps}, k={k}, T={len(parts)})",
                      compute)

    @staticmethod
    def _nearest(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
        dist = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        return np.argmin(dist, axis=1)

    def predict(self, X: Any) -> np.ndarray:
        return self._nearest(np.asarray(X, dtype=np.float64), self.cluster_centers_)

    def inertia(self, X: Any) -> float:
        """Within-cluster sum of squares of ``X`` around the centres."""
        x = np.asarray(X, dtype=np.float64)
        return float(((x - self.cluster_centers_[self.predict(x)]) ** 2).sum())
