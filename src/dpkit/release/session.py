"""Histogram release on a column of a :class:`~dpkit.frame.Session` (interface mode in, a
non-interactive release out)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError
from dpkit.frame import aggregates, engine
from dpkit.release.histogram import HistogramRelease, release_histogram

__all__ = ["release_query_histogram"]


def release_query_histogram(query: Any, column: str, bins: Sequence[Number],
                            method: str = "hb", *, epsilon: Number, **options: Any
                            ) -> HistogramRelease:
    """Release the histogram of ``column`` (bins [eᵢ, eᵢ₊₁), the last closed) of a session
    query with a :mod:`dpkit.release` algorithm.

    Privacy: the query's rows are bounded to the session's privacy unit first, so one unit
    changes the count vector by at most Δ = its L1 contribution bound (``max_rows``; 1 for
    row-level units) — the sensitivity the compiler derives for ``dp.histogram``. Every
    algorithm is ε′-DP for count vectors at L1 distance 1, hence Δ·ε′-DP at distance Δ
    (group privacy, Dwork & Roth Thm 2.2): it runs at ε′ = ε/Δ and the session is charged
    exactly what a Laplace histogram at ``epsilon`` would be (ε; ρ = ε²/2 in zCDP sessions).

    Parameters
    ----------
    query : dpkit.frame.Query
        An ungrouped query without aggregations (filters and transformations allowed).
    column : str
        A numeric column.
    bins : sequence of numbers
        Increasing bin edges e₀ < … < e_m (m cells); values outside, nulls and NaN are dropped.
    method : str
        A registered algorithm (:func:`dpkit.release.methods`); default "hb".
    epsilon : number
        ε > 0 (nats) to spend.
    **options
        ``workload``, ``non_negative``, ``integer`` and the algorithm's own options, as in
        :func:`dpkit.release.release_histogram`.

    Returns
    -------
    HistogramRelease
        ``counts`` (m,), ``labels`` the bins, ``epsilon`` the ε charged to the session.

    Raises
    ------
    DomainError, BoundsError, ColumnError
        For a grouped query, existing aggregations, bad bins or an unknown method — before
        any data is read or budget spent. BudgetExceededError if ε exceeds what remains.
    """
    if query.aggs or query.group_columns:
        raise DomainError("release_histogram runs on an ungrouped query without agg()")
    eps = positive(epsilon, "epsilon", up=False)
    hist = aggregates.histogram(column, bins=bins)
    q = query.agg(hist)
    lf, planned = q.plan(eps)
    stat = planned[0]
    if "laplace" not in stat.mechanism.lower():
        raise DomainError("histogram release needs Laplace-calibrated (pure ε) budgets")
    delta_l1 = Fraction(stat.sensitivity)
    session = query.session
    workload = options.get("workload")
    m = len(hist.edges()) - 1
    if workload is not None and tuple(workload.shape) != (m,):
        raise DomainError(f"workload shape {workload.shape} != ({m},) bins")
    from dpkit.release.histogram import _method  # validate the method before spending

    _method(method, 1)

    def compute() -> HistogramRelease:
        bounded = session.bounded(q, lf, [])
        raw = engine.compute(bounded, None, [stat.stat], session.privacy_unit.column)
        counts = raw[stat.stat.key][0]
        out = release_histogram(counts, eps / delta_l1, method, **options)
        return replace(out, epsilon=eps, labels=tuple(hist.labels()))

    description = f"{q.describe()} released by {method}"
    return session.run_debited(session._total_loss(planned, None), description, compute,
                               lambda r: hashlib.sha256(r.counts.tobytes()).hexdigest())
