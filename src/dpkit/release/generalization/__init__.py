"""Generalisation-based publishing: release a table whose values are generalised along
declared, data-independent schemes.

- :mod:`~dpkit.release.generalization.taxonomy` — declared taxonomies (:class:`Categorical`
  trees, :class:`Numeric` ranges on a grid) and Adult's example (``ADULT_TAXONOMY``).
- :mod:`~dpkit.release.generalization.diffgen` — DiffGen (Mohammed, Chen, Fung & Yu, KDD
  2011, Alg. 1) and its weighted one-draw-per-step variant: :func:`diffgen` on bounded rows,
  ``query.publish.diffgen`` on a session.
- :mod:`~dpkit.release.generalization.kanon` — safe k-anonymisation (Li, Qardaji & Su 2012):
  β-sampling, a declared data-independent generalisation (:class:`Ranges`,
  :class:`Taxonomy`), suppression of groups below k; (ε, δ)-DP by their Thm. 5, with δ
  computed exactly (:func:`kanon_delta`); the same data side charged as pre-sampled
  crowd-blending (Gehrke, Hay, Lui & Pass 2012) with δ′ derived for declared crowds
  (:func:`presampled_crowd_blending`).
"""

from dpkit.release.generalization.diffgen import DiffGenRelease, diffgen, plan_diffgen
from dpkit.release.generalization.kanon import (
    KAnonymized,
    Ranges,
    Taxonomy,
    kanon_delta,
    kanon_loss,
    presampled_crowd_blending,
    safe_k_anonymize,
)
from dpkit.release.generalization.taxonomy import (
    ADULT_CLASSES,
    ADULT_TARGET,
    ADULT_TAXONOMY,
    Categorical,
    Numeric,
)

__all__ = ["Categorical", "Numeric", "ADULT_TAXONOMY", "ADULT_TARGET", "ADULT_CLASSES",
           "diffgen", "plan_diffgen", "DiffGenRelease", "KAnonymized", "Ranges", "Taxonomy",
           "kanon_delta", "kanon_loss", "safe_k_anonymize", "presampled_crowd_blending"]
