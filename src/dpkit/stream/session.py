"""``query.continual(…)``: a continual release over a :class:`~dpkit.frame.Session` query,
registered as a query namespace when :mod:`dpkit.stream` is imported (the way
:mod:`dpkit.release` registers ``query.publish``; ``frame`` never imports ``stream``).

``session.query().filter(…).continual(dp.count(), time="day", horizon=365, epsilon=1)``
charges the session once and returns a :class:`ContinualQuery`; each :meth:`~ContinualQuery.
advance` reads the query's rows of the next step (its time interval) from the session's table
and releases that step. The privacy unit is the session's: ``PrivacyUnit.rows()`` is event
level (w = 1); ``PrivacyUnit.by(column, max_rows=M)`` is user level with w = M, *enforced*
over the whole stream from the unit column (:mod:`dpkit.stream.frames`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import narwhals as nw

from dpkit.core.numbers import Number
from dpkit.errors import DomainError
from dpkit.frame import aggregates, engine, register_query_namespace
from dpkit.stream.frames import ContinualRelease, ContinualStep

__all__ = ["ContinualNamespace", "ContinualQuery"]


class ContinualQuery(ContinualRelease):
    """A :class:`~dpkit.stream.frames.ContinualRelease` bound to a session query."""

    query: Any = None

    def advance(self, *, save: tuple[Any, bytes] | None = None) -> ContinualStep:
        """Release the next step from the query's rows in its time interval (``save`` as
        :meth:`~dpkit.stream.frames.ContinualRelease.feed`).

        Raises
        ------
        HorizonExceededError
            After the horizon.
        StreamRollbackError
            If the ledger's step mark is past this state (a stale copy).
        """
        lo, hi = self.interval(self.t + 1)
        col = nw.col(self.config["time"])
        rows = self.query.lazy().filter((col >= lo) & (col < hi))
        return self.feed(engine.to_polars(rows.collect()), save=save)


@register_query_namespace("continual")
class ContinualNamespace:
    """``query.continual(aggregation, time=…, horizon=…, …)`` (module docstring).

    Parameters of the call
    ----------------------
    aggregation : dp.count() or dp.sum(column, bounds=(lower, upper))
        Integer bounds sum integers; other bounds a real-valued sum on a grid
        (:mod:`dpkit.stream.frames`, ``grid_bits``).
    time : str
        The time column (integers, dates or datetimes; ``origin``, ``every`` as in
        :class:`~dpkit.stream.frames.ContinualRelease`).
    horizon : int
    **options
        ``mechanism``, ``epsilon``/``rho``, ``keys`` with ``by``, ``window``, ``origin``,
        ``every``, ``beta`` and the post-processing flags.

    Raises
    ------
    DomainError
        Before the debit: a grouped or aggregated or partitioned query, a step the batch
        side refuses at plan time (:func:`dpkit.frame.rowwise.check_step`: not row-wise,
        writing the unit column, failing on a row of nulls), a step that does not run on
        the schema, an aggregation other than count and sum, or a bad option.
    """

    def __init__(self, query: Any) -> None:
        self.query = query

    def __call__(self, aggregation: Any, *, time: str, horizon: int | None,
                 **options: Any) -> ContinualQuery:
        q = self.query
        if q.aggs or q.group_columns or q.part is not None:
            raise DomainError("continual runs on an ungrouped, unpartitioned query without agg()")
        for name in ("unit", "contributions", "value", "bounds", "accountant", "label"):
            if name in options:
                raise DomainError(f"{name} comes from the session and the aggregation")
        if isinstance(aggregation, aggregates.Count):
            value, bounds = None, None
        elif isinstance(aggregation, aggregates.Sum):
            if aggregation.bounds is None:
                raise DomainError("a continual sum needs bounds=(lower, upper)")
            value = aggregation.column
            bounds = cast(tuple[Number, Number], tuple(aggregation.bounds))
        else:
            raise DomainError("continual supports dp.count() and dp.sum(column, bounds)")
        session = q.session
        unit = session.privacy_unit
        q.lazy()  # the steps' plan-time checks, as a batch query's (row-wise allow-list, the
        # unit column left alone, a row of nulls); builds a plan, reads nothing
        label = q.describe() if q.steps else None  # the rows, in the ledger's description
        stream = ContinualQuery(horizon, accountant=session.accountant, value=value,
                                bounds=bounds, unit=unit.column,
                                contributions=1 if unit.column is None else unit.max_rows,
                                time=time, label=label,
                                _schema=engine.to_polars(q.lazy(empty=True).collect()),
                                **options)
        stream.query = q
        return stream

    def restore(self, path: str | Path, key: bytes) -> ContinualQuery:
        """Reopen a stream saved with :meth:`~dpkit.stream.frames.ContinualRelease.save`
        on this query, against the session's ledger (no new debit; errors as
        :meth:`~dpkit.stream.frames.ContinualRelease.restore`)."""
        stream = ContinualQuery.restore(path, key, self.query.session.accountant)
        assert isinstance(stream, ContinualQuery)
        stream.query = self.query
        return stream
