"""The reusable holdout: Thresholdout on dpkit's sparse vector.

Source: Dwork, Feldman, Hardt, Pitassi, Reingold & Roth, *The reusable holdout: Preserving
validity in adaptive data analysis*, Science 349 (2015) (Thresholdout, Fig. 2 and its
supplementary material); Dwork & Roth, *The Algorithmic Foundations of Differential Privacy*,
§3.6 (sparse vector) and §13.2 (generalisation from privacy).

An analyst asks statistical queries φ: row → [lo, hi] adaptively. For each, Thresholdout
compares the training mean E_t[φ] with the holdout mean E_h[φ]: when they are close (the
sparse vector says |E_h − E_t| is below T) it answers E_t[φ] (no holdout information beyond
the comparison); otherwise it answers E_h[φ] plus Laplace noise and spends one of its c
"over-threshold" answers. Only the holdout is protected; the training set is the analyst's.

Privacy (holdout rows, substitute-one neighbours; n = holdout size is public): the answer
|E_h[φ] − E_t[φ]| has sensitivity Δ = (hi − lo)/n. The comparisons are
:class:`dpkit.mechanisms.SparseVector` (threshold T, ε/2, c positives; Lyu, Su & Li 2017
Thm 2: (ε/2)-DP for any number of adaptively chosen queries until c positives), and each
over-threshold answer is the one calibrated-noise entry
(:func:`dpkit.mechanisms.make_noise`, grid Laplace at Δ and ε/(2c)); sequential composition
gives ε-DP in all, charged once when the holdout is opened. The generalisation guarantee
follows from privacy (Dwork et al. 2015, transfer theorem; Dwork & Roth §13.2): with a
holdout drawn i.i.d. from P, every answer is within τ of E_P[φ] with probability 1 − β
when T and the noise are Θ(τ) and n = Ω(√c · log(m/β) / τ²) for m queries (constants in
the paper's supplementary material; stated here up to constants).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.apps.accounting import charge, check_accountant
from dpkit.core import numbers, rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.core.record import NoiseRow
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.mechanisms import SparseVector, make_noise
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["ReusableHoldout", "HoldoutAnswer", "audit_cases"]

VALUE_STEPS = 1 << 20  # per-row values are cut to (hi − lo)/2^20 steps: exact sums
MAX_ROWS = 1 << 40  # n·2^20 stays below 2^63


class HoldoutAnswer(float):
    """A query's answer (a float) that also says where it came from: ``over`` is True when
    the holdout was used (training and holdout disagreed by more than the threshold)."""

    over: bool

    def __new__(cls, value: float, over: bool) -> HoldoutAnswer:
        obj = super().__new__(cls, value)
        obj.over = over
        return obj


def _rows(data: Any, name: str) -> int:
    try:
        n = len(data)
    except TypeError:
        raise DomainError(f"{name} must be a sized collection of rows (len() works)") from None
    if n < 1:
        raise DomainError(f"{name} is empty")
    return n


@register(audit=lambda: audit_cases())  # the audit battery's case(s)
class ReusableHoldout:
    """Thresholdout: adaptive statistical queries answered from a training set, checked
    against a holdout through the sparse vector.

    Parameters
    ----------
    train, holdout : sized data (NumPy arrays, tuples of arrays, data frames...)
        What the analyst's query functions read; each query ``f`` maps a data set to its
        per-row values, shape (rows,) or (rows, m) for m queries at once. Only the holdout
        is protected; its size n is public (substitute-one neighbours).
    epsilon : number
        Total ε (nats), charged once here: ε/2 to the comparisons, ε/(2c) to each
        over-threshold answer.
    threshold : number
        T, in the queries' units: |E_h − E_t| above T (plus the sparse vector's noise) uses
        the holdout.
    max_over : int
        c ≥ 1, the budget of over-threshold answers; the holdout refuses further queries
        once they are spent (:class:`BudgetExceededError`).
    bounds : (lo, hi)
        The declared range of every query's per-row value; values are clamped into it,
        NaN counts as lo, and each value is cut down to a multiple of (hi − lo)/2^20 above
        lo, so that means are exact (the data side never raises).
    accountant : Accountant, PrivacyFilter, Session or None
        Charged PureDP(ε) at construction, before the holdout is read.

    Attributes
    ----------
    loss : PureDP
        ε, whatever the number of queries.
    sensitivity : Fraction
        Δ = (hi − lo)/n, the sensitivity of a holdout mean.
    over_answers : int
        Over-threshold answers given so far.

    Raises
    ------
    DomainError
        ε ≤ 0, T < 0, c < 1, lo ≥ hi, an empty or unsized data set, a bad accountant —
        all before anything is debited.
    BudgetExceededError
        From the accountant if it cannot pay (nothing is read), or from :meth:`query` once
        c over-threshold answers were given.

    Notes
    -----
    Privacy map: ε-DP for the holdout (module docstring: Lyu et al. 2017 Thm 2 for the
    comparisons, the Laplace mechanism for the c answers, sequential composition).
    """

    def __init__(self, train: Any, holdout: Any, *, epsilon: Any, threshold: Any,
                 max_over: int = 100, bounds: tuple[Any, Any] = (0, 1),
                 accountant: Any = None) -> None:
        rng.require_secure()
        eps = numbers.positive(epsilon, "epsilon", up=False)
        c = numbers.integer(max_over, "max_over", minimum=1)
        t = numbers.to_fraction(threshold)
        if t < 0:
            raise DomainError("threshold must be ≥ 0")
        try:
            lo, hi = (numbers.to_fraction(b) for b in bounds)
        except (TypeError, ValueError):
            raise DomainError("bounds must be two finite numbers (lo, hi)") from None
        if not lo < hi:
            raise DomainError("bounds must have lo < hi")
        if max(_rows(train, "train"), _rows(holdout, "holdout")) > MAX_ROWS:
            raise DomainError(f"at most {MAX_ROWS} rows per set")
        n = _rows(holdout, "holdout")
        check_accountant(accountant)
        self.n, self.c = n, c
        self.bounds = (float(lo), float(hi))
        self._exact_bounds = (lo, hi - lo)
        self.sensitivity = (hi - lo) / n
        self.loss = PureDP(eps)
        self._answer = make_noise(self.sensitivity, epsilon=eps / (2 * c), output="grid")
        self.over_answers = 0
        self._train, self._holdout = train, holdout
        rows = (NoiseRow(self._answer.mechanism, self._answer.scale, self.sensitivity,
                         "over-threshold holdout mean"),)
        self._svt: SparseVector = charge(
            accountant, self.loss,
            f"reusable holdout: n={n}, T={float(t)}, c={c}, bounds={self.bounds}",
            lambda: SparseVector(t, eps / 2, self.sensitivity, max_positives=c), rows)

    @property
    def exhausted(self) -> bool:
        return self._svt.halted

    def _means(self, f: Callable[[Any], Any], data: Any, n: int) -> list[Fraction]:
        """Exact means of the per-row values: each value is clamped to [lo, hi] (NaN → lo)
        and cut down to the grid lo + (hi − lo)·j/2^20, so that the sums are exact integer
        sums and every mean is an exact Fraction (a substituted row moves it by ≤ Δ)."""
        values = np.asarray(f(data), dtype=np.float64)
        if values.ndim == 1:
            values = values[:, None]
        if values.ndim != 2 or values.shape[0] != n:
            raise DomainError(f"a query must return one value per row: shape ({n},) or "
                              f"({n}, m); got {values.shape}")
        lo, hi = self.bounds
        unit = np.nan_to_num((values - lo) / (hi - lo), nan=0.0, posinf=1.0, neginf=0.0)
        steps = np.floor(np.clip(unit, 0.0, 1.0) * VALUE_STEPS).astype(np.int64)
        sums = steps.sum(axis=0)  # ≤ n·2^20 < 2^63: exact
        lo_f, width = self._exact_bounds
        return [lo_f + width * int(t) / (n * VALUE_STEPS) for t in sums.tolist()]

    def query(self, f: Callable[[Any], Any]) -> list[HoldoutAnswer]:
        """Answer the statistical queries ``f`` (m of them), in order.

        Parameters
        ----------
        f : callable
            ``f(data)`` → per-row values, shape (rows,) or (rows, m), read on both sets.

        Returns
        -------
        list of HoldoutAnswer
            Up to m answers, in order: E_t[φ] when the comparison is below threshold, else
            E_h[φ] + Laplace noise (``over`` True). Shorter than m when the c-th
            over-threshold answer was given inside the batch (the rest is not answered).

        Raises
        ------
        DomainError
            A result of the wrong shape (checked on the training set first).
        BudgetExceededError
            When the c over-threshold answers were spent before this call.
        """
        if self.exhausted:
            raise BudgetExceededError("the reusable holdout has given its c over-threshold "
                                      "answers")
        train_means = self._means(f, self._train, _rows(self._train, "train"))
        holdout_means = self._means(f, self._holdout, self.n)
        if len(holdout_means) != len(train_means):
            raise DomainError("a query must return the same number of values on both sets")
        answers: list[HoldoutAnswer] = []
        for t_mean, h_mean in zip(train_means, holdout_means, strict=True):
            if not self._svt.ask(abs(h_mean - t_mean)):
                answers.append(HoldoutAnswer(float(t_mean), False))
                continue
            self.over_answers += 1
            noisy = float(np.asarray(self._answer(np.array([float(h_mean)])))[0])
            noisy = min(max(noisy, self.bounds[0]), self.bounds[1])  # post-processing
            answers.append(HoldoutAnswer(noisy, True))
            if self.exhausted:
                break  # the remaining queries of the batch are not answered
        return answers


def _first_answers(values: np.ndarray, train_mean: Fraction, epsilon: Fraction,
                   threshold: Fraction, sensitivity: Fraction, n: int) -> np.ndarray:
    """n independent runs of a fresh holdout's first answer on per-row ``values`` (clamped
    to [0, 1] already), vectorised: −1 for "below threshold" (the training mean is public),
    else the noisy holdout mean, as :class:`ReusableHoldout` (c = 1) computes them."""
    rng.require_secure()
    h_mean = Fraction(int(values.sum())) / values.size
    over = SparseVector(threshold, epsilon / 2, sensitivity).sample_first_answers(
        abs(h_mean - train_mean), n)
    noise = make_noise(sensitivity, epsilon=epsilon / 2, output="grid", size=n)
    noisy = np.asarray(noise(np.full(n, float(h_mean))), dtype=np.float64)
    return np.where(over, np.clip(noisy, 0.0, 1.0), -1.0)


def audit_cases() -> list[AuditCase]:
    """The reusable holdout's audit case: ε = 2, c = 1, a holdout of 8 rows in {0, 1}
    whose neighbour substitutes one row (the mean moves by Δ = 1/8), training mean 1/2 and
    T = 1/8 so that both branches occur; broken: Δ taken as 1/32 (the rows' range
    quartered, a quarter of the noise) while the claim stays ε = 2."""
    eps, n = Fraction(2), 8
    t_mean, threshold = Fraction(1, 2), Fraction(1, 8)
    x = np.array([1, 1, 1, 1, 1, 1, 0, 0])  # mean 3/4
    x_prime = np.array([1, 1, 1, 1, 1, 0, 0, 0])  # mean 5/8

    def sampler(sensitivity: Fraction) -> Sampler:
        return lambda data, size: _first_answers(np.asarray(data), t_mean, eps, threshold,
                                                 sensitivity, size)

    claim = Measurement(lambda data: sampler(Fraction(1, n))(data, 1), HammingDistance(),
                        PureDP, lambda d: PureDP(eps * d), "reusable_holdout",
                        input_domain=VectorDomain(AtomDomain(Kind.FLOAT)))
    return [AuditCase("reusable_holdout", claim, sampler(Fraction(1, n)),
                      sampler(Fraction(1, 4 * n)), x, x_prime)]
