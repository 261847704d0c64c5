"""Session and Query: the public surface, budgets, errors, contribution bounding, accuracy."""

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from scipy import stats

import dpkit as dp
from dpkit.core import rng
from dpkit.errors import (
    BoundsError,
    BudgetExceededError,
    ColumnError,
    DomainError,
    InsecureRandomnessError,
    MeasureError,
)
from dpkit.frame import engine
from dpkit.frame.privacy_unit import PrivacyUnit


@pytest.fixture(scope="module")
def adult():
    return dp.datasets.load_adult("train")


@pytest.fixture
def small():
    return pl.DataFrame({
        "id": [1, 1, 1, 2, 3, 3, 4, 5],
        "g": ["a", "a", "b", "b", "a", "c", "b", "a"],
        "x": [1.0, None, float("nan"), 4.0, float("inf"), 2.0, -float("inf"), 3.0],
        "n": [1, 2, 3, 4, 5, 6, 7, 8],
        "s": ["u", "v", "w", "x", "y", "z", "u", "v"],
    })


def test_issue_surface(adult, tmp_path):
    s = dp.Session(adult, privacy_unit=dp.PrivacyUnit.rows(), budget=dp.PureDP(1.0),
                   ledger=tmp_path / "adult-ledger.sqlite", dataset="adult")
    res = (s.query().group_by("sex", keys=["Female", "Male"])
           .agg(dp.count(), dp.mean("age", bounds=(17, 90)))
           .release(epsilon=0.5))
    assert isinstance(res, pl.DataFrame)
    assert res.columns == ["sex", "count", "count_ci_low", "count_ci_high", "age_mean",
                           "age_mean_ci_low", "age_mean_ci_high"]
    assert res["sex"].to_list() == ["Female", "Male"]
    assert (res["count_ci_low"] <= res["count"]).all()
    assert ((res["age_mean"] >= 17) & (res["age_mean"] <= 90)).all()
    assert s.spent == dp.PureDP(Fraction(1, 2)) and s.remaining == dp.PureDP(Fraction(1, 2))


def test_budget_exhaustion_releases_nothing(small):
    s = dp.Session(small, budget=dp.PureDP(1))
    s.query().count().release(epsilon=0.75)
    with pytest.raises(BudgetExceededError):
        s.query().count().release(epsilon=0.5)
    assert s.spent == dp.PureDP(Fraction(3, 4))
    s.query().count().release(epsilon=0.25)
    assert s.remaining == dp.PureDP(0)


def test_plan_time_errors(small):
    s = dp.Session(small, budget=dp.PureDP(1))
    q = s.query()
    with pytest.raises(BoundsError):
        q.sum("n").release(epsilon=0.1)
    with pytest.raises(ColumnError):
        q.sum("nope", bounds=(0, 1)).release(epsilon=0.1)
    with pytest.raises(ColumnError):
        q.sum("s", bounds=(0, 1)).release(epsilon=0.1)
    with pytest.raises(DomainError):
        q.count().release(epsilon=0)
    with pytest.raises(DomainError):
        q.count().release(epsilon=-1)
    with pytest.raises(DomainError):
        q.group_by("g").count().release(epsilon=0.1)  # keys are required
    with pytest.raises(ColumnError):
        q.group_by("g", keys=[1, 2]).count().release(epsilon=0.1)  # wrong key type
    with pytest.raises(BoundsError):
        q.mean("x", bounds=(5, 1)).release(epsilon=0.1)
    with pytest.raises(MeasureError):
        q.count().release(rho=0.1)
    with pytest.raises(BoundsError):
        q.histogram("x", bins=[1]).release(epsilon=0.1)
    assert s.spent == dp.PureDP(0)  # nothing was spent by any failed query


def test_exact_statistics_follow_the_null_nan_inf_rule(small):
    s = dp.Session(small, budget=dp.PureDP(1))
    q = s.query().group_by("g", keys=["a", "b", "c", "d"]).agg(
        dp.count(), dp.sum("x", bounds=(0, 10)), dp.mean("x", bounds=(0, 10)))
    lf, planned = q.plan(epsilon=1)
    raw = engine.compute(engine.bound_contributions(lf, s.privacy_unit, ["g", "x"]),
                         q.keys, [p.stat for p in planned])
    counts = raw["a0_n"].tolist()
    assert counts == [4, 3, 1, 0]  # rows per key; "d" is an empty group
    # sums drop null/NaN, clamp ±inf: a = 1 + 10 (inf) + 3; b = 4 + 0 (-inf); c = 2
    sums = {p.stat.key: raw[p.stat.key] for p in planned}
    scale = 2.0 ** planned[1].stat.n_bins
    assert (sums["a1_s"] * scale).tolist() == [14.0, 4.0, 2.0, 0.0]
    assert raw["a2_n"].tolist() == [3, 2, 1, 0]  # non-null, non-NaN values per group


def test_empty_group_mean_rule(small):
    s = dp.Session(small, budget=dp.PureDP(1))
    res = s.query().group_by("g", keys=["zzz"]).mean("x", bounds=(0, 10)).release(epsilon=1)
    assert 0 <= res["x_mean"][0] <= 10
    assert res["x_mean_ci_low"][0] >= 0 and res["x_mean_ci_high"][0] <= 10


def test_fill_value_replaces_nulls(small):
    s = dp.Session(small, budget=dp.PureDP(1))
    q = s.query().sum("x", bounds=(0, 10), fill=5)
    lf, planned = q.plan(epsilon=1)
    raw = engine.compute(lf, None, [p.stat for p in planned])
    assert raw["a0_s"][0] * 2.0 ** planned[0].stat.n_bins == 1 + 5 + 5 + 4 + 10 + 2 + 0 + 3
    with pytest.raises(BoundsError):
        s.query().sum("x", bounds=(0, 10), fill=50).release(epsilon=0.1)


def test_contribution_bounding_caps_every_unit(small):
    unit = PrivacyUnit.by("id", 2)
    lf = engine.to_lazy(small)
    for _ in range(20):
        bounded = engine.bound_contributions(lf, unit, ["g"]).collect().to_native()
        per_unit = bounded.group_by("id").len()
        assert per_unit["len"].max() <= 2
        assert set(per_unit["id"]) == {1, 2, 3, 4, 5}


def test_contribution_bounding_is_uniform():
    df = pl.DataFrame({"id": [1, 1, 1, 1], "r": [0, 1, 2, 3]})
    lf = engine.to_lazy(df)
    unit = PrivacyUnit.by("id", 2)
    seen = []
    for _ in range(1200):
        rows = sorted(engine.bound_contributions(lf, unit, ["r"]).collect()["r"].to_list())
        seen.append(rows[0] * 4 + rows[1])
    codes = np.unique(seen, return_inverse=True)[1]
    observed = np.bincount(codes, minlength=6)
    assert observed.size == 6  # every pair of the four rows can be kept
    p = stats.chisquare(observed).pvalue  # uniform over the 6 subsets; FPR 1e-6
    assert p > 1e-6
    # broken variant: always keeping the first rows would give a single subset
    assert stats.chisquare(np.array([1200, 0, 0, 0, 0, 0])).pvalue < 1e-6


def test_contribution_bounding_reproducible_under_test_stream(small):
    unit = PrivacyUnit.by("id", 1)
    lf = engine.to_lazy(small)
    with rng.seeded_draws_for_tests(1):
        a = engine.bound_contributions(lf, unit, ["n"]).collect()["n"].to_list()
    with rng.seeded_draws_for_tests(1):
        b = engine.bound_contributions(lf, unit, ["n"]).collect()["n"].to_list()
    assert sorted(a) == sorted(b)


def test_release_refused_under_test_stream(small):
    s = dp.Session(small, budget=dp.PureDP(1))
    with rng.deterministic_for_tests(1), pytest.raises(InsecureRandomnessError):
        s.query().count().release(epsilon=0.1)
    assert s.spent == dp.PureDP(0)


def test_user_level_sensitivity_scales_with_max_rows(small):
    s1 = dp.Session(small, privacy_unit=PrivacyUnit.by("id", 1), budget=dp.PureDP(1))
    s3 = dp.Session(small, privacy_unit=PrivacyUnit.by("id", 3), budget=dp.PureDP(1))
    _, p1 = s1.query().sum("n", bounds=(0, 10)).plan(epsilon=1)
    _, p3 = s3.query().sum("n", bounds=(0, 10)).plan(epsilon=1)
    assert p1[0].sensitivity == 10 and p3[0].sensitivity == 30
    assert p3[0].scale == 3 * p1[0].scale


def test_zcdp_and_approx_sessions(adult):
    z = dp.Session(adult, budget=dp.ZCDP(1))
    res = z.query().group_by("sex", keys=["Female", "Male"]).sum(
        "hours-per-week", bounds=(1, 99)).release(rho=0.25)
    assert res.height == 2
    z.query().count().release(epsilon=1)  # Laplace, charged ρ = ε²/2
    # σ = Δ/√(2ρ) is irrational: the calibrated ρ is at most, and within 1e-12 of, 1/4
    assert Fraction(3, 4) - Fraction(1, 10**12) < z.spent.rho <= Fraction(3, 4)
    a = dp.Session(adult, budget=dp.ApproxDP(1, 1e-6))
    a.query().mean("age", bounds=(17, 90)).release(epsilon=0.5, delta=1e-7)
    a.query().count().release(epsilon=0.5)
    assert a.spent <= dp.ApproxDP(1, Fraction(1, 10**7))
    assert a.spent.epsilon > 1 - Fraction(1, 10**6)
    with pytest.raises(BudgetExceededError):
        a.query().count().release(epsilon=0.01)


def test_histogram_and_quantile(adult):
    s = dp.Session(adult, budget=dp.PureDP(10))
    h = s.query().histogram("age", bins=[17, 30, 60, 90]).release(epsilon=1)
    assert h["bin"].to_list() == ["[17, 30)", "[30, 60)", "[60, 90]"]
    true = np.histogram(adult["age"].to_numpy(), bins=[17, 30, 60, 90])[0]
    assert (np.abs(h["count"].to_numpy() - true) < 60).all()  # scale 1: P(|Z| ≥ 60) < 1e-25
    med = s.query().quantile("hours-per-week", 0.5, bounds=(1, 99)).release(epsilon=5)
    assert med.columns[-1] == "hours-per-week_median_rank_error"
    # with ε = 5 the released median's rank error is below ~7 rows w.p. 1 − 1e-6
    hours = np.sort(adult["hours-per-week"].to_numpy())
    value = med["hours-per-week_median"][0]
    rank_lo = np.searchsorted(hours, value, side="left")
    rank_hi = np.searchsorted(hours, value, side="right")
    half = hours.size / 2
    assert rank_lo - 10 <= half <= rank_hi + 10


def test_mean_ci_coverage_and_broken_interval_caught():
    """Coverage of the 95% CI over 600 releases (FPR 1e-6 by the binomial tail), paired with a
    broken variant (intervals a third as wide) that the same test rejects."""
    rng_np = np.random.default_rng(0)  # test data only; never noise
    df = pl.DataFrame({"x": rng_np.uniform(0, 10, 500)})
    true = float(df["x"].mean())
    trials, beta = 600, 0.05
    limit = stats.binom.isf(1e-6, trials, beta)  # misses above this: P ≤ 1e-6 if coverage ok
    s = dp.Session(df, budget=dp.PureDP(trials))
    misses = broken_misses = 0
    for _ in range(trials):
        r = s.query().mean("x", bounds=(0, 10)).release(epsilon=0.2).row(0, named=True)
        misses += not r["x_mean_ci_low"] <= true <= r["x_mean_ci_high"]
        third = (r["x_mean_ci_high"] - r["x_mean_ci_low"]) / 6
        broken_misses += not r["x_mean"] - third <= true <= r["x_mean"] + third
    assert misses <= limit
    assert broken_misses > limit


def test_csv_and_parquet_paths(tmp_path, small):
    csv, pq = tmp_path / "d.csv", tmp_path / "d.parquet"
    small.drop("x").write_csv(csv)
    small.write_parquet(pq)
    for path in (csv, pq, str(csv)):
        s = dp.Session(path, budget=dp.PureDP(1))
        assert s.query().count().release(epsilon=0.5).height == 1
    with pytest.raises(DomainError):
        dp.Session(tmp_path / "missing.csv", budget=dp.PureDP(1))


def test_filter_and_with_columns(adult):
    s = dp.Session(adult, budget=dp.PureDP(1))
    q = (s.query().filter(pl.col("age") >= 60)
         .with_columns(old=pl.col("age") >= 70)
         .group_by("old", keys=[True, False]).count())
    res = q.release(epsilon=1)
    assert res["old"].to_list() == [True, False]
    assert "discrete Laplace" in s.query().count().explain(epsilon=0.1)


def test_quantile_scores_handle_ties():
    df = pl.DataFrame({"x": [1, 2, 2, 2, 3, 5]})
    s = dp.Session(df, budget=dp.PureDP(1))
    q = s.query().quantile("x", 0.5, bounds=(0, 6))
    lf, planned = q.plan(epsilon=1)
    raw = engine.compute(lf, None, [p.stat for p in planned])
    scores = q.aggs[0].scores(raw["a0_q"])[0]
    # candidates 0..6; q·n = 3; [#{x<c}, #{x≤c}] = [0,0],[0,1],[1,4],[4,5],[5,5],[5,6],[6,6]
    assert scores == [-3, -2, 0, -1, -2, -2, -3]


@pytest.mark.parametrize("level", [0.3, 0.5, 0.99])
def test_quantile_scores_match_their_definition(level):
    """The vectorised scores equal −max(0, #{x<c} − q·n, q·n − #{x≤c}) in exact rationals."""
    from fractions import Fraction

    import numpy as np

    agg = dp.quantile("x", level, bounds=(0, 10))
    hist = np.random.default_rng(7).integers(0, 50, size=(3, 22))  # test data only
    for row, scores in zip(hist, agg.scores(hist), strict=True):
        cum, target = np.cumsum(row), agg.level() * int(row.sum())
        want = [-max(Fraction(0), int(lo) - target, target - int(hi))
                for lo, hi in zip(cum[0::2], cum[1::2], strict=True)]
        assert scores == want


@pytest.mark.parametrize("step", [
    lambda q: q.with_columns(y=pl.col("n") - pl.col("n").mean()),
    lambda q: q.with_columns(y=pl.col("n").shift(1)),
    lambda q: q.with_columns(y=pl.col("n").rank()),
    lambda q: q.with_columns(y=pl.col("n").sum().over("g")),
    lambda q: q.filter(pl.col("n") > pl.col("n").median()),
    lambda q: q.with_columns(y=pl.col("n").cum_sum()),
    lambda q: q.select(pl.col("n").shuffle()),
    lambda q: q.with_columns(y=pl.len()),
])
def test_non_rowwise_transformations_are_refused(small, step):
    s = dp.Session(small, budget=dp.PureDP(1))
    with pytest.raises(DomainError, match="row-wise"):
        step(s.query()).count().release(epsilon=0.1)
    assert s.spent == dp.PureDP(0)


def test_rowwise_transformations_pass(small):
    import narwhals as nw

    s = dp.Session(small, budget=dp.PureDP(1))
    q = (s.query().filter(pl.col("n") > 2)
         .with_columns(y=pl.when(pl.col("n") > 4).then(pl.col("n") * 2).otherwise(0),
                       t=pl.col("s").str.to_uppercase())
         .filter(nw.col("y") >= 0)
         .select("y", "n", "g"))
    assert q.sum("y", bounds=(0, 20)).release(epsilon=0.5).height == 1


def test_column_names_that_look_like_operations_are_fine():
    df = pl.DataFrame({"Sum": [1, 2], "Mean": [3, 4]})
    s = dp.Session(df, budget=dp.PureDP(1))
    q = s.query().with_columns(Max=pl.col("Sum") + pl.col("Mean"))
    assert q.sum("Max", bounds=(0, 10)).release(epsilon=0.5).height == 1


def test_approx_release_composes_in_zcdp_then_converts(adult):
    from dpkit.core.measures import zcdp_to_epsilon

    s = dp.Session(adult, budget=dp.ApproxDP(1, 1e-6))
    q = s.query().group_by("sex", keys=["Female", "Male"]).agg(
        dp.count(), dp.mean("age", bounds=(17, 90)))
    _, planned = q.plan(epsilon=0.5, delta=1e-7)
    total_rho = sum(p.loss.rho for p in planned)
    assert zcdp_to_epsilon(total_rho, Fraction(1, 10**7)) <= Fraction(1, 2)
    loss = s.total_loss(planned)
    assert loss <= dp.ApproxDP(0.5, 1e-7) and loss.epsilon > Fraction(1, 2) - Fraction(1, 10**6)
    # tighter than converting each statistic separately at δ/3 and adding
    separate = sum(zcdp_to_epsilon(p.loss.rho, Fraction(1, 3 * 10**7)) for p in planned)
    assert separate > loss.epsilon


def test_unit_column_cannot_be_recomputed(small):
    s = dp.Session(small, privacy_unit=PrivacyUnit.by("id", 1), budget=dp.PureDP(1))
    for step in (lambda q: q.with_columns(id=pl.col("id") * 1000 + pl.col("n")),
                 lambda q: q.with_columns((pl.col("n") * 7).alias("id")),
                 lambda q: q.select(pl.col("n").alias("id"), "g")):
        with pytest.raises(DomainError, match="privacy unit"):
            step(s.query()).count().release(epsilon=0.1)
    ok = s.query().select("id", pl.col("g"), pl.col("n").alias("m")).sum("m", bounds=(0, 9))
    assert ok.release(epsilon=0.1).height == 1
    assert s.spent == dp.PureDP(Fraction(1, 10))
