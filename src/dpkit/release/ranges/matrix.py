"""The matrix mechanism with workload-adapted strategies (Li, Hay, Rastogi, Miklau &
McGregor, PODS 2010 / VLDBJ 2015), using the strategy optimisers of HDMM (McKenna, Miklau,
Hay & Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
differential privacy", PVLDB 11(10), 2018).

Mechanism. For a workload ``W`` (the range queries to answer) choose a strategy ``A``,
release ``y = A·x + Lap(Δ_A/ε)^m`` with Δ_A the largest column L1 norm of ``A``, and answer
from the least-squares estimate ``x̂ = A⁺ y``. A record moves ``x`` by L1 distance 1, so
``A·x`` moves by at most Δ_A in L1 and the release is ε-DP (Dwork, McSherry, Nissim & Smith
2006); ``x̂`` is post-processing. To keep this exact, the optimised A is snapped to an
integer matrix B = round(2^t·A) and B·x gets discrete Laplace noise through
:func:`~dpkit.mechanisms.frontend.noisy` with Δ = l1_sensitivity(B) (see
:func:`matrix_mechanism`): a float A·x would not be exactly linear. The expected total
squared error on ``W`` is ``(2/ε²)·Δ_A²·‖W A⁺‖_F²`` with ``‖W A⁺‖_F² = tr((AᵀA)⁻¹ WᵀW)``
(Li et al. 2010, Prop. 3).

OPT_0 (HDMM): p-Identity strategies ``A(Θ) = [I; Θ]·D`` with ``Θ ≥ 0`` of shape
(p, n) and ``D = diag(1/(1 + 1ᵀΘ))``, which scales every column to L1 norm 1 (Δ_A = 1).
With ``s = 1 + 1ᵀΘ``, ``C = diag(s) WᵀW diag(s)`` and ``X = I + ΘᵀΘ`` the objective is

    f(Θ) = tr((AᵀA)⁻¹ WᵀW) = tr(X⁻¹ C) = tr(C) − tr(R Θ C Θᵀ),   R = (I_p + ΘΘᵀ)⁻¹

(Woodbury, X⁻¹ = I − ΘᵀRΘ), and, with ``P = RΘC`` and using ``ΘX⁻¹ = RΘ``,

    ∂f/∂Θ = −2 (P − R(ΘCΘᵀ)R Θ) + 2·1_p (diag(X⁻¹C) / s)ᵀ,   diag(X⁻¹C) = s²∘diag(WᵀW) − 1ᵀ(Θ∘P).

(HDMM gives the objective; this gradient is our derivation, checked against finite
differences in the tests.) It is minimised by
L-BFGS-B (scipy) over Θ ≥ 0 from several starts in [0, 1) taken from a deterministic Weyl
sequence (:class:`_Starts`) — the strategy depends only on the workload, never on the data,
and uses no randomness at all. Every evaluation costs one product of WᵀW with p vectors
plus four (p × p)·(p × n) products: WᵀW of a range workload is never formed — it is applied
through prefix sums (O(q + n) per vector for q distinct ranges; closed form for all
ranges), which also keeps the products off multi-threaded BLAS (which stalls on busy
hosts).

OPT_⊗ (HDMM): for ``W = W₁ ⊗ W₂`` and ``A = A₁ ⊗ A₂``, ``‖W A⁺‖_F² = ‖W₁A₁⁺‖_F²·‖W₂A₂⁺‖_F²``
and ``Δ_A = Δ_{A₁}·Δ_{A₂}`` (a column of A₁⊗A₂ is a Kronecker product of columns), so each
factor is optimised separately with OPT_0 on WᵢᵀWᵢ. A 2-D workload of q arbitrary rectangles
is a *union* of q Kronecker products ``r_k ⊗ c_k`` (row range ⊗ column range); its error is
``Σ_k (r_kᵀ X₁ r_k)(c_kᵀ X₂ c_k)`` with ``Xᵢ = (AᵢᵀAᵢ)⁻¹``. We minimise it by block
coordinate descent — a simplification, not HDMM's own procedure for unions of products:
with the other factor fixed the objective is OPT_0 for the weighted Gram
``Σ_k (c_kᵀX₂c_k) r_k r_kᵀ``; the start is OPT_0 on each axis's marginal range workload
(the rectangles' 1-D projections, unit weights), and each step is accepted only if it
lowers the exact objective, so the result is never worse than the marginal start.

Strategy reuse. The search reads only the workload, which is public, never the data, so
a strategy may be computed once and reused at no privacy cost; the noise is still calibrated
to the strategy actually used (its exact L1 sensitivity, every release). Strategies are
cached (:class:`StrategyCache`, bounded LRU; :func:`strategy_cache_clear`,
:func:`strategy_cache_info`) by the workload's *structure*
(:func:`dpkit.release.workload.structure`), one entry per axis factor: ``("prefix", n)``,
``("all-range", n)``, ``("identity", n)`` — recognised from the distinct queries, so a
shuffled or duplicated prefix workload is the same key, and prefix and all-range of the same
n are different keys — ``("uniform-ranges", n)`` for a workload that declares that random
family (DPBench's random ranges and rectangles), and ``("ranges", n, digest)`` for any other
set of ranges. A Kronecker workload (2-D rectangles that are a product of per-axis range
sets, or a declared random family) is served by OPT_⊗ from the per-factor entries; only a
2-D workload that is not a product keys on its full contents (block coordinate descent).

A declared random family is served by the strategy optimised for the family's *expected*
Gram: the error tr((AᵀA)⁻¹WᵀW) is linear in WᵀW, so this strategy minimises the expected
error over the family's random workloads. For uniform endpoints a < b are drawn with
probability 2/n² and a = b with 1/n², so E[r rᵀ] ∝ G_all − ½I (G_all the all-range Gram); a
d-D query draws its axes independently, so its expected Gram is the Kronecker product of
these. On held-out DPBench workloads (2,000 queries) the reused strategy's exact expected
squared error is within 0.6% of re-optimising on each workload in 1-D (n = 4,096) and 2.5%
in 2-D (256×256; RMSE 0.3% and 1.3%; bench/results/matrix_reuse.md), while a release after
the first skips the search (seconds → tens of milliseconds). Few queries (≈ 100 over
n = 256) let a per-workload search fit the sample better (≈ 5% lower RMSE, measured on 2
workloads): pass ``reuse=False`` to optimise on the queries themselves.

Error convention. :func:`expected_rmse` here (like :func:`dpkit.release.measure.
expected_rmse`) is the per-query RMSE √(2(Δ_A/ε)²‖WA⁺‖_F²/|W|) of Laplace noise with
variance 2b². HDMM's ``rootmse`` reports the same quantity at its default ε = √2, where
2/ε² = 1, i.e. √(Δ_A²‖WA⁺‖_F²/|W|). Anchors (ε = √2, seeded optimiser, default
options): all ranges n = 256 (p = 16): 5.6960; AllRange ⊗ AllRange over 256 × 256: 32.444
(= 5.6960², the factorised formula). Prefix n = 256: OPT_0's Δ²‖WA⁺‖_F² is 4.43× the SVD
bound (2.10× in RMSE) — that bound is built on L2 column norms (Li & Miklau 2012) and is
loose under Laplace/L1; p-Identity with p ∈ {4, 16, 64, 128} stays at 4.4–4.9×.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.optimize import minimize

from dpkit.core.numbers import integer
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.measure import l1_sensitivity
from dpkit.release.ranges.strategy_cache import StrategyCache
from dpkit.release.workload import Factor, RangeWorkload, structure

__all__ = ["PIdentity", "optimize_pidentity", "optimize_kron", "optimize_rectangles",
           "svd_lower_bound", "range_gram", "expected_rmse", "kron_expected_rmse",
           "matrix_mechanism", "mm_strategy", "default_p", "default_restarts", "kron_pinv",
           "exact_product", "noisy_product", "float_margin",
           "StrategyCache", "strategy_cache_clear", "strategy_cache_info"]

_P_CAP = 16  # default p ≤ 16 (see default_p)


# --------------------------------------------------------------------------- Gram operators
class _Gram:
    """WᵀW as an operator: ``rmul(V) = V·WᵀW`` for a (k, n) block (rows are vectors, the
    layout of Θ), its diagonal and size."""

    n: int
    diag: np.ndarray

    def rmul(self, v: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def dense(self) -> np.ndarray:
        return self.rmul(np.eye(self.n))


class _DenseGram(_Gram):
    def __init__(self, g: np.ndarray) -> None:
        self.g = np.asarray(g, dtype=np.float64)
        self.n = self.g.shape[0]
        self.diag = np.diag(self.g).copy()

    def rmul(self, v: np.ndarray) -> np.ndarray:
        return v @ self.g

    def dense(self) -> np.ndarray:
        return self.g


class _AllRangeGram(_Gram):
    """w·(all-range Gram): G_ij = (min(i, j) + 1)(n − max(i, j)) = a_min·b_max with
    a_i = i + 1, b_i = n − i, applied in O(n) per vector by two cumulative sums."""

    def __init__(self, n: int, weight: float = 1.0) -> None:
        self.n, self.w = n, float(weight)
        i = np.arange(n, dtype=np.float64)
        self.a, self.b = i + 1, n - i
        self.diag = self.w * self.a * self.b

    def rmul(self, v: np.ndarray) -> np.ndarray:
        low = np.cumsum(v * self.a, axis=1)  # Σ_{j ≤ i} a_j v_j
        high = np.zeros_like(low)  # Σ_{j > i} b_j v_j
        high[:, :-1] = np.cumsum((v * self.b)[:, :0:-1], axis=1)[:, ::-1]
        return self.w * (low * self.b + high * self.a)


class _UniformRangeGram(_AllRangeGram):
    """The expected WᵀW of one range with uniform, independent endpoints, up to the factor
    2/n²: G_all − ½I (ranges a < b have probability 2/n², singletons 1/n²). Positive
    semidefinite, as an expectation of r rᵀ."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.diag = self.diag - 0.5

    def rmul(self, v: np.ndarray) -> np.ndarray:
        return super().rmul(v) - 0.5 * v


class _RangeGram(_Gram):
    """Σ_k w_k r_k r_kᵀ for ranges r_k = 1[lo_k ≤ i < hi_k], applied through prefix sums:
    r_kᵀv = S[hi_k] − S[lo_k] (S the prefix sums of v), and Σ_k c_k r_k is the cumulative
    sum of Σ_k c_k (δ_{lo_k} − δ_{hi_k}). O(q + n) per vector."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, weights: np.ndarray, n: int) -> None:
        q = lo.size
        self.n, self.w = n, np.asarray(weights, dtype=np.float64)
        cols = np.arange(q)
        # column k of D is δ_hi − δ_lo, so S·D = range sums; (w-weighted) D back-scatters
        self.d = sp.csr_matrix((np.r_[np.ones(q), -np.ones(q)], (np.r_[hi, lo],
                                np.r_[cols, cols])), shape=(n + 1, q))
        self.dw = sp.csr_matrix((np.r_[self.w, -self.w], (np.r_[cols, cols],
                                 np.r_[hi, lo])), shape=(q, n + 1))
        diff = np.zeros(n + 1)
        np.add.at(diff, lo, self.w)
        np.add.at(diff, hi, -self.w)
        self.diag = np.cumsum(diff)[:n]

    def rmul(self, v: np.ndarray) -> np.ndarray:
        s = np.zeros((v.shape[0], self.n + 1))
        np.cumsum(v, axis=1, out=s[:, 1:])
        sums = np.asarray(s @ self.d)  # (k, q) range sums
        return -np.cumsum(np.asarray(sums @ self.dw), axis=1)[:, : self.n]


def range_gram(lo: np.ndarray, hi: np.ndarray, n: int, weights: np.ndarray | None = None
               ) -> np.ndarray:
    """Dense Σ_k w_k r_k r_kᵀ (WᵀW of weighted 1-D ranges [lo_k, hi_k)) in O(q + n²): a 2-D
    difference array (+w at (lo, lo) and (hi, hi), −w at (lo, hi) and (hi, lo)) summed
    along both axes."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    w = np.ones(lo.size) if weights is None else np.asarray(weights, dtype=np.float64)
    d = np.zeros((n + 1, n + 1))
    np.add.at(d, (lo, lo), w)
    np.add.at(d, (hi, hi), w)
    np.add.at(d, (lo, hi), -w)
    np.add.at(d, (hi, lo), -w)
    return np.cumsum(np.cumsum(d, axis=0), axis=1)[:n, :n]


def _compress(lo: np.ndarray, hi: np.ndarray, weights: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct ranges with summed weights (duplicates add to WᵀW)."""
    w = np.ones(lo.size) if weights is None else np.asarray(weights, dtype=np.float64)
    pairs, inv = np.unique(np.stack([lo, hi], axis=1), axis=0, return_inverse=True)
    return pairs[:, 0], pairs[:, 1], np.bincount(inv.ravel(), weights=w)


def _gram_operator(lo: np.ndarray, hi: np.ndarray, n: int,
                   weights: np.ndarray | None = None) -> _Gram:
    """WᵀW of weighted 1-D ranges as an operator (never dense: prefix sums keep the
    optimiser's products small, and off multi-threaded BLAS, which stalls on busy hosts)."""
    lo, hi, w = _compress(np.asarray(lo, np.int64), np.asarray(hi, np.int64), weights)
    if lo.size == n * (n + 1) // 2 and np.all(w == w[0]):  # every range, equally weighted
        return _AllRangeGram(n, w[0])
    return _RangeGram(lo, hi, w, n)


def _as_gram(gram: np.ndarray | _Gram) -> _Gram:
    if isinstance(gram, _Gram):
        return gram
    g = np.asarray(gram, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != g.shape[1] or g.shape[0] == 0:
        raise DomainError(f"WᵀW must be a non-empty square matrix; got shape {g.shape}")
    if not np.all(np.isfinite(g)) or not np.allclose(g, g.T, rtol=1e-10, atol=0):
        raise DomainError("WᵀW must be finite and symmetric")
    return _DenseGram(g)


# --------------------------------------------------------------------------- p-Identity
class PIdentity:
    """The p-Identity strategy A(Θ) = [I; Θ]·diag(1/s), s = 1 + 1ᵀΘ (HDMM): every
    column has L1 norm 1 (up to rounding; :func:`l1_sensitivity` bounds it exactly)."""

    def __init__(self, theta: np.ndarray, s: np.ndarray | None = None) -> None:
        theta = np.array(theta, dtype=np.float64, ndmin=2)
        if theta.ndim != 2 or not np.all(np.isfinite(theta)) or np.any(theta < 0):
            raise DomainError("Θ must be a finite non-negative (p, n) matrix")
        theta.setflags(write=False)
        self.theta = theta
        self.p, self.n = theta.shape
        self.s = 1.0 + theta.sum(axis=0) if s is None else np.asarray(s, dtype=np.float64)
        if self.s.shape != (self.n,) or not np.all(self.s > 0):
            raise DomainError("the column scales s must be n positive numbers")
        self._chol = sla.cho_factor(np.eye(self.p) + theta @ theta.T)
        self._r = sla.cho_solve(self._chol, np.eye(self.p))  # R = (I + ΘΘᵀ)⁻¹, p × p

    def integer(self, bits: int) -> tuple[sp.csr_matrix, PIdentity]:
        """The strategy snapped to the grid 2^-bits: an int64 matrix B with B/2^bits ≈ A
        (entries rounded to nearest, the diagonal at least 1), and the p-Identity equal to
        B/2^bits ([I; Θ']·diag(1/s') with s' = 2^bits/B_diag, Θ' = B_Θ/B_diag) for the
        least-squares inference. Integer measurements B·x are exact, and so is B's largest
        column L1 norm (:func:`l1_sensitivity` of an integer matrix)."""
        unit = float(2 ** int(bits))
        top = np.maximum(np.rint(unit / self.s), 1.0)
        bottom = np.rint(unit * self.theta / self.s)
        return _stacked(top.astype(np.int64), bottom.astype(np.int64)), PIdentity(bottom / top,
                                                                                  unit / top)

    def matrix(self) -> np.ndarray:
        """A as a dense (n + p, n) array."""
        return np.vstack([np.eye(self.n), self.theta]) / self.s

    def sparse(self) -> sp.csr_matrix:
        """A as a sparse matrix (n + pn stored entries)."""
        return sp.vstack([sp.diags(1.0 / self.s), sp.csr_matrix(self.theta / self.s)]).tocsr()

    def _xinv(self, v: np.ndarray) -> np.ndarray:
        """(I + ΘᵀΘ)⁻¹ v = v − Θᵀ R Θ v (Woodbury) for v of shape (n, k), R = (I + ΘΘᵀ)⁻¹
        formed once (I + ΘΘᵀ ⪰ I is well conditioned). Products through :func:`_mm`: the
        threaded BLAS and LAPACK calls they replace stalled for tens of milliseconds each
        on a busy host (2-D inference 0.5 s → a few ms for 256 × 256)."""
        return v - _mm(self.theta.T, _mm(self._r, _mm(self.theta, v)))

    def pinv(self, y: np.ndarray) -> np.ndarray:
        """A⁺ y = (AᵀA)⁻¹Aᵀy = diag(s)(I + ΘᵀΘ)⁻¹(y₁ + Θᵀy₂) for y of shape (n+p,) or
        (n+p, k): least squares in O(pn) per column."""
        y = np.asarray(y, dtype=np.float64)
        vec = y.ndim == 1
        y = y[:, None] if vec else y
        if y.shape[0] != self.n + self.p:
            raise DomainError(f"measurements have {y.shape[0]} rows; the strategy "
                              f"{self.n + self.p}")
        out = self.s[:, None] * self._xinv(y[: self.n] + _mm(self.theta.T, y[self.n:]))
        return out[:, 0] if vec else out

    def gram_inverse(self) -> np.ndarray:
        """(AᵀA)⁻¹ = diag(s)(I + ΘᵀΘ)⁻¹diag(s), dense n × n."""
        return self.s[:, None] * self._xinv(np.eye(self.n)) * self.s[None, :]

    def error(self, gram: np.ndarray | _Gram) -> float:
        """tr((AᵀA)⁻¹ WᵀW) = ‖W A⁺‖_F²."""
        return _loss(self.theta, _as_gram(gram))


_SMALL_PRODUCT = 2**18  # OpenBLAS runs GEMMs up to 4·65536 multiply-adds on one thread


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for a short-and-wide b, in column blocks of at most 2^18 multiply-adds each:
    same result, but OpenBLAS keeps every block on one thread — threaded small GEMMs stall
    for milliseconds on a busy host (measured 3× slower for (16×16)·(16×4096), 5× for
    p = 64)."""
    m, k = a.shape
    n = b.shape[1]
    if m * k * n <= _SMALL_PRODUCT:
        return a @ b
    c = max(1, _SMALL_PRODUCT // (m * k))
    return np.hstack([a @ b[:, i:i + c] for i in range(0, n, c)])


def _loss(theta: np.ndarray, gram: _Gram) -> float:
    return _loss_and_grad(theta.ravel(), theta.shape[0], theta.shape[1], gram, 1.0,
                          grad=False)[0]


def _loss_and_grad(flat: np.ndarray, p: int, n: int, gram: _Gram, scale: float,
                   grad: bool = True) -> tuple[float, np.ndarray]:
    theta = flat.reshape(p, n)
    s = 1.0 + theta.sum(axis=0)
    q = gram.rmul(theta * s) * s  # ΘC, C = diag(s) WᵀW diag(s)
    r = sla.cho_solve(sla.cho_factor(np.eye(p) + theta @ theta.T), np.eye(p))  # R
    pm = _mm(r, q)  # P = RΘC
    cdiag = s * s * gram.diag
    tp = (theta * pm).sum(axis=0)  # diag(ΘᵀP)
    value = (cdiag.sum() - tp.sum()) / scale
    if not grad:
        return value, flat
    rhr = r @ (q @ theta.T) @ r  # R (ΘCΘᵀ) R
    g = 2.0 * (_mm(rhr, theta) - pm)
    g += (2.0 * (cdiag - tp) / s)[None, :]
    return value, g.ravel() / scale


def _one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """BLAS limited to one thread while optimising, if threadpoolctl is installed (it is
    not a dpkit dependency): the optimiser's BLAS calls are small, and threaded OpenBLAS
    stalls on busy hosts (measured 3–6× slower end to end on 2 shared cores; set
    OPENBLAS_NUM_THREADS=1 for the same effect without threadpoolctl)."""
    try:
        limits = importlib.import_module("threadpoolctl").threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return limits(limits=1, user_api="blas")


def _optimize_theta(gram: _Gram, p: int, restarts: int, generator: _Starts,
                    maxiter: int, init: np.ndarray | None = None) -> np.ndarray:
    """OPT_0: the best Θ over ``restarts`` L-BFGS-B runs from deterministic starts in
    [0, 1) (:class:`_Starts`; plus ``init`` if given), never worse than Θ = 0 (the
    identity strategy)."""
    with _one_blas_thread():
        return _optimize_theta_inner(gram, p, restarts, generator, maxiter, init)


def _optimize_theta_inner(gram: _Gram, p: int, restarts: int,
                          generator: _Starts, maxiter: int,
                          init: np.ndarray | None) -> np.ndarray:
    n = gram.n
    scale = max(float(gram.diag.sum()), 1e-300)
    best, best_f = np.zeros((p, n)), float(gram.diag.sum())  # Θ = 0: identity, f = tr WᵀW
    starts = [init] if init is not None else []
    starts += [generator.random((p, n)) for _ in range(restarts)]
    for x0 in starts:
        res = minimize(_loss_and_grad, np.ravel(x0), args=(p, n, gram, scale), jac=True,
                       method="L-BFGS-B", bounds=[(0.0, None)] * (p * n),
                       options={"maxiter": maxiter})
        theta = np.maximum(res.x.reshape(p, n), 0.0)
        f = _loss(theta, gram)
        if np.isfinite(f) and f < best_f:
            best, best_f = theta, f
    return best


def _check_p(p: object, n: int) -> int:
    return integer(p, "p", minimum=1)


def _per_axis(p: object, d: int) -> list[int]:
    """One p per axis from an int or a sequence."""
    values = [p] * d if isinstance(p, int | np.integer) else list(p) if isinstance(
        p, Sequence) else [p]
    if len(values) != d:
        raise DomainError(f"give one p per axis ({d})")
    return [_check_p(v, 0) for v in values]


def _check_restarts(restarts: object) -> int:
    return integer(restarts, "restarts", minimum=1)


class _Starts:
    """Deterministic starting points in [0, 1) for the strategy search: the additive
    (Weyl) sequence frac(o + i·φ⁻¹), i = 0, 1, 2, … over every value handed out, φ the golden
    ratio. The search is data-independent and published with the release, so it needs
    spread-out starts, not randomness; noise and every random bit come from
    :mod:`dpkit.core.rng` (DESIGN.md §3.1)."""

    _STEP = (np.sqrt(5.0) - 1.0) / 2.0

    def __init__(self, offset: int) -> None:
        self.next = int(offset)

    def random(self, shape: tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape))
        index = self.next + np.arange(1, size + 1, dtype=np.float64)
        self.next += size
        return np.modf(index * self._STEP)[0].reshape(shape)


def _rng(generator: np.random.Generator | int | None) -> _Starts:
    """The start sequence; ``generator`` (an int, or a NumPy Generator of the caller's)
    only chooses where in the sequence it begins."""
    if isinstance(generator, np.random.Generator):
        return _Starts(int(generator.integers(1 << 32)))
    return _Starts(0 if generator is None else int(generator))


def optimize_pidentity(WtW: np.ndarray, p: int, restarts: int = 4,
                       generator: np.random.Generator | int | None = None, *,
                       maxiter: int = 1000) -> np.ndarray:
    """OPT_0 of HDMM: the p-Identity strategy A = [I; Θ]·diag(1/(1 + 1ᵀΘ)) minimising
    ‖W A⁺‖_F² = tr((AᵀA)⁻¹ WᵀW) over Θ ≥ 0 of shape (p, n), by L-BFGS-B from ``restarts``
    starting points (:class:`_Starts`; ``generator``, an int or a NumPy Generator, picks
    where the deterministic sequence begins, default 0 — strategy selection is
    data-independent, so this is not privacy noise). Returns A, dense
    (n + p, n), columns of L1 norm 1. Never worse than the identity (Θ = 0)."""
    gram = _as_gram(WtW)
    theta = _optimize_theta(gram, _check_p(p, gram.n), _check_restarts(restarts),
                            _rng(generator), maxiter)
    return PIdentity(theta).matrix()


def optimize_kron(grams: Sequence[np.ndarray], ps: Sequence[int] | int, restarts: int = 4,
                  generator: np.random.Generator | int | None = None, *,
                  maxiter: int = 1000) -> list[np.ndarray]:
    """OPT_⊗ of HDMM for one Kronecker product W = W₁ ⊗ … ⊗ W_d given the factors'
    Grams WᵢᵀWᵢ: the error factorises, ‖WA⁺‖_F² = Π‖WᵢAᵢ⁺‖_F², and Δ_{⊗Aᵢ} = Π Δ_{Aᵢ}, so
    each factor is OPT_0 on its own. Returns the factors Aᵢ (dense); the strategy is their
    Kronecker product (row-major cells)."""
    return [PIdentity(t).matrix() for t in _kron_thetas(grams, ps, restarts, generator,
                                                        maxiter)]


def _kron_thetas(grams: Sequence[np.ndarray | _Gram], ps: Sequence[int] | int,
                 restarts: int, generator: np.random.Generator | int | None,
                 maxiter: int) -> list[np.ndarray]:
    ops = [_as_gram(g) for g in grams]
    if not ops:
        raise DomainError("give at least one factor")
    ps = _per_axis(ps, len(ops))
    rng, restarts = _rng(generator), _check_restarts(restarts)
    return [_optimize_theta(g, _check_p(p, g.n), restarts, rng, maxiter)
            for g, p in zip(ops, ps, strict=True)]


def _quad_ranges(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """r_kᵀ X r_k for ranges r_k = 1[lo_k, hi_k): the sum of X's block, by a summed-area
    table."""
    n = x.shape[0]
    t = np.zeros((n + 1, n + 1))
    t[1:, 1:] = np.cumsum(np.cumsum(x, axis=0), axis=1)
    return t[hi, hi] - t[lo, hi] - t[hi, lo] + t[lo, lo]


def _rectangle_error(thetas: Sequence[np.ndarray], lo: np.ndarray, hi: np.ndarray,
                     w: np.ndarray) -> float:
    """Σ_k w_k Π_i r_{k,i}ᵀ Xᵢ r_{k,i}: ‖W A⁺‖_F² of rectangles under A = ⊗ Aᵢ."""
    total = w.copy()
    for i, t in enumerate(thetas):
        total *= _quad_ranges(PIdentity(t).gram_inverse(), lo[:, i], hi[:, i])
    return float(total.sum())


def optimize_rectangles(workload: RangeWorkload, ps: Sequence[int] | int, restarts: int = 4,
                        generator: np.random.Generator | int | None = None, *,
                        rounds: int = 3, maxiter: int = 1000) -> list[np.ndarray]:
    """OPT_⊗ for a union of Kronecker products: q rectangles (each a product of one range
    per axis), strategy ⊗ᵢ Aᵢ of p-Identities. Start from OPT_0 on each axis's marginal
    range workload (the rectangles' projections); then ``rounds − 1`` sweeps of block
    coordinate descent: axis i is re-optimised (warm start) for the weighted Gram
    Σ_k (Π_{j≠i} r_{k,j}ᵀ X_j r_{k,j}) r_{k,i} r_{k,i}ᵀ, which makes OPT_0's objective
    equal to the exact ‖WA⁺‖_F² with the other factors fixed. Returns the factors Aᵢ."""
    return [PIdentity(t).matrix() for t in _rectangle_thetas(
        workload, ps, restarts, generator, rounds, maxiter)]


def _rectangle_thetas(workload: RangeWorkload, ps: Sequence[int] | int, restarts: int,
                      generator: np.random.Generator | int | None, rounds: int,
                      maxiter: int) -> list[np.ndarray]:
    d = len(workload.shape)
    ps = _per_axis(ps, d)
    rounds = integer(rounds, "rounds", minimum=1)
    rng, restarts = _rng(generator), _check_restarts(restarts)
    rect, inv = np.unique(np.hstack([workload.lo, workload.hi]), axis=0, return_inverse=True)
    lo, hi = rect[:, :d], rect[:, d:]
    w = np.bincount(inv.ravel(), minlength=rect.shape[0]).astype(np.float64)
    thetas = [_optimize_theta(_gram_operator(lo[:, i], hi[:, i], n, w),
                              _check_p(ps[i], n), restarts, rng, maxiter)
              for i, n in enumerate(workload.shape)]
    for _ in range(int(rounds) - 1):
        for i, n in enumerate(workload.shape):
            weights = w.copy()
            for j, t in enumerate(thetas):
                if j != i:
                    weights *= _quad_ranges(PIdentity(t).gram_inverse(), lo[:, j], hi[:, j])
            gram = _gram_operator(lo[:, i], hi[:, i], n, weights)
            new = _optimize_theta(gram, ps[i], 0, rng, maxiter, init=thetas[i])
            if _loss(new, gram) <= _loss(thetas[i], gram):
                thetas[i] = new
    return thetas


# --------------------------------------------------------------------------- bounds, errors
def svd_lower_bound(W: np.ndarray | sp.spmatrix | RangeWorkload | None = None, *,
                    gram: np.ndarray | None = None) -> float:
    """The SVD bound (Li & Miklau, PVLDB 2012): for every strategy A,

        Δ_A²·‖W A⁺‖_F² ≥ (Σᵢ σᵢ(W))² / n,

    σᵢ(W) the singular values of W (square roots of WᵀW's eigenvalues), n the number of
    cells. Li & Miklau prove it with Δ_A the largest column *L2* norm (Gaussian noise); a
    column's L1 norm is at least its L2 norm, so it also bounds the L1 (Laplace) case.
    Returned without the noise factor: the expected total squared error of any matrix
    mechanism with Laplace noise is ≥ (2/ε²)·bound, its per-query RMSE
    ≥ √((2/ε²)·bound/|W|) (at HDMM's ε = √2 simply √(bound/|W|)). Dense eigenvalues:
    domains up to a few thousand cells. Pass W (matrix or RangeWorkload) or ``gram`` = WᵀW."""
    if gram is None:
        if W is None:
            raise DomainError("pass a workload W or gram=WᵀW")
        if isinstance(W, RangeWorkload):
            if len(W.shape) != 1:
                raise DomainError("svd_lower_bound takes 1-D workloads (use the product of "
                                  "the factors' bounds for a Kronecker product)")
            gram = _gram_operator(W.lo[:, 0], W.hi[:, 0], W.shape[0]).dense()
        else:
            w = np.asarray(sp.csr_matrix(W).toarray() if sp.issparse(W) else W, dtype=float)
            gram = w.T @ w
    g = _as_gram(gram).dense()
    eig = np.linalg.eigvalsh(g)
    return float(np.sqrt(np.maximum(eig, 0.0)).sum() ** 2 / g.shape[0])


def expected_rmse(workload: RangeWorkload, strategy: PIdentity, epsilon: float,
                  sensitivity: float | None = None) -> float:
    """Per-query RMSE √(2(Δ_A/ε)²‖W A⁺‖_F²/|W|) of a 1-D p-Identity strategy (Li et al.
    2010, Prop. 3), without forming W or WᵀW densely for large n."""
    gram = _gram_operator(workload.lo[:, 0], workload.hi[:, 0], workload.shape[0])
    sensitivity = float(l1_sensitivity(strategy.sparse())) if sensitivity is None else sensitivity
    return math.sqrt(2 * (sensitivity / epsilon) ** 2 * strategy.error(gram) / len(workload))


def kron_expected_rmse(grams: Sequence[np.ndarray], queries: Sequence[int],
                       factors: Sequence[PIdentity], epsilon: float) -> float:
    """Per-query RMSE of W = ⊗ Wᵢ under A = ⊗ Aᵢ from the factorised formula:
    √(2(ΠΔᵢ/ε)² Π‖WᵢAᵢ⁺‖_F² / Π|Wᵢ|) — never a dense product."""
    total, sensitivity, count = 1.0, 1.0, 1
    for g, q, a in zip(grams, queries, factors, strict=True):
        total *= a.error(g)
        sensitivity *= float(l1_sensitivity(a.sparse()))
        count *= int(q)
    return math.sqrt(2 * (sensitivity / epsilon) ** 2 * total / count)


# --------------------------------------------------------------------------- strategy cache
_STRATEGIES = StrategyCache(32)  # p = 16, n = 4,096: 0.5 MB per entry


def strategy_cache_clear() -> None:
    """Empty the matrix mechanism's strategy cache and reset its hit/miss counters."""
    _STRATEGIES.clear()


def strategy_cache_info() -> dict[str, int]:
    """The strategy cache's ``hits``, ``misses``, ``size`` and ``maxsize``."""
    return _STRATEGIES.info()


# --------------------------------------------------------------------------- the mechanism
def _factor_gram(factor: Factor) -> _Gram:
    """WᵀW of one structural factor, a function of its key alone (the named families are
    rebuilt from n; a "ranges" key's digest covers its ranges and weights)."""
    kind, n = factor.key[0], int(factor.key[1])
    cells = np.arange(n, dtype=np.int64)
    if kind == "all-range":
        return _AllRangeGram(n)
    if kind == "uniform-ranges":
        return _UniformRangeGram(n)
    if kind == "prefix":
        return _RangeGram(np.zeros(n, np.int64), cells + 1, np.ones(n), n)
    if kind == "identity":
        return _RangeGram(cells, cells + 1, np.ones(n), n)
    if factor.lo is None or factor.hi is None or factor.weights is None:
        raise DomainError(f"the factor {kind!r} carries no ranges")
    return _RangeGram(factor.lo, factor.hi, factor.weights.astype(np.float64), n)


def _contents_key(workload: RangeWorkload) -> str:
    return hashlib.blake2b(np.ascontiguousarray(workload.lo, np.int64).tobytes() + b"|"
                           + np.ascontiguousarray(workload.hi, np.int64).tobytes(),
                           digest_size=20).hexdigest()


def default_p(n: int) -> int:
    """p = ⌊n/16⌋ (HDMM's rule), at least 1 and capped at 16: the gradient costs O(p²n)
    and L-BFGS-B needs more iterations for more variables, so ⌊n/16⌋ is too slow for large
    n (n = 4096: p = 16 optimises in seconds, p = 64 in about a minute on 2 shared cores, for
    ≈ 15% lower RMSE). Pass ``p`` to choose."""
    return max(1, min(int(n) // 16, _P_CAP))


def default_restarts(n: int, p: int) -> int:
    """4 random starts when p·n < 2^12, 2 up to 2^14 (n = 256 … 1024 at the default p), else
    1: restarts move the all-range n = 256 optimum by < 0.1% (RMSE 5.6990, 5.6960, 5.6958
    for 1, 2, 4 starts), but each costs a full optimisation."""
    return 4 if p * n < 2 ** 12 else 2 if p * n <= 2 ** 14 else 1


def mm_options(shape: tuple[int, ...], p: object = None, restarts: object = None,
               seed: object = 0, rounds: object = 3, *, reuse: object = True
               ) -> tuple[list[int], list[int], int, int]:
    """(p per axis, restarts per axis, seed, rounds) for a histogram of ``shape``, after
    checking the matrix mechanism's options (no data, no noise; defaults as
    :func:`mm_strategy`).

    Raises
    ------
    DomainError
        ``p`` not a positive integer or one per axis, ``restarts`` or ``rounds`` not a
        positive integer, ``seed`` not an integer, ``reuse`` not a bool."""
    ps = [default_p(n) for n in shape] if p is None else _per_axis(p, len(shape))
    rs = [default_restarts(n, pi) if restarts is None else _check_restarts(restarts)
          for n, pi in zip(shape, ps, strict=True)]
    if not isinstance(reuse, bool):
        raise DomainError(f"reuse must be True or False; got {reuse!r}")
    return ps, rs, integer(seed, "seed"), integer(rounds, "rounds", minimum=1)


def mm_strategy(shape: tuple[int, ...], workload: RangeWorkload | None = None,
                p: int | Sequence[int] | None = None, restarts: int | None = None,
                seed: int = 0, rounds: int = 3, maxiter: int = 1000, *,
                reuse: bool = True) -> list[PIdentity]:
    """The strategy :func:`matrix_mechanism` uses, one p-Identity per axis (a single one in
    1-D), from the strategy cache (module docstring, "Strategy reuse").

    Parameters
    ----------
    shape : tuple of int
        The histogram's shape (1-D or 2-D).
    workload : RangeWorkload, optional
        The queries; None means all ranges on every axis (AllRange ⊗ AllRange in 2-D).
    p, restarts, seed, rounds, maxiter
        Search options (defaults :func:`default_p` per axis, :func:`default_restarts`); part
        of every cache key.
    reuse : bool
        True (default): a workload that declares a random family gets the family's strategy
        (optimised for its expected WᵀW). False: optimise on the queries themselves.

    Returns
    -------
    list of PIdentity
        One factor per axis; the strategy is their Kronecker product. For a Kronecker
        workload each factor is the cached OPT_0 entry ``(factor key, p, restarts, seed,
        maxiter)`` — shared by every workload and axis with the same factor; a 2-D workload
        that is no Kronecker product uses :func:`optimize_rectangles`, keyed by its contents.

    Raises
    ------
    DomainError
        Bad p, restarts or rounds, or ``reuse`` not a bool.
    """
    shape = tuple(int(n) for n in shape)
    ps, rs, seed, rounds = mm_options(shape, p, restarts, seed, rounds, reuse=reuse)
    maxiter = int(maxiter)
    if workload is None:
        factors: tuple[Factor, ...] | None = tuple(Factor(("all-range", n)) for n in shape)
    else:
        factors = structure(workload, use_family=reuse)
    if factors is None and workload is not None:  # rectangles that are no Kronecker product
        w, r = workload, max(rs)
        thetas = list(_STRATEGIES.get(
            ("rectangles", shape, _contents_key(w), tuple(ps), r, seed, int(rounds), maxiter),
            lambda: _rectangle_thetas(w, ps, r, seed, rounds, maxiter)))
        return [PIdentity(t) for t in thetas]
    return [PIdentity(_factor_theta(f, pi, ri, seed, maxiter))
            for f, pi, ri in zip(factors or (), ps, rs, strict=True)]


def _factor_theta(factor: Factor, p: int, restarts: int, seed: int, maxiter: int
                  ) -> np.ndarray:
    """OPT_0 for one structural factor, from the cache entry ("opt0", key, p, restarts,
    seed, maxiter)."""
    def compute() -> list[np.ndarray]:
        return [_optimize_theta(_factor_gram(factor), p, restarts, _rng(seed), maxiter)]
    return _STRATEGIES.get(("opt0", factor.key, p, restarts, seed, maxiter), compute)[0]


def _kron_apply(factors: Sequence[np.ndarray | sp.spmatrix], x: np.ndarray) -> np.ndarray:
    """(A₁ ⊗ A₂) vec(X) = vec(A₁ X A₂ᵀ) for row-major vec."""
    a1, a2 = factors
    return np.asarray(a2 @ np.asarray(a1 @ x).T).T


def kron_pinv(factors: Sequence[PIdentity], y: np.ndarray) -> np.ndarray:
    """(A₁⁺ ⊗ A₂⁺) y for y of shape (m₁, m₂): A₁⁺ Y A₂⁺ᵀ, per-factor pseudo-inverses (the
    least-squares estimate for a Kronecker strategy of full column rank)."""
    f1, f2 = factors
    return f2.pinv(f1.pinv(y).T).T


_BITS_1D = 20  # strategy grid 2^-20 in 1-D
_BITS_2D = 16  # per factor in 2-D
_LOW = 62  # B·x is carried as hi·2^62 + lo, 0 ≤ lo < 2^62: the noise is drawn on lo
_U30, _U32, _U62 = (np.uint64((1 << k) - 1) for k in (30, 32, 62))


def _wrapped(apply_int: Callable[[np.ndarray], np.ndarray],
             apply_float: Callable[[np.ndarray], np.ndarray], h: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """(q, u) with B·h = q·2^64 + u exactly, u ∈ [0, 2^64) (uint64), for 0 ≤ h < 2^32 and a
    non-negative integer B. int64 products wrap modulo 2^64, so ``apply_int`` gives u; the
    float64 product f is within γ·B·h ≪ 2^63 of B·h (Higham 2002, §3.1: B·h < 2^32·Σ|B|
    here), so q = rint((f − u)/2^64) is exact."""
    u = np.asarray(apply_int(h), dtype=np.int64).view(np.uint64)
    f = np.asarray(apply_float(h.astype(np.float64)), dtype=np.float64)
    return np.rint((f - u.astype(np.float64)) / 2.0 ** 64).astype(np.int64), u


def _split(q: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo) of q·2^64 + u with 0 ≤ lo < 2^62."""
    return (q << 2) + (u >> np.uint64(_LOW)).astype(np.int64), (u & _U62).astype(np.int64)


def float_margin(row_sum: int, terms: int, bits: int) -> bool:
    """Whether a float64 product of B (row sums ≤ ``row_sum``, ≤ ``terms`` rounded
    operations per entry, the input's conversion included) with a vector of entries below
    2^bits is within 2^61 of the exact product: (terms + 2)·2^-52·row_sum·2^bits < 2^61
    (Higham 2002, §3.1, γ_m ≤ 2m·u). From B alone, never from the data."""
    return (terms + 2) * row_sum * 2 ** bits < 2 ** (61 + 52)


def exact_product(apply_int: Callable[[np.ndarray], np.ndarray],
                  apply_float: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                  row_sum: int, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """B·x for a non-negative integer matrix B and any int64 histogram x ≥ 0, exactly, as
    int64 arrays (hi, lo) with B·x = hi·2^62 + lo and 0 ≤ lo < 2^62.

    ``apply_int`` / ``apply_float`` apply B to an int64 / float64 array of x's shape;
    ``row_sum`` bounds B's row sums and ``terms`` the operations per entry (public: from
    the strategy). int64 products wrap modulo 2^64, and a float64 product within 2^63 of
    B·x fixes the multiple of 2^64 (:func:`_wrapped`). When :func:`float_margin` holds for
    63-bit entries (every strategy the release optimises in 1-D, and 2-D ones with modest
    row sums) one product of each kind suffices; otherwise x = a·2^32 + b is multiplied
    half by half and recombined with carries. The choice reads B only: the same operations
    run for every x, and nothing overflows while B·x < 2^122 (row sums below 2^59)."""
    if float_margin(row_sum, terms, 63):
        return _split(*_wrapped(apply_int, apply_float, x))
    qa, ua = _wrapped(apply_int, apply_float, x >> 32)
    qb, ub = _wrapped(apply_int, apply_float, x & 0xFFFFFFFF)
    lo = ((ua & _U30) << np.uint64(32)) + (ub & _U62)  # < 2^63
    hi = ((qa << 34) + (ua >> np.uint64(30)).astype(np.int64) + (qb << 2)
          + (ub >> np.uint64(_LOW)).astype(np.int64) + (lo >> np.uint64(_LOW)).astype(np.int64))
    return hi, (lo & _U62).astype(np.int64)


def _stacked(top: np.ndarray, bottom: np.ndarray) -> sp.csr_matrix:
    """[diag(top); bottom] as a CSR matrix (bottom's zeros dropped), built from its arrays:
    the same matrix as ``sp.vstack([sp.diags(top), sp.csr_matrix(bottom)]).tocsr()``."""
    n, p = top.size, bottom.shape[0]
    rows, cols = np.nonzero(bottom)  # row-major: sorted by row, then column
    indptr = np.concatenate([np.arange(n + 1), n + np.cumsum(np.bincount(rows, minlength=p))])
    return sp.csr_matrix((np.concatenate([top, bottom[rows, cols]]),
                          np.concatenate([np.arange(n), cols]), indptr), shape=(n + p, n))


def _row_sum(b: sp.csr_matrix) -> int:
    """B's largest row sum, exact (a non-negative int64 matrix, :func:`_stacked`: its row
    sums stay far below 2^63)."""
    return int(np.asarray(b.sum(axis=1)).max(initial=0))


def noisy_product(apply_int: Callable[[np.ndarray], np.ndarray],
                  apply_float: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                  row_sum: int, terms: int, sensitivity: Fraction, epsilon: Fraction
                  ) -> np.ndarray:
    """B·x + Z as float64, Z the discrete Laplace noise of :func:`frontend.noisy` at
    (``sensitivity``, ``epsilon``), for every int64 histogram x ≥ 0 (:func:`exact_product`).

    The noise is drawn on lo (B·x = hi·2^62 + lo): the sampler returns lo + Z with Z
    independent of its input, so hi·2^62 + (lo + Z) = B·x + Z exactly; (hi, lo + Z) is
    renormalised to the canonical pair of B·x + Z before the float conversion, so the
    output is a function of B·x + Z alone (post-processing; ε-DP as the Laplace mechanism on
    B·x, Dwork & Roth Thm 3.6, Canonne, Kamath & Steinke 2020)."""
    hi, lo = exact_product(apply_int, apply_float, x, row_sum, terms)
    v = np.asarray(frontend.noisy(lo, sensitivity, epsilon).value, dtype=np.int64)
    top = hi + (v >> _LOW)  # floor: lo + Z may leave [0, 2^62)
    return top.astype(np.float64) * 2.0 ** _LOW + (v & ((1 << _LOW) - 1)).astype(np.float64)


def matrix_mechanism(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
                     p: int | Sequence[int] | None = None, restarts: int | None = None,
                     seed: int = 0, rounds: int = 3, *, reuse: bool = True) -> np.ndarray:
    """Matrix mechanism with HDMM's workload-optimised p-Identity strategies. ε-DP.

    Li et al. 2010 with the strategy optimisers of McKenna et al. 2018: OPT_0 in 1-D,
    OPT_⊗ in 2-D; Laplace noise on the strategy queries, least-squares inference.

    The strategy A (1-D: [I; Θ]·diag(1/s); 2-D: A₁ ⊗ A₂) is chosen from the workload only
    (``workload=None``: all ranges in 1-D, AllRange ⊗ AllRange in 2-D; random rectangles:
    see :func:`optimize_rectangles`); options ``p`` (default :func:`default_p` per axis),
    ``restarts`` (default :func:`default_restarts`), ``seed`` (where the optimiser's
    deterministic start sequence begins), ``rounds`` and ``reuse`` (serve a declared random
    family by its cached family strategy, default True; see :func:`mm_strategy`) only
    change which strategy is used — never how its noise is calibrated.

    Privacy. A is snapped to an integer matrix B = 2^t·A (rounded; t = 20 in 1-D, 16 per
    factor in 2-D, :meth:`PIdentity.integer`), so the queries B·x are computed exactly in
    int64 — a floating-point A·x is not exactly linear, and neighbouring histograms' float
    answers can move by more than Δ_A. Δ = l1_sensitivity(B), B's largest column L1 norm,
    exact (2-D: l1_sensitivity(B₁)·l1_sensitivity(B₂), which *equals* the largest column
    L1 norm of B₁ ⊗ B₂, since column (j₁, j₂) is b₁ⱼ₁ ⊗ b₂ⱼ₂). One record moves B·x by at
    most Δ in L1, so discrete Laplace noise of scale b' ≥ Δ/ε (Δ/ε rounded up to a scale the
    exact sampler takes, by :func:`dpkit.mechanisms.make_noise`) is ε-DP (Canonne, Kamath &
    Steinke 2020; Dwork et al. 2006). The estimate x̂ = (B/2^t)⁺ y/2^t is post-processing
    (2-D: (A₁⁺ ⊗ A₂⁺) y by per-factor pseudo-inverses, never the product). Input domain:
    every int64 histogram: B·x is computed exactly at any size (:func:`noisy_product`), so
    nothing after the debit depends on the counts' magnitude."""
    if workload is not None and tuple(workload.shape) != x.shape:
        raise DomainError(f"workload shape {workload.shape} != histogram shape {x.shape}")
    factors = mm_strategy(x.shape, workload, p, restarts, seed, rounds, reuse=reuse)
    if x.ndim == 1:
        b, snapped = factors[0].integer(_BITS_1D)
        y = noisy_product(b.__matmul__, b.astype(np.float64).__matmul__, x, _row_sum(b),
                          x.size, l1_sensitivity(b), epsilon)
        return snapped.pinv(y / 2.0**_BITS_1D)
    (b1, s1), (b2, s2) = (f.integer(_BITS_2D) for f in factors)
    sensitivity = l1_sensitivity(b1) * l1_sensitivity(b2)
    floats = [b1.astype(np.float64), b2.astype(np.float64)]
    y = noisy_product(lambda v: _kron_apply([b1, b2], v), lambda v: _kron_apply(floats, v),
                      x, _row_sum(b1) * _row_sum(b2), sum(x.shape), sensitivity, epsilon)
    return kron_pinv([s1, s2], y / 2.0 ** (2 * _BITS_2D))


def hdmm(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
         p: int | Sequence[int] | None = None, restarts: int | None = None,
         seed: int = 0, rounds: int = 3, *, reuse: bool = True) -> np.ndarray:
    """HDMM (McKenna et al. PVLDB 2018): an alias of "mm" (OPT_0 in 1-D, OPT_⊗ in 2-D). ε-DP
    as :func:`matrix_mechanism`, with its options."""
    return matrix_mechanism(x, epsilon, workload, p, restarts, seed, rounds, reuse=reuse)
