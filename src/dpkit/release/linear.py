"""A few linear queries over a histogram, answered at once by the K-norm mechanism (Hardt &
Talwar, STOC 2010): the front end of :func:`dpkit.mechanisms.make_knorm`, charged through the
kit (:func:`~dpkit.mechanisms.frontend.charge`, noise drawn by
:func:`~dpkit.mechanisms.frontend.noisy` with ``workload=``).

A primitive on already-bounded counts, like :func:`~dpkit.release.release_histogram`: one
record adds 1 to one cell, so neighbouring histograms are at L1 distance 1 and the answers Ax
move by one column of A. The noise is shaped like the sensitivity polytope
K = conv(±a₁, …, ±aₙ) instead of the L1 ball of radius maxⱼ‖aⱼ‖₁ that the Laplace mechanism
pays for, which is what a workload of overlapping queries gains.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dpkit.core.measures import PureDP
from dpkit.core.numbers import Number, positive
from dpkit.errors import DomainError
from dpkit.mechanisms.calibrated import make_noise
from dpkit.mechanisms.frontend import AccountantLike, charge, check_accountant, noisy, row_of
from dpkit.mechanisms.knorm import declared_workload
from dpkit.release.measure import check_counts

__all__ = ["release_linear_queries"]


def release_linear_queries(counts: npt.ArrayLike, workload: Sequence[Sequence[Number]],
                           epsilon: Number, *, accountant: AccountantLike = None
                           ) -> np.ndarray:
    """Answer d ≤ 4 linear queries Ax over a histogram x with the K-norm mechanism at ε-DP.

    Parameters
    ----------
    counts : array_like of non-negative integers, shape (n,)
        The histogram x (one record adds 1 to one cell).
    workload : d × n matrix of rationals
        A, 1 ≤ d ≤ 4, rank d (:func:`~dpkit.mechanisms.make_knorm`'s limits).
    epsilon : number
        ε > 0 in nats (rounded down).
    accountant : Accountant, PrivacyFilter or Session, optional
        Charged PureDP(ε) once, after every check and before any noise is drawn; the release
        record is its ``last``. Default: nothing is charged.

    Returns
    -------
    ndarray of float64, shape (d,)
        Ax + z, z on the lattice hℤᵈ with P(z) ∝ exp(−ε‖z‖_K), K = conv(±aⱼ).

    Raises
    ------
    DomainError
        Counts not a 1-D histogram of non-negative integers of length n, or a workload
        :func:`~dpkit.mechanisms.knorm.knorm_plan` refuses (rank < d, d > 4, too many
        distinct columns, a polytope too thin for the sampler): all before any debit.
        BudgetExceededError from the accountant.

    Notes
    -----
    Privacy: PureDP(ε) for add/remove-one-record neighbours (Hardt & Talwar 2010; the
    lattice proof is in :mod:`dpkit.mechanisms.knorm`). A session whose unit contributes up
    to M rows would need Δ = M: use the session's own entries for per-person data.
    """
    x = check_counts(counts, (1,))
    eps = positive(epsilon, "epsilon", up=False)
    check_accountant(accountant)
    a = declared_workload(workload)
    noise = make_noise(1, epsilon=eps, workload=a)  # every plan-time check
    if len(a[0]) != x.size:
        raise DomainError(f"the workload has {len(a[0])} columns; the histogram has "
                          f"{x.size} cells")
    row = row_of(noise, "linear queries")

    def run() -> np.ndarray:
        return np.asarray(noisy(x, 1, PureDP(eps), workload=a).value)

    d = len(a)
    return charge(accountant, PureDP(eps), f"release_linear_queries(K-norm; {d} queries over "
                  f"{x.size} cells)", run, (row,))
