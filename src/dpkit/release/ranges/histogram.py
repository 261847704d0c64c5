"""Releasing a histogram once so that any range query can be answered from it.

:func:`release_histogram` runs one registered algorithm on a count vector (1-D) or array
(multi-D) and returns a :class:`HistogramRelease`: the estimated counts, the ε spent and, for
data-independent strategies, the expected error. :func:`make_histogram_release` wraps the same
algorithm as a core :class:`~dpkit.core.component.Measurement` (privacy map d_in ↦ d_in·ε
for histograms at L1 distance d_in, i.e. d_in records added or removed), so it composes and
audits like any mechanism.

An algorithm is a function ``(x, epsilon, workload, **options) -> estimate`` listed in
:data:`~dpkit.release.ranges.registry.ALGORITHMS` (the one table; :func:`register` adds a
user's); ``x`` is an int64 array (checked by :func:`~dpkit.release.measure.
check_counts`), ``epsilon`` a positive Fraction that the algorithm spends in total (its
docstring gives the split and the proof sketch), ``workload`` an optional
:class:`~dpkit.release.workload.RangeWorkload` that workload-adaptive algorithms use, and the
estimate a float64 array of ``x``'s shape. All noise comes from :mod:`dpkit.release.measure`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.core import markup
from dpkit.core.component import Measurement
from dpkit.core.measures import PureDP
from dpkit.core.metrics import L1Distance
from dpkit.core.numbers import Number, non_negative, positive
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.mechanisms.frontend import AccountantLike, charge
from dpkit.release.measure import check_counts
from dpkit.release.ranges.by_value import RangeCount, range_count
from dpkit.release.ranges.registry import (
    Algorithm,
    HistogramMethod,
    method,
    methods,
    planned,
    register,
)
from dpkit.release.workload import RangeWorkload, rmse, scaled_error

__all__ = ["HistogramRelease", "HistogramMethod", "Algorithm", "release_histogram",
           "make_histogram_release", "register", "methods", "method"]

_find = method  # for the functions below, whose parameter ``method`` is the name


@dataclass(frozen=True)
class HistogramRelease:
    """A released histogram.

    Attributes
    ----------
    counts : ndarray of float64
        Estimated counts, the input's shape (post-processed as requested).
    epsilon : Fraction
        ε spent (pure DP, add/remove-one-record neighbours).
    method : str
        The algorithm's registered name; ``options`` its settings. For a method that runs
        another ("auto"), ``options["chose"]`` is the registered name of the algorithm it
        ran and ``options["chose_by"]`` the path of its rule (a key of
        :data:`dpkit.release.ranges.auto.WHY`: "rule", "fallback", …); :attr:`chosen` reads
        the first.
    labels : tuple of str, optional
        Bin labels when released from a session column.
    edges : tuple of float, optional
        The bin edges e₀ < … < e_m when released from a session column (for :meth:`count`
        and :meth:`range`).
    column : str, optional
        That column's name.
    raw : ndarray of float64, optional
        The algorithm's estimate before ``non_negative`` / ``integer`` post-processing
        (the centre of :meth:`range`'s interval).
    cell_scale : float, optional
        Each cell's independent discrete Laplace noise scale in rows when the algorithm
        adds one per cell ("identity"); None otherwise.
    """

    counts: np.ndarray
    epsilon: Fraction
    method: str
    options: dict[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] | None = None
    edges: tuple[float, ...] | None = None
    column: str | None = None
    raw: np.ndarray | None = None
    cell_scale: float | None = None

    @property
    def chosen(self) -> str:
        """The algorithm that produced the counts: ``options["chose"]`` for a method that
        runs another ("auto"), else :attr:`method`."""
        return str(self.options.get("chose", self.method))

    @property
    def method_text(self) -> str:
        """The method as displayed: "auto → mm (fallback)" for a choice, else its name."""
        if "chose" not in self.options:
            return self.method
        why = self.options.get("chose_by")
        return f"{self.method} → {self.chosen}" + (f" ({why})" if why else "")

    def answer(self, workload: RangeWorkload) -> np.ndarray:
        """Answers to ``workload`` from the released counts (post-processing, free)."""
        return workload.answer(self.counts)

    def _repr_html_(self) -> str:
        """Notebooks' rich display: method, ε, shape, an inline SVG bar chart and a table of
        the (first) estimated counts; every label is escaped (:mod:`dpkit.core.markup`)."""
        flat = np.asarray(self.counts, dtype=np.float64).reshape(-1)
        labels = (list(self.labels) if self.labels is not None and len(self.labels) == flat.size
                  else [str(i) for i in range(flat.size)])
        about = markup.facts([("method", self.method_text), ("ε", self.epsilon),
                              ("cells", " × ".join(map(str, self.counts.shape)))])
        chart = markup.bar_chart(labels, flat.tolist()) if self.counts.ndim == 1 else ""
        rows = markup.table(["cell", "estimated count"], zip(labels, flat.tolist(),
                                                              strict=True))
        return markup.box("dpkit HistogramRelease", about, chart, rows)

    def range(self, lo: Number | None = None, hi: Number | None = None, *,
              beta: float = 0.05) -> RangeCount:
        """The count of values in [lo, hi) by value (post-processing, free).

        Cells are found from :attr:`edges`; a partially covered cell contributes its
        covered fraction of its count (apportioned uniformly within the cell, said in the
        result's ``note``). The interval (at 1 − ``beta``, cut at 0) comes from the cells'
        noise (:mod:`dpkit.release.ranges.by_value`).

        Parameters
        ----------
        lo, hi : number, optional
            The range's ends in the column's unit (default: the first / last edge).
        beta : float
            The interval's failure probability.

        Returns
        -------
        RangeCount

        Raises
        ------
        DomainError
            Without edges (a 1-D release from a session column has them), a range outside
            them, lo ≥ hi or a non-number.
        """
        if self.edges is None or self.counts.ndim != 1:
            raise DomainError("range by value needs a 1-D release from a session column "
                              "(query.publish.histogram); use answer(RangeWorkload) by cell")
        raw = self.counts if self.raw is None else self.raw
        return range_count(self.counts, raw, np.asarray(self.edges, dtype=np.float64),
                           self.cell_scale, lo, hi, beta)

    def count(self, *, beta: float = 0.05, **between: tuple[Number, Number]) -> RangeCount:
        """The count of ``column=(lo, hi)``, lo ≤ value < hi: ``out.count(hours=(1750,
        2500))`` is :meth:`range` (1750, 2500) on the released column ``hours``.

        Raises
        ------
        DomainError
            Unless exactly one keyword, naming the released column, with a (lo, hi) pair.
        """
        if len(between) != 1 or (self.column is not None and self.column not in between):
            raise DomainError(f"count takes one keyword, the released column: "
                              f"count({self.column or 'column'}=(lo, hi))")
        ends = next(iter(between.values()))
        if not isinstance(ends, tuple | list) or len(ends) != 2:
            raise DomainError("count's range is a (lo, hi) pair")
        return self.range(ends[0], ends[1], beta=beta)

    def error(self, workload: RangeWorkload, true_counts: np.ndarray) -> dict[str, float]:
        """RMSE and DPBench's scaled L2 error against the true counts (evaluation only)."""
        return {"rmse": rmse(workload, true_counts, self.counts),
                "scaled_error": scaled_error(workload, true_counts, self.counts)}


def _postprocess(est: np.ndarray, non_negative_counts: bool, integer: bool) -> np.ndarray:
    out = np.asarray(est, dtype=np.float64)
    if non_negative_counts:
        out = np.maximum(out, 0.0)
    if integer:
        out = np.rint(out)
    return out


def release_histogram(counts: npt.ArrayLike, epsilon: Number, method: str = "auto", *,
                      workload: RangeWorkload | None = None, non_negative: bool = False,
                      integer: bool = False,
                      accountant: AccountantLike = None,
                      **options: Any) -> HistogramRelease:
    """Release a histogram with one algorithm at ε-DP.

    A primitive on already-bounded counts (one record adds 1 to one cell) that charges
    nobody unless given ``accountant``: a curator's per-person data goes through
    ``query.publish.histogram`` (the session bounds each unit's rows and debits once,
    :mod:`dpkit.release.session`).

    Parameters
    ----------
    counts : array_like of non-negative integers, shape (n,) or (n1, n2, …)
        The true histogram (one record adds 1 to one cell).
    epsilon : number
        ε > 0 in nats, spent in total.
    method : str
        A name from :func:`methods`; default "auto" (:mod:`~dpkit.release.ranges.auto`:
        5% of ε on a noisy record count, the rest on the algorithm its learned rule picks).
    workload : RangeWorkload, optional
        The queries to be answered; workload-adaptive methods (matrix mechanism, DAWA)
        optimise for it, others ignore it.
    non_negative, integer : bool
        Post-processing: clip negative estimates to 0, round to integers (free; off by
        default because both bias range sums).
    accountant : Accountant or PrivacyFilter, optional
        Charged ε (PureDP) once through its ``run``, after every check and before the
        algorithm runs; the release record is its ``last``. Default: nothing is charged.
    **options
        Passed to the algorithm (see its docstring).

    Returns
    -------
    HistogramRelease

    Raises
    ------
    DomainError
        Unknown method or option, a bad option value (the algorithm's plan-time check,
        :data:`~dpkit.release.ranges.registry.ALGORITHMS`), wrong rank, empty / negative /
        non-integer / non-finite counts, ε ≤ 0, or a workload of another shape (all before
        any budget is spent and any noise is drawn).
        BudgetExceededError from the accountant.

    Notes
    -----
    Privacy: each algorithm is ε-DP for add/remove-one-record neighbours (its docstring gives
    the argument); post-processing keeps the guarantee (Dwork & Roth Prop. 2.1).
    """
    x = check_counts(counts, (1, 2, 3, 4))
    eps = positive(epsilon, "epsilon", up=False)
    # the method, its options' names and values (auto gets the lookup), before any debit
    m, options = planned(method, x.shape, options)
    if workload is not None and tuple(workload.shape) != x.shape:
        raise DomainError(f"workload shape {workload.shape} != histogram shape {x.shape}")

    def run() -> HistogramRelease:
        picked: list[tuple[str, str]] = []  # a chooser's (name, path): recorded in options
        mine = {"chose": lambda name, why: picked.append((name, why))} if m.chooses else {}
        est = m.function(x, eps, workload, **options, **mine)
        shown = {k: v for k, v in options.items() if k != "lookup"}
        if picked:
            shown["chose"], shown["chose_by"] = picked[-1]
        est = np.asarray(est, dtype=np.float64)
        scale = float(1 / eps) if method == "identity" else None  # basic.identity's 1/ε
        return HistogramRelease(_postprocess(est, non_negative, integer), eps, method, shown,
                                raw=est, cell_scale=scale)

    if accountant is None:
        return run()
    noise = (NoiseRow(method, None, Fraction(1), "histogram"),)
    return charge(accountant, PureDP(eps), f"release_histogram({method}; shape {x.shape})",
                  run, noise)


def make_histogram_release(epsilon: Number, method: str = "auto", *,
                           workload: RangeWorkload | None = None, **options: Any
                           ) -> Measurement:
    """:func:`release_histogram` as a Measurement on count arrays under L1 distance.

    Privacy map: d_in ↦ PureDP(d_in · ε) — the algorithm is ε-DP for histograms at L1
    distance 1 and group privacy scales it (Dwork & Roth Thm 2.2)."""
    eps = positive(epsilon, "epsilon", up=False)
    if workload is not None:
        _find(method, len(workload.shape))
    elif method not in methods():
        _find(method, 0)  # raises: unknown method
    return Measurement(
        function=lambda x: release_histogram(x, eps, method, workload=workload,
                                             **options).counts,
        input_metric=L1Distance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(non_negative(d_in, "d_in") * eps),
        name=f"histogram[{method}](epsilon={float(eps):.6g})")

