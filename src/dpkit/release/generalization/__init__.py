"""Generalisation-based publishing: releases of generalised tables.

- :mod:`~dpkit.release.generalization.kanon` — safe k-anonymisation (Li, Qardaji & Su 2012):
  β-sampling, a declared data-independent generalisation (:class:`Ranges`,
  :class:`Taxonomy`), suppression of groups below k; (ε, δ)-DP by their Thm. 5, with δ
  computed exactly (:func:`kanon_delta`).
"""

from dpkit.release.generalization.kanon import (
    KAnonymized,
    Ranges,
    Taxonomy,
    kanon_delta,
    kanon_loss,
    safe_k_anonymize,
)

__all__ = ["KAnonymized", "Ranges", "Taxonomy", "kanon_delta", "kanon_loss",
           "safe_k_anonymize"]
