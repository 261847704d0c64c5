"""Compile a query's aggregations into core components (DESIGN.md §2).

For every exact statistic the engine will compute, the compiler builds a
:class:`~dpkit.core.Transformation` whose stability map comes from :mod:`dpkit.core.stability`
(the core decides every sensitivity) and chains it with the noise :class:`Measurement` of the
one calibrated-noise entry, :func:`dpkit.mechanisms.make_noise` (closed form, checked on the
mechanism's exact privacy map at the chain's sensitivity).
The release's loss is the basic composition of the statistics' losses in the session's
measure. Nothing here reads data.

Budget split: the release's ε (or ρ, δ) is divided among aggregations by ``split`` weights
(even by default), and within an aggregation by its statistics' weights (a mean spends half
on its sum and half on its count).

Groups: statistics are vectors over the groups (and bins). A unit's rows fall in at most G
groups, R per group and M in all (:class:`~dpkit.core.stability.Contribution`); the
stability maps bound the whole vector, and for quantiles the per-group exponential
mechanisms' losses 2·r_g/s sum to at most 2·‖c‖₁/s because Σ_g r_g ≤ ‖c‖₁ = min(M, G·R)
(parallel composition, McSherry 2009, generalised to bounded units).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

import narwhals as nw
import numpy as np

from dpkit.core import stability
from dpkit.core.component import Measurement
from dpkit.core.measures import ZCDP, PrivacyLoss, PureDP, largest_rho
from dpkit.core.metrics import L1Distance, L2Distance
from dpkit.core.numbers import Number, as_typed, fraction_down, log_up, non_negative, sqrt_down
from dpkit.core.stability import Contribution
from dpkit.errors import DomainError, MeasureError
from dpkit.frame.aggregates import Aggregation, NumericKind, Quantile, Statistic, StatKind
from dpkit.mechanisms import frontend
from dpkit.mechanisms.tree_quantile import make_tree_quantile, tree_plan

__all__ = ["Noise", "Target", "PlannedStatistic", "plan_statistics", "resolve_target"]


class Noise(Enum):
    """The noise a release target calls for: Laplace (pure ε, L1 sensitivities) or Gaussian
    (ρ-zCDP, L2 sensitivities; also (ε, δ) targets, through the largest ρ that meets them)."""

    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"


@dataclass(frozen=True)
class Target:
    """What a release may spend: ``noise`` is :attr:`Noise.LAPLACE` (pure ε) or
    :attr:`Noise.GAUSSIAN` (ρ).

    An (ε, δ) target becomes a Gaussian one with the largest ρ whose conversion
    (:func:`~dpkit.core.zcdp_to_epsilon`) meets (ε, δ); ``delta`` then records the δ at which
    the release's *total* ρ is converted back, so statistics compose in zCDP first (tighter
    than converting each one and adding).
    """

    noise: Noise
    epsilon: Fraction = Fraction(0)
    delta: Fraction = Fraction(0)
    rho: Fraction = Fraction(0)

    def share(self, w: Fraction) -> Target:
        return Target(self.noise, self.epsilon * w, self.delta, self.rho * w)

    def bound(self) -> PrivacyLoss:
        return PureDP(self.epsilon) if self.noise is Noise.LAPLACE else ZCDP(self.rho)

    def pure_epsilon(self) -> Fraction:
        """ε for a pure-DP mechanism (exponential) under this target."""
        if self.noise is Noise.GAUSSIAN:
            return sqrt_down(2 * self.rho)  # ε-DP ⇒ ε²/2-zCDP
        return self.epsilon


def _positive(x: Number | None, name: str) -> Fraction | None:
    if x is None:
        return None
    value = as_typed(x)  # the decimal the user typed: ρ = 0.1 is charged as 1/10
    if value <= 0:
        raise DomainError(f"{name} must be > 0, got {x!r}")
    return value


def resolve_target(measure: type, epsilon: Number | None, rho: Number | None,
                   delta: Number | None) -> Target:
    """The release target from the user's arguments and the session's measure."""
    eps, r, dlt = _positive(epsilon, "epsilon"), _positive(rho, "rho"), _positive(delta, "delta")
    if (eps is None) == (r is None):
        raise DomainError("pass exactly one of epsilon= or rho=")
    if measure is PureDP:
        if r is not None or dlt is not None:
            raise MeasureError("a pure-DP session releases with epsilon= only")
        return Target(Noise.LAPLACE, epsilon=eps or Fraction(0))
    if measure is ZCDP:
        if dlt is not None:
            raise MeasureError("a zCDP session takes rho= (Gaussian) or epsilon= (Laplace)")
        if r is not None:
            return Target(Noise.GAUSSIAN, rho=r)
        return Target(Noise.LAPLACE, epsilon=eps or Fraction(0))
    if r is not None:
        raise MeasureError("an (ε, δ) session takes epsilon= and optionally delta=")
    if dlt is None:
        return Target(Noise.LAPLACE, epsilon=eps or Fraction(0))
    if dlt >= 1:
        raise DomainError("delta must be below 1")
    return Target(Noise.GAUSSIAN, delta=dlt, rho=largest_rho(eps or Fraction(0), dlt))


@dataclass(frozen=True)
class PlannedStatistic:
    """A statistic with its noise measurement (input: the engine's dict of exact arrays).
    Frozen: a plan's statistics are shared by the sessions that plan the same query
    (:meth:`dpkit.frame.Session.remember_plan`)."""

    stat: Statistic
    aggregation: int
    measurement: Measurement
    mechanism: str
    scale: Fraction
    sensitivity: Fraction
    accuracy: Callable[[float], float]
    delta: Fraction = Fraction(0)  # an (ε, δ) release converts its total ρ at this δ

    @property
    def loss(self) -> PrivacyLoss:
        return self.measurement.privacy_map(1)

    @property
    def unit(self) -> Fraction:
        """Value of one integer step of the statistic (2^k for grid sums, else 1)."""
        return Fraction(2) ** self.stat.n_bins if self.stat.kind is StatKind.SUM else Fraction(1)


def _take(key: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    return lambda raw: raw[key]


def _noise_statistic(stat: Statistic, agg_index: int, bounds: Contribution, target: Target
                     ) -> PlannedStatistic:
    gaussian = target.noise is Noise.GAUSSIAN
    metric = L2Distance() if gaussian else L1Distance()
    take = _take(stat.key)
    if stat.kind is StatKind.SUM:
        t = stability.make_bounded_sum(take, stat.lower, stat.upper, bounds, metric)
    elif stat.kind is StatKind.DISTINCT:
        t = stability.make_distinct_count(take, bounds, metric)
    else:
        t = stability.make_bounded_count(take, bounds.cells() if stat.kind is StatKind.BINS else
                                         bounds, metric)
    sens = t.map(1)
    # the one calibrated-noise entry; a statistic no record moves (Δ = 0, bounds (c, c)) is
    # calibrated at Δ = 2^-20 (its map is 0 at any scale; the noise is then almost surely 0)
    floor = max(sens, Fraction(1, 1 << 20))
    budget = ZCDP(target.rho) if gaussian else PureDP(target.epsilon)
    m = t >> frontend.calibrate(floor, budget)
    row = frontend.noise_row(floor, budget)
    acc = m.accuracy
    assert acc is not None and row.scale is not None
    return PlannedStatistic(stat, agg_index, m, row.name, row.scale, sens,
                            lambda beta: float(acc(beta)), target.delta)


def _tree_quantile_statistic(stat: Statistic, agg: Quantile, agg_index: int,
                             kind: NumericKind, bounds: Contribution, target: Target
                             ) -> PlannedStatistic:
    values = agg.candidate_values(kind)
    cells = 2 * len(values)  # fine bins: between candidates j−1 and j, then exactly c_j
    tree = make_tree_quantile(cells, agg.level(), target.pure_epsilon(), bounds.l1())
    take = _take(stat.key)
    m = Measurement(lambda raw: values[tree(take(raw)) // 2], L1Distance(), PureDP,
                    lambda d: tree.privacy_map(bounds.l1() * non_negative(d, "d_in")),
                    tree.name)
    acc = tree.accuracy
    assert acc is not None
    _, scale = tree_plan(cells, target.pure_epsilon(), bounds.l1())
    return PlannedStatistic(stat, agg_index, m, "tree quantile", scale, bounds.l1(),
                            lambda beta: float(acc(beta)), target.delta)


def _quantile_statistic(stat: Statistic, agg: Quantile, agg_index: int,
                        kind: NumericKind, bounds: Contribution, target: Target
                        ) -> PlannedStatistic:
    if agg.method == "tree":
        return _tree_quantile_statistic(stat, agg, agg_index, kind, bounds, target)
    eps = target.pure_epsilon()
    t = stability.make_rank_scores(_take(stat.key), bounds)
    sens = t.map(1)
    parallel = bounds.l1() / bounds.linf()  # Σ_g Δ_g ≤ ‖c‖₁ = (‖c‖₁/‖c‖∞)·Δ
    # the exponential mechanism at Δ·parallel, ε (one pick per group): s = 2Δ·parallel/ε
    # rounded up, map-checked by make_selection (D&R Thm 3.10)
    scale = frontend.selection_row(sens * parallel, eps).scale
    assert scale is not None
    values = agg.candidate_values(kind)

    def release(hist: np.ndarray) -> np.ndarray:
        return np.array([values[frontend.select(s, sens * parallel, eps).value]
                         for s in agg.scores(hist)])

    m = Measurement(lambda raw: release(t(raw)), t.input_metric, PureDP,
                    lambda d: PureDP(2 * t.map(d) * parallel / scale),
                    f"exponential(scale={float(scale):.6g})")
    n_cand = len(values)

    def rank_error(beta: float) -> float:
        return float(scale * (log_up(Fraction(n_cand)) + log_up(1 / fraction_down(beta))))

    return PlannedStatistic(stat, agg_index, m, "exponential", scale, sens, rank_error,
                            target.delta)


def plan_statistics(aggs: Sequence[Aggregation], schema: nw.Schema, bounds: Contribution,
                    target: Target, split: Sequence[Number] | None) -> list[PlannedStatistic]:
    """Build the calibrated noise measurement of every statistic of ``aggs``."""
    weights = _weights(len(aggs), split)
    planned = []
    for i, (agg, w) in enumerate(zip(aggs, weights, strict=True)):
        for stat in agg.statistics(schema, prefix=f"a{i}_"):
            share = target.share(w * stat.weight)
            if isinstance(agg, Quantile):
                kind: NumericKind = "int" if schema[agg.column].is_integer() else "float"
                planned.append(_quantile_statistic(stat, agg, i, kind, bounds, share))
            else:
                planned.append(_noise_statistic(stat, i, bounds, share))
    return planned


def _weights(n: int, split: Sequence[Number] | None) -> list[Fraction]:
    if split is None:
        return [Fraction(1, n)] * n
    if len(split) != n:
        raise DomainError(f"split has {len(split)} weights for {n} aggregations")
    ws = [fraction_down(w) for w in split]
    if any(w <= 0 for w in ws):
        raise DomainError("split weights must be positive")
    total = sum(ws, Fraction(0))
    return [w / total for w in ws]
