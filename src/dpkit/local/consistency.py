"""Post-processing of frequency estimates for non-negativity and consistency.

Source: Wang, Lopuhaä-Zwakenberg, Li, Škorić & Li, "Locally Differentially Private
Frequency Estimation with Consistency", NDSS 2020, §IV (the methods and their names) and
§V (Power and PowerNS). Every method is a post-processing of the estimates (and of the
public standard errors), so it costs no privacy.

=========  ==================================================================  =====  =====
method     what it does                                                        ≥ 0    Σ = 1
=========  ==================================================================  =====  =====
base       the unbiased estimates unchanged                                    no     no
base-pos   max(f̂, 0)                                                           yes    no
post-pos   per value the same as base-pos; a *set* query sums the raw          yes    no
           estimates first and clips the sum (:func:`subset_sum`)
base-cut   f̂ where f̂ > θ, else 0; θ = σ·Φ⁻¹(1 − α/k) (Bonferroni over the     yes    no
           k values: a value is kept when it is significantly above 0)
norm       f̂ + (1 − Σf̂)/k (the least-squares consistent estimate)             no     yes
norm-mul   max(f̂, 0)·γ with γ making the sum 1                                 yes    yes
norm-cut   max(f̂, 0), then if the sum exceeds 1 the smallest are set to 0:     yes    ≤ 1
           keep f̂ ≥ θ for the smallest θ with Σ_{f̂ ≥ θ} f̂ ≤ 1
norm-sub   max(f̂ + δ, 0) with the δ making the sum 1 (the Euclidean           yes    yes
           projection onto the simplex)
power      the posterior mean E[f | f̂] under a power-law prior on the          yes    no
           frequencies, fitted to the estimates, and Gaussian noise of
           standard error σ
power-ns   power, then norm-sub                                                yes    yes
=========  ==================================================================  =====  =====
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import optimize, stats

from dpkit.core.renamed import renamed
from dpkit.errors import DomainError
from dpkit.local.base import norm_sub

__all__ = ["consistent", "subset_sum", "METHODS"]

METHODS = ("base", "base-pos", "post-pos", "base-cut", "norm", "norm-mul", "norm-cut",
           "norm-sub", "power", "power-ns")


@renamed(alpha="significance")
def consistent(estimates: npt.ArrayLike, method: str = "norm-sub", *,
               std_error: npt.ArrayLike | None = None,
               significance: float = 0.05, n: int | None = None) -> np.ndarray:
    """Post-process frequency estimates f̂ (length k) by one of Wang et al.'s methods (module
    table).

    Parameters
    ----------
    estimates : array (k,)
        Unbiased frequency estimates (e.g. the ``unbiased``/``estimate`` column of an
        oracle's frame); finite.
    method : str
        One of :data:`METHODS`.
    std_error : float or array (k,), optional
        The estimates' standard errors; required by "base-cut", "power" and "power-ns".
    significance : float
        Base-Cut's family-wise test level, in (0, 1) (``alpha=``, deprecated, is the same
        number).
    n : int, optional
        Number of reports, for Power's smallest frequency 1/n (default 1/(10k)).

    Returns
    -------
    ndarray (k,) of float64.

    Raises
    ------
    DomainError
        For an unknown method, non-finite estimates, a missing or non-positive std_error
        where it is needed, or significance ∉ (0, 1).
    """
    f = np.asarray(estimates, dtype=np.float64).reshape(-1)
    if method not in METHODS:
        raise DomainError(f"method must be one of {METHODS}, got {method!r}")
    if f.size == 0 or not np.all(np.isfinite(f)):
        raise DomainError("estimates must be a non-empty vector of finite numbers")
    k = f.size
    if method == "base":
        return f.copy()
    if method in ("base-pos", "post-pos"):
        return np.maximum(f, 0.0)
    if method == "norm":
        return f + (1 - f.sum()) / k
    if method == "norm-mul":
        pos = np.maximum(f, 0.0)
        total = pos.sum()
        return pos / total if total > 0 else np.full(k, 1 / k)
    if method == "norm-cut":
        return _norm_cut(f)
    if method == "norm-sub":
        return norm_sub(f)
    sigma = _std_error(std_error, k)
    if method == "base-cut":
        if not 0 < significance < 1:
            raise DomainError("significance must be in (0, 1)")
        theta = sigma * stats.norm.isf(significance / k)
        return np.where(f > theta, f, 0.0)
    post = power_posterior(f, sigma, n)
    return post if method == "power" else norm_sub(post)


def subset_sum(estimates: npt.ArrayLike, members: npt.ArrayLike, method: str = "post-pos") -> float:
    """The frequency of a set of values: Σ_{v ∈ members} f̂(v) post-processed. "post-pos"
    clips the raw sum at 0 (Wang et al. 2020's Post-Pos); any other method sums its
    per-value output.

    Raises
    ------
    DomainError
        As :func:`consistent`, or for members outside [0, k).
    """
    f = np.asarray(estimates, dtype=np.float64).reshape(-1)
    idx = np.asarray(members, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= f.size):
        raise DomainError("members must be values in [0, k)")
    if method == "post-pos":
        consistent(f, "base")  # validates the estimates
        return max(float(f[idx].sum()), 0.0)
    return float(consistent(f, method)[idx].sum())


def _std_error(std_error: Any, k: int) -> np.ndarray:
    if std_error is None:
        raise DomainError("this method needs the estimates' std_error")
    s = np.broadcast_to(np.asarray(std_error, dtype=np.float64), (k,)).copy()
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise DomainError("std_error must be positive and finite")
    return s


def _norm_cut(f: np.ndarray) -> np.ndarray:
    pos = np.maximum(f, 0.0)
    if pos.sum() <= 1:
        return pos
    order = np.argsort(-pos, kind="stable")
    keep = np.cumsum(pos[order]) <= 1  # the largest values whose total stays ≤ 1
    out = np.zeros_like(pos)
    out[order[keep]] = pos[order[keep]]
    return out


_GRID = 400  # points of the frequency grid for Power's posterior


@renamed(sigma="std_error")
def power_posterior(f: np.ndarray, std_error: np.ndarray, n: int | None = None) -> np.ndarray:
    """Power (Wang et al. 2020, §V): a power-law prior P(x) ∝ x^(−a) on [x₀, 1] with the
    exponent a ≥ 0 fitted by maximum likelihood to the estimates under f̂ = x + N(0, σ²)
    (σ = ``std_error``, ``sigma=`` deprecated), then each f̂ replaced by its posterior mean
    E[x | f̂] (numerical integration on a log-spaced grid of 400 frequencies; x₀ = 1/n,
    default 1/(10k))."""
    k = f.size
    lo = 1.0 / (n if n is not None and n > 0 else 10 * k)
    grid = np.geomspace(lo, 1.0, _GRID)
    widths = np.gradient(grid)
    like = stats.norm.pdf((f[:, None] - grid[None, :]) / std_error[:, None]) / std_error[:, None]

    def prior(a: float) -> np.ndarray:
        w = grid ** (-a) * widths
        return w / w.sum()

    def nll(a: float) -> float:
        return -float(np.log(like @ prior(a) + 1e-300).sum())

    best = optimize.minimize_scalar(nll, bounds=(0.0, 5.0), method="bounded")
    w = like * prior(float(best.x))[None, :]
    return (w @ grid) / np.maximum(w.sum(axis=1), 1e-300)
