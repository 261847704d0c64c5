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
    """Random bits were requested, or a measurement invoked, while a test-only seeded stream
    is active (see :mod:`dpkit.core.rng`); no release runs under it."""


class ReleaseFailedError(DPError, RuntimeError):
    """A release failed after its loss was debited (the loss stands; nothing is released).

    The message names the release and the failure's type only, never a data value: by the
    time it is raised the data has been read, so its text must not depend on the data.
    """

    def __init__(self, release_id: int | None, kind: str) -> None:
        where = f"release {release_id}" if release_id is not None else "the release"
        super().__init__(f"{where} failed after its loss was debited ({kind}); the loss "
                         "stands and nothing was released")
        self.release_id = release_id


class LedgerError(DPError, RuntimeError):
    """The ledger is inconsistent with the session (e.g. a different measure or cap)."""


class IdempotentReplay(LedgerError):  # noqa: N818 - a replay, not a failure
    """The idempotency key already has a recorded answer: ``result`` (text, decrypted)."""

    def __init__(self, release_id: int, result: str | None) -> None:
        super().__init__(f"release {release_id} already answered this idempotency key")
        self.release_id = release_id
        self.result = result


class LedgerIntegrityError(LedgerError):
    """A ledger row or link was changed outside the ledger (its MAC or hash does not match,
    or it is not the latest state in the chain); the ledger refuses to act on it. Run
    ``dpkit ledger verify`` to list every problem."""


class IdempotencyConflictError(LedgerError):
    """An idempotency key was reused with a different request (query, loss, dataset or
    analyst) than the one it was first bound to; nothing is debited or replayed."""


class StreamRollbackError(LedgerError):
    """A continual release's state is not the one the ledger last recorded for it: a step
    was already released from a newer state (a stale or second copy of a saved stream, or
    another process feeding the same stream). Nothing is released; noise already released
    for a step is never drawn again (see :mod:`dpkit.stream.frames`)."""


class TrivialResultWarning(UserWarning):
    """A released result is indistinguishable from its trivial baseline: a fitted classifier
    whose released parameters predict one class everywhere (the majority rate), a regressor
    that predicts a constant. Decided from the released model and public bounds only
    (post-processing), never from the data; the estimator's docstring states the rule."""


class BaselineWarning(UserWarning):
    """A method is, by a rule on public quantities only (ε, n, the grid, the workload's
    size), in the regime where a simpler release at the same privacy loss is measured and
    argued to be more accurate: the warning names that release. The method's docstring
    states the rule and the measurement; nothing is decided from the data."""
