"""Apple's count-mean sketches (dpkit.local.sketch, issue 21): exact report laws, unbiased
estimates over the hash draw, the closed-form variance, audit cases and bad input.

Every statistical test rejects a correct implementation with probability ≤ 1e-6
(tests.stats.FALSE_POSITIVE_RATE, Bonferroni where one test makes several comparisons) and is
paired with a broken variant it must reject.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from tests.stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.audit.statistics import histogram_test
from dpkit.errors import DomainError
from dpkit.local.bits import value_ids
from dpkit.local.sketch import CountMeanSketch, HadamardCountMeanSketch
from dpkit.mechanisms.registry import registered

N_LAW = 100_000
CLASSES = {"cms": CountMeanSketch, "hcms": HadamardCountMeanSketch}


def cms_law(sketch: CountMeanSketch, value: str) -> np.ndarray:
    """P[(row, report byte)] for k rows and m = 8: row uniform; bit i is 1 (+1) w.p. 1 − π at
    h_row(value) and π elsewhere, independently. Code: row·256 + byte."""
    cols = sketch.buckets(value_ids([value]))[0]
    codes = np.arange(256)
    pi = float(sketch.flip)
    law = []
    for j in range(sketch.k):
        row = np.ones(256)
        for i in range(8):
            one = 1 - pi if i == cols[j] else pi
            row *= np.where((codes >> i) & 1, one, 1 - one)
        law.append(row / sketch.k)
    return np.concatenate(law)


def hcms_law(sketch: HadamardCountMeanSketch, value: str) -> np.ndarray:
    """P[(j, l, bit)]: j, l uniform; bit = 1 (+1) w.p. 1 − π if H[l, h_j] = +1, π otherwise.
    Code: (j·m + l)·2 + bit."""
    cols = sketch.buckets(value_ids([value]))[0]
    pi = float(sketch.flip)
    law = np.empty(sketch.k * sketch.m * 2)
    for j in range(sketch.k):
        for l_ in range(sketch.m):
            plus = 1 - pi if bin(l_ & int(cols[j])).count("1") % 2 == 0 else pi
            base = (j * sketch.m + l_) * 2
            law[base + 1], law[base] = plus, 1 - plus
    return law / (sketch.k * sketch.m)


def law_pvalue(claim, reports, value: str) -> float:
    if isinstance(claim, CountMeanSketch):
        law, codes = cms_law(claim, value), reports.row * 256 + reports.bits[:, 0]
    else:
        law, codes = hcms_law(claim, value), (reports[:, 0] * claim.m + reports[:, 1]) * 2 + \
            reports[:, 2]
    return chi2_pvalue(np.asarray(codes, dtype=np.int64), np.arange(law.size), law)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_reports_follow_the_exact_law_and_a_broken_flip_is_rejected(name):
    cls = CLASSES[name]
    claim = cls(1, 3, 8)
    for value in ("apple", "pear"):
        rep = claim.randomize(np.full(N_LAW, value, dtype=object))
        assert law_pvalue(claim, rep, value) > FALSE_POSITIVE_RATE
    broken = cls(1, 3, 8, seeds=claim.seeds)
    broken.flip = 1 - claim.flip  # p and q swapped: the true bucket is flipped most often
    rep = broken.randomize(np.full(N_LAW, "apple", dtype=object))
    assert law_pvalue(claim, rep, "apple") < FALSE_POSITIVE_RATE
    weaker = cls(Fraction(3, 2), 3, 8, seeds=claim.seeds)
    rep = weaker.randomize(np.full(N_LAW, "apple", dtype=object))
    assert law_pvalue(claim, rep, "apple") < FALSE_POSITIVE_RATE


def trials(cls, truth: np.ndarray, cands: list[str], reps: int, k: int, m: int, eps=1):
    est, var = [], []
    for _ in range(reps):  # fresh hash functions every trial: unbiased over their draw
        sketch = cls(eps, k, m)
        frame = sketch.estimate(sketch.randomize(truth), cands)
        est.append(frame["estimate"].to_numpy())
        var.append(frame["std_error"].to_numpy() ** 2)
    return np.array(est), np.array(var)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_estimates_are_unbiased_over_the_hash_draw(name):
    """Small sketch (k = 4, m = 8: collisions everywhere, the m/(m − 1) correction matters),
    R = 400 trials of n = 2000: a t-test of the mean estimate per value (Bonferroni over 6
    values), against the estimator without the correction, which it rejects."""
    cands = [f"w{i}" for i in range(6)]
    freq = np.array([0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    n, reps = 2000, 400
    truth = np.repeat(np.array(cands, dtype=object), (freq * n).astype(int))
    est, _ = trials(CLASSES[name], truth, cands, reps, 4, 8)
    sd = est.std(axis=0, ddof=1)
    t = (est.mean(axis=0) - freq) / (sd / np.sqrt(reps))
    bound = stats.t.isf(FALSE_POSITIVE_RATE / 12, reps - 1)
    assert np.all(np.abs(t) < bound), t
    # broken: no collision correction, f̂ = S/n − 0 … i.e. est·(m − 1)/m + 1/m
    naive = est * 7 / 8 + 1 / 8
    t_naive = (naive.mean(axis=0) - freq) / (sd * 7 / 8 / np.sqrt(reps))
    assert np.abs(t_naive).max() > bound


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_the_reported_variance_matches_the_closed_form_and_the_mse(name):
    """Large sketch (k = 64, m = 256: the noise term dominates). R = 300 trials of n = 2000:
    R·MSE/Var ~ χ²_R two-sided per value with Var the closed form at the true counts
    (Bonferroni over 2·6 comparisons); the reported SE² averages to it within 5%."""
    cls = CLASSES[name]
    cands = [f"w{i}" for i in range(6)]
    freq = np.array([0.4, 0.25, 0.15, 0.1, 0.1, 0.0])
    n, reps = 2000, 300
    counts = freq * n
    truth = np.repeat(np.array(cands, dtype=object), counts.astype(int))
    est, var = trials(cls, truth, cands, reps, 64, 256)
    sketch = cls(1, 64, 256)
    closed = sketch.variance(n, counts, (counts ** 2).sum() - counts ** 2) / n ** 2
    alpha = FALSE_POSITIVE_RATE / 12
    ratio = ((est - freq) ** 2).sum(axis=0) / closed
    assert np.all(ratio > stats.chi2.ppf(alpha / 2, reps)), ratio / reps
    assert np.all(ratio < stats.chi2.isf(alpha / 2, reps)), ratio / reps
    assert np.allclose(var.mean(axis=0), closed, rtol=0.05)
    # broken formula: CMS without the 1/4 (or HCMS with it) is off by 4× and rejected
    wrong = closed * (4 if name == "cms" else 0.25)
    ratio_w = ((est - freq) ** 2).sum(axis=0) / wrong
    assert np.all((ratio_w < stats.chi2.ppf(alpha / 2, reps))
                  | (ratio_w > stats.chi2.isf(alpha / 2, reps)))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_audit_case_passes_and_its_broken_variant_fails(name):
    cls = CLASSES[name]
    (case,) = registered()[cls.__name__].audit()
    assert case.name == f"local_{name}"
    assert float(case.measurement.privacy_map(1).epsilon) == 1.0
    assert histogram_test(case.sample, case.x, case.x_prime, 1.0, samples=30_000).passed
    assert not histogram_test(case.broken, case.x, case.x_prime, 1.0, samples=30_000).passed


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_bad_parameters_and_input(name):
    cls = CLASSES[name]
    for args in ((0,), (-1,), (1, 0), (1, 4, 6), (1, 4, 0), (1, 4, 2**25), ("1",)):
        with pytest.raises(DomainError):
            cls(*args)
    with pytest.raises(DomainError):
        cls(1, 4, 8, seeds=np.zeros((3, 2), dtype=np.uint64))
    with pytest.raises(DomainError):
        cls(1, 4, 8, seeds=np.zeros((4, 2), dtype=np.int64))
    sketch = cls(1, 4, 8)
    rep = sketch.randomize(np.array([None, 3, "x", 2.5], dtype=object))  # any value: its text
    assert len(rep) == 4
    for cands in ([], ["a", "a"]):
        with pytest.raises(DomainError):
            sketch.estimate(rep, cands)
    with pytest.raises(DomainError):
        sketch.estimate(rep, ["a"], confidence=0)
    if name == "cms":
        with pytest.raises(DomainError):
            CountMeanSketch(1, 4, 4)  # the m-bit report needs m ≥ 8
    else:
        with pytest.raises(DomainError):
            sketch.estimate(np.array([[9, 0, 1]]), ["a"])
