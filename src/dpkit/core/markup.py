"""Small HTML fragments for notebook reprs (``_repr_html_``): escaped tables, facts and an
inline SVG bar chart with error bars (standard library only, no script, no external resource).

Every value written here goes through :func:`esc` (``html.escape`` with quotes): a column, a
group key or a query text named ``<script>`` is shown, never run. A fragment is not a page:
notebook front ends (Jupyter, VS Code) render it in the output cell, and the same text is
safe in a page with the report's Content-Security-Policy (:mod:`dpkit.report.page`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

__all__ = ["esc", "cell", "table", "facts", "box", "bar_chart", "MAX_ROWS", "MAX_BARS"]

MAX_ROWS = 50  # rows a repr shows (the object has all of them)
MAX_BARS = 60  # bars an inline chart draws
STYLE = ("font-family: system-ui, sans-serif; font-size: 13px; border-left: 3px solid "
         "#3b5ba5; padding: 2px 10px; margin: 4px 0")


def esc(value: object) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes."""
    return html.escape(str(value), quote=True)


def cell(value: object) -> str:
    """A value as a table cell's text: floats to 6 significant digits, fractions with
    their decimal value, everything else as ``str``."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, Fraction):
        return str(value) if value.denominator == 1 else f"{float(value):.6g}"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


def table(header: Sequence[object], rows: Iterable[Sequence[object]],
          caption: str = "") -> str:
    """An HTML table; at most :data:`MAX_ROWS` rows are shown (a note says how many more).
    Every header, cell and the caption are escaped."""
    shown: list[Sequence[object]] = []
    more = 0
    for row in rows:
        if len(shown) < MAX_ROWS:
            shown.append(row)
        else:
            more += 1
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(cell(v))}</td>" for v in row) + "</tr>"
                   for row in shown)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    note = f"<p><i>… and {more:,} more rows</i></p>" if more else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def facts(pairs: Iterable[tuple[str, object]]) -> str:
    """Label: value lines (both escaped)."""
    return "".join(f"<div><b>{esc(k)}</b>: {esc(cell(v))}</div>" for k, v in pairs)


def box(title: str, *parts: str) -> str:
    """A titled block holding already-escaped ``parts`` (the title is escaped)."""
    return (f'<div class="dpkit-repr" style="{STYLE}"><div><b>{esc(title)}</b></div>'
            + "".join(parts) + "</div>")


def bar_chart(labels: Sequence[object], values: Sequence[float],
              half_width: float | None = None, width: int = 480, height: int = 160) -> str:
    """An inline SVG bar chart of ``values`` (the first :data:`MAX_BARS`), with ± a single
    ``half_width`` as error bars when given; each bar's label and value are an escaped
    ``<title>`` (a tooltip). Non-finite values are drawn as 0."""
    vals = [float(v) if math.isfinite(float(v)) else 0.0 for v in values[:MAX_BARS]]
    if not vals:
        return ""
    hw = half_width if half_width is not None and math.isfinite(half_width) else 0.0
    top = max(0.0, *(v + hw for v in vals))
    bottom = min(0.0, *(v - hw for v in vals))
    span = (top - bottom) or 1.0
    step = width / len(vals)

    def y(v: float) -> float:
        return height - (v - bottom) / span * height

    marks = [f'<line x1="0" x2="{width}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#888"/>']
    for i, v in enumerate(vals):
        x = i * step
        y0, y1 = sorted((y(0.0), y(v)))
        tip = esc(f"{labels[i] if i < len(labels) else i}: {v:.6g}"
                  + (f" ± {hw:.4g}" if hw else ""))
        marks.append(f'<rect x="{x + step * 0.1:.1f}" y="{y0:.1f}" width="{step * 0.8:.1f}" '
                     f'height="{max(y1 - y0, 0.5):.1f}" fill="#3b5ba5"><title>{tip}</title>'
                     "</rect>")
        if hw:
            mid = x + step / 2
            marks.append(f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="{y(v + hw):.1f}" '
                         f'y2="{y(v - hw):.1f}" stroke="#c0392b"/>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'role="img" aria-label="bar chart">{"".join(marks)}</svg>')
