"""Smooth sensitivity (NRS07): the bound against brute force, smoothness, and the mechanisms."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit.core.smooth import smooth_upper_bound
from dpkit.errors import BoundsError, DomainError
from dpkit.mechanisms import make_smooth_median, make_smooth_trimmed_mean
from dpkit.mechanisms.smooth_sensitivity import admissible_beta

LO, HI = Fraction(0), Fraction(10)


def _median(x: tuple[int, ...]) -> Fraction:
    s = sorted(x)
    return Fraction(s[(len(s) + 1) // 2 - 1])


def _trimmed(t: int):
    def f(x: tuple[int, ...]) -> Fraction:
        s = sorted(x)
        kept = s[t:len(s) - t]
        return Fraction(sum(kept), len(kept))
    return f


def _neighbours(x: tuple[int, ...], values):
    for i, v in itertools.product(range(len(x)), values):
        yield x[:i] + (v,) + x[i + 1:]


def _local(f, x, values) -> Fraction:
    return max(abs(f(y) - f(x)) for y in _neighbours(x, values))


def _window(x: tuple[int, ...], a: int, b: int, w: int, k: int) -> Fraction:
    s = sorted(x)
    n = len(s)

    def at(i: int) -> Fraction:
        return LO if i < 1 else HI if i > n else Fraction(s[i - 1])
    return max(at(a + k - ell) - at(b - ell) for ell in range(k + 2)) / w


def _cases():
    n = 5
    m = (n + 1) // 2
    yield _median, (m + 1, m, 1)
    for t in (1, 2):
        yield _trimmed(t), (n - t + 1, t + 1, n - 2 * t)


@pytest.mark.parametrize("case", range(3))
def test_window_bounds_local_sensitivity_at_distance_k(case):
    """A_k(x) ≥ max{LS(y) : d(x, y) ≤ k}, by brute force over a small integer domain."""
    f, (a, b, w) = list(_cases())[case]
    values = (0, 3, 5, 8, 10)  # the extremes L, U are in the domain: worst cases reachable
    rng = np.random.default_rng(5)  # test data only, not noise
    for _ in range(4):
        x = tuple(int(v) for v in rng.choice(values, 5))
        ball = {x}
        for k in range(3):
            worst = max(_local(f, y, values) for y in ball)
            assert worst <= _window(x, a, b, w, k)
            ball = {z for y in ball for z in _neighbours(y, values)}


@pytest.mark.parametrize("case", range(3))
def test_window_is_monotone_across_neighbours(case):
    """A_k(x) ≤ A_{k+1}(y) for every neighbour y: the step that makes S β-smooth."""
    _, (a, b, w) = list(_cases())[case]
    rng = np.random.default_rng(6)
    for _ in range(10):
        x = tuple(int(v) for v in rng.integers(0, 11, 5))
        for y in _neighbours(x, range(0, 11)):
            for k in range(4):
                assert _window(x, a, b, w, k) <= _window(y, a, b, w, k + 1)


def test_upper_bound_matches_brute_force_maximum():
    beta = Fraction(1, 7)
    rng = np.random.default_rng(7)
    for n in (1, 2, 7, 40):
        x = np.sort(rng.uniform(0, 10, n))
        m = (n + 1) // 2
        brute = max(_exact_term(x, m, beta, k) for k in range(n + 3))
        got = smooth_upper_bound(x, m + 1, m, 1, (LO, HI), beta)
        assert brute <= got <= brute * (1 + Fraction(1, 1 << 90))


def _exact_term(x: np.ndarray, m: int, beta: Fraction, k: int) -> Fraction:
    from dpkit.core.numbers import dyadic_up, exp_up
    r = dyadic_up(exp_up(-beta), 64)
    n = x.size

    def at(i: int) -> Fraction:
        return LO if i < 1 else HI if i > n else Fraction(float(x[i - 1]))
    return r**k * max(at(m + 1 + k - ell) - at(m - ell) for ell in range(k + 2))


def test_upper_bound_is_fast_on_large_ties():
    x = np.full(200_000, 5.0)
    got = smooth_upper_bound(x, 100_001, 100_000, 1, (LO, HI), Fraction(1, 100))
    assert 0 < got < Fraction(1, 10**100)


def test_admissible_beta_is_below_the_nrs_value():
    eps, delta = Fraction(1), Fraction(1, 10**6)
    beta = admissible_beta(eps, delta)
    nrs = float(eps) / (2 * math.log(2 / float(delta)))
    assert 0 < float(beta) < nrs
    c = float(eps) / (2 * math.log(2 / float(delta)) + float(eps))
    b = float(beta) + 2.0**-38
    assert b * math.exp(b) <= c  # the condition the privacy argument uses


def test_smooth_median_is_accurate_on_concentrated_data():
    x = np.concatenate([np.full(5000, 50.0), np.linspace(0, 100, 11)])
    m = make_smooth_median((0, 100), epsilon=1, delta=1e-6)
    outs = np.array([m(x) for _ in range(20)])
    assert np.all(np.abs(outs - 50.0) < 1e-3)  # S(x) ≈ 100·e^{-2500β}: essentially no noise


def test_smooth_median_noise_grows_with_spread():
    x = np.linspace(0, 100, 101)  # one value per unit: LS ≈ 1
    m = make_smooth_median((0, 100), epsilon=1, delta=1e-6)
    outs = np.array([m(x) for _ in range(200)])
    # the scale is S/(ε/2) ≥ 2: 200 draws all within 0.01 of 50 has probability < 1e-6
    assert np.abs(outs - 50).max() > 0.01
    assert np.all((outs >= 0) & (outs <= 100))


def test_smooth_trimmed_mean():
    x = np.concatenate([np.full(1000, 3.0), [1e9, -1e9]])
    m = make_smooth_trimmed_mean((0, 10), trim=0.1, epsilon=1, delta=1e-6)
    assert abs(m(x) - 3.0) < 0.05
    assert m.privacy_map(1).epsilon == 1


def test_bad_input():
    with pytest.raises(BoundsError):
        make_smooth_median((1, 0), 1, 1e-6)
    with pytest.raises(DomainError):
        make_smooth_median((0, 1), 0, 1e-6)
    with pytest.raises(DomainError):
        make_smooth_median((0, 1), 1, 0.7)
    with pytest.raises(DomainError):
        make_smooth_trimmed_mean((0, 1), 0.5, 1, 1e-6)
    m = make_smooth_median((0, 1), 1, 1e-6)
    with pytest.raises(DomainError):
        m([])
    with pytest.raises(DomainError):
        m.privacy_map(2)
    assert 0 <= m([np.nan, 0.5, 2.0]) <= 1
