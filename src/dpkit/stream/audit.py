"""Audit cases of the continual counters (the binary tree and the square-root factorisation)
for the battery of :mod:`dpkit.audit`, registered in :mod:`dpkit.mechanisms.registry`.

A one-coordinate statistic of the released prefix sums has little power against a flaw in
one node; these cases post-process the whole release into the neighbouring pair's
likelihood-ratio statistic, which is sufficient for the pair (x = 0, x′ = one event at step 1),
so the audit sees the full privacy loss of the node vector:

- tree (pure ε, discrete Laplace of scale b on every left node, T = 4, L = 3): step 1 lies in
  the nodes [1, 1], [1, 2], [1, 4], which are the releases S₁, S₂, S₄ themselves. Per node
  the log-likelihood ratio of 0 against 1 is −1/b for a value ≤ 0 and +1/b for a value ≥ 1,
  so the statistic is the number of those releases ≥ 1 (0 … 3): P′(3)/P(3) = e^(3/b) = e^ε.
- factorisation (ρ = 1/4 zCDP, discrete Gaussian, T = 2): the noisy node vector is
  y = R·Δout (Δ the first difference; exact up to float rounding), and for the pair
  (0, one event at step s) the statistic is ⟨r_s, y⟩/‖r_s‖² with r_s = R·e_s, column s of R:
  N(0, σ²/‖r_s‖²) against N(1, σ²/‖r_s‖²) up to the lattice. The audit reads zCDP claims at
  δ = 1e-3 through a loose conversion, so each broken variant is paired with the step where
  it weighs most: the last step (one node sees it) for "node noise halved", the first (the
  longest column) for "shared node counted once". Measured at 50,000 samples and confidence
  1 − 1e-6 (3 runs each): lower bounds 2.59–2.82 and 3.27–3.65 against the claim 2.33 (correct
  counter: 1.07–1.41). Tree: 1.20–1.31 and 1.37–1.46 against ε = 1 (correct: 0.85–0.97).

Broken variants (each must be flagged): "node noise halved" (one node's noise at half the
scale: the top node of the tree, the last node of the factorisation) and "shared node
counted once" (the calibration believes a step lies in one node fewer: L − 1 levels for the
tree; the first term missing from R's column norm for the factorisation).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import cast

import numpy as np

from dpkit.mechanisms import make_noise
from dpkit.mechanisms.registry import AuditCase, Sampler, register
from dpkit.stream.base import Budget, Counter, Unit, draw
from dpkit.stream.factorization import SqrtFactorization
from dpkit.stream.tree import BinaryTree, levels

__all__ = ["tree_cases", "factorization_cases"]

_TREE_T, _FACT_T = 4, 2  # small: the broken node is a large share of the loss


def _pair(horizon: int, step: int = 1) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros(horizon, dtype=np.int64)
    xp = x.copy()
    xp[step - 1] = 1
    return x, xp


class _TreeHalvedTop(BinaryTree):
    """Broken: the top node's noise at half the scale."""

    def _noise(self, size: int, level: int = 0) -> np.ndarray:
        if level == self.levels - 1:
            half = make_noise(self.noise.sensitivity,
                              epsilon=2 * cast(Fraction, self.budget.epsilon))
            return draw(half, size)
        return super()._noise(size, level)


class _TreeOneLevelShort(BinaryTree):
    """Broken: the map counts L − 1 nodes per step (a shared node counted once)."""

    def _norms(self) -> tuple[int, int]:
        return self.levels - 1, self.levels - 1


class _FactHalvedLast(SqrtFactorization):
    """Broken: the last node's noise at half the scale."""

    def _noise(self, size: int, level: int = 0) -> np.ndarray:
        assert self.horizon is not None
        z = draw(self.noise, size).reshape(-1, self.horizon)
        half = make_noise(self.noise.sensitivity, rho=4 * cast(Fraction, self.budget.rho),
                          norm="l2")
        z[:, -1] = draw(half, len(z))
        return z.reshape(-1)


class _FactShortNorm(SqrtFactorization):
    """Broken: R's column norm without its first (largest) term."""

    def _norms(self) -> tuple[int, int]:
        l1, l2 = super()._norms()
        return l1, l2 - int(self.coef[0]) ** 2


def _tree_sampler(counter: Counter) -> Sampler:
    ends = [(1 << j) - 1 for j in range(levels(_TREE_T))]  # S₁, S₂, S₄: the nodes of step 1

    def sample(data: np.ndarray, n: int) -> np.ndarray:
        out = counter.release_many(np.asarray(data), n)
        return (out[:, ends] >= 1).sum(axis=1).astype(np.float64)
    return sample


def _fact_sampler(counter: SqrtFactorization, step: int) -> Sampler:
    """⟨R·e_s, y⟩/‖R·e_s‖² with y = R·Δout: the pair (0, one event at ``step``)'s statistic."""
    r = counter.coef[:_FACT_T].astype(np.float64)
    col = np.zeros(_FACT_T)
    col[step - 1:] = r[:_FACT_T - step + 1]  # column s of R

    def sample(data: np.ndarray, n: int) -> np.ndarray:
        out = counter.release_many(np.asarray(data), n)
        diff = np.diff(out, axis=1, prepend=0.0)
        y = np.stack([diff[:, :t + 1] @ r[:t + 1][::-1] for t in range(_FACT_T)], axis=1)
        return np.asarray(y @ col / (col @ col))
    return sample


def tree_cases() -> Sequence[AuditCase]:
    """The binary tree's cases (module docstring)."""
    unit, budget = Unit(), Budget(epsilon=Fraction(1))
    good = BinaryTree(_TREE_T, unit, budget)
    x, xp = _pair(_TREE_T)
    sample = _tree_sampler(good)
    m, d = good.noise, good.noise.sensitivity
    return [AuditCase("stream tree, node noise halved", m, sample,
                      _tree_sampler(_TreeHalvedTop(_TREE_T, unit, budget)),
                      x, xp, d),
            AuditCase("stream tree, shared node counted once", m, sample,
                      _tree_sampler(_TreeOneLevelShort(_TREE_T, unit, budget)),
                      x, xp, d)]


def factorization_cases() -> Sequence[AuditCase]:
    """The square-root factorisation's cases (module docstring)."""
    unit, budget = Unit(), Budget(rho=Fraction(1, 4))
    good = SqrtFactorization(_FACT_T, unit, budget)
    m, d = good.noise, good.noise.sensitivity
    last, first = _pair(_FACT_T, _FACT_T), _pair(_FACT_T, 1)
    return [AuditCase("stream factorization, node noise halved", m,
                      _fact_sampler(good, _FACT_T),
                      _fact_sampler(_FactHalvedLast(_FACT_T, unit, budget), _FACT_T),
                      *last, d),
            AuditCase("stream factorization, shared node counted once", m,
                      _fact_sampler(good, 1),
                      _fact_sampler(_FactShortNorm(_FACT_T, unit, budget), 1),
                      *first, d)]


register(audit=tree_cases)(BinaryTree)
register(audit=factorization_cases)(SqrtFactorization)
