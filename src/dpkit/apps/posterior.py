"""One posterior sample (OPS) for the Beta–Bernoulli model, sampled exactly on a grid.

Sources: Dimitrakakis, Nelson, Mitrokotsa & Rubinstein, *Robust and private Bayesian
inference*, ALT 2014 (a posterior sample is private when the log-likelihood ratio is
bounded); Wang, Fienberg & Smola, *Privacy for free: posterior sampling and stochastic
gradient Monte Carlo*, ICML 2015 (one posterior sample, "OPS"; scaling the
log-likelihood by a temperature t < 1 to reach a target ε).

Model: x_i ∈ {0, 1} i.i.d. Bernoulli(θ), prior Beta(α, β) restricted to a public grid Θ of m
points in [a, 1 − a] (a > 0: the truncation that bounds the log-likelihood). The release is
θ ∈ Θ drawn with probability ∝ prior(θ) · exp(t · (s·log θ + (n − s)·log(1 − θ))), s the
number of ones: the tempered posterior on the grid.

Privacy (substitute-one neighbours; n public): this is the exponential mechanism with base
measure prior(θ) on the scores u(θ) = s·ℓ₁(θ) + (n − s)·ℓ₀(θ), ℓ₁ = log θ and ℓ₀ = log(1 − θ)
taken as the exact binary values of their float64 evaluations, so every score is an exact
rational. Changing one x moves u(θ) by ±(ℓ₁(θ) − ℓ₀(θ)), at most Δ = max_Θ |ℓ₁ − ℓ₀| ≈
log((1 − a)/a); at temperature t = 1/s the mechanism is (2Δ/s)-DP (McSherry & Talwar 2007;
Dwork & Roth Thm 3.10 — OPS's 2·sup|log-likelihood ratio| of Dimitrakakis et al.). The
temperature comes from the one calibrated selection entry
(:func:`dpkit.mechanisms.make_selection`, Δ, ε) and the draw is dpkit's exact exponential
sampler: no floating-point sampling. A continuous Beta draw is not used because it cannot be
made exact with dpkit's samplers (floating-point inversion of a continuous law is the
Mironov 2012 attack surface); the grid is the price.

Dirichlet–categorical is not built: the same exact construction needs a grid on the
simplex, m^(K−1) points for K categories (10⁶ already for K = 4, m = 100), and a
continuous Dirichlet draw (normalised Gammas) is floating-point sampling.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.apps.accounting import charge, check_accountant
from dpkit.core import numbers, rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AnyDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.mechanisms import make_selection
from dpkit.mechanisms.exponential import sample_exponential
from dpkit.mechanisms.registry import AuditCase, Sampler

__all__ = ["BetaBernoulliGrid", "beta_bernoulli_grid", "one_posterior_sample", "audit_cases"]

MAX_GRID = 1 << 14


@dataclass(frozen=True)
class BetaBernoulliGrid:
    """The public grid of the model: θ values, their exact log-likelihood terms and the
    prior's log-weights (all data-free).

    Attributes
    ----------
    theta : ndarray, shape (m,)
    ell1, ell0 : tuple of Fraction
        The exact binary values of float64 log θ and log(1 − θ).
    log_prior : tuple of Fraction
        (α − 1)·ℓ₁ + (β − 1)·ℓ₀ (the unnormalised Beta log-density on the grid).
    sensitivity : Fraction
        Δ = max |ℓ₁ − ℓ₀|: the most one substituted record moves a score.
    """

    theta: np.ndarray
    ell1: tuple[Fraction, ...]
    ell0: tuple[Fraction, ...]
    log_prior: tuple[Fraction, ...]
    sensitivity: Fraction


def beta_bernoulli_grid(prior: tuple[Any, Any] = (1, 1), truncation: Any = Fraction(1, 100),
                        size: int = 1024) -> BetaBernoulliGrid:
    """The grid θ_j = a + (1 − 2a)(j + 1/2)/m, j < m, with its exact terms.

    Raises
    ------
    DomainError
        α or β ≤ 0, a ∉ (0, 1/2), m < 2 or m > 2^14.
    """
    try:
        alpha, beta = (numbers.positive(p, "prior") for p in prior)
    except (TypeError, ValueError):
        raise DomainError("prior must be two positive numbers (α, β)") from None
    a = numbers.to_fraction(truncation)
    if not 0 < a < Fraction(1, 2):
        raise DomainError("truncation must be in (0, 1/2)")
    m = numbers.integer(size, "size", minimum=2)
    if m > MAX_GRID:
        raise DomainError(f"size must be at most {MAX_GRID}")
    theta = float(a) + (1 - 2 * float(a)) * (np.arange(m) + 0.5) / m
    ell1 = tuple(Fraction(float(v)) for v in np.log(theta))
    ell0 = tuple(Fraction(float(v)) for v in np.log1p(-theta))
    log_prior = tuple((alpha - 1) * l1 + (beta - 1) * l0 for l1, l0 in zip(ell1, ell0,
                                                                          strict=True))
    sensitivity = max(abs(l1 - l0) for l1, l0 in zip(ell1, ell0, strict=True))
    return BetaBernoulliGrid(theta, ell1, ell0, log_prior, sensitivity)


def _scores(grid: BetaBernoulliGrid, ones: int, n: int, scale: Fraction) -> list[Fraction]:
    """u(θ) + s·log prior(θ): the exponential mechanism's scores with the prior as base
    measure (P ∝ exp(score/s) = prior · exp(u/s))."""
    return [ones * l1 + (n - ones) * l0 + scale * lp
            for l1, l0, lp in zip(grid.ell1, grid.ell0, grid.log_prior, strict=True)]


def _ones(x: Any) -> tuple[int, int]:
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError):
        raise DomainError("x must be an array of 0/1 outcomes") from None
    if arr.ndim != 1:
        raise DomainError("x must be a 1-D array of 0/1 outcomes")
    if arr.dtype.kind not in "biuf":
        raise DomainError("x must be numeric or boolean")
    return int(np.count_nonzero(arr == 1)), int(arr.size)


def one_posterior_sample(x: Any, *, epsilon: Any, prior: tuple[Any, Any] = (1, 1),
                         truncation: Any = Fraction(1, 100), size: int = 1024,
                         accountant: Any = None) -> float:
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
        Charged PureDP(ε) before x is read.

    Returns
    -------
    float
        θ on the grid, distributed ∝ prior(θ) θ^{ts} (1 − θ)^{t(n − s)}, t = ε/(2Δ)
        (rounded down to a representable temperature by the calibrated entry).

    Raises
    ------
    DomainError
        Bad ε, prior, truncation, size, x's shape or type, or accountant — before any debit.

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
    check_accountant(accountant)
    selection = make_selection(grid.sensitivity, eps)
    rows = (NoiseRow(selection.mechanism, selection.scale, selection.sensitivity,
                     "log-likelihood on the θ grid"),)

    def compute() -> float:
        index = int(selection(_scores(grid, ones, n, selection.scale)))
        return float(grid.theta[index])

    return charge(accountant, PureDP(eps), f"one posterior sample, Beta–Bernoulli: prior "
                  f"{prior}, a={float(truncation)}, m={size}, n={n}", compute, rows)


def posterior_law(grid: BetaBernoulliGrid, ones: int, n: int, epsilon: Any) -> np.ndarray:
    """The exact law of :func:`one_posterior_sample`'s output on the grid (floats, for
    tests and benchmarks on public or synthetic data; reads the count without noise)."""
    scale = make_selection(grid.sensitivity, numbers.positive(epsilon, "epsilon",
                                                              up=False)).scale
    z = np.array([float(s / scale) for s in _scores(grid, ones, n, scale)])
    w = np.exp(z - z.max())
    return w / w.sum()


def audit_cases() -> list[AuditCase]:
    """OPS's audit case: ε = 1, a = 1/10, m = 16, uniform prior; x has 3 ones in 6, its
    neighbour 4 (one record substituted). Broken: the temperature for Δ/4 (as if the
    truncation were ignored in the sensitivity) while the claim stays ε = 1."""
    grid = beta_bernoulli_grid((1, 1), Fraction(1, 10), 16)
    eps = Fraction(1)
    scale = make_selection(grid.sensitivity, eps).scale
    x = np.array([1, 1, 1, 0, 0, 0])
    x_prime = np.array([1, 1, 1, 1, 0, 0])

    def sampler(s: Fraction) -> Sampler:
        def sample(data: Any, n: int) -> np.ndarray:
            ones, size = _ones(data)
            return np.asarray(sample_exponential(_scores(grid, ones, size, s), s, size=n))
        return sample

    claim = Measurement(lambda d: sampler(scale)(d, 1), HammingDistance(), PureDP,
                        lambda d: PureDP(eps * d), "one_posterior_sample",
                        input_domain=AnyDomain())
    return [AuditCase("one_posterior_sample", claim, sampler(scale), sampler(scale / 4),
                      x, x_prime)]
