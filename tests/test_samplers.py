"""Distribution tests of the exact samplers (χ² against the exact pmf; FPR ≤ 1e-6 each),
each paired with a mis-scaled variant that the same test must reject."""

from fractions import Fraction

import numpy as np
import pytest
from stats import (
    FALSE_POSITIVE_RATE,
    chi2_pvalue,
    discrete_gaussian_pmf,
    discrete_laplace_pmf,
)

from dpkit.core import samplers
from dpkit.errors import DomainError

N = 200_000
pytestmark = pytest.mark.slow  # large-sample statistical tests (run in CI; ~10 s)


@pytest.mark.parametrize("scale", [Fraction(1, 3), 1, Fraction(5, 2), 10])
def test_discrete_laplace_matches_pmf(scale):
    z = samplers.discrete_laplace(scale, N)
    assert z.dtype == np.int64 and z.size == N
    width = int(30 * float(scale)) + 5
    support = np.arange(-width, width + 1)
    assert chi2_pvalue(z, support, discrete_laplace_pmf(support, float(scale))) > (
        FALSE_POSITIVE_RATE)


@pytest.mark.parametrize("scale", [1, 10])
def test_discrete_laplace_test_rejects_misscaled(scale):
    z = samplers.discrete_laplace(Fraction(scale) * Fraction(11, 10), N)
    width = int(30 * scale) + 5
    support = np.arange(-width, width + 1)
    assert chi2_pvalue(z, support, discrete_laplace_pmf(support, scale)) < FALSE_POSITIVE_RATE


@pytest.mark.parametrize("sigma", [Fraction(1, 2), 1, Fraction(7, 2), 20])
def test_discrete_gaussian_matches_pmf(sigma):
    z = samplers.discrete_gaussian(sigma, N)
    width = int(12 * float(sigma)) + 3
    support = np.arange(-width, width + 1)
    assert chi2_pvalue(z, support, discrete_gaussian_pmf(support, float(sigma))) > (
        FALSE_POSITIVE_RATE)


@pytest.mark.parametrize("sigma", [1, 20])
def test_discrete_gaussian_test_rejects_misscaled(sigma):
    z = samplers.discrete_gaussian(Fraction(sigma) * Fraction(11, 10), N)
    width = int(12 * sigma) + 3
    support = np.arange(-width, width + 1)
    assert chi2_pvalue(z, support, discrete_gaussian_pmf(support, sigma)) < FALSE_POSITIVE_RATE


@pytest.mark.parametrize("scale", [Fraction(1, 2), 3])
def test_geometric_matches_pmf(scale):
    y = samplers.geometric(scale, N)
    assert y.min() >= 0
    support = np.arange(0, int(40 * float(scale)) + 5)
    pmf = np.exp(-support / float(scale))
    assert chi2_pvalue(y, support, pmf) > FALSE_POSITIVE_RATE
    wrong = np.exp(-support / (float(scale) * 1.1))
    assert chi2_pvalue(y, support, wrong) < FALSE_POSITIVE_RATE


def test_bernoulli_rational_and_exp():
    b = samplers.bernoulli(Fraction(2, 7), N)
    support = np.array([0, 1])
    assert chi2_pvalue(b.astype(int), support, np.array([5 / 7, 2 / 7])) > FALSE_POSITIVE_RATE
    assert chi2_pvalue(b.astype(int), support, np.array([0.7, 0.3])) < FALSE_POSITIVE_RATE
    gamma = Fraction(7, 3)  # integer part and fraction both exercised
    e = samplers.bernoulli_exp(gamma.numerator, gamma.denominator, size=N).astype(int)
    p = np.exp(-7 / 3)
    assert chi2_pvalue(e, support, np.array([1 - p, p])) > FALSE_POSITIVE_RATE
    q = np.exp(-2.2)
    assert chi2_pvalue(e, support, np.array([1 - q, q])) < FALSE_POSITIVE_RATE


def test_bernoulli_exp_handles_huge_rationals():
    num = np.array([(10**40 + 7) * 3] * 50_000, dtype=object)
    e = samplers.bernoulli_exp(num, 10**40 * 2).astype(int)  # γ ≈ 1.5
    p = np.exp(-1.5)
    assert chi2_pvalue(e, np.array([0, 1]), np.array([1 - p, p])) > FALSE_POSITIVE_RATE


def test_grid_round_trip_is_exact():
    k = -7
    x = np.array([0.0, 1.0, -3.5, 2.0**-7 * 5, np.inf, -np.inf])
    z = samplers.to_grid(x, k)
    assert z[:4].tolist() == [0, 128, -448, 5]
    assert z[4] == 2**62 and z[5] == -(2**62)
    assert samplers.from_grid(z[:4], k).tolist() == [0.0, 1.0, -3.5, 5 * 2.0**-7]
    with pytest.raises(DomainError):
        samplers.to_grid(np.array([np.nan]), k)


def test_grid_exponent_brackets_scale():
    for scale in (Fraction(1, 3), Fraction(1), Fraction(1000), Fraction(2**20 + 1)):
        k = samplers.grid_exponent(scale)
        assert Fraction(2) ** (k + samplers.GRID_BITS) <= scale < Fraction(2) ** (
            k + samplers.GRID_BITS + 1)


def test_bad_scales_raise():
    with pytest.raises(DomainError):
        samplers.discrete_laplace(0, 10)
    with pytest.raises(DomainError):
        samplers.discrete_laplace(Fraction(1, 3**40), 10)
    with pytest.raises(DomainError):
        samplers.discrete_gaussian(-1, 10)


@pytest.mark.parametrize("sigma", [Fraction(3, 2), 2**30])
def test_discrete_gaussian_exact_fallbacks(monkeypatch, sigma):
    """Widen the float margin so most decisions take the exact-integer branches (normally
    hit with probability ~1e-9) and check that the law is still the discrete Gaussian."""
    monkeypatch.setattr(samplers, "_TOL", 0.2)
    n = 20_000 if sigma == 2**30 else N // 4
    z = samplers.discrete_gaussian(sigma, n)
    if sigma == 2**30:  # compare in units of σ: KS against the normal law
        from stats import ks_pvalue
        assert ks_pvalue(z / float(sigma), "norm", 0, 1) > FALSE_POSITIVE_RATE
        return
    support = np.arange(-15, 16)
    assert chi2_pvalue(z, support, discrete_gaussian_pmf(support, float(sigma))) > (
        FALSE_POSITIVE_RATE)
    assert chi2_pvalue(z, support, discrete_gaussian_pmf(support, 1.8)) < FALSE_POSITIVE_RATE


def _exp_times_2_32(gamma: Fraction):
    import mpmath

    with mpmath.workprec(400):
        return mpmath.exp(-mpmath.mpf(gamma.numerator) / gamma.denominator) * 2**32


def test_exp_neg_bounds_bracket_the_exact_value():
    import mpmath

    cases = [(0, 1), (1, 1), (7, 3), (1, 10**30), (10**40 + 7, 10**40), (123456789, 2**121 + 3),
             (2**70, 3), (355, 113)]
    for n, d in cases:
        for prec in (32, 96, 200):
            lo, hi = samplers._exp_neg_bounds(n, d, prec)
            with mpmath.workprec(prec + 200):
                exact = mpmath.exp(-mpmath.mpf(n) / d) * mpmath.mpf(2) ** prec
                assert lo <= exact <= hi, (n, d, prec)
            assert hi - lo <= 2, (n, d, prec)
    assert samplers._geometric_thresholds(1, 1)[:3] == [
        int(_exp_times_2_32(Fraction(v))) for v in (1, 2, 3)]


def test_acceptance_tie_is_decided_as_the_exact_conditional():
    """A word W with exp(−γ) ∈ [W, W + 1)/2^32 can never be settled by a float: the exact
    path must accept with the conditional probability 2^32·exp(−γ) − W (≈ 0.606 here),
    not redraw the whole test (probability exp(−γ) ≈ 0.097)."""
    from scipy.stats import binomtest

    gamma = Fraction(7, 3)
    scaled = _exp_times_2_32(gamma)
    word = int(scaled)
    assert word == samplers._floor_exp_neg(7, 3, 32)
    n = 5_000
    hits = sum(samplers._LazyUniform(word, 32).below_exp(7, 3) for _ in range(n))
    assert binomtest(hits, n, float(scaled - word)).pvalue > FALSE_POSITIVE_RATE
    assert binomtest(hits, n, float(np.exp(-7 / 3))).pvalue < FALSE_POSITIVE_RATE
    assert all(samplers._LazyUniform(word - 1, 32).below_exp(7, 3) for _ in range(100))
    assert not any(samplers._LazyUniform(word + 1, 32).below_exp(7, 3) for _ in range(100))
    assert samplers._LazyUniform(0, 32).below_exp(0, 5)  # γ = 0: always below 1


def test_geometric_tie_is_decided_as_the_exact_conditional():
    """V's word equal to a threshold T_1 = ⌊2^32·exp(−θ)⌋: V ≥ 1 with probability
    2^32·exp(−θ) − T_1 (≈ 0.48 for σ = 3/2, θ = 4/7), and never V ≥ 2 (T_2 < T_1)."""
    from scipy.stats import binomtest

    sampler = samplers._gaussian_sampler(Fraction(9, 4))
    assert sampler.theta == (4, 7)
    word = sampler.thresholds[0]
    frac = float(_exp_times_2_32(Fraction(4, 7)) - word)
    n = 10_000
    v = sampler._geometric(np.full(n, word, dtype=np.uint32))
    assert set(v.tolist()) <= {0, 1}
    assert binomtest(int(v.sum()), n, frac).pvalue > FALSE_POSITIVE_RATE
    assert binomtest(int(v.sum()), n, float(np.exp(-4 / 7))).pvalue < FALSE_POSITIVE_RATE
    # W = 0: every threshold but the last (0) is above it, and the tail continues exactly
    assert (sampler._geometric(np.zeros(50, dtype=np.uint32)) >= len(sampler.thresholds) - 1
            ).all()


@pytest.mark.parametrize("p", [Fraction(5, 8), Fraction(3, 2**20), Fraction(2**63 + 1, 2**64)])
def test_bernoulli_dyadic_fast_path_is_exact(p):
    """A dyadic p takes the byte-wise path (bits rounded up to a multiple of 8); its law is
    Bernoulli(p) (χ²), and a p off by 1% is rejected (except where that is below the test's
    resolution, p = 3/2^20, which checks the rare branch and the scaling only)."""
    b = samplers.bernoulli(p, N).astype(int)
    q = float(p)
    support = np.array([0, 1])
    assert chi2_pvalue(b, support, np.array([1 - q, q])) > FALSE_POSITIVE_RATE
    if q > 0.01:
        assert chi2_pvalue(b, support, np.array([0.99 - q, q + 0.01])) < FALSE_POSITIVE_RATE
    assert samplers.bernoulli(Fraction(1), 5).all() and not samplers.bernoulli(0, 5).any()
    assert samplers.bernoulli_dyadic(1 << 16, (3, 4), 16).shape == (3, 4)
    with pytest.raises(DomainError):
        samplers.bernoulli_dyadic(3, 5, 12)


# --- chunked passes (issue 35): the law across pass boundaries, and memory per value --------

def _laplace_cells(scale: Fraction):
    """Five cells (≤ −3, −2…−1, 0, 1…2, ≥ 3) of the exact discrete Laplace law."""
    r = float(np.exp(-1 / float(scale)))
    p0 = (1 - r) / (1 + r)
    inner = p0 * (r + r * r)  # P(1 ≤ z ≤ 2) = P(−2 ≤ z ≤ −1)
    tail = (1 - p0) / 2 - inner
    return np.array([tail, inner, p0, inner, tail])


def _cell(z: np.ndarray) -> np.ndarray:
    return np.digitize(z, [-2, 0, 1, 3])  # ≤ −3 → 0, −2…−1 → 1, 0 → 2, 1…2 → 3, ≥ 3 → 4


def _boundary_pvalues(draw) -> tuple[float, float]:
    """Draw ~2·10^5 values in calls of sizes around the patched pass length (16 candidates),
    so that about one value in ten sits at a pass boundary; return the χ² p-values of (a) the
    marginal law of every value, (b) the joint law of disjoint neighbour pairs (z_2i, z_2i+1)
    against the product law (independence across boundaries). Each rejects a correct
    sampler with probability ≤ 1e-6."""
    from scipy import stats

    scale = Fraction(3)
    sizes = [15, 16, 17, 31, 32, 33]
    z = np.concatenate([draw(scale, sizes[i % 6]) for i in range(8_400)])
    q = _laplace_cells(scale)
    cells = _cell(z)
    marginal = stats.chisquare(np.bincount(cells, minlength=5), q * z.size).pvalue
    pairs = cells[: z.size // 2 * 2].reshape(-1, 2)
    joint = np.bincount(pairs[:, 0] * 5 + pairs[:, 1], minlength=25)
    expected = np.outer(q, q).ravel() * pairs.shape[0]
    return float(marginal), float(stats.chisquare(joint, expected).pvalue)


def _skips_last(size, candidates):
    """Broken: each pass leaves its last slot unwritten (zero) but counts it as filled."""
    out = np.zeros(size, dtype=np.int64)
    filled = 0
    while filled < size:
        got = candidates(samplers._CHUNK)
        take = min(got.size, size - filled)
        out[filled : filled + max(take - 1, 0)] = got[: max(take - 1, 0)]
        filled += take
    return out


def _stale_head(size, candidates):
    """Broken: each pass's first value is the previous pass's last one (a buffer not reset)."""
    out = np.empty(size, dtype=np.int64)
    filled, last = 0, None
    while filled < size:
        got = candidates(samplers._CHUNK).copy()
        if last is not None and got.size:
            got[0] = last
        take = min(got.size, size - filled)
        out[filled : filled + take] = got[:take]
        filled += take
        last = got[-1] if got.size else last
    return out


def test_chunk_boundaries_keep_the_law(monkeypatch):
    """Sizes around the pass length give i.i.d. discrete Laplace values: the marginal law and
    the independence of neighbours hold, and both broken pass loops are caught."""
    monkeypatch.setattr(samplers, "_CHUNK", 16)
    marginal, joint = _boundary_pvalues(samplers.discrete_laplace)
    assert marginal > FALSE_POSITIVE_RATE and joint > FALSE_POSITIVE_RATE
    monkeypatch.setattr(samplers, "_chunked_draw", _skips_last)
    assert _boundary_pvalues(samplers.discrete_laplace)[0] < FALSE_POSITIVE_RATE
    monkeypatch.setattr(samplers, "_chunked_draw", _stale_head)
    marginal, joint = _boundary_pvalues(samplers.discrete_laplace)
    assert joint < FALSE_POSITIVE_RATE


def _peak_extra_per_value(fn, n: int) -> float:
    """Peak traced bytes of one call beyond its int64 output, per value (tracemalloc sees
    numpy's buffers and the random bytes objects)."""
    import tracemalloc

    fn(10, 1_000)  # build the cached tables outside the measurement
    tracemalloc.start()
    try:
        out = fn(10, n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - out.nbytes) / n


@pytest.mark.parametrize("name", ["discrete_laplace", "discrete_gaussian", "geometric"])
def test_peak_memory_per_value(monkeypatch, name):
    """A 10^6-value call holds at most 24 bytes of temporaries per value beyond its output
    (deterministic: pass sizes are bounded by _CHUNK); one unchunked pass breaks the bound."""
    fn = getattr(samplers, name)
    assert _peak_extra_per_value(fn, 10**6) <= 24
    monkeypatch.setattr(samplers, "_CHUNK", 1 << 22)
    assert _peak_extra_per_value(fn, 10**6) > 24


@pytest.mark.parametrize("scale", [Fraction(200), Fraction(1000, 7)])
def test_discrete_laplace_exact_fallbacks(monkeypatch, scale):
    """Widen the float margin so every acceptance test of U that the threshold T_1 does not
    settle at once takes the exact-integer branch (normally hit with probability ~1e-9):
    the law is still the discrete Laplace, and a 10% mis-scaled pmf is rejected."""
    t, s = scale.numerator, scale.denominator
    sampler = samplers._laplace_sampler(t, s)
    assert sampler.step & (sampler.step - 1) == 0 and t < 32 * s * sampler.step <= 2 * t
    monkeypatch.setattr(samplers, "_TOL", 0.2)
    z = samplers.discrete_laplace(scale, N // 4)
    width = int(30 * float(scale))  # the mass beyond, e^-30, is no cell of its own
    support = np.arange(-width, width + 1)
    cell = (support + width) // 20  # cells of 20 values: power against a 10% mis-scaling
    bins = np.arange(cell[-1] + 1)
    for wrong, fit in ((1, True), (Fraction(11, 10), False)):
        pmf = np.bincount(cell, weights=discrete_laplace_pmf(support, float(scale * wrong)))
        p = chi2_pvalue((z + width) // 20, bins, pmf)
        assert (p > FALSE_POSITIVE_RATE) if fit else (p < FALSE_POSITIVE_RATE)


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(10), Fraction(1000, 7)])
def test_geometric_table_and_search_agree(scale):
    """Small passes search the thresholds, large ones use the 16-bit table: both give
    #{v : T_v > W} for every word W that is not a threshold (ties go to the exact path in
    both). Deterministic: words next to every threshold, and the bucket edges."""
    sampler = samplers._LaplaceSampler(scale.numerator, scale.denominator)
    th = np.array(sampler.thresholds, dtype=np.int64)
    near = np.concatenate([th - 1, th + 1, np.arange(0, 1 << 32, 1 << 16), [(1 << 32) - 1]])
    w = near[(near >= 0) & (near < 1 << 32) & ~np.isin(near, th)].astype(np.uint32)
    expected = (th[None, :] > w.astype(np.int64)[:, None]).sum(axis=1)
    assert (sampler._search(w) == expected).all()
    assert "table" not in sampler.__dict__
    big = np.resize(w, max(w.size, samplers._TABLE_MIN))  # a large pass builds the table
    assert (sampler._geometric(big) == np.resize(expected, big.size)).all()
    assert "table" in sampler.__dict__


def test_repeated_small_passes_build_the_table_and_agree():
    """A scale drawn again and again in small passes (a server's repeated release) searches
    until ``_SEARCHED_MAX`` words, then builds its table: every pass, before and after,
    gives #{v : T_v > W} for words off the thresholds. Deterministic."""
    sampler = samplers._LaplaceSampler(1000, 7)
    th = np.array(sampler.thresholds, dtype=np.int64)
    near = np.concatenate([th - 1, th + 1, np.arange(0, 1 << 32, 1 << 20)])
    w = near[(near >= 0) & (near < 1 << 32) & ~np.isin(near, th)].astype(np.uint32)
    expected = (th[None, :] > w.astype(np.int64)[:, None]).sum(axis=1)
    passes = -(-samplers._SEARCHED_MAX // w.size) + 1
    for i in range(passes):  # pass i searches while the i·|w| words before it are too few
        assert (sampler._geometric(w) == expected).all()
        assert ("table" in sampler.__dict__) == (i * w.size >= samplers._SEARCHED_MAX)
    assert "table" in sampler.__dict__
