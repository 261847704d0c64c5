"""AIM's NumPy graphical model (dpkit.release.synthetic.jtree) and its vectorised parts
(dpkit.release.synthetic.aim) against the computations they replace: mbi's junction-tree
size, brute-force marginals of the dense joint, dpkit's JAX mirror descent
(``pgm_estimate``), the per-candidate score loop and the per-candidate size filter.
Deterministic: no noise is drawn."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.release.synthetic import jtree as J  # noqa: N812
from dpkit.release.synthetic.aim import SizeFilter, score_vector
from dpkit.release.synthetic.domain import Domain
from dpkit.release.synthetic.mst import Measured, loss_lipschitz, pgm_estimate

mbi = pytest.importorskip("mbi")

NAMES = "abcdef"


@st.composite
def domains_and_cliques(draw, max_attrs=5, max_size=4, max_cliques=5):
    d = draw(st.integers(2, max_attrs))
    sizes = tuple(draw(st.lists(st.integers(1, max_size), min_size=d, max_size=d)))
    domain = Domain(tuple(NAMES[:d]), sizes)
    clique = st.lists(st.sampled_from(domain.attributes), min_size=1, max_size=3,
                      unique=True).map(tuple)
    cliques = draw(st.lists(clique, min_size=1, max_size=max_cliques))
    return domain, cliques


def _mbi_size(domain: Domain, cliques) -> float:
    return float(mbi.junction_tree.hypothetical_model_size(
        mbi.Domain(domain.attributes, domain.sizes), [tuple(c) for c in cliques]))


@settings(max_examples=150, deadline=None)
@given(domains_and_cliques())
def test_model_size_equals_mbis(case):
    domain, cliques = case
    assert J.model_size(domain, cliques) == _mbi_size(domain, cliques)
    assert J.model_size(domain, cliques) <= J.size_bound(domain)


def test_model_size_cases_that_need_the_exact_order():
    # a path u–v–w–x: mbi eliminates a tree in DFS post-order (no fill: 50 + 1 + 50
    # cells); its greedy order would eliminate v first (all costs tie at 50, v is the
    # earliest attribute) and fill u–w (cliques uvw, wx: 100 cells)
    dom = Domain(("v", "w", "u", "x"), (1, 1, 50, 50))
    path = [("u", "v"), ("v", "w"), ("w", "x")]
    assert J.model_size(dom, path) == _mbi_size(dom, path) == 101 * 8 / 2 ** 20
    # a 4-cycle needs one fill edge; ties go to the earliest attribute
    dom = Domain(tuple("abcd"), (2, 3, 50, 50))
    cycle = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")]
    assert J.model_size(dom, cycle) == _mbi_size(dom, cycle)
    # the bound: Σ_k the product of the k largest sizes
    assert J.size_bound(dom) == (50 + 2500 + 7500 + 15000) * 8 / 2 ** 20


@settings(max_examples=60, deadline=None)
@given(domains_and_cliques(), st.integers(0, 2 ** 31 - 1))
def test_marginals_equal_the_dense_joint(case, seed):
    """Every clique's marginal (inside a node, across components, or eliminated over a
    subtree) equals the brute-force sum of the normalised dense joint."""
    domain, cliques = case
    tree = J.JunctionTree(domain, cliques)
    rng = np.random.default_rng(seed)  # test input only
    theta = [rng.normal(0, 2, s) for s in tree.shapes]
    probs = tree.calibrate(theta)
    log_joint = np.zeros(domain.shape())
    for node, table in zip(tree.nodes, theta, strict=True):
        shape = [s if a in node else 1 for a, s in zip(domain.attributes, domain.sizes,
                                                        strict=True)]
        log_joint = log_joint + table.reshape(shape)
    joint = np.exp(log_joint - log_joint.max())
    joint /= joint.sum()
    queries = [q for k in (1, 2, 3) for q in itertools.permutations(domain.attributes, k)]
    got = tree.marginals(probs, queries)
    for q, g in zip(queries, got, strict=True):
        axes = tuple(i for i, a in enumerate(domain.attributes) if a not in q)
        kept = [a for a in domain.attributes if a in q]
        want = np.transpose(joint.sum(axis=axes), [kept.index(a) for a in q])
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-12)


def _dense_marginal(domain: Domain, tree: J.JunctionTree, theta, query) -> np.ndarray:
    """Brute force: the normalised joint exp(Σ θ) on the full domain, summed to ``query``
    (log-sum-exp, so it is exact however large θ is)."""
    log_joint = np.zeros(domain.shape())
    for node, table in zip(tree.nodes, theta, strict=True):
        shape = [s if a in node else 1 for a, s in zip(domain.attributes, domain.sizes,
                                                        strict=True)]
        log_joint = log_joint + table.reshape(shape)
    joint = np.exp(log_joint - log_joint.max())
    joint /= joint.sum()
    axes = tuple(i for i, a in enumerate(domain.attributes) if a not in query)
    kept = [a for a in domain.attributes if a in query]
    return np.transpose(joint.sum(axis=axes), [kept.index(a) for a in query])


@pytest.mark.parametrize("gap", [50.0, 800.0, 5000.0])
def test_calibration_survives_potentials_far_apart(gap):
    """Attack: two nodes that disagree by hundreds of nats (mirror descent drifts the
    potentials of inconsistent noisy measurements apart). In probability space both
    nodes' rescaled tables multiply to 0 everywhere and every marginal was NaN; the exact
    answer puts the mass where the larger potential says."""
    dom = Domain(tuple("abcd"), (2, 3, 2, 2))
    tree = J.JunctionTree(dom, [("a", "b"), ("b", "c"), ("c", "d")])
    theta = []
    for node, shape in zip(tree.nodes, tree.shapes, strict=True):
        t = np.zeros(shape)
        if node == ("a", "b"):
            t[:, 0] = gap  # b = 0, strongly
        elif node == ("b", "c"):
            t[2, :] = 1.25 * gap  # b = 2, more strongly
            t[:, 1] += 0.5
        theta.append(t)
    probs = tree.calibrate(theta)
    assert all(np.isfinite(p).all() for p in probs)
    for q in (("b",), ("a", "b"), ("b", "c"), ("d", "a"), ("a", "c", "d")):
        np.testing.assert_allclose(tree.marginal(probs, q),
                                   _dense_marginal(dom, tree, theta, q), rtol=1e-9,
                                   atol=1e-12)


def test_marginals_across_a_path_and_a_forest():
    """Deterministic cover of each query path: inside a node, eliminated along a chain of
    five nodes, across two components, and both at once."""
    dom = Domain(tuple("abcdefgh"), (2, 3, 2, 4, 2, 3, 2, 2))
    chain = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f"), ("g", "h")]
    tree = J.JunctionTree(dom, chain)
    assert len(tree.nodes) == 6 and len(set(tree.root)) == 2
    rng = np.random.default_rng(7)  # test input only
    theta = [rng.normal(0, 1.5, s) for s in tree.shapes]
    probs = tree.calibrate(theta)
    for q in (("b", "a"), ("a", "f"), ("f", "c", "a"), ("a", "e", "g"), ("h", "d", "b"),
              ("g", "h", "a", "f")):
        np.testing.assert_allclose(tree.marginal(probs, q),
                                   _dense_marginal(dom, tree, theta, q), rtol=1e-9,
                                   atol=1e-12)


DOM = Domain.from_dict({"a": 3, "b": 4, "c": 5, "d": 2})


def _measurements() -> list[Measured]:
    a, b, c, d = np.meshgrid(*(np.arange(n) for n in DOM.sizes), indexing="ij")
    joint = 1.0 + a + ((2 * b * c) % 3) + 2.0 * d * (a == b)
    joint = 500.0 * joint / joint.sum()
    out = []
    for clique, sigma in ((("a",), 2.0), (("b",), 3.0), (("a", "b"), 1.5), (("b", "c"), 4.0),
                          (("c", "d"), 2.5), (("c",), 1.0), (("d",), 5.0), (("b", "c"), 2.0)):
        drop = tuple(i for i, x in enumerate(DOM.attributes) if x not in clique)
        values = joint.sum(axis=drop).ravel()
        out.append(Measured(clique, values * (1 + 0.05 * np.cos(np.arange(values.size))),
                            sigma))
    return out


@pytest.mark.parametrize("iters", [0, 40, 300])
@pytest.mark.parametrize("path", ["dense", "einsum", "bincount"])
def test_fit_matches_dpkits_jax_mirror_descent(iters, path, monkeypatch):
    """Same iterates as ``pgm_estimate`` (the repeated (b, c) measurement pooled), on the
    model's cliques and off them, whichever way the node tables are projected."""
    if path != "dense":
        monkeypatch.setattr(J, "_DENSE", 0)
    if path == "bincount":
        monkeypatch.setattr(J, "_MANY_AXES", 0)
    ms = _measurements()
    top = mbi.clique_utils.maximal_subset([m.clique for m in ms])
    ours = J.fit(DOM, J.Measurements.pool(ms), 500.0, iters, loss_lipschitz(DOM, ms, top))
    ref = pgm_estimate(DOM, ms, 500.0, iters)
    for clique in (("a", "b"), ("c", "b"), ("a", "c"), ("d", "a", "c"), ("d",)):
        np.testing.assert_allclose(ours.marginal(clique),
                                   np.asarray(ref.project(clique).datavector(flatten=False)),
                                   rtol=1e-8, atol=1e-8)


def test_warm_start_continues_the_fit():
    ms = _measurements()
    top = mbi.clique_utils.maximal_subset([m.clique for m in ms])
    lip = loss_lipschitz(DOM, ms, top)
    pooled = J.Measurements.pool(ms)
    cold = J.fit(DOM, pooled, 500.0, 5, lip)
    warm = J.fit(DOM, pooled, 500.0, 5, lip, start=J.fit(DOM, pooled, 500.0, 200, lip))
    target = J.fit(DOM, pooled, 500.0, 400, lip)

    def gap(model: J.Model) -> float:
        return float(np.abs(model.marginal(("a", "b")) - target.marginal(("a", "b"))).sum())

    assert gap(warm) < 0.1 * gap(cold)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(0, 5)), min_size=1, max_size=8),
       st.floats(0.01, 500), st.integers(0, 2 ** 31 - 1))
def test_score_vector_equals_the_per_candidate_loop(shapes, sigma, seed):
    """Bit for bit what aim.py computed per candidate before: w·(fsum|x − x̂| −
    √(2/π)·σ·cells)."""
    rng = np.random.default_rng(seed)  # test input only
    truth = [rng.integers(0, 1000, size) for size, _ in shapes]
    est = [rng.normal(300, 200, size) for size, _ in shapes]
    weights = [w for _, w in shapes]
    old = [w * (math.fsum(np.abs(t - e).ravel()) - math.sqrt(2 / math.pi) * sigma * t.size)
           for t, e, w in zip(truth, est, weights, strict=True)]
    assert np.array_equal(score_vector(truth, est, weights, sigma), np.array(old))


@settings(max_examples=60, deadline=None)
@given(domains_and_cliques(max_size=6, max_cliques=4),
       st.lists(st.floats(0.0001, 0.02), min_size=1, max_size=4))
def test_size_filter_equals_the_per_candidate_mbi_filter(case, limits):
    """What aim.py kept before (mbi's size of have + [c] ≤ limit), over a sequence of
    rounds with growing measurements and limits (the cache must not go stale)."""
    domain, cliques = case
    cands = [c for k in (1, 2) for c in itertools.combinations(domain.attributes, k)]
    have = [(a,) for a in domain.attributes]
    sizes = SizeFilter(domain)
    for clique, limit in zip(cliques, sorted(limits), strict=False):
        want = [c for c in cands if _mbi_size(domain, have + [c]) <= limit]
        assert sizes(have, cands, limit) == want
        have.append(clique)
