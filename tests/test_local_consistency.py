"""Consistency post-processing (dpkit.local.consistency, Wang et al. NDSS 2020): each
method's defining property on fixed vectors, and on oracle output that the consistent
methods reduce the error of the raw estimates on a skewed population (a deterministic
property check on fresh data: Norm-Sub and PowerNS must beat the raw MSE, which on a
Zipf population at ε = 1 they do by a factor > 2 with overwhelming probability)."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit.local as ldp
from dpkit.errors import DomainError
from dpkit.local.base import norm_sub

RAW = np.array([0.5, 0.4, -0.1, 0.05, 0.3, -0.02])


def test_each_method_has_its_defining_property():
    c = ldp.consistent
    assert np.array_equal(c(RAW, "base"), RAW)
    assert np.array_equal(c(RAW, "base-pos"), np.maximum(RAW, 0))
    assert np.array_equal(c(RAW, "post-pos"), np.maximum(RAW, 0))
    norm = c(RAW, "norm")
    assert norm.sum() == pytest.approx(1) and np.allclose(np.diff(norm), np.diff(RAW))
    mul = c(RAW, "norm-mul")
    assert mul.sum() == pytest.approx(1) and mul.min() == 0
    assert np.allclose(mul[mul > 0] / RAW[mul > 0], mul[0] / RAW[0])
    cut = c(RAW, "norm-cut")  # positives sum to 1.25: the smallest are dropped
    assert cut.tolist() == [0.5, 0.4, 0.0, 0.0, 0.0, 0.0]  # 0.5 + 0.4 + 0.3 > 1
    small = np.array([0.2, -0.1, 0.3])
    assert c(small, "norm-cut").tolist() == [0.2, 0.0, 0.3]  # sum < 1 is kept
    assert np.array_equal(c(RAW, "norm-sub"), norm_sub(RAW))
    sub = c(RAW, "norm-sub")
    assert sub.sum() == pytest.approx(1) and sub.min() >= 0
    base_cut = c(RAW, "base-cut", std_error=0.05, significance=0.05)  # θ = 0.05·Φ⁻¹(1 − 0.05/6)
    assert base_cut.tolist() == [0.5, 0.4, 0.0, 0.0, 0.3, 0.0]
    power = c(RAW, "power", std_error=0.05)
    assert power.min() > 0 and power.max() <= 1
    assert c(RAW, "power-ns", std_error=0.05).sum() == pytest.approx(1)
    assert ldp.subset_sum(RAW, [2, 5]) == 0.0
    assert ldp.subset_sum(RAW, [2, 5], "base-pos") == 0.0
    assert ldp.subset_sum(RAW, [0, 2]) == pytest.approx(0.4)


def test_consistent_methods_reduce_the_error_on_a_skewed_population():
    """Per trial, the projections (Norm-Sub onto the simplex, Base-Pos onto the orthant, both
    convex sets holding the truth) never increase the L2 error; averaged over 20 trials,
    Norm-Sub and PowerNS cut the MSE to below 0.7× the raw one (measured: ≈ 0.37 and 0.27,
    single trials range 0.18–0.53)."""
    k, n = 64, 20_000
    weights = 1 / np.arange(1, k + 1) ** 1.5
    counts = np.floor(weights / weights.sum() * n).astype(int)
    counts[0] += n - counts.sum()
    truth = counts / n
    oracle = ldp.OLH(k, 1)
    total = dict.fromkeys(ldp.consistency.METHODS, 0.0)
    for _ in range(20):
        frame = oracle.estimate(oracle.randomize(np.repeat(np.arange(k), counts)))
        raw, se = frame["estimate"].to_numpy(), frame["std_error"].to_numpy()
        mse = {m: float(np.mean((ldp.consistent(raw, m, std_error=se, n=n) - truth) ** 2))
               for m in ldp.consistency.METHODS}
        assert mse["norm-sub"] <= mse["base"] and mse["base-pos"] <= mse["base"]
        for m, v in mse.items():
            total[m] += v
    assert total["norm-sub"] < 0.7 * total["base"], total
    assert total["power-ns"] < 0.7 * total["base"], total


def test_bad_input_raises_typed_errors():
    with pytest.raises(DomainError):
        ldp.consistent(RAW, "clip")
    with pytest.raises(DomainError):
        ldp.consistent(np.array([0.1, np.nan]), "norm")
    with pytest.raises(DomainError):
        ldp.consistent(np.array([]), "norm")
    for method in ("base-cut", "power", "power-ns"):
        with pytest.raises(DomainError):
            ldp.consistent(RAW, method)
        with pytest.raises(DomainError):
            ldp.consistent(RAW, method, std_error=-1)
    with pytest.raises(DomainError):
        ldp.consistent(RAW, "base-cut", std_error=0.1, significance=1.5)
    with pytest.raises(DomainError):
        ldp.subset_sum(RAW, [6])
