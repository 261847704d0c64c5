"""The iterative construction (dpkit.release.synthetic.iterative): queries, the budget, the reported
accuracy bound (statistical, with broken updaters it catches), advanced composition, the
halving updater and the simplex projection."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from release_checks import record, total_epsilon

from dpkit.core.measures import ApproxDP, PureDP
from dpkit.errors import DomainError
from dpkit.release.synthetic import iterative as ic
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.marginals import MarginalWorkload
from dpkit.release.workload import prefix


def _concentrated(n=100_000, size=8):
    x = np.zeros(size, dtype=np.int64)
    x[0] = int(0.9 * n)
    x[1:] = (n - x[0]) // (size - 1)
    x[0] += n - x.sum()
    return x


def _cells_and_total(size=8):
    return ic.LinearQueries.from_matrix(np.vstack([np.eye(size), np.ones((1, size))]))


def test_marginal_queries_answer_the_marginals():
    dom = Domain.from_dict({"a": 2, "b": 3, "c": 2})
    rng = np.random.default_rng(0)  # test input
    codes = np.column_stack([rng.integers(0, s, 50) for s in dom.sizes])
    x = np.bincount(np.ravel_multi_index(codes.T, dom.shape()), minlength=dom.size())
    wl = MarginalWorkload.all_kway(dom, 2)
    q = ic.LinearQueries.from_marginals(wl)
    expected = np.concatenate([marginal_counts(codes, dom, c).ravel() for c in wl.cliques])
    assert np.array_equal(q.answer(x), expected)
    assert len(q) == expected.size and q.domain_size == 12
    assert len(ic.LinearQueries.from_ranges(prefix(5))) == 5


@pytest.mark.parametrize("distinguisher", list(ic.DISTINGUISHERS))
def test_budget_is_spent_exactly(monkeypatch, distinguisher):
    run = ic.IterativeConstruction(distinguisher, "mw", T=7, epsilon=Fraction(3, 2))
    log = record(monkeypatch)
    result = run.run(_concentrated(1000), _cells_and_total())
    assert len(log) == 1 + 7 and all(m.sensitivity == 1 for m in log)
    assert log[0].epsilon == Fraction(3, 40) and total_epsilon(log) == Fraction(3, 40) + 7 * (
        run.eps_round / 2)
    assert run.eps_round == (Fraction(3, 2) - Fraction(3, 40)) / 7
    assert result.epsilon == Fraction(3, 2) and run.privacy() == PureDP(Fraction(3, 2))
    assert len(result.selected) == 7 and result.distribution.sum() == pytest.approx(1)


def test_declared_n_spends_nothing_on_it(monkeypatch):
    x = _concentrated(1000)
    run = ic.IterativeConstruction(T=3, epsilon=1, n=int(x.sum()))
    log = record(monkeypatch)
    result = run.run(x, _cells_and_total())
    assert len(log) == 3 and result.noisy_total == x.sum()
    with pytest.raises(DomainError):
        ic.IterativeConstruction(T=3, epsilon=1, n=5).run(x, _cells_and_total())


def _max_error(run, x, q):
    result = run.run(x, q)
    return float(np.abs(result.answers - q.answer(x)).max()), result.bound


@pytest.mark.parametrize("updater", ["mw", "additive"])
@pytest.mark.parametrize("distinguisher", list(ic.DISTINGUISHERS))
def test_reported_bound_holds_and_broken_updater_is_caught(monkeypatch, updater,
                                                            distinguisher):
    """Each run's bound holds with probability ≥ 1 − β, β = 2·10⁻⁷: three runs fail
    together with probability ≤ 1e-6. Broken: the update steps away from the measurement
    (sign flipped); D moves mass off the cell holding 90% of the records, and its error
    exceeds the bound (a bound below 0.35n is asserted first)."""
    x, q = _concentrated(), _cells_and_total()
    run = ic.IterativeConstruction(distinguisher, updater, T=400, epsilon=10, beta=2e-7)
    for _ in range(3):
        err, bound = _max_error(run, x, q)
        assert bound is not None and err <= bound < 0.35 * x.sum()
    real = ic.UPDATERS[updater].update
    monkeypatch.setattr(ic.UPDATERS[updater], "update",
                        lambda self, row, cur, meas: real(self, row, cur, 2 * cur - meas))
    err, bound = _max_error(run, x, q)
    assert err > bound


def test_advanced_composition_rounds():
    run = ic.IterativeConstruction(T=400, epsilon=1, delta=Fraction(1, 10**6))
    loss = run.privacy()
    assert isinstance(loss, ApproxDP) and loss.epsilon <= 1 and loss.delta <= Fraction(1, 10**6)
    assert run.eps_round > Fraction(19, 20) / 400  # advanced composition pays off at T = 400
    few = ic.IterativeConstruction(T=3, epsilon=1, delta=Fraction(1, 10**6))
    assert few.eps_round == Fraction(19, 20) / 3  # basic composition is better: kept


def test_halving_updater_small_domain_and_refuses_large_ones():
    rng = np.random.default_rng(1)  # test input
    x = rng.multinomial(2000, [0.5, 0.2, 0.2, 0.1]).astype(np.int64)
    q = _cells_and_total(4)
    result = ic.IterativeConstruction("exponential", "halving", T=6, epsilon=5,
                                      records=10).run(x, q)
    assert result.bound is None and result.distribution.sum() == pytest.approx(1)
    assert np.all(result.distribution >= 0)
    with pytest.raises(DomainError, match="exponential"):
        ic.IterativeConstruction(updater="halving", records=50).run(
            np.ones(64, dtype=np.int64), _cells_and_total(64))


def test_project_simplex_is_the_euclidean_projection():
    rng = np.random.default_rng(2)  # test input
    for _ in range(50):
        v = rng.normal(size=6) * 3
        p = ic.project_simplex(v)
        assert p.min() >= 0 and p.sum() == pytest.approx(1)
        for _ in range(20):  # no simplex point is closer
            other = rng.dirichlet(np.ones(6))
            assert np.sum((v - p) ** 2) <= np.sum((v - other) ** 2) + 1e-12


@pytest.mark.parametrize("kwargs", [{"distinguisher": "best"}, {"updater": "sgd"}, {"T": 0},
                                    {"epsilon": 0}, {"delta": 1}, {"total_share": 1},
                                    {"beta": 0}, {"n": -1}])
def test_bad_parameters_raise(kwargs):
    with pytest.raises(DomainError):
        ic.IterativeConstruction(**kwargs)


def test_bad_counts_raise(monkeypatch):
    log = record(monkeypatch)
    run = ic.IterativeConstruction(T=2, epsilon=1)
    for bad in (np.array([1, 2]), np.array([1.5] * 8), np.array([-1] + [1] * 7)):
        with pytest.raises(DomainError):
            run.run(bad, _cells_and_total())
    assert log == []
    with pytest.raises(DomainError):
        ic.LinearQueries.from_matrix(np.array([[0.5, 1.0]]))
