"""Private multiplicative weights over sparse vector (dpkit.release.synthetic.pmw)."""

from fractions import Fraction

import numpy as np
import pytest

from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms.sparse_vector import SparseVector
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.pmw import PrivateMultiplicativeWeights


def _data():
    rng = np.random.default_rng(5)  # test data only: far from uniform (a ≤ 1 mostly)
    a = np.minimum(rng.geometric(0.7, 20000) - 1, 7)
    b = (a + rng.integers(0, 2, 20000)) % 8
    return Domain.from_dict({"a": 8, "b": 8}), np.stack([a, b], 1)


def _queries(count):
    rng = np.random.default_rng(9)  # test queries only
    for _ in range(count):
        lo, hi = sorted(rng.integers(0, 64, 2))
        q = np.zeros(64)
        q[lo: hi + 1] = 1
        yield q


def test_integer_sparse_vector_uses_the_integers_as_its_grid():
    sv = SparseVector(10, Fraction(1), 2, max_positives=3, integer=True)
    assert sv._threshold_scale == 2 / Fraction(1, 2) and sv._query_scale == 2 * 3 * 2 * 2
    with pytest.raises(DomainError):
        sv.ask(1.5)
    with pytest.raises(DomainError):
        SparseVector(10.5, 1, 1, integer=True)


def test_budget_adds_up_and_the_interaction_halts():
    d, codes = _data()
    p = PrivateMultiplicativeWeights(codes, d, Fraction(1), 400, max_updates=3)
    assert Fraction(1, 20) + p._svt.loss.epsilon + p._eps_measure == 1
    with pytest.raises(DomainError):
        p.answer(np.full(64, 0.5))
    with pytest.raises(DomainError):
        p.answer(np.ones(10))
    measured = 0
    with pytest.raises(BudgetExceededError):
        for q in _queries(10_000):
            measured += p.answer(q).measured
    assert measured == 3
    with pytest.raises(DomainError, match="dense"):
        PrivateMultiplicativeWeights(codes, d, 1, 400, max_cells=10)


@pytest.mark.parametrize("broken", [False, True])
def test_every_answer_is_within_its_reported_bound(monkeypatch, broken):
    """β = 1e-9 per answer, 150 answers: all within their bounds except with probability
    ≤ 1.5e-7 (union bound). The broken variant answers every query from the hypothesis
    without the sparse vector's check, and misses (the data are far from uniform)."""
    d, codes = _data()
    x = marginal_counts(codes, d, d.attributes).ravel()
    p = PrivateMultiplicativeWeights(codes, d, 2, 300, max_updates=40, beta=1e-9)
    if broken:
        monkeypatch.setattr(p._svt, "ask", lambda answer: False)
    within = []
    for q in _queries(150):
        try:
            ans = p.answer(q)
        except BudgetExceededError:
            break
        within.append(abs(ans.value - q @ x) <= ans.error_bound)
    assert all(within) != broken


def test_pmw_from_a_session_debits_once_and_bounds_units(monkeypatch):
    """Query.pmw: ε debited once before the rows are read, units bounded to max_rows rows
    (PMW's sensitivity), counts by declared categories and bins; bad requests spend nothing."""
    import polars as pl

    import dpkit as dp
    from dpkit.release.synthetic import pmw as P  # noqa: N812
    from dpkit.release.synthetic.domain import Bins

    seen = {}
    real = P.PrivateMultiplicativeWeights.__init__

    def spy(self, codes, domain, epsilon, alpha, **kw):
        seen.update(rows=codes.shape[0], sensitivity=kw["sensitivity"], epsilon=epsilon)
        real(self, codes, domain, epsilon, alpha, **kw)

    monkeypatch.setattr(P.PrivateMultiplicativeWeights, "__init__", spy)
    n = 3000
    df = pl.DataFrame({"u": list(range(n)) + [0] * 5, "sex": (["F", "M"] * n)[:n] + ["F"] * 5,
                       "age": [float(20 + i % 50) for i in range(n)] + [30.0] * 5})
    spec = {"sex": ["F", "M"], "age": Bins((0.0, 40.0, 80.0))}
    s = dp.Session(df, dp.PrivacyUnit.by("u", max_rows=2), dp.PureDP(2))
    with pytest.raises(DomainError):
        s.query().group_by("sex", keys=["F", "M"]).pmw(spec, epsilon=1, alpha=50)
    with pytest.raises(DomainError):
        s.query().pmw({}, epsilon=1, alpha=50)
    with pytest.raises(DomainError):
        s.query().pmw(spec, epsilon=1, alpha=50, max_cells=3)
    assert s.spent == dp.PureDP(0) and not seen
    out = s.query().pmw(spec, epsilon=1, alpha=50)
    assert s.spent == dp.PureDP(1) and out.epsilon == 1
    assert seen == {"rows": n + 1, "sensitivity": 2, "epsilon": 1}  # unit 0: 6 rows → 2
    for ask in ({"sex": ["F"]}, {"age": (0, 40)}, {"sex": ["M"], "age": (40, 80)}, {}):
        a = out.count(**ask)
        assert a.error_bound > 0 and np.isfinite(a.value)
    with pytest.raises(DomainError, match="declared category"):
        out.count(sex=["X"])
    with pytest.raises(DomainError, match="no whole bin"):
        out.count(age=(10, 30))
    with pytest.raises(DomainError, match="unknown column"):
        out.count(height=[1])
    assert s.spent == dp.PureDP(1)


def test_median_mechanism_candidates_and_budget():
    from math import comb

    from dpkit.release.synthetic.median import MedianMechanism, candidate_databases

    c = candidate_databases(4, 3)
    assert c.shape == (comb(6, 3), 4) and (c.sum(axis=1) == 3).all()
    assert len({tuple(r) for r in c}) == c.shape[0]  # each multiset once
    with pytest.raises(DomainError, match="candidate"):
        MedianMechanism(np.zeros((1, 2), dtype=np.int64), Domain.from_dict({"a": 64, "b": 64}),
                        1, 10, size=8)


def test_median_mechanism_answers_within_its_reported_bounds():
    """Small domain (a: 4 values), data equal to a candidate up to scaling: every answer
    must fall within its reported 1 − β bound; 40 answers at β = 1e-8 each → the test fails
    wrongly with probability < 1e-6. Broken variant: pruning that keeps the far candidates
    (the median never moves) is caught by a hard query being asked repeatedly."""
    from dpkit.release.synthetic.median import MedianMechanism

    dom = Domain.from_dict({"a": 4})
    codes = np.repeat(np.arange(4), [5000, 2500, 2500, 0])[:, None]
    queries = [np.eye(4)[i] for i in range(4)] + [np.array([1.0, 1, 0, 0])]
    mm = MedianMechanism(codes, dom, 2, 400, size=4, beta=1e-8)
    exact = np.bincount(codes[:, 0], minlength=4)
    for _ in range(8):
        for q in queries:
            a = mm.answer(q)
            assert abs(a.value - q @ exact) <= a.error_bound
    assert mm.updates <= mm.update_bound
    assert mm.alive.sum() >= 1

    class Stuck(MedianMechanism):
        def _update(self, q, value, estimate):  # broken: nothing is pruned
            pass

    stuck = Stuck(codes, dom, 2, 400, size=4, beta=1e-8)
    with pytest.raises(BudgetExceededError):
        for _ in range(8):
            for q in queries:
                stuck.answer(q)
