"""Harness of the grey-box fuzzer (tests/test_fuzz.py): run releases on neighbouring tables
and check the properties.

:class:`Recorder` watches one or more releases from the inside, without changing what they
compute: it records every plan (``Query.plan``), debit (``Accountant.run`` starting the data
side, which it does only after its debit) and exact
statistic (``engine.compute``'s output), and the log records. With ``row_keys`` it replaces the
row-key source of contribution bounding (``dpkit.frame.backend.rng``, which only chooses rows;
noise still comes from the CSPRNG) by a fixed stream, so that a table and the same table plus
one unit's rows (appended) bound their common units identically.

:func:`run_session` and :func:`run_server` run one table's releases and record (b) and (c);
:func:`compare` checks (a) between the two neighbours' runs.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pytest
from fuzz_strategies import BUDGETS, CONFIG_BUDGETS, MARKERS, Pair

import dpkit as dp
from dpkit.core.accountant import Accountant
from dpkit.errors import ReleaseFailedError
from dpkit.frame import aggregates, backend, engine
from dpkit.frame.query import Query
from dpkit.frame.session import Session
from dpkit.server.middleware import LOGGER, JsonFormatter


# -- the harness -----------------------------------------------------------------------------
@dataclass
class Event:
    kind: str  # "plan" | "debit" | "compute"
    query: Any = None
    planned: Any = None
    raw: dict[str, np.ndarray] | None = None
    keys: Any = None
    bounded: pl.DataFrame | None = None


class _Logs(logging.Handler):
    """Every log record, formatted as its logger's handlers would write it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self._server = JsonFormatter()
        self._plain = logging.Formatter("%(name)s %(levelname)s %(message)s")

    def emit(self, record: logging.LogRecord) -> None:
        fmt = self._server if record.name.startswith(LOGGER) else self._plain
        self.lines.append(fmt.format(record))


class FixedRowKeys:
    """A stand-in for :mod:`dpkit.core.rng` in :mod:`dpkit.frame.backend` only: row keys are
    the first n words of ``stream`` (small words, so both bounding paths keep the same rows);
    everything else goes to the real module."""

    def __init__(self, stream: list[int], real: Any) -> None:
        self._stream = np.asarray(stream, dtype=np.uint64)
        self._real = real

    def words(self, n: int, bits: int = 64) -> np.ndarray:
        return np.resize(self._stream, n)  # the stream, repeated if more are asked for

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class Recorder:
    """Record plans, debits, exact statistics and log records while releases run."""

    def __init__(self, row_keys: list[int] | None = None) -> None:
        self.events: list[Event] = []
        self.logs = _Logs()
        self.row_keys = row_keys
        self._mp = pytest.MonkeyPatch()

    def __enter__(self) -> Recorder:
        events, mp = self.events, self._mp
        real_plan, real_run, real_compute = Query.plan, Accountant.run, engine.compute

        def plan(query: Query, *args: Any, **kwargs: Any) -> Any:
            out = real_plan(query, *args, **kwargs)
            events.append(Event("plan", query=query, planned=out[1]))
            return out

        def run(accountant: Accountant, loss: Any, description: str,
                data_side: Callable[[], Any], **kwargs: Any) -> Any:
            def debited() -> Any:  # the accountant runs this only after its debit
                events.append(Event("debit"))
                return data_side()
            return real_run(accountant, loss, description, debited, **kwargs)

        def compute(*args: Any, **kwargs: Any) -> Any:
            raw = real_compute(*args, **kwargs)
            lf, keys = args[0], args[1] if len(args) > 1 else kwargs.get("keys")
            events.append(Event("compute", raw={k: np.array(v, copy=True)
                                                for k, v in raw.items()},
                                keys=keys, bounded=_collect(lf)))
            return raw

        mp.setattr(Query, "plan", plan)
        mp.setattr(Accountant, "run", run)
        mp.setattr(engine, "compute", compute)
        if self.row_keys is not None:
            mp.setattr(backend, "rng", FixedRowKeys(self.row_keys, backend.rng))
        for name in ("", "dpkit", LOGGER):
            logging.getLogger(name).addHandler(self.logs)
        return self

    def __exit__(self, *exc: Any) -> None:
        for name in ("", "dpkit", LOGGER):
            logging.getLogger(name).removeHandler(self.logs)
        self._mp.undo()

    def mark(self) -> int:
        return len(self.events)

    def since(self, mark: int, kind: str) -> list[Event]:
        return [e for e in self.events[mark:] if e.kind == kind]


def _collect(lf: Any) -> pl.DataFrame | None:
    """The bounded table as a Polars frame (None if it cannot be read back)."""
    try:
        return lf.collect().to_polars()
    except Exception:  # pragma: no cover - only the bounds check needs it
        return None


def exception_text(exc: BaseException) -> str:
    """The messages of ``exc`` and of the exceptions chained to it, as a traceback shows them."""
    parts, seen = [], set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        parts.append(f"{type(e).__name__}: {e}")
        parts.extend(getattr(e, "__notes__", []))
        stack.append(e.__cause__)
        if not e.__suppress_context__:  # "from None" hides the context from tracebacks
            stack.append(e.__context__)
    return "\n".join(parts)


def leaks(text: str) -> list[str]:
    """The sentinel markers found in ``text``."""
    return [m for m in MARKERS if m in text]


def wrapped(a: np.ndarray, b: np.ndarray) -> list[int]:
    """Elementwise a − b as exact integers, modulo 2^64 into [−2^63, 2^63): the engine's
    int64 sums wrap, and the noise is added in the same ring, so the release depends on the
    sums only modulo 2^64 (a wrapped sum is not a privacy failure)."""
    return [((int(x) - int(y) + 2**63) % 2**64) - 2**63
            for x, y in zip(np.asarray(a).reshape(-1), np.asarray(b).reshape(-1), strict=True)]


def sensitivity_violations(planned: Any, query: Query, small: Event, large: Event
                           ) -> list[str]:
    """Statistics whose exact values move by more than their declared sensitivity: L1 for
    Laplace (and tree quantile) statistics, L2 for Gaussian ones, per-group L∞ of the scores
    (and their sum against ‖c‖₁) for exponential-mechanism quantiles."""
    out = []
    assert small.raw is not None and large.raw is not None
    unit = query.session.privacy_unit
    bounds = unit.bounds if query.group_columns else unit.bounds.single_group()
    for p in planned:
        key = p.stat.key
        a, b = small.raw.get(key), large.raw.get(key)
        if a is None or b is None or np.shape(a) != np.shape(b):
            out.append(f"{key}: shapes {np.shape(a)} vs {np.shape(b)}")
            continue
        agg = query.aggs[p.aggregation]
        sens = p.sensitivity
        if p.mechanism == "exponential":
            assert isinstance(agg, aggregates.Quantile)
            moves = [max((abs(x - y) for x, y in zip(sa, sb, strict=True)), default=0)
                     for sa, sb in zip(agg.scores(a), agg.scores(b), strict=True)]
            if max(moves, default=0) > sens or sum(moves) > bounds.l1():
                out.append(f"{key} ({type(agg).__name__} scores): per-group moves {moves} > "
                           f"{sens} (or sum > {bounds.l1()})")
            continue
        d = wrapped(b, a)
        if p.mechanism == "discrete Gaussian":
            norm2 = sum(x * x for x in d)
            if norm2 > sens * sens:
                out.append(f"{key} ({p.mechanism}): L2 {math.sqrt(norm2):.6g} > {float(sens)}; "
                           f"{np.asarray(a).tolist()} -> {np.asarray(b).tolist()}")
        elif sum(abs(x) for x in d) > sens:
            out.append(f"{key} ({p.mechanism}): L1 {sum(abs(x) for x in d)} > {sens}; "
                       f"{np.asarray(a).tolist()} -> {np.asarray(b).tolist()}")
    return out


def bound_violations(query: Query, event: Event) -> list[str]:
    """Units with more rows (in all, per group) or groups than declared in a bounded table."""
    unit, t = query.session.privacy_unit, event.bounded
    if unit.column is None or t is None or t.height == 0:
        return []
    b = unit.bounds if query.group_columns else unit.bounds.single_group()
    out = []
    per_unit = t.group_by(unit.column).len()
    if per_unit["len"].max() > b.max_rows:  # type: ignore[operator]
        out.append(f"a unit kept {per_unit['len'].max()} rows > max_rows {b.max_rows}")
    cols = [c for c in query.group_columns if c in t.columns]
    if cols:
        pairs = t.group_by([unit.column, *cols]).len()
        if pairs["len"].max() > b.max_rows_per_group:  # type: ignore[operator]
            out.append(f"a unit kept {pairs['len'].max()} rows in one group > "
                       f"{b.max_rows_per_group}")
        groups = pairs.group_by(unit.column).len()["len"].max()
        if groups > b.max_groups:  # type: ignore[operator]
            out.append(f"a unit kept {groups} groups > max_groups {b.max_groups}")
    return out


def table_violations(query: Query, small: Event, large: Event) -> list[str]:
    """The bounded table of the larger neighbour must be the smaller one's plus at most one
    row (row-level units) or at most ``max_rows`` rows of one unit: row-wise steps map each row
    on its own, and bounding (with shared row keys) keeps the other units' rows. A step that
    lets one row change others (an aggregation, a window) or rewrites the unit column shows
    here even when no statistic happens to move beyond its sensitivity."""
    a, b = small.bounded, large.bounded
    if a is None or b is None or a.columns != b.columns:
        return [] if a is None or b is None else [f"bounded columns {a.columns} vs {b.columns}"]
    before, after = Counter(map(_canonical, a.rows())), Counter(map(_canonical, b.rows()))
    gone, new = before - after, after - before
    out = []
    if gone:
        out.append(f"rows of the smaller table changed or vanished: {list(gone)[:3]}")
    unit = query.session.privacy_unit
    if unit.column is None:
        if sum(new.values()) > 1:
            out.append(f"{sum(new.values())} rows added for one added row: {list(new)[:3]}")
    else:
        at = a.columns.index(unit.column) if unit.column in a.columns else None
        units = {row[at] for row in new} if at is not None else set()
        if len(units) > 1 or sum(new.values()) > unit.max_rows:
            out.append(f"{sum(new.values())} rows of units {sorted(units)} added for one unit")
    return out


def _canonical(row: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(repr(v) for v in row)  # NaN equals NaN, -0.0 differs from 0.0


# -- running a pair of neighbours ------------------------------------------------------------
@dataclass
class Release:
    """One release as the recorder saw it: did it return, and what it planned and computed."""

    ok: bool
    plans: list[Event]
    computes: list[Event]


@dataclass
class Run:
    """The releases of one table, and the properties (b) and (c) it broke."""

    releases: list[Release] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # not violations (e.g. late refusals)
    statuses: list[int] = field(default_factory=list)  # HTTP status codes (server runs)


def _check_text(run: Run, where: str, text: str) -> None:
    found = leaks(text)
    if found:
        run.problems.append(f"(c) {where} contains data values {found}: {text[:600]}")


def _failed_rows(ledger: Any, after: int) -> list[dict[str, Any]]:
    return [r for r in ledger.releases() if r["id"] > after and r["status"] == "failed"]


def _last_id(ledger: Any) -> int:
    rows = ledger.releases()
    return rows[-1]["id"] if rows else 0


def _native(table: pl.DataFrame, backend_name: str) -> tuple[Any, Any]:
    """The table for a session on ``backend_name`` (and a connection to keep open)."""
    if backend_name == "polars":
        return table, None
    import duckdb

    con = duckdb.connect()
    return con.from_arrow(table.to_arrow()), con


def run_session(table: pl.DataFrame, unit: dp.PrivacyUnit, measure: str,
                jobs_of: Callable[[Session], list[tuple[Query, dict[str, Any]]]], *,
                row_keys: list[int] | None = None, ledger: Any = None,
                backend_name: str = "polars") -> Run:
    """Run every release ``jobs_of(session)`` builds on a session over ``table`` with a
    budget that never runs out; record (b) a raise after a debit, or a failed ledger row, and
    (c) a sentinel in an exception's text or a log record."""
    run = Run()
    data, con = _native(table, backend_name)
    dataset = f"fuzz-{measure}-{unit}" if ledger is not None else None
    after = _last_id(ledger) if ledger is not None else 0
    try:
        with Recorder(row_keys) as rec:
            try:
                session = dp.Session(data, unit, BUDGETS[measure], ledger=ledger,
                                     dataset=dataset)
                jobs = jobs_of(session)
            except Exception as exc:  # refused while building: reads no data
                run.notes.append(f"refused: {type(exc).__name__}: {exc}")
                _check_text(run, "a refusal", exception_text(exc))
                return run
            for query, kwargs in jobs:
                mark = rec.mark()
                ok = True
                try:
                    query.release(**kwargs)
                except Exception as exc:
                    ok = False
                    text = exception_text(exc)
                    _check_text(run, "an exception", text)
                    if rec.since(mark, "debit") or isinstance(exc, ReleaseFailedError):
                        run.problems.append(f"(b) raised after the debit: {text[:600]}")
                    elif rec.since(mark, "plan"):
                        run.notes.append(f"refused after plan() succeeded: {text[:300]}")
                    else:
                        run.notes.append(f"refused: {type(exc).__name__}: {exc}")
                run.releases.append(Release(ok, rec.since(mark, "plan"),
                                            rec.since(mark, "compute")))
        for line in rec.logs.lines:
            _check_text(run, "a log record", line)
        if ledger is not None:
            for r in _failed_rows(ledger, after):
                run.problems.append(f"(b) ledger row {r['id']} is 'failed': {r['query']}")
    finally:
        if con is not None:
            con.close()
    return run


def _write_source(table: pl.DataFrame, directory: Any, name: str, kind: str) -> dict[str, Any]:
    if kind == "parquet":
        table.write_parquet(directory / f"{name}.parquet")
        return {"kind": "parquet", "path": f"{name}.parquet"}
    import duckdb

    con = duckdb.connect(str(directory / f"{name}.duckdb"))
    try:
        con.register("src", table.to_arrow())
        con.execute("CREATE TABLE t AS SELECT * FROM src")
    finally:
        con.close()
    return {"kind": "duckdb", "path": f"{name}.duckdb", "table": "t"}


def _unit_config(unit: dp.PrivacyUnit) -> Any:
    if unit.column is None:
        return "rows"
    b = unit.bounds
    return {"column": unit.column, "max_rows": b.max_rows, "max_groups": b.max_groups,
            "max_rows_per_group": b.max_rows_per_group}


def run_server(directory: Any, pair: Pair, unit: dp.PrivacyUnit, measure: str,
               payload: dict[str, Any], source: str, row_keys: list[int] | None = None
               ) -> tuple[Run, Run]:
    """POST ``payload`` to /release on two datasets holding ``pair.small`` and
    ``pair.large``; record (b) a 5xx, or a refusal that debited, or a failed ledger row, and
    (c) a sentinel in a response body or a log line."""
    import json
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with")
        from fastapi.testclient import TestClient
    from dpkit.server.app import create_app
    from dpkit.server.config import parse_config

    datasets = [{"name": name, "source": _write_source(t, directory, name, source),
                 "privacy_unit": _unit_config(unit), "budget": CONFIG_BUDGETS[measure]}
                for name, t in (("d0", pair.small), ("d1", pair.large))]
    cfg = parse_config({"ledger": "ledger.sqlite", "datasets": datasets}, base=directory)
    runs = (Run(), Run())
    body = json.dumps(payload, default=str)
    with Recorder(row_keys) as rec:
        app = create_app(cfg)
        ledger = app.state.dpkit.ledger
        token = ledger.add_analyst("fuzz")
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        for name in ("d0", "d1"):
            ledger.grant("fuzz", name)
        with TestClient(app, raise_server_exceptions=False) as http:
            for run, name in zip(runs, ("d0", "d1"), strict=True):
                mark, before = rec.mark(), ledger.count()
                r = http.post(f"/v1/datasets/{name}/release", content=body, headers=headers)
                run.statuses.append(r.status_code)
                _check_text(run, f"the response ({r.status_code})", r.text)
                debited = ledger.count() > before or bool(rec.since(mark, "debit"))
                if r.status_code >= 500:
                    run.problems.append(f"(b) HTTP {r.status_code}: {r.text[:400]}")
                elif r.status_code != 200 and debited:
                    run.problems.append(f"(b) HTTP {r.status_code} after a debit: {r.text[:400]}")
                run.releases.append(Release(r.status_code == 200, rec.since(mark, "plan"),
                                            rec.since(mark, "compute")))
            for r in _failed_rows(ledger, 0):
                runs[int(r["dataset"] == "d1")].problems.append(
                    f"(b) ledger row {r['id']} is 'failed'")
    for line in rec.logs.lines:
        _check_text(runs[0], "a log record", line)
    return runs


def compare(small: Run, large: Run, *, sensitivity: bool = True) -> list[str]:
    """(a) every exact statistic moves by at most its declared sensitivity between the
    neighbours (with ``sensitivity``); every bounded table respects the unit's bounds; a
    partition's parts change at most one at a time."""
    problems: list[str] = []
    changed_parts = 0
    for rs, rl in zip(small.releases, large.releases, strict=False):
        for r in (rs, rl):
            for plan, comp in zip(r.plans, r.computes, strict=False):
                problems += [f"(a) {p}" for p in bound_violations(plan.query, comp)]
        if not (rs.ok and rl.ok and rs.plans and rs.computes and rl.computes):
            continue
        plan = rs.plans[-1]
        query = plan.query
        if query.selection is not None or not sensitivity:
            continue
        problems += [f"(a) {p}" for p in table_violations(query, rs.computes[-1],
                                                           rl.computes[-1])]
        found = sensitivity_violations(plan.planned, query, rs.computes[-1], rl.computes[-1])
        problems += [f"(a) {p}" for p in found]
        if query.part is not None:
            changed_parts += any(
                any(wrapped(rl.computes[-1].raw[k], v))  # type: ignore[index]
                for k, v in (rs.computes[-1].raw or {}).items())
    if changed_parts > 1:
        problems.append(f"(a) the neighbours differ in {changed_parts} parts of a partition "
                        "(each part is charged as if a unit touched one)")
    return problems
