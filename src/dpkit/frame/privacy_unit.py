"""The privacy unit: what one individual is in the data, and how much they may contribute."""

from __future__ import annotations

from dataclasses import dataclass

from dpkit.core.stability import Contribution
from dpkit.errors import DomainError

__all__ = ["PrivacyUnit"]


@dataclass(frozen=True)
class PrivacyUnit:
    """Who is protected, and how much each individual may contribute.

    Use :meth:`rows` when each row is a different individual, or :meth:`by` when an
    identifier column marks each individual's rows.

    Attributes
    ----------
    column : str or None
        The identifier column, or ``None`` for row-level privacy.
    bounds : Contribution
        M = ``max_rows`` rows in total, G = ``max_groups`` groups, R = ``max_rows_per_group``
        rows per group; every sensitivity is derived from these (:mod:`dpkit.core.stability`).
    """

    column: str | None = None
    bounds: Contribution = Contribution(1, 1, 1)

    @property
    def max_rows(self) -> int:
        return self.bounds.max_rows

    @classmethod
    def rows(cls) -> PrivacyUnit:
        """Each row is one individual (add/remove-one-row neighbours)."""
        return cls(None, Contribution(1, 1, 1))

    @classmethod
    def by(cls, column: str, max_rows: int | None = None, *, max_groups: int | None = None,
           max_rows_per_group: int | None = None) -> PrivacyUnit:
        """Individuals are identified by ``column``, with declared contribution bounds.

        Parameters
        ----------
        column : str
            The identifier column. A null identifier is one unit.
        max_rows : int, optional
            M: rows kept per unit in total (default G·R).
        max_groups : int, optional
            G: groups of a group-by a unit may contribute to (the L0 bound; default M).
        max_rows_per_group : int, optional
            R: rows a unit may contribute to any one group (the L∞ bound; default M).

        Raises
        ------
        DomainError
            If a bound is not a positive integer, none of M or (G and R) is given, or
            ``column`` is empty.

        Notes
        -----
        Contribution bounding runs in one pass before every release: for each unit it keeps
        G of its groups, then R rows in each, then M rows in total, each choice uniformly at
        random from the CSPRNG, so no unit can exceed the bounds the sensitivities assume.
        """
        if not isinstance(column, str) or not column:
            raise DomainError("the privacy unit column must be a non-empty string")
        return cls(column, Contribution.of(max_rows, max_groups, max_rows_per_group))

    def __str__(self) -> str:
        if self.column is None:
            return "rows"
        b = self.bounds
        return (f"by({self.column!r}, max_rows={b.max_rows}, max_groups={b.max_groups}, "
                f"max_rows_per_group={b.max_rows_per_group})")
