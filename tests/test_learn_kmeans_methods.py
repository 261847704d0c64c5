"""KMeans: the grid start and sample-and-aggregate — inputs, debits, noise scale."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from learn_spies import laplace_noise, patch_laplace_noise

from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.learn import cluster as km

GEN = np.random.default_rng(7)  # test input only, never noise
X = np.concatenate([c + GEN.normal(0, 0.3, (400, 2)) for c in ([-3, -3], [3, 3], [-3, 3])])


@pytest.mark.parametrize("kwargs", [
    {"method": "kmedians"}, {"init": "kmeans++"}, {"init": "grid", "init_fraction": 0},
    {"init": "grid", "init_fraction": 1}, {"init": "grid", "init_fraction": "half"},
    {"init": "grid", "grid_bins": 1}, {"init": "grid", "grid_bins": 300},
    {"method": "sample_and_aggregate", "n_blocks": 1},
    {"method": "sample_and_aggregate", "n_blocks": 2.5}, {"max_iter": 0},
    {"bounds": None}, {"epsilon": 0},
])
def test_bad_inputs_raise_before_any_debit(kwargs):
    acct = PrivacyFilter(PureDP(5))
    args = {"n_clusters": 3, "epsilon": 1, "bounds": (-5, 5), "accountant": acct, **kwargs}
    with pytest.raises(DomainError):
        km.KMeans(**args).fit(X)
    assert acct.spent == PureDP(0)


def _spy(monkeypatch, acct):
    calls = []
    real = laplace_noise

    def spy(values, sensitivity, epsilon):
        calls.append((Fraction(sensitivity), Fraction(epsilon), acct.spent, np.size(values)))
        return real(values, sensitivity, epsilon)

    patch_laplace_noise(monkeypatch, spy)
    return calls


def test_grid_start_spends_its_share_after_the_debit(monkeypatch):
    acct = PrivacyFilter(PureDP(3))
    calls = _spy(monkeypatch, acct)
    model = km.KMeans(3, 2, bounds=(-5, 5), init="grid", grid_bins=4, max_iter=3,
                      accountant=acct).fit(X)
    assert acct.spent == PureDP(2) and all(spent == PureDP(2) for _, _, spent, _ in calls)
    sens, eps, _, size = calls[0]
    assert (sens, eps, size) == (1, 1, 16)  # the histogram: 4² cells, ε/2, sensitivity 1
    assert sum(e for _, e, _, _ in calls) == 2  # the rest over 3 Lloyd iterations
    assert len(calls) == 1 + 3 * (2 + 1) and model.cluster_centers_.shape == (3, 2)


def test_sample_and_aggregate_spends_eps_in_rounds_at_sensitivity_2kd(monkeypatch):
    acct = PrivacyFilter(PureDP(3))
    calls = _spy(monkeypatch, acct)
    km.KMeans(3, 1, bounds=(-5, 5), method="sample_and_aggregate", n_blocks=20, max_iter=2,
              init="sphere_packing", accountant=acct).fit(X)
    assert acct.spent == PureDP(1)
    assert [(s, e, spent, n) for s, e, spent, n in calls] == [
        (12, Fraction(1, 2), PureDP(1), 6)] * 2  # 2·k·d = 12 over k·d = 6 entries


def _aggregate_noise_ok(reps: int = 200) -> bool:
    """Every row at the origin and the start at the origin: every block answers 0, so the
    release is clamp(L/m, −1, 1), L ~ Lap(b) per entry, b = 2kd/ε = 5 (k = d = 5, ε = 10),
    m = 50. In units of b: S = Σ min(|L|/b, c), c = m/b = 10, over N = 25·reps = 5000
    entries. Upper tail: S ≤ Σ E_i with E_i ~ Exp(1), P(Σ E_i > 1.1N) ≤ e^{−N(0.1 − ln 1.1)}
    < 1e-9. Lower tail: P(Σ E_i < 0.9N) ≤ e^{−N(−0.1 − ln 0.9)} < 1e-9, and the clamp removes
    Σ(E_i − c)₊ > 40 with probability ≤ exp(N·e^{−c} − 40/2) < 1e-8 (Chernoff at λ = 1/2,
    E e^{(E − c)₊/2} = 1 + e^{−c}). Accept S/N in [0.9 − 40/N, 1.1]: false-positive rate
    ≤ 1e-6. A halved sensitivity gives S/N ≈ 0.5."""
    k, d, m = 5, 5, 50
    z = np.zeros((1000, d))
    start = np.zeros((k, d))
    b = 2 * k * d / 10
    out = np.array([km.KMeans._sample_and_aggregate(z, start, [Fraction(10)], m)
                    for _ in range(reps)])
    n = out.size
    stat = float(np.abs(out).sum()) * m / b
    return 0.9 - 40 / n <= stat / n <= 1.1


def test_aggregate_noise_has_the_stated_scale_and_a_halved_sensitivity_is_caught(
        monkeypatch):
    assert _aggregate_noise_ok()
    real = laplace_noise
    patch_laplace_noise(monkeypatch,
                        lambda v, s, e: real(v, Fraction(s) / 2, e))  # forgets the factor 2
    assert not _aggregate_noise_ok()


def test_blocks_are_drawn_per_row_not_seeded():
    """Two fits on the same data differ (fresh CSPRNG noise; no seed reaches the release).
    At ε = 100 the centres sit well inside the bounds (at ε = 1 most coordinates clamp to
    ±5, so two fits could agree: a flake CI once hit); unclamped, equal centres would need
    six grid-Laplace draws at scale ≫ the grid step to coincide in both fits."""
    a = km.KMeans(3, 100, bounds=(-5, 5), method="sample_and_aggregate", n_blocks=20).fit(X)
    b = km.KMeans(3, 100, bounds=(-5, 5), method="sample_and_aggregate", n_blocks=20).fit(X)
    assert not np.array_equal(a.cluster_centers_, b.cluster_centers_)


def test_grid_start_finds_separated_clusters_at_a_large_epsilon():
    """ε = 20 on three clusters 6 apart (σ = 0.3): the noisy 4×4 histogram has scale 1/10
    against counts of ~100 per occupied cell; the true centres give WCSS ≈ 1200·2·0.09 ≈ 216,
    a merged pair costs > 3000. Best of 5 fits below 600: a miss needs every one of 5 fits
    to fail (none failed in 200 trial runs), probability far below 1e-6."""
    best = min(km.KMeans(3, 20, bounds=(-5, 5), init="grid", grid_bins=4, max_iter=3)
               .fit(X).inertia(X) for _ in range(5))
    assert best < 600
