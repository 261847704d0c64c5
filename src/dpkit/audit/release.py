"""Empirical audit of a whole release pipeline (a Session query, a server request) on one
pair of neighbouring tables.

:func:`~dpkit.audit.histogram_test` and :func:`~dpkit.audit.epsilon_lower_bound` draw their
own samples, many per test, which suits a mechanism that draws a vector of outputs at once.
A full release — plan, debit, contribution bounding, exact statistics, noise, assembly —
yields one output per call and costs milliseconds, so :func:`audit_release` draws one pool of
``samples`` outputs per table and serves both tests from it, each slice used once: a pilot
(the histogram test's partition of the output space), one histogram-test vote, and the rest
for the threshold attack (half to choose its event, half to certify it). The slices are
independent because every release draws fresh noise from the CSPRNG.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit.audit.statistics import (
    HistogramVerdict,
    LowerBound,
    epsilon_lower_bound,
    histogram_test,
)
from dpkit.errors import DomainError

__all__ = ["ReleaseAudit", "audit_release"]


@dataclass(frozen=True)
class ReleaseAudit:
    """Outcome of :func:`audit_release`.

    ``passed`` is True when the histogram test (if run) accepts the claim and the certified
    ε lower bound does not exceed it. A correct release fails with probability at most
    ``false_positive_rate``.
    """

    claimed_epsilon: float
    claimed_delta: float
    histogram: HistogramVerdict | None
    lower_bound: LowerBound
    samples: int  # releases per table
    seconds: float
    false_positive_rate: float

    @property
    def passed(self) -> bool:
        histogram_ok = self.histogram is None or self.histogram.passed
        return histogram_ok and self.lower_bound.epsilon <= self.claimed_epsilon


class _Pool:
    """Pre-drawn outputs served in order, each at most once (a sampler for the tests)."""

    def __init__(self, outputs: dict[str, np.ndarray]) -> None:
        self._outputs = outputs
        self._used = dict.fromkeys(outputs, 0)

    def __call__(self, key: str, n: int) -> np.ndarray:
        start = self._used[key]
        if start + n > self._outputs[key].size:
            raise DomainError(f"the pool holds {self._outputs[key].size} outputs; "
                              f"{start + n} were asked for")
        self._used[key] = start + n
        return self._outputs[key][start:start + n]


def audit_release(release: Callable[[Any], Any], x: object, x_prime: object, epsilon: float,
                  delta: float = 0.0, *, samples: int = 2000, histogram_share: float = 0.25,
                  false_positive_rate: float = 1e-6, max_bins: int = 16) -> ReleaseAudit:
    """Audit ``release`` on neighbouring tables ``x`` and ``x_prime`` against an (ε, δ)
    claim.

    Parameters
    ----------
    release : callable
        ``release(table)`` runs the whole release on ``table`` (``x`` or ``x_prime``) and
        returns one number (a scalar post-processing of the result, e.g. a noisy count).
        It is called ``samples`` times per table.
    x, x_prime : any
        Neighbouring tables (whatever ``release`` takes).
    epsilon, delta : float
        The release's claimed guarantee.
    samples : int
        Releases per table (at least 200).
    histogram_share : float
        Fraction of each pool for the histogram test (half pilot, half its one vote; each
        half at least 100 outputs), or 0 to skip it (it needs large pools to have power);
        the rest goes to the ε lower bound (at least 200 outputs).
    false_positive_rate : float
        Probability that a correct release fails the audit, split evenly between the two
        tests: the histogram test's single vote runs at β = rate/4 (it fails with
        probability ≤ 2β), the lower bound at confidence 1 − rate/2 (Clopper–Pearson);
        without the histogram test, the lower bound runs at confidence 1 − rate.
    max_bins : int
        Cells of the output partitions of both tests (with small pools, fewer cells make
        the lower bound tighter: the event chosen on one half overfits less).

    Returns
    -------
    ReleaseAudit

    Raises
    ------
    DomainError
        For ε < 0, δ ∉ [0, 1), a false-positive rate outside (0, 1), or pools too small for
        both tests.
    """
    if epsilon < 0 or not 0 <= delta < 1 or not 0 < false_positive_rate < 1:
        raise DomainError("need ε ≥ 0, δ ∈ [0, 1) and a false-positive rate in (0, 1)")
    if not 0 <= histogram_share < 1:
        raise DomainError("histogram_share must be in [0, 1)")
    per_vote = int(samples * histogram_share / 2)
    rest = samples - 2 * per_vote
    if (histogram_share and per_vote < 100) or rest < 200:
        raise DomainError(f"{samples} samples leave {per_vote} per histogram slice (need "
                          f"≥ 100) and {rest} for the lower bound (need ≥ 200)")
    start = time.perf_counter()
    pool = _Pool({"x": _draw(release, x, samples), "x'": _draw(release, x_prime, samples)})
    verdict, rate = None, false_positive_rate
    if histogram_share:
        verdict = histogram_test(pool, "x", "x'", epsilon, delta, samples=per_vote, votes=1,
                                 beta=false_positive_rate / 4, max_bins=max_bins)
        rate = false_positive_rate / 2
    bound = epsilon_lower_bound(pool, "x", "x'", delta=delta, samples=rest,
                                confidence=1 - rate, max_bins=max_bins)
    return ReleaseAudit(epsilon, delta, verdict, bound, samples,
                        time.perf_counter() - start, false_positive_rate)


def _draw(release: Callable[[Any], Any], table: Any, n: int) -> np.ndarray:
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        value = float(release(table))
        if not math.isfinite(value):
            raise DomainError(f"release returned {value!r}; the audit needs finite numbers")
        out[i] = value
    return out
