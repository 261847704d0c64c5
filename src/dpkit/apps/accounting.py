"""How every ``dpkit.apps`` release is charged: once, through the one accountant
(:mod:`dpkit.core.accountant`), before any statistic of the data is computed.

``accountant`` is None (an unaccounted release: the caller composes; the release record is
still built), a :class:`~dpkit.core.accountant.Accountant`, a
:class:`~dpkit.core.compose.PrivacyFilter` or a :class:`~dpkit.frame.Session` (anything with
an ``accountant`` attribute), as in :mod:`dpkit.learn`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dpkit.core import rng
from dpkit.core.accountant import as_accountant
from dpkit.core.measures import PrivacyLoss, convert
from dpkit.core.record import NoiseRow

__all__ = ["charge", "check_accountant"]

T = TypeVar("T")


def check_accountant(accountant: Any) -> None:
    """Refuse an accountant of the wrong type at plan time (DomainError), nothing debited."""
    if accountant is not None:
        as_accountant(accountant)


def charge(accountant: Any, loss: PrivacyLoss, description: str, compute: Callable[[], T],
           noise: Sequence[NoiseRow] = ()) -> T:
    """Debit ``loss`` through ``accountant`` (None: nothing tracked; else converted to the
    accountant's measure), atomically, then run ``compute``.

    Raises
    ------
    BudgetExceededError
        Before anything runs (nothing debited).
    DomainError
        ``accountant`` is not an accountant, a PrivacyFilter or a Session (before the debit).
    MeasureError
        The loss cannot be converted to the accountant's measure (before the debit).
    ReleaseFailedError
        ``compute`` failed after the debit (the loss stands).
    InsecureRandomnessError
        Under the seeded test stream (before the debit).
    """
    rng.require_secure()
    if accountant is None:
        return compute()
    target = as_accountant(accountant)
    return target.run(convert(loss, target.measure), description, compute, noise=noise)
