"""Privacy maps against closed forms, output distributions, and bad input."""

import collections
import math
from fractions import Fraction

import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue, ks_pvalue

import dpkit as dp
from dpkit.core.measures import ZCDP, PureDP
from dpkit.errors import DomainError
from dpkit.mechanisms import (
    make_discrete_gaussian,
    make_discrete_laplace,
    make_exponential,
    make_gaussian,
    make_laplace,
    make_randomized_response,
    representable_scale,
    sample_exponential,
)


def test_issue_example():
    m = dp.mechanisms.make_laplace(scale=2.0)
    out = m(np.zeros(10))
    assert out.shape == (10,) and out.dtype == np.float64
    eps = m.privacy_map(1).epsilon
    assert Fraction(1, 2) <= eps < Fraction(1, 2) * (1 + Fraction(1, 1000))  # ≈ 1/2, never less


def test_privacy_maps_closed_forms():
    assert make_discrete_laplace(4).privacy_map(2) == PureDP(Fraction(1, 2))
    assert make_discrete_gaussian(2).privacy_map(1) == ZCDP(Fraction(1, 8))
    assert make_exponential(2).privacy_map(1) == PureDP(1)
    assert make_exponential(2, monotonic=True).privacy_map(1) == PureDP(Fraction(1, 2))
    assert make_randomized_response([0, 1], Fraction(3, 4)).privacy_map(1) == PureDP(
        Fraction(3, 4))
    g = make_gaussian(2.0, max_size=4)
    rho = g.privacy_map(1).rho
    assert Fraction(1, 8) <= rho < Fraction(1, 8) * (1 + Fraction(1, 10**6))
    assert make_laplace(1.0, max_size=1).privacy_map(0).epsilon > 0  # grid rounding is charged


def test_check_derives_from_map():
    m = make_discrete_laplace(2)
    assert m.check(1, PureDP(0.5)) and not m.check(1, PureDP(0.49))


def test_grid_laplace_distribution():
    m = make_laplace(3.0)
    out = np.concatenate([m(np.zeros(50_000)) for _ in range(4)])
    assert ks_pvalue(out, "laplace", 0, 3.0) > FALSE_POSITIVE_RATE
    assert ks_pvalue(out, "laplace", 0, 3.3) < FALSE_POSITIVE_RATE  # mis-scaled reference


def test_grid_laplace_misscaled_variant_rejected():
    wrong = make_laplace(3.3)
    out = np.concatenate([wrong(np.zeros(50_000)) for _ in range(4)])
    assert ks_pvalue(out, "laplace", 0, 3.0) < FALSE_POSITIVE_RATE


def test_grid_gaussian_distribution():
    out = make_gaussian(2.0, max_size=100_000)(np.zeros(100_000))
    assert ks_pvalue(out, "norm", 0, 2.0) > FALSE_POSITIVE_RATE
    wrong = make_gaussian(2.2, max_size=100_000)(np.zeros(100_000))
    assert ks_pvalue(wrong, "norm", 0, 2.0) < FALSE_POSITIVE_RATE


def test_exponential_mechanism_distribution():
    scores = np.array([0, 1, 2.5, -1])
    m = make_exponential(1)
    assert m(scores) in range(4)
    draws = sample_exponential(scores, Fraction(1), size=20_000)
    pmf = np.exp(scores) / np.exp(scores).sum()
    support = np.arange(4)
    assert chi2_pvalue(draws, support, pmf) > FALSE_POSITIVE_RATE
    wrong = np.exp(scores / 1.3) / np.exp(scores / 1.3).sum()  # a mis-scaled mechanism
    assert chi2_pvalue(draws, support, wrong) < FALSE_POSITIVE_RATE


def test_randomized_response_distribution():
    m = make_randomized_response(["a", "b", "c"], 1)
    out = m(np.array(["a"] * 60_000))
    counts = collections.Counter(out.tolist())
    codes = np.array([{"a": 0, "b": 1, "c": 2}[v] for v in out.tolist()])
    keep = math.e / (math.e + 2)
    pmf = np.array([keep, (1 - keep) / 2, (1 - keep) / 2])
    assert chi2_pvalue(codes, np.arange(3), pmf) > FALSE_POSITIVE_RATE
    naive = np.array([0.5, 0.25, 0.25])  # Warner with p = 1/2: a broken ε
    assert chi2_pvalue(codes, np.arange(3), naive) < FALSE_POSITIVE_RATE
    assert set(counts) == {"a", "b", "c"}
    assert m("b") in ("a", "b", "c")


def test_scalar_and_vector_io():
    assert isinstance(make_discrete_laplace(1)(5), int)
    assert isinstance(make_laplace(1)(5.0), float)
    assert make_discrete_gaussian(1)(np.arange(4)).shape == (4,)


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf])
def test_bad_scale(bad):
    with pytest.raises(DomainError):
        make_laplace(bad)
    with pytest.raises(DomainError):
        make_discrete_gaussian(bad)


def test_bad_inputs():
    with pytest.raises(DomainError):
        make_discrete_laplace(1)(np.array([0.5]))
    with pytest.raises(DomainError):
        make_laplace(1)(np.array([np.nan]))
    with pytest.raises(DomainError):
        make_laplace(1, max_size=3)(np.zeros(4))
    with pytest.raises(DomainError):
        make_exponential(1)(np.array([]))
    with pytest.raises(DomainError):
        make_randomized_response(["a"], 1)
    with pytest.raises(DomainError):
        make_randomized_response(["a", "b"], 1)("z")
    inf_out = make_laplace(1)(np.array([np.inf]))
    assert np.isfinite(inf_out).all()  # clamped at ±2^62 grid steps


def test_representable_scale_rounds_up():
    s = Fraction(10**20 + 1, 3**25)
    r = representable_scale(s)
    assert r >= s and r < s * (1 + Fraction(1, 2**30))
    assert representable_scale(2) == 2


def test_discrete_laplace_tail_is_exact_and_tight():
    from dpkit.core.accuracy import laplace_tail

    for scale in (0.5, 2.0, 37.0):
        for beta in (0.05, 1e-3):
            a = int(laplace_tail(scale, beta, discrete=True))
            q = math.exp(-1 / scale)
            tail = lambda k, q=q: 2 * q ** (k + 1) / (1 + q)  # noqa: E731 - P(|Z| > k)
            assert tail(a) <= beta < tail(a - 1) or a == 0


def test_permute_and_flip_distribution():
    """P(r) from McKenna & Sheldon's closed form for two candidates; a broken variant (the
    exponential mechanism's law) is rejected."""
    from dpkit.mechanisms.selection import sample_permute_and_flip

    scores = np.array([0.0, 1.0])
    p_low = 0.5 * math.exp(-1)  # PF: low is chosen iff visited first and accepted
    draws = np.array([sample_permute_and_flip(scores, Fraction(1)) for _ in range(20_000)])
    support = np.arange(2)
    assert chi2_pvalue(draws, support, np.array([p_low, 1 - p_low])) > FALSE_POSITIVE_RATE
    em = np.exp(scores) / np.exp(scores).sum()
    assert chi2_pvalue(draws, support, em) < FALSE_POSITIVE_RATE


def test_selection_privacy_maps_and_top_k():
    from dpkit.mechanisms import make_permute_and_flip, make_top_k

    assert make_permute_and_flip(4).privacy_map(1) == PureDP(Fraction(1, 2))
    top = make_top_k(3, 4)
    assert top.privacy_map(1) == PureDP(Fraction(3, 2))
    picks = top(np.array([0, 100, 50, 75, -10]))
    assert len(set(picks)) == 3 and all(0 <= p < 5 for p in picks)
    with pytest.raises(DomainError):
        make_top_k(0, 1)
    with pytest.raises(DomainError):
        top(np.array([1.0, 2.0]))


def test_geometric_and_binary_rr():
    from dpkit.mechanisms import make_binary_randomized_response, make_geometric

    assert make_geometric(0.5, sensitivity=2).privacy_map(2) == PureDP(Fraction(1, 2))
    rr = make_binary_randomized_response(1)
    out = rr(np.ones(40_000, dtype=bool))
    assert out.dtype == bool
    keep = math.e / (math.e + 1)
    assert chi2_pvalue(out.astype(int), np.arange(2), np.array([1 - keep, keep])) > (
        FALSE_POSITIVE_RATE)
    assert chi2_pvalue(out.astype(int), np.arange(2), np.array([0.25, 0.75])) < (
        FALSE_POSITIVE_RATE)
    assert rr.privacy_map(1) == PureDP(1)
    assert isinstance(rr(True), bool)


def test_sparse_vector_behaviour():
    from dpkit.errors import BudgetExceededError
    from dpkit.mechanisms import SparseVector

    sv = SparseVector(threshold=100, epsilon=50, sensitivity=1, max_positives=2)
    assert sv.loss == PureDP(50)
    # noise scales 2/25 (threshold) and 8/25 (queries): P(|noise| ≥ 40) < 1e-50
    assert [sv.ask(0), sv.ask(-5), sv.ask(200)] == [False, False, True]
    assert sv.ask(300) is True and sv.halted
    with pytest.raises(BudgetExceededError):
        sv.ask(1000)
    numeric = SparseVector(0, 50, numeric_epsilon=50)
    value = numeric.ask(1000.0)
    assert numeric.loss == PureDP(100) and abs(value - 1000.0) < 5
    with pytest.raises(DomainError):
        SparseVector(0, 1, max_positives=0)
    with pytest.raises(DomainError):
        SparseVector(0, 1).ask(float("nan"))


def test_report_noisy_max_distribution():
    from dpkit.mechanisms import make_report_noisy_max
    from dpkit.mechanisms.selection import sample_report_noisy_max

    def law(scale: float) -> np.ndarray:  # P(index 1 wins) for scores [0, 1], exact pmfs
        z = np.arange(-200, 201)
        pmf = np.exp(-np.abs(z) / scale)
        pmf /= pmf.sum()
        diff = np.convolve(pmf, pmf[::-1])  # Z0 − Z1 on −400 … 400
        d = np.arange(-400, 401)
        p1 = diff[d < 1].sum() + 0.5 * diff[d == 1].sum()
        return np.array([1 - p1, p1])

    draws = sample_report_noisy_max(np.array([0, 1]), Fraction(1), size=40_000)
    assert chi2_pvalue(draws, np.arange(2), law(1.0)) > FALSE_POSITIVE_RATE
    assert chi2_pvalue(draws, np.arange(2), law(2.0)) < FALSE_POSITIVE_RATE
    assert make_report_noisy_max(2).privacy_map(1) == PureDP(1)
    assert make_report_noisy_max(2, monotonic=True).privacy_map(1) == PureDP(Fraction(1, 2))
    assert make_report_noisy_max(2)(np.array([0.25, 10.5, 0.0])) in range(3)


def test_analytic_and_classic_gaussian_maps():
    from scipy.stats import norm

    from dpkit.mechanisms import make_approx_gaussian
    from dpkit.mechanisms.gaussian import analytic_gaussian_epsilon, classic_gaussian_epsilon

    for sigma, delta in ((1, 1e-5), (3, 1e-6), (0.5, 1e-3)):
        eps = float(analytic_gaussian_epsilon(Fraction(1), Fraction(sigma), Fraction(delta)))
        achieved = norm.cdf(0.5 / sigma - eps * sigma) - math.exp(eps) * norm.cdf(
            -0.5 / sigma - eps * sigma)
        assert achieved <= delta  # certified: δ(ε) within the target
        slightly_less = eps * (1 - 1e-6)
        worse = norm.cdf(0.5 / sigma - slightly_less * sigma) - math.exp(slightly_less) * (
            norm.cdf(-0.5 / sigma - slightly_less * sigma))
        assert worse > delta  # and tight
    classic = classic_gaussian_epsilon(Fraction(1), Fraction(10), Fraction(1, 10**5))
    assert abs(float(classic) - math.sqrt(2 * math.log(1.25e5)) / 10) < 1e-12
    with pytest.raises(DomainError):
        classic_gaussian_epsilon(Fraction(1), Fraction(1), Fraction(1, 10**5))
    m = make_approx_gaussian(6.0, 1e-6, max_size=1)
    assert m.privacy_map(1).delta <= Fraction(1, 10**6)  # the float 1e-6, rounded down
    assert m.privacy_map(1).epsilon <= make_approx_gaussian(
        6.0, 1e-6, max_size=1, analytic=False).privacy_map(1).epsilon


def test_ptr_median():
    from dpkit.core.measures import ApproxDP
    from dpkit.mechanisms import make_ptr_median
    from dpkit.mechanisms.robust import median_instability_distance

    x = np.array([1.0, 2, 3, 4, 5])
    assert median_instability_distance(x, 0, 10, 0.5, 100) == 0
    assert median_instability_distance(x, 0, 10, 1.5, 100) == 1
    assert median_instability_distance(x, 0, 10, 100, 7) == 7  # capped
    m = make_ptr_median((0, 100), 1, epsilon=2, delta=1e-6)
    assert m.privacy_map(1) == ApproxDP(4, Fraction(1e-6))
    stable = np.full(2001, 50.0)  # the median cannot move by 1 within ~1,000 substitutions
    out = [m(stable) for _ in range(20)]
    assert all(o is not None and abs(o - 50) < 15 for o in out)  # scale 1/2: P(|Z|≥15) tiny
    spread = np.arange(0, 100, 10.0)  # LS already 10 > b: the test refuses (d = 0)
    assert m(spread) is None  # refused unless Lap(1/2) > 6.9: probability 5e-7
    with pytest.raises(DomainError):
        m.privacy_map(2)


def test_sample_and_aggregate():
    from dpkit.mechanisms import make_sample_and_aggregate

    data = np.linspace(0, 10, 10_000)
    m = make_sample_and_aggregate(lambda block: block.mean(), blocks=100, bounds=(0, 10),
                                  epsilon=10)
    assert m.privacy_map(1) == PureDP(10)
    out = m(data)
    assert abs(out - 5.0) < 0.5  # scale (10/100)/10 = 0.01; block means ≈ 5 ± 0.3
    broken = make_sample_and_aggregate(lambda block: 1 / 0, blocks=10, bounds=(2, 3),
                                       epsilon=50)
    assert 1.5 < broken(data) < 2.5  # failures count as the lower bound
    with pytest.raises(DomainError):
        make_sample_and_aggregate(np.mean, blocks=1, bounds=(0, 1), epsilon=1)


def _staircase_folded_cdf(y: np.ndarray, eps: float, step: float, gamma: float) -> np.ndarray:
    """P(|X| ≤ y) for the continuous staircase with step Δ_s (Geng & Viswanath 2014)."""
    b = math.exp(-eps)
    a = (1 - b) / (2 * step * (gamma + (1 - gamma) * b))
    k = np.floor(y / step)
    r = y / step - k
    full = 2 * a * step * (gamma + (1 - gamma) * b) * (1 - b**k) / (1 - b)
    part = np.where(r < gamma, r, gamma) + np.where(r > gamma, (r - gamma) * b, 0)
    return full + 2 * a * step * b**k * part


def test_staircase_distribution():
    from scipy import stats

    from dpkit.mechanisms import make_staircase

    m = make_staircase(1, 1)
    gamma = float(m.name.split("γ=")[1].rstrip(")"))
    step = 1 + 2.0**-20  # Δ_s = (⌈Δ/g⌉ + 1)·g with g = 2^-20
    folded = np.abs(m(np.zeros(200_000)))

    def cdf(g):
        return lambda y: _staircase_folded_cdf(np.asarray(y, dtype=float), 1.0, step, g)

    assert stats.kstest(folded, cdf(gamma)).pvalue > FALSE_POSITIVE_RATE
    assert stats.kstest(folded, cdf(0.6)).pvalue < FALSE_POSITIVE_RATE  # wrong γ is caught
    assert m.privacy_map(1) == PureDP(1) and m.privacy_map(2) == PureDP(2)
    with pytest.raises(DomainError):
        make_staircase(1, 1, gamma=1.5)
