"""What every dpkit.learn model shares: the budget it spends through, and exact noise on
float statistics.

Accountants: ``None`` (the model's own ε, nothing else tracked), a
:class:`~dpkit.core.compose.PrivacyFilter` (debited before any statistic is computed; an
overrun raises and nothing is fitted), a :class:`~dpkit.frame.Session` (its budget and
ledger, so a fit is recorded like any release) or any
:class:`~dpkit.core.accountant.Accountant`: all charge through ``Accountant.run``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from functools import cache, lru_cache
from typing import Any, TypeVar

import numpy as np

from dpkit.core import rng
from dpkit.core.accountant import as_accountant
from dpkit.core.component import Measurement
from dpkit.core.measures import PrivacyLoss, convert
from dpkit.core.numbers import Number, positive, to_fraction
from dpkit.core.record import NoiseRow, Release, digest_of, read_only
from dpkit.errors import DomainError, MeasureError
from dpkit.mechanisms import make_noise

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
           alternatives: tuple[PrivacyLoss, ...] = (), noise: Sequence[NoiseRow] = ()) -> T:
    """Charge ``loss`` through the one accountant (:mod:`dpkit.core.accountant`), then run
    ``compute``. ``accountant`` is None (an unaccounted fit: the caller composes), an
    :class:`~dpkit.core.accountant.Accountant`, a :class:`PrivacyFilter` or a Session.
    ``alternatives`` are the same guarantee in other measures (e.g. ρ-zCDP beside the
    (ε, δ) it implies): the first one the accountant's measure can take is debited.
    ``noise``: the noise rows planned before the fit, if any (most fits calibrate their
    noise to values released during the fit, so they plan none).

    The fit's :class:`~dpkit.core.record.Release` (its digest over the fitted model,
    :func:`~dpkit.core.record.digest_of`) is kept by the accountant (``last``) and, when
    ``compute`` returns a fitted estimator, as its attribute ``release_`` — for an
    unaccounted fit too (release id None, the loss the fit would cost).
    Under the test stream it raises before debiting (:func:`dpkit.core.rng.require_secure`).
    """
    rng.require_secure()
    if accountant is None:
        result = compute()
        _keep(result, Release(read_only(result), loss, tuple(noise), None, None, False,
                              digest_of(result), description))
        return result
    target = as_accountant(accountant)
    for candidate in (loss, *alternatives):
        try:
            debit = convert(candidate, target.measure)
            break
        except MeasureError:
            continue
    else:
        raise MeasureError(f"a {type(loss).__name__} loss cannot be debited from a "
                           f"{target.measure.__name__} budget")
    result = target.run(debit, description, compute, noise=noise)
    _keep(result, target.last)
    return result


def _keep(result: Any, release: Release[Any] | None) -> None:
    """A fitted estimator (scikit-learn style) keeps its release record as ``release_``."""
    if callable(getattr(result, "get_params", None)) and not isinstance(result, type):
        result.release_ = release


def _scale(sensitivity: Fraction, epsilon: Fraction, size: int) -> Fraction:
    """The grid Laplace scale for vectors of ``size`` coordinates: the one calibrated-noise
    entry's (:func:`dpkit.mechanisms.make_noise`, output "grid")."""
    return make_noise(sensitivity, epsilon=epsilon, output="grid", size=size).scale


@lru_cache(maxsize=CACHE_SIZE)
def laplace_mechanism(sensitivity: Fraction, epsilon: Fraction, size: int) -> Measurement:
    """The grid Laplace mechanism (:func:`dpkit.mechanisms.laplace.make_laplace`) for
    vectors of at most ``size`` coordinates, at the scale of :func:`_scale`. Built once per
    (Δ, ε, size), all public and data-free: a cached mechanism holds no data and no noise,
    and :func:`~dpkit.mechanisms.make_noise` checks its privacy map, PureDP(ε) at Δ, before
    it is returned (MeasureError otherwise)."""
    return make_noise(sensitivity, epsilon=epsilon, output="grid", size=size,
                      scale=_scale(sensitivity, epsilon, size))


def laplace_noise(values: Any, sensitivity: Number, epsilon: Fraction) -> np.ndarray:
    """``values`` (float array of L1 sensitivity ``sensitivity``) released by the grid
    Laplace mechanism (:func:`dpkit.mechanisms.laplace.make_laplace`) at a scale
    calibrated so that its exact privacy map, rounding included, is ≤ ε."""
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    size = 1 << max(arr.size - 1, 0).bit_length()  # a power of two: few distinct scales
    mechanism = laplace_mechanism(to_fraction(sensitivity), to_fraction(epsilon), size)
    return np.asarray(mechanism(arr), dtype=np.float64).reshape(arr.shape)


def vector_laplace_scale(sensitivity: Fraction, epsilon: Fraction, dim: int) -> Fraction:
    """The vector mechanism's scale (:func:`dpkit.mechanisms.vector.make_vector_laplace`)
    whose privacy map at L2 sensitivity Δ₂ is ≤ ε: :func:`dpkit.mechanisms.make_noise`'s
    (norm "l2", output "grid", size d; cached there)."""
    return make_noise(sensitivity, epsilon=epsilon, norm="l2", output="grid", size=dim).scale


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
