"""Top-k over an unknown domain with user-level contribution bounds (search-log release).

Sources: Korolova, Kenthapadi, Mishra & Ntoulas, *Releasing search queries and clicks
privately*, WWW 2009 (Alg. 1: keep each user's first d queries, release a query when its
user count plus Laplace noise passes a threshold, with a fresh noisy count); the threshold
step is dpkit's partition selection (:mod:`dpkit.mechanisms.partition_selection`: by
default the optimal truncated-geometric rule of Desfontaines, Voss, Gipson & Mandayam,
PoPETs 2022, Thm 1; Korolova et al.'s Laplace threshold with ``method="laplace"``). The
top-k is post-processing of the released noisy counts, the "limited domain" idea of Durfee &
Rogers, *Practical differentially private top-k selection with pay-what-you-get
composition*, NeurIPS 2019, in its simplest form: the domain is whatever passes the
threshold, and the k largest noisy counts are reported.

Pipeline (one :class:`~dpkit.frame.Session` release; nothing re-derived here): the (user,
item) pairs are made distinct; the session bounds each user to at most d distinct items
(``PrivacyUnit.by(user, d, max_groups=d, max_rows_per_group=1)``, rows chosen at random);
``group_by(item, selection=PartitionSelection(ε_s, δ))`` releases the items whose user
count passes the noisy threshold, each with a count plus discrete Laplace noise of scale
d/ε_c (L1 sensitivity d). Privacy (user level, add/remove one user with all their rows):
(ε_s + ε_c, δ)-DP by basic composition (partition selection: ApproxDP(ε_s, δ) for units in
≤ d partitions; counts: ε_c), ε_s + ε_c = ε exactly.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import polars as pl

from dpkit.apps.accounting import charge, check_accountant
from dpkit.core import numbers
from dpkit.core.measures import ApproxDP
from dpkit.errors import ColumnError, DomainError
from dpkit.frame import PrivacyUnit, Session, count
from dpkit.mechanisms.partition_selection import PartitionSelection

__all__ = ["top_k_unknown_domain", "top_k_query"]

MAX_D = 10_000


def _top(released: pl.DataFrame, item: str, k: int) -> pl.DataFrame:
    return (released.sort(["count", item], descending=[True, False], nulls_last=True)
            .head(k).select(item, "count", "count_ci_low", "count_ci_high"))


def top_k_query(session: Session, item: str, k: int, *, selection: PartitionSelection,
                epsilon: Any) -> pl.DataFrame:
    """Top-k items over an unknown domain, released from an existing :class:`Session`.

    The session's privacy unit must be ``PrivacyUnit.by(user, d, max_groups=d,
    max_rows_per_group=1)`` (each user counts once per item, in at most d items) and its
    budget an (ε, δ) one; the session's accountant is charged ``selection``'s (ε_s, δ) plus
    ``epsilon`` for the counts.

    Parameters
    ----------
    session : Session
    item : str
        The column whose values form the (unknown) domain.
    k : int
        How many items to report at most (fewer if fewer pass the threshold).
    selection : PartitionSelection
        The threshold step's budget and method.
    epsilon : number
        ε_c of the noisy counts.

    Returns
    -------
    polars.DataFrame
        Columns ``item``, ``count``, ``count_ci_low``, ``count_ci_high``; at most k rows,
        by decreasing noisy count.

    Raises
    ------
    DomainError
        k < 1, a privacy unit that lets a user count more than once per item, or the
        session's own plan-time errors (nothing spent).
    """
    k = numbers.integer(k, "k", minimum=1)
    unit = getattr(session, "privacy_unit", None)
    if not isinstance(session, Session) or unit is None or unit.column is None:
        raise DomainError("top_k_query needs a Session with PrivacyUnit.by(user, ...)")
    if unit.bounds.max_rows_per_group != 1:
        raise DomainError("top_k_query counts users: declare max_rows_per_group=1 in the "
                          "privacy unit")
    query = session.query().group_by(item, selection=selection).agg(count())
    return _top(query.release(epsilon=epsilon), item, k)


def _pairs(frame: Any, user: str, item: str) -> pl.DataFrame | pl.LazyFrame:
    """The distinct (user, item) pairs with an item: eager for a DataFrame (the session's
    in-memory path), lazy for a LazyFrame (its streaming path)."""
    if not isinstance(frame, pl.DataFrame | pl.LazyFrame):
        raise DomainError("frame must be a polars DataFrame or LazyFrame")
    if not isinstance(user, str) or not isinstance(item, str) or user == item:
        raise DomainError("user and item must be two different column names")
    names = frame.collect_schema().names()
    for column in (user, item):
        if column not in names:
            raise ColumnError(f"column {column!r} is not in the table")
    return frame.select(user, item).drop_nulls(item).unique()


def top_k_unknown_domain(frame: Any, *, user: str, item: str, k: int, d: int, epsilon: Any,
                         delta: Any, selection_share: Any = Fraction(1, 2),
                         method: str = "truncated_geometric",
                         accountant: Any = None) -> pl.DataFrame:
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
    d : int
        Contribution bound: each user counts in at most d distinct items (chosen at random
        among theirs when they have more).
    epsilon : number
        Total ε (nats): ``selection_share`` of it to the threshold, the rest to the counts.
    delta : number
        δ ∈ (0, 1) of the threshold (the probability budget of releasing an item that only
        one user has).
    selection_share : number
        In (0, 1); default 1/2.
    method : str
        Partition-selection rule: "truncated_geometric" (default), "laplace" (Korolova et
        al.) or "gaussian".
    accountant : Accountant, PrivacyFilter, Session or None
        Charged ApproxDP(ε, δ) once, before the data is read.

    Returns
    -------
    polars.DataFrame
        ``item``, ``count`` (noisy user count, discrete Laplace of scale d/ε_c),
        ``count_ci_low``, ``count_ci_high`` (95%); at most k rows, decreasing count.

    Raises
    ------
    DomainError, ColumnError
        Bad numbers, columns or frame type, or a bad accountant — all before any debit.

    Notes
    -----
    Privacy map: add/remove one user ↦ ApproxDP(ε, δ) (module docstring; Korolova et al.
    2009 for the threshold-and-count design, DVGM22 Thm 1 for the threshold rule).
    """
    eps = numbers.positive(epsilon, "epsilon", up=False)
    share = numbers.to_fraction(selection_share)
    if not 0 < share < 1:
        raise DomainError("selection_share must be in (0, 1)")
    k = numbers.integer(k, "k", minimum=1)
    d = numbers.integer(d, "d", minimum=1)
    if d > MAX_D:
        raise DomainError(f"d must be at most {MAX_D}")
    eps_s = eps * share
    eps_c = eps - eps_s
    selection = PartitionSelection(eps_s, delta, method)
    loss = ApproxDP(eps, selection.loss().delta)  # validates δ and the method
    pairs = _pairs(frame, user, item)
    check_accountant(accountant)
    session = Session(pairs, PrivacyUnit.by(user, d, max_groups=d, max_rows_per_group=1),
                      loss)
    query = session.query().group_by(item, selection=selection).agg(count())
    query.plan(epsilon=eps_c)  # plan-time checks (no data read)

    def compute() -> pl.DataFrame:
        return _top(query.release(epsilon=eps_c), item, k)

    return charge(accountant, loss, f"top-{k} of {item!r} over an unknown domain: user "
                  f"{user!r}, d={d}, ε={eps}, δ={loss.delta}, {method}", compute)
