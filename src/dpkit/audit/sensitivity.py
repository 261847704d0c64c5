"""Grey-box sensitivity recorder: run a transformation on neighbouring inputs built to stress
it (extreme values, NaN, ±inf, nulls, one unit with maximal contributions, reversed row order)
and check that the observed output change never exceeds the declared stability."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

__all__ = ["SensitivityReport", "record_sensitivity", "neighbouring_tables"]


@dataclass
class SensitivityReport:
    """Largest observed output distance per neighbouring pair, against the declared bound."""

    declared: float
    observed: dict[str, float] = field(default_factory=dict)

    @property
    def worst(self) -> float:
        return max(self.observed.values(), default=0.0)

    @property
    def passed(self) -> bool:
        return self.worst <= self.declared * (1 + 1e-12)


def record_sensitivity(function: Callable[[Any], Any], declared: float,
                       pairs: Sequence[tuple[Any, Any, str]], norm: str = "l1"
                       ) -> SensitivityReport:
    """Apply ``function`` to each neighbouring pair and record ‖f(a) − f(b)‖ (L1 or L2)."""
    report = SensitivityReport(float(declared))
    for a, b, label in pairs:
        diff = np.asarray(function(a), dtype=np.float64) - np.asarray(function(b),
                                                                       dtype=np.float64)
        dist = float(np.abs(diff).sum() if norm == "l1" else np.sqrt((diff * diff).sum()))
        report.observed[label] = max(report.observed.get(label, 0.0), dist)
    return report


def neighbouring_tables(df: pl.DataFrame, column: str, *, unit: str | None = None,
                        max_rows: int = 1, extremes: Sequence[float] = (1e300, -1e300)
                        ) -> list[tuple[pl.DataFrame, pl.DataFrame, str]]:
    """Pairs (D, D′) one privacy unit apart that stress ``column``'s handling.

    Rows of the added unit copy the first row of ``df`` with ``column`` replaced by an
    extreme, NaN, ±inf or null; with a ``unit`` column the added unit has ``max_rows + 3``
    rows (bounding must cut it to ``max_rows``). The reversed-order pair is distance 0.
    """
    template = df.head(1)
    values: list[Any] = [*extremes, float("nan"), float("inf"), float("-inf"), None]
    pairs = []
    copies = max_rows + 3 if unit else 1
    for v in values:
        row = template.with_columns(pl.lit(v).cast(df.schema[column], strict=False)
                                    .alias(column))
        if unit:
            row = row.with_columns(pl.lit(-987654321).cast(df.schema[unit]).alias(unit))
        added = pl.concat([df, *([row] * copies)])
        pairs.append((added, df, f"add unit with {column} = {v}"))
    pairs.append((df.reverse(), df, "reversed row order"))
    return pairs
