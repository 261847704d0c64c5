"""Boosting for queries (Dwork, Rothblum & Vadhan, FOCS 2010; Dwork & Roth 2014, §6.1,
Figure 6.1 / Theorem 6.1): **refused** — this module computes why, it releases nothing.

The algorithm, as Dwork & Roth state it (Figure 6.1, "Boosting for Queries(k, λ, η, ρ, μ,
T)"): D₁ uniform over the query set Q; for t = 1 … T, sample k queries from D_t, run a
private base synopsis generator A_t that is λ-accurate on ≥ 1/2 + η of D_t's mass; set
a_{t,q} = 1 if |q(x) − A_t(q)| ≤ λ, −1 if it exceeds λ + μ, else 1 − 2(d_{t,q} − λ)/μ; weight
u_{t,q} = exp(−α·Σ_{j≤t} a_{j,q}), α = ½·ln((1 + 2η)/(1 − 2η)); renormalise; answer q by the
median of A₁(q) … A_T(q). Theorem 6.1: with T = log|Q|/η² rounds the answers are
(λ + μ)-accurate with probability ≥ 1 − Tβ, with μ ∈ O(log^{3/2}|Q|·√k·√log(1/β)·ρ /
(ε_sample·η³)), and the algorithm is (ε_sample + T·ε_base, δ_sample + T·δ_base)-DP when the
base generator is (ε_base, δ_base)-DP.

Why dpkit refuses it (an exact, testable version is not possible):

1. **The privacy map cannot be written exactly.** Theorem 6.1 gives μ, the gap that pays
   for ε_sample (the reweighting reads q(x) for every query, and only the sampling of S_t
   hides it), as an O(·) with unstated constants; the proof's per-sample loss could not be
   checked against the text (only the theorem, Figure 6.1 and Definition 6.1 were). Without
   the constant, ε_sample — hence the debit — is unknown, and dpkit debits exact losses only.
2. **The verifiable part alone needs more records than Adult has.** Even with ε_sample = 0,
   ε ≥ T·ε_base. With SmallDB (Dwork & Roth Thm 4.5) as the base generator on the k sampled
   queries — the base whose guarantee is proven — accuracy α·n needs
   n ≥ (16·ln|X|·ln k + 4·ln(1/β))/(ε_base·α³) records. :func:`boosting_floor` computes the
   resulting n for ε ≤ 10: on |X| = 2^10 cells and |Q| = 300 queries, η = 1/4 (T = 92), k = 3
   sampled queries per round (fewer than any generalisation bound allows), α = 1/10 and a
   total failure probability 1/20, n ≥ 1.4 million (UCI Adult has 48,842 rows).
3. **The base generator cannot run.** SmallDB at accuracy α/2 enumerates every database of
   m = ⌈ln k/(α/2)²⌉ records over X, C(|X| + m − 1, m) of them: 10^{387} at the setting
   above (the median mechanism's :func:`~dpkit.release.synthetic.median.candidate_databases`
   refuses beyond 2·10^6, which allows m ≤ 2 on 2^10 cells, where Theorem 4.2's
   approximation √(ln|Q|/m) exceeds 1 — vacuous). A Laplace-on-the-sample base generator is
   no synopsis: it answers only the sampled queries, and eq. (6.1) evaluates A_t on queries
   drawn from D_t, which for D₁ uniform over 300 queries needs ≥ (1/2 + η)·|Q| = 225 distinct
   sampled queries, each answer then with Laplace noise of scale 225/ε_base.

Use :class:`~dpkit.release.synthetic.pmw.PrivateMultiplicativeWeights`, the median mechanism
or MWEM for many counting queries; their privacy maps are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpkit.core.numbers import Number, positive, to_fraction
from dpkit.errors import DomainError

__all__ = ["BoostingFloor", "boosting_floor"]


@dataclass(frozen=True)
class BoostingFloor:
    """What boosting for queries would need (:func:`boosting_floor`).

    Attributes
    ----------
    rounds : int
        T = ⌈ln|Q|/η²⌉.
    epsilon_base : float
        The most each round's base generator may spend, ε/T (ε_sample taken as 0).
    records : int
        The smallest n at which SmallDB's guarantee (Dwork & Roth Thm 4.5) gives accuracy
        α·n on the k sampled queries at ε_base with failure β/T per round.
    smalldb_records : int
        m = ⌈ln k/(α/2)²⌉, the size of SmallDB's candidate databases.
    log10_candidates : float
        log₁₀ C(|X| + m − 1, m), the number of candidates SmallDB enumerates.
    """

    rounds: int
    epsilon_base: float
    records: int
    smalldb_records: int
    log10_candidates: float


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def boosting_floor(cells: int = 1 << 10, queries: int = 300, *, epsilon: Number = 10,
                   eta: Number = Fraction(1, 4), alpha: Number = Fraction(1, 10),
                   sampled: int = 3, failure: Number = Fraction(1, 20)) -> BoostingFloor:
    """The numbers behind the refusal of boosting for queries (module docstring).

    Parameters
    ----------
    cells : int
        |X|, the data universe's size (≥ 2).
    queries : int
        |Q|, the counting queries to answer (≥ 3: Thm 4.2 needs |Q| > 2).
    epsilon : number
        The total ε the release may cost (default 10).
    eta : number in (0, 1/2)
        The base generator's advantage η.
    alpha : number in (0, 1)
        The normalised accuracy asked of each base synopsis on its sampled queries
        (λ = α·n; the boosted answers are then (λ + μ)-accurate, μ > 0).
    sampled : int
        k, the queries sampled per round (≥ 3); the default 3 is below any generalisation
        bound, so the floor is favourable to boosting.
    failure : number in (0, 1)
        Tβ, the probability that some round's base synopsis fails (Theorem 6.1's 1 − Tβ).

    Returns
    -------
    BoostingFloor
        T = ⌈ln|Q|/η²⌉, ε_base = ε/T, n = ⌈(16·ln|X|·ln k + 4·ln(T/failure))/(ε_base·α³)⌉
        (Dwork & Roth Thm 4.5, eq. 4.3, with the k sampled queries as its query class) and
        SmallDB's candidate count. Logarithms are natural (Lemma 4.3's Chernoff bound
        2|Q|·e^{−2mα²}); Theorem 6.1 writes log|Q|, and a base-2 log would only raise T.

    Raises
    ------
    DomainError
        A parameter outside its range.
    """
    for name, value, low in (("cells", cells, 2), ("queries", queries, 3),
                             ("sampled", sampled, 3)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise DomainError(f"{name} must be an integer ≥ {low}")
    cells, queries, sampled = int(cells), int(queries), int(sampled)
    eps = positive(epsilon, "epsilon")
    eta_f, alpha_f, fail = (to_fraction(v) for v in (eta, alpha, failure))
    if not (0 < eta_f < Fraction(1, 2) and 0 < alpha_f < 1 and 0 < fail < 1):
        raise DomainError("eta must be in (0, 1/2), alpha and failure in (0, 1)")
    rounds = math.ceil(math.log(queries) / float(eta_f) ** 2)
    eps_base = float(eps) / rounds
    a = float(alpha_f)
    need = (16 * math.log(cells) * math.log(sampled) + 4 * math.log(rounds / float(fail)))
    records = math.ceil(need / (eps_base * a ** 3))
    m = math.ceil(math.log(sampled) / (a / 2) ** 2)
    return BoostingFloor(rounds, eps_base, records, m,
                         _log_comb(cells + m - 1, m) / math.log(10))
