"""Microsoft's telemetry protocols (dpkit.local.telemetry, issue 21 part B): exact output
laws with broken variants, unbiasedness and the closed-form variance, memoisation, the audit
cases and bad input.

Every statistical test rejects a correct protocol with probability ≤ 1e-6
(tests.stats.FALSE_POSITIVE_RATE, Bonferroni-split where a test makes several comparisons).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.stats import FALSE_POSITIVE_RATE, chi2_pvalue

import dpkit.local as ldp
from dpkit.audit import run_audit
from dpkit.errors import DomainError
from dpkit.mechanisms.registry import registered

N_LAW = 100_000
FPR = FALSE_POSITIVE_RATE


def bit_pvalue(bits: np.ndarray, p_one: float) -> float:
    return chi2_pvalue(bits.astype(np.int64), np.array([0, 1]), np.array([1 - p_one, p_one]))


def onebit_law(mech: ldp.OneBitMean, x: float) -> float:
    p, q = float(mech.p), float(mech.q)
    return q + x / mech.m_float * (p - q)


@pytest.mark.parametrize("x", [0.0, 2.5, 10.0])
def test_onebitmean_follows_its_exact_law_and_a_swapped_p_q_is_rejected(x):
    mech = ldp.OneBitMean(10, 1)
    assert bit_pvalue(mech.randomize(np.full(N_LAW, x)), onebit_law(mech, x)) > FPR / 3
    if x != 5.0:
        broken = ldp.OneBitMean(10, 1)
        broken.p, broken.q = mech.q, mech.p
        assert bit_pvalue(broken.randomize(np.full(N_LAW, x)), onebit_law(mech, x)) < FPR


def dbitflip_codes(buckets: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """(sorted bucket set, bits in bucket order) as one integer per report (k = 4, d = 2)."""
    order = np.argsort(buckets, axis=1)
    b = np.take_along_axis(bits, order, axis=1).astype(np.int64)
    s = np.sort(buckets, axis=1)
    return (s[:, 0] * 4 + s[:, 1]) * 4 + b[:, 0] + 2 * b[:, 1]


def dbitflip_law(mech: ldp.DBitFlip, x: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact law of a report (k = 4, d = 2): a uniform pair, independent bits."""
    p, q = mech.p, mech.q
    codes, probs = [], []
    for a, b in itertools.combinations(range(4), 2):
        for ba, bb in itertools.product((0, 1), repeat=2):
            pa, pb = (p if a == x else q), (p if b == x else q)
            prob = Fraction(1, 6) * (pa if ba else 1 - pa) * (pb if bb else 1 - pb)
            codes.append((a * 4 + b) * 4 + ba + 2 * bb)
            probs.append(float(prob))
    return np.array(codes), np.array(probs)


def test_dbitflip_follows_its_exact_law_and_a_broken_epsilon_is_rejected():
    mech = ldp.DBitFlip(4, 1, d=2)
    support, pmf = dbitflip_law(mech, 1)
    assert chi2_pvalue(dbitflip_codes(*mech.randomize(np.full(N_LAW, 1))), support, pmf) > FPR
    broken = ldp.DBitFlip(4, 2, d=2)
    assert chi2_pvalue(dbitflip_codes(*broken.randomize(np.full(N_LAW, 1))), support,
                       pmf) < FPR


def test_one_memoised_collection_has_the_one_shot_law():
    """Over users, one collection of a memoised population has the one-shot law: 1BitMean's
    bit is Bernoulli(q + (x/m)(p − q)) marginally over α and the memo (x = 3.3 is not a
    rounding point), dBitFlip's report is the one-shot report."""
    mech = ldp.OneBitMean(10, 1)
    client = mech.memoized(N_LAW, s=4)
    assert bit_pvalue(client.collect(np.full(N_LAW, 3.3)), onebit_law(mech, 3.3)) > FPR / 2
    flip = ldp.DBitFlip(4, 1, d=2)
    support, pmf = dbitflip_law(flip, 2)
    reports = flip.memoized(N_LAW).collect(np.full(N_LAW, 2))
    assert chi2_pvalue(dbitflip_codes(*reports), support, pmf) > FPR / 2


def test_the_same_value_reported_again_reveals_nothing_new():
    """Memoisation: a repeated value (or a change that keeps the memo key) gives the very
    same report, so the transcript is a function of one draw per key."""
    n = 5000
    values = np.linspace(0, 10, n)
    client = ldp.OneBitMean(10, 1).memoized(n, s=5)
    first = client.collect(values)
    assert all(np.array_equal(first, client.collect(values)) for _ in range(5))
    points = client.points(values)
    nudged = np.clip(values + 1e-3, 0, 10)
    same = client.points(nudged) == points
    assert same.mean() > 0.99  # α-point rounding: a small drift rarely changes the point
    assert np.array_equal(client.collect(nudged)[same], first[same])
    flip = ldp.DBitFlip(16, 1, d=3)
    memo = flip.memoized(n)
    v = np.arange(n) % 16
    b0, r0 = memo.collect(v)
    # a value moving among buckets the user does not report on changes nothing
    outside = ~(memo.buckets == v[:, None]).any(axis=1)
    other = np.where(outside, (v + 1) % 16, v)
    still = outside & ~(memo.buckets == other[:, None]).any(axis=1)
    b1, r1 = memo.collect(np.where(still, other, v))
    assert np.array_equal(b0, b1) and np.array_equal(r0, r1)
    assert still.sum() > n / 2


def test_without_memoisation_repeated_reports_average_the_noise_away():
    """The contrast that motivates memoisation: fresh reports of one user's value, averaged
    over 400 collections, reveal it (here the memoised average stays a single bit)."""
    mech = ldp.OneBitMean(1, 1)
    fresh = np.mean([mech.randomize(np.array([1.0, 0.0])) for _ in range(400)], axis=0)
    assert fresh[0] > fresh[1]  # 400 fresh bits: means 0.73 vs 0.27, apart by > 20 SEs
    client = mech.memoized(2, s=1)
    memo = np.mean([client.collect(np.array([1.0, 0.0])) for _ in range(400)], axis=0)
    assert set(memo.tolist()) <= {0.0, 1.0}


def z_and_chi2(est: np.ndarray, truth: np.ndarray, var: np.ndarray, alpha: float) -> None:
    """Mean error z-test and R·MSE/Var ~ χ²_R, two-sided, each at level alpha/2 per value."""
    reps = est.shape[0]
    z = (est.mean(axis=0) - truth) / np.sqrt(var / reps)
    assert np.all(np.abs(z) < stats.norm.isf(alpha / 4)), z
    ratio = ((est - truth) ** 2).sum(axis=0) / var
    assert np.all(ratio > stats.chi2.ppf(alpha / 4, reps)), ratio / reps
    assert np.all(ratio < stats.chi2.isf(alpha / 4, reps)), ratio / reps


@pytest.mark.parametrize("memoized", [False, True])
def test_onebitmean_is_unbiased_with_the_closed_form_variance(memoized):
    n, reps, m = 2000, 500, 40.0
    values = np.linspace(0, m, n) ** 1.5 / m**0.5
    mech = ldp.OneBitMean(m, 1)
    population = np.tile(values, reps)
    bits = (mech.memoized(n * reps, s=8).collect(population) if memoized
            else mech.randomize(population)).reshape(reps, n)
    p, q = float(mech.p), float(mech.q)
    est = m * (bits.mean(axis=1) - q) / (p - q)
    z_and_chi2(est[:, None], np.array([values.mean()]), np.array([mech.variance(values)]),
               FPR)
    frame = mech.estimate(bits[0])
    assert frame["n"][0] == n and frame["std_error"][0] <= np.sqrt(
        m**2 / (4 * n * (p - q) ** 2)) + 1e-12
    assert mech.hoeffding(n, 0.05) > 1.9 * frame["std_error"][0]


@pytest.mark.parametrize("memoized", [False, True])
def test_dbitflip_is_unbiased_with_the_closed_form_variance(memoized):
    k, d, n, reps = 6, 2, 2000, 400
    freq = np.array([0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    truth = np.repeat(np.arange(k), (freq * n).astype(int))
    mech = ldp.DBitFlip(k, 1, d=d)
    population = np.tile(truth, reps)
    buckets, bits = (mech.memoized(n * reps).collect(population) if memoized
                     else mech.randomize(population))
    est = np.array([mech.estimate((buckets[i * n:(i + 1) * n], bits[i * n:(i + 1) * n]))
                    ["estimate"].to_numpy() for i in range(reps)])
    z_and_chi2(est, freq, mech.variance(n, freq), FPR / k)


def test_the_variance_test_rejects_a_wrong_formula():
    """dBitFlip's variance without the k/d factor is rejected by the same χ² statistic."""
    k, d, n, reps = 6, 2, 2000, 400
    truth = np.repeat(np.arange(k), n // k)
    mech = ldp.DBitFlip(k, 1, d=d)
    buckets, bits = mech.randomize(np.tile(truth, reps))
    est = np.array([mech.estimate((buckets[i * n:(i + 1) * n], bits[i * n:(i + 1) * n]))
                    ["estimate"].to_numpy() for i in range(reps)])
    wrong = mech.variance(n, np.full(k, 1 / k)) * d / k
    ratio = ((est - 1 / k) ** 2).sum(axis=0) / wrong
    assert np.all(ratio > stats.chi2.isf(FPR / (2 * k), reps))


@pytest.mark.parametrize("name", ["OneBitMean", "DBitFlip"])
def test_audit_cases_pass_and_their_broken_variants_are_flagged(name):
    """One-shot (broken: ε = 2 under the claim ε = 1) and memoised (broken: fresh reports at
    every collection) cases; the audit's ε lower bound is at confidence 1 − 1e-6."""
    cases = registered()[name].audit()
    assert len(cases) == 2
    for case in cases:
        ok = run_audit(case, 30_000, confidence=1 - FPR)
        assert ok.histogram_passed and ok.lower_bound <= ok.claimed_epsilon == 1.0, case.name
        bad = run_audit(case, 30_000, broken=True, confidence=1 - FPR)
        assert (not bad.histogram_passed) or bad.lower_bound > 1.0, case.name


def test_bad_input_follows_the_documented_rules():
    mech = ldp.OneBitMean(10, 1, fallback=5)
    raw = np.array([-3, 14, np.nan, np.inf, 2.5], dtype=np.float64)
    assert mech.values(raw).tolist() == [0.0, 10.0, 5.0, 5.0, 2.5]
    assert mech.values(np.array([None, "x", 7, 1.5], dtype=object)).tolist() == [5, 5, 7, 1.5]
    assert mech.randomize(np.array([None, "x"], dtype=object)).shape == (2,)
    flip = ldp.DBitFlip(4, 1, d=2, fallback=3)
    b, r = flip.randomize(np.array([9, -1, None], dtype=object))
    assert b.shape == r.shape == (3, 2)
    for eps in (0, -1, 0.0):
        with pytest.raises(DomainError):
            ldp.OneBitMean(10, eps)
        with pytest.raises(DomainError):
            ldp.DBitFlip(4, eps)
    for bad in ({"m": 0}, {"m": -1}, {"m": 10, "fallback": 11}, {"m": 10, "fallback": None}):
        with pytest.raises(DomainError):
            ldp.OneBitMean(bad["m"], 1, **({"fallback": bad["fallback"]} if "fallback" in bad
                                           else {}))
    for k, d in ((1, 1), (4, 0), (4, 5), (4, 1.5)):
        with pytest.raises(DomainError):
            ldp.DBitFlip(k, 1, d=d)
    with pytest.raises(DomainError):
        mech.memoized(3, s=0)
    with pytest.raises(DomainError):
        mech.memoized(3).collect(np.zeros(4))
    with pytest.raises(DomainError):
        flip.memoized(3).collect(np.zeros(2, dtype=int))
    with pytest.raises(DomainError):
        mech.estimate(np.zeros(0, dtype=bool))
    with pytest.raises(DomainError):
        mech.estimate(np.zeros(3, dtype=bool), confidence=1.5)
