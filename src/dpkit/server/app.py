"""The HTTP server: FastAPI endpoints over :class:`~dpkit.frame.Session` and the ledger.

Endpoints (OpenAPI documentation at ``/docs``, the web console at ``/``:
:mod:`~dpkit.server.console_routes`)::

    GET  /healthz                         liveness and ledger reachability (no auth)
    GET  /v1/datasets                     datasets the caller has a grant on, with budgets
    POST /v1/datasets/{name}/explain      the plan, errors and cost of a query (free)
    POST /v1/datasets/{name}/release      release a query: DP results, loss, release id
    POST /v1/datasets/{name}/sql          release a SQL statement (the same answer)
    POST /v1/datasets/{name}/sql/explain  the plan and cost of a SQL statement (free)
    GET  /v1/releases                     the caller's own releases
    GET  /v1/releases/{id}                one of the caller's own releases
    POST /v1/datasets/{name}/streams      open a continual release (charged once)
    POST /v1/streams/{id}/next            release the stream's next available step(s)
    GET  /v1/streams/{id}                 the stream and a page of its released steps
    GET  /v1/curator/ledger               the ledger for the curator's token (console)
    POST /v1/curator/verify               the ledger's integrity check (curator's token)

Every ``/v1`` request needs ``Authorization: Bearer <token>`` (an analyst's token from the
ledger, compared by hash). Status codes: 401 no or wrong token, 403 no grant on the
dataset, 404 unknown dataset, release or stream, 409 budget exceeded (or an idempotent retry
still in progress, a stream step released by a concurrent request — ask again —, or a stream
of a retired dataset), 410 a stream whose state was lost, 413 body too large, 422 malformed or
refused query (SQL text: ``SQLError`` with its span; or a stream past its
horizon), 500 a release or stream step that failed after
its debit (the loss stands; a fixed text, nothing is returned) or a stream history that fails
its integrity check, 501 streams not configured (they need ``ledger_key_env``). Refused
requests debit nothing. Streams: :mod:`dpkit.server.streams`.

The package in rooms: this module builds the application; :mod:`~dpkit.server.routes` holds
the endpoints, :mod:`~dpkit.server.models` the response models,
:mod:`~dpkit.server.errors` the wire error table (name → status, and the exception
``dpkit.Client`` raises), :mod:`~dpkit.server.state` what a worker holds.

The server never returns rows: a query's only output is its DP aggregations, and a release
runs only after its loss is debited in the ledger (atomically, against the dataset's and the
analyst's caps). Idempotent retries replay the recorded answer.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from dpkit.errors import DomainError
from dpkit.server import console_routes, routes, sql_routes
from dpkit.server.config import ServerConfig, load_config
from dpkit.server.errors import WIRE_ERRORS, ApiError
from dpkit.server.middleware import BodyLimitMiddleware, RequestLogMiddleware, configure_logging
from dpkit.server.state import Served, ServerState

__all__ = ["create_app", "app_from_env", "serve", "ENV_CONFIG", "ApiError", "ServerState",
           "Served"]

ENV_CONFIG = "DPKIT_SERVER_CONFIG"


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
        If the configuration or a data source is invalid; ``MismatchError`` (a ConfigError)
        if the ledger holds a dataset with another measure, cap or privacy unit.
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
                  description=(__doc__ or "").split("\n\n", 1)[-1],
                  docs_url=None, redoc_url=None)  # /docs: console_routes, no CDN
    app.state.dpkit = state
    app.add_middleware(BodyLimitMiddleware, max_bytes=cfg.max_body_bytes)
    app.add_middleware(RequestLogMiddleware)
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.include_router(routes.router)
    app.include_router(sql_routes.router)
    app.include_router(console_routes.router)  # the console at /, /docs, /v1/curator
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
    ServerState(cfg).close()  # refuse here, before any worker: a source or ledger mismatch
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
    return JSONResponse({"error": "ValidationError", "detail": errors},
                        status_code=WIRE_ERRORS["ValidationError"].status)
