"""Mean estimation of bounded numbers under local DP: Duchi et al.'s mechanism (one and many
dimensions), the piecewise and hybrid mechanisms, and sampling k of d attributes per user.

Sources: Duchi, Jordan & Wainwright, "Minimax optimal procedures for locally private
estimation", JASA 2018 (§4.2.3–4.2.4: the one-dimensional mechanism and the ℓ∞ one for
[−1, 1]^d); Wang, Xiao, Yang, Zhao, Hui, Shin, Shin & Yu, "Collecting and analyzing
multidimensional data with local differential privacy", ICDE 2019 (Algorithm 1: Duchi et
al. in one dimension; Algorithm 2 and Lemma 1: the piecewise mechanism; §III-C: the hybrid
mechanism; Algorithm 4 and Lemma 4: sampling k = max(1, min(d, ⌊ε/2.5⌋)) attributes).

Every mechanism works on the unit scale: a value x in the declared [low, high] becomes
u = 2(x − low)/(high − low) − 1 ∈ [−1, 1] (out-of-bounds rule: :mod:`dpkit.local.values`),
reports are unbiased for u, and the server's estimate is mapped back:
low + (high − low)(ū + 1)/2, its variance multiplied by ((high − low)/2)².

Exact sampling. All randomness comes from :mod:`dpkit.core.rng`; every probability a
privacy ratio depends on is an exact rational, rounded towards more noise (e^ε replaced by
a rational ≤ e^ε). The only float probabilities are unbiased roundings of the user's own
value (to ±1, or to a neighbouring grid point), which any mixture keeps ε-LDP; they are
truncated to multiples of 2^-64, a bias below 2^-52 relative that the docstrings neglect.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import comb
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import polars as pl

from dpkit.core import rng
from dpkit.core.numbers import Number, exp_up, integer, positive
from dpkit.core.renamed import complement, renamed
from dpkit.errors import DomainError
from dpkit.local.base import dyadic_down, exp_lower
from dpkit.local.telemetry import sample_buckets
from dpkit.local.values import (
    bernoulli_float,
    finite_bound,
    local_measurement,
    mean_frame,
    to_interval,
)
from dpkit.mechanisms.randomized_response import response_coins
from dpkit.mechanisms.registry import register

__all__ = ["NumericMechanism", "Duchi", "Piecewise", "Hybrid", "SampledMean", "MAX_DUCHI_D"]

Bounds = tuple[Number, Number] | Sequence[tuple[Number, Number]]  # one pair, or one per attribute
MAX_DUCHI_D = 60  # Duchi et al.'s d-dimensional sampler draws the agreement count exactly
GRID_BITS = 32  # the piecewise mechanism's window has 2^32 cells
EPS_STAR = Fraction(61, 100)  # Wang et al. 2019 §III-C: below ε* ≈ 0.61 the hybrid is Duchi


class NumericMechanism:
    """Common part of the numeric mechanisms: declared bounds per attribute, the unit scale,
    the estimate frame and the randomizer as a Measurement.

    Parameters
    ----------
    epsilon : number
        ε > 0 in nats per user report (a float is rounded down).
    bounds : pair or sequence of pairs
        Declared [low, high] (low < high, finite) of the one attribute, or one pair per
        attribute.
    fallback : number or sequence, optional
        What a non-numeric or non-finite value becomes (default: each attribute's low);
        finite values outside the bounds are clamped.

    Raises
    ------
    DomainError
        If ε ≤ 0, a bound is not finite, low ≥ high, or a fallback is outside its bounds.
    """

    name = "numeric"
    multi = False  # whether several attributes may be declared

    def __init__(self, epsilon: Number, bounds: Bounds = (-1, 1),
                 fallback: npt.ArrayLike | None = None) -> None:
        self.epsilon = positive(epsilon, "epsilon", up=False)
        pairs = cast(list[tuple[Number, Number]], [bounds] if _is_pair(bounds) else list(bounds))
        if not pairs or not all(_is_pair(b) for b in pairs):
            raise DomainError("bounds must be a (low, high) pair or a sequence of pairs")
        if len(pairs) > 1 and not self.multi:
            raise DomainError(f"{type(self).__name__} takes one attribute's bounds")
        self.low = np.array([finite_bound(lo, "low") for lo, _ in pairs])
        self.high = np.array([finite_bound(hi, "high") for _, hi in pairs])
        if np.any(self.low >= self.high):
            raise DomainError("each attribute needs low < high")
        self.d = len(pairs)
        fb = self.low if fallback is None else np.broadcast_to(
            np.array([finite_bound(f, "fallback") for f in np.atleast_1d(fallback)]), (self.d,))
        if np.any(fb < self.low) or np.any(fb > self.high):
            raise DomainError("fallback must lie within the bounds")
        self.fallback = np.array(fb, dtype=np.float64)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={float(self.epsilon):.6g}, d={self.d})"

    def unit(self, values: npt.ArrayLike) -> np.ndarray:
        """Values (n,) or (n, d) → unit-scale floats (n, d) in [−1, 1] (the bounds rule)."""
        arr = np.asarray(values)
        if self.d == 1 and (arr.ndim <= 1):
            arr = arr.reshape(-1, 1)
        if arr.ndim != 2 or arr.shape[1] != self.d:
            raise DomainError(f"expected values of shape (n, {self.d}), got {arr.shape}")
        cols = [to_interval(arr[:, j], self.low[j], self.high[j], self.fallback[j])
                for j in range(self.d)]
        x = np.stack(cols, axis=1) if cols else np.zeros((arr.shape[0], 0))
        return np.clip(2 * (x - self.low) / (self.high - self.low) - 1, -1.0, 1.0)

    def randomize(self, values: npt.ArrayLike) -> np.ndarray:
        """Client side: one report per user, unit-scale floats: (n,) for one attribute given
        as a vector, else (n, d) (exact randomness from :mod:`dpkit.core.rng`)."""
        out = self._randomize(self.unit(values))
        return out[:, 0] if self.d == 1 and np.ndim(values) <= 1 else out

    def _randomize(self, u: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def unit_variance(self, u: np.ndarray) -> np.ndarray:
        """Var[report | u] per user and attribute on the unit scale (n, d)."""
        raise NotImplementedError

    @renamed(alpha=("confidence", complement))
    def estimate(self, reports: npt.ArrayLike, *, confidence: float = 0.95) -> pl.DataFrame:
        """Server side: the mean of each attribute in data units, with its standard error and
        a normal (level ``confidence``) CI; a Polars frame, one row per attribute.

        The standard error is √(s²/n) with s² the sample variance of the reports: its
        expectation is the mean of Var[report_i | u_i] plus the spread of the u_i, so it
        errs on the wide side (:meth:`variance` is the exact figure for a known population,
        :meth:`worst_variance` the bound for any).

        Raises
        ------
        DomainError
            If there are no reports, their shape is wrong, or confidence ∉ (0, 1).
        """
        y = np.asarray(reports, dtype=np.float64)
        y = y.reshape(-1, 1) if y.ndim == 1 else y
        if y.ndim != 2 or y.shape[1] != self.d or y.shape[0] == 0:
            raise DomainError(f"expected reports of shape (n ≥ 1, {self.d}), got {y.shape}")
        n = y.shape[0]
        half = (self.high - self.low) / 2
        ubar = y.mean(axis=0)
        var = (y.var(axis=0, ddof=1) if n > 1 else self.worst_variance()) / n * half**2
        names = [f"x{j}" for j in range(self.d)] if self.d > 1 else None
        return mean_frame(self.low + half * (ubar + 1), var, n, confidence, names)

    def worst_variance(self) -> np.ndarray:
        """max over u ∈ [−1, 1] of Var[report | u], per attribute (every variance here is
        convex in u², so the maximum is at u = ±1 or 0). The standard error uses it: a
        bound valid whatever the population."""
        edges = np.array([[-1.0], [0.0], [1.0]]) * np.ones((1, self.d))
        return self.unit_variance(edges).max(axis=0)

    def variance(self, values: npt.ArrayLike) -> np.ndarray:
        """Closed-form Var of the estimated mean (data units) for the population ``values``:
        ((high − low)/2)² Σ_i Var[report_i | u_i] / n², per attribute."""
        u = self.unit(values)
        half = (self.high - self.low) / 2
        return self.unit_variance(u).sum(axis=0) / u.shape[0] ** 2 * half**2

    @property
    def measurement(self) -> Any:
        """One collection as a Measurement: d_in ↦ PureDP(d_in · ε) under HammingDistance."""
        return local_measurement(self.randomize, self.epsilon, self.name)


def _is_pair(b: Any) -> bool:
    return isinstance(b, tuple | list) and len(b) == 2 and not any(
        isinstance(v, tuple | list) for v in b)


def _keep_probability(eps: Fraction) -> Fraction:
    """p = e^ε/(e^ε + 1) rounded down to a multiple of 2^-32: p/(1 − p) ≤ e^ε."""
    e = exp_lower(eps)
    return dyadic_down(e / (e + 1))


def _duchi_case(mech: NumericMechanism, low: int, high: int, code: Any) -> Any:
    from dpkit.mechanisms.registry import AuditCase

    def sampler(epsilon: int) -> Any:
        m = type(mech)(epsilon, _bounds(mech))
        return lambda value, n: code(m.randomize(np.full((n, m.d), float(value))
                                                 if m.d > 1 else np.full(n, float(value))))

    return AuditCase(f"local_{mech.name}" + (f"_d{mech.d}" if mech.d > 1 else ""),
                     mech.measurement, sampler(1), sampler(2), low, high)


def _bounds(mech: NumericMechanism) -> Any:
    pairs = list(zip(mech.low.tolist(), mech.high.tolist(), strict=True))
    return pairs[0] if mech.d == 1 else pairs


def _sign_code(y: np.ndarray) -> np.ndarray:
    s = (np.asarray(y).reshape(len(y), -1) > 0).astype(np.int64)
    return (s << np.arange(s.shape[1], dtype=np.int64)).sum(axis=1)


def _pick_code(y: np.ndarray) -> np.ndarray:
    """A sampled report (one nonzero attribute) coded as 2·attribute + (sign > 0)."""
    j = np.argmax(y != 0, axis=1)
    return 2 * j + (y[np.arange(len(y)), j] > 0)


@register(audit=lambda: [_duchi_case(Duchi(1), -1, 1, _sign_code),
                         _duchi_case(Duchi(1, [(-1, 1)] * 3), -1, 1, _sign_code)])
class Duchi(NumericMechanism):
    """Duchi et al.'s mechanism: each attribute's report is ±B (Duchi, Jordan & Wainwright
    2018, §4.2.3 for d = 1 and §4.2.4 for [−1, 1]^d; Wang et al. 2019, Algorithms 1 and 3).

    Output law (unit scale). Draw v ∈ {−1, 1}^d with P[v_j = 1] = (1 + u_j)/2 independently;
    with probability p = e^ε/(e^ε + 1) (rounded down to a multiple of 2^-32) report B·s for
    s uniform on T⁺(v) = {s ∈ {−1, 1}^d : ⟨s, v⟩ > 0} (≥ 0 for even d), otherwise uniform on
    T⁻(v) = {⟨s, v⟩ < 0} (≤ 0 for even d). |T⁺| = |T⁻|, so every s has probability between
    (1 − p)/|T⁺| and p/|T⁺| under every input: ε-LDP (ratio p/(1 − p) ≤ e^ε). For d = 1
    this is P[+B] = 1/2 + u(2p − 1)/2.

    B makes the report unbiased: E[s_j | v] = (2p − 1)·c·v_j with
    c = Σ_{A ∈ T⁺}(C(d−1, A−1) − C(d−1, A)) / Σ_{A ∈ T⁺} C(d, A) (A = agreements with v),
    so B = 1/((2p − 1)c), which is the paper's (e^ε + 1)/(e^ε − 1)·C_d with
    C_d = 2^{d−1}/C(d−1, (d−1)/2) (d odd) or (2^{d−1} + C(d, d/2)/2)/C(d−1, d/2) (d even).
    Each coordinate's variance is Var[B s_j | u] = B² − u_j².

    Sampling: the agreement count A is drawn exactly (P ∝ C(d, A) on T⁺; T⁻ mirrors it:
    A ↦ d − A), then which A coordinates agree, one coordinate at a time with probability
    (agreements left)/(coordinates left); d ≤ 60.

    Raises
    ------
    DomainError
        As :class:`NumericMechanism`, or if d > 60.
    """

    name = "duchi"
    multi = True

    def __init__(self, epsilon: Number, bounds: Bounds = (-1, 1),
                 fallback: npt.ArrayLike | None = None) -> None:
        super().__init__(epsilon, bounds, fallback)
        if self.d > MAX_DUCHI_D:
            raise DomainError(f"Duchi et al.'s d-dimensional mechanism takes d ≤ {MAX_DUCHI_D}")
        self.p = _keep_probability(self.epsilon)
        d = self.d
        self.agree = [a for a in range(d + 1) if 2 * a - d > 0 or (d % 2 == 0 and 2 * a == d)]
        num = sum(comb(d - 1, a - 1) - comb(d - 1, a) for a in self.agree if a >= 1)
        self.size = sum(comb(d, a) for a in self.agree)  # |T⁺|
        self.c = Fraction(num, self.size)
        self.B = 1 / ((2 * self.p - 1) * self.c)
        self.cum = np.cumsum([comb(d, a) for a in self.agree]).astype(np.uint64)

    def _randomize(self, u: np.ndarray) -> np.ndarray:
        n, d = u.shape
        v = np.where(bernoulli_float((1 + u.reshape(-1)) / 2).reshape(n, d), 1.0, -1.0)
        plus = response_coins(self.p, n)
        if d == 1:
            return np.where(plus[:, None], v, -v) * float(self.B)
        pick = rng.uniform_below(self.size, n).astype(np.uint64)
        agree = np.array(self.agree)[np.searchsorted(self.cum, pick, side="right")]
        left = np.where(plus, agree, d - agree).astype(np.uint64)
        s = np.empty((n, d))
        for j in range(d):
            slots = np.full(n, d - j, dtype=np.uint64)
            same = rng.uniform_below(slots) < left
            left -= same.astype(np.uint64)
            s[:, j] = np.where(same, v[:, j], -v[:, j])
        return s * float(self.B)

    def unit_variance(self, u: np.ndarray) -> np.ndarray:
        return float(self.B) ** 2 - np.asarray(u) ** 2


def _pm_case() -> Any:
    from dpkit.mechanisms.registry import AuditCase

    def sampler(epsilon: int) -> Any:
        m = Piecewise(epsilon)
        return lambda value, n: m.randomize(np.full(n, float(value)))

    return [AuditCase("local_piecewise", Piecewise(1).measurement, sampler(1), sampler(2),
                      -1, 1)]


@register(audit=_pm_case)
class Piecewise(NumericMechanism):
    """The piecewise mechanism (Wang et al. ICDE 2019, Algorithm 2, Lemma 1), on a grid.

    Continuous mechanism (paper): with a = e^{ε/2} and C = (a + 1)/(a − 1), report y ∈
    [−C, C] with density ∝ a² on the window [ℓ(u), ℓ(u) + C − 1], ℓ(u) = (C + 1)u/2 −
    (C − 1)/2, and ∝ 1 elsewhere; the window has probability a/(a + 1). E[y] = u and
    Var[y | u] = u²/(a − 1) + (a + 3)/(3(a − 1)²).

    Exact version (what is sampled). a is e^{ε/2} rounded *down* to P/2^32 (a ≤ e^{ε/2},
    P > 2^32). [−C, C] is cut into N = P + 2^32 cells of width h = (C − 1)/2^32; the window
    is W = 2^32 whole cells starting at cell j ∈ {0, …, P}, and cell j's window is the
    paper's window for u_j = 2j/P − 1 (because (C + 1)/(C − 1) = a = P/2^32). The user's u
    is first rounded to u_J ∈ {u_j, u_{j+1}} around it, unbiasedly (J = j + 1 with
    probability θ = Pu/2 + P/2 − j); then with probability exactly a/(a + 1) (an exact
    rational Bernoulli) a cell uniform in the window, else one uniform among the N − W
    others; the report is the cell's midpoint −C + (k + 1/2)h (a float computed from k, a
    post-processing).

    Privacy. For every input and cell, P[cell] is a/((a + 1)W) inside the window or
    1/((a + 1)(N − W)) = 1/((a + 1)P) outside; their ratio is a·P/W = a² ≤ e^ε,
    and the rounding of u is a mixture over inputs of such laws: ε-LDP exactly, on a set of
    outputs (the N midpoints) that does not depend on the input. The discretisation costs
    no privacy; it changes the law only within cells of width h ≈ 2^-32·(C − 1).

    Unbiasedness and variance. Within a cell the paper's density is constant, so the
    midpoint has the cell's mean and E[y | u_J] = u_J, E[y | u] = u. Midpoints lose the
    within-cell variance h²/12 and the rounding of u adds Var(u_J) = θ(1 − θ)(2/P)²:

        Var[y | u] = u²/(a − 1) + (a + 3)/(3(a − 1)²) − h²/12 + θ(1 − θ)(2/P)²·a/(a − 1).

    Raises
    ------
    DomainError
        As :class:`NumericMechanism`, or if ε is too small for a > 1 on the 2^-32 grid.
    """

    name = "piecewise"

    def __init__(self, epsilon: Number, bounds: Bounds = (-1, 1),
                 fallback: npt.ArrayLike | None = None) -> None:
        super().__init__(epsilon, bounds, fallback)
        a = dyadic_down(exp_lower(self.epsilon / 2), GRID_BITS)
        if a <= 1:
            raise DomainError("epsilon too small for the piecewise mechanism's grid")
        self.a = a
        self.P = int(a * (1 << GRID_BITS))
        self.W = 1 << GRID_BITS
        self.N = self.P + self.W
        self.C = (a + 1) / (a - 1)
        self.h = (self.C - 1) / self.W

    def cells(self, u: np.ndarray) -> np.ndarray:
        """The exact part: each user's cell index k ∈ [0, N) (int64) for unit values u."""
        t = (np.asarray(u, dtype=np.float64).reshape(-1) + 1) / 2 * self.P
        j = np.clip(np.floor(t), 0, self.P)
        j = np.minimum(j.astype(np.int64) + bernoulli_float(t - j), self.P)
        n = j.size
        inside = rng.bernoulli_rational(self.P, self.N, n)  # a/(a + 1) exactly
        k_in = j + rng.uniform_below(self.W, n).astype(np.int64)
        o = rng.uniform_below(self.N - self.W, n).astype(np.int64)
        k_out = np.where(o < j, o, o + self.W)
        return np.where(inside, k_in, k_out)

    def midpoints(self, k: np.ndarray) -> np.ndarray:
        """The report of cell k: −C + (k + 1/2)h, as a float."""
        return (np.asarray(k, dtype=np.float64) + 0.5) * float(self.h) - float(self.C)

    def _randomize(self, u: np.ndarray) -> np.ndarray:
        return self.midpoints(self.cells(u[:, 0]))[:, None]

    def unit_variance(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        a, h = float(self.a), float(self.h)
        t = (u + 1) / 2 * self.P
        theta = t - np.floor(t)
        return (u**2 / (a - 1) + (a + 3) / (3 * (a - 1) ** 2) - h**2 / 12
                + theta * (1 - theta) * (2 / self.P) ** 2 * a / (a - 1))


def _hybrid_case() -> list[Any]:
    from dpkit.mechanisms.registry import AuditCase

    def sampler(epsilon: int) -> Any:
        m = Hybrid(epsilon)
        return lambda value, n: m.randomize(np.full(n, float(value)))

    return [AuditCase("local_hybrid", Hybrid(1).measurement, sampler(1), sampler(2), -1, 1)]


@register(audit=_hybrid_case)
class Hybrid(NumericMechanism):
    """The hybrid mechanism (Wang et al. ICDE 2019, §III-C, Lemma 3): the piecewise
    mechanism with probability β, Duchi et al.'s otherwise, both at ε.

    β = 1 − e^{−ε/2} for ε > ε* (the paper's ε* ≈ 0.61), else 0; here β is that value
    rounded down to a multiple of 2^-32 (any input-independent β keeps ε-LDP: a mixture of
    two ε-LDP laws with weights that do not depend on the input). Unbiased, with

        Var[y | u] = β·Var_PM[y | u] + (1 − β)·(B² − u²)

    (both parts have mean u). Reports are the parts' reports (floats).

    Raises
    ------
    DomainError
        As :class:`NumericMechanism`.
    """

    name = "hybrid"

    def __init__(self, epsilon: Number, bounds: Bounds = (-1, 1),
                 fallback: npt.ArrayLike | None = None) -> None:
        super().__init__(epsilon, bounds, fallback)
        self.duchi = Duchi(self.epsilon)
        beta = 1 - exp_up(-self.epsilon / 2) if self.epsilon > EPS_STAR else Fraction(0)
        self.beta = dyadic_down(max(beta, Fraction(0)))
        self.pm = Piecewise(self.epsilon) if self.beta > 0 else None  # ε ≤ ε*: Duchi only

    def _randomize(self, u: np.ndarray) -> np.ndarray:
        use_pm = response_coins(self.beta, u.shape[0])
        out = self.duchi._randomize(u)
        idx = np.flatnonzero(use_pm)
        if self.pm is not None:
            out[idx] = self.pm._randomize(u[idx])
        return out

    def unit_variance(self, u: np.ndarray) -> np.ndarray:
        b = float(self.beta)
        duchi = self.duchi.unit_variance(u)
        return duchi if self.pm is None else b * self.pm.unit_variance(u) + (1 - b) * duchi


def _sampled_case() -> list[Any]:
    from dpkit.mechanisms.registry import AuditCase

    def sampler(epsilon: int) -> Any:
        m = SampledMean(epsilon, [(-1, 1), (-1, 1)], k=1, base="duchi")
        return lambda value, n: _pick_code(m.randomize(np.full((n, 2), float(value))))

    mech = SampledMean(1, [(-1, 1), (-1, 1)], k=1, base="duchi")
    return [AuditCase("local_sampled_mean", mech.measurement, sampler(1), sampler(2), -1, 1)]


_BASES = {"pm": Piecewise, "hm": Hybrid, "duchi": Duchi}


@register(audit=_sampled_case)
class SampledMean(NumericMechanism):
    """Mean estimation of d attributes, sampling k per user (Wang et al. ICDE 2019,
    Algorithm 4, Lemma 4).

    Each user draws k distinct attributes uniformly (exact Floyd sampling, independent of
    the data), reports each of them with a one-dimensional mechanism (``base``: the hybrid
    "hm", piecewise "pm" or Duchi et al.'s "duchi") at ε/k, multiplied by d/k, and 0 for the
    others. Privacy: the attribute set is data-independent and the k reports compose to
    k·(ε/k) = ε (ε-LDP; ε/k is exact). Unbiased (E[y_j] = (k/d)(d/k)u_j), with

        Var[y_j | u] = (d/k)·(Var_base(ε/k)[· | u_j] + u_j²) − u_j².

    Parameters
    ----------
    epsilon, bounds, fallback :
        See :class:`NumericMechanism` (bounds: one pair per attribute).
    k : int, optional
        Attributes per user, in [1, d]; default max(1, min(d, ⌊ε/2.5⌋)) (the paper's).
    base : {"hm", "pm", "duchi"}
        The one-dimensional mechanism.

    Raises
    ------
    DomainError
        As :class:`NumericMechanism`, or if k ∉ [1, d] or ``base`` is unknown.
    """

    name = "sampled_mean"
    multi = True

    def __init__(self, epsilon: Number, bounds: Bounds, fallback: npt.ArrayLike | None = None,
                 k: int | None = None,
                 base: str = "hm") -> None:
        super().__init__(epsilon, bounds, fallback)
        default = max(1, min(self.d, int(self.epsilon / Fraction(5, 2))))
        self.k = default if k is None else integer(k, "k", minimum=1, maximum=self.d)
        if base not in _BASES:
            raise DomainError(f"base must be one of {sorted(_BASES)}, got {base!r}")
        self.base = _BASES[base](self.epsilon / self.k)

    def _randomize(self, u: np.ndarray) -> np.ndarray:
        n, d = u.shape
        picked = sample_buckets(n, d, self.k)
        out = np.zeros((n, d))
        rows = np.repeat(np.arange(n), self.k)
        cols = picked.reshape(-1)
        out[rows, cols] = self.base._randomize(u[rows, cols][:, None])[:, 0] * (d / self.k)
        return out

    def unit_variance(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        r = self.d / self.k
        return r * (self.base.unit_variance(u) + u**2) - u**2
