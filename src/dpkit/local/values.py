"""Shared parts of the local protocols for bounded numbers (telemetry, mean estimation): the
out-of-bounds rule, Bernoulli draws with a float probability, the one-row estimate frame and
the randomizer as a Measurement.

Out-of-bounds rule (every numeric protocol of dpkit.local). A value is read as a float; a
finite value outside the declared [low, high] is clamped to the nearer bound; anything that
is not a finite number (NaN, ±inf, None, a string) is replaced by the protocol's
``fallback`` (default: ``low``) before randomising. The report is then distributed exactly
as for a user holding the clamped or fallback value, so nothing raises on the data side and
a bad value reveals no more than an in-bounds one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import stats

from dpkit.core import rng
from dpkit.core.numbers import Number
from dpkit.errors import DomainError

__all__ = ["to_interval", "bernoulli_float", "mean_frame", "local_measurement", "check_level",
           "normal_z"]


def to_interval(values: npt.ArrayLike, low: float, high: float, fallback: float) -> np.ndarray:
    """The out-of-bounds rule (module docstring): a float64 array of values in [low, high]."""
    arr = np.asarray(values)
    flat = arr.reshape(-1)
    if flat.dtype.kind in "iufb":
        x = flat.astype(np.float64)
    else:
        x = np.full(flat.size, np.nan)
        for i, v in enumerate(flat.tolist()):
            if isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool):
                x[i] = float(v)
    x = np.where(np.isfinite(x), x, fallback)
    return np.clip(x, low, high)


def bernoulli_float(t: np.ndarray) -> np.ndarray:
    """Bernoulli(t_i) per element for floats t_i ∈ [0, 1], each probability truncated to a
    multiple of 2^-64 (exact given the truncation: a uniform 64-bit word W is compared with
    ⌊t·2^64⌋; t = 1 is always True). Used only where the probability is data (an unbiased
    rounding of a user's value), never where a privacy ratio depends on it."""
    t = np.asarray(t, dtype=np.float64)
    full = t >= 1.0
    thresh = np.floor(np.ldexp(np.where(full, 0.0, np.clip(t, 0.0, 1.0)), 64)).astype(np.uint64)
    return (rng.words(t.size, 64) < thresh) | full


def check_level(level: float, name: str = "confidence") -> float:
    """A level (an interval's confidence, a failure probability β) in (0, 1) as a float.

    Raises
    ------
    DomainError
        Otherwise.
    """
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0 < level < 1:
        raise DomainError(f"{name} must be a number in (0, 1), got {level!r}")
    return float(level)


def normal_z(confidence: float) -> float:
    """z with P(|Z| ≤ z) = ``confidence`` for a standard normal Z (a two-sided interval)."""
    return float(stats.norm.isf((1 - check_level(confidence)) / 2))


def mean_frame(estimate: np.ndarray, variance: np.ndarray, n: int, confidence: float,
               names: list[str] | None = None) -> pl.DataFrame:
    """Estimates with standard errors and normal CIs at level ``confidence``, one row per
    coordinate.

    Columns: ``attribute`` (when ``names`` is given), ``estimate``, ``std_error``,
    ``ci_low``, ``ci_high``, ``n`` (reports used)."""
    est = np.atleast_1d(np.asarray(estimate, dtype=np.float64))
    se = np.sqrt(np.maximum(np.atleast_1d(np.asarray(variance, dtype=np.float64)), 0.0))
    z = normal_z(confidence)
    cols: dict[str, Any] = {} if names is None else {"attribute": names}
    cols.update({"estimate": est, "std_error": se, "ci_low": est - z * se,
                 "ci_high": est + z * se, "n": np.full(est.size, n, dtype=np.int64)})
    return pl.DataFrame(cols)


def local_measurement(function: Callable[..., object], epsilon: Fraction, name: str,
                      **params: Any) -> Any:
    """A local randomizer as a :class:`~dpkit.core.component.Measurement`: input a vector of
    values (one per user, anything the randomizer accepts), output the reports; under
    :class:`HammingDistance` the map is d_in ↦ PureDP(d_in · ε) (each user's report depends
    on their value only). ``params`` are shown in its name: ``local_<name>(k=…, epsilon=…)``.
    """
    from dpkit.core.component import Measurement
    from dpkit.core.domains import AnyDomain, VectorDomain
    from dpkit.core.measures import PureDP
    from dpkit.core.metrics import HammingDistance
    from dpkit.core.numbers import non_negative

    shown = "".join(f"{k}={v}, " for k, v in params.items())
    return Measurement(
        function=function, input_metric=HammingDistance(), output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(non_negative(d_in, "d_in") * epsilon),
        name=f"local_{name}({shown}epsilon={float(epsilon):.6g})",
        input_domain=VectorDomain(AnyDomain()))


def finite_bound(x: Number, name: str) -> float:
    """A declared bound as a float (finite).

    Raises
    ------
    DomainError
        If x is not a finite real number.
    """
    from dpkit.core.numbers import to_fraction

    value = float(to_fraction(x))
    if not math.isfinite(value):
        raise DomainError(f"{name} must be finite, got {x!r}")
    return value
