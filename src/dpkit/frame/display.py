"""Notebook displays of a query and a session (``Query._repr_html_``,
``Session._repr_html_``): escaped HTML fragments (:mod:`dpkit.core.markup`).

Free like ``explain``: a query's display plans it at a reference budget (reads no data,
spends nothing); a session's shows its budget and the records of its releases so far.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from dpkit.core.markup import box, esc, facts, table
from dpkit.core.measures import ZCDP
from dpkit.errors import DPError

if TYPE_CHECKING:
    from dpkit.frame.query import Plan, Query
    from dpkit.frame.session import Session

__all__ = ["query_html", "session_html", "REFERENCE_EPSILON", "REFERENCE_RHO"]

REFERENCE_EPSILON = Fraction(1)  # the budget a query's display is planned at
REFERENCE_RHO = Fraction(1, 2)  # zCDP sessions: ρ = ε²/2 at ε = 1
CONFIDENCE = 0.95


def _plan(query: Query) -> tuple[Plan, str]:
    """The query planned at the reference budget of its session's measure, and its label."""
    if query.session.measure is ZCDP:
        return query.plan(rho=REFERENCE_RHO), f"ρ = {REFERENCE_RHO}"
    return query.plan(REFERENCE_EPSILON), f"ε = {REFERENCE_EPSILON}"


def query_html(query: Query) -> str:
    """The query's canonical text, its session's privacy unit and measure, and its
    explain as a table, planned at a reference budget (ε = 1, or ρ = 1/2 in a zCDP session);
    a query that cannot be planned yet shows why (the plan-time error's text)."""
    if not hasattr(query.session, "privacy_unit"):  # a served dataset (dpkit.Client)
        return box("dpkit Query", facts([("query", query.describe())]),
                   "<p>Served: its plan is on the server, free: query.explain(epsilon=…)</p>")
    head = facts([("query", query.describe()),
                  ("privacy unit", query.session.privacy_unit),
                  ("measure", query.session.measure.__name__)])
    if not query.aggs:
        return box("dpkit Query", head, "<p>No aggregation yet: add one with agg().</p>")
    try:
        plan, label = _plan(query)
    except DPError as exc:
        return box("dpkit Query", head, f"<p>Not releasable yet: {esc(exc)}</p>")
    beta = 1 - CONFIDENCE
    rows: list[list[object]] = []
    for p in plan.statistics:
        rows.append([query.aggs[p.aggregation].output_name(), p.stat.key, p.mechanism,
                     float(p.sensitivity * p.unit), float(p.scale * p.unit),
                     p.accuracy(beta) * float(p.unit), str(p.loss)])
    if query.selection is not None:
        s = query.selection
        rows.append([", ".join(query.group_columns), s.label, s.method, "", "", "",
                     str(s.loss())])
    explain = table(["output", "statistic", "mechanism", "sensitivity", "scale",
                     f"± at {CONFIDENCE:.0%}", "loss"], rows,
                    caption=f"explain at {label} (a reference budget: "
                            f"query.explain(…) for yours); total {plan.loss}")
    return box("dpkit Query", head, explain)


def session_html(session: Session) -> str:
    """The session's privacy unit, budget, spent and remaining (exact, from its
    accountant), its ledger dataset, and its releases so far (the accountant's
    ``history``, oldest first)."""
    about = facts([("privacy unit", session.privacy_unit),
                   ("budget", session.budget), ("spent", session.spent),
                   ("remaining", session.remaining),
                   *([("ledger dataset", session.dataset)] if session.ledger else [])])
    history = session.accountant.history
    rows = [[i + 1, "—" if r.release_id is None else r.release_id, r.description[:300],
             "none (replay)" if r.loss is None else str(r.loss), r.status]
            for i, r in enumerate(history)]
    releases = (table(["#", "release id", "query", "loss", "status"], rows,
                      caption="releases so far (this session)")
                if rows else "<p>No release yet.</p>")
    return box("dpkit Session", about, releases)
