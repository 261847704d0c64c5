"""The HTML of a report: escaping, tables, sections and the page (standard library only).

Everything user-supplied (dataset, analyst and study names, query text, column names, values)
goes through :func:`esc` (``html.escape`` with quotes) before it is written; charts are
``data:image/png`` URIs, so no user text enters markup unescaped. The page also carries a
Content-Security-Policy that allows no script and no network access at all (defence in depth:
a report opened from a mail or a shared folder runs nothing and fetches nothing).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from dpkit.core.numbers import exact_text, is_shown_exactly, readable

__all__ = ["esc", "number", "loss_text", "loss_html", "Html", "table", "section", "page",
           "image", "facts"]

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; " \
      "form-action 'none'"
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #1d2330; }
h1 { font-size: 1.6em; border-bottom: 2px solid #2f4a86; padding-bottom: .3em; }
h2 { font-size: 1.25em; margin-top: 2em; color: #2f4a86; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .92em; }
th, td { border: 1px solid #d5d9e2; padding: .3em .6em; text-align: left;
         vertical-align: top; overflow-wrap: break-word; }
th { background: #eef1f7; }
table.queries { width: 100%; }
table.queries td:nth-child(-n+4) { white-space: nowrap; }
table.queries td:nth-child(n+5) { overflow-wrap: anywhere; min-width: 3em; }
table.queries td:nth-child(7) { min-width: 17em; }
table.queries td:nth-child(8) { min-width: 12em; white-space: pre-line; }
table.queries td:nth-child(9) { font-family: ui-monospace, Menlo, Consolas, monospace;
                                white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; }
img.chart { max-width: 100%; height: auto; display: block; margin: .8em 0; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: .9em; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f7fa; padding: .6em; }
.note { color: #5a6275; font-size: .9em; }
details.exact { display: inline-block; margin-left: .5em; color: #5a6275; font-size: .9em;
                max-width: 100%; }
details.exact code { display: block; overflow-wrap: anywhere; word-break: break-all; }
section.release { border-top: 1px solid #d5d9e2; margin-top: 2em; }
"""


def esc(value: object) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes."""
    return html.escape(str(value), quote=True)


def number(value: object, digits: int = 6) -> str:
    """A number for a table cell: integers with thousands separators, floats to ``digits``
    significant digits, fractions exact and (when not whole) with their decimal value."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return f"{value.numerator:,}"
        shown = readable(value, digits)
        if is_shown_exactly(value, digits):
            return shown
        short = exact_text(value)  # a long rational stays in the exact fields
        return f"{short} ≈ {shown}" if len(short) <= 20 else f"≈ {shown}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—" if math.isnan(value) else str(value)
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.{digits}g}" if abs(value) >= 1e-3 else f"{value:.{digits}g}"
    try:
        return number(float(value), digits) if hasattr(value, "__float__") else str(value)
    except (TypeError, ValueError, OverflowError):
        return str(value)


class Html(str):
    """Markup built here from escaped parts: :func:`facts` and :func:`table` write it as
    it is (every other value is escaped)."""

    __slots__ = ()


def loss_text(loss: object) -> str:
    """A privacy loss as people read it (``ε = 0.5``, ``ρ ≈ 0.1``): decimals only; the
    exact rationals are in :func:`loss_html`'s collapsed part and in the ledger."""
    return str(loss)


def loss_html(loss: Any) -> Html:
    """A privacy loss for a page: :func:`loss_text`, and when a decimal is rounded, the
    exact rationals in a collapsed ``<details>`` whose text wraps (never off the page)."""
    shown = esc(loss_text(loss))
    if loss.is_shown_exactly():
        return Html(shown)
    return Html(f'{shown}<details class="exact"><summary>exact</summary>'
                f"<code>{esc(loss.exact_text())}</code></details>")


def _cell(value: Any, tag: str = "td") -> str:
    numeric = isinstance(value, int | float | Fraction) and not isinstance(value, bool)
    text = number(value) if numeric else str(value) if value is not None else ""
    cls = ' class="num"' if numeric else ""
    return f"<{tag}{cls}>{value if isinstance(value, Html) else esc(text)}</{tag}>"


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]], caption: str = "",
          cls: str = "") -> str:
    """An HTML table (of CSS class ``cls``); every header, caption and cell is escaped
    (numbers formatted by :func:`number`, right-aligned)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "\n".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<table{attr}>{cap}<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>"


def facts(pairs: Iterable[tuple[str, Any]]) -> str:
    """A definition list of label: value pairs (both escaped)."""
    items = "".join(f"<dt>{esc(k)}</dt><dd>{v if isinstance(v, Html) else esc(v)}</dd>"
                    for k, v in pairs)
    return f'<dl class="facts">{items}</dl>'


def image(uri: str, alt: str) -> str:
    """An ``<img>`` of a chart; ``uri`` must be a ``data:image/png;base64,`` URI."""
    if not uri.startswith("data:image/png;base64,"):
        raise ValueError("a chart must be a PNG data URI")
    return f'<img class="chart" src="{esc(uri)}" alt="{esc(alt)}">'


def section(title: str, body: str, level: int = 2, cls: str = "") -> str:
    """A ``<section>`` with an escaped heading and the (already safe) ``body``."""
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<section{attr}><h{level}>{esc(title)}</h{level}>\n{body}\n</section>"


def page(title: str, body: str) -> str:
    """A complete, self-contained HTML5 document (no script, no external resource)."""
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{esc(title)}</h1>\n{body}\n"
        f'<p class="note">Made by dpkit on {esc(made)}. Intervals are the release\'s own '
        "(computed from its noise plan, not from the data); true values, where shown, were "
        "given by the curator and are not private.</p>\n</body>\n</html>\n")
