"""Accuracy bounds of noise distributions (for confidence intervals; never for sampling).

Floating-point ``exp``/``log`` are fine here: these functions only size the intervals
reported next to a release. Each returns a half-width a with P(|Z| > a) ≤ β.
"""

from __future__ import annotations

import math

from dpkit.core.renamed import renamed
from dpkit.errors import DomainError

__all__ = ["laplace_tail", "gaussian_tail", "staircase_tail", "l2_laplace_norm_tail",
           "laplace_abs_sum_tail"]


def laplace_tail(scale: float, beta: float, discrete: bool) -> float:
    """Half-width a with P(|Z| > a) ≤ β for (discrete) Laplace noise of this scale."""
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    if not discrete:
        return scale * math.log(1 / beta)
    # P(|Z| ≥ k) = 2 e^{-k/s} / (1 + e^{-1/s}) for k ≥ 1
    k = scale * math.log(2 / (beta * (1 + math.exp(-1 / scale))))
    return float(max(0, math.ceil(k) - 1))


@renamed(sigma="scale")
def gaussian_tail(scale: float, beta: float) -> float:
    """Half-width a with P(|Z| > a) ≤ β, for Gaussian or discrete Gaussian noise of scale
    (standard deviation) σ (``sigma=``, deprecated, is ``scale``).

    Uses the sub-Gaussian bound P(|Z| ≥ a) ≤ 2 exp(−a²/(2σ²)), which holds for both
    (CKS20, Prop. 25), so the interval is valid, slightly conservative.
    """
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    return scale * math.sqrt(2 * math.log(2 / beta))


def staircase_tail(step: float, epsilon: float, beta: float) -> float:
    """Half-width for staircase noise with step Δ_s: P(|Z| ≥ KΔ_s) = e^{−Kε} (G ≥ K)."""
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    return step * (math.ceil(math.log(1 / beta) / epsilon) + 1)


def l2_laplace_norm_tail(scale: float, dim: int, beta: float) -> float:
    """Radius r with P(‖Z‖₂ > r) ≤ β for noise with density ∝ exp(−‖z‖₂/s) on ℝ^d.

    ‖Z‖₂ ~ Gamma(d, s) (Chaudhuri, Monteleoni & Sarwate 2011, §4); the lattice version at
    2^-30 of the scale has the same tail up to that resolution.
    """
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    from scipy.stats import gamma

    return float(gamma.isf(beta, dim, scale=scale))


def laplace_abs_sum_tail(scale: float, count: int, beta: float) -> float:
    """Bound a with P(Σᵢ |Zᵢ| > a) ≤ β for ``count`` discrete Laplace draws of this scale,
    drawn one after another (each independent of the earlier ones).

    P(|Z| ≥ k) = 2e^{−k/s}/(1 + e^{−1/s}) ≤ e^{−(k−1)/s}, so |Z| is stochastically below
    1 + Exp(s) and the sum below count + Gamma(count, s).
    """
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    from scipy.stats import gamma

    return count + float(gamma.isf(beta, count, scale=scale))
