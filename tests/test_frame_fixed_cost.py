"""Less fixed cost per release (issue 35, item 4), and that nothing it skips lets a query
through that the skipped work would refuse.

- Passed release dry runs are remembered process-wide (``SHARED_DRY_RUNS``) for sessions
  given no ``plan_memo``: a fresh session skips a dry run passed on the same schema, query,
  declared metadata and budget arguments; a refused plan is refused on every session; a
  different schema (or declared schema) misses the memo. Paired with a broken key (without
  the schema) that the schema test catches.
- On Polars the statistics' nulls are filled in the aggregate's own collect; the exact
  statistics are still saturated at ±(2^62 − 1), and nulls are still 0.
- The plan's aggregates in Polars' own form (``engine.native_aggregates``) are remembered
  under the same key (``PlanMemo.value``): translated once per plan and schema, a different
  schema translates again (paired with the schema-less broken key), a refused plan is
  refused on every session and never translated, and the Polars form computes the same
  exact statistics as narwhals' translation.
- A query's calibration (``Session.remember_plan``) is remembered under the same kind of key:
  computed once per query, schema, unit and budget arguments; another unit bound, budget or
  schema calibrates again (paired with a key without the unit's bounds, which the unit test
  catches); a query that fails to plan fails on every session.
"""

from __future__ import annotations

from typing import Any

import narwhals as nw
import polars as pl
import pytest

import dpkit as dp
from dpkit.errors import DomainError
from dpkit.frame import engine, language
from dpkit.frame.aggregates import Statistic
from dpkit.frame.session import SHARED_DRY_RUNS, PlanMemo, Session

_SATURATE = (1 << 62) - 1


def _frame(dtype: type[pl.DataType] = pl.Int64) -> pl.DataFrame:
    return pl.DataFrame({"g": ["a", "b", "a"], "x": [1, 2, 3]}).with_columns(
        pl.col("x").cast(dtype))


def _release(frame: pl.DataFrame, epsilon: float = 1, **kwargs: Any) -> Session:
    """A fresh session (no plan_memo: the shared one) and one grouped mean release."""
    s = dp.Session(frame, budget=dp.PureDP(10), **kwargs)
    out = s.query().group_by("g", keys=["a", "b"]).agg(
        dp.mean("x", bounds=(0, 10))).release(epsilon=epsilon)
    assert out.height == 2
    return s


def _spy(monkeypatch: pytest.MonkeyPatch, refuse: Any = lambda empty: False) -> list[str]:
    """Record every dry run that runs; it refuses (as a backend's binding error would, on
    zero rows) when ``refuse(empty frame)``."""
    calls: list[str] = []
    real = engine.dry_run

    def spy(empty: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(str(empty.collect_schema()["x"]))
        if refuse(empty):
            raise DomainError("the query does not run on this table's schema")
        real(empty, *args, **kwargs)

    monkeypatch.setattr(engine, "dry_run", spy)
    return calls


def test_a_fresh_session_skips_a_dry_run_already_passed(monkeypatch: pytest.MonkeyPatch):
    calls = _spy(monkeypatch)
    frame = _frame()
    for _ in range(3):
        _release(frame)
    assert calls == ["Int64"]
    _release(frame, epsilon=2)  # other budget arguments: other statistics, checked again
    assert calls == ["Int64", "Int64"]


def test_a_refused_plan_is_refused_on_every_fresh_session(monkeypatch: pytest.MonkeyPatch):
    calls = _spy(monkeypatch, refuse=lambda empty: True)
    for _ in range(3):
        s = dp.Session(_frame(), budget=dp.PureDP(10))
        with pytest.raises(DomainError):
            s.query().group_by("g", keys=["a", "b"]).agg(
                dp.mean("x", bounds=(0, 10))).release(epsilon=1)
        assert s.spent == dp.PureDP(0)  # refused before the debit
    assert len(calls) == 3 and len(SHARED_DRY_RUNS) == 0


def _another_schema_is_refused(monkeypatch: pytest.MonkeyPatch) -> bool:
    """Pass the dry run on an Int64 column, then release the same query on an Int32 one
    whose dry run refuses: True when that release is refused before its debit."""
    calls = _spy(monkeypatch, refuse=lambda empty: str(empty.collect_schema()["x"]) == "Int32")
    _release(_frame())
    s = dp.Session(_frame(pl.Int32), budget=dp.PureDP(10))
    try:
        s.query().group_by("g", keys=["a", "b"]).agg(
            dp.mean("x", bounds=(0, 10))).release(epsilon=1)
    except DomainError:
        assert s.spent == dp.PureDP(0) and calls == ["Int64", "Int32"]
        return True
    return False


def test_another_schema_misses_the_memo(monkeypatch: pytest.MonkeyPatch):
    assert _another_schema_is_refused(monkeypatch)


def test_the_schema_test_catches_a_key_without_the_schema(monkeypatch: pytest.MonkeyPatch):
    """Broken variant: a memo key without the table's schema lets the Int32 release through
    on the Int64 session's remembered dry run, and the test above sees it."""
    def schemaless(self: Session, what: str, query: Any, *extra: Any) -> Any:
        return (what, repr(query.to_json()), *extra)

    monkeypatch.setattr(Session, "plan_key", schemaless)
    assert not _another_schema_is_refused(monkeypatch)


def test_another_declared_schema_misses_the_memo(monkeypatch: pytest.MonkeyPatch):
    calls = _spy(monkeypatch)
    frame = _frame()
    for upper in (10, 10, 20):
        _release(frame, schema=dp.Schema({"x": dp.Numeric(0, upper)}))
    assert len(calls) == 2


def test_a_change_of_the_query_language_forgets_the_memo():
    _release(_frame())
    assert len(SHARED_DRY_RUNS) == 1
    language.unregister("no_such_tag")  # any change of the registry notifies
    assert len(SHARED_DRY_RUNS) == 0


def test_a_given_plan_memo_is_used_instead_of_the_shared_one(monkeypatch: pytest.MonkeyPatch):
    calls = _spy(monkeypatch)
    memo = PlanMemo()
    _release(_frame(), plan_memo=memo)
    assert len(memo) == 1 and len(SHARED_DRY_RUNS) == 0 and len(calls) == 1


# -- the plan's aggregates translated to Polars once per key ------------------------------
def _translations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every translation of a plan's aggregates (the column's type)."""
    calls: list[str] = []
    real = engine.native_aggregates

    def spy(lf: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(lf.collect_schema()["x"]))
        return real(lf, *args, **kwargs)

    monkeypatch.setattr(engine, "native_aggregates", spy)
    return calls


def test_a_plan_is_translated_once(monkeypatch: pytest.MonkeyPatch):
    calls = _translations(monkeypatch)
    for _ in range(3):
        _release(_frame())
    assert calls == ["Int64"]


def _another_schema_translates_again(monkeypatch: pytest.MonkeyPatch) -> bool:
    """Release on an Int64 column, then the same query on a Float64 one (whose mean sums a
    grid, not integers): True when the second translates its own aggregates."""
    calls = _translations(monkeypatch)
    _release(_frame())
    _release(_frame(pl.Float64))
    return calls == ["Int64", "Float64"]


def test_another_schema_translates_again(monkeypatch: pytest.MonkeyPatch):
    assert _another_schema_translates_again(monkeypatch)


def test_the_translation_test_catches_a_key_without_the_schema(
        monkeypatch: pytest.MonkeyPatch):
    """Broken variant: without the schema in the key the Float64 release would reuse the
    Int64 column's aggregates (an integer cast of floats), and the test above sees it."""
    def schemaless(self: Session, what: str, query: Any, *extra: Any) -> Any:
        return (what, repr(query.to_json()), *extra)

    monkeypatch.setattr(Session, "plan_key", schemaless)
    assert not _another_schema_translates_again(monkeypatch)


def test_a_refused_plan_is_never_translated(monkeypatch: pytest.MonkeyPatch):
    refused = _spy(monkeypatch, refuse=lambda empty: True)
    calls = _translations(monkeypatch)
    for _ in range(3):
        s = dp.Session(_frame(), budget=dp.PureDP(10))
        with pytest.raises(DomainError):
            s.query().group_by("g", keys=["a", "b"]).agg(
                dp.mean("x", bounds=(0, 10))).release(epsilon=1)
        assert s.spent == dp.PureDP(0)
    assert len(refused) == 3 and calls == []


@pytest.mark.parametrize("unit", [None, "u"])
@pytest.mark.parametrize("grouped", [False, True])
def test_the_polars_form_computes_what_narwhals_does(unit: Any, grouped: bool):
    """Every scalar statistic kind (count, grid sum, integer sum, distinct units), with
    nulls, NaN and values out of bounds: the same exact arrays either way."""
    import math

    frame = pl.DataFrame({"g": ["a", "b", "a", "c", None, "a"],
                          "u": [1, 1, 2, 3, 3, 4],
                          "x": [1.5, None, math.nan, 1e300, -7.25, 3.0],
                          "i": [1, None, 3, -40, 5, 6]})
    lf = engine.to_lazy(frame)
    schema = lf.collect_schema()
    stats = [s for agg in (dp.mean("x", bounds=(-2, 5)), dp.sum("i", bounds=(-3, 4)),
                           dp.count(), dp.sum("x", bounds=(0.1, 0.7)))
             for s in agg.statistics(schema, f"{agg.output_name()}_")]
    stats.append(Statistic("d", "distinct"))
    keys = pl.DataFrame({"g": ["a", "b", "z"]}) if grouped else None
    native = engine.native_aggregates(lf, stats, unit)
    assert native is not None
    fast = engine.compute(lf, keys, stats, unit, native=native)
    slow = engine.compute(lf, keys, stats, unit)
    assert fast.keys() == slow.keys()
    assert all(fast[k].tolist() == slow[k].tolist() for k in slow)


# -- a query's calibration remembered per key -------------------------------------------
def _calibrations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record every calibration of a plan (its number of statistics)."""
    from dpkit.frame import query as query_module

    calls: list[int] = []
    real = query_module.plan_statistics

    def spy(aggs: Any, *args: Any, **kwargs: Any) -> Any:
        out = real(aggs, *args, **kwargs)
        calls.append(len(out))
        return out

    monkeypatch.setattr(query_module, "plan_statistics", spy)
    return calls


def _unit_frame() -> pl.DataFrame:
    return pl.DataFrame({"u": [1, 1, 2, 3], "g": ["a", "b", "a", "b"], "x": [1, 2, 3, 4]})


def _planned(frame: pl.DataFrame, max_rows: int = 1, epsilon: float = 1) -> dp.Plan:
    s = dp.Session(frame, dp.PrivacyUnit.by("u", max_rows), budget=dp.PureDP(10))
    return s.query().group_by("g", keys=["a", "b"]).agg(
        dp.count(), dp.sum("x", bounds=(0, 10))).plan(epsilon=epsilon)


def test_a_query_is_calibrated_once(monkeypatch: pytest.MonkeyPatch):
    calls = _calibrations(monkeypatch)
    plans = [_planned(_unit_frame()) for _ in range(3)]
    assert calls == [2]
    assert len({(p.loss, p.noise, p.description) for p in plans}) == 1
    _planned(_unit_frame(), epsilon=2)  # other arguments: calibrated again
    _planned(_unit_frame().with_columns(pl.col("x").cast(pl.Float64)))  # another schema
    assert calls == [2, 2, 2]


def _another_unit_bound_calibrates_again(monkeypatch: pytest.MonkeyPatch) -> bool:
    """A unit with up to 2 rows doubles the sensitivities of one with 1: True when its plan
    is calibrated for it (twice the scales), not taken from the first."""
    calls = _calibrations(monkeypatch)
    one, two = _planned(_unit_frame(), 1), _planned(_unit_frame(), 2)
    scales = [(a.scale, b.scale) for a, b in zip(one.noise, two.noise, strict=True)]
    return calls == [2, 2] and all(b == 2 * a for a, b in scales)


def test_another_unit_bound_calibrates_again(monkeypatch: pytest.MonkeyPatch):
    assert _another_unit_bound_calibrates_again(monkeypatch)


def test_the_unit_test_catches_a_key_without_the_unit(monkeypatch: pytest.MonkeyPatch):
    """Broken variant: a key without the privacy unit's bounds hands the max_rows = 2
    session the max_rows = 1 calibration (half the noise), and the test above sees it."""
    def unitless(self: Session, what: str, query: Any, *extra: Any) -> Any:
        return (what, repr(query.to_json()), self._schema_text, *extra)

    monkeypatch.setattr(Session, "plan_key", unitless)
    assert not _another_unit_bound_calibrates_again(monkeypatch)


def test_a_query_that_fails_to_plan_fails_on_every_session(monkeypatch: pytest.MonkeyPatch):
    calls = _calibrations(monkeypatch)
    _planned(_unit_frame())  # the same shape planned once with a valid budget
    for _ in range(3):
        s = dp.Session(_unit_frame(), dp.PrivacyUnit.by("u", 1), budget=dp.PureDP(10))
        query = s.query().group_by("g", keys=["a", "b"]).agg(dp.count(),
                                                             dp.sum("x", bounds=(0, 10)))
        with pytest.raises(DomainError):
            query.plan(epsilon=1, split=[1])  # a split that does not match the statistics
        with pytest.raises(DomainError):
            query.plan(epsilon=-1)
    assert calls == [2]  # the failures never reached (or were never kept from) a memo


# -- the folded saturation: statistics beyond ±(2^62 − 1) and nulls on Polars ------------
def test_polars_statistics_saturate_in_the_folded_collect():
    big = pl.DataFrame({"v": [(1 << 62) + 5, -(1 << 63)], "k": [0, 1]})
    lf = engine.to_lazy(big)
    stat = Statistic("s", "sum", expr=nw.col("v").sum())
    one = engine.to_lazy(big.head(1))
    assert engine.compute(one, None, [stat])["s"].tolist() == [_SATURATE]
    keys = pl.DataFrame({"k": [0, 1, 2]})
    out = engine.compute(lf, keys, [stat])["s"]
    assert out.tolist() == [_SATURATE, -_SATURATE, 0]  # saturated, not wrapped; absent: 0


def test_polars_null_statistics_are_zero_in_the_folded_collect():
    nulls = pl.DataFrame({"v": [None, None], "k": [0, 0]}, schema={"v": pl.Int64, "k": pl.Int64})
    lf = engine.to_lazy(nulls)
    stat = Statistic("m", "sum", expr=nw.col("v").max())  # max of nulls is null
    assert engine.compute(lf, None, [stat])["m"].tolist() == [0]
    assert engine.compute(lf, pl.DataFrame({"k": [0]}), [stat])["m"].tolist() == [0]


# -- the mean's grid sum skips a clamp that cannot change a value --------------------------
@pytest.mark.parametrize("bounds", [(0, 100), (0.1, 0.7), (-1e150, 1e150), (-3, 4),
                                    (1e-200, 3e-200), (-7.3, -7.1), (0.5, 2**40 + 0.5)])
@pytest.mark.parametrize("dtype", [pl.Float64, pl.Float32, pl.Int64])
def test_the_mean_grid_sum_equals_the_clamped_one(bounds: Any, dtype: Any):
    """Per record, the mean's grid integer (centred once, not clamped again) equals the one
    clamped again to [lo − m, hi − m]: extremes, NaN, ±inf, nulls, both bounds and the
    floats next to them."""
    import math

    from dpkit.frame import aggregates

    lo, hi = (float(b) for b in bounds)
    near = [lo, hi, math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf),
            (lo + hi) / 2, math.nextafter((lo + hi) / 2, math.inf), 0.0, -0.0, 1e308,
            -1e308, math.inf, -math.inf, math.nan, 5e-324, None]
    if dtype == pl.Int64:
        near = [v if v is None or not math.isfinite(v) or abs(v) > 2**62 else int(v)
                for v in near]
        near = [v for v in near if v is None or isinstance(v, int)] + [2**63 - 1, -2**63]
    frame = pl.DataFrame({"x": pl.Series(near, dtype=dtype, strict=False),
                          "i": range(len(near))})
    schema = engine.to_lazy(frame).collect_schema()
    mean = dp.mean("x", bounds=bounds)
    stat = mean.statistics(schema, "m_")[0]
    lower, upper = aggregates._bounds(mean.bounds, "mean", "x")
    lo_f, hi_f = aggregates.float_down(lower), aggregates.float_up(upper)
    mid = float((lower + upper) / 2)
    clean = aggregates._clean("x", "float" if dtype != pl.Int64 else "int", None, lower, upper)
    centred = clean.cast(nw.Float64).clip(lo_f, hi_f) - mid
    ref, r_lo, r_hi = aggregates._grid_ints(centred, stat.n_bins, lo_f - mid, hi_f - mid)
    assert (stat.lower, stat.upper) == (r_lo, r_hi)
    keys = pl.DataFrame({"i": list(range(len(near)))})
    per_row = [Statistic("a", "sum", expr=stat.expr), Statistic("b", "sum", expr=ref.sum())]
    out = engine.compute(engine.to_lazy(frame), keys, per_row)
    assert out["a"].tolist() == out["b"].tolist()
    assert all(r_lo <= v <= r_hi for v in out["a"].tolist())


# -- the grid statistics' own Polars form (aggregates._ns) ---------------------------------
def _extremes(lo: float, hi: float, dtype: Any) -> list[Any]:
    """Both bounds and their neighbours on each side, the midpoint, ±0, huge values, ±inf,
    NaN, the smallest subnormals and null (integers only, and the Int64 extremes, for Int64)."""
    import math

    near = [lo, hi, math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf),
            math.nextafter(lo, math.inf), math.nextafter(hi, -math.inf),
            (lo + hi) / 2, math.nextafter((lo + hi) / 2, math.inf), 0.0, -0.0, 1e308,
            -1e308, math.inf, -math.inf, math.nan, 5e-324, -5e-324, None, 1.5, -2.5]
    if dtype != pl.Int64:
        return near
    ints = [v if v is None or not math.isfinite(v) or abs(v) > 2**62 else int(v) for v in near]
    return [v for v in ints if v is None or isinstance(v, int)] + [2**63 - 1, -2**63]


_GRID_CASES = [(0, 100), (0.1, 0.7), (-1e150, 1e150), (-3, 4), (1e-200, 3e-200),
               (-7.3, -7.1), (0.5, 2**40 + 0.5), (0, 2**30), (-2**31, 2**31), (10, 20)]


def _both_forms(frame: pl.DataFrame, aggs: list[Any], keys: pl.DataFrame | None
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The exact statistics through the Polars form and through narwhals' translation."""
    lf = engine.to_lazy(frame)
    schema = lf.collect_schema()
    stats = [s for i, agg in enumerate(aggs) for s in agg.statistics(schema, f"a{i}_")]
    native = engine.native_aggregates(lf, stats)
    assert native is not None
    fast = engine.compute(lf, keys, stats, native=native)
    slow = engine.compute(lf, keys, stats)
    return ({k: v.tolist() for k, v in fast.items()}, {k: v.tolist() for k, v in slow.items()})


@pytest.mark.parametrize("bounds", _GRID_CASES)
@pytest.mark.parametrize("dtype", [pl.Float64, pl.Float32, pl.Int64])
@pytest.mark.parametrize("fill", [None, "lower"])
def test_the_polars_form_of_a_grid_statistic_is_narwhals_form(bounds: Any, dtype: Any,
                                                               fill: Any):
    """Per record (each value its own group) and in total: the sum's and the mean's grid
    integers and the mean's count are the same arrays in Polars' own form (NaN dropped by
    the clamp and the count, the unchecked cast) as through narwhals (NaN → null first, the
    checked cast)."""
    lo, hi = (float(b) for b in bounds)
    near = _extremes(lo, hi, dtype)
    frame = pl.DataFrame({"x": pl.Series(near, dtype=dtype, strict=False),
                          "i": range(len(near))})
    value = None if fill is None else bounds[0]
    aggs = [dp.sum("x", bounds=bounds, fill=value), dp.mean("x", bounds=bounds, fill=value)]
    per_row = pl.DataFrame({"i": list(range(len(near)))})
    for keys in (per_row, None):
        fast, slow = _both_forms(frame, aggs, keys)
        assert fast == slow


def test_the_polars_form_test_catches_a_clamp_that_lets_nan_through(
        monkeypatch: pytest.MonkeyPatch):
    """Broken: the Polars form's clamp without its NaN branch (NaN, above every number in
    Polars' order, is clamped to the upper bound and summed). The comparison above fails.
    Grouped (one group per row): an ungrouped release collects the flat form instead
    (tests/test_frame_kernel.py)."""
    from dpkit.frame import aggregates

    real = aggregates._clamp

    def broken(expr: Any, lo: float, hi: float, dtype: str = "Float64") -> Any:
        if isinstance(expr, aggregates._Chunked):  # the flat form's clamp is a clip
            return real(expr, lo, hi, dtype)
        ns = aggregates._ns(expr)
        kind = getattr(ns, dtype)
        return (ns.when(expr < lo).then(ns.lit(lo, kind)).when(expr > hi)
                .then(ns.lit(hi, kind)).otherwise(expr))

    monkeypatch.setattr(aggregates, "_clamp", broken)
    near = _extremes(0.0, 100.0, pl.Float64)
    frame = pl.DataFrame({"x": pl.Series(near, dtype=pl.Float64), "i": range(len(near))})
    per_row = pl.DataFrame({"i": list(range(len(near)))})
    fast, slow = _both_forms(frame, [dp.sum("x", bounds=(0, 100))], per_row)
    assert fast != slow


def test_a_float_sum_at_grid_exponent_zero_never_fails_after_the_debit():
    """Regression: bounds whose grid exponent is 0 (|bound| in [2^30, 2^31)) sent a float
    column down the integer path, whose checked cast of 1e300 (or 0.5 truncated) failed
    after the debit. The float path clamps first: the release succeeds, once debited."""
    import math

    frame = pl.DataFrame({"x": [1.5, 1e300, -math.inf, math.nan, None]})
    s = dp.Session(frame, budget=dp.PureDP(10))
    out = s.query().agg(dp.sum("x", bounds=(0, 2**30))).release(epsilon=1)
    assert out.height == 1 and s.spent == dp.PureDP(1)
    lf = engine.to_lazy(frame)
    stat = dp.sum("x", bounds=(0, 2**30)).statistics(lf.collect_schema(), "s_")[0]
    assert stat.n_bins == 0  # the grid exponent this case is about
    exact = engine.compute(lf, None, [stat])["s_s"].tolist()
    assert exact == [1 + 2**30]  # floor(1.5) + the upper bound; -inf → 0; NaN, null dropped


# -- the key frame's plan-memo SHA-256, taken once per remembered frame ---------------------
def test_a_release_serialises_its_remembered_keys_once(monkeypatch: pytest.MonkeyPatch):
    """Plan and release both key their memos by the keys' SHA-256: a key frame that the
    key memo remembers is serialised once, the exact digest of its serialisation."""
    import hashlib

    from dpkit.frame import query as query_module

    frame = pl.DataFrame({"g": [1, 2, 1], "x": [1.0, 2.0, 3.0]})
    keys = [7, 8, 9, 10]  # a key list no other test uses: remembered here first
    calls: list[int] = []
    real = pl.DataFrame.serialize

    def spy(self: pl.DataFrame, *args: Any, **kwargs: Any) -> Any:
        calls.append(self.height)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "serialize", spy)
    for _ in range(3):
        s = dp.Session(frame, budget=dp.PureDP(10))
        q = s.query().group_by("g", keys=keys).agg(dp.count())
        q.release(epsilon=1)
    assert calls.count(len(keys)) == 1
    sha = query_module._frame_sha256(q.keys)
    assert sha == hashlib.sha256(real(q.keys)).hexdigest()


def test_a_recycled_frame_id_never_returns_another_frames_sha():
    """The memo is keyed by id and checked by identity: a frame that merely has a
    remembered frame's id (ids are reused after collection) is hashed itself. Paired with
    the broken lookup without the identity check, which returns the other frame's SHA."""
    import hashlib

    from dpkit.frame import query as query_module

    remembered = pl.DataFrame({"k": [1, 2]})
    other = pl.DataFrame({"k": [3, 4]})
    fake = (remembered, "digest", "stale")
    query_module._DIGESTS[id(other)] = fake  # as if `other` had reused a remembered id
    try:
        assert query_module._frame_sha256(other) == hashlib.sha256(
            other.serialize()).hexdigest()
        broken = query_module._DIGESTS[id(other)][2]  # what a lookup by id alone returns
        assert broken != query_module._frame_sha256(other)
    finally:
        query_module._DIGESTS.pop(id(other), None)


def test_the_polars_form_test_catches_a_floor_skipped_below_zero(
        monkeypatch: pytest.MonkeyPatch):
    """Broken: the Polars form skips the floor also where values may be negative (its cast
    truncates toward zero: -2.5 → -2, not -3). The per-record comparison fails."""
    from dpkit.frame import aggregates

    real = aggregates._grid_ints

    def broken(expr: Any, k: int, lo: float, hi: float, clamped: bool = False,
               integral: bool = False) -> Any:
        out = real(expr, k, lo, hi, clamped, integral)
        if aggregates._ns(expr) is not pl or integral:
            return out
        inner = expr if clamped else aggregates._clamp(expr.cast(pl.Float64), lo, hi)
        return (aggregates._to_int64(inner * float(2.0 ** -k)), *out[1:])

    monkeypatch.setattr(aggregates, "_grid_ints", broken)
    near = _extremes(-3.0, 4.0, pl.Float64)
    frame = pl.DataFrame({"x": pl.Series(near, dtype=pl.Float64), "i": range(len(near))})
    per_row = pl.DataFrame({"i": list(range(len(near)))})
    fast, slow = _both_forms(frame, [dp.sum("x", bounds=(-3, 4))], per_row)
    assert fast != slow


@pytest.mark.parametrize("grouped", [False, True])
def test_the_polars_form_is_dry_run_before_the_debit(monkeypatch: pytest.MonkeyPatch,
                                                      grouped: bool):
    """A release collects its statistics' Polars forms (grouped) or flat forms (ungrouped
    in memory), not narwhals' translation; the dry run runs those too, so a form that
    cannot run on the schema is refused before the debit (before, only narwhals' form was
    dry-run: the release failed after the debit and its loss stood)."""
    real = engine.native_aggregates

    def broken(lf: Any, stats: Any, unit_column: Any = None) -> Any:
        forms = real(lf, stats, unit_column)
        return None if forms is None else [pl.col("no_such_column").sum().alias(s.key)
                                           for s in stats]

    def no_flat(*_: Any) -> None:
        return None

    monkeypatch.setattr(engine, "native_aggregates", broken)
    monkeypatch.setattr(engine, "_flat_plan", no_flat)  # the Polars form, grouped or not
    SHARED_DRY_RUNS.clear()
    s = dp.Session(pl.DataFrame({"g": [1, 2, 1], "x": [1.0, 2.0, 3.0]}),
                   budget=dp.PureDP(1))
    q = s.query().group_by("g", keys=[1, 2]) if grouped else s.query()
    with pytest.raises(DomainError, match="does not run on this table's schema"):
        q.agg(dp.sum("x", bounds=(0, 5))).release(epsilon=0.5)
    assert s.accountant.spent == dp.PureDP(0)
