"""A ledger's dataset as HTML: its cap, spend and burn-down, its queries as run, and (when the
curator passes them) the values of its releases."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dpkit.core.record import Release, noise_rows
from dpkit.errors import DomainError, LedgerError
from dpkit.ledger import Ledger
from dpkit.ledger.codec import load
from dpkit.ledger.plot import burn_down_figure
from dpkit.report import charts
from dpkit.report.page import facts, image, loss_html, page, section, table
from dpkit.report.release import Truth, release_section

__all__ = ["ledger_report"]

MAX_QUERY = 300  # characters of a query's text shown in the table (the ledger has all)
MEASURE_NAMES = {"PureDP": "pure ε-DP", "ApproxDP": "approximate (ε, δ)-DP",
                 "ZCDP": "ρ-zCDP"}


def _part(loss: Any, field: str) -> float:
    return float(getattr(loss, field))


def _noise_text(text: str | None) -> str:
    rows = noise_rows(text)
    if rows is None:
        return text or ""
    return "\n".join(str(r) for r in rows)


def _clip(text: str, width: int = MAX_QUERY) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _budget(ledger: Ledger, info: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    cap, spent = info["cap"], info["spent"]
    remaining = cap - spent if spent <= cap else type(cap).zero()
    statuses = Counter(r["status"] for r in rows)
    analysts: dict[str, float] = {}
    field = "rho" if info["measure"] == "ZCDP" else "epsilon"
    for r in rows:
        who = r["analyst"] or "(curator)"
        analysts[who] = analysts.get(who, 0.0) + _part(r["loss"], field)
    about = facts([
        ("dataset", info["name"]), ("measure", MEASURE_NAMES.get(info["measure"],
                                                                 info["measure"])),
        ("privacy unit", info["privacy_unit"]),
        ("registered", info["created"]), ("lifetime cap", loss_html(cap)),
        ("spent", loss_html(spent)), ("remaining", loss_html(remaining)),
        ("burn-rate limit", "none" if info["per_day"] is None
         else f"{info['per_day']} per rolling 24 h"),
        ("releases", ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "none"),
    ])
    charts.pyplot()  # the install hint, before the ledger's own message
    fig = burn_down_figure(ledger, info["name"])
    burn = image(charts.to_uri(fig), "burn-down of the remaining budget")
    total = _part(cap, field)
    shares = table(["analyst", f"{field} spent", "share of the cap"],
                   [[a, v, f"{v / total:.1%}" if total else "—"]
                    for a, v in sorted(analysts.items(), key=lambda kv: -kv[1])]
                   ) if analysts else ""
    return section("Budget", "\n".join([about, burn, shares]))


def _migrations(ledger: Ledger, dataset: str) -> str:
    """The dataset's recorded migrations (``dpkit ledger migrate``): each retired entry, the
    one opened, the spend carried and the record's note; empty when there is none."""
    moved = ledger.migrations(dataset)
    if not moved:
        return ""

    def entry(e: dict[str, Any]) -> str:
        measure = MEASURE_NAMES.get(e["measure"], e["measure"])
        return f"{measure}, cap {load(e['measure'], e['cap'])}, privacy unit {e['privacy_unit']}"

    body = table(["link", "time (UTC)", "retired entry", "opened entry", "spend carried",
                  "note"],
                 [[m["seq"], str(m["time"])[:19].replace("T", " "), entry(m["before"]),
                   entry(m), str(load(m["measure"], m["spent"])), m["note"] or "—"]
                  for m in moved])
    return section("Migrations", body)


def _queries(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return section("Queries as run", '<p class="note">No release yet.</p>')
    body = table(["id", "time (UTC)", "loss", "status", "analyst", "study", "query", "noise",
                  "result SHA-256"],
                 [[r["id"], str(r["time"])[:19].replace("T", " "), loss_html(r["loss"]),
                   r["status"],
                   r["analyst"] or "—", r["study"] or "—", _clip(str(r["query"])),
                   _clip(_noise_text(r["noise"])), (r["result_sha256"] or "")[:12]]
                  for r in rows], cls="queries")
    return section("Queries as run", body)


def ledger_report(ledger: Ledger, dataset: str, releases: Sequence[Release[Any]] = (),
                  truth: Mapping[int, Truth] | None = None, title: str | None = None) -> str:
    """An HTML report of one dataset of a ledger, as a self-contained page.

    Sections: the budget (measure and privacy unit as registered, cap, spent and remaining,
    exact; the burn-down of the remaining ε
    — ρ for zCDP — after each release, in time; the spend per analyst), the recorded
    migrations of its entry (``dpkit ledger migrate``), the queries as run
    (each release row of the ledger: time, analyst, study, query text, loss, status, noise
    plan, result digest), and, for each Release record passed in ``releases``, its values
    (tables with confidence intervals and bar charts with error bars, see
    :func:`~dpkit.report.release_html`). The ledger keeps no released values, so only the
    records the curator passes are drawn.

    Parameters
    ----------
    ledger : Ledger
        The ledger.
    dataset : str
        A registered dataset.
    releases : sequence of Release, optional
        The records of this dataset's releases (``session.last_release`` after each).
    truth : mapping of int to Truth, optional
        True values per release, keyed by the record's ``release_id`` (or, for a record
        without one, by its position in ``releases``); see :func:`~dpkit.report.release_html`.
    title : str, optional
        The page title (default: "Privacy report: <dataset>").

    Returns
    -------
    str
        The HTML document; every user-supplied text in it is escaped.

    Raises
    ------
    LedgerError
        For an unknown dataset.
    DomainError
        For a record that is not a Release, or malformed ``truth``.
    ImportError
        Without matplotlib (``pip install 'dpkit[plot]'``).
    """
    info = next((d for d in ledger.datasets() if d["name"] == dataset), None)
    if info is None:
        raise LedgerError(f"unknown dataset {dataset!r} in {ledger.url}")
    if not all(isinstance(r, Release) for r in releases):
        raise DomainError("releases must be dpkit Release records (session.last_release)")
    rows = ledger.releases(dataset)
    parts = [_budget(ledger, info, rows), _migrations(ledger, dataset), _queries(rows)]
    truth = truth or {}
    for i, rel in enumerate(releases):
        key = rel.release_id if rel.release_id is not None else i
        heading = (f"Release {rel.release_id}: " if rel.release_id is not None else "") \
            + rel.description
        parts.append(release_section(rel, truth.get(key), title=_clip(heading, 200)))
    name = title or f"Privacy report: {dataset}"
    return page(name, "\n".join(parts))

