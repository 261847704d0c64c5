"""The Gaussian mechanism with a Mahalanobis sensitivity (Dwork & Roth App. A.1): its exact
law on a small lattice, a brute-force check of its privacy map on 2-D neighbours, the front
door through the kit, and plan-time refusals. Statistical tests reject a correct sampler
with probability ≤ FALSE_POSITIVE_RATE = 1e-6 and are paired with a broken variant."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_gaussian_pmf

from dpkit.core.measures import ZCDP, ApproxDP, PureDP
from dpkit.core.samplers import discrete_gaussian_variance
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend, make_gaussian_mahalanobis, make_noise
from dpkit.mechanisms.mahalanobis import mahalanobis_norm, mahalanobis_plan

SIGMA = [[4, 2], [2, 5]]  # = L·D·Lᵀ with L = [[1, 0], [1/2, 1]], D = diag(4, 4)


def test_ldl_factor_is_exact():
    plan = mahalanobis_plan(1, SIGMA, k=0)
    assert plan.lower == ((1, 0), (Fraction(1, 2), 1))
    assert plan.pivots == (4, 4) and plan.variances == (4, 4)


def _whitened(draws: np.ndarray) -> np.ndarray:
    """z = L⁻¹y for L = [[1, 0], [1/2, 1]] (k = 0): integers iff y is on the lattice Lℤ²."""
    return np.stack([draws[:, 0], draws[:, 1] - draws[:, 0] / 2], axis=1)


def _law_pvalue(z: np.ndarray, variance: float) -> float:
    """χ² of the joint law of (z₁, z₂) against N_ℤ(0, v) ⊗ N_ℤ(0, v) on |zᵢ| ≤ 16 (the
    helper renormalises the pmf on its support: the mass beyond, < 1e-13 for v ≤ 4, is
    negligible)."""
    assert np.array_equal(z, np.round(z)), "outputs off the lattice Lℤ²"
    support = np.arange(-16, 17)
    pmf = discrete_gaussian_pmf(support, variance ** 0.5)
    pmf = pmf / discrete_gaussian_pmf(np.arange(-200, 201), variance ** 0.5).sum()
    joint = np.outer(pmf, pmf).ravel()
    codes = np.where((np.abs(z) <= 16).all(axis=1),
                     (z[:, 0] + 16) * 33 + (z[:, 1] + 16), -1).astype(int)
    return chi2_pvalue(codes, np.arange(33 * 33), joint)


def test_exact_law_on_a_small_lattice():
    """c = 1, k = 0: y = L·z with zᵢ ~ N_ℤ(0, 4) independent (the module docstring's law)."""
    m = make_gaussian_mahalanobis(1, SIGMA, k=0)
    draws = np.array([m(np.zeros(2)) for _ in range(6000)])
    assert _law_pvalue(_whitened(draws), 4.0) > FALSE_POSITIVE_RATE


def test_exact_law_catches_a_broken_variant():
    """The same test on noise of covariance c²Σ/2 (broken) rejects it."""
    z = np.stack([discrete_gaussian_variance(2, 6000), discrete_gaussian_variance(2, 6000)],
                 axis=1)
    assert _law_pvalue(z, 4.0) < FALSE_POSITIVE_RATE


def _log_pmf(centre: list[int], variances: tuple[Fraction, ...], grid: np.ndarray
             ) -> np.ndarray:
    """log P(u = t) of independent N_ℤ(centreᵢ, vᵢ) on the 2-D lattice box ``grid``."""
    out = np.zeros(grid.shape[1:])
    for i, (c, v) in enumerate(zip(centre, variances, strict=True)):
        t = grid[i].astype(float)
        log = -((t - c) ** 2) / (2 * float(v))
        tt = np.arange(-400, 401, dtype=float)
        out += log - np.log(np.exp(-(tt ** 2) / (2 * float(v))).sum())
    return out


def _renyi(p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    """D_α(P‖Q) = log Σ p^α q^(1−α) / (α − 1), by brute force over the box."""
    terms = alpha * p + (1 - alpha) * q
    top = terms.max()
    return float((top + np.log(np.exp(terms - top).sum())) / (alpha - 1))


PAIRS = [((0.0, 0.0), (2.0, 0.0)), ((0.3, -0.2), (0.3, 2.2)), ((0.0, 0.0), (1.4, 1.7)),
         ((5.5, 1.25), (4.0, -0.5))]


def _max_excess(claimed_scale: int, noise_scale: int) -> float:
    """max over PAIRS and α of D_α(M(x)‖M(x′)) − α·ρ(Δ_M), ρ the map of the mechanism at
    ``claimed_scale``, the law that of the plan at ``noise_scale`` (k = 0: coarse rounding,
    so the grid allowance is exercised)."""
    m = make_gaussian_mahalanobis(claimed_scale, SIGMA, k=0)
    plan = mahalanobis_plan(noise_scale, SIGMA, k=0)
    box = np.mgrid[-60:61, -60:61]
    worst = -np.inf
    for x, xp in PAIRS:
        d_in = mahalanobis_norm(np.subtract(xp, x).tolist(), SIGMA)
        rho = float(m.privacy_map(d_in).rho)
        p = _log_pmf(plan.whiten(np.array(x)), plan.variances, box)
        q = _log_pmf(plan.whiten(np.array(xp)), plan.variances, box)
        for alpha in (1.5, 2.0, 4.0, 8.0, 32.0):
            worst = max(worst, _renyi(p, q, alpha) - alpha * rho)
    return worst


def test_privacy_map_holds_by_brute_force_on_2d_neighbours():
    """Rényi divergences of the exact output laws (the release is 2^k·L·u, post-processing
    of u, so u's laws bound it) stay within α·ρ(Δ_M) for every pair and α (deterministic)."""
    assert _max_excess(2, 2) <= 1e-9


def test_privacy_map_brute_force_catches_sigma_scaled_down():
    """Noise with Σ/4 (c halved) against the claim for Σ: the check fails."""
    assert _max_excess(2, 1) > 0.01


def test_map_is_the_spherical_one_for_the_identity():
    """Σ = I: the map is the grid Gaussian's, (Δ + 2^k√d)²/(2c²)."""
    m = make_gaussian_mahalanobis(3, [[1, 0], [0, 1]], k=-20)
    rho = m.privacy_map(1).rho
    relax = Fraction(2) ** -20 * Fraction(141421357, 10**8)
    assert Fraction(1, 18) < rho <= (1 + relax * Fraction(10001, 10000)) ** 2 / 18


def test_front_door_draws_through_the_calibrated_entry():
    value, row = frontend.noisy(np.array([10.0, 20.0]), 1, ZCDP(Fraction(1, 2)),
                                covariance=SIGMA, statistic="pair")
    assert value.shape == (2,) and row.name == "Mahalanobis Gaussian (grid)"
    m = make_noise(1, rho=Fraction(1, 2), covariance=SIGMA, output="grid")
    assert m.loss <= ZCDP(Fraction(1, 2)) and row.scale == m.scale
    assert 1 <= m.scale < 1 + Fraction(1, 10**6)  # c = Δ_M/√(2ρ) plus the grid allowance
    approx = make_noise(1, epsilon=1, delta=Fraction(1, 10**6), covariance=SIGMA,
                        output="grid")
    assert approx.budget == ApproxDP(1, Fraction(1, 10**6))


@pytest.mark.parametrize("sigma, words", [
    ([[1, 2], [3, 4]], "symmetric"),
    ([[1, 2], [2, 1]], "positive definite"),
    ([[1, 0, 0], [0, 1, 0]], "square"),
    ([[float("nan"), 0], [0, 1]], "finite"),
    ([[1, 0], [0, 10**9]], "ill-conditioned"),
])
def test_bad_covariance_is_refused_at_plan_time(sigma, words):
    with pytest.raises(DomainError, match=words):
        make_noise(1, rho=1, covariance=sigma, output="grid")


def test_budgets_the_gaussian_cannot_take_are_refused():
    with pytest.raises(DomainError, match="rho= or epsilon= with delta="):
        make_noise(1, epsilon=1, covariance=SIGMA, output="grid")
    with pytest.raises(DomainError, match="output='grid'"):
        make_noise(1, rho=1, covariance=SIGMA)
    with pytest.raises(DomainError, match="has 3 elements"):
        make_gaussian_mahalanobis(1, SIGMA)(np.zeros(3))
    with pytest.raises(DomainError):
        frontend.noisy(np.zeros(2), 1, PureDP(1), covariance=SIGMA)
