"""What every dpkit.learn model shares: the budget it spends through, and exact noise on
float statistics.

Accountants: ``None`` (the model's own ε, nothing else tracked), a
:class:`~dpkit.core.compose.PrivacyFilter` (debited before any statistic is computed; an
overrun raises and nothing is fitted), or a :class:`~dpkit.frame.Session` (its budget and
ledger: ``run_debited``, so a fit is recorded like any release).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from functools import cache, lru_cache
from typing import Any, TypeVar

import numpy as np

from dpkit.core import rng
from dpkit.core.component import Measurement
from dpkit.core.compose import PrivacyFilter, calibrate_scale
from dpkit.core.measures import PrivacyLoss, PureDP, convert
from dpkit.core.numbers import Number, positive, sqrt_up, to_fraction
from dpkit.errors import DomainError, MeasureError
from dpkit.mechanisms.laplace import make_laplace
from dpkit.mechanisms.vector import make_vector_laplace

__all__ = ["charge", "laplace_noise", "check_epsilon", "check_bounds", "clip_rows",
           "noisy_moments", "exact_sums", "laplace_mechanism", "vector_laplace_scale",
           "single_threaded_blas"]

# Calibrations are pure functions of public numbers (sensitivity, ε, size); repeated fits
# reuse them. Bounded: the variance releases' sensitivities depend on released means.
CACHE_SIZE = 512

T = TypeVar("T")


def check_epsilon(epsilon: Any) -> Fraction:
    """ε as an exact positive Fraction (rounded down: never spend more than asked)."""
    return positive(epsilon, "epsilon", up=False)


def charge(accountant: Any, loss: PrivacyLoss, description: str, compute: Callable[[], T],
           alternatives: tuple[PrivacyLoss, ...] = ()) -> T:
    """Debit ``loss`` from ``accountant`` (module docstring), then run ``compute``.
    ``alternatives`` are the same guarantee in other measures (e.g. ρ-zCDP beside the
    (ε, δ) it implies): the first one the accountant's measure can take is debited.
    Under the test stream it raises before debiting (:func:`dpkit.core.rng.require_secure`);
    without that check the first draw would refuse it, after the debit."""
    rng.require_secure()
    if accountant is None:
        return compute()
    if isinstance(accountant, PrivacyFilter):
        measure = type(accountant.budget)
    elif hasattr(accountant, "run_debited"):
        measure = accountant.measure
    else:
        raise DomainError("accountant must be None, a PrivacyFilter or a dpkit Session")
    debit = None
    for candidate in (loss, *alternatives):
        try:
            debit = convert(candidate, measure)
            break
        except MeasureError:
            continue
    if debit is None:
        raise MeasureError(f"a {type(loss).__name__} loss cannot be debited from a "
                           f"{measure.__name__} budget")
    if isinstance(accountant, PrivacyFilter):
        accountant.spend(debit)
        return compute()
    return accountant.run_debited(debit, description, compute,
                                  lambda _: f"model: {description}")


def _closed_form_scale(make: Callable[[Fraction], Measurement], sensitivity: Fraction,
                       epsilon: Fraction, allowance: Fraction) -> Fraction:
    """The scale t whose mechanism ``make(t)`` has privacy map ≤ ε at ``sensitivity``: the
    closed form (Δ + 2^k·allowance)/ε, the grid 2^k one step coarser than the mechanisms'
    default so that it holds wherever their rounding puts k, checked against the map, with
    bisection (:func:`~dpkit.core.compose.calibrate_scale`) as the fallback."""
    target = PureDP(epsilon)
    k = math.floor(math.log2(sensitivity / epsilon)) - 29
    guess = (sensitivity + Fraction(2) ** k * allowance) / epsilon
    if make(guess).check(sensitivity, target):
        return guess
    return calibrate_scale(make, sensitivity, target, start=sensitivity / epsilon)


def _scale(sensitivity: Fraction, epsilon: Fraction, size: int) -> Fraction:
    """The grid Laplace scale for vectors of ``size`` coordinates (allowance: size)."""
    return _closed_form_scale(lambda s: make_laplace(s, max_size=size), sensitivity, epsilon,
                              Fraction(size))


@lru_cache(maxsize=CACHE_SIZE)
def laplace_mechanism(sensitivity: Fraction, epsilon: Fraction, size: int) -> Measurement:
    """The grid Laplace mechanism (:func:`dpkit.mechanisms.laplace.make_laplace`) for
    vectors of at most ``size`` coordinates, at the scale of :func:`_scale`. Built once per
    (Δ, ε, size), all public and data-free: a cached mechanism holds no data and no noise,
    and its privacy map is checked again, PureDP(ε) at Δ, before it is returned."""
    mechanism = make_laplace(_scale(sensitivity, epsilon, size), max_size=size)
    if not mechanism.check(sensitivity, PureDP(epsilon)):  # _scale guarantees it
        raise MeasureError(f"Laplace calibration failed at Δ = {sensitivity}, ε = {epsilon}")
    return mechanism


def laplace_noise(values: Any, sensitivity: Number, epsilon: Fraction) -> np.ndarray:
    """``values`` (float array of L1 sensitivity ``sensitivity``) released by the grid
    Laplace mechanism (:func:`dpkit.mechanisms.laplace.make_laplace`) at a scale
    calibrated so that its exact privacy map, rounding included, is ≤ ε."""
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    size = 1 << max(arr.size - 1, 0).bit_length()  # a power of two: few distinct scales
    mechanism = laplace_mechanism(to_fraction(sensitivity), to_fraction(epsilon), size)
    return np.asarray(mechanism(arr), dtype=np.float64).reshape(arr.shape)


@lru_cache(maxsize=CACHE_SIZE)
def vector_laplace_scale(sensitivity: Fraction, epsilon: Fraction, dim: int) -> Fraction:
    """The vector mechanism's scale (:func:`dpkit.mechanisms.vector.make_vector_laplace`)
    whose privacy map at L2 sensitivity Δ₂ is ≤ ε (:func:`_closed_form_scale`, allowance √d
    rounded up). Cached per (Δ₂, ε, d)."""
    return _closed_form_scale(lambda t: make_vector_laplace(t, dim), sensitivity, epsilon,
                              sqrt_up(Fraction(dim)))


@cache
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # inspecting the loaded libraries is slow: once


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """BLAS limited to one thread (threadpoolctl): the solvers' products are tall and
    thin, where threads only add synchronisation, and on a busy machine contention."""
    with _blas_controller().limit(limits=1, user_api="blas"):
        yield


def check_bounds(bounds: Any, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Declared per-feature bounds as two float arrays of length ``d``: ``(lower, upper)``
    with scalars broadcast. Raises DomainError when absent or not lower < upper."""
    if bounds is None:
        raise DomainError("declare the features' bounds: bounds=(lower, upper), or estimate "
                          "them with dpkit.learn.bounds.private_bounds(X, epsilon) (spends "
                          "ε); dpkit never reads them off the data")
    lower, upper = (np.broadcast_to(np.asarray(b, dtype=np.float64), (d,)).copy()
                    for b in bounds)
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))
            and np.all(lower < upper)):
        raise DomainError("bounds must be finite with lower < upper for every feature")
    return lower, upper


def clip_rows(x: np.ndarray, norm: float) -> np.ndarray:
    """Rows scaled down to L2 norm ≤ ``norm`` (rows already inside are unchanged)."""
    norms = np.linalg.norm(x, axis=1)
    factor = np.minimum(1.0, norm / np.maximum(norms, 1e-300))
    return x * factor[:, None]


SUM_GRID_BITS = 20


def exact_sums(groups: np.ndarray, values: np.ndarray, bound: float, k: int) -> np.ndarray:
    """Per-group sums of ``values`` (each |v| ≤ ``bound``) made exact: every value is cut
    towards zero to a multiple of the power of two u = 2^(⌈log₂ bound⌉ − 20), so it stays
    within the bound (a float ulp over it included) and the float64 sums of up to 2^32
    multiples of u, each at most 2^20·u, are exact — the released sum is the exact sum of
    per-record values whose sensitivity the caller declared (DESIGN §3.3; Casacuberta et
    al. 2022 on float sums). The cut moves a value by less than u ≈ 2^-20 of the bound."""
    if values.size >= 1 << 32:
        raise DomainError("exact sums cover at most 2^32 rows")
    unit = 2.0 ** (math.ceil(math.log2(bound)) - SUM_GRID_BITS) if bound > 0 else 1.0
    return np.bincount(groups, np.trunc(values / unit) * unit, minlength=k)


def noisy_moments(x: np.ndarray, groups: np.ndarray, n_hat: np.ndarray, lower: np.ndarray,
                  upper: np.ndarray, epsilon: Fraction, var_epsilon: Fraction | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per-group means and variances of every feature, (k, d) each, from 2d releases: the d
    sums at ``epsilon`` each, the d squared-deviation sums at ``var_epsilon`` each (default
    ``epsilon``); the caller composes them (d·ε_μ + d·ε_σ²); groups are disjoint, so each
    release is one vector over the groups. ``n_hat`` (k,) are the groups' noisy sizes
    (≥ 1, released).

    Feature j, x clipped to [l_j, u_j]: the sums of x_j − m_j (m_j the midpoint; L1
    sensitivity (u_j − l_j)/2) give means μ̂ clamped into the bounds; then the sums of
    (x_j − μ̂_gj)², sensitivity max_g max(u_j − μ̂_gj, μ̂_gj − l_j)² (μ̂ is public by then),
    give variances floored at their own noise's standard deviation, so that noise cannot
    make a group look overconfident. Centring on the noisy mean avoids the cancellation of
    E[x²] − E[x]² when a feature sits at one end of wide bounds (Adult's capital-gain).
    Both sums are :func:`exact_sums`, so the float sum never exceeds what the declared
    sensitivity allows.
    """
    var_eps = epsilon if var_epsilon is None else var_epsilon
    k, d = n_hat.size, x.shape[1]
    mid, half = (lower + upper) / 2, (upper - lower) / 2
    clipped = np.clip(x, lower, upper)
    means, variances = np.empty((k, d)), np.empty((k, d))
    for j in range(d):
        s1 = exact_sums(groups, clipped[:, j] - mid[j], float(half[j]), k)
        mean = np.clip(laplace_noise(s1, half[j], epsilon) / n_hat + mid[j], lower[j],
                       upper[j])
        spread = float(np.max(np.maximum(upper[j] - mean, mean - lower[j]) ** 2))
        s2 = exact_sums(groups, (clipped[:, j] - mean[groups]) ** 2, spread, k)
        noisy = laplace_noise(s2, spread, var_eps) / n_hat
        floor = math.sqrt(2) * spread / float(var_eps) / n_hat  # the noise's std
        means[:, j] = mean
        variances[:, j] = np.clip(noisy, floor, 4 * half[j] ** 2)
    return means, variances
