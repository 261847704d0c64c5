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
from dpkit.mechanisms.exponential import exact_gaps, sample_exponential, selection_measurement

__all__ = [
    "make_permute_and_flip",
    "make_report_noisy_max",
    "make_top_k",
    "sample_permute_and_flip",
    "sample_report_noisy_max",
]


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
        Input: 1-D scores under :class:`LInfDistance`; output a list of k indices, best
        first. Privacy map: d_in ↦ PureDP(k·2·d_in/s) (k-fold basic composition of
        McSherry & Talwar 2007; Durfee & Rogers 2019).

    Raises
    ------
    DomainError
        If k < 1, scale ≤ 0, or there are fewer than k candidates.
    """
    k = integer(k, "k", minimum=1)
    s = positive(scale, "scale")
    factor = 1 if monotonic else 2

    def function(scores: Any) -> list[int]:
        remaining = list(range(len(scores)))
        values = list(np.asarray(scores).tolist())
        if len(values) < k:
            raise DomainError(f"top-{k} needs at least {k} candidates")
        chosen: list[int] = []
        for _ in range(k):
            pick = sample_exponential([values[i] for i in remaining], s)
            chosen.append(remaining.pop(pick))
        return chosen

    return Measurement(
        function=function,
        input_metric=LInfDistance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(k * factor * non_negative(d_in, "d_in") / s),
        name=f"top_{k}(scale={float(s):.6g})",
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
