"""Burn-down plot of a dataset's budget (matplotlib, an optional extra: ``dpkit[plot]``)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from dpkit.errors import LedgerError
from dpkit.ledger.registry import Ledger

__all__ = ["burn_down", "burn_down_figure"]


def burn_down(ledger: Ledger, dataset: str, output: str | Path) -> Path:
    """Write a PNG of the remaining budget (ε, or ρ for zCDP; δ on a second axis for (ε, δ)
    datasets) after each release, and the lifetime cap.

    Raises
    ------
    LedgerError
        For an unknown dataset, or if matplotlib is not installed.
    """
    fig = burn_down_figure(ledger, dataset)  # LedgerError without matplotlib
    import matplotlib
    import matplotlib.pyplot as plt

    path = Path(output)
    with matplotlib.rc_context({"text.parse_math": False}):  # names are plain text
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def burn_down_figure(ledger: Ledger, dataset: str) -> Any:
    """The burn-down plot of :func:`burn_down` as a matplotlib ``Figure`` (8 × 4.5 in; the
    caller saves and closes it): remaining ε (ρ for zCDP) after each release, in time.

    Raises
    ------
    LedgerError
        For an unknown dataset, or if matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
        from matplotlib.text import Text
    except ImportError:
        raise LedgerError("the burn-down plot needs matplotlib: pip install 'dpkit[plot]'"
                          ) from None
    info = next((d for d in ledger.datasets() if d["name"] == dataset), None)
    if info is None:
        raise LedgerError(f"unknown dataset {dataset!r}")
    cap = info["cap"]
    field = "rho" if info["measure"] == "ZCDP" else "epsilon"
    total = float(getattr(cap, field))
    times, remaining = [datetime.fromisoformat(info["created"])], [total]
    spent = 0.0
    for r in ledger.releases(dataset):
        spent += float(getattr(r["loss"], field))
        times.append(datetime.fromisoformat(r["time"]))
        remaining.append(total - spent)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.step(times, remaining, where="post", label=f"remaining {field}")  # type: ignore[arg-type]
    ax.plot(times[1:], remaining[1:], "o", ms=3, label="a release")  # type: ignore[arg-type]
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("time of release (UTC)")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylim(bottom=min(0.0, min(remaining)), top=total * 1.05)
    ax.set_ylabel(f"remaining {field} (cap {total:g})")
    ax.set_title(f"Budget burn-down: {dataset} ({len(times) - 1} releases)")
    ax.legend(loc="upper right")
    for text in fig.findobj(Text):  # a dataset's name is plain text, never mathtext
        text.set_parse_math(False)
    fig.tight_layout()
    return fig
