"""Correlated data: Pufferfish privacy for a time series with the Markov quilt mechanism.

Source: Song, Wang & Chaudhuri, *Pufferfish privacy mechanisms for correlated data*,
SIGMOD 2017 — the Markov quilt mechanism (MQM, their Alg. 1), its exact form for Markov
chains (MQMExact, Alg. 2) and the approximate form from a mixing bound (MQMApprox, §4).
The guarantee is ε-Pufferfish (Kifer & Machanavajjhala, TODS 2014), stated with
:class:`dpkit.core.measures.Pufferfish`.

Model. A series X = (X_0, …, X_{T−1}) over the declared states {0, …, k − 1} (k ≤ 8) is a
Markov chain θ = (q, P): X_0 ~ q, P(X_{t+1} = y | X_t = x) = P_xy. The adversary's prior is
any θ of a declared finite class Θ (every entry of q and P positive). The secrets are the
values of each day, the pairs (X_t = a, X_t = b), a ≠ b, every t. The length T is public.

The map (MQM, Alg. 1). For node i, a Markov quilt is X_Q = {X_{i−a}, X_{i+b}} (either end
may be absent: no quilt node on that side), with X_N = {X_{i−a+1}, …, X_{i+b−1}} (clipped
to the series) the nearby nodes. Its max-influence under θ is

    e_θ(Q | i) = max_{s, s'} log max_{x_Q} P(X_Q = x_Q | X_i = s, θ) / P(X_Q = x_Q | X_i = s', θ)
               = max_{s, s'} [ log max_x (Pᵃ)_{x s}/(Pᵃ)_{x s'} + log π_i(s')/π_i(s)
                               + log max_y (Pᵇ)_{s y}/(Pᵇ)_{s' y} ]

(π_i = q P^i; the left terms are absent without a left quilt node, the right without a
right one: given X_i the two sides are independent and Bayes' rule turns the left side
around). For a query F that is L-Lipschitz in each node (L1), the quilt's scale is
σ_θ(Q, i) = L·|X_N| / (ε − e_θ(Q | i)) when e_θ < ε, and

    σ_max = max_{θ ∈ Θ} max_i min_Q σ_θ(Q, i)

(the trivial quilt, Q = ∅ and N the whole series, gives L·T/ε: group privacy). The release
is F(X) + Z with Z discrete Laplace of scale σ_max per coordinate, which is ε-Pufferfish
for Θ (Song, Wang & Chaudhuri 2017, §4: MQM's privacy theorem; its proof fixes θ, so the
quilt may depend on θ, as Alg. 2 computes it. Sketch: given X_Q, the remote nodes are
independent of X_i and F moves by ≤ L·|X_N| over the nearby ones, a factor e^{L|X_N|/σ} of
the noise; conditioning on X_Q costs e^{e_θ}; the sum is ≤ ε).

Exactness: P, q are Fractions; the search picks a quilt per (θ, i) in float64 among widths
≤ ``max_width`` (a smaller search only enlarges σ), then recomputes the chosen quilt's
influence ratio exactly in integers (π_i's ratios rounded up to 2^-64 once its integers
pass 512 bits) and σ with ``log_up``: σ_max is an exact rational ≥ the value of the
formula. The discrete Laplace keeps the proof's one property, P(z)/P(z +
d) ≤ e^{|d|/σ}.

MQMApprox (§4). Instead of Pᵃ exactly, a mixing bound: with π_θ the stationary law,
π_min = min_x π_θ(x), τ = the Dobrushin coefficient max_{x,x'} ½‖P_x· − P_x'·‖₁ and
d_t = τ^t, e_t = τ^t·½‖q − π_θ‖₁, every |(P^t)_{xy} − π(y)| ≤ d_t and |π_i(s) − π(s)| ≤ e_i,
so for d_a, d_b, e_i < π_min

    e_θ(Q | i) ≤ log (π_min + d_b)/(π_min − d_b)
                 + log (π_min + d_a)(π_min + e_i) / ((π_min − d_a)(π_min − e_i)).

The paper states this bound with the eigengap of the chain (for a reversible chain
|λ₂|^t, for others that of P P*). Both are used, the tighter at every t: for a reversible
chain (detailed balance checked exactly) d_t = min(τ^t, √(π_max/π_min)·λ_up^t), λ_up a
certified rational upper bound on the second eigenvalue modulus λ* (:func:`spectral_bound`:
λ* ≤ ‖(P − 1πᵀ)^j‖_∞^{1/j}, exact powers, the root rounded up); a non-reversible chain
uses Dobrushin alone (its spectral bound is not the one the paper's P P* form needs). The
Dobrushin coefficient is a mixing rate of the same
role that is exact in rationals and holds for non-reversible chains: max_x ‖P^t_x· − π‖_TV
≤ d̄(t) ≤ τ^t (Levin, Peres & Wilmer, *Markov chains and mixing times*, §4.4: d(t) ≤ d̄(t),
d̄ submultiplicative, d̄(1) = τ) and ‖qP^i − π‖_TV ≤ τ^i‖q − π‖_TV (Dobrushin's
contraction); a coordinate differs by at most the total variation.

What the guarantee does and does not say. σ_max ≥ L/ε (|X_N| ≥ 1, e ≥ 0), so the release
is also ε-DP for substituting one day's value in a fixed series: the accountant is charged
``PureDP(ε)`` for that, and the record states ε-Pufferfish for Θ beside it. ε-DP alone
does not protect a day whose value is predictable from its neighbours (a correlated
secret): naive per-record noise L/ε lets an adversary with a prior θ ∈ Θ learn X_t through
the other days (``tests/test_correlated.py`` shows the ratio > e^ε). Pufferfish holds only
for priors in Θ: a more persistent chain than Θ's gets no guarantee beyond ε-DP; group DP
(scale L·T/ε) protects every prior and costs T times the noise. Composition: Song &
Chaudhuri (2017, *Composition properties of inferential privacy for time-series data*)
show MQM releases with one Θ compose linearly; this module relies only on the DP debit.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpkit.core import numbers, rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import Pufferfish, PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import Number
from dpkit.core.record import Release
from dpkit.errors import DomainError
from dpkit.mechanisms.frontend import (
    AccountantLike,
    charge_record,
    check_accountant,
    noise_row,
    noisy,
)
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["MarkovChain", "MarkovClass", "markov_class", "QuiltScale", "quilt_scale",
           "spectral_bound", "mixing_rates",
           "QuiltRelease", "markov_quilt_release", "audit_cases"]

MAX_STATES = 8
MAX_CHAINS = 32
MAX_LENGTH = 4096
MAX_WIDTH = 64
EXACT_BITS = 512  # π_i ratios beyond this many bits are rounded up (see _Exact._shift)
MAX_DENOMINATOR = 1 << 20  # bounds the integers of the exact search (cost ∝ their digits)
DEFAULT_WIDTH = 16
MARGIN = 1e-9  # float search: a quilt whose float influence is this close to ε is skipped
STATISTICS = ("histogram", "count")
METHODS = ("exact", "approx")
SQUARINGS = 6  # A^(2^m), m ≤ 6, for the certified bound on λ* (spectral_bound)


@dataclass(frozen=True)
class MarkovChain:
    """One θ = (q, P): initial law q (length k) and transition matrix P (k × k), exact,
    every entry positive, rows summing to 1."""

    initial: tuple[Fraction, ...]
    transition: tuple[tuple[Fraction, ...], ...]


@dataclass(frozen=True)
class MarkovClass:
    """The declared class Θ: k states and a finite tuple of chains."""

    states: int
    chains: tuple[MarkovChain, ...]

    def describe(self) -> str:
        """Canonical text: k, |Θ| and a sha256 digest of the exact entries."""
        text = repr([(c.initial, c.transition) for c in self.chains])
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        return f"Markov chains on {self.states} states, |Θ| = {len(self.chains)}, sha256 {digest}"


def _law(values: Sequence[Number], k: int, name: str) -> tuple[Fraction, ...]:
    try:
        law = tuple(numbers.as_typed(v) for v in values)
    except (TypeError, ValueError):
        raise DomainError(f"{name} must be {k} positive rationals") from None
    if len(law) != k or min(law) <= 0 or sum(law) != 1:
        raise DomainError(f"{name} must be {k} positive numbers summing to exactly 1")
    if max(x.denominator for x in law) > MAX_DENOMINATOR:
        raise DomainError(f"{name}: denominators must be at most 2^20 (round Θ to a grid)")
    return law


def markov_class(chains: Sequence[tuple[Sequence[Number], Sequence[Sequence[Number]]]],
                 states: int) -> MarkovClass:
    """Θ from (initial, transition) pairs, checked at plan time (no data involved).

    Parameters
    ----------
    chains : sequence of (q, P)
        q: k numbers; P: k rows of k numbers. Floats are read as typed (0.1 → 1/10);
        denominators at most 2^20 (the exact search's integers grow with them).
    states : int
        k, 2 ≤ k ≤ 8: the declared state space {0, …, k − 1}.

    Returns
    -------
    MarkovClass

    Raises
    ------
    DomainError
        k outside [2, 8]; no chain or more than 32; a law that is not k positive numbers
        summing exactly to 1 (P must be stochastic with positive entries: a zero makes
        some influences infinite and MQMApprox needs an ergodic chain); a denominator
        above 2^20.
    """
    k = numbers.integer(states, "states", minimum=2)
    if k > MAX_STATES:
        raise DomainError(f"states must be at most {MAX_STATES}")
    chains = list(chains)
    if not 1 <= len(chains) <= MAX_CHAINS:
        raise DomainError(f"declare between 1 and {MAX_CHAINS} chains")
    built = []
    for q, p in chains:
        rows = list(p)
        if len(rows) != k:
            raise DomainError(f"a transition matrix must have {k} rows")
        built.append(MarkovChain(_law(q, k, "initial"),
                                 tuple(_law(r, k, "a transition row") for r in rows)))
    return MarkovClass(k, tuple(built))


# -- the exact influence, in integers -----------------------------------------------------
def _integers(p: tuple[tuple[Fraction, ...], ...]) -> list[list[int]]:
    """P as an integer matrix M with P = M/D (D the common denominator; it cancels)."""
    d = math.lcm(*(x.denominator for row in p for x in row))
    return [[int(x * d) for x in row] for row in p]


def _matmul(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
    return [[sum(x * y for x, y in zip(row, col, strict=True)) for col in zip(*b, strict=True)]
            for row in a]


def _ratio_max(num: Sequence[int], den: Sequence[int]) -> Fraction:
    return max(Fraction(x, y) for x, y in zip(num, den, strict=True))


class _Exact:
    """One θ's exact quantities: column ratios Aₐ(s, s') = max_x (Pᵃ)_{xs}/(Pᵃ)_{xs'}, row
    ratios B_b(s, s') = max_y (Pᵇ)_{sy}/(Pᵇ)_{s'y} for widths ≤ W, and π_i ∝ v_i (integers)."""

    def __init__(self, chain: MarkovChain, length: int, width: int) -> None:
        k = len(chain.initial)
        m = _integers(chain.transition)
        powers = [m]
        for _ in range(width - 1):
            powers.append(_matmul(powers[-1], m))
        cols = [list(zip(*pw, strict=True)) for pw in powers]
        self.left = [[[_ratio_max(c[s], c[t]) for t in range(k)] for s in range(k)]
                     for c in cols]
        self.right = [[[_ratio_max(pw[s], pw[t]) for t in range(k)] for s in range(k)]
                      for pw in powers]
        dq = math.lcm(*(x.denominator for x in chain.initial))
        v = [int(x * dq) for x in chain.initial]
        self.pi = [v]
        for _ in range(length - 1):
            v = [sum(v[x] * m[x][y] for x in range(k)) for y in range(k)]
            self.pi.append(v)
        self.k = k
        # float logs for the search (math.log of a big int is exact enough to choose)
        self.log_left = np.array([[[math.log(r) for r in row] for row in a] for a in self.left])
        self.log_right = np.array([[[math.log(r) for r in row] for row in b]
                                   for b in self.right])

    def table(self, i: int) -> np.ndarray:
        """Float e(a, b) for a, b ∈ {absent, 1, …, W}: shape (W + 1, W + 1)."""
        lp = np.array([math.log(x) for x in self.pi[i]])
        shift = lp[None, :] - lp[:, None]  # log π_i(s') − log π_i(s)
        w = self.log_left.shape[0]
        left = np.concatenate([np.zeros((1, self.k, self.k)), self.log_left + shift])
        right = np.concatenate([np.zeros((1, self.k, self.k)), self.log_right])
        return (left[:, None] + right[None, :]).reshape(w + 1, w + 1, -1).max(axis=2)

    def _shift(self, i: int, s: int, t: int) -> Fraction:
        """π_i(t)/π_i(s): exact while π_i's integers are short (every short series, the
        tests' brute force), else rounded up to a multiple of 2^-64 (a larger influence,
        so σ only grows) — π_i's integers grow by log₂ D bits a day."""
        n, d = self.pi[i][t], self.pi[i][s]
        if max(n.bit_length(), d.bit_length()) <= EXACT_BITS:
            return Fraction(n, d)
        return Fraction(-((-n << 64) // d), 1 << 64)

    def ratio(self, i: int, a: int, b: int) -> Fraction:
        """exp e_θ(Q | i) (a, b = 0: no quilt node on that side); exact, or rounded up as
        :meth:`_shift` says."""
        best = Fraction(1)
        for s in range(self.k):
            for t in range(self.k):
                r = Fraction(1)
                if a:
                    r *= self.left[a - 1][s][t] * self._shift(i, s, t)
                if b:
                    r *= self.right[b - 1][s][t]
                best = max(best, r)
        return best


def _stationary(p: tuple[tuple[Fraction, ...], ...]) -> list[Fraction]:
    """π with π P = π, Σ π = 1, by exact Gaussian elimination."""
    k = len(p)
    rows = [[p[j][i] - (1 if i == j else 0) for j in range(k)] + [Fraction(0)]
            for i in range(k - 1)]
    rows.append([Fraction(1)] * k + [Fraction(1)])
    for c in range(k):
        pivot = next(r for r in range(c, k) if rows[r][c] != 0)
        rows[c], rows[pivot] = rows[pivot], rows[c]
        rows[c] = [x / rows[c][c] for x in rows[c]]
        for r in range(k):
            if r != c and rows[r][c] != 0:
                f = rows[r][c]
                rows[r] = [x - f * y for x, y in zip(rows[r], rows[c], strict=True)]
    return [rows[i][k] for i in range(k)]


def _half_l1(u: Sequence[Fraction], v: Sequence[Fraction]) -> Fraction:
    return Fraction(sum(abs(x - y) for x, y in zip(u, v, strict=True)), 2)


def _power(x: Fraction, n: int) -> Fraction:
    return Fraction(x.numerator ** n, x.denominator ** n)


def _reversible(p: tuple[tuple[Fraction, ...], ...], pi: Sequence[Fraction]) -> bool:
    """Detailed balance π(x)P_xy = π(y)P_yx, checked exactly."""
    k = len(p)
    return all(pi[x] * p[x][y] == pi[y] * p[y][x] for x in range(k) for y in range(x))


def _fraction_matmul(a: list[list[Fraction]], b: list[list[Fraction]]) -> list[list[Fraction]]:
    return [[sum((x * y for x, y in zip(row, col, strict=True)), Fraction(0))
             for col in zip(*b, strict=True)] for row in a]


def spectral_bound(p: tuple[tuple[Fraction, ...], ...], pi: Sequence[Fraction], *,
                   squarings: int = SQUARINGS) -> Fraction:
    """A certified rational upper bound on λ* = max{|λ| : λ an eigenvalue of P other than the
    eigenvalue 1 of π} (the second-largest modulus; 1 − λ* is the absolute spectral gap).

    A = P − 1πᵀ has the spectrum of P with the eigenvalue 1 replaced by 0, so λ* = ρ(A),
    and ρ(A)^j = ρ(A^j) ≤ ‖A^j‖_∞ for any j (any induced norm bounds the spectral radius):
    λ* ≤ min_{m ≤ M} ‖A^{2^m}‖_∞^{1/2^m}, every power computed exactly in Fractions, the
    root rounded up (``exp_up(log_up(·)/j)``), then to a multiple of 2⁻⁶⁴ upward. The bound
    tends to λ* as M grows (Gelfand's formula); valid for any chain, used only for
    reversible ones (the mixing bound below needs it).

    Returns
    -------
    Fraction
        λ_up ≥ λ*, at most 1 (a stochastic matrix's eigenvalues have modulus ≤ 1).
    """
    k = len(p)
    power = [[p[x][y] - pi[y] for y in range(k)] for x in range(k)]
    best = Fraction(1)
    for m in range(1, squarings + 1):
        power = _fraction_matmul(power, power)
        norm = max(sum(abs(v) for v in row) for row in power)
        if norm == 0:
            return Fraction(0)
        root = numbers.exp_up(numbers.log_up(norm) / (1 << m))
        best = min(best, numbers.dyadic_up(root, 64))
    return best


def mixing_rates(chain: MarkovChain) -> tuple[bool, Fraction, Fraction]:
    """The two mixing rates MQMApprox chooses from, exact.

    Parameters
    ----------
    chain : MarkovChain
        One θ of the class.

    Returns
    -------
    (bool, Fraction, Fraction)
        Whether P is reversible (detailed balance π(x)P_xy = π(y)P_yx, exact), Dobrushin's
        τ = max_{x,x'} ½‖P_x· − P_x'·‖₁, and λ_up ≥ λ*, the certified bound on the second
        eigenvalue modulus (:func:`spectral_bound`); λ* ≤ τ for every stochastic P, and the
        eigengap term enters MQMApprox only when P is reversible.
    """
    p = chain.transition
    pi = _stationary(p)
    tau = max(_half_l1(r, s) for r in p for s in p)
    return _reversible(p, pi), tau, spectral_bound(p, pi)


class _Approx:
    """MQMApprox's bound for one θ: π_min, the mixing bounds d_t and e_t, all exact.

    d_t bounds |(P^t)_xy − π(y)| and e_t bounds |π_t(s) − π(s)|; each is the smaller of two
    valid bounds. Dobrushin: d_t = τ^t, e_t = τ^t·½‖q − π‖₁ (module docstring). Eigengap
    (reversible chains only, the paper's form): by the spectral decomposition of P in
    L²(π), P^t(x, y)/π(y) = 1 + Σ_{j≥2} f_j(x) f_j(y) λ_j^t with Σ_j f_j(x)² = 1/π(x), so
    by Cauchy–Schwarz |P^t(x, y) − π(y)| ≤ λ*^t √(π(y)/π(x)) ≤ λ*^t √(π_max/π_min)
    (the spectral representation of a reversible P: Levin, Peres & Wilmer, *Markov chains
    and mixing times*, ch. 12; the Cauchy–Schwarz step is the one written here), and e_t,
    an average of such terms over q, has the same bound; λ* is replaced by its certified
    upper bound (:func:`spectral_bound`) and the root by ``sqrt_up``.

    Every eigenvalue λ ≠ 1 of a stochastic matrix has |λ| ≤ τ (τ is P's contraction of
    zero-sum vectors in L1), so λ* ≤ τ: the eigengap term wins only when λ* < τ and t is
    large enough to pay for √(π_max/π_min) ≥ 1; otherwise the bound is Dobrushin's.
    """

    def __init__(self, chain: MarkovChain, length: int, width: int) -> None:
        p = chain.transition
        pi = _stationary(p)
        self.pmin: Fraction = min(pi)
        self.tau = max(_half_l1(r, s) for r in p for s in p)
        self.tv = _half_l1(chain.initial, pi)
        self.width = width
        self.lam: Fraction | None = None  # λ_up (reversible chains only)
        self.spread = Fraction(1)  # ≥ √(π_max/π_min)
        if _reversible(p, pi):
            self.lam = spectral_bound(p, pi)
            self.spread = numbers.dyadic_up(numbers.sqrt_up(max(pi) / self.pmin), 64)

    def _mixing(self, t: int, start: Fraction) -> Fraction:
        """min(start·τ^t, √(π_max/π_min)·λ_up^t): the tighter valid bound at time t."""
        dobrushin = start * _power(self.tau, t)
        if self.lam is None:
            return dobrushin
        return min(dobrushin, self.spread * _power(self.lam, t))

    def _factor(self, d: Fraction) -> Fraction | None:
        return (self.pmin + d) / (self.pmin - d) if d < self.pmin else None

    def ratio(self, i: int, a: int, b: int) -> Fraction | None:
        """The bound on exp e_θ(Q | i); None where it does not apply (d ≥ π_min)."""
        r = Fraction(1)
        parts = ([self._mixing(a, Fraction(1)), self._mixing(i, self.tv)] if a else []) + (
            [self._mixing(b, Fraction(1))] if b else [])
        for d in parts:
            f = self._factor(d)
            if f is None:
                return None
            r *= f
        return r

    def _floats(self, t: np.ndarray, start: float) -> np.ndarray:
        d = start * float(self.tau) ** t
        if self.lam is not None:
            d = np.minimum(d, float(self.spread) * float(self.lam) ** t)
        return d

    def table(self, i: int) -> np.ndarray:
        """Float bound on e(a, b), inf where it does not apply: shape (W + 1, W + 1)."""
        pmin = float(self.pmin)
        d = self._floats(np.arange(self.width + 1, dtype=np.float64), 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(d < pmin, np.log((pmin + d) / (pmin - d)), np.inf)
        e_i = float(self._floats(np.array([float(i)]), float(self.tv))[0])
        start = math.log((pmin + e_i) / (pmin - e_i)) if e_i < pmin else math.inf
        left = np.concatenate([[0.0], f[1:] + start])
        right = np.concatenate([[0.0], f[1:]])
        return left[:, None] + right[None, :]


# -- the scale ----------------------------------------------------------------------------
@dataclass(frozen=True)
class QuiltScale:
    """σ_max and where it is attained.

    Attributes
    ----------
    scale : Fraction
        σ_max, the discrete Laplace scale per coordinate (already times L), exact.
    chain, node : int
        The θ (index in Θ) and the node i whose best quilt sets σ_max.
    left, right : int
        That quilt's widths a, b (0: no quilt node on that side; both 0: the trivial quilt).
    nearby : int
        |X_N| of that quilt.
    method : str
        "exact" (MQMExact) or "approx" (MQMApprox).
    """

    scale: Fraction
    chain: int
    node: int
    left: int
    right: int
    nearby: int
    method: str


def _nearby(i: int, a: int, b: int, length: int) -> int:
    lo = i - a + 1 if a else 0
    hi = i + b - 1 if b else length - 1
    return hi - lo + 1


def _best(model: _Exact | _Approx, i: int, length: int, eps: Fraction, lipschitz: int,
          width: int) -> tuple[Fraction, int, int]:
    """min over quilts of node i: float search, then the chosen quilt's exact σ."""
    table = model.table(i)
    a_max, b_max = min(width, i), min(width, length - 1 - i)
    table[a_max + 1:, :] = np.inf  # the quilt node must lie in the series
    table[:, b_max + 1:] = np.inf
    ai, bi = np.indices(table.shape)
    lo = np.where(ai > 0, i - ai + 1, 0)
    hi = np.where(bi > 0, i + bi - 1, length - 1)
    slack = float(eps) - table
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.where(slack > MARGIN, (hi - lo + 1) / slack, np.inf)
    a, b = (int(x) for x in np.unravel_index(int(np.argmin(sigma)), sigma.shape))
    trivial = Fraction(lipschitz * length) / eps
    ratio = model.ratio(i, a, b) if (a or b) else Fraction(1)
    if ratio is None or not (a or b):
        return trivial, 0, 0
    e = numbers.log_up(ratio)
    if e >= eps:
        return trivial, 0, 0
    exact = Fraction(lipschitz * _nearby(i, a, b, length)) / (eps - e)
    return (exact, a, b) if exact < trivial else (trivial, 0, 0)


def quilt_scale(model_class: MarkovClass, length: int, epsilon: Number, *,
                lipschitz: int = 1, method: str = "exact",
                max_width: int = DEFAULT_WIDTH) -> QuiltScale:
    """σ_max of the Markov quilt mechanism (Song, Wang & Chaudhuri 2017, Alg. 2 MQMExact;
    MQMApprox of §4 with the Dobrushin mixing bound): data-free.

    σ_max = max_{θ ∈ Θ} max_{i < T} min_Q L·|X_N| / (ε − e_θ(Q | i)) over the quilts
    {X_{i−a}, X_{i+b}} with a, b ≤ ``max_width`` or absent (the module docstring has e_θ).

    Parameters
    ----------
    model_class : MarkovClass
        Θ (from :func:`markov_class`).
    length : int
        T, 1 ≤ T ≤ 4096 (public).
    epsilon : number
        ε > 0 in nats.
    lipschitz : int
        L ≥ 1: F changes by ≤ L (L1) when one node changes (a histogram: 2; a count: 1).
    method : {"exact", "approx"}
    max_width : int
        W, 1 ≤ W ≤ 64: the widest quilt searched (cost O(|Θ|·T·W²·k²); about 7 s a
        chain at T = 4096, W = 64, k = 8, 0.1 s at T = 366, W = 16, k = 3).

    Returns
    -------
    QuiltScale
        σ_max exact, ≥ the formula's value, ≤ L·T/ε (the trivial quilt) and ≥ L/ε.

    Raises
    ------
    DomainError
        Any argument outside the ranges above.
    """
    if not isinstance(model_class, MarkovClass):
        raise DomainError("model_class must be a MarkovClass (dpkit.apps.correlated.markov_class)")
    t = numbers.integer(length, "length", minimum=1)
    if t > MAX_LENGTH:
        raise DomainError(f"length must be at most {MAX_LENGTH}")
    eps = numbers.positive(epsilon, "epsilon", up=False)
    lip = numbers.integer(lipschitz, "lipschitz", minimum=1)
    w = numbers.integer(max_width, "max_width", minimum=1)
    if w > MAX_WIDTH:
        raise DomainError(f"max_width must be at most {MAX_WIDTH}")
    if method not in METHODS:
        raise DomainError(f"method must be one of {METHODS}")
    best: QuiltScale | None = None
    for c, chain in enumerate(model_class.chains):
        model = _Exact(chain, t, w) if method == "exact" else _Approx(chain, t, w)
        for i in range(t):
            sigma, a, b = _best(model, i, t, eps, lip, w)
            if best is None or sigma > best.scale:
                best = QuiltScale(sigma, c, i, a, b, _nearby(i, a, b, t), method)
    assert best is not None  # Θ is never empty
    # a short exact number for the record: rounded up to a multiple of 2^-32
    return QuiltScale(numbers.dyadic_up(best.scale, 32), *list(vars(best).values())[1:])


# -- the release --------------------------------------------------------------------------
@dataclass(frozen=True)
class QuiltRelease:
    """A Markov quilt release: ``values`` (noisy counts), its ``scale`` (the planned
    σ_max), the ``quilt`` that set it, the stated ``guarantee`` and the ``release`` record."""

    values: np.ndarray
    scale: QuiltScale
    guarantee: Pufferfish
    release: Release[np.ndarray]


def _series(series: Sequence[int] | np.ndarray, k: int) -> np.ndarray:
    arr = np.asarray(series)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise DomainError("series must be a non-empty 1-d array of integer states")
    if int(arr.min()) < 0 or int(arr.max()) >= k:
        raise DomainError(f"series values must be declared states 0…{k - 1}")
    return arr.astype(np.int64)


def _secrets() -> str:
    return "X_t = a vs X_t = b, every day t and states a ≠ b"


def _audit() -> list[AuditCase]:
    return audit_cases()


@register(audit=_audit)
def markov_quilt_release(series: Sequence[int] | np.ndarray, model_class: MarkovClass, *,
                         epsilon: Number, statistic: str = "histogram", state: int = 0,
                         method: str = "exact", max_width: int = DEFAULT_WIDTH,
                         accountant: AccountantLike = None) -> QuiltRelease:
    """Release a state histogram (or one state's count) of a Markov series by the Markov
    quilt mechanism (Song, Wang & Chaudhuri, SIGMOD 2017, Alg. 1–2).

    Parameters
    ----------
    series : 1-d integer array, shape (T,)
        States in {0, …, k − 1}; T is public (≤ 4096).
    model_class : MarkovClass
        Θ, declared (fitted on held-out data, never on ``series``).
    epsilon : number
        ε > 0 (nats).
    statistic : {"histogram", "count"}
        Counts of every state (shape (k,), L = 2) or of ``state`` (shape (1,), L = 1).
        The fraction of time in a state is the count over T (post-processing).
    method : {"exact", "approx"}
        MQMExact or MQMApprox (:func:`quilt_scale`).
    max_width : int
        The widest quilt searched (1–64).
    accountant : AccountantLike
        None, an Accountant, a PrivacyFilter or a Session: charged ``PureDP(ε)``.

    Returns
    -------
    QuiltRelease
        Noisy counts (int64): F(X) + Z, Z discrete Laplace of scale σ_max per coordinate.

    Raises
    ------
    DomainError
        Before the debit: a bad argument, a series that is not integer states of Θ.
    BudgetExceededError, ReleaseFailedError
        As :func:`dpkit.mechanisms.frontend.charge`.

    Notes
    -----
    Guarantees: ε-Pufferfish for the secret pairs (X_t = a, X_t = b) and every θ ∈ Θ
    (Song, Wang & Chaudhuri 2017, §4, MQM's privacy theorem), stated in ``guarantee``; and ε-DP for
    substituting one day's value, since σ_max ≥ L/ε (Dwork & Roth Thm 3.6 for the discrete
    Laplace), which is what the accountant debits. The noise is drawn through
    :func:`~dpkit.mechanisms.frontend.noisy` at sensitivity Δ = ε·σ_max, i.e. scale σ_max.
    """
    if statistic not in STATISTICS:
        raise DomainError(f"statistic must be one of {STATISTICS}")
    if not isinstance(model_class, MarkovClass):
        raise DomainError("model_class must be a MarkovClass (dpkit.apps.correlated.markov_class)")
    x = _series(series, model_class.states)
    target = numbers.integer(state, "state", minimum=0)
    if target >= model_class.states:
        raise DomainError("state must be a declared state")
    check_accountant(accountant)
    lip = 2 if statistic == "histogram" else 1
    scale = quilt_scale(model_class, x.size, epsilon, lipschitz=lip, method=method,
                        max_width=max_width)
    eps = numbers.positive(epsilon, "epsilon", up=False)
    guarantee = Pufferfish(eps, _secrets(), model_class.describe())
    description = (f"markov_quilt_release({statistic}, T={x.size}, method={method}, "
                   f"W={max_width}): ε-DP per day; {guarantee}")

    def compute() -> np.ndarray:
        counts = np.bincount(x, minlength=model_class.states)
        values = counts if statistic == "histogram" else counts[target:target + 1]
        drawn = noisy(values, eps * scale.scale, PureDP(eps), statistic="counts")
        return np.asarray(drawn.value, dtype=np.int64)

    plan = [noise_row(eps * scale.scale, PureDP(eps), "counts")]
    values, record = charge_record(accountant, PureDP(eps), description, compute, plan)
    return QuiltRelease(values, scale, guarantee, record)


# -- the audit ------------------------------------------------------------------------------
def _count_law(chain: MarkovChain, length: int, node: int, value: int) -> list[Fraction]:
    """P(#{t: X_t = 1} = c | X_node = value, θ) for c = 0…T, by enumeration (tiny T, k)."""
    k = len(chain.initial)
    law = [Fraction(0)] * (length + 1)
    for code in range(k ** length):
        xs = [(code // k ** t) % k for t in range(length)]
        if xs[node] != value:
            continue
        p = chain.initial[xs[0]]
        for s, t in zip(xs, xs[1:], strict=False):
            p *= chain.transition[s][t]
        law[xs.count(1)] += p
    total = sum(law)
    return [p / total for p in law]


AUDIT_CHAIN = MarkovChain((Fraction(1, 2), Fraction(1, 2)),
                          ((Fraction(49, 50), Fraction(1, 50)),
                           (Fraction(1, 50), Fraction(49, 50))))
AUDIT_LENGTH = 3


def _sampler(sigma: Fraction, eps: Fraction) -> Sampler:
    """``sample(data, n)``: n outputs of the count of state 1 + noise, X drawn from θ
    given X_0 = data[0] (the prior is part of the Pufferfish pair)."""
    laws = {v: _count_law(AUDIT_CHAIN, AUDIT_LENGTH, 0, v) for v in (0, 1)}

    def sample(data: np.ndarray, n: int) -> np.ndarray:
        law = laws[int(np.asarray(data).reshape(-1)[0])]
        denom = math.lcm(*(p.denominator for p in law))
        cuts = np.cumsum([int(p * denom) for p in law])
        u = rng.uniform_below(denom, size=n)
        counts = np.searchsorted(cuts, u, side="right").astype(np.int64)
        return np.asarray(noisy(counts, eps * sigma, PureDP(eps)).value)

    return sample


def audit_cases() -> list[AuditCase]:
    """The Pufferfish pair as the audit's neighbouring pair: the input is the secret value
    of day 0 (x = [0], x' = [1]); the sampler draws the rest of the chain from θ given it
    (a near-deterministic 2-state chain, T = 3, so the bound is nearly tight) and releases
    the count of state 1 by MQMExact at ε = 1. Broken: half of σ_max."""
    eps = Fraction(1)
    model = MarkovClass(2, (AUDIT_CHAIN,))
    sigma = quilt_scale(model, AUDIT_LENGTH, eps).scale
    good = _sampler(sigma, eps)
    claim = Measurement(lambda d: good(d, 1), HammingDistance(), PureDP,
                        lambda d: PureDP(eps * d), "markov_quilt_release",
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase("markov_quilt_release", claim, good, _sampler(sigma / 2, eps),
                      np.array([0]), np.array([1]))]
