"""One posterior sample (OPS) for conjugate models, sampled exactly on a public grid:
Beta–Bernoulli and Dirichlet–categorical.

Sources: Dimitrakakis, Nelson, Mitrokotsa & Rubinstein, *Robust and private Bayesian
inference*, ALT 2014 (a posterior sample is private when the log-likelihood ratio is
bounded); Wang, Fienberg & Smola, *Privacy for free: posterior sampling and stochastic
gradient Monte Carlo*, ICML 2015 (one posterior sample, "OPS"; scaling the
log-likelihood by a temperature t < 1 to reach a target ε).

Models (one implementation: a grid Θ of points θ ∈ Δ_K on the simplex, K columns):

- Beta–Bernoulli: x_i ∈ {0, 1} i.i.d. Bernoulli(θ), prior Beta(α, β) restricted to m points
  θ_j = a + (1 − 2a)(j + ½)/m of [a, 1 − a] (a > 0: the truncation that bounds the
  log-likelihood); K = 2 columns (θ, 1 − θ), counts (s, n − s), s the number of ones.
- Dirichlet–categorical: x_i ∈ {0, …, K − 1} i.i.d. Categorical(θ), prior Dir(α) restricted
  to the points θ = c/m, c ∈ ℤ^K with every c_k ≥ 1 (the truncation: θ_k ≥ 1/m) and
  Σ c_k = m: C(m − 1, K − 1) points (K = 3, m = 200: 19,701; K = 4, m = 64: 39,711), at most
  2^17. Counts n_k, the number of records in category k.

The release is θ ∈ Θ drawn with probability ∝ prior(θ) · exp(t · Σ_k n_k log θ_k): the
tempered posterior on the grid.

Privacy: this is the exponential mechanism with base measure prior(θ) on the scores u(θ) =
Σ_k n_k ℓ_k(θ), ℓ_k = log θ_k taken as the exact binary value of its float64 evaluation, so
every score is an exact dyadic rational (held as integers over one common power of two). The
law is unchanged by adding a constant to every score, so a neighbour's effect is the range
of f = u' − u over Θ. Substituting one record from category x to y gives f = ℓ_y − ℓ_x, |f|
≤ Δ = max_Θ (max_k ℓ_k − min_k ℓ_k) (Beta: max_Θ |log θ − log(1 − θ)| ≈ log((1 − a)/a);
Dirichlet: log(m − K + 1)), range ≤ 2Δ; adding, removing or dropping one record gives f =
±ℓ_x, range ≤ 2Δ too (Dirichlet: exactly Δ). At temperature t = 1/s the mechanism is
(2Δ/s)-DP (McSherry & Talwar 2007; Dwork & Roth Thm 3.10 — OPS's 2·sup|log-likelihood ratio|
of Dimitrakakis et al.). The temperature comes from the one calibrated selection entry
(:func:`dpkit.mechanisms.make_selection`, Δ, ε) and the draw is dpkit's exact exponential
sampler: no floating-point sampling. A continuous Beta or Dirichlet draw (normalised Gammas)
is not used because it cannot be made exact with dpkit's samplers (floating-point inversion
of a continuous law is the Mironov 2012 attack surface); the grid is the price: memory and
time linear in the number of points (K = 4, m = 64: about 0.1 s a draw), and a resolution of
1/m per coordinate.

Accuracy (issue 34): right as science, worse than Laplace as a default. A posterior draw at
temperature t = ε/(2Δ) has, by the Bernstein–von Mises approximation, squared error about
v/n + v/(t·n) per coordinate (v = θ_k(1 − θ_k): the sampling error plus the width of the
tempered posterior — at t = 1 a posterior draw has twice the posterior variance, the factor
2 Wang, Fienberg & Smola 2015 note for OPS's asymptotic efficiency), against
v/n + 2b²/n² for the counts with discrete Laplace noise of scale b (b = 1/ε for a
proportion, 2/ε per count under substitution), which Foulds, Geumlek, Welling & Chaudhuri
(UAI 2016) show is asymptotically efficient. The ratio of squared errors tends to
1 + 2Δ/ε: OPS is worse than Laplace on the counts once Δ·ε·n·v > 1 (Beta–Bernoulli) or
Δ·ε·n·v > 4 (Dirichlet–categorical), for every θ on the grid when v is its smallest value
a(1 − a) or (1/m)(1 − 1/m). Measured (``bench/posterior.py``,
``bench/floor_guards.py`` on MovieLens and MSNBC proportions, 20 subsamples a cell):
1.9–10× Laplace's absolute error in every cell where the warning fires (n ∈ {100, 1000,
10000}, ε ∈ {0.1, 1}); where it does not (n = 100 at ε = 0.1) 0.74–2.7×.
Both functions emit :class:`~dpkit.errors.BaselineWarning` before the debit when n (public)
is past that point (:func:`laplace_preferred`, data-free); the draw is unchanged.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.core import numbers, rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.numbers import Number
from dpkit.errors import BaselineWarning, DomainError
from dpkit.mechanisms import CalibratedNoise, frontend, make_selection
from dpkit.mechanisms.frontend import AccountantLike, charge, check_accountant
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["PosteriorGrid", "beta_bernoulli_grid", "dirichlet_categorical_grid",
           "one_posterior_sample", "one_posterior_sample_categorical", "posterior_law",
           "laplace_preferred",
           "audit_cases"]

MAX_GRID = 1 << 14  # Beta–Bernoulli: grid points m
MAX_SIMPLEX = 1 << 17  # Dirichlet–categorical: grid points C(m − 1, K − 1)
DEFAULT_SIMPLEX = 1 << 14  # the default resolution: the largest m with at most this many
MAX_CATEGORIES = 64  # the grid is already coarse (K = 20: m ≤ 25)


@dataclass(frozen=True)
class PosteriorGrid:
    """The public grid of a model: its points, their exact log terms and the prior (all
    data-free).

    Attributes
    ----------
    theta : ndarray, shape (G, K)
        The grid points, rows on the simplex (Beta–Bernoulli: rows (θ, 1 − θ)).
    index : ndarray of int64, shape (G, K)
        ℓ_k(θ_j) = levels[index[j, k]] / 2^shift.
    levels : ndarray of Python int (object), shape (L,)
        The distinct log terms, the exact binary values of float64 log θ_k, as integer
        numerators over 2^shift.
    shift : int
    prior : tuple of Fraction, length K
        α: the prior's log-weight at θ_j is Σ_k (α_k − 1)·ℓ_k(θ_j) (a base measure).
    sensitivity : Fraction
        Δ = max_j (max_k ℓ_k(θ_j) − min_k ℓ_k(θ_j)): the most one substituted record moves
        a score.
    """

    theta: np.ndarray
    index: np.ndarray
    levels: np.ndarray
    shift: int
    prior: tuple[Fraction, ...]
    sensitivity: Fraction


def _dyadic(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Finite floats as exact integer numerators over one power of two 2^shift."""
    mantissa, exponent = np.frexp(values)
    ints = (mantissa * 2.0**53).astype(np.int64)  # exact: 53-bit significands
    lows = exponent.astype(np.int64) - 53  # value = int · 2^low
    shift = max(0, -int(lows.min()))
    return np.array([int(i) << int(low + shift) for i, low in zip(ints, lows, strict=True)],
                    dtype=object), shift


def _grid(theta: np.ndarray, index: np.ndarray, logs: np.ndarray,
          prior: tuple[Fraction, ...]) -> PosteriorGrid:
    levels, shift = _dyadic(logs)
    terms = levels[index]
    spread = max((terms.max(axis=1) - terms.min(axis=1)).tolist())
    return PosteriorGrid(theta, index, levels, shift, prior, Fraction(spread, 1 << shift))


def _prior(prior: Any, k: int) -> tuple[Fraction, ...]:
    values: Any = ([prior] * k if isinstance(prior, int | float | Fraction | np.number)
                   else prior)
    try:
        alpha = tuple(numbers.positive(p, "prior") for p in values)
    except (TypeError, ValueError):
        raise DomainError(f"prior must be {k} positive numbers") from None
    if len(alpha) != k:
        raise DomainError(f"prior must be {k} positive numbers, got {len(alpha)}")
    return alpha


def beta_bernoulli_grid(prior: tuple[Any, Any] = (1, 1), truncation: Number = Fraction(1, 100),
                        size: int = 1024) -> PosteriorGrid:
    """The grid θ_j = a + (1 − 2a)(j + 1/2)/m, j < m, with its exact terms (rows (θ, 1 − θ);
    ℓ₁ = log θ, ℓ₀ = log1p(−θ) in float64).

    Raises
    ------
    DomainError
        α or β ≤ 0, a ∉ (0, 1/2), m < 2 or m > 2^14.
    """
    if isinstance(prior, int | float | Fraction | np.number):
        raise DomainError("prior must be two positive numbers (α, β)")
    alpha = _prior(prior, 2)
    a = numbers.to_fraction(truncation)
    if not 0 < a < Fraction(1, 2):
        raise DomainError("truncation must be in (0, 1/2)")
    m = numbers.integer(size, "size", minimum=2)
    if m > MAX_GRID:
        raise DomainError(f"size must be at most {MAX_GRID}")
    theta = float(a) + (1 - 2 * float(a)) * (np.arange(m) + 0.5) / m
    index = np.column_stack([np.arange(m), m + np.arange(m)])
    return _grid(np.column_stack([theta, 1 - theta]), index,
                 np.concatenate([np.log(theta), np.log1p(-theta)]), alpha)


def _compositions(m: int, k: int) -> np.ndarray:
    """Every c ∈ ℤ^k with c_i ≥ 1 and Σ c_i = m, lexicographic, shape (C(m−1, k−1), k)."""
    parts = np.zeros((1, 0), dtype=np.int64)
    used = np.zeros(1, dtype=np.int64)
    for i in range(k - 1):
        choices = m - used - (k - 1 - i)  # part i ∈ [1, choices]: ≥ 1 left for the rest
        rows = np.repeat(np.arange(parts.shape[0]), choices)
        value = np.arange(rows.size) - np.repeat(np.cumsum(choices) - choices, choices) + 1
        parts = np.column_stack([parts[rows], value])
        used = used[rows] + value
    return np.column_stack([parts, m - used])


def _largest_resolution(k: int, points: int) -> int:
    """The largest m whose grid has C(m − 1, k − 1) ≤ points points (m ≥ k)."""
    lo, hi = k, points + k + 1  # C(m − 1, k − 1) ≥ m − k + 1 > points at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if math.comb(mid - 1, k - 1) <= points else (lo, mid)
    return lo


def dirichlet_categorical_grid(categories: int, prior: Number | Sequence[Number] = 1,
                               resolution: int | None = None) -> PosteriorGrid:
    """The grid θ = c/m on the simplex: c ∈ ℤ^K, every c_k ≥ 1, Σ c_k = m (C(m − 1, K − 1)
    points, lexicographic), with its exact terms ℓ_k = float64 log(c_k/m).

    Parameters
    ----------
    categories : int
        K, 2 ≤ K ≤ 64.
    prior : number or sequence of K numbers
        The Dirichlet α (a number: symmetric), each > 0.
    resolution : int or None
        m ≥ K; None: the largest m with at most 2^14 points (K = 3: 182, K = 4: 48).
        Δ = log(m − K + 1).

    Raises
    ------
    DomainError
        K, α or m out of range, or more than 2^17 points (the message gives the largest m
        allowed for this K).
    """
    k = numbers.integer(categories, "categories", minimum=2, maximum=MAX_CATEGORIES)
    alpha = _prior(prior, k)
    if resolution is None:
        m = _largest_resolution(k, DEFAULT_SIMPLEX)
    else:
        m = numbers.integer(resolution, "resolution", minimum=k)
        if math.comb(m - 1, k - 1) > MAX_SIMPLEX:
            raise DomainError(
                f"resolution {m} gives C({m - 1}, {k - 1}) grid points, more than "
                f"{MAX_SIMPLEX}: for K = {k} the resolution must be in "
                f"[{k}, {_largest_resolution(k, MAX_SIMPLEX)}]")
    counts = _compositions(m, k)
    top = m - k + 1  # the largest c_k
    return _grid(counts / m, counts - 1, np.log(np.arange(1, top + 1) / m), alpha)


def _integer_scores(grid: PosteriorGrid, counts: Sequence[int], scale: Fraction
                    ) -> tuple[np.ndarray, Fraction]:
    """The exponential mechanism's scores with the prior as base measure,
    u(θ) + s·log prior(θ) = Σ_k (n_k + s(α_k − 1))·ℓ_k(θ) (P ∝ exp(score/s) =
    prior · exp(u/s)), exactly: integers N_j (object array, shape (G,)) and the unit,
    score_j = N_j · unit."""
    weights = [n + scale * (a - 1) for n, a in zip(counts, grid.prior, strict=True)]
    denom = math.lcm(*(w.denominator for w in weights))
    scores = np.zeros(grid.index.shape[0], dtype=object)
    for column, w in enumerate(weights):
        if w:
            scores = scores + (grid.levels * int(w * denom))[grid.index[:, column]]
    return scores, Fraction(1, denom << grid.shift)


def _draw(grid: PosteriorGrid, counts: Sequence[int], selection: CalibratedNoise,
          size: int | None = None) -> Any:
    """Grid row(s) j with probability ∝ exp(score_j / s), exactly (s the selection's
    temperature; scores as integers in units of a small rational)."""
    scale = frontend.row_of(selection).scale
    assert scale is not None
    scores, unit = _integer_scores(grid, counts, scale)
    return frontend.draw(selection, scores, unit=unit, size=size)


def posterior_law(grid: PosteriorGrid, counts: Sequence[int], epsilon: Number) -> np.ndarray:
    """The exact law (shape (G,), floats) of the released grid row given the counts
    (Beta–Bernoulli: (s, n − s)), for tests and benchmarks on public or synthetic data
    (reads the counts without noise)."""
    scale = frontend.selection_row(grid.sensitivity, epsilon).scale
    assert scale is not None
    scores, unit = _integer_scores(grid, counts, scale)
    z = (scores - max(scores.tolist())).astype(float) * float(unit / scale)
    w = np.exp(z)
    return w / w.sum()


def _release(grid: PosteriorGrid, counts: Sequence[int], eps: Fraction, accountant: AccountantLike,
             description: str) -> int:
    """Charge PureDP(ε) once, then draw one grid row at the calibrated temperature."""
    check_accountant(accountant)
    selection = make_selection(grid.sensitivity, eps)
    rows = (frontend.row_of(selection, "log-likelihood on the θ grid"),)
    return charge(accountant, PureDP(eps), description,
                  lambda: int(_draw(grid, counts, selection)), rows)


def laplace_preferred(grid: PosteriorGrid, n: int, epsilon: Number) -> bool:
    """True when, for every θ on ``grid``, one posterior sample of n records at ε has a
    larger asymptotic squared error than the counts with discrete Laplace noise (module
    docstring, "Accuracy"): Δ·ε·n·v_min > c, v_min = min over the grid of θ_k(1 − θ_k),
    c = 1 for Beta–Bernoulli (K = 2, scale 1/ε on the count of ones) and 4 otherwise
    (scale 2/ε per count). Reads only public numbers (the grid, n, ε)."""
    theta = grid.theta
    low = float(theta.min())
    v_min = low * (1 - low)
    c = 1.0 if theta.shape[1] == 2 else 4.0
    return float(grid.sensitivity) * float(epsilon) * n * v_min > c


def _advise(grid: PosteriorGrid, n: int, eps: Fraction, model: str) -> None:
    """Warn, before the debit, when the Laplace counts are the better release."""
    if laplace_preferred(grid, n, eps):
        warnings.warn(
            f"one posterior sample ({model}, n = {n}, ε = {float(eps):g}): past n·ε·Δ·v = "
            f"{float(grid.sensitivity) * float(eps) * n:.3g}·v its squared error is about "
            f"1 + 2Δ/ε = {1 + 2 * float(grid.sensitivity / eps):.3g} times that of the "
            "counts with discrete Laplace noise (dpkit.mechanisms.make_noise on the counts, "
            "or a Session count) — use those unless a posterior draw is what you need",
            BaselineWarning, stacklevel=3)


def _vector(x: Any, what: str) -> np.ndarray:
    """x as a 1-D array (DomainError otherwise), before any debit."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError):
        raise DomainError(f"x must be an array of {what}") from None
    if arr.ndim != 1:
        raise DomainError(f"x must be a 1-D array of {what}")
    return arr


def _ones(x: Any) -> tuple[int, int]:
    arr = _vector(x, "0/1 outcomes")
    if arr.dtype.kind not in "biuf":
        raise DomainError("x must be numeric or boolean")
    return int(np.count_nonzero(arr == 1)), int(arr.size)


def _category_counts(x: Any, k: int) -> list[int]:
    arr = _vector(x, "category indices")
    if arr.size == 0:
        return [0] * k
    if arr.dtype.kind not in "biu":
        raise DomainError(f"x must hold integer category indices, got dtype {arr.dtype}")
    valid = arr[(arr >= 0) & (arr < k)].astype(np.int64)
    return [int(c) for c in np.bincount(valid, minlength=k)]


@register(audit=lambda: audit_cases())  # the audit battery's case(s)
def one_posterior_sample(x: npt.ArrayLike, *, epsilon: Number, prior: tuple[Any, Any] = (1, 1),
                         truncation: Number = Fraction(1, 100), size: int = 1024,
                         accountant: AccountantLike = None) -> float:
    """One sample of θ from the tempered Beta–Bernoulli posterior on a grid, ε-DP.

    Parameters
    ----------
    x : array-like, shape (n,)
        Outcomes; an element counts as a one iff it equals 1 (True); anything else (0,
        NaN, other values) counts as a zero. n is public (substitute-one neighbours).
    epsilon : number
        ε (nats), charged once.
    prior : (α, β)
        The Beta prior (a base measure: it costs nothing).
    truncation : number
        a ∈ (0, 1/2): θ ranges over [a, 1 − a]; Δ ≈ log((1 − a)/a) (e.g. 4.6 at a = 0.01).
    size : int
        m, the number of grid points (≤ 2^14).
    accountant : Accountant, PrivacyFilter, Session or None
        Charged PureDP(ε) before the draw.

    Returns
    -------
    float
        θ on the grid, distributed ∝ prior(θ) θ^{ts} (1 − θ)^{t(n − s)}, t = ε/(2Δ)
        (rounded down to a representable temperature by the calibrated entry).

    Raises
    ------
    DomainError
        Bad ε, prior, truncation, size, x's shape or type, or accountant — before any debit.

    Warns
    -----
    BaselineWarning
        Before the debit, when Δ·ε·n·a(1 − a) > 1 (:func:`laplace_preferred`): the count
        of ones with discrete Laplace noise is then the more accurate release (module
        docstring, "Accuracy"; measured 1.9–10× worse where it fires). On held-out real
        data (MSNBC sessions, n = 10,000, bench/floor.py) its error about the sample's own
        proportion is 13–290× the Laplace count's at ε ∈ {0.1, 1} over two runs: the sample
        carries the posterior's spread, which the Laplace count does not.

    Notes
    -----
    Privacy map: substitute one x ↦ PureDP(ε) (module docstring: the exponential mechanism
    with base measure; Dimitrakakis et al. 2014, Wang et al. 2015). Adding or
    removing a record moves the scores by ℓ₁ or ℓ₀ alone, whose range over Θ is also ≤ 2Δ,
    so the same ε holds for add/remove neighbours with n released.
    """
    rng.require_secure()
    eps = numbers.positive(epsilon, "epsilon", up=False)
    grid = beta_bernoulli_grid(prior, truncation, size)
    ones, n = _ones(x)
    _advise(grid, n, eps, "Beta–Bernoulli")
    row = _release(grid, (ones, n - ones), eps, accountant,
                   f"one posterior sample, Beta–Bernoulli: prior {prior}, "
                   f"a={float(truncation)}, m={size}, n={n}")
    return float(grid.theta[row, 0])


def one_posterior_sample_categorical(x: npt.ArrayLike, *, epsilon: Number, categories: int,
                                     prior: Number | Sequence[Number] = 1,
                                     resolution: int | None = None,
                                     accountant: AccountantLike = None) -> np.ndarray:
    """One sample of θ from the tempered Dirichlet–categorical posterior on the simplex
    grid θ = c/m, ε-DP.

    Parameters
    ----------
    x : array-like of int, shape (n,)
        Category indices in {0, …, K − 1} (integer or boolean dtype). Out-of-domain values
        (negative or ≥ K) are dropped: they count in no category (their records add
        nothing to the likelihood; the privacy argument covers them).
    epsilon : number
        ε (nats), charged once.
    categories : int
        K, 2 ≤ K ≤ 64.
    prior : number or sequence of K numbers
        The Dirichlet α (a number: symmetric), each > 0 (a base measure: it costs nothing).
    resolution : int or None
        m ≥ K: θ_k ∈ {1/m, …, (m − K + 1)/m}, C(m − 1, K − 1) ≤ 2^17 grid points;
        Δ = log(m − K + 1). None: the largest m with at most 2^14 points (K = 3: 182,
        K = 4: 48). Time and memory are linear in the number of points.
    accountant : Accountant, PrivacyFilter, Session or None
        Charged PureDP(ε) before the draw.

    Returns
    -------
    ndarray of float, shape (K,)
        θ = c/m on the grid (entries ≥ 1/m, summing to 1), distributed
        ∝ Π_k θ_k^{α_k − 1 + t·n_k}, n_k the count of category k, t = ε/(2Δ) (rounded
        down to a representable temperature by the calibrated entry).

    Raises
    ------
    DomainError
        Bad ε, K, prior, resolution (or a grid over 2^17 points), x's shape or dtype, or
        accountant — before any debit.
    BudgetExceededError
        The accountant cannot pay ε (nothing debited).

    Warns
    -----
    BaselineWarning
        Before the debit, when Δ·ε·n·(1/m)(1 − 1/m) > 4 (:func:`laplace_preferred`): the
        K counts with discrete Laplace noise are then the more accurate release.

    Notes
    -----
    Privacy map: substitute one x ↦ PureDP(ε), ε = 2Δ/s, s the temperature 1/t (module
    docstring: the exponential mechanism with the prior as base measure, McSherry & Talwar
    2007, Dwork & Roth Thm 3.10; OPS, Dimitrakakis et al. 2014, Wang, Fienberg & Smola
    2015). Moving one record from category x to y changes the log-likelihood at θ by
    log θ_y − log θ_x ∈ [−Δ, Δ]; adding, removing or dropping one moves it by ±log θ_x, of
    range Δ over the grid, so the same ε holds for add/remove neighbours.
    """
    rng.require_secure()
    eps = numbers.positive(epsilon, "epsilon", up=False)
    grid = dirichlet_categorical_grid(categories, prior, resolution)
    counts = _category_counts(x, grid.theta.shape[1])
    m = int(grid.index[0].sum()) + grid.index.shape[1]
    _advise(grid, int(np.size(x)), eps, "Dirichlet–categorical")
    row = _release(grid, counts, eps, accountant,
                   f"one posterior sample, Dirichlet–categorical: K={len(counts)}, prior "
                   f"{[float(a) for a in grid.prior]}, m={m}, n={int(np.size(x))}")
    return grid.theta[row].copy()


def _audit_case(name: str, grid: PosteriorGrid, counts_of: Callable[[Any], Sequence[int]],
                x: np.ndarray, x_prime: np.ndarray) -> AuditCase:
    """ε = 1 on the neighbours x, x'; broken: the temperature for Δ/4 (as if the
    truncation were ignored in the sensitivity) while the claim stays ε = 1."""
    eps = Fraction(1)
    good = make_selection(grid.sensitivity, eps)

    def sampler(s: CalibratedNoise) -> Sampler:
        def sample(data: Any, n: int) -> np.ndarray:
            return np.asarray(_draw(grid, counts_of(data), s, size=n))
        return sample

    claim = Measurement(lambda d: sampler(good)(d, 1), HammingDistance(), PureDP,
                        lambda d: PureDP(eps * d), name,
                        input_domain=VectorDomain(AtomDomain(Kind.INTEGER)))
    broken = make_selection(grid.sensitivity / 4, eps)  # a quarter of the noise
    return AuditCase(name, claim, sampler(good), sampler(broken), x, x_prime)


def _binary_counts(x: Any) -> tuple[int, int]:
    ones, n = _ones(x)
    return ones, n - ones


def audit_cases() -> list[AuditCase]:
    """OPS's audit cases, uniform priors, one record substituted, ε = 1. Beta–Bernoulli:
    a = 1/10, m = 16; x has 3 ones in 6, its neighbour 4. Dirichlet–categorical: K = 3,
    m = 8 (21 points); counts (2, 2, 2) and (3, 1, 2). Broken: the temperature for Δ/4."""
    beta = beta_bernoulli_grid((1, 1), Fraction(1, 10), 16)
    simplex = dirichlet_categorical_grid(3, 1, 8)
    return [
        _audit_case("one_posterior_sample", beta, _binary_counts,
                    np.array([1, 1, 1, 0, 0, 0]), np.array([1, 1, 1, 1, 0, 0])),
        _audit_case("one_posterior_sample_categorical", simplex,
                    lambda d: _category_counts(d, 3),
                    np.array([0, 0, 1, 1, 2, 2]), np.array([0, 0, 0, 1, 2, 2])),
    ]
