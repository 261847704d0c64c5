"""Private selection beyond the exponential mechanism: permute-and-flip and top-k.

Sources: McKenna & Sheldon 2020, *Permute-and-Flip: A new mechanism for differentially
private selection* (Alg. 1; never worse in expected utility than the exponential mechanism);
top-k by peeling the exponential mechanism k times without replacement (Durfee & Rogers 2019
show it equals one-shot Gumbel top-k), loss by basic composition.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import rng, samplers
from dpkit.core.component import Measurement
from dpkit.core.measures import PureDP
from dpkit.core.metrics import LInfDistance
from dpkit.core.numbers import Number, Numbers, integer, non_negative, positive
from dpkit.errors import DomainError
from dpkit.mechanisms._common import representable_scale
from dpkit.mechanisms.exponential import (
    SCORES,
    exact_gaps,
    selection_audit,
    selection_measurement,
)
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = [
    "make_permute_and_flip",
    "make_report_noisy_max",
    "make_top_k",
    "sample_permute_and_flip",
    "sample_report_noisy_max",
    "sample_top_k",
]


def _audit_permute_and_flip() -> list[AuditCase]:
    """Scale 1 (ε = 2 at Δ = 1) on the worst-case scores; broken: scale 1/2."""
    return [selection_audit("permute_and_flip", make_permute_and_flip(1),
                            sample_permute_and_flip, Fraction(1), Fraction(1, 2))]


def _audit_report_noisy_max() -> list[AuditCase]:
    """Scale 1 (ε = 2 at Δ = 1) on the worst-case scores; broken: scale 1/4."""
    return [selection_audit("report_noisy_max", make_report_noisy_max(1),
                            sample_report_noisy_max, Fraction(1), Fraction(1, 4))]


def _audit_top_k() -> list[AuditCase]:
    """Top-2 of 4 scores at scale 4 (ε = 2·2Δ/s = 1 at Δ = 1), each ordered pair coded as
    one integer (post-processing); neighbours: all scores 0, and one up by Δ with the others
    down by Δ. Broken: scale 1 (four times the ε claimed)."""
    x = np.zeros(4, dtype=np.int64)
    x_prime = np.array([1, -1, -1, -1], dtype=np.int64)

    def sampler(scale: Fraction) -> Sampler:
        def sample(scores: Numbers, n: int) -> np.ndarray:
            picks = sample_top_k(scores, 2, scale, size=n)
            return picks[:, 0] * 4 + picks[:, 1]
        return sample

    return [AuditCase("top_k", make_top_k(2, 4), sampler(Fraction(4)), sampler(Fraction(1)),
                      x, x_prime)]


def sample_permute_and_flip(scores: Numbers, scale: Fraction, size: int | None = None) -> Any:
    """Permute-and-flip, exactly: visit candidates in a uniformly random order and stop at
    the first r accepted with probability exp(−(u* − u_r)/scale). The best candidate is
    always accepted, so one pass suffices. One int, or ``size`` independent draws."""
    numer, denom = exact_gaps(scores, scale)
    n, k = 1 if size is None else int(size), numer.size
    keys = rng.words(n * k).reshape(n, k)
    order = np.argsort(keys, axis=1)  # uniform random permutations (ties: 2^-64)
    accept = samplers.bernoulli_exp(np.tile(numer, n), denom).reshape(n, k)
    first = np.take_along_axis(accept, order, axis=1).argmax(axis=1)  # first accepted visit
    draws = order[np.arange(n), first]
    return int(draws[0]) if size is None else draws


@register(audit=_audit_permute_and_flip)
def make_permute_and_flip(scale: Number, *, monotonic: bool = False) -> Measurement:
    """Select an index by permute-and-flip (McKenna & Sheldon 2020, Alg. 1).

    Parameters
    ----------
    scale : number
        s > 0: candidate r is accepted with probability exp(−(u* − u_r)/s). For scores of
        sensitivity Δ the loss is ε = 2Δ/s (Δ/s if ``monotonic``), as for the exponential
        mechanism (McKenna & Sheldon 2020, Thm 1).
    monotonic : bool
        Whether neighbouring inputs shift all scores the same way.

    Returns
    -------
    Measurement
        Input: 1-D array of k scores under :class:`LInfDistance`; output an index.
        Privacy map: d_in ↦ PureDP(2·d_in/s) (or d_in/s).
    """
    return selection_measurement(sample_permute_and_flip, scale, monotonic, "permute_and_flip")


def sample_top_k(scores: Numbers, k: int, scale: Fraction, size: int | None = None, *,
                 until: int | None = None) -> Any:
    """k distinct indices, best first, with the law of peeling the exponential mechanism k
    times: each pick is index i among those not yet picked with probability ∝
    exp(scoreᵢ/scale), exactly.

    Parameters
    ----------
    scores : array of shape (N,)
        Finite scores (ints, floats or Fractions, used exactly); N ≥ k.
    k : int
        Picks per draw.
    scale : Fraction
        s > 0, in score units.
    size : int, optional
        Independent draws (default one).
    until : int, optional
        Stop a draw once index ``until`` is picked (the limited domain's sentinel): its
        later entries are −1. The entries up to it have the same law as without ``until``.

    Returns
    -------
    list of int, or int64 array of shape (size, k)
        One list of k indices, or ``size`` independent rows.

    Raises
    ------
    DomainError
        If ``scores`` is not 1-D or has fewer than k entries.

    Notes
    -----
    One stream of i.i.d. proposals, drawn in vectorised batches (:func:`_stream_picks`):
    propose i uniformly among all N, accept it with probability exp(−(m − uᵢ)/s), where m is
    the largest score not yet picked when the batch starts; the next pick is the first
    accepted proposal not picked before. Given the past, that is index i with probability
    exp(−(m − uᵢ)/s)/Σⱼ exp(−(m − uⱼ)/s) over the unpicked j — the common factor exp(−m/s)
    cancels — i.e. the exponential mechanism on the unpicked indices (McSherry & Talwar
    2007), so the picks have peeling's law exactly (Durfee & Rogers 2019 for peeling).
    Cost, whatever the scores: the remaining maximum is accepted with probability 1, so
    the acceptance a is ≥ 1/N; a batch holds 1/a + 256 (:data:`BATCH_PAD`) proposals and
    yields a pick with probability ≥ 1 − e⁻¹, so a draw takes ≤ k·(N + 256)/(1 − e⁻¹)
    ≤ 1.6·k·(N + 256) proposals in expectation (exponential tails), each O(1) on machine
    integers (arbitrary-size integers when the gaps need more than 63 bits).
    """
    values = np.asarray(scores)
    if values.ndim != 1 or values.size < k:
        raise DomainError(f"top-{k} needs a 1-D vector of at least {k} candidates")
    numer, denom = exact_gaps(values, scale)
    if max(numer.tolist()) < 1 << 63 and denom < 1 << 63:  # machine integers
        numer = numer.astype(np.uint64)
    order = np.argsort(numer, kind="stable")  # best first
    n = 1 if size is None else int(size)
    stop = -1 if until is None else int(np.flatnonzero(order == until)[0])
    picks = _stream_picks(numer[order], denom, k, n, stop)
    chosen = np.where(picks >= 0, order[np.maximum(picks, 0)], -1)
    return [int(i) for i in chosen[0]] if size is None else chosen


BATCH_PAD = 256  # proposals added to a batch beyond 1/acceptance: many picks when scores tie
_MAX_BATCH = 1 << 21  # proposals per vectorised pass, over all draws: bounds the memory


def _stream_picks(gaps: np.ndarray, denom: int, k: int, n: int, stop: int) -> np.ndarray:
    """``n`` draws of k positions into ``gaps`` (γ·denom, ascending; uint64 or object),
    shape (n, k); a draw ends at position ``stop`` (≥ 0), its later entries −1."""
    size = gaps.size
    picked = np.zeros((n, size), dtype=bool)
    out = np.full((n, k), -1, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    g = np.minimum(gaps.astype(np.float64) / float(denom), 1e15)  # γ in floats: sizes only
    tails = np.logaddexp.accumulate(-g[::-1])[::-1]  # log Σ_{j ≥ i} exp(−γⱼ)
    active = np.arange(n)
    while active.size:
        top = np.argmin(picked[active], axis=1)  # the first unpicked position: the max
        batch = _batch_sizes(g, tails, out[active], top, k - count[active])
        take = max(1, int(np.searchsorted(np.cumsum(batch), _MAX_BATCH, side="right")))
        draws, top, batch = active[:take], top[:take], batch[:take]
        node = np.repeat(np.arange(draws.size), batch)  # stream order within each draw
        proposal = rng.uniform_below(size, node.size).astype(np.int64)
        fresh = np.flatnonzero(~picked[draws[node], proposal])
        ok = fresh[_accept(gaps[proposal[fresh]] - gaps[top[node[fresh]]], denom)]
        _record(out, picked, count, draws[node[ok]], proposal[ok], k, stop)
        done = (count[draws] >= k) | ((stop >= 0) & picked[draws, max(stop, 0)])
        active = np.concatenate([draws[~done], active[take:]])
    return out


def _accept(gap: np.ndarray, denom: int) -> np.ndarray:
    """Bernoulli(exp(−gap/denom)) per element; on machine integers the whole part is drawn
    first, so a far proposal costs O(1) coins and the fractional part only the survivors."""
    if gap.dtype == object:
        return samplers.bernoulli_exp(gap, denom)
    d = np.uint64(denom)
    ok = samplers.bernoulli_exp(gap // d, 1)
    idx = np.flatnonzero(ok)
    ok[idx] = samplers.bernoulli_exp(gap[idx] % d, denom)
    return ok


def _record(out: np.ndarray, picked: np.ndarray, count: np.ndarray, draw: np.ndarray,
            proposal: np.ndarray, k: int, stop: int) -> None:
    """Append each draw's accepted proposals (stream order) that are new, up to k in all
    and up to ``stop``: the first occurrence of an index is its pick."""
    key = draw * picked.shape[1] + proposal
    first = np.sort(np.unique(key, return_index=True)[1])  # first occurrences, in order
    draw, proposal = draw[first], proposal[first]
    starts = np.searchsorted(draw, draw)  # draw is sorted: each group's first element
    rank = count[draw] + np.arange(draw.size) - starts
    if stop >= 0:  # nothing after the stop position is kept
        hit = np.where(proposal == stop, rank, k)
        last = np.full(out.shape[0], k, dtype=np.int64)
        np.minimum.at(last, draw, hit)
        keep = (rank < k) & (rank <= last[draw])
    else:
        keep = rank < k
    out[draw[keep], rank[keep]] = proposal[keep]
    picked[draw[keep], proposal[keep]] = True
    np.add.at(count, draw[keep], 1)


def _batch_sizes(g: np.ndarray, tails: np.ndarray, out: np.ndarray, top: np.ndarray,
                 left: np.ndarray) -> np.ndarray:
    """Proposals per draw for the next batch: 1/a + min(picks left, BATCH_PAD), where
    a = Σ_{unpicked j} exp(−(γⱼ − γ_top))/N is the acceptance (≥ 1/N: the top is unpicked)."""
    after = out > top[:, None]  # picked positions past the top (unfilled entries are −1)
    gap = np.where(after, g[np.maximum(out, 0)] - g[top][:, None], np.inf)
    weight = np.maximum(1.0, np.exp(tails[top] + g[top]) - np.exp(-gap).sum(axis=1))
    # 1/a proposals: one pick expected; 1/(1 − e^-1) ≈ 1.6 batches per pick at worst
    return (np.ceil(g.size / weight) + np.minimum(left, BATCH_PAD)).astype(np.int64)


@register(audit=_audit_top_k)
def make_top_k(k: int, scale: Number, *, monotonic: bool = False) -> Measurement:
    """Select k distinct indices by peeling the exponential mechanism k times.

    Parameters
    ----------
    k : int
        Number of indices (1 ≤ k ≤ number of candidates).
    scale : number
        s > 0 for each of the k exponential-mechanism rounds.

    Returns
    -------
    Measurement
        Input: 1-D finite scores under :class:`LInfDistance`; output a list of k indices,
        best first (:func:`sample_top_k`). Privacy map: d_in ↦ PureDP(k·2·d_in/s) (k-fold
        basic composition of McSherry & Talwar 2007; Durfee & Rogers 2019).

    Raises
    ------
    DomainError
        If k < 1, scale ≤ 0, or there are fewer than k candidates.
    """
    k = integer(k, "k", minimum=1)
    s = positive(scale, "scale")
    factor = 1 if monotonic else 2

    return Measurement(
        function=lambda scores: sample_top_k(scores, k, s),
        input_metric=LInfDistance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(k * factor * non_negative(d_in, "d_in") / s),
        name=f"top_{k}(scale={float(s):.6g})",
        input_domain=SCORES,
    )


def sample_report_noisy_max(scores: Numbers, scale: Fraction, size: int | None = None) -> Any:
    """argmaxᵢ (uᵢ + Zᵢ) with Zᵢ discrete Laplace, exactly: scores are put over one common
    denominator D, so uᵢ·D are integers and the noise has scale s·D in those units; ties are
    broken by a uniformly random priority (independent of the data)."""
    exact = [Fraction(v) for v in np.asarray(scores).tolist()]
    if not exact:
        raise DomainError("scores must be non-empty")
    denom = 1
    for v in exact:
        denom = denom * v.denominator // math.gcd(denom, v.denominator)
    values = [int(v * denom) for v in exact]
    small = max(abs(v) for v in values) < 1 << 61  # leaves room for the noise
    ints = np.array(values, dtype=np.int64 if small else object)
    noise_scale = representable_scale(scale * denom)
    n, k = 1 if size is None else int(size), len(exact)
    noisy = np.tile(ints, n).reshape(n, k) + samplers.discrete_laplace(noise_scale, n * k
                                                                       ).reshape(n, k)
    top = noisy.max(axis=1, keepdims=True)
    priority = np.where(noisy == top, rng.words(n * k).reshape(n, k), np.uint64(0))
    draws = np.argmax(priority + (noisy == top), axis=1)  # random among tied maxima
    return int(draws[0]) if size is None else draws


@register(audit=_audit_report_noisy_max)
def make_report_noisy_max(scale: Number, *, monotonic: bool = False) -> Measurement:
    """Report Noisy Max with (discrete) Laplace noise (Dwork & Roth Claim 3.9).

    Parameters
    ----------
    scale : number
        s > 0, the Laplace scale in score units. For scores of sensitivity Δ the loss is
        ε = 2Δ/s, or Δ/s when ``monotonic`` (e.g. counts): D&R Claim 3.9's argument holds for
        integer-valued noise with a data-independent random tie-break, since the event "i
        wins" is an up-set in its noise and the discrete Laplace pmf ratio under a shift of Δ
        is e^{Δ/s}.

    Returns
    -------
    Measurement
        Input: 1-D scores under :class:`LInfDistance`; output an index.
        Privacy map: d_in ↦ PureDP(2·d_in/s) (or d_in/s).

    Notes
    -----
    The exponential (Gumbel) form of Report Noisy Max is :func:`make_exponential`, and Report
    Noisy Max with exponential noise has the law of :func:`make_permute_and_flip`
    (Ding et al. 2021).
    """
    return selection_measurement(sample_report_noisy_max, scale, monotonic, "report_noisy_max")
