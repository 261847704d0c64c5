"""Privacy maps, budget and the data side of dpkit.stream (issue 20).

Each privacy-map test recomputes, by brute force over the structure, how many noised nodes
a step lies in, and checks the counter's calibration against it — both ways: the claim
covers the worst step, and the claim is tight (an understated claim, the broken variant,
would be caught by the same comparison).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest

from dpkit.core.accountant import FilterAccountant
from dpkit.core.measures import ZCDP, PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.stream import (
    HorizonExceededError,
    Hybrid,
    Stream,
    base,
    clamp,
    isotonic,
    make_counter,
    release_prefix_sums,
)
from dpkit.stream.base import Budget, Unit
from dpkit.stream.factorization import MAX_VALUE, exact_convolve
from dpkit.stream.smooth import leaves


@pytest.fixture
def noiseless(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Zero node noise (tests of the deterministic data side only)."""
    monkeypatch.setattr(base, "draw", lambda noise, size: np.zeros(size, dtype=np.int64))
    yield


def _tree_membership(horizon: int) -> int:
    """Max over steps of the number of completed tree nodes containing the step."""
    worst = 0
    for s in range(1, horizon + 1):
        n = sum(1 for j in range(horizon.bit_length() + 1)
                if ((((s - 1) >> j) + 1) << j) <= horizon)
        worst = max(worst, n)
    return worst


def _smooth_membership(k: int, w: int, horizon: int) -> int:
    """Max over steps of the number of nodes used by some release that contain the step."""
    ls = [int(v) for v in leaves(k, w, horizon + 1)]
    used = {(j, (ls[t] >> j) - 1) for t in range(1, horizon + 1) for j in range(k)
            if ls[t] >> j & 1}
    return max(sum((j, ls[s] >> j) in used for j in range(k)) for s in range(horizon))


@pytest.mark.parametrize("horizon", [1, 2, 3, 7, 8, 64, 100, 365])
@pytest.mark.parametrize("mechanism", ["tree", "honaker"])
def test_tree_map_covers_every_step_and_is_tight(mechanism: str, horizon: int) -> None:
    counter = make_counter(mechanism, horizon, epsilon=1, sensitivity=3)
    members = _tree_membership(horizon)
    assert counter.noise.sensitivity == 3 * members  # L1: Δ·(nodes per step), not one less
    assert counter.noise.scale >= Fraction(3 * members)
    g = make_counter(mechanism, horizon, rho=Fraction(1, 2), sensitivity=3)
    assert g.noise.sensitivity**2 >= 9 * members  # L2: Δ·√(nodes per step)
    assert g.noise.sensitivity**2 < 9 * members * (1 + Fraction(1, 10**9))


@pytest.mark.parametrize("horizon", [1, 5, 30, 200, 365])
@pytest.mark.parametrize("budget", ["epsilon", "rho"])
def test_smooth_map_covers_every_step_and_is_tight(horizon: int, budget: str) -> None:
    kw = {"epsilon": 1} if budget == "epsilon" else {"rho": Fraction(1, 2)}
    counter = make_counter("smooth", horizon, **kw)
    members = _smooth_membership(counter.k, counter.w, horizon)
    assert counter._norms() == (members, members)


def test_factorization_map_is_the_exact_column_norm() -> None:
    counter = make_counter("factorization", 365, rho=Fraction(1, 2), sensitivity=2)
    col = sum(int(c) ** 2 for c in counter.coef)  # the first (longest) column of R
    assert counter.noise.sensitivity**2 >= 4 * col
    assert counter.noise.sensitivity**2 < 4 * col * (1 + Fraction(1, 10**9))
    # R is an integer matrix: its columns are shifts of the first, so no column is longer
    assert counter.coef.dtype.kind == "i" and np.all(counter.coef > 0)


@pytest.mark.parametrize("mechanism", ["increments", "running_totals", "tree", "honaker",
                                       "smooth", "hybrid"])
def test_user_level_multiplies_the_sensitivity(mechanism: str) -> None:
    """w events per user: the L1 sensitivity is w times the event-level one, the loss is
    unchanged (the noise grows instead)."""
    one = make_counter(mechanism, 100, epsilon=1, sensitivity=2)
    many = make_counter(mechanism, 100, epsilon=1, sensitivity=2, contributions=5)
    assert many.noise.sensitivity == 5 * one.noise.sensitivity
    assert many.noise.scale == 5 * one.noise.scale
    assert many.loss == one.loss == PureDP(1)
    assert many.unit.level == "user" and one.unit.level == "event"


@pytest.mark.parametrize("mechanism", ["increments", "running_totals", "tree", "honaker",
                                       "smooth", "factorization", "hybrid"])
def test_loss_is_within_the_budget_exactly(mechanism: str) -> None:
    counter = make_counter(mechanism, 365, rho=Fraction(1, 3))
    assert counter.map_loss <= counter.loss == ZCDP(Fraction(1, 3))
    assert counter.noise.loss is not None and counter.noise.loss <= ZCDP(Fraction(1, 3))


@pytest.mark.parametrize("budget", [Budget(epsilon=1), Budget(rho=Fraction(1, 2))])
def test_hybrid_never_exceeds_its_cap(budget: Budget) -> None:
    """Every step of an unbounded run (segments up to 2^39 steps) costs at most the cap."""
    hybrid = Hybrid(None, Unit(2, 3), budget)
    cap = budget.loss
    assert hybrid.map_loss <= hybrid.loss == cap
    for k in range(0, 40):
        for t in (1 << k, (1 << k) + 1, (2 << k) - 1):
            assert hybrid.step_loss(t) <= cap, t


def test_hybrid_cap_check_catches_a_full_budget_segment() -> None:
    """Broken variant: segments at the full budget (not half) overrun the cap."""
    class Greedy(Hybrid):
        def segment(self, k: int):
            return make_counter("tree", (1 << k) - 1, epsilon=1)

    greedy = Greedy(None, Unit(), Budget(epsilon=1))
    assert not greedy.step_loss(3) <= PureDP(1)


def test_unbounded_stream_is_charged_once() -> None:
    acc = FilterAccountant(PureDP(2))
    s = Stream(None, accountant=acc, mechanism="hybrid", epsilon=1)
    assert acc.spent == PureDP(1)
    for i in range(3000):
        s.feed(i % 5)
    assert acc.spent == PureDP(1) and s.t == 3000
    assert len(json.dumps(s.state)) < 600  # O(log t) numbers


def test_stream_debits_before_any_output_and_refuses_an_overrun() -> None:
    acc = FilterAccountant(ZCDP(Fraction(1, 2)))
    with pytest.raises(BudgetExceededError):
        Stream(10, accountant=acc, mechanism="tree", rho=1)
    assert acc.spent == ZCDP(0)
    s = Stream(10, accountant=acc, mechanism="tree", rho=Fraction(1, 2))
    assert acc.spent == ZCDP(Fraction(1, 2)) and acc.last is not None
    assert acc.last.loss == ZCDP(Fraction(1, 2))
    assert s.t == 0


@pytest.mark.parametrize("bad", [
    {"mechanism": "nope", "epsilon": 1}, {"epsilon": 1, "rho": 1}, {},
    {"mechanism": "factorization", "epsilon": 1}, {"epsilon": 1, "lower": 5, "upper": 2},
    {"epsilon": 1, "sensitivity": 0}, {"epsilon": 1, "contributions": 0},
    {"epsilon": 1, "beta": 0}])
def test_plan_errors_come_before_the_debit(bad: dict) -> None:
    acc = FilterAccountant(PureDP(5))
    with pytest.raises(DomainError):
        Stream(10, accountant=acc, **bad)
    assert acc.spent == PureDP(0)
    with pytest.raises(DomainError):
        Stream(None, accountant=acc, mechanism="tree", epsilon=1)  # needs a horizon
    assert acc.spent == PureDP(0)


def test_step_after_the_horizon_is_a_clear_error() -> None:
    s = Stream(3, accountant=FilterAccountant(PureDP(1)), mechanism="smooth", epsilon=1)
    for _ in range(3):
        s.feed(1)
    with pytest.raises(HorizonExceededError, match="horizon of 3 steps"):
        s.feed(1)
    assert s.t == 3


def test_clamp_rule() -> None:
    assert clamp(5, 0, 10) == 5 and clamp(-3, 0, 10) == 0 and clamp(99, 0, 10) == 10
    assert clamp(2.5, 0, 10) == 2 and clamp(3.5, 0, 10) == 4  # half to even
    for junk in (float("nan"), float("inf"), None, "7", object(), [1], 10**400):
        assert clamp(junk, -1, 10) in (-1, 10)
    assert clamp(True, 0, 10) == 1 and clamp(np.int64(4), 0, 10) == 4


@pytest.mark.parametrize("mechanism", ["increments", "tree", "honaker", "smooth",
                                       "factorization", "hybrid", "running_totals"])
def test_feed_never_raises_on_bad_data_and_clamps(noiseless: None, mechanism: str) -> None:
    """After the debit, anything fed is clamped, never an error (noise zeroed here, so the
    releases are the running totals of the clamped increments)."""
    s = Stream(8, accountant=FilterAccountant(ZCDP(1)), mechanism=mechanism,
               rho=Fraction(1, 2), upper=10)
    fed = [3, -4, 10**30, float("nan"), "x", None, 2.6, np.uint64(2**63)]
    got = [s.feed(v).raw for v in fed]
    assert got == pytest.approx(np.cumsum([3, 0, 10, 0, 0, 0, 3, 10]).tolist())


def test_batch_clamps_like_the_stream(noiseless: None) -> None:
    vals = np.array([3.0, -4.0, np.nan, np.inf, 2.6, 1e30])
    r = release_prefix_sums(vals, accountant=FilterAccountant(PureDP(1)), mechanism="tree",
                            epsilon=1, upper=10)
    assert r.raw.tolist() == np.cumsum([3, 0, 0, 0, 3, 10]).tolist()
    obj = release_prefix_sums([1, "a", None, 2], accountant=FilterAccountant(PureDP(1)),
                              mechanism="smooth", epsilon=1)
    assert obj.raw.tolist() == [1, 1, 1, 3]


def test_post_processing() -> None:
    acc = FilterAccountant(PureDP(10))
    x = np.zeros(300, dtype=np.int64)
    r = release_prefix_sums(x, accountant=acc, mechanism="increments", epsilon=1,
                            nonnegative=True, monotone="isotonic", integer=True)
    assert r.values.dtype == np.int64 and np.all(r.values >= 0)
    assert np.all(np.diff(r.values) >= 0)
    s = Stream(50, accountant=acc, mechanism="increments", epsilon=1, nonnegative=True,
               monotone=True, integer=True)
    out = [s.feed(0) for _ in range(50)]
    vals = [o.value for o in out]
    assert all(isinstance(v, int) and v >= 0 for v in vals) and vals == sorted(vals)
    assert all(o.low >= 0 and o.low <= max(o.raw, 0) <= o.high for o in out)


def test_isotonic_is_the_least_squares_monotone_fit() -> None:
    y = np.array([1.0, 3.0, 2.0, 2.0, 5.0, 0.0])
    fit = isotonic(y)
    assert fit.tolist() == pytest.approx([1, 7 / 3, 7 / 3, 7 / 3, 2.5, 2.5])


def test_tree_memory_is_logarithmic() -> None:
    for mechanism in ("tree", "honaker", "smooth"):
        counter = make_counter(mechanism, 10**6, rho=1)
        state = counter.start()
        for _ in range(1000):
            counter.step(state, 1)
        numbers = sum(len(v) if isinstance(v, list) else 1 for v in state.values())
        assert numbers <= 4 * 24 + 2, mechanism


def test_state_is_json_and_bounds_are_public() -> None:
    s = Stream(100, accountant=FilterAccountant(PureDP(1)), mechanism="honaker", epsilon=1)
    s.feed(1)
    assert json.loads(s.to_json())["counter"]["t"] == 1
    with pytest.raises(DomainError):
        Stream(10, accountant=FilterAccountant(PureDP(1)), epsilon=1, upper=MAX_VALUE + 1)


def test_discrete_laplace_mgf_is_below_the_continuous_one() -> None:
    """The premise of the Laplace half-widths (dpkit.stream.base): for |λ| < 1/b,
    (1 − p)²/((1 − pe^λ)(1 − pe^(−λ))) ≤ 1/(1 − b²λ²), p = e^(−1/b) (checked on a grid)."""
    for b in (0.3, 1.0, 2.0, 7.0, 50.0):
        p = math.exp(-1 / b)
        lam = np.linspace(-0.999 / b, 0.999 / b, 2001)
        disc = (1 - p) ** 2 / ((1 - p * np.exp(lam)) * (1 - p * np.exp(-lam)))
        assert np.all(disc <= 1 / (1 - b * b * lam * lam) * (1 + 1e-12))


def test_exact_convolution_is_exact_at_the_extremes() -> None:
    """R·x is computed exactly (the privacy map assumes it): extreme increments, a long
    series (the limbed FFT path), checked against Python integers."""
    rng = np.random.default_rng(7)
    n = 20_000
    x = rng.integers(-MAX_VALUE, MAX_VALUE + 1, n)
    x[:50], x[50:100] = MAX_VALUE, -MAX_VALUE
    coef = rng.integers(0, 1 << 20, n)
    coef[:100] = (1 << 20) - 1
    u = exact_convolve(x, coef, n)
    for i in (0, 99, 4095, 4096, 12_345, n - 1):
        assert int(u[i]) == sum(int(x[j]) * int(coef[i - j]) for j in range(i + 1))


def test_factorization_long_horizon_is_unbiased_post_processing(noiseless: None) -> None:
    """With the noise zeroed, A·R⁻¹·(R·x) returns the running totals (the FFT path)."""
    counter = make_counter("factorization", 50_000, rho=1)
    x = np.arange(50_000, dtype=np.int64) % 11
    assert np.allclose(counter.release(x), np.cumsum(x), rtol=1e-9, atol=1e-6)
