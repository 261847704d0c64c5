"""``method="auto"`` records its choice, falls back to HDMM at low signal in 2-D and runs a
data-independent algorithm at high signal (issue 34).

Every path of auto's rule records a registered method name in the release's options; the
conservative fallback (``auto.FALLBACK``) replaces the table's pick on its decades and only
there, and the high-signal guard (``auto.HIGH``) decides from its decade up and only there
(checked with the noisy count made exact, and by spying on the algorithm run); the choice
costs no extra debit; sessions and the HTML report carry it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from release_checks import record, total_epsilon

import dpkit as dp
from dpkit.core.accountant import FilterAccountant
from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.ledger import Ledger
from dpkit.release.ranges import auto as A  # noqa: N812
from dpkit.release.ranges.auto_rule import RULE
from dpkit.release.ranges.histogram import method, methods, release_histogram
from dpkit.release.synthetic.domain import Bins
from dpkit.report import release_html

CELLS = 64 * 64


def _exact_count(monkeypatch) -> None:
    """Zero noise on auto's record count: N̂ = N, so the signal's decade is known."""
    monkeypatch.setattr(A, "noisy_total", lambda x, eps0: float(x.sum()))


def _spy() -> tuple[list[str], object]:
    seen: list[str] = []

    def lookup(name, dims):  # the registry's lookup, as release_histogram hands it to auto
        seen.append(name)
        return method(name, dims)
    return seen, lookup


def _grid(records: int) -> np.ndarray:
    """A 64 × 64 histogram of ``records`` records spread over the cells."""
    x = np.full(CELLS, records // CELLS, dtype=np.int64)
    x[:records % CELLS] += 1
    assert x.sum() == records
    return x.reshape(64, 64)


def _decade_records(decade: int, eps: Fraction) -> int:
    """Records whose signal N·ε'/cells is 10^decade (ε' = ε minus the count's share)."""
    return round(10.0 ** decade * CELLS / float(A.split(eps)[1]))


def test_shipped_fallback_is_low_signal_2d_and_names_a_registered_robust_method():
    assert set(A.FALLBACK) <= set(RULE)
    for key, (robust, decades) in A.FALLBACK.items():
        dims = int(key.split("/")[0])
        assert method(robust, dims).robust and not method(robust, dims).data_dependent
        assert decades and max(decades) <= 0  # low signal: at most ~3 records per cell
        assert all(RULE[key].get(d) != robust for d in decades)  # each replaces a pick


@pytest.mark.parametrize("decade, name, why", [
    (-3, "ag", "rule"), (-2, "ag", "rule"), (-1, "mm", "fallback"), (0, "mm", "fallback"),
    (1, "mm", "high signal"), (2, "mm", "high signal")])
def test_pick_falls_back_on_the_fallback_decades_only(decade, name, why):
    n = 10.0 ** decade * CELLS  # signal n·1/cells = 10^decade
    assert A.pick(n, 1, CELLS, 2, "Range2D") == (name, why)
    assert A.choose(n, 1, CELLS, 2, "Range2D") == name
    # broken variant: without the fallback the table's data-dependent pick stands
    if why == "fallback":
        assert A.pick(n, 1, CELLS, 2, "Range2D", RULE, {})[0] == RULE["2/Range2D"][decade]


def test_a_given_rule_runs_without_the_fallback():
    """The fallback was fitted for the shipped rule; a rule given (leave-one-out) runs as
    it is, so a copy of the shipped table picks its own entry on a fallback decade."""
    copy = {k: dict(v) for k, v in RULE.items()}
    assert A.pick(CELLS, 1, CELLS, 2, "Range2D", copy) == (RULE["2/Range2D"][0], "rule")


def test_shipped_high_signal_guard_names_registered_data_independent_methods():
    for dims, names in A.INDEPENDENT.items():
        for name in names:
            assert not method(name, dims).data_dependent and name in A.CANDIDATES[dims]
    assert set(A.HIGH) == set(RULE)  # every row of the table has a guard
    for key, (name, decade) in A.HIGH.items():
        dims = int(key.split("/")[0])
        assert name in A.INDEPENDENT[dims] and method(name, dims).robust
        assert decade >= 0  # high signal: at least ~0.3 records per cell per unit of noise


# a table that picks a data-dependent algorithm at every signal: what the guard overrides
DAWA_EVERYWHERE = {"1/Range1D": {d: "dawa" for d in range(-2, 4)},
                   "1/Prefix1D": {d: "dawa" for d in range(-2, 4)},
                   "2/Range2D": {d: "dawa" for d in range(-3, 3)}}


@pytest.mark.parametrize("key", sorted(A.HIGH))
def test_high_signal_guard_decides_from_its_decade_up_and_only_there(key):
    """Half a decade below the guard's decade (the rounding edge) the table picks; at the
    edge and far above (beyond the table's decades), the guard's data-independent
    algorithm. Broken variant: without the guard the table's DAWA stands at high signal."""
    dims, kind = int(key.split("/")[0]), key.split("/")[1]
    name, decade = A.HIGH[key]
    edge = 10.0 ** (decade - 0.5) * CELLS  # signal n·1/cells = 10^(decade − 1/2)
    for n in (edge * 1.001, 10.0 ** decade * CELLS, 1e12 * CELLS):
        assert A.pick(n, 1, CELLS, dims, kind, DAWA_EVERYWHERE, {}, A.HIGH) == (
            name, "high signal")
        assert A.pick(n, 1, CELLS, dims, kind, DAWA_EVERYWHERE, {}, {})[0] == "dawa"
    for n in (edge * 0.999, 0.0):  # below the edge, and N̂ = 0
        assert A.pick(n, 1, CELLS, dims, kind, DAWA_EVERYWHERE, {}, A.HIGH) == ("dawa", "rule")
    # the shipped rule takes the guard by default; a given rule runs without it
    assert A.pick(1e12 * CELLS, 1, CELLS, dims, kind) == (name, "high signal")
    assert A.pick(1e12 * CELLS, 1, CELLS, dims, kind, DAWA_EVERYWHERE)[0] == "dawa"


def test_high_signal_runs_the_guards_algorithm_and_the_table_below(monkeypatch):
    """Zero-noise count and a spy on the algorithm run, 1-D ranges (guard from decade 1):
    at signal ≈ 10^2 auto runs (and records) mm by the guard; at ≈ 10^0 the table's pick;
    on a domain beyond MM_CELLS_1D the guard's mm becomes HB."""
    _exact_count(monkeypatch)
    eps = Fraction(1)
    per_cell = float(A.split(eps)[1])
    seen, lookup = _spy()
    out = release_histogram(np.full(256, round(100 / per_cell), dtype=np.int64), eps, "auto",
                            lookup=lookup)
    assert seen[-1] == "mm" and (out.chosen, out.options["chose_by"]) == ("mm", "high signal")
    assert out.method_text == "auto → mm (high signal)"
    out = release_histogram(np.full(256, round(1 / per_cell), dtype=np.int64), eps, "auto",
                            lookup=lookup)
    assert seen[-1] == RULE["1/Range1D"][0] == out.chosen and out.options["chose_by"] == "rule"
    monkeypatch.setattr(A, "MM_CELLS_1D", 64)
    out = release_histogram(np.full(65, round(100 / per_cell), dtype=np.int64), eps, "auto",
                            lookup=lookup)
    assert seen[-1] == "hb" and out.options["chose_by"] == "large 1-D"


def test_high_signal_costs_no_extra_debit(monkeypatch):
    """At high signal the accountant is debited ε once; the draws are the count's share
    and then mm's, summing to at most ε."""
    eps = Fraction(1)
    x = np.full(256, 1000, dtype=np.int64)  # signal ≈ 950: decade 3
    log = record(monkeypatch)
    acc = FilterAccountant(PureDP(1))
    out = release_histogram(x, eps, "auto", accountant=acc)
    assert out.options["chose_by"] == "high signal" and out.chosen == "mm"
    assert acc.spent == PureDP(eps) and acc.last.values is out
    assert log[0].values.size == 1 and log[0].epsilon == A.split(eps)[0]
    assert len(log) > 1 and total_epsilon(log) <= eps


def test_fit_high_starts_above_the_last_decade_where_data_dependence_pays():
    def cell(signal, dawa, mm, hb, dataset):
        return A.Cell(1, "Range1D", signal, {"identity": 1.0, "dawa": dawa, "mm": mm,
                                             "hb": hb}, dataset)

    cells = [cell(0.1, 0.2, 0.5, 0.6, "a"), cell(0.1, 0.9, 0.5, 0.6, "b"),  # dawa pays
             cell(1.0, 0.4, 0.5, 0.6, "a"), cell(1.0, 0.7, 0.5, 0.6, "b"),  # 0.4·0.7 > 0.25
             cell(10.0, 0.6, 0.5, 0.6, "a"), cell(10.0, 0.3, 0.5, 0.6, "b")]  # pays again
    assert A.fit_high(cells[:4]) == {"1/Range1D": ("mm", 0)}
    assert A.fit_high(cells) == {}  # data-dependence pays at the top decade: no guard
    # mm above the margin on one cell: hb, safe everywhere, is the guard's algorithm
    unsafe = [cells[0], cell(1.0, 0.9, 0.5, 0.6, "a"), cell(1.0, 0.7, 1.3, 0.6, "b")]
    assert A.fit_high(unsafe) == {"1/Range1D": ("hb", 0)}
    assert A.fit_high(unsafe, margin=0.55) == {}  # no data-independent algorithm is safe


def test_fallback_runs_hdmm_below_the_threshold_and_the_pick_above(monkeypatch):
    """Zero-noise count and a spy on the algorithm run: on a fallback decade auto runs mm
    and records it; on decade −2 it runs (and records) the table's AG."""
    _exact_count(monkeypatch)
    eps = Fraction(1, 10)
    seen, lookup = _spy()
    out = release_histogram(_grid(_decade_records(0, eps)), eps, "auto", lookup=lookup)
    assert seen[-1] == "mm" and out.options["chose"] == "mm"
    assert out.options["chose_by"] == "fallback" and out.chosen == "mm"
    assert out.method == "auto" and out.method_text == "auto → mm (fallback)"
    out = release_histogram(_grid(_decade_records(-2, eps)), eps, "auto", lookup=lookup)
    assert seen[-1] == "ag" and (out.chosen, out.options["chose_by"]) == ("ag", "rule")


@pytest.mark.parametrize("case", ["rule 1-D", "fallback 2-D", "rule 2-D", "high 1-D",
                                  "high 2-D", "large 1-D", "rank 3", "declared scale"])
def test_every_path_records_a_registered_method_name(monkeypatch, case):
    _exact_count(monkeypatch)
    seen, lookup = _spy()
    eps = Fraction(1)
    kw: dict = {}
    if case == "rule 1-D":
        x = np.arange(256, dtype=np.int64) % 2  # signal ≈ 0.5: decade 0
    elif case == "fallback 2-D":
        x = _grid(_decade_records(-1, eps))
    elif case == "rule 2-D":
        x = _grid(_decade_records(-2, eps))
    elif case == "high 1-D":
        x = np.full(256, _decade_records(2, eps) // CELLS, dtype=np.int64)  # signal ≈ 10^2
    elif case == "high 2-D":
        x = _grid(_decade_records(2, eps))
    elif case == "large 1-D":
        monkeypatch.setattr(A, "MM_CELLS_1D", 64)
        x, kw = np.ones(65, dtype=np.int64), {"rule": {"1/Range1D": {0: "mm"}}}
    elif case == "rank 3":
        x = np.ones((4, 4, 4), dtype=np.int64)
    else:
        x = np.arange(64, dtype=np.int64) % 3  # signal ≈ 1: decade 0
        kw = {"scale": int(x.sum())}
    out = release_histogram(x, eps, "auto", lookup=lookup, **kw)
    assert out.options["chose"] in methods(x.ndim)
    assert out.options["chose"] != "auto" and out.options["chose_by"] in A.WHY
    if case != "rank 3":  # rank 3 draws Identity itself: no lookup
        assert seen[-1] == out.options["chose"]
    expected = {"fallback 2-D": "fallback", "large 1-D": "large 1-D", "rank 3": "rank",
                "high 1-D": "high signal", "high 2-D": "high signal"}
    assert out.options["chose_by"] == expected.get(case, "rule")


def test_the_choice_costs_no_extra_debit(monkeypatch):
    """Recording the choice and falling back spend nothing more: the accountant is debited
    ε once, the draws are the count's share and then the algorithm's, summing to ≤ ε."""
    eps = Fraction(1, 10)
    x = _grid(_decade_records(0, eps))
    log = record(monkeypatch)
    acc = FilterAccountant(PureDP(1))
    out = release_histogram(x, eps, "auto", accountant=acc)
    assert acc.spent == PureDP(eps) and acc.last.values is out
    assert log[0].values.size == 1 and log[0].epsilon == A.split(eps)[0]
    assert total_epsilon(log) <= eps
    assert acc.last.description.startswith("release_histogram(auto;")


def test_chose_is_not_a_user_option():
    acc = FilterAccountant(PureDP(1))
    with pytest.raises(DomainError, match="chose"):
        release_histogram(np.ones(8, dtype=np.int64), 1, "auto", accountant=acc,
                          chose=lambda name, why: None)
    assert acc.spent == PureDP(0)


def test_a_method_that_runs_itself_records_no_choice():
    out = release_histogram(np.ones(8, dtype=np.int64), 1, "hb")
    assert "chose" not in out.options and out.chosen == "hb" and out.method_text == "hb"


def test_fit_fallback_takes_the_decades_where_the_pick_lost_to_the_robust_one():
    def cell(signal, pick_error, dataset):
        return A.Cell(2, "Range2D", signal, {"identity": 1.0, "ag": pick_error, "mm": 0.5},
                      dataset)

    rule = {"2/Range2D": {-1: "ag", 0: "ag", 1: "mm"}}
    cells = [cell(0.1, 0.2, "a"), cell(0.1, 0.4, "b"),  # ag beats mm on every shape
             cell(1.0, 0.2, "a"), cell(1.0, 0.6, "b"),  # ag loses on one: fall back
             cell(10.0, 0.1, "a")]  # the table already picks mm
    assert A.fit_fallback(cells, rule) == {"2/Range2D": ("mm", frozenset({0}))}
    assert A.fit_fallback(cells[:2], rule) == {}


def test_session_histogram_nd_records_the_choice_and_the_report_shows_it(tmp_path,
                                                                         monkeypatch):
    _exact_count(monkeypatch)
    g = np.random.default_rng(5)  # test input
    df = pl.DataFrame({"x": g.uniform(0, 64, 400), "y": g.uniform(0, 64, 400)})
    s = dp.Session(df, dp.PrivacyUnit.rows(), dp.PureDP(10),
                   ledger=Ledger(tmp_path / "l.sqlite"), dataset="d")
    spec = {c: Bins(tuple(float(e) for e in range(0, 65, 4))) for c in ("x", "y")}
    out = s.query().publish.histogram_nd(spec, "auto", epsilon=1)  # signal 400·0.95/256
    assert out.options["chose"] == "mm" and out.options["chose_by"] == "fallback"
    rec = s.last_release
    assert rec.values is out and "publish.histogram_nd(auto;" in rec.description
    pytest.importorskip("matplotlib")
    assert "auto → mm (fallback)" in release_html(rec)
