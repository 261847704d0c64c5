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
    record = q.release_record(epsilon=0.5)   # or the record: values, loss, noise, id
    client.declared("adult")                 # the curator's dp.Schema (or None): with it,
    client.query("adult").group_by("sex").agg(dp.mean("age"))  # keys, bounds by default

    stream = (client.query("visits")         # a continual release hosted by the server,
              .continual(dp.count(), time="day", horizon=365, rho=0.5,  # charged once
                         origin=date(2024, 1, 1), keys=["a", "b"], by="region"))
    stream.next(7)                           # the steps available so far, with intervals
    client.stream(stream.stream_id).history()  # later, from anywhere: every released step

    client.sql("adult", 'SELECT sex, COUNT(*), AVG(age) FROM adult GROUP BY sex',
               epsilon=0.5)                  # the same SQL as Session.sql

A :class:`ClientQuery` is a :class:`dpkit.frame.Query` on a remote session: the same
builder, sent as its JSON form (:mod:`dpkit.frame.language`). Expressions are built with
:func:`col` and :func:`lit` (comparisons, ``+ - * /``, ``& | ~`` and ``.is_null()``), the
grammar the server allows. :meth:`Client.sql` sends SQL text instead. Errors come back as
dpkit's own exceptions (``BudgetExceededError``, ``DomainError``, ``SQLError`` with its
span, ...) or :class:`ServerError` (with ``status``).
Needs ``httpx`` (``pip install dpkit[server]``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

import polars as pl

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from dpkit.core.numbers import Number
from dpkit.core.record import NoiseRow, Release
from dpkit.errors import DomainError, DPError
from dpkit.frame import language
from dpkit.frame.language import Expr, col, lit
from dpkit.frame.query import Query
from dpkit.frame.schema import Schema
from dpkit.server.errors import client_error

__all__ = ["Client", "ClientQuery", "RemoteSession", "RemoteStream", "Expr", "ServerError",
           "col", "lit"]

_MEASURES: dict[Any, type[PrivacyLoss]] = {m.__name__: m for m in (PureDP, ApproxDP, ZCDP)}


class ServerError(DPError, RuntimeError):
    """The server refused a request or failed (``status`` is the HTTP status)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


# -- the query builder -----------------------------------------------------------------------
class RemoteSession:
    """A served dataset as the session of a :class:`ClientQuery`: the data stays on the
    server, so a query records its steps and sends their JSON form."""

    def __init__(self, client: Client, dataset: str) -> None:
        self.client, self.dataset = client, dataset
        self._declared: tuple[Schema | None] | None = None  # fetched on first use

    def declared(self, name: str | None = None) -> Schema | None:
        """The dataset's declared schema as the server publishes it (fetched once), whose
        categories and bounds the builder writes into the query as explicit keys and
        bounds; None when the curator declared none."""
        if self._declared is None:
            self._declared = (self.client.declared(self.dataset),)
        return self._declared[0]

    def table(self, name: str | None = None) -> Any:
        """Refused: what needs the data (schemas, joins, partitions) runs on the server."""
        raise DomainError(f"the data of {self.dataset!r} stays on the server: this needs a "
                          "library Session (dp.Session)")


@dataclass(frozen=True, eq=False)
class ClientQuery(Query):
    """A lazy query on a served dataset: :class:`dpkit.frame.Query`'s builder on a
    :class:`RemoteSession` (steps with a JSON form only; expressions built with :func:`col`
    and :func:`lit`). Nothing is sent until :meth:`explain` or :meth:`release`, which send
    :meth:`~dpkit.frame.Query.to_json` with the budget."""

    @property
    def client(self) -> Client:
        return cast(RemoteSession, self.session).client

    @property
    def dataset(self) -> str:
        return cast(RemoteSession, self.session).dataset

    def _lower(self, tag: str, params: dict[str, Any] | None) -> Query:
        language.encode_step(tag, params)  # refuses what has no JSON form, now
        return self  # the server lowers it

    def _keys_in_schema(self, frame: pl.DataFrame) -> pl.DataFrame:
        return frame  # the server converts the keys to the columns' types

    # -- sending -----------------------------------------------------------------------------
    def payload(self, epsilon: Number | None = None, *, rho: Number | None = None,
                delta: Number | None = None,
                split: Sequence[Any] | None = None, confidence: float = 0.95,
                alpha: Number | None = None, idempotency_key: str | None = None) -> dict[str, Any]:
        """The JSON request for this query with a budget (what :meth:`release` sends)."""
        from dpkit.server.protocol import request_json

        budget = {"epsilon": epsilon, "rho": rho, "delta": delta, "alpha": alpha,
                  "split": split, "confidence": confidence}
        return request_json(self.to_json(), budget, idempotency_key)

    def plan(self, epsilon: Number | None = None, *,  # type: ignore[override]
             rho: Number | None = None, delta: Number | None = None,
             split: Sequence[Any] | None = None, confidence: float = 0.95,
             alpha: Number | None = None) -> dict[str, Any]:
        """The server's explanation as data: per statistic sensitivity, mechanism, scale and
        expected error; the total loss; what remains; whether it is affordable. Free."""
        body = self.payload(epsilon, rho=rho, delta=delta, split=split, confidence=confidence,
                            alpha=alpha)
        return dict(self.client._post(f"/v1/datasets/{self.dataset}/explain", body))

    def explain(self, epsilon: Number | None = None, *, rho: Number | None = None,
                delta: Number | None = None,
                split: Sequence[Any] | None = None, confidence: float = 0.95,
                alpha: Number | None = None, n: Number | None = None) -> str:
        """The plan as text (as :meth:`Query.explain`, its own half-widths at n = 1,000
        and 100,000). Free: debits nothing.

        Raises
        ------
        DomainError
            For ``n``: the server's explain takes no stated count yet.
        """
        if n is not None:
            raise DomainError("a remote explain gives a mean's half-width at n = 1,000 and "
                              "100,000; n= is not sent to the server")
        return str(self.plan(epsilon, rho=rho, delta=delta, split=split,
                             confidence=confidence, alpha=alpha)["text"])

    def release(self, epsilon: Number | None = None, *, rho: Number | None = None,
                delta: Number | None = None,
                split: Sequence[Any] | None = None, confidence: float = 0.95,
                alpha: Number | None = None, idempotency_key: str | None = None) -> pl.DataFrame:
        """Release the aggregations (as :meth:`Query.release`): the frame of
        :meth:`release_record`.

        Raises
        ------
        BudgetExceededError
            If the loss exceeds the dataset's or the analyst's remaining budget.
        DomainError, BoundsError, ColumnError, MeasureError
            For a refused query (nothing debited).
        ServerError
            For authentication, authorisation and server failures.
        """
        return self.release_record(epsilon, rho=rho, delta=delta, split=split,
                                   confidence=confidence, alpha=alpha,
                                   idempotency_key=idempotency_key).values

    def release_record(self, epsilon: Number | None = None, *, rho: Number | None = None,
                       delta: Number | None = None,
                       split: Sequence[Any] | None = None, confidence: float = 0.95,
                       alpha: Number | None = None, idempotency_key: str | None = None
                       ) -> Release[pl.DataFrame]:
        """Release the aggregations; the server's record of it, as
        :meth:`Session.release <dpkit.frame.Session.release>` returns it: ``values`` (the
        frame), ``loss`` (None for a replay), ``noise`` rows, ``release_id``, ``replayed``,
        ``digest``, ``description``. Its id, replayed flag and loss are also left in
        ``client.last_release``. Same errors as :meth:`release`."""
        body = self.payload(epsilon, rho=rho, delta=delta, split=split, confidence=confidence,
                            alpha=alpha, idempotency_key=idempotency_key)
        answer = self.client._post(f"/v1/datasets/{self.dataset}/release", body)
        self.client.last_release = {k: answer[k] for k in ("release_id", "replayed", "loss")}
        return _record(answer)

    @property
    def continual(self) -> RemoteContinual:
        """``query.continual(aggregation, time=…, horizon=…, epsilon=…/rho=…, …)``: open a
        stream hosted by the server (:class:`RemoteStream`)."""
        return RemoteContinual(self)


class RemoteContinual:
    """``ClientQuery.continual``: opens a hosted continual release (as
    ``query.continual(…)`` on a Session; :mod:`dpkit.server.streams`)."""

    def __init__(self, query: ClientQuery) -> None:
        self.query = query

    def __call__(self, aggregation: Any, *, time: str, horizon: int | None,
                 epsilon: Any = None, rho: Any = None, mechanism: str = "smooth",
                 origin: Any = None, every: int | None = None,
                 keys: Sequence[Any] | None = None, by: str | None = None,
                 window: int | None = None, confidence: float = 0.95,
                 nonnegative: bool = False, monotone: bool = False,
                 integer: bool = False) -> RemoteStream:
        """Open the stream; its whole budget is debited now.

        Parameters
        ----------
        aggregation : dp.count() or dp.sum(column, bounds=(lower, upper))
        time, horizon, mechanism, keys, by, window, nonnegative, monotone, integer
            As :class:`dpkit.stream.ContinualRelease`.
        epsilon, rho : number
            The whole stream's budget (exactly one).
        origin : int, date or datetime, optional
            The start of step 1 (dates and datetimes are sent in ISO form).
        every : int, optional
            Step length: time units (integer time), days (date origin) or seconds (datetime).
        confidence : float
            1 − β of the intervals.

        Raises
        ------
        BudgetExceededError, DomainError, ProtocolError
            As the server refuses it (nothing debited).
        """
        agg = language.encode_agg(aggregation)
        if agg.get("agg") not in ("count", "sum"):
            raise DomainError("continual supports dp.count() and dp.sum(column, bounds)")
        body: dict[str, Any] = {
            "steps": self.query.to_json()["steps"],
            "aggregation": {k: v for k, v in agg.items() if k in ("agg", "column", "bounds")},
            "time": time, "horizon": horizon, "mechanism": mechanism,
            "budget": {k: language.json_number(v) for k, v in (("epsilon", epsilon),
                                                                ("rho", rho)) if v is not None},
            "origin": origin.isoformat() if hasattr(origin, "isoformat") else origin,
            "every": every, "keys": None if keys is None else list(keys), "by": by,
            "window": window, "confidence": confidence, "nonnegative": nonnegative,
            "monotone": monotone, "integer": integer}
        client = self.query.client
        answer = client._post(f"/v1/datasets/{self.query.dataset}/streams", body)
        return RemoteStream(client, answer)


class RemoteStream:
    """A continual release hosted by the server.

    Attributes
    ----------
    stream_id : int
        Its id (the ledger release that paid for it).
    t : int
        The last released step.
    horizon : int or None
    closed : bool
        Whether the horizon is reached.
    next_interval : list or None
        The time interval of the next step; ``next_available`` whether it has ended.
    steps : list of ContinualStep
        The steps received by this object (:meth:`next`, :meth:`history`).
    """

    def __init__(self, client: Client, info: dict[str, Any]) -> None:
        self.client = client
        self.stream_id = int(info["stream_id"])
        self.steps: list[Any] = []
        self._update(info)

    def _update(self, info: dict[str, Any]) -> list[Any]:
        from dpkit.stream import ContinualStep

        self.info = info
        self.t, self.horizon, self.closed = info["t"], info["horizon"], info["closed"]
        self.next_interval, self.next_available = info["next_interval"], info["next_available"]
        self.description, self.loss = info["description"], info["loss"]
        got = [ContinualStep.from_dict(s) for s in info["steps"]]
        self.intervals = {s["t"]: s["interval"] for s in info["steps"]}
        return got

    def next(self, max_steps: int = 1) -> list[Any]:
        """Release the next available steps (at most ``max_steps``; none if the next step's
        interval has not ended yet); each a :class:`~dpkit.stream.ContinualStep`.

        Raises
        ------
        HorizonExceededError
            If the stream had already reached its horizon.
        StreamRollbackError
            If another request released the next step first (ask again).
        """
        got = self._update(self.client._post(f"/v1/streams/{self.stream_id}/next",
                                             {"max_steps": int(max_steps)}))
        self.steps.extend(got)
        return got

    def history(self, since: int = 0) -> list[Any]:
        """Every step released after step ``since`` (the server's log of released steps),
        fetched page by page (the server bounds a page; :mod:`dpkit.server.streams`)."""
        got: list[Any] = []
        offset = int(since)
        while True:
            info = self.client._get(f"/v1/streams/{self.stream_id}", {"offset": offset})
            page = self._update(info)
            got.extend(page)
            if not page or page[-1].t >= info["t"]:
                return got
            offset = page[-1].t


def _record(answer: dict[str, Any]) -> Release[pl.DataFrame]:
    """The release record of a release response (its loss by allow-list of measures)."""
    doc = answer["loss"]
    measure = _MEASURES.get(doc.get("measure")) if isinstance(doc, dict) else None
    if measure is None:
        raise ServerError(502, "the server's answer names no known privacy measure")
    loss = measure(**_exact_fields(doc))
    return Release(_frame(answer["columns"], answer["records"]),
                   None if answer["replayed"] else loss,
                   tuple(NoiseRow.from_dict(r) for r in answer.get("noise", [])), None,
                   answer["release_id"], bool(answer["replayed"]), answer.get("digest"),
                   str(answer.get("description", "")))


def _exact_fields(doc: dict[str, Any]) -> dict[str, Fraction]:
    """A loss document's exact fields: its ``exact`` map (issue 33's shape, the decimals
    beside it are for people) or, from an older server, the fraction strings themselves."""
    exact = doc.get("exact")
    if isinstance(exact, dict):
        return {k: Fraction(str(v)) for k, v in exact.items()}
    return {k: Fraction(str(v)) for k, v in doc.items() if k not in ("measure", "text")}


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
        try:
            import httpx
        except ModuleNotFoundError:
            raise ModuleNotFoundError("dpkit.Client needs httpx: pip install 'dpkit[server]'",
                                      name="httpx") from None

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
        """The datasets this analyst may query: schema, measure, caps, spend, remaining, and
        the declared metadata (``declared``: :meth:`dpkit.Schema.to_dict`'s shape, or
        None)."""
        return list(self._get("/v1/datasets"))

    def declared(self, dataset: str) -> Schema | None:
        """The curator's declared metadata of ``dataset`` (public: column types, bounds,
        categories, the privacy unit), or None when none was declared.

        Raises
        ------
        DomainError
            If this analyst has no grant on ``dataset`` (or it does not exist).
        """
        info = next((d for d in self.datasets() if d.get("name") == dataset), None)
        if info is None:
            raise DomainError(f"no dataset {dataset!r} among those this analyst may query")
        doc = info.get("declared")
        return None if doc is None else Schema.from_dict(doc)

    def query(self, dataset: str) -> ClientQuery:
        """Start a lazy query on ``dataset``."""
        return ClientQuery(cast(Any, RemoteSession(self, dataset)))

    def sql(self, dataset: str, text: str, *, epsilon: Any = None, rho: Any = None,
            delta: Any = None, split: Sequence[Any] | None = None, confidence: float = 0.95,
            dialect: str | None = None, idempotency_key: str | None = None) -> pl.DataFrame:
        """Release a SQL statement on ``dataset`` (as :meth:`Session.sql
        <dpkit.frame.Session.sql>`; ``POST /v1/datasets/{dataset}/sql``): the frame of
        :meth:`sql_record`.

        Parameters
        ----------
        dataset : str
            A served dataset.
        text : str
            One ``SELECT`` statement (at most ``dpkit.frame.sql.MAX_SQL_BYTES`` bytes).
        epsilon, rho, delta : number, optional
            The budget, as :meth:`Query.release <dpkit.frame.Query.release>` takes it.
        split : sequence of numbers, optional
            Relative weights of the statistics' shares of the budget.
        confidence : float
            Coverage of each reported interval.
        dialect : str, optional
            The SQL dialect the text is written in (sqlglot's name, e.g. ``"postgres"``).
        idempotency_key : str, optional
            A retry with the same key returns the recorded answer.

        Returns
        -------
        polars.DataFrame
            The released table (each statistic with its interval).

        Raises
        ------
        SQLError
            For refused text, with ``line``, ``column`` and ``fragment`` (nothing debited).
        BudgetExceededError
            If the loss exceeds the dataset's or the analyst's remaining budget.
        DomainError, BoundsError, ColumnError, MeasureError
            For a statement the plan-time checks refuse (nothing debited).
        ServerError
            For authentication, authorisation and server failures.
        """
        return self.sql_record(dataset, text, epsilon=epsilon, rho=rho, delta=delta,
                               split=split, confidence=confidence, dialect=dialect,
                               idempotency_key=idempotency_key).values

    def sql_record(self, dataset: str, text: str, *, epsilon: Any = None, rho: Any = None,
                   delta: Any = None, split: Sequence[Any] | None = None,
                   confidence: float = 0.95, dialect: str | None = None,
                   idempotency_key: str | None = None) -> Release[pl.DataFrame]:
        """Release a SQL statement; the server's record of it (as
        :meth:`ClientQuery.release_record`). Same parameters and errors as :meth:`sql`."""
        body = _sql_body(text, epsilon, rho, delta, split, confidence, dialect,
                         idempotency_key)
        answer = self._post(f"/v1/datasets/{dataset}/sql", body)
        self.last_release = {k: answer[k] for k in ("release_id", "replayed", "loss")}
        return _record(answer)

    def sql_plan(self, dataset: str, text: str, *, epsilon: Any = None, rho: Any = None,
                 delta: Any = None, split: Sequence[Any] | None = None,
                 confidence: float = 0.95, dialect: str | None = None) -> dict[str, Any]:
        """The server's explanation of a SQL statement as data (``POST
        /v1/datasets/{dataset}/sql/explain``; as :meth:`ClientQuery.plan`): per statistic
        sensitivity, mechanism, scale and expected error; the total loss; what remains;
        whether it is affordable. Free. Same parameters and errors as :meth:`sql`."""
        body = _sql_body(text, epsilon, rho, delta, split, confidence, dialect, None)
        return dict(self._post(f"/v1/datasets/{dataset}/sql/explain", body))

    def sql_explain(self, dataset: str, text: str, *, epsilon: Any = None, rho: Any = None,
                    delta: Any = None, split: Sequence[Any] | None = None,
                    confidence: float = 0.95, dialect: str | None = None) -> str:
        """The plan of a SQL statement as text (as :meth:`ClientQuery.explain`). Free."""
        return str(self.sql_plan(dataset, text, epsilon=epsilon, rho=rho, delta=delta,
                                 split=split, confidence=confidence, dialect=dialect)["text"])

    def stream(self, stream_id: int) -> RemoteStream:
        """This analyst's hosted stream ``stream_id`` (opened with ``query.continual``)."""
        return RemoteStream(self, self._get(f"/v1/streams/{int(stream_id)}"))

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


def _sql_body(text: str, epsilon: Any, rho: Any, delta: Any, split: Sequence[Any] | None,
              confidence: float, dialect: str | None, idempotency_key: str | None
              ) -> dict[str, Any]:
    """The body of a SQL request (numbers as the JSON route writes them)."""
    budget: dict[str, Any] = {k: language.json_number(v) for k, v in (
        ("epsilon", epsilon), ("rho", rho), ("delta", delta)) if v is not None}
    budget["confidence"] = confidence
    if split is not None:
        budget["split"] = [language.json_number(w) for w in split]
    body: dict[str, Any] = {"sql": text, "budget": budget}
    if dialect is not None:
        body["dialect"] = dialect
    if idempotency_key is not None:
        body["idempotency_key"] = idempotency_key
    return body


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
    name = body.get("error", "") if isinstance(body, dict) else ""
    error = client_error(name, message, body) if isinstance(name, str) else None  # the table
    if error is not None:
        raise error
    raise ServerError(response.status_code, message)
