"""Private partition selection: exact constraints, thresholds, release rates, and sessions."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import polars as pl
import pytest
from scipy import stats
from stats import FALSE_POSITIVE_RATE

import dpkit as dp
from dpkit.errors import DomainError, MeasureError
from dpkit.mechanisms.partition_selection import (
    _gaussian_parameters,
    _laplace_threshold,
    make_partition_selection,
    truncated_geometric_probabilities,
)


@pytest.mark.parametrize("eps,delta", [(Fraction(1), Fraction(1, 10**6)),
                                       (Fraction(1, 10), Fraction(1, 10**8)),
                                       (Fraction(3), Fraction(1, 100))])
def test_truncated_geometric_meets_both_constraints_exactly(eps, delta):
    probs = truncated_geometric_probabilities(eps, delta)
    mpmath.mp.prec = 300
    e = mpmath.exp(mpmath.mpf(eps.numerator) / eps.denominator)
    d = mpmath.mpf(delta.numerator) / delta.denominator
    assert probs[0] == 0 and probs[-1] == 1
    for prev, cur in zip(probs, probs[1:], strict=False):
        p, c = mpmath.mpf(prev.numerator) / prev.denominator, mpmath.mpf(
            cur.numerator) / cur.denominator
        assert c <= e * p + d and 1 - p <= e * (1 - c) + d and c >= p
    # and it is the optimal sequence, up to the 2^-64 rounding (DVGM22 Thm 1, in floats)
    opt = [0.0]
    ef, df = math.exp(float(eps)), float(delta)
    while opt[-1] < 1 and len(opt) < len(probs):
        q = opt[-1]
        opt.append(min(ef * q + df, 1 - (1 - q - df) / ef, 1.0))
    assert np.allclose([float(p) for p in probs[:len(opt)]], opt, atol=1e-9)


def test_laplace_threshold_is_the_smallest_meeting_delta():
    scale, delta, g = Fraction(3), Fraction(1, 10**6), 3
    t = _laplace_threshold(scale, delta, g)

    def leak(k: int) -> float:  # G·P(Z ≥ k) for discrete Laplace of this scale
        q = math.exp(-1 / float(scale))
        return g * q**k / (1 + q)
    assert leak(t - 1) <= float(delta) < leak(t - 2)


def test_gaussian_threshold_meets_half_delta():
    sigma, t = _gaussian_parameters(Fraction(1), Fraction(1, 10**6), 2)
    assert 2 * math.exp(-((t - 1) ** 2) / (2 * float(sigma) ** 2)) <= 0.5e-6


N = 200_000


def _release_rate_pvalue(counts_value: int, expected: float, select) -> float:
    hits = int(select(np.full(N, counts_value)).sum())
    return float(stats.binomtest(hits, N, expected).pvalue)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_truncated_geometric_release_rate(n):
    sel = dp.PartitionSelection(1, Fraction(1, 100))
    probs = truncated_geometric_probabilities(Fraction(1), Fraction(1, 100))
    m = make_partition_selection(sel, 1)
    assert _release_rate_pvalue(n, float(probs[n]), m) > FALSE_POSITIVE_RATE


def test_release_rate_test_catches_an_off_by_one_sequence():
    probs = truncated_geometric_probabilities(Fraction(1), Fraction(1, 100))
    m = make_partition_selection(dp.PartitionSelection(1, Fraction(1, 100)), 1)
    # broken: a selection that uses π(n + 1), as if every count were one higher
    assert _release_rate_pvalue(2, float(probs[1]), m) < FALSE_POSITIVE_RATE


def test_laplace_and_gaussian_single_unit_leak_is_below_delta():
    for method in ("laplace", "gaussian"):
        m = make_partition_selection(dp.PartitionSelection(1, Fraction(1, 1000), method), 2)
        hits = int(m(np.ones(N, dtype=np.int64)).sum())
        # P(release | n = 1) ≤ δ/G = 5e-4: 200k draws exceed 3× that w.p. < 1e-6
        assert hits < 3 * 5e-4 * N
        assert m(np.full(10, 10_000)).all()


def _table() -> pl.DataFrame:
    rng = np.random.default_rng(3)  # test data only
    big = np.repeat(np.arange(5), 2000)
    rare = np.arange(100, 150)  # 50 keys with a single unit each
    g = np.concatenate([big, rare])
    return pl.DataFrame({"u": np.arange(g.size), "g": g, "x": rng.uniform(0, 1, g.size)})


def test_session_releases_only_selected_keys_and_charges_selection():
    s = dp.Session(_table(), dp.PrivacyUnit.by("u", 1), dp.ApproxDP(10, 1e-4))
    q = s.query().group_by("g", selection=dp.PartitionSelection(1, 1e-7)).agg(
        dp.count(), dp.mean("x", (0, 1)))
    out = q.release(epsilon=1)
    assert set(out["g"].to_list()) == set(range(5))  # single-unit keys: π(1) = 1e-7 each
    assert s.spent.epsilon == 2 and 0.999999e-7 < float(s.spent.delta) <= 1e-7
    assert "partition selection" in q.explain(epsilon=1)


def test_selection_errors():
    pure = dp.Session(_table(), dp.PrivacyUnit.by("u", 1), dp.PureDP(10))
    q = pure.query().group_by("g", selection=dp.PartitionSelection(1, 1e-7)).agg(dp.count())
    with pytest.raises(MeasureError):
        q.release(epsilon=1)
    assert pure.spent == dp.PureDP(0)
    with pytest.raises(DomainError):
        pure.query().group_by("g", keys=[1], selection=dp.PartitionSelection(1, 1e-7))
    with pytest.raises(DomainError):
        dp.PartitionSelection(1, 0).loss()
    with pytest.raises(DomainError):
        dp.PartitionSelection(1, 1e-6, "magic").loss()
