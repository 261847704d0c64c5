"""Data-cube budget allocation (Ding, Winslett, Han & Li, SIGMOD 2011): the plan's closed
forms, a brute-force privacy check on small neighbours (exact pmfs, deterministic) paired
with a broken split it catches, and the session's ``publish.marginals(allocation=...)``."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.synthetic.datacube import (
    AUDIT_CLIQUES,
    AUDIT_DOMAIN,
    measure_datacube,
    plan_datacube,
)
from dpkit.release.synthetic.domain import Domain

ADULTISH = Domain(("sex", "income", "race", "rel", "marital", "work"), (2, 2, 5, 6, 7, 9))
PAIRS = tuple(itertools.combinations(ADULTISH.attributes, 2))


@pytest.mark.parametrize("objective", ["max", "total"])
def test_plan_splits_epsilon_exactly_and_sources_contain_their_marginals(objective):
    plan = plan_datacube(ADULTISH, PAIRS, Fraction(1, 2), objective=objective)
    assert sum(plan.epsilons) == Fraction(1, 2)
    for clique, j in zip(PAIRS, plan.source, strict=True):
        assert set(clique) <= set(plan.measured[j])


def test_three_binary_marginals_are_read_from_their_cube():
    """(a, b), (a, c), (b, c) over bits: uniform gives each cell variance 2·3²/ε² = 18/ε²;
    the cube (a, b, c) at ε gives 2·2/ε² (two cells summed): the paper's gain."""
    plan = plan_datacube(AUDIT_DOMAIN, AUDIT_CLIQUES, 1)
    assert plan.measured == (("a", "b", "c"),) and plan.epsilons == (1,)
    assert plan.variance == pytest.approx(4.0)


def test_max_objective_beats_the_uniform_split_on_adult_shaped_domains():
    plan = plan_datacube(ADULTISH, PAIRS, 1)
    assert plan.variance < 2 * len(PAIRS) ** 2  # uniform: each marginal at ε/15
    spread = [ADULTISH.size(plan.measured[j]) // ADULTISH.size(c)
              for c, j in zip(PAIRS, plan.source, strict=True)]
    worst = max(2 * s / float(plan.epsilons[j]) ** 2 for s, j in zip(spread, plan.source,
                                                                      strict=True))
    assert worst == pytest.approx(plan.variance, rel=1e-6)  # the closed form is attained


def test_split_is_optimal_for_its_selection():
    """εⱼ ∝ √Sⱼ equalises the worst variance of every measured cuboid (Lagrange)."""
    plan = plan_datacube(ADULTISH, PAIRS, 1)
    per = {}
    for c, j in zip(PAIRS, plan.source, strict=True):
        s = ADULTISH.size(plan.measured[j]) / ADULTISH.size(c)
        per[j] = max(per.get(j, 0.0), 2 * s / float(plan.epsilons[j]) ** 2)
    assert max(per.values()) == pytest.approx(min(per.values()), rel=1e-6)


def _rows_drawn(plan, codes) -> tuple:
    """The noise rows measure_datacube draws (the record of an unaccounted run)."""
    _, record = frontend.charge_record(
        None, PureDP(1), "t", lambda: measure_datacube(codes, AUDIT_DOMAIN, plan,
                                                       AUDIT_CLIQUES, consistent=False))
    return record.noise


def _worst_log_ratio(plan, rows) -> float:
    """max over every neighbour x′ = x + r (r any record of the domain) and every output of
    |log P(M(x) = o) − log P(M(x′) = o)|, from the exact pmfs: each measured cuboid's one
    changed cell contributes max_t |log p_s(t) − log p_s(t − 1)| (discrete Laplace of the
    scale drawn, brute force over t), the other cells nothing."""
    total = 0.0
    for cuboid, row in zip(plan.measured, rows, strict=True):
        s = float(row.scale)
        t = np.arange(-200, 201)
        logp = -np.abs(t) / s
        total += np.abs(logp[1:] - logp[:-1]).max()  # the shift of one cell by 1
        assert cuboid  # every record changes exactly one cell of every cuboid
    return total


def test_brute_force_privacy_on_small_neighbours():
    codes = np.array([[0, 1, 1], [1, 0, 0]])
    plan = plan_datacube(AUDIT_DOMAIN, AUDIT_CLIQUES, 1)
    assert _worst_log_ratio(plan, _rows_drawn(plan, codes)) <= 1 + 1e-12


def test_brute_force_catches_an_ignored_split():
    """Broken: every cuboid at the full ε (the split ignored) on a domain with two measured
    cuboids: the loss exceeds ε."""
    domain = ADULTISH
    plan = plan_datacube(domain, PAIRS, 1)
    broken = replace(plan, epsilons=tuple(Fraction(1) for _ in plan.epsilons))
    rows = [frontend.noise_row(1, PureDP(e)) for e in broken.epsilons]
    assert _worst_log_ratio(broken, rows) > 1.5
    rows = [frontend.noise_row(1, PureDP(e)) for e in plan.epsilons]
    assert _worst_log_ratio(plan, rows) <= 1 + 1e-9


def _session(eps):
    rng = np.random.default_rng(36)  # the table only; noise comes from the CSPRNG
    df = pl.DataFrame({"a": rng.integers(0, 2, 500), "b": rng.integers(0, 2, 500),
                       "c": rng.integers(0, 3, 500)})
    return dp.Session(df, dp.PrivacyUnit.rows(), dp.PureDP(eps))


SPEC = {"a": [0, 1], "b": [0, 1], "c": [0, 1, 2]}


def test_session_datacube_release_is_charged_once_and_consistent():
    s = _session(1)
    rel = s.query().publish.marginals(SPEC, [("a", "b"), ("a", "c"), ("b", "c")],
                                      epsilon=1, allocation="datacube")
    assert s.last_release.loss == PureDP(1) and "datacube" in s.last_release.description
    assert rel["a", "b"].shape == (2, 2) and rel["b", "c"].shape == (2, 3)
    # read from one cube: the shared one-way projections agree exactly
    assert np.allclose(rel["a", "b"].sum(axis=0), rel["b", "c"].sum(axis=1))
    assert math.isclose(rel["a", "b"].sum(), rel["a", "c"].sum())


def test_bad_allocation_is_refused_before_the_debit():
    s = _session(1)
    with pytest.raises(DomainError, match="allocation"):
        s.query().publish.marginals(SPEC, [("a", "b")], epsilon=1, allocation="greedy")
    with pytest.raises(DomainError, match="objective"):
        s.query().publish.marginals(SPEC, [("a", "b")], epsilon=1, allocation="datacube",
                                    objective="median")
    assert s.last_release is None


def test_a_unit_of_m_rows_gets_m_times_the_noise():
    """PrivacyUnit.by(u, M = 3): each cuboid at sensitivity M, scale M/εⱼ (Σⱼ εⱼ = ε)."""
    rng = np.random.default_rng(7)  # the table only
    df = pl.DataFrame({"u": rng.integers(0, 50, 300), "a": rng.integers(0, 2, 300),
                       "b": rng.integers(0, 2, 300), "c": rng.integers(0, 3, 300)})
    s = dp.Session(df, dp.PrivacyUnit.by("u", 3), dp.PureDP(1))
    s.query().publish.marginals(SPEC, [("a", "b"), ("a", "c"), ("b", "c")], epsilon=1,
                                allocation="datacube")
    rows = s.last_release.noise
    assert all(r.sensitivity == 3 for r in rows)
    assert sum(r.sensitivity / r.scale for r in rows) <= 1
