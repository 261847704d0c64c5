"""dpkit.ledger — the epsilon registry (Dwork & Roth §13.1).

Contents
--------
Ledger   persistent SQLite record of datasets (lifetime caps) and releases (exact losses),
         with an atomic check-and-debit before any noise is drawn
"""

from dpkit.ledger.registry import Ledger

__all__ = ["Ledger"]
