"""Where a benchmark writes, and what it does when its data is missing.

``bench/results/`` holds the tables and plots the README and docs cite (tracked in git). A
run writes to ``bench/out/`` (not tracked) unless asked to update the tracked copies with
``--update-results`` (or ``DPKIT_BENCH_UPDATE=1`` in the environment, which
``bench/one_road.py`` sets for the trees it compares).

The shared datasets live beside the checkout in ``../shared/data`` (see bench/README.md);
:func:`require` stops a run with a clear message and exit code 1 when they are absent.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACKED = HERE / "results"
SHARED = HERE.parent.parent / "shared" / "data"


def add_flag(ap: argparse.ArgumentParser) -> None:
    """Add ``--update-results`` to a benchmark's command line."""
    ap.add_argument("--update-results", action="store_true",
                    help="write to bench/results/ (the tracked tables) instead of bench/out/")


def results_dir(update: bool = False) -> Path:
    """``bench/results`` if ``update`` (or ``DPKIT_BENCH_UPDATE=1``), else ``bench/out``;
    created if needed."""
    tracked = update or os.environ.get("DPKIT_BENCH_UPDATE") == "1"
    out = TRACKED if tracked else HERE / "out"
    out.mkdir(parents=True, exist_ok=True)
    if not tracked:
        print(f"writing to {out} (pass --update-results to update bench/results/)",
              file=sys.stderr)
    return out


def require(*paths: Path, what: str) -> None:
    """Exit with code 1 and one clear line if any of ``paths`` is missing."""
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        print(f"error: {what} not found at {missing[0]}; this benchmark needs the shared "
              "datasets beside the checkout (../shared/data, see bench/README.md)",
              file=sys.stderr)
        raise SystemExit(1)
