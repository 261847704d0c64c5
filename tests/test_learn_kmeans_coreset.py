"""KMeans: the centre-of-attention aggregator (NRS07 §4) and the private coreset (Feldman et
al. 2017) — brute-force smoothness and sensitivity on small neighbours, the noise law, the
debits, and a deliberately broken variant beside each check."""

from __future__ import annotations

import itertools
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import ApproxDP, PureDP
from dpkit.errors import DomainError
from dpkit.learn import cluster as km
from dpkit.learn import coreset as cs

GEN = np.random.default_rng(11)  # test input only, never noise
X = np.concatenate([c + GEN.normal(0, 0.3, (400, 2)) for c in ([-3, -3], [3, 3], [-3, 3])])
VALUES = (-1.0, 0.0, 0.5, 1.0)
ETA = Fraction(1, 1 << 36)  # the slack the module docstring allows the float bound


def _smooth_and_covering(bound, beta: Fraction, m: int = 5) -> bool:
    """Every z ∈ VALUES^m (D = 1) and every neighbour z′ (one value replaced): the centre of
    attention moves by ≤ S̃(z), and S̃(z) ≤ e^{β+η}·S̃(z′) (exhaustive; deterministic)."""
    ratio = math.exp(float(beta + ETA))
    cache: dict[tuple[float, ...], tuple[float, float]] = {}

    def at(z: tuple[float, ...]) -> tuple[float, float]:
        if z not in cache:
            i, s = bound(np.array(z)[:, None])
            cache[z] = (z[i], float(s))
        return cache[z]

    for z in itertools.product(VALUES, repeat=m):
        g, s = at(z)
        for i, v in itertools.product(range(m), VALUES):
            g2, s2 = at(z[:i] + (v,) + z[i + 1:])
            if abs(g - g2) > s or s > ratio * s2 * (1 + 1e-12):
                return False
    return True


def test_the_smooth_bound_covers_local_sensitivity_and_is_smooth_brute_force():
    beta = Fraction(1, 2)  # a large β makes the smoothness bite
    assert _smooth_and_covering(lambda z: km.centre_of_attention(z, beta), beta)


def test_a_local_sensitivity_bound_is_caught():
    """Broken: claim β = 1/2 but compute the bound at β = 1000 (≈ U₀, the local bound)."""
    assert not _smooth_and_covering(lambda z: km.centre_of_attention(z, Fraction(1000)),
                                    Fraction(1, 2))


def test_a_minority_centre_is_caught():
    """Broken: t₀ = 1 (no majority ball: every point is its own centre, the first wins), the
    bound computed as in the module: the centre then jumps farther than the bound."""
    def minority(z: np.ndarray) -> tuple[int, Fraction]:
        radii = np.sort(np.abs(z - z.T), axis=1)
        t0 = 1
        centre = int(np.argmin(radii[:, t0 - 1]))
        return centre, km.centre_of_attention(z, Fraction(1, 2))[1]
    assert not _smooth_and_covering(minority, Fraction(1, 2))


def _noise_law_ok(beta: Fraction, m: int = 1101, n: int = 20_000) -> bool:
    """m equal block answers (D = 1) at 0, ε = 1, δ = 10^-6: r_i(t) = 0 for t ≤ m, so
    ρ_j = 0 for j ≤ m − t₀ and Λ = 2 after, and S = 2·e^{−β(m − t₀)} (≈ 0.019). The release
    is 0 + Y, Y discrete Laplace of scale b = (S̃ + 2^-20)/(ε/2) (≈ 0.04; the clamp at 1 is
    25b away: P < 2e^{-25} per draw). |Y|/b is within 1e-4 of Exp(1) in law (b is ~4·10^4
    lattice steps); Chernoff for the mean of n = 20,000: P(mean > 1.05) ≤ e^{−n(0.05 − ln
    1.05)} < 1e-10, P(mean < 0.95) ≤ e^{−n(−0.05 − ln 0.95)} < 1e-11: false-positive rate
    < 1e-6 with the clamp's. A noise calibrated to the local bound (0) gives mean ≈ 0."""
    eps, delta = Fraction(1), Fraction(1, 10**6)
    t0 = (m + 1) // 2 + 1
    smooth = 2 * math.exp(-float(beta) * (m - t0))
    b = (smooth + 2.0**-20) / 0.5
    out = km.release_centre_of_attention(np.zeros((m, 1)), eps, delta, n)[:, 0]
    return 0.95 <= float(np.abs(out).mean()) / b <= 1.05


def test_the_release_has_the_smooth_scale_and_a_local_scale_is_caught(monkeypatch):
    beta = km.attention_beta(Fraction(1), Fraction(1, 10**6), 1)
    assert _noise_law_ok(beta)
    monkeypatch.setattr(km, "attention_beta", lambda *a: Fraction(1000))  # local bound
    assert not _noise_law_ok(beta)


def test_attention_beta_meets_the_stated_conditions():
    for eps, delta, dim in [(Fraction(1), Fraction(1, 10**6), 25),
                            (Fraction(5), Fraction(1, 100), 2)]:
        beta = km.attention_beta(eps, delta, dim) + Fraction(1, 1 << 34)
        tail = 2 * math.log(1 / delta) + 2 * dim * math.log(2) + float(eps) / 2
        assert dim * beta <= eps / 2 and 2 * float(beta) * tail <= float(eps) / 2 * (1 + 1e-12)
        assert math.exp(-tail / 2) * 2**dim * math.exp(float(eps) / 4) <= float(delta) * 1.0001
    with pytest.raises(DomainError):
        km.attention_beta(Fraction(1, 10**12), Fraction(1, 10**6), 25)


def test_centre_of_attention_debits_eps_delta_and_draws_through_the_kit(monkeypatch):
    acct = PrivacyFilter(ApproxDP(3, Fraction(1, 1000)))
    seen = []
    real = km.frontend.noisy

    def spy(values, sensitivity, budget, **kw):
        seen.append((Fraction(sensitivity), Fraction(budget), kw.get("cache"), acct.spent))
        return real(values, sensitivity, budget, **kw)

    monkeypatch.setattr(km.frontend, "noisy", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        model = km.KMeans(3, 2, bounds=(-5, 5), method="sample_and_aggregate",
                          delta=Fraction(1, 10**6), n_blocks=40, init="sphere_packing",
                          accountant=acct).fit(X)
    assert acct.spent == ApproxDP(2, Fraction(1, 10**6))
    assert len(seen) == 1 and seen[0][1] == 1 and seen[0][2] is False  # ε/2, not cached
    assert seen[0][0] >= 6 and seen[0][3] == acct.spent  # S̃/2^-20 + D, after the debit
    assert model.cluster_centers_.shape == (3, 2)


def test_without_delta_the_matched_mean_runs_pure():
    """The matched-mean aggregator stays (ε-DP; more accurate than the centre of attention
    on Adult at every ε measured, bench/results/learn_kmeans_coreset.md), without warning."""
    acct = PrivacyFilter(PureDP(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        km.KMeans(3, 1, bounds=(-5, 5), method="sample_and_aggregate", n_blocks=20,
                  accountant=acct).fit(X)
    assert acct.spent == PureDP(1)


@pytest.mark.parametrize("kwargs", [
    {"method": "sample_and_aggregate", "delta": 0}, {"method": "sample_and_aggregate",
                                                    "delta": 0.6},
    {"method": "sample_and_aggregate", "delta": "small"},
    {"method": "sample_and_aggregate", "delta": 1e-6, "n_blocks": 5000},
    {"method": "sample_and_aggregate", "delta": 1e-6, "epsilon": 1e-12},
    {"method": "coreset", "levels": 0}, {"method": "coreset", "levels": 32},
    {"method": "coreset", "max_cells": 1}, {"method": "coreset", "levels": True},
])
def test_bad_inputs_raise_before_any_debit(kwargs):
    acct = PrivacyFilter(ApproxDP(5, Fraction(1, 100)))
    args = {"n_clusters": 3, "epsilon": 1, "bounds": (-5, 5), "accountant": acct, **kwargs}
    with pytest.raises(DomainError):
        km.KMeans(**args).fit(X)
    assert acct.spent == ApproxDP(0, 0)


# -- the coreset --

def _levels(z: np.ndarray, z2: np.ndarray, epsilon: Fraction, claimed: Fraction,
            monkeypatch: pytest.MonkeyPatch, max_cells: int = 64) -> bool:
    """Run the coreset on z with noise-free counts, then on its neighbour z2 replaying z's
    outputs (so both take z's path: the candidates are public); every level's counts must
    differ by ≤ 1 in L1 at sensitivity 1, and each of the ≤ L = 3 levels must run at
    ``claimed``/L, so that they add up to at most ``claimed`` (deterministic)."""
    calls: list[tuple[np.ndarray, Fraction]] = []

    def record(values, sensitivity, budget, **kw):
        calls.append((np.asarray(values).copy(), Fraction(budget)))
        assert Fraction(sensitivity) == 1
        return km.frontend.Drawn(np.asarray(values), None)

    monkeypatch.setattr(cs.frontend, "noisy", record)
    cs.private_coreset(z, epsilon, 3, max_cells)
    first = list(calls)
    calls.clear()
    replay = iter(first)
    monkeypatch.setattr(cs.frontend, "noisy",
                        lambda v, s, b, **kw: (calls.append((np.asarray(v).copy(),
                                                             Fraction(b))),
                                               km.frontend.Drawn(next(replay)[0], None))[1])
    cs.private_coreset(z2, epsilon, 3, max_cells)
    moved = all(np.abs(a[0] - b[0]).sum() <= 1 for a, b in zip(first, calls, strict=True))
    return moved and len(first) <= 3 and all(b == claimed / 3 for _, b in first)


def test_coreset_levels_have_sensitivity_one_and_split_eps(monkeypatch):
    z = np.clip(GEN.normal(0, 0.3, (60, 2)), -1, 1)
    for extra in ([0.1, 0.1], [-0.9, 0.7], [1.0, -1.0]):
        assert _levels(z, np.vstack([z, extra]), Fraction(2), Fraction(2), monkeypatch)


def test_coreset_splits_a_few_coordinates_a_level_in_high_dimension(monkeypatch):
    """d = 7 with 8 cells a level: s = 3 coordinates split a level, cyclically."""
    assert cs.split_width(7, 8) == 3
    assert cs.resolution(7, 3, 3).tolist() == [2, 2, 1, 1, 1, 1, 1]
    z = np.clip(GEN.normal(0, 0.3, (80, 7)), -1, 1)
    points, _ = cs.private_coreset(z, Fraction(50), 3, 8)
    assert points.shape[1] == 7 and np.all(np.abs(points) < 1)
    assert _levels(z, np.vstack([z, np.full(7, 0.05)]), Fraction(2), Fraction(2),
                   monkeypatch, max_cells=8)


def test_a_coreset_spending_eps_per_level_is_caught(monkeypatch):
    z = np.clip(GEN.normal(0, 0.3, (60, 2)), -1, 1)
    assert not _levels(z, np.vstack([z, [0.1, 0.1]]), Fraction(6), Fraction(2), monkeypatch)


def test_coreset_fit_debits_pure_eps_and_finds_separated_clusters():
    """ε = 20 on three clusters 6 apart (σ = 0.3), L = 4 in the box [−5, 5]²: level counts
    have noise scale L/ε = 0.2 against ~400 rows per cluster; the true centres give
    WCSS ≈ 216, a merged pair costs > 3000. Best of 3 fits below 600: a miss needs all 3
    fits to fail (none failed in 100 trial runs), probability far below 1e-6."""
    acct = PrivacyFilter(PureDP(100))
    best = min(km.KMeans(3, 20, bounds=(-5, 5), method="coreset", levels=4, accountant=acct)
               .fit(X).inertia(X) for _ in range(3))
    assert best < 600 and acct.spent == PureDP(60)
