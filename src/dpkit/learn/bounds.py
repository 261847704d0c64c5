"""Per-feature clipping bounds estimated under pure ε-DP, for when no range can be declared.

:func:`private_bounds` spends a declared ε to find, for every feature, a power-of-two
interval that holds the bulk of its values; the result is meant for ``bounds=`` of the
models in :mod:`dpkit.learn`. It never reads a range off the data: what it releases is a
noisy histogram over bins fixed before the data is seen.

Bins (data-independent; ``a = min_exponent``, ``b = max_exponent``, K = b − a), signed
powers of two mirrored around 0, B = 2K + 2 of them per feature::

    (−∞, −2^(b−1)], (−2^(b−1), −2^(b−2)], …, (−2^(a+1), −2^a], (−2^a, 0),
    [0, 2^a), [2^a, 2^(a+1)), …, [2^(b−2), 2^(b−1)), [2^(b−1), +∞)

The two extreme bins absorb every larger magnitude; their outer edges are reported as
∓2^b (values beyond are clipped by the model). Every real number lies in exactly one bin.

Mechanism and privacy (add/remove one row): the d per-feature histograms, d × B integer
counts, are released together by :func:`dpkit.release.measure.laplace_integer`. One row
adds 1 to exactly one bin of each feature's histogram, so the joint L1 sensitivity is
Δ = d, and discrete Laplace noise of scale s = Δ/ε = d/ε on every count (Canonne, Kamath &
Steinke 2020, Thm 1; equivalently each feature's histogram at ε/d, composed over the d
features) makes the release ε-DP. Everything after — thresholding, trimming, the bounds —
is post-processing. The accountant is debited ε through
:func:`dpkit.mechanisms.frontend.charge` before any count is computed.

Selection (post-processing): with N = d·B bins in all and s the sampler's exact scale
(d/ε, rounded up to a representable rational), a bin *passes* when its noisy count is at
least

    τ = ⌈s · ln(N / β)⌉        (i.e. exceeds τ − 1).

For discrete Laplace noise Z of scale s, q = e^(−1/s): P(Z ≥ τ) = q^τ/(1 + q) < e^(−τ/s)
≤ β/N, so by a union bound over the N bins, with probability ≥ 1 − β no empty bin passes.
The lower bound is the left edge of the lowest passing bin, the upper bound the right edge
of the highest; a feature with no passing bin gets ``default``.

Accuracy. With probability ≥ 1 − β (above): every returned bound lies within the data's
power-of-two hull — the lower bound is ≥ the left edge of the bin of the feature's minimum,
the upper ≤ the right edge of the bin of its maximum (never looser than a factor 2 beyond
the data on a side away from 0). And a bin holding c ≥ 2τ rows fails to pass only if
Z ≤ −τ − 1, probability ≤ β/N; so with probability ≥ 1 − 2β every bin of ≥ 2τ rows lies
inside the bounds, and the rows the bounds clip lie in bins of fewer than 2τ rows each
(the sparse tails). ``trim`` > 0 cuts further into the tails, on the noisy counts.

Source: the log-scale ("approximate bounds") histogram for clamping bounds of Wilson,
Zhang, Lam, Desfontaines, Simmons-Marengo & Gipson, "Differentially Private SQL with
Bounded User Contribution", PoPETs 2020 (2); the threshold above is derived here from the
discrete Laplace tail. Written from the idea, not from any library's code.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.learn._privacy import check_epsilon
from dpkit.learn._validation import ArrayLike
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.release.measure import laplace_integer

__all__ = ["private_bounds", "bin_edges", "bin_index", "histograms", "histogram_sensitivity",
           "threshold"]

MIN_EXPONENT = -32
MAX_EXPONENT = 64


def _check_exponents(min_exponent: int, max_exponent: int) -> tuple[int, int]:
    a, b = int(min_exponent), int(max_exponent)
    if a != min_exponent or b != max_exponent or not -1022 <= a < b <= 1023:
        raise DomainError("min_exponent < max_exponent must be integers in [−1022, 1023]")
    return a, b


def bin_edges(min_exponent: int = MIN_EXPONENT, max_exponent: int = MAX_EXPONENT
              ) -> np.ndarray:
    """The B + 1 reported bin edges, ascending: −2^b, …, −2^a, 0, 2^a, …, 2^b (module
    docstring; the extreme bins' outer edges stand for ∓∞). Exact powers of two."""
    a, b = _check_exponents(min_exponent, max_exponent)
    positive = np.ldexp(1.0, np.arange(a, b + 1))
    return np.concatenate([-positive[::-1], [0.0], positive])


def bin_index(x: np.ndarray, min_exponent: int = MIN_EXPONENT,
              max_exponent: int = MAX_EXPONENT) -> np.ndarray:
    """Each (finite) value's bin, 0 … B − 1 (module docstring), exactly: ⌊log₂|x|⌋ from
    the float's exponent (``frexp``), not from a rounded logarithm."""
    a, b = _check_exponents(min_exponent, max_exponent)
    k = b - a
    x = np.asarray(x, dtype=np.float64)
    _, exponent = np.frexp(np.abs(x))  # |x| = m·2^e, m ∈ [½, 1): ⌊log₂|x|⌋ = e − 1
    level = np.where(np.abs(x) < math.ldexp(1.0, a), 0,
                     np.clip(exponent.astype(np.int64) - 1 - a, 0, k - 1) + 1)
    return np.where(x >= 0, k + 1 + level, k - level).astype(np.int64)


def histogram_sensitivity(d: int) -> Fraction:
    """L1 sensitivity of the d histograms under add/remove one row: each feature's
    histogram changes in exactly one bin by 1, so Δ = d."""
    return Fraction(d)


def histograms(x: np.ndarray, min_exponent: int = MIN_EXPONENT,
               max_exponent: int = MAX_EXPONENT) -> np.ndarray:
    """The exact (d, B) int64 counts of every feature's values per bin."""
    n, d = x.shape
    n_bins = 2 * (max_exponent - min_exponent) + 2
    flat = (bin_index(x, min_exponent, max_exponent)
            + n_bins * np.arange(d, dtype=np.int64)[None, :]).ravel()
    return np.bincount(flat, minlength=d * n_bins).reshape(d, n_bins).astype(np.int64)


def threshold(scale: Fraction, n_bins: int, beta: float) -> int:
    """τ = ⌈s·ln(N/β)⌉, so that a discrete Laplace variable of scale s is ≥ τ with
    probability q^τ/(1 + q) < e^(−τ/s) ≤ β/N (q = e^(−1/s)); the product is inflated by
    10⁻¹² before rounding up, so float rounding can only raise τ."""
    return max(1, math.ceil(float(scale) * math.log(n_bins / beta) * (1 + 1e-12)))


def _features(X: ArrayLike) -> tuple[np.ndarray, list[str]]:
    """X as a finite 2-D float64 array and its feature names (DataFrame columns or
    indices). NaN or ±inf raises, naming the features."""
    names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    try:
        x = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"X must be numeric: {exc}") from exc
    if x.ndim != 2 or x.shape[1] == 0:
        raise DomainError(f"X must be 2-D (n_samples, n_features ≥ 1); got shape {x.shape}")
    names = names if names is not None and len(names) == x.shape[1] else [
        str(j) for j in range(x.shape[1])]
    bad = np.flatnonzero(~np.all(np.isfinite(x), axis=0))
    if bad.size:
        raise DomainError("feature(s) " + ", ".join(names[j] for j in bad) + " contain NaN "
                          "or ±inf: refused before any budget is spent (clean or impute "
                          "them first)")
    return x, names


def private_bounds(X: ArrayLike, epsilon: Any, *, accountant: AccountantLike = None,
                   beta: float = 1e-3, trim: float = 0.0,
                   default: tuple[float, float] = (-1.0, 1.0),
                   min_exponent: int = MIN_EXPONENT, max_exponent: int = MAX_EXPONENT
                   ) -> tuple[np.ndarray, np.ndarray]:
    """ε-DP per-feature clipping bounds from a log-scale histogram (module docstring).

    Parameters
    ----------
    X : array-like (n_samples, n_features)
        Finite numbers; NaN or ±inf raises before anything is spent. No range is declared
        or read: the bins are fixed in advance.
    epsilon : float
        ε > 0 (nats) for all the features together (each feature's histogram gets ε/d:
        joint sensitivity d, noise scale d/ε).
    accountant : None, PrivacyFilter or Session
        Debited ε before any count is computed (:func:`dpkit.mechanisms.frontend.charge`).
    beta : float
        β ∈ (0, 1): the probability that some empty bin passes the threshold
        τ = ⌈(d/ε)·ln(d·B/β)⌉ (union bound). Smaller β: fewer false bins, more clipped
        tail.
    trim : float
        Share of the passing bins' total noisy count, in [0, ½), to cut from each side:
        the lower bound is the left edge of the first passing bin at which the cumulative
        noisy count from below exceeds ``trim`` × total, the upper bound likewise from
        above. 0 (default): the outermost passing bins.
    default : (float, float)
        Bounds for a feature with no passing bin (finite, lower < upper).
    min_exponent, max_exponent : int
        a < b: magnitudes below 2^a share the two bins next to 0, those ≥ 2^(b−1) the
        extreme bins (reported edges ∓2^b). B = 2(b − a) + 2 bins per feature.

    Returns
    -------
    lower, upper : ndarray (n_features,)
        Powers of two, 0 or ``default``; lower < upper. With probability ≥ 1 − β the
        bounds lie within the data's power-of-two hull; bins of ≥ 2τ rows are inside
        them with probability ≥ 1 − 2β (module docstring).

    Raises
    ------
    DomainError
        X not 2-D numeric, NaN or ±inf (naming the features), ε ≤ 0, β ∉ (0, 1),
        ``trim`` ∉ [0, ½), a bad ``default`` or exponents — all before anything is spent.
    BudgetExceededError
        The accountant cannot afford ε (nothing computed).

    Warns
    -----
    UserWarning
        Features left at ``default`` (a post-processed, public fact).

    Notes
    -----
    Privacy: ε-DP for add/remove one row — Δ = d (:func:`histogram_sensitivity`), scale
    d/ε, discrete Laplace (Canonne, Kamath & Steinke 2020, Thm 1); the rest is
    post-processing. Source: Wilson et al., PoPETs 2020 (module docstring).
    """
    x, names = _features(X)
    eps = check_epsilon(epsilon)
    a, b = _check_exponents(min_exponent, max_exponent)
    beta = float(beta)
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    trim = float(trim)
    if not 0 <= trim < 0.5:
        raise DomainError("trim must be in [0, 0.5)")
    fallback = np.asarray(default, dtype=np.float64)
    if fallback.shape != (2,) or not np.all(np.isfinite(fallback)) or \
            not fallback[0] < fallback[1]:
        raise DomainError("default must be (lower, upper), finite, lower < upper")
    d = x.shape[1]
    n_bins = 2 * (b - a) + 2
    sensitivity = histogram_sensitivity(d)
    row = frontend.noise_row(sensitivity, eps, "log-scale histograms")
    scale = frontend.exact_scale(row)
    tau = threshold(scale, d * n_bins, beta)  # the noise's
    edges = bin_edges(a, b)

    def compute() -> np.ndarray:
        counts = histograms(x, a, b)
        return laplace_integer(counts, sensitivity, eps)

    noisy = charge(accountant, PureDP(eps),
                   f"private_bounds(ε={eps}, d={d}, bins={n_bins}, β={beta})", compute, (row,))
    lower, upper = np.empty(d), np.empty(d)
    empty = []
    for j in range(d):
        mass = np.where(noisy[j] >= tau, noisy[j], 0).astype(np.float64)
        total = mass.sum()
        if total == 0:
            lower[j], upper[j] = fallback
            empty.append(names[j])
            continue
        lo = int(np.argmax(np.cumsum(mass) > trim * total))
        hi = n_bins - 1 - int(np.argmax(np.cumsum(mass[::-1]) > trim * total))
        lower[j], upper[j] = edges[lo], edges[hi + 1]
    if empty:
        warnings.warn(f"private_bounds: no bin passed the threshold for feature(s) "
                      f"{', '.join(empty)}; default bounds {tuple(fallback.tolist())} used",
                      UserWarning, stacklevel=2)
    return lower, upper
