"""The two baselines of DPBench (Hay et al. SIGMOD 2016): Identity and Uniform."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit.mechanisms import frontend
from dpkit.release.ranges.switch import TOTAL_CAP, exact_total
from dpkit.release.workload import RangeWorkload

__all__ = ["identity", "uniform"]


def identity(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None
             ) -> np.ndarray:
    """Identity: discrete Laplace noise of scale 1/ε on every cell (Dwork, McSherry, Nissim &
    Smith 2006). A record changes one cell by 1, so the cells' L1 sensitivity is 1 and the
    release is ε-DP. Expected squared error 2/ε² per cell; a range of r cells 2r/ε²."""
    return frontend.noisy(x, 1, epsilon).value.astype(np.float64)


def uniform(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None
            ) -> np.ndarray:
    """Uniform: a noisy total (discrete Laplace, scale 1/ε; sensitivity 1, so ε-DP) spread
    evenly over the cells (DPBench's baseline for data-independent shape). On held-out real data
    (bench/floor.py: bike-sharing days, ε = 1) its range error was about 10⁴× Identity's: it is
    the data-free baseline, not a release method; prefer Identity or "auto".

    Not robust (registered ``robust=False``): its bias does not shrink with the scale, so it
    loses to Identity by orders of magnitude at large scale·ε (bench/results/histograms.md);
    ``method="auto"`` picks it only in the signal decades where it won on every training
    dataset and their neighbours."""
    # the exact total, clamped at 2^62 (1-Lipschitz: sensitivity 1): no int64 wrap, any size
    total = frontend.noisy(min(exact_total(x), TOTAL_CAP), 1, epsilon).value
    return np.full(x.shape, total / x.size, dtype=np.float64)
