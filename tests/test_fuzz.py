"""Grey-box fuzzer of the release path (issue 16): random queries from the server's JSON
grammar and from library mode's Polars expressions, on random neighbouring tables, checking

(a) every exact statistic moves by at most its declared sensitivity between the neighbours
    (L1 for Laplace statistics, L2 for Gaussian ones, per-group score moves for quantiles); the
    larger neighbour's bounded table is the smaller one's plus at most one row, or one unit's
    rows (row-wise steps map each row on its own); every bounded table respects the unit's
    contribution bounds; a partition's parts change one at a time;
(b) nothing raises after the debit (no exception, no HTTP 5xx, no ledger row marked
    'failed', no HTTP status that differs between the neighbours), so success or failure
    never depends on the data;
(c) no exception text (as a traceback shows it), HTTP response or log record contains a data
    value (sentinels planted in the tables, :data:`fuzz_strategies.MARKERS`).

Neighbours differ in one row (``PrivacyUnit.rows()``) or one unit of up to ``max_rows + 3``
rows (``PrivacyUnit.by("id", …)``); the relation is symmetric, so "add" covers "remove".
Contribution bounding chooses rows at random; for (a) under unit-level privacy, both tables
take their row keys from one drawn stream (only in the test: :class:`fuzz_harness.FixedRowKeys`
replaces the row-key source, never the noise), and the added unit's rows come last, so every
other unit keeps the same rows and the statistic's move is the added unit's alone — exactly
what the declared sensitivity bounds. DuckDB draws its own row keys, so there (a) runs under
row-level privacy only; the bounds check runs on every bounded table.

The CI run is derandomised (the same cases every time, no example database) and takes about
70 s on 2 cores; ``pytest -m fuzz_long tests/test_fuzz.py`` runs ``$DPKIT_FUZZ_EXAMPLES``
cases of the JSON grammar on sessions (default 2000) and the other tests in proportion to
their CI counts, with fresh random cases when ``DPKIT_FUZZ_RANDOM=1``. A failure is reported
as found (with a ``@reproduce_failure`` blob): shrinking is off, since a failure that depends
on the noise (e.g. on which partitions a private selection keeps) can take minutes to shrink;
set ``DPKIT_FUZZ_SHRINK=1`` to minimise it. ``DPKIT_FUZZ_KEEP_GOING=1`` runs every case and reports
all distinct violations at the end (for long runs). The last two tests show that each
property can fail: a disabled row-wise guard, doubled counts, an error after the debit and a
logged data value are all caught.
"""

from __future__ import annotations

import itertools
import logging
import os
import re

import pytest
from fuzz_harness import compare, run_server, run_session
from fuzz_strategies import (
    SECRET,
    VALUES,
    LibraryQuery,
    Pair,
    attack_query,
    frame,
    json_query,
    library_query,
    measures,
    neighbours,
    units,
)
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

import dpkit as dp
from dpkit.frame import engine
from dpkit.ledger import Ledger
from dpkit.server import protocol

LONG = int(os.environ.get("DPKIT_FUZZ_EXAMPLES", "2000"))
RANDOM = os.environ.get("DPKIT_FUZZ_RANDOM") == "1"
SHRINK = os.environ.get("DPKIT_FUZZ_SHRINK") == "1"
KEEP_GOING = os.environ.get("DPKIT_FUZZ_KEEP_GOING") == "1"
CI = {"json": 300, "library": 240, "attack": 240, "duckdb": 80, "server": 50}


def examples(name: str) -> list[object]:
    """The CI case count, and the long run's (``LONG`` for the JSON grammar on sessions, the
    others in proportion to their CI counts, so the slow server and DuckDB runs stay short)."""
    return [pytest.param(CI[name], id="ci"),
            pytest.param(max(CI[name], LONG * CI[name] // CI["json"]), id="long",
                         marks=pytest.mark.fuzz_long)]


def fuzz_settings(n: int) -> settings:
    phases = list(Phase) if SHRINK else [Phase.explicit, Phase.generate]
    return settings(max_examples=n, derandomize=not RANDOM, database=None, deadline=None,
                    print_blob=True, phases=phases, suppress_health_check=[
                        HealthCheck.too_slow, HealthCheck.filter_too_much,
                        HealthCheck.data_too_large, HealthCheck.large_base_example])


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    led = Ledger(tmp_path_factory.mktemp("fuzz") / "ledger.sqlite")
    yield led
    led.dispose()


def row_keys(data: st.DataObject, unit: dp.PrivacyUnit, pair: Pair) -> list[int] | None:
    """One stream of row keys for both neighbours (unit-level privacy only)."""
    if unit.column is None:
        return None
    n = pair.large.height
    return data.draw(st.lists(st.integers(0, 255), min_size=n, max_size=n), label="row keys")


class Tally:
    """Cases run and properties broken. By default the first violation fails the test (as
    Hypothesis reports it); with ``DPKIT_FUZZ_KEEP_GOING=1`` every case runs, distinct
    violations are collected (with the first case showing each), and the test fails at the
    end with all of them (for long runs)."""

    def __init__(self, name: str) -> None:
        self.name, self.cases, self.released = name, 0, 0
        self.found: dict[str, list[object]] = {}

    def check(self, small, large, drawn: tuple[object, ...], *, sensitivity: bool = True
              ) -> None:
        self.cases += 1
        released = any(r.ok for r in small.releases)
        self.released += released
        event("released" if released else "refused (or failed)")
        problems = list(dict.fromkeys(small.problems + large.problems + compare(
            small, large, sensitivity=sensitivity)))
        if not KEEP_GOING:
            assert not problems, "\n".join(problems)
        for p in problems:
            kind = re.sub(r"\d+", "N", p)[:100]
            self.found.setdefault(kind, [0, p, drawn])[0] += 1  # type: ignore[operator]

    def finish(self) -> None:
        summary = (f"{self.name}: {self.cases} cases ({self.released} released on the smaller "
                   f"table), {len(self.found)} kinds of violation")
        print(summary)
        assert not self.found, summary + "".join(
            f"\n\n[{n}x] {p}\n  first case: {drawn!r}"
            for n, p, drawn in self.found.values())


@pytest.mark.parametrize("n", examples("json"))
def test_fuzz_json_grammar_on_sessions(n, ledger):
    """Queries of the server's JSON grammar (protocol.to_query) on library sessions."""

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        unit, measure = data.draw(units, label="unit"), data.draw(measures, label="measure")
        pair = data.draw(neighbours(unit), label="tables")
        payload = data.draw(json_query(measure), label="query")
        keys = row_keys(data, unit, pair)
        use_ledger = ledger if data.draw(st.integers(0, 3), label="ledger?") == 0 else None

        def jobs(session):
            return [protocol.to_query(session, payload)]

        small, large = (run_session(t, unit, measure, jobs, row_keys=keys, ledger=use_ledger)
                        for t in (pair.small, pair.large))
        tally.check(small, large, (unit, measure, pair, payload))

    tally = Tally("json grammar on sessions")
    case()
    tally.finish()


@pytest.mark.parametrize("n", examples("library"))
def test_fuzz_library_expressions(n, ledger):
    """Library mode: Polars expressions (row-wise ones, and aggregating, windowed or
    unit-rewriting ones that must be refused), group-by keys and partitions."""

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        unit, measure = data.draw(units, label="unit"), data.draw(measures, label="measure")
        pair = data.draw(neighbours(unit), label="tables")
        query: LibraryQuery = data.draw(library_query(measure, unit), label="query")
        keys = row_keys(data, unit, pair)
        use_ledger = ledger if data.draw(st.integers(0, 3), label="ledger?") == 0 else None
        small, large = (run_session(t, unit, measure, query.jobs, row_keys=keys,
                                    ledger=use_ledger) for t in (pair.small, pair.large))
        tally.check(small, large, (unit, measure, pair, query))

    tally = Tally("library expressions")
    case()
    tally.finish()


@pytest.mark.parametrize("n", examples("duckdb"))
def test_fuzz_json_grammar_on_duckdb(n):
    """The JSON grammar on DuckDB-backed sessions (its own arithmetic, casts and sums);
    (a) under row-level privacy only (DuckDB's row keys cannot be shared between tables)."""

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        unit, measure = data.draw(units, label="unit"), data.draw(measures, label="measure")
        pair = data.draw(neighbours(unit), label="tables")
        payload = data.draw(json_query(measure), label="query")

        def jobs(session):
            return [protocol.to_query(session, payload)]

        small, large = (run_session(t, unit, measure, jobs, backend_name="duckdb")
                        for t in (pair.small, pair.large))
        tally.check(small, large, (unit, measure, pair, payload),
                    sensitivity=unit.column is None)

    tally = Tally("json grammar on DuckDB")
    case()
    tally.finish()


@pytest.mark.parametrize("n", examples("server"))
def test_fuzz_server(n, tmp_path):
    """The JSON grammar over HTTP (parquet and DuckDB sources): no 5xx, no refusal after a
    debit, the same status on both neighbours, no data value in a body or a log line."""
    counter = itertools.count()

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        unit, measure = data.draw(units, label="unit"), data.draw(measures, label="measure")
        pair = data.draw(neighbours(unit), label="tables")
        payload = data.draw(json_query(measure), label="query")
        source = data.draw(st.sampled_from(["parquet", "duckdb"]), label="source")
        keys = row_keys(data, unit, pair) if source == "parquet" else None
        directory = tmp_path / f"case{next(counter)}"
        directory.mkdir()
        small, large = run_server(directory, pair, unit, measure, payload, source, keys)
        if small.statuses != large.statuses and not (small.problems or large.problems):
            small.problems.append(f"(b) the status depends on the data: {small.statuses} "
                                  f"vs {large.statuses}")
        tally.check(small, large, (unit, measure, pair, payload, source),
                    sensitivity=unit.column is None or source == "parquet")

    tally = Tally("server")
    case()
    tally.finish()


@pytest.mark.parametrize("n", examples("attack"))
def test_fuzz_library_rowwise_attacks(n):
    """Library mode, aimed at the row-wise guard (findings 3 and 4): well-typed steps with an
    aggregating, windowed or scanning node somewhere inside, or writing the unit column under
    a name not known in advance; each must be refused, or leave (a)-(c) intact."""

    @fuzz_settings(n)
    @given(st.data())
    def case(data):
        unit, measure = data.draw(units, label="unit"), data.draw(measures, label="measure")
        pair = data.draw(neighbours(unit), label="tables")
        query: LibraryQuery = data.draw(attack_query(measure, unit), label="query")
        keys = row_keys(data, unit, pair)
        small, large = (run_session(t, unit, measure, query.jobs, row_keys=keys)
                        for t in (pair.small, pair.large))
        tally.check(small, large, (unit, measure, pair, query))

    tally = Tally("row-wise attacks")
    case()
    tally.finish()


# -- the fuzzer's own broken variants: each property must be able to fail -------------------
def test_fuzzer_catches_a_disabled_rowwise_guard(monkeypatch):
    """With the row-wise guard switched off, the attack grammar breaks (a) or (b) within 60
    cases (a non-row-wise step moves other rows, or changes the table's length and fails)."""
    monkeypatch.setattr(engine, "check_step", lambda *args, **kwargs: None)

    @fuzz_settings(60)
    @given(st.data())
    def case(data):
        unit = data.draw(units)
        pair = data.draw(neighbours(unit))
        query = data.draw(attack_query("pure", unit))
        keys = row_keys(data, unit, pair)
        small, large = (run_session(t, unit, "pure", query.jobs, row_keys=keys)
                        for t in (pair.small, pair.large))
        tally.check(small, large, (unit, pair, query))

    tally = Tally("disabled guard")
    with pytest.raises(AssertionError, match=r"\((a|b)\) "):
        case()
        tally.finish()


def test_fuzzer_catches_doubled_statistics_errors_and_leaks(monkeypatch):
    """An engine whose counts double breaks (a); one that raises after the debit (quoting a
    data value) breaks (b); one that logs a data value breaks (c)."""
    real = engine.compute
    pair = Pair(frame([]), frame([{**{c: v[0] for c, v in VALUES.items()}, "s": SECRET}]), 1)
    unit = dp.PrivacyUnit.rows()

    def jobs(session):
        return [(session.query().count(), {"epsilon": 1})]

    def doubled(*args, **kwargs):
        return {k: v * 2 for k, v in real(*args, **kwargs).items()}

    def leaky(lf, *args, **kwargs):
        values = lf.collect().to_polars()["s"].to_list() if "s" in lf.columns else []
        if values:
            raise ValueError(f"bad value {values[0]}")
        return real(lf, *args, **kwargs)

    def logging_leak(lf, *args, **kwargs):
        logging.getLogger("dpkit").warning("rows: %s", lf.collect().to_polars().rows())
        return real(lf, *args, **kwargs)

    outcomes = {}
    for name, compute in (("doubled", doubled), ("leaky", leaky), ("logging", logging_leak)):
        monkeypatch.setattr(engine, "compute", compute)
        small, large = (run_session(t, unit, "pure", jobs) for t in (pair.small, pair.large))
        outcomes[name] = small.problems + large.problems + compare(small, large)
    assert any(p.startswith("(a)") for p in outcomes["doubled"]), outcomes
    assert any(p.startswith("(b)") for p in outcomes["leaky"]), outcomes
    assert any(p.startswith("(c)") for p in outcomes["logging"]), outcomes
