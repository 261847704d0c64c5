"""Continual histograms, sums, sliding windows, frame steps, the enforced privacy unit, the
Session entry point and persistence across a restart (issue 20, dpkit.stream.frames).

Statistical test (window variance): 4,000 independent window errors, each a sum of discrete
Gaussian noises with σ ≥ 4 (distributed as a Gaussian to within 1e-100 in total variation per
noise, CKS20), so n·s²/σ² is χ²_n; Laurent & Massart (2000, Lemma 1) with x = 15 bounds each
tail of |s²/σ² − 1| > 13% by e^(−15) = 3.1e-7: a 15% tolerance has FPR ≤ 6.2e-7 < 1e-6. The
broken variant (a shared node counted in both covers, not cancelled) doubles the variance at
the chosen step and is caught by the same comparison.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import date, timedelta
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from cryptography.fernet import Fernet

import dpkit as dp
from dpkit.core.accountant import FilterAccountant
from dpkit.core.measures import ZCDP, PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.ledger import Ledger, LedgerAccountant
from dpkit.stream import ContinualRelease, HorizonExceededError, base, make_counter
from dpkit.stream.base import noise_variance
from dpkit.stream.frames import window_weights


@pytest.fixture
def noiseless(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Zero node noise (tests of the deterministic data side only)."""
    monkeypatch.setattr(base, "draw", lambda noise, size: np.zeros(size, dtype=np.int64))
    yield


def _acct(eps: float = 10.0) -> FilterAccountant:
    return FilterAccountant(PureDP(eps))


@pytest.mark.parametrize("mechanism", ["tree", "smooth", "honaker", "increments"])
@pytest.mark.parametrize("w", [1, 3])
def test_histogram_is_one_counter_per_key_at_the_full_budget(mechanism: str, w: int) -> None:
    acct = FilterAccountant(ZCDP(1))
    hist = ContinualRelease(64, accountant=acct, mechanism=mechanism, rho=1, keys=["a", "b", "c"],
                            by="k", contributions=w)
    single = make_counter(mechanism, 64, rho=1, contributions=w)
    assert acct.spent == ZCDP(1)  # charged once, whatever the number of keys
    for counter in hist.counters:
        assert counter.noise.scale == single.noise.scale
        assert counter.noise.sensitivity == single.noise.sensitivity  # w·Δ·c₂
    # the broken variant, a per-key budget split the wrong way round, would differ
    assert make_counter(mechanism, 64, rho=1, contributions=1).noise.scale != \
        single.noise.scale or w == 1


def test_sum_sensitivity_is_the_largest_bound() -> None:
    s = ContinualRelease(16, accountant=_acct(), mechanism="tree", epsilon=1, value="v",
                         bounds=(-7, 3), time="day")
    assert s.sensitivity == 7
    assert s.counters[0].noise.sensitivity == 7 * 5  # Δ·L, L = 5 levels at T = 16


def test_frames_time_keys_and_clamp(noiseless: None) -> None:
    s = ContinualRelease(5, accountant=_acct(), mechanism="tree", epsilon=1, value="v",
                         bounds=(0, 10), keys=["a", "b"], by="k", time="day")
    f = pl.DataFrame({"day": [1, 1, 1, 2, None, 1], "k": ["a", "b", "z", "a", "a", "a"],
                      "v": [3.0, 50.0, 1.0, 4.0, 2.0, float("nan")]})
    r = s.feed(f)  # day 2 and null days are dropped; 50 → 10; NaN → lower (0); "z" dropped
    assert (r["a"].value, r["b"].value) == (3.0, 10.0)
    r = s.feed(f)  # step 2 reads only the day-2 row
    assert (r["a"].value, r["b"].value) == (7.0, 10.0)
    assert s.feed({"a": 1, "q": 5})["a"].value == 8.0
    with pytest.raises(DomainError):
        s.feed(1)  # which key? refused before the step advances
    assert s.t == 3


def test_dates_and_schema_checked_before_the_step(noiseless: None) -> None:
    start = date(2020, 3, 1)
    s = ContinualRelease(3, accountant=_acct(), mechanism="smooth", epsilon=1, time="d",
                         origin=start, every=timedelta(days=7))
    f = pl.DataFrame({"d": [start, start + timedelta(days=6), start + timedelta(days=7)]})
    assert s.feed(f).value == 2.0
    with pytest.raises(DomainError):
        s.feed(pl.DataFrame({"x": [1]}))
    with pytest.raises(DomainError):
        s.feed(pl.DataFrame({"d": [1]}))  # an int column for a date grid
    assert s.t == 1  # nothing advanced
    assert s.feed(f).value == 3.0
    s.feed(0)
    with pytest.raises(HorizonExceededError):
        s.feed(f)


def test_unit_column_enforces_w_over_the_whole_stream(noiseless: None) -> None:
    s = ContinualRelease(4, accountant=_acct(), mechanism="tree", epsilon=1, unit="u",
                         contributions=2, keys=[1, 2], by="k")
    f = pl.DataFrame({"u": ["x", "x", "x", "y"], "k": [1, 2, 1, 1]})
    r = s.feed(f)
    assert (r[1].value, r[2].value) == (2.0, 1.0)  # x's third event dropped
    r = s.feed(f)  # x has spent w = 2 events: only y's second counts
    assert (r[1].value, r[2].value) == (3.0, 1.0)
    r = s.feed(f)  # y too
    assert (r[1].value, r[2].value) == (3.0, 1.0)
    # without the column, w is only declared: every row counts (the old behaviour)
    d = ContinualRelease(4, accountant=_acct(), mechanism="tree", epsilon=1, contributions=2,
                         keys=[1, 2], by="k")
    assert d.feed(f)[1].value == 3.0


def test_units_are_counted_by_their_canonical_value(noiseless: None) -> None:
    """Finding 7: the stream keyed units by ``repr``, so 0.0 and -0.0 (one unit on the batch
    side) were two, and a unit's sensitivity doubled."""
    s = ContinualRelease(3, accountant=_acct(), mechanism="tree", epsilon=1, unit="u")
    f = pl.DataFrame({"u": [0.0, -0.0, float("nan"), float("nan"), None, None]},
                     schema={"u": pl.Float64})
    assert s.feed(f).value == 3.0  # 0.0 = -0.0, one NaN unit, one null unit (as group_by)
    assert s.feed(pl.DataFrame({"u": [-0.0]}, schema={"u": pl.Float64})).value == 3.0


def test_a_step_the_batch_side_refuses_is_refused_before_the_debit(tmp_path: Path) -> None:
    """Found by the issue-30 fuzzer: ``query.continual`` skipped the query's plan-time step
    checks (here: a step rewriting the privacy unit column), was debited, then every step
    failed."""
    s = dp.Session(pl.DataFrame({"t": [1, 2], "id": [1, 2], "g": [5, 6]}),
                   dp.PrivacyUnit.by("id", 1), dp.PureDP(10),
                   ledger=Ledger(tmp_path / "l.sqlite"), dataset="d")
    q = s.query().with_columns(id=pl.col("g"))  # refused by a batch release
    with pytest.raises(DomainError):
        q.continual(dp.count(), time="t", horizon=2, epsilon=1)
    assert s.spent == dp.PureDP(0)


def test_an_unbounded_date_stream_must_hold_its_grid(tmp_path: Path) -> None:
    """Found by the issue-30 fuzzer: an unbounded stream with an origin near 9999 was debited,
    then failed at the calendar's end."""
    acct = _acct()
    with pytest.raises(DomainError, match="unbounded"):
        ContinualRelease(None, accountant=acct, mechanism="hybrid", epsilon=1, time="d",
                         origin=date(9900, 1, 1))
    assert acct.spent == PureDP(0)
    ContinualRelease(None, accountant=acct, mechanism="hybrid", epsilon=1, time="d",
                     origin=date(2024, 1, 1))


def test_window_counts(noiseless: None) -> None:
    s = ContinualRelease(20, accountant=_acct(), mechanism="honaker", epsilon=1, window=3)
    xs = [5, 1, 0, 7, 2, 2, 9]
    got = [s.feed(x).windows[None].value for x in xs]
    want = [sum(xs[max(0, i - 2):i + 1]) for i in range(len(xs))]
    assert got == want


def _window_errors(counter: object, n: int, t: int, width: int) -> np.ndarray:
    out = np.empty(n)
    for i in range(n):
        raw = counter.release(np.zeros(t, dtype=np.int64))  # type: ignore[attr-defined]
        out[i] = raw[t - 1] - raw[t - 1 - width]
    return out


@pytest.mark.parametrize("mechanism", ["tree", "increments", "factorization"])
def test_window_variance_is_the_closed_form(mechanism: str) -> None:
    t, width = 7, 3  # cover(7) and cover(4) share the node [1, 4]
    counter = make_counter(mechanism, 8, rho=Fraction(1, 50))
    assert float(counter.noise.scale) >= 4
    sq, _ = window_weights(counter, t, width)
    exact = sq / float(counter.noise.scale) ** 2 * noise_variance(counter.noise)
    measured = float(np.mean(_window_errors(counter, 4000, t, width) ** 2))
    assert abs(measured / exact - 1) < 0.15
    if mechanism == "tree":  # the broken variant: the shared node not cancelled
        broken = (counter.weights(np.array([t]))[0][0] + counter.weights(np.array([4]))[0][0]
                  ) * noise_variance(counter.noise)
        assert broken == 2 * exact
        assert abs(measured / broken - 1) > 0.15


def test_the_default_window_bound_covers_the_exact_terms() -> None:
    for mechanism in ("tree", "honaker", "smooth"):
        c = make_counter(mechanism, 64, rho=1)
        for t in (5, 17, 40):
            exact = c.window_terms(t, t - 4)[0]
            bound = base.Counter.window_terms(c, t, t - 4)[0]
            assert bound[0] >= exact[0] and bound[2] >= exact[2] > 0


def test_session_entry_point_charges_once_and_enforces_the_unit(noiseless: None) -> None:
    frame = pl.DataFrame({"user": ["a", "a", "a", "b", "b"], "day": [1, 1, 2, 2, 3],
                          "amount": [5, 50, 3, 2, -1]})
    session = dp.Session(frame, dp.PrivacyUnit.by("user", max_rows=2), dp.PureDP(1))
    counts = session.query().continual(dp.count(), time="day", horizon=4, mechanism="tree",
                                       epsilon=0.5)
    assert session.spent == PureDP(0.5)
    assert counts.counters[0].unit.contributions == 2
    assert [counts.advance().value for _ in range(3)] == [2.0, 3.0, 4.0]  # a's 3rd dropped
    sums = session.query().filter(pl.col("amount") > 0).continual(
        dp.sum("amount", bounds=(0, 10)), time="day", horizon=4, mechanism="tree", epsilon=0.5)
    assert sums.sensitivity == 10 and session.spent == PureDP(1)
    assert [sums.advance().value for _ in range(2)] == [15.0, 17.0]  # 50 → 10; a: 3rd row dropped
    with pytest.raises(BudgetExceededError):
        session.query().continual(dp.count(), time="day", horizon=4, epsilon=0.5)
    with pytest.raises(DomainError):
        session.query().continual(dp.mean("amount", (0, 1)), time="day", horizon=4,
                                  epsilon=0.1)


_RESTORE = """
import sys, json
from dpkit.ledger import Ledger, LedgerAccountant
from dpkit.stream import ContinualRelease
path, key, ledger = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
acct = LedgerAccountant(Ledger(ledger), "d")
s = ContinualRelease.restore(path, key, acct)
before = str(acct.spent)
r = s.feed({"a": 1})
s.save(path, key)
print(json.dumps({"t": r.t, "spent": before, "after": str(acct.spent)}))
"""


def test_a_stream_survives_a_process_restart(tmp_path: Path) -> None:
    ledger_path = str(tmp_path / "l.db")
    ledger = Ledger(ledger_path)
    ledger.register("d", PureDP(2))
    acct = LedgerAccountant(ledger, "d")
    key = Fernet.generate_key()
    s = ContinualRelease(16, accountant=acct, mechanism="tree", epsilon=1, keys=["a", "b"],
                         by="k", unit="u", contributions=3, time="day")
    s.feed(pl.DataFrame({"day": [1, 1], "k": ["a", "b"], "u": ["secret-unit", "x"]}))
    s.feed({"a": 123457})
    state_file = tmp_path / "stream.state"
    s.save(state_file, key)
    blob = state_file.read_bytes()
    assert b"secret-unit" not in blob and b"123457" not in blob and b"acc" not in blob
    assert state_file.stat().st_mode & 0o077 == 0
    ledger.dispose()
    out = subprocess.run([sys.executable, "-c", _RESTORE, str(state_file), key.decode(),
                          ledger_path], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got == {"t": 3, "spent": str(PureDP(1)), "after": str(PureDP(1))}  # no new debit
    again = ContinualRelease.restore(state_file, key, LedgerAccountant(Ledger(ledger_path), "d"))
    assert again.t == 3 and again.state["units"] == {"'secret-unit'": 1, "'x'": 1}
    # a wrong key, a changed file, a ledger that did not pay: refused
    with pytest.raises(DomainError):
        ContinualRelease.restore(state_file, Fernet.generate_key(), acct)
    bad = bytearray(blob)
    bad[40] ^= 1
    (tmp_path / "bad").write_bytes(bytes(bad))
    with pytest.raises(DomainError):
        ContinualRelease.restore(tmp_path / "bad", key, acct)
    other = Ledger(str(tmp_path / "other.db"))
    other.register("d", PureDP(2))
    with pytest.raises(DomainError):
        ContinualRelease.restore(state_file, key, LedgerAccountant(other, "d"))
    with pytest.raises(DomainError):
        ContinualRelease.restore(state_file, key, _acct())


def test_a_session_stream_restores_on_its_query(tmp_path: Path, noiseless: None) -> None:
    frame = pl.DataFrame({"user": ["a", "b", "c"], "day": [1, 2, 2]})
    ledger = str(tmp_path / "l.db")
    session = dp.Session(frame, dp.PrivacyUnit.by("user", max_rows=1), dp.ZCDP(1),
                         ledger=ledger, dataset="d")
    key = Fernet.generate_key()
    stream = session.query().continual(dp.count(), time="day", horizon=5, rho=0.5)
    assert stream.advance().value == 1.0
    stream.save(tmp_path / "s", key)
    later = dp.Session(frame, dp.PrivacyUnit.by("user", max_rows=1), dp.ZCDP(1),
                       ledger=ledger, dataset="d")  # a new process: the spend is the ledger's
    assert later.spent == ZCDP(0.5)
    again = later.query().continual.restore(tmp_path / "s", key)
    assert again.advance().value == 3.0 and later.spent == ZCDP(0.5)


def _increments(frames: list[pl.DataFrame], unit: str | None) -> np.ndarray:
    s = ContinualRelease(len(frames), accountant=_acct(), mechanism="increments", epsilon=1,
                         value="v", bounds=(-3, 5), keys=[0, 1, 2], by="k", unit=unit,
                         contributions=2, time="day")
    out = []
    for f in frames:
        r = s.feed(f)
        out.append([r[k].raw for k in (0, 1, 2)])
    return np.diff(np.array(out), axis=0, prepend=0.0)


def test_removing_a_unit_moves_the_increments_by_at_most_w_delta(noiseless: None) -> None:
    """The sensitivity the calibration assumes (‖v‖₁ ≤ w·Δ over all keys and steps), checked
    on neighbouring streams: one unit with many rows removed. Without the unit column (the
    declared-only w) the same pair exceeds it: the attack the enforcement stops."""
    gen = np.random.default_rng(7)  # data, not noise
    frames = [pl.DataFrame({"day": np.full(30, d + 1), "k": gen.integers(0, 3, 30),
                            "u": gen.integers(0, 6, 30), "v": gen.integers(-9, 9, 30)})
              for d in range(6)]
    for victim in range(6):
        without = [f.filter(pl.col("u") != victim) for f in frames]
        diff = np.abs(_increments(frames, "u") - _increments(without, "u")).sum()
        assert diff <= 2 * 5
    loud = np.abs(_increments(frames, None) - _increments(
        [f.filter(pl.col("u") != 0) for f in frames], None)).sum()
    assert loud > 2 * 5


def test_the_time_grid_ends_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpkit.stream import frames

    with pytest.raises(DomainError):  # a horizon past the year 9999: refused at plan time
        ContinualRelease(5, accountant=_acct(), mechanism="tree", epsilon=1, time="d",
                         origin=date(9999, 12, 29))
    monkeypatch.setattr(frames, "UNBOUNDED_STEPS", 1)  # (the real rule refuses this origin)
    s = ContinualRelease(None, accountant=_acct(), mechanism="hybrid", epsilon=1, time="d",
                         origin=date(9999, 12, 30))
    frame = pl.DataFrame({"d": [date(9999, 12, 30)]})
    assert s.feed(frame).t == 1
    with pytest.raises(HorizonExceededError):  # an unbounded stream stops where time does
        s.feed(frame)
    assert s.t == 1
