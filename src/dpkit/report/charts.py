"""The report's charts: matplotlib figures (``dpkit[plot]``) as base64 PNG data URIs.

Labels drawn into a PNG are pixels, so user text in a chart cannot become markup; and every
text is drawn as plain text (:func:`plain_text`), never parsed as mathtext: group keys chosen by
a private selection are data, and a ``$…$`` in one must neither change the picture nor raise.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["pyplot", "plain_text", "to_uri", "chart", "bars", "lines", "MAX_BARS", "MAX_POINTS"]

MAX_BARS = 40  # more categories than this: a line chart with a band (:func:`lines`)
MAX_POINTS = 5000  # a line chart draws at most this many points (the table has all)
DP_COLOUR, TRUE_COLOUR = "#3b5ba5", "#b0b6c3"


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend.

    Raises
    ------
    ImportError
        Without matplotlib, naming the extra to install.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("dpkit's HTML reports draw their charts with matplotlib: "
                          "pip install 'dpkit[plot]'") from None
    return plt


def plain_text(fig: Any) -> Any:
    """Mark every text of ``fig`` (titles, axis labels, tick labels, legend entries) as plain
    text: matplotlib otherwise parses text between two ``$`` as mathtext, where a malformed
    expression raises at drawing time. Texts created while drawing (new tick labels) follow
    ``rcParams["text.parse_math"]``, which :func:`to_uri` turns off around the draw."""
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_parse_math(False)
    return fig


def to_uri(fig: Any, dpi: int = 100) -> str:
    """The figure as a ``data:image/png;base64,…`` URI, every text drawn as plain text
    (:func:`plain_text`); the figure is closed."""
    import matplotlib

    buf = io.BytesIO()
    try:
        with matplotlib.rc_context({"text.parse_math": False}):
            plain_text(fig).savefig(buf, format="png", dpi=dpi)
    finally:
        pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _short(label: str, width: int = 24) -> str:
    return label if len(label) <= width else label[:width - 1] + "…"


def chart(labels: Sequence[str], estimate: Sequence[float], low: Sequence[float] | None,
          high: Sequence[float] | None, truth: Sequence[float] | None, title: str,
          ylabel: str) -> str:
    """:func:`bars` for at most :data:`MAX_BARS` categories, else :func:`lines`."""
    draw = bars if len(labels) <= MAX_BARS else lines
    return draw(labels, estimate, low, high, truth, title, ylabel)


def _finish(fig: Any, ax: Any, title: str, ylabel: str) -> str:
    """Labels, the zero line and the legend of a chart; the figure as a PNG data URI."""
    ax.set_ylabel(_short(ylabel, 40))
    ax.set_title(_short(title, 90), fontsize=10)
    ax.axhline(0, color="grey", lw=0.6)
    ax.legend(fontsize=8, loc="best")
    plain_text(fig).tight_layout()  # tight_layout measures the texts: plain ones
    return to_uri(fig)


def _finite(values: Sequence[float] | None) -> np.ndarray:
    """The values as floats, ±inf as NaN (not drawn; matplotlib cannot scale to infinity)."""
    a = np.asarray(values, dtype=float)
    return np.where(np.isinf(a), np.nan, a)


def _errors(est: np.ndarray, low: Sequence[float] | None, high: Sequence[float] | None
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """The interval ends as arrays, or None when no interval end is finite."""
    if low is None or high is None:
        return None
    k = est.size
    lo, hi = _finite(low[:k]), _finite(high[:k])
    return (lo, hi) if (np.isfinite(lo) & np.isfinite(hi)).any() else None


def lines(labels: Sequence[str], estimate: Sequence[float], low: Sequence[float] | None,
          high: Sequence[float] | None, truth: Sequence[float] | None, title: str,
          ylabel: str) -> str:
    """A line chart of many DP estimates (a fine histogram) with their confidence band and
    the true values as a grey line when given; a PNG data URI. Same parameters as
    :func:`bars`."""
    plt = pyplot()
    k = min(len(labels), MAX_POINTS)
    est = _finite(estimate[:k])
    x = np.arange(k)
    fig, ax = plt.subplots(figsize=(11.0, 3.8))
    band = _errors(est, low, high)
    if band is not None:
        ax.fill_between(x, band[0], band[1], color=DP_COLOUR, alpha=0.25, lw=0,
                        label="95% CI")
    ax.plot(x, est, color=DP_COLOUR, lw=1.2, label="DP estimate")
    if truth is not None:
        ax.plot(x, _finite(truth[:k]), color=TRUE_COLOUR, lw=1.2, ls="--",
                label="true value (not private)")
    ticks = np.unique(np.linspace(0, k - 1, min(k, 12)).round().astype(int))
    ax.set_xticks(ticks, [_short(str(labels[i]), 14) for i in ticks], rotation=45,
                  ha="right", fontsize=8)
    return _finish(fig, ax, title, ylabel)


def bars(labels: Sequence[str], estimate: Sequence[float], low: Sequence[float] | None,
         high: Sequence[float] | None, truth: Sequence[float] | None, title: str,
         ylabel: str) -> str:
    """A bar chart of DP estimates with their confidence intervals as error bars, and the
    true values as grey bars beside them when given; a PNG data URI.

    Parameters
    ----------
    labels : sequence of str, length k
        The categories (row keys).
    estimate, low, high, truth : sequences of float, length k
        The estimates, the interval ends (None: no error bars; NaN ends are not drawn) and
        the true values (None: not shown; NaN: unknown for that category).
    """
    plt = pyplot()
    k = min(len(labels), MAX_BARS)
    est = _finite(estimate[:k])
    x = np.arange(k)
    width = 0.4 if truth is not None else 0.7
    fig, ax = plt.subplots(figsize=(min(11.0, 4 + 0.45 * k), 3.8))
    yerr = None
    ends = _errors(est, low, high)
    if ends is not None:
        below, above = est - ends[0], ends[1] - est
        ok = np.isfinite(below) & np.isfinite(above)
        yerr = np.vstack([np.where(ok, np.maximum(below, 0), 0),
                          np.where(ok, np.maximum(above, 0), 0)])
    shift = -width / 2 if truth is not None else 0.0
    ax.bar(x + shift, est, width, color=DP_COLOUR, label="DP estimate",
           yerr=yerr, capsize=3, ecolor="#1d2330",
           error_kw={"label": "95% CI" if yerr is not None else None})
    if truth is not None:
        ax.bar(x + width / 2, _finite(truth[:k]), width, color=TRUE_COLOUR,
               label="true value (not private)")
    ax.set_xticks(x, [_short(str(s)) for s in labels[:k]],
                  rotation=45 if k > 6 or max((len(str(s)) for s in labels[:k]), default=0) > 10
                  else 0, ha="right" if k > 6 else "center", fontsize=8)
    return _finish(fig, ax, title, ylabel)
