"""The query language: row-wise transformations, public joins, and the wider aggregations."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy import stats

import dpkit as dp
from dpkit.errors import BoundsError, ColumnError, DomainError
from dpkit.frame import engine


@pytest.fixture
def table() -> pl.DataFrame:
    return pl.DataFrame({
        "u": [1, 1, 2, 3, 4, 5],
        "x": [-3.0, 0.5, 2.0, 7.5, None, 12.0],
        "c": ["a", "b", "c", "a", None, "b"],
    })


def _rows(q: dp.Query) -> pl.DataFrame:
    """The transformed table (no noise, nothing released: the engine's data side only)."""
    lf = engine.apply_steps(q.session._frame, q.steps, unit=q.session.privacy_unit.column)
    return lf.collect().to_native()


def test_clamp_bin_map_fill(table):
    s = dp.Session(table, dp.PrivacyUnit.by("u", 2), dp.PureDP(1))
    out = _rows(s.query().clamp("x", 0, 10).bin("x", width=2.5, name="xb")
                .map("c", {"a": "A"}, default="other").fill_null("x", 1.0))
    assert out["x"].to_list() == [0.0, 0.5, 2.0, 7.5, 1.0, 10.0]
    assert out["xb"].to_list() == [0.0, 0.0, 0.0, 7.5, None, 10.0]
    assert out["c"].to_list() == ["A", "other", "other", "A", "other", "other"]
    edges = _rows(s.query().bin("x", [0, 5, 10]))
    assert edges["x"].to_list() == [None, 0.0, 0.0, 5.0, None, None]


def test_drop_nulls_and_public_join(table):
    s = dp.Session(table, dp.PrivacyUnit.by("u", 2), dp.PureDP(1))
    assert _rows(s.query().drop_nulls("x")).height == 5
    assert _rows(s.query().drop_nulls()).height == 5
    public = pl.DataFrame({"c": ["a", "b"], "region": ["N", "S"]})
    joined = _rows(s.query().join(public, on="c"))
    joined = joined.sort("u", "x", nulls_last=True)
    assert joined.height == 6 and joined["region"].to_list() == ["N", "S", None, "N", None, "S"]
    assert _rows(s.query().join(public, on="c", how="inner")).height == 4
    with pytest.raises(DomainError, match="not unique"):
        s.query().join(pl.DataFrame({"c": ["a", "a"], "r": [1, 2]}), on="c")
    with pytest.raises(ColumnError):
        s.query().join(public, on="zz")
    with pytest.raises(DomainError):
        s.query().join(public, on="c", how="outer")


def test_clamp_declares_bounds(table):
    s = dp.Session(table, dp.PrivacyUnit.by("u", 2), dp.PureDP(10))
    _, planned = s.query().clamp("x", 0, 10).sum("x").plan(epsilon=1)
    assert planned[0].sensitivity * planned[0].unit == 20  # max_rows · max(|0|, |10|)
    with pytest.raises(BoundsError):
        s.query().sum("x").plan(epsilon=1)
    with pytest.raises(DomainError):
        s.query().bin("x")


def test_count_distinct_sensitivity_and_value():
    df = pl.DataFrame({"u": np.repeat(np.arange(300), 5), "g": np.tile(np.arange(5), 300)})
    s = dp.Session(df, dp.PrivacyUnit.by("u", max_rows=5, max_groups=3), dp.PureDP(100))
    q = s.query().group_by("g", keys=range(5)).agg(dp.count_distinct())
    _, planned = q.plan(epsilon=1)
    assert planned[0].sensitivity == 3  # one unit in ≤ min(G, M) groups
    out = q.release(epsilon=50)
    # every unit keeps 3 of its 5 groups: 180 units per group in expectation
    assert out["units"].sum() == pytest.approx(900, abs=60)


def test_variance_ci_coverage_and_broken_interval_caught():
    """90% intervals over 300 releases (FPR 1e-6 by the binomial tail), paired with a broken
    variant (intervals a quarter as wide) that the same test rejects."""
    rng_np = np.random.default_rng(1)  # test data only; never noise
    df = pl.DataFrame({"x": rng_np.uniform(0, 10, 400)})
    true = float(df["x"].var(ddof=0))
    trials, beta = 300, 0.1
    limit = stats.binom.isf(1e-6, trials, beta)
    s = dp.Session(df, budget=dp.PureDP(trials))
    misses = broken = 0
    for _ in range(trials):
        r = s.query().agg(dp.variance("x", (0, 10))).release(
            epsilon=1, confidence=1 - beta).row(0, named=True)
        misses += not r["x_var_ci_low"] <= true <= r["x_var_ci_high"]
        eighth = (r["x_var_ci_high"] - r["x_var_ci_low"]) / 8
        broken += not r["x_var"] - eighth <= true <= r["x_var"] + eighth
    assert misses <= limit
    assert broken > limit


def test_std_min_max_median_names_and_ranges():
    df = pl.DataFrame({"x": np.linspace(0, 100, 2001)})
    s = dp.Session(df, budget=dp.PureDP(100))
    r = s.query().agg(dp.std("x", (0, 100)), dp.median("x", (0, 100)), dp.min("x", (0, 100)),
                      dp.max("x", (0, 100))).release(epsilon=40).row(0, named=True)
    assert 0 <= r["x_std_ci_low"] <= r["x_std"] <= r["x_std_ci_high"] <= 50
    assert abs(r["x_median"] - 50) < 5 and r["x_min"] < 5 and r["x_max"] > 95
    _, planned = s.query().agg(dp.median("x", (0, 100))).plan(epsilon=1)
    assert planned[0].mechanism == "exponential"
    assert Fraction(1, 2) == dp.median("x", (0, 1)).level()


def test_accuracy_target_is_met_by_the_smallest_budget():
    df = pl.DataFrame({"g": np.arange(2000) % 4, "x": np.linspace(0, 100, 2000)})
    s = dp.Session(df, budget=dp.PureDP(100))
    q = s.query().group_by("g", keys=range(4)).agg(dp.count(), dp.sum("x", (0, 100)))
    budget = q.calibrate(50, confidence=0.9)
    eps = budget["epsilon"]

    def worst(e):
        _, planned = q.plan(epsilon=e)
        return max(p.accuracy(0.1) * float(p.unit) for p in planned)

    assert worst(eps) <= 50 < worst(eps * (1 - Fraction(1, 1 << 18)))
    q.release(alpha=50, confidence=0.9)
    assert eps * (1 - Fraction(1, 10**6)) <= s.spent.epsilon <= eps
    with pytest.raises(DomainError):
        q.release(epsilon=1, alpha=50)
    zs = dp.Session(df, budget=dp.ZCDP(10))
    assert set(zs.query().count().calibrate(5)) == {"rho"}


def test_null_public_keys_are_refused(table):
    s = dp.Session(table, dp.PrivacyUnit.by("u", 2), dp.PureDP(1))
    with pytest.raises(DomainError, match="null"):
        s.query().group_by("c", keys=["a", None])


def test_partition_composes_in_parallel():
    df = pl.DataFrame({"g": np.arange(300) % 3, "x": np.linspace(0, 1, 300)})
    s = dp.Session(df, budget=dp.ApproxDP(2, 1e-6))
    parts = s.query().partition("g", [0, 1, 2])
    for q in parts.values():
        q.count().release(epsilon=1)
    assert s.spent == dp.ApproxDP(1, 0)  # the max over the parts, not the sum
    parts[1].count().release(epsilon=Fraction(1, 2))
    assert s.spent.epsilon == Fraction(3, 2)
    with pytest.raises(dp.errors.BudgetExceededError):
        parts[2].count().release(epsilon=2)  # part 2 would reach 3 > the cap
    assert s.spent.epsilon == Fraction(3, 2)
    parts[2].count().release(epsilon=Fraction(1, 2))  # 1.5 = the current max: free
    assert s.spent.epsilon == Fraction(3, 2)


def test_partition_needs_units_inside_one_part(table):
    s = dp.Session(table, dp.PrivacyUnit.by("u", 2), dp.PureDP(10))
    with pytest.raises(DomainError, match="several parts"):
        s.query().partition("c", ["a", "b"])
    by_unit = s.query().partition("u", [1, 2])
    assert by_unit[1].count().release(epsilon=1)["count"].dtype == pl.Int64
    with pytest.raises(DomainError):
        s.query().partition("u", [1, 1])


def test_tree_quantile_rank_error_covers():
    """The tree quantile's reported rank error holds in ≥ 1 − β of 2,000 releases (β = 0.1;
    FPR 1e-6 by the binomial tail), paired with a broken bound (1/16 as wide) that the same
    test rejects."""
    from dpkit.mechanisms.tree_quantile import make_tree_quantile

    rng_np = np.random.default_rng(4)  # test data only
    hist = rng_np.integers(0, 30, (2000, 64))  # 2,000 groups: independent releases
    m = make_tree_quantile(64, Fraction(1, 2), 1, 1, branching=4)
    leaf = m(hist)
    cum = np.cumsum(hist, axis=1)
    target = hist.sum(axis=1) / 2
    # the chosen leaf's rank interval [#below, #up to and including it] vs q·n
    rows = np.arange(2000)
    below = np.where(leaf > 0, cum[rows, np.maximum(leaf - 1, 0)], 0)
    upto = cum[rows, leaf]
    miss = np.maximum(below - target, target - upto)
    limit = stats.binom.isf(1e-6, 2000, 0.1)
    assert (miss > m.accuracy(0.1)).sum() <= limit
    assert (miss > m.accuracy(0.1) / 16).sum() > limit
    assert m.privacy_map(1).epsilon <= 1
    assert dp.quantile("x", 0.5, (0, 1), method="tree").method == "tree"
    with pytest.raises(DomainError):
        dp.quantile("x", 0.5, (0, 1), method="magic")


def test_private_join_on_the_unit_column():
    people = pl.DataFrame({"pid": [0, 1, 2], "age": [30, 50, 70]})
    visits = pl.DataFrame({"pid": [0] * 40 + [1, 2], "cost": list(range(42))})
    s = dp.Session({"visits": visits, "people": people}, dp.PrivacyUnit.by("pid", 3),
                   dp.PureDP(10))
    q = s.query("visits").join(s.query("people"), on="pid")
    lf = engine.bound_contributions(q.lazy(bound_joins=True), s.privacy_unit, ["cost", "age"])
    out = lf.collect().to_native()
    assert out.group_by("pid").len()["len"].max() <= 3  # unit 0's 40 visits: 3 kept
    assert set(out.columns) >= {"pid", "cost", "age"}
    _, planned = q.agg(dp.count()).plan(epsilon=1)
    assert planned[0].sensitivity == 3  # the unit's usual bound: no blow-up to M²
    with pytest.raises(DomainError, match="privacy unit"):
        s.query("visits").join(s.query("people"), on="age")
    with pytest.raises(DomainError):
        s.query("nope")
    with pytest.raises(DomainError):
        dp.Session({"a": visits, "b": people}, budget=dp.PureDP(1))  # row-level: refused


def test_keysets():
    df = pl.DataFrame({"s": ["F", "M", "F"], "a": [0, 1, 2], "r": ["N", "S", "N"]})
    ks = dp.KeySet({"s": ["F", "M"]}) * dp.KeySet({"a": range(3)})
    assert len(ks) == 6 and ks.columns == ["s", "a"]
    codes = pl.DataFrame({"r": ["N", "S", "N"], "name": ["n", "s", "n2"]})
    assert len(dp.KeySet.from_table(codes, ["r"])) == 2
    s = dp.Session(df, budget=dp.PureDP(1))
    out = s.query().group_by("s", "a", keys=ks).count().release(epsilon=1)
    assert out.height == 6
    with pytest.raises(DomainError):
        dp.KeySet({"s": ["F"]}) * dp.KeySet({"s": ["M"]})
    with pytest.raises(ColumnError):
        dp.KeySet.from_table(codes, ["zz"])
