"""Exact sliding-window variances of Honaker's estimator, the smooth binary mechanism and the
hybrid mechanism (issue 20; Counter.window_terms, frames.window_variance), checked against
the measured mean squared error of the window S_t − S_{t−W}.

Statistical test. For each mechanism, 4,000 independent releases of 64 steps (ρ = 1/50: every
node noise is a discrete Gaussian with σ ≥ 7); at each of 3 (t, W) pairs the window error is a
sum of independent discrete Gaussians, treated as Gaussian (as in test_stream_frames: its
variance equals σ² to 1e-100 for σ ≥ 4, CKS20), so n·s²/V is χ²_n. Laurent & Massart (2000,
Lemma 1) with n = 4000 and x = 17 bound each tail of |s²/V − 1| > 2√(x/n) + 2x/n = 13.9% by
e^(−17): the tolerance of 15% has a false-positive rate ≤ 2e^(−17) = 8.3e-8 per check, and
≤ 9 · 8.3e-8 = 7.5e-7 < 1e-6 over the 9 checks (Bonferroni). Broken variants: the windows'
shared nodes not cancelled (Var_t + Var_u) and the previous conservative bound
((√Var_t + √Var_u)²); at the pair where each is at least twice the exact value, a measured
MSE within 13.9% of the exact value is more than 40% below them, so both are caught whenever
the exact check passes."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.stream import make_counter
from dpkit.stream.base import Counter
from dpkit.stream.frames import window_variance, window_weights

PAIRS = {"honaker": [(62, 6), (48, 16), (7, 3)], "smooth": [(33, 2), (62, 6), (24, 8)],
         "hybrid": [(62, 6), (48, 16), (7, 3)]}
TOL = 0.15


@pytest.mark.parametrize("mechanism", sorted(PAIRS))
def test_window_mse_is_the_exact_variance(mechanism: str) -> None:
    counter = make_counter(mechanism, 64, rho=Fraction(1, 50))
    assert float(counter.noise.scale) >= 4
    rel = counter.release_many(np.zeros(64, dtype=np.int64), 4000)
    ratios = {}
    for t, width in PAIRS[mechanism]:
        err = rel[:, t - 1] - rel[:, t - 1 - width]
        measured = float(np.mean(err * err))
        exact = window_variance(counter, t, width)
        assert abs(measured / exact - 1) < TOL, (t, width, measured, exact)
        var_t, var_u = (float(v) for v in counter.variance(np.array([t, t - width])))
        uncancelled, bound = var_t + var_u, (var_t**0.5 + var_u**0.5) ** 2
        ratios[(t, width)] = (uncancelled / exact, bound / exact, measured)
    # the broken variants, where they differ most from the exact value, are caught
    worst = max(ratios, key=lambda k: ratios[k][0])
    uncancelled, bound, measured = ratios[worst]
    assert uncancelled >= 2 and bound >= 2
    exact = window_variance(counter, *worst)
    assert abs(measured / (uncancelled * exact) - 1) > TOL
    assert abs(measured / (bound * exact) - 1) > TOL


@pytest.mark.parametrize("mechanism", ["tree", "honaker", "smooth", "hybrid", "increments",
                                       "running_totals", "factorization"])
def test_a_window_from_the_start_is_the_prefix(mechanism: str) -> None:
    counter = make_counter(mechanism, 100, rho=1)
    for t in (1, 2, 37, 64, 99):
        assert window_variance(counter, t, t) == pytest.approx(
            float(counter.variance(np.array([t]))[0]), rel=1e-9)
        s2, amax = window_weights(counter, t, t + 5)
        assert s2 > 0 and amax > 0


@pytest.mark.parametrize("mechanism", ["honaker", "smooth", "hybrid"])
def test_exact_windows_are_narrower_than_the_old_bound(mechanism: str) -> None:
    counter = make_counter(mechanism, 1000, rho=1)
    for t in (100, 513, 999):
        var_t, var_u = (float(v) for v in counter.variance(np.array([t, t - 7])))
        assert window_variance(counter, t, 7) < (var_t**0.5 + var_u**0.5) ** 2
        if mechanism != "hybrid":  # one noise scale: the default bound in scale units
            bound = Counter.window_terms(counter, t, t - 7)[0][0] * float(counter.noise.scale)**2
            assert window_weights(counter, t, 7)[0] < bound
