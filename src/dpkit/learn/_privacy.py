"""What every dpkit.learn model shares: checks of ε and bounds, row clipping, exact sums and
noisy moments.

Models charge through the front-end kit (:func:`dpkit.mechanisms.frontend.charge`) and draw
every noise through it (:func:`dpkit.mechanisms.frontend.noisy`, grid Laplace on float
statistics), so a fit's ``release_.noise`` lists the rows it drew. Accountants: ``None``
(the model's own ε, nothing else tracked), a :class:`~dpkit.core.compose.PrivacyFilter`
(debited before any statistic is computed; an overrun raises and nothing is fitted), a
:class:`~dpkit.frame.Session` (its budget and ledger, so a fit is recorded like any
release) or any :class:`~dpkit.core.accountant.Accountant`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from functools import cache
from typing import Any, TypeVar

import numpy as np

from dpkit.core.numbers import positive
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend

__all__ = ["check_epsilon", "check_bounds", "clip_rows", "noisy_moments", "moment_rows",
           "exact_sums", "single_threaded_blas", "plan", "SUMS", "DEVIATIONS"]

# Calibrations are pure functions of public numbers (sensitivity, ε, size); repeated fits
# reuse them. Bounded: the variance releases' sensitivities depend on released means.
CACHE_SIZE = 512

T = TypeVar("T")


def check_epsilon(epsilon: Any) -> Fraction:
    """ε as an exact positive Fraction (rounded down: never spend more than asked)."""
    return positive(epsilon, "epsilon", up=False)


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


def standardise(x: np.ndarray, bounds: Any) -> np.ndarray:
    """Rows clamped to declared ``bounds`` (None: ``x`` unchanged) and mapped onto the
    unit cube scaled by 1/√d, so every row has L2 norm ≤ 1."""
    if bounds is None:
        return x
    lower, upper = check_bounds(bounds, x.shape[1])
    mid, half = (lower + upper) / 2, (upper - lower) / 2
    return (np.clip(x, lower, upper) - mid) / half / math.sqrt(x.shape[1])


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
        s1 = frontend.noisy(s1, half[j], epsilon, output="grid", statistic=SUMS).value
        mean = np.clip(s1 / n_hat + mid[j], lower[j], upper[j])
        spread = float(np.max(np.maximum(upper[j] - mean, mean - lower[j]) ** 2))
        s2 = exact_sums(groups, (clipped[:, j] - mean[groups]) ** 2, spread, k)
        noisy = frontend.noisy(s2, spread, var_eps, output="grid",
                               statistic=DEVIATIONS).value / n_hat
        floor = math.sqrt(2) * spread / float(var_eps) / n_hat  # the noise's std
        means[:, j] = mean
        variances[:, j] = np.clip(noisy, floor, 4 * half[j] ** 2)
    return means, variances


SUMS, DEVIATIONS = "per-group sums", "per-group squared deviations"


def moment_rows(lower: np.ndarray, upper: np.ndarray, k: int, epsilon: Fraction
                ) -> tuple[NoiseRow, ...]:
    """The noise plan of :func:`noisy_moments` over k groups: each feature's sums, exact;
    the squared deviations' sensitivity depends on the released means, so their row states
    no scale (the record's convention for a scale set during the release)."""
    half = (upper - lower) / 2
    return plan(*(frontend.noise_row(h, epsilon, SUMS, output="grid", count=k) for h in half),
                NoiseRow("Laplace (grid)", None, None, DEVIATIONS))


def plan(*rows: NoiseRow) -> tuple[NoiseRow, ...]:
    """The distinct rows of a fit's noise plan, in order (the rows its draws record)."""
    return tuple(dict.fromkeys(rows))
