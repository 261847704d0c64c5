"""Heavy hitters (dpkit.local.heavy_hitters, issue 21): HashedOLH's exact law and unbiased
estimator, PEM's identification, its audit case and bad input.

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
from dpkit.errors import DomainError
from dpkit.local.heavy_hitters import PEM, HashedOLH
from dpkit.mechanisms.registry import registered

N_LAW = 100_000


def shift_pvalue(claim: HashedOLH, reports: np.ndarray, x: int) -> float:
    """χ² of (y − h(x)) mod g against p at 0 and (1 − p)/(g − 1) elsewhere."""
    law = np.full(claim.g, float((1 - claim.p) / (claim.g - 1)))
    law[0] = float(claim.p)
    return chi2_pvalue(claim.shifts(reports, np.full(len(reports), x)), np.arange(claim.g), law)


@pytest.mark.parametrize("eps", [1, 4])
def test_hashed_olh_follows_its_law_and_a_broken_one_is_rejected(eps):
    claim = HashedOLH(eps)
    for x in (0, 2**32 - 1):
        assert shift_pvalue(claim, claim.randomize(np.full(N_LAW, x)), x) > FALSE_POSITIVE_RATE
    broken = HashedOLH(eps, g=claim.g)
    broken.p = 1 - claim.p  # p and q swapped (the true bucket is the rare one)
    zeros = np.zeros(N_LAW, dtype=np.int64)
    assert shift_pvalue(claim, broken.randomize(zeros), 0) < FALSE_POSITIVE_RATE
    stronger = HashedOLH(eps + 1, g=claim.g)
    assert shift_pvalue(claim, stronger.randomize(zeros), 0) < FALSE_POSITIVE_RATE


def test_hashed_olh_supports_another_value_with_probability_one_over_g():
    """Strong universality: q* = 1/g exactly (z-tests over 3 other identifiers and the input,
    each at FPR/6, so ≤ 1e-6 in all)."""
    oracle = HashedOLH(1)
    rep = oracle.randomize(np.full(N_LAW, 7))
    q = 1 / oracle.g
    for v in (8, 12345, 2**32 - 1):
        z = (oracle.supports(rep, v).sum() - N_LAW * q) / math.sqrt(N_LAW * q * (1 - q))
        assert abs(z) < stats.norm.isf(FALSE_POSITIVE_RATE / 6)
    p = float(oracle.p)  # the input itself is supported w.p. p* = p ≈ e/(e + 3)
    z = (oracle.supports(rep, 7).sum() - N_LAW * p) / math.sqrt(N_LAW * p * (1 - p))
    assert abs(z) < stats.norm.isf(FALSE_POSITIVE_RATE / 6)


def test_hashed_olh_estimator_is_unbiased_with_its_variance():
    """R = 300 trials × n = 3000: z-test of the mean and χ² of the MSE against the closed
    form, per value (Bonferroni over 2·5)."""
    oracle = HashedOLH(1)
    freq = np.array([0.5, 0.3, 0.15, 0.05, 0.0])
    ids = np.array([3, 99, 2**31, 17, 5], dtype=np.uint64)
    n, reps = 3000, 300
    truth = np.repeat(ids, (freq * n).astype(int))
    rep = oracle.randomize(np.tile(truth, reps)).reshape(reps, n, 3)
    est = np.array([oracle.unbiased(oracle.support_at(r, ids), n) for r in rep])
    var = oracle.variance(n, freq)
    alpha = FALSE_POSITIVE_RATE / 10
    z = (est.mean(axis=0) - freq) / np.sqrt(var / reps)
    assert np.all(np.abs(z) < stats.norm.isf(alpha / 2)), z
    ratio = ((est - freq) ** 2).sum(axis=0) / var
    assert np.all(ratio > stats.chi2.ppf(alpha / 2, reps)), ratio / reps
    assert np.all(ratio < stats.chi2.isf(alpha / 2, reps)), ratio / reps
    # broken: Wang et al.'s q* = 1/g applied with a wrong g (2g): biased, rejected
    p, q = float(oracle.p), 1 / (2 * oracle.g)
    bad = (np.array([oracle.support_at(r, ids) for r in rep]) / n - q) / (p - q)
    zb = (bad.mean(axis=0) - freq) / np.sqrt(var / reps)
    assert np.abs(zb).max() > stats.norm.isf(alpha / 2)


def population(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """Test data only (not noise): six heavy strings over a..q plus uniform random strings."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopq"))
    heavy = ["abc", "bbb", "cad", "q", "ppqq", "dd"]
    weights = np.array([0.12, 0.1, 0.08, 0.07, 0.06, 0.05])
    noise = np.array(["".join(r) for r in rng.choice(letters, (n, 4))], dtype=object)
    pick = rng.random(n) < weights.sum()
    noise[pick] = rng.choice(np.array(heavy, dtype=object), pick.sum(), p=weights / weights.sum())
    return noise, heavy


def test_pem_finds_the_heavy_strings_with_unbiased_counts():
    values, heavy = population(300_000, 3)
    pem = PEM(4, "abcdefghijklmnopq", 4, top_k=6, keep=10)
    frame = pem.estimate(pem.randomize(values))
    assert set(frame["value"].to_list()) == set(heavy)
    truth = {h: float(np.mean(values == h)) for h in heavy}
    z = [(r["estimate"] - truth[r["value"]]) / r["std_error"] for r in frame.iter_rows(named=True)]
    assert max(abs(v) for v in z) < stats.norm.isf(FALSE_POSITIVE_RATE / 12)
    assert frame["count"].to_numpy() == pytest.approx(frame["estimate"].to_numpy() * 300_000)


def test_pem_without_the_prefix_tree_is_caught():
    """A broken server that keeps the lowest estimates instead of the highest misses them."""
    values, heavy = population(100_000, 4)
    pem = PEM(4, "abcdefghijklmnopq", 3, top_k=6)
    rep = pem.randomize(values)
    broken = PEM(4, "abcdefghijklmnopq", 3, top_k=6)
    broken.oracle.unbiased = lambda s, n: -HashedOLH.unbiased(pem.oracle, s, n)
    assert not set(broken.estimate(rep)["value"].to_list()) & {"abc", "bbb", "q", "dd"}


def test_out_of_alphabet_symbols_truncate_the_string():
    pem = PEM(1, "abc", 3)
    idx = pem.encode(["abz", "zab", "abcd", "", "a", 7])
    end = 3
    assert idx.tolist() == [[0, 1, end], [end] * 3, [0, 1, 2], [end] * 3, [0, end, end],
                            [end] * 3]
    seq = PEM(1, ["GET", "POST"], 2)
    assert seq.encode([("GET", "PUT"), ("POST",), ("POST", "GET", "GET")]).tolist() == [
        [0, 2], [1, 2], [1, 0]]
    assert seq.decode(np.array([1, 0])) == ("POST", "GET") and pem.decode(
        np.array([0, end, end])) == "a"


def test_audit_case_passes_and_its_broken_variant_fails():
    (case,) = registered()["PEM"].audit()
    assert case.name == "local_pem"
    assert float(case.measurement.privacy_map(1).epsilon) == 1.0
    assert histogram_test(case.sample, case.x, case.x_prime, 1.0, samples=30_000).passed
    assert not histogram_test(case.broken, case.x, case.x_prime, 1.0, samples=30_000).passed


def test_bad_parameters_raise_typed_errors():
    for args in ((0, "ab", 2), (-1, "ab", 2), (1, "", 2), (1, "aa", 2), (1, "ab", 0),
                 (1, "ab", 2, 0), (1, "abcdefghijklmnop", 8), ("1", "ab", 2)):
        with pytest.raises(DomainError):
            PEM(*args)
    with pytest.raises(DomainError):
        PEM(1, "ab", 2, 3, keep=0)
    for g in (3, 1, 2**17):
        with pytest.raises(DomainError):
            HashedOLH(1, g=g)
    pem = PEM(1, "ab", 3)
    rep = pem.randomize(["a"] * 2)  # at most two of the three groups have a report
    with pytest.raises(DomainError):
        pem.estimate(rep)
    with pytest.raises(DomainError):
        pem.estimate(pem.randomize(["a"] * 300), confidence=1)
    assert HashedOLH(Fraction(1, 10)).g == 2
    for ids in (np.array([2**32]), np.array([-1]), np.array([0.5])):
        with pytest.raises(DomainError):
            HashedOLH(1).randomize(ids)
