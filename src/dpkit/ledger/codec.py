"""How the ledger writes losses and times: exact JSON (Fractions as text), ISO 8601 UTC."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from fractions import Fraction

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP

__all__ = ["MEASURES", "dump", "load", "now", "stamp"]

MEASURES: dict[str, type[PrivacyLoss]] = {"PureDP": PureDP, "ApproxDP": ApproxDP, "ZCDP": ZCDP}


def dump(loss: PrivacyLoss) -> str:
    """A loss as exact JSON, e.g. ``{"epsilon": "1/4"}``."""
    return json.dumps(loss.as_dict(), sort_keys=True)


def load(measure: str, textual: str) -> PrivacyLoss:
    """The loss written by :func:`dump` (``measure``: PureDP, ApproxDP or ZCDP)."""
    fields = {k: Fraction(v) for k, v in json.loads(textual).items()}
    return MEASURES[measure](**fields)


def now() -> datetime:
    """The current time in UTC (the ledger's clock)."""
    return datetime.now(UTC)


def stamp(t: datetime) -> str:
    """``t`` as the ledger writes it: ISO 8601 with microseconds."""
    return t.isoformat(timespec="microseconds")
