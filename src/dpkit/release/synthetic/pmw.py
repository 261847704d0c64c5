"""Private multiplicative weights (PMW): online answers to linear queries (Hardt & Rothblum,
FOCS 2010; Dwork & Roth §4.2, "online multiplicative weights via sparse vector").

The curator keeps a public hypothesis A, a distribution over the (small) data domain scaled
to the noisy number of records. For each arriving counting query q (a 0/1 weight per
cell), the sparse vector technique compares the hypothesis's error |q(x) − q(A)| with a
threshold: below it, the answer q(A) is returned *for free* (it depends only on earlier
outputs); above it — at most c times — q(x) is measured with Laplace noise, returned, and
A takes a multiplicative-weights step towards it: A(z) ← A(z)·exp(±η·q(z)), renormalised,
with the sign of (measurement − q(A)) and η = α/(2ñ).

Privacy (pure ε-DP, add/remove neighbours, Δ = the records one privacy unit contributes):
``total_share``·ε for the noisy record count ñ (Laplace, sensitivity Δ); of the rest, half for
the sparse vector (AboveThreshold with c positives on queries of sensitivity Δ, Lyu, Su & Li
2017 Thm 2, :class:`~dpkit.mechanisms.sparse_vector.SparseVector`) and half for the c
measurements, each Laplace of scale cΔ/ε_meas. The hypothesis and the free answers are
post-processing. Total ε by sequential composition, however the queries are chosen.

Updates: with normalised error α/ñ, multiplicative weights stop needing updates after
T(α) = 4 ln|X|·ñ²/α² rounds whose measured error is above α/2 (Dwork & Roth Thm 4.10's
potential argument): c defaults to that, and a query after the c-th update raises
:class:`~dpkit.errors.BudgetExceededError` (nothing is released). The accuracy of each answer
is reported: a free answer is within the threshold plus the sparse vector's noise, a measured
one within its Laplace tail (:meth:`PrivateMultiplicativeWeights.accuracy`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpkit.core.accuracy import laplace_tail
from dpkit.core.numbers import Number, positive, to_fraction
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.sparse_vector import SparseVector
from dpkit.release.synthetic.domain import Domain, marginal_counts

__all__ = ["PMWAnswer", "PrivateMultiplicativeWeights"]


@dataclass(frozen=True)
class PMWAnswer:
    """One answer: the value, whether it was measured (True) or free, and its error bound
    at confidence 1 − β (see :meth:`PrivateMultiplicativeWeights.accuracy`)."""

    value: float
    measured: bool
    error_bound: float


class PrivateMultiplicativeWeights:
    """Online PMW over a dense domain of at most ``max_cells`` cells (module docstring).

    Parameters
    ----------
    codes : ndarray of int, shape (n, d)
        The records as codes of ``domain``.
    domain : Domain
    epsilon : number
        ε > 0 (nats) for the whole interaction.
    alpha : number
        Target error in records: the sparse vector's threshold is α/2 and η = α/(2ñ).
    max_updates : int, optional
        c, the number of measured answers. Default min(T(α), 100): T(α) = ⌈4 ln|X|·ñ²/α²⌉
        (``update_bound``) guarantees that no more are needed but is loose; each measured
        answer's noise grows with c.
    sensitivity : int
        Δ, records per privacy unit (default 1).
    total_share : number in (0, 1)
        Share of ε for the noisy record count (default 1/20).
    beta : float
        Failure probability of each reported error bound (default 0.05).

    Raises
    ------
    DomainError
        For a domain above ``max_cells``, ε ≤ 0, α ≤ 0, or a bad query.
    """

    @property
    def delta(self) -> Fraction:
        """Deprecated name of :attr:`sensitivity`, Δ of a query's answer in records
        (``delta`` is δ in dpkit)."""
        warnings.warn("PrivateMultiplicativeWeights.delta is deprecated: use .sensitivity "
                      "(delta is δ)", DeprecationWarning, stacklevel=2)
        return self.sensitivity

    @staticmethod
    def check(domain: Domain, epsilon: Number, alpha: Number, *,
              max_updates: int | None = None, sensitivity: int = 1,
              total_share: Number = Fraction(1, 20), beta: float = 0.05,
              max_cells: int = 1 << 22) -> None:
        """Everything the constructor refuses, checked without the records (a session runs
        it before the debit); parameters as the class's.

        Raises
        ------
        DomainError
            ε or α ≤ 0, a share outside (0, 1), a domain above ``max_cells``, a
            sensitivity or ``max_updates`` that is not a positive integer, β outside (0, 1).
        """
        positive(epsilon, "epsilon", up=False)
        positive(alpha, "alpha")
        if not 0 < to_fraction(total_share) < 1:
            raise DomainError("total_share must be in (0, 1)")
        for name, value in (("max_cells", max_cells), ("sensitivity", sensitivity),
                            ("max_updates", 1 if max_updates is None else max_updates)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
                raise DomainError(f"{name} must be a positive integer")
        if domain.size() > max_cells:
            raise DomainError(f"PMW keeps a dense hypothesis: the domain has {domain.size()} "
                              f"cells, more than max_cells={max_cells}")
        if not (isinstance(beta, int | float) and 0 < beta < 1):
            raise DomainError("beta must be in (0, 1)")

    def __init__(self, codes: np.ndarray, domain: Domain, epsilon: Number, alpha: Number, *,
                 max_updates: int | None = None, sensitivity: int = 1,
                 total_share: Number = Fraction(1, 20), beta: float = 0.05,
                 max_cells: int = 1 << 22) -> None:
        PrivateMultiplicativeWeights.check(domain, epsilon, alpha, max_updates=max_updates,
                                           sensitivity=sensitivity, total_share=total_share,
                                           beta=beta, max_cells=max_cells)
        eps = positive(epsilon, "epsilon", up=False)
        share = to_fraction(total_share)
        self.alpha = float(positive(alpha, "alpha"))
        self.domain = domain
        self.sensitivity = Fraction(int(sensitivity))
        self._x = marginal_counts(codes, domain, domain.attributes).ravel()
        eps_total = eps * share
        self.noisy_total = frontend.noisy(int(self._x.sum()), self.sensitivity,
                                           eps_total).value
        n = max(self.noisy_total, 1)
        cells = self._x.size
        self.update_bound = self._update_bound(n, cells)
        self.max_updates = int(max_updates) if max_updates else min(self.update_bound, 100)
        rest = eps - eps_total
        self._eps_measure = rest / 2
        self.threshold = math.ceil(self.alpha / 2)
        self._svt = SparseVector(self.threshold, rest / 2, self.sensitivity, self.max_updates,
                                 integer=True)
        self._start(n, cells)
        self.beta = beta
        self.epsilon = eps
        self.updates = 0

    def _update_bound(self, n: int, cells: int) -> int:
        """T(α): updates after which no query can be off by more than α."""
        return math.ceil(4 * math.log(max(cells, 2)) * n * n / self.alpha ** 2)

    def _start(self, n: int, cells: int) -> None:
        self.hypothesis = np.full(cells, n / cells, dtype=np.float64)
        self.eta = self.alpha / (2 * n)

    def _estimate(self, q: np.ndarray) -> float:
        return float(q @ self.hypothesis)

    def _update(self, q: np.ndarray, value: float, estimate: float) -> None:
        """Multiplicative weights towards the measured answer."""
        step = self.eta if value > estimate else -self.eta
        self.hypothesis *= np.exp(step * q)
        self.hypothesis *= max(self.noisy_total, 1) / self.hypothesis.sum()

    def accuracy(self, measured: bool) -> float:
        """Error bound (records) of one answer at confidence 1 − β: a measured answer's
        Laplace tail at scale cΔ/ε_meas; a free one's threshold α/2 plus the sparse vector's
        threshold and query noise tails (each at β/2)."""
        c, d = self.max_updates, float(self.sensitivity)
        if measured:
            return laplace_tail(c * d / float(self._eps_measure), self.beta, discrete=True)
        eps_half = float(self._svt.loss.epsilon) / 2
        return (self.threshold + 0.5 + laplace_tail(d / eps_half, self.beta / 2, discrete=True)
                + laplace_tail(2 * c * d / eps_half, self.beta / 2, discrete=True))

    def _query(self, query: object) -> np.ndarray:
        q = np.asarray(query, dtype=np.float64)
        if q.shape == self.domain.shape():
            q = q.ravel()
        if q.shape != self._x.shape:
            raise DomainError(f"a query needs one weight per cell: shape {self.domain.shape()}")
        if not np.all((q == 0) | (q == 1)):
            raise DomainError("PMW answers counting queries: weights 0 or 1 per cell")
        return q

    def answer(self, query: object) -> PMWAnswer:
        """Answer a counting query (a 0/1 weight per cell of the domain).

        Raises :class:`~dpkit.errors.BudgetExceededError` after c measured answers."""
        q = self._query(query)
        estimate = self._estimate(q)
        exact = int(q @ self._x)
        # the rounded estimate is public, so the compared error is an integer of sensitivity Δ
        if not self._svt.ask(abs(exact - round(estimate))):
            return PMWAnswer(estimate, False, self.accuracy(False))
        scale_sensitivity = self.sensitivity * self.max_updates  # c measurements share ε_meas
        value = float(frontend.noisy(exact, scale_sensitivity, self._eps_measure).value)
        self._update(q, value, estimate)
        self.updates += 1
        return PMWAnswer(value, True, self.accuracy(True))
