"""The server's routes: each endpoint a function of the request, on one ``APIRouter``
(:func:`dpkit.server.app.create_app` includes it), with authentication, authorisation and
the work each endpoint does. The worker's :class:`~dpkit.server.state.ServerState` comes
from the application (``app.state.dpkit``); errors are :class:`~dpkit.server.errors.ApiError`
names of the wire error table.

A release travels as values, never read back: the request is turned into a query
(:func:`dpkit.server.protocol.to_query`), planned (:meth:`Query.plan
<dpkit.frame.Query.plan>`), released through the request's session
(:meth:`Session.release <dpkit.frame.Session.release>`, which debits the ledger first), and
the response is rendered from the :class:`~dpkit.core.record.Release` it returns; a failure
after the debit arrives as :class:`~dpkit.errors.ReleaseFailedError` with its release id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
from fastapi import APIRouter, Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from dpkit.core.measures import PrivacyLoss
from dpkit.core.record import Release, noise_rows
from dpkit.errors import DomainError, DPError, ReleaseFailedError, StreamRollbackError
from dpkit.frame import engine
from dpkit.frame.query import Query
from dpkit.frame.session import Session
from dpkit.ledger import Ledger
from dpkit.server import protocol, streams
from dpkit.server.errors import (
    ApiError,
    history_damaged,
    refusal,
    release_failed,
    stream_busy,
    stream_failed,
)
from dpkit.server.models import (
    DatasetInfo,
    ExplainResponse,
    ReleaseInfo,
    ReleaseResponse,
    StreamInfo,
)
from dpkit.server.state import Served, ServerState
from dpkit.stream import DatasetRetiredError, HorizonExceededError

__all__ = ["router", "release_body"]


def _state(request: Request) -> ServerState:
    """The worker's state (set by ``create_app``)."""
    state: ServerState = request.app.state.dpkit
    return state


# the request models are regenerated when the language registry changes
# (protocol.QueryRequest, streams.StreamRequest): the annotations are text, resolved again
# when create_app includes this router, so an application reads the registry of its day
router = APIRouter()
_AUTH = Depends(HTTPBearer(auto_error=False,
                           description="An analyst's API token from the ledger."))
_STATE = Depends(_state)


@router.get("/healthz", tags=["operations"])
def healthz(state: ServerState = _STATE) -> dict[str, Any]:
    """Liveness: the process is up and the ledger answers."""
    try:
        state.ledger.head()
    except Exception as exc:
        raise ApiError("Unavailable", "the ledger does not answer") from exc
    return {"status": "ok", "datasets": len(state.datasets)}

@router.get("/v1/datasets", response_model=list[DatasetInfo], tags=["datasets"])
def datasets(request: Request, credentials: HTTPAuthorizationCredentials | None = _AUTH,
        state: ServerState = _STATE
             ) -> list[dict[str, Any]]:
    """The datasets the caller may query: schema, measure, caps, spend, remaining."""
    analyst = _authenticate(state, request, credentials)
    return [info for name in state.datasets
            if (info := _dataset_info(state, name, analyst)) is not None]

@router.post("/v1/datasets/{name}/explain", response_model=ExplainResponse, tags=["queries"])
def explain(name: str, payload: protocol.QueryRequest, request: Request,
            credentials: HTTPAuthorizationCredentials | None = _AUTH,
        state: ServerState = _STATE) -> dict[str, Any]:
    """The plan of a query — per statistic: sensitivity, mechanism, noise scale,
    expected error — and its total loss. Free: reads no data, debits nothing."""
    analyst, served = _authorise(state, request, credentials, name)
    with served.source.open() as data:
        session = state.session(served, data, analyst)
        query, kwargs = _build(session, payload)
        return _explain(state, session, query, kwargs, analyst)

@router.post("/v1/datasets/{name}/release", response_model=ReleaseResponse, tags=["queries"])
def release(name: str, payload: protocol.QueryRequest, request: Request,
            credentials: HTTPAuthorizationCredentials | None = _AUTH,
        state: ServerState = _STATE) -> dict[str, Any]:
    """Release a query with differential privacy. Its loss is debited in the ledger
    (against the dataset's and the caller's caps) before any data is read; with an
    ``idempotency_key``, a retry returns the recorded answer and debits nothing."""
    analyst, served = _authorise(state, request, credentials, name)
    with served.source.open() as data:
        session = state.session(served, data, analyst)
        query, kwargs = _build(session, payload)
        record = _release(session, query, kwargs)
    return _release_response(request, session, record)

@router.get("/v1/releases", response_model=list[ReleaseInfo], tags=["releases"])
def releases(request: Request, dataset: str | None = None,
             credentials: HTTPAuthorizationCredentials | None = _AUTH,
        state: ServerState = _STATE
             ) -> list[dict[str, Any]]:
    """The caller's own releases (oldest first), optionally on one dataset."""
    analyst = _authenticate(state, request, credentials)
    return [_release_info(r) for r in state.ledger.releases(None, analyst)
            if dataset is None or r["dataset"] == dataset]

@router.get("/v1/releases/{release_id}", response_model=ReleaseInfo, tags=["releases"])
def one_release(release_id: int, request: Request,
                credentials: HTTPAuthorizationCredentials | None = _AUTH,
        state: ServerState = _STATE) -> dict[str, Any]:
    """One of the caller's own releases (404 for anyone else's)."""
    analyst = _authenticate(state, request, credentials)
    for r in state.ledger.releases(None, analyst):
        if r["id"] == release_id:
            return _release_info(r)
    raise ApiError("NotFound", f"no release {release_id} of yours")


@router.post("/v1/datasets/{name}/streams", response_model=StreamInfo, tags=["streams"])
def open_stream(name: str, payload: streams.StreamRequest, request: Request,
                credentials: HTTPAuthorizationCredentials | None = _AUTH,
        state: ServerState = _STATE) -> dict[str, Any]:
    """Open a continual release over the dataset's time column: its whole budget is
    debited once, now, in the ledger (against the dataset's and the caller's caps);
    no step is released yet (:mod:`dpkit.server.streams`)."""
    analyst, served = _authorise(state, request, credentials, name)
    store = _stream_store(state)
    with served.source.open() as data:
        session = state.session(served, data, analyst)
        try:
            stream = streams.open_stream(session, payload, store, analyst)
        except Exception as exc:
            raise _stream_refusal(session, exc) from exc
    _note(request, release_id=stream.release_id, loss=str(stream.loss))
    return streams.info(stream)

@router.post("/v1/streams/{stream_id}/next", response_model=StreamInfo, tags=["streams"])
def next_steps(stream_id: int, payload: streams.NextRequest, request: Request,
               credentials: HTTPAuthorizationCredentials | None = _AUTH,
        state: ServerState = _STATE) -> dict[str, Any]:
    """Release the stream's next available steps (at most ``max_steps``); ``steps``
    holds them (empty when none is available yet). Debits nothing."""
    with _opened_stream(state, request, credentials, stream_id) as (stream, store):
        try:
            streams.check_next(stream, payload.max_steps)  # declared: before any step
        except DomainError as exc:
            raise ApiError("DomainError", str(exc)) from None
        released = _stream_steps(stream, store, payload.max_steps)
    _note(request, release_id=stream_id, step=stream.t)
    return streams.info(stream, released)

@router.get("/v1/streams/{stream_id}", response_model=StreamInfo, tags=["streams"])
def one_stream(stream_id: int, request: Request, since: int = 0, offset: int | None = None,
               limit: int = streams.MAX_PAGE,
               credentials: HTTPAuthorizationCredentials | None = _AUTH,
        state: ServerState = _STATE) -> dict[str, Any]:
    """One of the caller's streams with a page of its released steps: those after step
    ``offset`` (``since``, its older name), at most ``limit`` (≤ ``MAX_PAGE``, and
    ``MAX_CELLS_PER_REQUEST`` cells); page on with ``offset`` = the last ``t`` shown."""
    with _opened_stream(state, request, credentials, stream_id) as (stream, store):
        try:
            steps = streams.history(stream, store, since if offset is None else offset,
                                    limit)
        except DomainError as exc:
            raise ApiError("DomainError", str(exc)) from None
        except streams.StreamHistoryError:
            raise history_damaged(stream_id) from None
    return streams.info(stream, steps)




# -- streams ---------------------------------------------------------------------------------
def _stream_store(state: ServerState) -> streams.StreamStore:
    if not state.streams.enabled:
        raise ApiError("NotConfigured", "hosted streams need ledger_key_env (their "
                       "states are encrypted with the ledger's key) and a streams_dir")
    return state.streams


@contextmanager
def _opened_stream(state: ServerState, request: Request,
                   credentials: HTTPAuthorizationCredentials | None, stream_id: int
                   ) -> Iterator[tuple[Any, streams.StreamStore]]:
    """The caller's stream ``stream_id``, restored on its dataset (open while in the block),
    and the store that keeps it."""
    analyst, served = _stream_dataset(state, request, credentials, stream_id)
    store = _stream_store(state)
    with served.source.open() as data:
        session = state.session(served, data, analyst)
        yield _load_stream(session, store, stream_id, analyst), store


def _stream_refusal(session: Session, exc: BaseException) -> ApiError:
    """A stream refused before its debit, or one whose opening state could not be saved
    after it (the loss stands)."""
    record = session.last_release
    if record is None or record.loss is None:
        return refusal(exc)
    logging.getLogger("dpkit.server").error(
        "stream failed after its debit", exc_info=exc,
        extra={"fields": {"release_id": record.release_id}})
    return ApiError("ReleaseFailed", "the stream could not be saved after its loss was "
                    "debited (the loss stands)", release_id=record.release_id)


def _stream_dataset(state: ServerState, request: Request,
                    credentials: HTTPAuthorizationCredentials | None, stream_id: int
                    ) -> tuple[str, Served]:
    """The caller and the served dataset of their stream ``stream_id`` (404 otherwise)."""
    analyst = _authenticate(state, request, credentials)
    row = state.ledger.release(stream_id)
    if row is None or row["analyst"] != analyst or row["dataset"] not in state.datasets:
        raise ApiError("NotFound", f"no stream {stream_id} of yours")
    return _authorise(state, request, credentials, row["dataset"])


def _load_stream(session: Session, store: streams.StreamStore, stream_id: int,
                 analyst: str) -> Any:
    """The stream restored from the state its ledger mark names. A stream is past its debit:
    every failure is a fixed answer that names no value (its exception is logged)."""
    try:
        return streams.load_stream(session, store, stream_id, analyst)
    except streams.StreamNotFoundError as exc:
        raise ApiError("NotFound", str(exc)) from None
    except streams.StreamLostError as exc:
        raise ApiError("StreamLost", str(exc)) from None
    except streams.StreamBusyError:
        raise stream_busy(stream_id) from None
    except streams.StreamHistoryError:
        raise history_damaged(stream_id) from None
    except Exception as exc:
        raise stream_failed(stream_id, exc) from None


def _stream_steps(stream: Any, store: streams.StreamStore, max_steps: int
                  ) -> list[dict[str, Any]]:
    """Release the next steps. After the debit a step is total: what it raises maps to a
    fixed status and text, never an exception's message (which may quote the data)."""
    sid = int(stream.release_id)
    try:
        return streams.advance(stream, store, max_steps)
    except StreamRollbackError:
        raise stream_busy(sid) from None
    except HorizonExceededError:  # public: the declared horizon (or time grid) is reached
        raise ApiError("HorizonExceededError", f"stream {sid} reached its horizon "
                       f"({stream.horizon} steps, step {stream.t})") from None
    except DatasetRetiredError:
        raise ApiError("DatasetRetired", f"the dataset of stream {sid} is retired: it "
                       "releases no further step") from None
    except streams.StreamHistoryError:
        raise history_damaged(sid) from None
    except Exception as exc:
        raise stream_failed(sid, exc) from None


# -- authentication and authorisation --------------------------------------------------------
def _note(request: Request, **fields: Any) -> None:
    """Add fields to the request's log line (never data values)."""
    log = getattr(request.state, "log", None)
    if isinstance(log, dict):
        log.update(fields)


def _authenticate(state: ServerState, request: Request,
                  credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or not credentials.credentials:
        raise ApiError("Unauthorized", "missing bearer token")
    analyst = state.ledger.analyst_for_token(credentials.credentials)
    if analyst is None:
        raise ApiError("Unauthorized", "unknown token")
    _note(request, analyst=analyst)
    return analyst


def _authorise(state: ServerState, request: Request,
               credentials: HTTPAuthorizationCredentials | None, name: str
               ) -> tuple[str, Served]:
    analyst = _authenticate(state, request, credentials)
    served = state.datasets.get(name)
    if served is None:
        raise ApiError("NotFound", f"no dataset {name!r}")
    _note(request, dataset=name)
    if _grant(state.ledger, analyst, name) is None:
        raise ApiError("Forbidden", f"analyst {analyst!r} has no grant on {name!r}")
    return analyst, served


def _grant(ledger: Ledger, analyst: str, dataset: str) -> dict[str, Any] | None:
    """The analyst's grant on the dataset (its cap, None for none, and spend), or None;
    checked against the ledger's chain (a tampered row raises LedgerIntegrityError)."""
    return ledger.grant_of(analyst, dataset)


def _loss_json(loss: PrivacyLoss) -> dict[str, object]:
    return loss.as_json()  # decimals for people, the exact rationals under "exact"


def _tighter(a: PrivacyLoss, b: PrivacyLoss | None) -> PrivacyLoss:
    """The componentwise minimum of two losses of one measure."""
    if b is None:
        return a
    return type(a)(**{k: min(Fraction(v), Fraction(b.as_dict()[k]))
                      for k, v in a.as_dict().items()})


def _remaining(ledger: Ledger, dataset: str, grant: dict[str, Any]) -> PrivacyLoss:
    left = ledger.cap(dataset) - ledger.spent(dataset)
    mine = None if grant["cap"] is None else grant["cap"] - grant["spent"]
    return _tighter(left, mine)


def _dataset_info(state: ServerState, name: str, analyst: str) -> dict[str, Any] | None:
    grant = _grant(state.ledger, analyst, name)
    if grant is None:
        return None
    served = state.datasets[name]
    cap = state.ledger.cap(name)
    declared = served.config.schema  # public metadata, declared by the curator
    return {"name": name,
            "columns": [{"name": c, "dtype": t} for c, t in served.source.columns],
            "privacy_unit": str(served.config.privacy_unit), "measure": type(cap).__name__,
            "declared": None if declared is None else declared.to_dict(),
            "cap": _loss_json(cap), "spent": _loss_json(state.ledger.spent(name)),
            "analyst_cap": None if grant["cap"] is None else _loss_json(grant["cap"]),
            "analyst_spent": _loss_json(grant["spent"]),
            "remaining": _loss_json(_remaining(state.ledger, name, grant))}


# -- queries ---------------------------------------------------------------------------------
def _build(session: Session, payload: protocol.QueryRequest) -> tuple[Query, dict[str, Any]]:
    try:
        query, kwargs = protocol.to_query(session, payload)
        lf = session.table()
        session.plan_memo.run_once(  # keyed on all it reads: query, schema, backend
            session.plan_key("steps", query, lf.implementation.name, engine.is_scan(lf)),
            lambda: _dry_run(query))
        return query, _resolve_budget(query, kwargs)
    except Exception as exc:
        raise refusal(exc) from exc


def _dry_run(query: Query) -> None:
    """Run the query's steps on zero rows of the table, so that type errors (a string
    compared with a number, ...) refuse the query before its debit rather than failing
    after it. Reads no rows."""
    try:
        query.lazy(empty=True).collect()
    except DPError:
        raise
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise DomainError(f"the query does not run on this dataset's schema: "
                          f"{type(exc).__name__}: {first}") from None


def _resolve_budget(query: Query, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Turn an accuracy target ``alpha`` into the budget that meets it (reads no data)."""
    if "alpha" not in kwargs:
        return kwargs
    out = dict(kwargs)
    alpha = out.pop("alpha")
    if out.get("epsilon") is not None or out.get("rho") is not None:
        raise DomainError("pass alpha or a budget (epsilon/rho), not both")
    out.update(query.calibrate(alpha, confidence=out["confidence"], delta=out.get("delta"),
                               split=out.get("split")))
    return out


def _plan_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs[k] for k in ("epsilon", "rho", "delta", "split") if k in kwargs}


def _explain(state: ServerState, session: Session, query: Query,
             kwargs: dict[str, Any], analyst: str) -> dict[str, Any]:
    try:
        plan = _plan_kwargs(kwargs)
        confidence = kwargs["confidence"]
        planned = query.plan(**plan)
        text = query.explain(**plan, confidence=confidence)
        total = planned.loss
    except Exception as exc:
        raise refusal(exc) from exc
    beta = 1 - confidence
    stats = [{"aggregation": query.aggs[p.aggregation].output_name(), "statistic": p.stat.key,
              "mechanism": p.mechanism, "sensitivity": float(p.sensitivity * p.unit),
              "scale": float(p.scale * p.unit),
              "expected_error": p.accuracy(beta) * float(p.unit),
              "error_kind": "rank error" if p.mechanism in ("exponential", "tree quantile")
              else "half-width", "loss": _loss_json(p.loss)} for p in planned.statistics]
    name = session.dataset or ""
    grant = _grant(state.ledger, analyst, name)
    if grant is None:  # revoked since the request was authorised
        raise ApiError("Forbidden", f"analyst {analyst!r} has no grant on {name!r}")
    remaining = _remaining(state.ledger, name, grant)
    return {"text": text, "confidence": confidence, "statistics": stats,
            "selection": None if query.selection is None else _loss_json(
                query.selection.loss()),
            "total": _loss_json(total), "remaining": _loss_json(remaining),
            "affordable": bool(total <= remaining), "loss_note": planned.loss_note}


def _release(session: Session, query: Query, kwargs: dict[str, Any]) -> Release[pl.DataFrame]:
    """The query released through its session: the record it returns."""
    try:
        plan = query.plan(**_plan_kwargs(kwargs))
        return session.release(plan, confidence=kwargs["confidence"],
                               idempotency_key=kwargs.get("idempotency_key"))
    except ReleaseFailedError as exc:  # debited, then failed: the loss stands
        raise release_failed(exc.release_id, exc) from None
    except Exception as exc:
        raise refusal(exc) from exc  # refused before (or instead of) a debit


def _release_response(request: Request, session: Session, record: Release[pl.DataFrame]
                      ) -> dict[str, Any]:
    """The response rendered from the release record (:class:`dpkit.core.record.Release`):
    its id, loss (zero for a replay), replayed flag, noise rows, digest and values."""
    spent = record.loss if record.loss is not None else session.measure.zero()
    _note(request, release_id=record.release_id, loss=str(spent), replayed=record.replayed)
    return release_body(session, record)


def release_body(session: Session, record: Release[pl.DataFrame]) -> dict[str, Any]:
    """A release response's JSON (``ReleaseResponse``) from its record; ``dpkit sql --json``
    prints the same."""
    spent = record.loss if record.loss is not None else session.measure.zero()
    frame = record.values
    return {"release_id": record.release_id, "replayed": record.replayed,
            "loss": _loss_json(spent), "noise": [r.as_json() for r in record.noise],
            "digest": record.digest, "description": record.description,
            "loss_note": record.loss_note,
            "columns": [{"name": c, "dtype": str(t)} for c, t in frame.schema.items()],
            "records": _finite(frame).to_dicts()}


def _finite(frame: pl.DataFrame) -> pl.DataFrame:
    """NaN and infinities become null (JSON has neither)."""
    floats = [c for c, t in frame.schema.items() if t.is_float()]
    if all(np.isfinite(frame[c].to_numpy()).all() for c in floats):
        return frame  # the usual case (a null reads as NaN here, so is never skipped)
    return frame.with_columns(
        pl.when(pl.col(c).is_finite()).then(pl.col(c)).otherwise(None).alias(c)
        for c in floats)


def _release_info(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "dataset", "time", "query", "noise", "status", "result_sha256",
            "idempotency_key")
    rows = noise_rows(row["noise"])
    return {**{k: row[k] for k in keys}, "loss": _loss_json(row["loss"]),
            "noise_rows": None if rows is None else [r.as_json() for r in rows]}
