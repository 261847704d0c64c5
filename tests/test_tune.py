"""Private contribution-bound and bound tuning (dpkit.frame.tuning; issue 34, item 3).

The debit is the stated share exactly and is in the ledger; bad input is refused before
the debit; with (practically) noiseless histograms the tuner picks the candidate (and the
numeric interval) that is best with hindsight; the chosen bounds come from the declared
grids; both histogram releases (contributions, and one value per unit) are the true
histogram plus the planned discrete Laplace noise (DKW tests at false-positive rate 1e-6,
paired with broken variants they catch)."""

import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.errors import BoundsError, BudgetExceededError, ColumnError, DomainError
from dpkit.frame import tuning as tune_module
from dpkit.frame.schema import SchemaError
from dpkit.mechanisms import frontend


def panel(sizes: dict[int, int], groups: int = 1) -> pl.DataFrame:
    """``count`` units with ``size`` rows each (unit id, a group key cycling over
    ``groups`` values, a value)."""
    ids, keys, values = [], [], []
    unit = 0
    for size, count in sizes.items():
        for _ in range(count):
            ids += [unit] * size
            keys += [i % groups for i in range(size)]
            values += [1.0 + (i % 3) for i in range(size)]
            unit += 1
    return pl.DataFrame({"pid": ids, "g": keys, "x": values})


def session(frame: pl.DataFrame, cap: int = 8, budget=None, **kw) -> dp.Session:
    return dp.Session(frame, dp.PrivacyUnit.by("pid", cap), budget or dp.PureDP(1),
                      schema=dp.Schema({"x": dp.Numeric(0, 10)}), **kw)


# -- the debit --------------------------------------------------------------------------------
@pytest.mark.parametrize("column", [None, "x"])
def test_debit_is_the_share_exactly_and_in_the_ledger(tmp_path, column):
    s = session(panel({4: 30}), ledger=tmp_path / "l.db", dataset="panel")
    statistic = "mean" if column else "count"
    rec = s.recommend_bounds(statistic=statistic, column=column, share=Fraction(1, 10))
    assert rec.loss == dp.PureDP(Fraction(1, 10))
    assert s.spent == dp.PureDP(Fraction(1, 10))
    assert rec.remaining == dp.PureDP(Fraction(9, 10))
    rows = s.ledger.releases("panel")
    assert len(rows) == len(rec.releases) == (2 if column else 1)
    assert sum(r["loss"].epsilon for r in rows) == Fraction(1, 10)
    assert "tune contribution bounds" in rows[-1]["query"]
    assert [r["query"] for r in rows] == [r.description for r in rec.releases]
    if column:  # the value histogram: sensitivity 1 at half the tuning budget
        assert "tune bounds: histogram of one value of 'x'" in rows[0]["query"]
        assert rec.releases[0].noise[0].scale == 20
        assert rec.values is not None and rec.values.shape == (tune_module.DEFAULT_BINS,)


def test_levels_is_deprecated_and_ignored():
    s = session(panel({2: 30}))
    with pytest.warns(DeprecationWarning, match="levels"):
        rec = s.recommend_bounds(statistic="mean", column="x", levels=(0.9, 0.1))
    assert rec.bounds is not None and s.spent == dp.PureDP(Fraction(1, 10))


def test_zcdp_share_and_explicit_budget():
    s = session(panel({2: 20}), budget=dp.ZCDP(Fraction(1, 2)))
    rec = s.recommend_bounds()
    assert rec.loss == dp.ZCDP(Fraction(1, 20)) == s.spent
    rec = s.recommend_bounds(rho=Fraction(1, 100))
    assert s.spent == dp.ZCDP(Fraction(6, 100))


def test_tune_reads_the_query():
    s = session(panel({4: 30}, groups=2))
    q = s.query().group_by("g", keys=dp.KeySet({"g": [0, 1]})).sum("x")
    rec = dp.tune(q, epsilon=Fraction(1, 20))
    assert rec.statistic == "sum" and rec.column == "x"
    assert rec.bounds is not None and 0 <= rec.bounds[0] <= rec.bounds[1] <= 10
    assert s.spent == dp.PureDP(Fraction(1, 20))
    out = rec.apply(q).release(epsilon=Fraction(1, 2))  # runs with the chosen bounds
    assert out.height == 2
    assert s.spent == dp.PureDP(Fraction(11, 20))


@pytest.mark.parametrize("kwargs,error", [
    ({"share": 0}, DomainError), ({"share": 1}, DomainError),
    ({"share": Fraction(3, 2)}, DomainError), ({"cap": 0}, DomainError),
    ({"cap": tune_module.MAX_CAP + 1}, DomainError), ({"cap": 2.5}, DomainError),
    ({"group_by": ["nope"]}, SchemaError), ({"statistic": "median"}, DomainError),
    ({"statistic": "mean", "column": "nope"}, ColumnError),
    ({"statistic": "mean", "column": "pid", "bounds": None}, BoundsError),
    ({"statistic": "sum"}, DomainError), ({"epsilon": -1}, DomainError),
    ({"share": Fraction(1, 10), "epsilon": 1}, DomainError),
    ({"rho": 1}, DomainError), ({"epsilon": 2}, BudgetExceededError),
    ({"epsilon": 1}, BudgetExceededError),  # nothing would be left for the final query
    ({"statistic": "mean", "column": "x", "bins": 1}, DomainError),
    ({"statistic": "mean", "column": "x", "bins": tune_module.MAX_BINS + 1}, DomainError),
    ({"statistic": "mean", "column": "x", "bins": 2.5}, DomainError),
    ({"statistic": "sum", "column": "x", "bins": True}, DomainError),
    ({"statistic": "mean", "column": "x", "bounds": (3, 3)}, BoundsError),
    ({"statistic": "mean", "column": "x", "bounds": (3, float("nan"))}, BoundsError),
])
def test_bad_input_is_refused_before_the_debit(tmp_path, kwargs, error):
    s = session(panel({4: 10}), ledger=tmp_path / "l.db", dataset="panel")
    with pytest.raises(error):
        s.recommend_bounds(**kwargs)
    assert s.spent == dp.PureDP(0)
    assert s.ledger.releases("panel") == []


def test_row_level_sessions_and_queries_without_a_count_are_refused():
    s = dp.Session(panel({1: 5}), dp.PrivacyUnit.rows(), dp.PureDP(1))
    with pytest.raises(DomainError, match="privacy unit column"):
        s.recommend_bounds()
    s = session(panel({1: 5}))
    with pytest.raises(DomainError, match="count, sum or mean"):
        dp.tune(s.query().agg(dp.median("x")))
    assert s.spent == dp.PureDP(0)


# -- the choice -------------------------------------------------------------------------------
def hindsight_count(sizes: dict[int, int], grid, epsilon: float) -> int:
    """The M of least true RMSE for an ungrouped count: dropped rows and √2·M/ε."""
    def error(m: int) -> float:
        dropped = sum(c * max(0, min(n, grid[-1]) - m) for n, c in sizes.items())
        return math.hypot(dropped, math.sqrt(2) * m / epsilon)
    return min(grid, key=lambda m: (error(m), -m))


@pytest.mark.parametrize("sizes", [{4: 100, 64: 5}, {1: 500, 2: 3}, {8: 40, 16: 40},
                                   {2: 200, 32: 30}])
def test_noiseless_tuner_picks_the_hindsight_best(sizes):
    # ε_t = 10⁶: discrete Laplace of scale 10⁻⁶ is 0 but with probability ≈ 2e^(-10⁶)
    s = session(panel(sizes), cap=64, budget=dp.PureDP(10 ** 6 + 1))
    rec = s.recommend_bounds(epsilon=10 ** 6)
    assert rec.grid == (1, 2, 4, 8, 16, 32, 64)
    assert rec.contribution["max_rows"] == hindsight_count(sizes, rec.grid, 1.0)


def test_noiseless_grouped_tuner_keeps_one_row_per_group():
    # every unit has one row in each of 8 groups: (G, R) = (8, 1) drops nothing at the
    # least L2 sensitivity √8 (zCDP: under pure ε, (8, 8) ties at Δ₁ = 8)
    s = session(panel({8: 200}, groups=8), budget=dp.ZCDP(10 ** 6 + 1))
    rec = s.recommend_bounds(group_by=["g"], keys=dp.KeySet({"g": list(range(8))}),
                             rho=10 ** 6)
    assert (rec.contribution["max_groups"], rec.contribution["max_rows_per_group"]) == (8, 1)
    assert rec.candidates[0].bias == 0


@pytest.mark.parametrize("cap", [1, 3, 6, 8, 13])
def test_chosen_bounds_come_from_the_declared_grid(cap):
    s = session(panel({1: 20, 3: 20, 7: 20, 20: 5}, groups=3), cap=cap)
    grid = tune_module.grid(cap)
    assert grid[-1] == cap and all(b == 2 * a for a, b in zip(grid[:-2], grid[1:-1], strict=True))
    for kwargs in ({}, {"group_by": ["g"], "keys": dp.KeySet({"g": [0, 1, 2]})}):
        rec = s.recommend_bounds(share=Fraction(1, 100), **kwargs)
        assert set(rec.contribution.values()) <= set(grid)
        assert all(set(c.bounds().values()) <= set(grid) for c in rec.candidates)


def spread_values(n: int = 40) -> pl.DataFrame:
    """``n`` units with one row each in every quarter of [0, 10] (values 1, 3, 6, 9)."""
    return pl.DataFrame({"pid": list(range(4 * n)), "g": [0] * (4 * n),
                         "x": [(1.0, 3.0, 6.0, 9.0)[i % 4] for i in range(4 * n)]})


@pytest.mark.parametrize("statistic,expected", [("mean", (2.0, 4.0)), ("sum", (0.0, 4.0))])
def test_noiseless_value_choice_is_the_hindsight_best(statistic, expected):
    # one row per unit, 100 at 2.5 and 100 at 3.5 on 10 bins of [0, 10]: clamping inside
    # [2, 4] moves every unit (bias ≥ 25 per cell for a sum, 0.25 for a mean, far above the
    # noise at ε_f = 1); a mean's noise grows with the width, a sum's with max(|a|, |b|),
    # so a sum keeps any lower edge ≤ 2 and ties go to the widest
    frame = pl.DataFrame({"pid": list(range(200)), "g": [0] * 200,
                          "x": [2.5] * 100 + [3.5] * 100})
    s = session(frame, budget=dp.PureDP(10 ** 6 + 1))
    rec = s.recommend_bounds(statistic=statistic, column="x", epsilon=10 ** 6, bins=10)
    assert rec.edges == tuple(float(k) for k in range(11))
    assert rec.bounds == expected
    assert rec.contribution["max_rows"] == 1


def test_noiseless_value_choice_steps_in_from_an_empty_tail():
    # a declared range far wider than the data: the chosen interval hugs the data
    frame = pl.DataFrame({"pid": list(range(400)), "g": [0] * 400,
                          "x": [3.0 + (i % 40) / 40 for i in range(400)]})
    s = session(frame, budget=dp.PureDP(10 ** 6 + 1))
    rec = s.recommend_bounds(statistic="mean", column="x", epsilon=10 ** 6, bins=20)
    assert rec.bounds == (3.0, 4.0)


@pytest.mark.parametrize("bins", [2, 5, 16, 64])
def test_chosen_numeric_bounds_are_edges_of_the_declared_grid(bins):
    s = session(spread_values(10), budget=dp.PureDP(100))
    for _ in range(5):  # small ε: noisy histograms, still only the grid's edges
        rec = s.recommend_bounds(statistic="sum", column="x", epsilon=Fraction(1, 50),
                                 bins=bins)
        assert rec.edges == tuple(float(e) for e in tune_module.value_edges(
            (Fraction(0), Fraction(10)), bins))
        assert rec.bounds is not None and rec.bounds[0] < rec.bounds[1]
        assert rec.bounds[0] in rec.edges and rec.bounds[1] in rec.edges


def test_unimodal_fit_is_the_least_squares_unimodal_projection():
    y = np.array([3.0, -2.0, 5.0, 9.0, 4.0, 6.0, -1.0, 0.0])
    fit = tune_module.unimodal(y)
    assert np.all(fit >= 0)
    mode = int(np.argmax(fit))
    assert np.all(np.diff(fit[:mode + 1]) >= 0) and np.all(np.diff(fit[mode:]) <= 0)
    np.testing.assert_allclose(tune_module.unimodal(np.array([1.0, 4.0, 2.0])), [1, 4, 2])
    np.testing.assert_allclose(fit, [0.5, 0.5, 5, 9, 5, 5, 0, 0])


def test_result_reports_its_table():
    s = session(panel({2: 30}))
    rec = s.recommend_bounds(statistic="mean", column="x")
    text = str(rec)
    assert "chosen" in text and "charged: ε = 0.1" in text and "remaining" in text
    html = rec._repr_html_()
    assert "<table>" in html and "max_rows" in html
    rows = rec.rows()
    assert len(rows) == len(rec.candidates) and sum(r["chosen"] for r in rows) == 1


def test_with_bounds_refuses_looser_bounds_and_shares_the_accountant():
    s = session(panel({2: 10}))
    view = s.with_bounds(max_rows=2)
    assert view.accountant is s.accountant and view.privacy_unit.max_rows == 2
    with pytest.raises(DomainError, match="exceeds the declared"):
        s.with_bounds(max_rows=9)


# -- the law of the histogram release ---------------------------------------------------------
SIZES = {1: 40, 2: 40, 4: 40, 8: 40}  # 40 units in each bucket of the grid 1, 2, 4, 8
RUNS = 1000
FPR = 1e-6


def noise_samples(module_frontend=frontend) -> tuple[np.ndarray, Fraction]:
    """RUNS tunings at ε_t = 1/2: the released counts minus the true ones (4 per run), and
    the planned scale (1/ε_t, sensitivity 1)."""
    s = session(panel(SIZES), budget=dp.PureDP(RUNS))
    return _released_minus_truth(
        lambda: s.recommend_bounds(epsilon=Fraction(1, 2)),
        lambda rec: (rec.histogram - np.array([40, 40, 40, 40]), rec.releases[-1]),
        module_frontend)


def _released_minus_truth(tune, read, module_frontend) -> tuple[np.ndarray, Fraction]:
    """RUNS calls of ``tune`` with the tuner's front-end kit swapped for
    ``module_frontend``: the released counts minus the true ones as ``read`` gives them,
    concatenated, and the planned scale of the release ``read`` names."""
    out = []
    scale = None
    original = tune_module.frontend
    tune_module.frontend = module_frontend
    try:
        for _ in range(RUNS):
            errors, release = read(tune())
            out.append(errors)
            scale = release.noise[0].scale
    finally:
        tune_module.frontend = original
    return np.concatenate(out), scale


def dkw_accepts(samples: np.ndarray, scale: Fraction) -> bool:
    """DKW: P(sup_k |F_n(k) − F(k)| > t) ≤ 2·exp(−2nt²) = FPR for the discrete Laplace
    F of ``scale`` (P(X = k) ∝ e^(−|k|/scale))."""
    n = samples.size
    t = math.sqrt(math.log(2 / FPR) / (2 * n))
    p = math.exp(-1 / float(scale))
    ks = np.arange(-60, 61)
    pmf = (1 - p) / (1 + p) * p ** np.abs(ks)
    cdf = np.cumsum(pmf)
    empirical = np.searchsorted(np.sort(samples), ks, side="right") / n
    return float(np.max(np.abs(empirical - cdf))) <= t


def test_histogram_release_is_the_planned_discrete_laplace():
    samples, scale = noise_samples()
    assert scale == 2  # sensitivity 1 at ε_t = 1/2, the planned row
    assert dkw_accepts(samples, scale)


def broken(noisy):
    return SimpleNamespace(charge_record=frontend.charge_record,
                           noise_row=frontend.noise_row, noisy=noisy)


def _reads_the_truth(values, *a, **k):
    return SimpleNamespace(value=np.asarray(values))


def _ignores_the_split(values, sensitivity, budget, **k):
    # the noise drawn at ε = 1 while the plan says 1/2 (scale 1 instead of 2)
    return frontend.noisy(values, sensitivity, dp.PureDP(1), **k)


@pytest.mark.parametrize("draws", ["contributions", "values"])
@pytest.mark.parametrize("noisy", [_reads_the_truth, _ignores_the_split])
def test_law_check_catches_a_broken_tuner(draws, noisy):
    """The broken variants: a tuner that releases the true histogram, or draws its noise at
    the whole tuning ε instead of its half, fails the law check (of either histogram)."""
    samples, scale = (noise_samples if draws == "contributions" else value_samples)(
        broken(noisy))
    assert not dkw_accepts(samples, scale)


# -- the law of the value-histogram release ----------------------------------------------------
def value_samples(module_frontend=frontend) -> tuple[np.ndarray, Fraction]:
    """RUNS tunings of a sum at ε_t = 1 (the value histogram at 1/2) on 4 bins: the released
    counts minus the true ones (40 per bin: one row per unit), and the planned scale."""
    s = session(spread_values(), budget=dp.PureDP(RUNS + 1))
    return _released_minus_truth(
        lambda: s.recommend_bounds(statistic="sum", column="x", epsilon=1, bins=4),
        lambda rec: (rec.values - 40, rec.releases[0]), module_frontend)


def test_value_histogram_release_is_the_planned_discrete_laplace():
    samples, scale = value_samples()
    assert scale == 2  # sensitivity 1 at ε_t/2 = 1/2
    assert dkw_accepts(samples, scale)
