"""Continual releases hosted by the server (issue 20, :mod:`dpkit.stream`).

An analyst opens a stream over a served dataset with a time column::

    POST /v1/datasets/{name}/streams
    {"steps": [...query steps...], "aggregation": {"agg": "count"}, "time": "day",
     "horizon": 365, "mechanism": "smooth", "budget": {"rho": "1/2"},
     "origin": "2024-01-01", "keys": ["a", "b"], "by": "region", "window": 7}

and is charged the budget once, through the ledger, against the dataset's and their own
caps (:class:`~dpkit.stream.ContinualQuery`, as ``query.continual(…)`` on a Session). Then
``POST /v1/streams/{id}/next`` (``{"max_steps": k}``) releases the next steps that are
available — each step's running totals (per key) with their (1 − β) intervals, the step's
time interval, and the sliding window if asked — and ``GET /v1/streams/{id}?offset=&limit=`` returns
the stream and a page of the steps released so far, those after step ``offset`` (``since``
is its older name), at most ``limit`` ≤ :data:`MAX_PAGE` steps and :data:`MAX_CELLS_PER_REQUEST`
cells (a lost response loses nothing).

Availability (public, never read from the data): step t covers the times
[origin + (t − 1)·every, origin + t·every); with a date or datetime time column it is
available once that interval has ended by the server's UTC clock; with an integer time column
every step up to the horizon is (the analyst decides when to ask). Late rows are never
counted (:mod:`dpkit.stream.frames`).

State. A stream's secret state (open node sums, secret noise, per-unit counts, and the last
released step) lives in ``streams_dir`` as Fernet tokens under the ledger's encryption key
(``ledger_key_env``): ``<release id>/<step>-<writer>.state``; it is O(keys) (with a window,
O(keys·W); "factorization" keeps its O(t) history), whatever the number of steps released.
Every step is written *before* it is recorded in the ledger's step high-water mark with the
state's MAC (:meth:`~dpkit.ledger.Ledger.advance_stream`), and a request restores the one
file whose step and MAC the ledger names: any worker can serve any stream, two concurrent
requests release a step once (the loser gets 409 and deletes its file), and a stale or
foreign file is never used (:class:`~dpkit.errors.StreamRollbackError`). Older files are
deleted after each step; a request whose file was deleted under it by a concurrent request
(which moved the mark) reads the mark again, then answers 409 (ask again), never a 500.

History. The released steps (public once released) are kept outside the secret state, in an
append-only log ``<release id>/history.log``: one JSON line per step, ``{"t", "step",
"mac"}``, with mac = HMAC-SHA256 under a key derived from the ledger's encryption key of
(stream id, t, the step's canonical JSON), and a file of 8-byte offsets (``history.idx``) so
that a page costs O(page), not O(t). Only the request that won the ledger's compare-and-set
appends a step (a loser's noise is never written), under an exclusive ``flock``; a step
recorded in the ledger but not yet appended (the writer stopped in between) is recovered
from the state the mark names, which holds the last released step, before that stream is
read or advanced: a released step is never lost. A torn tail (a crash mid-append) is cut at
the last complete line. A reader checks every line of its page (MAC, t) and that the log
reaches the state's step: an edited, dropped, reordered or moved line is refused
(:class:`StreamHistoryError`), never served.

Limits (declared quantities, checked before anything is computed): horizon ≤
:data:`MAX_HORIZON`, keys ≤ :data:`MAX_KEYS`, keys × horizon ≤ :data:`MAX_CELLS` (the log's
size), ≤ :data:`MAX_STATE_CELLS` for "factorization" (its state is its history), keys ×
(window + 1) ≤ :data:`MAX_WINDOW_CELLS` (the window's state), steps per request ≤
:data:`MAX_STEPS_PER_REQUEST` and keys × steps per request ≤ :data:`MAX_CELLS_PER_REQUEST`
(a ``/next`` and a history page alike).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from dpkit.errors import DomainError, DPError, LedgerError, StreamRollbackError
from dpkit.frame import language
from dpkit.frame.query import Query
from dpkit.server import protocol
from dpkit.stream import (
    MECHANISMS,
    ContinualNamespace,
    ContinualQuery,
    ContinualStep,
    HorizonExceededError,
)

__all__ = ["StreamRequest", "NextRequest", "StreamStore", "StreamLostError",
           "StreamNotFoundError", "StreamBusyError", "StreamHistoryError", "open_stream",
           "load_stream", "advance", "info", "history", "check_next", "MAX_HORIZON",
           "MAX_KEYS", "MAX_CELLS", "MAX_STATE_CELLS", "MAX_WINDOW_CELLS", "MAX_STEPS_PER_REQUEST",
           "MAX_CELLS_PER_REQUEST", "MAX_PAGE"]

MAX_HORIZON = 100_000
MAX_KEYS = 1_000
MAX_CELLS = 2_000_000
MAX_STATE_CELLS = 200_000
MAX_WINDOW_CELLS = 50_000
MAX_STEPS_PER_REQUEST = 1_000
MAX_CELLS_PER_REQUEST = 20_000
MAX_PAGE = 1_000
_RETRIES = 3  # loads of a stream whose state vanished under a concurrent request
_PREFIX = "continual "  # the ledger description of every stream (dpkit.stream.frames)

Name = Annotated[str, Field(min_length=1, max_length=language.MAX_NAME)]
Number = int | float | Annotated[str, Field(max_length=64)]
Key = bool | int | Annotated[str, Field(max_length=language.MAX_TEXT)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StreamAggregation(_Model):
    """``{"agg": "count"}`` or ``{"agg": "sum", "column": …, "bounds": [lower, upper]}``."""

    agg: Literal["count", "sum"]
    column: Name | None = None
    bounds: tuple[Number, Number] | None = None  # not both integers: a real-valued sum


class StreamBudget(_Model):
    """The whole stream's budget: ``epsilon`` (pure, discrete Laplace) or ``rho`` (zCDP,
    discrete Gaussian); numbers or exact rationals as strings."""

    epsilon: Number | None = None
    rho: Number | None = None


class StreamRequest(_Model):
    """A continual release over a served dataset (module docstring); its ``steps`` are the
    language registry's, as a release's (the name is rebound to a model generated from the
    registry, like :data:`dpkit.server.protocol.QueryRequest`)."""

    steps: list[Any] = Field(default_factory=list, max_length=protocol.MAX_STEPS)
    aggregation: StreamAggregation
    time: Name
    horizon: int | None = Field(default=None, ge=1, le=MAX_HORIZON)
    mechanism: Literal[tuple(MECHANISMS)] = "smooth"  # type: ignore[valid-type]
    budget: StreamBudget
    origin: Annotated[int, Field(ge=-(2**62), le=2**62)] | Annotated[
        str, Field(max_length=40)] | None = None
    every: int | None = Field(default=None, ge=1, le=10**9)
    keys: list[Key] | None = Field(default=None, min_length=1, max_length=MAX_KEYS)
    by: Name | None = None
    window: int | None = Field(default=None, ge=1, le=MAX_HORIZON)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    nonnegative: bool = False
    monotone: bool = False
    integer: bool = False


_BASE = StreamRequest


def _generate() -> None:
    """Rebind :class:`StreamRequest` to the registry as it is now (the query protocol's
    step models; registered after it, so it reads the new ones)."""
    globals()["StreamRequest"] = create_model(
        "StreamRequest", __base__=_BASE, __doc__=_BASE.__doc__,
        steps=(protocol.step_list(), Field(default_factory=list, max_length=protocol.MAX_STEPS)))


_generate()
language.on_change(_generate)


class NextRequest(_Model):
    """How many available steps to release at most."""

    max_steps: int = Field(default=1, ge=1, le=MAX_STEPS_PER_REQUEST)


class StreamNotFoundError(DPError, LookupError):
    """No stream with this id belongs to the caller on this dataset."""


class StreamLostError(LedgerError):
    """No saved state of a stream matches the ledger's step mark (the writer of its last
    step died before saving it): the stream cannot go on; its releases stand."""


class StreamBusyError(LedgerError):
    """Concurrent requests moved the stream while this one read it: ask again (409)."""


class StreamHistoryError(LedgerError):
    """The released history fails its integrity check (a line edited, dropped, reordered or
    moved from another stream): it is not served."""


class StreamStore:
    """Where hosted streams keep their encrypted states (module docstring).

    Parameters
    ----------
    directory : Path or None
        ``streams_dir`` (None: hosting is off).
    key : bytes or None
        The Fernet key (the ledger's encryption key; None: hosting is off).
    """

    def __init__(self, directory: Path | None, key: bytes | None) -> None:
        self.directory, self.key = directory, key

    @property
    def enabled(self) -> bool:
        return self.directory is not None and self.key is not None

    @property
    def secret(self) -> bytes:
        """The Fernet key (hosting is on)."""
        assert self.key is not None
        return self.key

    def folder(self, stream_id: int) -> Path:
        """The stream's own folder (its states only)."""
        assert self.directory is not None
        return self.directory / str(int(stream_id))

    def path(self, stream_id: int, step: int) -> Path:
        """A new file for the state of ``stream_id`` after ``step`` (unique per writer and
        attempt: process, thread and clock; no two writers share a name)."""
        folder = self.folder(stream_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        writer = f"{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}"
        return folder / f"{int(step)}-{writer}.state"

    def candidates(self, stream_id: int, step: int) -> list[Path]:
        return sorted(self.folder(stream_id).glob(f"{int(step)}-*.state"))

    def cleanup(self, stream_id: int, step: int) -> None:
        """Delete the states of steps before ``step`` (superseded by the ledger's mark)."""
        for old in self.folder(stream_id).glob("*.state"):
            first = old.name.split("-", 1)[0]
            if first.isdigit() and int(first) < step:
                old.unlink(missing_ok=True)

    # -- the released history (module docstring) -------------------------------------------
    def history_path(self, stream_id: int) -> Path:
        """The stream's append-only log of released steps."""
        return self.folder(stream_id) / "history.log"

    def _mac(self, stream_id: int, t: int, body: str) -> str:
        """The MAC of step t's canonical JSON ``body`` (:func:`_canonical`) in this stream."""
        key = hmac.new(self.secret, b"dpkit stream history", hashlib.sha256).digest()
        return hmac.new(key, f"{int(stream_id)}:{int(t)}:{body}".encode(),
                        hashlib.sha256).hexdigest()

    @contextmanager
    def _locked(self, stream_id: int) -> Iterator[None]:
        folder = self.folder(stream_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(folder / "history.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def append(self, stream_id: int, step: dict[str, Any]) -> None:
        """Append released step ``step["t"]`` to the log (once: a step already there is
        skipped; the log must end at t − 1), durably, under the stream's lock."""
        t = int(step["t"])
        with self._locked(stream_id):
            logged = self._repair(stream_id)
            if logged >= t:
                return  # already logged (a recovery, or the winner, came first)
            if logged != t - 1:
                raise StreamHistoryError(f"stream {stream_id}: the log ends at step "
                                         f"{logged}, before step {t - 1}")
            body = _canonical(step)  # the line is {"mac", "step", "t"} in canonical JSON
            mac = self._mac(stream_id, t, body)
            line = f'{{"mac":"{mac}","step":{body},"t":{t}}}\n'.encode()
            log = self.history_path(stream_id)
            with open(log, "ab") as f:
                start = f.tell()
                f.write(line)
                f.flush()
                os.fsync(f.fileno())
            with open(log.with_suffix(".idx"), "ab") as f:
                f.write(struct.pack("<Q", start))

    def _repair(self, stream_id: int) -> int:
        """Under the lock: cut a torn tail (a line without its newline) and bring the offsets
        file up to the log's complete lines; the number of logged steps. Reads the offsets
        file's last entries and the log after the last indexed line only (O(1) in t); an
        offsets file that does not match the log (its last entry not the start of step n's
        line: the log was edited or replaced) is rebuilt from the log, O(t)."""
        log = self.history_path(stream_id)
        idx = log.with_suffix(".idx")
        if not log.exists():
            log.touch(mode=0o600)
        size = log.stat().st_size
        with open(idx, "a+b") as f, open(log, "rb+") as g:
            n = f.tell() // 8  # a torn entry (not 8 bytes) is dropped below
            last = -1
            while n:  # the last indexed line that the log still holds
                f.seek(8 * (n - 1))
                (last,) = struct.unpack("<Q", f.read(8))
                if last < size:
                    break
                n, last = n - 1, -1
            if last >= 0 and not _starts_step(g, last, n):
                n, last = 0, -1  # rebuild: every entry is suspect
            start = max(last, 0)
            g.seek(start)
            tail = g.read()
            lines = tail.split(b"\n")
            if lines[-1]:  # a torn tail: never a complete (released) line
                g.truncate(start + len(tail) - len(lines[-1]))
            found, pos = [], start
            for text in lines[:-1]:
                found.append(pos)
                pos += len(text) + 1
            keep = n - 1 if last >= 0 else 0  # the last indexed line is re-found in ``found``
            f.truncate(8 * keep)
            f.seek(8 * keep)
            f.write(b"".join(struct.pack("<Q", o) for o in found))
            return keep + len(found)

    def page(self, stream_id: int, upto: int, offset: int, limit: int
             ) -> list[dict[str, Any]]:
        """Released steps offset + 1 … min(offset + limit, upto), each checked (MAC, t);
        O(limit) reads through the offsets file.

        Raises
        ------
        StreamHistoryError
            If a line of the page is missing or fails its check.
        """
        try:
            return self._page(stream_id, upto, offset, limit)
        except StreamHistoryError:
            with self._locked(stream_id):  # the offsets may be stale (an edited log, since
                self._rebuild(stream_id)   # restored): rebuild them from the log, once
            return self._page(stream_id, upto, offset, limit)

    def _rebuild(self, stream_id: int) -> None:
        """Under the lock: rewrite the offsets file from the whole log (O(t))."""
        self.history_path(stream_id).with_suffix(".idx").write_bytes(b"")
        self._repair(stream_id)

    def _page(self, stream_id: int, upto: int, offset: int, limit: int
              ) -> list[dict[str, Any]]:
        last = min(offset + limit, upto)
        if last <= offset:
            return []
        log = self.history_path(stream_id)
        out = []
        try:
            with open(log.with_suffix(".idx"), "rb") as f:
                f.seek(8 * offset)
                raw = f.read(8 * (last - offset))
            with open(log, "rb") as f:
                for t, (start,) in enumerate(struct.iter_unpack("<Q", raw[:len(raw) - len(
                        raw) % 8]), offset + 1):
                    f.seek(start)
                    doc = json.loads(f.readline())
                    mac = self._mac(stream_id, t, _canonical(doc["step"]))
                    if not (doc["t"] == t == doc["step"]["t"]
                            and hmac.compare_digest(str(doc["mac"]), mac)):
                        raise ValueError("a line fails its check")
                    out.append(doc["step"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StreamHistoryError(f"stream {stream_id}: its released history fails its "
                                     "integrity check") from exc
        if len(out) != last - offset:
            raise StreamHistoryError(f"stream {stream_id}: its released history fails its "
                                     "integrity check")
        return out

    def recover(self, stream: ContinualQuery) -> None:
        """Append the state's last released step if the log lacks it (its writer stopped
        between the ledger's mark and the log), and move a pre-log state's history out."""
        sid = int(stream.release_id or 0)
        old = stream.extra.pop("history", None)
        stream.extra.pop("history_limit", None)
        if isinstance(old, list):  # saved before the log existed (the steps it kept)
            for step in old:
                self.append(sid, step)
        last = stream.state.get("released")
        if stream.t and isinstance(last, dict) and int(last["t"]) == stream.t:
            self.append(sid, last)


def _starts_step(log: BinaryIO, offset: int, t: int) -> bool:
    """Whether a line of ``log`` starts at ``offset`` and is step ``t``."""
    if offset:
        log.seek(offset - 1)
        if log.read(1) != b"\n":
            return False
    else:
        log.seek(0)
    try:
        doc = json.loads(log.readline())
        return isinstance(doc, dict) and doc.get("t") == t
    except ValueError:
        return False


def _canonical(step: dict[str, Any]) -> str:
    return json.dumps(step, sort_keys=True, separators=(",", ":"))


def _origin(raw: int | str | None) -> Any:
    if raw is None or isinstance(raw, int):
        return raw
    try:
        return date.fromisoformat(raw) if len(raw) == 10 else datetime.fromisoformat(raw)
    except ValueError:
        raise DomainError(f"origin {raw!r} is not an integer, an ISO date or datetime"
                          ) from None


def _every(raw: int | None, origin: Any) -> Any:
    from datetime import timedelta

    if raw is None or not isinstance(origin, date):
        return raw
    return timedelta(seconds=raw) if isinstance(origin, datetime) else timedelta(days=raw)


def open_stream(session: Any, request: StreamRequest, store: StreamStore,
                analyst: str) -> ContinualQuery:
    """Open (and pay for) a stream on ``session``'s table, and save its opening state.

    ``every`` counts time units for an integer time column, days for a date origin and
    seconds for a datetime origin.

    Raises
    ------
    ProtocolError, DomainError, BoundsError, ColumnError
        Before the debit (a malformed or refused request).
    BudgetExceededError
        If the dataset's or the analyst's cap cannot pay (nothing debited).
    """
    n_keys = 1 if request.keys is None else len(request.keys)
    if request.horizon is not None and n_keys * request.horizon > MAX_CELLS:
        raise DomainError(f"keys × horizon = {n_keys * request.horizon} exceeds {MAX_CELLS}")
    if (request.mechanism == "factorization" and request.horizon is not None
            and n_keys * request.horizon > MAX_STATE_CELLS):
        raise DomainError(f"factorization keeps its history in its state: keys × horizon = "
                          f"{n_keys * request.horizon} exceeds {MAX_STATE_CELLS}")
    if request.window is not None and n_keys * (request.window + 1) > MAX_WINDOW_CELLS:
        raise DomainError(f"keys × (window + 1) = {n_keys * (request.window + 1)} exceeds "
                          f"{MAX_WINDOW_CELLS}")
    if request.horizon is None and request.mechanism not in ("increments", "hybrid"):
        raise DomainError(f"{request.mechanism} needs a horizon")
    agg = request.aggregation
    if agg.agg == "sum":
        if agg.column is None or agg.bounds is None:
            raise DomainError("a continual sum needs a column and bounds [lower, upper]")
        aggregation = language.decode_agg({"agg": "sum", "column": agg.column,
                                           "bounds": list(agg.bounds)})
    else:
        if agg.column is not None or agg.bounds is not None:
            raise DomainError("a continual count takes no column or bounds")
        aggregation = language.decode_agg({"agg": "count"})
    budget = {k: language.number(v) for k, v in (("epsilon", request.budget.epsilon),
                                                  ("rho", request.budget.rho)) if v is not None}
    origin = _origin(request.origin)
    options: dict[str, Any] = {
        "mechanism": request.mechanism, "keys": request.keys, "by": request.by,
        "window": request.window, "origin": origin, "every": _every(request.every, origin),
        "beta": 1 - request.confidence, "nonnegative": request.nonnegative,
        "monotone": request.monotone, "integer": request.integer, **budget}
    steps = request.model_dump(include={"steps"}, exclude_unset=True).get("steps", [])
    query = Query.from_json(session, {"steps": steps})
    stream = ContinualNamespace(query)(aggregation, time=request.time, horizon=request.horizon,
                                       **options)
    stream.extra = {"analyst": analyst, "dataset": session.dataset, "steps": steps}
    stream.save(store.path(stream.release_id, 0), store.secret)
    return stream


def load_stream(session: Any, store: StreamStore, stream_id: int,
                analyst: str) -> ContinualQuery:
    """The stream ``stream_id`` of ``analyst`` on ``session``'s dataset, restored from the
    state the ledger's step mark names.

    Raises
    ------
    StreamNotFoundError
        No such stream of this analyst on this dataset.
    StreamLostError
        No saved state matches the ledger's mark.
    StreamBusyError
        Concurrent requests kept moving the mark while this one read it (ask again).
    """
    ledger = session.accountant.ledger
    row = ledger.release(stream_id)
    if (row is None or row["analyst"] != analyst or row["dataset"] != session.dataset
            or not str(row["query"]).startswith(_PREFIX) or row["status"] != "released"):
        raise StreamNotFoundError(f"no stream {stream_id} of yours")
    for _ in range(_RETRIES):
        step, _ = ledger.stream_step(stream_id)
        stream = _restore(session, store, stream_id, step)
        if stream is not None:
            if stream.extra.get("analyst") != analyst:
                raise StreamNotFoundError(f"no stream {stream_id} of yours")
            stream.query = Query.from_json(session, {"steps": stream.extra.get("steps", [])})
            store.recover(stream)
            return stream
        if ledger.stream_step(stream_id)[0] == step:
            raise StreamLostError(f"stream {stream_id}: no saved state at step {step} (its "
                                  "writer stopped before saving it); its releases stand, "
                                  "open a new stream")
    raise StreamBusyError(f"stream {stream_id} is being advanced by other requests: ask again")


def _restore(session: Any, store: StreamStore, stream_id: int, step: int
             ) -> ContinualQuery | None:
    """The state the ledger's mark names among the files of ``step``, or None."""
    for path in store.candidates(stream_id, step):
        try:
            stream = ContinualQuery.restore(path, store.secret, session.accountant)
        except (StreamRollbackError, DomainError, FileNotFoundError):
            # another writer's state (it lost the race), a foreign file, or a file deleted
            # by a concurrent request's cleanup after it moved the mark
            continue
        assert isinstance(stream, ContinualQuery)
        return stream
    return None


def _available(end: Any, now: datetime) -> bool:
    if isinstance(end, datetime):
        current = now if end.tzinfo is not None else now.replace(tzinfo=None)
        return end <= current
    if isinstance(end, date):
        return end <= now.date()
    return True


def _json_time(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


def advance(stream: ContinualQuery, store: StreamStore, max_steps: int,
            now: datetime | None = None) -> list[dict[str, Any]]:
    """Release up to ``max_steps`` available steps (module docstring); each is saved before
    the ledger records it. Returns the steps (:func:`step_json`).

    Raises
    ------
    HorizonExceededError
        If the stream had already reached its horizon.
    StreamRollbackError
        If another request released the next step first (nothing released here).
    """
    now = now or datetime.now(UTC)
    if stream.horizon is not None and stream.t >= stream.horizon:
        raise HorizonExceededError(f"stream {stream.release_id} reached its horizon of "
                                   f"{stream.horizon} steps")
    check_next(stream, max_steps)
    out = []
    for _ in range(max_steps):
        if stream.horizon is not None and stream.t >= stream.horizon:
            break
        if not _available(stream.interval(stream.t + 1)[1], now):
            break
        path = store.path(stream.release_id, stream.t + 1)
        try:
            step = stream.advance(save=(path, store.secret))
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        released = step.as_dict()
        store.append(int(stream.release_id or 0), released)  # after the mark: the winner's
        out.append(step_json(stream, released))
    store.cleanup(stream.release_id, stream.t)
    return out


def check_next(stream: ContinualQuery, max_steps: int) -> None:
    """Refuse a ``/next`` whose keys × steps exceeds :data:`MAX_CELLS_PER_REQUEST` (declared
    quantities; before anything is computed).

    Raises
    ------
    DomainError
        If it does.
    """
    cells = len(stream.keys) * int(max_steps)
    if cells > MAX_CELLS_PER_REQUEST:
        raise DomainError(f"keys × max_steps = {cells} exceeds {MAX_CELLS_PER_REQUEST}: ask "
                          f"for at most {max(MAX_CELLS_PER_REQUEST // len(stream.keys), 1)} "
                          "steps")


def history(stream: ContinualQuery, store: StreamStore, offset: int, limit: int
            ) -> list[dict[str, Any]]:
    """The released steps after step ``offset``, at most ``limit`` (≤ :data:`MAX_PAGE`) and
    :data:`MAX_CELLS_PER_REQUEST` cells, from the log (:meth:`StreamStore.page`).

    Raises
    ------
    DomainError
        For a negative offset or a limit outside 1 … :data:`MAX_PAGE`.
    StreamHistoryError
        If the page fails its integrity check.
    """
    if offset < 0 or not 1 <= limit <= MAX_PAGE:
        raise DomainError(f"offset must be ≥ 0 and limit in 1 … {MAX_PAGE}")
    limit = min(limit, max(MAX_CELLS_PER_REQUEST // len(stream.keys), 1))
    steps = store.page(int(stream.release_id or 0), stream.t, offset, limit)
    return [step_json(stream, s) for s in steps]


def step_json(stream: ContinualQuery, step: dict[str, Any]) -> dict[str, Any]:
    """A released step with its time interval."""
    lo, hi = stream.interval(int(step["t"]))
    return {**step, "interval": [_json_time(lo), _json_time(hi)]}


def info(stream: ContinualQuery, steps: list[dict[str, Any]] | None = None,
         now: datetime | None = None) -> dict[str, Any]:
    """The stream as the API shows it: id, dataset, description, mechanism, horizon, the
    step reached, whether it is closed, the next step's interval and availability, its loss,
    and ``steps`` (the steps just released, or a page of the history)."""
    now = now or datetime.now(UTC)
    closed = stream.horizon is not None and stream.t >= stream.horizon
    nxt = None if closed else stream.interval(stream.t + 1)
    loss = stream.loss
    steps = [] if steps is None else steps
    return {"stream_id": stream.release_id, "dataset": stream.extra.get("dataset"),
            "description": stream.description, "mechanism": stream.config["mechanism"],
            "horizon": stream.horizon, "t": stream.t, "closed": closed,
            "next_interval": None if nxt is None else [_json_time(v) for v in nxt],
            "next_available": nxt is not None and _available(nxt[1], now),
            "loss": loss.as_json(),
            "steps": steps}


def from_json(doc: dict[str, Any]) -> ContinualStep:
    """A step of the API's form as a :class:`~dpkit.stream.ContinualStep`."""
    return ContinualStep.from_dict(doc)
