"""Neighbouring relations and distances (the input side of stability and privacy maps).

A metric names how far apart two inputs are, so that ``d_in`` has a meaning:

- :class:`AddRemoveDistance` — datasets as multisets of records; ``d_in = k`` means one can be
  reached from the other by adding or removing at most ``k`` records ("add/remove one"
  neighbours for k = 1). When the privacy unit is a user (``PrivacyUnit.by``), records are the
  unit's rows and ``k`` counts units.
- :class:`L1Distance`, :class:`L2Distance` — vectors; ``d_in`` bounds ‖x − x′‖₁ or ‖x − x′‖₂
  (the L1 / L2 sensitivity of the query that produced them).
- :class:`MahalanobisDistance` — vectors; ``d_in`` bounds √(vᵀΣ⁻¹v), v = x − x′, for a declared
  covariance Σ (the Mahalanobis sensitivity of the Gaussian with covariance c²Σ).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "Metric",
    "AddRemoveDistance",
    "L1Distance",
    "L2Distance",
    "LInfDistance",
    "MahalanobisDistance",
    "HammingDistance",
]


@dataclass(frozen=True)
class Metric:
    """Base class: a distance between inputs of a component."""

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class AddRemoveDistance(Metric):
    """Number of records (or privacy units) added or removed."""


@dataclass(frozen=True)
class L1Distance(Metric):
    """‖x − x′‖₁ between numeric vectors."""


@dataclass(frozen=True)
class L2Distance(Metric):
    """‖x − x′‖₂ between numeric vectors."""


@dataclass(frozen=True)
class MahalanobisDistance(Metric):
    """√((x − x′)ᵀΣ⁻¹(x − x′)) between numeric vectors, for a declared covariance Σ (rows of
    exact Fractions; Dwork & Roth App. A.1)."""

    covariance: tuple[tuple[Fraction, ...], ...] = ()


@dataclass(frozen=True)
class LInfDistance(Metric):
    """max_i |x_i − x′_i| between score vectors (the sensitivity of each score)."""


@dataclass(frozen=True)
class HammingDistance(Metric):
    """Number of positions whose values differ (substitute-one neighbours; local DP)."""
