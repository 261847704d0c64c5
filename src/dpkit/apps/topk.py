"""Top-k over an unknown domain with user-level contribution bounds (search-log release).

Sources: Korolova, Kenthapadi, Mishra & Ntoulas, *Releasing search queries and clicks
privately*, WWW 2009 (Alg. 1: keep each user's first d queries, release a query when its
user count plus Laplace noise passes a threshold, with a fresh noisy count and noisy click
counts); the threshold step is dpkit's partition selection
(:mod:`dpkit.mechanisms.partition_selection`: by default the optimal truncated-geometric rule
of Desfontaines, Voss, Gipson & Mandayam, PoPETs 2022, Thm 1; Korolova et al.'s Laplace
threshold with ``method="laplace"``), and the top-k is post-processing of the released noisy
counts. ``method="limited_domain"`` picks the top-k instead with Durfee & Rogers, *Practical
differentially private top-k selection with pay-what-you-get composition*, NeurIPS 2019
(Alg. 1, Thm 1; :class:`dpkit.mechanisms.limited_domain.TopKSelection`): it looks only at the
true top-k̄ items, and a user may be in any number of items (Δ enters only as min(Δ, k̄)).

Pipeline (one :class:`~dpkit.frame.Session` release; nothing re-derived here): the (user,
item) pairs are made distinct (with ``clicks``: one row per pair, its clicks summed); the
session bounds each user to at most d distinct items (``PrivacyUnit.by(user, d,
max_groups=d, max_rows_per_group=1)``, rows chosen at random); ``group_by(item,
selection=...)`` releases the selected items, each with its user count plus discrete Laplace
noise of scale min(d, k)/ε_c for limited domain, d/ε_c for a threshold (L1 sensitivity: the
items a user can be in among those released), and with ``clicks`` a click total whose
per-(user, item) value is clamped to [0, c] (sensitivity min(d, k)·c or d·c; ε_c split
evenly between the two). Privacy (user level, add/remove one user with all their rows):
(ε_s + ε_c, δ)-DP by basic composition (the selection: ApproxDP(ε_s, δ); the statistics:
ε_c), ε_s + ε_c = ε exactly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import polars as pl

from dpkit.core import numbers
from dpkit.core.measures import ApproxDP
from dpkit.core.numbers import Number
from dpkit.errors import ColumnError, DomainError
from dpkit.frame import PrivacyUnit, Session, count
from dpkit.frame import sum as dp_sum
from dpkit.mechanisms.frontend import AccountantLike, charge, check_accountant, unit_column
from dpkit.mechanisms.limited_domain import TopKSelection
from dpkit.mechanisms.partition_selection import METHODS, PartitionSelection

__all__ = ["top_k_unknown_domain", "top_k_query"]

MAX_D = 10_000
LIMITED_DOMAIN = TopKSelection.method
_CLICK_COLUMNS = ["clicks", "clicks_ci_low", "clicks_ci_high"]


def _top(released: pl.DataFrame, item: str, k: int, ranked: bool) -> pl.DataFrame:
    """The first k rows: in the selection's order when it ranked them (limited domain),
    else by decreasing noisy count."""
    if not ranked:
        released = released.sort(["count", item], descending=[True, False], nulls_last=True)
    columns = [item, "count", "count_ci_low", "count_ci_high"]
    return released.head(k).select(columns + [c for c in _CLICK_COLUMNS if c in released.columns])


def top_k_query(session: Session, item: str, k: int, *,
                selection: PartitionSelection | TopKSelection, epsilon: Number,
                clicks: str | None = None, click_bound: Number | None = None) -> pl.DataFrame:
    """Top-k items over an unknown domain, released from an existing :class:`Session`.

    The session's privacy unit must be ``PrivacyUnit.by(user, d, max_groups=d,
    max_rows_per_group=1)`` (each user counts once per item, in at most d items) and its
    budget an (ε, δ) one; the session's accountant is charged ``selection``'s (ε_s, δ) plus
    ``epsilon`` for the counts (and clicks).

    Parameters
    ----------
    session : Session
    item : str
        The column whose values form the (unknown) domain.
    k : int
        How many items to report at most (fewer if fewer pass the threshold).
    selection : PartitionSelection or TopKSelection
        The threshold step (top-k by noisy count afterwards), or a limited-domain top-k
        selection (its own k; the rows come best first).
    epsilon : number
        ε_c of the noisy counts (and click totals: half each).
    clicks : str, optional
        A numeric column summed per released item ("click counts"), each row clamped to
        [0, ``click_bound``].
    click_bound : number, optional
        c > 0, required with ``clicks``.

    Returns
    -------
    polars.DataFrame
        Columns ``item``, ``count``, ``count_ci_low``, ``count_ci_high`` (and ``clicks``,
        ``clicks_ci_low``, ``clicks_ci_high``); at most k rows.

    Raises
    ------
    DomainError
        k < 1, a privacy unit that lets a user count more than once per item, a missing or
        bad click bound, or the session's own plan-time errors (nothing spent).
    """
    k = numbers.integer(k, "k", minimum=1)
    unit = getattr(session, "privacy_unit", None)
    if not isinstance(session, Session) or unit is None or unit.column is None:
        raise DomainError("top_k_query needs a Session with PrivacyUnit.by(user, ...)")
    if unit.bounds.max_rows_per_group != 1:
        raise DomainError("top_k_query counts users: declare max_rows_per_group=1 in the "
                          "privacy unit")
    query = _query(session, item, selection, clicks, click_bound)
    return _top(query.release(epsilon=epsilon), item, k, isinstance(selection, TopKSelection))


def _query(session: Session, item: str, selection: PartitionSelection | TopKSelection,
           clicks: str | None, click_bound: Any) -> Any:
    """The release: the user count per selected item, and the click total (column
    ``clicks``) with each (user, item) clamped to [0, c]."""
    query = session.query().group_by(item, selection=selection)
    if clicks is None:
        if click_bound is not None:
            raise DomainError("click_bound without clicks")
        return query.agg(count())
    if click_bound is None:
        raise DomainError("clicks needs click_bound: the most clicks one user adds to an item")
    bound = numbers.positive(click_bound, "click_bound")
    return query.agg(count(), dp_sum(clicks, bounds=(0, bound), name="clicks"))


def _pairs(frame: Any, user: str, item: str, clicks: str | None
           ) -> pl.DataFrame | pl.LazyFrame:
    """One row per (user, item) with an item (their clicks summed): eager for a DataFrame
    (the session's in-memory path), lazy for a LazyFrame (its streaming path)."""
    if not isinstance(frame, pl.DataFrame | pl.LazyFrame):
        raise DomainError("frame must be a polars DataFrame or LazyFrame")
    names = [user, item] + ([] if clicks is None else [clicks])
    if not all(isinstance(n, str) for n in names) or len(set(names)) < len(names):
        raise DomainError("user, item (and clicks) must be different column names")
    schema = frame.collect_schema()
    for column in names:
        if column not in schema:
            raise ColumnError(f"column {column!r} is not in the table")
    pairs = frame.select(names).drop_nulls(item)
    if clicks is None:
        return pairs.unique()
    if not schema[clicks].is_numeric():
        raise ColumnError(f"clicks column {clicks!r} must be numeric")
    return pairs.group_by(user, item).agg(pl.col(clicks).fill_null(0).sum())


def _selection(method: str, k: int, eps_s: Fraction, delta: Any, k_bar: Any
               ) -> PartitionSelection | TopKSelection:
    if method == LIMITED_DOMAIN:
        return TopKSelection(k, eps_s, delta, k_bar)
    if method not in METHODS:
        raise DomainError(f"unknown method {method!r}; use {LIMITED_DOMAIN!r} or one of "
                          f"{', '.join(METHODS)}")
    if k_bar is not None:
        raise DomainError("k_bar belongs to method='limited_domain'")
    return PartitionSelection(eps_s, delta, method)


def top_k_unknown_domain(frame: Any, *, user: str, item: str, k: int, d: int | None,
                         epsilon: Number, delta: Number, selection_share: Number = Fraction(1, 2),
                         method: str = "truncated_geometric", k_bar: int | None = None,
                         clicks: str | None = None, click_bound: Number | None = None,
                         accountant: AccountantLike = None) -> pl.DataFrame:
    """The k most common items among users, over a domain not known in advance.

    Parameters
    ----------
    frame : polars.DataFrame or LazyFrame
        One row per (user, item) occurrence; duplicates count once; rows with a null item
        are dropped (the user's other rows remain).
    user, item : str
        The privacy unit's column and the item column.
    k : int
        At most k items are reported.
    d : int or None
        Contribution bound: each user counts in at most d distinct items (chosen at random
        among theirs when they have more); at most 10,000. None (limited domain only): the
        bound 10,000, i.e. in effect unrestricted — the selection then needs only min(d, k̄)
        and the counts min(d, k).
    epsilon : number
        Total ε (nats): ``selection_share`` of it to the selection, the rest to the counts
        (and click totals, half each).
    delta : number
        δ ∈ (0, 1) of the selection (the probability budget of releasing an item that only
        one user has, or of picking one that is a candidate on one side only).
    selection_share : number
        In (0, 1); default 1/2.
    method : str
        "truncated_geometric" (default), "laplace" (Korolova et al.) or "gaussian":
        partition selection, then the k largest noisy counts; "limited_domain": Durfee &
        Rogers' top-k selection, rows best first.
    k_bar : int, optional
        Limited domain only: candidates among the true top-k̄ (default k).
    clicks : str, optional
        A numeric column of clicks per row: per (user, item) summed, clamped to
        [0, ``click_bound``] and released as a noisy total per reported item.
    click_bound : number, optional
        c > 0, required with ``clicks``.
    accountant : Accountant, PrivacyFilter, Session or None
        Charged ApproxDP(ε, δ) once, before the data is read.

    Returns
    -------
    polars.DataFrame
        ``item``, ``count`` (noisy user count, discrete Laplace of scale d/ε_c, or
        min(d, k)/ε_c for limited domain), ``count_ci_low``, ``count_ci_high`` (95%), and with
        ``clicks``: ``clicks``, ``clicks_ci_low``, ``clicks_ci_high``; at most k rows.

    Raises
    ------
    DomainError, ColumnError
        Bad numbers, columns or frame type, or a bad accountant — all before any debit.

    Notes
    -----
    Privacy map: add/remove one user ↦ ApproxDP(ε, δ) (module docstring; Korolova et al.
    2009 for the threshold-and-count design, DVGM22 Thm 1 for the threshold rule, Durfee &
    Rogers 2019 Thm 1 for limited domain).
    """
    eps = numbers.positive(epsilon, "epsilon", up=False)
    share = numbers.to_fraction(selection_share)
    if not 0 < share < 1:
        raise DomainError("selection_share must be in (0, 1)")
    k = numbers.integer(k, "k", minimum=1)
    if d is None and method != LIMITED_DOMAIN:
        raise DomainError("d=None (unrestricted) needs method='limited_domain'")
    d = MAX_D if d is None else numbers.integer(d, "d", minimum=1, maximum=MAX_D)
    eps_s = eps * share
    eps_c = eps - eps_s
    selection = _selection(method, k, eps_s, delta, k_bar)
    loss = ApproxDP(eps, selection.loss().delta)  # validates δ, k, k̄ and the method
    pairs = _pairs(frame, user, item, clicks)
    # the inner session bounds each user: a Session's unit must be that user column
    bounded = unit_column(accountant) == user
    check_accountant(accountant, unit_bounded=bounded)
    session = Session(pairs, PrivacyUnit.by(user, d, max_groups=d, max_rows_per_group=1),
                      loss)

    query = _query(session, item, selection, clicks, click_bound)
    query.plan(epsilon=eps_c)  # plan-time checks (no data read)

    def compute() -> pl.DataFrame:
        return _top(query.release(epsilon=eps_c), item, k, method == LIMITED_DOMAIN)
    return charge(accountant, loss, f"top-{k} of {item!r} over an unknown domain: user "
                  f"{user!r}, d={d}, ε={eps}, δ={loss.delta}, {method}"
                  + (f", clicks {clicks!r} ≤ {click_bound}" if clicks else ""), compute,
                  unit_bounded=bounded)
