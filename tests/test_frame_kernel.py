"""The flat form of the grid statistics (issue 35): an ungrouped release over an in-memory
Polars table takes the sums of ``sum`` and ``mean`` (and the mean's count) from one numpy
kernel call over chunks (``aggregates._grid_stats``) instead of the Polars form. The kernel
must give the very integers of the Polars form and of the narwhals form on every input:
NaN and nulls dropped, ±inf to the bounds, -0.0, subnormals, values at and beyond the
bounds, integer and boolean columns (the integer path of ``_grid_ints`` and the float path),
``fill=``, several Polars chunks and kernel chunks. Property tests (Hypothesis) compare the
three forms; two deliberately broken kernels (no floor; NaN clamped to a bound instead of
dropped) are caught by the same comparison. Deterministic: no noise is drawn.
"""

from __future__ import annotations

import math
from typing import Any

import narwhals as nw
import numpy as np
import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dpkit as dp
from dpkit.errors import BoundsError
from dpkit.frame import aggregates, engine


def _three_forms(frame: pl.DataFrame, aggs: list[Any]
                 ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """The exact statistics of ``aggs`` over ``frame`` (one group): the flat form (the
    kernel), the Polars form and the narwhals form, each as {key: int}. A statistic whose
    grid values may exceed ±2^31 has no flat form (the kernel's float sums would not be
    exact): then the Polars form stands in for the flat one."""
    lf = engine.to_lazy(frame)
    schema = lf.collect_schema()
    stats = [s for i, agg in enumerate(aggs) for s in agg.statistics(schema, f"a{i}_")]
    native = engine.native_aggregates(lf, stats)
    assert native is not None
    row = nw.to_native(lf).select(native).collect().row(0, named=True)
    polars = {k: int(v) for k, v in row.items()}
    narwhals = {k: int(v[0]) for k, v in engine.compute(lf, None, stats).items()}
    released = {k: int(v[0]) for k, v in engine.compute(lf, None, stats, native=native).items()}
    plan = engine._flat_plan(lf, stats)
    if plan is None:  # only where the grid's range exceeds ±2^31
        assert any(max(-s.lower, s.upper) > 2**31 for s in stats if s.kind == "sum")
        return released, polars, narwhals
    flat = {k: int(v) for k, v in plan.collect(engine="in-memory").row(0, named=True).items()}
    assert released == flat  # what a release computes: the flat form
    return flat, polars, narwhals


def _check(values: list[Any], dtype: Any, bounds: tuple[Any, Any], fill: Any) -> None:
    """The three forms agree on ``values`` (a ``dtype`` column) for a sum, a mean and a
    count; each value alone, too (so a wrong value cannot hide in a sum)."""
    aggs = [dp.sum("x", bounds=bounds, fill=fill), dp.mean("x", bounds=bounds, fill=fill),
            dp.count()]
    try:
        for part in [values, *([v] for v in values[:8])]:
            frame = pl.DataFrame({"x": pl.Series(part, dtype=dtype, strict=False)})
            flat, polars, narwhals = _three_forms(frame, aggs)
            assert flat == polars == narwhals, (part, flat, polars, narwhals)
    except BoundsError:  # bounds or fill the plan refuses: not this test's subject
        assume(False)


_SPECIAL = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, math.inf, -math.inf,
            math.nan, 1e308, -1e308, None, 0.5, -0.5, 1.5, 2.0**31, -2.0**31, 2.0**53 + 2,
            100.0, 99.99999999999999, 1e-200, 3e-200, 2.0**40 + 0.5]
_BOUNDS = [(0, 100), (0.1, 0.7), (-1e150, 1e150), (-3, 4), (1e-200, 3e-200), (-7.3, -7.1),
           (0.5, 2**40 + 0.5), (0, 2**30), (-2**31, 2**31), (10, 20), (0, 0), (5, 5),
           (-1, 0), (0, 1)]
_FLOATS = st.one_of(st.sampled_from(_SPECIAL),
                    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True))
_INT_RANGES = {pl.Int64: (-2**63, 2**63 - 1), pl.Int32: (-2**31, 2**31 - 1),
               pl.UInt32: (0, 2**32 - 1), pl.Int8: (-128, 127),
               pl.UInt64: (0, 2**64 - 1)}  # summed as floats (_SAFE_INTS)


@st.composite
def _bounds(draw: Any) -> tuple[Any, Any]:
    pick = draw(st.integers(0, 2))
    if pick == 0:
        return draw(st.sampled_from(_BOUNDS))
    if pick == 1:
        a, b = draw(st.integers(-2**40, 2**40)), draw(st.integers(-2**40, 2**40))
    else:
        finite = st.floats(-1e300, 1e300, allow_subnormal=False)
        a, b = draw(finite), draw(finite)
    return (min(a, b), max(a, b))


def _fill(draw: Any, bounds: tuple[Any, Any], ints: tuple[int, int] | None = None) -> Any:
    """None, or a bound (an integer column, ``ints`` its range, is filled with integers of
    its type only)."""
    choices = [None] + [b for b in bounds if ints is None or (
        float(b).is_integer() and ints[0] <= b <= ints[1])]
    fill = draw(st.sampled_from(choices))
    return int(fill) if ints is not None and fill is not None else fill


@settings(max_examples=150, deadline=None)
@given(data=st.data(), dtype=st.sampled_from([pl.Float64, pl.Float32]))
def test_the_kernel_gives_the_integers_of_both_forms_on_float_columns(data: Any, dtype: Any):
    values = data.draw(st.lists(_FLOATS, max_size=40))
    bounds = data.draw(_bounds())
    _check(values, dtype, bounds, _fill(data.draw, bounds))


@settings(max_examples=150, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(list(_INT_RANGES)))
def test_the_kernel_gives_the_integers_of_both_forms_on_integer_columns(data: Any, dtype: Any):
    """Integer bounds within ±2^31 take the integer path of ``_grid_ints`` (k = 0, or
    k = −1 for a mean with a half-integer centre); others, and UInt64, the float path."""
    lo, hi = _INT_RANGES[dtype]
    ints = st.one_of(st.sampled_from([lo, hi, 0, -1, 1, 2**31, -2**31, 2**53 + 1]),
                     st.integers(lo, hi))
    values = [v if v is None or lo <= v <= hi else None
              for v in data.draw(st.lists(st.one_of(ints, st.none()), max_size=40))]
    bounds = data.draw(_bounds())
    _check(values, dtype, bounds, _fill(data.draw, bounds, (lo, hi)))


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.one_of(st.booleans(), st.none()), max_size=20),
       bounds=st.sampled_from([(0, 1), (-3, 4), (0.1, 0.7), (0, 0)]))
def test_the_kernel_gives_the_integers_of_both_forms_on_boolean_columns(
        values: list[Any], bounds: tuple[Any, Any]):
    _check(values, pl.Boolean, bounds, None)


def _chunked_frame() -> pl.DataFrame:
    """~3 × 2^16 values in four Polars chunks whose edges are not the kernel's (2^16): the
    special values tiled, so that each kernel chunk and each Polars chunk holds some."""
    special = [v for v in _SPECIAL]
    parts = []
    for size in (70_001, 65_536, 3, 61_000):
        tiled = (special * (size // len(special) + 1))[:size]
        parts.append(pl.DataFrame({"x": pl.Series(tiled, dtype=pl.Float64)}))
    return pl.concat(parts, rechunk=False)


@pytest.mark.parametrize("bounds", _BOUNDS)
@pytest.mark.parametrize("fill", [None, "lower"])
def test_the_kernel_over_several_chunks_gives_the_integers_of_both_forms(bounds: Any,
                                                                          fill: Any):
    frame = _chunked_frame()
    assert frame["x"].n_chunks() == 4
    value = None if fill is None else bounds[0]
    aggs = [dp.sum("x", bounds=bounds, fill=value), dp.mean("x", bounds=bounds, fill=value)]
    flat, polars, narwhals = _three_forms(frame, aggs)
    assert flat == polars == narwhals


class _NumpyWithout:
    """numpy with one operation of the kernel changed (a broken variant)."""

    def __init__(self, **changed: Any) -> None:
        self._changed = changed

    def __getattr__(self, name: str) -> Any:
        return self._changed.get(name, getattr(np, name))


def _no_floor(b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return b  # the scaled value kept: its integer part is then taken by the cast


def _never_nan(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    out[...] = False
    return out


_EXAMPLES = [0.25, -0.0, 99.99999999999999, 5e-324, math.nan, None, -math.inf, 1e308, 7.3]


@pytest.mark.parametrize("broken", [dict(floor=_no_floor),
                                    dict(isnan=_never_nan)],
                         ids=["no floor", "NaN clamped, not dropped"])
def test_the_comparison_catches_a_broken_kernel(monkeypatch: pytest.MonkeyPatch,
                                                broken: dict[str, Any]):
    """A kernel that skips the floor, or leaves NaN clamped to the upper bound instead of
    dropping it (it never finds a NaN to take out), gives other integers than the Polars
    form: the check above fails on it (on the float column, on the same kind of values
    the property tests draw)."""
    _check(_EXAMPLES, pl.Float64, (0, 100), None)  # the real kernel passes
    _check(_EXAMPLES, pl.Float64, (-7.3, -7.1), None)
    monkeypatch.setattr(aggregates, "np", _NumpyWithout(**broken))
    failed = 0
    for bounds in ((0, 100), (-7.3, -7.1)):
        try:
            _check(_EXAMPLES, pl.Float64, bounds, None)
        except AssertionError:
            failed += 1
    assert failed == 2


def test_an_ungrouped_release_in_memory_takes_the_kernel_and_a_grouped_one_does_not(
        monkeypatch: pytest.MonkeyPatch):
    """The flat form is collected only without a group-by, over a table in memory, and
    only when every statistic has one (a variance has none: the Polars forms then)."""
    calls: list[int] = []
    real = aggregates._grid_stats

    def spy(series: pl.Series, **kw: Any) -> dict[str, int]:
        calls.append(len(series))
        return real(series, **kw)

    monkeypatch.setattr(aggregates, "_grid_stats", spy)
    frame = pl.DataFrame({"g": ["a", "b", "a", "b"], "x": [1.0, math.nan, 3.0, None]})
    s = dp.Session(frame, budget=dp.PureDP(10))
    s.query().agg(dp.mean("x", bounds=(0, 4)), dp.count()).release(epsilon=1)
    rows = [n for n in calls if n]  # the dry run, on zero rows, may be remembered
    assert rows == [4]  # one call for the mean's sum and count
    s.query().group_by("g", keys=["a", "b"]).agg(dp.mean("x", bounds=(0, 4))).release(epsilon=1)
    s.query().agg(dp.mean("x", bounds=(0, 4)), dp.variance("x", bounds=(0, 4))).release(
        epsilon=1)
    assert [n for n in calls if n] == [4]
    lf = engine.to_lazy(frame)
    stats = dp.sum("x", bounds=(0, 4)).statistics(lf.collect_schema(), "s_")
    out = engine.compute(lf, None, stats, streaming=True,
                         native=engine.native_aggregates(lf, stats))
    assert [n for n in calls if n] == [4]
    assert out["s_s"].tolist() == [4 * 2**28]  # the Polars form, streamed
    del calls[:]
    empty = engine.to_lazy(frame.clear())
    engine.dry_run(empty, None, stats, None,
                   native=lambda: engine.native_aggregates(empty, stats))
    assert calls == [0]  # before the debit, the kernel runs on zero rows
