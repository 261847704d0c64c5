"""Privelet: Haar wavelet coefficients with noise (Xiao, Wang & Gehrke, ICDE 2010 / TKDE 2011).

1-D. Pad the n cells with structural zeros to m = 2^l. Privelet's Haar coefficients are the
average c₀ and, for each internal node of the binary tree over the cells, c = (mean of the
left half − mean of the right half)/2; its weights are W(c₀) = m and W(c) = the node's
number of leaves. Privelet adds Laplace noise of scale λ/W(c) to c, which is ε-DP with
ε = (1 + l)/λ for add/remove neighbours (their Lemma 2 / Thm 1 with generalized sensitivity
ρ = 1 + log₂ m; the paper's factor 2 is for substitution). In integer form, W(c)·c is the
total T for c₀ and S_left − S_right for a node: so this module adds discrete Laplace noise of
one scale λ = (1 + l)/ε to T and to every S_left − S_right, integers whose vector has L1
sensitivity exactly 1 + l (a record is in the total and in one node per level, with sign ±1).
The cells are recovered by the inverse transform (S_left, S_right) = ((S + d)/2, (S − d)/2).

Nominal attributes (their §IV-B): a hierarchy H over the values (leaves; default flat: a
root over all values). The coefficients are the total and, for every non-root node v whose
parent u has f children, c_v = S(v) − S(u)/f, with weight W = f/(2f − 2). In integer form
t_v = f·c_v = f·S(v) − S(u) gets noise of scale λ·(2f − 2). Adding a record to a leaf
changes the total by 1 and, on each level, t of its ancestor by f − 1 and t of each of the
f − 1 siblings by 1: weighted, 2(f − 1)/(2f − 2) = 1 per level with f ≥ 2. So the weighted
sensitivity is ρ = 1 + (levels on the leaf's path with f ≥ 2), maximised over leaves, and
λ = ρ/ε. Reconstruction subtracts the siblings' mean from their t (which sum to zero
exactly) and applies S(v) = (t_v + S(u))/f top-down.

Which ordinal axes to transform (their TKDE 2011 "Privelet+", which leaves small attributes
untransformed): with ``transform="auto"`` (default) an ordinal axis of length n is
transformed only if Haar's expected all-range error is below Identity's along it, computed
exactly as (1 + l)²·trace(A⁻ᵀ G A⁻¹) against trace(G), G = WᵀW of all ranges (O(n²) with
prefix sums; cached). For all ranges Haar wins from n = 1,024 on (variance ratio 0.60; 0.25
at 4,096) and loses below (1.29 at 256, so 256×256 grids stay cell-level); the error of a
product workload is the product of the axes' factors, so the choice is per axis.
``transform="haar"`` transforms every ordinal axis (the ICDE 2010 algorithm).

Multi-D (their §V): the per-axis transforms in turn. A record's coefficients are the outer
product of its per-axis ones, so the weighted sensitivity is Π_j ρ_j and coefficient
(i₁, …, i_d) gets scale λ·Π_j w_j(i_j), λ = Π_j ρ_j/ε (ordinal axes: ρ_j = 1 + l_j, all
weights 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from functools import lru_cache

import numpy as np

from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.ranges.switch import clamp_cells
from dpkit.release.workload import RangeWorkload

__all__ = ["privelet", "haar_forward", "haar_inverse", "nominal_forward", "nominal_inverse",
           "nominal_sensitivity", "privelet_options"]


def _levels(n: int) -> int:
    return max((n - 1).bit_length(), 0)


def haar_forward(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """Integer Haar transform along ``axis`` (length a power of two): [T, d_root, d_level2 …,
    d_leaves] with d = S_left − S_right per node, top-down and left to right."""
    a = np.moveaxis(x, axis, 0)
    parts = []
    while a.shape[0] > 1:
        pairs = a.reshape(a.shape[0] // 2, 2, *a.shape[1:])
        parts.append(pairs[:, 0] - pairs[:, 1])
        a = pairs[:, 0] + pairs[:, 1]
    out = np.concatenate([a, *reversed(parts)], axis=0)
    return np.moveaxis(out, 0, axis)


def haar_inverse(c: np.ndarray, axis: int = 0) -> np.ndarray:
    """Inverse of :func:`haar_forward` (floats)."""
    a = np.moveaxis(np.asarray(c, dtype=np.float64), axis, 0)
    s, pos = a[:1], 1
    while pos < a.shape[0]:
        d = a[pos: pos + s.shape[0]]
        pos += s.shape[0]
        nxt = np.empty((2 * s.shape[0], *s.shape[1:]))
        nxt[0::2], nxt[1::2] = (s + d) / 2, (s - d) / 2
        s = nxt
    return np.moveaxis(s, 0, axis)


def _hierarchy(parents: Sequence[Sequence[int]] | None, m: int) -> list[np.ndarray]:
    """Validated parent arrays, leaves first: ``parents[0][v]`` is the group of value v,
    ``parents[1][g]`` the group of group g, …, the last level maps to one root. None (or an
    empty list) is the flat hierarchy root → values."""
    try:
        levels = [np.asarray(p, dtype=np.int64) for p in (parents or [])]
    except (TypeError, ValueError, OverflowError):
        raise DomainError("a hierarchy is a list of integer parent arrays") from None
    size = m
    for p in levels:
        if p.ndim != 1 or p.size != size or p.min(initial=0) < 0:
            raise DomainError(f"a hierarchy level must map {size} nodes to parents 0 … k−1")
        if np.bincount(p).min(initial=1) == 0:
            raise DomainError("a hierarchy level has a parent without children")
        size = int(p.max()) + 1
    if size != 1:
        levels.append(np.zeros(size, dtype=np.int64))
    return levels


def nominal_sensitivity(parents: list[np.ndarray]) -> Fraction:
    """ρ = 1 + the most levels with fanout ≥ 2 on any leaf's path to the root."""
    depth = np.zeros(parents[0].size, dtype=np.int64)
    node = np.arange(parents[0].size)
    for p in parents:
        fan = np.bincount(p)
        depth += fan[p[node]] >= 2
        node = p[node]
    return Fraction(1 + int(depth.max()))


def nominal_forward(x: np.ndarray, axis: int, parents: list[np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Integer nominal wavelet coefficients along ``axis`` — [S(root), t of the level under
    the root, …, t of the leaves], t_v = f·S(v) − S(u) — and each one's noise weight
    (1 for the root, 2f − 2 for t_v; 1 where f = 1, as t_v ≡ 0 there)."""
    s = np.moveaxis(x, axis, 0)
    coefs, weights = [], []
    for p in parents:
        fan = np.bincount(p)
        up = np.zeros((fan.size, *s.shape[1:]), dtype=s.dtype)
        np.add.at(up, p, s)
        shape = (-1,) + (1,) * (s.ndim - 1)
        coefs.append(fan[p].reshape(shape) * s - up[p])
        weights.append(np.where(fan[p] >= 2, 2 * fan[p] - 2, 1))
        s = up
    out = np.concatenate([s, *reversed(coefs)], axis=0)
    return np.moveaxis(out, 0, axis), np.concatenate([[1], *reversed(weights)])


def nominal_inverse(c: np.ndarray, axis: int, parents: list[np.ndarray]) -> np.ndarray:
    """Inverse of :func:`nominal_forward` (floats), with Privelet's mean subtraction: the t
    of a node's children sum to zero exactly, so their noisy mean is removed first."""
    a = np.moveaxis(np.asarray(c, dtype=np.float64), axis, 0)
    sizes = [p.size for p in parents]  # leaves first
    s, pos = a[:1], 1
    for p, size in zip(reversed(parents), reversed(sizes), strict=True):
        t = a[pos: pos + size]
        pos += size
        fan = np.bincount(p).astype(np.float64)
        shape = (-1,) + (1,) * (a.ndim - 1)
        sums = np.zeros((fan.size, *a.shape[1:]))
        np.add.at(sums, p, t)
        t = t - (sums / fan.reshape(shape))[p]
        s = (t + s[p]) / fan[p].reshape(shape)
    return np.moveaxis(s, 0, axis)


def _gram_times(v: np.ndarray) -> np.ndarray:
    """G·v for G = WᵀW of all ranges over len(v) cells, G_ij = (min + 1)(n − max), by prefix
    sums in O(n) per column."""
    n = v.shape[0]
    i = np.arange(n, dtype=np.float64)[:, None]
    below = np.cumsum((i + 1) * v, axis=0)  # Σ_{j ≤ i} (j + 1) v_j
    above = np.cumsum(((n - i) * v)[::-1], axis=0)[::-1]  # Σ_{j ≥ i} (n − j) v_j
    above = np.concatenate([above[1:], np.zeros((1, v.shape[1]))])
    return (n - i) * below + (i + 1) * above


@lru_cache(maxsize=32)
def haar_pays(n: int) -> bool:
    """Whether Haar's expected all-range error on n cells (padded to 2^l) is below
    Identity's (see the module docstring). Data-independent. Computed exactly up to 1,024
    cells; above, True without computing (the variance ratio falls with n: 0.60 at 1,024,
    0.25 at 4,096 — checked by a test)."""
    if n > 1024:
        return True
    m = 1 << _levels(n)
    inverse = haar_inverse(np.eye(m), 0)[:n]  # cells from unit coefficients
    haar = (1 + _levels(n)) ** 2 * float(np.sum(inverse * _gram_times(inverse)))
    identity = float(np.sum((np.arange(n) + 1.0) * (n - np.arange(n))))
    return haar < identity


def privelet_options(shape: tuple[int, ...], nominal: object = None, transform: object = "auto"
                     ) -> dict[int, list[np.ndarray]]:
    """The nominal axes' validated hierarchies ({axis: parent arrays}), after checking
    ``transform`` and ``nominal`` against the shape (no data, no noise).

    Raises
    ------
    DomainError
        ``transform`` not "auto" or "haar", ``nominal`` not a mapping of axes 0 … d − 1 to
        hierarchies, or a hierarchy that does not fit its axis."""
    if transform not in ("auto", "haar"):
        raise DomainError(f"transform must be 'auto' or 'haar'; got {transform!r}")
    if not isinstance(nominal, Mapping | None) or any(
            isinstance(a, bool) or not isinstance(a, int | np.integer) or not 0 <= a < len(shape)
            for a in nominal or {}):
        raise DomainError(f"nominal must map axes in 0 … {len(shape) - 1} to hierarchies; "
                          f"got {nominal!r}")
    return {a: _hierarchy(h, shape[a]) for a, h in (nominal or {}).items()}


def privelet(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
             nominal: dict[int, Sequence[Sequence[int]] | None] | None = None,
             transform: str = "auto") -> np.ndarray:
    """Privelet (wavelets): discrete Laplace on the integer Haar (ordinal axes) or nominal
    (axes in ``nominal``: {axis: hierarchy parent arrays, or None for flat}) coefficients,
    scale Π_j ρ_j/ε times each coefficient's weight, then the inverse transforms (Xiao,
    Wang & Gehrke ICDE 2010, §IV–V). ``transform="auto"`` leaves ordinal axes where Haar
    does not pay untransformed (Privelet+, TKDE 2011); "haar" transforms all. ε-DP. On held-out
    real data (bench/floor.py: 2-D MovieLens rater age × release year, ε = 1) its rectangle
    error was up to 1.1× Identity's (1-D: within 1.06×); in 2-D prefer HDMM ("mm").

    Robust in 1-D; not in 2-D and up (registered ``robust=False`` there): on DPBench's
    2,000 random rectangles over 256×256 its error was 1.26–1.74× Identity's per dataset
    (bench/results/auto.md; data-independent, so no scale switch helps: the per-axis rule
    decides whether Haar pays for 1-D ranges, and the product of two Haar transforms costs
    (1 + L)² in variance). ``method="auto"`` never picks it in 2-D."""
    hierarchies = privelet_options(x.shape, nominal, transform)
    haar_axes = {a for a, n in enumerate(x.shape) if a not in hierarchies and (
        transform == "haar" or haar_pays(n))}
    padded_shape = tuple(1 << _levels(n) if a in haar_axes else n
                         for a, n in enumerate(x.shape))
    coef = np.zeros(padded_shape, dtype=np.int64)
    coef[tuple(slice(0, n) for n in x.shape)] = clamp_cells(x)  # declared: sums < 2^62
    weights = np.ones((), dtype=np.int64)
    sensitivity = Fraction(1)
    for axis in range(x.ndim):
        if axis in hierarchies:
            coef, w = nominal_forward(coef, axis, hierarchies[axis])
            sensitivity *= nominal_sensitivity(hierarchies[axis])
        else:
            w = np.ones(padded_shape[axis], dtype=np.int64)
            if axis in haar_axes:
                coef = haar_forward(coef, axis)
                sensitivity *= 1 + _levels(x.shape[axis])
        weights = np.multiply.outer(weights, w)
    if weights.max() == 1:
        noisy = frontend.noisy(coef, sensitivity, epsilon).value.astype(np.float64)
    else:
        noisy = frontend.noisy(coef, sensitivity, epsilon, weights=weights).value.astype(
            np.float64)
    for axis in range(x.ndim):
        if axis in hierarchies:
            noisy = nominal_inverse(noisy, axis, hierarchies[axis])
        elif axis in haar_axes:
            noisy = haar_inverse(noisy, axis)
    return noisy[tuple(slice(0, n) for n in x.shape)]
