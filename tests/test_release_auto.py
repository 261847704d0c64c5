"""``method="auto"`` (dpkit.release.ranges.auto): the exact budget split, the rule as a pure
function of the noisy and public features, the fitting rule, and the default."""

from __future__ import annotations

import inspect
from fractions import Fraction

import numpy as np
import pytest
from release_checks import record, total_epsilon

import dpkit.release  # noqa: F401 - registers the built-in algorithms
from dpkit.errors import DomainError
from dpkit.release.ranges import auto as A  # noqa: N812
from dpkit.release.ranges.auto_rule import RULE
from dpkit.release.ranges.histogram import make_histogram_release, method, release_histogram
from dpkit.release.session import ReleaseNamespace, release_query_histogram
from dpkit.release.workload import prefix, random_ranges

RULE_FIXED = {"1/Range1D": {-1: "uniform", 0: "dawa", 1: "hb"},
              "1/Prefix1D": {0: "privelet"}}


@pytest.mark.parametrize("eps", [Fraction(1), Fraction(1, 10), Fraction(1, 3), Fraction(7, 2),
                                 Fraction(1, 1000)])
def test_split_sums_exactly_to_epsilon(eps):
    eps0, rest = A.split(eps)
    assert eps0 + rest == eps
    assert 0 < eps0 <= eps * A.SHARE and rest > 0


def test_release_spends_the_count_share_first_and_at_most_epsilon(monkeypatch):
    x = np.random.default_rng(0).multinomial(10 ** 4, np.full(256, 1 / 256))  # test input
    eps = Fraction(1, 3)
    log = record(monkeypatch)
    release_histogram(x, eps, "auto", workload=prefix(256))
    assert log[0].values.size == 1 and log[0].sensitivity == 1
    assert log[0].epsilon == A.split(eps)[0]
    assert total_epsilon(log) <= eps
    # broken: an auto that spent the count's share and then all of ε again would be caught
    assert total_epsilon(log) - log[0].epsilon <= A.split(eps)[1]


def test_declared_scale_spends_nothing_on_the_count(monkeypatch):
    x = np.zeros(64, dtype=np.int64)
    log = record(monkeypatch)
    release_histogram(x, 1, "auto", scale=0, rule={"1/Range1D": {0: "identity"}})
    assert [(m.values.size, m.epsilon) for m in log] == [(64, 1)]  # all of ε on the cells
    with pytest.raises(DomainError):
        release_histogram(x, 1, "auto", scale=-1)
    with pytest.raises(DomainError):
        release_histogram(x, 1, "auto", scale=2.5)


def test_rank_three_is_identity_at_all_of_epsilon(monkeypatch):
    x = np.ones((4, 4, 4), dtype=np.int64)
    log = record(monkeypatch)
    release_histogram(x, Fraction(1, 2), "auto")
    assert [m.values.size for m in log] == [64] and log[0].epsilon == Fraction(1, 2)


def test_choose_is_a_pure_function_of_the_features():
    # signal N̂·ε/cells: 10·0.1/100 = 0.01 -> decade −2, clamped to the lowest (−1)
    assert A.choose(10, 0.1, 100, 1, "Range1D", RULE_FIXED) == "uniform"
    assert A.choose(0, 0.1, 100, 1, "Range1D", RULE_FIXED) == "uniform"  # N̂ = 0
    assert A.choose(100, 1, 100, 1, "Range1D", RULE_FIXED) == "dawa"  # signal 1
    assert A.choose(250, 1, 100, 1, "Range1D", RULE_FIXED) == "dawa"  # log 0.40 -> 0
    assert A.choose(400, 1, 100, 1, "Range1D", RULE_FIXED) == "hb"  # log 0.60 -> 1
    assert A.choose(1e9, 1, 100, 1, "Range1D", RULE_FIXED) == "hb"  # clamped to the top
    assert A.choose(1e9, 1, 100, 1, "Prefix1D", RULE_FIXED) == "privelet"
    assert A.choose(100, 1, 100, 2, "Range2D", RULE_FIXED) == "identity"  # no row
    assert A.choose(100, 1, 100, 3, "Range3D", RULE_FIXED) == "identity"


def test_workload_kind_is_public():
    g = np.random.default_rng(1)  # test input
    assert A.workload_kind(prefix(8), 1) == "Prefix1D"
    assert A.workload_kind(random_ranges(8, 5, g), 1) == "Range1D"
    assert A.workload_kind(None, 1) == "Range1D"
    assert A.workload_kind(None, 2) == "Range2D"


def test_release_runs_the_rules_pick(monkeypatch):
    """With a rule that names one algorithm for every signal, auto runs that algorithm at
    the rest of ε: its measurements are the algorithm's (uniform: one total)."""
    rule = {"1/Range1D": {0: "uniform"}}
    x = np.arange(32, dtype=np.int64)
    log = record(monkeypatch)
    out = release_histogram(x, 1, "auto", rule=rule).counts
    assert [m.values.size for m in log] == [1, 1]  # the count, then uniform's total
    assert np.ptp(out) == 0  # uniform's spread
    log.clear()
    release_histogram(x, 1, "auto", rule={"1/Range1D": {0: "identity"}})
    assert [m.values.size for m in log] == [1, 32]


def test_shipped_rule_names_registered_candidates():
    for key, table in RULE.items():
        dims = int(key.split("/")[0])
        assert table, key
        for name in table.values():
            assert name in A.CANDIDATES[dims]
            method(name, dims)


def _cell(signal, **errors):
    return A.Cell(1, "Range1D", signal, errors)


def test_fit_rule_minimises_the_log_ratio_among_methods_safe_against_identity():
    cells = [_cell(1.0, identity=1.0, a=0.5, b=0.6), _cell(1.2, identity=1.0, a=0.5, b=0.6),
             _cell(10.0, identity=1.0, a=0.3, b=0.9)]
    assert A.fit_rule(cells) == {"1/Range1D": {0: "a", 1: "a"}}
    # a loses 2× to Identity on the neighbouring decade: not safe on decade 0 either
    cells[2] = _cell(10.0, identity=1.0, a=2.0, b=0.9)
    assert A.fit_rule(cells) == {"1/Range1D": {0: "b", 1: "b"}}
    cells[2] = _cell(10.0, identity=1.0, a=2.0, b=2.0)
    assert A.fit_rule(cells) == {"1/Range1D": {0: "identity", 1: "identity"}}


def test_fit_rule_interpolated_edges_pair_cells_of_one_dataset():
    """edges="interpolated": a candidate is safe on a decade if the ratio to Identity,
    interpolated log-linearly to the half-decade edge with the same dataset's cell on the
    neighbouring decade, stays within the margin (neighbours: every neighbour cell must)."""
    def cell(signal, a, dataset="D"):
        return A.Cell(1, "Range1D", signal, {"identity": 1.0, "a": a, "b": 0.9}, dataset)

    cells = [cell(1.0, 0.5), cell(10.0, 2.0)]  # edge: √(0.5·2.0) = 1.0 ≤ 1.1
    assert A.fit_rule(cells) == {"1/Range1D": {0: "b", 1: "b"}}
    assert A.fit_rule(cells, edges="interpolated") == {"1/Range1D": {0: "a", 1: "b"}}
    cells[1] = cell(10.0, 3.0)  # edge: √(0.5·3.0) = 1.22 > 1.1
    assert A.fit_rule(cells, edges="interpolated") == {"1/Range1D": {0: "b", 1: "b"}}
    cells[1] = cell(10.0, 3.0, dataset="E")  # another dataset's cell: not interpolated with
    assert A.fit_rule(cells, edges="interpolated") == {"1/Range1D": {0: "a", 1: "b"}}
    with pytest.raises(ValueError):
        A.fit_rule(cells, edges="nearest")


def test_any_record_count_runs_the_count_then_mm(monkeypatch):
    """No input domain any more (tests/test_ranges_totality.py): 2^31 records and more run
    the noisy count, then mm, without a refusal that reads the data."""
    x = np.array([2**31 - 1, 1, 0, 0], dtype=np.int64)
    log = record(monkeypatch)
    release_histogram(x, 1, "auto", rule={"1/Range1D": {0: "mm"}})
    assert len(log) == 2  # the count, then mm


def test_mm_pick_on_a_large_1d_domain_runs_hb(monkeypatch):
    """Above MM_CELLS_1D cells (strategy optimisation takes tens of seconds) a pick of mm
    runs HB; at or below it, mm. The domain size is public: no privacy cost."""
    assert 4096 <= A.MM_CELLS_1D <= 8192  # the rule's training domain; measured time
    seen: list[str] = []

    def spy(name, dims):  # the registry's lookup, which release_histogram hands to auto
        seen.append(name)
        return method(name, dims)

    monkeypatch.setattr(A, "MM_CELLS_1D", 64)  # small, to keep mm's optimisation fast
    rule = {"1/Range1D": {0: "mm"}}
    # the last lookup is the algorithm run (the plan-time check of the rule looks its names
    # up first)
    release_histogram(np.ones(65, dtype=np.int64), 1, "auto", rule=rule, lookup=spy)
    assert seen[-1] == "hb"
    release_histogram(np.ones(64, dtype=np.int64), 1, "auto", rule=rule, lookup=spy)
    assert seen[-1] == "mm"
    with pytest.raises(DomainError, match="release_histogram"):  # auto alone has no lookup
        A.auto(np.ones(8, dtype=np.int64), Fraction(1))


def test_auto_is_the_default():
    for fn in (release_histogram, make_histogram_release, release_query_histogram,
               ReleaseNamespace.histogram):
        assert inspect.signature(fn).parameters["method"].default == "auto"
