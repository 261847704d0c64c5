"""What every continual counter shares: the privacy unit, the calibration through the one
calibrated-noise entry, the exact noise variances and the confidence half-widths.

A counter releases, after every step t = 1 … T, an estimate of the running total
S_t = x_1 + … + x_t of integer increments. Every counter here is *linear*: it computes integer
node values ``R·x`` (a 0/1 or integer matrix R: tree nodes, p-sums, increments), adds
independent noise to each node through one :class:`~dpkit.mechanisms.CalibratedNoise`
measurement, and post-processes. Its privacy is that of the node vector, so the privacy map
is the noise mechanism's map at the node vector's sensitivity (below), and the loss is charged
once, before any noise is drawn.

Sensitivity (the privacy unit)
------------------------------
Event level: neighbouring streams differ in one step, by at most Δ (``sensitivity``). User
level: one user contributes at most w events (``contributions``) over the whole stream, each
moving one step by at most Δ, so the difference v has ‖v‖₁ ≤ w·Δ. For a node matrix R whose
columns have L1 norm ≤ c₁ and L2 norm ≤ c₂, ‖R·v‖₁ ≤ ‖v‖₁·c₁ and ‖R·v‖₂ ≤ ‖v‖₁·c₂
(triangle inequality; tight when the w events fall on one step), so

    L1 sensitivity = w·Δ·c₁   (pure ε-DP with discrete Laplace noise of scale w·Δ·c₁/ε)
    L2 sensitivity = w·Δ·c₂   (ρ-zCDP with discrete Gaussian noise σ = w·Δ·c₂/√(2ρ))

(Dwork, Naor, Pitassi & Rothblum 2010; Chan, Shi & Song 2011, §3; Canonne, Kamath & Steinke
2020, Thm 4 and Thm 14). c₁ and c₂² are exact integers for every counter of this package.

Noise variances (exact)
-----------------------
Discrete Laplace of scale b: Var = 2p/(1 − p)² = 1/(2·sinh²(1/(2b))), p = e^(−1/b) (CKS20 §3).
Discrete Gaussian N_ℤ(0, σ²): Var = Σ z² e^(−z²/2σ²) / Σ e^(−z²/2σ²) (< σ², CKS20 Prop. 19),
summed here to double precision (for σ ≥ 4 it equals σ² to a relative 1e-130).

Confidence half-widths at failure probability β for an error e = Σ aᵢ·zᵢ
-------------------------------------------------------------------------
Gaussian: N_ℤ(0, σ²) is σ²-subgaussian (CKS20 Cor. 17), so e is s²-subgaussian with
s² = Σ aᵢ²σᵢ² and P(|e| > h) ≤ 2·exp(−h²/(2s²)): h = √(2 s² ln(2/β)).
Laplace: Chan, Shi & Song 2011, Cor. 2.9 (sums of independent Laplace variables; the discrete
Laplace's moment generating function is at most the continuous one's at the same scale,
(1 − p)²/((1 − pe^λ)(1 − pe^(−λ))) ≤ 1/(1 − b²λ²) for |λ| < 1/b): with ν ≥ √(Σ aᵢ²bᵢ²) and
ν > max|aᵢ|bᵢ·√(ln(2/β)), P(|e| > √8·ν·√(ln(2/β))) ≤ β.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

import numpy as np

from dpkit.core.measures import ZCDP, PrivacyLoss, PureDP
from dpkit.core.numbers import Number, integer, positive, sqrt_up
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.mechanisms import CalibratedNoise, frontend

__all__ = ["Unit", "Budget", "scale_of", "noise_variance", "half_width", "draw",
           "MAX_HORIZON", "Counter", "check_horizon", "is_gaussian", "rows"]

MAX_HORIZON = 1 << 40  # horizons beyond ~10^12 steps are refused at plan time


@dataclass(frozen=True)
class Unit:
    """The privacy unit of a stream.

    Parameters
    ----------
    sensitivity : number
        Δ > 0: one event changes one step's value by at most Δ (exact, rounded up).
    contributions : int
        w ≥ 1: events per privacy unit over the whole stream (1: event level; w > 1: user
        level, each user contributing at most w events).

    Raises
    ------
    DomainError
        Δ ≤ 0 or w < 1.
    """

    sensitivity: Number = Fraction(1)
    contributions: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", positive(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "contributions",
                           integer(self.contributions, "contributions", minimum=1))

    @property
    def scale(self) -> Fraction:
        """w·Δ: the largest L1 change of the increment vector between neighbours."""
        return cast(Fraction, self.sensitivity) * self.contributions

    @property
    def level(self) -> str:
        return "event" if self.contributions == 1 else "user"


@dataclass(frozen=True)
class Budget:
    """A pure ε (discrete Laplace noise) or a ρ-zCDP (discrete Gaussian noise) budget.

    Raises
    ------
    DomainError
        Neither or both given, or a non-positive value.
    """

    epsilon: Number | None = None
    rho: Number | None = None

    def __post_init__(self) -> None:
        if (self.epsilon is None) == (self.rho is None):
            raise DomainError("pass epsilon= (pure ε, discrete Laplace) or rho= (ρ-zCDP, "
                              "discrete Gaussian), exactly one")
        for name in ("epsilon", "rho"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, positive(value, name, up=False))

    @property
    def gaussian(self) -> bool:
        return self.rho is not None

    @property
    def loss(self) -> PrivacyLoss:
        return ZCDP(self.rho) if self.rho is not None else PureDP(self.epsilon)  # type: ignore

    def part(self, fraction: Fraction) -> Budget:
        """The same kind of budget, times ``fraction``."""
        if self.rho is not None:
            return Budget(rho=cast(Fraction, self.rho) * fraction)
        return Budget(epsilon=cast(Fraction, self.epsilon) * fraction)


def scale_of(noise: CalibratedNoise) -> float:
    """The node noise's scale, read off its noise row (:func:`dpkit.mechanisms.frontend.row_of`),
    for variances and interval half-widths."""
    return float(frontend.row_of(noise).scale or 0)


def noise_variance(noise: CalibratedNoise) -> float:
    """The exact variance of one draw of ``noise`` (module docstring), as a float."""
    scale = scale_of(noise)
    if noise.mechanism.startswith("discrete Laplace") or "laplace" in noise.name:
        return 1.0 / (2.0 * math.sinh(1.0 / (2.0 * scale)) ** 2)
    if scale >= 4:
        return scale * scale
    z = np.arange(-int(40 * scale) - 40, int(40 * scale) + 41, dtype=np.float64)
    w = np.exp(-z * z / (2 * scale * scale))
    return float((z * z * w).sum() / w.sum())


def is_gaussian(noise: CalibratedNoise) -> bool:
    """Whether the calibrated noise is Gaussian (zCDP) rather than Laplace."""
    return "gaussian" in noise.name


def half_width(gaussian: bool, s2: np.ndarray, amax: np.ndarray, beta: float) -> np.ndarray:
    """Half-widths at failure probability ``beta`` for errors with Σaᵢ²·scaleᵢ² = ``s2`` and
    max |aᵢ|·scaleᵢ = ``amax`` (module docstring)."""
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    log = math.log(2 / beta)
    s2 = np.asarray(s2, dtype=np.float64)
    if gaussian:
        return np.sqrt(2 * s2 * log)
    nu = np.maximum(np.sqrt(s2), np.asarray(amax, dtype=np.float64) * math.sqrt(log)
                    * (1 + 1e-9))
    return math.sqrt(8 * log) * nu


# within pooled(): per noise measurement (by id, kept alive here), its unused fresh draws
_POOL: ContextVar[dict[int, tuple[CalibratedNoise, np.ndarray]] | None] = ContextVar(
    "dpkit_stream_pool", default=None)
_BLOCK: ContextVar[int] = ContextVar("dpkit_stream_block", default=1)


@contextmanager
def pooled(block: int) -> Iterator[None]:
    """Within the block, :func:`draw` serves each measurement's values from vectorised draws
    of at least ``block`` values (one sampler call for many keys' nodes instead of one call
    per node). Every value served is a fresh, independent draw used once; what is left at
    the end is discarded, never kept or saved. The number drawn depends on ``block`` and the
    plan only."""
    pool, size = _POOL.set({}), _BLOCK.set(max(int(block), 1))
    try:
        yield
    finally:
        _POOL.reset(pool)
        _BLOCK.reset(size)


def draw(noise: CalibratedNoise, size: int) -> np.ndarray:
    """``size`` independent noise values (int64), drawn by calling the calibrated
    measurement on zeros (the one door to the samplers); within :func:`pooled`, taken
    from its unused draws."""
    if size <= 0:
        return np.zeros(0, dtype=np.int64)
    pool = _POOL.get()
    if pool is None:
        return _fresh(noise, size)
    _, left = pool.get(id(noise), (noise, np.zeros(0, dtype=np.int64)))
    if len(left) < size:  # the rest is discarded: a value is served at most once
        left = _fresh(noise, max(size, _BLOCK.get()))
    pool[id(noise)] = (noise, left[size:])
    return left[:size]


def _fresh(noise: CalibratedNoise, size: int) -> np.ndarray:
    return np.asarray(noise(np.zeros(size, dtype=np.int64)), dtype=np.int64)


def rows(name: str, noise: CalibratedNoise, statistic: str) -> tuple[NoiseRow, ...]:
    """The noise row of a counter's node noise (for the release record and the ledger)."""
    row = frontend.row_of(noise, statistic)
    return (NoiseRow(f"{name} ({row.name})", row.scale, row.sensitivity, statistic),)


def check_horizon(horizon: Any) -> int:
    """A horizon T as an int in [1, MAX_HORIZON] (plan time; ``DomainError`` otherwise)."""
    t = integer(horizon, "horizon", minimum=1)
    if t > MAX_HORIZON:
        raise DomainError(f"horizon must be at most {MAX_HORIZON}; got {t}")
    return t


class Counter(ABC):
    """A continual counter: a plan (horizon, unit, budget, calibrated node noise) that releases
    prefix sums in batch (:meth:`release`) or one step at a time (:meth:`start`,
    :meth:`step`). Built at plan time, before any debit; it holds no data.

    Subclasses define :attr:`name`, the node structure (:meth:`_norms`: c₁ and c₂² of the
    node matrix), :meth:`weights` (the closed form), :meth:`release`, :meth:`start` and
    :meth:`step`. Every noise value is drawn through :meth:`_noise` (a broken variant in the
    tests overrides it).
    """

    name: str = "counter"
    share: Fraction = Fraction(1)  # the part of the budget the node noise takes

    def __init__(self, horizon: int | None, unit: Unit, budget: Budget) -> None:
        self.horizon = None if horizon is None else check_horizon(horizon)
        self.unit, self.budget = unit, budget
        # the node noise (module docstring): discrete Laplace at L1 sensitivity w·Δ·c₁ for ε,
        # discrete Gaussian at L2 sensitivity w·Δ·√c₂² for ρ, map-checked by make_noise
        l1, l2sq = self._norms()
        norm = sqrt_up(Fraction(l2sq)) if budget.gaussian else Fraction(l1)
        self.noise = frontend.calibrate(unit.scale * norm, budget.part(self.share).loss)

    def _norms(self) -> tuple[int, int]:
        raise NotImplementedError

    @property
    def gaussian(self) -> bool:
        return is_gaussian(self.noise)

    @property
    def loss(self) -> PrivacyLoss:
        """What the whole stream is charged: the budget. The node noise's exact map at the
        node sensitivity (:attr:`map_loss`) is at most this, checked exactly by
        :func:`dpkit.mechanisms.make_noise`."""
        return self.budget.loss

    @property
    def map_loss(self) -> PrivacyLoss:
        """The privacy map of the node noise at the node sensitivity (exact)."""
        assert self.noise.loss is not None
        return self.noise.loss

    def noise_rows(self) -> tuple[NoiseRow, ...]:
        return rows(self.name, self.noise, "prefix sums")

    def _noise(self, size: int, level: int = 0) -> np.ndarray:
        """``size`` node noise values for nodes at ``level`` (int64)."""
        return draw(self.noise, size)

    @abstractmethod
    def weights(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For steps ``t`` (1-based): Σaᵢ² and max|aᵢ| of the release's error Σaᵢzᵢ over the
        node noises zᵢ (the closed form)."""

    def variance(self, t: np.ndarray) -> np.ndarray:
        """The exact variance of the release at steps ``t`` (float64)."""
        return noise_variance(self.noise) * self.weights(np.asarray(t))[0]

    def half_widths(self, t: np.ndarray, beta: float) -> np.ndarray:
        """Half-widths of the (1 − β) confidence interval of the release at steps ``t``."""
        sq, am = self.weights(np.asarray(t))
        s = scale_of(self.noise)
        return half_width(self.gaussian, sq * s * s, am * s, beta)

    def window_terms(self, t: int, u: int) -> list[tuple[float, CalibratedNoise, float]]:
        """The error of the window S_t − S_u (0 ≤ u < t) as Σ aᵢ·zᵢ over the node noises,
        grouped by noise: for each noise, (Σ aᵢ², the noise, max |aᵢ|). Every counter of
        this package overrides it with the exact coefficients; this default is the bound
        ‖a_t − a_u‖₂ ≤ ‖a_t‖₂ + ‖a_u‖₂, max |a_t − a_u| ≤ max |a_t| + max |a_u|."""
        sq, am = self.weights(np.array([t] + ([u] if u else [])))
        root = float(np.sum(np.sqrt(sq)))
        return [(root * root, self.noise, float(np.sum(am)))]

    @abstractmethod
    def release(self, x: np.ndarray) -> np.ndarray:
        """The private prefix sums of the int64 increments ``x`` (len ≤ horizon), float64."""

    def release_many(self, x: np.ndarray, copies: int) -> np.ndarray:
        """``copies`` independent releases of the same increments, shape (copies, len(x)):
        for the audit and the benchmarks (the tree and the factorisation vectorise it, and
        their :meth:`release` is its first row, so both read the same code)."""
        return np.stack([self.release(x) for _ in range(int(copies))])

    @abstractmethod
    def start(self) -> dict[str, Any]:
        """The initial streaming state: a small JSON-ready dict (ints, floats, lists)."""

    @abstractmethod
    def step(self, state: dict[str, Any], x: int) -> float:
        """Feed one increment (an int, already clamped); update ``state``; the release."""
