"""Fuzz targets of hosted and library continual releases (issue 30; tests/test_fuzz_surfaces.py).

A stream is charged once, when it opens; everything after that — each step read from the
table, a save, a restore on another worker, the history — runs after the debit, so it must
never fail because of the data, and no error text may quote a data value.

:func:`stream_spec` draws one request of the server's stream grammar
(:class:`dpkit.server.streams.StreamRequest`): query steps, a count or a bounded sum, a time
column of each kind (integers, dates, naive and UTC datetimes, and columns of the wrong kind),
an origin and a step width, a horizon (or none), every mechanism, a budget (ε or ρ, on any
dataset measure), public keys (including keys that collide after conversion), a window and
the post-processing flags. :func:`run_library` runs it as ``query.continual(…)`` on a Session
(open, every step, save, restore, a stale restore); :func:`run_server` over HTTP (open,
``next``, the history, another worker's restore, past the horizon).

(a) is checked on the steps' exact increments (``ContinualRelease._increments``, recorded
without changing them): over the whole stream, Σ_t Σ_key |inc − inc′| ≤ w·Δ (w the unit's
contributions, Δ the per-event sensitivity in grid steps), the bound the counters are
calibrated to (:mod:`dpkit.stream.frames`).
"""

from __future__ import annotations

import json
import warnings
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from fuzz_harness import Recorder, Release, Run, _unit_config, exception_text, leaks
from fuzz_strategies import (
    BUDGETS,
    CONFIG_BUDGETS,
    KEYS_COLLIDING,
    KEYS_TYPED,
    SCHEMA,
    SECRET_INT,
    Pair,
    json_step,
    row,
)
from hypothesis import strategies as st

import dpkit as dp
from dpkit.errors import StreamRollbackError
from dpkit.frame import language
from dpkit.frame.query import Query
from dpkit.stream import MECHANISMS, HorizonExceededError
from dpkit.stream.frames import ContinualRelease

# -- tables with time columns ----------------------------------------------------------------
_T0 = datetime(2020, 1, 1)
STREAM_SCHEMA: dict[str, Any] = {**SCHEMA, "t": pl.Int64, "ts": pl.Datetime("us"),
                                 "tz": pl.Datetime("us", "UTC")}
TIMES: dict[str, list[Any]] = {
    "t": [1, 2, 3, 4, 1, 2, 0, -1, None, 2**62, SECRET_INT],
    "ts": [_T0, _T0 + timedelta(days=1), _T0 + timedelta(hours=30), None,
           datetime(1, 1, 1), _T0 + timedelta(days=3)],
}
stream_row = st.builds(lambda r, t, ts: {**r, "t": t, "ts": ts, "tz": ts},
                      row, st.sampled_from(TIMES["t"]), st.sampled_from(TIMES["ts"]))


def stream_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The table of ``rows`` with :data:`STREAM_SCHEMA` ("tz" is "ts" in UTC)."""
    out = {}
    for c, t in STREAM_SCHEMA.items():
        values = [r[c] for r in rows]
        if c == "tz":
            values = [None if v is None else v.replace(tzinfo=UTC) for v in values]
        out[c] = pl.Series(c, values, dtype=t)
    return pl.DataFrame(out)


# -- the stream grammar ----------------------------------------------------------------------
ORIGINS: dict[str, list[Any]] = {
    "t": [None, None, 1, 0, -1, 2**62], "g": [None, 1, -(2**62)], "x": [None, 1],
    "d": ["2020-01-01", "2020-01-01", "1970-01-01", "9999-12-30", None],
    "ts": ["2020-01-01T00:00:00", "2020-01-01T00:00:00", "2019-12-31T12:00:00",
           "2020-01-01T00:00:00+00:00"],  # the last one aware on a naive column
    "tz": ["2020-01-01T00:00:00+00:00", "2020-01-01T00:00:00+00:00",
           "2020-01-01T02:00:00+02:00", "2020-01-01T00:00:00"],  # the last one naive
    "s": [None, "2020-01-01"], "new1": [None, 1],
}
STREAM_BOUNDS = [[0, 1], [0, 10], [-1, 1], [0, 0.5], ["1/3", 3], [-7.25, 3], [0, 2.0],
                 [-(2**31 - 1), 2**31 - 1], [0, 100], ["0", "1e-305"], [0, 1e-300], [5, 1],
                 ["x", 2], [0, 2**40]]
STREAM_KEY_COLUMNS = ["s", "c", "g", "b", "x"]


@st.composite
def stream_spec(draw: Any, measure: str) -> dict[str, Any]:
    """A body of ``POST /v1/datasets/{name}/streams`` (mostly well-formed, not always)."""
    time = draw(st.sampled_from(["t", "t", "t", "d", "ts", "tz", "g", "x", "s", "new1"]))
    mechanism = draw(st.sampled_from(sorted(MECHANISMS)))
    horizon = draw(st.sampled_from([1, 2, 3, 4, 5, None]))
    if draw(st.integers(0, 3)) < (3 if measure == "zcdp" else 1):  # ρ, even on ε datasets
        budget: dict[str, Any] = {"rho": draw(st.sampled_from([1, "1/4", 0.5]))}
    else:
        budget = {"epsilon": draw(st.sampled_from([1, "1/2", 2]))}
    if draw(st.integers(0, 3)) == 0:
        aggregation: dict[str, Any] = {"agg": "count"}
    else:
        aggregation = {"agg": "sum", "column": draw(st.sampled_from(["x", "x", "n", "g",
                                                                     "new1", "s"])),
                       "bounds": draw(st.sampled_from(STREAM_BOUNDS))}
        if draw(st.integers(0, 15)) == 0:
            del aggregation["bounds"]
    spec: dict[str, Any] = {"steps": draw(st.lists(json_step, max_size=2)),
                            "aggregation": aggregation, "time": time, "horizon": horizon,
                            "mechanism": mechanism, "budget": budget}
    origin = draw(st.sampled_from(ORIGINS[time]))
    if origin is not None:
        spec["origin"] = origin
    every = draw(st.sampled_from([None, None, 1, 2, 43200]))
    if every is not None:
        spec["every"] = every
    if draw(st.integers(0, 2)) == 0:
        by = draw(st.sampled_from(STREAM_KEY_COLUMNS))
        pool = KEYS_TYPED.get(by, []) + KEYS_COLLIDING.get(by, [])
        keys = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
        spec["by"], spec["keys"] = by, [k for k in keys if isinstance(k, str | int)] or ["a"]
    window = draw(st.sampled_from([None, None, 1, 2, 3]))
    if window is not None:
        spec["window"] = window
    for flag in ("nonnegative", "monotone", "integer"):
        if draw(st.integers(0, 3)) == 0:
            spec[flag] = True
    if draw(st.integers(0, 4)) == 0:
        spec["confidence"] = draw(st.sampled_from([0.5, 0.99]))
    return spec


# -- library mode ------------------------------------------------------------------------------
def _number(v: Any) -> Any:
    return language.number(v) if isinstance(v, str) else v


def library_call(spec: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The aggregation and keyword arguments of ``query.continual`` for ``spec`` (the same
    conversions as :func:`dpkit.server.streams.open_stream`; may raise, before the debit)."""
    a = spec["aggregation"]
    agg = dp.count() if a["agg"] == "count" else dp.sum(
        a["column"], None if "bounds" not in a else tuple(_number(b) for b in a["bounds"]))
    origin = spec.get("origin")
    if isinstance(origin, str):
        origin = date.fromisoformat(origin) if len(origin) == 10 else datetime.fromisoformat(
            origin)
    every = spec.get("every")
    if every is not None and isinstance(origin, date):
        every = (timedelta(seconds=every) if isinstance(origin, datetime)
                 else timedelta(days=every))
    kwargs = {"time": spec["time"], "horizon": spec["horizon"], "mechanism": spec["mechanism"],
              "keys": spec.get("keys"), "by": spec.get("by"), "window": spec.get("window"),
              "origin": origin, "every": every, "beta": 1 - spec.get("confidence", 0.95),
              **{k: _number(v) for k, v in spec["budget"].items()},
              **{f: True for f in ("nonnegative", "monotone", "integer") if spec.get(f)}}
    return agg, kwargs


class Increments:
    """Record every step's exact increments (per key) and the stream's w·Δ, unchanged."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.steps: list[tuple[list[int], int]] = []
        real = ContinualRelease._increments
        steps = self.steps

        def increments(stream: ContinualRelease, frame: pl.DataFrame) -> list[int]:
            out = real(stream, frame)
            steps.append((list(out), stream.config["contributions"] * stream.sensitivity))
            return out

        mp.setattr(ContinualRelease, "_increments", increments)


def stream_violations(small: list[tuple[list[int], int]], large: list[tuple[list[int], int]]
                      ) -> list[str]:
    """(a): over the whole stream, Σ |inc − inc′| over steps and keys ≤ w·Δ."""
    if not small or len(small) != len(large):
        return []
    bound = small[0][1]
    moved = sum(abs(x - y) for (a, _), (b, _) in zip(small, large, strict=True)
                for x, y in zip(a, b, strict=True))
    if moved > bound:
        return [f"(a) stream increments moved by {moved} > w·Δ = {bound}: "
                f"{[s[0] for s in small]} -> {[s[0] for s in large]}"]
    return []


def _problem(run: Run, where: str, exc: BaseException) -> None:
    text = exception_text(exc)
    found = leaks(text)
    if found:
        run.problems.append(f"(c) {where} contains data values {found}: {text[:600]}")
    run.problems.append(f"(b) {where} raised after the debit: {text[:600]}")


def run_library(table: pl.DataFrame, unit: dp.PrivacyUnit, measure: str, spec: dict[str, Any],
                ledger: Any, directory: Path, key: bytes
                ) -> tuple[Run, list[tuple[list[int], int]]]:
    """Open ``spec`` as ``query.continual(…)`` on a session over ``table`` (through
    ``ledger``), release every step (at most 5), save, restore and go on, and try a stale
    copy; (b) anything but a documented refusal after the open, (c) a data value in any
    error text or log record."""
    run = Run()
    mp = pytest.MonkeyPatch()
    incs = Increments(mp)
    try:
        with Recorder() as rec:
            session = dp.Session(table, unit, BUDGETS[measure], ledger=ledger,
                                 dataset=f"fuzz-stream-{measure}-{unit}")
            try:
                agg, kwargs = library_call(spec)
                query = Query.from_json(session, {"steps": spec["steps"]})
                stream = query.continual(agg, **kwargs)
            except Exception as exc:
                text = exception_text(exc)
                if leaks(text):
                    run.problems.append(f"(c) a refusal contains data values: {text[:600]}")
                if rec.since(0, "debit"):
                    run.problems.append(f"(b) the open raised after its debit: {text[:600]}")
                run.notes.append(f"refused: {type(exc).__name__}")
                return run, incs.steps
            _walk(run, query, stream, directory, key)
        for line in rec.logs.lines:
            if leaks(line):
                run.problems.append(f"(c) a log record contains data values: {line[:600]}")
    finally:
        mp.undo()
    return run, incs.steps


def _walk(run: Run, query: Any, stream: Any, directory: Path, key: bytes) -> None:
    """Every step (at most 5), with a save after the second and a restore from it."""
    last = stream.horizon if stream.horizon is not None else 5
    saved: Path | None = None
    for t in range(1, min(last, 5) + 1):
        try:
            path = directory / f"step{t}.state"
            stream.advance(save=(path, key))
            run.releases.append(_ok())
        except Exception as exc:
            _problem(run, f"step {t}", exc)
            return
        if t == 2:
            saved = path
    if saved is not None and stream.t > 2:
        try:
            query.continual.restore(saved, key)
            run.problems.append("(b) a stale state was restored (its steps could be redrawn)")
        except StreamRollbackError:
            pass
        except Exception as exc:
            _problem(run, "a stale restore", exc)
    if stream.t == 0:
        return
    try:
        again = query.continual.restore(directory / f"step{stream.t}.state", key)
    except Exception as exc:
        _problem(run, "the restore", exc)
        return
    try:
        again.advance()
    except HorizonExceededError:
        if again.horizon is None or again.t < again.horizon:
            run.problems.append("(b) HorizonExceededError before the horizon")
    except Exception as exc:
        _problem(run, "a step after the restore", exc)


def _ok() -> Release:
    return Release(True, [], [])


# -- over HTTP ---------------------------------------------------------------------------------
KEY_ENV = "DPKIT_FUZZ_STREAM_KEY"


def run_server(directory: Path, pair: Pair, unit: Any, measure: str, spec: dict[str, Any]
               ) -> tuple[Run, Run, list[list[tuple[list[int], int]]]]:
    """Open ``spec`` on two served datasets holding ``pair.small`` and ``pair.large`` and
    walk each stream over HTTP: ``next`` twice, the history, another worker's restore and
    ``next`` to the horizon. (b) a 5xx, a refusal that debited, a non-200 after the open
    other than the horizon's 422 once closed, a failed ledger row; (c) a data value in a
    body or a log line. The caller sets ``$DPKIT_FUZZ_STREAM_KEY``."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with")
        from fastapi.testclient import TestClient
    from dpkit.server.app import create_app
    from dpkit.server.config import parse_config

    for name, t in (("d0", pair.small), ("d1", pair.large)):
        t.write_parquet(directory / f"{name}.parquet")
    cfg = parse_config({"ledger": "ledger.sqlite", "ledger_key_env": KEY_ENV, "datasets": [
        {"name": name, "source": {"kind": "parquet", "path": f"{name}.parquet"},
         "privacy_unit": _unit_config(unit), "budget": CONFIG_BUDGETS[measure]}
        for name in ("d0", "d1")]}, base=directory)
    runs, recorded = (Run(), Run()), [[], []]
    body = json.dumps(spec, default=str)
    mp = pytest.MonkeyPatch()
    incs = Increments(mp)
    try:
        with Recorder() as rec:
            app = create_app(cfg)
            ledger = app.state.dpkit.ledger
            token = ledger.add_analyst("fuzz")
            headers = {"Authorization": f"Bearer {token}",
                       "Content-Type": "application/json"}
            for name in ("d0", "d1"):
                ledger.grant("fuzz", name)
            with TestClient(app, raise_server_exceptions=False) as http:
                other = TestClient(create_app(cfg), raise_server_exceptions=False)
                for i, name in enumerate(("d0", "d1")):
                    before = len(incs.steps)
                    _walk_http(runs[i], http, other, ledger, name, body, headers)
                    recorded[i] = incs.steps[before:]
                other.close()
            for r in ledger.releases():
                if r["status"] == "failed":
                    runs[int(r["dataset"] == "d1")].problems.append(
                        f"(b) ledger row {r['id']} is 'failed'")
        for line in rec.logs.lines:
            if leaks(line):
                runs[0].problems.append(f"(c) a log line contains data values: {line[:600]}")
    finally:
        mp.undo()
    return runs[0], runs[1], recorded


def _walk_http(run: Run, http: Any, other: Any, ledger: Any, name: str, body: str,
               headers: dict[str, str]) -> None:
    spent = ledger.count()
    r = http.post(f"/v1/datasets/{name}/streams", content=body, headers=headers)
    if not _check(run, "open", r):
        if ledger.count() != spent:
            run.problems.append(f"(b) a refused open ({r.status_code}) debited: {r.text[:300]}")
        return
    run.releases.append(_ok())
    sid = r.json()["stream_id"]
    calls = [(http, "post", "next", {"max_steps": 2}), (http, "get", "", {"since": 1}),
             (other, "get", "", {}), (other, "post", "next", {"max_steps": 5}),
             (http, "post", "next", {"max_steps": 1})]
    for client, verb, what, payload in calls:
        url = f"/v1/streams/{sid}" + (f"/{what}" if what else "")
        r = (client.post(url, json=payload, headers=headers) if verb == "post"
             else client.get(url, params=payload, headers=headers))
        closed = r.status_code == 422 and '"HorizonExceededError"' in r.text
        if not closed and not _check(run, f"{verb} {url}", r):
            return


def _check(run: Run, where: str, r: Any) -> bool:
    """Record the status; (c) on the body; (b) on a 5xx; whether it was 200."""
    run.statuses.append(r.status_code)
    found = leaks(r.text)
    if found:
        run.problems.append(f"(c) {where} ({r.status_code}) contains data values {found}: "
                            f"{r.text[:600]}")
    if r.status_code >= 500:
        run.problems.append(f"(b) {where}: HTTP {r.status_code}: {r.text[:400]}")
    elif r.status_code != 200 and where != "open":
        run.problems.append(f"(b) {where} after the open: HTTP {r.status_code}: {r.text[:400]}")
    return r.status_code == 200


