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

Multi-D (ordinal attributes, their §V): the 1-D transform along every axis in turn; a record
changes one coefficient per combination of per-axis levels, so the L1 sensitivity is
Π_j (1 + l_j) and one scale Π_j (1 + l_j)/ε serves all coefficients.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit.release.histogram import register
from dpkit.release.measure import laplace_integer
from dpkit.release.workload import RangeWorkload

__all__ = ["privelet", "haar_forward", "haar_inverse"]


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


@register("privelet", dims=(1, 2, 3, 4))
def privelet(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None
             ) -> np.ndarray:
    """Privelet (Haar wavelet): discrete Laplace of scale Π_j(1 + log₂ m_j)/ε on the integer
    Haar coefficients, then the inverse transform (Xiao, Wang & Gehrke ICDE 2010). ε-DP."""
    padded_shape = tuple(1 << _levels(n) for n in x.shape)
    padded = np.zeros(padded_shape, dtype=np.int64)
    padded[tuple(slice(0, n) for n in x.shape)] = x
    coef = padded
    for axis in range(x.ndim):
        coef = haar_forward(coef, axis)
    sensitivity = Fraction(int(np.prod([1 + _levels(n) for n in x.shape])))
    noisy = laplace_integer(coef, sensitivity, epsilon).astype(np.float64)
    for axis in range(x.ndim):
        noisy = haar_inverse(noisy, axis)
    return noisy[tuple(slice(0, n) for n in x.shape)]
