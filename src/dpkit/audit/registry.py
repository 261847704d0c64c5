"""The audit battery: every registered mechanism with a neighbouring pair, its claim, and a
deliberately broken variant (half the noise) that the audit must flag."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.component import Measurement
from dpkit.core.lattice import lattice_laplace
from dpkit.core.measures import ZCDP, ApproxDP, PureDP
from dpkit.mechanisms import (
    make_approx_gaussian,
    make_binary_randomized_response,
    make_discrete_gaussian,
    make_discrete_laplace,
    make_exponential,
    make_gaussian,
    make_laplace,
    make_permute_and_flip,
    make_randomized_response,
    make_report_noisy_max,
    make_smooth_median,
    make_staircase,
    make_vector_laplace,
)
from dpkit.mechanisms.exponential import sample_exponential
from dpkit.mechanisms.partition_selection import PartitionSelection, make_partition_selection
from dpkit.mechanisms.selection import sample_permute_and_flip, sample_report_noisy_max
from dpkit.mechanisms.smooth_sensitivity import sample_smooth_median
from dpkit.mechanisms.tree_quantile import make_tree_quantile

__all__ = ["AuditCase", "CASES", "claimed_epsilon_delta"]

Sampler = Callable[[Any, int], np.ndarray]
GAUSSIAN_DELTA = Fraction(1, 10**3)  # the δ at which zCDP claims are audited
SMOOTH_DELTA = Fraction(1, 10**6)
SELECTION_DELTA = Fraction(1, 100)
TREE_X = np.array([0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0])
TREE_X_PRIME = np.array([0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0])


@dataclass(frozen=True)
class AuditCase:
    """A mechanism under audit: ``sample(data, n)`` draws n outputs; ``broken`` is the same
    mechanism with half the noise; ``x``/``x_prime`` are neighbours at distance ``d_in``."""

    name: str
    measurement: Measurement
    sample: Sampler
    broken: Sampler
    x: Any
    x_prime: Any
    d_in: Any = 1


def claimed_epsilon_delta(case: AuditCase) -> tuple[float, float]:
    """The case's claim as (ε, δ): pure ε as is; zCDP converted at δ = 1e-3."""
    loss = case.measurement.privacy_map(case.d_in)
    if isinstance(loss, PureDP):
        return float(loss.epsilon), 0.0
    if isinstance(loss, ZCDP):
        approx = loss.to_approx(GAUSSIAN_DELTA)
        return float(approx.epsilon), float(approx.delta)
    assert isinstance(loss, ApproxDP)
    return float(loss.epsilon), float(loss.delta)


def _vector(make: Callable[..., Measurement], scale: Any, **kw: Any) -> Sampler:
    def sample(data: Any, n: int) -> np.ndarray:
        return np.asarray(make(scale, **kw)(np.full(n, data)))
    return sample


def _cases() -> list[AuditCase]:
    n_max = 1 << 20
    # the exponential mechanism's worst case: one score up by Δ, all others down by Δ
    scores_x = np.zeros(50, dtype=np.int64)
    scores_y = np.concatenate([[1], -np.ones(49, dtype=np.int64)])
    return [
        AuditCase("discrete_laplace", make_discrete_laplace(2),
                  _vector(make_discrete_laplace, 2), _vector(make_discrete_laplace, 1), 0, 1),
        AuditCase("laplace", make_laplace(2.0, max_size=1),
                  _vector(make_laplace, 2.0, max_size=n_max),
                  _vector(make_laplace, 1.0, max_size=n_max), 0.0, 1.0),
        AuditCase("discrete_gaussian", make_discrete_gaussian(2),
                  _vector(make_discrete_gaussian, 2), _vector(make_discrete_gaussian, 1), 0, 1),
        AuditCase("gaussian", make_gaussian(2.0, max_size=1),
                  _vector(make_gaussian, 2.0, max_size=n_max),
                  _vector(make_gaussian, 1.0, max_size=n_max), 0.0, 1.0),
        AuditCase("analytic_gaussian", make_approx_gaussian(2.0, GAUSSIAN_DELTA, max_size=1),
                  _vector(make_approx_gaussian, 2.0, delta=GAUSSIAN_DELTA, max_size=n_max),
                  _vector(make_approx_gaussian, 1.0, delta=GAUSSIAN_DELTA, max_size=n_max),
                  0.0, 1.0),
        AuditCase("staircase", make_staircase(1, 1),
                  lambda v, n: make_staircase(1, 1)(np.full(n, v)),
                  lambda v, n: make_staircase(4, 1)(np.full(n, v)), 0.0, 1.0),
        AuditCase("exponential", make_exponential(1),
                  lambda s, n: sample_exponential(s, Fraction(1), size=n),
                  lambda s, n: sample_exponential(s, Fraction(1, 2), size=n),
                  scores_x, scores_y),
        AuditCase("permute_and_flip", make_permute_and_flip(1),
                  lambda s, n: sample_permute_and_flip(s, Fraction(1), size=n),
                  lambda s, n: sample_permute_and_flip(s, Fraction(1, 2), size=n),
                  scores_x, scores_y),
        AuditCase("report_noisy_max", make_report_noisy_max(1),
                  lambda s, n: sample_report_noisy_max(s, Fraction(1), size=n),
                  lambda s, n: sample_report_noisy_max(s, Fraction(1, 4), size=n),
                  scores_x, scores_y),
        AuditCase("sparse_vector", _sparse_vector_measurement(),
                  _sparse_vector(Fraction(1)), _sparse_vector(Fraction(100)), 0.0, 1.0),
        AuditCase("randomized_response", make_randomized_response(["a", "b", "c"], 1),
                  _rr(1), _rr(2), "a", "b"),
        AuditCase("smooth_median", make_smooth_median((0, 1), 1, SMOOTH_DELTA),
                  _smooth_median(1), _smooth_median(4), (0.0, 0.0, 1.0), (0.0, 1.0, 1.0)),
        AuditCase("vector_laplace", make_vector_laplace(2.0, 2, k=-10),
                  _vector_laplace(Fraction(2)), _vector_laplace(Fraction(1)),
                  np.zeros(2), np.array([1.0, 0.0])),
        AuditCase("partition_selection",
                  make_partition_selection(PartitionSelection(1, SELECTION_DELTA), 1),
                  _selection(0), _selection(2), 1, 0),
        AuditCase("tree_quantile", make_tree_quantile(16, Fraction(1, 2), 1, 1, branching=4),
                  _tree_quantile(1), _tree_quantile(4), TREE_X, TREE_X_PRIME),
        AuditCase("binary_randomized_response", make_binary_randomized_response(1),
                  _binary_rr(1), _binary_rr(2), True, False),
    ]


def _sparse_vector(noise_epsilon: Fraction) -> Sampler:
    """AboveThreshold's first answer at ε = 4·noise_epsilon (the broken variant: 100×)."""
    from dpkit.mechanisms.sparse_vector import SparseVector

    def sample(answer: Any, n: int) -> np.ndarray:
        return SparseVector(0, noise_epsilon * 4).sample_first_answers(answer, n)

    return sample


def _sparse_vector_measurement() -> Measurement:
    from dpkit.core.metrics import LInfDistance
    from dpkit.mechanisms.sparse_vector import SparseVector

    # claims ε = 4 for Δ = 1 (the broken sampler draws noise for ε = 400)
    return Measurement(lambda a: SparseVector(0, 4).sample_first_answers(a, 1),
                       LInfDistance(), PureDP, lambda d: PureDP(4 * Fraction(d)),
                       "sparse_vector")


def _smooth_median(epsilon: int) -> Sampler:
    """Releases at ε = ``epsilon`` (the broken variant: 4×, a quarter of the noise)."""
    return lambda x, n: sample_smooth_median(np.asarray(x), (0, 1), epsilon, SMOOTH_DELTA, n)


def _vector_laplace(scale: Fraction) -> Sampler:
    """The vector mechanism on the 2^-10 grid in d = 2, audited through its first
    coordinate (a projection is post-processing); the broken variant has half the scale."""
    steps = scale * 1024

    def sample(x: Any, n: int) -> np.ndarray:
        proposal = steps * Fraction(141422, 100000)  # ≥ √2·steps
        noise = lattice_laplace(steps, proposal, 2, n)[:, 0]
        return (np.round(np.asarray(x)[0] * 1024) + noise) / 1024

    return sample


def _selection(shift: int) -> Sampler:
    """Whether a partition with ``units`` units is released (absent when 0); the broken
    variant acts as if every partition had ``shift`` more units."""
    m = make_partition_selection(PartitionSelection(1, SELECTION_DELTA), 1)

    def sample(units: Any, n: int) -> np.ndarray:
        if units == 0:
            return np.zeros(n, dtype=bool)
        return np.asarray(m(np.full(n, units + shift)))

    return sample


def _tree_quantile(epsilon: int) -> Sampler:
    """Leaf indices of the tree median (the broken variant: 4× the ε, a quarter of the
    noise, while the claim stays ε = 1)."""
    m = make_tree_quantile(16, Fraction(1, 2), epsilon, 1, branching=4)
    return lambda hist, n: np.asarray(m(np.tile(np.asarray(hist), (n, 1))))


def _rr(epsilon: int) -> Sampler:
    m = make_randomized_response(["a", "b", "c"], epsilon)
    return lambda value, n: np.asarray(m(np.array([value] * n, dtype=object)))


def _binary_rr(epsilon: int) -> Sampler:
    m = make_binary_randomized_response(epsilon)
    return lambda value, n: np.asarray(m(np.full(n, value)))


CASES: dict[str, AuditCase] = {case.name: case for case in _cases()}
