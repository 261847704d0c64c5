"""Tests for dpkit.release.ranges.partition: DAWA, NoiseFirst, StructureFirst, P-HPartition.

(a) budget: every noisy measurement and every exponential-mechanism draw is logged; their ε
    add up to at most ε, and the measured query vectors / selection scores move by at most
    their declared sensitivity between neighbouring histograms x, x ± e_j;
(b) the deterministic pieces against brute force or hand-worked examples;
(c) accuracy on a two-block (piecewise-constant) histogram with a failure probability
    ≤ 1e-6 derived from (discrete) Laplace tails and the exponential mechanism's tail, and a
    deliberately broken variant that the same check catches.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from release_checks import record, total_epsilon

import dpkit.release  # noqa: F401 - registers the built-in algorithms
from dpkit.core.accuracy import laplace_tail
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.exponential import exact_gaps
from dpkit.release.ranges import partition as P  # noqa: N812
from dpkit.release.ranges.histogram import methods, release_histogram

G = P.SCORE_GRID
BETA = 1e-6


def _dl_variance(scale: float) -> float:
    a = math.exp(-1 / scale)
    return 2 * a / (1 - a) ** 2


def _log_selections(monkeypatch) -> list[tuple[int, Fraction, Fraction]]:
    """Log every exponential-mechanism call: (vectors, sensitivity, ε)."""
    log: list[tuple[int, Fraction, Fraction]] = []
    real = frontend.select

    def wrapper(scores, sensitivity, epsilon, **kw):
        log.append((len(scores), Fraction(sensitivity), Fraction(epsilon)))
        return real(scores, sensitivity, epsilon, **kw)

    monkeypatch.setattr(frontend, "select", wrapper)
    return log


def _data(n: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    return np.repeat(g.integers(0, 40, size=4), -(-n // 4))[:n] + g.integers(0, 5, size=n)


def _neighbours(x: np.ndarray, cells: list[int]):
    for j in cells:
        up = x.copy()
        up[j] += 1
        yield up
        if x[j] > 0:
            down = x.copy()
            down[j] -= 1
            yield down


# ----------------------------------------------------------------------------- registry

def test_registered_one_dimensional_data_dependent():
    names = methods(1)
    for name in ("dawa", "noise_first", "structure_first", "phpartition"):
        assert name in names
    out = release_histogram(np.arange(10), 1, "dawa")
    assert out.counts.shape == (10,)


@pytest.mark.parametrize("fn,kwargs", [
    (P.dawa, {"ratio": 0}), (P.dawa, {"ratio": 1}), (P.dawa, {"ratio": 1.5}),
    (P.dawa, {"ratio": "a"}), (P.dawa, {"ratio": float("nan")}),
    (P.structure_first, {"ratio": 0}), (P.structure_first, {"buckets": 0}),
    (P.structure_first, {"bound": 0}), (P.structure_first, {"grid": 1}),
    (P.structure_first, {"bound": 2.5}),
    (P.phpartition, {"ratio": -1}), (P.phpartition, {"depth": 0}),
    (P.phpartition, {"max_cuts": 0}),
])
def test_bad_options_raise(fn, kwargs):
    with pytest.raises(DomainError):
        fn(np.arange(16, dtype=np.int64), Fraction(1), None, **kwargs)


def test_too_large_counts_raise():
    """DAWA's counts are clamped (dawa_cap), not refused; StructureFirst's bound is an
    option, refused from declared quantities."""
    assert P.dawa(np.full(8, 1 << 58, dtype=np.int64), Fraction(1)).shape == (8,)
    with pytest.raises(DomainError, match="too large"):
        P.structure_first(np.zeros(4096, dtype=np.int64), Fraction(1), bound=10 ** 6)


# ----------------------------------------------------------------------------- (a) budget

@pytest.mark.parametrize("n", [1, 7, 64, 100])
def test_dawa_budget_and_cost_sensitivity(monkeypatch, n):
    x = _data(n, 1)
    eps = Fraction(1, 2)
    log = record(monkeypatch)
    P.dawa(x, eps, None, switch=None)
    assert total_epsilon(log) == eps
    levels = len(P.dyadic_deviations(x))
    for k, m in enumerate(log[:levels], start=1):  # stage 1: one vector per dyadic level
        assert m.sensitivity == 2 * (2 ** k - 1)
    base = log[:levels]
    for xp in _neighbours(x, [0, n // 2, n - 1]):
        start = len(log)
        P.dawa(xp, eps, None, switch=None)
        assert total_epsilon(log[start:]) == eps
        for a, b in zip(base, log[start: start + levels], strict=True):
            assert np.abs(a.values - b.values).sum() <= a.sensitivity


def test_dyadic_deviation_sensitivity_is_tight():
    x = np.full(16, 3, dtype=np.int64)  # all deviations 0: one record moves each by 2(1−1/m)
    xp = x.copy()
    xp[5] += 1
    for k, (a, b) in enumerate(zip(P.dyadic_deviations(x), P.dyadic_deviations(xp),
                                   strict=True), start=1):
        m = 2 ** k
        assert np.abs(a - b).sum() == 2 * (m - 1)


def test_dawa_with_workload_budget(monkeypatch):
    from dpkit.release.workload import prefix
    x = _data(64, 2)
    log = record(monkeypatch)
    est = P.dawa(x, Fraction(1), prefix(64), switch=None)
    assert est.shape == (64,) and total_epsilon(log) == 1


def test_noise_first_budget(monkeypatch):
    x = _data(50, 3)
    log = record(monkeypatch)
    P.noise_first(x, Fraction(1, 3), None, switch=None)
    assert total_epsilon(log) == Fraction(1, 3)
    assert len(log) == 1 and log[0].sensitivity == 1 and np.array_equal(log[0].values, x)


@pytest.mark.parametrize("n,k", [(1, 4), (10, 1), (40, 4), (300, 8)])
def test_structure_first_budget(monkeypatch, n, k):
    x = _data(n, 4)
    eps = Fraction(3, 4)
    log = record(monkeypatch)
    sel = _log_selections(monkeypatch)
    P.structure_first(x, eps, None, buckets=k, bound=50, grid=64, switch=None)
    spent = total_epsilon(log) + sum(e for _, _, e in sel)
    assert spent == eps if min(k, n) > 1 else spent <= eps
    assert all(s == G * (2 * 50 - 1) and c == 1 for c, s, _ in sel)


def test_structure_first_score_sensitivity():
    f = 7
    x = np.minimum(_data(30, 5), f)
    cuts = np.arange(31)
    levels = 4
    cost, tables = P.sse_tables(x, cuts, levels)
    bound = G * (2 * f - 1)
    for xp in _neighbours(x, list(range(30))):
        xp = np.minimum(xp, f)
        cost2, tables2 = P.sse_tables(xp, cuts, levels)
        assert np.abs(cost - cost2).max() <= bound
        for t, t2 in zip(tables, tables2, strict=True):
            finite = t < (1 << 62)
            assert np.array_equal(finite, t2 < (1 << 62))
            assert np.abs(t[finite] - t2[finite]).max() <= bound
            # the scores −(E_{t}(a) + C(a, j)) of every step
            for j in range(1, 31):
                a = np.arange(j)[finite[:j]]
                d = (t[a] + cost[a, j]) - (t2[a] + cost2[a, j])
                assert np.abs(d).max(initial=0) <= bound


@pytest.mark.parametrize("n", [1, 2, 33, 200])
def test_phpartition_budget(monkeypatch, n):
    x = _data(n, 6)
    eps = Fraction(2)
    log = record(monkeypatch)
    sel = _log_selections(monkeypatch)
    P.phpartition(x, eps, None, switch=None)
    depth = max(1, (n - 1).bit_length())
    assert len(sel) <= depth  # one parallel round per depth
    assert all(e == eps / 2 / depth and s == 2 * G for _, s, e in sel)
    assert total_epsilon(log) == eps / 2 and total_epsilon(log) + sum(
        e for _, _, e in sel) <= eps


def test_phpartition_score_sensitivity():
    x = _data(150, 7)
    intervals = [(0, 150), (3, 40), (40, 41 + 64), (120, 150), (5, 7)]
    pen = 9
    base = P._split_scores(x, intervals, pen, 32)
    for xp in _neighbours(x, [0, 3, 39, 40, 70, 104, 149]):
        other = P._split_scores(xp, intervals, pen, 32)
        for (s1, c1), (s2, c2) in zip(base, other, strict=True):
            assert np.array_equal(c1, c2)
            assert np.abs(s1 - s2).max() <= 2 * G


# ----------------------------------------------------------------------------- (b) pieces

def test_dyadic_partition_hand_example():
    devs = [np.array([0.0, 0.0, 5.0, 0.0]), np.array([0.0, 9.0]), np.array([20.0])]
    # [0,4): dev 0 + 1 beats 2 buckets; [4,8) dev 9 + 1 loses to [4,5),[5,6),[6,8) = 3
    assert P.dyadic_partition(devs, 8, 1.0).tolist() == [0, 4, 5, 6, 8]


def _dyadic_brute(x: np.ndarray, cost: float) -> float:
    n = x.size

    def best(lo, size):
        if lo >= n:
            return 0.0
        options = []
        if lo + size <= n:
            seg = x[lo: lo + size]
            options.append(np.abs(seg - seg.mean()).sum() + cost)
        if size > 1:
            options.append(best(lo, size // 2) + best(lo + size // 2, size // 2))
        return min(options)

    return best(0, 1 << max(0, (n - 1).bit_length()))


@pytest.mark.parametrize("n", [1, 5, 8, 13, 16])
def test_dyadic_partition_matches_brute_force(n):
    g = np.random.default_rng(n)
    for cost in (0.5, 3.0, 40.0):
        x = g.integers(0, 20, size=n)
        devs = [d / (2 ** k) for k, d in enumerate(P.dyadic_deviations(x), start=1)]
        edges = P.dyadic_partition(devs, n, cost)
        assert edges[0] == 0 and edges[-1] == n and np.all(np.diff(edges) > 0)
        sizes = np.diff(edges)
        assert np.all((sizes & (sizes - 1)) == 0) and np.all(edges[:-1] % sizes == 0)
        got = sum(np.abs(x[a:b] - x[a:b].mean()).sum() + cost
                  for a, b in zip(edges[:-1], edges[1:], strict=True))
        assert got == pytest.approx(_dyadic_brute(x, cost), abs=1e-9)


def _all_partitions(n):
    for mask in itertools.product((0, 1), repeat=n - 1):
        yield np.array([0] + [i + 1 for i, b in enumerate(mask) if b] + [n])


def _sse(v, edges):
    return sum(((v[a:b] - v[a:b].mean()) ** 2).sum() for a, b in zip(edges[:-1], edges[1:],
                                                                     strict=True))


def test_penalized_partition_matches_brute_force():
    g = np.random.default_rng(11)
    for n in (1, 2, 6, 9):
        for pen in (0.1, 5.0, 100.0):
            v = np.repeat(g.normal(0, 10, size=3), 4)[:n] + g.normal(0, 1, size=n)
            edges = P.penalized_partition(v, pen)
            got = _sse(v, edges) + pen * (edges.size - 1)
            best = min(_sse(v, e) + pen * (e.size - 1) for e in _all_partitions(n))
            assert got == pytest.approx(best, rel=1e-9, abs=1e-9)


def test_sse_tables_match_brute_force():
    x = np.array([3, 3, 9, 0, 0, 1, 8, 8])
    cuts = np.arange(9)
    cost, tables = P.sse_tables(x, cuts, 3)
    for a in range(8):
        for b in range(a + 1, 9):
            seg = x[a:b]
            exact = Fraction(int((b - a) * (seg * seg).sum() - seg.sum() ** 2), b - a)
            assert cost[a, b] == math.floor(G * exact)
    for t, table in enumerate(tables, start=1):
        for b in range(9):
            parts = [e for e in _all_partitions(b) if e.size - 1 == t] if b else []
            if not parts:
                assert table[b] >= 1 << 62
            else:
                assert table[b] == min(sum(cost[e[i], e[i + 1]] for i in range(t))
                                       for e in parts)


def test_sae_prefix_matches_direct():
    g = np.random.default_rng(12)
    rows = g.integers(0, 30, size=(3, 17))
    lengths = np.array([17, 9, 1])
    rows[1, 9:] = 0
    rows[2, 1:] = 0
    out = P.sae_prefix(rows, lengths, chunk=50)
    for v in range(3):
        for c in range(18):
            want = int(np.abs(c * rows[v, :c] - rows[v, :c].sum()).sum()) if c <= lengths[
                v] else 0
            assert out[v, c] == want


def test_spread_and_bucket_totals():
    x = np.array([1, 2, 3, 4, 5, 6, 7], dtype=np.int64)
    edges = np.array([0, 3, 4, 7])
    totals = P.bucket_totals(x, edges)
    assert totals.tolist() == [6, 4, 18]
    out = P.spread(np.array([6.0, 4.0, 18.5]), edges)
    assert out.tolist() == [2, 2, 2, 4, 18.5 / 3, 18.5 / 3, 18.5 / 3]
    assert P.bucket_totals(out, edges) == pytest.approx([6, 4, 18.5])
    with pytest.raises(DomainError):
        P.spread(np.ones(2), np.array([0, 2, 2]))


def test_integer_gaps_equal_exact_gaps():
    g = np.random.default_rng(13)
    for scale in (Fraction(1), Fraction(7, 3), Fraction(2048, 5)):
        s = g.integers(-10 ** 6, 10 ** 6, size=40)
        numer, denom = P._integer_gaps(s, scale)
        ref, rden = exact_gaps(s, scale)
        assert all(Fraction(int(a), denom) == Fraction(int(b), rden)
                   for a, b in zip(numer, ref, strict=True))


def _select_many(scores, sensitivity, epsilon):
    return frontend.select(scores, sensitivity, epsilon, mechanism="exponential_many")


def _first_cut(scores, sensitivity, epsilon, **kw):
    """Broken selection: ignores the scores (index 0 of every vector)."""
    return frontend.Drawn([0] * len(scores), frontend.selection_row(sensitivity, epsilon))


def test_exponential_many_law():
    # P(index 0) = 1/(1 + e^{-1}) for scores (Δ, 0) at ε = 2 (scale 2Δ/ε = Δ); 4000 draws in
    # one call; Hoeffding: |p̂ − p| ≤ √(ln(2/β)/(2·4000)) fails with probability ≤ β = 1e-6
    draws = np.array(_select_many([np.array([5, 0])] * 4000, Fraction(5), Fraction(2)).value)
    p = 1 / (1 + math.exp(-1))
    assert abs((draws == 0).mean() - p) <= math.sqrt(math.log(2 / BETA) / 8000)
    assert _select_many([np.array([3])], Fraction(1), Fraction(1)).value == [0]


# ----------------------------------------------------------------------------- (c) accuracy

def _two_blocks(n: int, high: int) -> np.ndarray:
    return np.repeat(np.array([0, high], dtype=np.int64), n // 2)


def _identity_expected(n: int, eps: Fraction) -> float:
    return n * _dl_variance(1 / float(eps))  # E‖η‖² for discrete Laplace(1/ε) per cell


def _dawa_design(n: int, eps: Fraction, ratio: Fraction) -> tuple[float, float]:
    """(bound on DAWA's squared cell error, identity's expected one) on two dyadic blocks of
    contrast M (huge), holding with probability ≥ 1 − β. Stage-1 noise: every dyadic cost
    within t of its value (union bound over all costs, β/2). If 1/ε₂ ≥ 3t then every node
    inside a block keeps one bucket (≤ t + c₂ against ≥ 2(c₂ − t) for any split) and the
    root splits (dev = nM/2), so the buckets are the two blocks; their totals' noise
    (discrete Laplace 1/ε₂, β/2) gives ‖x̂ − x‖² = (η₁² + η₂²)/(n/2) ≤ 4t₂²/n."""
    eps1 = ratio * eps
    eps2 = eps - eps1
    levels = n.bit_length() - 1
    z = sum(1 - Fraction(1, 2 ** k) for k in range(1, levels + 1))
    count = sum(n >> k for k in range(1, levels + 1))
    t = max(laplace_tail(float(2 * (2 ** k - 1) / (eps1 * (1 - Fraction(1, 2 ** k)) / z)),
                         BETA / 2 / count, True) / 2 ** k for k in range(1, levels + 1))
    assert 1 / float(eps2) >= 3 * t  # the partition is forced
    t2 = laplace_tail(1 / float(eps2), BETA / 4, True)
    return 4 * t2 ** 2 / n, _identity_expected(n, eps)


def test_dawa_beats_identity_and_broken_variant_is_caught(monkeypatch):
    n, eps, ratio = 1 << 17, Fraction(1), 1 - Fraction(1, 3000)
    x = _two_blocks(n, 10 ** 6)
    bound, identity = _dawa_design(n, eps, ratio)
    assert bound < identity
    err = float(((P.dawa(x, eps, None, ratio=ratio, switch=None) - x) ** 2).sum())
    assert err <= bound < identity  # fails with probability ≤ 1e-6
    # broken: skip the partition search (one bucket for everything): every cell is off by
    # about M/2 — caught unless the total's noise exceeds nM/4 (probability far below 1e-6)
    monkeypatch.setattr(P, "dyadic_partition", lambda devs, n, cost: np.array([0, n]))
    broken = float(((P.dawa(x, eps, None, ratio=ratio, switch=None) - x) ** 2).sum())
    assert broken > identity


def _dawa_buckets(monkeypatch, x: np.ndarray, ratio: Fraction) -> int:
    seen: list[np.ndarray] = []
    search = P.dyadic_partition

    def spy(devs, n, cost):
        seen.append(search(devs, n, cost))
        return seen[-1]

    monkeypatch.setattr(P, "dyadic_partition", spy)
    P.dawa(x, Fraction(1), None, ratio=ratio, switch=None)
    return len(seen[-1]) - 1


def test_dawa_clamped_costs_keep_a_flat_histogram_coarse(monkeypatch):
    """All-zero data, noise on every dev of scale b equal to the bucket cost c = 1/ε₂.
    Clamped costs are ≥ 0, so every subtree costs ≥ c per bucket and a node splits only if
    its noise exceeds c: probability p ≤ e^{−c/b}/(1 + e^{−1/s}) (discrete Laplace of scale
    s = m·b on m·dev), independently per node. The split nodes not under a bucket form a
    rooted binary subtree; there are ≤ 4^S such subtrees of size S, so P(S ≥ S₀) ≤ (4p)^S₀
    ≤ 1e-6 and the partition has ≤ S₀ buckets."""
    n = 4096
    levels = n.bit_length() - 1
    z = sum((1 - Fraction(1, 1 << k) for k in range(1, levels + 1)), Fraction(0))
    ratio = 2 * z / (1 + 2 * z)  # b = 2Z/ε₁ = 1/ε₂ = c at ε = 1
    b = float(2 * z / ratio)
    p = math.exp(-1) / (1 + math.exp(-1 / (2 * b)))
    s0 = math.ceil(math.log(BETA) / math.log(4 * p))
    x = np.zeros(n, dtype=np.int64)
    assert _dawa_buckets(monkeypatch, x, ratio) <= s0  # fails with probability ≤ 1e-6
    # broken: no clamp — the bottom-up minimum collects negative noise over ever finer
    # splits (measured 514–627 buckets in 20 runs, mean 557)
    monkeypatch.setattr(P.np, "maximum", lambda a, b: a)
    assert _dawa_buckets(monkeypatch, x, ratio) > 4 * s0


def _em_failure(candidates: int, gap: float, scale: float) -> float:
    return candidates * math.exp(-gap / scale)


def test_structure_first_beats_identity_and_broken_variant_is_caught(monkeypatch):
    n, f, eps = 128, 1000, Fraction(1)
    x = _two_blocks(n, f)
    eps1 = eps / 2
    # one draw over the n − 1 cuts: the middle scores 0, any other cut leaves a bucket with
    # d ≥ 1 cells of one block among m, SSE = F²d(m−d)/m ≥ F²/2, integer score ≤ −⌊G·F²/2⌋
    fail = _em_failure(n - 2, G * f * f / 2 - 1, float(2 * G * (2 * f - 1) / eps1))
    t2 = laplace_tail(1 / float(eps - eps1), BETA / 4, True)
    assert fail <= BETA / 2
    bound, identity = 4 * t2 ** 2 / n, _identity_expected(n, eps)
    assert bound < identity
    err = float(((P.structure_first(x, eps, None, buckets=2, bound=f, switch=None) - x) ** 2).sum())
    assert err <= bound  # fails with probability ≤ 1e-6
    # broken: a selection that ignores the scores (always the first cut, at 1)
    monkeypatch.setattr(frontend, "select", _first_cut)
    broken = P.structure_first(x, eps, None, buckets=2, bound=f, switch=None)
    # bucket [1, n) mixes the blocks: its n/2 − 1 zeros get (n/2·F + η)/(n − 1) each
    assert float(((broken - x) ** 2).sum()) > identity  # fails only if |η| > nF/4: < 1e-6


def test_phpartition_beats_identity_and_broken_variant_is_caught(monkeypatch):
    n, m, eps = 128, 1000, Fraction(1)
    x = _two_blocks(n, m)
    eps1 = eps / 2
    pen = math.ceil(G / (eps - eps1))
    # depth 1: one draw among keep and the n − 1 cuts. The middle cut scores −2·pen; any
    # other cut leaves a side with SAE = 2M·d(m−d)/m ≥ M; keep has SAE = nM/2
    gap = min(G * m - 1, G * n * m / 2 - 1 - pen)
    fail = _em_failure(n - 1, gap, float(2 * 2 * G / eps1))
    t2 = laplace_tail(1 / float(eps - eps1), BETA / 4, True)
    assert fail <= BETA / 2
    bound, identity = 4 * t2 ** 2 / n, _identity_expected(n, eps)
    assert bound < identity
    err = float(((P.phpartition(x, eps, None, depth=1, switch=None) - x) ** 2).sum())
    assert err <= bound  # fails with probability ≤ 1e-6
    monkeypatch.setattr(frontend, "select", _first_cut)  # always keep
    broken = P.phpartition(x, eps, None, depth=1, switch=None)
    assert float(((broken - x) ** 2).sum()) > identity  # one bucket: bias M/2 per cell


def test_noise_first_never_worse_than_identity_on_the_same_noise(monkeypatch):
    """NoiseFirst's estimate is the projection of the noisy cells onto bucket-wise
    constants. If no bucket straddles the jump, x is constant on every bucket and
    ‖x̂ − x‖² = Σ_B |B|·η̄_B² ≤ ‖η‖², the identity's error with the same noise draw, and
    strictly less unless every bucket is a single cell. The jump is respected whenever
    every |η_i| ≤ t (union bound, β): a straddling bucket has SSE ≥ (M/√2 − √n·t)² >
    n·t² + penalty ≥ the cost of cutting it at the jump."""
    n, m, eps = 256, 10 ** 4, Fraction(1)
    x = _two_blocks(n, m)
    t = laplace_tail(1 / float(eps), BETA / n, True)
    penalty = 2 * _dl_variance(1 / float(eps))
    assert (m / math.sqrt(2) - math.sqrt(n) * t) ** 2 > n * t * t + penalty
    seen = []
    real = frontend.noisy

    def capture(values, sensitivity, epsilon):
        out = real(values, sensitivity, epsilon)
        seen.append(out.value - values)
        return out

    monkeypatch.setattr(frontend, "noisy", capture)
    est = P.noise_first(x, eps, None, switch=None)
    noise = seen[-1].astype(np.float64)
    err = float(((est - x) ** 2).sum())
    assert err <= float((noise ** 2).sum()) * (1 + 1e-9)
    # broken: skip the structure search (one bucket) — the jump is smoothed over
    monkeypatch.setattr(P, "penalized_partition", lambda v, pen: np.array([0, v.size]))
    broken = P.noise_first(x, eps, None, switch=None)
    noise = seen[-1].astype(np.float64)
    assert float(((broken - x) ** 2).sum()) > float((noise ** 2).sum())


def test_too_large_counts_raise_before_the_switch(monkeypatch):
    """The magnitude refusals do not depend on the noisy scale: forced onto the Identity
    branch (the switch fires), they still raise, before any noise (the switch used to skip
    them about 0.3% of the time)."""
    from dpkit.release.ranges import switch

    monkeypatch.setattr(switch, "use_identity", lambda *a: True)
    monkeypatch.setattr(switch, "noisy_scale", lambda *a: pytest.fail("noise drawn first"))
    with pytest.raises(DomainError, match="too large"):
        P.structure_first(np.zeros(4096, dtype=np.int64), Fraction(1), bound=10 ** 6)
