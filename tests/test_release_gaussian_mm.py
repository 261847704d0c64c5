"""The Gaussian matrix mechanism (dpkit.release.ranges.gaussian_mm): the L2-optimised strategy
against the SVD bound, the exact L2 sensitivity, the noise calibration and a statistical
check of the noise scale with a broken variant."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import norm

from dpkit.core.measures import ZCDP
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.ranges import gaussian_mm as gm
from dpkit.release.ranges.matrix import svd_lower_bound
from dpkit.release.workload import all_range_gram, prefix


def _prefix_gram(n):
    w = prefix(n).matrix().toarray().astype(float)
    return w.T @ w


@pytest.mark.parametrize("gram", [_prefix_gram(64), all_range_gram(64)],
                         ids=["prefix", "all-range"])
def test_optimised_strategy_is_within_1_1_of_the_svd_bound(gram):
    """HDMM's anchor (L2): within 1.1× of (Σσ)²/n; the bound holds for every strategy."""
    bound = svd_lower_bound(gram=gram)
    a = gm.optimize_l2(gram)
    assert np.allclose((a * a).sum(axis=0), 1)
    assert bound * (1 - 1e-9) <= gm.l2_error(gram, a) <= 1.1 * bound
    # a strategy that is not optimised (Identity) misses the anchor by far
    assert gm.l2_error(gram, np.eye(64)) > 4 * bound


@pytest.mark.slow
def test_prefix_anchor_n256():
    gram = _prefix_gram(256)
    assert gm.l2_error(gram, gm.optimize_l2(gram)) <= 1.1 * svd_lower_bound(gram=gram)


def test_l2_sensitivity_bounds_every_column_and_is_tight():
    rng = np.random.default_rng(3)  # test input
    for _ in range(20):
        a = rng.normal(size=(7, 5)) * rng.uniform(0.1, 10, size=5)
        delta = gm.l2_sensitivity(a)
        exact_max = max(sum(Fraction(float(v)) ** 2 for v in a[:, j]) for j in range(5))
        assert delta * delta >= exact_max
        assert float(delta) <= math.sqrt(float(exact_max)) * (1 + 1e-12)
    with pytest.raises(DomainError):
        gm.l2_sensitivity(np.zeros((3, 3)))
    with pytest.raises(DomainError):
        gm.l2_sensitivity(np.array([[np.nan]]))


@pytest.mark.parametrize("rho", [Fraction(1, 1000), Fraction(1, 2), Fraction(7)])
def test_noise_is_calibrated_to_rho(rho, monkeypatch):
    a = gm.optimize_l2(_prefix_gram(16))
    sensitivity = gm.l2_sensitivity(a)
    drawn, real = [], frontend.noisy

    def spy(values, sens, budget, **kw):
        out = real(values, sens, budget, **kw)
        drawn.append((sens, budget, kw, out.row))
        return out

    monkeypatch.setattr(frontend, "noisy", spy)
    gm.gaussian_matrix_mechanism(np.arange(16), rho, strategy=a)
    ((sens, budget, kw, row),) = drawn
    assert sens == sensitivity and budget == ZCDP(rho)
    loss = frontend.calibrate(sens, budget, **kw).map(sensitivity)
    assert isinstance(loss, ZCDP) and loss.rho <= rho and row.sensitivity == sensitivity
    assert float(row.scale) <= float(sensitivity) / math.sqrt(2 * float(rho)) * (1 + 1e-6)
    assert gm.make_gaussian_matrix_release(rho).map(3) == ZCDP(9 * rho)


def _small_noise_share(monkeypatch=None) -> float:
    """Share of noise coordinates A(x̂ − x) with |η| ≤ σ/2 over 20,032 draws, σ = 100."""
    n, rho = 64, Fraction(1, 20000)  # Δ₂ ≈ 1 → σ ≈ 100
    w = prefix(n)
    a = gm._strategy(w, n)
    sigma = float(gm.l2_sensitivity(a)) / math.sqrt(2 * float(rho))
    x = np.arange(n, dtype=np.int64)
    etas = [a @ (gm.gaussian_matrix_mechanism(x, rho, w) - x) for _ in range(313)]
    eta = np.concatenate(etas)
    return float(np.mean(np.abs(eta) <= sigma / 2)), eta.size


def test_noise_scale_statistically_and_broken_variant_is_caught(monkeypatch):
    """P(|N(0, σ²)| ≤ σ/2) = 0.3829; the discrete Gaussian at σ = 100 differs by < 0.005.
    Hoeffding over N draws: |share − p| > √(ln(2·10⁶)/(2N)) + 0.005 with probability
    ≤ 1e-6. Broken: σ calibrated for 4ρ (half the noise) gives p = P(|Z| ≤ 1) = 0.683."""
    p = 2 * norm.cdf(0.5) - 1
    share, count = _small_noise_share()
    slack = math.sqrt(math.log(2e6) / (2 * count)) + 0.005
    assert abs(share - p) <= slack  # fails with probability ≤ 1e-6
    real = frontend.noisy
    monkeypatch.setattr(frontend, "noisy", lambda values, sens, budget, **kw: real(
        values, sens, ZCDP(4 * budget.rho), **kw))
    broken, _ = _small_noise_share()
    assert abs(broken - p) > slack


def test_bad_input_raises():
    with pytest.raises(DomainError):
        gm.gaussian_matrix_mechanism(np.array([1, -1]), 1)
    with pytest.raises(DomainError):
        gm.gaussian_matrix_mechanism(np.array([1, 2]), 0)
    with pytest.raises(DomainError):
        gm.gaussian_matrix_mechanism(np.array([1, 2, 3]), 1, prefix(4))
    with pytest.raises(DomainError):
        gm.gaussian_matrix_mechanism(np.array([1, 2, 3]), 1, strategy=np.eye(2))
    with pytest.raises(DomainError):
        gm.optimize_l2(np.eye(gm.MAX_CELLS + 1))


def test_strategy_cache_reuses_by_structure_and_never_across_families():
    """Prefix and all ranges of one n are two entries; two random workloads of the uniform
    family share one (a hit, counted), bit-identical to a fresh search, with the same exact
    Δ₂; its expected error is within 1.1× (squared) of a search on each held-out workload
    (measured ≤ 1.003 at n = 32, 2,000 queries)."""
    from dpkit.release.workload import all_range, random_ranges

    data = np.random.default_rng(13)  # workloads only
    n = 32
    gm.strategy_cache_clear()
    pre, rng_ = gm._strategy(prefix(n), n), gm._strategy(all_range(n), n)
    assert gm.strategy_cache_info()["misses"] == 2 and not np.array_equal(pre, rng_)
    assert np.array_equal(pre, gm.optimize_l2(_prefix_gram(n)))  # the same Gram as before
    first, second = random_ranges(n, 2000, data), random_ranges(n, 2000, data)
    a, b = gm._strategy(first, n), gm._strategy(second, n)
    info = gm.strategy_cache_info()
    assert (info["misses"], info["hits"]) == (3, 1) and np.array_equal(a, b)
    gm.strategy_cache_clear()
    fresh = gm._strategy(second, n)
    assert np.array_equal(fresh, b) and gm.l2_sensitivity(fresh) == gm.l2_sensitivity(b)
    for w in (first, second):
        own = gm._strategy(w, n, reuse=False)
        ratio = (gm.gaussian_expected_rmse(w, n, 1, b) / gm.gaussian_expected_rmse(
            w, n, 1, own)) ** 2
        assert ratio <= 1.1
    with pytest.raises(DomainError, match="reuse"):
        gm.gaussian_matrix_mechanism(np.arange(n), 1, first, reuse=1)
