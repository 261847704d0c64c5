"""The distributed discrete Gaussian (dpkit.local.distributed, Kairouz, Liu & Steinke 2021):
the accounting against a direct computation of the Rényi divergence of a sum of discrete
Gaussians (and the τ-less accounting it rejects), the noise law, conditional rounding, the
simulated secure aggregation, accuracy, the audit case and bad input.

Statistical tests reject a correct implementation with probability ≤ 1e-6
(tests.stats.FALSE_POSITIVE_RATE)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import logsumexp
from tests.stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_gaussian_pmf

import dpkit.local as ldp
from dpkit.audit import run_audit
from dpkit.errors import DomainError
from dpkit.local.distributed import tau_bound
from dpkit.mechanisms.registry import registered

FPR = FALSE_POSITIVE_RATE


def renyi_of_sum(sigma: float, n: int, shift: int, alpha: float, half: int = 150) -> float:
    """D_α(Z + Δ ‖ Z), Z a sum of n independent N_ℤ(0, σ²), by exact convolution in log
    space on [−150, 150] (nσ² ≤ 5: the mass beyond is below e^-2000; the terms of D_α
    peak near z = αΔ ≤ 48)."""
    z = np.arange(-half, half + 1)
    one = -(z.astype(float) ** 2) / (2 * sigma**2)
    one -= logsumexp(one)
    acc = one.copy()
    for _ in range(n - 1):
        full = np.full(4 * half + 1, -np.inf)
        for i, v in enumerate(one):
            full[i: i + one.size] = np.logaddexp(full[i: i + one.size], v + acc)
        acc = full[half: half + one.size]
    shifted = np.full_like(acc, -np.inf)
    shifted[shift:] = acc[:-shift]
    ok = np.isfinite(shifted) & np.isfinite(acc)
    return float(logsumexp(alpha * shifted[ok] + (1 - alpha) * acc[ok]) / (alpha - 1))


CASES = [(0.3, 2), (0.3, 5), (0.5, 3), (0.7, 2), (0.7, 5), (1.0, 3)]


@pytest.mark.parametrize(("sigma", "n"), CASES)
def test_accounting_bounds_the_directly_computed_renyi_divergence(sigma, n):
    """D_α ≤ α(Δ²/(2nσ²) + τ) for Δ ∈ {1, 2, 3}, α ∈ {1.5, …, 16} (d = 1)."""
    tau = float(tau_bound(Fraction(sigma), n))
    for shift in (1, 2, 3):
        for alpha in (1.5, 2, 4, 8, 16):
            direct = renyi_of_sum(sigma, n, shift, alpha)
            assert direct <= alpha * (shift**2 / (2 * n * sigma**2) + tau), (shift, alpha)


def test_the_accounting_without_tau_is_rejected_by_the_direct_computation():
    """For small σ the sum is far from N_ℤ(0, nσ²): dropping τ under-states the loss."""
    direct = renyi_of_sum(0.3, 3, 1, 4)  # 1.35× the τ-less α·Δ²/(2nσ²)
    assert direct > 1.3 * 4 * (1 / (2 * 3 * 0.3**2))


def test_tau_and_rho_are_computed_conservatively_and_exactly():
    for sigma, n in ((Fraction(1, 2), 10), (Fraction(3, 4), 5000), (Fraction(2), 10**6)):
        s = float(sigma)
        direct = 10 * sum(math.exp(-2 * math.pi**2 * s * s * k / (k + 1)) for k in range(1, n))
        tau = tau_bound(sigma, n)
        slack = 1e-9 if n <= 2001 else 1e-2  # beyond 2000 terms: each bounded by the 2000th
        assert direct <= float(tau) <= direct * (1 + slack)
    mech = ldp.DistributedDiscreteGaussian(16, clip=1, scale=Fraction(1, 10),
                                           gamma=Fraction(1, 100), modulus=1 << 20)
    s2 = (mech.scale / mech.gamma) ** 2
    tau = tau_bound(mech.scale / mech.gamma, 100)
    assert mech.rho(100).rho == 4 * mech.delta2_sq / (200 * s2) + 16 * tau
    assert mech.rho(100, "zero-out").rho == mech.delta2_sq / (200 * s2) + 16 * tau
    cg = 100
    assert float(mech.delta2_sq) == pytest.approx(min((cg + 4) ** 2, cg**2 + 4 + math.sqrt(
        2 * math.log(5 / 3)) * (cg + 2)), rel=1e-12)
    rhos = [float(mech.rho(n).rho) for n in (10, 100, 1000)]
    assert rhos == sorted(rhos, reverse=True)
    assert mech.measurement(100).privacy_map(2).rho == 4 * mech.rho(100).rho


def test_client_noise_is_discrete_gaussian_and_a_smaller_sigma_is_rejected():
    """A zero vector rounds to 0 exactly, so a client's integers are its N_ℤ(0, σ²/γ²) noise."""
    mech = ldp.DistributedDiscreteGaussian(4, clip=1, scale=Fraction(3, 10),
                                           gamma=Fraction(1, 10), modulus=1 << 16)
    noise = mech.integers(np.zeros((25_000, 4))).reshape(-1)
    support = np.arange(-20, 21)
    assert chi2_pvalue(noise, support, discrete_gaussian_pmf(support, 3.0)) > FPR
    assert chi2_pvalue(noise, support, discrete_gaussian_pmf(support, 2.4)) < FPR


def test_conditional_rounding_respects_the_norm_bound_and_is_unbiased():
    mech = ldp.DistributedDiscreteGaussian(8, clip=1, scale=1, gamma=Fraction(1, 8),
                                           modulus=1 << 20, beta=Fraction(1, 2))
    z = np.tile(np.linspace(-2.3, 2.7, 8), (50_000, 1)) + 0.4
    rounded = mech._round(z)
    assert np.all((rounded**2).sum(axis=1) <= float(mech.delta2_sq))
    assert np.all((rounded == np.floor(z)) | (rounded == np.floor(z) + 1))
    frac = z[0] - np.floor(z[0])
    ups = (rounded - np.floor(z)).mean(axis=0)
    se = np.sqrt(frac * (1 - frac) / z.shape[0]) + 1e-12
    assert np.all(np.abs(ups - frac) < 5.5 * se)  # two-sided normal tail < 1e-7 per coordinate
    tight = ldp.DistributedDiscreteGaussian(1, clip=Fraction(1, 2), scale=1, gamma=1,
                                            modulus=1 << 10)
    assert tight._round(np.full((100, 1), 0.5)).max() <= 1


def test_secure_aggregation_reveals_the_modular_sum_and_the_server_decodes_it():
    mech = ldp.DistributedDiscreteGaussian(10, clip=2, scale=Fraction(1, 5),
                                           gamma=Fraction(1, 64), modulus=1 << 24)
    data = np.cos(np.arange(300).reshape(30, 10))
    ints = mech.integers(data)
    total = mech.aggregate(np.mod(ints, mech.m))
    assert np.array_equal(total, ints.sum(axis=0) % mech.m)
    expected = mech.unrotate(ints.sum(axis=0)[None, :] * float(mech.gamma))[0]
    assert np.allclose(mech.decode(total), expected, atol=1e-9)
    x = np.cos(np.arange(10.0))
    assert np.allclose(mech.unrotate(mech.rotate(x[None, :]))[0], x)
    assert np.linalg.norm(mech.rotate(x[None, :])) == pytest.approx(np.linalg.norm(x))
    small = ldp.DistributedDiscreteGaussian(10, clip=2, scale=Fraction(1, 5),
                                            gamma=Fraction(1, 64), modulus=64)
    y = small.encode(data)
    assert y.min() >= 0 and y.max() < 64  # messages are residues; sums wrap around mod m


def test_decoded_sum_is_accurate_within_the_mse_bound():
    """50 runs of 40 clients in d = 60 (padded to 64): the mean squared error is within
    1.2× n·d′·(γ²/4 + σ²) (the average of 3200 coordinates; its relative SD is ~3%)."""
    mech = ldp.DistributedDiscreteGaussian(60, clip=1, scale=Fraction(1, 20),
                                           gamma=Fraction(1, 200), modulus=1 << 24)
    data = np.sin(np.arange(2400.0).reshape(40, 60)) / 5
    clipped = data * np.minimum(1, 1 / np.linalg.norm(data, axis=1))[:, None]
    errs = [np.sum((mech.run(data) - clipped.sum(axis=0)) ** 2) for _ in range(50)]
    assert np.mean(errs) <= 1.2 * mech.mse_bound(40)
    assert np.mean(errs) >= 0.5 * 40 * 64 * float(mech.scale) ** 2  # the noise is there


def test_audit_case_passes_and_its_broken_variant_is_flagged():
    (case,) = registered()["DistributedDiscreteGaussian"].audit()
    ok = run_audit(case, 30_000, confidence=1 - FPR)
    assert ok.histogram_passed and ok.lower_bound <= ok.claimed_epsilon
    bad = run_audit(case, 30_000, broken=True, confidence=1 - FPR)
    assert (not bad.histogram_passed) or bad.lower_bound > bad.claimed_epsilon


def test_bad_input_raises_typed_errors():
    good = {"dim": 4, "clip": 1, "scale": 1, "gamma": Fraction(1, 10), "modulus": 1 << 10}
    for key, bad in (("dim", 0), ("clip", 0), ("scale", -1), ("gamma", 0), ("modulus", 1),
                     ("beta", 1), ("beta", 0), ("dim", 2.5), ("scale", 2**50)):
        with pytest.raises(DomainError):
            ldp.DistributedDiscreteGaussian(**{**good, key: bad})
    mech = ldp.DistributedDiscreteGaussian(**good)
    with pytest.raises(DomainError):
        mech.integers(np.zeros((3, 5)))
    with pytest.raises(DomainError):
        mech.rho(0)
    with pytest.raises(DomainError):
        mech.rho(5, "add-remove")
    out = mech.run(np.array([[np.nan, np.inf, 0.5, 0.1]]))  # non-finite coordinates: 0
    assert out.shape == (4,) and np.all(np.isfinite(out))
