"""dpkit.ledger — the epsilon registry (Dwork & Roth §13.1).

Contents
--------
Ledger            persistent record (SQLite file or PostgreSQL via SQLAlchemy) of datasets
                  (lifetime caps, burn-rate policies), analysts (hashed tokens, grants with
                  caps), studies and releases (exact losses, noise scales, result hashes),
                  with an atomic check-and-debit before any noise is drawn, idempotency keys
                  and a hash-chained, verifiable log
IdempotentReplay  raised by ``Ledger.debit`` when a key already has a recorded answer
"""

from dpkit.ledger.registry import IdempotentReplay, Ledger

__all__ = ["Ledger", "IdempotentReplay"]
