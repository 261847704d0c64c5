"""dp.count_distinct(column): distinct non-null values of a key-like column per group.

Its sensitivities are the row count's (the docstring's argument): checked exhaustively on
neighbours of small random tables (Hypothesis), tight on a worst case, through the
released noise law (χ², false-positive rate 1e-6) and an audit of the whole release on
worst-case neighbours (dpkit.audit, 1e-6), each with a broken variant that it rejects.
Also: its JSON form (the language and the server), plan-time refusals with nothing spent,
and the same exact values on Polars, lazy (streaming) and DuckDB sessions.
"""

from __future__ import annotations

import datetime as dt
import math
import warnings
from decimal import Decimal
from fractions import Fraction

import narwhals as nw
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stats import FALSE_POSITIVE_RATE, chi2_pvalue, discrete_laplace_pmf

import dpkit as dp
from dpkit.audit import audit_release
from dpkit.core import stability
from dpkit.core.stability import Contribution
from dpkit.errors import ColumnError
from dpkit.frame import engine
from dpkit.frame.language import ProtocolError
from dpkit.frame.session import SHARED_DRY_RUNS

KEYS = list(range(4))


def _exact(df: pl.DataFrame, keys: list[int] = KEYS) -> np.ndarray:
    """The engine's exact per-group statistic (no bounding, no noise) on ``df``."""
    agg = dp.count_distinct("x")
    stats = agg.statistics(nw.from_native(df.lazy()).collect_schema(), "a0_")
    out = engine.compute(nw.from_native(df.lazy()), pl.DataFrame({"g": keys}), stats)
    return out["a0_v"]


def _declared(df: pl.DataFrame, unit: dp.PrivacyUnit) -> tuple[Fraction, Fraction]:
    """(L1, L2) sensitivities the compiler plans (a pure-DP and a zCDP session)."""
    out = []
    for budget, kw in ((dp.PureDP(1), {"epsilon": 1}), (dp.ZCDP(1), {"rho": 1})):
        q = dp.Session(df, unit, budget).query().group_by("g", keys=KEYS).agg(
            dp.count_distinct("x"))
        out.append(q.plan(**kw)[1][0].sensitivity)
    return out[0], out[1]


@st.composite
def bounded_tables(draw):
    """(table, (M, G, R)): rows (u, g, x) that already respect the bounds (so contribution
    bounding keeps every row), values from a small domain (collisions) with nulls."""
    m, g, r = draw(st.integers(1, 6)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    rows = []
    for u in range(draw(st.integers(1, 5))):
        groups = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=g, unique=True))
        left = m
        for key in groups:
            k = min(left, draw(st.integers(1, r)))
            left -= k
            for _ in range(k):
                rows.append((u, key, draw(st.one_of(st.none(), st.integers(0, 4)))))
            if left == 0:
                break
    df = pl.DataFrame(rows, schema={"u": pl.Int64, "g": pl.Int64, "x": pl.Int64}, orient="row")
    return df, (m, g, r)


@settings(max_examples=60, deadline=None)
@given(bounded_tables())
def test_neighbours_move_the_vector_within_the_declared_sensitivities(case):
    df, (m, g, r) = case
    unit = dp.PrivacyUnit.by("u", m, max_groups=g, max_rows_per_group=r)
    b = unit.bounds
    l1, l2 = _declared(df, unit)
    assert l1 == min(b.max_rows, b.max_groups * b.max_rows_per_group)  # the row count's
    assert l2 == b.l2()
    full = _exact(df)
    for u in df["u"].unique().to_list():  # remove (or, read backwards, add) one unit
        diff = full - _exact(df.filter(pl.col("u") != u))
        assert (diff >= 0).all()  # removing rows never adds a value
        assert np.abs(diff).max() <= b.max_rows_per_group
        assert np.abs(diff).sum() <= l1
        assert math.sqrt(float((diff.astype(np.float64) ** 2).sum())) <= float(l2) + 1e-12


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 3))),
                min_size=1, max_size=12))
def test_row_level_neighbours_move_one_count_by_at_most_one(rows):
    df = pl.DataFrame(rows, schema={"g": pl.Int64, "x": pl.Int64}, orient="row")
    l1, l2 = _declared(df, dp.PrivacyUnit.rows())
    assert l1 == 1 and l2 == 1
    full = _exact(df)
    for i in range(df.height):
        diff = full - _exact(pl.concat([df.head(i), df.slice(i + 1)]))
        assert np.abs(diff).sum() <= 1


@pytest.mark.parametrize(("m", "g", "r"), [(6, 2, 3), (4, 3, 3), (9, 3, 2), (2, 1, 3)])
def test_the_declared_sensitivity_is_attained(m, g, r):
    """A unit with R fresh values in each of its groups (M rows in all) attains ‖Δ‖₁ =
    min(M, G·R) and ‖Δ‖∞ = min(M, R): the bound is the max change, not a loose one."""
    b = Contribution.of(m, g, r)
    rows = [(1, k % 4, 100) for k in range(4)]  # a shared background value per group
    left = b.max_rows
    for key in range(b.max_groups):
        for j in range(min(left, b.max_rows_per_group)):
            rows.append((0, key, 1000 * key + j))
        left -= min(left, b.max_rows_per_group)
    df = pl.DataFrame(rows, schema=["u", "g", "x"], orient="row")
    l1, _ = _declared(df, dp.PrivacyUnit.by("u", m, max_groups=g, max_rows_per_group=r))
    diff = _exact(df) - _exact(df.filter(pl.col("u") != 0))
    assert diff.sum() == l1 == min(b.max_rows, b.max_groups * b.max_rows_per_group)
    assert diff.max() == b.max_rows_per_group


# -- the released noise law --------------------------------------------------------------
M, G, R = 5, 2, 3  # Δ₁ = min(5, 2·3) = 5
N_KEYS = 3000


def _noise_table() -> tuple[pl.DataFrame, np.ndarray]:
    """Unit i: 3 rows in group i, 2 rows in group i + 1 (mod N_KEYS), all values fresh, so
    bounding keeps every row and each group holds 5 distinct values (plus a null)."""
    i = np.arange(N_KEYS)
    g = np.concatenate([i, i, i, (i + 1) % N_KEYS, (i + 1) % N_KEYS])
    u = np.concatenate([i] * 5)
    x = np.arange(5 * N_KEYS)
    df = pl.DataFrame({"u": u, "g": g, "x": x}).with_columns(
        x=pl.when(pl.col("x") % 997 == 0).then(None).otherwise(pl.col("x")))
    exact = df.group_by("g").agg(pl.col("x").drop_nulls().n_unique()).sort("g")["x"]
    return df, exact.to_numpy()


def _noise(df: pl.DataFrame, exact: np.ndarray, epsilon: int) -> np.ndarray:
    unit = dp.PrivacyUnit.by("u", M, max_groups=G, max_rows_per_group=R)
    s = dp.Session(df, unit, dp.PureDP(epsilon))
    out = s.query().group_by("g", keys=range(N_KEYS)).agg(dp.count_distinct("x")).release(
        epsilon=epsilon).sort("g")
    return out["x_distinct"].to_numpy() - exact


def test_released_noise_is_discrete_laplace_at_the_count_sensitivity(monkeypatch):
    """χ² of (released − exact) against discrete Laplace(Δ₁/ε), Δ₁ = min(M, G·R) = 5:
    rejects a correct release with probability ≤ 1e-6; a broken variant (noise for
    sensitivity 1, as if a unit moved a distinct count by 1 like a distinct-unit count)
    must be rejected by the same test."""
    df, exact = _noise_table()
    eps = 2
    support = np.arange(-60, 61)
    law = discrete_laplace_pmf(support, min(M, G * R) / eps)
    good = _noise(df, exact, eps)
    assert chi2_pvalue(good, support, law) > FALSE_POSITIVE_RATE

    original = stability.make_bounded_count
    monkeypatch.setattr(stability, "make_bounded_count", lambda f, bounds, metric, name="count":
                        original(f, Contribution(1, 1, 1), metric, name))
    SHARED_DRY_RUNS.clear()  # the calibration's code changed: forget the plans of the original
    broken = _noise(df, exact, eps)
    assert chi2_pvalue(broken, support, law) < FALSE_POSITIVE_RATE


# The audit of the whole pipeline (plan, debit, bounding, exact statistic, noise) on the
# worst-case neighbours: one unit added with R = 5 rows of fresh values. False-positive rate
# 1e-6 (dpkit.audit.audit_release); the broken variant calibrates for sensitivity 1 (true
# ε = 5 for a claimed 1) and must fail.
AUDIT_X = pl.DataFrame({"u": [0, 0, 1], "x": [1, 2, 2]})
AUDIT_X_PRIME = pl.concat([AUDIT_X, pl.DataFrame({"u": [2] * 5, "x": [10, 11, 12, 13, 14]})])


def _audited(df: pl.DataFrame) -> float:
    s = dp.Session(df, dp.PrivacyUnit.by("u", 5), dp.PureDP(1))
    return float(s.query().agg(dp.count_distinct("x")).release(epsilon=1)["x_distinct"][0])


@pytest.mark.slow
def test_audit_of_the_release_and_broken_variant(monkeypatch):
    ok = audit_release(_audited, AUDIT_X, AUDIT_X_PRIME, 1.0, samples=600, histogram_share=0)
    assert ok.passed, ok.lower_bound
    original = stability.make_bounded_count
    monkeypatch.setattr(stability, "make_bounded_count", lambda f, bounds, metric, name="count":
                        original(f, Contribution(1, 1, 1), metric, name))
    SHARED_DRY_RUNS.clear()  # the calibration's code changed: forget the plans of the original
    broken = audit_release(_audited, AUDIT_X, AUDIT_X_PRIME, 1.0, samples=600,
                           histogram_share=0)
    assert not broken.passed, broken.lower_bound


# -- the language, the server and refusals -----------------------------------------------
def _typed() -> pl.DataFrame:
    return pl.DataFrame({
        "u": [1, 1, 2, 3], "g": ["a", "a", "b", "b"], "i": [1, 2, 2, None],
        "s": ["x", "y", None, "y"], "b": [True, False, True, True],
        "d": [dt.date(2020, 1, 1), dt.date(2020, 1, 2), None, dt.date(2020, 1, 2)],
        "t": [dt.datetime(2020, 1, 1, 10), None, None, dt.datetime(2020, 1, 1, 11)],
        "c": pl.Series(["p", "q", "p", "p"], dtype=pl.Categorical),
        "f": [1.0, float("nan"), -0.0, 0.0],
        "dec": pl.Series([Decimal("1.5")] * 4, dtype=pl.Decimal(10, 2)),
        "l": [[1], [2], [1], [3]],
    })


def test_key_like_columns_release_and_others_are_refused_before_any_debit():
    s = dp.Session(_typed(), dp.PrivacyUnit.by("u", 2), dp.PureDP(1e7))
    ok = [dp.count_distinct(c) for c in ("i", "s", "b", "d", "t", "c")]
    out = s.query().group_by("g", keys=["a", "b"]).agg(*ok).release(epsilon=1e6)
    assert out.select("i_distinct", "s_distinct", "b_distinct", "d_distinct", "t_distinct",
                      "c_distinct").rows() == [(2, 2, 2, 2, 1, 2), (1, 1, 1, 1, 1, 1)]
    for bad in ("f", "dec", "l", "nope"):
        with pytest.raises(ColumnError, match=bad):
            s.query().group_by("g", keys=["a", "b"]).agg(dp.count_distinct(bad)).release(
                epsilon=1)
    assert s.spent == dp.PureDP(1e6)
    duckdb = pytest.importorskip("duckdb")  # the same values there (no categorical type)
    table = _typed().drop("c", "dec", "l")
    d = dp.Session(duckdb.from_arrow(table.to_arrow()), dp.PrivacyUnit.by("u", 2),
                   dp.PureDP(1e7))
    out = d.query().group_by("g", keys=["a", "b"]).agg(*ok[:-1]).release(epsilon=1e6)
    assert out.sort("g").select("i_distinct", "s_distinct", "b_distinct", "d_distinct",
                                "t_distinct").rows() == [(2, 2, 2, 2, 1), (1, 1, 1, 1, 1)]


def test_json_round_trip_and_refusals():
    s = dp.Session(_typed(), dp.PrivacyUnit.by("u", 2, max_groups=1), dp.PureDP(1))
    q = s.query().group_by("g", keys=["a", "b"]).agg(dp.count_distinct("s", name="n"),
                                                     dp.count_distinct())
    doc = q.to_json()
    assert doc["aggs"] == [{"agg": "count_distinct", "column": "s", "name": "n"},
                           {"agg": "count_distinct"}]  # the unit count's form is unchanged
    back = dp.Query.from_json(s, doc)
    assert back.describe() == q.describe()
    assert [p.sensitivity for p in back.plan(epsilon=1)[1]] == [2, 1]  # R = 2; G = 1
    bad = {**doc, "aggs": [{"agg": "count_distinct", "column": "f"}]}
    with pytest.raises(ColumnError):
        dp.Query.from_json(s, bad).release(epsilon=1)
    with pytest.raises(ProtocolError):
        dp.Query.from_json(s, {**doc, "aggs": [{"agg": "count_distinct", "column": 3}]})
    with pytest.raises(ProtocolError):
        dp.Query.from_json(s, {**doc, "aggs": [{"agg": "count_distinct", "col": "s"}]})
    assert s.spent == dp.PureDP(0)


def test_server_releases_it_and_refuses_a_float_column_with_nothing_spent(tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():  # Starlette's note about its httpx dependency
        warnings.filterwarnings("ignore", message="Using `httpx` with")
        from fastapi.testclient import TestClient

    from served import serve_one

    app, ledger, token = serve_one(tmp_path, _typed().select("u", "g", "i", "f"),
                                   {"column": "u", "max_rows": 2},
                                   {"measure": "pure", "epsilon": 3})
    headers = {"Authorization": f"Bearer {token}"}
    body = {"group_by": {"columns": ["g"], "keys": ["a", "b"]}, "budget": {"epsilon": 1}}
    with TestClient(app) as http:
        bad = http.post("/v1/datasets/t/release", headers=headers,
                        json={**body, "aggs": [{"agg": "count_distinct", "column": "f"}]})
        assert bad.status_code == 422 and "count_distinct('f')" in bad.text
        assert ledger.spent("t") == dp.PureDP(0)
        r = http.post("/v1/datasets/t/release", headers=headers,
                      json={**body, "aggs": [{"agg": "count_distinct", "column": "i"}]})
        assert r.status_code == 200, r.text
        assert [c["name"] for c in r.json()["columns"]][:2] == ["g", "i_distinct"]
        assert ledger.spent("t") == dp.PureDP(1)


# -- backends ------------------------------------------------------------------------------
def test_same_exact_values_on_polars_lazy_streaming_and_duckdb(tmp_path):
    """Bounds that drop nothing and ε = 10^6 (P(any noise ≠ 0) < 10^-100000): every backend
    releases the true distinct counts (nulls not counted)."""
    duckdb = pytest.importorskip("duckdb")
    gen = np.random.default_rng(3)  # test data only, never noise
    n = 4000
    u = np.arange(n) // 4  # 4 rows per unit
    df = pl.DataFrame({"u": u, "g": gen.choice(["a", "b", "c"], n),
                       "x": gen.integers(0, 300, n)}).with_columns(
        x=pl.when(pl.col("x") % 50 == 0).then(None).otherwise(pl.col("x")),
        s=pl.col("x").cast(pl.String))
    true = df.group_by("g").agg(pl.col("x").drop_nulls().n_unique().alias("x_distinct"),
                                pl.col("s").drop_nulls().n_unique().alias("s_distinct")
                                ).sort("g")
    path = tmp_path / "t.parquet"
    df.write_parquet(path)
    unit = dp.PrivacyUnit.by("u", 4)
    for data in (df, df.lazy(), path, duckdb.from_arrow(df.to_arrow())):
        s = dp.Session(data, unit, dp.PureDP(1e7))
        out = s.query().group_by("g", keys=["a", "b", "c"]).agg(
            dp.count_distinct("x"), dp.count_distinct("s")).release(epsilon=1e6).sort("g")
        assert out.select("g", "x_distinct", "s_distinct").equals(true), type(data)
