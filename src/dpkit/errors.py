"""Typed errors. Every error subclasses :class:`DPError` and a builtin exception."""

from __future__ import annotations


class DPError(Exception):
    """Base class of every dpkit error."""


class DomainError(DPError, ValueError):
    """An argument is outside the domain the component is defined on (e.g. ε ≤ 0)."""


class BoundsError(DPError, ValueError):
    """Clamping bounds are missing or malformed; dpkit never infers them from the data."""


class ColumnError(DPError, KeyError):
    """A column is unknown, or its type does not suit the aggregation."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class BudgetExceededError(DPError, RuntimeError):
    """A release would exceed the session budget or the ledger's lifetime cap.

    Raised before any noise is drawn; nothing is released and nothing is recorded.
    """


class MeasureError(DPError, TypeError):
    """Privacy losses of incompatible measures were combined or compared."""


class InsecureRandomnessError(DPError, RuntimeError):
    """A measurement was invoked while the test-only deterministic generator is active."""


class LedgerError(DPError, RuntimeError):
    """The ledger is inconsistent with the session (e.g. a different measure or cap)."""


class IdempotentReplay(LedgerError):  # noqa: N818 - a replay, not a failure
    """The idempotency key already has a recorded answer: ``result`` (text, decrypted)."""

    def __init__(self, release_id: int, result: str | None) -> None:
        super().__init__(f"release {release_id} already answered this idempotency key")
        self.release_id = release_id
        self.result = result
