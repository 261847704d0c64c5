"""Sparse vector: AboveThreshold and its numeric variant, interactive and exact.

Sources: Dwork & Roth Alg. 1 (AboveThreshold) and Alg. 2 (Sparse / NumericSparse); the
corrected, general form of Lyu, Su & Li 2017 (*Understanding the Sparse Vector Technique*,
Alg. 1 and Thm 2): with threshold noise Lap(Δ/ε₁) and query noise Lap(2cΔ/ε₂), answering
until c queries come out above the threshold is (ε₁ + ε₂)-DP for adaptively chosen queries of
sensitivity Δ; releasing each positive answer's value with fresh Lap(cΔ/ε₃) noise adds ε₃.

Exactness: answers are rounded to a grid of width 2^k (k = ⌊log₂ Δ⌋ − 30) and all noise is
discrete Laplace in grid units; the rounding adds one grid step to the sensitivity. The
proof's shifts (by Δ for the threshold, 2Δ for the queries) are whole grid steps, so the
discrete noise's pmf ratio bounds carry over unchanged.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpkit.core import numbers, rng, samplers
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind
from dpkit.core.measures import PureDP
from dpkit.core.metrics import LInfDistance
from dpkit.core.numbers import Number, positive
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms._common import representable_scale
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["SparseVector"]


def _audit() -> list[AuditCase]:
    """AboveThreshold's first answer (threshold 0, ε = 4 for Δ = 1) on the answers 0.0 and
    1.0; broken: noise for ε = 400 while the claim stays 4."""
    def sampler(epsilon: Fraction) -> Sampler:
        return lambda answer, n: SparseVector(0, epsilon).sample_first_answers(answer, n)

    # the claim: one comparison of an answer of sensitivity d_in costs 4·d_in
    claim = Measurement(lambda a: SparseVector(0, 4).sample_first_answers(a, 1),
                        LInfDistance(), PureDP, lambda d: PureDP(4 * Fraction(d)),
                        "sparse_vector", input_domain=AtomDomain(Kind.FLOAT))
    return [AuditCase("sparse_vector", claim, sampler(Fraction(4)), sampler(Fraction(400)),
                      0.0, 1.0)]


@register(audit=_audit)
class SparseVector:
    """Interactive AboveThreshold / NumericSparse over adaptively chosen queries.

    Parameters
    ----------
    threshold : number
        The public threshold T.
    epsilon : number
        ε (nats) for the comparisons, split evenly into ε₁ (threshold) and ε₂ (queries).
    sensitivity : number
        Δ, the most any one query's exact answer changes between neighbours.
    max_positives : int
        c: the mechanism halts after c answers above the threshold.
    numeric_epsilon : number, optional
        ε₃: if given, a positive answer returns the query's value plus Lap(cΔ/ε₃) noise
        instead of ``True``.
    integer : bool
        Integer answers, threshold and Δ: noise on ℤ with no grid rounding (answers that
        are not integers raise).

    Attributes
    ----------
    loss : PureDP
        ε₁ + ε₂ (+ ε₃): the total loss, whatever queries are asked (Lyu et al. 2017, Thm 2).

    Raises
    ------
    DomainError
        For ε ≤ 0, Δ ≤ 0 or c < 1; :class:`BudgetExceededError` when asked after halting.
    """

    def __init__(self, threshold: Number, epsilon: Number, sensitivity: Number = 1,
                 max_positives: int = 1, numeric_epsilon: Number | None = None, *,
                 integer: bool = False) -> None:
        rng.require_secure()
        max_positives = numbers.integer(max_positives, "max_positives", minimum=1)
        eps = positive(epsilon, "epsilon", up=False)
        sens = positive(sensitivity, "sensitivity")
        self.c = max_positives
        self.integer = integer
        exact_threshold = numbers.to_fraction(threshold)
        if integer:  # integer answers and Δ: the grid is ℤ and nothing is rounded
            if sens.denominator != 1 or exact_threshold.denominator != 1:
                raise DomainError("integer=True needs an integer sensitivity and threshold")
            self.k, steps = 0, int(sens)
        else:
            self.k = samplers.grid_exponent(sens)
            grid = Fraction(2) ** self.k
            steps = math.ceil(sens / grid) + 1  # Δ in grid steps, plus the rounding
        self._threshold = round(exact_threshold / Fraction(2) ** self.k)  # exact, unclamped
        eps1 = eps2 = eps / 2
        self._query_scale = representable_scale(2 * self.c * steps / eps2)
        self._numeric_scale = None
        loss = eps
        if numeric_epsilon is not None:
            eps3 = positive(numeric_epsilon, "numeric_epsilon", up=False)
            self._numeric_scale = representable_scale(self.c * steps / eps3)
            loss += eps3
        self.loss = PureDP(loss)
        self._threshold_scale = representable_scale(steps / eps1)
        self._noisy_threshold = self._threshold + int(
            samplers.discrete_laplace(self._threshold_scale, 1)[0])
        self.positives = 0

    @property
    def halted(self) -> bool:
        return self.positives >= self.c

    def ask(self, answer: Number) -> bool | float:
        """Compare one exact query answer (sensitivity ≤ Δ) with the noisy threshold.

        Returns ``False`` below the threshold, otherwise ``True`` (or the noisy value in the
        numeric variant). Raises :class:`BudgetExceededError` once c positives were given.
        """
        rng.require_secure()
        if self.halted:
            raise BudgetExceededError("the sparse vector has answered its c positive queries")
        z = self._grid_value(answer)
        noisy = z + int(samplers.discrete_laplace(self._query_scale, 1)[0])
        if noisy < self._noisy_threshold:
            return False
        self.positives += 1
        if self._numeric_scale is None:
            return True
        released = z + int(samplers.discrete_laplace(self._numeric_scale, 1)[0])
        return samplers.grid_float(released, self.k)

    def _grid_value(self, answer: Number) -> int:
        """The answer on the grid, exactly and unclamped (a Python int; ±inf is read as
        ±the largest float, NaN and booleans raise)."""
        if isinstance(answer, float | np.floating) and math.isnan(answer):
            raise DomainError("a query answer is NaN")
        if not self.integer:
            return samplers.grid_int(answer, self.k)
        exact = numbers.to_fraction(answer)
        if exact.denominator != 1:
            raise DomainError("integer=True: query answers must be finite integers")
        return int(exact)

    def sample_first_answers(self, answer: Number, n: int) -> np.ndarray:
        """n independent runs of a fresh instance's first comparison on ``answer`` (with
        this instance's threshold and noise scales), vectorised: for audits."""
        rng.require_secure()
        gap = self._threshold - self._grid_value(answer)  # noises differ by far less than 2^62
        gap = max(min(gap, 1 << 62), -(1 << 62))
        return (samplers.discrete_laplace(self._query_scale, n)
                - samplers.discrete_laplace(self._threshold_scale, n) >= gap)
