"""Heavy hitters over a large domain of strings: the prefix-extending method (PEM) on top of
optimised local hashing.

Sources: Wang, Li, Jha et al., "Locally Differentially Private Heavy Hitter
Identification", IEEE TDSC 2021 (PEM, §4: users split into groups, group i reports the
prefix of length s_i of its value through OLH, the server extends the top candidates of
level i − 1 by every next piece and keeps the top ones); Wang, Blocki, Li & Jha, USENIX
Security 2017, §4.4 (OLH and its variance); Dietzfelbinger, "Universal hashing and k-wise
independent random variables via integer arithmetic without primes", STACS 1996
(multiply–add–shift hashing).

Strings are sequences of symbols from a declared alphabet, read up to a declared length L;
the prefix tree grows one symbol per level (levels 1 … L; an end marker ⊥ stands for "the
string has ended"). Every user belongs to exactly one of the L groups (a uniform draw,
independent of the data) and sends one OLH report of its length-s prefix in group s, so
each user's value passes through one ε-DP randomizer: ε-LDP overall by parallel
composition (each report is a function of one user only). Group s's reports estimate the
length-s prefixes' frequencies over the whole population (the group is a uniform sample).

dpkit's :class:`~dpkit.local.OLH` hashes a domain of at most 65,521 values; prefixes live in
a domain of (|alphabet| + 1)^s values, so PEM uses :class:`HashedOLH`, OLH whose per-user
hash is multiply–add–shift on the 32-bit identifier of the prefix into g = 2^t buckets:
strongly universal, so for x ≠ v the bucket of v is uniform and independent of that of x,
q* = 1/g exactly, and the estimator is exactly unbiased.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from dpkit.core import rng
from dpkit.core.numbers import Number, integer, positive
from dpkit.core.renamed import complement, renamed
from dpkit.errors import DomainError
from dpkit.local.base import dyadic_down, exp_lower, pure_variance
from dpkit.local.values import local_measurement, normal_z
from dpkit.mechanisms.randomized_response import response_coins
from dpkit.mechanisms.registry import AuditCase, register

__all__ = ["HashedOLH", "PEM", "PEMReports"]

_CHUNK = 1 << 22  # hash evaluations per block of the aggregator


class HashedOLH:
    """Optimised local hashing over 32-bit identifiers (any domain of size ≤ 2^32).

    Report: uint64 row (a, b, y), a and b uniform 64-bit words, y = h_{a,b}(x) =
    ((a x + b) mod 2^64) >> (64 − t) with probability p = e^ε/(e^ε + g − 1) (rounded down to
    a multiple of 2^-32) and otherwise one of the other g − 1 buckets uniformly; g = 2^t is
    the power of two with the lower variance next to e^ε + 1. ε-LDP: (a, b) does not depend
    on x and y is GRR over g buckets. The report supports v iff h_{a,b}(v) = y: p* = p,
    q* = 1/g, and

        Var[f̂(v)] = q*(1 − q*)/(n (p* − q*)²) + f(v)(1 − p* − q*)/(n (p* − q*))

    (Wang et al. 2017, §3–4.4).

    Raises
    ------
    DomainError
        If ε ≤ 0 or g is not a power of two in [2, 2^16].
    """

    def __init__(self, epsilon: Number, g: int | None = None) -> None:
        self.epsilon = positive(epsilon, "epsilon", up=False)
        e = exp_lower(self.epsilon)
        if g is None:
            low = max(2, 1 << (int(float(e) + 1).bit_length() - 1))
            g = min((low, 2 * low), key=lambda c: self._var_star(e, c))
        self.g = integer(g, "g", minimum=2, maximum=1 << 16)
        if self.g & (self.g - 1):
            raise DomainError("g must be a power of two")
        self.t = self.g.bit_length() - 1
        self.p = dyadic_down(e / (e + self.g - 1))
        self.q = Fraction(1, self.g)

    @staticmethod
    def _var_star(e: Fraction, g: int) -> float:
        p = float(e / (e + g - 1))
        return (1 / g) * (1 - 1 / g) / (p - 1 / g) ** 2

    def _hash(self, a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
        return (a * x + b) >> np.uint64(64 - self.t)

    def randomize(self, ids: np.ndarray) -> np.ndarray:
        """Client side: one (a, b, y) row (uint64 (n, 3)) per identifier x < 2^32.

        Raises
        ------
        DomainError
            If an identifier is negative or ≥ 2^32 (the hash family is strongly universal
            on 32-bit keys only); PEM's identifiers always are.
        """
        raw = np.asarray(ids)
        if raw.size and (raw.dtype.kind not in "iu" or raw.min() < 0 or raw.max() >= 1 << 32):
            raise DomainError("identifiers must be integers in [0, 2^32)")
        x = raw.astype(np.uint64)
        n = x.size
        a, b = rng.words(n, 64), rng.words(n, 64)
        h = self._hash(a, b, x)
        keep = response_coins(self.p, n)
        other = rng.uniform_below(self.g - 1, n).astype(np.uint64)
        other += other >= h
        return np.stack([a, b, np.where(keep, h, other)], axis=1)

    def support_at(self, reports: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """C(v) for the identifiers ``ids``: the number of reports supporting each."""
        rep = np.asarray(reports, dtype=np.uint64)
        ids = np.asarray(ids, dtype=np.uint64)
        out = np.zeros(ids.size, dtype=np.int64)
        rows = max(1, _CHUNK // max(ids.size, 1))
        for s in range(0, rep.shape[0], rows):
            part = rep[s: s + rows]
            hit = self._hash(part[:, :1], part[:, 1:2], ids[None, :]) == part[:, 2:3]
            out += hit.sum(axis=0, dtype=np.int64)
        return out

    def supports(self, reports: np.ndarray, v: int) -> np.ndarray:
        """Whether each report supports the identifier v (bool (n,))."""
        rep = np.asarray(reports, dtype=np.uint64)
        ident = np.full(len(rep), v, dtype=np.uint64)
        return self._hash(rep[:, 0], rep[:, 1], ident) == rep[:, 2]

    def unbiased(self, support: np.ndarray, n: int) -> np.ndarray:
        """f̂(v) = (C(v)/n − q*)/(p* − q*)."""
        p, q = float(self.p), float(self.q)
        return (np.asarray(support, dtype=np.float64) / n - q) / (p - q)

    def variance(self, n: int, f: npt.ArrayLike = 0.0) -> Any:
        return pure_variance(float(self.p), float(self.q), n, f)

    def shifts(self, reports: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """(y − h_{a,b}(x)) mod g per report and input (tests of the law)."""
        rep = np.asarray(reports, dtype=np.uint64)
        h = self._hash(rep[:, 0], rep[:, 1], np.asarray(ids, dtype=np.uint64))
        return (rep[:, 2].astype(np.int64) - h.astype(np.int64)) % self.g


@dataclass(frozen=True)
class PEMReports:
    """PEM reports of n users: ``group`` (int64, n; group s − 1 reports length-s prefixes)
    and ``olh`` (uint64 (n, 3), the HashedOLH report of that prefix)."""

    group: np.ndarray
    olh: np.ndarray

    def __len__(self) -> int:
        return int(self.group.size)


@register(audit=lambda: _audit())
class PEM:
    """Prefix-extending heavy-hitter identification (Wang et al., TDSC 2021, §4) over strings
    of symbols, on :class:`HashedOLH`.

    Client (``randomize``): a uniform group s ∈ {1 … L}; the HashedOLH report of the
    value's length-s prefix. ε-LDP per user (one report; groups are parallel).
    Server (``estimate``): level 1's candidates are every symbol and ⊥; at level s the
    ``keep`` candidates with the largest estimates from group s are extended by every symbol
    and ⊥ (an ended candidate only by ⊥) to form level s + 1's; the answer is the top-k of
    level L with the estimates of group L, which are unbiased for the population's
    frequencies (group L is a uniform sample of the users). Each estimate's SE is OLH's
    variance with n the group's size; the counts are estimate × n.

    Parameters
    ----------
    epsilon : number
        ε > 0 in nats (a float is rounded down).
    alphabet : str or sequence
        The symbols (distinct, at least one). A ``str`` alphabet reads ``str`` values
        character by character; otherwise values are sequences of symbols.
    length : int
        L ≥ 1: strings are identified by their first L symbols; needs (|alphabet| + 1)^L
        ≤ 2^32.
    top_k : int
        Number of heavy hitters returned (≥ 1).
    keep : int, optional
        Candidates kept per level (default ``top_k``; the paper keeps k).

    Raises
    ------
    DomainError
        On ε ≤ 0, an empty or repeated alphabet, L < 1, top_k < 1, keep < 1, or
        (|alphabet| + 1)^L > 2^32.

    Notes
    -----
    Out-of-alphabet rule: a value is read up to its first symbol outside the alphabet (the
    rest, and anything beyond L symbols, is replaced by ⊥), so the report is that of the
    truncated string. A value that is not a string (str alphabet) is read by ``str()``.
    """

    name = "pem"

    def __init__(self, epsilon: Number, alphabet: str | Sequence[str], length: int, top_k: int = 10,
                 keep: int | None = None) -> None:
        self.oracle = HashedOLH(epsilon)
        self.epsilon = self.oracle.epsilon
        symbols = list(alphabet)
        if not symbols or len(set(symbols)) != len(symbols):
            raise DomainError("the alphabet must be a non-empty set of distinct symbols")
        self.text = isinstance(alphabet, str)
        self.alphabet = symbols
        self.base = len(symbols) + 1  # index len(symbols) is the end marker ⊥
        self.length = integer(length, "length", minimum=1)
        if self.base ** self.length > 1 << 32:
            raise DomainError("(|alphabet| + 1)^length must be ≤ 2^32")
        self.top_k = integer(top_k, "top_k", minimum=1)
        self.keep = self.top_k if keep is None else integer(keep, "keep", minimum=1)

    def __repr__(self) -> str:
        return (f"PEM(epsilon={float(self.epsilon):.6g}, |alphabet|={len(self.alphabet)}, "
                f"length={self.length}, top_k={self.top_k})")

    def encode(self, values: Sequence[object] | np.ndarray) -> np.ndarray:
        """Symbol indices (int64 (n, L)); ⊥ = |alphabet| after the end or the first unknown
        symbol (the out-of-alphabet rule)."""
        end = len(self.alphabet)
        if self.text:
            arr = np.array([v if isinstance(v, str) else str(v) for v in values],
                           dtype=f"<U{self.length}")
            codes = arr.reshape(-1, 1).view(np.uint32).reshape(arr.size, self.length)
            lut = {ord(s): i for i, s in enumerate(self.alphabet) if len(s) == 1}
            table = np.full(max(max(lut, default=0), int(codes.max(initial=0))) + 1, end)
            for cp, i in lut.items():
                table[cp] = i
            idx = table[codes]
        else:
            pos = {s: i for i, s in enumerate(self.alphabet)}
            idx = np.full((len(values), self.length), end, dtype=np.int64)
            for r, v in enumerate(values):
                for c, sym in enumerate(list(v)[: self.length]):
                    try:
                        idx[r, c] = pos[sym]
                    except (KeyError, TypeError):
                        break
        ended = np.maximum.accumulate(idx == end, axis=1)
        return np.where(ended, end, idx).astype(np.int64)

    def prefix_ids(self, idx: np.ndarray, s: int) -> np.ndarray:
        """The identifier of each row's length-s prefix, Σ_{i<s} idx_i (|A| + 1)^{s−1−i}."""
        weights = self.base ** np.arange(s - 1, -1, -1, dtype=np.int64)
        return (idx[:, :s] @ weights).astype(np.uint64)

    def randomize(self, values: Sequence[object] | np.ndarray) -> PEMReports:
        """Client side: one report per value (see the class docstring)."""
        idx = self.encode(values)
        n = idx.shape[0]
        group = rng.uniform_below(self.length, n).astype(np.int64)
        ids = np.empty(n, dtype=np.uint64)
        for s in range(1, self.length + 1):
            sel = group == s - 1
            ids[sel] = self.prefix_ids(idx[sel], s)
        return PEMReports(group, self.oracle.randomize(ids))

    def _extend(self, prefixes: np.ndarray) -> np.ndarray:
        end = len(self.alphabet)
        out = []
        for row in prefixes:
            if row.size and row[-1] == end:
                out.append(np.append(row, end))
            else:
                out.extend(np.append(row, sym) for sym in range(self.base))
        return np.array(out, dtype=np.int64)

    def decode(self, prefix: np.ndarray) -> Any:
        """The string (or tuple) of a candidate, without its ⊥ padding."""
        syms = [self.alphabet[i] for i in prefix.tolist() if i < len(self.alphabet)]
        return "".join(syms) if self.text else tuple(syms)

    @renamed(alpha=("confidence", complement))
    def estimate(self, reports: PEMReports, *, confidence: float = 0.95) -> pl.DataFrame:
        """Server side: the top-k strings, by decreasing estimate.

        Returns
        -------
        polars.DataFrame
            ``value`` (the string or tuple, ⊥ padding removed; a value shorter than L is a
            complete string, one of length L may continue beyond L), ``estimate`` (frequency
            in the population), ``count`` (estimate × n), ``std_error``, ``ci_low``,
            ``ci_high`` (normal, level ``confidence``).

        Raises
        ------
        DomainError
            If confidence ∉ (0, 1) or a group has no report.
        """
        if not 0 < confidence < 1:
            raise DomainError("confidence must lie in (0, 1)")
        group = np.asarray(reports.group, dtype=np.int64)
        sizes = np.bincount(group, minlength=self.length)
        if sizes.size != self.length or (sizes == 0).any():
            raise DomainError("every group needs at least one report")
        cands = np.zeros((1, 0), dtype=np.int64)
        for s in range(1, self.length + 1):
            cands = self._extend(cands)
            mine = reports.olh[group == s - 1]
            est = self.oracle.unbiased(self.oracle.support_at(mine, self.prefix_ids(cands, s)),
                                       int(sizes[s - 1]))
            order = np.argsort(-est, kind="stable")
            top = order[: (self.top_k if s == self.length else self.keep)]
            cands, est = cands[top], est[top]
        n_last = int(sizes[-1])
        se = np.sqrt(np.maximum(self.oracle.variance(n_last, np.clip(est, 0, 1)), 0))
        z = normal_z(confidence)
        return pl.DataFrame({
            "value": [self.decode(c) for c in cands], "estimate": est,
            "count": est * len(group), "std_error": se, "ci_low": est - z * se,
            "ci_high": est + z * se})

    @property
    def measurement(self) -> Any:
        """One report per user as a :class:`~dpkit.core.component.Measurement` under
        :class:`HammingDistance`: d_in ↦ PureDP(d_in · ε)."""
        return local_measurement(self.randomize, self.epsilon, "pem", length=self.length)


def _audit() -> list[AuditCase]:
    """PEM over "ab" with L = 1 at ε = 1 on the strings "a" and "b" (one group: the report is
    HashedOLH's of the symbol); broken: ε = 3 under the claim ε = 1. Outputs are coded by
    which of the two values they support (a post-processing: 4 codes)."""

    def sampler(epsilon: Number) -> Any:
        pem = PEM(epsilon, "ab", 1, 1)

        def sample(value: Any, n: int) -> np.ndarray:
            rep = pem.randomize(np.full(n, value, dtype=object)).olh
            return pem.oracle.supports(rep, 0).astype(np.int64) + 2 * pem.oracle.supports(rep, 1)

        return sample

    return [AuditCase("local_pem", PEM(1, "ab", 1, 1).measurement, sampler(1), sampler(3),
                      "a", "b")]
