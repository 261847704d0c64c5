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
time interval, and the sliding window if asked — and ``GET /v1/streams/{id}`` returns the
stream and every step released so far (a lost response loses nothing).

Availability (public, never read from the data): step t covers the times
[origin + (t − 1)·every, origin + t·every); with a date or datetime time column it is
available once that interval has ended by the server's UTC clock; with an integer time column
every step up to the horizon is (the analyst decides when to ask). Late rows are never
counted (:mod:`dpkit.stream.frames`).

State. A stream's state (open node sums, secret noise, per-unit counts, the released steps)
lives in ``streams_dir`` as Fernet tokens under the ledger's encryption key
(``ledger_key_env``): ``<release id>/<step>-<writer>.state``. Every step is written *before*
it is recorded in the ledger's step high-water mark with the state's MAC
(:meth:`~dpkit.ledger.Ledger.advance_stream`), and a request restores the one file whose step
and MAC the ledger names: any worker can serve any stream, two concurrent requests release a
step once (the loser gets 409 and deletes its file), and a stale or foreign file is never
used (:class:`~dpkit.errors.StreamRollbackError`). Older files are deleted after each step.

Limits: horizon ≤ :data:`MAX_HORIZON`, keys ≤ :data:`MAX_KEYS`, keys × horizon ≤
:data:`MAX_CELLS` (the released steps are kept with the state; a stream without a horizon —
"increments", "hybrid" — keeps its newest :data:`MAX_CELLS` ÷ keys steps), steps per request
≤ :data:`MAX_STEPS_PER_REQUEST`.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dpkit.errors import DomainError, DPError, LedgerError, StreamRollbackError
from dpkit.frame import language
from dpkit.frame.query import Query
from dpkit.stream import (
    MECHANISMS,
    ContinualNamespace,
    ContinualQuery,
    ContinualStep,
    HorizonExceededError,
)

__all__ = ["StreamRequest", "NextRequest", "StreamStore", "StreamLostError",
           "StreamNotFoundError", "open_stream", "load_stream", "advance", "info",
           "MAX_HORIZON", "MAX_KEYS", "MAX_CELLS", "MAX_STEPS_PER_REQUEST"]

MAX_HORIZON = 100_000
MAX_KEYS = 1_000
MAX_CELLS = 200_000
MAX_STEPS_PER_REQUEST = 1_000
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
    """A continual release over a served dataset (module docstring)."""

    steps: list[dict[str, Any]] = Field(default_factory=list, max_length=32)
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


class NextRequest(_Model):
    """How many available steps to release at most."""

    max_steps: int = Field(default=1, ge=1, le=MAX_STEPS_PER_REQUEST)


class StreamNotFoundError(DPError, LookupError):
    """No stream with this id belongs to the caller on this dataset."""


class StreamLostError(LedgerError):
    """No saved state of a stream matches the ledger's step mark (the writer of its last
    step died before saving it): the stream cannot go on; its releases stand."""


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
    query = Query.from_json(session, {"steps": request.steps})
    stream = ContinualNamespace(query)(aggregation, time=request.time, horizon=request.horizon,
                                       **options)
    stream.extra = {"analyst": analyst, "dataset": session.dataset, "steps": request.steps,
                    "history": [], "history_limit": MAX_CELLS // n_keys}
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
    """
    ledger = session.accountant.ledger
    row = ledger.release(stream_id)
    if (row is None or row["analyst"] != analyst or row["dataset"] != session.dataset
            or not str(row["query"]).startswith(_PREFIX) or row["status"] != "released"):
        raise StreamNotFoundError(f"no stream {stream_id} of yours")
    step, _ = ledger.stream_step(stream_id)
    for path in store.candidates(stream_id, step):
        try:
            stream = ContinualQuery.restore(path, store.secret, session.accountant)
        except (StreamRollbackError, DomainError):
            continue  # another writer's state (it lost the race) or a foreign file
        if stream.extra.get("analyst") != analyst:
            raise StreamNotFoundError(f"no stream {stream_id} of yours")
        assert isinstance(stream, ContinualQuery)
        stream.query = Query.from_json(session, {"steps": stream.extra.get("steps", [])})
        return stream
    raise StreamLostError(f"stream {stream_id}: no saved state at step {step} (its writer "
                          "stopped before saving it); its releases stand, open a new stream")


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
        out.append(step_json(stream, step.as_dict()))
    store.cleanup(stream.release_id, stream.t)
    return out


def step_json(stream: ContinualQuery, step: dict[str, Any]) -> dict[str, Any]:
    """A released step with its time interval."""
    lo, hi = stream.interval(int(step["t"]))
    return {**step, "interval": [_json_time(lo), _json_time(hi)]}


def info(stream: ContinualQuery, steps: list[dict[str, Any]] | None = None,
         now: datetime | None = None) -> dict[str, Any]:
    """The stream as the API shows it: id, dataset, description, mechanism, horizon, the
    step reached, whether it is closed, the next step's interval and availability, its loss,
    and ``steps`` (default: every step released so far)."""
    now = now or datetime.now(UTC)
    closed = stream.horizon is not None and stream.t >= stream.horizon
    nxt = None if closed else stream.interval(stream.t + 1)
    loss = stream.loss
    if steps is None:
        steps = [step_json(stream, s) for s in stream.extra.get("history", [])]
    return {"stream_id": stream.release_id, "dataset": stream.extra.get("dataset"),
            "description": stream.description, "mechanism": stream.config["mechanism"],
            "horizon": stream.horizon, "t": stream.t, "closed": closed,
            "next_interval": None if nxt is None else [_json_time(v) for v in nxt],
            "next_available": nxt is not None and _available(nxt[1], now),
            "loss": {"measure": type(loss).__name__, **loss.as_dict(), "text": str(loss)},
            "steps": steps}


def from_json(doc: dict[str, Any]) -> ContinualStep:
    """A step of the API's form as a :class:`~dpkit.stream.ContinualStep`."""
    return ContinualStep.from_dict(doc)
