"""The HTTP server: FastAPI endpoints over :class:`~dpkit.frame.Session` and the ledger.

Endpoints (OpenAPI documentation at ``/docs``)::

    GET  /healthz                         liveness and ledger reachability (no auth)
    GET  /v1/datasets                     datasets the caller has a grant on, with budgets
    POST /v1/datasets/{name}/explain      the plan, errors and cost of a query (free)
    POST /v1/datasets/{name}/release      release a query: DP results, loss, release id
    GET  /v1/releases                     the caller's own releases
    GET  /v1/releases/{id}                one of the caller's own releases
    POST /v1/datasets/{name}/streams      open a continual release (charged once)
    POST /v1/streams/{id}/next            release the stream's next available step(s)
    GET  /v1/streams/{id}                 the stream and a page of its released steps

Every ``/v1`` request needs ``Authorization: Bearer <token>`` (an analyst's token from the
ledger, compared by hash). Status codes: 401 no or wrong token, 403 no grant on the
dataset, 404 unknown dataset, release or stream, 409 budget exceeded (or an idempotent retry
still in progress, a stream step released by a concurrent request — ask again —, or a stream
of a retired dataset), 410 a stream whose state was lost, 413 body too large, 422 malformed or
refused query (or a stream past its horizon), 500 a release or stream step that failed after
its debit (the loss stands; a fixed text, nothing is returned) or a stream history that fails
its integrity check, 501 streams not configured (they need ``ledger_key_env``). Refused
requests debit nothing. Streams: :mod:`dpkit.server.streams`.

The server never returns rows: a query's only output is its DP aggregations, and a release
runs only after its loss is debited in the ledger (atomically, against the dataset's and the
analyst's caps). Idempotent retries replay the recorded answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from dpkit.core.measures import PrivacyLoss
from dpkit.core.record import Release, noise_rows
from dpkit.errors import (
    BoundsError,
    BudgetExceededError,
    ColumnError,
    DomainError,
    DPError,
    LedgerError,
    MeasureError,
    ReleaseFailedError,
    StreamRollbackError,
)
from dpkit.frame import engine
from dpkit.frame.bounded_cache import BoundedCache
from dpkit.frame.query import Query
from dpkit.frame.session import PlanMemo, Session
from dpkit.ledger import Ledger
from dpkit.server import protocol, streams
from dpkit.server.config import ConfigError, DatasetConfig, ServerConfig, load_config
from dpkit.server.middleware import BodyLimitMiddleware, RequestLogMiddleware, configure_logging
from dpkit.server.sources import Source, open_source
from dpkit.stream import DatasetRetiredError, HorizonExceededError

__all__ = ["create_app", "app_from_env", "serve", "ENV_CONFIG"]

ENV_CONFIG = "DPKIT_SERVER_CONFIG"
_UNPROCESSABLE = (DomainError, BoundsError, ColumnError, MeasureError)
_BEARER = HTTPBearer(auto_error=False, description="An analyst's API token from the ledger.")


class ApiError(Exception):
    """An HTTP error with a machine-readable ``error`` name and a message."""

    def __init__(self, status: int, error: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.error, self.detail, self.extra = status, error, detail, extra


# -- response models (for the OpenAPI documentation) ----------------------------------------
class Column(BaseModel):
    name: str
    dtype: str


class DatasetInfo(BaseModel):
    name: str
    columns: list[Column]
    privacy_unit: str
    measure: str
    cap: dict[str, str]
    spent: dict[str, str]
    analyst_cap: dict[str, str] | None
    analyst_spent: dict[str, str]
    remaining: dict[str, str]


class StatisticPlan(BaseModel):
    aggregation: str
    statistic: str
    mechanism: str
    sensitivity: float
    scale: float
    expected_error: float
    error_kind: str
    loss: dict[str, str]


class ExplainResponse(BaseModel):
    text: str
    confidence: float
    statistics: list[StatisticPlan]
    selection: dict[str, str] | None
    total: dict[str, str]
    remaining: dict[str, str]
    affordable: bool


class NoiseRowInfo(BaseModel):
    """One noise row of a release (:class:`dpkit.core.record.NoiseRow`; exact numbers as
    fraction strings, null where the release states none)."""

    name: str
    scale: str | None
    sensitivity: str | None
    statistic: str | None


class ReleaseResponse(BaseModel):
    release_id: int | None
    replayed: bool
    loss: dict[str, str]
    columns: list[Column]
    records: list[dict[str, Any]]
    noise: list[NoiseRowInfo]
    digest: str | None
    description: str




class StepReleaseInfo(BaseModel):
    key: Any
    value: float | int
    raw: float
    half_width: float
    low: float
    high: float


class StepInfo(BaseModel):
    """One released step: the running totals (per key) and windows, with intervals."""

    t: int
    interval: list[Any]
    releases: list[StepReleaseInfo]
    windows: list[StepReleaseInfo]


class StreamInfo(BaseModel):
    stream_id: int | None
    dataset: str | None
    description: str
    mechanism: str
    horizon: int | None
    t: int
    closed: bool
    next_interval: list[Any] | None
    next_available: bool
    loss: dict[str, str]
    steps: list[StepInfo]


class ReleaseInfo(BaseModel):
    id: int
    dataset: str
    time: str
    query: str
    loss: dict[str, str]
    noise: str | None
    noise_rows: list[NoiseRowInfo] | None  # the noise column read as rows (None: older text)
    status: str
    result_sha256: str | None
    idempotency_key: str | None


# -- state -----------------------------------------------------------------------------------
@dataclass
class Served:
    """A dataset as served: its configuration, its loaded source, and what its requests
    share (one per dataset and worker): bounded tables (dpkit.frame.bounded_cache) and the
    plan-time dry runs that passed (dpkit.frame.session.PlanMemo)."""

    config: DatasetConfig
    source: Source
    bounded: BoundedCache = field(default_factory=BoundedCache)
    plans: PlanMemo = field(default_factory=PlanMemo)


class ServerState:
    """The ledger and the datasets, opened once per worker process."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        key = os.environ.get(config.ledger_key_env) if config.ledger_key_env else None
        if config.ledger_key_env and not key:
            raise ConfigError(f"ledger_key_env: ${config.ledger_key_env} is not set (it holds "
                              "the Fernet key that encrypts stored answers)")
        self.ledger = Ledger(config.ledger, encryption_key=key.encode() if key else None)
        self.streams = streams.StreamStore(config.streams_dir, key.encode() if key else None)
        self.datasets: dict[str, Served] = {}
        try:
            for d in config.datasets:
                self.datasets[d.name] = Served(d, open_source(d.source))
                self.ledger.register(d.name, d.budget, str(d.privacy_unit), _schema_text(
                    self.datasets[d.name].source))
        except BaseException:
            self.close()
            raise

    def session(self, served: Served, data: Any, analyst: str) -> Session:
        """A session for one request (cheap: the data is already loaded or opened)."""
        c = served.config
        try:
            return Session(data, c.privacy_unit, c.budget, ledger=self.ledger,
                           dataset=c.name, analyst=analyst, bounded_cache=served.bounded,
                           plan_memo=served.plans)
        except Exception as exc:
            raise _refusal(exc) from exc

    def close(self) -> None:
        for served in self.datasets.values():
            served.source.close()
        self.ledger.dispose()


def _schema_text(source: Source) -> str:
    return ",".join(f"{name}:{dtype}" for name, dtype in source.columns)


# -- the application -------------------------------------------------------------------------
def create_app(config: ServerConfig | str | Path) -> FastAPI:
    """Build the FastAPI application: open the ledger, load and register the datasets.

    Parameters
    ----------
    config : ServerConfig, str or Path
        A parsed configuration or the path of its YAML file.

    Returns
    -------
    FastAPI

    Raises
    ------
    ConfigError
        If the configuration or a data source is invalid.
    LedgerError
        If the ledger has a dataset with another measure or cap.
    """
    cfg = config if isinstance(config, ServerConfig) else load_config(config)
    configure_logging()
    state = ServerState(cfg)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        logging.getLogger("dpkit.server").info(
            "started", extra={"fields": {"datasets": sorted(state.datasets), "pid": os.getpid()}})
        yield
        state.close()
        logging.getLogger("dpkit.server").info("stopped", extra={"fields": {"pid": os.getpid()}})

    app = FastAPI(title="dpkit server", version="1", lifespan=lifespan,
                  description=(__doc__ or "").split("\n\n", 1)[-1])
    app.state.dpkit = state
    app.add_middleware(BodyLimitMiddleware, max_bytes=cfg.max_body_bytes)
    app.add_middleware(RequestLogMiddleware)
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    _routes(app, state)
    return app


def app_from_env() -> FastAPI:
    """The application for the configuration file named by ``$DPKIT_SERVER_CONFIG`` (the
    factory uvicorn calls in every worker process)."""
    path = os.environ.get(ENV_CONFIG)
    if not path:
        raise DomainError(f"set {ENV_CONFIG} to the server's YAML configuration")
    return create_app(path)


def serve(config: str | Path, *, host: str = "127.0.0.1", port: int = 8000,
          workers: int | None = None, log_level: str = "info") -> None:
    """Run the server with uvicorn until SIGINT/SIGTERM (graceful shutdown: in-flight
    requests finish, then the ledger and data sources are closed).

    Parameters
    ----------
    config : str or Path
        The YAML configuration (validated here first).
    host, port : str, int
        Where to listen.
    workers : int, optional
        Worker processes (default: the configuration's ``workers``).
    log_level : str
        uvicorn's log level.
    """
    import uvicorn

    cfg = load_config(config)
    os.environ[ENV_CONFIG] = str(Path(config).resolve())
    uvicorn.run("dpkit.server.app:app_from_env", factory=True, host=host, port=port,
                workers=workers or cfg.workers, access_log=False, log_level=log_level,
                timeout_graceful_shutdown=30)


async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse({"error": exc.error, "detail": exc.detail, **exc.extra},
                        status_code=exc.status, headers=headers)


async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))}
              for e in exc.errors()[:20]]
    return JSONResponse({"error": "ValidationError", "detail": errors}, status_code=422)


def _routes(app: FastAPI, state: ServerState) -> None:
    auth = Depends(_BEARER)

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, Any]:
        """Liveness: the process is up and the ledger answers."""
        try:
            state.ledger.head()
        except Exception as exc:
            raise ApiError(503, "Unavailable", "the ledger does not answer") from exc
        return {"status": "ok", "datasets": len(state.datasets)}

    @app.get("/v1/datasets", response_model=list[DatasetInfo], tags=["datasets"])
    def datasets(request: Request, credentials: HTTPAuthorizationCredentials | None = auth
                 ) -> list[dict[str, Any]]:
        """The datasets the caller may query: schema, measure, caps, spend, remaining."""
        analyst = _authenticate(state, request, credentials)
        return [info for name in state.datasets
                if (info := _dataset_info(state, name, analyst)) is not None]

    @app.post("/v1/datasets/{name}/explain", response_model=ExplainResponse, tags=["queries"])
    def explain(name: str, payload: protocol.QueryRequest, request: Request,
                credentials: HTTPAuthorizationCredentials | None = auth) -> dict[str, Any]:
        """The plan of a query — per statistic: sensitivity, mechanism, noise scale,
        expected error — and its total loss. Free: reads no data, debits nothing."""
        analyst, served = _authorise(state, request, credentials, name)
        with served.source.open() as data:
            session = state.session(served, data, analyst)
            query, kwargs = _build(session, payload)
            return _explain(state, session, query, kwargs, analyst)

    @app.post("/v1/datasets/{name}/release", response_model=ReleaseResponse, tags=["queries"])
    def release(name: str, payload: protocol.QueryRequest, request: Request,
                credentials: HTTPAuthorizationCredentials | None = auth) -> dict[str, Any]:
        """Release a query with differential privacy. Its loss is debited in the ledger
        (against the dataset's and the caller's caps) before any data is read; with an
        ``idempotency_key``, a retry returns the recorded answer and debits nothing."""
        analyst, served = _authorise(state, request, credentials, name)
        with served.source.open() as data:
            session = state.session(served, data, analyst)
            query, kwargs = _build(session, payload)
            record = _release(session, query, kwargs)
        return _release_response(request, session, record)

    @app.get("/v1/releases", response_model=list[ReleaseInfo], tags=["releases"])
    def releases(request: Request, dataset: str | None = None,
                 credentials: HTTPAuthorizationCredentials | None = auth
                 ) -> list[dict[str, Any]]:
        """The caller's own releases (oldest first), optionally on one dataset."""
        analyst = _authenticate(state, request, credentials)
        return [_release_info(r) for r in state.ledger.releases(None, analyst)
                if dataset is None or r["dataset"] == dataset]

    @app.get("/v1/releases/{release_id}", response_model=ReleaseInfo, tags=["releases"])
    def one_release(release_id: int, request: Request,
                    credentials: HTTPAuthorizationCredentials | None = auth) -> dict[str, Any]:
        """One of the caller's own releases (404 for anyone else's)."""
        analyst = _authenticate(state, request, credentials)
        for r in state.ledger.releases(None, analyst):
            if r["id"] == release_id:
                return _release_info(r)
        raise ApiError(404, "NotFound", f"no release {release_id} of yours")


    @app.post("/v1/datasets/{name}/streams", response_model=StreamInfo, tags=["streams"])
    def open_stream(name: str, payload: streams.StreamRequest, request: Request,
                    credentials: HTTPAuthorizationCredentials | None = auth) -> dict[str, Any]:
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

    @app.post("/v1/streams/{stream_id}/next", response_model=StreamInfo, tags=["streams"])
    def next_steps(stream_id: int, payload: streams.NextRequest, request: Request,
                   credentials: HTTPAuthorizationCredentials | None = auth) -> dict[str, Any]:
        """Release the stream's next available steps (at most ``max_steps``); ``steps``
        holds them (empty when none is available yet). Debits nothing."""
        analyst, served = _stream_dataset(state, request, credentials, stream_id)
        store = _stream_store(state)
        with served.source.open() as data:
            session = state.session(served, data, analyst)
            stream = _load_stream(session, store, stream_id, analyst)
            try:
                streams.check_next(stream, payload.max_steps)  # declared: before any step
            except DomainError as exc:
                raise ApiError(422, "DomainError", str(exc)) from None
            released = _stream_steps(stream, store, payload.max_steps)
        _note(request, release_id=stream_id, step=stream.t)
        return streams.info(stream, released)

    @app.get("/v1/streams/{stream_id}", response_model=StreamInfo, tags=["streams"])
    def one_stream(stream_id: int, request: Request, since: int = 0, offset: int | None = None,
                   limit: int = streams.MAX_PAGE,
                   credentials: HTTPAuthorizationCredentials | None = auth) -> dict[str, Any]:
        """One of the caller's streams with a page of its released steps: those after step
        ``offset`` (``since``, its older name), at most ``limit`` (≤ ``MAX_PAGE``, and
        ``MAX_CELLS_PER_REQUEST`` cells); page on with ``offset`` = the last ``t`` shown."""
        analyst, served = _stream_dataset(state, request, credentials, stream_id)
        store = _stream_store(state)
        with served.source.open() as data:
            session = state.session(served, data, analyst)
            stream = _load_stream(session, store, stream_id, analyst)
        try:
            steps = streams.history(stream, store, since if offset is None else offset, limit)
        except DomainError as exc:
            raise ApiError(422, "DomainError", str(exc)) from None
        except streams.StreamHistoryError:
            raise _history_damaged(stream_id) from None
        return streams.info(stream, steps)


# -- streams ---------------------------------------------------------------------------------
def _stream_store(state: ServerState) -> streams.StreamStore:
    if not state.streams.enabled:
        raise ApiError(501, "NotConfigured", "hosted streams need ledger_key_env (their "
                       "states are encrypted with the ledger's key) and a streams_dir")
    return state.streams


def _stream_refusal(session: Session, exc: BaseException) -> ApiError:
    """A stream refused before its debit, or one whose opening state could not be saved
    after it (the loss stands)."""
    record = session.last_release
    if record is None or record.loss is None:
        return _refusal(exc)
    logging.getLogger("dpkit.server").error(
        "stream failed after its debit", exc_info=exc,
        extra={"fields": {"release_id": record.release_id}})
    return ApiError(500, "ReleaseFailed", "the stream could not be saved after its loss was "
                    "debited (the loss stands)", release_id=record.release_id)


def _stream_dataset(state: ServerState, request: Request,
                    credentials: HTTPAuthorizationCredentials | None, stream_id: int
                    ) -> tuple[str, Served]:
    """The caller and the served dataset of their stream ``stream_id`` (404 otherwise)."""
    analyst = _authenticate(state, request, credentials)
    row = state.ledger.release(stream_id)
    if row is None or row["analyst"] != analyst or row["dataset"] not in state.datasets:
        raise ApiError(404, "NotFound", f"no stream {stream_id} of yours")
    return _authorise(state, request, credentials, row["dataset"])


def _load_stream(session: Session, store: streams.StreamStore, stream_id: int,
                 analyst: str) -> Any:
    """The stream restored from the state its ledger mark names. A stream is past its debit:
    every failure is a fixed answer that names no value (its exception is logged)."""
    try:
        return streams.load_stream(session, store, stream_id, analyst)
    except streams.StreamNotFoundError as exc:
        raise ApiError(404, "NotFound", str(exc)) from None
    except streams.StreamLostError as exc:
        raise ApiError(410, "StreamLost", str(exc)) from None
    except streams.StreamBusyError:
        raise _stream_busy(stream_id) from None
    except streams.StreamHistoryError:
        raise _history_damaged(stream_id) from None
    except Exception as exc:
        raise _stream_failed(stream_id, exc) from None


def _stream_steps(stream: Any, store: streams.StreamStore, max_steps: int
                  ) -> list[dict[str, Any]]:
    """Release the next steps. After the debit a step is total: what it raises maps to a
    fixed status and text, never an exception's message (which may quote the data)."""
    sid = int(stream.release_id)
    try:
        return streams.advance(stream, store, max_steps)
    except StreamRollbackError:
        raise _stream_busy(sid) from None
    except HorizonExceededError:  # public: the declared horizon (or time grid) is reached
        raise ApiError(422, "HorizonExceededError", f"stream {sid} reached its horizon "
                       f"({stream.horizon} steps, step {stream.t})") from None
    except DatasetRetiredError:
        raise ApiError(409, "DatasetRetired", f"the dataset of stream {sid} is retired: it "
                       "releases no further step") from None
    except streams.StreamHistoryError:
        raise _history_damaged(sid) from None
    except Exception as exc:
        raise _stream_failed(sid, exc) from None


def _stream_busy(stream_id: int) -> ApiError:
    return ApiError(409, "StreamRollbackError", f"stream {stream_id}: another request "
                    "released its next step first; ask again")


def _history_damaged(stream_id: int) -> ApiError:
    logging.getLogger("dpkit.server").error(
        "stream history fails its integrity check", extra={"fields": {"release_id": stream_id}})
    return ApiError(500, "StreamHistoryDamaged", f"stream {stream_id}: its released history "
                    "fails its integrity check (reported to the curator)")


def _stream_failed(stream_id: int, exc: BaseException) -> ApiError:
    logging.getLogger("dpkit.server").error(
        "stream step failed after its debit", exc_info=exc,
        extra={"fields": {"release_id": stream_id}})
    return ApiError(500, "ReleaseFailed", f"stream {stream_id}: the request failed after the "
                    "stream's debit (the loss stands; a step it recorded is kept in the "
                    "stream's history)", release_id=stream_id)


# -- authentication and authorisation --------------------------------------------------------
def _note(request: Request, **fields: Any) -> None:
    """Add fields to the request's log line (never data values)."""
    log = getattr(request.state, "log", None)
    if isinstance(log, dict):
        log.update(fields)


def _authenticate(state: ServerState, request: Request,
                  credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or not credentials.credentials:
        raise ApiError(401, "Unauthorized", "missing bearer token")
    analyst = state.ledger.analyst_for_token(credentials.credentials)
    if analyst is None:
        raise ApiError(401, "Unauthorized", "unknown token")
    _note(request, analyst=analyst)
    return analyst


def _authorise(state: ServerState, request: Request,
               credentials: HTTPAuthorizationCredentials | None, name: str
               ) -> tuple[str, Served]:
    analyst = _authenticate(state, request, credentials)
    served = state.datasets.get(name)
    if served is None:
        raise ApiError(404, "NotFound", f"no dataset {name!r}")
    _note(request, dataset=name)
    if _grant(state.ledger, analyst, name) is None:
        raise ApiError(403, "Forbidden", f"analyst {analyst!r} has no grant on {name!r}")
    return analyst, served


def _grant(ledger: Ledger, analyst: str, dataset: str) -> dict[str, Any] | None:
    """The analyst's grant on the dataset (its cap, None for none, and spend), or None;
    checked against the ledger's chain (a tampered row raises LedgerIntegrityError)."""
    return ledger.grant_of(analyst, dataset)


def _parse_loss(measure: type[PrivacyLoss], text: str) -> PrivacyLoss:
    import json

    return measure(**{k: Fraction(v) for k, v in json.loads(text).items()})


def _loss_json(loss: PrivacyLoss) -> dict[str, str]:
    return {"measure": type(loss).__name__, **loss.as_dict(), "text": str(loss)}


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
    return {"name": name,
            "columns": [{"name": c, "dtype": t} for c, t in served.source.columns],
            "privacy_unit": str(served.config.privacy_unit), "measure": type(cap).__name__,
            "cap": _loss_json(cap), "spent": _loss_json(state.ledger.spent(name)),
            "analyst_cap": None if grant["cap"] is None else _loss_json(grant["cap"]),
            "analyst_spent": _loss_json(grant["spent"]),
            "remaining": _loss_json(_remaining(state.ledger, name, grant))}


# -- queries ---------------------------------------------------------------------------------
# errors of the engines while a query is built or checked (before any debit, reading no
# row): a query the schema rejects, e.g. DuckDB's binder on mixed types
_ENGINES = frozenset({"polars", "narwhals", "duckdb", "pyspark", "py4j"})


def _refusal(exc: BaseException) -> ApiError:
    """The HTTP error for a query refused before any debit (no data was read)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, BudgetExceededError | LedgerError):
        # the ledger names itself ("ledger <url>: ..."); its location is not for analysts
        return ApiError(409, type(exc).__name__, re.sub(r"^ledger \S+: ", "", str(exc)))
    if isinstance(exc, _UNPROCESSABLE):
        return ApiError(422, type(exc).__name__, str(exc))
    if isinstance(exc, DPError):
        return ApiError(500, type(exc).__name__, "internal error")
    engine_error = type(exc).__module__.split(".")[0].lstrip("_") in _ENGINES
    if isinstance(exc, TypeError | ValueError | KeyError | pl.exceptions.PolarsError) or (
            engine_error):
        # a query the schema rejects (e.g. a string compared with a number); the first line
        # only, as the rest describes the plan
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return ApiError(422, "InvalidQuery", f"{type(exc).__name__}: {first}")
    return ApiError(500, "InternalError", "internal error")


def _build(session: Session, payload: protocol.QueryRequest) -> tuple[Query, dict[str, Any]]:
    try:
        query, kwargs = protocol.to_query(session, payload)
        lf = session.table()
        session.plan_memo.run_once(  # keyed on all it reads: query, schema, backend
            session.plan_key("steps", query, lf.implementation.name, engine.is_scan(lf)),
            lambda: _dry_run(query))
        return query, _resolve_budget(query, kwargs)
    except Exception as exc:
        raise _refusal(exc) from exc


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
        _, planned = query.plan(**plan)
        text = query.explain(**plan, confidence=confidence)
        total = session.total_loss(planned, query.selection)
    except Exception as exc:
        raise _refusal(exc) from exc
    beta = 1 - confidence
    stats = [{"aggregation": query.aggs[p.aggregation].output_name(), "statistic": p.stat.key,
              "mechanism": p.mechanism, "sensitivity": float(p.sensitivity * p.unit),
              "scale": float(p.scale * p.unit),
              "expected_error": p.accuracy(beta) * float(p.unit),
              "error_kind": "rank error" if p.mechanism in ("exponential", "tree quantile")
              else "half-width", "loss": _loss_json(p.loss)} for p in planned]
    name = session.dataset or ""
    grant = _grant(state.ledger, analyst, name)
    if grant is None:  # revoked since the request was authorised
        raise ApiError(403, "Forbidden", f"analyst {analyst!r} has no grant on {name!r}")
    remaining = _remaining(state.ledger, name, grant)
    return {"text": text, "confidence": confidence, "statistics": stats,
            "selection": None if query.selection is None else _loss_json(
                query.selection.loss()),
            "total": _loss_json(total), "remaining": _loss_json(remaining),
            "affordable": bool(total <= remaining)}


def _release(session: Session, query: Query, kwargs: dict[str, Any]) -> Release[pl.DataFrame]:
    """The query released through its session: the record it returns."""
    try:
        plan = query.plan(**_plan_kwargs(kwargs))
        return session.release(plan, confidence=kwargs["confidence"],
                               idempotency_key=kwargs.get("idempotency_key"))
    except ReleaseFailedError as exc:
        # debited, then failed: the loss stands and nothing is returned; the error's text
        # names no data, and only its type is logged
        logging.getLogger("dpkit.server").error(
            "release failed after its debit", exc_info=exc,
            extra={"fields": {"release_id": exc.release_id}})
        raise ApiError(500, "ReleaseFailed", "the release failed after its loss was debited "
                       "(the loss stands); no result", release_id=exc.release_id
                       ) from None
    except Exception as exc:
        raise _refusal(exc) from exc  # refused before (or instead of) a debit


def _release_response(request: Request, session: Session, record: Release[pl.DataFrame]
                      ) -> dict[str, Any]:
    """The response rendered from the release record (:class:`dpkit.core.record.Release`):
    its id, loss (zero for a replay), replayed flag, noise rows, digest and values."""
    spent = record.loss if record.loss is not None else session.measure.zero()
    _note(request, release_id=record.release_id, loss=str(spent), replayed=record.replayed)
    frame = record.values
    return {"release_id": record.release_id, "replayed": record.replayed,
            "loss": _loss_json(spent), "noise": [r.as_dict() for r in record.noise],
            "digest": record.digest, "description": record.description,
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
            "noise_rows": None if rows is None else [r.as_dict() for r in rows]}
