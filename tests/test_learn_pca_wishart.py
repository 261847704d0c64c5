"""PCA: the refused Wishart method, the memoised calibration, debit before compute."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import ZCDP, ApproxDP, largest_rho
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.learn import decomposition as dec
from dpkit.mechanisms.covariance import make_analyze_gauss

X = np.linspace(-1, 1, 600).reshape(200, 3)  # deterministic test input


def test_wishart_is_refused_before_any_debit():
    acct = PrivacyFilter(ApproxDP(1, Fraction(1, 10**5)))
    with pytest.raises(DomainError, match="wishart"):
        dec.PCA(2, 1.0, bounds=(-1, 1), accountant=acct, method="wishart").fit(X)
    with pytest.raises(DomainError, match="method"):
        dec.PCA(2, 1.0, bounds=(-1, 1), accountant=acct, method="gauss").fit(X)
    with pytest.raises(DomainError):
        dec.PCA(2, 1.0, accountant=acct).fit(X)  # no bounds
    with pytest.raises(DomainError):
        dec.PCA(4, 1.0, bounds=(-1, 1), accountant=acct).fit(X)  # k > d
    assert acct.spent == ApproxDP(0, 0)


def test_why_wishart_is_not_private():
    """The refusal's argument, checked: an output with positive density under X (B − A ≻ 0)
    has B − A' with a negative eigenvalue for the neighbour X' = X + one row, so its density
    there is 0. Broken variant: with a non-PSD (symmetric Gaussian) noise no such output
    exists — B − A' is not required to be PSD."""
    n = X.shape[0]
    a = X.T @ X / n
    row = np.array([[1.0, 0.0, 0.0]])
    a_neighbour = (X.T @ X + row.T @ row) / (n + 1)
    t = 1e-4
    b = a + t * np.eye(3)
    assert np.linalg.eigvalsh(b - a).min() > 0  # a possible Wishart output under X
    assert np.linalg.eigvalsh(b - a_neighbour).min() < 0  # impossible under X'


def test_memoised_calibration_is_the_certified_one():
    rho = largest_rho(Fraction(1), Fraction(1, 10**6))
    assert dec._rho(Fraction(1), Fraction(1, 10**6)) == rho
    bound = Fraction(3) ** 1  # any public bound
    cached = dec._calibrated(3, bound, rho)
    assert cached is dec._calibrated(3, bound, rho)
    fresh = make_analyze_gauss(3, bound, rho=rho, clip=True)
    assert cached.name == fresh.name  # same σ and grid
    assert cached.check(1, ZCDP(rho)) and not cached.check(1, ZCDP(rho * Fraction(99, 100)))


def _noise_variance_ok(measurement, sigma: float, reps: int = 400) -> bool:
    """Upper-triangle noise of Analyze Gauss on a zero row, m = 6 entries per draw, N = 6·reps.
    Σe²/σ² is within [N − 2√(Nt), N + 2√(Nt) + 2t] except with probability ≤ 2e^{−t}
    (Laurent & Massart 2000, Lemma 1; the discrete Gaussian is σ-sub-Gaussian with variance
    ≤ σ², CKS20); t = ln(2·10^6): false-positive rate ≤ 1e-6."""
    rows, cols = np.triu_indices(3)
    draws = np.array([measurement(np.zeros((1, 3)))[rows, cols] for _ in range(reps)])
    n = draws.size
    t = math.log(2e6)
    stat = float((draws ** 2).sum()) / sigma ** 2
    return n - 2 * math.sqrt(n * t) <= stat <= n + 2 * math.sqrt(n * t) + 2 * t


def test_cached_mechanism_noise_has_the_calibrated_scale_and_a_smaller_one_is_caught():
    rho = dec._rho(Fraction(1), Fraction(1, 10**6))
    m = dec._calibrated(3, Fraction(1), rho)
    sigma = float(m.name.split("scale=")[1].split(",")[0])
    assert _noise_variance_ok(m, sigma)
    broken = make_analyze_gauss(3, 1, scale=Fraction(sigma) * Fraction(4, 5), clip=True)
    assert not _noise_variance_ok(broken, sigma)  # 0.64 σ²: caught


def test_pca_debits_before_it_computes_and_an_overrun_fits_nothing(monkeypatch):
    acct = PrivacyFilter(ApproxDP(Fraction(3, 2), Fraction(1, 10**5)))
    seen = []
    real = dec._calibrated

    def spy(*args):
        seen.append(acct.spent)
        return real(*args)

    monkeypatch.setattr(dec, "_calibrated", spy)
    pca = dec.PCA(2, 1.0, 1e-6, bounds=(-1, 1), accountant=acct).fit(X)
    assert seen == [ApproxDP(1, Fraction(1e-6))] and pca.components_.shape == (2, 3)
    late = dec.PCA(2, 1.0, 1e-6, bounds=(-1, 1), accountant=acct)
    with pytest.raises(BudgetExceededError):
        late.fit(X)
    assert len(seen) == 1 and not hasattr(late, "components_")


def test_zcdp_accountant_is_debited_rho():
    rho = dec._rho(Fraction(1), Fraction(1e-6))
    acct = PrivacyFilter(ZCDP(1))
    dec.PCA(2, 1.0, 1e-6, bounds=(-1, 1), accountant=acct).fit(X)
    assert acct.spent == ZCDP(rho)
