"""Rényi DP, advanced and optimal composition, group privacy, parallel composition, odometer:
closed forms and independent float references (ours must never be smaller)."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special

from dpkit.core import (
    PrivacyOdometer,
    RenyiDP,
    advanced_composition,
    group_privacy,
    optimal_composition,
    parallel_composition,
)
from dpkit.core.measures import ZCDP, ApproxDP, PureDP
from dpkit.core.numbers import fraction_down
from dpkit.errors import DomainError, MeasureError
from dpkit.mechanisms import make_discrete_gaussian, make_discrete_laplace


def test_rdp_composes_pointwise_and_converts():
    g = RenyiDP.from_zcdp(ZCDP(Fraction(1, 2)))
    assert all(e == a / 2 for a, e in zip(g.orders, g.epsilons, strict=True))
    total = sum([g] * 4, RenyiDP.zero())
    assert total.epsilons == tuple(a * 2 for a in g.orders)
    assert g + PureDP(0) == g and PureDP(0) + g == g
    pure = RenyiDP.of(PureDP(1))
    assert all(e == min(Fraction(1), a / 2) for a, e in zip(pure.orders, pure.epsilons,
                                                            strict=True))
    assert g <= total and not total <= g
    with pytest.raises(MeasureError):
        g + RenyiDP([1], [2])
    with pytest.raises(DomainError):
        RenyiDP([1], [1])


@pytest.mark.parametrize("rho,delta", [(0.5, 1e-6), (5.0, 1e-5), (0.01, 1e-9)])
def test_rdp_conversion_is_certified(rho, delta):
    curve = RenyiDP.from_zcdp(ZCDP(Fraction(rho)))
    eps = float(curve.epsilon_at(delta))
    reference = min(rho * a + (math.log(1 / delta) + (a - 1) * math.log(1 - 1 / a)
                               - math.log(a)) / (a - 1) for a in map(float, curve.orders))
    assert eps >= reference * (1 - 1e-12)  # never below the float evaluation of Thm 21
    assert eps <= reference * (1 + 1e-9) + 1e-12
    assert curve.to_approx(delta).delta == fraction_down(delta)


def test_advanced_composition_closed_form():
    eps, k, slack = Fraction(1, 10), 100, Fraction(1, 10**5)
    out = advanced_composition(PureDP(eps), k, slack)
    expected = 0.1 * math.sqrt(2 * k * math.log(1e5)) + k * 0.1 * (math.exp(0.1) - 1)
    assert expected * (1 - 1e-12) <= float(out.epsilon) <= expected * (1 + 1e-12)
    assert out.delta == slack
    small_k = advanced_composition(PureDP(1), 2, slack)  # basic is better: no slack spent
    assert small_k == ApproxDP(2, 0)


def _kov_float(eps: float, delta: float, k: int, target: float) -> float:
    best = k * eps
    for i in range(1, k // 2 + 1):
        terms = [math.exp(math.log(special.comb(k, ell, exact=True)) + (k - ell) * eps
                          - k * math.log1p(math.exp(eps)))
                 - math.exp(math.log(special.comb(k, ell, exact=True)) +
                            (k - 2 * i + ell) * eps - k * math.log1p(math.exp(eps)))
                 for ell in range(i)]
        d_i = sum(terms)
        if 1 - (1 - delta) ** k * (1 - d_i) > target:
            break
        best = (k - 2 * i) * eps
    return best


@pytest.mark.parametrize("eps,k,target", [(0.1, 100, 1e-5), (0.5, 30, 1e-6), (1.0, 10, 0.01)])
def test_optimal_composition_matches_float_reference(eps, k, target):
    out = optimal_composition(PureDP(Fraction(eps).limit_denominator(1000)), k, target)
    assert abs(float(out.epsilon) - _kov_float(eps, 0, k, target)) < 1e-9
    assert float(out.delta) <= target
    assert out.epsilon <= advanced_composition(PureDP(Fraction(eps).limit_denominator(1000)),
                                               k, target).epsilon


def test_optimal_composition_edge_cases():
    assert optimal_composition(PureDP(1), 1, 0) == ApproxDP(1, 0)
    with pytest.raises(DomainError):
        optimal_composition(ApproxDP(1, Fraction(1, 100)), 10, Fraction(1, 1000))


def test_group_privacy():
    assert group_privacy(PureDP(Fraction(1, 2)), 3) == PureDP(Fraction(3, 2))
    assert group_privacy(ZCDP(Fraction(1, 8)), 2) == ZCDP(Fraction(1, 2))
    approx = group_privacy(ApproxDP(1, Fraction(1, 10**6)), 2)
    assert approx.epsilon == 2 and float(approx.delta) >= 2 * math.e * 1e-6
    with pytest.raises(DomainError):
        group_privacy(PureDP(1), 0)


def test_parallel_composition_is_the_maximum():
    assert parallel_composition([PureDP(1), PureDP(3), PureDP(2)]) == PureDP(3)
    assert parallel_composition([ApproxDP(1, 1e-6), ApproxDP(2, 1e-7)]) == ApproxDP(2, 1e-6)
    with pytest.raises(MeasureError):
        parallel_composition([PureDP(1), ZCDP(1)])


def test_odometer_reports_adaptive_spend():
    odo = PrivacyOdometer(ZCDP)
    out = odo.invoke(make_discrete_gaussian(1), np.zeros(3, dtype=int))
    odo.invoke(make_discrete_laplace(2), 5)
    assert out.shape == (3,)
    assert odo.spent == ZCDP(Fraction(1, 2) + Fraction(1, 8))
    assert len(odo.history) == 2


def test_pld_through_dp_accounting_is_no_smaller_than_the_truth():
    from dpkit.core.pld import pld_gaussian, pld_laplace

    gauss = pld_gaussian(1.0, 100, Fraction(1, 10**6))
    # PLD is tight: below the zCDP conversion, above basic-composition's lower intuition
    zcdp = ZCDP(Fraction(50)).to_approx(Fraction(1, 10**6))
    assert 0 < gauss.epsilon < zcdp.epsilon
    lap = pld_laplace(1.0, 10, Fraction(1, 10**6))
    assert lap.epsilon <= 10  # never worse than basic composition of ten ε = 1 mechanisms
    assert lap.epsilon > 5
    with pytest.raises(DomainError):
        pld_gaussian(0.0, 1, 0.5)
