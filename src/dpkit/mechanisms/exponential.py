"""The exponential mechanism, sampled exactly (the Report Noisy Max family).

Sources: McSherry & Talwar 2007 (exponential mechanism; Dwork & Roth Thm 3.10); selecting
argmaxᵢ (uᵢ + Gumbel) is the same distribution (Report Noisy Max with Gumbel noise,
Dwork & Roth §3.4), so this is the exact form of both. Sampling: propose i uniformly and
accept with probability exp(−(u_max − uᵢ)/s), an exact Bernoulli(exp(−γ)) (CKS20 Alg. 1);
the first accepted proposal has probability ∝ exp(uᵢ/s).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import rng, samplers
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import LInfDistance
from dpkit.core.numbers import Number, Numbers, non_negative, positive
from dpkit.errors import DomainError
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["SCORE_GRID", "SCORE_ALLOWANCE", "make_exponential", "make_exponential_many",
           "sample_exponential", "sample_exponential_many", "exact_gaps", "integer_gaps",
           "selection_measurement", "selection_audit", "SCORES", "SCORE_VECTORS",
           "WORST_SCORES"]

# the selections' input domains: one vector of finite scores (ints, floats or Fractions,
# used exactly), or a sequence of integer score vectors (make_exponential_many)
SCORES = VectorDomain(AtomDomain(Kind.FLOAT, infinity=False))
SCORE_VECTORS = VectorDomain(VectorDomain(AtomDomain(Kind.INTEGER)))


# the selections' worst-case neighbours for the audit (Δ = 1): 50 scores 0, and one score
# up by Δ with every other down by Δ
WORST_SCORES = (np.zeros(50, dtype=np.int64),
                np.concatenate([[1], -np.ones(49, dtype=np.int64)]).astype(np.int64))


def selection_audit(name: str, measurement: Measurement, sample: Callable[..., Any],
                    scale: Fraction, broken_scale: Fraction) -> AuditCase:
    """A selection's audit case: ``sample(scores, scale, size=n)`` on the worst-case
    neighbours, the broken variant at ``broken_scale`` (less noise than claimed)."""
    def sampler(s: Fraction) -> Sampler:
        return lambda scores, n: np.asarray(sample(scores, s, size=n))

    return AuditCase(name, measurement, sampler(scale), sampler(broken_scale), *WORST_SCORES)


def _audit() -> list[AuditCase]:
    """Scale 1 (ε = 2 at Δ = 1); broken: scale 1/2."""
    return [selection_audit("exponential", make_exponential(1), sample_exponential,
                            Fraction(1), Fraction(1, 2))]


def _audit_many() -> list[AuditCase]:
    """One draw per vector, as many vectors as outputs: scale 1 (ε = 2 at Δ = 1); broken:
    scale 1/2."""
    def sampler(scale: Fraction) -> Sampler:
        def sample(scores: np.ndarray, n: int) -> np.ndarray:
            return np.array(sample_exponential_many(np.tile(scores, (n, 1)), scale))
        return sample

    return [AuditCase("exponential_many", make_exponential_many(1), sampler(Fraction(1)),
                      sampler(Fraction(1, 2)), *WORST_SCORES)]


SCORE_GRID = 1 << 10  # G: releases put float scores on the grid 1/G (or integers ⌊G·score⌋)
# what rounding adds to a score's sensitivity: |round(a) − round(b)| ≤ |a − b| + 1/G, plus
# 2^-20 for the float sums behind the scores (≤ 2^28 records)
SCORE_ALLOWANCE = Fraction(1, SCORE_GRID) + Fraction(1, 1 << 20)


def _exact_scores(scores: Any) -> list[Fraction]:
    arr = np.asarray(scores)
    if arr.ndim != 1 or arr.size == 0:
        raise DomainError("scores must be a non-empty 1-D array")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise DomainError("scores must be finite")
    if arr.dtype.kind not in "iuf" and arr.dtype != object:
        raise DomainError(f"scores must be numbers, got dtype {arr.dtype}")
    return [Fraction(v) if not isinstance(v, float) else Fraction(v) for v in arr.tolist()]


def exact_gaps(scores: Numbers, scale: Fraction) -> tuple[np.ndarray, int]:
    """γᵢ = (max u − uᵢ)/scale ≥ 0 for every score, as integer numerators over one
    denominator (object array, int)."""
    arr = np.asarray(scores)
    if arr.dtype.kind in "iu" and arr.size and int(np.abs(arr).max()) < 1 << 40:
        # integer scores: γᵢ = (max − uᵢ)·q/p for scale p/q, exactly, without a Fraction each
        q = Fraction(scale)
        ints = (int(arr.max()) - arr.astype(np.int64)).astype(object) * q.denominator
        return ints, q.numerator
    if arr.dtype == object and arr.ndim == 1 and arr.size and all(
            type(v) is int for v in arr.tolist()):
        # Python integers of any size (exact scores over a common denominator folded into
        # the scale): the same, in arbitrary-precision integers
        q = Fraction(scale)
        return (max(arr.tolist()) - arr) * q.denominator, q.numerator
    exact = _exact_scores(scores)
    top = max(exact)
    gaps = [(top - u) / scale for u in exact]
    denom = 1
    for g in gaps:
        denom = denom * g.denominator // math.gcd(denom, g.denominator)
    return np.array([g.numerator * (denom // g.denominator) for g in gaps], dtype=object), denom


def sample_exponential(scores: Numbers, scale: Fraction, size: int | None = None) -> Any:
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


@register(audit=_audit)
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
    return selection_measurement(sample_exponential, scale, monotonic, "exponential", SCORES)


def integer_gaps(scores: np.ndarray, scale: Fraction) -> tuple[np.ndarray, int]:
    """γᵢ = (max u − uᵢ)/scale for integer scores as uint64 numerators over the denominator
    p (scale = p/q): numerator (max u − uᵢ)·q. The caller checks that they fit in 63 bits."""
    s = np.asarray(scores, dtype=np.int64)
    return (s.max() - s).astype(np.uint64) * np.uint64(scale.denominator), scale.numerator


def sample_exponential_many(scores: Sequence[Any] | np.ndarray, scale: Fraction
                            ) -> list[int]:
    """One exact draw of the exponential mechanism per integer score vector: index i of
    vector v with probability ∝ exp(u_{v,i}/s), all vectors sampled together (vectorised).

    Exact as :func:`sample_exponential`: propose i uniformly, accept with probability
    exp(−γᵢ), γᵢ = (max u − uᵢ)/s = (max u − uᵢ)·q/p for s = p/q, by the exact
    Bernoulli(exp(−γ)) of :func:`dpkit.core.samplers.bernoulli_exp` on machine integers; the
    first accepted proposal has the exponential mechanism's law. Falls back to
    :func:`sample_exponential` vector by vector when the integers need more than 63 bits.
    ``scores`` is a sequence of 1-D integer vectors, or a 2-D integer array (rows of one
    length, read without a loop over the rows). (Moved from ``dpkit.release.ranges.partition``.)
    """
    s = positive(scale, "scale")
    p, q = s.numerator, s.denominator
    if isinstance(scores, np.ndarray) and scores.ndim == 2:  # equal lengths: one array
        flat = scores.astype(np.int64).reshape(-1)
        sizes = np.full(scores.shape[0], scores.shape[1], dtype=np.int64)
    else:
        vecs = [np.asarray(v, dtype=np.int64).reshape(-1) for v in scores]
        flat = np.concatenate(vecs) if vecs else np.zeros(0, dtype=np.int64)
        sizes = np.array([v.size for v in vecs], dtype=np.int64)
    if not sizes.size:
        return []
    if not sizes.all():
        raise DomainError("every score vector needs at least one score")
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    gaps = np.repeat(np.maximum.reduceat(flat, offsets), sizes) - flat  # max u − uᵢ ≥ 0
    if p >= 1 << 63 or int(gaps.max()) * q >= 1 << 63:
        return [int(sample_exponential(v, s)) for v in np.split(flat, offsets[1:])]
    numer = gaps.astype(np.uint64) * np.uint64(q)  # as integer_gaps, all vectors at once
    # the expected acceptance of each vector, in floats: it only sizes the batches
    acceptance = np.maximum(1e-6, np.add.reduceat(np.exp(-gaps.astype(np.float64) * (q / p)),
                                                  offsets) / sizes)
    result = np.full(sizes.size, -1, dtype=np.int64)
    pending = np.arange(sizes.size)
    while pending.size:
        batch = np.minimum((1.2 / acceptance[pending]).astype(np.int64) + 2, 1 << 16)
        node = np.repeat(pending, batch)
        local = rng.uniform_below(sizes[node].astype(np.uint64)).astype(np.int64)
        ok = samplers.bernoulli_exp(numer[offsets[node] + local], p)
        won, first = np.unique(node[ok], return_index=True)  # first acceptance per vector
        result[won] = local[ok][first]
        pending = pending[result[pending] < 0]
    return [int(i) for i in result]


@register(audit=_audit_many)
def make_exponential_many(scale: Number, *, monotonic: bool = False) -> Measurement:
    """The exponential mechanism on several integer score vectors at once, one draw each
    (:func:`sample_exponential_many`), for vectors computed on *disjoint* parts of the data.

    Returns
    -------
    Measurement
        Input: a sequence of 1-D integer score vectors under :class:`LInfDistance` (the
        largest change of any score); output a list of indices. Privacy map:
        d_in ↦ PureDP(2·d_in/s), or d_in/s if monotonic — each draw is the exponential
        mechanism (McSherry & Talwar 2007), and a record changes the scores of one part only,
        so the draws cost that together (parallel composition, McSherry 2009). The caller
        guarantees the disjointness.
    """
    return selection_measurement(sample_exponential_many, scale, monotonic, "exponential_many",
                                 SCORE_VECTORS)


def selection_measurement(sample: Callable[[Any, Fraction], Any], scale: Number, monotonic: bool,
                          name: str, domain: VectorDomain = SCORES) -> Measurement:
    """A selection measurement over scores (L∞ input, input domain ``domain``) with the
    exponential mechanism's map: d_in ↦ PureDP(2·d_in/s), or d_in/s when all scores move the
    same way."""
    s = positive(scale, "scale")
    factor = 1 if monotonic else 2
    return Measurement(
        function=lambda scores: sample(scores, s),
        input_metric=LInfDistance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(factor * non_negative(d_in, "d_in") / s),
        name=f"{name}(scale={float(s):.6g})",
        input_domain=domain,
    )
