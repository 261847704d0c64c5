"""The OnTheMap synthesizer: per-destination Dirichlet–multinomial synthesis of an
origin → destination commuting table, (ε, δ)-probabilistically DP.

Source: Machanavajjhala, Kifer, Abowd, Gehrke & Vilhuber, "Privacy: Theory meets Practice
on the Map", ICDE 2008 (the synthesizer of §3, the ε-DP condition on the prior of §4, the
(ε, δ)-probabilistic DP definition (Def. 4) and its disclosure set, and the shrinking of
each destination's origin domain).

The mechanism. For each declared destination d, with the declared (possibly shrunk) origin
domain of k_d blocks, the data are the origin histogram n ∈ ℕ^{k_d} of d's workers (N = Σn).
The release is m_d synthetic origins drawn from the posterior predictive of a multinomial
under the Dirichlet prior α (α on every block): s ~ DirMult(m_d, n + α), whose law is

    P(s | n) = m! / Π sᵢ! · Π (nᵢ + α)^(sᵢ) / (N + k_d α)^(m)

(x^(j) the rising factorial x(x+1)…(x+j−1)). It is drawn exactly as a Pólya urn: an urn
holding nᵢ + α balls of colour i (in units of 1/q for α = p/q, so integer weights q·nᵢ + p),
m draws, each ball returned with one more of its colour (q units), each draw an exact uniform
integer from :mod:`dpkit.core.rng` — no floating point.

Privacy, add/remove one worker (one row; the Session's row-level unit). Adding a worker at
origin i of destination d multiplies P(s | n) by (1 + sᵢ/(nᵢ + α)) / (1 + m/(N + kα)).

- ε-DP (the paper's §4 theorem): sup over n, s of that ratio is 1 + m/α, so the release is
  ε-DP iff α ≥ m/(e^ε − 1) — useless on a large domain, where α on every block swamps n.
- (ε, δ)-probabilistic DP (:class:`~dpkit.core.measures.ProbabilisticDP`): outside the
  disclosure set the ratio stays within e^{±ε}. If A = kα ≥ m/(e^ε − 1), the denominator
  never breaks the bound and an output is disclosive only if, for some block i,
  sᵢ > (max(nᵢ − 1, 0) + α)(e^ε − 1). Under n, sᵢ ~ BetaBinomial(m, nᵢ + α, N − nᵢ + A − α),
  whose tail only grows as N falls to nᵢ; a union bound over the k blocks gives

      δ_d = k · max_{x ≥ 0} Pr[BetaBin(m, x + α, (k − 1)α) > (max(x − 1, 0) + α)(e^ε − 1)]

  (:func:`disclosure_delta`, in exact rational arithmetic rounded up, e^ε rounded down). The
  destinations' histograms are disjoint, so a neighbour changes one of them, but the
  disclosure sets of the D destinations add: the release is (ε, Σ_d δ_d)-probabilistically DP,
  and the entry gives each destination δ/D (D declared). By Def. 4's conversion it is
  (ε, δ)-DP, which is what the accountant is charged.

Domain shrinking (the paper's remedy for a domain of millions of origin blocks, most never an
origin of a given destination): each destination's origin domain is a declared public set —
:func:`shrink_domain` keeps, per destination, the ``keep`` origins of largest public weight
(e.g. a previous public release, population, or closeness), a data-independent rule that
costs nothing. Workers whose origin is outside their destination's domain, or whose
destination is not declared, are dropped (a row-stable map: one worker changes at most one
cell of one histogram). The smaller k_d, the smaller α must be for the same δ_d.

Accuracy (the floor): the synthesizer's purpose is synthetic records (microdata); as counts,
per-cell noisy counts (two-sided geometric noise of scale 1/ε on every origin × destination
cell, ε-DP at the same ε) are more accurate wherever the m records' sampling error exceeds
that noise. :func:`expected_errors` compares the two from declared quantities only (m_d, α_d,
k_d, ε), and :func:`onthemap` emits :class:`~dpkit.errors.BaselineWarning` before the debit
when the synthesizer loses (rule in its docstring). Measured: 3–30× Identity's L1 error on
Adult (native-country → occupation, ``bench/onthemap.py``) and on held-out real data
(MSNBC first → last page, ``bench/floor.py --only onthemap``).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from dpkit.core import rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import ApproxDP, ProbabilisticDP
from dpkit.core.metrics import AddRemoveDistance
from dpkit.core.numbers import (
    Number,
    dyadic_up,
    exp_down,
    integer,
    log_up,
    positive,
    to_fraction,
)
from dpkit.errors import BaselineWarning, DomainError
from dpkit.mechanisms.frontend import AccountantLike, charge, check_accountant
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["OnTheMapRelease", "OnTheMapPlan", "onthemap", "plan_onthemap", "polya_urn",
           "dirichlet_multinomial_pmf", "pure_epsilon", "disclosure_delta", "choose_alpha",
           "shrink_domain", "expected_errors", "audit_cases"]

MAX_RECORDS = 100_000  # m per destination: the urn's draws
MAX_TAIL_WORK = 400_000  # plan-time terms of disclosure_delta (m × the thresholds' range)
_BITS = 160  # the tail's terms are rounded up to 160 significant bits
_ALPHA_BITS = 12  # α is chosen among multiples of 2^-12


# -- the law and the sampler ----------------------------------------------------------------
def _rising(x: Fraction, j: int) -> Fraction:
    out = Fraction(1)
    for t in range(j):
        out *= x + t
    return out


def dirichlet_multinomial_pmf(s: Sequence[int], counts: Sequence[int], alpha: Number
                              ) -> Fraction:
    """P(s | n), exactly: the Dirichlet–multinomial (Pólya urn) law of the synthetic counts.

    Parameters
    ----------
    s : sequence of k ints
        Synthetic counts, Σs = m.
    counts : sequence of k ints
        Observed counts n ≥ 0.
    alpha : number
        The prior's pseudo-count on every cell, > 0 (a float is read as the decimal typed).

    Returns
    -------
    Fraction
        m!/Π sᵢ! · Π (nᵢ + α)^(sᵢ) / (N + kα)^(m) (module docstring).
    """
    a = positive(alpha, "alpha")
    m = sum(s)
    total = sum(counts) + len(counts) * a
    coef = Fraction(math.factorial(m), math.prod(math.factorial(v) for v in s))
    num = math.prod((_rising(n + a, v) for n, v in zip(counts, s, strict=True)), start=Fraction(1))
    return coef * num / _rising(total, m)


def _urn(weights: list[int], step: int, m: int, below: Callable[[int], int]) -> list[int]:
    """m Pólya-urn draws: colour i with probability wᵢ/W, then wᵢ += step; ``below(W)`` a
    uniform integer in [0, W). Returns the k drawn counts."""
    w = list(weights)
    drawn = [0] * len(w)
    for _ in range(m):
        cum = list(itertools.accumulate(w))
        i = bisect.bisect_right(cum, below(cum[-1]))
        w[i] += step
        drawn[i] += 1
    return drawn


def polya_urn(counts: Sequence[int], alpha: Number, m: int) -> np.ndarray:
    """m synthetic records from DirMult(m, n + α), drawn exactly (a Pólya urn fed by
    :func:`dpkit.core.rng.uniform_below_int`).

    Parameters
    ----------
    counts : sequence of k non-negative ints
        The observed histogram n.
    alpha : number
        The prior's pseudo-count per cell, a positive rational (α = p/q: integer weights
        q·nᵢ + p, q per returned ball).
    m : int
        Records to draw, 0 ≤ m ≤ :data:`MAX_RECORDS`.

    Returns
    -------
    ndarray of int64, shape (k,)
        The synthetic counts s (Σs = m), distributed as :func:`dirichlet_multinomial_pmf`.

    Raises
    ------
    DomainError
        Bad α, m or counts.
    InsecureRandomnessError
        Under the seeded test stream.
    """
    rng.require_secure()
    a = positive(alpha, "alpha")
    m = integer(m, "m", minimum=0)
    if not counts or any(int(c) < 0 for c in counts):
        raise DomainError("counts must be a non-empty histogram of non-negative ints")
    weights = [a.denominator * int(c) + a.numerator for c in counts]
    return np.asarray(_urn(weights, a.denominator, m, rng.uniform_below_int), dtype=np.int64)


# -- privacy: α ↔ (ε, δ) ---------------------------------------------------------------------
def pure_epsilon(m: int, alpha: Number) -> Fraction:
    """The ε of the synthesizer's pure-DP guarantee, rounded up: ln(1 + m/α).

    Machanavajjhala et al. 2008, §4: DirMult(m, n + α) is ε-DP (add/remove or substitute one
    record) iff α ≥ m/(e^ε − 1) on every cell; the worst ratio 1 + m/α is attained when a
    worker joins an empty cell and all m records land there.
    """
    return log_up(1 + Fraction(integer(m, "m", minimum=0)) / positive(alpha, "alpha"))


class _Upper:
    """A positive number held as mant / 2^exp, every operation rounded up to about _BITS
    significant bits (a relative rounding: the tail's terms span hundreds of orders of
    magnitude, so an absolute grid would swamp the small ones). Integer arithmetic only."""

    def __init__(self) -> None:
        self.mant, self.exp = 1, 0

    def times(self, num: int, den: int) -> None:
        shift = max(0, _BITS + den.bit_length() - self.mant.bit_length() - num.bit_length())
        self.mant = -(-(self.mant * num << shift) // den)
        self.exp += shift
        extra = self.mant.bit_length() - _BITS
        if extra > 0:
            self.mant = -(-self.mant >> extra)
            self.exp -= extra

    def value(self) -> Fraction:
        return Fraction(self.mant, 1 << self.exp) if self.exp >= 0 else Fraction(
            self.mant << -self.exp)


def _tail(m: int, b1: Fraction, b2: Fraction, above: Fraction) -> Fraction:
    """Pr[BetaBin(m, b1, b2) > above], rounded up (terms from s = m down, each ≥ its value)."""
    first = int(math.floor(above)) + 1
    if first > m:
        return Fraction(0)
    q = math.lcm(b1.denominator, b2.denominator)
    n1, n2 = int(b1 * q), int(b2 * q)  # b1 = n1/q, b2 = n2/q
    p = _Upper()
    for t in range(m):  # P(s = m) = b1^(m) / (b1 + b2)^(m)
        p.times(n1 + q * t, n1 + n2 + q * t)
    total = p.value()
    for s in range(m, first, -1):  # P(s − 1) = P(s) · s/(m − s + 1) · (b2 + m − s)/(b1 + s − 1)
        if n2 + q * (m - s) == 0:  # b2 = 0: all the mass is at s = m
            break
        p.times(s * (n2 + q * (m - s)), (m - s + 1) * (n1 + q * (s - 1)))
        total += p.value()
    return min(Fraction(1), total)


@functools.lru_cache(maxsize=256)
def _delta(m: int, alpha: Fraction, k: int, epsilon: Fraction) -> Fraction:
    growth = exp_down(epsilon) - 1  # e^ε − 1, rounded down: thresholds only fall
    if growth <= 0 or k * alpha * growth < m:  # A = kα must cover the denominator's ratio
        return Fraction(1)
    worst = Fraction(0)
    x = 0
    while (max(x - 1, 0) + alpha) * growth < m:  # beyond, the threshold exceeds m
        worst = max(worst, _tail(m, x + alpha, (k - 1) * alpha,
                                 (max(x - 1, 0) + alpha) * growth))
        x += 1
    return min(Fraction(1), k * worst)


def _tail_work(m: int, alpha: Fraction, epsilon: Fraction) -> int:
    """Terms :func:`_delta` sums at α: ≤ m per tail, one tail per x with (x − 1 + α)(e^ε − 1)
    < m (ε ≤ e^ε − 1 stands in for the growth: an over-count, never an under-count). At
    α = 0 it bounds every α, so :func:`choose_alpha`'s whole search."""
    growth = float(epsilon) if epsilon < 1 else math.expm1(float(epsilon))
    return m * (max(0, math.ceil(m / max(growth, 1e-12) - float(alpha))) + 2)


def disclosure_delta(m: int, alpha: Number, k: int, epsilon: Number) -> Fraction:
    """δ_d of one destination: the probability of its disclosure set, bounded for every
    histogram (module docstring), exact and rounded up.

    Parameters
    ----------
    m : int
        Synthetic records for the destination.
    alpha : number
        The prior's pseudo-count per origin block, > 0.
    k : int
        Origin blocks in the destination's (shrunk) domain, ≥ 1.
    epsilon : number
        ε > 0 of the ratio bound.

    Returns
    -------
    Fraction
        k · max_x Pr[BetaBin(m, x + α, (k−1)α) > (max(x − 1, 0) + α)(e^ε − 1)], or 1 when
        kα < m/(e^ε − 1); 0 when α ≥ m/(e^ε − 1) (then the release is ε-DP).

    Raises
    ------
    DomainError
        Bad arguments, or more than :data:`MAX_TAIL_WORK` terms (m/(e^ε − 1) · m).
    """
    m = integer(m, "m", minimum=0)
    k = integer(k, "k", minimum=1)
    a = positive(alpha, "alpha")
    eps = positive(epsilon, "epsilon", up=False)
    if m > MAX_RECORDS:
        raise DomainError(f"m must be at most {MAX_RECORDS}")
    if _tail_work(m, a, eps) > MAX_TAIL_WORK:
        raise DomainError(f"m = {m} at ε = {float(eps):g} needs more than {MAX_TAIL_WORK} "
                          "terms to certify δ; lower m or raise ε")
    return _delta(m, a, k, eps)


def choose_alpha(m: int, k: int, epsilon: Number, delta: Number) -> Fraction:
    """The smallest α (a multiple of 2^-12, by bisection) with
    :func:`disclosure_delta` (m, α, k, ε) ≤ δ; the returned α is certified (its δ_d is
    computed, not interpolated).

    Raises
    ------
    DomainError
        Bad arguments (as :func:`disclosure_delta`), δ not in (0, 1), or a search costing
        more than :data:`MAX_TAIL_WORK` terms (its cost at α → 0, m · (m/(e^ε − 1) + 2)).
    """
    eps = positive(epsilon, "epsilon", up=False)
    dlt = positive(delta, "delta", up=False)
    if dlt >= 1:
        raise DomainError("delta must be below 1")
    m = integer(m, "m", minimum=1)
    unit = Fraction(1, 1 << _ALPHA_BITS)
    pure = dyadic_up(m / (exp_down(eps) - 1), _ALPHA_BITS)  # δ_d = 0 here (ε-DP)
    disclosure_delta(m, pure, k, eps)  # the arguments' checks
    if _tail_work(m, Fraction(0), eps) > MAX_TAIL_WORK:  # the search reaches small α
        raise DomainError(f"m = {m} at ε = {float(eps):g} needs more than {MAX_TAIL_WORK} "
                          "terms to choose α; lower m or raise ε")
    lo, hi = 0, int(pure / unit)  # δ_d(hi·unit) ≤ δ; lo·unit is below the search
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _delta(m, mid * unit, k, eps) <= dlt:
            hi = mid
        else:
            lo = mid
    return hi * unit


def shrink_domain(weights: Mapping[Hashable, Mapping[Hashable, Number]], keep: int
                  ) -> dict[Hashable, tuple[Hashable, ...]]:
    """Each destination's origin domain: its ``keep`` origins of largest public weight
    (ties by the mapping's order). Data-independent, so it costs no privacy.

    Parameters
    ----------
    weights : mapping destination → (mapping origin → public weight)
        Public information only (a previous public release, population, closeness) — never
        the table being released.
    keep : int
        Origins kept per destination, ≥ 1.

    Returns
    -------
    dict destination → tuple of origins
    """
    keep = integer(keep, "keep", minimum=1)
    out: dict[Hashable, tuple[Hashable, ...]] = {}
    for dest, row in weights.items():
        names = list(row)
        w = [to_fraction(row[o]) for o in names]
        order = sorted(range(len(names)), key=w.__getitem__, reverse=True)  # stable: ties
        out[dest] = tuple(names[j] for j in sorted(order[:keep]))
    return out


# -- accuracy against per-cell noisy counts ----------------------------------------------------
def expected_errors(m: int, alpha: Number, k: int, epsilon: Number) -> tuple[float, float]:
    """The expected L1 error, in records, of one destination's synthetic counts and of
    per-cell noisy counts at the same ε — from declared quantities only.

    Parameters
    ----------
    m : int
        Synthetic records for the destination, 1 ≤ m ≤ :data:`MAX_RECORDS`.
    alpha : number
        The prior's pseudo-count per origin, > 0.
    k : int
        Origins in the destination's domain, ≥ 1.
    epsilon : number
        ε > 0 (nats).

    Returns
    -------
    (float, float)
        ``synthesizer``: E Σᵢ |sᵢ − m/k| on the reference table of N = m workers spread
        evenly over the k origins (nᵢ = m/k, where the prior adds no bias: E s = n, so this
        is the sampling error alone), sᵢ ~ BetaBin(m, m/k + α, (k − 1)(m/k + α)) (the
        urn's marginal). ``identity``: k/sinh ε = k · E|Z| for Z two-sided geometric with
        Pr[Z = z] ∝ e^{−ε|z|} (clamping negatives to 0 only lowers it).

    Raises
    ------
    DomainError
        Bad arguments.

    Notes
    -----
    A rule, not a theorem: on a skewed table the prior's bias adds up to
    m · kα/(m + kα) · ‖u − p‖₁ while the sampling error shrinks; with N > m workers the noisy
    counts' relative error falls as 1/N and the synthesizer's does not. Floats (advice,
    not privacy arithmetic).
    """
    m = integer(m, "m", minimum=1)
    k = integer(k, "k", minimum=1)
    if m > MAX_RECORDS:
        raise DomainError(f"m must be at most {MAX_RECORDS}")
    a = float(positive(alpha, "alpha")) + m / k
    eps = float(positive(epsilon, "epsilon", up=False))
    return _sampling_error(m, a, k), k / math.sinh(eps)


def _sampling_error(m: int, a: float, k: int) -> float:
    """k · E|s − m/k|, s ~ BetaBin(m, a, (k − 1)a), summed over s = 0..m in log space."""
    from scipy.special import betaln, gammaln  # on use: import dpkit stays light

    if k == 1:
        return 0.0  # every record at the only origin
    s = np.arange(m + 1, dtype=np.float64)
    b = (k - 1) * a
    log_pmf = (gammaln(m + 1) - gammaln(s + 1) - gammaln(m - s + 1)
               + betaln(s + a, m - s + b) - betaln(a, b))
    return float(k * np.sum(np.exp(log_pmf) * np.abs(s - m / k)))


def _advise(sizes: Mapping[Hashable, int], alphas: Mapping[Hashable, Fraction],
            doms: Mapping[Hashable, tuple[Hashable, ...]], eps: Fraction,
            stacklevel: int) -> None:
    """Warn, before the debit, when per-cell noisy counts are the better release (declared
    quantities only: summed over destinations, :func:`expected_errors`)."""
    pairs = [expected_errors(sizes[d], alphas[d], len(doms[d]), eps) for d in doms]
    synth, ident = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    if synth > ident:
        warnings.warn(
            f"onthemap: as counts, its expected L1 error ({synth:.3g} records over the "
            f"destinations, on a table of m_d workers each spread evenly) exceeds per-cell "
            f"noisy counts' ({ident:.3g}: two-sided geometric noise of scale 1/ε on every "
            "origin × destination cell, ε-DP at the same ε) — release those "
            "(dpkit.mechanisms.make_noise on the counts, or a Session count grouped by "
            "destination and origin) unless synthetic records (microdata) are what you need",
            BaselineWarning, stacklevel=stacklevel)


# -- the release ------------------------------------------------------------------------------
@dataclass(frozen=True)
class OnTheMapRelease:
    """The synthetic commuting table.

    Attributes
    ----------
    counts : dict destination → ndarray of int64, shape (k_d,)
        Synthetic origin counts of each destination over ``domains[d]`` (Σ = m_d).
    domains : dict destination → tuple of origins
    alpha : dict destination → Fraction
        The prior used per destination.
    loss : ProbabilisticDP
        (ε, Σ_d δ_d), the guarantee; the accountant is charged its (ε, δ)-DP conversion.
    """

    counts: dict[Hashable, np.ndarray]
    domains: dict[Hashable, tuple[Hashable, ...]]
    alpha: dict[Hashable, Fraction]
    loss: ProbabilisticDP

    def table(self, origins: Sequence[Hashable]) -> np.ndarray:
        """The synthetic table as an array of shape (destinations, len(origins)), zero
        outside each destination's domain."""
        col = {o: j for j, o in enumerate(origins)}
        out = np.zeros((len(self.counts), len(origins)), dtype=np.int64)
        for r, (dest, c) in enumerate(self.counts.items()):
            for o, v in zip(self.domains[dest], c, strict=True):
                out[r, col[o]] = v
        return out

    def records(self) -> pl.DataFrame:
        """One row per synthetic worker: columns ``origin`` and ``destination``."""
        origin: list[Any] = []
        dest: list[Any] = []
        for d, c in self.counts.items():
            for o, v in zip(self.domains[d], c.tolist(), strict=True):
                origin += [o] * v
                dest += [d] * v
        return pl.DataFrame({"origin": origin, "destination": dest}, strict=False)


def _plan(destinations: Sequence[Hashable], origins: Sequence[Hashable],
          domains: Mapping[Hashable, Sequence[Hashable]] | None, m: int | Mapping[Hashable, int],
          eps: Fraction, dlt: Fraction
          ) -> tuple[dict[Hashable, tuple[Hashable, ...]], dict[Hashable, int],
                     dict[Hashable, Fraction], Fraction]:
    """The data-free plan: domains, m_d, α_d and the summed δ — or DomainError."""
    dests = list(dict.fromkeys(destinations))
    if len(dests) != len(destinations) or not dests:
        raise DomainError("destinations must be a non-empty list of distinct values")
    known = set(origins)
    if len(known) != len(origins) or not origins:
        raise DomainError("origins must be a non-empty list of distinct values")
    doms: dict[Hashable, tuple[Hashable, ...]] = {}
    for d in dests:
        dom = tuple(origins) if domains is None else tuple(domains.get(d, ()))
        if not dom or not set(dom) <= known or len(set(dom)) != len(dom):
            raise DomainError(f"the domain of destination {d!r} must be a non-empty set of "
                              "declared origins")
        doms[d] = dom
    if domains is not None and set(domains) - set(dests):
        raise DomainError("domains names an undeclared destination")
    sizes = {d: integer(m[d] if isinstance(m, Mapping) else m, "m", minimum=1) for d in dests}
    per = dlt / len(dests)
    alphas = {d: choose_alpha(sizes[d], len(doms[d]), eps, per) for d in dests}
    spent = sum((_delta(sizes[d], alphas[d], len(doms[d]), eps) for d in dests), Fraction(0))
    return doms, sizes, alphas, spent


def _histograms(origin: np.ndarray, dest: np.ndarray,
                doms: Mapping[Hashable, tuple[Hashable, ...]]) -> dict[Hashable, list[int]]:
    """Per destination, the counts over its domain; other rows are dropped (total)."""
    index = {d: {o: j for j, o in enumerate(dom)} for d, dom in doms.items()}
    hist = {d: [0] * len(dom) for d, dom in doms.items()}
    for o, d in zip(origin.tolist(), dest.tolist(), strict=True):
        cells = index.get(d)
        j = None if cells is None else cells.get(o)
        if j is not None:
            hist[d][j] += 1
    return hist


@register(audit=lambda: audit_cases())  # the audit battery's case
def onthemap(table: pl.DataFrame, *, origin: str, destination: str,
             origins: Sequence[Hashable], destinations: Sequence[Hashable],
             m: int | Mapping[Hashable, int], epsilon: Number, delta: Number,
             domains: Mapping[Hashable, Sequence[Hashable]] | None = None,
             accountant: AccountantLike = None) -> OnTheMapRelease:
    """A synthetic origin → destination table, m_d workers per destination, drawn from the
    Dirichlet–multinomial posterior predictive with the prior α chosen for (ε, δ).

    Parameters
    ----------
    table : polars.DataFrame, shape (N, ≥ 2)
        One row per worker (the privacy unit: one row), with ``origin`` and ``destination``
        columns. Rows whose destination is not declared, or whose origin is outside its
        destination's domain (nulls included), are dropped.
    origin, destination : str
        The two columns.
    origins : sequence
        The declared origin blocks (public).
    destinations : sequence
        The declared destination blocks (public): D of them.
    m : int or mapping destination → int
        Synthetic workers per destination (declared, never the data's count), 1 ≤ m_d ≤
        :data:`MAX_RECORDS`.
    epsilon : number
        ε > 0 (nats) of the ratio bound.
    delta : number
        δ ∈ (0, 1): the release's total disclosure probability (δ/D per destination).
    domains : mapping destination → sequence of origins, optional
        Each destination's shrunk origin domain (public; :func:`shrink_domain`); default:
        every origin.
    accountant : Accountant, PrivacyFilter, Session or None
        Charged ApproxDP(ε, δ) once, before the table is read.

    Returns
    -------
    OnTheMapRelease
        The synthetic counts per destination, the domains, α per destination and the loss
        ProbabilisticDP(ε, Σ_d δ_d) (Σ_d δ_d ≤ δ).

    Raises
    ------
    DomainError
        Bad columns, declarations, m, ε, δ, domains or accountant, or a plan too costly to
        certify (:func:`disclosure_delta`) — all before the debit.
    BudgetExceededError
        The accountant cannot pay (ε, δ) (nothing debited).

    Notes
    -----
    Privacy map (add/remove one worker): ProbabilisticDP(ε, Σ_d δ_d), δ_d =
    :func:`disclosure_delta` (m_d, α_d, k_d, ε) ≤ δ/D, hence ApproxDP(ε, δ) (Machanavajjhala,
    Kifer, Abowd, Gehrke & Vilhuber, ICDE 2008: the synthesizer §3, the ε-DP condition
    α ≥ m/(e^ε − 1) §4, Def. 4 and its disclosure set; the δ bound is the module docstring's
    union bound over cells, computed exactly). A worker moving origin or destination is two
    such steps: (2ε, (1 + e^ε)δ)-DP. Cost: O(Σ_d m_d k_d) after the debit, set by declared
    quantities only.

    Accuracy: this is a synthesizer of records (microdata); as counts it is worse than
    per-cell noisy counts (Identity: two-sided geometric noise of scale 1/ε per cell, ε-DP)
    on held-out real data (MSNBC first → last page, ``bench/floor.py``) and on Adult
    (``bench/onthemap.py``): 3–30× Identity's L1 error. Before the debit it emits
    :class:`~dpkit.errors.BaselineWarning`, naming per-cell noisy counts, when
    Σ_d E_synth(m_d, α_d, k_d) > Σ_d k_d/sinh ε (:func:`expected_errors`: the synthesizer's
    expected L1 error in records on a table of m_d workers spread evenly, against the noisy
    counts' exact k_d/sinh ε) — declared quantities only, never the data; the release is
    unchanged.

    Warns
    -----
    BaselineWarning
        When the rule above says per-cell noisy counts are more accurate.
    """
    check_accountant(accountant)
    if not isinstance(table, pl.DataFrame):
        raise DomainError("table must be a polars DataFrame")
    for col in (origin, destination):
        if col not in table.columns:
            raise DomainError(f"unknown column {col!r}")
    plan = plan_onthemap(origins=origins, destinations=destinations, m=m, epsilon=epsilon,
                         delta=delta, domains=domains, stacklevel=3)
    return charge(accountant, plan.loss, plan.description,
                  lambda: plan.draw(table[origin].to_numpy(), table[destination].to_numpy()),
                  alternatives=(plan.loss.to_approx(),))


@dataclass(frozen=True)
class OnTheMapPlan:
    """The data-free half of :func:`onthemap` (:func:`plan_onthemap`): everything checked,
    α chosen and the loss known, before any debit; :meth:`draw` is the data side.

    Attributes
    ----------
    domains : dict destination → tuple of origins
    m : dict destination → int
    alpha : dict destination → Fraction
    loss : ProbabilisticDP
        (ε, Σ_d δ_d); the accountant is charged its (ε, δ)-DP conversion.
    description : str
        The ledger's text (declared quantities only).
    """

    domains: dict[Hashable, tuple[Hashable, ...]]
    m: dict[Hashable, int]
    alpha: dict[Hashable, Fraction]
    loss: ProbabilisticDP
    description: str

    def draw(self, origin: np.ndarray, destination: np.ndarray) -> OnTheMapRelease:
        """The release from one worker per entry (origin[i], destination[i]), shape (N,):
        rows outside the declared domains dropped; total (never raises on the data)."""
        hist = _histograms(origin, destination, self.domains)
        counts = {d: polya_urn(hist[d], self.alpha[d], self.m[d]) for d in self.domains}
        return OnTheMapRelease(counts, self.domains, self.alpha, self.loss)


def plan_onthemap(*, origins: Sequence[Hashable], destinations: Sequence[Hashable],
                  m: int | Mapping[Hashable, int], epsilon: Number, delta: Number,
                  domains: Mapping[Hashable, Sequence[Hashable]] | None = None,
                  stacklevel: int = 2) -> OnTheMapPlan:
    """Check the declarations, choose α per destination and emit the floor's warning — the
    part of :func:`onthemap` that reads no data (parameters as there; ``stacklevel`` for the
    warning).

    Returns
    -------
    OnTheMapPlan

    Raises
    ------
    DomainError
        Bad declarations, m, ε or δ, or a plan too costly to certify.
    InsecureRandomnessError
        Under the seeded test stream.

    Warns
    -----
    BaselineWarning
        As :func:`onthemap`.
    """
    rng.require_secure()
    eps = positive(epsilon, "epsilon", up=False)
    dlt = positive(delta, "delta", up=False)
    if dlt >= 1:
        raise DomainError("delta must be below 1")
    doms, sizes, alphas, spent = _plan(list(destinations), list(origins), domains, m, eps, dlt)
    _advise(sizes, alphas, doms, eps, stacklevel + 1)
    loss = ProbabilisticDP(eps, spent)
    description = (f"onthemap: {len(doms)} destinations, {len(origins)} origins, "
                   f"m {sorted(set(sizes.values()))}, {loss} (probabilistic DP)")
    return OnTheMapPlan(doms, sizes, alphas, loss, description)


def _urn_many(weights: list[int], step: int, m: int, n: int) -> np.ndarray:
    """n independent runs of :func:`_urn` at once (int64 weights: the audit's small urns),
    each draw an exact uniform integer from :func:`dpkit.core.rng.uniform_below`."""
    w = np.tile(np.asarray(weights, dtype=np.int64), (n, 1))
    drawn = np.zeros_like(w)
    rows = np.arange(n)
    for _ in range(m):
        cum = np.cumsum(w, axis=1)
        u = rng.uniform_below(cum[:, -1].astype(np.uint64)).astype(np.int64)
        i = (cum <= u[:, None]).sum(axis=1)
        w[rows, i] += step
        drawn[rows, i] += 1
    return drawn


# -- audit -------------------------------------------------------------------------------------
def audit_cases() -> list[AuditCase]:
    """One destination, k = 2 origins, m = 4, ε = 1, δ_d = 1/100: x has one worker at
    origin 1, x′ one more at origin 0 (add one row). The claim is the (ε, δ)-DP conversion
    of the probabilistic guarantee (the audit tests (ε, δ)-DP). Broken: α/16, too small for
    ε — the synthesizer then reproduces the lone worker's origin."""
    eps, m, k = Fraction(1), 4, 2
    alpha = choose_alpha(m, k, eps, Fraction(1, 100))
    claim = ApproxDP(eps, _delta(m, alpha, k, eps))

    def sampler(a: Fraction) -> Sampler:
        def sample(data: Any, n: int) -> np.ndarray:
            counts = np.bincount(np.asarray(data, dtype=np.int64), minlength=k).tolist()
            weights = [a.denominator * c + a.numerator for c in counts]
            return _urn_many(weights, a.denominator, m, n)[:, 0]  # the first cell's count
        return sample

    measurement = Measurement(lambda d: sampler(alpha)(d, 1)[0], AddRemoveDistance(), ApproxDP,
                              lambda d: claim if d <= 1 else ApproxDP(d * eps, 1), "onthemap",
                              input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase("onthemap", measurement, sampler(alpha), sampler(alpha / 16),
                      np.array([1]), np.array([1, 0]))]
