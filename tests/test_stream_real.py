"""Real-valued continual sums (issue 20; dpkit.stream.frames): values floored to a grid of
width 2^k, the rounding charged to the sensitivity (Δ in grid steps is the exact sensitivity
of the floored values), releases multiplied back by 2^k."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cryptography.fernet import Fernet

import dpkit as dp
from dpkit.core.accountant import FilterAccountant
from dpkit.core.measures import ZCDP
from dpkit.errors import DomainError
from dpkit.ledger import Ledger, LedgerAccountant
from dpkit.stream import ContinualRelease, base, make_counter


@pytest.fixture
def noiseless(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(base, "draw", lambda noise, size: np.zeros(size, dtype=np.int64))
    yield


def _sum(bounds: tuple, **kw: object) -> ContinualRelease:
    return ContinualRelease(16, accountant=FilterAccountant(ZCDP(10)), mechanism="tree",
                            rho=1, value="v", bounds=bounds, time="day", **kw)


def _floored(s: ContinualRelease, v: float) -> int:
    return int(s._increments(pl.DataFrame({"day": [s.t + 1], "v": [v]}))[0])


def test_the_grid_and_the_sensitivity() -> None:
    s = _sum(("-1/3", 2.5))
    top = Fraction(5, 2)
    k = math.floor(math.log2(top)) - 16
    assert s.grid == k == -15
    lo, hi = math.floor(Fraction(-1, 3) * 2**-k), math.floor(top * 2**-k)
    assert s.grid_range == (lo, hi) and s.sensitivity == math.ceil(top * 2**-k)
    same = make_counter("tree", 16, rho=1, sensitivity=s.sensitivity)
    assert s.counters[0].noise.scale == same.noise.scale  # calibrated to Δ grid steps
    # every floored value lands in [lo, hi] ⊆ [−Δ, Δ], the bounds on its ends: one row moves
    # a step's total by at most Δ
    rng = np.random.default_rng(3)  # test inputs only
    for v in rng.uniform(-2, 4, 300).tolist() + [-1 / 3, 2.5, -0.3333333, 1e300, -1e300]:
        assert lo <= _floored(s, v) <= hi and max(abs(lo), abs(hi)) <= s.sensitivity
    assert _floored(s, 2.5) == hi and _floored(s, -1 / 3) == lo
    low = _sum(("-7/3", 1))  # a negative bound: |⌊lower·2^−k⌋| is the ceiling
    assert low.sensitivity == -_floored(low, -7 / 3) > Fraction(7, 3) * 2**-low.grid
    # step totals fed as numbers: one value of 1/3 moves the floored total by ⌈(1/3)·2^−k⌉;
    # the broken variant Δ = max|⌊bound·2^−k⌋| would miss that grid step
    third = _sum((0, "1/3"))
    unit = 2.0**-third.grid
    b = 0.67 / unit
    moved = third._scaled(b + 1 / 3) - third._scaled(b)
    assert moved == third.sensitivity == math.floor(Fraction(1, 3) * unit) + 1


def test_values_sum_on_the_grid(noiseless: None) -> None:
    s = _sum((0, 2.5), window=2)
    got = s.feed(pl.DataFrame({"day": [1] * 4, "v": [1.25, 3.0, None, float("nan")]}))
    assert got.value == 3.75  # 3.0 clamped to 2.5; null and NaN are the lower bound
    rng = np.random.default_rng(5)  # test inputs only
    vals = rng.uniform(0, 2.5, 50)
    got = s.feed(pl.DataFrame({"day": [2] * 50, "v": vals}))
    err = got.value - (3.75 + vals.sum())
    assert -50 * 2.0**s.grid <= err <= 0  # flooring: each value moves down by < 2^k
    assert got.windows[None].value == pytest.approx(got.value, abs=1e-12)
    assert s.feed(0.75).value == pytest.approx(got.value + 0.75)  # a total, floored too


def test_intervals_are_scaled_back() -> None:
    s = _sum((0, 2.5))
    r = s.feed(1.0)[None]
    h = float(s.counters[0].half_widths(np.array([1]), 0.05)[0]) * 2.0**s.grid
    assert r.half_width == pytest.approx(h) and r.high == pytest.approx(r.raw + h)
    assert r.low == pytest.approx(max(r.raw - h, 0.0))  # bounds ≥ 0: cut at 0 (issue 33)
    # σ in value units is Δ·2^k·√L/√(2ρ): within a grid step of the unrounded 2.5·√L/√2
    sigma = float(s.counters[0].noise.scale) * 2.0**s.grid
    assert 2.5 * math.sqrt(5 / 2) <= sigma <= (2.5 + 2.0**s.grid) * math.sqrt(5 / 2) * 1.001


def test_plan_time_errors() -> None:
    for bad in ({"bounds": (0.0, 0.0)}, {"bounds": (0, 1), "grid_bits": 25},
                {"bounds": (2, 1.5)}, {"bounds": ("x", 1)}, {"bounds": (0, 2**40)}):
        with pytest.raises(DomainError):
            ContinualRelease(4, accountant=FilterAccountant(ZCDP(1)), rho=1, value="v",
                             **bad)  # type: ignore[arg-type]
    with pytest.raises(DomainError):
        ContinualRelease(4, accountant=FilterAccountant(ZCDP(1)), rho=1, grid_bits=8)
    forced = ContinualRelease(4, accountant=FilterAccountant(ZCDP(1)), rho=1, value="v",
                              bounds=(0, 10), grid_bits=4)
    assert forced.grid == 3 - 4 and forced.sensitivity == 10 * 2


def test_a_real_valued_stream_restores(tmp_path: Path, noiseless: None) -> None:
    ledger = Ledger(str(tmp_path / "l.db"))
    ledger.register("d", ZCDP(1))
    key = Fernet.generate_key()
    s = ContinualRelease(8, accountant=LedgerAccountant(ledger, "d"), mechanism="smooth",
                         rho=0.5, value="v", bounds=(-0.5, 0.75))
    s.feed(0.5)
    s.save(tmp_path / "s", key)
    again = ContinualRelease.restore(tmp_path / "s", key, LedgerAccountant(ledger, "d"))
    assert again.grid == s.grid and again.sensitivity == s.sensitivity
    assert again.feed(-0.25).value == 0.25


def test_the_session_entry_point_takes_real_bounds(noiseless: None) -> None:
    frame = pl.DataFrame({"day": [1, 1, 2], "price": [0.25, 1.5, 0.125]})
    session = dp.Session(frame, dp.PrivacyUnit.rows(), dp.ZCDP(1))
    s = session.query().continual(dp.sum("price", (0, 2.0)), time="day", horizon=4, rho=0.5)
    assert s.grid == -15 and [s.advance().value for _ in range(2)] == [1.75, 1.875]


def test_a_real_valued_series_in_batch_and_stream(noiseless: None) -> None:
    from dpkit.stream import Stream, release_prefix_sums

    x = np.array([0.5, 2.25, float("nan"), 7.0, -1.0, 1.125])
    acct = FilterAccountant(ZCDP(10))
    got = release_prefix_sums(x, accountant=acct, mechanism="honaker", rho=1,
                              sensitivity=2.5, lower=0, upper=3, grid_bits=12)
    want = np.cumsum([0.5, 2.25, 0.0, 3.0, 0.0, 1.125])  # NaN → lower; clamped to [0, 3]
    assert np.allclose(got.values, want)
    k = 1 - 12  # ⌊log₂ 2.5⌋ − 12
    counter = make_counter("honaker", 6, rho=1, sensitivity=math.ceil(Fraction(5, 2) * 2**-k))
    assert got.variance == pytest.approx(counter.variance(np.arange(1, 7)) * 4.0**k)
    s = Stream(None, accountant=acct, mechanism="hybrid", rho=1, sensitivity=2.5, lower=-1,
               upper=3, grid_bits=12)
    assert [s.feed(v).value for v in (0.5, -3.0, "x", 1.75)] == [0.5, -0.5, -1.5, 0.25]
    # a real total moved by Δ = 2.5 moves the floored total by at most ⌈2.5·2^−k⌉
    assert s.grid is not None and s.grid.sensitivity == 5120  # 2.5·2^11, an integer
    b = 0.9 * 2.0**k
    assert s.grid.one(b + 2.5) - s.grid.one(b) == s.grid.sensitivity
    with pytest.raises(DomainError):
        Stream(4, accountant=acct, mechanism="tree", rho=1, lower=2, upper=1.5, grid_bits=8)
