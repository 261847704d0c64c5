"""``query.publish.synthetic`` and ``query.publish.marginals``: a curator's per-person table
is bounded to the session's privacy unit, the algorithm runs at the unit map (ε/M, ρ/M²,
sensitivity M·m) and the session is debited once, with one ledger row naming the method.

The attack these tests are written from: the old road, ``synthesize(table, spec, epsilon=1)``
on a table where one person has many rows, protected one *row* at ε and charged nobody — a
person with 8 rows was only 8ε-protected and the ledger never knew. The regression tests
spy on what the algorithm receives (the rows of the heaviest person, the budget) and on the
ledger; each is paired with a broken variant (the unit map forgotten, the bounding skipped)
that the same check catches.
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

HEAVY = 20  # rows of person 0 (the attacker's target), above the declared bound
M = 8


def _panel() -> pl.DataFrame:
    """A per-person panel: persons 1…99 with 4 rows each, person 0 with HEAVY rows, a
    category, a binned number and rows outside the declared domain (age 200, a null, NaN)."""
    pid = [0] * HEAVY + [p for p in range(1, 100) for _ in range(4)]
    n = len(pid)
    return pl.DataFrame({
        "nr": pid,
        "g": (["a", "b", "c"] * n)[:n],
        "age": [float(20 + i % 50) for i in range(n - 3)] + [200.0, None, float("nan")],
    })


SPEC = {"g": ["a", "b", "c"], "age": Bins((0.0, 40.0, 80.0))}


def _session(tmp_path, budget=None, unit=None) -> dp.Session:
    return dp.Session(_panel(), unit or dp.PrivacyUnit.by("nr", M), budget or dp.PureDP(10),
                      ledger=Ledger(tmp_path / "l.sqlite"), dataset="panel")


def _spy(monkeypatch, name: str) -> dict:
    """Record what ``session_tables.<name>`` receives, then run it."""
    seen: dict = {}
    real = getattr(T, name)

    def spy(codes, domain, *args, **kw):
        seen.update(rows=codes.shape[0], args=args, kw=kw)
        return real(codes, domain, *args, **kw)

    monkeypatch.setattr(T, name, spy)
    return seen


def _expected_rows(table: pl.DataFrame, bound: int) -> int:
    """Rows left after bounding every person to ``bound`` rows and dropping rows outside
    the declared domain (the bounding keeps a random subset, so count the in-domain rows
    that must survive: the three out-of-domain rows belong to person 99, who has 4 ≤ M)."""
    per = table.group_by("nr").len()
    kept = int(per.select(pl.col("len").clip(upper_bound=bound)).sum().item())
    return kept - 3


def _check_synthetic_run(seen: dict, eps: Fraction) -> None:
    """The regression check: the algorithm saw the bounded rows and ran at ε/M."""
    assert seen["rows"] == _expected_rows(_panel(), M)
    assert seen["kw"]["epsilon"] == eps / M and seen["kw"]["rho"] is None


def test_synthetic_runs_at_the_unit_map_and_writes_one_ledger_row(tmp_path, monkeypatch):
    seen = _spy(monkeypatch, "synthesize_records")
    s = _session(tmp_path)
    out = s.query().publish.synthetic(SPEC, method="mwem", epsilon=1, rounds=5)
    _check_synthetic_run(seen, Fraction(1))
    assert out.columns == ["g", "age"]  # the row count is a noisy total: 0 is possible
    assert set(out["g"].unique()) <= {"a", "b", "c"}
    assert s.spent == dp.PureDP(1)
    rows = s.ledger.releases("panel")
    assert len(rows) == 1 and rows[0]["loss"] == dp.PureDP(1)
    assert "publish.synthetic(mwem" in rows[0]["query"] and "ε/8" in rows[0]["query"]
    record = s.last_release
    assert record.values is out and record.release_id == rows[0]["id"]
    assert [n.name.split(":")[0] for n in record.noise] == ["mwem", "mwem"]
    assert all(n.sensitivity == M for n in record.noise)
    assert "5 rounds" in record.noise[1].name


def test_the_regression_check_catches_a_forgotten_unit_map(tmp_path, monkeypatch):
    """Broken variants: M taken as 1 (row-level budget on per-person data), and the
    bounding skipped (the heavy person's 20 rows reach the algorithm)."""
    seen = _spy(monkeypatch, "synthesize_records")
    monkeypatch.setattr(T, "unit_rows", lambda session: 1)
    _session(tmp_path).query().publish.synthetic(SPEC, method="mwem", epsilon=1, rounds=5)
    with pytest.raises(AssertionError):
        _check_synthetic_run(seen, Fraction(1))

    monkeypatch.undo()
    seen = _spy(monkeypatch, "synthesize_records")
    monkeypatch.setattr(T.engine, "bound_contributions", lambda lf, *a, **k: lf)
    _session(tmp_path / "b").query().publish.synthetic(SPEC, method="mwem", epsilon=1,
                                                        rounds=5)
    with pytest.raises(AssertionError):
        _check_synthetic_run(seen, Fraction(1))


def test_zcdp_methods_run_at_rho_over_m_squared(tmp_path, monkeypatch):
    pytest.importorskip("mbi")
    seen = _spy(monkeypatch, "synthesize_records")
    delta = Fraction(1, 10 ** 6)
    s = _session(tmp_path, dp.ApproxDP(4, Fraction(1, 10 ** 5)))
    s.query().publish.synthetic(SPEC, method="mst", epsilon=2, delta=delta, iters=20)
    assert seen["kw"]["rho"] == largest_rho(Fraction(2), delta) / M ** 2
    assert seen["kw"]["epsilon"] is None and seen["rows"] == _expected_rows(_panel(), M)
    assert s.spent == dp.ApproxDP(2, delta)
    assert [n.name.split(":")[0] for n in s.last_release.noise] == ["mst"] * 3
    assert "ρ/3" in s.last_release.noise[0].name

    z = dp.Session(_panel(), dp.PrivacyUnit.by("nr", M), dp.ZCDP(1))
    z.query().publish.synthetic(SPEC, method="mst", epsilon=1, delta=delta, iters=20)
    assert z.spent == dp.ZCDP(largest_rho(Fraction(1), delta))


def test_row_level_sessions_run_the_algorithm_at_the_full_budget(tmp_path, monkeypatch):
    seen = _spy(monkeypatch, "synthesize_records")
    s = _session(tmp_path, unit=dp.PrivacyUnit.rows())
    s.query().publish.synthetic(SPEC, method="independent", epsilon=Fraction(1, 2))
    assert seen["kw"]["epsilon"] == Fraction(1, 2) and seen["rows"] == _panel().height - 3


def test_refusals_come_before_the_debit(tmp_path):
    s = _session(tmp_path)
    q = s.query()
    bad = [
        (DomainError, lambda: q.group_by("g", keys=["a"]).publish.synthetic(SPEC, epsilon=1)),
        (DomainError, lambda: q.count().publish.synthetic(SPEC, epsilon=1)),
        (DomainError, lambda: q.publish.synthetic({}, epsilon=1)),
        (DomainError, lambda: q.publish.synthetic(SPEC, method="gan", epsilon=1)),
        (DomainError, lambda: q.publish.synthetic(SPEC, method="mwem", epsilon=1, lr=3)),
        (DomainError, lambda: q.publish.synthetic(SPEC, method="mwem", epsilon=1, rounds=0)),
        (DomainError, lambda: q.publish.synthetic(SPEC, method="mwem", epsilon=1,
                                                  total_share=2)),
        (ColumnError, lambda: q.publish.synthetic(SPEC, method="mwem", epsilon=1,
                                                  workload=[("g", "height")])),
        (DomainError, lambda: q.publish.synthetic(SPEC, method="mst", epsilon=1)),  # PureDP
        (DomainError, lambda: q.publish.synthetic(SPEC, epsilon=0)),
        (DomainError, lambda: q.publish.synthetic(SPEC, epsilon=1, rows=-1)),
        (DomainError, lambda: q.publish.synthetic({"g": [1, 2]}, epsilon=1)),  # type
        (ColumnError, lambda: q.publish.synthetic({"height": [1]}, epsilon=1)),
        (DomainError, lambda: q.publish.marginals(SPEC, [("g", "g")], epsilon=1)),
        (ColumnError, lambda: q.publish.marginals(SPEC, [("g", "x")], epsilon=1)),
        (DomainError, lambda: q.publish.marginals(SPEC, [], epsilon=1)),
        (DomainError, lambda: T.marginals_query(q, SPEC, [("g", "age")], epsilon=1,
                                                max_cells=5)),
        (BudgetExceededError, lambda: q.publish.synthetic(SPEC, epsilon=100)),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    assert s.spent == dp.PureDP(0) and s.ledger.releases("panel") == []


def test_the_data_side_is_total(tmp_path):
    """Rows outside the declared domain, nulls and NaN are dropped; a filter that leaves no
    row still releases (the noise does not know)."""
    s = _session(tmp_path)
    nothing = s.query().filter(pl.col("age") > 1000)
    for method, options in (("mwem", {"rounds": 3}), ("independent", {})):
        out = nothing.publish.synthetic(SPEC, method=method, epsilon=1, **options)
        assert out.columns == ["g", "age"]
    out = nothing.publish.marginals(SPEC, [("g",)], epsilon=1)
    assert out["g",].shape == (3,)
    assert [r["status"] for r in s.ledger.releases("panel")] == ["released"] * 3


def test_marginals_scale_the_sensitivity_by_the_unit(tmp_path, monkeypatch):
    seen = _spy(monkeypatch, "measure_marginals")
    s = _session(tmp_path)
    out = s.query().publish.marginals(SPEC, [("g", "age"), ("age",)], epsilon=2)
    assert seen["rows"] == _expected_rows(_panel(), M)
    assert seen["args"] == ((("g", "age"), ("age",)), Fraction(2, M))  # scale 2M/2 = M·m/ε
    assert s.spent == dp.PureDP(2) and len(s.ledger.releases("panel")) == 1
    assert s.last_release.noise[0].sensitivity == 2 * M and s.last_release.values is out
    assert out["g", "age"].shape == (3, 2) and out.labels["age"] == ((0.0, 40.0), (40.0, 80.0))
    assert np.allclose(out["g", "age"].sum(axis=0), out["age",])  # made consistent
    assert out.epsilon == 2 and out.consistent
    with pytest.raises(KeyError):
        out["g", "nope"]
    fourier = s.query().publish.marginals(SPEC, [("g", "age"), ("age",)], epsilon=2,
                                          consistent="fourier")
    assert np.allclose(fourier["g", "age"].sum(axis=0), fourier["age",])
    with pytest.raises(DomainError):
        s.query().publish.marginals(SPEC, [("g",)], epsilon=1, consistent="median")
    assert s.spent == dp.PureDP(4)


def test_synthesize_with_an_accountant_charges_once_at_row_level():
    """The primitive's ``accountant=``: one debit, before the method runs; refusals first."""
    from dpkit.core.accountant import FilterAccountant
    from dpkit.release.synthetic.synthesize import synthesize

    table = _panel().drop("nr").filter(pl.col("age") < 80)
    acc = FilterAccountant(dp.PureDP(3))
    with pytest.raises(DomainError):
        synthesize(table, SPEC, method="mwem", epsilon=1, accountant=acc, lr=1)
    with pytest.raises(DomainError):
        synthesize(table, SPEC, method="mst", epsilon=1, accountant=acc)  # not pure
    assert acc.spent == dp.PureDP(0) and acc.last is None
    out = synthesize(table, SPEC, method="independent", epsilon=1, accountant=acc)
    assert acc.spent == dp.PureDP(1) and acc.last.values is out
    assert acc.last.noise[0].name.startswith("independent") and acc.last.noise[0].sensitivity == 1
    synthesize(table, SPEC, method="auto", epsilon=1, accountant=acc)  # the pure rule
    assert acc.spent == dp.PureDP(2)


def test_release_histogram_with_an_accountant_charges_once_after_its_checks():
    from dpkit.core.accountant import FilterAccountant
    from dpkit.release import release_histogram

    acc = FilterAccountant(dp.PureDP(2))
    x = np.arange(16, dtype=np.int64)
    for bad in (dict(method="nope"), dict(method="identity", bogus=1)):
        with pytest.raises(DomainError):
            release_histogram(x, 1, accountant=acc, **bad)
    assert acc.spent == dp.PureDP(0) and acc.last is None
    out = release_histogram(x, 1, "hb", accountant=acc)
    assert acc.spent == dp.PureDP(1) and acc.last.values is out
    assert acc.last.noise[0].name == "hb" and acc.last.noise[0].sensitivity == 1
    assert release_histogram(x, 1, "identity").epsilon == 1 and acc.spent == dp.PureDP(1)
