"""PCA centred on a private mean (issue 34): the mean is debited inside the one charge,
``transform`` centres on ``mean_``, and the top component of data whose mean is far from the
bounds' midpoint is recovered (the midpoint-centred fit, the broken variant, is not)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

pytest.importorskip("sklearn")

import dpkit as dp  # noqa: E402
from dpkit.core.compose import PrivacyFilter  # noqa: E402
from dpkit.core.measures import ZCDP, ApproxDP  # noqa: E402
from dpkit.errors import DomainError  # noqa: E402
from dpkit.learn import decomposition as dec  # noqa: E402

# deterministic test input: mean μ = (0.6, 0.6), far from the midpoint 0 of [-1, 1]²; the
# spread is ±0.2 along u = (1, −1)/√2 and ±0.05 along v = (1, 1)/√2, so the covariance is
# 0.04·uuᵀ + 0.0025·vvᵀ exactly, and the mean's direction v is *not* the top component
U, V = np.array([1.0, -1.0]) / math.sqrt(2), np.array([1.0, 1.0]) / math.sqrt(2)
MU = np.array([0.6, 0.6])
N = 8000
X = np.array([MU + a * U + b * V for a in (-0.2, 0.2) for b in (-0.05, 0.05)] * (N // 4))
EPSILON, DELTA = 20, Fraction(1, 10**6)
T = 6.5  # union over 6 sub-Gaussian coordinates: 6·2·e^{−T²/2} ≈ 8e-10 ≤ 1e-6


def _session(tmp_path) -> dp.Session:
    return dp.Session(pl.DataFrame({"a": [1]}), dp.PrivacyUnit.rows(),
                      ApproxDP(100, Fraction(1, 1000)), ledger=str(tmp_path / "l.sqlite"),
                      dataset="d")


def test_the_mean_is_debited_inside_the_one_charge(tmp_path):
    session = _session(tmp_path)
    pca = dec.PCA(1, 2, 1e-6, bounds=(-1, 1), accountant=session).fit(X)
    release = session.last_release
    assert pca.release_ is release and session.accountant.spent == ApproxDP(2, Fraction(1e-6))
    assert [r.statistic for r in release.noise] == [dec.MEAN_SUMS, "XᵀX"]
    row = session.ledger.release(release.release_id)
    assert json.loads(row["noise"]) == [r.as_dict() for r in release.noise]  # at the debit
    # the ρ-split keeps the zCDP debit too: ρ, not ρ plus the mean's
    zc = PrivacyFilter(ZCDP(100))
    dec.PCA(1, 2, 1e-6, bounds=(-1, 1), accountant=zc).fit(X)
    assert zc.spent == ZCDP(dec._rho(Fraction(2), Fraction(1e-6)))
    # the old fit draws no mean
    old = dec.PCA(1, 2, 1e-6, bounds=(-1, 1), centre="midpoint").fit(X)
    assert [r.statistic for r in old.release_.noise] == ["XᵀX"]
    assert np.array_equal(old.mean_, [0.0, 0.0])


def test_bad_centre_or_share_is_refused_before_the_debit():
    acct = PrivacyFilter(ApproxDP(5, Fraction(1, 1000)))
    for kw in ({"centre": "median"}, {"mean_share": 0}, {"mean_share": 1}, {"mean_share": -1}):
        with pytest.raises(DomainError):
            dec.PCA(1, 1, bounds=(-1, 1), accountant=acct, **kw).fit(X)
    assert acct.spent == ApproxDP(0, 0)


def test_transform_centres_on_the_private_mean():
    pca = dec.PCA(2, EPSILON, 1e-6, bounds=(-1, 1)).fit(X)
    assert np.all(np.abs(pca.mean_ - MU) < 0.1) and not np.allclose(pca.mean_, 0)
    rows = X[:5]
    assert np.allclose(pca.transform(rows), (rows - pca.mean_) @ pca.components_.T)
    assert not np.allclose(pca.transform(rows), rows @ pca.components_.T)


def _sin_bound(rho_gram: Fraction, mean_scale: Fraction | None) -> float:
    """sin θ ≤ 2‖P‖/gap (Yu, Wang & Samworth 2015, Thm 2; the gap of the matrix the noise
    perturbs) when every noise coordinate is within T scales (probability ≥ 1 − 1e-6:
    discrete Gaussians are σ-sub-Gaussian, CKS20; grid rounding adds < 1e-6 below).
    P = E + n(x̄ − μ̂)(x̄ − μ̂)ᵀ: ‖E‖ ≤ ‖E‖_F ≤ 2·Tσ_G for a symmetric 2×2 E."""
    bound = Fraction(float(np.linalg.norm([1.0, 1.0]))) * (1 + Fraction(1, 1 << 30))
    sigma = float(dec._calibrated(2, bound, rho_gram).name.split("scale=")[1].split(",")[0])
    perturbation = 2 * T * sigma + 1e-6
    if mean_scale is None:  # midpoint: the matrix is nC + nμμᵀ, top vector v
        gap = N * (float(MU @ MU) + 0.0025 - 0.04)
    else:  # released (S + e, c·n + e′): μ̂ off x̄ by ≤ (a + |S|·a/(c·n))/(n − a/c), a = Tσ
        a, c = T * float(mean_scale), float(dec._count_weight(2, bound))
        error = (a + N * 0.6 * a / (c * N)) / (N - a / c) + 2.0 ** -19  # + exact_sums' cut
        perturbation += N * 2 * error ** 2
        gap = N * (0.04 - 0.0025)
    return 2 * perturbation / gap


def _sin_to(axis: np.ndarray, component: np.ndarray) -> float:
    return math.sqrt(max(0.0, 1 - float(component @ axis) ** 2))


def test_the_top_component_is_recovered_and_the_midpoint_fit_is_caught():
    """False-positive rate ≤ 1e-6 (each fit: the bound of :func:`_sin_bound` fails with
    probability ≤ 8e-10). The premises (bounds ≤ 0.15) are checked, not assumed."""
    rho = dec._rho(Fraction(EPSILON), DELTA)
    share = dec.MEAN_SHARE
    pca = dec.PCA(1, EPSILON, float(DELTA), bounds=(-1, 1)).fit(X)
    mean_row = pca.release_.noise[0]
    bound = _sin_bound(rho * (1 - share), mean_row.scale)
    assert bound <= 0.15
    assert _sin_to(U, pca.components_[0]) <= bound
    # broken variant: centred on the midpoint, the mean's direction v wins
    old = dec.PCA(1, EPSILON, float(DELTA), bounds=(-1, 1), centre="midpoint").fit(X)
    old_bound = _sin_bound(rho, None)
    assert old_bound <= 0.15
    assert _sin_to(V, old.components_[0]) <= old_bound  # so u is missed:
    assert _sin_to(U, old.components_[0]) >= math.sqrt(1 - old_bound ** 2) > bound
