"""Generalisation-based publishing: release a table whose values are generalised along
declared taxonomies.

- :mod:`~dpkit.release.generalization.taxonomy` — declared taxonomies (:class:`Categorical`
  trees, :class:`Numeric` ranges on a grid) and Adult's example (``ADULT_TAXONOMY``).
- :mod:`~dpkit.release.generalization.diffgen` — DiffGen (Mohammed, Chen, Fung & Yu, KDD
  2011, Alg. 1) and its weighted one-draw-per-step variant: :func:`diffgen` on bounded rows,
  ``query.publish.diffgen`` on a session.
"""

from dpkit.release.generalization.diffgen import DiffGenRelease, diffgen, plan_diffgen
from dpkit.release.generalization.taxonomy import (
    ADULT_CLASSES,
    ADULT_TARGET,
    ADULT_TAXONOMY,
    Categorical,
    Numeric,
)

__all__ = ["Categorical", "Numeric", "ADULT_TAXONOMY", "ADULT_TARGET", "ADULT_CLASSES",
           "diffgen", "plan_diffgen", "DiffGenRelease"]
