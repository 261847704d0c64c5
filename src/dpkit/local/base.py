"""Shared parts of the local frequency oracles: parameters, the out-of-domain rule, exact
dyadic Bernoulli draws, the estimator with its variance and CI, and Norm-Sub.

Every oracle here is a *pure* protocol in the sense of Wang, Blocki, Li & Jha, "Locally
Differentially Private Protocols for Frequency Estimation", USENIX Security 2017 (§3,
Definition 2): a report y *supports* a set of values, and there are p* > q* with
P[y supports v | x = v] = p* and P[y supports v | x ≠ v] = q*. The unbiased estimator of
the frequency of v from n reports with support count C(v) is (their §3)

    f̂(v) = (C(v)/n − q*) / (p* − q*),

and its variance (their §3, divided by n² to speak of frequencies) is

    Var[f̂(v)] = q*(1 − q*) / (n (p* − q*)²) + f(v) (1 − p* − q*) / (n (p* − q*)).

Probabilities are exact rationals, drawn as randomized-response coins
(:func:`dpkit.mechanisms.randomized_response.response_coins`, exact Bernoulli draws): an
irrational probability of a paper (e^ε/(e^ε + k − 1)) is rounded to a multiple of 2^-32 in
the direction that adds noise, so the protocol's true ε is at most the one claimed, and the
estimator uses the rounded (exact) p*, q*.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from dpkit.core.numbers import Number, exp_down, integer, positive
from dpkit.core.renamed import complement, renamed
from dpkit.errors import DomainError
from dpkit.local.values import local_measurement, normal_z

__all__ = ["BITS", "check_k_epsilon", "to_index", "dyadic_down",
           "exp_lower", "estimate_frame", "norm_sub", "pure_variance"]

BITS = 32  # probabilities are multiples of 2^-BITS


def check_k_epsilon(k: int, epsilon: Number) -> tuple[int, Fraction]:
    """Validate a domain size k ≥ 2 and ε > 0 (rounded down: a float ε is never exceeded).

    Raises
    ------
    DomainError
        If k is not an integer ≥ 2 or ε ≤ 0.
    """
    size = integer(k, "k", minimum=2)
    return size, positive(epsilon, "epsilon", up=False)


def exp_lower(eps: Fraction) -> Fraction:
    """A rational ≤ e^ε (the probabilities built from it are conservative)."""
    return exp_down(eps)


def dyadic_down(x: Fraction, bits: int = BITS) -> Fraction:
    """Largest multiple of 2^-bits that is ≤ x."""
    scale = 1 << bits
    return Fraction((x.numerator * scale) // x.denominator, scale)


def to_index(values: npt.ArrayLike, k: int, fallback: int = 0) -> np.ndarray:
    """Map values to indices in [0, k): the out-of-domain rule of every oracle.

    A value that is an integer in [0, k) (a Python or NumPy integer, or an integral float)
    is kept (bools count as 0 and 1); anything else (negative, ≥ k, fractional, NaN, None,
    a string) is replaced by ``fallback`` *before* randomising. The report is then
    distributed exactly as for a user holding ``fallback``, so nothing about the bad value
    is revealed beyond what any in-domain value reveals, and nothing raises on the data
    side.
    """
    arr = np.asarray(values)
    flat = arr.reshape(-1)
    if flat.dtype.kind in "iu":
        ok = (flat >= 0) & (flat < k)
        return np.where(ok, flat, fallback).astype(np.int64)
    if flat.dtype.kind == "b":
        return flat.astype(np.int64)  # False, True -> 0, 1 (k ≥ 2)
    if flat.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(flat) & (flat >= 0) & (flat < k) & (np.floor(flat) == flat)
        return np.where(ok, np.where(ok, flat, 0).astype(np.int64), fallback)
    out = np.full(flat.size, fallback, dtype=np.int64)
    for i, v in enumerate(flat.tolist()):
        integral = isinstance(v, int | np.integer | np.bool_)
        if (integral or isinstance(v, float) and math.isfinite(v) and v.is_integer()) and (
                0 <= v < k):
            out[i] = int(v)
    return out


def pure_variance(p: float, q: float, n: int, f: npt.ArrayLike = 0.0) -> Any:
    """Var[f̂(v)] of a pure protocol (Wang et al. 2017, §3, over n²)."""
    return (q * (1 - q) + np.asarray(f) * (p - q) * (1 - p - q)) / (n * (p - q) ** 2)


def norm_sub(estimates: np.ndarray) -> np.ndarray:
    """Norm-Sub (Wang, Lopuhaä-Zwakenberg, Li, Škorić & Li, NDSS 2020, §IV-B): the
    frequencies max(f̂ + c, 0) with the one shift c that makes them sum to 1 (non-negative and
    consistent; the Euclidean projection onto the probability simplex)."""
    f = np.asarray(estimates, dtype=np.float64)
    s = np.sort(f)[::-1]
    cum = np.cumsum(s)
    j = np.arange(1, f.size + 1)
    rho = int(np.nonzero(s + (1 - cum) / j > 0)[0][-1])
    shift = (1 - cum[rho]) / (rho + 1)
    return np.maximum(f + shift, 0.0)


@renamed(alpha=("confidence", complement))
def estimate_frame(support: np.ndarray, n: int, p: float, q: float, *, confidence: float = 0.95,
                   postprocess: str | None = None) -> pl.DataFrame:
    """The server's answer from support counts: a Polars frame, one row per value.

    Columns: ``value`` (0 … k−1), ``estimate`` (frequency, unbiased unless post-processed),
    ``std_error`` (square root of Wang et al.'s variance with f(v) replaced by the estimate
    clipped to [0, 1]), ``ci_low``/``ci_high`` (normal (level ``confidence``) interval around the
    unbiased estimate). With ``postprocess="norm-sub"`` the ``estimate`` column holds the
    Norm-Sub frequencies and ``unbiased`` the raw ones (the SE and CI refer to these).

    Raises
    ------
    DomainError
        If n < 1, confidence ∉ (0, 1) or ``postprocess`` is not None or "norm-sub".
    """
    if n < 1 or not 0 < confidence < 1:
        raise DomainError("need n ≥ 1 reports and confidence in (0, 1)")
    if postprocess not in (None, "norm-sub"):
        raise DomainError("postprocess must be None or 'norm-sub'")
    raw = (np.asarray(support, dtype=np.float64) / n - q) / (p - q)
    se = np.sqrt(np.maximum(pure_variance(p, q, n, np.clip(raw, 0, 1)), 0))
    z = normal_z(confidence)
    cols: dict[str, Any] = {"value": np.arange(raw.size), "estimate": raw, "std_error": se,
                            "ci_low": raw - z * se, "ci_high": raw + z * se}
    if postprocess == "norm-sub":
        cols["unbiased"] = raw
        cols["estimate"] = norm_sub(raw)
    return pl.DataFrame(cols)


class FrequencyOracle:
    """A local frequency oracle over the domain {0, …, k − 1}: client and server side.

    Subclasses set ``p`` and ``q`` (the exact support probabilities p*, q* as Fractions)
    and implement ``_randomize`` (indices → reports) and ``support`` (reports → support
    counts). ``epsilon`` is the claimed per-report pure local ε: every pair of inputs x, x′
    gives P[y | x] ≤ e^ε P[y | x′] for every report y.

    Parameters
    ----------
    k : int
        Domain size, ≥ 2.
    epsilon : number
        ε > 0 in nats (a float is rounded down).
    fallback : int
        The in-domain value an out-of-domain input is replaced by before randomising
        (see :func:`to_index`); default 0.

    Raises
    ------
    DomainError
        If k < 2, ε ≤ 0 or ``fallback`` ∉ [0, k).
    """

    name = "oracle"
    p: Fraction
    q: Fraction

    def __init__(self, k: int, epsilon: Number, fallback: int = 0) -> None:
        self.k, self.epsilon = check_k_epsilon(k, epsilon)
        self.fallback = integer(fallback, "fallback", minimum=0, maximum=self.k - 1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k}, epsilon={float(self.epsilon):.6g})"

    def randomize(self, values: npt.ArrayLike) -> np.ndarray:
        """Client side: one report per value (vectorised; exact randomness from
        :mod:`dpkit.core.rng`). Out-of-domain values follow :func:`to_index`."""
        return self._randomize(to_index(values, self.k, self.fallback))

    def _randomize(self, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def support(self, reports: np.ndarray) -> np.ndarray:
        """Server side: C(v), the number of reports supporting each v (int64, length k)."""
        raise NotImplementedError

    def supports(self, reports: np.ndarray) -> np.ndarray:
        """Boolean matrix (n, k): whether report i supports value v (a post-processing of
        the reports; for small k, tests and the audit)."""
        raise NotImplementedError

    @renamed(alpha=("confidence", complement))
    def estimate(self, reports: np.ndarray, *, confidence: float = 0.95,
                 postprocess: str | None = None) -> pl.DataFrame:
        """Server side: frequency estimates with standard errors and CIs (see
        :func:`estimate_frame`)."""
        reports = np.asarray(reports)
        return self.estimate_from_support(self.support(reports), len(reports),
                                          confidence=confidence, postprocess=postprocess)

    @renamed(alpha=("confidence", complement))
    def estimate_from_support(self, support: np.ndarray, n: int, *, confidence: float = 0.95,
                              postprocess: str | None = None) -> pl.DataFrame:
        """The estimate from support counts summed over batches of reports (streaming)."""
        return estimate_frame(support, n, float(self.p), float(self.q), confidence=confidence,
                              postprocess=postprocess)

    def variance(self, n: int, f: npt.ArrayLike = 0.0) -> Any:
        """Closed-form Var[f̂(v)] with n reports and true frequency f (Wang et al. 2017,
        §3, over n²; the protocol's own formula is in its class docstring)."""
        return pure_variance(float(self.p), float(self.q), n, f)

    def code(self, reports: np.ndarray) -> np.ndarray:
        """One integer per report: the bitmask of the values it supports (k ≤ 62)."""
        weights = np.left_shift(np.int64(1), np.arange(self.k, dtype=np.int64))
        return (self.supports(reports).astype(np.int64) * weights).sum(axis=1)

    @property
    def measurement(self) -> Any:
        """The randomizer as a :class:`~dpkit.core.component.Measurement`: input a vector of
        values (one per user, anything: see :func:`to_index`), output the reports; under
        :class:`HammingDistance` the map is d_in ↦ PureDP(d_in · ε)."""
        return local_measurement(self.randomize, self.epsilon, self.name, k=self.k)


class BitReports(FrequencyOracle):
    """Oracles whose report is a k-bit vector (a boolean matrix (n, k) for n reports) that
    supports exactly the values whose bit is set: the unary encodings and subset selection."""

    def support(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=bool).sum(axis=0, dtype=np.int64)

    def supports(self, reports: np.ndarray) -> np.ndarray:
        return np.asarray(reports, dtype=bool)


def audit_cases(cls: Any, name: str, **kwargs: Any) -> list[Any]:
    """The audit case of a local randomizer: k = 4 at ε = 1 on the neighbours 0, 1 (any two
    inputs are neighbours in the local model); broken: the same protocol at ε = 2 under the
    claim ε = 1. Outputs are coded by their support bitmask (a post-processing)."""
    from dpkit.mechanisms.registry import AuditCase

    def sampler(epsilon: int) -> Any:
        oracle = cls(4, epsilon, **kwargs)
        return lambda value, n: oracle.code(oracle.randomize(np.full(n, value)))

    return [AuditCase(f"local_{name}", cls(4, 1, **kwargs).measurement, sampler(1), sampler(2),
                      0, 1)]
