"""Running 1-D histogram algorithms on 2-D data along a Hilbert curve, as DPBench does for
DAWA and the other 1-D partitioning methods (Hay et al. SIGMOD 2016, §5.1; Li et al. 2014
§6): cells that are close on the curve are close in the plane, so 1-D partitions become
compact 2-D regions.

Privacy: reordering the cells is a bijection, so the L1 distance between neighbouring
histograms is unchanged and the 1-D algorithm's ε-DP guarantee carries over; mapping back is
post-processing.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np

from dpkit.errors import DomainError
from dpkit.release.ranges.partition import dawa, dawa_options
from dpkit.release.ranges.switch import Algorithm, scale_switched
from dpkit.release.workload import RangeWorkload

__all__ = ["hilbert_order", "on_hilbert_curve", "check_square"]

# Signal N̂·ε/cells at and above which DAWA-2D hands over to Identity
# (dpkit.release.ranges.switch): a decade below signal 1.5, the smallest at which it lost to
# Identity by more than 1.1× (switch off: up to 3.6× at signal 153) on the DPBench 2-D and
# synthetic shapes; checked by leaving each dataset out (bench/results/auto.md).
SWITCH_DAWA_2D = 0.15


def check_square(shape: tuple[int, ...], **_: object) -> None:
    """Refuse a shape the Hilbert curve does not cover: not 2-D, not square, or a side that
    is not a power of two (a public fact, checked before any noise).

    Raises
    ------
    DomainError
        For such a shape."""
    if len(shape) != 2 or shape[0] != shape[1]:
        raise DomainError(f"the Hilbert curve needs a square 2-D histogram; got {shape}")
    if shape[0] < 1 or shape[0] & (shape[0] - 1):
        raise DomainError(f"the Hilbert curve needs a power-of-two side; got {shape[0]}")


def hilbert_order(side: int) -> np.ndarray:
    """Row-major cell indices of a side×side grid (side a power of two) in Hilbert-curve
    order: ``x.ravel()[hilbert_order(side)]`` walks the curve (the classic d → (x, y)
    conversion, vectorised over d)."""
    check_square((side, side))
    d = np.arange(side * side, dtype=np.int64)
    x = np.zeros_like(d)
    y = np.zeros_like(d)
    t = d.copy()
    s = 1
    while s < side:
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        flip = ry == 0
        swap_x = np.where(flip & (rx == 1), s - 1 - x, x)
        swap_y = np.where(flip & (rx == 1), s - 1 - y, y)
        x, y = np.where(flip, swap_y, swap_x), np.where(flip, swap_x, swap_y)
        x += s * rx
        y += s * ry
        t //= 4
        s *= 2
    return x * side + y


def on_hilbert_curve(method: Algorithm | str, x: np.ndarray, epsilon: Fraction,
                     workload: RangeWorkload | None = None, **options: object) -> np.ndarray:
    """Run the 1-D algorithm ``method`` on a square power-of-two 2-D histogram flattened
    along the Hilbert curve, and fold the estimate back (the workload is not passed on:
    2-D ranges are not ranges on the curve). ε-DP as the 1-D algorithm (module docstring).

    Parameters
    ----------
    method : callable
        A 1-D histogram algorithm (e.g. :func:`~dpkit.release.ranges.partition.dawa`). A
        registered name is deprecated (it looks the function up in
        :mod:`~dpkit.release.ranges.registry`).
    x : ndarray of int64, shape (2^k, 2^k)
    epsilon : Fraction
        ε > 0, spent by the 1-D algorithm.
    workload : RangeWorkload, optional
        Ignored (see above).
    **options
        Passed to the 1-D algorithm.

    Raises
    ------
    DomainError
        A histogram that is not square.
    """
    if isinstance(method, str):
        warnings.warn("on_hilbert_curve(name, …) is deprecated; pass the 1-D algorithm",
                      DeprecationWarning, stacklevel=2)
        from dpkit.release.ranges.registry import method as registered  # deprecated path

        method = registered(method, 1).function
    check_square(x.shape)
    order = hilbert_order(x.shape[0])
    flat = x.ravel()[order]
    est = method(flat, epsilon, None, **options)
    out = np.empty(x.size, dtype=np.float64)
    out[order] = est
    return out.reshape(x.shape)


@scale_switched(SWITCH_DAWA_2D, dawa_options, dims=(2,), check_shape=check_square)
def dawa_2d(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None,
            ratio: Fraction | float = Fraction(1, 4), strategy: str = "identity"
            ) -> np.ndarray:
    """DAWA on 2-D data along the Hilbert curve (Li et al. PVLDB 2014 §6; DPBench). ε-DP as
    the 1-D algorithm (the flattening is a bijection of cells). Stage 2 defaults to Identity
    on the buckets: rectangles are not ranges on the curve, and a tree over the curve's
    buckets measured 1.1–1.4× worse on DPBench's 2-D data (``strategy="tree"`` to use it). On
    held-out real data (bench/floor.py: MovieLens rater age × release year, 64×64, ε ∈ {0.1, 1})
    its rectangle error was up to 1.2× Identity's; prefer HDMM ("mm") on 2-D counts this large.

    Scale switch (default on, :mod:`dpkit.release.ranges.switch`; options ``switch``,
    ``scale``, ``scale_fraction``): with N̂·ε'/cells ≥ ``switch`` (default
    :data:`SWITCH_DAWA_2D`, 0.15) Identity runs at ε' instead; ``ratio`` and ``strategy``
    are checked first, on either branch."""
    # switch=None: this wrapper's own switch has run
    return on_hilbert_curve(dawa, x, epsilon, None, ratio=ratio, strategy=strategy,
                            switch=None)
