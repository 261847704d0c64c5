"""The web console, the self-hosted API docs and the curator's read-only routes (issue 33).

::

    GET  /                        the console (static HTML; no data in the page)
    GET  /console/{asset}         its ES modules and stylesheet (an allow-list of files)
    GET  /docs                    Swagger UI over /openapi.json, assets served from here
    GET  /docs/assets/{asset}     Swagger UI's JS/CSS (the ``fastapi-swagger`` package)
    GET  /v1/curator/ledger       caps, spend, burn-down, releases, analysts, grants, streams
    POST /v1/curator/verify       run the ledger's integrity check (``Ledger.verify``)

The console is files shipped in ``dpkit/server/console/``: a page that holds no data, and
plain ES modules that call the JSON API with the bearer token the user pastes (kept in
``sessionStorage``). It has no second path to the ledger: an analyst's page reads
``/v1/datasets``, ``/v1/releases`` and the explain/release routes, a curator's reads the two
``/v1/curator`` routes below. Every value is put in the page with ``textContent`` or an
attribute, never parsed as HTML, and every console response carries :data:`CONSOLE_CSP`
(same-origin scripts, styles and fetches; no inline script, no ``eval``; no framing).

The curator is whoever holds the token in the environment variable the configuration's
``curator_token_env`` names (compared by SHA-256 digest in constant time); without it the
curator routes answer 501 ``NotConfigured``. The curator routes read the ledger through its
public API and change nothing (``verify`` only reads).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from dpkit.core.measures import PrivacyLoss
from dpkit.server import routes
from dpkit.server.errors import ApiError
from dpkit.server.state import ServerState

__all__ = ["router", "CONSOLE_CSP", "ASSETS", "DOCS_ASSETS", "MAX_LEDGER_RELEASES",
           "docs_csp"]

router = APIRouter()

# the console's policy: nothing but this origin, no inline script or eval, no framing
CONSOLE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
               "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
               "form-action 'none'; frame-ancestors 'none'")
# the allow-list of console files and their media types (no path is built from the URL)
ASSETS = {"app.js": "text/javascript", "api.js": "text/javascript",
          "dom.js": "text/javascript", "chart.js": "text/javascript",
          "curator.js": "text/javascript", "console.css": "text/css"}
DOCS_ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
               "favicon-32x32.png": "image/png"}
MAX_LEDGER_RELEASES = 200  # the newest releases the curator's page lists
MAX_QUERY_TEXT = 300  # characters of a release's query text on the curator's page
_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY",
            "Cache-Control": "no-store"}


def _console_file(name: str) -> bytes:
    return resources.files("dpkit.server").joinpath("console", name).read_bytes()


@router.get("/", include_in_schema=False)
def console_page() -> Response:
    """The console's page (static: every value arrives later through the JSON API)."""
    return Response(_console_file("index.html"), media_type="text/html",
                    headers={"Content-Security-Policy": CONSOLE_CSP, **_HEADERS})


@router.get("/console/{asset}", include_in_schema=False)
def console_asset(asset: str) -> Response:
    """One of the console's files (404 for any name outside :data:`ASSETS`)."""
    if asset not in ASSETS:
        raise ApiError("NotFound", "no such console file")
    return Response(_console_file(asset), media_type=ASSETS[asset],
                    headers={"Content-Security-Policy": CONSOLE_CSP, **_HEADERS})


# -- self-hosted API docs ---------------------------------------------------------------------
def _swagger_dir() -> Path | None:
    """Where the ``fastapi-swagger`` package keeps Swagger UI's dist files (5.x, which reads
    the OpenAPI 3.1 document FastAPI writes; ``swagger-ui-bundle`` ships 4.15, which does
    not and draws an error page), if installed."""
    try:
        folder = resources.files("fastapi_swagger").joinpath("resources")
    except ModuleNotFoundError:
        return None
    return Path(str(folder))


def docs_csp(page: str) -> str:
    """The /docs page's policy: same-origin assets, and its one inline start-up script
    allowed by its SHA-256 (FastAPI writes it into the page)."""
    hashes = " ".join(
        "'sha256-" + _b64(hashlib.sha256(s.encode()).digest()) + "'"
        for s in re.findall(r"<script>(.*?)</script>", page, flags=re.S))
    return (f"default-src 'self'; script-src 'self' {hashes}; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
            "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def _b64(raw: bytes) -> str:
    import base64

    return base64.b64encode(raw).decode("ascii")


@router.get("/docs", include_in_schema=False)
def docs_page(request: Request) -> Response:
    """Swagger UI over this server's OpenAPI document, every asset from this origin."""
    if _swagger_dir() is None:
        raise ApiError("NotFound", "API docs need the fastapi-swagger package "
                       "(pip install 'dpkit[server]'); /openapi.json is served")
    page = get_swagger_ui_html(
        openapi_url=request.app.openapi_url or "/openapi.json", title="dpkit server: API",
        swagger_js_url="/docs/assets/swagger-ui-bundle.js",
        swagger_css_url="/docs/assets/swagger-ui.css",
        swagger_favicon_url="/docs/assets/favicon-32x32.png")
    text = bytes(page.body).decode()
    return HTMLResponse(text, headers={"Content-Security-Policy": docs_csp(text), **_HEADERS})


@router.get("/docs/assets/{asset}", include_in_schema=False)
def docs_asset(asset: str) -> Response:
    """One of Swagger UI's files (404 outside :data:`DOCS_ASSETS`)."""
    folder = _swagger_dir()
    if asset not in DOCS_ASSETS or folder is None:
        raise ApiError("NotFound", "no such docs file")
    return Response((folder / asset).read_bytes(), media_type=DOCS_ASSETS[asset],
                    headers={"X-Content-Type-Options": "nosniff"})


# -- the curator's routes ---------------------------------------------------------------------
def _curator(state: ServerState, request: Request,
             credentials: HTTPAuthorizationCredentials | None) -> None:
    """Let the curator's token through (digests compared in constant time); anyone else
    gets 401, and a server without ``curator_token_env`` (or with it unset) 501."""
    env = state.config.curator_token_env
    expected = os.environ.get(env) if env else None
    if not expected:
        raise ApiError("NotConfigured", "the curator's routes need curator_token_env in the "
                       "configuration, naming a set environment variable")
    if credentials is None or not credentials.credentials:
        raise ApiError("Unauthorized", "missing bearer token")
    given = hashlib.sha256(credentials.credentials.encode()).digest()
    if not hmac.compare_digest(given, hashlib.sha256(expected.encode()).digest()):
        raise ApiError("Unauthorized", "not the curator's token")
    routes._note(request, analyst="(curator)")


def _primary(loss: PrivacyLoss) -> Fraction:
    """The loss's first parameter (ε, or ρ): what a burn-down chart plots."""
    return Fraction(next(iter(loss.as_dict().values())))


def _burn(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The running sum of the first parameter of each debit, after each release."""
    total, out = Fraction(0), []
    for r in rows:
        total += _primary(r["loss"])
        out.append({"id": r["id"], "time": r["time"], "spent": float(total)})
    return out


def _dataset(state: ServerState, info: dict[str, Any]) -> dict[str, Any]:
    name = info["name"]
    return {"name": name, "measure": info["measure"], "privacy_unit": info["privacy_unit"],
            "served": name in state.datasets, "retired": state.ledger.retired(name),
            "cap": routes._loss_json(info["cap"]), "spent": routes._loss_json(info["spent"]),
            "cap_value": float(_primary(info["cap"])),
            "per_day": None if info["per_day"] is None else routes._loss_json(info["per_day"]),
            "burn": _burn(state.ledger.releases(name))}


def _release_row(r: dict[str, Any]) -> dict[str, Any]:
    text = str(r["query"] or "")
    return {"id": r["id"], "dataset": r["dataset"], "analyst": r["analyst"],
            "time": r["time"], "status": r["status"], "loss": routes._loss_json(r["loss"]),
            "query": text if len(text) <= MAX_QUERY_TEXT else text[:MAX_QUERY_TEXT] + "…"}


@router.get("/v1/curator/ledger", tags=["curator"])
def curator_ledger(request: Request,
                   credentials: HTTPAuthorizationCredentials | None = routes._AUTH,
                   state: ServerState = routes._STATE) -> dict[str, Any]:
    """The ledger as the curator reads it: every dataset (cap, spend, policy, burn-down),
    the newest :data:`MAX_LEDGER_RELEASES` releases, the analysts (names only), their
    grants and the hosted streams. Curator's token only; reads, changes nothing."""
    _curator(state, request, credentials)
    ledger = state.ledger
    rows = ledger.releases()
    by_id = {r["id"]: r for r in rows}
    streams = [{**s, "dataset": by_id[s["release_id"]]["dataset"],
                "analyst": by_id[s["release_id"]]["analyst"]}
               for s in ledger.streams() if s["release_id"] in by_id]
    return {"head": ledger.head(),
            "datasets": [_dataset(state, d) for d in ledger.datasets()],
            "releases": [_release_row(r) for r in rows[::-1][:MAX_LEDGER_RELEASES]],
            "release_count": len(rows),
            "analysts": ledger.analysts(),
            "grants": [{**g, "cap": None if g["cap"] is None else routes._loss_json(g["cap"]),
                        "spent": routes._loss_json(g["spent"])} for g in ledger.grants()],
            "streams": streams}


@router.post("/v1/curator/verify", tags=["curator"])
def curator_verify(request: Request, since_checkpoint: bool = False,
                   credentials: HTTPAuthorizationCredentials | None = routes._AUTH,
                   state: ServerState = routes._STATE) -> dict[str, Any]:
    """Check the whole ledger against its keyed chain, as ``dpkit ledger verify`` does
    (:meth:`Ledger.verify <dpkit.ledger.Ledger.verify>`): ``ok`` and the problems found,
    each naming what is wrong. Curator's token only; reads, changes nothing."""
    _curator(state, request, credentials)
    problems = state.ledger.verify(since_checkpoint=since_checkpoint)
    return {"ok": not problems, "problems": problems, "head": state.ledger.head(),
            "releases": state.ledger.count()}
