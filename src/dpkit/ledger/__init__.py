"""dpkit.ledger — the epsilon registry (Dwork & Roth §13.1).

Contents
--------
Ledger            persistent record (SQLite file or PostgreSQL via SQLAlchemy) of datasets
                  (lifetime caps, burn-rate policies), analysts (hashed tokens, grants with
                  caps), studies and releases (exact losses, noise scales, result hashes),
                  with an atomic check-and-debit before any noise is drawn, idempotency keys
                  bound to their request, and a keyed hash chain over every change
IdempotentReplay  raised by ``Ledger.debit`` when a key already has a recorded answer
LedgerAccountant  the :class:`~dpkit.core.accountant.Accountant` over a ledger's dataset

Modules: ``registry`` (the Ledger), ``schema`` (tables, migrations), ``chain`` (keyed links
and row MACs), ``store`` (writing them), ``integrity`` (``verify``: replay the chain, check
every row), ``window`` (the burn-rate window: per-minute buckets, running total),
``checkpoint`` (signed states for an incremental verify), ``entries`` (a dataset's entry
and its recorded migration: ``Ledger.migrate``), ``rechain`` (chaining a version-1
or -2 ledger), ``keys`` (where the MAC key lives), ``codec`` (exact losses as text),
``plot`` (burn-down).
"""

from dpkit.ledger.accountant import LedgerAccountant
from dpkit.ledger.registry import IdempotentReplay, Ledger

__all__ = ["Ledger", "LedgerAccountant", "IdempotentReplay"]
