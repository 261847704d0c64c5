"""A jointly differentially private mediator for a large parallel-links congestion game.

Sources: Kearns, Pai, Roth & Ullman, *Mechanism design in large games: incentives and
privacy*, ITCS 2014 (joint differential privacy; a mediator that computes an approximate
equilibrium under joint DP makes "report truthfully, then follow the advice" an approximate
ex-post Nash equilibrium of the mediated game); Rogers & Roth, *Asymptotically truthful
equilibrium selection in large congestion games*, EC 2014 (the same for congestion games,
with approximate Nash equilibria); the Billboard Lemma (Hsu, Huang, Roth, Roughgarden & Wu,
*Private matchings and allocations*, STOC 2014: outputs of the form f_j(DP output, own
data) are jointly DP); Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*,
§10.2 ("Differential privacy as a tool in mechanism design": approximately truthful
equilibrium selection under joint DP — cited without definition or lemma numbers).

Game. n players, m parallel links, T public types. A type t is a public, non-empty set
A_t ⊆ {0, …, m − 1} of links the player may use (``allowed[t]``); a player reports its type.
Link ℓ costs c_ℓ(x) = a_ℓ + b_ℓ · x / n to each of its x users (public affine latencies,
a_ℓ, b_ℓ ≥ 0; n, the number of players, is public). Utility is −cost.

Mediator (:func:`private_equilibrium`):

1. Noisy histogram: ĉ_t = c_t + Z_t, c_t the number of players reporting t, Z_t discrete
   Laplace of scale s = Δ/ε with Δ = 2 — the one calibrated entry
   (:func:`dpkit.mechanisms.make_noise`), charged once (``PureDP(ε)``). Neighbours:
   *substitute one player's report* (n fixed and public — the neighbour notion of joint DP,
   where player i's type changes), under which the histogram moves by 2 in L1.
2. Post-processing, from ĉ alone: the masses ĉ_t⁺ = max(ĉ_t, 0) are split over each type's
   allowed links by a Wardrop equilibrium of the nonatomic game they define
   (:func:`wardrop_split`: the Beckmann potential Σ_ℓ a_ℓ x_ℓ + b_ℓ x_ℓ²/(2n), minimised by
   SciPy's SLSQP — deterministic, floats, no data); each type's split is rounded to exact
   probabilities p_tℓ = N_tℓ / 2^32 (:func:`published_distribution`); a type of mass 0
   gets the cheapest allowed link at the published loads y_ℓ = Σ_t ĉ_t⁺ p_tℓ. The table
   p (the "billboard"), ĉ, y and the regret bound below are the ε-DP release.
3. Suggestions: player i gets a link drawn from p_{t_i} (its *reported* type's row) by an
   exact draw u ~ Uniform{0, …, 2^32 − 1} from :mod:`dpkit.core.rng` (:func:`suggest`).

Privacy: ε-joint-DP. The suggestion to player j is a function of the ε-DP billboard, of t_j
and of fresh coins, so for every i the joint law of the billboard and of every other
player's suggestion changes by at most a factor e^ε when t_i changes (the Billboard Lemma,
Kearns et al. 2014; Dwork & Roth §10.2). The whole vector of suggestions is *not* ε-DP:
player i's suggestion depends on its own report. The mediator must deliver each suggestion
to its player alone; whoever sees all of them sees the reports' traces.

Approximate equilibrium (derived here, in the pattern of Kearns et al. and Rogers & Roth:
noise error plus sampling error times the latencies' slope). Let K = s · ln(2T/β₁) and
h = √(n · ln(2m/β₂) / 2), β₁ = β₂ = β/2. Then with probability ≥ 1 − β:

- every |Z_t| ≤ K (discrete Laplace tail P(|Z| ≥ k) ≤ 2e^{−k/s}, a union over T types),
  so the expected realised load μ_ℓ = Σ_t c_t p_tℓ is within D_ℓ = K · Σ_t p_tℓ of y_ℓ
  (|c_t − ĉ_t⁺| ≤ |Z_t|);
- every realised load L_ℓ is within h of μ_ℓ (Hoeffding over the n independent draws given
  the billboard, a union over m links).

On that event a player of type t told ℓ ∈ supp p_t gains by moving to ℓ′ ∈ A_t at most
c_ℓ(L_ℓ) − c_ℓ′(L_ℓ′ + 1) ≤ c_ℓ(y_ℓ) − c_ℓ′(y_ℓ′) + (b_ℓ E_ℓ + b_ℓ′ E_ℓ′)/n, E_ℓ = D_ℓ + h,
and the published ``regret_bound`` is the maximum of this over t, ℓ ∈ supp p_t and
ℓ′ ∈ A_t ∖ {ℓ} (and 0), capped at C = max_ℓ (a_ℓ + b_ℓ) (no cost exceeds C). It includes
the *equilibrium gap* γ = max c_ℓ(y_ℓ) − c_ℓ′(y_ℓ′) of the published table at its own
loads, computed from the table itself, so neither the solver's tolerance nor the rounding
to 2^−32 is assumed away. It is at most
γ + 2·b_max·(T·K + h)/n: O((T log(T/β)/ε + √(n log(m/β)))/n), vanishing as n grows.

Approximate truthfulness (Kearns et al. 2014's argument, made explicit). Fix player i of
true type t, the others truthful and following. Any misreport t′ followed by any action
rule costs i at least BR(a_{−i}) = min_{ℓ∈A_t} c_ℓ(L^{−i}_ℓ + 1), a function of the others'
actions only, in [0, C], C = max_ℓ (a_ℓ + b_ℓ). By joint DP the law of a_{−i} moves by at
most e^ε, so E_lie[BR] ≥ e^{−ε} E_truth[BR]; truthful following costs E_truth[BR] +
E[regret_i]. Hence the expected cost saved by any deviation is at most
(1 − e^{−ε}) · E_truth[BR] + E[regret_i] ≤ (1 − e^{−ε}) · C + E[regret_bound] + β · C
(≤ (e^ε − 1) · C + …). This is a bound on expected gains, not a guarantee that lying never
pays in a given run.

Limits: the game is the simplest one the chapter's construction applies to (parallel links,
affine latencies, access restricted by a public type); T ≤ 16 types, m ≤ 16 links (the
solver is a dense SQP over ≤ T·m variables), n ≤ 10^7.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from dpkit.core import numbers, rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import Number
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend, make_noise
from dpkit.mechanisms.frontend import AccountantLike, charge, check_accountant
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["CongestionGame", "EquilibriumResult", "congestion_game", "private_equilibrium",
           "wardrop_split", "published_distribution", "suggest", "regret_bound", "regret",
           "audit_cases", "SENSITIVITY", "DENOMINATOR"]

MAX_LINKS = 16
MAX_TYPES = 16
MAX_PLAYERS = 10_000_000
SENSITIVITY = 2  # substitute one report: two type counts move by one each
DENOMINATOR = 1 << 32  # published probabilities are exact multiples of 2^-32


@dataclass(frozen=True)
class CongestionGame:
    """A public parallel-links congestion game (build it with :func:`congestion_game`).

    Attributes
    ----------
    latency_a, latency_b : ndarray of float, shape (m,)
        c_ℓ(x) = a_ℓ + b_ℓ · x / n, in cost units (e.g. minutes); a_ℓ, b_ℓ ≥ 0, finite.
    allowed : ndarray of bool, shape (T, m)
        ``allowed[t, ℓ]``: a player of type t may use link ℓ (every row non-empty).
    """

    latency_a: np.ndarray
    latency_b: np.ndarray
    allowed: np.ndarray

    @property
    def links(self) -> int:
        """m, the number of links."""
        return int(self.latency_a.size)

    @property
    def types(self) -> int:
        """T, the number of types."""
        return int(self.allowed.shape[0])

    @property
    def max_cost(self) -> float:
        """C = max_ℓ (a_ℓ + b_ℓ): no link costs more (its load is at most n)."""
        return float(np.max(self.latency_a + self.latency_b))

    def costs(self, loads: np.ndarray, n: int) -> np.ndarray:
        """c_ℓ(loads_ℓ) for loads of shape (m,) (players, may be fractional), n players."""
        return self.latency_a + self.latency_b * np.asarray(loads, dtype=np.float64) / n


@dataclass(frozen=True)
class EquilibriumResult:
    """The mediator's output.

    Attributes
    ----------
    suggestions : ndarray of int64, shape (n,)
        Player i's suggested link, drawn from its reported type's row of ``distribution``.
        For delivery to each player alone: the vector as a whole is not ε-DP.
    numerators : ndarray of int64, shape (T, m)
        The published table exactly: p_tℓ = numerators[t, ℓ] / :data:`DENOMINATOR` (each
        row sums to DENOMINATOR; zero off the allowed links). ε-DP.
    distribution : ndarray of float, shape (T, m)
        The same probabilities as floats (exact: multiples of 2^-32).
    noisy_counts : ndarray of int64, shape (T,)
        ĉ_t, the noisy number of players reporting each type. ε-DP.
    loads : ndarray of float, shape (m,)
        y_ℓ = Σ_t max(ĉ_t, 0) p_tℓ, the loads the table is an equilibrium for. ε-DP.
    gap : float
        γ ≥ 0, the table's equilibrium gap at ``loads`` (cost units; module docstring).
    regret_bound : float
        With probability ≥ 1 − ``beta``, no player who follows gains more than this by
        switching links (cost units; module docstring). ε-DP.
    beta : float
        The bound's failure probability.
    epsilon : Fraction
        ε (nats) of the joint-DP guarantee.
    scale : Fraction
        The discrete Laplace scale s = Δ/ε of the histogram (Δ = 2).
    """

    suggestions: np.ndarray
    numerators: np.ndarray
    distribution: np.ndarray
    noisy_counts: np.ndarray
    loads: np.ndarray
    gap: float
    regret_bound: float
    beta: float
    epsilon: Fraction
    scale: Fraction


def _latencies(x: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
        flags = [isinstance(v, bool | np.bool_) for v in np.asarray(x, dtype=object).ravel()]
    except (TypeError, ValueError):
        raise DomainError(f"{name} must be numbers") from None
    if any(flags):
        raise DomainError(f"{name} must be numbers, not booleans")
    if arr.ndim != 1 or not 1 <= arr.size <= MAX_LINKS:
        raise DomainError(f"{name} must be a 1-D array of 1 to {MAX_LINKS} links")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise DomainError(f"{name} must be finite and ≥ 0")
    return arr


def congestion_game(latency_a: Sequence[Number], latency_b: Sequence[Number],
                    allowed: npt.ArrayLike) -> CongestionGame:
    """A validated parallel-links congestion game.

    Parameters
    ----------
    latency_a, latency_b : array-like of numbers, shape (m,)
        The affine latencies c_ℓ(x) = a_ℓ + b_ℓ · x / n (finite, ≥ 0; 1 ≤ m ≤ 16).
    allowed : array-like of bool or {0, 1}, shape (T, m)
        The links each type may use (1 ≤ T ≤ 16; every row has at least one link).

    Returns
    -------
    CongestionGame

    Raises
    ------
    DomainError
        Non-numeric, NaN, infinite or negative latencies; mismatched lengths; more than 16
        links or types; an ``allowed`` that is not a 2-D 0/1 table or has an empty row.
    """
    a = _latencies(latency_a, "latency_a")
    b = _latencies(latency_b, "latency_b")
    if a.size != b.size:
        raise DomainError("latency_a and latency_b must have the same length m")
    try:
        raw = np.asarray(allowed)
    except (TypeError, ValueError):
        raise DomainError("allowed must be a (T, m) table of 0/1") from None
    if raw.dtype != np.bool_ and not np.issubdtype(raw.dtype, np.integer):
        raise DomainError("allowed must hold booleans or the integers 0 and 1")
    if raw.ndim != 2 or raw.shape[1] != a.size or not 1 <= raw.shape[0] <= MAX_TYPES:
        raise DomainError(f"allowed must have shape (T, m) with m = {a.size} and "
                          f"1 ≤ T ≤ {MAX_TYPES}")
    if raw.dtype != np.bool_ and not np.all((raw == 0) | (raw == 1)):
        raise DomainError("allowed must hold only 0 and 1")
    mask = raw.astype(bool)
    if not np.all(mask.any(axis=1)):
        raise DomainError("every type must be allowed at least one link")
    for arr in (a, b, mask):
        arr.setflags(write=False)
    return CongestionGame(a, b, mask)


def _check_game(game: Any) -> CongestionGame:
    if not isinstance(game, CongestionGame):
        raise DomainError("game must be a CongestionGame (build it with congestion_game)")
    return game


def _check_types(types: Any, t: int) -> np.ndarray:
    try:
        arr = np.asarray(types)
    except (TypeError, ValueError):
        raise DomainError("types must be integers") from None
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise DomainError("types must be an integer array (type indices 0 … T − 1)")
    if arr.ndim != 1 or not 1 <= arr.size <= MAX_PLAYERS:
        raise DomainError(f"types must be a 1-D array of 1 to {MAX_PLAYERS} players")
    if arr.min() < 0 or arr.max() >= t:
        raise DomainError(f"every type must be in 0 … {t - 1}")
    return arr.astype(np.int64)


def _players(n: Any) -> int:
    return numbers.integer(n, "n", minimum=1, maximum=MAX_PLAYERS)


def wardrop_split(game: CongestionGame, masses: npt.ArrayLike, n: int) -> np.ndarray:
    """A Wardrop (nonatomic Nash) equilibrium: each type's mass split over its allowed links.

    Minimises the Beckmann potential Φ(f) = Σ_ℓ (a_ℓ x_ℓ + b_ℓ x_ℓ² / (2n)), x_ℓ = Σ_t f_tℓ,
    over f ≥ 0, Σ_ℓ f_tℓ = max(masses_t, 0), f_tℓ = 0 off the allowed links (Beckmann,
    McGuire & Winsten 1956: its minimisers are the Wardrop equilibria), by SciPy's SLSQP in
    shares of n from the even split — deterministic, floats. A failed or non-finite solve
    returns the even split (never raises on the masses): the table's gap, not the solver,
    is what the guarantees use.

    Parameters
    ----------
    game : CongestionGame
    masses : array-like of numbers, shape (T,)
        The (noisy) number of players of each type; negative values count as 0.
    n : int
        The number of players that normalises the latencies.

    Returns
    -------
    ndarray of float, shape (T, m)
        f_tℓ, in players; row t sums to max(masses_t, 0).
    """
    g = _check_game(game)
    w = np.maximum(np.nan_to_num(np.asarray(masses, dtype=np.float64)), 0.0) / _players(n)
    if w.shape != (g.types,):
        raise DomainError(f"masses must have shape ({g.types},)")
    rows, cols = np.nonzero(g.allowed & (w[:, None] > 0))
    flows = np.zeros(g.allowed.shape)
    if rows.size == 0:
        return flows
    share = w[rows] / g.allowed.sum(axis=1)[rows]
    active = np.unique(rows)
    constraint = (rows[None, :] == active[:, None]).astype(np.float64)

    def loads(v: np.ndarray) -> np.ndarray:
        return np.bincount(cols, weights=v, minlength=g.links)

    def potential(v: np.ndarray) -> float:
        x = loads(v)
        return float(g.latency_a @ x + 0.5 * g.latency_b @ (x * x))

    def gradient(v: np.ndarray) -> np.ndarray:
        return (g.latency_a + g.latency_b * loads(v))[cols]

    with np.errstate(all="ignore"):
        try:
            res = minimize(potential, share, jac=gradient, method="SLSQP",
                           bounds=[(0.0, None)] * rows.size,
                           constraints={"type": "eq", "fun": lambda v: constraint @ v - w[active],
                                        "jac": lambda v: constraint},
                           options={"ftol": 1e-15, "maxiter": 500})
            v = np.maximum(res.x, 0.0)
        except (ValueError, ArithmeticError):
            v = share
    if not np.all(np.isfinite(v)):
        v = share
    totals = np.bincount(rows, weights=v, minlength=g.types)
    v = np.where(totals[rows] > 0, v * w[rows] / np.where(totals[rows] > 0, totals[rows], 1),
                 share)
    flows[rows, cols] = v * n
    return flows


def _cheapest(game: CongestionGame, costs: np.ndarray) -> np.ndarray:
    """Per type, the first allowed link of least cost."""
    return np.argmin(np.where(game.allowed, costs[None, :], np.inf), axis=1)


def published_distribution(game: CongestionGame, noisy_counts: npt.ArrayLike, n: int
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The billboard: each type's exact suggestion law, from the noisy counts alone.

    Parameters
    ----------
    game : CongestionGame
    noisy_counts : array-like of int, shape (T,)
        ĉ (negative values count as 0).
    n : int
        The (public) number of players.

    Returns
    -------
    numerators : ndarray of int64, shape (T, m)
        p_tℓ = numerators[t, ℓ] / 2^32: the :func:`wardrop_split` rounded by cumulative
        rounding (rows sum to 2^32 exactly, zero off the allowed links); a type of mass 0
        gets its cheapest allowed link at the loads of the others.
    loads : ndarray of float, shape (m,)
        y_ℓ = Σ_t max(ĉ_t, 0) p_tℓ.

    Notes
    -----
    Deterministic post-processing of ĉ: the same counts give the same table.
    """
    g = _check_game(game)
    n = _players(n)
    mass = np.maximum(np.asarray(noisy_counts, dtype=np.float64), 0.0)
    flows = wardrop_split(g, mass, n)
    numer = np.zeros(g.allowed.shape, dtype=np.int64)
    positive = mass > 0
    if positive.any():
        p = flows[positive] / flows[positive].sum(axis=1, keepdims=True)
        cum = np.minimum(np.round(np.cumsum(p, axis=1) * DENOMINATOR), DENOMINATOR)
        last = g.links - 1 - np.argmax(g.allowed[positive][:, ::-1], axis=1)
        cum[np.arange(g.links)[None, :] >= last[:, None]] = DENOMINATOR
        numer[positive] = np.diff(cum.astype(np.int64), axis=1, prepend=0)
    loads = mass @ (numer / DENOMINATOR)
    idle = np.flatnonzero(~positive)
    numer[idle, _cheapest(g, g.costs(loads, n))[idle]] = DENOMINATOR
    return numer, loads


def suggest(numerators: np.ndarray, types: np.ndarray) -> np.ndarray:
    """Player i's link drawn from row ``types[i]`` of the table, exactly.

    One draw u_i ~ Uniform{0, …, 2^32 − 1} per player (:func:`dpkit.core.rng.uniform_below`);
    the link is the first ℓ with u_i < Σ_{k≤ℓ} numerators[t_i, k], so P(ℓ) = p_{t_i ℓ}
    exactly. Returns int64, shape (n,).

    Raises
    ------
    DomainError
        A table that is not (T, m) non-negative integers with rows summing to 2^32, or
        types that are not 1-D integers in 0 … T − 1.
    """
    table = np.asarray(numerators)
    if (table.ndim != 2 or not np.issubdtype(table.dtype, np.integer) or np.any(table < 0)
            or np.any(table.sum(axis=1) != DENOMINATOR)):
        raise DomainError("numerators must be a (T, m) integer table, rows summing to 2^32")
    t = _check_types(types, table.shape[0])
    cum = np.cumsum(table.astype(np.int64), axis=1)
    u = rng.uniform_below(DENOMINATOR, size=t.size).astype(np.int64)
    return np.sum(cum[t] <= u[:, None], axis=1).astype(np.int64)


def _pair_gaps(game: CongestionGame, numerators: np.ndarray, loads: np.ndarray, n: int,
               slack: np.ndarray) -> float:
    """max over t, ℓ ∈ supp p_t, ℓ′ ∈ A_t ∖ {ℓ} of c_ℓ(y_ℓ) − c_ℓ′(y_ℓ′) + slack_ℓ + slack_ℓ′,
    and 0."""
    cost = game.costs(loads, n)
    worst = 0.0
    for t in range(game.types):
        here = np.flatnonzero(numerators[t] > 0)
        there = np.flatnonzero(game.allowed[t])
        diff = (cost[here, None] + slack[here, None]) - (cost[None, there] + slack[None, there])
        diff[here[:, None] == there[None, :]] = -np.inf
        if diff.size:
            worst = max(worst, float(np.max(diff)))
    return worst


def regret_bound(game: CongestionGame, numerators: np.ndarray, noisy_counts: npt.ArrayLike, n: int,
                 scale: Number, beta: float) -> tuple[float, float]:
    """(γ, R): the table's equilibrium gap and the regret bound at failure probability β.

    R = max(0, max_{t, ℓ∈supp p_t, ℓ′∈A_t∖{ℓ}} c_ℓ(y_ℓ) − c_ℓ′(y_ℓ′) + (b_ℓE_ℓ + b_ℓ′E_ℓ′)/n),
    E_ℓ = K·Σ_t p_tℓ + h, K = s·ln(4T/β), h = √(n·ln(4m/β)/2), capped at C =
    ``game.max_cost`` (module docstring). A function
    of public numbers and the ε-DP table only. Cost units.
    """
    g = _check_game(game)
    n = _players(n)
    b = _beta(beta)
    s = float(numbers.positive(scale, "scale"))
    numer = np.asarray(numerators, dtype=np.int64)
    mass = np.maximum(np.asarray(noisy_counts, dtype=np.float64), 0.0)
    p = numer / DENOMINATOR
    loads = mass @ p
    k = s * math.log(4 * g.types / b)
    h = math.sqrt(n * math.log(4 * g.links / b) / 2)
    drift = g.latency_b * (k * p.sum(axis=0) + h) / n
    return (_pair_gaps(g, numer, loads, n, np.zeros(g.links)),
            min(_pair_gaps(g, numer, loads, n, drift), g.max_cost))


def regret(game: CongestionGame, types: npt.ArrayLike, suggestions: npt.ArrayLike) -> np.ndarray:
    """Each player's gain from switching alone, at the realised loads: c_ℓ(L_ℓ) −
    min(c_ℓ(L_ℓ), min_{ℓ′∈A_t, ℓ′≠ℓ} c_ℓ′(L_ℓ′ + 1)), ℓ its link, t its type. Reads the
    true types and every suggestion without noise: for analysis (tests, benchmarks), never
    for a release. float, shape (n,), ≥ 0."""
    g = _check_game(game)
    t = _check_types(types, g.types)
    s = np.asarray(suggestions, dtype=np.int64)
    n = t.size
    load = np.bincount(s, minlength=g.links)
    own = g.costs(load, n)
    move = g.costs(load + 1, n)
    table = np.empty((g.types, g.links))
    for link in range(g.links):
        options = np.where(g.allowed, move[None, :], np.inf)
        options[:, link] = own[link]
        table[:, link] = own[link] - options.min(axis=1)
    return table[t, s]


def _beta(beta: Any) -> float:
    value = float(numbers.as_typed(beta))
    if not 0 < value < 1:
        raise DomainError("beta must be in (0, 1)")
    return value


@register(audit=lambda: audit_cases())  # the audit battery's case
def private_equilibrium(types: npt.ArrayLike, game: CongestionGame, *, epsilon: Number,
                        beta: Number = 1e-6,
                        accountant: AccountantLike = None) -> EquilibriumResult:
    """Mediate a parallel-links congestion game under ε-joint differential privacy.

    Parameters
    ----------
    types : array-like of int, shape (n,)
        Each player's reported type, in 0 … T − 1 (1 ≤ n ≤ 10^7; n is public).
    game : CongestionGame
        The public game (:func:`congestion_game`).
    epsilon : number
        ε (nats), charged once.
    beta : number
        Failure probability of the published regret bound, in (0, 1).
    accountant : Accountant, PrivacyFilter, Session or None
        Charged PureDP(ε) before the reports are counted.

    Returns
    -------
    EquilibriumResult
        Suggestions (one per player), the billboard (exact table, noisy counts, loads), the
        table's gap γ and the regret bound at ``beta``.

    Raises
    ------
    DomainError
        ε ≤ 0 or not a number, β outside (0, 1), a game that is not a CongestionGame,
        types that are not a 1-D integer array in 0 … T − 1, a bad accountant — before any
        debit.
    BudgetExceededError
        The accountant cannot pay ε (nothing debited).

    Notes
    -----
    Privacy map: substitute-one player's report ↦ ε-joint-DP (the histogram is ε-DP with
    discrete Laplace noise of scale 2/ε, the calibrated entry's closed form; the
    suggestions have the Billboard Lemma's form, Hsu et al. 2014; joint DP as in Kearns et
    al. 2014 and Dwork & Roth §10.2).
    With probability ≥ 1 − β, following is a ``regret_bound``-approximate Nash
    equilibrium; no deviation, misreports included, saves more than (1 − e^{−ε})·C +
    E[regret_bound] + β·C in expectation, C = ``game.max_cost`` (module docstring).
    """
    rng.require_secure()
    eps = numbers.positive(epsilon, "epsilon", up=False)
    b = _beta(beta)
    g = _check_game(game)
    arr = _check_types(types, g.types)
    check_accountant(accountant)
    noise = make_noise(SENSITIVITY, epsilon=eps)
    rows = (frontend.row_of(noise, "number of players reporting each type"),)

    def compute() -> EquilibriumResult:
        n = int(arr.size)
        noisy = np.asarray(noise(np.bincount(arr, minlength=g.types)), dtype=np.int64)
        numer, loads = published_distribution(g, noisy, n)
        scale = rows[0].scale
        assert scale is not None
        gap, bound = regret_bound(g, numer, noisy, n, scale, b)
        return EquilibriumResult(suggest(numer, arr), numer, numer / DENOMINATOR, noisy,
                                 loads, gap, bound, b, eps, scale)

    return charge(accountant, PureDP(eps), f"apps.equilibrium.private_equilibrium("
                  f"n={arr.size}, m={g.links}, T={g.types})", compute, rows)


def _audit_game() -> CongestionGame:
    """Two links, c_0(x) = 6x/n, c_1 = 1; type 0 may use link 0 only, type 1 either."""
    return congestion_game([0, 1], [6, 0], [[1, 0], [1, 1]])


def _others(types: np.ndarray, size: int, noise: Measurement | None) -> np.ndarray:
    """``size`` runs of the mediator on ``types``; per run, the suggestions of players
    1 … n − 1 coded as one integer (base m). ``noise`` None: no noise (the broken
    variant)."""
    g = _audit_game()
    n = types.size
    counts = np.bincount(types, minlength=g.types)
    if noise is None:
        noisy = np.tile(counts, (size, 1))
    else:
        noisy = np.asarray(noise(np.tile(counts, size)), dtype=np.int64).reshape(size, -1)
    noisy = np.maximum(noisy, 0)
    distinct, inverse = np.unique(noisy, axis=0, return_inverse=True)
    codes = np.zeros(size, dtype=np.int64)
    for j, row in enumerate(distinct):
        runs = np.flatnonzero(inverse.ravel() == j)
        numer, _ = published_distribution(g, row, n)
        links = suggest(numer, np.tile(types[1:], runs.size)).reshape(runs.size, n - 1)
        codes[runs] = links @ (g.links ** np.arange(n - 1))
    return codes


def audit_cases() -> list[AuditCase]:
    """The mediator's audit case, on what joint DP protects: the others' suggestions.
    ε = 1, three players on :func:`_audit_game`; the neighbour changes player 0's report
    from type 0 to type 1, and the sample is the code of players 1 and 2's suggestions.
    Without noise their law moves from "always link 1" to P(link 0) = 1/6 each (an
    unbounded ratio). Broken: the mediator that skips the noise while the claim stays
    ε = 1."""
    eps = Fraction(1)
    noise = make_noise(SENSITIVITY, epsilon=eps)
    x = np.array([0, 1, 1])
    x_prime = np.array([1, 1, 1])

    def sampler(m: Measurement | None) -> Sampler:
        return lambda data, size: _others(np.asarray(data), size, m)

    claim = Measurement(lambda d: sampler(noise)(d, 1), HammingDistance(), PureDP,
                        lambda d: PureDP(eps * d), "private_equilibrium",
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    return [AuditCase("private_equilibrium", claim, sampler(noise), sampler(None), x,
                      x_prime)]
