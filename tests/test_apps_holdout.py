"""dpkit.apps.holdout: the reusable holdout (Thresholdout on the sparse vector).

False-positive rates: the audit of the correct holdout fails only if the histogram test's
majority of 9 votes fails (< 1e-11) or the ε lower bound, certified at confidence 1 − 1e-6,
exceeds the claim (≤ 1e-6); the broken variant (a quarter of the noise) must be flagged.
The other tests are deterministic."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.apps.holdout import ReusableHoldout, audit_cases
from dpkit.audit import CASES
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, DomainError

DATA = np.arange(40).reshape(20, 2) % 2


def test_debit_is_the_declared_epsilon_once() -> None:
    f = PrivacyFilter(PureDP(3))
    h = ReusableHoldout(DATA, DATA, epsilon=Fraction(3, 2), threshold=0.1, accountant=f)
    h.query(lambda d: d)
    h.query(lambda d: d[:, 0])
    assert f.spent == PureDP(Fraction(3, 2))
    assert h.loss == PureDP(Fraction(3, 2))


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 0}, {"epsilon": -1}, {"threshold": -0.1}, {"max_over": 0},
    {"bounds": (1, 1)}, {"bounds": (2, 1)}, {"bounds": ("a", 1)}, {"accountant": "x"},
])
def test_bad_input_raises_before_any_debit(kwargs: dict) -> None:
    f = PrivacyFilter(PureDP(3))
    args = {"epsilon": 1, "threshold": 0.1, "accountant": f} | kwargs
    with pytest.raises(DomainError):
        ReusableHoldout(DATA, DATA, **args)
    with pytest.raises(DomainError):
        ReusableHoldout(DATA, [], epsilon=1, threshold=0.1, accountant=f)
    assert f.spent == PureDP(0)


def test_over_budget_is_refused_and_nothing_read() -> None:
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(BudgetExceededError):
        ReusableHoldout(DATA, DATA, epsilon=2, threshold=0.1, accountant=f)
    assert f.spent == PureDP(0)


def test_sensitivity_on_neighbouring_holdouts() -> None:
    """Substituting one holdout row moves every query's |E_h − E_t| by at most Δ."""
    gen = np.random.default_rng(1)  # test data only
    train = gen.uniform(-3, 5, size=50)
    holdout = gen.uniform(-3, 5, size=30)
    h = ReusableHoldout(train, holdout, epsilon=1, threshold=0, bounds=(-1, 2))
    assert h.sensitivity == Fraction(3, 30)
    clamp = lambda v: np.clip(v, -1, 2).mean()  # noqa: E731
    for i in range(30):
        neighbour = holdout.copy()
        neighbour[i] = gen.uniform(-10, 10)
        move = abs(abs(clamp(neighbour) - clamp(train)) - abs(clamp(holdout) - clamp(train)))
        assert move <= float(h.sensitivity) + 1e-12


def test_answers_are_training_when_close_and_budget_halts() -> None:
    train = np.zeros(100)
    holdout = np.ones(100)
    h = ReusableHoldout(train, holdout, epsilon=50, threshold=0.5, max_over=2)
    same = h.query(lambda d: np.zeros(len(d)))  # identical means: below threshold
    assert same == [0.0] and not same[0].over
    out = h.query(lambda d: np.column_stack([d, d, d]))  # far apart: over, twice, then halt
    assert len(out) == 2 and all(a.over for a in out)
    assert h.exhausted
    with pytest.raises(BudgetExceededError):
        h.query(lambda d: d)


def test_data_side_is_total() -> None:
    """NaN and out-of-range values are clamped by rule; a wrong shape is the analyst's
    error (DomainError), raised before any comparison is spent."""
    h = ReusableHoldout(DATA, DATA, epsilon=1, threshold=0.1)
    out = h.query(lambda d: np.full(len(d), np.nan))
    assert len(out) == 1 and 0 <= out[0] <= 1
    with pytest.raises(DomainError):
        h.query(lambda d: np.zeros(3))


def test_audit_cases_run_in_the_battery() -> None:
    """The correct and broken variants run in tests/test_audit.py (dpkit.audit.CASES)."""
    assert {case.name for case in audit_cases()} <= set(CASES)
