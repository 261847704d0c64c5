"""The server's SQL endpoints: the same SQL as :meth:`Session.sql <dpkit.frame.Session.sql>`
over HTTP (issue 32).

::

    POST /v1/datasets/{name}/sql          release a SQL statement: the JSON route's answer
    POST /v1/datasets/{name}/sql/explain  its plan and cost (free)

The body is :class:`~dpkit.server.models.SQLRequest` (``{"sql": "SELECT …", "budget":
{"epsilon": …}, "dialect": …}``). The text is checked against ``MAX_SQL_BYTES`` before it is
parsed (413; the body limit of the middleware comes first), then planned by the dataset's
session (:meth:`Session.sql_plan <dpkit.frame.Session.sql_plan>`: sqlglot's parser, the
translation to a :class:`~dpkit.frame.Query` and the plan-time checks, reading no row), and
released through the same road as the JSON plan (:meth:`Session.release
<dpkit.frame.Session.release>`: the debit is exactly the plan's loss). Refused text answers
422 ``SQLError`` with the span (``line``, ``column``, ``fragment``) in the body; anything
else refused before the debit maps through :func:`~dpkit.server.errors.refusal` as on the JSON
route. The ledger row's ``query`` is the canonical plan (:meth:`Query.describe`), then the SQL
text (:func:`sql_description`), so a release can be replayed and audited from either.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import polars as pl
from fastapi import APIRouter, Request
from fastapi.security import HTTPAuthorizationCredentials

from dpkit.core.record import Release
from dpkit.errors import DomainError, ReleaseFailedError
from dpkit.frame.query import Plan
from dpkit.frame.session import Session
from dpkit.server import routes
from dpkit.server.errors import ApiError, refusal, release_failed
from dpkit.server.models import ExplainResponse, ReleaseResponse, SQLRequest
from dpkit.server.state import ServerState

if TYPE_CHECKING:
    from dpkit.frame.sql import SQLQuery

__all__ = ["router", "Statement", "plan_statement", "check_size", "SQLTooLargeError",
           "sql_description", "sql_refusal", "SQL_MARK"]

router = APIRouter()
SQL_MARK = "\n-- sql: "  # the ledger's query: the canonical plan, this mark, the text as JSON


@router.post("/v1/datasets/{name}/sql", response_model=ReleaseResponse, tags=["queries"])
def sql_release(name: str, payload: SQLRequest, request: Request,
                credentials: HTTPAuthorizationCredentials | None = routes._AUTH,
                state: ServerState = routes._STATE) -> dict[str, Any]:
    """Release a SQL statement with differential privacy: its plan's loss is debited in
    the ledger (against the dataset's and the caller's caps) before any row is read; the
    answer is the JSON route's (values, loss, noise rows, digest, description)."""
    analyst, served = routes._authorise(state, request, credentials, name)
    with served.source.open() as data:
        session = state.session(served, data, analyst)
        record = _release(_plan(session, payload), payload)
    return routes._release_response(request, session, record)


@router.post("/v1/datasets/{name}/sql/explain", response_model=ExplainResponse,
             tags=["queries"])
def sql_explain(name: str, payload: SQLRequest, request: Request,
                credentials: HTTPAuthorizationCredentials | None = routes._AUTH,
                state: ServerState = routes._STATE) -> dict[str, Any]:
    """The plan of a SQL statement — per statistic: sensitivity, mechanism, noise scale,
    expected error — and its total loss, as the JSON route's explain. Free: reads no data,
    debits nothing."""
    analyst, served = routes._authorise(state, request, credentials, name)
    with served.source.open() as data:
        session = state.session(served, data, analyst)
        statement = _plan(session, payload)
        kwargs = {**_arguments(statement.plan), "confidence": payload.budget.confidence}
        out = routes._explain(state, session, statement.plan.query, kwargs, analyst)
    if statement.sql.post.text:  # HAVING, ORDER BY, LIMIT: free
        out["text"] += ("\npost-processing of the noisy result (no privacy cost): "
                        f"{statement.sql.post.text}")
    return out


class SQLTooLargeError(DomainError):
    """SQL text over ``MAX_SQL_BYTES`` bytes: refused before it is parsed (413 over HTTP)."""


def check_size(text: str) -> None:
    """Refuse a text over ``MAX_SQL_BYTES`` (UTF-8) before anything parses it.

    Raises
    ------
    SQLTooLargeError
        If the text is longer (the server answers 413 ``PayloadTooLarge``).
    """
    from dpkit.frame.sql import MAX_SQL_BYTES

    if len(text) > MAX_SQL_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_SQL_BYTES:
        raise SQLTooLargeError(f"SQL text over {MAX_SQL_BYTES} bytes; send one statement")


def sql_refusal(exc: BaseException) -> ApiError:
    """The HTTP error of a statement refused before its debit: ``SQLError`` (422) with the
    span of the offending text, or the JSON route's refusal."""
    from dpkit.frame.sql import SQLError

    if isinstance(exc, SQLTooLargeError):
        return ApiError("PayloadTooLarge", str(exc))
    if isinstance(exc, SQLError):
        return ApiError("SQLError", str(exc), line=exc.line, column=exc.column,
                        fragment=exc.fragment)
    return refusal(exc)


def sql_description(plan: Plan, text: str) -> str:
    """The ledger's text of a SQL release: the canonical plan (``Query.describe()``), then
    :data:`SQL_MARK` and the SQL text as a JSON string (one line, every character kept)."""
    return f"{plan.description}{SQL_MARK}{json.dumps(text, ensure_ascii=False)}"


@dataclass(frozen=True)
class Statement:
    """A SQL statement planned as the server and ``dpkit sql`` release it.

    Attributes
    ----------
    sql : SQLQuery
        The translated statement: the builder's query and the post-processing of its
        result (``HAVING``, ``ORDER BY``, ``LIMIT``, the ``SELECT`` list's names).
    plan : Plan
        Its plan; ``description`` is :func:`sql_description` (the ledger's ``query``).
    """

    sql: SQLQuery
    plan: Plan

    def release(self, confidence: float = 0.95, idempotency_key: str | None = None
                ) -> Release[pl.DataFrame]:
        """Release the plan through its session (the debit is ``plan.loss``), then
        post-process the values (free, and total: it cannot fail on any value).

        Raises
        ------
        BudgetExceededError, DomainError
            Before the debit, as :meth:`Session.release <dpkit.frame.Session.release>`.
        ReleaseFailedError
            After the debit (the loss stands).
        """
        record = self.sql.query.session.release(self.plan, confidence=confidence,
                                                idempotency_key=idempotency_key)
        try:
            return replace(record, values=self.sql.post.apply(record.values))
        except Exception as exc:  # after the debit: a fixed text, never the data's
            raise ReleaseFailedError(record.release_id, "post-processing failed") from exc


def plan_statement(session: Session, text: str, *, epsilon: Any = None, rho: Any = None,
                   delta: Any = None, split: Sequence[Any] | None = None,
                   dialect: str | None = None) -> Statement:
    """A SQL statement on ``session`` translated and planned, as the server and ``dpkit sql``
    release it: :func:`dpkit.frame.sql.to_query` (sqlglot's parser and the allow-list), the
    plan (:meth:`SQLQuery.plan <dpkit.frame.sql.SQLQuery.plan>`), the steps dry-run on zero
    rows (an engine's type error refuses here, before the debit), and the SQL text added to
    the ledger's description (:func:`sql_description`). Reads no row, spends nothing.

    Parameters
    ----------
    session : Session
        The dataset's session (its declared schema gives bounds and keys).
    text : str
        One SQL statement, at most ``MAX_SQL_BYTES`` bytes (checked first: :func:`check_size`).
    epsilon, rho, delta, split
        The budget, as :meth:`Session.sql <dpkit.frame.Session.sql>` takes it (numbers may
        be exact rational strings).
    dialect : str, optional
        One of ``dpkit.frame.sql.DIALECTS`` (default DuckDB's).

    Returns
    -------
    Statement
        ``statement.release()`` debits exactly ``statement.plan.loss``.

    Raises
    ------
    SQLTooLargeError
        For text over ``MAX_SQL_BYTES`` bytes (not parsed).
    SQLError
        For refused text, with its span (``line``, ``column``, ``fragment``).
    DomainError, BoundsError, ColumnError, MeasureError
        For a statement the plan-time checks refuse.
    """
    from dpkit.frame.sql import to_query

    check_size(text)
    statement = to_query(session, text, dialect=dialect or "duckdb")
    plan = statement.plan(_number(epsilon), rho=_number(rho), delta=_number(delta),
                          split=None if split is None else [_number(w) for w in split])
    routes._dry_run(plan.query)
    return Statement(statement, replace(plan, description=sql_description(plan, text)))


def _plan(session: Session, payload: SQLRequest) -> Statement:
    """The request's statement, or the HTTP error of its refusal (nothing read or spent)."""
    b = payload.budget
    try:
        return plan_statement(session, payload.sql, epsilon=b.epsilon, rho=b.rho,
                              delta=b.delta, split=b.split, dialect=payload.dialect)
    except Exception as exc:
        raise sql_refusal(exc) from exc


def _release(statement: Statement, payload: SQLRequest) -> Release[pl.DataFrame]:
    """The statement released (the debit is its plan's loss)."""
    try:
        return statement.release(payload.budget.confidence, payload.idempotency_key)
    except ReleaseFailedError as exc:  # debited, then failed: the loss stands
        raise release_failed(exc.release_id, exc) from None
    except Exception as exc:
        raise sql_refusal(exc) from exc  # refused before (or instead of) a debit


def _arguments(plan: Plan) -> dict[str, Any]:
    """The budget arguments that fixed the plan's statistics (ε, ρ, δ, split)."""
    names = ("epsilon", "rho", "delta", "split")
    return {k: v for k, v in zip(names, plan.arguments, strict=True) if v is not None}


def _number(value: Any) -> Any:
    from dpkit.frame import language

    return None if value is None else language.number(value)
