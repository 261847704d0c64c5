"""2-D histogram algorithms of dpkit.release.ranges.grid2d (quadtree, UG, AG, k-d tree).

(a) privacy: recorded Σε ≤ ε, and — replaying the base run's noisy outputs so that every
    data-dependent choice (grid sizes, second-level splits, k-d partition) is the same, as in
    the adaptive-composition argument — each measured vector moves by at most its declared
    sensitivity between neighbouring histograms (one record added to / removed from a cell);
    broken variants (no budget split, doubled counts) are caught;
(b) deterministic parts: inference equals dense weighted least squares, zero noise returns
    the truth, spreading preserves totals, the grids / partitions have the documented shape;
(c) accuracy: the error of a fixed range query is a fixed linear combination Σ_j c_j Z_j of
    the independent discrete Laplace noises (c_j from an independent dense least-squares
    computation in this file), so a Chernoff bound with the exact discrete Laplace MGF gives
    u with P(|error| ≥ u) ≤ 0.1; over R = 120 independent releases the number of exceedances is
    dominated by Binomial(R, 0.1), and the test fails only if it reaches k* with
    P(Bin(R, 0.1) ≥ k*) ≤ 1e-6 (+ < 1e-100 for AG's partition event, see there). Each is
    paired with a broken variant (skipped / mis-weighted inference, spreading without the
    area) that must be caught.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from release_checks import record, total_epsilon
from scipy import stats
from stats import FALSE_POSITIVE_RATE

import dpkit.release as rel
import dpkit.release.ranges.grid2d as g2
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.ranges.histogram import method

METHODS = ["quadtree", "ug", "ag", "kdtree"]


def _data(shape, seed=0, high=30):
    return np.random.default_rng(seed).integers(0, high, shape)  # test data only


# ------------------------------------------------------------------------------ registry, input

def test_registered_for_two_dimensions():
    names = rel.methods(2)
    assert set(METHODS) <= set(names)
    assert [method(m, 2).data_dependent for m in METHODS] == [False, True, True, True]


@pytest.mark.parametrize("method,options", [
    ("quadtree", {"height": 9}), ("quadtree", {"height": -1}), ("quadtree", {"budget": "x"}),
    ("ug", {"c": 0}), ("ug", {"scale": -1}), ("ug", {"scale_fraction": 1}),
    ("ag", {"alpha": 0}), ("ag", {"alpha": Fraction(3, 2)}), ("ag", {"c": "a"}),
    ("kdtree", {"rho": 1}), ("kdtree", {"max_depth": -1}), ("kdtree", {"max_depth": 1.5}),
])
def test_bad_options_are_rejected_before_any_noise(monkeypatch, method, options):
    log = record(monkeypatch)
    with pytest.raises(DomainError):
        rel.release_histogram(np.ones((8, 8), dtype=np.int64), 1, method, **options)
    assert log == []


@pytest.mark.parametrize("method", METHODS)
def test_bad_histograms_are_rejected(monkeypatch, method):
    log = record(monkeypatch)
    for bad in ([1, 2, 3], [[1, -1]], [[0.5, 1]], np.ones((2, 2, 2))):
        with pytest.raises(DomainError):
            rel.release_histogram(bad, 1, method)
    with pytest.raises(DomainError):
        getattr(g2, method)(np.ones(5, dtype=np.int64), Fraction(1))
    assert log == []


# ------------------------------------------------------------------------------------ privacy

def _replay_check(monkeypatch, method, x, eps, neighbours, **options):
    """Run once with real noise, logging (values, sensitivity, ε, output) of each
    measurement; rerun on each neighbour with the same outputs replayed. Returns (Σε, the
    largest ratio ‖q_k(x') − q_k(x)‖₁ / Δ_k over measurements k and neighbours)."""
    real = frontend.noisy
    base: list[tuple[np.ndarray, Fraction, Fraction, frontend.Drawn]] = []

    def logged(values, sensitivity, epsilon):
        out = real(values, sensitivity, epsilon)
        base.append((np.array(values, copy=True), Fraction(sensitivity), Fraction(epsilon),
                     out))
        return out

    monkeypatch.setattr(frontend, "noisy", logged)
    rel.release_histogram(x, eps, method, **options)
    worst = Fraction(0)
    for nb in neighbours:
        calls: list[np.ndarray] = []

        def replay(values, sensitivity, epsilon, _calls=calls):
            k = len(_calls)
            assert np.shape(values) == base[k][0].shape  # same choices given same outputs
            assert Fraction(sensitivity) == base[k][1] and Fraction(epsilon) == base[k][2]
            _calls.append(np.array(values, copy=True))
            return base[k][3]

        monkeypatch.setattr(frontend, "noisy", replay)
        rel.release_histogram(nb, eps, method, **options)
        assert len(calls) == len(base)
        for got, (want, sens, _, _) in zip(calls, base, strict=True):
            moved = int(np.abs(got.astype(np.int64) - want.astype(np.int64)).sum())
            worst = max(worst, Fraction(moved) / sens)
    monkeypatch.setattr(frontend, "noisy", real)
    return sum((b[2] for b in base), Fraction(0)), worst


def _neighbours(x):
    out = []
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            add = x.copy()
            add[i, j] += 1
            out.append(add)
            if x[i, j] > 0 and (i + j) % 3 == 0:
                rem = x.copy()
                rem[i, j] -= 1
                out.append(rem)
    return out


@pytest.mark.parametrize("method,options", [
    ("quadtree", {}), ("quadtree", {"height": 2}), ("quadtree", {"budget": "uniform"}),
    ("ug", {}), ("ug", {"scale": 5000}), ("ag", {}), ("ag", {"scale": 20000}),
    ("kdtree", {}), ("kdtree", {"rho": Fraction(1, 3), "max_depth": 3}),
])
def test_budget_and_sensitivity(monkeypatch, method, options):
    """Σε ≤ ε (recorded), every declared sensitivity is 1, and given the same earlier noisy
    outputs each measured vector moves by at most its sensitivity between neighbours."""
    x = _data((9, 7), seed=1) * np.arange(1, 8)[None, :]  # uneven, non-power-of-two
    eps = Fraction(7, 10)
    log = record(monkeypatch)
    rel.release_histogram(x, eps, method, **options)
    assert log and total_epsilon(log) <= eps
    assert all(m.sensitivity == 1 for m in log)
    total, worst = _replay_check(monkeypatch, method, x, eps, _neighbours(x), **options)
    assert total <= eps and worst <= 1


def test_broken_budget_and_sensitivity_are_caught(monkeypatch):
    """Spending ε on every quadtree level, or measuring doubled grid counts under the same
    declared sensitivity 1, fails the checks above."""
    x = _data((8, 8), seed=2)
    monkeypatch.setattr(g2, "quadtree_budgets", lambda eps, levels, budget="geometric": [
        eps] * levels)
    total, _ = _replay_check(monkeypatch, "quadtree", x, Fraction(1), _neighbours(x)[:3])
    assert total > 1
    monkeypatch.undo()
    real = g2.group_sums
    monkeypatch.setattr(g2, "group_sums", lambda v, labels, groups: 2 * real(v, labels, groups))
    total, worst = _replay_check(monkeypatch, "ug", x, Fraction(1), _neighbours(x)[:5],
                                 scale=1000, switch=None)
    assert total <= 1 and worst == 2


# ------------------------------------------------------------------------ deterministic parts

def _zero_noise(monkeypatch, log=None):
    def exact(values, sensitivity, epsilon):
        if log is not None:
            log.append((np.array(values, copy=True), Fraction(epsilon)))
        return frontend.Drawn(np.array(values, dtype=np.int64, copy=True),
                              frontend.noise_row(sensitivity, epsilon))

    monkeypatch.setattr(frontend, "noisy", exact)


def _level_matrix(side, block):
    """0/1 matrix of the (side/block)² quadtree nodes of one level over side² cells."""
    cells = np.arange(side * side)
    r, c = cells // side, cells % side
    node = (r // block) * (side // block) + c // block
    a = np.zeros(((side // block) ** 2, side * side))
    a[node, cells] = 1
    return a


def test_quadtree_inference_is_weighted_least_squares():
    """The two-pass inference equals dense weighted least squares (weights 1/σ_i) on an
    8×8 quadtree with unequal per-level variances and arbitrary measurements."""
    gen = np.random.default_rng(3)
    variances = [0.7, 1.9, 5.0, 11.0]
    noisy = [gen.normal(size=(8 >> i, 8 >> i)) * 4 for i in range(4)]
    a = np.vstack([_level_matrix(8, 1 << i) for i in range(4)])
    w = np.concatenate([np.full(lv.size, 1 / math.sqrt(v)) for lv, v in zip(
        noisy, variances, strict=True)])
    dense = rel.measure.least_squares(a, np.concatenate([lv.ravel() for lv in noisy]), w)
    assert np.allclose(g2.quadtree_inference(noisy, variances).ravel(), dense, atol=1e-9)


def test_quadtree_budgets_are_geometric_and_exact():
    eps = g2.quadtree_budgets(Fraction(1), 9)
    assert sum(eps) <= 1 and sum(eps) > 1 - Fraction(1, 10**6)
    ratios = [float(eps[i] / eps[i + 1]) for i in range(8)]
    assert np.allclose(ratios, 2 ** (1 / 3), rtol=1e-4)  # leaves get the most
    assert g2.quadtree_budgets(Fraction(1), 3, "uniform") == [Fraction(1, 3)] * 3


@pytest.mark.parametrize("shape,height", [((16, 16), None), ((13, 6), None), ((13, 6), 2),
                                          ((1, 1), None), ((1, 5), 1)])
def test_quadtree_without_noise(monkeypatch, shape, height):
    """Zero noise: the truth back with leaves of single cells; block totals with coarser
    leaves (each leaf spread over its real, unpadded cells)."""
    _zero_noise(monkeypatch)
    x = _data(shape, seed=4)
    est = g2.quadtree(x, Fraction(1), height=height)
    big = max((max(shape) - 1).bit_length(), 0)
    block = 1 << (big - (big if height is None else height))
    if block == 1:
        assert np.allclose(est, x)
    for r in range(0, shape[0], block):
        for c in range(0, shape[1], block):
            assert est[r:r + block, c:c + block].sum() == pytest.approx(
                x[r:r + block, c:c + block].sum())
            assert np.ptp(est[r:r + block, c:c + block]) < 1e-9


def test_quadtree_default_height_matches_dpbench(monkeypatch):
    """256×256: 9 levels (leaves = cells, H = log₂ 256 = 8), one measurement each."""
    log = record(monkeypatch)
    g2.quadtree(np.zeros((256, 256), dtype=np.int64), Fraction(1))
    assert [m.values.shape for m in log] == [(256 >> i, 256 >> i) for i in range(9)]


def test_grid_edges_and_spreading():
    for n, m in [(256, 32), (20, 6), (7, 7), (5, 9), (9, 1)]:
        e = g2.grid_edges(n, m)
        assert e[0] == 0 and e[-1] == n and np.ptp(np.diff(e)) <= 1 and np.all(np.diff(e) > 0)
        assert len(e) - 1 == min(m, n)
    x = _data((20, 14), seed=5)
    labels = g2.grid_labels(x.shape, g2.grid_edges(20, 6), g2.grid_edges(14, 6))
    sums = g2.group_sums(x, labels, 36)
    est = g2.spread(sums.astype(float), labels)
    assert est.sum() == pytest.approx(x.sum())
    assert np.allclose(g2.group_sums(est, labels, 36), sums)


def test_ug_grid_size_and_exact_recovery(monkeypatch):
    """m = ⌈√(N·ε/c)⌉ = ⌈√(10⁴·1/10)⌉ = 32 per side; without noise, data constant on the
    grid's cells come back exactly."""
    log = record(monkeypatch)
    g2.ug(np.zeros((256, 256), dtype=np.int64), Fraction(1), scale=10_000, switch=None)
    assert len(log) == 1 and log[0].values.size == 32 * 32
    _zero_noise(monkeypatch)
    labels = g2.grid_labels((40, 30), g2.grid_edges(40, 7), g2.grid_edges(30, 7))
    x = 3 + labels % 5
    assert np.allclose(g2.ug(x, Fraction(1), scale=490, switch=None), x)  # m = √(490/10) = 7


def test_ug_noisy_total_uses_a_fraction_of_epsilon(monkeypatch):
    log = record(monkeypatch)
    g2.ug(_data((10, 10)), Fraction(1), switch=None)
    assert [m.epsilon for m in log][0] == Fraction(1, 20) and len(log) == 2
    assert total_epsilon(log) <= 1


def test_ag_structure(monkeypatch):
    """m1 = max(10, ⌈⌈√(N·ε'/c)⌉/4⌉): 80 for N = 10⁶, ε = 1 (ε' = ε with a public scale);
    each first-level cell is split into min(m2, side) pieces per axis; zero noise returns
    the second-level totals spread."""
    log: list = []
    _zero_noise(monkeypatch, log)
    g2.ag(np.zeros((256, 256), dtype=np.int64), Fraction(1), scale=10**6, switch=None)
    assert log[0][0].size == 80 * 80 and log[1][0].size == 80 * 80  # m2 = 1 for N' = 0
    assert log[0][1] == log[1][1] == Fraction(1, 2)
    rows, cols = g2.grid_edges(23, 5), g2.grid_edges(17, 5)
    m2 = np.arange(25) % 4 + 1
    labels, parent, groups = g2.ag_labels((23, 17), rows, cols, m2)
    assert np.array_equal(np.unique(labels), np.arange(groups))
    want = [min(m2[k], np.diff(rows)[k // 5]) * min(m2[k], np.diff(cols)[k % 5])
            for k in range(25)]
    assert np.array_equal(np.bincount(parent, minlength=25), want)
    first = g2.grid_labels((23, 17), rows, cols)
    for g in range(groups):  # each piece is a rectangle inside its parent
        r, c = np.nonzero(labels == g)
        assert (r.max() - r.min() + 1) * (c.max() - c.min() + 1) == r.size
        assert np.all(first[r, c] == parent[g])
    assert np.array_equal(g2.ag_split_sizes(np.array([-5, 0, 9, 10, 11]), Fraction(1), 1.0),
                          [1, 1, 3, 4, 4])
    x = _data((23, 17), seed=6)
    est = g2.ag(x, Fraction(1), scale=3000)
    assert est.sum() == pytest.approx(x.sum())


def test_ag_inference_without_noise_keeps_the_truth():
    parent = np.repeat(np.arange(3), [4, 1, 9])
    level2 = np.arange(14, dtype=float)
    level1 = np.bincount(parent, weights=level2)
    assert np.allclose(g2.ag_inference(level1, 2.0, level2, 3.0, parent), level2)
    # a disagreement is shared evenly among the children, weighted by inverse variance
    out = g2.ag_inference(level1 + [8, 0, 0], 1.0, level2, 1.0, parent)
    assert np.allclose(out[:4], level2[:4] + 8 * 4 / 5 / 4)


def test_kd_partition():
    """Constant counts stay one partition; a step splits exactly at the step; partitions are
    rectangles covering the grid."""
    labels, parts = g2.kd_partition(np.full((16, 16), 7.0), 2.0, 2.0, 16)
    assert parts == 1
    step = np.zeros((16, 16))
    step[:, 10:] = 100
    labels, parts = g2.kd_partition(step, 2.0, 2.0, 16)
    assert parts >= 2 and not np.any(labels[:, :10, None] == labels[:, None, 10:])
    step2 = np.zeros((30, 20))
    step2[12:, 5:] = 100
    noisy = np.random.default_rng(7).normal(size=(30, 20)) * 20 + step2
    labels, parts = g2.kd_partition(noisy, 1.0, 1.0, 16)
    assert np.array_equal(np.unique(labels), np.arange(parts))
    for p in range(parts):
        r, c = np.nonzero(labels == p)
        assert (r.max() - r.min() + 1) * (c.max() - c.min() + 1) == r.size
    assert g2.kd_partition(noisy, 1.0, 1.0, 0)[1] == 1


def test_kdtree_without_noise(monkeypatch):
    _zero_noise(monkeypatch)
    x = np.zeros((16, 16), dtype=np.int64)
    x[:, 10:] = 100
    est = g2.kdtree(x, Fraction(1), switch=None)
    assert np.allclose(est, x)
    y = _data((13, 7), seed=8)
    assert g2.kdtree(y, Fraction(1), switch=None).sum() == pytest.approx(y.sum())


# ------------------------------------------------------------------------------------ accuracy

R, P_EXCEED = 120, 0.1


def _exceedance_limit():
    """k*: the smallest k with P(Binomial(R, P_EXCEED) ≥ k) ≤ FALSE_POSITIVE_RATE."""
    k = int(R * P_EXCEED)
    while stats.binom.sf(k - 1, R, P_EXCEED) > FALSE_POSITIVE_RATE:
        k += 1
    return k


def _chernoff_threshold(c: np.ndarray, eps: np.ndarray, p: float = P_EXCEED) -> float:
    """u with P(|Σ c_j Z_j| ≥ u) ≤ p for independent discrete Laplace Z_j of scale 1/ε_j:
    min over λ of (log M(λ) − log(p/2))/λ, M(λ) = Π_j (1−q_j)²/((1−q_j e^{λc_j})
    (1−q_j e^{−λc_j})), q_j = e^{−ε_j}, valid for λ|c_j| < ε_j (Chernoff, both tails)."""
    keep = np.abs(c) > 1e-15
    c, eps = np.abs(c[keep]), eps[keep]
    q = np.exp(-eps)
    lam_max = float(np.min(eps / c))
    best = math.inf
    for f in np.linspace(1e-3, 0.999, 2000):
        lam = f * lam_max
        log_m = np.sum(2 * np.log1p(-q) - np.log1p(-q * np.exp(lam * c))
                       - np.log1p(-q * np.exp(-lam * c)))
        best = min(best, (log_m - math.log(p / 2)) / lam)
    return best


def _gls_coefficients(blocks, variances, query_cells):
    """Error coefficients c = W A (AᵀWA)⁻¹ q of the weighted least-squares estimate of the
    query q·x from measurements A = [blocks] with per-block noise variances."""
    a = np.vstack(blocks)
    w = np.concatenate([np.full(b.shape[0], 1 / v) for b, v in zip(blocks, variances,
                                                                   strict=True)])
    beta = np.linalg.solve(a.T @ (w[:, None] * a), query_cells)
    return w * (a @ beta)


def _dl_var(e):
    p = math.exp(-float(e))
    return 2 * p / (1 - p) ** 2


def _group_matrix(labels, groups):
    m = np.zeros((groups, labels.size))
    m[labels.ravel(), np.arange(labels.size)] = 1
    return m


def _exceedances(method, x, eps, query, u, **options):
    truth = float((x * query).sum())
    return sum(abs(float((rel.release_histogram(x, eps, method, **options).counts * query
                          ).sum()) - truth) >= u for _ in range(R))


def _rect(shape, r0, r1, c0, c1):
    q = np.zeros(shape)
    q[r0:r1, c0:c1] = 1
    return q


@pytest.mark.parametrize("broken", [False, True])
def test_quadtree_accuracy(monkeypatch, broken):
    """16×16, ε = 1, query = the total: its error is Σ c_j Z_j over the 341 node noises with
    c from dense weighted least squares. Broken: inference skipped (noisy leaves)."""
    x, eps = _data((16, 16), seed=9), Fraction(1)
    log = record(monkeypatch)
    rel.release_histogram(x, eps, "quadtree")
    level_eps = [m.epsilon for m in log]
    blocks = [_level_matrix(16, 1 << i) for i in range(5)]
    query = np.ones((16, 16))
    c = _gls_coefficients(blocks, [_dl_var(e) for e in level_eps], query.ravel())
    u = _chernoff_threshold(c, np.concatenate([np.full(b.shape[0], float(e)) for b, e in zip(
        blocks, level_eps, strict=True)]))
    monkeypatch.undo()
    if broken:
        monkeypatch.setattr(g2, "quadtree_inference", lambda noisy, variances: noisy[0].astype(
            float))
    caught = _exceedances("quadtree", x, eps, query, u) >= _exceedance_limit()
    assert caught == broken


@pytest.mark.parametrize("broken", [False, True])
def test_ug_accuracy(monkeypatch, broken):
    """20×14 with counts constant on the (uneven) 6×6 grid, public scale, ε = 1, a
    misaligned rectangle: error = Σ_g (overlap_g/area_g)·Z_g. Broken: spread forgets the
    area."""
    eps, shape = Fraction(1), (20, 14)
    labels = g2.grid_labels(shape, g2.grid_edges(20, 6), g2.grid_edges(14, 6))
    x = (2 + labels % 3).astype(np.int64)
    query = _rect(shape, 3, 18, 2, 12)
    areas = np.bincount(labels.ravel())
    c = np.bincount(labels.ravel(), weights=query.ravel()) / areas
    u = _chernoff_threshold(c, np.full(c.size, float(eps)))
    log = record(monkeypatch)
    rel.release_histogram(x, eps, "ug", scale=300, switch=None)
    assert [(m.values.size, m.epsilon) for m in log] == [(36, eps)]
    if broken:
        monkeypatch.setattr(g2, "spread", lambda values, labels: np.asarray(
            values, dtype=float)[labels])
    caught = _exceedances("ug", x, eps, query, u, scale=300, switch=None) >= _exceedance_limit()
    assert caught == broken


@pytest.mark.parametrize("broken", [False, True])
def test_ag_accuracy(monkeypatch, broken):
    """40×40, 50 per cell, public scale 1000, ε = 1: m1 = 10 (first-level cells 4×4) and
    m2 = min(⌈√(N'·ε₂/c₂)⌉, 4) = 4 — single-cell children — whenever every N' > 90, i.e.
    unless some level-1 noise is below −710 (probability < 100·e^{−355} < 1e-100, added to
    the false-positive rate). On that event the error of a rectangle of whole first-level
    cells is the weighted least-squares combination of the two levels (the spreading is
    checked by the UG test). Broken: the inverse-variance weights swapped."""
    eps, shape = Fraction(1), (40, 40)
    x = np.full(shape, 50, dtype=np.int64)
    labels1 = g2.grid_labels(shape, g2.grid_edges(40, 10), g2.grid_edges(40, 10))
    query = _rect(shape, 4, 36, 8, 32)
    e1 = e2 = 0.5
    c = _gls_coefficients([_group_matrix(labels1, 100), np.eye(1600)],
                          [_dl_var(e1), _dl_var(e2)], query.ravel())
    u = _chernoff_threshold(c, np.concatenate([np.full(100, e1), np.full(1600, e2)]))
    log = record(monkeypatch)
    rel.release_histogram(x, eps, "ag", scale=1000)
    assert [m.values.size for m in log] == [100, 1600]
    assert [m.epsilon for m in log] == [Fraction(1, 2)] * 2
    monkeypatch.undo()
    if broken:
        real = g2.ag_inference

        def swapped(noisy1, var1, noisy2, var2, parent):
            k = np.bincount(parent).astype(float)  # weight 1/var1 ↔ 1/(k·var2)
            return real(noisy1, k * var2, noisy2, var1 / k, parent)

        monkeypatch.setattr(g2, "ag_inference", swapped)
    caught = _exceedances("ag", x, eps, query, u, scale=1000) >= _exceedance_limit()
    assert caught == broken


@pytest.mark.parametrize("broken", [False, True])
def test_kdtree_accuracy(monkeypatch, broken):
    """16×16 constant counts, ε = 1 (ε₁ = ε₂ = 1/2), with the partition fixed to three
    rectangles (the partition rule is checked deterministically above; here the inference
    and noise): each partition total is the least-squares combination of the phase-1 cells
    and the phase-2 total; query = a misaligned rectangle. Broken: phase 2 ignored (the
    totals are the phase-1 sums)."""
    eps, shape = Fraction(1), (16, 16)
    x = np.full(shape, 4, dtype=np.int64)
    labels = np.zeros(shape, dtype=np.int64)
    labels[:, 8:] = 1
    labels[10:, 8:] = 2
    monkeypatch.setattr(g2, "kd_partition", lambda noisy, v1, v2, depth: (labels, 3))
    query = _rect(shape, 2, 14, 3, 15)
    areas = np.bincount(labels.ravel())
    q_cells = (np.bincount(labels.ravel(), weights=query.ravel()) / areas)[labels].ravel()
    c = _gls_coefficients([np.eye(256), _group_matrix(labels, 3)], [_dl_var(0.5)] * 2,
                          q_cells)
    u = _chernoff_threshold(c, np.full(259, 0.5))
    log = record(monkeypatch)
    rel.release_histogram(x, eps, "kdtree", switch=None)
    assert [(m.values.size, m.epsilon) for m in log] == [(256, Fraction(1, 2)), (3, Fraction(
        1, 2))]
    if broken:
        monkeypatch.setattr(g2, "kd_inference", lambda phase1, var1, noisy2, var2, labels:
                            g2.group_sums(phase1.astype(float), labels, noisy2.size))
    caught = _exceedances("kdtree", x, eps, query, u, switch=None) >= _exceedance_limit()
    assert caught == broken


# ------------------------------------------------------------------------------------- speed

@pytest.mark.parametrize("method", METHODS)
def test_runs_on_256_by_256(method):
    """Every algorithm on a 256×256 histogram of 10⁵ records (timings in the module report;
    the bound here is loose for shared machines)."""
    import time

    gen = np.random.default_rng(10)
    yy, xx = np.mgrid[0:256, 0:256]
    p = np.exp(-((yy - 80) ** 2 + (xx - 170) ** 2) / 800.0) + 0.05
    x = gen.multinomial(100_000, (p / p.sum()).ravel()).reshape(256, 256)
    start = time.perf_counter()
    est = rel.release_histogram(x, 1, method).counts
    assert time.perf_counter() - start < 10
    assert est.shape == x.shape and np.isfinite(est).all()
