"""dpkit.server — differentially private queries over HTTP (``dpkit serve``).

Contents
--------
config       the YAML configuration: ledger, workers, body limit, datasets (CSV, Parquet,
             DuckDB or PostgreSQL source; privacy unit; lifetime budget)
protocol     the JSON form of a query (steps, group_by, aggs, budget) and its whitelisted
             expression AST; ``to_query`` (JSON → Query) and ``from_query`` (parts → JSON)
app          ``create_app(config)``: the FastAPI application; ``serve``: run it with uvicorn
routes       the endpoints (one ``APIRouter``): authentication, queries, releases, streams
models       the response models (Pydantic) of the OpenAPI documentation
errors       the wire error table (error name → HTTP status and the client's exception),
             read by the server and by ``dpkit.Client``
state        what a worker holds: the ledger, the stream store, the served datasets
sources      loading the datasets once per worker
streams      continual releases hosted for analysts (dpkit.stream): open once, next steps
middleware   JSON request logs without data values; body-size and nesting limits

The client is :class:`dpkit.Client`. The server needs the ``server`` extra
(``pip install dpkit[server]``: FastAPI, uvicorn, httpx, PyYAML).
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "serve", "load_config"]


def __getattr__(name: str) -> Any:  # imported on demand: FastAPI is an optional dependency
    if name in ("create_app", "serve"):
        from dpkit.server import app

        return getattr(app, name)
    if name == "load_config":
        from dpkit.server.config import load_config

        return load_config
    raise AttributeError(f"module 'dpkit.server' has no attribute {name!r}")
