"""Shared by the interface-mode benchmark's child scripts (bench/interface.py runs each one as
a fresh process in its own virtual environment). Standard library only.

Every child takes ``DATA ROWS REPEATS`` on its command line and reads ``BENCH_T0`` (the
parent's ``time.time()`` just before it spawned the process) from the environment, so
``since_spawn()`` is the wall time since the process was started: interpreter start-up and
imports included. It prints a JSON snapshot of its results after the first result and after
every steady-state repeat; the last line is the final one.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

N_KEYS = 1_000
EPSILON = 1.0          # per release: once for the grouped table, once for the median
LOW, HIGH = 0.0, 100.0  # value bounds
MAX_ROWS, MAX_GROUPS, MAX_ROWS_PER_GROUP = 10, 5, 2  # user-level contribution bounds
MEDIAN_CANDIDATES = 1001  # evenly spaced in [LOW, HIGH], as dpkit's default


def since_spawn() -> float:
    return time.time() - float(os.environ.get("BENCH_T0", time.time()))


def args() -> tuple[str, int, int]:
    data, rows, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    return data, rows, repeats


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def steady(out: dict[str, Any], group: Callable[[], Any], median: Callable[[], Any],
           repeats: int) -> None:
    """Repeat the whole task (grouped release, then median release) ``repeats`` times in
    this process, updating ``out`` and printing a snapshot after every repeat, so a run
    that the parent stops at its time limit still reports the repeats it finished."""
    g: list[float] = []
    m: list[float] = []
    emit(out)  # first result only
    for _ in range(repeats):
        g.append(timed(group)[0])
        m.append(timed(median)[0])
        total = [a + b for a, b in zip(g, m, strict=True)]
        out.update({"steady_s": statistics.median(total),
                    "steady_group_s": statistics.median(g),
                    "steady_median_s": statistics.median(m), "steady_all_s": total,
                    "repeats": len(total)})
        emit(out)


def emit(result: dict[str, Any]) -> None:
    sys.stdout.flush()
    print(json.dumps(result, default=float), flush=True)
