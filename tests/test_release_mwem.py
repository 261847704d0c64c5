"""MWEM with a factored hypothesis (dpkit.release.synthetic.mwem)."""

from fractions import Fraction

import numpy as np
import pytest
from release_checks import record

from dpkit.errors import DomainError
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.marginals import MarginalWorkload, total_variation
from dpkit.release.synthetic.mwem import Factored, mwem


def _data(n=3000):
    rng = np.random.default_rng(3)  # test data only
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(0, 2, n)) % 4  # b follows a
    c = rng.integers(0, 3, n)
    e = (c * 2 + rng.integers(0, 2, n)) % 5  # e follows c
    return Domain.from_dict({"a": 4, "b": 4, "c": 3, "e": 5}), np.stack([a, b, c, e], 1)


def test_factored_marginals_match_the_dense_product():
    d, _ = _data()
    hyp = Factored.uniform(d, 100.0)
    rng = np.random.default_rng(0)
    for g in hyp.groups:
        g.table = rng.random(g.table.shape)
        g.table /= g.table.sum()
    dense = np.einsum("i,j,k,l->ijkl", *[g.table for g in hyp.groups]) * 100
    hyp.merge(("b", "e"))
    assert len(hyp.groups) == 3
    assert np.allclose(hyp.marginal(("e", "a")), dense.sum(axis=(1, 2)).T)
    assert np.allclose(hyp.marginal(("b", "c", "e")), dense.sum(axis=0))
    assert hyp.merged_cells(("a", "b")) == 4 * 20


def test_mwem_spends_its_budget_as_declared(monkeypatch):
    log = record(monkeypatch)
    d, codes = _data()
    w = MarginalWorkload.all_kway(d, 2)
    res = mwem(codes, w, Fraction(1), rounds=4, passes=2)
    # Laplace: the total at ε/20, then one marginal per round at ε_round/2; the selections
    # take the other ε_round/2 each (not logged: they are exponential mechanisms)
    eps_round = (1 - Fraction(1, 20)) / 4
    assert [m.epsilon for m in log] == [Fraction(1, 20)] + [eps_round / 2] * 4
    assert all(m.sensitivity == 1 for m in log) and len(res.selected) == 4
    with pytest.raises(DomainError):
        mwem(codes, w, 1, total_share=1)
    with pytest.raises(DomainError):
        mwem(codes[:, :3], w, 1)


@pytest.mark.parametrize("broken", [False, True])
def test_mwem_learns_the_marginals_at_large_epsilon(monkeypatch, broken):
    """At ε = 10^6 the noise is negligible and every selection picks the worst marginal
    (its score leads by ≥ 1 count; mis-selection probability < e^-10^5), so after as many
    rounds as marginals the 2-way marginals are matched: mean TV < 0.05, where the uniform
    start is at 0.24. The broken variant updates away from the measurements."""
    d, codes = _data()
    w = MarginalWorkload.all_kway(d, 2)
    if broken:
        original = Factored.update

        def away(self, group, passes):
            group.measurements = [(c, 2 * self.marginal(c) - m) for c, m in
                                  group.measurements]
            original(self, group, passes)
        monkeypatch.setattr(Factored, "update", away)
    res = mwem(codes, w, 10**6, rounds=len(w.cliques), passes=100)
    truth = [marginal_counts(codes, d, c) for c in w.cliques]
    tv = np.mean([total_variation(t, e) for t, e in zip(truth, res.answer(w), strict=True)])
    start = np.mean([total_variation(t, Factored.uniform(d, 1.0).marginal(c))
                     for t, c in zip(truth, w.cliques, strict=True)])
    assert start > 0.2
    assert (tv < 0.05) != broken


def test_synthetic_records_follow_the_hypothesis():
    d, codes = _data()
    res = mwem(codes, MarginalWorkload.all_kway(d, 2), 10**6, rounds=6, passes=100)
    fake = res.hypothesis.sample(20000)
    assert fake.shape == (20000, 4) and fake.min() >= 0
    for c in [("a", "b"), ("c", "e")]:
        assert total_variation(marginal_counts(codes, d, c), marginal_counts(fake, d, c)) < 0.05


def test_default_rounds_depend_on_epsilon_only():
    from dpkit.release.synthetic.mwem import default_rounds

    assert [default_rounds(e) for e in (0.01, 0.1, 0.2, 0.3, 1, 10)] == [10, 10, 20, 30, 30, 30]
