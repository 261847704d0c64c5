"""Records drawn from a Private-PGM model (dpkit.release.synthetic.pgm_sample) follow the model's
own
marginals, off its cliques too; ranking strata by record index (Private-PGM 1.1.0's
sampler) is caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.release.synthetic import pgm_sample as S  # noqa: N812
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.mst import Measured, pgm_estimate

pytest.importorskip("mbi")

DOM = Domain.from_dict({"a": 4, "b": 4, "c": 4})
ROWS = 60_000
# Each cell of a pair marginal (16 cells, 3 pairs) is a hypergeometric or binomial count,
# whose tails are at most Hoeffding's (Hoeffding 1963, §6): |count/N − p| ≤
# √(ln(2·48/1e-6)/(2N)) for all 48 cells at once except with probability 1e-6; TV sums
# 16 of them halved.
TOLERANCE = 0.5 * 16 * math.sqrt(math.log(2 * 48 / 1e-6) / (2 * ROWS))


def _model():
    """A star a–b, a–c: b and c each equal a half the time, independent given a."""
    p_a = np.full(4, 0.25)
    p_given = 0.5 * np.eye(4) + 0.125
    ab = 1000 * p_a[:, None] * p_given
    ms = [Measured(("a", "b"), ab.ravel(), 1.0), Measured(("a", "c"), ab.ravel(), 1.0)]
    return pgm_estimate(DOM, ms, 1000.0, 500)


def _worst_tv(model) -> float:
    data = S.sample_model(model, ROWS)
    codes = np.column_stack([data[a] for a in DOM.attributes])
    worst = 0.0
    for pair in (("a", "b"), ("a", "c"), ("b", "c")):
        want = np.asarray(model.project(pair).datavector(flatten=False), dtype=float)
        got = marginal_counts(codes, DOM, pair)
        worst = max(worst, 0.5 * float(np.abs(got / ROWS - want / want.sum()).sum()))
    return worst


def test_sample_follows_the_models_marginals_off_its_cliques():
    assert TOLERANCE < 0.1
    assert _worst_tv(_model()) <= TOLERANCE


def test_index_ranked_strata_are_caught(monkeypatch):
    # broken variant: Private-PGM 1.1.0's ranking by record index
    monkeypatch.setattr(S, "_rank_order", lambda group: np.argsort(group, kind="stable"))
    assert _worst_tv(_model()) > TOLERANCE


def test_counts_and_shapes():
    data = S.sample_model(_model(), 101)
    assert set(data) == set(DOM.attributes)
    for a, size in zip(DOM.attributes, DOM.sizes, strict=True):
        assert data[a].shape == (101,) and data[a].dtype == np.int64
        assert data[a].min() >= 0 and data[a].max() < size
    u = S.uniforms(10_000)
    assert u.min() >= 0 and u.max() < 1


def test_randomised_rounding_keeps_the_total_and_expected_counts():
    p = np.array([0.5, 0.3, 0.2])
    counts = S._round_counts(p, 7)
    assert counts.sum() == 7
    assert np.all(np.abs(counts - 7 * p) < 1)


def test_sample_from_the_numpy_model_follows_its_marginals():
    """AIM's NumPy model (dpkit.release.synthetic.jtree) through the same sampler: the b–c
    marginal (off the model's cliques) within the same Hoeffding tolerance."""
    from dpkit.release.synthetic import jtree

    p_a = np.full(4, 0.25)
    ab = 1000 * p_a[:, None] * (0.5 * np.eye(4) + 0.125)
    ms = [Measured(("a", "b"), ab.ravel(), 1.0), Measured(("a", "c"), ab.ravel(), 1.0)]
    model = jtree.fit(DOM, jtree.Measurements.pool(ms), 1000.0, 500, 2.0)
    data = S.sample_model(model, ROWS)
    codes = np.column_stack([data[a] for a in DOM.attributes])
    for pair in (("a", "b"), ("a", "c"), ("b", "c")):
        want = model.marginal(pair)
        got = marginal_counts(codes, DOM, pair)
        assert 0.5 * float(np.abs(got / ROWS - want / want.sum()).sum()) <= TOLERANCE
