"""dpkit.apps.auction: the digital-goods auction by the exponential mechanism.

False-positive rates: the χ² test of the price's law rejects a correct sampler with
probability ≤ 1e-6 (tests/stats.py); the audit of the correct auction fails with probability
≤ 1e-6 (histogram majority < 1e-11, lower bound certified at 1 − 1e-6). Each is paired with
a broken variant that must be caught. The other tests are exact."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.apps.auction import (
    audit_cases,
    digital_goods_auction,
    price_distribution,
    price_grid,
    revenue_scores,
)
from dpkit.audit import CASES
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms import make_selection
from dpkit.mechanisms.exponential import sample_exponential

GEN = np.random.default_rng(7)  # test inputs only


def test_debit_is_the_declared_epsilon() -> None:
    f = PrivacyFilter(PureDP(2))
    result = digital_goods_auction([0.3, 0.9, 0.5], epsilon=Fraction(1, 2), accountant=f)
    assert f.spent == PureDP(Fraction(1, 2))
    assert result.price in [float(p) for p in price_grid(1)]
    assert result.revenue == pytest.approx(result.price * result.winners.sum())


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 0}, {"epsilon": float("nan")}, {"prices": []}, {"prices": [0, 1]},
    {"prices": [-1, 1]}, {"prices": ["a"]}, {"max_price": 0}, {"bids": [[1, 2]]},
    {"bids": ["x"]}, {"accountant": 3},
])
def test_bad_input_raises_before_any_debit(kwargs: dict) -> None:
    f = PrivacyFilter(PureDP(2))
    args = {"bids": [0.2, 0.4], "epsilon": 1, "accountant": f} | kwargs
    with pytest.raises(DomainError):
        digital_goods_auction(args.pop("bids"), **args)
    assert f.spent == PureDP(0)


def test_over_budget_is_refused() -> None:
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(BudgetExceededError):
        digital_goods_auction([0.5], epsilon=2, accountant=f)
    assert f.spent == PureDP(0)


def test_revenue_sensitivity_is_monotone_and_at_most_the_price() -> None:
    """Changing, adding or removing one bid moves every Rev(p) by at most p, all the same way
    — the premise of the monotone temperature."""
    prices = price_grid(1, 40)
    for _ in range(200):
        bids = GEN.uniform(0, 1.2, size=int(GEN.integers(1, 30)))
        base = revenue_scores(bids, prices)
        for neighbour in (np.append(bids, GEN.uniform(0, 1.2)), bids[1:],
                          np.concatenate([[GEN.uniform(0, 1.2)], bids[1:]])):
            moved = [b - a for a, b in zip(base, revenue_scores(neighbour, prices), strict=True)]
            assert all(abs(m) <= p for m, p in zip(moved, prices, strict=True))
            assert all(m >= 0 for m in moved) or all(m <= 0 for m in moved)


def test_exact_law_meets_the_privacy_map_on_neighbours() -> None:
    """The exact price law on neighbouring bid vectors: every ratio ≤ e^ε."""
    eps = 0.7
    for _ in range(100):
        bids = GEN.uniform(0, 1, size=20)
        other = bids.copy()
        other[0] = GEN.uniform(0, 1)
        _, p = price_distribution(bids, epsilon=eps, max_price=1)
        _, q = price_distribution(other, epsilon=eps, max_price=1)
        assert np.max(np.abs(np.log(p) - np.log(q))) <= eps + 1e-9


def test_misreporting_gains_at_most_e_epsilon() -> None:
    """Expected utility under the exact law: no misreport beats truth by more than e^ε."""
    eps, prices = 0.5, price_grid(1, 20)
    grid = np.array([float(p) for p in prices])
    for _ in range(30):
        others = GEN.uniform(0, 1, size=15)
        value = float(GEN.uniform(0.05, 1))

        def utility(report: float, value: float = value, others: np.ndarray = others) -> float:
            _, law = price_distribution(np.append(others, report), epsilon=eps,
                                        prices=prices)
            return float(np.sum(law * (value - grid) * (report >= grid)))

        truthful = utility(value)
        for report in np.linspace(0, 1, 21):
            assert utility(float(report)) <= math.exp(eps) * truthful + 1e-12


def _price_law_pvalue(scale: Fraction) -> float:
    bids = np.array([0.2, 0.5, 0.5, 0.8, 0.9, 1.0])
    prices = price_grid(1, 10)
    sample = np.asarray(sample_exponential(revenue_scores(bids, prices), scale, size=40_000))
    _, law = price_distribution(bids, epsilon=1, prices=prices)
    return chi2_pvalue(sample, np.arange(len(prices)), law)


def test_price_law_is_the_exponential_mechanism() -> None:
    scale = make_selection(1, 1, monotonic=True).scale
    assert _price_law_pvalue(scale) > FALSE_POSITIVE_RATE


def test_price_law_test_catches_a_colder_mechanism() -> None:
    scale = make_selection(1, 1, monotonic=True).scale
    assert _price_law_pvalue(scale / 2) < FALSE_POSITIVE_RATE


def test_nan_bids_never_buy() -> None:
    result = digital_goods_auction([np.nan, np.nan], epsilon=1)
    assert not result.winners.any() and result.revenue == 0


def test_audit_cases_run_in_the_battery() -> None:
    """The correct and broken variants run in tests/test_audit.py (dpkit.audit.CASES)."""
    assert {case.name for case in audit_cases()} <= set(CASES)
