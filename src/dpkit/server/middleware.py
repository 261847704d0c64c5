"""Structured JSON logs and the two ASGI middlewares of the server.

Logs carry a request id, method, path, status, latency and — set by the endpoints — the
analyst, dataset, release id and loss. They never carry query payloads, data values or
results, and for errors only the exception's type.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

from dpkit.server.errors import WIRE_ERRORS

__all__ = ["JsonFormatter", "configure_logging", "RequestLogMiddleware", "BodyLimitMiddleware",
           "json_depth", "MAX_JSON_DEPTH", "LOGGER"]

LOGGER = "dpkit.server"
MAX_JSON_DEPTH = 64  # nesting of JSON arrays/objects in a request body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        body.update(getattr(record, "fields", {}))
        if record.exc_info and record.exc_info[0] is not None:
            body["error"] = record.exc_info[0].__name__  # never the message: it may hold data
        return json.dumps(body, default=str, ensure_ascii=False)


def configure_logging(level: int = logging.INFO) -> logging.Logger:
    """The server's logger, writing JSON lines to stderr (set up once)."""
    logger = logging.getLogger(LOGGER)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    return logger


class RequestLogMiddleware:
    """Give each request an id (``X-Request-ID``) and log one line when it completes.

    Endpoints add fields through ``request.state.log`` (a dict): analyst, dataset, loss,
    release id.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.logger = logging.getLogger(LOGGER)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        fields: dict[str, Any] = {"request_id": request_id}
        scope.setdefault("state", {})["log"] = fields
        status = 500
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"],
                                      (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            fields.update(method=scope.get("method"), path=scope.get("path"), status=status,
                          latency_ms=round((time.perf_counter() - start) * 1000, 2))
            self.logger.info("request", extra={"fields": dict(fields)})


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` (413; by Content-Length and by the bytes actually
    received) and JSON nested deeper than ``MAX_JSON_DEPTH`` (422), before the app parses
    anything."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared < 0:
            await _reply(send, "BadRequest", "invalid Content-Length")
            return
        if declared is not None and declared > self.max_bytes:
            await _reply(send, "PayloadTooLarge", f"body over {self.max_bytes} bytes")
            return
        body = await self._read(receive)
        if body is None:
            await _reply(send, "PayloadTooLarge", f"body over {self.max_bytes} bytes")
            return
        if json_depth(body) > MAX_JSON_DEPTH:
            await _reply(send, "ValidationError",
                         f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return None


async def _reply(send: Send, error: str, detail: str) -> None:
    """Answer with the wire error ``error`` (its status from the one table)."""
    body = json.dumps({"error": error, "detail": detail}).encode()
    await send({"type": "http.response.start", "status": WIRE_ERRORS[error].status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays/objects in a JSON text (strings skipped; an
    unbalanced text is measured as far as it goes)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub(b'""', body)):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest
