"""Shuffle amplification (dpkit.local.shuffle, Feldman, McMillan & Talwar 2021): the float
evaluation of δ(ε) against an exact rational one, the bound against the exact privacy of
shuffled randomized response, monotonicity and the cap at ε0. Deterministic (no sampling)."""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest

import dpkit.local as ldp
from dpkit.core.numbers import exp_down, exp_up
from dpkit.errors import DomainError
from dpkit.local.shuffle import shuffle_closed_form, shuffle_delta, shuffle_numerical


def exact_delta(eps0: Fraction, n: int, eps: Fraction) -> Fraction:
    """Theorem 3.2's D_{e^ε}(P ‖ Q) by enumeration with exact rationals (r0 ≥ e^{ε0},
    r ≤ e^ε, as the fast evaluation rounds)."""
    r0, r = exp_up(eps0, 30), exp_down(eps, 30)
    p_clone, p = 1 / r0, r0 / (r0 + 1)
    total = Fraction(0)
    for c in range(n):
        wc = comb(n - 1, c) * p_clone**c * (1 - p_clone) ** (n - 1 - c)
        half = Fraction(1, 2**c)
        inner = Fraction(0)
        for a in range(c + 2):
            b_prev = comb(c, a - 1) * half if a >= 1 else 0
            b_here = comb(c, a) * half if a <= c else 0
            pa = p * b_prev + (1 - p) * b_here
            qa = (1 - p) * b_prev + p * b_here
            inner += max(Fraction(0), pa - r * qa)
        total += wc * inner
    return total


@pytest.mark.parametrize(("eps0", "n", "eps"), [(1, 30, Fraction(1, 2)), (2, 40, Fraction(1)),
                                                (Fraction(1, 2), 25, Fraction(1, 10))])
def test_fast_delta_bounds_the_exact_rational_computation(eps0, n, eps):
    exact = float(exact_delta(Fraction(eps0), n, eps))
    fast = shuffle_delta(eps0, n, eps)
    assert exact <= fast <= exact * (1 + 1e-9) + 1e-15


def shuffled_rr_delta(p: Fraction, n: int, r: Fraction) -> Fraction:
    """Exact δ(ε) of shuffled binary randomized response (keep probability p) on the
    neighbours (0, …, 0) and (1, 0, …, 0): the collector sees the number of ones, both
    directions (r = e^ε)."""
    q = 1 - p
    x0 = [comb(n, j) * q**j * p ** (n - j) for j in range(n + 1)]
    rest = [comb(n - 1, j) * q**j * p ** (n - 1 - j) for j in range(n)]
    x1 = [(rest[j - 1] * p if j >= 1 else 0) + (rest[j] * q if j < n else 0)
          for j in range(n + 1)]
    one = sum(max(Fraction(0), a - r * b) for a, b in zip(x0, x1, strict=True))
    two = sum(max(Fraction(0), b - r * a) for a, b in zip(x0, x1, strict=True))
    return max(one, two)


@pytest.mark.parametrize(("eps0", "n"), [(1, 200), (2, 300), (Fraction(1, 2), 150)])
def test_the_bound_dominates_the_exact_privacy_of_shuffled_randomized_response(eps0, n):
    """GRR with k = 2 (its exact dyadic p); at the ε the bounds report for δ = 1e-3, the
    true δ of the shuffled reports is at most 1e-3."""
    grr = ldp.GRR(2, eps0)
    for bound in (shuffle_numerical(eps0, n, 1e-3), shuffle_closed_form(eps0, n, 1e-3)):
        r = exp_down(bound.epsilon, 30)
        assert shuffled_rr_delta(grr.p, n, r) <= Fraction(1, 1000), bound


def test_bounds_are_monotone_and_below_epsilon0():
    ns = [1000, 10_000, 100_000, 1_000_000]
    for eps0 in (0.5, 1, 2, 4):
        numerical = [float(shuffle_numerical(eps0, n, 1e-6).epsilon) for n in ns]
        closed = [float(shuffle_closed_form(eps0, n, 1e-6).epsilon) for n in ns]
        assert all(a >= b for a, b in zip(numerical, numerical[1:], strict=False)), numerical
        assert all(a >= b for a, b in zip(closed, closed[1:], strict=False)), closed
        assert all(v <= eps0 for v in numerical + closed)
        assert numerical[-1] < eps0 / 10 and closed[-1] < eps0 / 2
        assert all(a <= b for a, b in zip(numerical, closed, strict=True))
    by_eps0 = [float(ldp.shuffled(e, 10_000, 1e-6).epsilon) for e in (0.25, 0.5, 1, 2, 3)]
    assert by_eps0 == sorted(by_eps0)
    by_delta = [float(ldp.shuffled(1, 10_000, d).epsilon) for d in (1e-3, 1e-6, 1e-9)]
    assert by_delta == sorted(by_delta)
    assert shuffle_closed_form(4, 1000, 1e-6).epsilon == 4  # the condition on ε0 fails
    assert ldp.shuffled(1, 1, 1e-6).epsilon <= 1
    assert 0 < ldp.shuffled(1, 10_000, 1e-6).delta <= Fraction(1, 10**6)


def test_closed_form_matches_the_paper_formula():
    for eps0, n, delta in ((1, 10_000, 1e-6), (0.5, 10**6, 1e-8), (2, 10**5, 1e-5)):
        e = np.exp(eps0)
        expected = np.log(1 + (e - 1) / (e + 1) * (8 * np.sqrt(e * np.log(4 / delta) / n)
                                                   + 8 * e / n))
        got = float(shuffle_closed_form(eps0, n, delta).epsilon)
        assert expected <= got <= expected * (1 + 1e-9)


def test_bad_parameters_raise_typed_errors():
    for call in (lambda: ldp.shuffled(0, 10, 1e-6), lambda: ldp.shuffled(1, 0, 1e-6),
                 lambda: ldp.shuffled(1, 10, 0), lambda: ldp.shuffled(1, 10, 1),
                 lambda: ldp.shuffled(1, 2.5, 1e-6), lambda: shuffle_delta(1, 10, -1)):
        with pytest.raises(DomainError):
            call()
