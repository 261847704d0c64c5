"""After the debit the data side of ``query.publish`` is total: nothing the data can do makes
a release raise once its loss is debited (docs/design.md §3.6).

The attack these tests are written from: MST and AIM checked the table's size *inside* the
algorithm (``codes.shape[0] > 2^28`` raised), after the session had debited the loss — a
table of more than 2^28 records (after bounding) burnt the budget and released nothing, and
whether a release failed told the analyst something about the data. The tests lower the
limit (``mst.MAX_RECORDS``) instead of building 2^28 rows. The entries' option checks are
audited the same way: every refusal comes before the debit and leaves the ledger as it was.
"""

from __future__ import annotations

from fractions import Fraction

import polars as pl
import pytest

import dpkit as dp
from dpkit.ledger import Ledger
from dpkit.release.synthetic import mst as mst_module
from dpkit.release.synthetic.domain import Bins

SPEC = {"g": ["a", "b", "c"], "age": Bins((0.0, 40.0, 80.0))}


def _table() -> pl.DataFrame:
    n = 120
    return pl.DataFrame({"nr": [i // 2 for i in range(n)], "g": (["a", "b", "c"] * n)[:n],
                         "age": [float(i % 80) for i in range(n)]})


def _session(tmp_path, budget=None) -> dp.Session:
    return dp.Session(_table(), dp.PrivacyUnit.by("nr", 2),
                      budget or dp.ApproxDP(20, Fraction(1, 10 ** 5)),
                      ledger=Ledger(tmp_path / "l.sqlite"), dataset="t")


@pytest.mark.parametrize("method, options", [("mst", {"iters": 5}),
                                             ("aim", {"rounds": 4, "iters": 5,
                                                      "final_iters": 5})])
def test_zcdp_synthesis_of_a_table_above_the_score_limit_releases(tmp_path, monkeypatch,
                                                                   method, options):
    """Regression: with the limit below the table's size, MST and AIM raised after the debit
    (ReleaseFailedError, the loss spent). Now a large table only clamps the scores."""
    pytest.importorskip("mbi")
    monkeypatch.setattr(mst_module, "MAX_RECORDS", 8)  # the table has 120 rows
    s = _session(tmp_path)
    out = s.query().publish.synthetic(SPEC, method=method, epsilon=2, **options)
    assert out.columns == ["g", "age"]
    rows = s.ledger.releases("t")
    assert len(rows) == 1 and rows[0]["status"] == "released"
    assert s.spent == dp.ApproxDP(2, Fraction(1, 10 ** 9))


def test_aim_rounds_too_few_for_its_one_way_measurements_is_refused_before_the_debit(tmp_path):
    """Regression: ``rounds=1`` with two columns (AIM measures both one-way marginals at
    0.9ρ/T each) raised inside the algorithm, after the debit."""
    s = _session(tmp_path)
    with pytest.raises(dp.errors.DomainError):
        s.query().publish.synthetic(SPEC, method="aim", epsilon=1, rounds=1)
    assert s.spent == dp.ApproxDP(0, 0) and s.ledger.releases("t") == []


def test_histogram_and_pmw_options_are_refused_before_the_debit(tmp_path):
    """Regression (the audit of the other entries): ``publish.histogram`` checked only the
    method's name before the debit and ``publish.pmw`` passed its options to the mechanism
    after it — an unknown or bad option was a ReleaseFailedError with the loss spent."""
    s = _session(tmp_path, dp.PureDP(10))
    q = s.query()
    cat = {"g": ["a", "b", "c"]}
    for call in (lambda: q.publish.histogram("age", [0, 40, 80], "identity", epsilon=1, bogus=1),
                 lambda: q.publish.histogram("age", [0, 40, 80], "hb", epsilon=1, ratio=1),
                 lambda: q.publish.pmw(cat, epsilon=1, alpha=5, bogus=1),
                 lambda: q.publish.pmw(cat, epsilon=1, alpha=5, total_share=2),
                 lambda: q.publish.pmw(cat, epsilon=1, alpha=5, max_updates="x"),
                 lambda: q.publish.pmw(cat, epsilon=1, alpha=5, beta=2),
                 lambda: q.publish.pmw(cat, epsilon=1, alpha=5, sensitivity=1)):
        with pytest.raises(dp.errors.DomainError):
            call()
    assert s.spent == dp.PureDP(0) and s.ledger.releases("t") == []
    q.publish.histogram("age", [0, 40, 80], "hb", epsilon=1)
    q.publish.pmw(cat, epsilon=1, alpha=5, max_updates=3).count(g=["a"])
    assert [r["status"] for r in s.ledger.releases("t")] == ["released"] * 2
