"""The K-norm mechanism (Hardt & Talwar, *On the geometry of differential privacy*, STOC 2010;
arXiv:0907.3754), exact on a lattice, for d ≤ 4 linear queries over a histogram.

Setting. A workload of d linear queries is a d × n matrix A of rationals; a histogram is
x ∈ ℤⁿ, and neighbours differ in one entry by one (x′ = x ± eⱼ), so Ax moves by a column
±aⱼ. The sensitivity polytope is K = A·B₁ⁿ = conv(±a₁, …, ±aₙ) and its gauge
‖v‖_K = min{t ≥ 0 : v ∈ tK} is a norm when A has rank d. Hardt & Talwar add noise of density
∝ exp(−ε‖z‖_K) on ℝᵈ.

The law implemented (the discrete analogue). Let h > 0 be a rational step with every entry of
A in hℤ (default: h = 1/q, q the least common denominator of A's entries; ``step=`` may make
it finer), so C = A/h is an integer matrix and Ax ∈ hℤᵈ for every x ∈ ℤⁿ: the answer is on
the lattice already, nothing is rounded. The release is y = Ax + h·u with u ∈ ℤᵈ drawn with

    P(u) = exp(−ε‖u‖_{K_h}) / Z,   K_h = K/h = conv(±c₁, …, ±cₙ),   Z = Σ_{v ∈ ℤᵈ} exp(−ε‖v‖_{K_h}),

i.e. P(y) ∝ exp(−ε‖y − Ax‖_K) on Ax + hℤᵈ = hℤᵈ (‖h·u‖_K = ‖u‖_{K_h}).

Privacy (proof). For x, x′ at L1 distance Δ, Ax − Ax′ = h·C(x − x′) ∈ hℤᵈ, so both output
laws live on the same set hℤᵈ with the same Z (Z is invariant under the lattice shift), and
for every y, with u = (y − Ax)/h and u′ = (y − Ax′)/h = u + C(x − x′):
P(y | x)/P(y | x′) = exp(ε(‖u′‖_{K_h} − ‖u‖_{K_h})) ≤ exp(ε‖C(x − x′)‖_{K_h})
≤ exp(ε Σⱼ |xⱼ − x′ⱼ|·‖cⱼ‖_{K_h}) ≤ exp(εΔ), since every ±cⱼ lies in K_h. The map is
Δ ↦ PureDP(ε·Δ): Hardt & Talwar's argument, verbatim on the lattice (a shift by a lattice
vector is a bijection of the lattice, as a translation is of ℝᵈ).

The norm, exactly. K_h is symmetric and full-dimensional, so K_h = {v : ⟨f, v⟩ ≤ 1 for
every facet normal f} and ‖v‖_{K_h} = max_f ⟨f, v⟩. The facets are enumerated at plan time:
every facet contains d linearly independent vertices, no two opposite, so for each set S of
d distinct columns (up to sign) with det(C_S) ≠ 0 and each sign vector σ (σ₁ = +1), the
hyperplane ⟨f, v⟩ = 1 through σᵢcᵢ (f = C_S⁻¹σ, by the integer adjugate) is a facet iff
|⟨f, cⱼ⟩| ≤ 1 for every column j; f and −f are kept. Cost: C(n′, d)·2^{d−1} candidates (n′
the distinct columns), each an integer adjugate and n′ integer dot products — refused above
2^16 candidates; a norm then costs F·d integer operations (F facets). (Independently,
‖v‖_{K_h} = min over bases S of ‖C_S⁻¹v‖₁, the basic solutions of the LP
min{‖λ‖₁ : Cλ = v}; the tests check the two agree.)

Exact sampling by rejection. The bounding box of K_h is ∏ᵢ[−βᵢ, βᵢ], βᵢ = maxⱼ |Cᵢⱼ|, so
‖u‖_{K_h} ≥ maxᵢ |uᵢ|/βᵢ ≥ Σᵢ |uᵢ|/(d·βᵢ). Proposals have independent discrete Laplace
coordinates of scale tᵢ ≥ d·βᵢ/ε (rounded up to what the exact sampler takes), q(u) ∝
exp(−Σᵢ|uᵢ|/tᵢ) ≥ exp(−ε‖u‖_{K_h}); a proposal is accepted with probability exp(−γ),
γ = ε‖u‖_{K_h} − Σᵢ|uᵢ|/tᵢ ≥ 0, a rational: an exact Bernoulli(exp(−γ)) of
:func:`dpkit.core.samplers.bernoulli_exp` (Canonne, Kamath & Steinke 2020, Alg. 1). The accepted
u has law exactly P. The expected number of proposals per draw is M = Z_q/Z, bounded at plan
time by Z_q/max(1, Σ_W, e^{−ερ}·2^d·|det C_B|/ε^d) with Z_q = ∏ᵢ coth(1/(2tᵢ)), Σ_W the
target's weights summed over a window of the lattice (≤ 2^14 points), ρ = ½·max_f ‖f‖₁ and
C_B the basis of largest |det| (each lattice cell's weight is ≥ e^{−ερ} times the continuous
weight over the cell, and K_h contains the cross-polytope of C_B, of volume 2^d|det C_B|/d!):
refused above 2^17 (``lattice.MAX_EXPECTED_PROPOSALS``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import samplers
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.lattice import MAX_EXPECTED_PROPOSALS
from dpkit.core.measures import PureDP
from dpkit.core.metrics import L1Distance
from dpkit.core.numbers import Number, as_typed, non_negative, positive
from dpkit.errors import DomainError
from dpkit.mechanisms._common import as_vector, representable_scale
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["make_knorm", "KNormPlan", "knorm_plan", "declared_workload", "Workload",
           "MAX_QUERIES", "MAX_ENTRY", "MAX_CANDIDATES"]

MAX_QUERIES = 4  # d: facet enumeration and the box proposal are exponential in d
MAX_ENTRY = 1 << 12  # |A/h| entries: keeps every adjugate dot product inside int64
MAX_CANDIDATES = 1 << 16  # C(n′, d)·2^(d−1) facet candidates enumerated at plan time
_WINDOW = 1 << 14  # lattice points summed for the lower bound on Z
_BATCH = 1 << 16  # proposals per vectorised pass
_INT64_SAFE = 1 << 62

Workload = tuple[tuple[Fraction, ...], ...]


def declared_workload(workload: Sequence[Sequence[Number]]) -> Workload:
    """A as an exact d × n matrix of Fractions (plan-time check; entries read as typed:
    ``0.1`` is 1/10).

    Raises
    ------
    DomainError
        Not a d × n matrix with 1 ≤ d ≤ 4 and n ≥ 1, or an entry that is not a finite
        rational number (bools refused).
    """
    try:
        rows = [list(r) for r in workload]
    except TypeError:
        raise DomainError("workload must be a d × n matrix (a sequence of d rows)") from None
    if not 1 <= len(rows) <= MAX_QUERIES:
        raise DomainError(f"the K-norm mechanism takes 1 to {MAX_QUERIES} queries (rows); "
                          f"got {len(rows)}: split the workload, or use the Laplace "
                          "mechanism with L1 sensitivity max_j ‖a_j‖₁ for more queries")
    n = len(rows[0])
    if n < 1 or any(len(r) != n for r in rows):
        raise DomainError("workload rows must all have the same number n ≥ 1 of entries")
    return tuple(tuple(_entry(v) for v in r) for r in rows)


def _entry(v: object) -> Fraction:
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | float | str | Fraction
                                                        | np.number):
        raise DomainError(f"workload entries must be rational numbers; got {v!r}")
    try:
        return Fraction(v) if isinstance(v, str) else as_typed(v)
    except (ValueError, ZeroDivisionError, OverflowError, DomainError):
        raise DomainError(f"workload entry {v!r} is not a finite number") from None


@dataclass(frozen=True)
class KNormPlan:
    """The public, data-free parameters of one K-norm mechanism (all exact).

    Attributes
    ----------
    step : Fraction
        h: the lattice hℤᵈ of the answers and the noise.
    matrix : tuple of tuple of int
        C = A/h, d × n integers.
    facets : tuple of tuple of int
        Integer facet normals gₖ of K_h over ``denominator``: ‖u‖_{K_h} = maxₖ⟨gₖ, u⟩/D.
    denominator : int
        D > 0.
    box : tuple of int
        βᵢ = maxⱼ |Cᵢⱼ|, the half-widths of K_h's bounding box.
    epsilon : Fraction
        ε per unit of L1 distance between histograms.
    proposal : tuple of Fraction
        tᵢ ≥ d·βᵢ/ε, the discrete Laplace proposal scales (lattice units).
    expected_proposals : float
        An upper bound on the expected proposals per draw (module docstring).
    """

    step: Fraction
    matrix: tuple[tuple[int, ...], ...]
    facets: tuple[tuple[int, ...], ...]
    denominator: int
    box: tuple[int, ...]
    epsilon: Fraction
    proposal: tuple[Fraction, ...]
    expected_proposals: float

    @property
    def dim(self) -> int:
        """d, the number of queries."""
        return len(self.box)

    def norm(self, u: Sequence[int]) -> Fraction:
        """‖u‖_{K_h} for one lattice point, exactly."""
        best = max(sum(g * int(v) for g, v in zip(f, u, strict=True)) for f in self.facets)
        return Fraction(best, self.denominator)

    def norm_numerators(self, u: np.ndarray) -> np.ndarray:
        """D·‖u‖_{K_h} for each row of u (shape (N, d)), exactly (int64 or Python ints)."""
        g = np.array(self.facets, dtype=object).T  # (d, F)
        big = max(abs(v) for f in self.facets for v in f) * self.dim
        if u.size and big * int(np.abs(u).max()) < _INT64_SAFE:
            return (u.astype(np.int64) @ g.astype(np.int64)).max(axis=1)
        return np.dot(u.astype(object), g).max(axis=1)

    def sample(self, size: int, *, accept: bool = True) -> np.ndarray:
        """``size`` independent u ∈ ℤᵈ with P(u) ∝ exp(−ε‖u‖_{K_h}), shape (size, d), exactly
        (``accept=False``: the proposal alone, for the tests' broken variant)."""
        out = np.empty((size, self.dim), dtype=np.int64)
        filled = 0
        while filled < size:
            rows = min(int((size - filled) * min(self.expected_proposals, 64) * 1.2) + 8,
                       _BATCH)
            u = np.stack([samplers.discrete_laplace(t, rows) for t in self.proposal], axis=1)
            if accept:
                u = u[self._accepted(u)]
            take = min(u.shape[0], size - filled)
            out[filled:filled + take] = u[:take]
            filled += take
        return out

    def _accepted(self, u: np.ndarray) -> np.ndarray:
        """Bernoulli(exp(−γ)) per row, γ = ε‖u‖ − Σᵢ|uᵢ|/tᵢ ≥ 0 over one common
        denominator L (exact integers)."""
        eps, d = self.epsilon, self.denominator
        common = math.lcm(eps.denominator * d, *(t.numerator for t in self.proposal))
        per_norm = eps.numerator * (common // (eps.denominator * d))
        per_coord = [t.denominator * (common // t.numerator) for t in self.proposal]
        norms = self.norm_numerators(u)
        small = norms.size and (int(norms.max()) * per_norm < _INT64_SAFE
                                and common < _INT64_SAFE)
        kind = np.int64 if small else object  # int64 when γ·L fits (γ ≥ 0: no cancellation)
        numer = norms.astype(kind) * per_norm
        for i, w in enumerate(per_coord):
            numer = numer - np.abs(u[:, i]).astype(kind) * w
        return samplers.bernoulli_exp(numer, common)


def knorm_plan(workload: Sequence[Sequence[Number]], epsilon: Number, *,
               step: Number | None = None) -> KNormPlan:
    """The lattice, facets, proposal and cost bound of :func:`make_knorm` (module
    docstring), all checked at plan time.

    Raises
    ------
    DomainError
        As :func:`declared_workload`; ε ≤ 0; a ``step`` that does not divide every entry;
        entries beyond ±4096 steps; A of rank < d; too many distinct columns (more than
        2^16 facet candidates); or more than 2^17 expected proposals per draw. Each message
        names the fix.
    """
    a = declared_workload(workload)
    eps = positive(epsilon, "epsilon", up=False)
    h = _step(a, step)
    c = tuple(tuple(_lattice_entry(v / h) for v in row) for row in a)
    columns = _distinct_columns(c)
    dim = len(c)
    if _rank(columns, dim) < dim:
        raise DomainError("the workload has rank below its number of queries d, so K is flat "
                          "and ‖·‖_K is not a norm: drop the queries that are linear "
                          "combinations of others and compute them from the release "
                          "(post-processing)")
    candidates = math.comb(len(columns), dim) * (1 << (dim - 1))
    if candidates > MAX_CANDIDATES:
        raise DomainError(f"{len(columns)} distinct columns in d = {dim} give {candidates} "
                          f"facet candidates (at most {MAX_CANDIDATES}): merge histogram "
                          "cells with equal or proportional columns, or use fewer queries")
    normals, det_max = _facets(columns, dim)
    den = math.lcm(*(f.denominator for g in normals for f in g))
    facets = tuple(tuple(int(f * den) for f in g) for g in normals)
    box = tuple(max(abs(v) for v in row) for row in c)
    proposal = tuple(representable_scale(dim * b / eps) for b in box)
    plan = KNormPlan(h, c, facets, den, box, eps, proposal, math.inf)
    bound = _expected_bound(plan, det_max)
    if bound > MAX_EXPECTED_PROPOSALS:
        raise DomainError(f"the box proposal needs up to ~{bound:.3g} proposals per draw "
                          f"(at most {MAX_EXPECTED_PROPOSALS}): K is too thin inside its "
                          "bounding box; drop nearly parallel queries or use the Laplace "
                          "mechanism with L1 sensitivity max_j ‖a_j‖₁")
    return KNormPlan(h, c, facets, den, box, eps, proposal, bound)


def _step(a: Workload, step: Number | None) -> Fraction:
    if step is None:
        q = math.lcm(*(v.denominator for row in a for v in row))
        return Fraction(1, q)
    h = positive(as_typed(step), "step")
    if any((v / h).denominator != 1 for row in a for v in row):
        raise DomainError(f"step {h} must divide every workload entry (Aᵢⱼ/h an integer), "
                          "so that Ax lies on the lattice hℤᵈ: use 1/q with q a multiple of "
                          "the entries' common denominator")
    return h


def _lattice_entry(v: Fraction) -> int:
    if abs(v) > MAX_ENTRY:
        raise DomainError(f"a workload entry is {float(v):g} lattice steps (at most "
                          f"{MAX_ENTRY}): rescale the queries or use a coarser step")
    return int(v)


def _distinct_columns(c: tuple[tuple[int, ...], ...]) -> list[tuple[int, ...]]:
    """The non-zero columns of C up to sign (±cⱼ and repeats give the same K)."""
    seen: dict[tuple[int, ...], None] = {}
    for col in zip(*c, strict=True):
        if any(col):
            first = next(v for v in col if v)
            seen.setdefault(col if first > 0 else tuple(-v for v in col), None)
    return list(seen)


def _rank(columns: list[tuple[int, ...]], dim: int) -> int:
    rows = [[Fraction(v) for v in col] for col in columns]
    rank = 0
    for i in range(dim):
        pivot = next((r for r in range(rank, len(rows)) if rows[r][i] != 0), None)
        if pivot is None:
            continue
        rows[rank], rows[pivot] = rows[pivot], rows[rank]
        for r in range(rank + 1, len(rows)):
            factor = rows[r][i] / rows[rank][i]
            rows[r] = [x - factor * y for x, y in zip(rows[r], rows[rank], strict=True)]
        rank += 1
    return rank


def _det(m: list[list[int]]) -> int:
    if len(m) == 1:
        return m[0][0]
    return sum((-1) ** j * m[0][j] * _det([row[:j] + row[j + 1:] for row in m[1:]])
               for j in range(len(m)) if m[0][j])


def _adjugate(m: list[list[int]]) -> list[list[int]]:
    """adj(M) = det(M)·M⁻¹, integer cofactors (d ≤ 4)."""
    d = len(m)
    if d == 1:
        return [[1]]
    return [[(-1) ** (i + j) * _det([row[:i] + row[i + 1:] for k, row in enumerate(m) if k != j])
             for j in range(d)] for i in range(d)]


def _facets(columns: list[tuple[int, ...]], dim: int
            ) -> tuple[list[tuple[Fraction, ...]], int]:
    """Every facet normal f of conv(±columns) (⟨f, v⟩ ≤ 1 on K, equality on the facet)
    and the largest |det| of d columns (module docstring)."""
    cols = np.array(columns, dtype=np.int64)  # (n′, d)
    signs = np.array([(1, *s) for s in itertools.product((1, -1), repeat=dim - 1)],
                     dtype=np.int64)  # (2^(d−1), d)
    found: set[tuple[Fraction, ...]] = set()
    det_max = 0
    for subset in itertools.combinations(range(len(columns)), dim):
        p = [list(columns[j]) for j in subset]  # rows: the chosen vertices
        det = _det(p)
        if det == 0:
            continue
        det_max = max(det_max, abs(det))
        g = signs @ np.array(_adjugate(p), dtype=np.int64).T  # rows: det·C_S⁻¹σ
        ok = (np.abs(g @ cols.T) <= abs(det)).all(axis=1)
        for row in g[ok]:
            f = tuple(Fraction(int(v), det) for v in row)
            found.update((f, tuple(-v for v in f)))
    return sorted(found), det_max


def _expected_bound(plan: KNormPlan, det_max: int) -> float:
    """Z_q / max(1, window sum, cell bound), rounded up by 10^-9 (module docstring)."""
    dim, eps = plan.dim, float(plan.epsilon)
    z_q = math.prod(1 / math.tanh(1 / (2 * float(t))) for t in plan.proposal)
    radius = int(((_WINDOW ** (1 / dim)) - 1) // 2)
    grid = np.array(list(itertools.product(range(-radius, radius + 1), repeat=dim)),
                    dtype=np.int64)
    norms = plan.norm_numerators(grid).astype(np.float64) / plan.denominator
    window = float(np.exp(-eps * norms).sum())
    rho = max(sum(abs(v) for v in f) for f in plan.facets) / plan.denominator / 2
    cells = math.exp(-eps * rho) * 2**dim * det_max / eps**dim
    return z_q / max(1.0, window * (1 - 1e-9), cells * (1 - 1e-9)) * (1 + 1e-9)


def _audit() -> list[AuditCase]:
    """A = [[1, 1, 0], [0, 1, 1]] (K a hexagon), ε = 1/2, on the histograms (0, 0, 0) and
    (0, 1, 0) (Ax moves by the column (1, 1), of K-norm 1), audited through the sum of the
    two answers (post-processing); broken: the wrong norm, noise ∝ exp(−ε‖u‖₁) (the K-norm
    mechanism of the identity workload), for which (1, 1) has norm 2: a loss up to 2ε."""
    a = [[1, 1, 0], [0, 1, 1]]
    eps = Fraction(1, 2)
    matrix = np.array(a, dtype=np.int64)
    return [AuditCase("knorm", make_knorm(a, eps), _summed(matrix, knorm_plan(a, eps)),
                      _summed(matrix, knorm_plan([[1, 0], [0, 1]], eps)),
                      np.zeros(3, dtype=np.int64), np.array([0, 1, 0]))]


def _summed(matrix: np.ndarray, plan: KNormPlan) -> Sampler:
    def sample(x: Any, n: int) -> np.ndarray:
        centre = matrix @ np.asarray(x, dtype=np.int64)
        return (centre + plan.sample(n)).sum(axis=1)

    return sample


@register(audit=_audit)
def make_knorm(workload: Sequence[Sequence[Number]], epsilon: Number, *,
               step: Number | None = None) -> Measurement:
    """Answer d ≤ 4 linear queries over a histogram with the K-norm mechanism, exactly on
    the lattice hℤᵈ.

    Parameters
    ----------
    workload : d × n matrix of rationals
        A (ints, Fractions, decimal strings or floats read as typed), 1 ≤ d ≤ 4, rank d; the
        query answers are Ax for a histogram x ∈ ℤⁿ. Equal or opposite columns count once.
    epsilon : number
        ε > 0 per unit of L1 distance between histograms (rounded down).
    step : number, optional
        h, the lattice step of answers and noise; it must divide every entry of A. Default
        1/q, q the entries' least common denominator (h = 1 for integer queries).

    Returns
    -------
    Measurement
        Input: an integer vector x of shape (n,) under :class:`L1Distance`; output: float
        array of shape (d,), the nearest floats to y = Ax + h·u,
        P(u) ∝ exp(−ε‖u‖_{K/h}) on ℤᵈ, K = conv(±a₁, …, ±aₙ) (Hardt & Talwar 2010, on
        the lattice; proof and sampler in the module docstring).
        Privacy map: Δ ↦ PureDP(ε·Δ) for histograms at L1 distance Δ (add/remove one
        record: Δ = 1). ``accuracy(beta)``: a with P(|yᵢ − (Ax)ᵢ| > a) ≤ β for each query
        i (conservative: the proposal's tail times the bound M on the expected proposals).
        :func:`knorm_plan` with the same arguments gives the lattice, facets and the cost
        bound ``expected_proposals``.

    Raises
    ------
    DomainError
        At construction, as :func:`knorm_plan`. At release: x not an integer vector of
        length n.
    """
    plan = knorm_plan(workload, epsilon, step=step)
    n = len(plan.matrix[0])
    matrix = np.array(plan.matrix, dtype=np.int64)
    entry_max = max(abs(v) for row in plan.matrix for v in row)

    def release(x: Any) -> np.ndarray:
        arr, _ = as_vector(x, integer=True)
        if arr.size != n:
            raise DomainError(f"the histogram has {arr.size} cells; this workload takes {n}")
        if arr.dtype != object and (not arr.size or int(np.abs(arr).max()) * entry_max * n
                                    < _INT64_SAFE):
            centre = [int(v) for v in matrix @ arr]
        else:  # exact Python integers for huge counts
            centre = [sum(int(cij) * int(xj) for cij, xj in zip(row, arr, strict=True))
                      for row in plan.matrix]
        noise = plan.sample(1)[0]
        return np.array([float(plan.step * (c + int(z))) for c, z in zip(centre, noise,
                                                                          strict=True)])

    def accuracy(beta: float) -> float:
        # P(|uᵢ| > a) ≤ M·P_q(|uᵢ| > a) ≤ M·2·exp(−a/tᵢ)
        worst = max(float(t) for t in plan.proposal)
        return float(plan.step) * worst * math.log(2 * plan.expected_proposals / beta)

    return Measurement(
        function=release,
        input_metric=L1Distance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(plan.epsilon * non_negative(d_in, "d_in")),
        name=f"knorm(epsilon={float(plan.epsilon):.6g}, d={plan.dim}, n={n}, "
             f"step={plan.step})",
        accuracy=accuracy,
        input_domain=VectorDomain(AtomDomain(Kind.INTEGER), size=n),
    )
