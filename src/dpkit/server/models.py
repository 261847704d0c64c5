"""The server's response models (Pydantic), for the OpenAPI documentation at ``/docs``.

Request models are built elsewhere: a query's from the language registry
(:mod:`dpkit.server.protocol`), a stream's in :mod:`dpkit.server.streams`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SQLBudget", "SQLRequest", "Column", "DatasetInfo", "StatisticPlan",
           "ExplainResponse", "NoiseRowInfo", "ReleaseResponse", "StepReleaseInfo", "StepInfo",
           "StreamInfo", "ReleaseInfo"]


Number = int | float | Annotated[str, Field(max_length=64)]  # a string is an exact rational
# a loss (PrivacyLoss.as_json): {"measure", each field as a decimal float, "exact": {field:
# "p/q"}, "text"}; the decimals are for people, the exact strings for auditors
LossJson = dict[str, Any]


class SQLBudget(BaseModel):
    """The budget of a SQL statement (as the JSON route's ``budget``, without ``alpha``):
    ``epsilon``/``rho``/``delta``, the intervals' ``confidence`` and an optional ``split``."""

    model_config = ConfigDict(extra="forbid")
    epsilon: Number | None = None
    rho: Number | None = None
    delta: Number | None = None
    confidence: float = Field(default=0.95, gt=0, lt=1)
    split: list[Number] | None = Field(default=None, max_length=16)


class SQLRequest(BaseModel):
    """A SQL statement on one dataset (``POST /v1/datasets/{name}/sql``): its text (at most
    ``dpkit.frame.sql.MAX_SQL_BYTES`` bytes, checked before parsing), budget, dialect and
    an optional idempotency key."""

    model_config = ConfigDict(extra="forbid")
    sql: str
    budget: SQLBudget = Field(default_factory=SQLBudget)
    dialect: str | None = Field(default=None, max_length=32)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class Column(BaseModel):
    """A column of a dataset or a released table: its name and dtype."""

    name: str
    dtype: str


class DatasetInfo(BaseModel):
    """A dataset the caller may query: schema, privacy unit, measure, caps, spend,
    what remains (the tighter of the dataset's and the caller's) and the declared metadata
    (``dp.Schema.to_dict()``, or None)."""

    name: str
    columns: list[Column]
    privacy_unit: str
    measure: str
    cap: LossJson
    spent: LossJson
    analyst_cap: LossJson | None
    analyst_spent: LossJson
    remaining: LossJson
    declared: dict[str, Any] | None = None  # the curator's schema (Schema.to_dict), public


class StatisticPlan(BaseModel):
    """One noisy statistic of an explained query: sensitivity, mechanism, scale,
    expected error (half-width or rank error) and loss."""

    aggregation: str
    statistic: str
    mechanism: str
    sensitivity: float
    scale: float
    expected_error: float
    error_kind: str
    loss: LossJson


class ExplainResponse(BaseModel):
    """The plan of a query (free): its text, statistics, selection, total loss, what
    remains and whether it is affordable."""

    text: str
    confidence: float
    statistics: list[StatisticPlan]
    selection: LossJson | None
    total: LossJson
    remaining: LossJson
    affordable: bool
    loss_note: str | None = None  # why the total is not exactly the budget asked for


class NoiseRowInfo(BaseModel):
    """One noise row of a release (:meth:`dpkit.core.record.NoiseRow.as_json`): scale and
    sensitivity as decimals for people (null where the release states none), the exact
    numbers as fraction strings under ``exact``."""

    name: str
    scale: float | None
    sensitivity: float | None
    statistic: str | None
    exact: dict[str, str | None]


class ReleaseResponse(BaseModel):
    """A release, rendered from its :class:`~dpkit.core.record.Release`: id, replayed
    flag, loss (zero for a replay), the table, noise rows, digest and description."""

    release_id: int | None
    replayed: bool
    loss: LossJson
    columns: list[Column]
    records: list[dict[str, Any]]
    noise: list[NoiseRowInfo]
    digest: str | None
    description: str
    loss_note: str | None = None  # why the loss is not exactly the budget asked for




class StepReleaseInfo(BaseModel):
    """One key's released value at a stream step, with its interval."""

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
    """A hosted stream: its id, description, mechanism, horizon, last step, loss and a
    page of released steps."""

    stream_id: int | None
    dataset: str | None
    description: str
    mechanism: str
    horizon: int | None
    t: int
    closed: bool
    next_interval: list[Any] | None
    next_available: bool
    loss: LossJson
    steps: list[StepInfo]


class ReleaseInfo(BaseModel):
    """One of the caller's releases as the ledger records it."""

    id: int
    dataset: str
    time: str
    query: str
    loss: LossJson
    noise: str | None
    noise_rows: list[NoiseRowInfo] | None  # the noise column read as rows (None: older text)
    status: str
    result_sha256: str | None
    idempotency_key: str | None
