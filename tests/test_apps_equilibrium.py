"""dpkit.apps.equilibrium: the jointly DP mediator for a parallel-links congestion game.

False-positive rates: the χ² tests of the suggestion law reject a correct sampler with
probability ≤ 1e-6 each (tests/stats.py); the regret bound fails with probability ≤ 1e-6
per run (its β), over 4 runs ≤ 4e-6; the audit of the correct mediator fails with
probability ≤ 1e-6 (histogram majority < 1e-11, lower bound certified at 1 − 1e-6). Each is
paired with a broken variant that must be caught. The other tests are exact."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.apps.equilibrium import (
    DENOMINATOR,
    audit_cases,
    congestion_game,
    private_equilibrium,
    published_distribution,
    regret,
    suggest,
    wardrop_split,
)
from dpkit.audit import CASES
from dpkit.core.accountant import as_accountant
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms import make_noise

GEN = np.random.default_rng(11)  # test inputs only
# the benchmark's public game: 4 links, 3 types (bench/equilibrium.py)
GAME = congestion_game([1, 1.5, 2, 0.5], [2, 1, 0.5, 3],
                       [[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 0, 1]])


def _types(n: int) -> np.ndarray:
    return GEN.choice(3, size=n, p=[0.5, 0.3, 0.2])


def test_debit_is_the_declared_epsilon_and_the_scale_is_delta_over_epsilon() -> None:
    f = PrivacyFilter(PureDP(2))
    accountant = as_accountant(f)
    eps = Fraction(1, 2)
    result = private_equilibrium(_types(500), GAME, epsilon=eps, accountant=accountant)
    assert f.spent == PureDP(eps)
    row = accountant.last.noise[0]
    assert row.scale == result.scale == make_noise(2, epsilon=eps).scale == Fraction(2) / eps
    assert row.sensitivity == 2 and row.name == "discrete Laplace"
    assert result.suggestions.shape == (500,) and result.suggestions.dtype == np.int64


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 0}, {"epsilon": float("nan")}, {"epsilon": "1"}, {"beta": 0}, {"beta": 1},
    {"types": [[0, 1]]}, {"types": [0, 3]}, {"types": [-1, 0]}, {"types": [0.0, 1.0]},
    {"types": [True, False]}, {"types": []}, {"types": ["a"]}, {"game": "game"},
    {"game": None}, {"accountant": 3},
])
def test_bad_input_raises_before_any_debit(kwargs: dict) -> None:
    f = PrivacyFilter(PureDP(2))
    args = {"types": [0, 1, 2], "game": GAME, "epsilon": 1, "accountant": f} | kwargs
    with pytest.raises(DomainError):
        private_equilibrium(args.pop("types"), args.pop("game"), **args)
    assert f.spent == PureDP(0)


@pytest.mark.parametrize("spec", [
    ([1, float("nan")], [1, 1], [[1, 1]]), ([1, 1], [1, float("inf")], [[1, 1]]),
    ([-1, 1], [1, 1], [[1, 1]]), ([1, 1], [1], [[1, 1]]), ([1, 1], [1, 1], [[0, 0]]),
    ([1, 1], [1, 1], [[1, 2]]), ([1, 1], [1, 1], [1, 1]), ([1, 1], [1, 1], [[1, 1, 1]]),
    (["a", 1], [1, 1], [[1, 1]]), ([True, 1], [1, 1], [[1, 1]]),
    ([1, 1], [1, 1], [[0.5, 1]]), ([1] * 17, [1] * 17, [[1] * 17]),
    ([1, 1], [1, 1], [[1, 1]] * 17), ([], [], [[]]),
])
def test_bad_game_is_refused(spec: tuple) -> None:
    with pytest.raises(DomainError):
        congestion_game(*spec)


def test_over_budget_is_refused() -> None:
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(BudgetExceededError):
        private_equilibrium([0, 1], GAME, epsilon=2, accountant=f)
    assert f.spent == PureDP(0)


@pytest.mark.parametrize(("a", "b", "share"), [
    ((0.2, 0.5), (1, 2), (0.5 - 0.2 + 2) / 3),  # interior: a₁ + b₁x = a₂ + b₂(1 − x)
    ((0.0, 3.0), (1, 1), 1.0),  # link 1 too dear even empty: everyone on link 0
    ((1.0, 0.0), (0, 4), 0.75),  # constant link 0: link 1 fills until 4(1 − x) = 1
])
def test_wardrop_split_has_the_closed_form_on_two_links(a: tuple, b: tuple,
                                                         share: float) -> None:
    """Two links, one type: the equilibrium equalises the costs where both are used."""
    game = congestion_game(a, b, [[1, 1]])
    for n in (10, 1000, 100_000):
        flows = wardrop_split(game, [n], n)
        assert flows[0] == pytest.approx([share * n, (1 - share) * n], abs=1e-6 * n)


def test_table_is_post_processing_of_the_noisy_counts() -> None:
    """The mediator's table is the deterministic function of ĉ alone: recomputed from the
    released counts it is identical, twice."""
    types = _types(2000)
    result = private_equilibrium(types, GAME, epsilon=1)
    first, loads = published_distribution(GAME, result.noisy_counts, types.size)
    second, _ = published_distribution(GAME, result.noisy_counts.copy(), types.size)
    assert np.array_equal(first, result.numerators) and np.array_equal(first, second)
    assert np.array_equal(loads, result.loads)
    assert np.all(first.sum(axis=1) == DENOMINATOR)
    assert np.all(first[~GAME.allowed] == 0)
    assert np.array_equal(result.distribution * DENOMINATOR, first)


def test_table_is_a_wardrop_equilibrium_of_the_noisy_game() -> None:
    """At the published loads every used link is within the tiny gap γ of its type's
    cheapest allowed link (γ is computed from the table itself)."""
    for counts in ([500, 300, 200], [10, 0, 990], [-5, 40, 3], [0, 0, 0]):
        numer, loads = published_distribution(GAME, counts, 1000)
        cost = GAME.costs(loads, 1000)
        for t in range(3):
            best = cost[GAME.allowed[t]].min()
            assert np.all(cost[numer[t] > 0] <= best + 1e-7)


def _law_pvalues(leaky: bool) -> list[float]:
    types = np.repeat([0, 1, 2], 20_000)
    result = private_equilibrium(types, GAME, epsilon=1)
    shuffled = GEN.permutation(types)
    given = np.roll(shuffled, 1) if leaky else shuffled  # leaky: player i gets i − 1's row
    links = suggest(result.numerators, given)
    return [chi2_pvalue(links[shuffled == t], np.arange(4), result.distribution[t])
            for t in range(3)]


def test_suggestion_law_is_the_reported_types_row() -> None:
    """Billboard structure: given the table, a type-t player's suggestion is p_t, exactly."""
    assert min(_law_pvalues(leaky=False)) > FALSE_POSITIVE_RATE


def test_suggestion_law_test_catches_a_leak_of_another_players_report() -> None:
    assert min(_law_pvalues(leaky=True)) < FALSE_POSITIVE_RATE


def _uniform_table(allowed: np.ndarray) -> np.ndarray:
    k = allowed.sum(axis=1, keepdims=True)
    numer = allowed * (DENOMINATOR // k)
    numer[np.arange(len(k)), np.argmax(allowed, axis=1)] += DENOMINATOR - numer.sum(axis=1)
    return numer


@pytest.mark.parametrize("eps", [0.5, 1])
def test_regret_of_following_is_within_the_bound(eps: float) -> None:
    """Two runs per ε at n = 20,000: every player's gain from switching ≤ the published
    bound (β = 1e-6 per run). The bound is not vacuous: a mediator that suggests each
    allowed link evenly (no equilibrium) exceeds it."""
    for _ in range(2):
        types = _types(20_000)
        result = private_equilibrium(types, GAME, epsilon=eps, beta=1e-6)
        assert result.gap < 1e-6
        assert regret(GAME, types, result.suggestions).max() <= result.regret_bound
        assert result.regret_bound < 0.25
        even = suggest(_uniform_table(GAME.allowed), types)
        assert regret(GAME, types, even).max() > result.regret_bound


def test_regret_counts_the_move_of_the_player_itself() -> None:
    """Two identical links, two players on link 0: moving costs 1 + 1/2, staying 1 + 2/2."""
    game = congestion_game([1, 1], [1, 1], [[1, 1]])
    assert regret(game, [0, 0], [0, 0]) == pytest.approx([0.5, 0.5])
    assert regret(game, [0, 0], [0, 1]) == pytest.approx([0, 0])


def test_audit_cases_run_in_the_battery() -> None:
    """The correct and broken variants run in tests/test_audit.py (dpkit.audit.CASES)."""
    assert {case.name for case in audit_cases()} <= set(CASES)
