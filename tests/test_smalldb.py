"""SmallDB, the net mechanism (dpkit.release.synthetic.smalldb; Blum, Ligett & Roth 2008,
Dwork & Roth §4.1).

Attack: the exponential mechanism over small databases is only private if every candidate's
score moves by at most the Δ it is calibrated with, and only useful if the score is the
negated error. The exact-law test enumerates the six candidates of a 3-cell universe at
m = 2 with two queries and checks each candidate's frequency against the exponential
mechanism's probability by an exact two-sided binomial test, Bonferroni over the six
(false-positive rate ≤ 1e-6); two broken variants (scores not negated; the sensitivity taken
as D&R's 1/n-normalised 1 instead of the integer score's m) must fail it. The audit case
(dpkit audit) is run with its broken variant. Plan-time refusals happen before any record is
read or budget spent.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy.stats import binomtest

import dpkit as dp
from dpkit.audit import run_audit
from dpkit.errors import BaselineWarning, ColumnError, DomainError
from dpkit.mechanisms.registry import audit_cases
from dpkit.release.synthetic import smalldb as module
from dpkit.release.synthetic.iterative import LinearQueries
from dpkit.release.synthetic.median import candidate_databases
from dpkit.release.synthetic.smalldb import SmallDBPlan, dr_size, plan_smalldb, smalldb

FPR = 1e-6
X = np.array([5, 2, 1])  # n = 8 records over 3 cells
QUERIES = LinearQueries.from_matrix([[1, 0, 0], [0, 1, 1]])
DRAWS = 3000


def exact_law(epsilon: float, m: int = 2) -> np.ndarray:
    """P[y] ∝ exp(ε·u(y)/(2m)), u(y) = −max_q |m·q(x) − n·q(y)|, by hand (not the module's
    scorer): the candidates in candidate_databases' order."""
    cand = candidate_databases(3, m)
    qx, n = np.array([X[0], X[1] + X[2]]), X.sum()
    qy = np.stack([cand[:, 0], cand[:, 1] + cand[:, 2]], axis=1)
    u = -np.abs(m * qx - n * qy).max(axis=1)
    w = np.exp(epsilon * u / (2 * m))
    return w / w.sum()


def law_pvalue(epsilon: float) -> float:
    """Bonferroni-adjusted smallest exact binomial p-value of the candidates' frequencies
    over DRAWS full releases (each one plan, enumeration, scoring and draw)."""
    cand = candidate_databases(3, 2)
    index = {tuple(c): i for i, c in enumerate(cand)}
    counts = np.zeros(len(cand), dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BaselineWarning)
        for _ in range(DRAWS):
            counts[index[tuple(smalldb(X, QUERIES, epsilon, size=2).synthetic)]] += 1
    law = exact_law(epsilon)
    p = min(binomtest(int(k), DRAWS, float(q)).pvalue for k, q in zip(counts, law, strict=True))
    return min(1.0, p * len(law))


def test_each_candidate_has_the_exponential_mechanisms_probability():
    assert law_pvalue(1.0) >= FPR  # fails a correct sampler with probability ≤ 1e-6


def test_scores_not_negated_are_caught(monkeypatch):
    real = module.smalldb_scores
    monkeypatch.setattr(module, "smalldb_scores", lambda *a: -real(*a))
    assert law_pvalue(1.0) < FPR


def test_the_normalised_sensitivity_is_caught(monkeypatch):
    """Broken: Δ = 1 (D&R's 1/n on normalised queries, applied to the integer score without
    its factor m)."""
    monkeypatch.setattr(SmallDBPlan, "score_sensitivity", property(lambda self: 1))
    assert law_pvalue(1.0) < FPR


def test_the_score_moves_by_at_most_m_per_record():
    """Δu = m for every record added, removed or substituted (module docstring), checked
    exhaustively on a small universe; and it is attained."""
    queries = LinearQueries.from_matrix(np.tril(np.ones((3, 3))))
    for m in (1, 2, 3):
        cand = candidate_databases(3, m)
        worst = 0
        for x in np.ndindex(3, 3, 3):
            x = np.array(x)
            base = module.smalldb_scores(x, queries, cand)
            for z in range(3):
                up = x.copy()
                up[z] += 1
                moved = np.abs(module.smalldb_scores(up, queries, cand) - base).max()
                worst = max(worst, int(moved))
                for w in range(3):  # substitute a record of cell z by one of cell w
                    if x[z] and w != z:
                        sub = x.copy()
                        sub[z] -= 1
                        sub[w] += 1
                        moved = np.abs(module.smalldb_scores(sub, queries, cand) - base).max()
                        worst = max(worst, int(moved))
        assert worst == m


def test_the_audit_case_passes_and_its_broken_variant_is_caught():
    case = next(c for c in audit_cases() if c.name == "smalldb")
    ok = run_audit(case, 50_000, confidence=1 - 1e-6)
    assert ok.histogram_passed and ok.lower_bound <= ok.claimed_epsilon
    broken = run_audit(case, 50_000, broken=True, confidence=1 - 1e-6)
    assert (not broken.histogram_passed) or broken.lower_bound > broken.claimed_epsilon


# -- size, refusals, bounds ---------------------------------------------------------------

def test_dr_size_is_the_theorems_m():
    assert dr_size(10, 0.5) == math.ceil(math.log(10) / 0.25) == 10
    # |Q| ≤ 2: D&R's ln|Q|/α² misses Lemma 4.3's condition; Hoeffding's least m is used
    assert dr_size(1, 0.5) == math.floor(math.log(2) / 0.5) + 1 == 2
    m = dr_size(2, 0.1)
    assert 4 * math.exp(-2 * m * 0.01) < 1 <= 4 * math.exp(-2 * (m - 1) * 0.01)


def test_plan_time_refusals_name_the_fix():
    with pytest.raises(DomainError, match="alpha .* or size"):
        plan_smalldb(3, 2, 1)
    with pytest.raises(DomainError, match="smaller size .*fewer cells"):
        plan_smalldb(12, 10, 1, size=30)
    with pytest.raises(DomainError, match="fewer cells"):
        plan_smalldb(2_000_000, 10, 1, size=1)
    for bad in ({"epsilon": 0}, {"alpha": 0}, {"alpha": 2}, {"beta": 1}, {"size": 0},
                {"sensitivity": 0}, {"max_candidates": True}):
        kwargs = {"epsilon": 1, "alpha": 0.3, **bad}
        with pytest.raises(DomainError):
            plan_smalldb(3, 2, kwargs.pop("epsilon"), advise=False, **kwargs)


def test_the_default_size_is_capped_to_the_enumeration_and_says_so():
    with pytest.warns(BaselineWarning, match="capped"):
        plan = plan_smalldb(12, 20, 1, alpha=0.1, max_candidates=100_000)
    assert plan.capped and plan.size < dr_size(20, 0.1)
    assert math.comb(12 + plan.size - 1, plan.size) <= 100_000
    assert math.comb(12 + plan.size, plan.size + 1) > 100_000
    small = plan_smalldb(3, 20, 1, alpha=0.5, advise=False)
    assert not small.capped and small.size == dr_size(20, 0.5)


def test_answers_are_within_the_reported_bound():
    """Each release is within bound(n) with probability ≥ 1 − β (β = 1e-8, 20 releases:
    fails a correct mechanism with probability ≤ 2e-7); the synthetic database has m rows
    and its answers are its own normalised counts."""
    rng = np.random.default_rng(37)  # the data only, never noise
    x = rng.integers(0, 300, 8)
    queries = LinearQueries.from_matrix(np.tril(np.ones((8, 8))))
    truth = queries.answer(x) / x.sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BaselineWarning)
        for _ in range(20):
            out = smalldb(x, queries, 1, alpha=0.25, beta=1e-8, max_candidates=50_000)
            assert out.synthetic.sum() == out.plan.size
            assert np.allclose(out.answers, queries.answer(out.synthetic) / out.plan.size)
            assert np.abs(out.answers - truth).max() <= out.bound(int(x.sum()))
    assert out.theorem_bound(int(x.sum())) > 0


def test_the_baseline_warning_comes_before_the_draw():
    with pytest.warns(BaselineWarning, match="Identity"):
        smalldb(X, QUERIES, 1, size=2)


# -- the session route -------------------------------------------------------------------

TABLE = pl.DataFrame({"sex": ["F", "M", "M", "F", "M", "M"] * 5,
                      "old": [0, 1, 1, 0, 0, 1] * 5, "id": list(range(30))})
SPEC = {"sex": ["F", "M"], "old": [0, 1]}


def test_publish_smalldb_debits_once_and_releases_m_rows():
    session = dp.Session(TABLE, dp.PrivacyUnit.rows(), dp.PureDP(2))
    with pytest.warns(BaselineWarning):
        out = session.query().publish.smalldb(SPEC, [("sex",), ("old",)], epsilon=1, size=4)
    assert out.table.shape == (4, 2) and set(out.table["sex"]) <= {"F", "M"}
    assert session.accountant.spent == dp.PureDP(1)
    record = session.last_release
    assert record.loss == dp.PureDP(1)
    assert record.noise[0].sensitivity == 4 and "smalldb" in record.description


def test_publish_smalldb_refuses_before_the_debit():
    session = dp.Session(TABLE, dp.PrivacyUnit.rows(), dp.PureDP(2))
    with pytest.raises(DomainError, match="smaller size"):
        session.query().publish.smalldb(SPEC, [("sex", "old")], epsilon=1, size=5000,
                                        max_candidates=1000)
    with pytest.raises(ColumnError):
        session.query().publish.smalldb(SPEC, [("nope",)], epsilon=1, size=2)
    assert session.accountant.spent == dp.PureDP(0)


def test_publish_smalldb_scales_the_sensitivity_by_the_units_rows():
    session = dp.Session(TABLE, dp.PrivacyUnit.by("id", 3), dp.PureDP(2))
    with pytest.warns(BaselineWarning):
        out = session.query().publish.smalldb(SPEC, [("sex",)], epsilon=1, size=2)
    assert out.plan.sensitivity == 3 and out.plan.score_sensitivity == 6
    assert session.last_release.noise[0].sensitivity == 6
    assert session.last_release.noise[0].scale == Fraction(12)  # 2Δ/ε
