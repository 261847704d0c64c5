"""dpkit.apps.graph: private statistics of social graphs.

Sensitivities are checked by brute force over every neighbour of small random graphs (all
single-edge toggles for the edge unit, every node removed for the node unit); the smooth
bounds U_k against the local sensitivity at distance k (computed by brute force over all
graphs within k edges for k ≤ 2) and against the smoothness condition U_k(G) ≤ U_{k+1}(G′);
broken variants (a plain degree clip instead of the projection; a bound that is not smooth)
are caught; an audit of the triangle release with a broken variant; the debit is the
declared budget; bad input raises before any debit.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from dpkit.apps import graph as g
from dpkit.audit import audit_release
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import ApproxDP
from dpkit.errors import BudgetExceededError, ColumnError, DomainError

N = 7
PAIRS = list(itertools.combinations(range(N), 2))


def random_graphs(count: int, n: int = N, p: float = 0.5, seed: int = 0):
    gen = np.random.default_rng(seed)  # test graphs only
    pairs = np.array(list(itertools.combinations(range(n), 2)))
    for _ in range(count):
        keep = gen.random(len(pairs)) < p
        yield frozenset(map(tuple, pairs[keep].tolist()))


def arrays(edges) -> tuple[np.ndarray, np.ndarray]:
    e = np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)
    return e[:, 0], e[:, 1]


def toggles(edges):
    for pair in PAIRS:
        yield edges ^ {pair}


def triangles(edges) -> int:
    return sum(1 for a, b, c in itertools.combinations(range(N), 3)
               if {(a, b), (a, c), (b, c)} <= edges)


def kstars(edges, k) -> int:
    deg = np.bincount(np.array(sorted(edges)).reshape(-1), minlength=N) if edges else [0] * N
    from math import comb
    return sum(comb(int(d), k) for d in deg)


def local_sensitivity(f, edges) -> int:
    return max(abs(f(edges) - f(other)) for other in toggles(edges))


def test_degree_sequence_and_histogram_sensitivity():
    for edges in random_graphs(30):
        deg = np.bincount(np.array(sorted(edges)).reshape(-1), minlength=N)
        for other in toggles(edges):
            d2 = np.bincount(np.array(sorted(other)).reshape(-1), minlength=N)
            assert np.abs(np.sort(deg) - np.sort(d2)).sum() <= 2
            h1, h2 = np.bincount(deg, minlength=N), np.bincount(d2, minlength=N)
            assert np.abs(h1 - h2).sum() <= 4


@pytest.mark.parametrize("stat", ["triangles", "2-stars", "3-stars"])
def test_smooth_bounds_cover_local_sensitivity_and_are_smooth(stat):
    if stat == "triangles":
        f, bounds = triangles, lambda e: g.triangle_bounds(*arrays(e), N)
    else:
        k = int(stat[0])
        f, bounds = (lambda e: kstars(e, k)), (lambda e: g.kstar_bounds(*arrays(e), N, k))
    for edges in random_graphs(12, p=0.6, seed=1):
        count, u = bounds(edges)
        assert count == f(edges)
        # LS at distance k ≤ U_k, k = 0, 1 (all graphs within k toggles)
        assert local_sensitivity(f, edges) <= u[0]
        near = max(local_sensitivity(f, other) for other in toggles(edges))
        assert near <= u[1]
        for other in toggles(edges):
            assert np.all(u[:-1] <= bounds(other)[1][1:] + 1e-9)  # U_k(G) ≤ U_{k+1}(G')


def test_a_non_smooth_bound_is_caught():
    """Broken variant: the local sensitivity itself (U_k = a_max for every k) is not smooth."""
    failures = 0
    for edges in random_graphs(12, p=0.6, seed=1):
        u = np.full(5, local_sensitivity(triangles, edges))
        for other in toggles(edges):
            failures += not np.all(u[:-1] <= local_sensitivity(triangles, other))
    assert failures > 0


def node_histogram(u, v, theta, salt, top):
    order = np.argsort(g._mix(u, v, salt), kind="stable")
    ku, kv = g.project(u[order], v[order], theta)
    deg = np.bincount(np.concatenate([ku, kv]), minlength=top)
    return np.bincount(deg, minlength=top + 1)[1: top + 1], ku.size


def sorted_by(u, v, salt):
    order = np.argsort(g._mix(u, v, salt), kind="stable")
    return u[order], v[order]


def clipped_histogram(u, v, theta, salt, top):
    """Broken: degrees clipped at θ without projecting the graph."""
    deg = np.minimum(np.bincount(np.concatenate([u, v]), minlength=top), theta)
    return np.bincount(deg, minlength=top + 1)[1: top + 1], 0


@pytest.mark.parametrize("theta", [1, 2, 3])
def test_node_projection_sensitivity(theta):
    n = 9
    worst = 0
    for edges in random_graphs(25, n=n, p=0.5, seed=2):
        salt = int(np.random.default_rng(len(edges)).integers(2**63))
        u, v = arrays(edges)
        h, m = node_histogram(u, v, theta, salt, n)
        assert h.sum() <= n and np.all(np.bincount(
            np.concatenate(g.project(u, v, theta)), minlength=n) <= theta)
        for x in range(n):
            keep = (u != x) & (v != x)
            h2, m2 = node_histogram(u[keep], v[keep], theta, salt, n)
            worst = max(worst, int(np.abs(h - h2).sum()))
            assert np.abs(h - h2).sum() <= 2 * theta + 1
            assert abs(m - m2) <= theta
            sat = g._saturated(*g.project(*sorted_by(u, v, salt), theta), theta)
            keep_u, keep_v = sorted_by(u[keep], v[keep], salt)
            sat2 = g._saturated(*g.project(keep_u, keep_v, theta), theta)
            assert abs(sat - sat2) <= theta + 1  # the θ score's sensitivity / 2
    assert worst >= theta  # the check reaches near the bound


def test_plain_clipping_breaks_node_sensitivity():
    n, theta = 12, 2
    star = frozenset((0, j) for j in range(1, n))  # removing the centre moves every leaf
    u, v = arrays(star)
    h, _ = clipped_histogram(u, v, theta, 0, n)
    keep = (u != 0) & (v != 0)
    h2, _ = clipped_histogram(u[keep], v[keep], theta, 0, n)
    assert np.abs(h - h2).sum() > 2 * theta + 1
    # the projection on the same pair stays within the bound
    p1, _ = node_histogram(u, v, theta, 5, n)
    p2, _ = node_histogram(u[keep], v[keep], theta, 5, n)
    assert np.abs(p1 - p2).sum() <= 2 * theta + 1


def frame(edges) -> pl.DataFrame:
    u, v = arrays(edges)
    return pl.DataFrame({"src": u, "dst": v})


def test_debits_equal_the_declared_budgets():
    df = frame(next(random_graphs(1)))
    f = PrivacyFilter(ApproxDP(10, Fraction(1, 100)))
    g.edge_count(df, n_nodes=N, epsilon=Fraction(1, 2), accountant=f)
    assert f.spent == ApproxDP(Fraction(1, 2), 0)
    g.degree_histogram(df, n_nodes=N, epsilon=Fraction(1, 4), accountant=f)
    g.degree_histogram(df, n_nodes=N, epsilon=Fraction(1, 4), method="laplace", accountant=f)
    g.degree_histogram(df, unit="node", max_degree=4, epsilon=Fraction(1, 2), accountant=f)
    assert f.spent == ApproxDP(Fraction(3, 2), 0)
    g.triangle_count(df, n_nodes=N, epsilon=1, delta=Fraction(1, 1000), accountant=f)
    g.kstar_count(df, n_nodes=N, k=2, epsilon=1, delta=Fraction(1, 1000), accountant=f)
    assert f.spent == ApproxDP(Fraction(7, 2), Fraction(2, 1000))


def test_outputs_and_messy_input_never_raise_after_the_debit():
    messy = pl.DataFrame({"src": [0, 1, 1, 2, 2, 5, None, 3, 40],
                          "dst": [1, 0, 1, 3, 3, 5, 2, -3, 1]})
    u, v = g.simple_edges(messy, n_nodes=N)
    assert list(zip(u, v, strict=True)) == [(0, 1), (2, 3)]
    f = PrivacyFilter(ApproxDP(100, Fraction(1, 10)))
    empty = pl.DataFrame({"src": [], "dst": []}, schema={"src": pl.Int64, "dst": pl.Int64})
    for df in (messy, empty):
        h = g.degree_histogram(df, n_nodes=N, epsilon=1, accountant=f)
        assert h.counts.sum() == N and np.all(h.counts >= 0) and h.sequence.size == N
        node = g.degree_histogram(df, unit="node", max_degree=8, epsilon=1, accountant=f)
        assert node.counts.size == node.theta
        assert isinstance(g.triangle_count(df, n_nodes=N, epsilon=1, delta=1e-6,
                                           accountant=f), int)
        assert isinstance(g.kstar_count(df, n_nodes=N, k=3, epsilon=1, delta=1e-6,
                                        accountant=f), int)


def test_bad_input_raises_before_any_debit():
    df = frame(next(random_graphs(1)))
    f = PrivacyFilter(ApproxDP(1, Fraction(1, 100)))
    with pytest.raises(BudgetExceededError):
        g.edge_count(df, n_nodes=N, epsilon=2, accountant=f)
    calls = [
        lambda: g.edge_count(df, n_nodes=0, epsilon=1, accountant=f),
        lambda: g.edge_count(df, n_nodes=N, epsilon=0, accountant=f),
        lambda: g.edge_count(df.to_dict(), n_nodes=N, epsilon=1, accountant=f),
        lambda: g.edge_count(df.cast(pl.Float64), n_nodes=N, epsilon=1, accountant=f),
        lambda: g.degree_histogram(df, epsilon=1, accountant=f),  # no n_nodes
        lambda: g.degree_histogram(df, n_nodes=N, epsilon=1, method="x", accountant=f),
        lambda: g.degree_histogram(df, n_nodes=N, epsilon=1, unit="user", accountant=f),
        lambda: g.degree_histogram(df, unit="node", epsilon=1, accountant=f),
        lambda: g.degree_histogram(df, unit="node", max_degree=0, epsilon=1, accountant=f),
        lambda: g.degree_histogram(df, unit="node", max_degree=4, theta_share=1, epsilon=1,
                                   accountant=f),
        lambda: g.triangle_count(df, n_nodes=2, epsilon=1, delta=1e-6, accountant=f),
        lambda: g.triangle_count(df, n_nodes=N, epsilon=1, delta=0, accountant=f),
        lambda: g.triangle_count(df, n_nodes=N, epsilon=1e-9, delta=1e-6, accountant=f),
        lambda: g.kstar_count(df, n_nodes=N, k=1, epsilon=1, delta=1e-6, accountant=f),
    ]
    for call in calls:
        with pytest.raises(DomainError):
            call()
    with pytest.raises(ColumnError):
        g.edge_count(df.rename({"dst": "to"}), n_nodes=N, epsilon=1, accountant=f)
    assert f.spent == ApproxDP(0, 0)


# Audit: the triangle count on G and G + {0, 1}, where nodes 0 and 1 share 4 neighbours
# (the edge closes 4 triangles). False-positive rate 1e-6 (dpkit.audit.audit_release); the
# broken variant claims ε = 1 but runs at ε = 8.
G0 = frozenset({(0, j) for j in range(2, 6)} | {(1, j) for j in range(2, 6)})
G1 = G0 | {(0, 1)}


def triangle_release(epsilon: float):
    return lambda edges: g.triangle_count(frame(edges), n_nodes=N, epsilon=epsilon,
                                          delta=1e-6)


@pytest.mark.slow
def test_audit_triangle_release_and_broken_variant():
    ok = audit_release(triangle_release(1.0), G0, G1, 1.0, 1e-6, samples=600,
                       histogram_share=0)
    assert ok.passed, ok.lower_bound
    broken = audit_release(triangle_release(8.0), G0, G1, 1.0, 1e-6, samples=600,
                           histogram_share=0)
    assert not broken.passed, broken.lower_bound


def utilities(edges, target, exclude_neighbours=False):
    scores = g.common_neighbours(*arrays(edges), N, target).astype(float)
    if exclude_neighbours:  # broken: the candidate set depends on the edges
        for a, b in edges:
            if target in (a, b):
                scores[b if a == target else a] = -1e9
    return np.delete(scores, target)


@pytest.mark.parametrize("broken", [False, True])
def test_recommendation_scores_move_by_one_and_one_way(broken):
    worst, two_way = 0.0, False
    for edges in random_graphs(15, p=0.5, seed=3):
        for target in range(N):
            a = utilities(edges, target, broken)
            for pair in PAIRS:
                if pair in edges:
                    continue
                b = utilities(edges | {pair}, target, broken)  # b is the graph with the edge
                worst = max(worst, float(np.abs(a - b).max()))
                two_way |= bool(np.any(b < a))
    assert (worst <= 1 and not two_way) != broken


def test_recommend_node_debit_and_bad_input():
    df = frame(next(random_graphs(1)))
    f = PrivacyFilter(ApproxDP(2, 0))
    pick = g.recommend_node(df, n_nodes=N, target=0, epsilon=Fraction(1, 2), accountant=f)
    assert 1 <= pick < N and f.spent == ApproxDP(Fraction(1, 2), 0)
    for kwargs in (dict(target=N), dict(target=-1), dict(epsilon=0), dict(n_nodes=1)):
        with pytest.raises(DomainError):
            g.recommend_node(df, **(dict(n_nodes=N, target=0, epsilon=1, accountant=f)
                                    | kwargs))
    assert f.spent == ApproxDP(Fraction(1, 2), 0)
