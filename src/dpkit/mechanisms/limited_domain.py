"""Top-k selection over an unknown domain: the limited-domain mechanism.

Source: Durfee & Rogers, *Practical differentially private top-k selection with
pay-what-you-get composition*, NeurIPS 2019 (arXiv 1905.04273), Alg. 1 ("LimitDom") and
Thm 1. Only the true top-k̄ items are ever looked at, so the domain need not be known.

Input: for each candidate partition (a group key present in the data), the number h of
privacy units with rows in it; a unit is in at most Δ partitions (Δ = ∞ allowed: the
"unrestricted sensitivity" case) and counts once in each. Adding or removing one unit moves
every count by 0 or 1, all the same way, and may create or remove partitions of count 1.

Algorithm (ε₀ = ε/k per pick):

1. order the partitions by (count descending, position ascending): the caller's positions
   follow a fixed order of the keys, so ties never depend on anything but the keys;
2. the candidates are the first k̄ with a positive count; h_{(k̄+1)} is the next count
   (0 when there is none);
3. a sentinel ⊥ gets the score h_⊥ = h_{(k̄+1)} + 1 + ln(min(Δ, k̄)/δ)/ε₀ (the logarithm
   rounded up, then h_⊥ rounded up to a multiple of 2^-10: a larger h_⊥ only releases less);
4. peel the exponential mechanism with probabilities ∝ exp(ε₀·score) over the candidates
   and ⊥, at most k times without replacement (:func:`dpkit.mechanisms.selection.sample_top_k`,
   exact); the output is the items picked before ⊥, best first.

Cost: sorting the P partitions (numpy), then ≤ 1.6·k·(k̄ + 257) proposals in expectation,
each O(1) on machine integers, whatever the counts (``sample_top_k``'s notes: the proposal
stream has peeling's law in one pass); a request is refused at plan time unless
k·k̄ ≤ :data:`MAX_K_TIMES_K_BAR`, so its cost is bounded by declared quantities, not by
the number of groups that pass the analyst's filter.

Peeling the exponential mechanism is the same law as adding Gumbel(1/ε₀) noise once and
sorting (Durfee & Rogers 2019, Lemma 4.2), which is their Alg. 1.

Privacy (add/remove one unit): (k·ε₀, δ)-DP = (ε, δ)-DP — Thm 1 of Durfee & Rogers with
its first term (basic composition of k picks, each ε₀-DP because counts move monotonically);
δ covers the ≤ min(Δ, k̄) candidates that exist on one side only, each picked before ⊥ with
probability at most δ/min(Δ, k̄). Thm 1's bounded-range terms (better for large k, at an
extra δ′) are not used.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpkit.core.component import Measurement
from dpkit.core.measures import ApproxDP
from dpkit.core.numbers import (
    Number,
    dyadic_up,
    fraction_down,
    integer,
    log_up,
    positive,
)
from dpkit.errors import DomainError
from dpkit.mechanisms.partition_selection import unit_selection
from dpkit.mechanisms.registry import AuditCase, Sampler, register
from dpkit.mechanisms.selection import sample_top_k

__all__ = ["MAX_K", "MAX_K_BAR", "MAX_K_TIMES_K_BAR", "TopKSelection",
           "make_limited_domain_top_k", "sentinel_score"]

MAX_K = 1_000
MAX_K_BAR = 100_000
# k·k̄ per request: the sampler's work is ≤ 1.6·k·(k̄ + 257) proposals in expectation
# whatever the data (selection.sample_top_k): ≈ 1.6 s at worst at k = 1,000, k̄ = 4,000
# (bench/topk_cost.py, scores 1 nat apart), ≈ 0.02–0.2 s on Adult
MAX_K_TIMES_K_BAR = 4_000_000
_SENTINEL_BITS = 10  # h_⊥ is rounded up to a multiple of 2^-10


@dataclass(frozen=True)
class TopKSelection:
    """A private top-k selection of partitions over an unknown domain (limited domain).

    Use it as ``group_by(..., selection=TopKSelection(k, epsilon, delta))``: the release
    keeps at most k keys, the most common ones by distinct units, best first.

    Parameters
    ----------
    k : int
        At most k keys are released (fewer when the sentinel ⊥ is picked first); 1 ≤ k ≤
        1,000.
    epsilon : number
        ε > 0 (nats) of the whole selection; each of the k picks spends ε/k.
    delta : number
        δ ∈ (0, 1): the probability budget of picking a key that is a candidate on one
        neighbour only.
    k_bar : int, optional
        How many of the true top keys are candidates (k ≤ k̄ ≤ 100,000 and k·k̄ ≤
        4,000,000, :data:`MAX_K_TIMES_K_BAR`, which bounds the request's cost whatever the
        data; default min(4k, 100,000)). A larger k̄ lowers the sentinel's base count
        h_{(k̄+1)} and raises its ln(min(Δ, k̄)/δ) term only logarithmically; with k̄ = k,
        a tie between the k-th and (k+1)-th counts puts the sentinel above every
        candidate, so the default leaves room (chosen from that argument, not fitted to any
        data).
    """

    k: int
    epsilon: Number
    delta: Number
    k_bar: int | None = None

    method = "limited_domain"

    def checked(self) -> tuple[int, int, Fraction, Fraction]:
        """(k, k̄, ε, δ) validated; DomainError otherwise."""
        k = integer(self.k, "k", minimum=1, maximum=MAX_K)
        k_bar = (min(4 * k, MAX_K_BAR) if self.k_bar is None
                 else integer(self.k_bar, "k_bar", minimum=k, maximum=MAX_K_BAR))
        if k * k_bar > MAX_K_TIMES_K_BAR:  # the cost bound (MAX_K_TIMES_K_BAR), not the data
            raise DomainError(
                f"top-k selection with k = {k} and k_bar = {k_bar} is over the per-request "
                f"limit k·k_bar ≤ {MAX_K_TIMES_K_BAR:,}: lower k_bar to at most "
                f"{MAX_K_TIMES_K_BAR // k:,} (or k)")
        eps = positive(self.epsilon, "epsilon", up=False)
        dlt = fraction_down(self.delta)
        if not 0 < dlt < 1:
            raise DomainError("top-k selection needs delta in (0, 1)")
        return k, k_bar, eps, dlt

    def loss(self) -> ApproxDP:
        """ApproxDP(ε, δ) of the selection (Durfee & Rogers 2019, Thm 1, first term)."""
        _, _, eps, dlt = self.checked()
        return ApproxDP(eps, dlt)

    @property
    def label(self) -> str:
        """How explain and the release record name the step."""
        return f"top-{self.checked()[0]} selection"

    def contribution_groups(self, max_groups: int) -> int:
        """How many released keys one unit can be in: min(G, k)."""
        return min(max_groups, self.checked()[0])


def sentinel_score(base: int, epsilon_pick: Fraction, delta: Fraction, groups: int) -> Fraction:
    """h_⊥ = base + 1 + ln(groups/δ)/ε₀, rounded up (module docstring, step 3)."""
    return dyadic_up(base + 1 + log_up(Fraction(groups) / delta) / epsilon_pick,
                     _SENTINEL_BITS)


def _parameters(selection: TopKSelection, max_groups: int | None
                ) -> tuple[int, int, Fraction, Fraction, int]:
    """(k, k̄, ε₀ = ε/k, δ, Δ) of a selection for units in ``max_groups`` partitions (None:
    unrestricted, Δ = k̄)."""
    k, k_bar, eps, dlt = selection.checked()
    groups = k_bar if max_groups is None else integer(max_groups, "max_groups", minimum=1)
    return k, k_bar, eps / k, dlt, groups


def _picks(counts: np.ndarray, k: int, k_bar: int, eps0: Fraction, dlt: Fraction,
           groups: int, size: int | None) -> list[list[int]]:
    """``size`` (or 1) independent outputs: lists of positions, best first."""
    c = np.asarray(counts, dtype=np.int64).reshape(-1)
    order = np.lexsort((np.arange(c.size), -c))  # count descending, position ascending
    positive_count = order[c[order] > 0]
    candidates = positive_count[:k_bar]
    base = int(c[positive_count[k_bar]]) if positive_count.size > k_bar else 0
    bottom = sentinel_score(base, eps0, dlt, min(groups, k_bar))
    denominator = bottom.denominator  # every score × 2^10: integers, scale 2^10/ε₀
    scores = np.append(c[candidates].astype(object) * denominator, bottom.numerator)
    if max(scores.tolist()) < 1 << 40:  # all ≥ 0: machine integers, the fast exact path
        scores = scores.astype(np.int64)
    rounds = min(k, scores.size)
    drawn = np.asarray(sample_top_k(scores, rounds, Fraction(denominator) / eps0,
                                    size=1 if size is None else size, until=candidates.size)
                       ).reshape(-1, rounds)
    out = []
    for row in drawn.tolist():  # the picks before ⊥ (a draw ends at ⊥: −1 after it)
        stop = row.index(candidates.size) if candidates.size in row else rounds
        out.append([int(candidates[i]) for i in row[:stop]])
    return out


@register(audit=lambda: _audit())
def make_limited_domain_top_k(selection: TopKSelection, max_groups: int | None = None
                              ) -> Measurement:
    """The limited-domain top-k measurement (Durfee & Rogers 2019, Alg. 1).

    Parameters
    ----------
    selection : TopKSelection
        k, ε, δ and k̄.
    max_groups : int, optional
        Δ: the most partitions one unit is in (None: unrestricted). Only min(Δ, k̄) enters.

    Returns
    -------
    Measurement
        Input: an int array of shape (P,) — distinct units per candidate partition, in a
        fixed order of the keys (0: absent, never picked) — under
        :class:`AddRemoveDistance` in units. Output: a list of at most k positions into it,
        best first. Privacy map: d_in ≤ 1 ↦ ApproxDP(ε, δ) (module docstring; Durfee &
        Rogers 2019, Thm 1); larger d_in is refused.

    Raises
    ------
    DomainError
        For k ∉ [1, 1000], k̄ ∉ [k, 100000], k·k̄ > 4,000,000, ε ≤ 0, δ ∉ (0, 1) or
        max_groups < 1.
    """
    parameters = _parameters(selection, max_groups)
    k, k_bar, _, _, groups = parameters
    loss = selection.loss()

    def select(counts: np.ndarray) -> list[int]:
        return _picks(counts, *parameters, None)[0]

    return unit_selection(select, loss, "top-k selection",
                          f"limited_domain_top_k(k={k}, k̄={k_bar}, ε={float(loss.epsilon):g}, "
                          f"δ={float(loss.delta):g}, Δ={groups})")


def sample_limited_domain(counts: np.ndarray, selection: TopKSelection, max_groups: int | None,
                          size: int) -> list[list[int]]:
    """``size`` independent outputs of :func:`make_limited_domain_top_k` on ``counts``
    (drawn together; for audits and tests)."""
    return _picks(counts, *_parameters(selection, max_groups), size)


def _audit() -> list[AuditCase]:
    """k = 1, k̄ = 2, ε = 1, δ = 1/100, Δ = 2: counts (2, 1) and, one unit removed, (1, 0):
    the second key is a candidate on one side only. Output coded 0 (nothing), 1 + position.
    Broken: the sentinel without its ln(min(Δ, k̄)/δ)/ε₀ term (the second key then passes
    far more often than δ allows)."""
    selection = TopKSelection(1, 1, Fraction(1, 100), k_bar=2)

    def sampler(broken: bool) -> Sampler:
        def sample(counts: np.ndarray, n: int) -> np.ndarray:
            if broken:  # δ = 99/100, Δ = 1: the ln term ≈ 0.01, the sentinel ≈ base + 1
                bad = TopKSelection(1, 1, Fraction(99, 100), k_bar=2)
                outs = sample_limited_domain(counts, bad, 1, n)
            else:
                outs = sample_limited_domain(counts, selection, 2, n)
            return np.array([1 + o[0] if o else 0 for o in outs], dtype=np.int64)
        return sample

    return [AuditCase("limited_domain_top_k", make_limited_domain_top_k(selection, 2),
                      sampler(False), sampler(True), np.array([2, 1]), np.array([1, 0]))]
