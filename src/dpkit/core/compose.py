"""Composition, privacy filters and calibration.

- :func:`make_sequential_composition` — run several measurements on the same input; the loss
  is the sum of their losses (basic composition: Dwork & Roth Thm 3.16 for (ε, δ);
  Bun & Steinke 2016 Lemma 2.3 for zCDP).
- :class:`PrivacyFilter` — a budget cap for adaptively chosen measurements: each is checked
  against what remains *before* it runs, and refused if it would exceed the cap
  (Rogers, Roth, Ullman & Vadhan 2016, privacy filters; with basic composition the filter
  is valid for adaptive choices).
- :class:`PrivacyOdometer` — reports what adaptively chosen measurements have spent.
- :func:`calibrate_scale` — the smallest noise scale whose privacy map meets a target loss,
  by bisection on the map itself (derived, never hand-written per mechanism).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from dpkit.core import rng
from dpkit.core.component import Measurement
from dpkit.core.measures import PrivacyLoss, convert
from dpkit.core.numbers import Number, to_fraction
from dpkit.errors import BudgetExceededError, DomainError, MeasureError

__all__ = [
    "compose_losses",
    "make_sequential_composition",
    "PrivacyFilter",
    "PrivacyOdometer",
    "calibrate_scale",
]


def compose_losses(losses: Sequence[PrivacyLoss], zero: PrivacyLoss) -> PrivacyLoss:
    """Sum privacy losses by basic sequential composition, starting from ``zero``."""
    total = zero
    for loss in losses:
        total = total + loss
    return total


def make_sequential_composition(measurements: Sequence[Measurement]) -> Measurement:
    """One measurement that runs each of ``measurements`` on the same input.

    Privacy map: d_in ↦ Σᵢ Mᵢ.privacy_map(d_in) (basic composition). All measurements must
    share an input metric and a measure.
    """
    if not measurements:
        raise DomainError("nothing to compose")
    first = measurements[0]
    for m in measurements[1:]:
        if m.input_metric != first.input_metric or m.output_measure is not first.output_measure:
            raise MeasureError("composed measurements must share input metric and measure")
    measure: type[PrivacyLoss] = first.output_measure
    return Measurement(
        function=lambda x: [m.function(x) for m in measurements],
        input_metric=first.input_metric,
        output_measure=measure,
        privacy_map=lambda d: compose_losses([m.privacy_map(d) for m in measurements],
                                             measure.zero()),
        name="compose(" + ", ".join(m.name for m in measurements) + ")",
    )


class PrivacyFilter:
    """A budget cap over adaptively chosen measurements.

    Parameters
    ----------
    budget : PrivacyLoss
        The cap, in its measure (``PureDP``, ``ApproxDP`` or ``ZCDP``).
    """

    def __init__(self, budget: PrivacyLoss) -> None:
        self.budget = budget
        self.spent: PrivacyLoss = type(budget).zero()

    @property
    def remaining(self) -> PrivacyLoss:
        """The budget minus what has been spent (exact)."""
        return self.budget - self.spent

    def would_exceed(self, loss: PrivacyLoss) -> bool:
        return not (self.spent + loss) <= self.budget

    def spend(self, loss: PrivacyLoss) -> None:
        """Debit ``loss``; raises :class:`BudgetExceededError` (and debits nothing) on overrun."""
        if self.would_exceed(loss):
            raise BudgetExceededError(
                f"spending {loss} would exceed the budget ({self.budget}); "
                f"remaining: {self.remaining}; nothing was run or debited"
            )
        self.spent = self.spent + loss

    def invoke(self, measurement: Measurement, data: object, d_in: Number = 1) -> Any:
        """Check and debit ``measurement``'s loss at ``d_in``, then run it on ``data``.
        Refuses the test stream before debiting (:func:`dpkit.core.rng.require_secure`)."""
        rng.require_secure()
        self.spend(measurement.privacy_map(d_in))
        return measurement(data)


class PrivacyOdometer:
    """Tracks the privacy loss of adaptively chosen measurements, without a cap.

    ``spent`` is the basic composition of every loss so far (valid under adaptive choice
    for pure DP and zCDP: Rogers, Roth, Ullman & Vadhan 2016; Whitehouse et al. 2023 for
    (ε, δ) with fixed δ per step under basic composition).

    Parameters
    ----------
    measure : type
        ``PureDP``, ``ApproxDP`` or ``ZCDP``; losses of other measures are converted where a
        conversion needs no parameter (pure ⇒ zCDP, pure ⇒ (ε, 0)).
    """

    def __init__(self, measure: type[PrivacyLoss]) -> None:
        self.measure = measure
        self.spent: PrivacyLoss = measure.zero()
        self.history: list[PrivacyLoss] = []

    def invoke(self, measurement: Measurement, data: object, d_in: Number = 1) -> Any:
        """Record ``measurement``'s loss at ``d_in`` (before any noise), then run it.
        Refuses the test stream before recording (:func:`dpkit.core.rng.require_secure`)."""
        rng.require_secure()
        loss = convert(measurement.privacy_map(d_in), self.measure)
        self.spent = self.spent + loss
        self.history.append(loss)
        return measurement(data)


def calibrate_scale(
    make: Callable[[Fraction], Measurement],
    d_in: Number,
    d_out: PrivacyLoss,
    *,
    start: Fraction = Fraction(1),
    steps: int = 80,
) -> Fraction:
    """Smallest scale (to bisection precision) with ``make(scale).check(d_in, d_out)``.

    The privacy map must be non-increasing in the scale. The returned scale always passes the
    check (the search keeps the passing end of the bracket). If ``start`` passes and a scale
    2^-30 smaller does not, ``start`` itself is returned, so closed-form guesses stay exact.
    """
    hi = to_fraction(start)
    if make(hi).check(d_in, d_out) and not make(hi * (1 - Fraction(1, 2**30))).check(d_in, d_out):
        return hi  # the caller's guess is already tight (e.g. a closed form): keep it exact
    while not make(hi).check(d_in, d_out):
        hi *= 2
        if hi > Fraction(2) ** 200:
            raise DomainError(f"no scale meets {d_out} at d_in = {d_in}")
    lo = hi / 2
    while make(lo).check(d_in, d_out) and lo > Fraction(1, 2**200):
        hi, lo = lo, lo / 2
    for _ in range(steps):
        mid = (lo + hi) / 2
        mid = Fraction(mid).limit_denominator(1 << 40)
        if not lo < mid < hi:
            break
        if make(mid).check(d_in, d_out):
            hi = mid
        else:
            lo = mid
    return hi
