"""Local frequency oracles (dpkit.local, issue 21): exact output laws, unbiasedness and the
closed-form variance of each estimator, the audit cases, ``auto``'s rule and bad input.

Every statistical test rejects a correct oracle with probability ≤ 1e-6
(tests.stats.FALSE_POSITIVE_RATE; Bonferroni over the values of a domain where a test makes
several comparisons), and each law test is paired with a broken variant it must reject.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.stats import FALSE_POSITIVE_RATE, chi2_pvalue

import dpkit.local as ldp
from dpkit.audit.statistics import histogram_test
from dpkit.errors import DomainError
from dpkit.local.base import norm_sub, to_index
from dpkit.local.hadamard import fwht
from dpkit.mechanisms.randomized_response import response_coins
from dpkit.mechanisms.registry import registered

N_LAW = 100_000
NAMES = sorted(ldp.ORACLES)


def law_pvalue(oracle: ldp.FrequencyOracle, x: int, reports: np.ndarray) -> float:
    """χ² p-value of reports from input x against the oracle's exact output law."""
    if isinstance(oracle, ldp.OLH):  # (y − h(x)) mod g: p at 0, (1 − p)/(g − 1) elsewhere
        law = oracle.shift_law()
        samples = oracle.shifts(reports, np.full(len(reports), x))
    elif isinstance(oracle, ldp.GRR | ldp.HadamardResponse):
        law, samples = oracle.output_law(x), np.asarray(reports)
    else:
        law, samples = oracle.output_law(x), oracle.code(reports)
    pmf = np.array([float(v) for v in law])
    support = np.flatnonzero(pmf > 0)
    return chi2_pvalue(samples, support, pmf[support])


@pytest.mark.parametrize("name", NAMES)
def test_reports_follow_the_exact_output_law(name):
    oracle = ldp.ORACLES[name](4, 1)
    for x in (0, 3):
        assert law_pvalue(oracle, x, oracle.randomize(np.full(N_LAW, x))) > FALSE_POSITIVE_RATE


@pytest.mark.parametrize("name", NAMES)
def test_a_broken_randomizer_is_rejected(name):
    """Reports of the protocol at ε = 1.5 tested against the ε = 1 law."""
    claimed, broken = ldp.ORACLES[name](4, 1), ldp.ORACLES[name](4, Fraction(3, 2))
    assert law_pvalue(claimed, 0, broken.randomize(np.full(N_LAW, 0))) < FALSE_POSITIVE_RATE


@pytest.mark.parametrize("name", ["grr", "oue", "hadamard"])
def test_swapped_p_and_q_are_rejected(name):
    claimed, broken = ldp.ORACLES[name](4, 1), ldp.ORACLES[name](4, 1)
    broken.p, broken.q = claimed.q, claimed.p
    assert law_pvalue(claimed, 0, broken.randomize(np.full(N_LAW, 0))) < FALSE_POSITIVE_RATE


def test_olh_reports_carry_uniform_hash_seeds_and_exact_collisions():
    oracle = ldp.OLH(4, 1)
    reports = oracle.randomize(np.zeros(N_LAW, dtype=np.int64))
    a, b = reports[:, 0].astype(np.int64), reports[:, 1].astype(np.int64)
    assert a.min() >= 1 and a.max() < ldp.hashing.PRIME and b.max() < ldp.hashing.PRIME
    # a v ≠ x value is supported with probability q* exactly (z-test, two-sided)
    hits = oracle.supports(reports)[:, 1:].sum(axis=0)
    q = float(oracle.q)
    z = (hits - N_LAW * q) / math.sqrt(N_LAW * q * (1 - q))
    assert np.all(np.abs(z) < stats.norm.isf(FALSE_POSITIVE_RATE / 6))
    assert abs(float(oracle.collision) - 1 / oracle.g) < 1e-4


def trials(oracle: ldp.FrequencyOracle, truth: np.ndarray, reps: int) -> np.ndarray:
    """reps independent estimates (rows) of the frequencies of ``truth``'s population."""
    n = truth.size
    reports = oracle.randomize(np.tile(truth, reps))
    sup = oracle.supports(reports).reshape(reps, n, oracle.k).sum(axis=1)
    p, q = float(oracle.p), float(oracle.q)
    return (sup / n - q) / (p - q)


@pytest.mark.parametrize("name", NAMES)
def test_estimators_are_unbiased_with_the_closed_form_variance(name):
    """R = 600 trials of n = 2000 users over k = 6 values. Mean error: z-test against the
    closed-form variance; MSE: R·MSE/Var ~ χ²_R (f̂ is a mean of 2000 bounded independent
    terms, so normal to far better than the thresholds), two-sided. Bonferroni over the
    2k comparisons at a total FPR of 1e-6."""
    k, n, reps = 6, 2000, 600
    freq = np.array([0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    truth = np.repeat(np.arange(k), (freq * n).astype(int))
    oracle = ldp.ORACLES[name](k, 1)
    est = trials(oracle, truth, reps)
    var = oracle.variance(n, freq)
    alpha = FALSE_POSITIVE_RATE / (2 * k)
    z = (est.mean(axis=0) - freq) / np.sqrt(var / reps)
    assert np.all(np.abs(z) < stats.norm.isf(alpha / 2)), z
    ratio = ((est - freq) ** 2).sum(axis=0) / var
    assert np.all(ratio > stats.chi2.ppf(alpha / 2, reps)), ratio / reps
    assert np.all(ratio < stats.chi2.isf(alpha / 2, reps)), ratio / reps


def test_the_variance_test_rejects_a_wrong_formula():
    """The same MSE statistic against a plausible bug, (p − q) not squared in the
    denominator (about 4× OUE's variance at ε = 1), fails on every value."""
    k, n, reps = 6, 2000, 600
    truth = np.repeat(np.arange(k), n // k)
    oracle = ldp.OUE(k, 1)
    est = trials(oracle, truth, reps)
    wrong = oracle.variance(n, np.full(k, 1 / k)) * float(oracle.p - oracle.q)
    ratio = ((est - 1 / k) ** 2).sum(axis=0) / wrong
    assert np.all(ratio > stats.chi2.isf(FALSE_POSITIVE_RATE / (2 * k), reps))


def test_wang_et_al_closed_forms():
    """Var* (f → 0) equals the papers' expressions up to the 2^-32 rounding of p, q and
    (BLH) the hash family's collision probability c = 1/2 − 3.5e-6."""
    n, e, r = 1000, math.e, math.exp(0.5)
    expected = {"grr": (e + 16 - 2) / (e - 1) ** 2, "sue": r / (r - 1) ** 2,
                "oue": 4 * e / (e - 1) ** 2, "blh": (e + 1) ** 2 / (e - 1) ** 2,
                "hadamard": (e + 1) ** 2 / (e - 1) ** 2}
    for name, value in expected.items():
        assert ldp.ORACLES[name](16, 1).variance(n) * n == pytest.approx(value, rel=1e-4), name
    olh = ldp.OLH(16, 1)  # g = round(e) + 1 = 4: Var* = q(1 − q)/(p − q)² with q* ≈ 1/g
    p, q = e / (e + 3), 1 / 4
    assert olh.variance(n) * n == pytest.approx(q * (1 - q) / (p - q) ** 2, rel=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_audit_case_passes_and_its_broken_variant_fails(name):
    """The histogram test (votes = 9: a correct case fails with probability ≈ 4e-12)."""
    cls = ldp.ORACLES[name]
    (case,) = registered()[cls.__name__].audit()
    assert case.name == f"local_{name}"
    assert float(case.measurement.privacy_map(1).epsilon) == 1.0
    assert histogram_test(case.sample, case.x, case.x_prime, 1.0, samples=30_000).passed
    assert not histogram_test(case.broken, case.x, case.x_prime, 1.0, samples=30_000).passed


def test_auto_follows_wang_et_al_rule_and_picks_the_lower_variance():
    for eps in (0.5, 1, 2, 4):
        for k in (2, 3, 5, 10, 11, 16, 64, 200, 1024):
            chosen = ldp.auto(k, eps)
            assert isinstance(chosen, ldp.GRR if k < 3 * math.exp(eps) + 2 else ldp.OLH), (k, eps)
            other = ldp.OLH(k, eps) if isinstance(chosen, ldp.GRR) else ldp.GRR(k, eps)
            # OLH's integer g makes its variance differ from Var* by < 1% near the boundary
            assert chosen.variance(10**6) <= other.variance(10**6) * 1.01, (k, eps)
    assert isinstance(ldp.auto(10, 1), ldp.GRR) and isinstance(ldp.auto(11, 1), ldp.OLH)


@pytest.mark.parametrize("name", NAMES)
def test_parameters_are_validated_with_typed_errors(name):
    cls = ldp.ORACLES[name]
    for eps in (0, -1, 0.0):
        with pytest.raises(DomainError):
            cls(4, eps)
    for k in (1, 0, -3, 2.5, "4"):
        with pytest.raises(DomainError):
            cls(k, 1)
    with pytest.raises(DomainError):
        cls(4, 1, fallback=4)
    with pytest.raises(DomainError):
        ldp.auto(1, 1)


def test_out_of_domain_values_are_replaced_by_the_fallback():
    bad = np.array([-1, 7, 2.5, float("nan"), None, "x", 3, 1.0, True], dtype=object)
    assert to_index(bad, 4, fallback=2).tolist() == [2, 2, 2, 2, 2, 2, 3, 1, 1]
    assert to_index(np.array([-1, 0, 4, 3]), 4).tolist() == [0, 0, 0, 3]
    assert to_index(np.array([np.nan, 1.0, 1.5, np.inf]), 4, 3).tolist() == [3, 1, 3, 3]
    for name in NAMES:  # no error, and the reports follow the fallback's law exactly
        oracle = ldp.ORACLES[name](4, 1, fallback=2)
        reports = oracle.randomize(np.full(N_LAW // 2, -7))
        assert law_pvalue(oracle, 2, reports) > FALSE_POSITIVE_RATE


def test_norm_sub_is_the_projection_onto_the_simplex():
    raw = np.array([0.5, 0.4, -0.1, 0.05, 0.3])
    out = norm_sub(raw)
    assert out.sum() == pytest.approx(1) and out.min() >= 0
    assert out[2] == 0 and np.allclose(np.diff(out[[0, 1, 4]]), np.diff(raw[[0, 1, 4]]))
    oracle = ldp.GRR(5, 1)
    frame = oracle.estimate(oracle.randomize(np.zeros(1000, dtype=int)), postprocess="norm-sub")
    assert frame["estimate"].sum() == pytest.approx(1) and frame["estimate"].min() >= 0
    assert set(frame.columns) == {"value", "estimate", "std_error", "ci_low", "ci_high",
                                  "unbiased"}
    with pytest.raises(DomainError):
        oracle.estimate(oracle.randomize(np.zeros(10, dtype=int)), postprocess="clip")


def test_confidence_intervals_cover_at_their_level():
    """95% CIs from 400 trials × 6 values: coverage ≥ 0.9 (binomial tail < 1e-6)."""
    k, n, reps = 6, 2000, 400
    truth = np.repeat(np.arange(k), n // k)
    oracle = ldp.OUE(k, 1)
    reports = oracle.randomize(np.tile(truth, reps)).reshape(reps, -1, k)
    covered = 0
    for block in reports:
        frame = oracle.estimate(block)
        covered += int(((frame["ci_low"] <= 1 / k) & (1 / k <= frame["ci_high"])).sum())
    assert covered / (reps * k) > 0.9


def test_exact_helpers():
    draws = response_coins(Fraction(1431655765, 2**32), 200_000)  # ⌊2^32/3⌋ / 2^32
    p = 1431655765 / 2**32
    z = (draws.sum() - 200_000 * p) / math.sqrt(200_000 * p * (1 - p))
    assert abs(z) < stats.norm.isf(FALSE_POSITIVE_RATE / 2)
    assert response_coins(0, 1000).sum() == 0 and response_coins(1, 10).all()
    h = np.array([[1]])
    for _ in range(3):
        h = np.block([[h, h], [h, -h]])
    x = np.arange(8) ** 2
    assert np.array_equal(fwht(x), h @ x)
    hr = ldp.HadamardResponse(5, 1)
    reports = hr.randomize(np.arange(5).repeat(50))
    assert np.array_equal(hr.support(reports), hr.supports(reports).sum(axis=0))
    olh = ldp.OLH(37, 2)
    reports = olh.randomize(np.arange(37).repeat(30))
    assert np.array_equal(olh.support(reports), olh.supports(reports).sum(axis=0))
