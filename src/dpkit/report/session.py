"""A session's releases as HTML: its budget, what each release spent, and their values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpkit.core.record import Release
from dpkit.errors import DomainError
from dpkit.frame import Session
from dpkit.report import charts
from dpkit.report.ledger import ledger_report
from dpkit.report.page import facts, image, loss_html, page, section, table
from dpkit.report.release import Truth, release_section

__all__ = ["session_report"]


def _field(loss: Any) -> str:
    return "rho" if hasattr(loss, "rho") else "epsilon"


def _spend_chart(budget: Any, records: Sequence[Release[Any]]) -> str:
    """The remaining budget after each record's loss (basic composition), as a step chart."""
    field = _field(budget)
    total = float(getattr(budget, field))
    left, remaining = total, [total]
    for r in records:
        left -= 0.0 if r.loss is None else float(getattr(r.loss, field))
        remaining.append(left)
    plt = charts.pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = list(range(len(remaining)))
    ax.step(x, remaining, where="post", color="#1f77b4", label=f"remaining {field}")
    ax.plot(x[1:], remaining[1:], "o", ms=4, color="#ff7f0e", label="a release")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(x)
    ax.set_xlabel("release (in order)")
    ax.set_ylabel(f"remaining {field} (budget {total:g})")
    ax.set_ylim(bottom=min(0.0, min(remaining)), top=total * 1.05)
    ax.set_title("Budget burn-down over these releases (basic composition)", fontsize=10)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return image(charts.to_uri(fig), "burn-down of the session's budget over its releases")


def session_report(session: Session, releases: Sequence[Release[Any]] = (),
                   truth: Mapping[int, Truth] | None = None, title: str | None = None) -> str:
    """An HTML report of a session's releases, as a self-contained page.

    A session with a ledger gets :func:`~dpkit.report.ledger_report` of its dataset (the
    ledger's burn-down in time and every query as run). Without one: the session's budget,
    spent and remaining (exact, from its accountant), the burn-down over the records passed
    (each record's loss subtracted in order: basic composition, which the session's own
    accountant may beat), a table of their queries and losses, and each record's values
    (:func:`~dpkit.report.release_html`).

    Parameters
    ----------
    session : Session
        The session.
    releases : sequence of Release, optional
        Its records (``session.last_release`` after each release), oldest first.
    truth : mapping of int to Truth, optional
        True values per record, keyed by its ``release_id`` (with a ledger) or by its
        position in ``releases``.
    title : str, optional
        The page title (default: "Privacy report").

    Returns
    -------
    str
        The HTML document; every user-supplied text in it is escaped.

    Raises
    ------
    DomainError
        For something other than a Session, a record that is not a Release, or malformed
        ``truth``.
    ImportError
        Without matplotlib (``pip install 'dpkit[plot]'``).
    """
    if not isinstance(session, Session):
        raise DomainError(f"session_report takes a dpkit Session, not {type(session).__name__}")
    if not all(isinstance(r, Release) for r in releases):
        raise DomainError("releases must be dpkit Release records (session.last_release)")
    if session.ledger is not None and session.dataset:
        return ledger_report(session.ledger, session.dataset, releases, truth, title)
    about = facts([("privacy unit", str(session.privacy_unit)),
                   ("budget", loss_html(session.budget)),
                   ("spent (the session's accountant)", loss_html(session.spent)),
                   ("remaining", loss_html(session.remaining))])
    parts = [about]
    if releases:
        parts.append(_spend_chart(session.budget, releases))
        parts.append(table(["#", "query", "loss", "status"],
                           [[i + 1, r.description, "none (replay)" if r.loss is None
                             else str(r.loss), r.status] for i, r in enumerate(releases)]))
    body = [section("Budget", "\n".join(parts))]
    truth = truth or {}
    for i, rel in enumerate(releases):
        body.append(release_section(rel, truth.get(i), title=f"Release {i + 1}: "
                                    f"{rel.description[:200]}"))
    return page(title or "Privacy report", "\n".join(body))
