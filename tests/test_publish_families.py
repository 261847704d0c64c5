"""Every :mod:`dpkit.release` family through a session: ``query.publish.histogram_nd`` (the
2-D–4-D range histograms), ``.gaussian_mm`` (the Gaussian matrix mechanism), ``.median`` (the
median mechanism) and ``.iterative`` (the iterative construction). Each bounds the rows to
the privacy unit, runs the algorithm at the unit map (ε/M, ρ/M²; sensitivity M) and debits
the session once: one ledger row per call, the loss the declared budget, and every refusal
before the debit (the ledger unchanged).

The regression checks spy on what the algorithm receives (the rows' total after bounding,
the budget) and are paired with a broken variant (the unit map forgotten) that they catch.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.core.measures import largest_rho
from dpkit.errors import BudgetExceededError, ColumnError, DomainError
from dpkit.ledger import Ledger
from dpkit.release import session_tables as T  # noqa: N812
from dpkit.release.synthetic.domain import Bins

M = 4
HEAVY = 30  # rows of person 0, above the bound M


def _panel() -> pl.DataFrame:
    """Persons 1…59 with 3 rows each, person 0 with HEAVY rows; a category, two numbers,
    and rows outside the declared domain (x 500, a null, NaN)."""
    pid = [0] * HEAVY + [p for p in range(1, 60) for _ in range(3)]
    n = len(pid)
    return pl.DataFrame({
        "nr": pid, "g": (["a", "b", "c"] * n)[:n],
        "x": [float(i % 40) for i in range(n - 3)] + [500.0, None, float("nan")],
        "y": [float((7 * i) % 40) for i in range(n)],
    })


SPEC2 = {"x": Bins((0.0, 10.0, 20.0, 30.0, 40.0)), "y": Bins((0.0, 20.0, 40.0))}
SPEC = {"g": ["a", "b", "c"], "x": Bins((0.0, 20.0, 40.0))}
BINS = [0, 10, 20, 30, 40]


def _session(tmp_path, budget=None, unit=None) -> dp.Session:
    return dp.Session(_panel(), unit or dp.PrivacyUnit.by("nr", M), budget or dp.PureDP(10),
                      ledger=Ledger(tmp_path / "l.sqlite"), dataset="panel")


def _in_domain_rows(bound: int) -> int:
    """In-domain rows once each person keeps at most ``bound`` rows (the three out-of-domain
    rows belong to person 59, who has 3 ≤ M rows)."""
    per = _panel().group_by("nr").len()
    return int(per.select(pl.col("len").clip(upper_bound=bound)).sum().item()) - 3


def _spy(monkeypatch, name: str) -> dict:
    """Record the total count and the arguments ``session_tables.<name>`` receives."""
    seen: dict = {}
    real = getattr(T, name)

    def spy(counts, *args, **kw):
        seen.update(total=int(np.asarray(counts).sum()), args=args, kw=kw)
        return real(counts, *args, **kw)

    monkeypatch.setattr(T, name, spy)
    return seen


def _one_row(s: dp.Session, loss, text: str) -> dict:
    rows = s.ledger.releases("panel")
    assert len(rows) == 1 and rows[0]["status"] == "released" and rows[0]["loss"] == loss
    assert text in rows[0]["query"] and s.spent == loss
    return rows[0]


def _check_histogram_run(seen: dict, eps: Fraction) -> None:
    """The regression check: the algorithm saw the bounded rows and ran at ε/M."""
    assert seen["total"] == _in_domain_rows(M) and seen["args"][0] == eps / M


def test_histogram_nd_charges_once_at_the_unit_map(tmp_path, monkeypatch):
    seen = _spy(monkeypatch, "release_histogram")
    s = _session(tmp_path)
    out = s.query().publish.histogram_nd(SPEC2, "quadtree", epsilon=2)
    _check_histogram_run(seen, Fraction(2))
    assert out.counts.shape == (4, 2) and out.epsilon == 2 and out.method == "quadtree"
    row = _one_row(s, dp.PureDP(2), "publish.histogram_nd(quadtree; x[4], y[2]; unit ≤ 4")
    assert s.last_release.values is out and s.last_release.release_id == row["id"]
    assert s.last_release.noise[0].sensitivity == M


def test_histogram_nd_check_catches_a_forgotten_unit_map(tmp_path, monkeypatch):
    seen = _spy(monkeypatch, "release_histogram")
    monkeypatch.setattr(T, "unit_rows", lambda session: 1)
    _session(tmp_path).query().publish.histogram_nd(SPEC2, "identity", epsilon=2)
    with pytest.raises(AssertionError):
        _check_histogram_run(seen, Fraction(2))


@pytest.mark.parametrize("spec, method", [
    ({"g": ["a", "b", "c"]}, "hb"),
    ({"x": Bins((0.0, 20.0, 40.0)), "y": Bins((0.0, 20.0, 40.0)), "g": ["a", "b", "c"]},
     "identity"),
    ({"x": Bins((0.0, 20.0, 40.0)), "y": Bins((0.0, 40.0)), "g": ["a", "b", "c"],
      "nr": list(range(3))}, "auto")])
def test_histogram_nd_takes_one_to_four_columns(tmp_path, spec, method):
    s = _session(tmp_path)
    out = s.query().publish.histogram_nd(spec, method, epsilon=1)
    assert out.counts.shape == tuple(len(v.edges) - 1 if isinstance(v, Bins) else len(v)
                                     for v in spec.values())
    _one_row(s, dp.PureDP(1), f"publish.histogram_nd({method}")


def test_gaussian_mm_charges_once_at_rho_over_m_squared(tmp_path, monkeypatch):
    seen = _spy(monkeypatch, "gaussian_matrix_mechanism")
    delta = Fraction(1, 10 ** 6)
    s = _session(tmp_path, dp.ApproxDP(4, Fraction(1, 10 ** 5)))
    out = s.query().publish.gaussian_mm("x", BINS, epsilon=2, delta=delta)
    rho = largest_rho(Fraction(2), delta)
    assert seen["total"] == _in_domain_rows(M) and seen["args"][0] == rho / M ** 2
    assert out.counts.shape == (4,) and out.rho == rho and out.expected_rmse > 0
    assert out.labels == ((0.0, 10.0), (10.0, 20.0), (20.0, 30.0), (30.0, 40.0))
    _one_row(s, dp.ApproxDP(2, delta), "publish.gaussian_mm(x[4]; unit ≤ 4 rows, run at ρ/16")
    assert s.last_release.values is out and s.last_release.noise[0].sensitivity == M

    z = dp.Session(_panel(), dp.PrivacyUnit.by("nr", M), dp.ZCDP(1))
    z.query().publish.gaussian_mm("x", BINS, epsilon=1, delta=delta)
    assert z.spent == dp.ZCDP(largest_rho(Fraction(1), delta))


def test_median_mechanism_charges_once_and_answers_for_free(tmp_path):
    s = _session(tmp_path)
    out = s.query().publish.median({"g": ["a", "b", "c"]}, epsilon=1, alpha=30, size=4)
    answer = out.count(g=["a"])
    assert np.isfinite(answer.value) and out.pmw.sensitivity == M
    row = _one_row(s, dp.PureDP(1), "via the median mechanism (m=4)")
    assert out.release.release_id == row["id"]


def test_iterative_construction_charges_once_at_the_unit_map(tmp_path, monkeypatch):
    seen: dict = {}
    real = T.IterativeConstruction.run

    def spy(self, x, queries, **options):
        seen.update(total=int(x.sum()), epsilon=self.epsilon)
        return real(self, x, queries, **options)

    monkeypatch.setattr(T.IterativeConstruction, "run", spy)
    s = _session(tmp_path)
    out = s.query().publish.iterative(SPEC, [("g", "x")], epsilon=2, T=4)
    assert seen == {"total": _in_domain_rows(M), "epsilon": Fraction(2, M)}
    assert out.answers.shape == (6,) and out.epsilon == 2
    _one_row(s, dp.PureDP(2), "publish.iterative(exponential/mw, T=4; g,x;")
    assert [n.name.split(":")[0] for n in s.last_release.noise] == ["iterative"] * 2
    s.query().publish.iterative(SPEC, [("g",)], epsilon=1, T=2, updater="halving",
                                records=2)
    assert s.spent == dp.PureDP(3)


def test_refusals_come_before_the_debit(tmp_path):
    s = _session(tmp_path)
    q = s.query()
    bad = [
        (DomainError, lambda: q.count().publish.histogram_nd(SPEC2, epsilon=1)),
        (DomainError, lambda: q.publish.histogram_nd(SPEC2, "nope", epsilon=1)),
        (DomainError, lambda: q.publish.histogram_nd(SPEC2, "hb", epsilon=1)),  # 1-D only
        (DomainError, lambda: q.publish.histogram_nd(SPEC2, "identity", epsilon=1, bogus=1)),
        (DomainError, lambda: q.publish.histogram_nd(SPEC2, "quadtree", epsilon=1,
                                                     workload=dp.release.prefix(8))),
        (DomainError, lambda: q.publish.histogram_nd(SPEC2, epsilon=0)),
        (DomainError, lambda: T.histogram_nd_query(q, SPEC2, epsilon=1, max_cells=4)),
        (ColumnError, lambda: q.publish.histogram_nd({"z": [1]}, epsilon=1)),
        (DomainError, lambda: q.publish.gaussian_mm("x", BINS, epsilon=1)),  # PureDP session
        (DomainError, lambda: q.publish.median({"g": ["a", "b", "c"]}, epsilon=1, alpha=5,
                                               size=0)),
        (DomainError, lambda: q.publish.median({"g": ["a", "b", "c"]}, epsilon=1, alpha=5,
                                               max_candidates=3)),
        (DomainError, lambda: q.publish.median({"g": ["a", "b", "c"]}, epsilon=1, alpha=5,
                                               bogus=1)),
        (DomainError, lambda: q.publish.iterative(SPEC, [("g", "g")], epsilon=1)),
        (ColumnError, lambda: q.publish.iterative(SPEC, [("g", "z")], epsilon=1)),
        (DomainError, lambda: q.publish.iterative(SPEC, [("g",)], epsilon=1, updater="x")),
        (DomainError, lambda: q.publish.iterative(SPEC, [("g",)], epsilon=1, T=0)),
        (DomainError, lambda: q.publish.iterative(SPEC, [("g",)], epsilon=1, n=10)),
        (DomainError, lambda: q.publish.iterative(SPEC, [("g",)], epsilon=1,
                                                  updater="halving", records=50,
                                                  max_candidates=10)),
        (BudgetExceededError, lambda: q.publish.histogram_nd(SPEC2, epsilon=100)),
        (BudgetExceededError, lambda: q.publish.median({"g": ["a"]}, epsilon=100, alpha=5)),
        (BudgetExceededError, lambda: q.publish.iterative(SPEC, [("g",)], epsilon=100)),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    assert s.spent == dp.PureDP(0) and s.ledger.releases("panel") == []

    z = _session(tmp_path / "z", dp.ApproxDP(1, Fraction(1, 10 ** 5)))
    zq = z.query()
    for call in (lambda: zq.publish.gaussian_mm("x", list(range(2000)), epsilon=1),
                 lambda: zq.publish.gaussian_mm("x", BINS, epsilon=1, delta=2),
                 lambda: zq.publish.gaussian_mm("x", [3, 1], epsilon=1),
                 lambda: zq.publish.gaussian_mm("x", BINS, epsilon=1, reuse=1),
                 lambda: zq.publish.gaussian_mm("x", BINS, epsilon=1,
                                                workload=dp.release.prefix(5))):
        with pytest.raises(DomainError):
            call()
    with pytest.raises(BudgetExceededError):
        zq.publish.gaussian_mm("x", BINS, epsilon=5)
    assert z.ledger.releases("panel") == []


def test_the_data_side_is_total(tmp_path):
    """A filter that leaves no row still releases (the noise does not know)."""
    s = _session(tmp_path, dp.ApproxDP(10, Fraction(1, 10 ** 5)))
    nothing = s.query().filter(pl.col("y") > 1000)
    assert nothing.publish.histogram_nd(SPEC2, "ag", epsilon=1).counts.shape == (4, 2)
    assert nothing.publish.gaussian_mm("x", BINS, epsilon=1).counts.shape == (4,)
    nothing.publish.median({"g": ["a", "b"]}, epsilon=1, alpha=5, size=2).count(g=["a"])
    assert nothing.publish.iterative(SPEC, [("g",)], epsilon=1, T=2).answers.shape == (3,)
    assert [r["status"] for r in s.ledger.releases("panel")] == ["released"] * 4
