"""RAPPOR: Bloom-filter encoding, permanent and instantaneous randomized response, and
decoding against a candidate list by regression.

Source: Erlingsson, Pihur & Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving
Ordinal Response", CCS 2014: §3 (the client: Bloom filter B of m bits set by h hashes of the
value in the user's cohort; permanent randomized response B′, each bit 1 with probability
f/2, 0 with probability f/2 and B_i otherwise, memoised per value; instantaneous randomized
response S, each bit 1 with probability q if B′_i = 1 and p if B′_i = 0), §3.1 (the
differential privacy of the permanent response, ε∞ = 2h ln((1 − f/2)/(f/2)), and of one
report, ε1 = h ln(q*(1 − p*)/(p*(1 − q*))) with q* = P[S_i = 1 | B_i = 1] = ½f(p + q) +
(1 − f)q and p* = P[S_i = 1 | B_i = 0] = ½f(p + q) + (1 − f)p), §4 (decoding: the unbiased
bit counts t_ij = (c_ij − p* N_j)/(q* − p*) per cohort j and bit i, a regression of t on the
candidates' Bloom filters — LASSO to select, least squares to fit — and Bonferroni-corrected
significance at level 0.05/M for M candidates).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
from scipy import linalg, sparse, stats

from dpkit.core import rng
from dpkit.core.numbers import (
    Number,
    dyadic_up,
    fraction_down,
    fraction_up,
    integer,
    log_up,
    positive,
)
from dpkit.core.renamed import complement, renamed
from dpkit.errors import DomainError
from dpkit.local.base import dyadic_down, exp_lower
from dpkit.local.bits import digest, group_bit_counts, value_keys
from dpkit.local.values import local_measurement, normal_z
from dpkit.mechanisms.randomized_response import response_bits
from dpkit.mechanisms.registry import AuditCase, register

__all__ = ["RAPPOR", "RAPPORReports"]

_HASHES_MAX = 16  # 16 four-byte slices of a 64-byte BLAKE2b digest


@dataclass(frozen=True)
class RAPPORReports:
    """Reports of n users: ``cohort`` (int64, n) and ``bits`` (uint8 (n, m/8), packed: bit t
    of byte s is Bloom bit 8s + t)."""

    cohort: np.ndarray
    bits: np.ndarray

    def __len__(self) -> int:
        return int(self.cohort.size)

    def unpacked(self) -> np.ndarray:
        """The reports as a boolean matrix (n, m)."""
        return np.unpackbits(self.bits, axis=1, bitorder="little").astype(bool)

    @staticmethod
    def concat(parts: list[RAPPORReports]) -> RAPPORReports:
        return RAPPORReports(np.concatenate([p.cohort for p in parts]),
                             np.concatenate([p.bits for p in parts]))


def _probability(x: Number, name: str, up: bool) -> Fraction:
    if isinstance(x, bool | str):
        raise DomainError(f"{name} must be a number in [0, 1]")
    try:
        value = fraction_up(x) if up else fraction_down(x)
    except (TypeError, ValueError, DomainError) as err:
        raise DomainError(f"{name} must be a number in [0, 1]") from err
    if not 0 <= value <= 1:
        raise DomainError(f"{name} must lie in [0, 1]")
    return value


@register(audit=lambda: _audit())
class RAPPOR:
    """RAPPOR's client (``randomize``) and server (``estimate``) sides.

    Client: the value's Bloom filter B in the user's cohort (h bit positions among m, from
    BLAKE2b of the cohort and the value's text), the permanent randomized response B′ (each
    bit: 1 w.p. f/2, 0 w.p. f/2, B_i w.p. 1 − f), then the instantaneous randomized response
    S (each bit 1 w.p. q if B′_i = 1, p if B′_i = 0), all independent exact draws from
    :mod:`dpkit.core.rng`. f is rounded up, p up and q down to multiples of 2^-32 (more
    noise: the stated ε hold for the rounded values, which the estimator uses).

    Privacy (Erlingsson et al. 2014, §3.1; two values' Bloom filters differ in ≤ 2h bits):

    * one report: ε1 = h ln(q*(1 − p*)/(p*(1 − q*))) (``epsilon_one``);
    * any number of reports of the same value by one user (the permanent response is
      memoised per (user, value) when ``users`` are given): ε∞ = 2h ln((1 − f/2)/(f/2))
      (``epsilon_inf``).

    Both are exact rationals rounded up (ln evaluated upwards). A user who reports d distinct
    values over time spends at most d·ε∞.

    Parameters
    ----------
    m : int
        Bloom filter bits, a multiple of 8 in [8, 4096] (paper: 128).
    h : int
        Hashes, in [1, 16] (paper: 2).
    cohorts : int
        Number of cohorts, in [1, 2^16] (paper: 64); a user's cohort is uniform and permanent.
    f, p, q : number
        Permanent and instantaneous randomized response parameters, 0 < f ≤ 1 and
        0 ≤ p < q ≤ 1 (paper: 0.5, 0.5, 0.75).

    Raises
    ------
    DomainError
        On a bad m, h or cohorts, f ∉ (0, 1], p, q ∉ [0, 1] or p ≥ q after rounding.

    Notes
    -----
    Values: anything with a text; values are identified by ``str(value)`` (so 1 and "1" are
    the same value, 1.0 another). There is no fixed domain: every value is encoded, and a
    value outside the candidate list of ``estimate`` is not estimated (its mass is left in the
    regression residual).
    """

    name = "rappor"

    def __init__(self, m: int = 128, h: int = 2, cohorts: int = 64, f: Number = Fraction(1, 2),
                 p: Number = Fraction(1, 2), q: Number = Fraction(3, 4)) -> None:
        self.m = integer(m, "m", minimum=8, maximum=4096)
        if self.m % 8:
            raise DomainError("m must be a multiple of 8")
        self.h = integer(h, "h", minimum=1, maximum=_HASHES_MAX)
        self.cohorts = integer(cohorts, "cohorts", minimum=1, maximum=1 << 16)
        f_, p_, q_ = (_probability(f, "f", True), _probability(p, "p", True),
                      _probability(q, "q", False))
        self.f = min(dyadic_up(f_, 32), Fraction(1))
        self.p, self.q = dyadic_up(p_, 32), dyadic_down(q_)
        if self.f == 0:
            raise DomainError("f must be > 0 (f = 0 gives no longitudinal privacy)")
        if not self.p < self.q:
            raise DomainError("need p < q")
        half = self.f / 2
        self.p_star = half * (self.p + self.q) + (1 - self.f) * self.p
        self.q_star = half * (self.p + self.q) + (1 - self.f) * self.q
        self._memo: dict[tuple[str, str], np.ndarray] = {}
        self._cohort_of: dict[str, int] = {}

    @classmethod
    def one_time(cls, epsilon: Number, m: int = 128, h: int = 2, cohorts: int = 64
                 ) -> RAPPOR:
        """One-time RAPPOR (Erlingsson et al. 2014, §6): no instantaneous response (p = 0,
        q = 1), f = 2/(1 + e^{ε/(2h)}) rounded up, so that ε1 = ε∞ ≤ ε.

        Raises
        ------
        DomainError
            If ε ≤ 0 (and as the constructor).
        """
        eps = positive(epsilon, "epsilon", up=False)
        f = 2 / (1 + exp_lower(eps / (2 * integer(h, "h", minimum=1, maximum=_HASHES_MAX))))
        return cls(m, h, cohorts, dyadic_up(f, 32), 0, 1)

    def __repr__(self) -> str:
        return (f"RAPPOR(m={self.m}, h={self.h}, cohorts={self.cohorts}, f={float(self.f):.6g},"
                f" p={float(self.p):.6g}, q={float(self.q):.6g})")

    # -- privacy -----------------------------------------------------------------------
    @property
    def epsilon_inf(self) -> Fraction:
        """ε∞ = 2h ln((1 − f/2)/(f/2)), rounded up (0 when f = 1)."""
        half = self.f / 2
        return Fraction(0) if half == 1 - half else 2 * self.h * log_up((1 - half) / half)

    @property
    def epsilon_one(self) -> Fraction:
        """ε1 = h ln(q*(1 − p*)/(p*(1 − q*))) of one report, rounded up (∞ → raises)."""
        ps, qs = self.p_star, self.q_star
        if ps == 0 or qs == 1:
            raise DomainError("one report is not differentially private (p* = 0 or q* = 1)")
        return self.h * log_up(qs * (1 - ps) / (ps * (1 - qs)))

    @property
    def epsilon(self) -> Fraction:
        """The per-report claim: min(ε1, ε∞) for a user's first report of a value."""
        try:
            return min(self.epsilon_one, self.epsilon_inf)
        except DomainError:
            return self.epsilon_inf

    # -- encoding ----------------------------------------------------------------------
    def positions(self, cohorts: np.ndarray, keys: list[str]) -> np.ndarray:
        """Bloom bit positions (int64 (P, h)) of the pairs (cohorts[i], keys[i]): the first h
        little-endian 32-bit words of BLAKE2b(key, personalised by the cohort), mod m."""
        raw = b"".join(digest(k, int(c).to_bytes(4, "little"))
                       for c, k in zip(np.asarray(cohorts).tolist(), keys, strict=True))
        words = np.frombuffer(raw, dtype="<u4").reshape(len(keys), 16)[:, : self.h]
        return (words % np.uint32(self.m)).astype(np.int64)

    def blooms(self, cohorts: np.ndarray, keys: list[str]) -> np.ndarray:
        """Packed Bloom filters (uint8 (P, m/8)) of the pairs (cohorts[i], keys[i])."""
        pos = self.positions(cohorts, keys)
        rows = np.zeros((len(keys), self.m), dtype=bool)
        rows[np.arange(len(keys))[:, None], pos] = True
        return np.packbits(rows, axis=1, bitorder="little")

    def bloom(self, cohort: int, key: str) -> np.ndarray:
        """Packed Bloom filter (uint8, m/8) of one value's key in one cohort."""
        return self.blooms(np.array([cohort]), [key])[0]

    def _blooms_of(self, cohort: np.ndarray, keys: list[str], inverse: np.ndarray
                   ) -> np.ndarray:
        pair = cohort * len(keys) + inverse
        uniq, back = np.unique(pair, return_inverse=True)
        table = self.blooms(uniq // len(keys), [keys[int(u)] for u in uniq % len(keys)])
        return table[back.reshape(-1)]

    def _permanent(self, bloom: np.ndarray) -> np.ndarray:
        shape = (bloom.shape[0], self.m)
        flip = response_bits(self.f, shape)
        coin = response_bits(Fraction(1, 2), shape)
        return (flip & coin) | (~flip & bloom)

    def _instantaneous(self, prr: np.ndarray) -> np.ndarray:
        shape = (prr.shape[0], self.m)
        ones, zeros = response_bits(self.q, shape), response_bits(self.p, shape)
        return (prr & ones) | (~prr & zeros)

    def permanent(self, values: Iterable[object], users: Iterable[object]) -> tuple[np.ndarray,
                  np.ndarray]:
        """The memoised permanent responses (packed uint8 (n, m/8)) and cohorts of
        (user, value) pairs: drawn on first use, then returned unchanged for the same pair;
        a user's cohort is drawn once. Users and values are identified by their text."""
        ukeys, uinv = value_keys(users)
        vkeys, vinv = value_keys(values)
        if uinv.size != vinv.size:
            raise DomainError("users and values must have the same length")
        new_users = [u for u in ukeys if u not in self._cohort_of]
        if new_users:
            drawn = rng.uniform_below(self.cohorts, len(new_users)).astype(np.int64)
            self._cohort_of.update(zip(new_users, drawn.tolist(), strict=True))
        cohort_u = np.array([self._cohort_of[u] for u in ukeys], dtype=np.int64)
        pairs = np.unique(uinv * len(vkeys) + vinv, return_inverse=True)
        keys = [(ukeys[int(c) // len(vkeys)], vkeys[int(c) % len(vkeys)])
                for c in pairs[0].tolist()]
        missing = [i for i, key in enumerate(keys) if key not in self._memo]
        if missing:
            coh = np.array([self._cohort_of[keys[i][0]] for i in missing], dtype=np.int64)
            fresh = self._permanent(self.blooms(coh, [keys[i][1] for i in missing]))
            for row, i in enumerate(missing):
                self._memo[keys[i]] = fresh[row]
        table = np.stack([self._memo[key] for key in keys])
        return table[pairs[1].reshape(-1)], cohort_u[uinv]

    def randomize(self, values: Iterable[object], users: Iterable[object] | None = None
                  ) -> RAPPORReports:
        """Client side: one report per value.

        Without ``users`` every value is a fresh user (one-time collection: a uniform cohort
        and a fresh permanent response, not stored). With ``users`` (same length) the cohort
        of each user and the permanent response of each (user, value) pair are memoised in
        this object, so reporting the same value again only draws a new instantaneous
        response (the longitudinal guarantee ε∞).
        """
        keys, inverse = value_keys(values)
        if users is None:
            cohort = rng.uniform_below(self.cohorts, inverse.size).astype(np.int64)
            if not keys:
                return RAPPORReports(cohort, np.zeros((0, self.m // 8), dtype=np.uint8))
            prr = self._permanent(self._blooms_of(cohort, keys, inverse))
        else:
            prr, cohort = self.permanent(values, users)
        return RAPPORReports(cohort, self._instantaneous(prr))

    # -- decoding ----------------------------------------------------------------------
    def bit_counts(self, reports: RAPPORReports) -> tuple[np.ndarray, np.ndarray]:
        """(c, N): c[j, i] the number of reports of cohort j with bit i set (int64 (C, m)),
        N[j] the number of reports of cohort j (sum these over batches to stream)."""
        cohort = np.asarray(reports.cohort, dtype=np.int64)
        if cohort.size and (cohort.min() < 0 or cohort.max() >= self.cohorts):
            raise DomainError("a report's cohort is outside [0, cohorts)")
        return (group_bit_counts(cohort, reports.bits, self.cohorts),
                np.bincount(cohort, minlength=self.cohorts))

    def design(self, candidates: list[str], sizes: np.ndarray) -> sparse.csc_matrix:
        """The regression's design matrix (C·m, M), sparse: row (j, i), column v is N_j/N
        when candidate v's Bloom filter in cohort j sets bit i."""
        c, mm = self.cohorts, len(candidates)
        coh = np.tile(np.arange(c), mm)
        pos = self.positions(coh, [k for k in candidates for _ in range(c)])  # (M·C, h)
        rows = (coh[:, None] * self.m + pos).reshape(-1)
        cols = np.repeat(np.arange(mm), c * self.h)
        x = sparse.coo_matrix((np.ones(rows.size), (rows, cols)), shape=(c * self.m, mm))
        x = x.tocsc()
        x.data[:] = 1.0  # two hashes on one bit set it once
        share = np.repeat(np.asarray(sizes, dtype=np.float64) / float(np.sum(sizes)), self.m)
        return sparse.diags(share) @ x

    @renamed(alpha=("confidence", complement))
    def estimate(self, reports: RAPPORReports, candidates: Iterable[object], *,
                 confidence: float = 0.95,
                 method: str = "ols", significance: float = 0.05) -> pl.DataFrame:
        """Server side: the frequency of each candidate value (see
        :meth:`estimate_from_counts`)."""
        counts, sizes = self.bit_counts(reports)
        return self.estimate_from_counts(counts, sizes, candidates, confidence=confidence,
                                         method=method, significance=significance)

    @renamed(alpha=("confidence", complement))
    def estimate_from_counts(self, counts: np.ndarray, sizes: np.ndarray,
                             candidates: Iterable[object], *,
                             confidence: float = 0.95, method: str = "ols",
                             significance: float = 0.05) -> pl.DataFrame:
        """Decode bit counts against a candidate list (Erlingsson et al. 2014, §4).

        t_ij = (c_ij − p* N_j)/(q* − p*) is an unbiased estimate of the number of users of
        cohort j whose Bloom filter sets bit i. With ``method="ols"`` the frequencies are the
        least-squares fit of t on the design matrix (unbiased when the candidates include
        every value reported and the design has full column rank; a pseudo-inverse
        otherwise); with ``method="lasso"`` (needs scikit-learn: ``pip install
        'dpkit[learn]'``) a non-negative LASSO (LARS, penalty by BIC) first selects the
        candidates, then least squares fits the selected ones (the paper's procedure; not
        unbiased after selection). Standard errors: the sandwich A diag(Var t) Aᵀ of the
        least-squares map A, with Var c_ij = T q*(1 − q*) + (N_j − T) p*(1 − p*) and T
        the clipped estimate of t_ij (conditional on how the users fell into cohorts: the
        variance of that split, about 2% of the total in a 17-value simulation at ε = 4, is
        not included). ``detected``: one-sided p-value of estimate/SE below
        ``significance``/M (Bonferroni over M candidates, the paper's filter).

        Returns
        -------
        polars.DataFrame
            One row per candidate: ``value`` (its text), ``estimate`` (frequency among all
            reports), ``std_error``, ``ci_low``/``ci_high`` (normal, level ``confidence``),
            ``p_value``, ``detected``, ``selected`` (always true for OLS). Unselected
            candidates have estimate 0 and null SE, CI and p-value 1.

        Raises
        ------
        DomainError
            No reports, an empty or repeated candidate list, a bad confidence/significance, an
            unknown method, or more candidates than C·m rows with ``method="ols"``.
        ImportError
            ``method="lasso"`` without scikit-learn.
        """
        if not 0 < confidence < 1 or not 0 < significance < 1:
            raise DomainError("confidence and significance must lie in (0, 1)")
        if method not in ("ols", "lasso"):
            raise DomainError("method must be 'ols' or 'lasso'")
        keys = [str(c) for c in (candidates.tolist() if isinstance(candidates, np.ndarray)
                                 else list(candidates))]
        if not keys or len(set(keys)) != len(keys):
            raise DomainError("candidates must be a non-empty list of distinct values")
        counts = np.asarray(counts, dtype=np.float64)
        sizes = np.asarray(sizes, dtype=np.float64)
        if counts.shape != (self.cohorts, self.m) or sizes.shape != (self.cohorts,):
            raise DomainError("counts must be (cohorts, m) and sizes (cohorts,)")
        n = float(sizes.sum())
        if n < 1:
            raise DomainError("need at least one report")
        if method == "ols" and len(keys) > self.cohorts * self.m:
            raise DomainError("more candidates than cohorts·m: use method='lasso'")
        ps, qs = float(self.p_star), float(self.q_star)
        gap = qs - ps
        t = ((counts - ps * sizes[:, None]) / gap).reshape(-1)
        big_t = np.clip(t, 0, np.repeat(sizes, self.m))
        var_t = (big_t * qs * (1 - qs) + (np.repeat(sizes, self.m) - big_t) * ps * (1 - ps)
                 ) / gap ** 2
        x = self.design(keys, sizes)
        selected = np.ones(len(keys), dtype=bool)
        if method == "lasso":
            selected = _lasso_select(x.toarray(), t, float(var_t.mean()))
        est = np.zeros(len(keys))
        se = np.full(len(keys), np.nan)
        if selected.any():
            xs = x[:, np.flatnonzero(selected)]
            g_inv = _gram_inverse((xs.T @ xs).toarray())  # A = G⁻¹ Xᵀ (G⁺ Xᵀ = X⁺ if singular)
            est[selected] = g_inv @ (xs.T @ t) / n
            meat = (xs.T @ sparse.diags(var_t) @ xs).toarray()
            se[selected] = np.sqrt(np.maximum(((g_inv @ meat) * g_inv).sum(axis=1), 0)) / n
        z = normal_z(confidence)
        with np.errstate(invalid="ignore", divide="ignore"):
            pval = np.where(selected, stats.norm.sf(est / se), 1.0)
        return pl.DataFrame({
            "value": keys, "estimate": est, "std_error": se, "ci_low": est - z * se,
            "ci_high": est + z * se, "p_value": pval,
            "detected": selected & (pval < significance / len(keys)), "selected": selected,
        }).with_columns(pl.col(c).fill_nan(None) for c in ("std_error", "ci_low", "ci_high"))

    @staticmethod
    def detection_report(frame: pl.DataFrame) -> dict[str, Any]:
        """What was detected: the number of candidates and of detected values, the detected
        values by decreasing estimate, and the share of reports they explain."""
        hits = frame.filter(pl.col("detected")).sort("estimate", descending=True)
        return {"candidates": frame.height, "detected": hits.height,
                "values": hits["value"].to_list(), "estimates": hits["estimate"].to_list(),
                "explained_share": float(hits["estimate"].sum())}

    @property
    def measurement(self) -> Any:
        """One fresh report per user as a :class:`~dpkit.core.component.Measurement` under
        :class:`HammingDistance`: d_in ↦ PureDP(d_in · ε) with ε = min(ε1, ε∞)."""
        return local_measurement(self.randomize, self.epsilon, "rappor", m=self.m, h=self.h)


def _gram_inverse(gram: np.ndarray) -> np.ndarray:
    try:
        factor = linalg.cho_factor(gram)
        return linalg.cho_solve(factor, np.eye(gram.shape[0]))
    except linalg.LinAlgError:  # rank-deficient design: the pseudo-inverse
        return np.linalg.pinv(gram, hermitian=True)


def _lasso_select(x: np.ndarray, t: np.ndarray, noise: float) -> np.ndarray:
    try:
        from sklearn.linear_model import LassoLarsIC
    except ImportError as err:
        raise ImportError("RAPPOR's LASSO decoding needs scikit-learn: "
                          "pip install 'dpkit[learn]' (or use method='ols')") from err
    model = LassoLarsIC(criterion="bic", fit_intercept=False, positive=True,
                        noise_variance=max(noise, 1e-12))
    model.fit(x, t)
    return np.asarray(model.coef_) > 0


def audit_pair() -> tuple[str, str]:
    """Two values whose Bloom filters (m = 8, h = 2, one cohort) are disjoint with two bits
    each: the neighbours of the audit case."""
    probe = RAPPOR(8, 2, 1)
    found: list[str] = []
    used: set[int] = set()
    for i in range(1000):
        bits = {int(b) for b in np.flatnonzero(np.unpackbits(probe.bloom(0, f"v{i}"),
                                                              bitorder="little"))}
        if len(bits) == 2 and not bits & used:
            found.append(f"v{i}")
            used |= bits
            if len(found) == 2:
                return found[0], found[1]
    raise DomainError("no audit pair found")  # pragma: no cover


def _audit() -> list[AuditCase]:
    """m = 8, h = 2, one cohort, f = 1/2, p = 1/4, q = 3/4 (ε1 ≈ 2.04 < ε∞ ≈ 4.39) on two
    values with disjoint Bloom filters; broken: f = 1/64, p = 1/16, q = 15/16 under the
    same claim. Outputs are
    coded by their four bits at the two filters' positions (a post-processing; the other
    bits have the same law under both inputs)."""
    x, x_prime = audit_pair()
    probe = RAPPOR(8, 2, 1)
    union = np.bitwise_or(probe.bloom(0, x), probe.bloom(0, x_prime))
    where = np.flatnonzero(np.unpackbits(union, bitorder="little"))
    weights = 1 << np.arange(where.size)

    def sampler(f: Fraction, p: Fraction, q: Fraction) -> Any:
        oracle = RAPPOR(8, 2, 1, f, p, q)

        def sample(value: Any, n: int) -> np.ndarray:
            bits = oracle.randomize(np.full(n, value, dtype=object)).unpacked()
            return bits[:, where].astype(np.int64) @ weights

        return sample

    claim = RAPPOR(8, 2, 1, Fraction(1, 2), Fraction(1, 4), Fraction(3, 4))
    return [AuditCase("local_rappor", claim.measurement,
                      sampler(Fraction(1, 2), Fraction(1, 4), Fraction(3, 4)),
                      sampler(Fraction(1, 64), Fraction(1, 16), Fraction(15, 16)), x, x_prime)]
