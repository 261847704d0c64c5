"""``dpkit.Client``: query a dpkit server (``dpkit serve``) with the :class:`Session` API.

Example::

    import dpkit as dp
    from dpkit.client import col

    client = dp.Client("http://127.0.0.1:8000", token="...")
    q = (client.query("adult")
         .filter(col("age") >= 30)
         .group_by("sex", keys=["Female", "Male"])
         .agg(dp.count(), dp.mean("hours-per-week", (0, 80))))
    print(q.explain(epsilon=0.5))            # free
    table = q.release(epsilon=0.5)           # a polars DataFrame
    client.last_release                      # its release id and loss

Expressions are built with :func:`col` and :func:`lit` (comparisons, ``+ - * /``,
``& | ~`` and ``.is_null()``) and sent as the server's whitelisted JSON AST
(:mod:`dpkit.server.protocol`). Errors come back as dpkit's own exceptions
(``BudgetExceededError``, ``DomainError``, ...) or :class:`ServerError` (with ``status``).
Needs ``httpx`` (``pip install dpkit[server]``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
)
from dpkit.frame import aggregates

__all__ = ["Client", "ClientQuery", "Expr", "ServerError", "col", "lit"]

_ERRORS: dict[str, type[Exception]] = {
    "BudgetExceededError": BudgetExceededError, "LedgerError": LedgerError,
    "DomainError": DomainError, "BoundsError": BoundsError, "ColumnError": ColumnError,
    "MeasureError": MeasureError, "ProtocolError": DomainError, "InvalidQuery": DomainError,
    "ValidationError": DomainError}


class ServerError(DPError, RuntimeError):
    """The server refused a request or failed (``status`` is the HTTP status)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


# -- expressions -----------------------------------------------------------------------------
class Expr:
    """A row-wise expression in the server's JSON AST (build with :func:`col`/:func:`lit`)."""

    __hash__ = None  # type: ignore[assignment]  # == builds an expression

    def __init__(self, node: dict[str, Any]) -> None:
        self.node = node

    def _op(self, op: str, *others: Any) -> Expr:
        return Expr({"op": op, "args": [self.node, *(_node(o) for o in others)]})

    def _rop(self, op: str, other: Any) -> Expr:
        return Expr({"op": op, "args": [_node(other), self.node]})

    def __ge__(self, other: Any) -> Expr:
        return self._op(">=", other)

    def __gt__(self, other: Any) -> Expr:
        return self._op(">", other)

    def __le__(self, other: Any) -> Expr:
        return self._op("<=", other)

    def __lt__(self, other: Any) -> Expr:
        return self._op("<", other)

    def __eq__(self, other: Any) -> Expr:  # type: ignore[override]
        return self._op("==", other)

    def __ne__(self, other: Any) -> Expr:  # type: ignore[override]
        return self._op("!=", other)

    def __add__(self, other: Any) -> Expr:
        return self._op("+", other)

    def __radd__(self, other: Any) -> Expr:
        return self._rop("+", other)

    def __sub__(self, other: Any) -> Expr:
        return self._op("-", other)

    def __rsub__(self, other: Any) -> Expr:
        return self._rop("-", other)

    def __mul__(self, other: Any) -> Expr:
        return self._op("*", other)

    def __rmul__(self, other: Any) -> Expr:
        return self._rop("*", other)

    def __truediv__(self, other: Any) -> Expr:
        return self._op("/", other)

    def __rtruediv__(self, other: Any) -> Expr:
        return self._rop("/", other)

    def __and__(self, other: Any) -> Expr:
        return self._op("&", other)

    def __rand__(self, other: Any) -> Expr:
        return self._rop("&", other)

    def __or__(self, other: Any) -> Expr:
        return self._op("|", other)

    def __ror__(self, other: Any) -> Expr:
        return self._rop("|", other)

    def __invert__(self) -> Expr:
        return self._op("~")

    def is_null(self) -> Expr:
        """True where the value is null."""
        return self._op("is_null")

    def __bool__(self) -> bool:
        raise TypeError("an expression has no truth value; combine with & and |, not and/or")

    def __repr__(self) -> str:
        return f"Expr({self.node!r})"


def col(name: str) -> Expr:
    """The column ``name`` of the (transformed) private table."""
    return Expr({"col": name})


def lit(value: Any) -> Expr:
    """A literal (bool, int, float or str)."""
    return Expr({"lit": value})


def _node(value: Any) -> dict[str, Any]:
    return value.node if isinstance(value, Expr) else {"lit": value}


# -- the query builder -----------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ClientQuery:
    """A lazy query on a served dataset; mirrors :class:`dpkit.frame.Query`.

    Every method returns a new query; nothing is sent until :meth:`explain` or
    :meth:`release`.
    """

    client: Client
    dataset: str
    steps: tuple[dict[str, Any], ...] = ()
    group: dict[str, Any] | None = None
    aggs: tuple[aggregates.Aggregation, ...] = ()

    def _step(self, step: dict[str, Any]) -> ClientQuery:
        if self.aggs:
            raise DomainError(f"{step['step']} must come before agg()")
        return replace(self, steps=(*self.steps, step))

    def filter(self, *predicates: Expr) -> ClientQuery:
        """Keep rows matching all predicates."""
        out = self
        for p in predicates:
            out = out._step({"step": "filter", "expr": _node(p)})
        return out

    def with_columns(self, **named: Expr) -> ClientQuery:
        """Add or replace columns computed row by row (by keyword: ``name=expr``)."""
        return self._step({"step": "with_columns",
                           "columns": {k: _node(v) for k, v in named.items()}})

    def clamp(self, column: str, lower: Any, upper: Any) -> ClientQuery:
        """Clamp ``column`` and declare its bounds (see :meth:`Query.clamp`)."""
        from dpkit.server.protocol import json_number

        return self._step({"step": "clamp", "column": column, "lower": json_number(lower),
                           "upper": json_number(upper)})

    def bin(self, column: str, edges: Sequence[Any] | None = None, *, width: Any = None,
            name: str | None = None) -> ClientQuery:
        """Replace ``column`` (or add ``name``) by its bin's lower edge (see
        :meth:`Query.bin`)."""
        from dpkit.server.protocol import json_number

        step: dict[str, Any] = {"step": "bin", "column": column}
        if edges is not None:
            step["edges"] = [json_number(e) for e in edges]
        if width is not None:
            step["width"] = json_number(width)
        if name is not None:
            step["name"] = name
        return self._step(step)

    def map(self, column: str, mapping: Mapping[Any, Any], *, default: Any = None,
            name: str | None = None) -> ClientQuery:
        """Map the categories of ``column`` (see :meth:`Query.map`)."""
        step: dict[str, Any] = {"step": "map", "column": column,
                                "mapping": [[k, v] for k, v in mapping.items()]}
        if default is not None:
            step["default"] = default
        if name is not None:
            step["name"] = name
        return self._step(step)

    def fill_null(self, column: str, value: Any) -> ClientQuery:
        """Replace nulls of ``column`` by ``value``."""
        return self._step({"step": "fill_null", "column": column, "value": value})

    def drop_nulls(self, *columns: str) -> ClientQuery:
        """Drop rows with a null in any of ``columns`` (all columns if none)."""
        return self._step({"step": "drop_nulls", "columns": list(columns)})

    def group_by(self, *columns: str, keys: Any = None, selection: Any = None) -> ClientQuery:
        """Group by public ``keys`` or by private partition ``selection`` (see
        :meth:`Query.group_by`)."""
        if not columns:
            raise DomainError("group_by needs at least one column")
        if (keys is None) == (selection is None):
            raise DomainError("group_by needs keys= (public) or selection= (private)")
        return replace(self, group={"columns": list(columns), "keys": keys,
                                    "selection": selection})

    def agg(self, *aggs: aggregates.Aggregation) -> ClientQuery:
        """Aggregations to release together (``dp.count()``, ``dp.mean(...)``, ...)."""
        if not aggs or not all(isinstance(a, aggregates.Aggregation) for a in aggs):
            raise DomainError("agg() takes dp.count(), dp.sum(...), dp.mean(...), ...")
        return replace(self, aggs=(*self.aggs, *aggs))

    def count(self) -> ClientQuery:
        """Shorthand for ``agg(dp.count())``."""
        return self.agg(aggregates.count())

    def sum(self, column: str, bounds: Any = None, **kw: Any) -> ClientQuery:
        """Shorthand for ``agg(dp.sum(column, bounds))``."""
        return self.agg(aggregates.sum(column, bounds, **kw))

    def mean(self, column: str, bounds: Any = None, **kw: Any) -> ClientQuery:
        """Shorthand for ``agg(dp.mean(column, bounds))``."""
        return self.agg(aggregates.mean(column, bounds, **kw))

    def histogram(self, column: str, bins: Any = None, **kw: Any) -> ClientQuery:
        """Shorthand for ``agg(dp.histogram(column, bins))``."""
        return self.agg(aggregates.histogram(column, bins, **kw))

    def quantile(self, column: str, q: Any, bounds: Any = None, **kw: Any) -> ClientQuery:
        """Shorthand for ``agg(dp.quantile(column, q, bounds))``."""
        return self.agg(aggregates.quantile(column, q, bounds, **kw))

    # -- sending -----------------------------------------------------------------------------
    def payload(self, epsilon: Any = None, *, rho: Any = None, delta: Any = None,
                split: Sequence[Any] | None = None, confidence: float = 0.95,
                alpha: Any = None, idempotency_key: str | None = None) -> dict[str, Any]:
        """The JSON request for this query with a budget (what :meth:`release` sends)."""
        from dpkit.server.protocol import from_query

        budget = {"epsilon": epsilon, "rho": rho, "delta": delta, "alpha": alpha,
                  "split": split, "confidence": confidence}
        return from_query(steps=self.steps, group_by=self._group_json(), aggs=self.aggs,
                          budget=budget, idempotency_key=idempotency_key)

    def _group_json(self) -> dict[str, Any] | None:
        if self.group is None:
            return None
        return {k: v for k, v in self.group.items() if v is not None}

    def plan(self, epsilon: Any = None, *, rho: Any = None, delta: Any = None,
             split: Sequence[Any] | None = None, confidence: float = 0.95,
             alpha: Any = None) -> dict[str, Any]:
        """The server's explanation as data: per statistic sensitivity, mechanism, scale and
        expected error; the total loss; what remains; whether it is affordable. Free."""
        body = self.payload(epsilon, rho=rho, delta=delta, split=split, confidence=confidence,
                            alpha=alpha)
        return dict(self.client._post(f"/v1/datasets/{self.dataset}/explain", body))

    def explain(self, epsilon: Any = None, *, rho: Any = None, delta: Any = None,
                split: Sequence[Any] | None = None, confidence: float = 0.95,
                alpha: Any = None) -> str:
        """The plan as text (as :meth:`Query.explain`). Free: debits nothing."""
        return str(self.plan(epsilon, rho=rho, delta=delta, split=split,
                             confidence=confidence, alpha=alpha)["text"])

    def release(self, epsilon: Any = None, *, rho: Any = None, delta: Any = None,
                split: Sequence[Any] | None = None, confidence: float = 0.95,
                alpha: Any = None, idempotency_key: str | None = None) -> pl.DataFrame:
        """Release the aggregations (as :meth:`Query.release`); the release id and loss are
        left in ``client.last_release``.

        Raises
        ------
        BudgetExceededError
            If the loss exceeds the dataset's or the analyst's remaining budget.
        DomainError, BoundsError, ColumnError, MeasureError
            For a refused query (nothing debited).
        ServerError
            For authentication, authorisation and server failures.
        """
        body = self.payload(epsilon, rho=rho, delta=delta, split=split, confidence=confidence,
                            alpha=alpha, idempotency_key=idempotency_key)
        answer = self.client._post(f"/v1/datasets/{self.dataset}/release", body)
        self.client.last_release = {k: answer[k] for k in ("release_id", "replayed", "loss")}
        return _frame(answer["columns"], answer["records"])


def _frame(columns: list[dict[str, str]], records: list[dict[str, Any]]) -> pl.DataFrame:
    """The released table; nulls in float columns are the NaN the server cannot send."""
    dtypes = {c["name"]: _dtype(c["dtype"]) for c in columns}
    if not records:
        return pl.DataFrame(schema={n: t or pl.Null for n, t in dtypes.items()})
    frame = pl.from_dicts(records, infer_schema_length=None)
    frame = frame.select(pl.col(n).cast(t) if t is not None else pl.col(n)
                         for n, t in dtypes.items())
    floats = [n for n, t in frame.schema.items() if t.is_float()]
    return frame.with_columns(pl.col(floats).fill_null(float("nan")))


def _dtype(name: str) -> Any:
    dtype = getattr(pl, name, None)
    return dtype if isinstance(dtype, type) and issubclass(dtype, pl.DataType) else None


# -- the client ------------------------------------------------------------------------------
class Client:
    """A connection to a dpkit server as one analyst.

    Parameters
    ----------
    url : str, optional
        The server's base URL (``http://host:port``).
    token : str, optional
        The analyst's API token (sent as ``Authorization: Bearer``).
    app : ASGI application, optional
        Instead of ``url``: a server application in this process (``create_app(...)``),
        called through Starlette's test client — for tests.
    timeout : float
        Seconds per request.

    Attributes
    ----------
    last_release : dict or None
        ``release_id``, ``replayed`` and ``loss`` of the latest release.
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, app: Any = None,
                 timeout: float = 60.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http: httpx.Client
        if app is not None:
            with warnings.catch_warnings():  # Starlette's note about its httpx dependency
                warnings.filterwarnings("ignore", message="Using `httpx` with")
                from starlette.testclient import TestClient

            self._http = TestClient(app, headers=headers, raise_server_exceptions=False)
        elif url:
            self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers,
                                      timeout=timeout)
        else:
            raise DomainError("Client needs url= (a server) or app= (an application)")
        self.last_release: dict[str, Any] | None = None

    def health(self) -> dict[str, Any]:
        """The server's health check."""
        return dict(self._get("/healthz"))

    def datasets(self) -> list[dict[str, Any]]:
        """The datasets this analyst may query: schema, measure, caps, spend, remaining."""
        return list(self._get("/v1/datasets"))

    def query(self, dataset: str) -> ClientQuery:
        """Start a lazy query on ``dataset``."""
        return ClientQuery(self, dataset)

    def releases(self, dataset: str | None = None) -> list[dict[str, Any]]:
        """This analyst's releases (oldest first), optionally on one dataset."""
        params = {"dataset": dataset} if dataset else None
        return list(self._get("/v1/releases", params))

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return _answer(self._http.get(path, params=params))

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        return _answer(self._http.post(path, json=body))


def _answer(response: Any) -> Any:
    """The response's JSON, or the matching dpkit error."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code < 400:
        return body
    detail = body.get("detail", response.text) if isinstance(body, dict) else response.text
    message = detail if isinstance(detail, str) else "; ".join(
        f"{'.'.join(e.get('loc', []))}: {e.get('msg', '')}" for e in detail
        if isinstance(e, dict)) or str(detail)
    error = _ERRORS.get(body.get("error", "") if isinstance(body, dict) else "")
    if error is not None:
        raise error(message)
    raise ServerError(response.status_code, message)
