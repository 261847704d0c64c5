"""Randomized response over k categories (Warner 1965; k-ary form, Kairouz, Oh & Viswanath
2016 "k-RR"), sampled exactly.

Each value is kept with probability e^ε/(e^ε + k − 1) and otherwise replaced by one of the
other k − 1 categories uniformly. Sampling: propose a category uniformly and accept it with
probability 1 if it is the true value, exp(−ε) otherwise (exact Bernoulli(exp(−ε)), CKS20
Alg. 1); the accepted category has exactly the k-RR distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dpkit.core import rng, samplers
from dpkit.core.component import Measurement
from dpkit.core.domains import CategoricalDomain, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import Number, non_negative, positive, to_fraction
from dpkit.errors import DomainError
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["make_randomized_response", "make_binary_randomized_response", "response_coins",
           "response_bits"]


def _audit() -> list[AuditCase]:
    """Three categories at ε = 1 on the pair "a", "b"; broken: ε = 2 for the same claim."""
    def sampler(epsilon: int) -> Sampler:
        m = make_randomized_response(["a", "b", "c"], epsilon)
        return lambda value, n: np.asarray(m(np.array([value] * n, dtype=object)))

    return [AuditCase("randomized_response", make_randomized_response(["a", "b", "c"], 1),
                      sampler(1), sampler(2), "a", "b")]


def _audit_binary() -> list[AuditCase]:
    """ε = 1 on the pair True, False; broken: ε = 2 for the same claim."""
    def sampler(epsilon: int) -> Sampler:
        m = make_binary_randomized_response(epsilon)
        return lambda value, n: np.asarray(m(np.full(n, value)))

    return [AuditCase("binary_randomized_response", make_binary_randomized_response(1),
                      sampler(1), sampler(2), True, False)]


@register(audit=_audit)
def make_randomized_response(categories: Sequence[Any], epsilon: Number) -> Measurement:
    """k-ary randomized response with exact sampling.

    Parameters
    ----------
    categories : sequence
        The k ≥ 2 distinct possible values.
    epsilon : number
        ε > 0 in nats (floats rounded down).

    Returns
    -------
    Measurement
        Input: one value, or an array of values (one per respondent), each in ``categories``
        (input domain: a vector of the categorical domain, checked before any draw);
        output the same shape. Under :class:`HammingDistance` (d_in respondents change their
        value) the privacy map is d_in ↦ PureDP(d_in·ε): P[out = y | x] / P[out = y | x′]
        ≤ e^ε for every y (Kairouz, Oh & Viswanath 2016).

    Raises
    ------
    DomainError
        If there are fewer than 2 categories, duplicates, ε ≤ 0, or a value outside them.
    """
    cats = list(categories)
    if len(cats) < 2 or len(set(cats)) != len(cats):
        raise DomainError("randomized response needs at least 2 distinct categories")
    eps = positive(epsilon, "epsilon", up=False)
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)

    def function(x: Any) -> Any:
        values = np.asarray(x, dtype=object)
        scalar = values.ndim == 0
        flat = values.reshape(-1)
        try:
            true = np.array([index[v] for v in flat], dtype=np.int64)
        except KeyError:
            raise DomainError("a value is not one of the categories") from None
        out = np.empty(true.size, dtype=np.int64)
        todo = np.arange(true.size)
        while todo.size:
            proposal = rng.uniform_below(k, todo.size).astype(np.int64)
            same = proposal == true[todo]
            accept = same.copy()
            other = np.flatnonzero(~same)
            if other.size:
                accept[other] = samplers.bernoulli_exp(eps.numerator, eps.denominator,
                                                       size=other.size)
            out[todo[accept]] = proposal[accept]
            todo = todo[~accept]
        result = np.array([cats[i] for i in out], dtype=object)
        return result[0] if scalar else result

    return Measurement(
        function=function,
        input_metric=HammingDistance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(non_negative(d_in, "d_in") * eps),
        name=f"randomized_response(k={k}, epsilon={float(eps):.6g})",
        input_domain=VectorDomain(CategoricalDomain(cats)),
    )


@register(audit=_audit_binary)
def make_binary_randomized_response(epsilon: Number) -> Measurement:
    """Warner's randomized response on booleans: keep each bit with probability
    e^ε/(e^ε + 1), flip it otherwise (Warner 1965; Dwork & Roth §3.2). ε-DP per respondent.

    Input: a bool or bool array; output the same shape as bools.
    """
    inner = make_randomized_response([False, True], epsilon)
    return inner >> (lambda out: np.asarray(out, dtype=bool) if np.ndim(out) else bool(out))


def response_coins(p: Number, size: int | tuple[int, ...]) -> np.ndarray:
    """The coins of a local randomizer (:mod:`dpkit.local`): exact Bernoulli(p) draws.

    The one place the local protocols draw their randomized-response coins; each protocol
    sets ``p`` from its own privacy analysis, rounded to a multiple of 2^-32 towards more
    noise. A dyadic ``p`` takes the core's byte-wise fast path
    (:func:`dpkit.core.samplers.bernoulli`), about one random byte per coin.

    Parameters
    ----------
    p : number
        The probability of True, a rational in [0, 1].
    size : int or tuple of int
        The shape of the result.

    Returns
    -------
    numpy.ndarray
        Booleans of shape ``size``.

    Raises
    ------
    DomainError
        If p ∉ [0, 1] or its denominator is 2^64 or more.
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    return samplers.bernoulli(p, int(np.prod(shape))).reshape(shape)


def response_bits(p: Number, shape: tuple[int, int]) -> np.ndarray:
    """:func:`response_coins` packed: the m-bit reports of the sketching protocols (RAPPOR,
    the count-mean sketches), drawn 64 coins per random word
    (:func:`dpkit.core.samplers.bernoulli_packed`).

    Parameters
    ----------
    p : number
        The probability of a set bit, a multiple of 2^-32 in [0, 1].
    shape : (int, int)
        (n, m), m a multiple of 8.

    Returns
    -------
    numpy.ndarray
        uint8 (n, m/8): bit t of byte s is bit 8s + t of the row, each an independent exact
        Bernoulli(p) draw.

    Raises
    ------
    DomainError
        If ``p`` is not a multiple of 2^-32 in [0, 1].
    """
    n, m = shape
    nbytes = n * (m // 8)
    words = samplers.bernoulli_packed(to_fraction(p), (nbytes + 7) // 8)
    return words.view(np.uint8)[:nbytes].reshape(n, m // 8)
