"""Private partition selection: which group keys of a table may be released.

Input: for each candidate partition (group key present in the data), the number n of
privacy units with rows in it, where each unit is in at most G partitions (contribution
bounding). Output: the set of keys released. A neighbour changes ≤ G counts by 1 each and may
create or remove partitions whose count is 1.

Methods
-------
``"laplace"`` — keep p if n_p + Z_p ≥ T, Z_p discrete Laplace of scale G/ε (Korolova,
Kenthapadi, Mishra & Ntoulas 2009; Wilson et al. 2020, §3). Partitions in both neighbours
cost ε in total (L1 sensitivity G of the counts); each of the ≤ G partitions with count 1
that exists on one side only is released with probability P(Z ≥ T − 1), so
δ = G·e^{−(T−1)/b}/(1 + e^{−1/b}); T is the smallest integer meeting the target δ.

``"gaussian"`` — discrete Gaussian noise of σ² = G/(2ρ) (L2 sensitivity √G), ρ the largest
with the zCDP conversion meeting (ε, δ/2); T the smallest integer with
G·exp(−(T−1)²/(2σ²)) ≤ δ/2 (the discrete Gaussian's sub-Gaussian tail, Canonne, Kamath &
Steinke 2020).

``"truncated_geometric"`` — the optimal per-partition release probabilities of Desfontaines,
Voss, Gipson & Mandayam 2022 (*Differentially private partition selection*, PoPETs, Thm 1):
π(0) = 0, π(n) = min(e^ε·π(n−1) + δ, 1 − e^{−ε}·(1 − π(n−1) − δ), 1), applied with
ε/G and δ/G per partition (a unit touches ≤ G partitions; basic composition). Here e^ε is
replaced by a rational E ≤ e^ε and each π(n) is rounded down to a multiple of 2^-64 *before*
the next step, so the two inequalities the proof needs hold exactly for the values drawn:
π(n) ≤ E·π(n−1) + δ and 1 − π(n−1) ≤ E·(1 − π(n)) + δ (π is non-decreasing, so the
reversed pairs hold too). Bernoulli(π(n)) is drawn exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import rng, samplers
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ApproxDP, largest_rho
from dpkit.core.metrics import AddRemoveDistance
from dpkit.core.numbers import (
    Number,
    exp_down,
    exp_up,
    fraction_down,
    integer,
    non_negative,
    positive,
    sqrt_up,
)
from dpkit.errors import DomainError
from dpkit.mechanisms._common import representable_scale
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["PartitionSelection", "make_partition_selection", "truncated_geometric_probabilities"]

# distinct units per candidate partition: non-negative integers (0: never released)
UNIT_COUNTS = VectorDomain(AtomDomain(Kind.INTEGER, (0, None)))
SELECTION_DELTA = Fraction(1, 100)


def _audit() -> list[AuditCase]:
    """Truncated geometric, ε = 1, δ = 1/100, G = 1: whether a partition is released when one
    unit has rows in it (1) and when it is absent (0). Broken: as if every partition had two
    more units."""
    def sampler(shift: int) -> Sampler:
        m = make_partition_selection(PartitionSelection(1, SELECTION_DELTA), 1)

        def sample(units: Any, n: int) -> np.ndarray:
            if units == 0:
                return np.zeros(n, dtype=bool)
            return np.asarray(m(np.full(n, units + shift)))

        return sample

    return [AuditCase("partition_selection",
                      make_partition_selection(PartitionSelection(1, SELECTION_DELTA), 1),
                      sampler(0), sampler(2), 1, 0)]

METHODS = ("truncated_geometric", "laplace", "gaussian")
_PRECISION = 64  # π(n) is a multiple of 2^-64


@dataclass(frozen=True)
class PartitionSelection:
    """A private partition-selection step and its budget.

    Parameters
    ----------
    epsilon : number
        ε > 0 (nats) for the selection.
    delta : number
        δ ∈ (0, 1) for the selection: the probability budget of releasing a key that only
        one unit has.
    method : str
        ``"truncated_geometric"`` (default; optimal), ``"laplace"`` or ``"gaussian"``.
    """

    epsilon: Number
    delta: Number
    method: str = "truncated_geometric"

    label = "partition selection"

    def loss(self) -> ApproxDP:
        eps, dlt = _check(self.epsilon, self.delta, self.method)
        return ApproxDP(eps, dlt)

    def contribution_groups(self, max_groups: int) -> int:
        """How many released keys one unit can be in: all of its G."""
        return max_groups


def _check(epsilon: Number, delta: Number, method: str) -> tuple[Fraction, Fraction]:
    if method not in METHODS:
        raise DomainError(f"unknown partition-selection method {method!r}; use one of "
                          f"{', '.join(METHODS)}")
    eps = positive(epsilon, "epsilon", up=False)
    dlt = fraction_down(delta)
    if not 0 < dlt < 1:
        raise DomainError("partition selection needs delta in (0, 1)")
    return eps, dlt


def truncated_geometric_probabilities(epsilon: Fraction, delta: Fraction) -> list[Fraction]:
    """[π(0), π(1), …, π(N) = 1] for one partition (DVGM22 Thm 1, rounded as above)."""
    e_low = exp_down(epsilon)  # E ≤ e^ε: the constraints with E imply those with e^ε
    unit = Fraction(1, 1 << _PRECISION)
    probs = [Fraction(0)]
    while probs[-1] < 1:
        prev = probs[-1]
        nxt = min(e_low * prev + delta, 1 - (1 - prev - delta) / e_low, Fraction(1))
        rounded = math.floor(nxt / unit) * unit
        if rounded <= prev:  # cannot happen for δ ≥ 2^-60; guards an endless loop
            raise DomainError("delta is too small for the truncated-geometric selection")
        probs.append(rounded)
    return probs


def _laplace_threshold(scale: Fraction, delta: Fraction, groups: int) -> int:
    """Smallest T with G·P(Z ≥ T − 1) ≤ δ for discrete Laplace Z (P(Z ≥ k) =
    e^{−k/b}/(1 + e^{−1/b}), k ≥ 1), using certified exponential bounds."""
    norm = 1 + exp_down(-1 / scale)
    k = 1
    while groups * exp_up(Fraction(-k) / scale) / norm > delta:
        k = k * 2
    lo, hi = k // 2, k  # the condition fails at lo (or lo = 0) and holds at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if groups * exp_up(Fraction(-mid) / scale) / norm <= delta:
            hi = mid
        else:
            lo = mid
    return hi + 1


def _gaussian_parameters(epsilon: Fraction, delta: Fraction, groups: int
                         ) -> tuple[Fraction, int]:
    """(σ, T) for Gaussian thresholding (module docstring); σ is rounded up first and T is
    computed for that σ."""
    half = delta / 2
    rho = largest_rho(epsilon, half)
    sigma = representable_scale(sqrt_up(Fraction(groups) / (2 * rho)))
    var = sigma * sigma
    t = 1
    while groups * exp_up(-Fraction(t * t) / (2 * var)) > half:
        t += max(1, t // 8)
    return sigma, t + 1


@register(audit=_audit)
def make_partition_selection(selection: PartitionSelection, max_groups: int) -> Measurement:
    """The partition-selection measurement for units in at most ``max_groups`` partitions.

    Returns
    -------
    Measurement
        Input: an int array of shape (P,) — distinct units per candidate partition (all
        ≥ 1; the input domain admits 0, never released) — under
        :class:`AddRemoveDistance` in units. Output: a bool mask of shape (P,)
        of released partitions. Privacy map: d_in ≤ 1 ↦ ApproxDP(ε, δ) (module docstring);
        larger d_in is refused.

    Raises
    ------
    DomainError
        For ε ≤ 0, δ ∉ (0, 1), an unknown method or max_groups < 1.
    """
    eps, dlt = _check(selection.epsilon, selection.delta, selection.method)
    g = integer(max_groups, "max_groups", minimum=1)
    method = selection.method

    if method == "truncated_geometric":
        probs = truncated_geometric_probabilities(eps / g, dlt / g)
        numers = np.array([int(p * (1 << _PRECISION)) for p in probs], dtype=object)

        def select(counts: np.ndarray) -> np.ndarray:
            n = np.minimum(np.asarray(counts, dtype=np.int64), len(probs) - 1)
            out = n >= len(probs) - 1  # π = 1: always released
            todo = np.flatnonzero(~out & (n > 0))
            if todo.size:  # U < π(n)·2^64 with U a uniform 64-bit word
                words = rng.words(todo.size).astype(object)
                out[todo] = words < numers[n[todo]]
            return out
    elif method == "laplace":
        scale = representable_scale(Fraction(g) / eps)
        threshold = _laplace_threshold(scale, dlt, g)

        def select(counts: np.ndarray) -> np.ndarray:
            c = np.asarray(counts, dtype=np.int64)
            return c + samplers.discrete_laplace(scale, c.size) >= threshold
    else:
        sigma, threshold = _gaussian_parameters(eps, dlt, g)

        def select(counts: np.ndarray) -> np.ndarray:
            c = np.asarray(counts, dtype=np.int64)
            return c + samplers.discrete_gaussian(sigma, c.size) >= threshold

    return unit_selection(select, ApproxDP(eps, dlt), "partition selection",
                          f"partition_selection({method}, ε={float(eps):g}, δ={float(dlt):g}, "
                          f"G={g})")


def unit_selection(select: Callable[..., object], loss: ApproxDP, what: str,
                   name: str) -> Measurement:
    """A selection over distinct-unit counts per candidate partition (:data:`UNIT_COUNTS`
    under :class:`AddRemoveDistance`): d_in ≤ 1 ↦ ``loss``; larger d_in is refused."""
    def privacy_map(d_in: Any) -> ApproxDP:
        if non_negative(d_in, "d_in") > 1:
            raise DomainError(f"{what}'s guarantee is stated for one unit")
        return loss

    return Measurement(select, AddRemoveDistance(), ApproxDP, privacy_map, name,
                       input_domain=UNIT_COUNTS)
