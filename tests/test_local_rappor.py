"""RAPPOR (dpkit.local.rappor, issue 21): the exact law of the permanent and instantaneous
responses, memoisation, unbiased decoding with its standard error, the ε formulas, the
audit case and bad input.

Every statistical test rejects a correct implementation with probability ≤ 1e-6
(tests.stats.FALSE_POSITIVE_RATE, Bonferroni where one test makes several comparisons) and is
paired with a broken variant it must reject.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.audit.statistics import histogram_test
from dpkit.core.numbers import log_down
from dpkit.errors import DomainError
from dpkit.local.bits import group_bit_counts
from dpkit.local.rappor import RAPPOR, RAPPORReports, audit_pair
from dpkit.mechanisms.randomized_response import response_bits
from dpkit.mechanisms.registry import registered

N_LAW = 100_000
HALF, QUARTER, THREE_Q = Fraction(1, 2), Fraction(1, 4), Fraction(3, 4)


def byte_law(bloom_bits: np.ndarray, one: Fraction, zero: Fraction) -> np.ndarray:
    """P[report byte = c] for independent bits, P[bit i = 1] = one if bloom bit i else zero."""
    law = np.ones(256)
    codes = np.arange(256)
    for i in range(8):
        pr = float(one if bloom_bits[i] else zero)
        law *= np.where((codes >> i) & 1, pr, 1 - pr)
    return law


def report_pvalue(claim: RAPPOR, reports: RAPPORReports, value: str, *, one: Fraction,
                  zero: Fraction) -> float:
    bloom = np.unpackbits(claim.bloom(0, value), bitorder="little")
    law = byte_law(bloom, one, zero)
    return chi2_pvalue(reports.bits[:, 0].astype(np.int64), np.arange(256), law)


def test_one_report_follows_the_exact_law_and_swapped_p_q_are_rejected():
    """m = 8, one cohort: bit i is 1 w.p. q* if the Bloom bit is set, p* otherwise."""
    claim = RAPPOR(8, 2, 1, HALF, QUARTER, THREE_Q)
    for value in ("a", "zebra"):
        rep = claim.randomize(np.full(N_LAW, value, dtype=object))
        assert report_pvalue(claim, rep, value, one=claim.q_star,
                             zero=claim.p_star) > FALSE_POSITIVE_RATE
    broken = RAPPOR(8, 2, 1, HALF, QUARTER, THREE_Q)
    broken.p, broken.q = broken.q, broken.p
    rep = broken.randomize(np.full(N_LAW, "a", dtype=object))
    assert report_pvalue(claim, rep, "a", one=claim.q_star,
                         zero=claim.p_star) < FALSE_POSITIVE_RATE


def test_the_permanent_response_follows_its_law():
    """With p = 0 and q = 1 the report is the permanent response: bit 1 w.p. 1 − f/2 where
    the Bloom bit is set and f/2 elsewhere; the response of f = 1/4 fails the f = 1/2 law."""
    claim = RAPPOR(8, 2, 1, HALF, 0, 1)
    rep = claim.randomize(np.full(N_LAW, "x", dtype=object))
    law = {"one": 1 - claim.f / 2, "zero": claim.f / 2}
    assert report_pvalue(claim, rep, "x", **law) > FALSE_POSITIVE_RATE
    rep = RAPPOR(8, 2, 1, QUARTER, 0, 1).randomize(np.full(N_LAW, "x", dtype=object))
    assert report_pvalue(claim, rep, "x", **law) < FALSE_POSITIVE_RATE


def test_memoisation_reveals_nothing_new_for_a_repeated_value():
    """The same (user, value) gets the identical permanent response and cohort every time; with
    p = 0, q = 1 (the report is the permanent response) the reports are identical, while new
    users and new values draw fresh responses."""
    r = RAPPOR(64, 2, 8, HALF, 0, 1)
    users = np.arange(500)
    values = np.array([f"v{u % 7}" for u in users], dtype=object)
    first = r.randomize(values, users=users)
    again = r.randomize(values, users=users)
    assert np.array_equal(first.bits, again.bits) and np.array_equal(first.cohort, again.cohort)
    prr1, coh1 = r.permanent(values, users)
    assert np.array_equal(prr1, first.bits) and np.array_equal(coh1, first.cohort)
    other = r.randomize(np.array(["w"] * 500, dtype=object), users=users)
    assert np.array_equal(other.cohort, first.cohort)  # the cohort is permanent per user
    assert not np.array_equal(other.bits, first.bits)
    fresh = r.randomize(values, users=users + 10_000)
    assert not np.array_equal(fresh.bits, first.bits)
    # with an instantaneous response, the permanent response is still the memoised one
    noisy = RAPPOR(64, 2, 8)
    a = noisy.permanent(values, users)[0]
    noisy.randomize(values, users=users)
    assert np.array_equal(noisy.permanent(values, users)[0], a)


def test_epsilons_follow_the_paper():
    """Erlingsson et al. 2014, Table 1's parameters (h = 2, f = 0.5, p = 0.5, q = 0.75):
    ε∞ = 4 ln 3 ≈ 4.39 and ε1 ≈ 1.07; the rationals are upper bounds."""
    r = RAPPOR(128, 2, 64, 0.5, 0.5, 0.75)
    assert r.epsilon_inf >= 4 * log_down(Fraction(3)) and float(r.epsilon_inf) == pytest.approx(
        4 * math.log(3), rel=1e-12)
    ps, qs = 0.3125 + 0.25, 0.3125 + 0.375  # p* = f(p + q)/2 + (1 − f)p, q* likewise
    exact = 2 * math.log(qs * (1 - ps) / (ps * (1 - qs)))
    exact_q = 2 * log_down(Fraction(11 * 7, 9 * 5))
    assert r.epsilon_one >= exact_q and float(r.epsilon_one) == pytest.approx(exact, rel=1e-12)
    assert r.epsilon == r.epsilon_one
    for eps in (0.5, 1, 4):
        one = RAPPOR.one_time(eps, 32, 2, 4)
        assert one.epsilon_one <= Fraction(eps) + Fraction(1, 10**9) and one.epsilon_inf <= (
            Fraction(eps) + Fraction(1, 10**9))
        assert float(one.epsilon_inf) == pytest.approx(eps, rel=1e-6)
    with pytest.raises(DomainError):
        RAPPOR.one_time(0)
    # rounding towards noise: f up, p up, q down to multiples of 2^-32
    odd = RAPPOR(8, 1, 1, 0.3, 0.2, 0.7)
    assert odd.f >= Fraction(0.3) and odd.p >= Fraction(0.2) and odd.q <= Fraction(0.7)
    assert odd.f.denominator <= 2**32 and odd.q.denominator <= 2**32


def trial_estimates(r: RAPPOR, truth: np.ndarray, cands: list[str], reps: int):
    n = truth.size
    rep = r.randomize(np.tile(truth, reps))
    trial = np.repeat(np.arange(reps), n)
    counts = group_bit_counts(trial * r.cohorts + rep.cohort, rep.bits, reps * r.cohorts)
    sizes = np.bincount(trial * r.cohorts + rep.cohort, minlength=reps * r.cohorts)
    est, var = [], []
    for t in range(reps):
        sl = slice(t * r.cohorts, (t + 1) * r.cohorts)
        frame = r.estimate_from_counts(counts[sl], sizes[sl], cands)
        est.append(frame["estimate"].to_numpy())
        var.append(frame["std_error"].to_numpy() ** 2)
    return np.array(est), np.array(var)


def test_least_squares_decoding_is_unbiased_with_its_standard_error():
    """R = 300 trials of n = 3000 users over 6 values (all candidates): the mean estimate is
    within a z-bound of the truth using the reported SE, and R·(empirical variance)/(mean
    reported variance) lies in the χ²_{R−1} bounds (Bonferroni over 2·6 comparisons)."""
    cands = [f"s{i}" for i in range(6)]
    freq = np.array([0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    n, reps = 3000, 300
    truth = np.repeat(np.array(cands, dtype=object), (freq * n).astype(int))
    r = RAPPOR(16, 2, 4)
    est, var = trial_estimates(r, truth, cands, reps)
    alpha = FALSE_POSITIVE_RATE / 12
    claimed = var.mean(axis=0)
    z = (est.mean(axis=0) - freq) / np.sqrt(claimed / reps)
    assert np.all(np.abs(z) < stats.norm.isf(alpha / 2)), z
    ratio = ((est - est.mean(axis=0)) ** 2).sum(axis=0) / claimed
    assert np.all(ratio > stats.chi2.ppf(alpha / 2, reps - 1)), ratio / reps
    assert np.all(ratio < stats.chi2.isf(alpha / 2, reps - 1)), ratio / reps
    # broken decoder: p* and q* as if f = 0 (forgetting the permanent response) is biased
    wrong = RAPPOR(16, 2, 4)
    wrong.p_star, wrong.q_star = wrong.p, wrong.q
    bad = np.array([wrong.estimate_from_counts(*wrong.bit_counts(r.randomize(truth)), cands)[
        "estimate"].to_numpy() for _ in range(40)])
    zb = (bad.mean(axis=0) - freq) / np.sqrt(claimed / 40)
    assert np.abs(zb).max() > stats.norm.isf(alpha / 2)


def test_decoding_detects_the_heavy_values_and_lasso_selects():
    rng = np.random.default_rng(7)  # test data only, not noise
    cands = [f"url{i}" for i in range(200)]
    weights = np.zeros(200)
    weights[:5] = [0.3, 0.2, 0.15, 0.1, 0.05]
    weights[5:] = 0.2 / 195
    values = rng.choice(np.array(cands, dtype=object), size=200_000, p=weights)
    r = RAPPOR(64, 2, 16)
    rep = r.randomize(values)
    frame = r.estimate(rep, cands)
    top = set(RAPPOR.detection_report(frame)["values"])
    assert {"url0", "url1", "url2", "url3", "url4"} <= top
    pytest.importorskip("sklearn")
    lasso = r.estimate(rep, cands, method="lasso")
    report = RAPPOR.detection_report(lasso)
    assert {"url0", "url1", "url2"} <= set(report["values"])
    assert report["detected"] < 60


def test_audit_case_passes_and_its_broken_variant_fails():
    (case,) = registered()["RAPPOR"].audit()
    assert case.name == "local_rappor" and (case.x, case.x_prime) == audit_pair()
    eps = float(case.measurement.privacy_map(1).epsilon)
    assert eps == pytest.approx(2 * math.log(0.625**2 / 0.375**2), rel=1e-9)
    assert histogram_test(case.sample, case.x, case.x_prime, eps, samples=30_000).passed
    assert not histogram_test(case.broken, case.x, case.x_prime, eps, samples=30_000).passed


def test_bad_parameters_raise_typed_errors():
    for kwargs in ({"m": 7}, {"m": 0}, {"m": 4104}, {"h": 0}, {"h": 17}, {"cohorts": 0},
                   {"f": 0}, {"f": 1.5}, {"f": -0.1}, {"p": 0.8, "q": 0.7}, {"p": 0.5, "q": 0.5},
                   {"p": -0.1}, {"q": 1.1}, {"m": "8"}, {"f": "x"}):
        with pytest.raises(DomainError):
            RAPPOR(**kwargs)
    r = RAPPOR(8, 1, 2)
    rep = r.randomize(["a", "b"])
    for cands in ([], ["a", "a"]):
        with pytest.raises(DomainError):
            r.estimate(rep, cands)
    with pytest.raises(DomainError):
        r.estimate(rep, ["a"], method="ridge")
    with pytest.raises(DomainError):
        r.estimate(rep, [str(i) for i in range(17)])  # 17 > cohorts·m = 16 under OLS
    with pytest.raises(DomainError):
        r.estimate(RAPPORReports(np.array([5]), rep.bits[:1]), ["a"])
    with pytest.raises(DomainError):
        r.randomize(["a", "b"], users=[1])


def test_any_value_is_encoded_by_its_text():
    """No fixed domain: None, numbers and strings are encoded without error; 1 and "1" are
    the same value."""
    r = RAPPOR(8, 2, 1, HALF, 0, 1)
    rep = r.randomize(np.array([None, 1, "1", 2.5, "é"], dtype=object))
    assert len(rep) == 5 and rep.bits.shape == (5, 1)
    assert np.array_equal(r.bloom(0, "1"), r.blooms(np.array([0]), [str(1)])[0])


def test_packed_bernoulli_and_group_counts():
    for prob in (Fraction(3, 4), Fraction(1431655765, 2**32), Fraction(1, 2**32)):
        bits = response_bits(prob, (20_000, 64))
        ones = int(np.unpackbits(bits).sum())
        n, p = bits.size * 8, float(prob)
        assert abs(ones - n * p) < stats.norm.isf(FALSE_POSITIVE_RATE / 6) * math.sqrt(
            n * p * (1 - p)) + 1e-9
    assert not response_bits(Fraction(0), (10, 8)).any()
    assert (response_bits(Fraction(1), (10, 8)) == 255).all()
    bits = np.packbits(np.eye(16, dtype=bool), axis=1, bitorder="little")
    counts = group_bit_counts(np.arange(16) % 2, bits, 2)
    assert counts.shape == (2, 16) and counts[0, ::2].tolist() == [1] * 8
    assert counts[0, 1::2].sum() == 0
    # the sorted path for many groups agrees with the byte histograms
    rng = np.random.default_rng(5)  # test data only
    groups = rng.integers(0, 5000, 200_000)
    bits = rng.integers(0, 256, (200_000, 3), dtype=np.uint8)
    many = group_bit_counts(groups, bits, 5000)
    direct = np.zeros((5000, 24), dtype=np.int64)
    np.add.at(direct, groups, np.unpackbits(bits, axis=1, bitorder="little"))
    assert np.array_equal(many, direct)
    by_seven = np.array([direct[np.arange(5000) % 7 == r].sum(axis=0) for r in range(7)])
    assert np.array_equal(group_bit_counts(groups % 7, bits, 7), by_seven)


def test_lasso_without_scikit_learn_says_how_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "sklearn.linear_model", None)  # import fails
    r = RAPPOR(8, 1, 2)
    with pytest.raises(ImportError, match=r"dpkit\[learn\]"):
        r.estimate(r.randomize(["a", "b"]), ["a", "b"], method="lasso")
