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
from dpkit.core.numbers import Number, integer, non_negative, positive
from dpkit.errors import DomainError
from dpkit.mechanisms._common import representable_scale
from dpkit.mechanisms.exponential import (
    SCORES,
    exact_gaps,
    sample_exponential,
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
        def sample(scores: Any, n: int) -> np.ndarray:
            picks = sample_top_k(scores, 2, scale, size=n)
            return picks[:, 0] * 4 + picks[:, 1]
        return sample

    return [AuditCase("top_k", make_top_k(2, 4), sampler(Fraction(4)), sampler(Fraction(1)),
                      x, x_prime)]


def sample_permute_and_flip(scores: Any, scale: Fraction, size: int | None = None) -> Any:
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


def sample_top_k(scores: Any, k: int, scale: Fraction, size: int | None = None) -> Any:
    """k distinct indices, best first, by peeling the exponential mechanism k times: each
    round draws among the indices not yet chosen with probability ∝ exp(score/scale)
    (:func:`~dpkit.mechanisms.sample_exponential`, exact). One list of k ints, or ``size``
    independent draws as an int64 array of shape (size, k) (the draws that share their
    choices so far are drawn together in each round)."""
    values = np.asarray(scores)
    if values.ndim != 1 or values.size < k:
        raise DomainError(f"top-{k} needs a 1-D vector of at least {k} candidates")
    n = 1 if size is None else int(size)
    chosen = np.zeros((n, k), dtype=np.int64)
    for j in range(k):
        if n == 1:  # one draw: one prefix (np.unique over rows would cost O(k) per round)
            prefixes, group = chosen[:, :j], np.zeros(1, dtype=np.int64)
        else:
            prefixes, group = np.unique(chosen[:, :j], axis=0, return_inverse=True)
        for g, prefix in enumerate(prefixes):
            rows = np.flatnonzero(group.reshape(-1) == g)
            left = np.ones(values.size, dtype=bool)
            left[prefix] = False
            remaining = np.flatnonzero(left)
            picks = sample_exponential(values[remaining], scale, size=rows.size)
            chosen[rows, j] = remaining[picks]
    return [int(i) for i in chosen[0]] if size is None else chosen


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


def sample_report_noisy_max(scores: Any, scale: Fraction, size: int | None = None) -> Any:
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
