"""The two simple continual counters, the baselines of every tree mechanism.

:class:`Increments` — noise on every step's increment, the release is the running sum of the
noisy increments (Chan, Shi & Song 2011, §3.1, the "simple counting mechanism I"; Dwork,
Naor, Pitassi & Rothblum 2010). Each step is one node: c₁ = c₂² = 1, so the loss is ε at
discrete Laplace scale w·Δ/ε, or ρ at discrete Gaussian σ = w·Δ/√(2ρ) (:mod:`.base`). The
error at t is the sum of t noises: Var_t = t·v, growing like √t in standard deviation. It
needs no horizon.

:class:`RunningTotals` — noise on every running total S_t (Chan et al. §3.1, "mechanism II").
One step enters all T totals: c₁ = T, c₂² = T, so the scale is T·w·Δ/ε (the budget split T
ways) or σ = √T·w·Δ/√(2ρ). Var_t = v, constant in t.

v is the node noise's exact variance (:func:`~dpkit.stream.base.noise_variance`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.errors import DomainError
from dpkit.stream.base import Budget, Counter, Unit

__all__ = ["Increments", "RunningTotals"]


class Increments(Counter):
    """Noise on each increment; the release is the running sum (module docstring)."""

    name = "increments"

    def __init__(self, horizon: int | None, unit: Unit, budget: Budget) -> None:
        super().__init__(horizon, unit, budget)

    def _norms(self) -> tuple[int, int]:
        return 1, 1

    def weights(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = np.asarray(t, dtype=np.float64)
        return t, np.ones_like(t)

    def window_terms(self, t: int, u: int) -> list[tuple[float, Any, float]]:
        """S_t − S_u carries the noises of steps u + 1 … t."""
        return [(float(t - u), self.noise, 1.0)]

    def release(self, x: np.ndarray) -> np.ndarray:
        noisy = np.asarray(x, dtype=np.int64) + self._noise(len(x))
        return np.cumsum(noisy).astype(np.float64)

    def start(self) -> dict[str, Any]:
        return {"t": 0, "total": 0}

    def step(self, state: dict[str, Any], x: int) -> float:
        state["t"] += 1
        state["total"] += int(x) + int(self._noise(1)[0])
        return float(state["total"])


class RunningTotals(Counter):
    """Noise on each running total, the budget split over the T totals (module docstring)."""

    name = "running_totals"

    def __init__(self, horizon: int | None, unit: Unit, budget: Budget) -> None:
        if horizon is None:
            raise DomainError("running_totals needs a horizon (its noise scale grows with T)")
        super().__init__(horizon, unit, budget)

    def _norms(self) -> tuple[int, int]:
        assert self.horizon is not None
        return self.horizon, self.horizon

    def weights(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ones = np.ones(np.shape(t), dtype=np.float64)
        return ones, ones

    def window_terms(self, t: int, u: int) -> list[tuple[float, Any, float]]:
        """S_t − S_u carries two independent total noises (one for u = 0)."""
        return [(2.0 if u else 1.0, self.noise, 1.0)]

    def release(self, x: np.ndarray) -> np.ndarray:
        totals = np.cumsum(np.asarray(x, dtype=np.int64))
        return (totals + self._noise(len(x))).astype(np.float64)

    def start(self) -> dict[str, Any]:
        return {"t": 0, "sum": 0}

    def step(self, state: dict[str, Any], x: int) -> float:
        state["t"] += 1
        state["sum"] += int(x)
        return float(state["sum"] + int(self._noise(1)[0]))
