"""Top-k selection over an unknown domain (Durfee & Rogers 2019, limited domain): its exact
law, its (ε, δ) claim checked exactly on neighbouring counts, and its use from a Session and
the JSON query language.

False-positive rates: the χ² law test rejects a correct sampler with probability ≤ 1e-6
(stats.FALSE_POSITIVE_RATE) and is paired with a broken variant it must reject; the privacy
checks are exact computations (no sampling)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

import dpkit as dp
from dpkit.errors import DomainError, MeasureError
from dpkit.frame.language import ProtocolError
from dpkit.frame.query import Query
from dpkit.mechanisms.limited_domain import (
    TopKSelection,
    make_limited_domain_top_k,
    sample_limited_domain,
    sentinel_score,
)


def exact_law(counts, k, k_bar, eps, delta, groups, *, sentinel_term=True):
    """The output law of the limited-domain mechanism, computed from its definition:
    {tuple of positions (best first): probability}. ``sentinel_term=False`` is the broken
    variant whose sentinel lacks ln(min(Δ, k̄)/δ)/ε₀."""
    c = list(counts)
    order = sorted((i for i in range(len(c)) if c[i] > 0), key=lambda i: (-c[i], i))
    candidates = order[:k_bar]
    base = c[order[k_bar]] if len(order) > k_bar else 0
    eps0 = Fraction(eps) / k
    bottom = (float(sentinel_score(base, eps0, Fraction(delta), min(groups, k_bar)))
              if sentinel_term else base + 1.0)
    weight = {i: math.exp(float(eps0) * c[i]) for i in candidates}
    weight[None] = math.exp(float(eps0) * bottom)
    law: dict[tuple, float] = {}

    def peel(prefix, left, p):
        if len(prefix) == k:
            law[tuple(prefix)] = law.get(tuple(prefix), 0) + p
            return
        total = sum(weight[i] for i in left)
        for i in left:
            q = p * weight[i] / total
            if i is None:
                law[tuple(prefix)] = law.get(tuple(prefix), 0) + q
            else:
                peel(prefix + [i], [j for j in left if j != i], q)

    peel([], candidates + [None], 1.0)
    return law


def delta_needed(law_x, law_y, eps):
    """The smallest δ with P_x(S) ≤ e^ε·P_y(S) + δ for every set S of outputs."""
    keys = set(law_x) | set(law_y)
    return sum(max(0.0, law_x.get(o, 0) - math.exp(eps) * law_y.get(o, 0)) for o in keys)


def neighbours(counts, groups):
    """Every count vector one unit away: remove a unit from a set of ≤ groups positive
    counts (and, read the other way round, add one)."""
    positive = [i for i, v in enumerate(counts) if v > 0]
    for size in range(1, groups + 1):
        for subset in itertools.combinations(positive, size):
            yield [v - (i in subset) for i, v in enumerate(counts)]


CLAIMS = [  # counts, k, k̄, ε, δ, Δ
    ([9, 7, 7, 3, 1, 1], 2, 3, 1, Fraction(1, 50), 2),
    ([4, 3, 1, 1], 1, 2, 2, Fraction(1, 20), 3),
    ([6, 6, 5, 2], 3, 3, Fraction(3, 2), Fraction(1, 30), 4),
    ([2, 1, 1], 2, 2, Fraction(1, 2), Fraction(1, 10), 3),
]


@pytest.mark.parametrize("counts,k,k_bar,eps,delta,groups", CLAIMS)
def test_claim_holds_exactly_on_every_neighbour(counts, k, k_bar, eps, delta, groups):
    for other in neighbours(counts, groups):
        for x, y in ((counts, other), (other, counts)):
            lx = exact_law(x, k, k_bar, eps, delta, groups)
            ly = exact_law(y, k, k_bar, eps, delta, groups)
            assert delta_needed(lx, ly, float(eps)) <= float(delta) * (1 + 1e-9)


def test_claim_fails_without_the_sentinel_term():
    counts, k, k_bar, eps, delta, groups = CLAIMS[3]

    def law(x):
        return exact_law(x, k, k_bar, eps, delta, groups, sentinel_term=False)

    worst = max(max(delta_needed(law(counts), law(y), float(eps)),
                    delta_needed(law(y), law(counts), float(eps)))
                for y in neighbours(counts, groups))
    assert worst > 2 * float(delta)


def _code(outputs, law):
    index = {o: i for i, o in enumerate(sorted(law))}
    return np.array([index.get(tuple(o), -1) for o in outputs])


def test_sampler_follows_the_exact_law_and_a_wrong_scale_is_caught():
    counts, k, k_bar, eps, delta, groups = [9, 7, 7, 3, 1, 1], 2, 3, 1, Fraction(1, 50), 2
    law = exact_law(counts, k, k_bar, eps, delta, groups)
    support = np.arange(len(law))
    pmf = np.array([law[o] for o in sorted(law)])
    n = 40_000
    draws = sample_limited_domain(np.array(counts), TopKSelection(k, eps, delta, k_bar),
                                  groups, n)
    assert chi2_pvalue(_code(draws, law), support, pmf) > FALSE_POSITIVE_RATE
    broken = sample_limited_domain(np.array(counts), TopKSelection(k, 4 * eps, delta, k_bar),
                                   groups, n)  # a quarter of the noise
    assert chi2_pvalue(_code(broken, law), support, pmf) < FALSE_POSITIVE_RATE


def test_measurement_map_and_refusals():
    m = make_limited_domain_top_k(TopKSelection(3, 1, 1e-6), 5)
    assert m.map(1) == dp.ApproxDP(Fraction(1), Fraction(1e-6))
    with pytest.raises(DomainError):
        m.map(2)
    out = m(np.array([0, 0, 0]))
    assert out == []  # nothing present: nothing picked
    for bad in (TopKSelection(0, 1, 1e-6), TopKSelection(2, 0, 1e-6),
                TopKSelection(2, 1, 0), TopKSelection(2, 1, 1e-6, k_bar=1),
                TopKSelection(True, 1, 1e-6), TopKSelection(5000, 1, 1e-6)):
        with pytest.raises(DomainError):
            bad.loss()


def test_only_present_candidates_are_picked_best_first():
    # a huge count gap: the top keys come out in order, nothing below the sentinel
    picks = make_limited_domain_top_k(TopKSelection(3, 30, 1e-6, k_bar=4), 1)(
        np.array([0, 5000, 3, 9000, 7000, 2]))
    assert picks == [3, 4, 1]


# -- the Session and the query language ----------------------------------------------------

def _table(seed_users=3000):
    users = np.arange(seed_users)
    items = np.where(users % 3 == 0, "a", np.where(users % 3 == 1, "b", "c"))
    extra = pl.DataFrame({"user": users[:600], "item": ["d"] * 600})
    rare = pl.DataFrame({"user": [0], "item": ["secret"]})
    base = pl.DataFrame({"user": users, "item": items})
    return pl.concat([base, extra, rare]).with_columns(clicks=pl.col("user") % 4)


def _session(budget=None, groups=3):
    budget = budget or dp.ApproxDP(10, 1e-5)
    unit = dp.PrivacyUnit.by("user", max_groups=groups, max_rows_per_group=1)
    return dp.Session(_table(), unit, budget)


def test_session_release_spends_selection_plus_statistics_and_uses_min_g_k():
    s = _session(groups=3)
    q = s.query().group_by("item", selection=dp.TopKSelection(2, 1, 1e-6)).agg(
        dp.count(), dp.sum("clicks", bounds=(0, 3)))
    _, planned = q.plan(epsilon=1)
    assert {p.stat.kind: p.sensitivity for p in planned}["count"] == 2  # min(G = 3, k = 2)
    out = q.release(epsilon=1)
    assert s.spent == dp.ApproxDP(2, Fraction(1e-6))
    assert out.height <= 2 and "secret" not in out["item"].to_list()
    assert set(out["item"].to_list()) <= {"a", "b", "c"}  # "d" (600 users) is never top-2
    assert {"count", "clicks_sum"} <= set(out.columns)


def test_json_round_trip_and_allow_list():
    s = _session()
    q = s.query().group_by("item", selection=dp.TopKSelection(2, 1, 1e-6, k_bar=3)).agg(
        dp.count())
    doc = q.to_json()
    assert doc["group_by"]["selection"] == {"epsilon": 1, "delta": 1e-06,
                                            "method": "limited_domain", "k": 2, "k_bar": 3}
    assert Query.from_json(s, doc).to_json() == doc
    bad_docs = [
        {**doc["group_by"]["selection"], "extra": 1},
        {**doc["group_by"]["selection"], "k": "2"},
        {**doc["group_by"]["selection"], "k": True},
        {"epsilon": 1, "delta": 1e-6, "method": "truncated_geometric", "k": 2},
        {"epsilon": 1, "delta": 1e-6, "method": 7},
    ]
    for sel in bad_docs:
        with pytest.raises(ProtocolError):
            Query.from_json(s, {**doc, "group_by": {"columns": ["item"], "selection": sel}})
    with pytest.raises(DomainError):  # out of range: the builder's own check
        Query.from_json(s, {**doc, "group_by": {"columns": ["item"], "selection": {
            **doc["group_by"]["selection"], "k": 0}}})
    assert s.spent == dp.ApproxDP.zero()


def test_pure_session_refuses_and_spends_nothing():
    s = _session(budget=dp.PureDP(5))
    q = s.query().group_by("item", selection=dp.TopKSelection(2, 1, 1e-6)).agg(dp.count())
    with pytest.raises(MeasureError):
        q.release(epsilon=1)
    assert s.spent == dp.PureDP.zero()


@pytest.mark.parametrize("backend", ["polars", "lazy", "duckdb"])
def test_top_k_selection_runs_on_every_engine(backend):
    """Three keys with 1,000 users each, one with 600, one user alone; k = 3, ε₀ = 1: the
    600-user key is picked before one of the three with probability ≈ e^-400, the lone key
    and the sentinel (h_⊥ = 0 + 1 + ln(3/δ) ≈ 16) as rarely: the three come out."""
    table = _table()
    if backend == "lazy":
        table = table.lazy()
    elif backend == "duckdb":
        duckdb = pytest.importorskip("duckdb")
        table = duckdb.from_arrow(table.to_arrow())
    s = dp.Session(table, dp.PrivacyUnit.by("user", max_groups=3, max_rows_per_group=1),
                   dp.ApproxDP(10, 1e-5))
    out = s.query().group_by("item", selection=dp.TopKSelection(3, 3, 1e-6, k_bar=5)).agg(
        dp.count()).release(epsilon=1)
    assert sorted(out["item"].to_list()) == ["a", "b", "c"]
    assert s.spent == dp.ApproxDP(4, Fraction(1e-6))
