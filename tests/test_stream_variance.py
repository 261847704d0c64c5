"""Measured error variance of every continual counter against its closed form
(dpkit.stream; issue 20), each paired with a broken variant the same test must catch.

The test. For n independent releases of one fixed stream, the errors (release − true running
total; every counter is linear and unbiased, so their law does not depend on the data) are
taken at each tested step t, and the mean of the squared errors is compared with the
closed-form Var_t by the self-normalised statistic
z = (mean(e²) − Var_t)/(sd(e²)/√n). A correct counter is rejected (|z| above the threshold
at some tested t) with probability at most FALSE_POSITIVE_RATE = 1e-6 under the normal
approximation of the mean of n ≥ 1000 iid trials (the threshold is Bonferroni-split over the
tested steps). The broken variants halve node noise (one level's nodes, or all of them):
their variance is 25–75% lower at the tested steps, far outside the test's band.

The node noise is drawn through the real calibrated measurement, in advance and in bulk
(``pooled``): iid draws of the same distribution, only faster than one call per node.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from stats import FALSE_POSITIVE_RATE

from dpkit.stream import base, make_counter
from dpkit.stream.base import Counter

T = 64
TRIALS = 3000
STEPS = (1, 7, 32, 45, 63, 64)  # popcounts 1 … 6, a power of two, the horizon

CASES = [(m, b) for m in ("increments", "running_totals", "tree", "honaker", "smooth",
                          "hybrid") for b in ("epsilon", "rho")] + [("factorization", "rho")]


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Node noise from bulk draws of the same calibrated measurement (iid, same law)."""
    pools: dict[int, tuple[np.ndarray, int]] = {}
    real = base.draw

    def draw(noise, size):
        pool, at = pools.get(id(noise), (np.zeros(0, dtype=np.int64), 0))
        if at + size > pool.size:
            pool, at = real(noise, max(size, 1 << 18)), 0
        pools[id(noise)] = (pool, at + size)
        return pool[at:at + size]

    monkeypatch.setattr(base, "draw", draw)
    yield


def _counter(mechanism: str, budget: str) -> Counter:
    kw = {"epsilon": Fraction(1)} if budget == "epsilon" else {"rho": Fraction(1, 2)}
    return make_counter(mechanism, None if mechanism == "hybrid" else T, sensitivity=2,
                        **kw)


DATA = np.arange(T, dtype=np.int64) % 7  # the error must not depend on it


def _errors(counter: Counter, trials: int, stream: bool = False) -> np.ndarray:
    truth = np.cumsum(DATA)
    if not stream:
        return np.array([counter.release(DATA) for _ in range(trials)]) - truth
    out = np.empty((trials, T))
    for i in range(trials):
        state = counter.start()
        out[i] = [counter.step(state, int(v)) for v in DATA]
    return out - truth


def _max_z(errors: np.ndarray, variance: np.ndarray, steps: tuple[int, ...]) -> float:
    worst = 0.0
    for t in steps:
        e2 = errors[:, t - 1] ** 2
        z = (e2.mean() - variance[t - 1]) / (e2.std(ddof=1) / np.sqrt(e2.size))
        worst = max(worst, abs(float(z)))
    return worst


def _threshold(steps: tuple[int, ...]) -> float:
    return float(stats.norm.isf(FALSE_POSITIVE_RATE / (2 * len(steps))))


def _halved(counter: Counter, level: int | None) -> Counter:
    """The same counter with the noise of one level's nodes (None: every node) halved."""
    real = counter._noise

    def noise(size: int, lvl: int = 0) -> np.ndarray:
        z = real(size, lvl)
        return np.fix(z / 2).astype(np.int64) if level is None or lvl == level else z

    counter._noise = noise
    return counter


# the level whose halving the test must see: the top node at t = 32 or 64 for the trees,
# the checkpoints for the hybrid (t = 32 and 64 are checkpoints), every node otherwise
BROKEN_LEVEL: dict[str, int | None] = {"tree": 5, "honaker": 5, "hybrid": 0}


@pytest.mark.parametrize(("mechanism", "budget"), CASES)
def test_variance_matches_closed_form(pooled: None, mechanism: str, budget: str) -> None:
    counter = _counter(mechanism, budget)
    var = counter.variance(np.arange(1, T + 1))
    z = _max_z(_errors(counter, TRIALS), var, STEPS)
    assert z < _threshold(STEPS), f"{mechanism}/{budget}: |z| = {z:.2f}"
    broken = _halved(_counter(mechanism, budget), BROKEN_LEVEL.get(mechanism))
    zb = _max_z(_errors(broken, TRIALS), var, STEPS)
    assert zb > _threshold(STEPS), f"broken {mechanism}/{budget} passed: |z| = {zb:.2f}"


@pytest.mark.parametrize("mechanism", ["tree", "honaker", "smooth", "hybrid",
                                       "factorization", "increments"])
def test_streaming_variance_matches_closed_form(pooled: None, mechanism: str) -> None:
    """The incremental form (``start``/``step``) has the batch form's closed-form variance."""
    counter = _counter(mechanism, "rho")
    var = counter.variance(np.arange(1, T + 1))
    steps = (7, 32, 63)
    z = _max_z(_errors(counter, 1000, stream=True), var, steps)
    assert z < _threshold(steps), f"{mechanism}: |z| = {z:.2f}"
    broken = _halved(_counter(mechanism, "rho"), BROKEN_LEVEL.get(mechanism))
    zb = _max_z(_errors(broken, 1000, stream=True), var, (32,))
    assert zb > _threshold(steps), f"broken {mechanism} passed: |z| = {zb:.2f}"


@pytest.mark.parametrize(("mechanism", "budget"), CASES)
def test_intervals_cover(pooled: None, mechanism: str, budget: str) -> None:
    """The (1 − β) intervals hold: over n releases, the misses at each tested step stay
    below the binomial (n, β) quantile of level 1 − 1e-6/len(steps) (FPR ≤ 1e-6, exact
    binomial tail: the half-widths are upper bounds, so the true miss rate is ≤ β). Broken
    variant: intervals an eighth as wide (the Laplace bound is loose: up to ~4× the exact
    quantile for a single noise), which the same count must reject."""
    counter = _counter(mechanism, budget)
    beta, n = 0.2, 2000
    t = np.arange(1, T + 1)
    errors = np.abs(_errors(counter, n))
    limit = stats.binom.isf(FALSE_POSITIVE_RATE / len(STEPS), n, beta)
    for h, ok in ((counter.half_widths(t, beta), True), (counter.half_widths(t, beta) / 8,
                                                          False)):
        misses = [int((errors[:, s - 1] > h[s - 1]).sum()) for s in STEPS]
        assert bool(max(misses) <= limit) is ok, (mechanism, budget, misses, limit)
