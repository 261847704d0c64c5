"""One release as HTML: its values (tables with confidence intervals, bar charts with error
bars, true values beside them when the curator gives them), its loss, noise and accuracy."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from dpkit.core.record import Release
from dpkit.errors import DomainError
from dpkit.report import charts
from dpkit.report.page import esc, facts, image, loss_html, page, section, table

__all__ = ["release_html", "release_section", "Truth"]

Truth = Mapping[str, Mapping[Any, float] | Sequence[float]]
MAX_ROWS = 500  # table rows shown per release (a chart draws at most charts.MAX_POINTS)
MAX_TEXT = 4000  # characters of a value shown as text


def _truth_values(truth: Truth | None, stat: str, keys: Sequence[Any]) -> list[float] | None:
    """The true values of ``stat`` in row order (NaN where unknown), or None."""
    if not truth or stat not in truth:
        return None
    given = truth[stat]
    if isinstance(given, Mapping):
        found = [given.get(k, given.get(str(k), math.nan)) for k in keys]
    elif isinstance(given, Sequence | np.ndarray) and not isinstance(given, str | bytes):
        found = list(given)
        if len(found) != len(keys):
            raise DomainError(f"truth for {stat!r} has {len(found)} values; the release has "
                              f"{len(keys)} rows")
    else:
        raise DomainError(f"truth for {stat!r} must be a mapping key → value or a sequence")
    try:
        return [float(v) for v in found]
    except (TypeError, ValueError):
        raise DomainError(f"truth for {stat!r} must hold numbers") from None


def _key(row: Sequence[Any]) -> Any:
    return row[0] if len(row) == 1 else tuple(row)


def _frame(df: pl.DataFrame, truth: Truth | None) -> str:
    cols = df.columns
    stats = [c for c in cols if f"{c}_ci_low" in cols and f"{c}_ci_high" in cols]
    if not stats:
        stats = [c for c in cols if df[c].dtype.is_numeric()]
    first = min((cols.index(s) for s in stats), default=len(cols))
    key_cols = cols[:first]
    keys = ([_key(r) for r in df.select(key_cols).rows()] if key_cols
            else list(range(df.height)))
    labels = [" / ".join(map(str, k)) if isinstance(k, tuple) else str(k) for k in keys]
    true = {s: _truth_values(truth, s, keys) for s in stats}
    given = {s: v for s, v in true.items() if v is not None}
    header = [*cols, *(f"{s} (true, not private)" for s in given)]
    rows = [[*row, *(v[i] for v in given.values())]
            for i, row in enumerate(df.head(MAX_ROWS).rows())]
    note = (f"<p class=\"note\">The first {MAX_ROWS} of {df.height:,} rows.</p>"
            if df.height > MAX_ROWS else "")
    parts = [table(header, rows), note]
    for s in stats:
        if not df[s].dtype.is_numeric() or df.height == 0:
            continue
        ci = f"{s}_ci_low" in cols
        uri = charts.chart(labels, df[s].cast(pl.Float64).to_list(),
                          df[f"{s}_ci_low"].cast(pl.Float64).to_list() if ci else None,
                          df[f"{s}_ci_high"].cast(pl.Float64).to_list() if ci else None,
                          true[s], f"{s} by {', '.join(key_cols) or 'row'}", s)
        parts.append(image(uri, f"chart of {s} with its confidence intervals"))
    return "\n".join(parts)


def _counts(release: Release[Any], counts: np.ndarray, labels: Sequence[str] | None,
            truth: Truth | None) -> str:
    """A 1-D array of estimates (a histogram): bars with ± the accuracy's half-width when the
    release states a single one."""
    est = counts.astype(float).reshape(-1)
    names = [str(v) for v in labels] if labels is not None and len(labels) == len(est) \
        else [str(i) for i in range(len(est))]
    widths = dict(release.accuracy.half_widths) if release.accuracy is not None else {}
    hw = next(iter(widths.values())) if len(widths) == 1 else None
    low = None if hw is None else list(est - hw)
    high = None if hw is None else list(est + hw)
    stat = next((s for s in ("count", "counts") if truth and s in truth), "count")
    true = _truth_values(truth, stat, names)
    header = ["bin", "DP estimate"]
    if hw is not None:
        header += ["CI low", "CI high"]
    if true is not None:
        header.append("true value (not private)")
    rows = []
    for i in range(min(len(est), MAX_ROWS)):
        row: list[Any] = [names[i], float(est[i])]
        if low is not None and high is not None:
            row += [low[i], high[i]]
        if true is not None:
            row.append(true[i])
        rows.append(row)
    uri = charts.chart(names, list(est), low, high, true, "estimates by bin", "count")
    return table(header, rows) + "\n" + image(uri, "chart of the estimates")


def _values(release: Release[Any], truth: Truth | None) -> str:
    values = release.values
    if values is None:
        return '<p class="note">Nothing was released.</p>'
    if isinstance(values, pl.DataFrame):
        return _frame(values, truth)
    counts = getattr(values, "counts", None)
    if isinstance(counts, np.ndarray) and counts.ndim == 1:
        return _counts(release, counts, getattr(values, "labels", None), truth)
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "iuf":
        return _counts(release, values, None, truth)
    text = repr(values)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + " …"
    return f"<pre>{esc(text)}</pre>"


def _method(values: object) -> list[tuple[str, str]]:
    """The "method" fact of a histogram release: its registered name, and for one that ran
    another ("auto") the pick and the rule's path, ``auto → mm (fallback)``: the ledger's
    description was written at the debit, before the choice (post-processing of noise)."""
    text = getattr(values, "method_text", None)
    return [("method", text)] if isinstance(text, str) else []


def release_section(release: Release[Any], truth: Truth | None = None,
                    title: str | None = None, level: int = 2) -> str:
    """The HTML ``<section>`` of one release (see :func:`release_html`)."""
    if not isinstance(release, Release):
        raise DomainError(f"a report renders dpkit Release records, not "
                          f"{type(release).__name__}")
    acc = release.accuracy
    widths = dict(acc.half_widths) if acc is not None else {}
    about = facts([
        ("query", release.description),
        *_method(release.values),
        ("status", release.status + (" (an idempotent replay: no new debit)"
                                     if release.replayed else "")),
        ("privacy loss", "none (replay)" if release.loss is None else loss_html(release.loss)),
        *([("how it was charged", release.loss_note)] if release.loss_note else []),
        ("release id", "—" if release.release_id is None else release.release_id),
        ("result SHA-256", release.digest or "—"),
        *([("confidence", f"{1 - acc.beta:.0%} per statistic (β = {acc.beta:.3g})")]
          if acc is not None else []),
    ])
    noise = table(["statistic", "mechanism", "scale", "sensitivity", "half-width at β"],
                  [[r.statistic or "", r.name,
                    "—" if r.scale is None else r.scale,
                    "—" if r.sensitivity is None else r.sensitivity,
                    widths.get(r.statistic or "", "—")] for r in release.noise],
                  caption="Noise added (scale: the mechanism's scale parameter, exact)"
                  ) if release.noise else '<p class="note">No noise plan recorded.</p>'
    name = title or release.description
    body = "\n".join([about, _values(release, truth), noise])
    return section(name, body, level=level, cls="release")


def release_html(release: Release[Any], truth: Truth | None = None,
                 title: str | None = None) -> str:
    """One release as a self-contained HTML page (no script, no external resource).

    Parameters
    ----------
    release : Release
        The record (``session.last_release``, ``accountant.last``).
    truth : mapping, optional
        Per statistic column (``"count"``, ``"age_mean"``; ``"count"`` for a histogram), the
        true values, as a mapping from the row's key (a tuple for several key columns) to the
        value or a sequence in row order; drawn beside the DP estimates. Only the curator has
        them: a report with true values is not private.
    title : str, optional
        The page title (default: the release's description).

    Returns
    -------
    str
        The HTML document; every user-supplied text in it is escaped.

    Raises
    ------
    DomainError
        For something other than a Release, or malformed ``truth``.
    ImportError
        Without matplotlib (``pip install 'dpkit[plot]'``).
    """
    name = title or f"Release: {getattr(release, 'description', '')}"
    return page(name, release_section(release, truth, title="Values, loss and noise"))
