"""The grey-box fuzzer on the new surfaces (issue 30): hosted and library continual releases,
top-k and count_distinct(column) requests (in the JSON grammar of tests/test_fuzz.py), SQL
text (issue 32; tests/fuzz_sql.py), and every ``dpkit.apps`` entry point that takes analyst
input, checking the properties of tests/test_fuzz.py: (a) declared sensitivity on
neighbours (the streams' exact increments; the first calibrated-noise input of an
application; the session harness for session-based applications), (b) nothing fails after
the debit, (c) no data value in an error text, an HTTP body or a log line.

CI runs a fixed set of cases (derandomised); ``pytest -m fuzz_long tests/test_fuzz_surfaces.py``
runs ``$DPKIT_FUZZ_EXAMPLES`` cases of the application targets and the others in proportion
(the same environment variables as tests/test_fuzz.py).

The findings of its first long run are regression tests at the end of this file.
"""

from __future__ import annotations

import itertools
import logging
from datetime import datetime
from fractions import Fraction
from typing import Any

import polars as pl
import pytest
from cryptography.fernet import Fernet
from fuzz_apps import HOLDOUT, SMOOTH, TARGETS, Target, compare_noise, run_app
from fuzz_strategies import SECRET_FLOAT, measures, neighbours, units
from fuzz_streams import (
    KEY_ENV,
    run_library,
    run_server,
    stream_frame,
    stream_row,
    stream_spec,
    stream_violations,
)
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import LONG, Tally, fuzz_settings

import dpkit as dp
from dpkit.errors import DomainError
from dpkit.ledger import Ledger
from dpkit.stream.frames import ContinualRelease

CI = {"apps": 600, "holdout": 150, "stream_library": 400, "stream_server": 40, "sql": 200}


def examples(name: str) -> list[object]:
    """CI count, and the long run's (``LONG`` × the CI share of the application targets)."""
    return [pytest.param(CI[name], id="ci"),
            pytest.param(max(CI[name], LONG * CI[name] // CI["apps"]), id="long",
                         marks=pytest.mark.fuzz_long)]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    led = Ledger(tmp_path_factory.mktemp("fuzz-streams") / "ledger.sqlite")
    yield led
    led.dispose()


# -- streams ---------------------------------------------------------------------------------
def draw_stream_case(data: st.DataObject) -> tuple[Any, str, Any, dict[str, Any]]:
    """A privacy unit, a dataset measure, two neighbouring event tables and a stream request."""
    unit, measure = data.draw(units, label="unit"), data.draw(measures, label="measure")
    pair = data.draw(neighbours(unit, 6, stream_row, stream_frame), label="tables")
    return unit, measure, pair, data.draw(stream_spec(measure), label="stream")


@pytest.mark.parametrize("n", examples("stream_library"))
def test_fuzz_streams_in_library_mode(n, ledger, tmp_path):
    """``query.continual(…)`` on random neighbouring tables: open, every step (saved), a
    stale restore (refused), a restore and one more step."""
    key, counter = Fernet.generate_key(), itertools.count()

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        unit, measure, pair, spec = draw_stream_case(data)
        runs = []
        for table in (pair.small, pair.large):
            directory = tmp_path / f"c{next(counter)}"
            directory.mkdir()
            runs.append(run_library(table, unit, measure, spec, ledger, directory, key))
        (small, inc_s), (large, inc_l) = runs
        small.problems += stream_violations(inc_s, inc_l)
        tally.check(small, large, (unit, measure, pair, spec))

    tally = Tally("streams in library mode")
    case()
    tally.finish()


@pytest.mark.parametrize("n", examples("stream_server"))
def test_fuzz_streams_over_http(n, tmp_path, monkeypatch):
    """The stream API over HTTP on two served neighbours: open, next, the history, another
    worker's restore, next to the horizon; the same statuses on both."""
    monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())
    counter = itertools.count()

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        unit, measure, pair, spec = draw_stream_case(data)
        directory = tmp_path / f"case{next(counter)}"
        directory.mkdir()
        small, large, (inc_s, inc_l) = run_server(directory, pair, unit, measure, spec)
        if small.statuses != large.statuses and not (small.problems or large.problems):
            small.problems.append(f"(b) the statuses depend on the data: {small.statuses} vs "
                                  f"{large.statuses}")
        small.problems += stream_violations(inc_s, inc_l)
        tally.check(small, large, (unit, measure, pair, spec))

    tally = Tally("streams over HTTP")
    case()
    tally.finish()


# -- applications ------------------------------------------------------------------------------
def check_target(tally: Tally, target: Target, data: st.DataObject) -> None:
    small_in, large_in, params, measure = target.draw(data)
    small = run_app(lambda x, a: target.call(x, params, a), small_in, measure)
    large = run_app(lambda x, a: target.call(x, params, a), large_in, measure)
    if small.outcome != large.outcome and not (small.run.problems or large.run.problems):
        small.run.notes.append(f"the outcome depends on the data before any debit: "
                               f"{small.outcome} vs {large.outcome}")
    if target.sensitivity and params.get("fn") not in SMOOTH:
        small.run.problems += compare_noise(small.noise, large.noise)
    # session-based targets draw their own row keys, so only the bounds are checked
    tally.check(small.run, large.run, (target.name, params, small_in, large_in),
                sensitivity=target.name not in ("topk", "network"))


@pytest.mark.parametrize("n", examples("apps"))
def test_fuzz_applications(n):
    """Every ``dpkit.apps`` entry point with analyst input (recommend, graph, sequence,
    auction, top-k, posterior, network, equilibrium) on neighbouring inputs."""

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        target = data.draw(st.sampled_from(TARGETS), label="target")
        check_target(tally, target, data)

    tally = Tally("applications")
    case()
    tally.finish()


@pytest.mark.parametrize("n", examples("holdout"))
def test_fuzz_reusable_holdout(n):
    """Thresholdout through its public API, rows and expressions (its own target: its
    neighbours are substituted holdout rows)."""

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        check_target(tally, HOLDOUT, data)

    tally = Tally("reusable holdout")
    case()
    tally.finish()


# -- SQL text (issue 32) -----------------------------------------------------------------------
@pytest.mark.parametrize("n", examples("sql"))
def test_fuzz_sql_text(n):
    """SQL text of the supported and near-supported grammar (tests/fuzz_sql.py) on
    neighbouring tables: refused at plan time with nothing spent, or released with the debit
    of its plan; nothing fails after the debit; no data value in an error or a log line."""
    pytest.importorskip("dpkit.frame.sql")
    from fuzz_sql import run_sql, sql_text
    from test_fuzz import row_keys

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        unit, measure = data.draw(units, label="unit"), data.draw(measures, label="measure")
        pair = data.draw(neighbours(unit), label="tables")
        text = data.draw(sql_text(), label="sql")
        keys = row_keys(data, unit, pair)
        small, large = (run_sql(t, unit, measure, text, keys) for t in (pair.small, pair.large))
        if small.releases[0].ok != large.releases[0].ok and not (small.problems
                                                                 or large.problems):
            small.notes.append("released on one neighbour only")
        tally.check(small, large, (unit, measure, pair, text))

    tally = Tally("sql text")
    case()
    tally.finish()


# -- the new targets' broken variants: each property must be able to fail -------------------
def _stream_pair() -> tuple[pl.DataFrame, pl.DataFrame]:
    from fuzz_strategies import VALUES

    first = {**{c: v[0] for c, v in VALUES.items()}, "t": 1, "ts": datetime(2020, 1, 1),
             "tz": datetime(2020, 1, 1)}
    return stream_frame([first]), stream_frame([first, {**first, "x": SECRET_FLOAT}])


def test_stream_targets_catch_moved_increments_errors_and_leaks(monkeypatch, tmp_path):
    """Doubled increments break (a); an error quoting a value in a step breaks (b) and (c)."""
    small_t, large_t = _stream_pair()
    unit = dp.PrivacyUnit.rows()
    spec = {"steps": [], "aggregation": {"agg": "sum", "column": "x", "bounds": [0, 10]},
            "time": "t", "horizon": 2, "mechanism": "tree", "budget": {"epsilon": 1}}
    led = Ledger(tmp_path / "l.sqlite")
    key = Fernet.generate_key()
    real = ContinualRelease._increments
    outcomes = {}
    for name, fake in (("doubled", lambda s, f: [2 * v for v in real(s, f)]),
                       ("leaky", lambda s, f: real(s, f) if f.height == 0 else (
                           _ for _ in ()).throw(ValueError(f"bad {f['x'].to_list()}")))):
        # (leaky raises on rows only: the zero-row dry run before the debit passes)
        monkeypatch.setattr(ContinualRelease, "_increments", fake)
        (small, inc_s), (large, inc_l) = (
            run_library(t, unit, "pure", spec, led, d, key)
            for t, d in ((small_t, tmp_path / f"{name}0"), (large_t, tmp_path / f"{name}1"))
            if d.mkdir() is None)
        outcomes[name] = small.problems + large.problems + stream_violations(inc_s, inc_l)
    led.dispose()
    assert any(p.startswith("(a)") for p in outcomes["doubled"]), outcomes
    assert any(p.startswith("(b)") for p in outcomes["leaky"]), outcomes
    assert any(p.startswith("(c)") for p in outcomes["leaky"]), outcomes


def test_app_targets_catch_moved_noise_inputs_and_late_errors():
    """A noise input that moves by more than Δ breaks (a); a release that fails after its
    debit quoting a value breaks (b) and (c)."""
    from dpkit.apps import graph
    from dpkit.mechanisms.frontend import charge

    def run(edges: Any, accountant: Any) -> Any:
        return graph.edge_count(edges, n_nodes=5, epsilon=1, accountant=accountant)

    small = run_app(run, pl.DataFrame({"src": [0], "dst": [1]}), "pure")
    large = run_app(run, pl.DataFrame({"src": [0, 1], "dst": [1, 2]}), "pure")
    assert small.noise and compare_noise(small.noise, large.noise) == []
    for call in large.noise:
        call.value = call.value * 3  # the count moves by 2 > Δ = 1
    assert any(p.startswith("(a)") for p in compare_noise(small.noise, large.noise))

    def late(edges: Any, accountant: Any) -> Any:
        def compute() -> int:
            logging.getLogger("dpkit").warning("row %s", SECRET_FLOAT)  # a logged value
            return int(f"{SECRET_FLOAT}x")
        return charge(accountant, dp.PureDP(1), "late", compute)

    failed = run_app(late, None, "pure").run.problems
    assert any(p.startswith("(b)") for p in failed), failed
    assert any(p.startswith("(c)") for p in failed), failed


def test_sql_target_catches_a_wrong_debit_late_errors_and_leaks(monkeypatch):
    """A release debiting more than its plan breaks the debit check; a release that fails
    after its debit quoting a value breaks (b) and (c)."""
    pytest.importorskip("dpkit.frame.sql")
    from fuzz_sql import run_sql
    from fuzz_strategies import VALUES, frame

    from dpkit.frame.session import Session
    from dpkit.mechanisms.frontend import charge_record

    table = frame([{**{c: v[0] for c, v in VALUES.items()}, "x": SECRET_FLOAT}])
    text = "SELECT COUNT(*) AS n FROM t"
    assert run_sql(table, dp.PrivacyUnit.rows(), "pure", text).problems == []
    real = Session.release

    def twice(self, plan, **kwargs):
        real(self, plan, **kwargs)
        return real(self, plan, **kwargs)

    monkeypatch.setattr(Session, "release", twice)
    wrong = run_sql(table, dp.PrivacyUnit.rows(), "pure", text).problems
    assert any("not the plan's loss" in p for p in wrong), wrong

    def late(self, plan, **kwargs):
        def compute():
            logging.getLogger("dpkit").warning("row %s", SECRET_FLOAT)
            raise ValueError(f"bad {SECRET_FLOAT}")
        return charge_record(self.accountant, plan.loss, plan.description, compute)[1]

    monkeypatch.setattr(Session, "release", late)
    failed = run_sql(table, dp.PrivacyUnit.rows(), "pure", text).problems
    assert any(p.startswith("(b)") for p in failed), failed
    assert any(p.startswith("(c)") for p in failed), failed


# -- the fuzzer's findings, as regression tests -----------------------------------------------
def _stream_session(tmp_path: Any, table: pl.DataFrame, budget: Any) -> dp.Session:
    return dp.Session(table, dp.PrivacyUnit.rows(), budget, ledger=Ledger(tmp_path / "l.sql"),
                      dataset="d")


def test_tiny_sum_bounds_are_refused_before_the_debit(tmp_path):
    """Issue 30 (5b): bounds ['0', '1e-305'] overflowed 2.0 ** -grid after the debit."""
    s = _stream_session(tmp_path, pl.DataFrame({"t": [1, 2], "x": [1.0, 0.5]}), dp.PureDP(5))
    with pytest.raises(DomainError):
        s.query().continual(dp.sum("x", (0, Fraction("1e-305"))), time="t", horizon=2,
                            epsilon=1)
    assert s.spent == dp.PureDP(0)


def test_time_zone_mismatch_is_refused_before_the_debit(tmp_path):
    """Issue 30 (5c): a naive time column with an aware origin failed after the debit."""
    from datetime import UTC

    s = _stream_session(tmp_path, pl.DataFrame({"ts": [datetime(2020, 1, 1, 5)]}),
                        dp.PureDP(5))
    with pytest.raises(DomainError):
        s.query().continual(dp.count(), time="ts", horizon=2, epsilon=1,
                            origin=datetime(2020, 1, 1, tzinfo=UTC))
    assert s.spent == dp.PureDP(0)


@pytest.mark.parametrize("budget", [dp.ZCDP(5), dp.ApproxDP(5, Fraction(1, 10**6))])
def test_pure_stream_on_a_zcdp_dataset_restores(tmp_path, budget):
    """Issue 30 (5a); also on an (ε, δ) dataset (found here): the ledger records the
    converted loss, and the restore compared loss texts in two measures."""
    key = Fernet.generate_key()
    s = _stream_session(tmp_path, pl.DataFrame({"t": [1, 2]}), budget)
    stream = s.query().continual(dp.count(), time="t", horizon=3, epsilon=1)
    stream.advance(save=(tmp_path / "a.state", key))
    assert s.query().continual.restore(tmp_path / "a.state", key).t == 1


def test_stream_rewriting_the_unit_column_is_refused_before_the_debit(tmp_path):
    """Found by this fuzzer: query.continual skipped the query's plan-time step checks."""
    s = dp.Session(pl.DataFrame({"t": [1, 2], "id": [1, 2], "g": [5, 6]}),
                   dp.PrivacyUnit.by("id", 1), dp.PureDP(10),
                   ledger=Ledger(tmp_path / "l.sqlite"), dataset="d")
    q = s.query().with_columns(id=pl.col("g"))  # refused by release(); continual opens it
    with pytest.raises(DomainError):
        q.continual(dp.count(), time="t", horizon=2, epsilon=1)
    assert s.spent == dp.PureDP(0)


def test_recommender_with_huge_bounds_is_refused_before_the_debit():
    """Found by this fuzzer (issue 30): bounds (0, 1e308) were accepted, debited, and the
    model's squared half-range overflowed (ReleaseFailedError)."""
    from dpkit.apps import fit_recommender
    from dpkit.core.accountant import FilterAccountant

    accountant = FilterAccountant(dp.PureDP(10))
    ratings = pl.DataFrame({"user": [0, 0], "item": [0, 1], "rating": [1.0, 2.0]})
    for bounds, clip in (((0, 1e308), None), ((0, 2.0**257), None), ((0, 5), 1e200)):
        with pytest.raises(DomainError, match="2\\^256"):
            fit_recommender(ratings, n_items=3, bounds=bounds, clip=clip, epsilon=1,
                            accountant=accountant)
    assert accountant.spent == dp.PureDP(0)
    model = fit_recommender(ratings, n_items=3, bounds=(0, 2.0**256), epsilon=1,
                            accountant=accountant)  # the largest accepted: total
    assert accountant.spent == dp.PureDP(1) and model.bounds == (0, 2.0**256)


def test_a_long_or_chain_is_refused_with_a_typed_error():
    """Found by the SQL target (issue 32): ``WHERE x > 1 OR … OR x > 1`` with 1,000 terms (6
    kB of text, well under MAX_SQL_BYTES) raised RecursionError from the translation (a
    server answered 500); now refused with SQLError like 300 terms (the sql branch bounds
    the tree's depth before it recurses). Nothing is spent."""
    from fuzz_sql import DECLARED
    from fuzz_strategies import VALUES, frame

    from dpkit.frame.sql import SQLError

    s = dp.Session({"t": frame([{c: v[0] for c, v in VALUES.items()}])},
                   dp.PrivacyUnit.rows(), dp.PureDP(10), schema=DECLARED)
    with pytest.raises(SQLError):
        s.sql_plan("SELECT COUNT(*) FROM t WHERE " + " OR ".join(["x > 1"] * 1000), epsilon=1)
    assert s.spent == dp.PureDP(0)

