"""Data-cube budget allocation: which cuboids to measure and how to split ε among them, so
that every requested marginal is answered with the least noise (Ding, Winslett, Han & Li,
*Differentially private data cubes: optimizing noise sources and consistency*, SIGMOD 2011,
§4 noise control — cuboid selection and budget allocation — and §5 consistency).

Noise model. A measured cuboid j (an attribute set, |j| cells) gets discrete Laplace noise of
scale 1/εⱼ on each cell (one record changes one cell by 1: L1 sensitivity 1); Σⱼ εⱼ = ε, so
the release is ε-DP by sequential composition (Dwork & Roth Thm 3.6 and 3.16; discrete
Laplace, Canonne, Kamath & Steinke 2020). A requested marginal C read from a measured j ⊇ C
sums sⱼ(C) = |j|/|C| cells, so each of its cells has variance below 2·sⱼ(C)/εⱼ².

Allocation (the paper's closed forms, by Lagrange multipliers on Σⱼ εⱼ = ε). With each C
assigned to one measured j, let Sⱼ = max sⱼ(C) and Aⱼ = Σ sⱼ(C) over j's marginals:

- ``objective="max"`` (the paper's; the default, chosen from the paper, not from data):
  the largest cell variance max_C 2·sⱼ(C)/εⱼ² is least at εⱼ ∝ √Sⱼ, where it is
  2(Σⱼ √Sⱼ)²/ε²;
- ``objective="total"``: the sum over requested marginals of their cell variance,
  Σⱼ 2Aⱼ/εⱼ², is least at εⱼ ∝ Aⱼ^{1/3}, where it is 2(Σⱼ Aⱼ^{1/3})³/ε².

Selection (greedy, after the paper's greedy selection). Start from the requested marginals
themselves (each measured, each its own source: with equal Sⱼ this is the uniform split);
then repeatedly merge the pair of measured cuboids whose union — absorbing every measured
cuboid it contains, its marginals read from it — lowers the objective most, while the
measured cells stay within ``max_cells``; stop when no merge helps. Merging pays when a
union is small: three 2-way marginals over binary-ish attributes read from their 3-way
cuboid share one budget instead of three. The plan reads the domain's sizes only.

Consistency (§5, post-processing): the measured cuboids are made mutually consistent
(PriView's weighted means, :func:`~dpkit.release.synthetic.marginals.make_consistent`, or
the Fourier least squares) and every requested marginal is the projection of its source,
so marginals read from the same cuboid agree exactly.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import AddRemoveDistance
from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.registry import AuditCase, Sampler, register
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.fourier import fourier_consistent
from dpkit.release.synthetic.marginals import NoisyMarginal, make_consistent, project

__all__ = ["DatacubePlan", "plan_datacube", "measure_datacube", "OBJECTIVES"]

OBJECTIVES = ("max", "total")
MAX_MERGES = 256  # the greedy's steps: bounded by a declared constant, not by the data


@dataclass(frozen=True)
class DatacubePlan:
    """Which cuboids to measure, at which ε, and where each requested marginal is read.

    Attributes
    ----------
    measured : tuple of tuple of str
        The measured cuboids (attributes in the domain's order).
    epsilons : tuple of Fraction
        εⱼ per measured cuboid, exact, summing to ε.
    source : tuple of int
        For each requested marginal (in the order asked), the index of its measured cuboid.
    objective : str
        "max" or "total" (module docstring).
    variance : float
        The objective's value before consistency: the largest cell variance ("max") or the
        sum over requested marginals of their cell variance ("total"), in records².
    """

    measured: tuple[tuple[str, ...], ...]
    epsilons: tuple[Fraction, ...]
    source: tuple[int, ...]
    objective: str
    variance: float


def _ordered(domain: Domain, attrs: frozenset[str]) -> tuple[str, ...]:
    return tuple(a for a in domain.attributes if a in attrs)


def _weights(domain: Domain, requested: list[frozenset[str]], measured: list[frozenset[str]],
             source: list[int], objective: str) -> list[float]:
    """Sⱼ ("max") or Aⱼ ("total") per measured cuboid."""
    spread = [domain.size(_ordered(domain, measured[j])) / domain.size(_ordered(domain, c))
              for c, j in zip(requested, source, strict=True)]
    out = [0.0] * len(measured)
    for s, j in zip(spread, source, strict=True):
        out[j] = max(out[j], s) if objective == "max" else out[j] + s
    return out


def _value(weights: list[float], objective: str) -> float:
    """The objective at the optimal split, times ε²/2 (module docstring's closed forms)."""
    if objective == "max":
        return sum(math.sqrt(w) for w in weights) ** 2
    return sum(w ** (1 / 3) for w in weights) ** 3


def _merged(measured: list[frozenset[str]], source: list[int], a: int, b: int
            ) -> tuple[list[frozenset[str]], list[int]]:
    """Measure a ∪ b instead of a, b and every measured cuboid it contains."""
    union = measured[a] | measured[b]
    keep = [j for j, m in enumerate(measured) if not m <= union]
    index = {j: i for i, j in enumerate(keep)}
    new = [measured[j] for j in keep] + [union]
    return new, [index.get(j, len(keep)) for j in source]


def plan_datacube(domain: Domain, cliques: Sequence[Sequence[str]], epsilon: Number, *,
                  objective: str = "max", max_cells: int = 1 << 22) -> DatacubePlan:
    """The greedy selection and optimal budget split of the module docstring (data-free).

    Parameters
    ----------
    domain : Domain
        The declared attribute sizes.
    cliques : sequence of sequences of str
        The requested marginals (distinct attributes each; at least one).
    epsilon : number
        ε > 0 (nats), split exactly among the measured cuboids.
    objective : {"max", "total"}
        Minimise the largest cell variance (the paper's) or the summed one.
    max_cells : int
        Largest total number of measured cells (a merge that exceeds it is not taken).

    Returns
    -------
    DatacubePlan

    Raises
    ------
    DomainError
        An unknown objective, attribute or repeated attribute, no clique, ε ≤ 0, or the
        requested marginals alone exceed ``max_cells``.
    """
    if objective not in OBJECTIVES:
        raise DomainError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
    eps = positive(epsilon, "epsilon", up=False)
    requested = [frozenset(c) for c in cliques]
    if not requested:
        raise DomainError("a data cube needs at least one requested marginal")
    for c, raw in zip(requested, cliques, strict=True):
        domain.axes(list(raw))  # unknown attributes raise
        if len(c) != len(raw):
            raise DomainError(f"marginal {tuple(raw)} repeats an attribute")
    measured = list(dict.fromkeys(requested))
    source = [measured.index(c) for c in requested]

    def cells(ms: list[frozenset[str]]) -> int:
        return sum(domain.size(_ordered(domain, m)) for m in ms)

    if cells(measured) > max_cells:
        raise DomainError(f"{cells(measured)} cells exceed max_cells = {max_cells}")
    best = _value(_weights(domain, requested, measured, source, objective), objective)
    for _ in range(MAX_MERGES):
        step = None
        for a, b in itertools.combinations(range(len(measured)), 2):
            ms, src = _merged(measured, source, a, b)
            if cells(ms) > max_cells:
                continue
            value = _value(_weights(domain, requested, ms, src, objective), objective)
            if value < best * (1 - 1e-12):
                best, step = value, (ms, src)
        if step is None:
            break
        measured, source = step
    weights = _weights(domain, requested, measured, source, objective)
    return DatacubePlan(tuple(_ordered(domain, m) for m in measured),
                        _split(eps, weights, objective), tuple(source), objective,
                        2 * best / float(eps) ** 2)


def _split(eps: Fraction, weights: list[float], objective: str) -> tuple[Fraction, ...]:
    """εⱼ ∝ √Sⱼ or Aⱼ^{1/3}, exact and summing to ε (the shares rounded to 1e-9 first)."""
    power = 0.5 if objective == "max" else 1 / 3
    shares = [Fraction(max(w ** power, 1e-9)).limit_denominator(10**9) for w in weights]
    total = sum(shares, Fraction(0))
    return tuple(eps * s / total for s in shares)


AUDIT_DOMAIN = Domain(("a", "b", "c"), (2, 2, 2))
AUDIT_CLIQUES = (("a", "b"), ("a", "c"), ("b", "c"))


def _audit() -> list[AuditCase]:
    """Three binary attributes, the three 2-way marginals at ε = 1: the plan measures the
    cuboid (a, b, c) alone at ε; the audited output is the released (a, b)[0, 0] (the sum
    of two noisy cuboid cells, post-processing); x′ adds the record (0, 0, 0). Broken: the
    cuboid drawn at 4ε (the split ignored) for the same claim."""
    plan = plan_datacube(AUDIT_DOMAIN, AUDIT_CLIQUES, 1)
    assert plan.measured == (("a", "b", "c"),)  # the merge the module docstring describes
    x = np.array([[0, 1, 1], [1, 0, 0], [0, 0, 1]])
    x_prime = np.vstack([x, [[0, 0, 0]]])

    def sampler(boost: int) -> Sampler:
        def sample(data: object, n: int) -> np.ndarray:
            cube = marginal_counts(np.asarray(data), AUDIT_DOMAIN, plan.measured[0])
            cells = np.repeat(cube[0, 0].reshape(1, 2), n, axis=0)  # (a, b) = (0, 0)
            noisy = frontend.noisy(cells.ravel(), 1, PureDP(plan.epsilons[0] * boost)).value
            return np.asarray(noisy).reshape(n, 2).sum(axis=1)
        return sample

    claim = Measurement(lambda d: sampler(1)(d, 1), AddRemoveDistance(), PureDP,
                        lambda d: PureDP(sum(plan.epsilons, Fraction(0)) * Fraction(d)),
                        "datacube", input_domain=VectorDomain(VectorDomain(
                            AtomDomain(Kind.INTEGER), size=3)))
    return [AuditCase("datacube", claim, sampler(1), sampler(4), x, x_prime)]


@register(audit=_audit)
def measure_datacube(codes: np.ndarray, domain: Domain, plan: DatacubePlan,
                     cliques: Sequence[Sequence[str]], *, consistent: bool | str = True
                     ) -> list[NoisyMarginal]:
    """The requested marginals, read from the plan's noisy cuboids (module docstring).

    Parameters
    ----------
    codes : int array of shape (n, number of attributes)
        The records' codes (one row per individual: the caller bounds contributions).
    domain : Domain
    plan : DatacubePlan
        From :func:`plan_datacube` with the same ``cliques`` (data-free, made before the
        debit).
    cliques : sequence of sequences of str
        The requested marginals, in the plan's order.
    consistent : bool or {"priview", "fourier"}
        How the measured cuboids are made mutually consistent (post-processing).

    Returns
    -------
    list of NoisyMarginal
        One per requested marginal, its ``variance`` the bound sⱼ(C)·2/εⱼ² of its source
        before consistency.

    Notes
    -----
    Privacy: ε = Σⱼ εⱼ-DP under add/remove-one neighbours (each cuboid: discrete Laplace of
    scale 1/εⱼ at L1 sensitivity 1, drawn through :func:`dpkit.mechanisms.frontend.noisy`;
    sequential composition, Dwork & Roth Thm 3.16). Ding et al. 2011 §4.
    """
    measured: list[NoisyMarginal] = []
    for attrs, eps in zip(plan.measured, plan.epsilons, strict=True):
        exact = marginal_counts(codes, domain, attrs)
        noisy, row = frontend.noisy(exact.ravel(), 1, PureDP(eps),
                                    statistic="cuboid " + ",".join(attrs))
        scale = float(frontend.exact_scale(row))
        measured.append(NoisyMarginal(attrs, np.asarray(noisy, dtype=np.float64).reshape(
            exact.shape), 2 * scale * scale))
    if consistent == "fourier":
        measured = fourier_consistent(measured, domain)
    elif consistent:
        measured = make_consistent(measured, domain)
    out = []
    for raw, j in zip(cliques, plan.source, strict=True):
        src = measured[j]
        spread = domain.size(src.clique) // domain.size(tuple(raw))
        out.append(NoisyMarginal(tuple(raw), np.asarray(project(src, list(raw))),
                                 spread * src.variance))
    return out
