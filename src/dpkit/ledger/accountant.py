"""The ledger-backed accountant: :class:`~dpkit.core.accountant.Accountant` over the epsilon
registry, for one dataset and (optionally) one analyst. It writes every release the same way:
the noise rows as :func:`dpkit.core.record.noise_json` (a JSON list, ``[]`` when none were
planned) with the debit, the digest of :func:`dpkit.core.record.digest_of` with the outcome."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dpkit.core.accountant import Accountant
from dpkit.core.measures import PrivacyLoss
from dpkit.core.record import NoiseRow, noise_json
from dpkit.ledger.registry import Ledger

__all__ = ["LedgerAccountant"]


class LedgerAccountant(Accountant):
    """Debits a dataset's lifetime cap (and the analyst's grant, and the burn-rate policy)
    in the ledger, atomically under its write lock, before anything runs; outcomes and
    stored answers are chained (:class:`~dpkit.ledger.Ledger`).

    Parameters
    ----------
    ledger : Ledger, str or Path
        The ledger, or where to open it (a SQLite path or a database URL).
    dataset : str
        A dataset registered in the ledger.
    analyst : str, optional
        Who spends: their grant's cap applies too.
    """

    records = True

    def __init__(self, ledger: Ledger | str | Path, dataset: str,
                 analyst: str | None = None) -> None:
        self.ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
        self.dataset, self.analyst = dataset, analyst

    @property
    def budget(self) -> PrivacyLoss:
        return self.ledger.cap(self.dataset)

    @property
    def spent(self) -> PrivacyLoss:
        return self.ledger.spent(self.dataset)

    def grant(self) -> dict[str, Any] | None:
        """The analyst's grant (``{"cap", "spent"}``, checked), or None."""
        if self.analyst is None:
            return None
        return self.ledger.grant_of(self.analyst, self.dataset)

    def debit(self, loss: PrivacyLoss, description: str, *,
              idempotency_key: str | None = None, noise: Sequence[NoiseRow] = ()
              ) -> int | None:
        return self.ledger.debit(self.dataset, loss, description, analyst=self.analyst,
                                 idempotency_key=idempotency_key, noise=noise_json(noise))

    def mark(self, release_id: int | None, status: str, digest: str | None = None,
             stored: str | None = None) -> None:
        if release_id is not None:
            self.ledger.mark(release_id, status, digest, stored)
