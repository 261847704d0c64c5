"""Top-k by one stream of proposals (``dpkit.mechanisms.selection.sample_top_k``): its law is
peeling's, exactly, and its work is bounded by N and k whatever the scores; the limited
domain's per-request limit k·k̄ (issue 30, attack 6: a request's cost was set by the number
of groups passing the analyst's filter) is refused at plan time and debits nothing.

False-positive rates: each χ² law test rejects a correct sampler with probability ≤ 1e-6
(stats.FALSE_POSITIVE_RATE) and is paired with broken variants it must reject (a sampler that
forgets to exclude the picked indices, and one at half the scale); the work bound fails for a
correct sampler with probability < 1e-20 (below)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

import dpkit as dp
from dpkit.core import rng
from dpkit.errors import DomainError
from dpkit.frame.query import Query
from dpkit.mechanisms import limited_domain
from dpkit.mechanisms.exponential import sample_exponential
from dpkit.mechanisms.selection import sample_top_k

N_DRAWS = 60_000


def peeling_law(scores, k, scale, until=None):
    """{tuple of indices: probability} of peeling exp(score/scale) k times without
    replacement (stopping after ``until``), from the definition."""
    w = [math.exp(float(Fraction(u) / scale)) for u in scores]
    law = {}
    for perm in itertools.permutations(range(len(w)), k):
        p, left = 1.0, list(range(len(w)))
        for i in perm:
            p *= w[i] / sum(w[j] for j in left)
            left.remove(i)
        out = perm[:perm.index(until) + 1] if until in perm else perm
        law[out] = law.get(out, 0.0) + p
    return law


def coded(draws, law):
    index = {o: i for i, o in enumerate(sorted(law))}
    return np.array([index.get(tuple(i for i in row if i >= 0), -1) for row in draws])


def with_replacement(scores, k, scale, size):
    """Broken: forgets to exclude picked indices (k independent exponential draws)."""
    return np.stack([sample_exponential(scores, scale, size=size) for _ in range(k)], axis=1)


CASES = [  # scores, k, scale, until
    (np.array([3, 1, 0, 2, 2]), 3, Fraction(1), None),  # ties and a spread
    (np.array([9, 0, 1, 4, 2]), 3, Fraction(3, 2), None),  # a dominant top: m re-picked
    ([Fraction(5, 2), Fraction(1, 3), 1, Fraction(7, 4)], 2, Fraction(1, 2), None),
    (np.array([4, 3, 5, 0, 2]), 4, Fraction(1), 2),  # stop at index 2 (a sentinel)
]


@pytest.mark.parametrize("scores,k,scale,until", CASES)
def test_stream_has_peelings_law_and_broken_samplers_are_caught(scores, k, scale, until):
    law = peeling_law(scores, k, scale, until)
    support = np.arange(len(law))
    pmf = np.array([law[o] for o in sorted(law)])
    draws = sample_top_k(scores, k, scale, size=N_DRAWS, until=until)
    assert chi2_pvalue(coded(draws, law), support, pmf) > FALSE_POSITIVE_RATE
    half = sample_top_k(scores, k, scale / 2, size=N_DRAWS, until=until)
    assert chi2_pvalue(coded(half, law), support, pmf) < FALSE_POSITIVE_RATE
    if until is None:
        loose = with_replacement(scores, k, scale, N_DRAWS)
        assert chi2_pvalue(coded(loose, law), support, pmf) < FALSE_POSITIVE_RATE


def test_one_draw_is_k_distinct_indices_and_stops_at_until():
    scores = np.arange(2000, dtype=np.int64)
    out = sample_top_k(scores, 100, Fraction(1, 10**6))  # nearly deterministic: the top 100
    assert out == list(range(1999, 1899, -1))
    stopped = sample_top_k(scores, 100, Fraction(1, 10**6), until=1990)
    assert stopped[:10] == list(range(1999, 1989, -1)) and set(stopped[10:]) == {-1}


def test_work_is_bounded_by_n_and_k_whatever_the_scores(monkeypatch):
    """Scores 1 nat apart (the remaining top is nearly alone each round: the worst case),
    a tiny scale (deterministic order) and all-equal scores. A batch holds ≤ N + 257
    proposals and yields a pick with probability ≥ 1 − e⁻¹ (sample_top_k's notes), so more
    than 4k batches means fewer than k successes in 4k trials of probability ≥ 0.63:
    P < 1e-20 for k = 60 (Chernoff). The broken variant's bound is the old peeling's
    arithmetic, O(k·N) per round, which this spy does not see: the law tests guard it."""
    n, k = 3001, 60
    used = []
    real = rng.uniform_below

    def spy(bound, size=None):
        out = real(bound, size)
        if np.isscalar(bound) and bound == n:  # the proposals (coins use other bounds)
            used.append(out.size)
        return out

    monkeypatch.setattr(rng, "uniform_below", spy)
    for scores, scale in ((np.arange(n, dtype=np.int64), Fraction(1)),
                          (np.arange(n, dtype=np.int64), Fraction(1, 10**9)),
                          (np.zeros(n, dtype=np.int64), Fraction(1))):
        used.clear()
        assert len(set(sample_top_k(scores, k, scale))) == k
        assert 0 < sum(used) <= 4 * k * (n + 257)


# -- the per-request limit (plan time, nothing debited) ---------------------------------

def test_the_attack_request_is_refused_at_plan_time_naming_the_fix():
    """The attack: k = 1,000 with k̄ = 100,000 cost 8 s a request on Adult, growing with the
    groups that pass the filter. It is now refused before anything is read or debited."""
    s = dp.Session(dp.datasets.load_adult("train"), dp.PrivacyUnit.rows(),
                   dp.ApproxDP(10, 1e-5))
    with pytest.raises(DomainError, match=r"k_bar to at most 4,000") as info:
        s.query().group_by("fnlwgt", selection=dp.TopKSelection(1000, 1, 1e-6,
                                                                  k_bar=100_000))
    assert "4,000,000" in str(info.value)
    doc = s.query().group_by("fnlwgt", selection=dp.TopKSelection(1000, 1, 1e-6)).agg(
        dp.count()).to_json()
    doc["group_by"]["selection"]["k_bar"] = 100_000
    with pytest.raises(DomainError):
        Query.from_json(s, doc)
    assert s.spent == dp.ApproxDP.zero()


def test_every_accepted_selection_is_within_the_limit():
    limit = limited_domain.MAX_K_TIMES_K_BAR
    for k in (1, 2, 40, 41, 500, 1000):
        k_bar = min(limit // k, limited_domain.MAX_K_BAR)
        assert dp.TopKSelection(k, 1, 1e-6, k_bar=k_bar).checked()[1] == k_bar
        assert dp.TopKSelection(k, 1, 1e-6).checked()[1] * k <= limit  # the default k̄
        if k_bar < limited_domain.MAX_K_BAR:
            with pytest.raises(DomainError):
                dp.TopKSelection(k, 1, 1e-6, k_bar=k_bar + 1).checked()
