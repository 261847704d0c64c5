"""The wire error table: every ``error`` name the server answers with, its HTTP status and
the exception :class:`dpkit.Client` raises for it — written once, read by the server
(:class:`ApiError`, :func:`refusal`, the middleware) and by the client
(:func:`client_exception`, :func:`client_error`).

A response's body is ``{"error": name, "detail": text, ...}``. A refused request debited
nothing; a ``ReleaseFailed`` (500) was debited and failed after (the loss stands; the text is
fixed and names no data value). This module imports no web framework, so the client reads it
without FastAPI.
"""

from __future__ import annotations

import importlib
import logging
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from dpkit.errors import (
    BoundsError,
    BudgetExceededError,
    ColumnError,
    DomainError,
    DPError,
    LedgerError,
    MeasureError,
    StreamRollbackError,
)
from dpkit.frame.language import ProtocolError

__all__ = ["WireError", "WIRE_ERRORS", "REFUSED", "ApiError", "refusal", "client_exception",
           "client_error",
           "release_failed", "stream_busy", "history_damaged", "stream_failed"]


@dataclass(frozen=True)
class WireError:
    """One row of the wire error table.

    Attributes
    ----------
    status : int
        The HTTP status the server answers with.
    raises : type, str or None
        What the client raises (None: :class:`dpkit.client.ServerError` with the status);
        a ``"module:Class"`` text is imported on first use (it keeps ``import dpkit``
        light).
    fields : tuple of str
        Fields of the body the client passes to the exception as keywords (a SQL error's
        span).
    """

    status: int
    raises: type[Exception] | str | None = None
    fields: tuple[str, ...] = ()


WIRE_ERRORS: dict[str, WireError] = {
    "BadRequest": WireError(400),  # an invalid Content-Length (middleware)
    "Unauthorized": WireError(401),
    "Forbidden": WireError(403),
    "NotFound": WireError(404),
    "BudgetExceededError": WireError(409, BudgetExceededError),
    "LedgerError": WireError(409, LedgerError),
    "StreamRollbackError": WireError(409, StreamRollbackError),  # a racing /next: ask again
    "DatasetRetired": WireError(409),
    "StreamLost": WireError(410),
    "PayloadTooLarge": WireError(413),
    "DomainError": WireError(422, DomainError),
    "BoundsError": WireError(422, BoundsError),
    "ColumnError": WireError(422, ColumnError),
    "MeasureError": WireError(422, MeasureError),
    "ProtocolError": WireError(422, ProtocolError),
    "SQLError": WireError(422, "dpkit.frame.sql:SQLError", ("line", "column", "fragment")),
    "InvalidQuery": WireError(422, DomainError),  # an engine refused the query's plan
    "ValidationError": WireError(422, DomainError),  # the request's shape
    "HorizonExceededError": WireError(422, "dpkit.stream:HorizonExceededError"),
    "ReleaseFailed": WireError(500),
    "StreamHistoryDamaged": WireError(500),
    "InternalError": WireError(500),
    "NotConfigured": WireError(501),
    "Unavailable": WireError(503),
}

# a request refused before its debit: the first class it is an instance of gives the status;
# the name is the exception's own class name
REFUSED: tuple[tuple[type[Exception], int], ...] = (
    (BudgetExceededError, 409), (LedgerError, 409),
    (DomainError, 422), (BoundsError, 422), (ColumnError, 422), (MeasureError, 422))

# errors of the engines while a query is built or checked (before any debit, reading no
# row): a query the schema rejects, e.g. DuckDB's binder on mixed types
_ENGINES = frozenset({"polars", "narwhals", "duckdb", "pyspark", "py4j"})
_LOG = "dpkit.server"


class ApiError(Exception):
    """An HTTP error with a machine-readable ``error`` name and a message.

    Parameters
    ----------
    error : str
        A name of :data:`WIRE_ERRORS` (whose status it takes), or with ``status`` the class
        name of a refused request's exception.
    detail : str
        The message (never a data value).
    status : int, optional
        The HTTP status, for a name outside the table.
    **extra
        More fields of the body (e.g. ``release_id``).
    """

    def __init__(self, error: str, detail: str, status: int | None = None,
                 **extra: Any) -> None:
        super().__init__(detail)
        self.status = WIRE_ERRORS[error].status if status is None else status
        self.error, self.detail, self.extra = error, detail, extra


def refusal(exc: BaseException) -> ApiError:
    """The HTTP error for a request refused before any debit (no data was read)."""
    if isinstance(exc, ApiError):
        return exc
    for kind, status in REFUSED:
        if isinstance(exc, kind):
            # the ledger names itself ("ledger <url>: ..."); its location is not for analysts
            text = re.sub(r"^ledger \S+: ", "", str(exc)) if status == 409 else str(exc)
            return ApiError(type(exc).__name__, text, status)
    if isinstance(exc, DPError):
        return ApiError(type(exc).__name__, "internal error", 500)
    engine_error = type(exc).__module__.split(".")[0].lstrip("_") in _ENGINES
    if isinstance(exc, TypeError | ValueError | KeyError | pl.exceptions.PolarsError) or (
            engine_error):
        # a query the schema rejects (e.g. a string compared with a number); the first line
        # only, as the rest describes the plan
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return ApiError("InvalidQuery", f"{type(exc).__name__}: {first}")
    return ApiError("InternalError", "internal error")


def client_exception(name: str) -> type[Exception] | None:
    """What the client raises for the wire error ``name`` (None: a ``ServerError``)."""
    row = WIRE_ERRORS.get(name)
    raises = None if row is None else row.raises
    if not isinstance(raises, str):
        return raises
    module, _, attr = raises.partition(":")
    found: type[Exception] = getattr(importlib.import_module(module), attr)
    return found


def client_error(name: str, message: str, body: dict[str, Any]) -> Exception | None:
    """The exception the client raises for the wire error ``name`` with ``message`` and the
    row's ``fields`` read from the response ``body`` (None: a ``ServerError``). A message
    that already ends with what the exception's constructor adds for those fields (a SQL
    error's span) keeps it once."""
    error = client_exception(name)
    if error is None:
        return None
    fields = WIRE_ERRORS[name].fields
    if not fields:
        return error(message)
    make: Any = error
    extra = {k: body.get(k) for k in fields}
    suffix = str(make("", **extra))
    if suffix and message.endswith(suffix):
        message = message[:-len(suffix)]
    found: Exception = make(message, **extra)
    return found


# -- after the debit: fixed texts that name no value (the exception is logged, by type) ------
def release_failed(release_id: int | None, exc: BaseException) -> ApiError:
    """A release debited and then failed: the loss stands and nothing is returned."""
    logging.getLogger(_LOG).error("release failed after its debit", exc_info=exc,
                                  extra={"fields": {"release_id": release_id}})
    return ApiError("ReleaseFailed", "the release failed after its loss was debited (the "
                    "loss stands); no result", release_id=release_id)


def stream_busy(stream_id: int) -> ApiError:
    """Another request released the stream's next step first (409): ask again."""
    return ApiError("StreamRollbackError", f"stream {stream_id}: another request released "
                    "its next step first; ask again")


def history_damaged(stream_id: int) -> ApiError:
    """The stream's released history fails its integrity check (500; logged)."""
    logging.getLogger(_LOG).error(
        "stream history fails its integrity check", extra={"fields": {"release_id": stream_id}})
    return ApiError("StreamHistoryDamaged", f"stream {stream_id}: its released history "
                    "fails its integrity check (reported to the curator)")


def stream_failed(stream_id: int, exc: BaseException) -> ApiError:
    """A stream request failed after the stream's debit (500; the exception's type is
    logged, never its text)."""
    logging.getLogger(_LOG).error(
        "stream step failed after its debit", exc_info=exc,
        extra={"fields": {"release_id": stream_id}})
    return ApiError("ReleaseFailed", f"stream {stream_id}: the request failed after the "
                    "stream's debit (the loss stands; a step it recorded is kept in the "
                    "stream's history)", release_id=stream_id)
