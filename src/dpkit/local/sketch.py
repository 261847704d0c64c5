"""Apple's count-mean sketch (CMS) and Hadamard count-mean sketch (HCMS).

Source: Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine
Learning Journal, 2017: Algorithm 1 (A_client-CMS), Algorithm 2 (A_server-CMS, the sketch
and the frequency estimate), Algorithms 3–4 (A_client-HCMS and A_server-HCMS) and their
variance statements.

Both sketch a value d with k hash functions h_1 … h_k into m columns. The client picks a
row j uniformly and reports

* CMS: the m-bit vector v ∈ {−1, +1}^m with v[h_j(d)] = +1 and −1 elsewhere, each entry
  flipped independently with probability π = 1/(e^{ε/2} + 1) (two entries differ between
  any two values, so one report is ε-DP);
* HCMS: one uniformly chosen coordinate l of the Hadamard transform of the one-hot vector
  e_{h_j(d)}, w = H[l, h_j(d)] = ±1, flipped with probability π = 1/(e^ε + 1) (one bit:
  ε-DP), so the report is log2(k) + log2(m) + 1 bits.

π is rounded up to a multiple of 2^-32 (more noise); the estimator uses the exact π through
c = 1/(1 − 2π) (c = (e^{ε/2} + 1)/(e^{ε/2} − 1) for CMS and (e^ε + 1)/(e^ε − 1) for HCMS
without rounding). The server builds the k × m sketch M (CMS: M[j] += k(c/2·ṽ + 1/2);
HCMS: M[j, l] += k c w̃, then M ← M H) and estimates the count of d as

    f̂(d) = m/(m − 1) · ((1/k) Σ_j M[j, h_j(d)] − n/m),

unbiased over the randomisation and the draw of the hash functions (the m/(m − 1)
corrects the expected collisions). Hash functions: multiply–add–shift h_{a,b}(x) =
((a x + b) mod 2^64) >> (64 − log2 m) on the value's 32-bit identifier x, with a, b uniform
64-bit words from :mod:`dpkit.core.rng` (Dietzfelbinger 1996: strongly universal, so two
distinct identifiers collide with probability exactly 1/m).

Sketch size vs accuracy (counts; n reports, n_d of them d, c as above):

    Var[f̂(d)] = (m/(m − 1))² [V_noise + Σ_{x ≠ d} n_x² (m − 1)/(k m²)],
    V_noise = (n c² − n_d − (n − n_d)(1 − 2/m)²)/4    (CMS),
    V_noise = n c² − n_d − (n − n_d)/m²                 (HCMS),

the first term the randomisation (given the hashes; Apple's variance statement), the
second the hash collisions (over the draw of the hashes; exact for 3-wise independent
hashes, an approximation for this 2-independent family). m sets the collision error — the
other values' mass leaking into d's cells, which the m/(m − 1) correction removes only on
average — and k averages it away (its variance falls as 1/k); the noise term barely depends
on k or m. HCMS's noise is about c_HCMS² n vs CMS's c_CMS² n/4: at equal ε HCMS costs
more variance for ε ≲ 2 but sends one bit instead of m. Apple used m = 1024 … 2048 and
k = 65,536 (emoji, words): with k·m ≫ n the collision term is negligible.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from dpkit.core import rng
from dpkit.core.numbers import Number, dyadic_up, integer, positive
from dpkit.core.renamed import complement, renamed
from dpkit.errors import DomainError
from dpkit.local.base import exp_lower
from dpkit.local.bits import group_bit_counts, value_ids, value_keys
from dpkit.local.values import local_measurement, normal_z
from dpkit.mechanisms.randomized_response import response_bits
from dpkit.mechanisms.registry import AuditCase, register

__all__ = ["CountMeanSketch", "HadamardCountMeanSketch", "CMSReports"]


@dataclass(frozen=True)
class CMSReports:
    """CMS reports of n users: ``row`` (int64, n), the hash chosen, and ``bits`` (uint8
    (n, m/8), packed little-endian; bit 1 stands for +1)."""

    row: np.ndarray
    bits: np.ndarray

    def __len__(self) -> int:
        return int(self.row.size)


def _rows_wht(x: np.ndarray) -> np.ndarray:
    """Walsh–Hadamard transform of each row (Sylvester order), exact on int64."""
    out = np.array(x, dtype=np.int64)
    k, m = out.shape
    h = 1
    while h < m:
        view = out.reshape(k, -1, 2, h)
        a, b = view[:, :, 0, :].copy(), view[:, :, 1, :].copy()
        view[:, :, 0, :], view[:, :, 1, :] = a + b, a - b
        h *= 2
    return out


class _Sketch:
    """Shared parts: parameters, hash seeds, hashing and the estimate."""

    name = "sketch"
    flip: Fraction

    def __init__(self, epsilon: Number, k: int, m: int, seeds: npt.ArrayLike | None = None) -> None:
        self.epsilon = positive(epsilon, "epsilon", up=False)
        self.k = integer(k, "k", minimum=1, maximum=1 << 20)
        self.m = integer(m, "m", minimum=2, maximum=1 << 24)
        if self.m & (self.m - 1):
            raise DomainError("m must be a power of two")
        self.shift = np.uint64(64 - (self.m.bit_length() - 1))
        if seeds is None:
            seeds = rng.words(2 * self.k, 64).reshape(self.k, 2)
        seeds = np.asarray(seeds)
        if seeds.shape != (self.k, 2) or seeds.dtype != np.uint64:
            raise DomainError("seeds must be a uint64 array of shape (k, 2)")
        self.seeds = seeds.copy()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={float(self.epsilon):.6g}, k={self.k}, m={self.m})"

    @property
    def c(self) -> float:
        """c = 1/(1 − 2π), the debiasing factor of one ±1 entry."""
        return float(1 / (1 - 2 * self.flip))

    def buckets(self, ids: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """h_j(x) for identifiers ``ids``: for each row j (array (len(ids), k)) or, with
        ``rows``, only h_{rows[i]}(ids[i])."""
        ids = np.asarray(ids, dtype=np.uint64)
        if rows is None:
            a, b, x = self.seeds[None, :, 0], self.seeds[None, :, 1], ids[:, None]
        else:
            a, b, x = self.seeds[rows, 0], self.seeds[rows, 1], ids
        return ((a * x + b) >> self.shift).astype(np.int64)

    def _ids(self, values: Any) -> np.ndarray:
        keys, inverse = value_keys(values)
        return value_ids(keys)[inverse] if keys else np.zeros(0, dtype=np.uint64)

    def noise_variance(self, n: float, n_d: np.ndarray | float) -> Any:
        raise NotImplementedError

    def variance(self, n: float, counts: Any, others_sq: Any = 0.0) -> Any:
        """Var[f̂(d)] in counts (module docstring): n reports, n_d = ``counts``, and
        ``others_sq`` = Σ_{x ≠ d} n_x² for the collision term."""
        scale = (self.m / (self.m - 1)) ** 2
        collide = np.asarray(others_sq) * (self.m - 1) / (self.k * self.m ** 2)
        return scale * (self.noise_variance(n, np.asarray(counts, dtype=float)) + collide)

    def _frame(self, cell_mean: np.ndarray, n: int, keys: list[str], confidence: float
               ) -> pl.DataFrame:
        counts = self.m / (self.m - 1) * (cell_mean - n / self.m)
        plug = np.clip(counts, 0, n)
        others = (plug ** 2).sum() - plug ** 2
        se = np.sqrt(np.maximum(self.variance(n, plug, others), 0)) / n
        est = counts / n
        z = normal_z(confidence)
        return pl.DataFrame({"value": keys, "estimate": est, "std_error": se,
                             "ci_low": est - z * se, "ci_high": est + z * se})

    def _candidates(self, candidates: Any, n: int, confidence: float
                    ) -> tuple[list[str], np.ndarray]:
        if not 0 < confidence < 1:
            raise DomainError("confidence must lie in (0, 1)")
        if n < 1:
            raise DomainError("need at least one report")
        keys = [str(c) for c in (candidates.tolist() if isinstance(candidates, np.ndarray)
                                 else list(candidates))]
        if not keys or len(set(keys)) != len(keys):
            raise DomainError("candidates must be a non-empty list of distinct values")
        return keys, self.buckets(value_ids(keys))

    @property
    def measurement(self) -> Any:
        """One report per user as a :class:`~dpkit.core.component.Measurement` under
        :class:`HammingDistance`: d_in ↦ PureDP(d_in · ε)."""
        return local_measurement(self.randomize, self.epsilon, self.name, k=self.k, m=self.m)

    def randomize(self, values: npt.ArrayLike) -> Any:
        raise NotImplementedError


@register(audit=lambda: _audit(CountMeanSketch, "cms"))
class CountMeanSketch(_Sketch):
    """Apple's count-mean sketch (Algorithms 1–2 of "Learning with Privacy at Scale").

    Client: a uniform row j, the ±1 vector with +1 at h_j(d), each entry flipped w.p.
    π = 1/(e^{ε/2} + 1) rounded up to a multiple of 2^-32: ε-DP per report (two entries
    differ between values, each with ratio (1 − π)/π ≤ e^{ε/2}). Server: the sketch and the
    estimate of the module docstring, with variance (counts)

        Var[f̂(d)] = (m/(m − 1))² [(n c² − n_d − (n − n_d)(1 − 2/m)²)/4
                                   + Σ_{x≠d} n_x² (m − 1)/(k m²)].

    Parameters
    ----------
    epsilon : number
        ε > 0 in nats (a float is rounded down).
    k : int
        Number of hash functions (sketch rows), in [1, 2^20]; default 256.
    m : int
        Sketch columns, a power of two in [8, 2^24] (the report has m bits); default 1024.
    seeds : uint64 array (k, 2), optional
        Public hash seeds (a, b) per row, shared by clients and server (default: drawn).

    Raises
    ------
    DomainError
        ε ≤ 0, bad k, m not a power of two ≥ 8, bad seeds.

    Notes
    -----
    Values are identified by their text ``str(value)`` and hashed to 32-bit identifiers
    (BLAKE2b); there is no fixed domain: any value is sketched, and ``estimate`` answers for
    a candidate list.
    """

    name = "cms"

    def __init__(self, epsilon: Number, k: int = 256, m: int = 1024,
                 seeds: npt.ArrayLike | None = None
                 ) -> None:
        super().__init__(epsilon, k, m, seeds)
        if self.m < 8:
            raise DomainError("the count-mean sketch needs m ≥ 8")
        e = exp_lower(self.epsilon / 2)
        self.flip = dyadic_up(1 / (e + 1), 32)

    def randomize(self, values: npt.ArrayLike) -> CMSReports:
        """Client side: one report per value (exact randomness from :mod:`dpkit.core.rng`)."""
        ids = self._ids(values)
        n = ids.size
        row = rng.uniform_below(self.k, n).astype(np.int64)
        col = self.buckets(ids, row)
        bits = response_bits(self.flip, (n, self.m))  # 1 = flip; v is −1 (bit 0) but at col
        bits[np.arange(n), col >> 3] ^= (np.uint8(1) << (col & 7).astype(np.uint8))
        return CMSReports(row, bits)

    def sketch(self, reports: CMSReports) -> tuple[np.ndarray, int]:
        """(S, n): S[j, i] the sum of the ±1 entries i of the reports of row j (int64 (k, m);
        sum over batches to stream) and the number of reports."""
        row = np.asarray(reports.row, dtype=np.int64)
        if row.size and (row.min() < 0 or row.max() >= self.k):
            raise DomainError("a report's row is outside [0, k)")
        ones = group_bit_counts(row, reports.bits, self.k)
        sizes = np.bincount(row, minlength=self.k)
        return 2 * ones - sizes[:, None], int(row.size)

    @renamed(alpha=("confidence", complement))
    def estimate(self, reports: CMSReports, candidates: Iterable[object], *,
                 confidence: float = 0.95
                 ) -> pl.DataFrame:
        """Server side: a frame of value, estimate (frequency), std_error, ci_low, ci_high
        per candidate (see :meth:`estimate_from_sketch`)."""
        return self.estimate_from_sketch(*self.sketch(reports), candidates, confidence=confidence)

    @renamed(alpha=("confidence", complement))
    def estimate_from_sketch(self, sums: np.ndarray, n: int, candidates: Iterable[object], *,
                             confidence: float = 0.95) -> pl.DataFrame:
        """Frequencies f̂(d)/n of the candidates with the SE of the class docstring (n_d and
        Σ n_x² replaced by the clipped estimates of the candidates) and a normal CI.

        Raises
        ------
        DomainError
            No reports, confidence ∉ (0, 1), an empty or repeated candidate list.
        """
        keys, cols = self._candidates(candidates, n, confidence)
        sums = np.asarray(sums, dtype=np.float64)
        # (1/k) Σ_j M[j, h_j(d)] with M[j, i] = k (c/2 · sums[j, i] + N_j/2)
        rows = np.arange(self.k)[None, :]
        cell = (self.c / 2 * sums[rows, cols]).sum(axis=1) + n / 2
        return self._frame(cell, n, keys, confidence)

    def noise_variance(self, n: float, n_d: np.ndarray | float) -> Any:
        return (n * self.c ** 2 - n_d - (n - n_d) * (1 - 2 / self.m) ** 2) / 4


@register(audit=lambda: _audit(HadamardCountMeanSketch, "hcms"))
class HadamardCountMeanSketch(_Sketch):
    """Apple's Hadamard count-mean sketch (Algorithms 3–4 of "Learning with Privacy at
    Scale").

    Client: a uniform row j and column l, the bit w = H[l, h_j(d)] = (−1)^{popcount(l &
    h_j(d))} flipped w.p. π = 1/(e^ε + 1) rounded up to a multiple of 2^-32: ε-DP (one
    bit, ratio (1 − π)/π ≤ e^ε; j and l do not depend on d). Report: int64 (n, 3) rows
    (j, l, bit), bit 1 for +1. Server: M[j, l] += k c w̃, M ← M H, the estimate of the module
    docstring, with variance (counts)

        Var[f̂(d)] = (m/(m − 1))² [n c² − n_d − (n − n_d)/m² + Σ_{x≠d} n_x² (m − 1)/(k m²)].

    Parameters and errors as :class:`CountMeanSketch` (m a power of two ≥ 2).
    """

    name = "hcms"

    def __init__(self, epsilon: Number, k: int = 256, m: int = 1024,
                 seeds: npt.ArrayLike | None = None
                 ) -> None:
        super().__init__(epsilon, k, m, seeds)
        e = exp_lower(self.epsilon)
        self.flip = dyadic_up(1 / (e + 1), 32)

    def randomize(self, values: npt.ArrayLike) -> np.ndarray:
        """Client side: one (j, l, bit) row per value."""
        ids = self._ids(values)
        n = ids.size
        row = rng.uniform_below(self.k, n).astype(np.int64)
        col = rng.uniform_below(self.m, n).astype(np.int64)
        parity = np.bitwise_count(col & self.buckets(ids, row)) & 1  # 1 ⇔ H = −1
        flip = np.unpackbits(response_bits(self.flip, (1, 8 * ((n + 7) // 8)))[0])[:n]
        return np.stack([row, col, 1 - (parity ^ flip)], axis=1).astype(np.int64)

    def sketch(self, reports: np.ndarray) -> tuple[np.ndarray, int]:
        """(S, n): S = (Σ of the ±1 bits per cell (j, l)) · H, int64 (k, m), exact."""
        rep = np.asarray(reports, dtype=np.int64).reshape(-1, 3)
        if rep.size and (rep[:, 0].min() < 0 or rep[:, 0].max() >= self.k
                         or rep[:, 1].min() < 0 or rep[:, 1].max() >= self.m):
            raise DomainError("a report's row or column is out of range")
        sign = 2 * (rep[:, 2] != 0).astype(np.int64) - 1
        cells = np.bincount(rep[:, 0] * self.m + rep[:, 1], weights=sign,
                            minlength=self.k * self.m)
        return _rows_wht(np.rint(cells).astype(np.int64).reshape(self.k, self.m)), len(rep)

    @renamed(alpha=("confidence", complement))
    def estimate(self, reports: np.ndarray, candidates: Iterable[object], *,
                 confidence: float = 0.95
                 ) -> pl.DataFrame:
        """Server side: as :meth:`CountMeanSketch.estimate`."""
        return self.estimate_from_sketch(*self.sketch(reports), candidates, confidence=confidence)

    @renamed(alpha=("confidence", complement))
    def estimate_from_sketch(self, sums: np.ndarray, n: int, candidates: Iterable[object], *,
                             confidence: float = 0.95) -> pl.DataFrame:
        """As :meth:`CountMeanSketch.estimate_from_sketch`; (1/k) Σ_j M[j, h_j(d)] =
        c Σ_j S[j, h_j(d)]."""
        keys, cols = self._candidates(candidates, n, confidence)
        rows = np.arange(self.k)[None, :]
        cell = self.c * np.asarray(sums, dtype=np.float64)[rows, cols].sum(axis=1)
        return self._frame(cell, n, keys, confidence)

    def noise_variance(self, n: float, n_d: np.ndarray | float) -> Any:
        return n * self.c ** 2 - n_d - (n - n_d) / self.m ** 2


def audit_pair(sketch: _Sketch) -> tuple[str, str]:
    """Two values that the sketch's single hash puts in different columns."""
    first = int(sketch.buckets(value_ids(["v0"]))[0, 0])
    for i in range(1, 1000):
        if int(sketch.buckets(value_ids([f"v{i}"]))[0, 0]) != first:
            return "v0", f"v{i}"
    raise DomainError("no audit pair found")  # pragma: no cover


def _audit(cls: Any, name: str) -> list[AuditCase]:
    """k = 1 row, m = 8 columns, ε = 1 on two values in different columns; broken: the same
    hashes at ε = 2.5 under the claim ε = 1. Outputs are coded as a small integer (CMS: the
    two bits at the two values' columns; HCMS: 2l + bit)."""
    claim = cls(1, 1, 8)
    x, x_prime = audit_pair(claim)
    cols = [int(claim.buckets(value_ids([v]))[0, 0]) for v in (x, x_prime)]

    def sampler(epsilon: Number) -> Any:
        sketch = cls(epsilon, 1, 8, seeds=claim.seeds)

        def sample(value: Any, n: int) -> np.ndarray:
            out = sketch.randomize(np.full(n, value, dtype=object))
            if isinstance(out, CMSReports):
                bits = np.unpackbits(out.bits[:, 0:1], axis=1, bitorder="little")
                return bits[:, cols[0]].astype(np.int64) * 2 + bits[:, cols[1]]
            return out[:, 1] * 2 + out[:, 2]

        return sample

    return [AuditCase(f"local_{name}", claim.measurement, sampler(1), sampler(Fraction(5, 2)),
                      x, x_prime)]
