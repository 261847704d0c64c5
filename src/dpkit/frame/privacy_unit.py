"""The privacy unit: what one individual is in the data, and how much they may contribute."""

from __future__ import annotations

from dataclasses import dataclass

from dpkit.errors import DomainError

__all__ = ["PrivacyUnit"]


@dataclass(frozen=True)
class PrivacyUnit:
    """Who is protected.

    Use :meth:`rows` when each row is a different individual, or :meth:`by` when an
    identifier column marks each individual's rows.

    Attributes
    ----------
    column : str or None
        The identifier column, or ``None`` for row-level privacy.
    max_rows : int
        Contribution bound: the most rows a unit keeps after bounding (1 for rows).
    """

    column: str | None = None
    max_rows: int = 1

    @classmethod
    def rows(cls) -> PrivacyUnit:
        """Each row is one individual (add/remove-one-row neighbours)."""
        return cls(None, 1)

    @classmethod
    def by(cls, column: str, max_rows: int) -> PrivacyUnit:
        """Individuals are identified by ``column``; each keeps at most ``max_rows`` rows.

        Contribution bounding keeps, for every unit, ``max_rows`` of its rows chosen uniformly
        at random (without replacement) in one pass over the data, so no unit can exceed the
        bound that every sensitivity is derived from. A null identifier is one unit.

        Raises
        ------
        DomainError
            If ``max_rows`` is not a positive integer or ``column`` is empty.
        """
        if not isinstance(column, str) or not column:
            raise DomainError("the privacy unit column must be a non-empty string")
        if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
            raise DomainError(f"max_rows must be a positive integer, got {max_rows!r}")
        return cls(column, max_rows)

    def __str__(self) -> str:
        if self.column is None:
            return "rows"
        return f"by({self.column!r}, max_rows={self.max_rows})"
