"""The exponential mechanism, sampled exactly (the Report Noisy Max family).

Sources: McSherry & Talwar 2007 (exponential mechanism; Dwork & Roth Thm 3.10); selecting
argmaxᵢ (uᵢ + Gumbel) is the same distribution (Report Noisy Max with Gumbel noise,
Dwork & Roth §3.4), so this is the exact form of both. Sampling: propose i uniformly and
accept with probability exp(−(u_max − uᵢ)/s), an exact Bernoulli(exp(−γ)) (CKS20 Alg. 1);
the first accepted proposal has probability ∝ exp(uᵢ/s).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import rng, samplers
from dpkit.core.component import Measurement
from dpkit.core.measures import PureDP
from dpkit.core.metrics import LInfDistance
from dpkit.core.numbers import Number, non_negative, positive
from dpkit.errors import DomainError

__all__ = ["make_exponential", "sample_exponential", "exact_gaps"]


def _exact_scores(scores: Any) -> list[Fraction]:
    arr = np.asarray(scores)
    if arr.ndim != 1 or arr.size == 0:
        raise DomainError("scores must be a non-empty 1-D array")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise DomainError("scores must be finite")
    if arr.dtype.kind not in "iuf" and arr.dtype != object:
        raise DomainError(f"scores must be numbers, got dtype {arr.dtype}")
    return [Fraction(v) if not isinstance(v, float) else Fraction(v) for v in arr.tolist()]


def exact_gaps(scores: Any, scale: Fraction) -> tuple[np.ndarray, int]:
    """γᵢ = (max u − uᵢ)/scale ≥ 0 for every score, as integer numerators over one
    denominator (object array, int)."""
    arr = np.asarray(scores)
    if arr.dtype.kind in "iu" and arr.size and int(np.abs(arr).max()) < 1 << 40:
        # integer scores: γᵢ = (max − uᵢ)·q/p for scale p/q, exactly, without a Fraction each
        q = Fraction(scale)
        ints = (int(arr.max()) - arr.astype(np.int64)).astype(object) * q.denominator
        return ints, q.numerator
    exact = _exact_scores(scores)
    top = max(exact)
    gaps = [(top - u) / scale for u in exact]
    denom = 1
    for g in gaps:
        denom = denom * g.denominator // math.gcd(denom, g.denominator)
    return np.array([g.numerator * (denom // g.denominator) for g in gaps], dtype=object), denom


def sample_exponential(scores: Any, scale: Fraction, size: int | None = None) -> Any:
    """Index i drawn with probability ∝ exp(scoresᵢ / scale), exactly.

    Returns one int, or ``size`` independent draws as an int64 array.
    """
    numer, denom = exact_gaps(scores, scale)
    want = 1 if size is None else int(size)
    # expected acceptance Σ exp(−γᵢ)/k, in floats: it only sizes the batches
    acceptance = max(1e-6, float(np.mean(np.exp(-np.array([float(g) for g in numer]) /
                                                   float(denom)))))
    found: list[np.ndarray] = []
    got = 0
    while got < want:
        batch = int((want - got) / acceptance * 1.2) + 64
        proposals = rng.uniform_below(numer.size, batch).astype(np.int64)
        accepted = proposals[samplers.bernoulli_exp(numer[proposals], denom)]
        found.append(accepted)
        got += accepted.size
    draws = np.concatenate(found)[:want]
    return int(draws[0]) if size is None else draws


def make_exponential(scale: Number, *, monotonic: bool = False) -> Measurement:
    """Select an index with probability ∝ exp(score/scale), exactly.

    Parameters
    ----------
    scale : number
        Temperature s > 0. For scores of sensitivity Δ (each score moves by at most Δ between
        neighbours) the loss is ε = 2Δ/s, or Δ/s when ``monotonic`` (all scores move in the
        same direction).
    monotonic : bool
        Whether neighbouring inputs shift all scores the same way.

    Returns
    -------
    Measurement
        Input: a 1-D array of k scores (ints, floats or Fractions; used exactly) under
        :class:`LInfDistance`. Output: an index in {0, …, k−1}. Privacy map:
        d_in ↦ PureDP(2·d_in/s), or d_in/s if monotonic (McSherry & Talwar 2007;
        Dwork & Roth Thm 3.10).

    Raises
    ------
    DomainError
        If ``scale`` ≤ 0 or the scores are empty, non-finite or not numbers.
    """
    return make_selection(sample_exponential, scale, monotonic, "exponential")


def make_selection(sample: Callable[[Any, Fraction], int], scale: Number, monotonic: bool,
                   name: str) -> Measurement:
    """A selection measurement over scores (L∞ input) with the exponential mechanism's map:
    d_in ↦ PureDP(2·d_in/s), or d_in/s when all scores move the same way."""
    s = positive(scale, "scale")
    factor = 1 if monotonic else 2
    return Measurement(
        function=lambda scores: sample(scores, s),
        input_metric=LInfDistance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(factor * non_negative(d_in, "d_in") / s),
        name=f"{name}(scale={float(s):.6g})",
    )
