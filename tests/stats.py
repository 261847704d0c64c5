"""Statistical test helpers. Every test using them rejects a correct sampler with probability
at most FALSE_POSITIVE_RATE = 1e-6 (the p-value threshold), and is paired with a broken
variant whose p-value must fall below the same threshold."""

from __future__ import annotations

import numpy as np
from scipy import stats

FALSE_POSITIVE_RATE = 1e-6


def chi2_pvalue(samples: np.ndarray, support: np.ndarray, pmf: np.ndarray) -> float:
    """χ² goodness of fit of integer samples to a pmf on ``support`` (tails merged so every
    expected count is ≥ 5; mass outside the support forms its own cell)."""
    n = samples.size
    pmf = pmf / pmf.sum() * (1 - 1e-15)  # leave the outside cell a sliver; never negative
    observed = np.array([(samples == v).sum() for v in support], dtype=float)
    expected = pmf * n
    cells_o, cells_e, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(observed, expected, strict=True):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            cells_o.append(acc_o)
            cells_e.append(acc_e)
            acc_o = acc_e = 0.0
    cells_o[-1] += acc_o
    cells_e[-1] += acc_e
    outside = n - observed.sum()
    cells_o.append(outside)
    cells_e.append(max(n - expected.sum(), 1e-9))
    o, e = np.array(cells_o), np.array(cells_e)
    statistic = ((o - e) ** 2 / e).sum()
    return float(stats.chi2.sf(statistic, df=len(o) - 1))


def discrete_laplace_pmf(support: np.ndarray, scale: float) -> np.ndarray:
    return np.exp(-np.abs(support) / scale)


def discrete_gaussian_pmf(support: np.ndarray, sigma: float) -> np.ndarray:
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma**2))


def ks_pvalue(samples: np.ndarray, cdf: str, *args: float) -> float:
    return float(stats.kstest(samples, cdf, args=args).pvalue)
