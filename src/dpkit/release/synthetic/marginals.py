"""Marginal workloads, noisy marginals, and their mutual consistency.

A k-way marginal on attributes C counts the records per combination of values of C. One
record adds 1 to exactly one cell of every marginal, so m marginals have L1 sensitivity m
(add/remove neighbours): discrete Laplace of scale m/ε on every cell is ε-DP (the budget
split evenly; :func:`measure_marginals`).

Consistency (post-processing): PriView's mutual consistency (Qardaji, Yang & Li, SIGMOD 2014,
§4.3, after Hay et al. 2010): for every attribute set A shared by several marginals —
intersections closed downwards, processed from the smallest — the marginals' projections
on A are replaced by their inverse-variance weighted mean, each marginal's cells moving by
the difference spread evenly over the cells that project onto each cell of A. A chain or
tree of marginals becomes exactly consistent in one pass; cycles converge over passes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.synthetic.domain import Domain, marginal_counts

__all__ = ["MarginalWorkload", "NoisyMarginal", "measure_marginals", "project",
           "make_consistent", "total_variation"]


@dataclass(frozen=True)
class MarginalWorkload:
    """Marginals ("cliques" of attributes) over a domain."""

    domain: Domain
    cliques: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if not self.cliques:
            raise DomainError("a marginal workload needs at least one clique")
        for c in self.cliques:
            self.domain.axes(c)  # unknown attributes raise
            if len(set(c)) != len(c):
                raise DomainError(f"clique {c} repeats an attribute")

    @classmethod
    def all_kway(cls, domain: Domain, k: int, attributes: Sequence[str] | None = None
                 ) -> MarginalWorkload:
        """Every k-way marginal over ``attributes`` (default: all)."""
        attrs = tuple(attributes or domain.attributes)
        if not 1 <= k <= len(attrs):
            raise DomainError(f"k must be in 1 … {len(attrs)}")
        return cls(domain, tuple(itertools.combinations(attrs, k)))

    def answer(self, codes: np.ndarray) -> list[np.ndarray]:
        return [marginal_counts(codes, self.domain, c) for c in self.cliques]


@dataclass(frozen=True)
class NoisyMarginal:
    """A measured marginal: ``values`` of shape sizes(clique), each cell with ``variance``."""

    clique: tuple[str, ...]
    values: np.ndarray
    variance: float


def measure_marginals(codes: np.ndarray, domain: Domain, cliques: Sequence[Sequence[str]],
                      epsilon: Number) -> list[NoisyMarginal]:
    """Every marginal with discrete Laplace noise of scale m/ε (m marginals): ε-DP, since a
    record changes one cell of each (L1 sensitivity m). One measurement of all cells."""
    eps = positive(epsilon, "epsilon", up=False)
    sets: list[tuple[str, ...]] = [tuple(c) for c in cliques]
    exact = [marginal_counts(codes, domain, c) for c in sets]
    noisy, row = frontend.noisy(np.concatenate([e.ravel() for e in exact]), len(sets), eps)
    scale = float(frontend.exact_scale(row))
    variance = 2 * scale * scale  # discrete Laplace's variance is below 2·scale²
    out, pos = [], 0
    for c, e in zip(sets, exact, strict=True):
        out.append(NoisyMarginal(c, noisy[pos: pos + e.size].reshape(e.shape).astype(
            np.float64), variance))
        pos += e.size
    return out


def project(m: NoisyMarginal, attrs: Sequence[str]) -> np.ndarray:
    """Sum a marginal down to ``attrs`` (a subset of its clique, in that order)."""
    keep = [m.clique.index(a) for a in attrs]
    drop = tuple(i for i in range(len(m.clique)) if i not in keep)
    summed = m.values.sum(axis=drop) if drop else m.values
    remaining = [i for i in range(len(m.clique)) if i in keep]
    return np.transpose(summed, [remaining.index(i) for i in keep]) if keep else summed


def _shared_sets(cliques: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Intersections of two or more cliques, closed under intersection, smallest first."""
    sets = {frozenset(a) & frozenset(b) for a, b in itertools.combinations(cliques, 2)}
    changed = True
    while changed:
        new = {a & b for a, b in itertools.combinations(sets, 2)} - sets
        changed = bool(new)
        sets |= new
    return [tuple(sorted(s)) for s in sorted(sets, key=lambda s: (len(s), sorted(s)))]


def make_consistent(marginals: Sequence[NoisyMarginal], domain: Domain, passes: int = 3
                    ) -> list[NoisyMarginal]:
    """PriView's mutual consistency (module docstring); post-processing."""
    ms = list(marginals)
    shared = _shared_sets([m.clique for m in ms])
    for _ in range(passes):
        for attrs in shared:
            holders = [i for i, m in enumerate(ms) if set(attrs) <= set(m.clique)]
            if len(holders) < 2:
                continue
            # projecting sums c_i cells per cell of A: variance c_i·σ_i², weight its inverse
            spread = {i: domain.size(ms[i].clique) // domain.size(attrs) for i in holders}
            weights = {i: 1.0 / (spread[i] * ms[i].variance) for i in holders}
            projections = {i: project(ms[i], attrs) for i in holders}
            mean = sum(weights[i] * projections[i] for i in holders) / sum(weights.values())
            for i in holders:
                shift = (mean - projections[i]) / spread[i]
                ms[i] = replace(ms[i], values=ms[i].values + _broadcast(
                    shift, attrs, ms[i].clique, domain))
    return ms


def _broadcast(shift: np.ndarray, attrs: Sequence[str], clique: tuple[str, ...],
               domain: Domain) -> np.ndarray:
    """``shift`` over ``attrs`` broadcast to the shape of ``clique``."""
    order = [a for a in clique if a in attrs]
    arr = np.transpose(shift, [list(attrs).index(a) for a in order]) if attrs else shift
    shape = [domain.shape([a])[0] if a in attrs else 1 for a in clique]
    return np.broadcast_to(np.reshape(arr, shape), domain.shape(clique))


def total_variation(true: np.ndarray, estimate: np.ndarray) -> float:
    """Total variation distance between two marginals as distributions (estimate clipped at 0
    and normalised; 1 when it has no mass)."""
    p = np.asarray(true, dtype=np.float64).ravel()
    q = np.maximum(np.asarray(estimate, dtype=np.float64).ravel(), 0)
    if p.sum() <= 0:
        raise DomainError("the true marginal is empty")
    if q.sum() <= 0:
        return 1.0
    return float(0.5 * np.abs(p / p.sum() - q / q.sum()).sum())
