"""The scale switch (dpkit.release.ranges.switch): budget on both branches, the decision, and bad
input raising before any noise is drawn."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from release_checks import record, total_epsilon

import dpkit.release  # noqa: F401 - registers the built-in algorithms
from dpkit.core.accuracy import laplace_tail
from dpkit.errors import DomainError
from dpkit.release.ranges import switch as S  # noqa: N812
from dpkit.release.ranges.histogram import release_histogram

SWITCHED_1D = ["structure_first", "phpartition", "dawa", "noise_first"]
SWITCHED_2D = ["kdtree", "ug", "ag", "dawa"]
CASES = [(m, 1) for m in SWITCHED_1D] + [(m, 2) for m in SWITCHED_2D]


def _data(shape, total, seed=0):
    rng = np.random.default_rng(seed)  # test input, not noise
    return rng.multinomial(total, np.full(int(np.prod(shape)), 1 / np.prod(shape))).reshape(
        shape).astype(np.int64)


@pytest.mark.parametrize("method, rank", CASES)
def test_large_signal_releases_identity_at_the_rest_of_the_budget(monkeypatch, method, rank):
    """N = 10⁶ records on 4,096 cells at ε = 1: the signal N̂ε'/cells ≈ 232 ≥ every default
    threshold unless the noisy total is off by > 10⁴ (probability ≤ 1e-6). Then exactly two
    measurements: the total at ε/20 and every cell at the rest, summing to ε."""
    shape = (64, 64) if rank == 2 else (4096,)
    if method == "ug":  # UG's own grid would be the identity grid at 10⁶ records
        shape = (256, 256)  # signal ≈ 1.5 ≥ 0.0015 (UG's default); grid m = 100
    x = _data(shape, 10 ** 6 if method != "ug" else 10 ** 5)
    assert laplace_tail(20.0, 1e-6, True) < 10 ** 4
    import dpkit.release.ranges.partition as part

    merges = []  # NoiseFirst's own algorithm also measures [total?, cells]: spy its merge
    real_merge = part.penalized_partition
    monkeypatch.setattr(part, "penalized_partition",
                        lambda *a: merges.append(1) or real_merge(*a))
    log = record(monkeypatch)
    out = release_histogram(x, 1, method)
    assert merges == []
    assert [m.values.size for m in log] == [1, x.size]
    assert total_epsilon(log) <= 1 and log[0].epsilon <= Fraction(1, 20)
    assert out.counts.shape == x.shape
    # broken: a switch that never fires runs the partitioning algorithm instead — caught
    monkeypatch.setattr(S, "use_identity", lambda *a: False)
    if method in ("ug", "ag"):
        import dpkit.release.ranges.grid2d as g2
        monkeypatch.setattr(g2, "use_identity", lambda *a: False)
    log.clear()
    release_histogram(x, 1, method)
    if method == "noise_first":
        assert merges
    else:
        assert [m.values.size for m in log] != [1, x.size]


@pytest.mark.parametrize("method, rank", CASES)
def test_declared_scale_spends_nothing_and_small_signal_runs_the_algorithm(monkeypatch, method,
                                                                           rank):
    shape = (16, 16) if rank == 2 else (256,)
    x = _data(shape, 1)
    log = record(monkeypatch)
    release_histogram(x, Fraction(1, 10), method, scale=1)  # signal 0.1/256 ≈ 0.0004
    if method == "dawa":  # DAWA's per-level partition shares are below ε/20 themselves
        assert not any(m.values.size == 1 and m.sensitivity == 1 and m.epsilon <= Fraction(
            1, 200) for m in log)
    else:
        assert all(m.epsilon > Fraction(1, 200) for m in log)  # no noisy total at ε/20
    assert total_epsilon(log) <= Fraction(1, 10)
    if method == "noise_first":  # its own algorithm measures every cell at all of ε too
        assert [(m.values.size, m.epsilon) for m in log] == [(x.size, Fraction(1, 10))]
    else:
        assert not (len(log) == 1 and log[0].values.size == x.size)  # not Identity


@pytest.mark.parametrize("method, rank", CASES)
@pytest.mark.parametrize("bad", [{"switch": 0}, {"switch": -1.0}, {"switch": float("nan")},
                                 {"scale": -5}, {"scale": 2.5}, {"scale_fraction": 0},
                                 {"scale_fraction": 1}])
def test_bad_switch_options_raise_before_any_noise(monkeypatch, method, rank, bad):
    shape = (8, 8) if rank == 2 else (64,)
    log = record(monkeypatch)
    with pytest.raises(DomainError):
        release_histogram(_data(shape, 10 ** 6), 1, method, **bad)
    assert log == []


@pytest.mark.parametrize("method, shape, bad", [
    ("structure_first", (4096,), {"buckets": 0}), ("phpartition", (4096,), {"depth": 0}),
    ("kdtree", (64, 64), {"rho": 2}), ("dawa", (4096,), {"strategy": "nope"}),
    ("dawa", (4096,), {"ratio": 2}), ("dawa", (64, 64), {"ratio": 0}),
    ("dawa", (64, 64), {"strategy": "nope"})])
def test_algorithm_options_are_checked_on_the_identity_branch(monkeypatch, method, shape, bad):
    log = record(monkeypatch)
    with pytest.raises(DomainError):
        release_histogram(_data(shape, 10 ** 6), 1, method, **bad)
    assert log == []


def test_registry_flags_the_methods_no_switch_makes_robust():
    """Uniform (a baseline), NoiseFirst and P-HPartition lose to Identity by more than 1.2×
    even at the smallest measured signal, Privelet in 2-D at every scale
    (bench/results/auto.md): flagged, not robust."""
    from dpkit.release.ranges.histogram import method as find

    assert not find("uniform", 1).robust and not find("uniform", 2).robust
    assert not find("noise_first", 1).robust and not find("phpartition", 1).robust
    assert not find("privelet", 2).robust and find("privelet", 1).robust
    for name in ("identity", "hb", "dawa", "structure_first"):
        assert find(name, 1).robust
    for name in ("identity", "dawa", "ag", "ug", "kdtree", "quadtree", "mm"):
        assert find(name, 2).robust


def test_switch_none_is_the_papers_algorithm(monkeypatch):
    x = _data((4096,), 10 ** 6)
    log = record(monkeypatch)
    release_histogram(x, 1, "phpartition", switch=None)
    assert log[0].values.size != 1 and total_epsilon(log) <= 1  # no noisy total first


def test_use_identity_threshold():
    assert S.use_identity(100.0, Fraction(1), 100, 1.0)
    assert not S.use_identity(99.0, Fraction(1), 100, 1.0)
    assert not S.use_identity(1e12, Fraction(1), 1, None)
