"""The accuracy guards of issue 34: the node-level degree histogram's TrivialResultWarning,
one posterior sample's and the iterative construction's BaselineWarning.

Each guard fires in the regime it claims, stays quiet where the method is good, spends
nothing (the filter's spend is the same with the guard disabled), and a broken variant (the
guard disabled) is caught by the firing test's check. The posterior and IC guards are
data-free (no randomness in the decision). The node-level guard reads released counts; the
constructions below make its decision certain up to a stated rate (each ≤ 1e-6, computed in
the test's comment).
"""

from __future__ import annotations

import itertools
import warnings
from fractions import Fraction

import numpy as np
import polars as pl

from dpkit.apps import graph as g
from dpkit.apps import posterior as post
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BaselineWarning, TrivialResultWarning
from dpkit.release.synthetic import iterative as ic
from dpkit.release.synthetic.domain import Domain
from dpkit.release.synthetic.marginals import MarginalWorkload


def _caught(category: type[Warning], call) -> tuple[bool, object]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = call()
    return any(issubclass(w.category, category) for w in seen), out


# -------------------------------------------------------------- node-level degree histogram
def _complete(n: int = 30) -> pl.DataFrame:
    pairs = np.array(list(itertools.combinations(range(n), 2)))
    return pl.DataFrame({"src": pairs[:, 0], "dst": pairs[:, 1]})


def _matching(pairs: int = 1000) -> pl.DataFrame:
    return pl.DataFrame({"src": np.arange(0, 2 * pairs, 2), "dst": np.arange(1, 2 * pairs, 2)})


def _node_fires(accountant=None) -> tuple[bool, g.DegreeHistogram]:
    """K₃₀ (every degree 29) under a cap max_degree = 2: either θ cuts every node. θ = 1
    always warns (one bin). θ = 2: the greedy projection leaves at least 28 of the 30
    nodes at the cap, and at ε = 50 the per-bin noise has scale 5/45 = 1/9: the released
    mass either stays within the noise (rule 1) or sits at the cap (rule 2 fails only if a
    bin moves by ≥ 13: P ≤ 2·2·e^{−13·9} < 1e-6)."""
    return _caught(TrivialResultWarning, lambda: g.degree_histogram(
        _complete(), unit="node", max_degree=2, epsilon=50, accountant=accountant))


def test_node_guard_fires_on_a_saturated_graph():
    fired, hist = _node_fires()
    assert fired and hist.warning is not None and "max_degree" in hist.warning


def test_node_guard_is_quiet_where_the_projection_is_exact():
    # 1,000 disjoint edges (every degree 1), max_degree = 4, ε = 10: θ = 1 scores −4000
    # against θ ≥ 2's ≥ −36/9, so it is picked with probability < e^{−190}; then bin 1
    # holds 2,000 nodes, the other bins noise of scale ≤ 1 (rule 2 needs |Z| ≥ 1000 in the
    # top bin and rule 1 a drop of ≥ 1,990 in bin 1: each < e^{−900}). Rate < 1e-6.
    fired, hist = _caught(TrivialResultWarning, lambda: g.degree_histogram(
        _matching(), unit="node", max_degree=4, epsilon=10))
    assert not fired and hist.warning is None and hist.theta >= 2


def test_node_guard_broken_variant_is_caught(monkeypatch):
    monkeypatch.setattr(g, "trivial_reason", lambda *a: None)  # the guard disabled
    fired, hist = _node_fires()
    assert not (fired and hist.warning is not None)  # the firing test would fail


def test_node_guard_spends_nothing_more(monkeypatch):
    guarded = PrivacyFilter(PureDP(100))
    _node_fires(guarded)
    monkeypatch.setattr(g, "trivial_reason", lambda *a: None)
    plain = PrivacyFilter(PureDP(100))
    _node_fires(plain)
    assert guarded.spent == plain.spent == PureDP(50)


def test_trivial_reason_rules():
    scale = Fraction(1)  # μ ≈ 0.58, σ ≈ 0.95 per bin
    assert "within the noise" in g.trivial_reason(np.array([1, 0, 2]), 3, scale)
    assert "cap" in g.trivial_reason(np.array([10, 0, 40]), 3, scale)
    assert g.trivial_reason(np.array([40, 5, 10]), 3, scale) is None
    assert "one bin" in g.trivial_reason(np.array([40]), 1, scale)


# --------------------------------------------------------------------- one posterior sample
def _ops_fires(n: int, eps: float, accountant=None) -> bool:
    x = np.tile([1, 0, 0], n // 3 + 1)[:n]
    return _caught(BaselineWarning, lambda: post.one_posterior_sample(
        x, epsilon=eps, accountant=accountant))[0]


def test_ops_guard_fires_and_is_quiet_by_its_rule():
    # Δ = log 99 ≈ 4.6, a(1 − a) = 0.0099: fires iff n·ε > 22.0 (data-free, no rate)
    assert _ops_fires(3000, 1)
    assert not _ops_fires(10, 1) and not _ops_fires(100, Fraction(1, 10))
    fired, _ = _caught(BaselineWarning, lambda: post.one_posterior_sample_categorical(
        np.arange(3000) % 3, epsilon=1, categories=3))
    assert fired
    quiet, _ = _caught(BaselineWarning, lambda: post.one_posterior_sample_categorical(
        np.arange(30) % 3, epsilon=Fraction(1, 10), categories=3))
    assert not quiet


def test_ops_guard_claim_holds_exactly_where_it_fires():
    # Exact, no sampling: OPS's mean squared distance to s/n under its law (posterior_law)
    # against the Laplace count's, Var(Z)/n² = 2p/((1 − p)² n²), p = e^{−ε}.
    grid = post.beta_bernoulli_grid()
    for n, eps in ((3000, 1.0), (1000, 0.1)):
        assert post.laplace_preferred(grid, n, eps)
        s = n // 3
        law = post.posterior_law(grid, (s, n - s), eps)
        ops = float(law @ (grid.theta[:, 0] - s / n) ** 2)
        p = np.exp(-eps)
        assert ops > 2 * p / (1 - p) ** 2 / n**2


def test_ops_guard_broken_variant_is_caught(monkeypatch):
    monkeypatch.setattr(post, "laplace_preferred", lambda *a: False)
    assert not _ops_fires(3000, 1)  # the firing test's check would fail


def test_ops_guard_spends_nothing_more(monkeypatch):
    guarded = PrivacyFilter(PureDP(2))
    _ops_fires(3000, 1, guarded)
    monkeypatch.setattr(post, "laplace_preferred", lambda *a: False)
    plain = PrivacyFilter(PureDP(2))
    _ops_fires(3000, 1, plain)
    assert guarded.spent == plain.spent == PureDP(1)


# -------------------------------------------------------------------- iterative construction
def _queries(cliques) -> ic.LinearQueries:
    domain = Domain(("a", "b"), (4, 3))
    return ic.LinearQueries.from_marginals(MarginalWorkload(domain, cliques))


def _ic_fires(queries: ic.LinearQueries) -> tuple[bool, ic.ICResult]:
    counts = np.arange(12, dtype=np.int64)
    return _caught(BaselineWarning, lambda: ic.IterativeConstruction(T=10).run(
        counts, queries))


def test_ic_guard_fires_past_T_queries_and_is_quiet_within():
    fired, res = _ic_fires(_queries((("a", "b"),)))  # 12 queries > T = 10
    assert fired and "MWEM" in res.note
    quiet, res = _ic_fires(_queries((("b",),)))  # 3 queries ≤ T
    assert not quiet and res.note is None


def test_ic_check_warns_before_any_run():
    fired, _ = _caught(BaselineWarning,
                       lambda: ic.IterativeConstruction(T=10).check(12, queries=12))
    assert fired


def test_ic_guard_broken_variant_is_caught(monkeypatch):
    monkeypatch.setattr(ic.IterativeConstruction, "advice", lambda self, m: None)
    fired, res = _ic_fires(_queries((("a", "b"),)))
    assert not fired and res.note is None  # the firing test's check would fail


def test_ic_guard_spends_nothing_more():
    run = ic.IterativeConstruction(T=10, epsilon=1)
    assert run.privacy() == PureDP(1)
    _, res = _ic_fires(_queries((("a", "b"),)))
    assert res.epsilon == 1
