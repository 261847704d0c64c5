"""Range counts by value on a released 1-D histogram (post-processing: free, reads no data).

A released histogram has public bin edges e₀ < … < e_m (cell i is [eᵢ, eᵢ₊₁), the last one
closed). A range [lo, hi) of values covers each cell by the fraction

    wᵢ = |[lo, hi) ∩ [eᵢ, eᵢ₊₁)| / (eᵢ₊₁ − eᵢ)

and the answer is Σ wᵢ·ĉᵢ, ĉ the released counts: a partial cell is **apportioned uniformly**
within the cell (the release says nothing about where in a cell its rows lie), so the answer
estimates the apportioned count Σ wᵢ·cᵢ, which equals the true count of [lo, hi) when lo and
hi are edges. The result's ``note`` says which cells were apportioned.

Interval: when each cell's noise is independent with a known scale s (``method="identity"``:
discrete Laplace, variance ≤ 2s²), the noise of Σ wᵢ·c̃ᵢ (c̃ the counts before
``non_negative`` / ``integer`` post-processing) has variance V = Σ wᵢ²·2s² and
|Σ wᵢZᵢ| ≤ Σ_{wᵢ>0} |Zᵢ|; the half-width is the smaller of Chebyshev's √(V/β) and the
tail of a sum of |Zᵢ| (:func:`dpkit.core.accuracy.laplace_abs_sum_tail`), each exceeded with
probability ≤ β, so their minimum is too. The interval is cut at 0 (a count is never
negative). Other algorithms correlate the cells' noise (trees, wavelets, partitions): no
interval is given (``low`` and ``high`` are None) and the note says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpkit.core.accuracy import laplace_abs_sum_tail
from dpkit.core.numbers import Number, fraction_down
from dpkit.errors import DomainError

__all__ = ["RangeCount", "cell_weights", "range_count"]


@dataclass(frozen=True)
class RangeCount:
    """The count of a value range from a released histogram.

    Attributes
    ----------
    value : float
        Σ wᵢ·ĉᵢ over the released (post-processed) counts, rows.
    low, high : float or None
        The interval at 1 − ``beta`` for the apportioned count, cut at 0 (None when the
        algorithm's per-cell noise is not independent with a known scale).
    variance : float or None
        The noise variance Σ wᵢ²·Var(Zᵢ) bound, rows² (None as for the interval).
    weights : ndarray of float64, shape (m,)
        wᵢ, each cell's covered fraction.
    note : str
        How the range was mapped to cells (exact, or which cells were apportioned).
    """

    value: float
    low: float | None
    high: float | None
    variance: float | None
    weights: np.ndarray
    note: str

    def __str__(self) -> str:
        shown = f"{self.value:,.1f}"
        if self.low is not None and self.high is not None:
            shown += f" in [{self.low:,.1f}, {self.high:,.1f}]"
        return f"{shown} ({self.note})"


def _number(x: Number, name: str) -> float:
    try:
        value = float(fraction_down(x))
    except (TypeError, ValueError, DomainError):
        raise DomainError(f"{name} must be a finite number, got {x!r}") from None
    return value


def cell_weights(edges: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """wᵢ = |[lo, hi) ∩ [eᵢ, eᵢ₊₁)| / (eᵢ₊₁ − eᵢ) for every cell (module docstring)."""
    left, right = edges[:-1], edges[1:]
    overlap = np.minimum(right, hi) - np.maximum(left, lo)
    return np.clip(overlap / (right - left), 0.0, 1.0)


def _note(weights: np.ndarray, edges: np.ndarray, lo: float, hi: float) -> str:
    partial = [i for i, w in enumerate(weights) if 0 < w < 1]
    clipped = lo < edges[0] or hi > edges[-1]
    parts = [f"cells {int(np.flatnonzero(weights)[0])}–{int(np.flatnonzero(weights)[-1])}"]
    if partial:
        parts.append("partial cells " + ", ".join(
            f"[{edges[i]:g}, {edges[i + 1]:g}) × {weights[i]:.3g}" for i in partial)
            + " apportioned uniformly within the cell")
    else:
        parts.append("whole cells: exact")
    if clipped:
        parts.append(f"values outside [{edges[0]:g}, {edges[-1]:g}] were not released "
                     "and count 0")
    return "; ".join(parts)


def range_count(counts: np.ndarray, raw: np.ndarray, edges: np.ndarray,
                cell_scale: float | None, lo: Number | None, hi: Number | None,
                beta: float = 0.05) -> RangeCount:
    """The count of values in [lo, hi) (None: the first / last edge) from released counts.

    Parameters
    ----------
    counts, raw : ndarray, shape (m,)
        The released counts after and before post-processing.
    edges : ndarray, shape (m + 1,)
        The public bin edges.
    cell_scale : float or None
        Each cell's independent discrete Laplace scale, rows (None: no interval).
    lo, hi : number or None
        The value range, lo < hi, overlapping [e₀, e_m].
    beta : float
        The interval's failure probability.

    Returns
    -------
    RangeCount

    Raises
    ------
    DomainError
        For a non-number, lo ≥ hi, a range outside the edges or β outside (0, 1): public
        arguments, checked before anything is computed.
    """
    if not 0 < beta < 1:
        raise DomainError("beta must be in (0, 1)")
    a = float(edges[0]) if lo is None else _number(lo, "lo")
    b = float(edges[-1]) if hi is None else _number(hi, "hi")
    if not a < b:
        raise DomainError(f"the range needs lo < hi, got [{a:g}, {b:g})")
    if b <= edges[0] or a >= edges[-1]:
        raise DomainError(f"[{a:g}, {b:g}) lies outside the bins [{edges[0]:g}, "
                          f"{edges[-1]:g}]")
    w = cell_weights(edges, a, b)
    value = float(w @ counts)
    if cell_scale is None:
        return RangeCount(value, None, None, None, w, _note(w, edges, a, b)
                          + "; no interval: the algorithm's cell noise is correlated "
                          "(release with method='identity' for one)")
    variance = float(np.sum(w * w)) * 2 * cell_scale ** 2
    touched = int(np.count_nonzero(w))
    half = min(math.sqrt(variance / beta), laplace_abs_sum_tail(cell_scale, touched, beta))
    centre = float(w @ raw)
    return RangeCount(value, max(centre - half, 0.0), max(centre + half, 0.0), variance, w,
                      _note(w, edges, a, b))
