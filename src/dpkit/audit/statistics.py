"""Empirical privacy tests of a mechanism on one pair of neighbouring inputs.

Both tests see a mechanism only through samples of its outputs on x and x′ (black box).

- :func:`histogram_test` — the neighbouring-pair histogram test (as in Google's DP stochastic
  tester): estimate δ̂(ε) = Σ_b max(0, P̂_x(b) − e^ε P̂_x′(b)) (both directions) over output
  bins and flag a violation when it exceeds δ by more than the sampling error allows. Each
  vote's error bound holds with probability 1 − 2β by the Bretagnolle–Huber–Carol L1
  inequality, P(‖P̂ − P‖₁ ≥ t) ≤ 2^m e^{−nt²/2}, for a partition into m cells fixed in
  advance (chosen from separate pilot samples), and δ̂ is 1-Lipschitz in P̂_x and
  e^ε-Lipschitz in P̂_x′ in L1; the verdict is the majority of 9 independent votes.
- :func:`epsilon_lower_bound` — a DP-Sniper-style threshold attack (Bichsel et al. 2021): on
  one half of the samples choose the output event S with the largest likelihood ratio, on the
  other half bound P_x(S) from below and P_x′(S) from above with Clopper–Pearson intervals;
  then ε ≥ ln((P_x(S) − δ)/P_x′(S)) with the stated confidence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from dpkit.errors import DomainError

__all__ = ["histogram_test", "epsilon_lower_bound", "HistogramVerdict", "LowerBound"]

Sampler = Callable[[Any, int], np.ndarray]


@dataclass(frozen=True)
class HistogramVerdict:
    """Outcome of :func:`histogram_test`: ``passed`` is the majority verdict of the votes."""

    passed: bool
    votes_failed: int
    votes: int
    worst_excess: float  # max over votes of δ̂ − δ − tolerance (≤ 0 when a vote passes)
    samples: int  # outputs drawn in all, both inputs


@dataclass(frozen=True)
class LowerBound:
    """Outcome of :func:`epsilon_lower_bound`."""

    epsilon: float
    confidence: float
    samples: int  # outputs drawn in all, both inputs
    event: str


def _partition(a: np.ndarray, b: np.ndarray, max_bins: int) -> tuple[np.ndarray, str]:
    """A partition of the real line chosen from pilot samples only: the distinct values if
    there are few (each its own cell; unseen values join the next larger one), else
    pooled-quantile edges. Estimates then use fresh samples, so the partition is fixed."""
    pooled = np.concatenate([a, b])
    values = np.unique(pooled)
    if values.size <= max_bins:
        return values, "left"
    return np.unique(np.quantile(pooled, np.linspace(0, 1, max_bins + 1)[1:-1])), "right"


def _cells(partition: tuple[np.ndarray, str], x: np.ndarray) -> np.ndarray:
    edges, side = partition
    return np.searchsorted(edges, x, side=side)  # type: ignore[call-overload]


def _as_samples(out: Any) -> np.ndarray:
    arr = np.asarray(out)
    if arr.dtype.kind not in "iufb":
        _, codes = np.unique(arr.astype(str), return_inverse=True)
        return codes.astype(np.float64)
    return arr.astype(np.float64).reshape(-1)


def histogram_test(sample: Sampler, x: object, x_prime: object, epsilon: float, delta: float = 0.0,
                   *, samples: int = 100_000, votes: int = 9, beta: float = 1e-3,
                   max_bins: int = 32) -> HistogramVerdict:
    """Test (ε, δ)-DP of a mechanism on neighbours x, x′ by the histogram test.

    Parameters
    ----------
    sample : callable
        ``sample(data, n)`` returns n independent outputs of the mechanism on ``data``.
    epsilon, delta : float
        The claimed guarantee.
    samples : int
        Outputs per input per vote.
    votes : int
        Independent repetitions; the verdict is their majority.
    beta : float
        Per-vote failure probability of each L1 bound: a correct mechanism fails a vote with
        probability ≤ 2β, and fails the majority with probability ≤ P(Bin(votes, 2β) > votes/2)
        (≈ 4e-12 at the defaults).
    """
    if epsilon < 0 or not 0 <= delta < 1 or samples < 100 or votes < 1:
        raise DomainError("need ε ≥ 0, δ ∈ [0, 1), samples ≥ 100 and votes ≥ 1")
    failed, worst = 0, -math.inf
    pilot = min(samples, 20_000)
    partition = _partition(_as_samples(sample(x, pilot)), _as_samples(sample(x_prime, pilot)),
                           max_bins)
    m = partition[0].size + 1
    for _ in range(votes):
        a, b = _as_samples(sample(x, samples)), _as_samples(sample(x_prime, samples))
        ia, ib = _cells(partition, a), _cells(partition, b)
        pa = np.bincount(ia, minlength=m) / a.size
        pb = np.bincount(ib, minlength=m) / b.size
        t = math.sqrt(2 * (m * math.log(2) + math.log(1 / beta)) / samples)
        tolerance = (1 + math.exp(epsilon)) * t
        excess = max(np.maximum(0, pa - math.exp(epsilon) * pb).sum(),
                     np.maximum(0, pb - math.exp(epsilon) * pa).sum()) - delta - tolerance
        worst = max(worst, float(excess))
        failed += excess > 0
    return HistogramVerdict(failed <= votes // 2, failed, votes, worst,
                            2 * (samples * votes + pilot))  # all draws, both inputs


def _clopper_pearson(k: int, n: int, tail: float) -> tuple[float, float]:
    low = 0.0 if k == 0 else float(stats.beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.isf(tail, k + 1, n - k))
    return low, high


def epsilon_lower_bound(sample: Sampler, x: object, x_prime: object, *, delta: float = 0.0,
                        samples: int = 200_000, confidence: float = 0.95,
                        max_bins: int = 64) -> LowerBound:
    """A lower bound on the ε of a mechanism, valid with probability ≥ ``confidence``.

    The event is chosen on the first half of the samples (a threshold on the empirical
    likelihood ratio over output bins, in either direction) and certified on the second half
    with one-sided Clopper–Pearson bounds at level (1 − confidence)/2 each.
    """
    if samples < 200 or not 0 < confidence < 1:
        raise DomainError("need samples ≥ 200 and confidence in (0, 1)")
    half = samples // 2
    a, b = _as_samples(sample(x, samples)), _as_samples(sample(x_prime, samples))
    partition = _partition(a[:half], b[:half], max_bins)  # from the first half only
    ia, ib = _cells(partition, a), _cells(partition, b)
    m = partition[0].size + 1
    tail = (1 - confidence) / 2  # each one-sided bound at (1 + confidence)/2
    # choose one event on the first half: direction and number of top-ratio bins that
    # maximise the first half's own Clopper–Pearson bound
    choice, choice_score = None, -math.inf
    for first, second, name in ((ia, ib, "x over x′"), (ib, ia, "x′ over x")):
        pa = np.bincount(first[:half], minlength=m)
        pb = np.bincount(second[:half], minlength=m)
        order = np.argsort(-((pa + 0.5) / (pb + 0.5)))
        ca, cb = pa[order].cumsum(), pb[order].cumsum()
        for size in range(1, m):
            low_a, _ = _clopper_pearson(int(ca[size - 1]), half, tail)
            _, high_b = _clopper_pearson(int(cb[size - 1]), half, tail)
            if low_a - delta > 0 and high_b > 0:
                score = math.log((low_a - delta) / high_b)
                if score > choice_score:
                    choice, choice_score = (first, second, order[:size], name), score
    if choice is None:
        return LowerBound(0.0, confidence, 2 * samples, "none")
    # certify that single event on the second half
    first, second, event, name = choice
    n2 = first.size - half
    k_a = int(np.isin(first[half:], event).sum())
    k_b = int(np.isin(second[half:], event).sum())
    low_a, _ = _clopper_pearson(k_a, n2, tail)
    _, high_b = _clopper_pearson(k_b, n2, tail)
    eps = math.log((low_a - delta) / high_b) if low_a - delta > 0 and high_b > 0 else 0.0
    return LowerBound(max(0.0, eps), confidence, 2 * samples, f"{event.size} bins, {name}")
