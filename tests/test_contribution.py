"""User-level contribution bounds: M rows, G groups, R rows per group (one pass)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import polars as pl
import pytest

import dpkit as dp
from dpkit.core.metrics import L1Distance, L2Distance, LInfDistance
from dpkit.core.stability import Contribution
from dpkit.errors import DomainError
from dpkit.frame import engine
from dpkit.frame.privacy_unit import PrivacyUnit


def _brute_norms(m: int, g: int, r: int) -> tuple[int, float, int]:
    """Largest ‖c‖₁, ‖c‖₂, ‖c‖∞ over integer c with Σc ≤ m, c_i ≤ r, ≤ g non-zeros."""
    best = (0, 0.0, 0)
    for c in itertools.product(range(r + 1), repeat=g):
        if sum(c) <= m:
            best = (max(best[0], sum(c)), max(best[1], math.sqrt(sum(v * v for v in c))),
                    max(best[2], max(c)))
    return best


@pytest.mark.parametrize("m,g,r", [(5, 3, 2), (4, 4, 4), (7, 2, 5), (3, 5, 1), (6, 3, 3)])
def test_norms_match_brute_force(m, g, r):
    b = Contribution.of(m, g, r)
    l1, l2, linf = _brute_norms(m, g, r)
    assert b.norm(L1Distance()) == l1 and b.norm(LInfDistance()) == linf
    assert l2 <= float(b.norm(L2Distance())) <= l2 * (1 + 1e-12)


def test_implied_bounds_and_errors():
    assert Contribution.of(max_groups=3, max_rows_per_group=2) == Contribution(6, 3, 2)
    assert Contribution.of(4) == Contribution(4, 4, 4)
    assert Contribution.of(10, 2, 3).max_rows == 6  # G·R < M tightens M
    with pytest.raises(DomainError):
        Contribution.of(max_groups=3)
    with pytest.raises(DomainError):
        Contribution.of(0)
    with pytest.raises(DomainError):
        PrivacyUnit.by("u", max_rows=True)


def _one_heavy_unit() -> pl.DataFrame:
    # unit 0 has 10 rows in each of 5 groups; units 1..50 one row each
    heavy = pl.DataFrame({"u": [0] * 50, "g": [i // 10 for i in range(50)],
                          "x": list(range(50))})
    light = pl.DataFrame({"u": list(range(1, 51)), "g": [i % 5 for i in range(50)],
                          "x": [0] * 50})
    return pl.concat([heavy, light])


def test_bounding_enforces_every_bound():
    unit = PrivacyUnit.by("u", max_rows=5, max_groups=2, max_rows_per_group=3)
    for _ in range(20):
        lf = engine.to_lazy(_one_heavy_unit())
        out = engine.bound_contributions(lf, unit, ["x"], ["g"]).collect().to_native()
        per_group = out.filter(pl.col("u") == 0).group_by("g").len()
        assert per_group.height <= 2
        assert per_group["len"].max() <= 3
        assert per_group["len"].sum() == 5  # 2 groups × 3 rows, capped at 5 in total
        assert out.filter(pl.col("u") != 0).height == 50  # light units untouched


def test_bounding_chooses_groups_at_random():
    unit = PrivacyUnit.by("u", max_groups=1, max_rows_per_group=10)
    seen = set()
    for _ in range(40):
        lf = engine.to_lazy(_one_heavy_unit())
        out = engine.bound_contributions(lf, unit, ["x"], ["g"]).collect().to_native()
        seen.add(out.filter(pl.col("u") == 0)["g"][0])
    # each of 5 groups is chosen w.p. 1/5: missing one in 40 draws has probability < 5·0.8^40
    # = 6.6e-4; we only require 3 distinct (failure probability < 1e-12)
    assert len(seen) >= 3


def test_sensitivity_follows_the_bounds():
    data = _one_heavy_unit()
    s = dp.Session(data, PrivacyUnit.by("u", max_rows=5, max_groups=2, max_rows_per_group=3),
                   dp.PureDP(10))
    q = s.query().group_by("g", keys=range(5)).agg(dp.count())
    _, planned = q.plan(epsilon=1)
    assert planned[0].sensitivity == Fraction(5)  # min(M, G·R)
    q1 = s.query().agg(dp.count())
    _, planned = q1.plan(epsilon=1)
    assert planned[0].sensitivity == Fraction(3)  # one group: min(M, R)
    zs = dp.Session(data, PrivacyUnit.by("u", max_rows=5, max_groups=2, max_rows_per_group=3),
                    dp.ZCDP(1))
    _, planned = zs.query().group_by("g", keys=range(5)).agg(dp.count()).plan(rho=0.5)
    assert float(planned[0].sensitivity) == pytest.approx(math.sqrt(13))  # 3² + 2²


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("g,r,m", [(2, 3, 5), (5, 2, 10), (1, 4, 4), (3, 1, 2), (2, 1, 2)])
def test_polars_fast_path_matches_the_window_rule(g, r, m, packed):
    """Both sort-based Polars paths (one packed integer key for integer unit and group
    columns; multi-column sorts for strings with nulls) keep exactly the rows the window
    rule keeps, for the same row keys."""
    import numpy as np

    from dpkit.frame import backend

    rng = np.random.default_rng(g * 100 + r * 10 + m)  # test data and keys only
    n = 5000
    keys = rng.integers(0, 5, n) if packed else rng.choice(["a", "b", "c", "d", "e", None], n)
    rand = rng.integers(0, 256, n).astype(np.uint32)  # 8 bits: ties, broken by the row index
    frame = pl.DataFrame({"u": rng.integers(-50, 250, n), "k": keys,
                          "x": rng.uniform(0, 1, n), "r": rand})
    taken = backend._bound_packed(frame, "u", ["k"], g, r, m, rand)
    assert (taken is not None) == packed
    fast = backend.bound_polars(frame, "u", ["k"], g, r, m, rand)
    ref = frame.with_row_index("i").with_columns(rk=pl.col("r") * n + pl.col("i"))  # ties
    # a group's key: its smallest row word, ties broken by the group's sort order
    code = pl.col("k").rank("dense").fill_null(0)
    ref = ref.with_columns(p=pl.col("r").min().over("u", "k") * (n + 1) + code)
    if g < m:
        ref = ref.filter(pl.col("p").rank("dense").over("u") <= g)
    ref = ref.filter(pl.col("rk").rank("ordinal").over("u", "k") <= r)
    ref = ref.filter(pl.col("rk").rank("ordinal").over("u") <= m)
    assert fast.rows() == frame.filter(ref_rows(frame, ref)).rows()
    single = backend.bound_polars(frame, "u", [], g, r, m, rand)  # one group: min(M, R)
    ref = frame.with_row_index("i").with_columns(rk=pl.col("r") * n + pl.col("i"))
    ref = ref.filter(pl.col("rk").rank("ordinal").over("u") <= min(r, m))
    assert single.rows() == frame.filter(ref_rows(frame, ref)).rows()


def ref_rows(frame, ref):
    """A mask of ``frame``'s rows whose index is in ``ref``'s ``i`` column."""
    mask = [False] * frame.height
    for i in ref["i"].to_list():
        mask[i] = True
    return pl.Series(mask)


def test_packed_bounding_falls_back_when_ids_are_wide():
    """Unit ids spread over 2^62 leave no room for the row key: the sort path serves."""
    import numpy as np

    from dpkit.frame import backend

    frame = pl.DataFrame({"u": np.array([0, 2**62, 5, 5, 5], dtype=np.int64), "x": range(5)})
    assert backend._bound_packed(frame, "u", [], 1, 2, 2, np.arange(5, dtype=np.uint32)) is None
    assert sorted(backend.bound_polars(frame, "u", [], 1, 2, 2)["u"].to_list()) == [0, 5, 5,
                                                                                     2**62]
