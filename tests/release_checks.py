"""Shared checks for :mod:`dpkit.release` algorithms: record every noisy measurement an
algorithm makes (its query values, declared L1 sensitivity and ε) so tests can assert the
budget is respected (sequential composition: Σ ε_i ≤ ε) and that each measured query vector
moves by at most its declared sensitivity between neighbouring histograms."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpkit.core.measures import PrivacyLoss, PureDP
from dpkit.mechanisms import frontend


@dataclass
class Measured:
    values: np.ndarray
    sensitivity: Fraction
    epsilon: Fraction
    weights: np.ndarray | None = None  # per-value noise weights (weighted sensitivity)


def record(monkeypatch) -> list[Measured]:
    """Patch the kit's Laplace draws (``frontend.noisy`` at a pure ε, the one road every
    release module draws its noise through) to log each call, then run the real draw."""
    log: list[Measured] = []
    real_noisy = frontend.noisy

    def noisy(values, sensitivity, budget, **kw):  # Laplace draws through the kit
        if not isinstance(budget, PrivacyLoss) or isinstance(budget, PureDP):
            eps = budget.epsilon if isinstance(budget, PureDP) else budget
            weights = kw.get("weights")
            log.append(Measured(np.array(values, copy=True), Fraction(sensitivity),
                                Fraction(eps), None if weights is None else
                                np.array(weights, dtype=object)))
        return real_noisy(values, sensitivity, budget, **kw)

    monkeypatch.setattr(frontend, "noisy", noisy)
    return log


def total_epsilon(log: list[Measured]) -> Fraction:
    return sum((m.epsilon for m in log), Fraction(0))
