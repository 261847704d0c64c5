"""dpkit.release.ranges.matrix: the matrix mechanism with HDMM's OPT_0 / OPT_⊗ strategies.

Anchors use HDMM's convention (ε = √2, so the Laplace variance 2(Δ/ε)² is Δ² per unit of
‖WA⁺‖_F²; per-query RMSE). Strategy optimisation is data-independent and seeded, so the
anchors are deterministic."""

import math
from fractions import Fraction

import numpy as np
import pytest
from release_checks import record, total_epsilon
from stats import FALSE_POSITIVE_RATE

import dpkit.release.ranges.matrix as mm
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release import measure
from dpkit.release.ranges.hierarchical import hb_branching, tree_strategy
from dpkit.release.ranges.histogram import release_histogram
from dpkit.release.workload import (
    RangeWorkload,
    all_range,
    all_range_gram,
    identity,
    prefix,
    random_ranges,
    random_rectangles,
)

SQRT2 = math.sqrt(2)


def _gram(w):
    m = w.matrix().toarray()
    return m.T @ m


def test_gram_operators_and_gradient_are_exact():
    data = np.random.default_rng(7)  # workloads and test points only
    n = 13
    w = random_ranges(n, 30, data)
    weights = data.random(len(w))
    dense = (w.matrix().toarray() * weights[:, None]).T @ w.matrix().toarray()
    assert np.allclose(mm._gram_operator(w.lo[:, 0], w.hi[:, 0], n, weights).dense(), dense)
    assert np.allclose(mm.range_gram(w.lo[:, 0], w.hi[:, 0], n, weights), dense)
    op = mm._gram_operator(all_range(n).lo[:, 0], all_range(n).hi[:, 0], n)
    assert isinstance(op, mm._AllRangeGram) and np.allclose(op.dense(), all_range_gram(n))
    assert np.allclose(op.diag, np.diag(all_range_gram(n)))
    # objective = tr((AᵀA)⁻¹WᵀW) of the explicit strategy; gradient = central differences
    theta = data.random((3, n))
    g = mm._DenseGram(dense)
    a = mm.PIdentity(theta).matrix()
    f, grad = mm._loss_and_grad(theta.ravel(), 3, n, g, 1.0)
    assert f == pytest.approx(np.trace(np.linalg.solve(a.T @ a, dense)), rel=1e-10)
    h, num = 1e-6, np.zeros(theta.size)
    for i in range(theta.size):
        e = np.zeros(theta.size)
        e[i] = h
        num[i] = (mm._loss_and_grad(theta.ravel() + e, 3, n, g, 1.0)[0]
                  - mm._loss_and_grad(theta.ravel() - e, 3, n, g, 1.0)[0]) / (2 * h)
    assert np.allclose(grad, num, rtol=1e-5, atol=1e-6 * np.abs(grad).max())


def test_anchor_all_range_1d_and_beats_identity_and_trees():
    """All ranges, n = 256, ε = √2: RMSE ≤ 5.74 (we get 5.6960); the identity gets 9.27 and
    the hierarchical trees more than OPT_0 (exact expected errors)."""
    n = 256
    w = all_range(n)
    (a,) = mm.mm_strategy((n,))
    assert a.p == 16
    ours = mm.expected_rmse(w, a, SQRT2)
    assert ours <= 5.74
    gram = all_range_gram(n)
    dense = measure.expected_rmse(None, a.matrix(), SQRT2, gram=gram, queries=len(w))
    assert dense == pytest.approx(ours, rel=1e-9)
    ident = measure.expected_rmse(None, np.eye(n), SQRT2, gram=gram, queries=len(w))
    assert ident == pytest.approx(math.sqrt(86))  # Σ range lengths / |W| = (n + 2)/3
    for b in (2, hb_branching(n), 16):
        tree = measure.expected_rmse(None, tree_strategy(n, b), SQRT2, gram=gram,
                                     queries=len(w))
        assert ours < tree, b
    assert measure.l1_sensitivity(a.matrix()) <= 1 + Fraction(1, 10**12)


def test_anchor_all_range_2d_factorised():
    """AllRange ⊗ AllRange over 256 × 256, ε = √2: RMSE ≤ 32.7 (we get 32.44), from the
    factorised formula — the 65536-cell matrices are never formed."""
    n = 256
    factors = mm.mm_strategy((n, n))
    rmse = mm.kron_expected_rmse([mm._AllRangeGram(n)] * 2, [len(all_range(n))] * 2, factors,
                                 SQRT2)
    assert rmse <= 32.7
    assert rmse == pytest.approx(mm.expected_rmse(all_range(n), factors[0], SQRT2) ** 2,
                                 rel=1e-9)


def test_prefix_against_the_svd_bound():
    """The SVD bound (Σσ)²/n bounds Δ_A²‖WA⁺‖_F² from below; it is exact for the identity
    workload. Prefix n = 256: OPT_0 is 4.43× the bound in squared error (2.10× in RMSE) —
    the bound uses L2 column norms (Li & Miklau 2012) and is loose under Laplace/L1; the
    1.1× target is NOT met (see the module report)."""
    assert mm.svd_lower_bound(identity(64)) == pytest.approx(64)
    n = 256
    w = prefix(n)
    bound = mm.svd_lower_bound(w)
    assert bound == pytest.approx(mm.svd_lower_bound(w.matrix()), rel=1e-9)
    (a,) = mm.mm_strategy((n,), w)
    err = a.error(_gram(w))
    assert bound <= err <= 4.5 * bound
    assert mm.expected_rmse(w, a, SQRT2) == pytest.approx(math.sqrt(err / n), rel=1e-9)
    for b in (2, 16):  # trees are further from the bound
        t = tree_strategy(n, b).toarray()
        tree_err = float(measure.l1_sensitivity(t)) ** 2 * np.trace(np.linalg.solve(
            t.T @ t, _gram(w)))
        assert tree_err > 1.5 * err


def test_kronecker_inference_and_sensitivity_match_dense_8x8():
    data = np.random.default_rng(3)
    w = random_rectangles((8, 8), 25, data)
    f1, f2 = mm.mm_strategy((8, 8), w, p=2, restarts=1)
    a1, a2 = f1.matrix(), f2.matrix()
    big = np.kron(a1, a2)
    y = data.normal(size=(a1.shape[0], a2.shape[0]))
    assert np.allclose(mm.kron_pinv([f1, f2], y), measure.least_squares(
        big, y.ravel()).reshape(8, 8), atol=1e-9)
    x = data.integers(0, 20, (8, 8)).astype(float)
    assert np.allclose(mm._kron_apply([f1.sparse(), f2.sparse()], x), (big @ x.ravel(
        )).reshape(y.shape))
    product = measure.l1_sensitivity(a1) * measure.l1_sensitivity(a2)
    exact = Fraction(float(np.abs(big).sum(axis=0).max()))
    assert exact * (1 - Fraction(1, 10**12)) <= product <= exact * (1 + Fraction(1, 10**12))
    # block coordinate descent never worsens the marginal start
    lo, hi = w.lo, w.hi
    rect, inv = np.unique(np.hstack([lo, hi]), axis=0, return_inverse=True)
    weights = np.bincount(inv.ravel()).astype(float)
    start = mm._rectangle_thetas(w, 2, 1, 0, 1, 1000)
    final = mm._rectangle_thetas(w, 2, 1, 0, 3, 1000)
    e0 = mm._rectangle_error(start, rect[:, :2], rect[:, 2:], weights)
    e1 = mm._rectangle_error(final, rect[:, :2], rect[:, 2:], weights)
    dense_err = np.trace(np.linalg.solve(big.T @ big, _gram(w)))
    assert e1 <= e0 and e1 == pytest.approx(dense_err, rel=1e-9)


@pytest.mark.parametrize("shape,workload", [((40,), prefix(40)), ((40,), None),
                                            ((8, 8), None),
                                            ((8, 8), random_rectangles(
                                                (8, 8), 20, np.random.default_rng(1)))])
def test_zero_noise_least_squares_returns_x(monkeypatch, shape, workload):
    monkeypatch.setattr(frontend, "noisy", lambda values, sensitivity, budget, **kw:
                        frontend.Drawn(values, frontend.noise_row(sensitivity, budget)))
    x = np.random.default_rng(2).integers(0, 50, shape)
    est = release_histogram(x, 1, "mm", workload=workload).counts
    assert np.allclose(est, x, atol=1e-8)


def _declared_vs_neighbours(monkeypatch, mechanism, x):
    """Run ``mechanism`` on x and on x + e_j for every cell; return (Σε, declared Δ, the
    largest L1 move of the measured query vector between neighbours)."""
    log = record(monkeypatch)
    mechanism(x)
    eps, delta = total_epsilon(log), log[0].sensitivity
    assert len(log) == 1
    moved = 0.0
    for j in range(x.size):
        y = x.copy().ravel()
        y[j] += 1
        mechanism(y.reshape(x.shape))
        moved = max(moved, float(np.abs(log[-1].values - log[0].values).sum()))
    return eps, delta, moved


def _broken_unnormalised(x):
    """Broken variant: the integer strategy without the column scaling, 2^20·[I; Θ],
    declared Δ = 2^20 (the normalised strategy's)."""
    (a,) = mm.mm_strategy(x.shape, None, p=2, restarts=1)
    strat = np.rint(2**20 * np.vstack([np.eye(x.size), a.theta])).astype(np.int64)
    return frontend.noisy(strat @ x, Fraction(2**20), Fraction(1)).value


def test_budget_and_sensitivity_are_respected_with_a_broken_variant(monkeypatch):
    """One measurement, Σε ≤ ε, the declared Δ is exactly the measured integer strategy's
    largest column L1 norm, and no neighbour (x + e_j) moves the queries by more than Δ.
    The broken variant (no column normalisation) fails both checks."""
    x1 = np.random.default_rng(4).integers(0, 30, 24)
    eps, delta, moved = _declared_vs_neighbours(
        monkeypatch, lambda x: release_histogram(x, Fraction(1, 2), "mm", p=2), x1)
    (a,) = mm.mm_strategy((24,), None, p=2)
    b, _ = a.integer(mm._BITS_1D)
    assert eps <= Fraction(1, 2) and eps > Fraction(1, 2) * (1 - Fraction(1, 10**9))
    assert delta == measure.l1_sensitivity(b) == int(abs(b).sum(axis=0).max())
    assert abs(delta / 2**mm._BITS_1D - 1) < Fraction(1, 2**15)
    assert moved <= delta
    x2 = np.random.default_rng(5).integers(0, 30, (4, 6))
    eps, delta, moved = _declared_vs_neighbours(
        monkeypatch, lambda x: release_histogram(x, SQRT2, "hdmm", p=1), x2)
    f1, f2 = mm.mm_strategy((4, 6), None, p=1)
    big = np.kron(f1.integer(mm._BITS_2D)[0].toarray(), f2.integer(mm._BITS_2D)[0].toarray())
    assert eps <= Fraction(SQRT2) and moved <= delta == int(np.abs(big).sum(axis=0).max())
    _, delta, moved = _declared_vs_neighbours(monkeypatch, _broken_unnormalised, x1)
    (c,) = mm.mm_strategy((24,), None, p=2, restarts=1)
    broken = np.rint(2**20 * np.vstack([np.eye(24), c.theta])).astype(np.int64)
    assert moved > delta  # the neighbour check catches the wrong declaration
    assert measure.l1_sensitivity(broken) > delta  # and so does l1_sensitivity


def _squared_error_z(estimator, runs=1000):
    """z-score of the mean total squared workload error over ``runs`` releases against the
    mean 2b²‖WA⁺‖_F² and the variance of a Laplace quadratic form, Var(ηᵀMη) =
    12b⁴ Σ M_ii² + 8b⁴ tr(M²) for M = (WA⁺)ᵀ(WA⁺), η ~ Lap(b) i.i.d. (the noise is discrete
    Laplace on the grid 2^-20 of scale b ≈ 1/ε: its moments match to ~2^-40 relative)."""
    n, eps = 48, Fraction(1)
    w = prefix(n)
    (a,) = mm.mm_strategy((n,), w, p=3)
    bmat, snapped = a.integer(mm._BITS_1D)  # the strategy actually measured: B/2^t
    wa = w.matrix().toarray() @ np.linalg.pinv(snapped.matrix())
    m = wa.T @ wa
    b = float(measure.l1_sensitivity(bmat)) / 2**mm._BITS_1D / float(eps)
    mean = 2 * b * b * np.trace(m)
    var = 12 * b**4 * (np.diag(m) ** 2).sum() + 8 * b**4 * np.trace(m @ m)
    x = np.random.default_rng(6).integers(0, 100, n)
    errs = np.array([((w.answer(estimator(x, eps, w)) - w.answer(x)) ** 2).sum()
                     for _ in range(runs)])
    return (errs.mean() - mean) / math.sqrt(var / runs)


@pytest.mark.parametrize("broken", [False, True])
def test_error_has_the_matrix_mechanism_law(monkeypatch, broken):
    """Mean squared error over 1000 releases matches 2b²‖WA⁺‖_F² (two-sided z-test at
    false-positive rate 1e-6 by the CLT). Broken variant: inference from the identity
    rows only (x̂ = s∘y₁ — unbiased but not least squares), whose error is far larger."""
    if broken:
        real_pinv = mm.PIdentity.pinv
        monkeypatch.setattr(mm.PIdentity, "pinv", lambda self, y: self.s * np.asarray(y)[
            : self.n] if np.ndim(y) == 1 else real_pinv(self, y))
    z = _squared_error_z(lambda x, eps, w: release_histogram(x, eps, "mm", workload=w,
                                                             p=3).counts)
    from scipy import stats
    p_value = 2 * stats.norm.sf(abs(z))
    assert (p_value < FALSE_POSITIVE_RATE) == broken


def test_bad_input_raises_domain_error(monkeypatch):
    log = record(monkeypatch)
    with pytest.raises(DomainError):
        release_histogram(np.ones((2, 2, 2), dtype=int), 1, "mm")
    with pytest.raises(DomainError):
        release_histogram([1, 2, 3], 1, "mm", p=0)
    with pytest.raises(DomainError):
        release_histogram([1, 2, 3], 1, "mm", restarts=0)
    with pytest.raises(DomainError):
        release_histogram([[1, 2], [3, 4]], 1, "mm", p=[1, 1, 1])
    with pytest.raises(DomainError):
        mm.matrix_mechanism(np.ones(4, dtype=np.int64), Fraction(1), prefix(5))
    with pytest.raises(DomainError):
        mm.optimize_pidentity(np.ones((2, 3)), 1)
    with pytest.raises(DomainError):
        mm.PIdentity(-np.ones((1, 3)))
    with pytest.raises(DomainError):
        mm.svd_lower_bound()
    assert log == []


def test_public_optimisers_return_normalised_strategies():
    a = mm.optimize_pidentity(all_range_gram(32), 2, restarts=2, generator=0)
    assert a.shape == (34, 32) and np.allclose(np.abs(a).sum(axis=0), 1)
    assert np.trace(np.linalg.solve(a.T @ a, all_range_gram(32))) < np.trace(
        all_range_gram(32))
    k1, k2 = mm.optimize_kron([all_range_gram(8), _gram(prefix(6))], [1, 1], restarts=1)
    assert k1.shape == (9, 8) and k2.shape == (7, 6)
    r = mm.optimize_rectangles(random_rectangles((6, 5), 10, np.random.default_rng(0)), 1,
                               restarts=1)
    assert [f.shape for f in r] == [(7, 6), (6, 5)]


# --------------------------------------------------------------------------- strategy reuse
def _snapped_delta(factor):
    b, _ = factor.integer(mm._BITS_1D)
    return measure.l1_sensitivity(b)


def test_cached_family_strategy_is_bit_identical_to_a_fresh_one():
    """Two random workloads of one family and shape: the second is a cache hit (counter,
    not timing) and gets exactly the strategy a fresh search computes for the same key —
    the same Θ bits, the same exact sensitivity of the snapped integer strategy, the same
    expected error."""
    data = np.random.default_rng(8)  # workloads only
    n = 64
    first, second = random_ranges(n, 500, data), random_ranges(n, 500, data)
    mm.strategy_cache_clear()
    (a,) = mm.mm_strategy((n,), first)
    (b,) = mm.mm_strategy((n,), second)
    info = mm.strategy_cache_info()
    assert (info["misses"], info["hits"], info["size"]) == (1, 1, 1)
    mm.strategy_cache_clear()
    (fresh,) = mm.mm_strategy((n,), second)
    assert mm.strategy_cache_info()["misses"] == 1
    assert np.array_equal(b.theta, fresh.theta) and np.array_equal(a.theta, b.theta)
    assert _snapped_delta(b) == _snapped_delta(fresh)
    assert mm.expected_rmse(second, b, 1.0) == mm.expected_rmse(second, fresh, 1.0)
    assert not b.theta.flags.writeable  # the cached value cannot be altered by a caller
    # a release hits the same entry: the search is skipped, the noise is still drawn
    x = data.integers(0, 50, n)
    release_histogram(x, 1, "mm", workload=random_ranges(n, 500, data))
    assert mm.strategy_cache_info()["hits"] == 1


def test_families_never_share_an_entry_and_structure_is_read_from_the_queries():
    """prefix n, all-range n and the uniform random family over n are three entries (a key
    on (n, query count) or on the name would merge some); a prefix workload shuffled and
    duplicated is the prefix entry; a random workload built by hand (no declared family) is
    optimised on its own queries, not served by the family entry."""
    data = np.random.default_rng(9)
    n = 24
    mm.strategy_cache_clear()
    (pre,) = mm.mm_strategy((n,), prefix(n))
    (rng_,) = mm.mm_strategy((n,), all_range(n))
    (uni,) = mm.mm_strategy((n,), random_ranges(n, 300, data))
    info = mm.strategy_cache_info()
    assert (info["misses"], info["hits"]) == (3, 0)
    assert not np.array_equal(pre.theta, rng_.theta)
    assert not np.array_equal(uni.theta, rng_.theta)  # G_all − ½I, not G_all
    (none,) = mm.mm_strategy((n,), None)  # workload=None is all ranges: the same entry
    assert np.array_equal(none.theta, rng_.theta) and mm.strategy_cache_info()["hits"] == 1
    order = data.permutation(2 * n)
    shuffled = prefix(n)
    lo = np.vstack([shuffled.lo, shuffled.lo])[order]
    hi = np.vstack([shuffled.hi, shuffled.hi])[order]
    (again,) = mm.mm_strategy((n,), RangeWorkload((n,), lo, hi))
    assert np.array_equal(again.theta, pre.theta) and mm.strategy_cache_info()["hits"] == 2
    w = random_ranges(n, 300, data)
    (own,) = mm.mm_strategy((n,), RangeWorkload(w.shape, w.lo, w.hi))
    assert mm.strategy_cache_info()["misses"] == 4 and not np.array_equal(own.theta,
                                                                          uni.theta)
    (off,) = mm.mm_strategy((n,), w, reuse=False)  # reuse=False: the queries themselves
    assert np.array_equal(off.theta, own.theta)


def test_kronecker_workloads_reuse_the_per_factor_entries():
    """Random rectangles over n × n are served by the 1-D uniform-family entry on both axes
    (no new search); a product of prefix ⊗ all-range rectangles is recognised and uses the
    prefix and all-range entries; rectangles that are no product keep their own search."""
    data = np.random.default_rng(10)
    n = 12
    mm.strategy_cache_clear()
    (uni,) = mm.mm_strategy((n,), random_ranges(n, 100, data))
    f1, f2 = mm.mm_strategy((n, n), random_rectangles((n, n), 100, data))
    assert mm.strategy_cache_info()["misses"] == 1 and mm.strategy_cache_info()["hits"] == 2
    assert np.array_equal(f1.theta, uni.theta) and np.array_equal(f2.theta, uni.theta)
    (pre,), (rng_,) = mm.mm_strategy((n,), prefix(n)), mm.mm_strategy((n,), all_range(n))
    rows, cols = prefix(n), all_range(n)
    i, j = np.meshgrid(np.arange(len(rows)), np.arange(len(cols)), indexing="ij")
    product = RangeWorkload((n, n), np.hstack([rows.lo[i.ravel()], cols.lo[j.ravel()]]),
                            np.hstack([rows.hi[i.ravel()], cols.hi[j.ravel()]]))
    before = mm.strategy_cache_info()
    g1, g2 = mm.mm_strategy((n, n), product)
    after = mm.strategy_cache_info()
    assert after["hits"] == before["hits"] + 2 and after["misses"] == before["misses"]
    assert np.array_equal(g1.theta, pre.theta) and np.array_equal(g2.theta, rng_.theta)
    mm.mm_strategy((n, n), random_rectangles((n, n), 100, data), reuse=False)
    assert mm.strategy_cache_info()["misses"] == after["misses"] + 1


def test_reused_strategy_error_is_within_goal_of_re_optimising():
    """On held-out random workloads (2,000 queries) the family strategy's exact expected
    error (measure.expected_rmse, dense) is within 1.1× in squared error of a search on the
    workload itself (measured: ≤ 1.002 in 1-D n = 64, 1.002 in 2-D 32 × 32). Deterministic:
    the workloads are fixed and the search has no randomness."""
    data = np.random.default_rng(12)
    n = 64
    for _ in range(2):
        w = random_ranges(n, 2000, data)
        (reused,), (own,) = mm.mm_strategy((n,), w), mm.mm_strategy((n,), w, reuse=False)
        dense = w.matrix().toarray()
        ratio = (measure.expected_rmse(dense, reused.matrix(), 1.0)
                 / measure.expected_rmse(dense, own.matrix(), 1.0)) ** 2
        assert ratio <= 1.1
        assert mm.expected_rmse(w, reused, 1.0) == pytest.approx(
            measure.expected_rmse(dense, reused.matrix(), 1.0), rel=1e-9)
    w2 = random_rectangles((32, 32), 2000, data)
    reused2, own2 = mm.mm_strategy((32, 32), w2), mm.mm_strategy((32, 32), w2, reuse=False)
    dense = w2.matrix().toarray()
    errors = [measure.expected_rmse(dense, np.kron(f[0].matrix(), f[1].matrix()), 1.0)
              for f in (reused2, own2)]
    assert (errors[0] / errors[1]) ** 2 <= 1.1


def test_strategy_cache_is_bounded_and_options_are_checked(monkeypatch):
    cache = mm.StrategyCache(2)
    for k in range(3):
        cache.get(k, lambda k=k: [np.full(2, float(k))])
    assert cache.info() == {"hits": 0, "misses": 3, "size": 2, "maxsize": 2}
    assert cache.get(2, lambda: [np.zeros(1)])[0][0] == 2.0  # kept: a hit
    cache.get(0, lambda: [np.full(2, 9.0)])  # dropped first (least recently used)
    assert cache.info()["misses"] == 4
    with pytest.raises(DomainError):
        mm.StrategyCache(0)
    log = record(monkeypatch)
    with pytest.raises(DomainError, match="reuse"):
        release_histogram(np.arange(4), 1, "mm", reuse="yes")
    with pytest.raises(DomainError, match="family"):
        RangeWorkload((4,), np.zeros((1, 1), np.int64), np.ones((1, 1), np.int64),
                      family="zipf")
    assert log == []
