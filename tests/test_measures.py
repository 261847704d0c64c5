import math
from fractions import Fraction

import pytest
from scipy import optimize

from dpkit.core.measures import ZCDP, ApproxDP, PureDP, zcdp_to_epsilon
from dpkit.errors import DomainError, MeasureError


def test_pure_composition_and_order():
    assert PureDP(0.5) + PureDP(0.25) == PureDP(Fraction(3, 4))
    assert PureDP(0.5) <= PureDP(0.5)
    assert not PureDP(0.6) <= PureDP(0.5)
    assert sum([PureDP(0.1)] * 10, PureDP(0)) == PureDP(1)  # 0.1 read as 1/10 exactly


def test_pairs_compare_as_pairs():
    a, b = ApproxDP(1, 1e-6), ApproxDP(0.5, 1e-5)
    assert not a <= b and not b <= a
    assert ApproxDP(0.5, 1e-7) <= a
    assert PureDP(1) <= a and not PureDP(1.5) <= a


def test_conversions_closed_forms():
    assert PureDP(1).to_zcdp() == ZCDP(Fraction(1, 2))
    assert PureDP(0.5).to_approx() == ApproxDP(0.5, 0)
    assert PureDP(1) + ZCDP(0.5) == ZCDP(1)


def test_incompatible_measures_raise():
    with pytest.raises(MeasureError):
        ZCDP(1) <= PureDP(1)  # noqa: B015
    with pytest.raises(MeasureError):
        ApproxDP(1, 1e-6) + ZCDP(1)
    with pytest.raises(DomainError):
        ApproxDP(1, 2)
    with pytest.raises(DomainError):
        PureDP(-1)


@pytest.mark.parametrize("rho,delta", [(0.5, 1e-6), (0.01, 1e-9), (2.0, 1e-5), (10, 0.01)])
def test_zcdp_to_approx_is_certified_and_tight(rho, delta):
    r, d = Fraction(rho), Fraction(delta)
    eps = zcdp_to_epsilon(r, d)
    bun_steinke = rho + 2 * math.sqrt(rho * math.log(1 / delta))

    def cks(a: float) -> float:
        return a * rho + (math.log(1 / delta) + (a - 1) * math.log(1 - 1 / a) - math.log(a)) / (
            a - 1)

    best = optimize.minimize_scalar(cks, bounds=(1.0001, 1e6), method="bounded").fun
    assert float(eps) >= min(best, bun_steinke) * (1 - 1e-9)  # never below the true bound
    assert float(eps) <= min(best, bun_steinke) * (1 + 1e-4) + 1e-9  # and essentially tight
    assert float(eps) <= bun_steinke + 1e-12  # Cor. 13 never loses to Prop. 1.3


def test_zcdp_to_approx_known_value():
    # ρ = 1/2 (ε = 1 Laplace-equivalent), δ = 1e-6: Bun–Steinke gives 5.757
    approx = ZCDP(Fraction(1, 2)).to_approx(Fraction(1, 10**6))
    assert 4.5 < float(approx.epsilon) < 5.757
    assert approx.delta == Fraction(1, 10**6)
