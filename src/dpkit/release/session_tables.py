"""Synthetic tables, marginals, range histograms, the Gaussian matrix mechanism and the
iterative construction on a :class:`~dpkit.frame.Session` query:
``query.publish.synthetic(spec, …)``, ``.marginals(spec, cliques, …)``,
``.histogram_nd(spec, method, …)``, ``.gaussian_mm(column, bins, …)`` and
``.iterative(spec, cliques, …)`` (:class:`~dpkit.release.session.ReleaseNamespace`).

The algorithms of :mod:`dpkit.release.synthetic` are primitives on already-bounded data (one
row, one individual) that charge nobody. Here a curator's table is bounded to the session's
privacy unit first (at most M rows a unit, in one pass, as for every session release:
:func:`dpkit.frame.engine.bound_contributions`), the algorithm runs at the budget the unit
map gives, and the session's accountant is debited once, before any row is read; the
:class:`~dpkit.core.record.Release` names the method and its internal budget split.

The unit map (a unit changes at most M rows of the bounded table; add/remove neighbours):

- pure ε-DP algorithms (MWEM, the independent baseline): run at ε/M; a row-level ε/M-DP
  algorithm is M·(ε/M) = ε-DP for groups of M rows (group privacy, Dwork & Roth 2014,
  Thm 2.2);
- ρ-zCDP algorithms (MST, AIM): run at ρ/M²; a row-level ρ′-zCDP algorithm is M²ρ′-zCDP for
  groups of M rows (Bun & Steinke 2016, Prop. 1.9), so ρ-zCDP per unit;
- noisy marginals (a count): the sensitivity is multiplied instead — m marginals have L1
  sensitivity M·m per unit, and discrete Laplace noise of scale M·m/ε is ε-DP (Dwork & Roth
  Thm 3.6; the discrete form, Canonne, Kamath & Steinke 2020);
- range histograms and the iterative construction (pure ε-DP for arrays at L1 distance 1,
  or records added or removed): run at ε/M (group privacy); the Gaussian matrix mechanism
  (ρ-zCDP, L2 sensitivity Δ₂ per record): run at ρ/M², since a unit moves Ax by ≤ M·Δ₂.

Every check that does not need the rows — the spec, the method, its options (bound to a
histogram algorithm's signature), the mechanisms' own ``check`` — runs before the debit;
after it the data side is total (rows outside the domain are dropped, selection scores are
clamped rather than a large table refused).

For row-level sessions M = 1 and each map is the identity.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, largest_rho
from dpkit.core.numbers import Number, positive, to_fraction
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.frame import engine
from dpkit.mechanisms.frontend import charge, noise_row
from dpkit.release.ranges.gaussian_mm import MAX_CELLS as GAUSSIAN_MAX_CELLS
from dpkit.release.ranges.gaussian_mm import gaussian_expected_rmse, gaussian_matrix_mechanism
from dpkit.release.ranges.histogram import HistogramRelease, release_histogram
from dpkit.release.ranges.registry import bind_options, planned
from dpkit.release.synthetic.datacube import measure_datacube, plan_datacube
from dpkit.release.synthetic.domain import Bins, Codec, Domain, marginal_counts, records
from dpkit.release.synthetic.fourier import fourier_consistent
from dpkit.release.synthetic.iterative import ICResult, IterativeConstruction, LinearQueries
from dpkit.release.synthetic.marginals import (
    MarginalWorkload,
    NoisyMarginal,
    make_consistent,
    measure_marginals,
)
from dpkit.release.synthetic.onthemap import OnTheMapRelease, plan_onthemap
from dpkit.release.synthetic.synthesize import (
    METHODS,
    check_options,
    choose_method,
    decode_records,
    synthesize_records,
    synthetic_loss,
    synthetic_noise,
)
from dpkit.release.workload import RangeWorkload

__all__ = ["declared_codec", "synthetic_query", "marginals_query", "MarginalsRelease", "unit_rows",
           "onthemap_query", "in_domain", "MAX_CELLS", "histogram_nd_query", "gaussian_mm_query",
           "GaussianRangesRelease", "iterative_query", "zcdp_budget",
           "check_histogram_options"]

MAX_CELLS = 1 << 22  # largest marginal table a session release builds (memory is declared)


def unit_rows(session: Any) -> int:
    """M: the rows one unit keeps once bounded without grouping (min of the unit's total and
    per-group row bounds; 1 for row-level units)."""
    unit = session.privacy_unit
    return int(unit.bounds.single_group().max_rows) if unit.column is not None else 1


def in_domain(spec: Mapping[str, Any]) -> pl.Expr:
    """A Polars predicate: the row's declared columns lie in their declared categories (a
    null only if null is a category) or inside their bins' range (finite values only)."""
    terms = []
    for column, how in spec.items():
        x = pl.col(column)
        if isinstance(how, Bins):
            v = x.cast(pl.Float64, strict=False)
            terms.append(v.is_finite() & (v >= how.edges[0]) & (v <= how.edges[-1]))
        else:
            values = [c for c in how if c is not None]
            inside = x.is_in(pl.Series(values).implode()) if values else pl.lit(False)
            if len(values) != len(how):
                inside = inside | x.is_null()
            terms.append(inside.fill_null(False))
    return pl.all_horizontal(terms)


def declared_codec(empty: pl.DataFrame, spec: Mapping[str, Any]) -> Codec:
    """The codec of ``spec``, checked on ``empty`` (zero rows of the declared columns, as the
    release will read them) by encoding it: before the debit, and reading no row.

    Raises
    ------
    DomainError
        The spec does not fit the columns' types (e.g. categories of another type).
    """
    try:
        codec = Codec.declare(empty, spec)
        codec.encode(empty.filter(in_domain(spec)))
    except DomainError:
        raise
    except Exception as exc:  # e.g. categories of another type than the column
        raise DomainError(f"the spec does not fit the columns' types: "
                          f"{type(exc).__name__}") from None
    return codec


def _declare(query: Any, spec: Mapping[str, Any], what: str) -> Codec:
    """Check the query and the spec on zero rows (the query's steps and the bounding, as the
    release will run them) and return the codec — all before the debit."""
    if query.aggs or query.group_columns:
        raise DomainError(f"{what} runs on an ungrouped query without agg()")
    if not isinstance(spec, Mapping) or not spec:
        raise DomainError("declare at least one column in spec")
    session = query.session
    empty_lf = query.lazy(empty=True)
    engine.check_columns(empty_lf.collect_schema(), list(spec))
    bounded = engine.bound_contributions(empty_lf, session.privacy_unit, list(spec), [])
    codec = declared_codec(engine.to_polars(bounded.select(list(spec)).collect()), spec)
    if any(s < 1 for s in codec.domain.sizes):
        raise DomainError("every declared column needs at least one category or bin")
    return codec


def _describe(query: Any, release: str) -> str:
    """The ledger's text: the query's steps (its canonical text without the empty agg())
    and the release."""
    steps = query.describe().removesuffix("agg()").rstrip(".")
    return f"{steps}.{release}" if steps else release


def _columns(domain: Domain) -> str:
    """The declared columns with their sizes (the spec's shape, public)."""
    return ", ".join(f"{a}[{s}]" for a, s in zip(domain.attributes, domain.sizes, strict=True))


def _bounded_codes(query: Any, spec: Mapping[str, Any], codec: Codec) -> np.ndarray:
    """The data side (after the debit): the query's rows bounded to the unit in one pass,
    rows outside the declared domain dropped (a filter: 1-stable, never an error), encoded."""
    session = query.session
    bounded = engine.bound_contributions(query.lazy(), session.privacy_unit, list(spec), [])
    table = engine.to_polars(bounded.select(list(spec)).collect())
    return records(codec.encode(table.filter(in_domain(spec))), codec.domain)


# -- synthetic tables ------------------------------------------------------------------

def synthetic_query(query: Any, spec: Mapping[str, Any], *, method: str = "auto",
                    epsilon: Number, delta: Number = Fraction(1, 10 ** 9),
                    rows: int | None = None, **options: Any) -> pl.DataFrame:
    """A private synthetic table of a session query's declared columns, charged once to the
    session at its privacy unit (:func:`dpkit.release.synthetic.synthesize.synthesize`'s
    methods on the bounded rows).

    Privacy: the rows are bounded to at most M per unit (M = the unit's row bound, 1 for
    row-level units), then the row-level method runs at ε/M (MWEM, "independent": ε-DP per
    unit by group privacy, Dwork & Roth Thm 2.2) or at ρ/M² with ρ = the largest ρ whose
    (ε, δ) conversion is within (ε, δ) (MST, AIM: ρ-zCDP per unit, Bun & Steinke 2016
    Prop. 1.9; (ε, δ)-DP by Canonne, Kamath & Steinke 2020 Cor. 13). The session is debited
    ε (PureDP; ρ = ε²/2 in a zCDP session) for the pure methods and (ε, δ) (ApproxDP
    sessions) or ρ (ZCDP sessions) for MST and AIM, once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations (filters and transformations allowed).
    spec : mapping column → categories or :class:`~dpkit.release.synthetic.domain.Bins`
        The declared domain (never inferred from the data).
    method : {"auto", "mst", "aim", "mwem", "independent"}
        "auto": :func:`~dpkit.release.synthetic.synthesize.choose_method` of the declared
        domain and ε (the pure rule in a PureDP session).
    epsilon : number
        ε > 0 (nats), per unit.
    delta : number
        δ in (0, 1) for MST and AIM (default 10⁻⁹); unused by the pure methods.
    rows : int, optional
        Records to synthesise (default: the method's noisy record count).
    **options
        The method's options (allow-list
        :data:`~dpkit.release.synthetic.synthesize.OPTIONS`).

    Returns
    -------
    polars.DataFrame
        The declared columns in their dtypes (bins → midpoints). The release record (loss,
        the method's budget split as noise rows, release id, digest) is
        ``query.session.last_release``.

    Raises
    ------
    DomainError, ColumnError
        A grouped query, aggregations, a bad spec, method, option, ε or δ, MST/AIM in a
        PureDP session — before any budget is spent. ImportError for MST/AIM without
        ``mbi``. BudgetExceededError if the loss exceeds what remains. Rows whose declared
        columns lie outside the declared domain are dropped, never an error.
    """
    if method not in METHODS:
        raise DomainError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    eps = positive(epsilon, "epsilon", up=False)
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise DomainError("rows must be a non-negative integer")
    codec = _declare(query, spec, "publish.synthetic")
    session = query.session
    domain = codec.domain
    if method == "auto":
        method = choose_method(domain, eps, have_mbi=False if session.measure is PureDP
                               else None)
    if method in ("mst", "aim") and len(domain.attributes) < 2:
        raise DomainError(f"{method} needs at least two declared columns")
    if method in ("mst", "aim"):
        from dpkit.release.synthetic.mst import require_mbi

        require_mbi()
    check_options(method, domain, options)
    loss, own = synthetic_loss(session.measure, method, eps, delta)
    m = unit_rows(session)
    pure = method not in ("mst", "aim")
    row_eps, row_rho = (own / m, None) if pure else (None, own / (m * m))

    def compute() -> pl.DataFrame:
        codes = _bounded_codes(query, spec, codec)
        synthetic = synthesize_records(codes, domain, method, epsilon=row_eps, rho=row_rho,
                                       rows=rows, **dict(options))
        return decode_records(codec, synthetic)

    run_at = f"ε/{m}" if pure else f"ρ/{m * m}"
    description = _describe(query, f"publish.synthetic({method}; {_columns(domain)}; unit ≤ "
                                   f"{m} rows, run at {run_at})")
    noise = synthetic_noise(method, len(domain.attributes), m, own, options)
    return charge(session, loss, description, compute, noise,
                  unit_bounded=True)


# -- marginals ---------------------------------------------------------------------------

@dataclass(frozen=True)
class MarginalsRelease:
    """Noisy marginals of a session query (:func:`marginals_query`).

    Attributes
    ----------
    marginals : tuple of NoisyMarginal
        One per clique, ``values`` of shape (sizes of its columns), in the order asked;
        ``variance`` per cell (record units).
    labels : mapping column → tuple
        The declared categories (or the bins' (lo, hi) pairs) of each axis, in code order.
    epsilon : Fraction
        ε charged per unit.
    consistent : bool or str
        How the marginals were made mutually consistent (post-processing), or False.
    """

    marginals: tuple[NoisyMarginal, ...]
    labels: Mapping[str, tuple[Any, ...]]
    epsilon: Fraction
    consistent: bool | str

    def __getitem__(self, clique: Sequence[str]) -> np.ndarray:
        """The noisy table of ``clique`` (its columns in the order asked)."""
        for m in self.marginals:
            if m.clique == tuple(clique):
                return m.values
        raise KeyError(tuple(clique))


def _labels(spec: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for column, how in spec.items():
        if isinstance(how, Bins):
            e = how.edges
            out[column] = tuple((e[i], e[i + 1]) for i in range(len(e) - 1))
        else:
            out[column] = tuple(how)
    return out


def marginals_query(query: Any, spec: Mapping[str, Any], cliques: Sequence[Sequence[str]],
                    *, epsilon: Number, consistent: bool | str = True,
                    max_cells: int = MAX_CELLS, allocation: str = "uniform",
                    objective: str = "max") -> MarginalsRelease:
    """Noisy marginals (contingency tables) of a session query's declared columns, charged
    once to the session at its privacy unit.

    Privacy: the rows are bounded to at most M per unit (M the unit's row bound, 1 for
    row-level units), so one unit changes each of the m marginals by at most M in L1: L1
    sensitivity Δ = M·m. Every cell gets discrete Laplace noise of scale Δ/ε
    (:func:`~dpkit.release.synthetic.marginals.measure_marginals` at ε/M), which is ε-DP per
    unit (Dwork & Roth Thm 3.6; discrete Laplace, Canonne, Kamath & Steinke 2020).
    Consistency (PriView, Qardaji, Yang & Li 2014) is post-processing. The session is
    debited ε (PureDP; ρ = ε²/2 in a zCDP session) once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations.
    spec : mapping column → categories or :class:`~dpkit.release.synthetic.domain.Bins`
        The declared domain of every column a clique names.
    cliques : sequence of sequences of str
        The marginals, each a tuple of distinct declared columns.
    epsilon : number
        ε > 0 (nats), per unit.
    consistent : bool or {"priview", "fourier"}
        Make the marginals mutually consistent (post-processing): True or "priview"
        (default; :func:`~dpkit.release.synthetic.marginals.make_consistent`), "fourier"
        (Barak et al. 2007's least-squares consistency,
        :func:`~dpkit.release.synthetic.fourier.fourier_consistent`), or False.
    max_cells : int
        Largest total number of cells (default 2^22): the release's memory is bounded by
        declared quantities.
    allocation : {"uniform", "datacube"}
        "uniform" (default): every marginal measured at ε/m, as above. "datacube": Ding,
        Winslett, Han & Li's data-cube allocation (SIGMOD 2011, §4–5;
        :mod:`~dpkit.release.synthetic.datacube`): a data-free greedy chooses which cuboids
        to measure (a requested marginal or a union of them) and splits ε/M among them
        (εⱼ ∝ √Sⱼ for ``objective="max"``), each cuboid gets discrete Laplace of scale
        M/εⱼ (L1 sensitivity M), the requested marginals are projections of their cuboid
        after ``consistent``. ε-DP per unit: Σⱼ M·(εⱼ/M) = ε (sequential composition,
        Dwork & Roth Thm 3.16).
    objective : {"max", "total"}
        With ``allocation="datacube"``: minimise the largest or the summed cell variance.

    Returns
    -------
    MarginalsRelease
        Its release record is ``query.session.last_release``.

    Raises
    ------
    DomainError, ColumnError
        A grouped query, aggregations, a bad spec or clique, more than ``max_cells`` cells,
        ε ≤ 0 — before any budget is spent. BudgetExceededError if ε exceeds what remains.
        Rows outside the declared domain are dropped, never an error.
    """
    eps = positive(epsilon, "epsilon", up=False)
    if not (isinstance(consistent, bool) or consistent in ("priview", "fourier")):
        raise DomainError("consistent must be True, False, 'priview' or 'fourier'")
    codec = _declare(query, spec, "publish.marginals")
    domain = codec.domain
    sets = tuple(tuple(c) for c in cliques) if not isinstance(cliques, str) else ()
    workload = MarginalWorkload(domain, sets)  # unknown or repeated columns raise
    cells = sum(domain.size(c) for c in workload.cliques)
    if cells > max_cells:
        raise DomainError(f"{cells} cells exceed max_cells = {max_cells}")
    if allocation not in ("uniform", "datacube"):
        raise DomainError("allocation must be 'uniform' or 'datacube'")
    session = query.session
    m = unit_rows(session)
    if allocation == "datacube":
        return _datacube_query(query, spec, codec, workload.cliques, eps, m, consistent,
                               max_cells, objective)

    def compute() -> MarginalsRelease:
        codes = _bounded_codes(query, spec, codec)
        noisy = measure_marginals(codes, domain, workload.cliques, eps / m)
        if consistent == "fourier":
            noisy = fourier_consistent(noisy, domain)
        elif consistent:
            noisy = make_consistent(noisy, domain)
        return MarginalsRelease(tuple(noisy), _labels(spec), eps, consistent)

    names = "; ".join(",".join(c) for c in workload.cliques)
    description = _describe(query, f"publish.marginals({names}; {_columns(domain)}; unit ≤ "
                                   f"{m} rows, L1 sensitivity {m}·{len(workload.cliques)})")
    noise = (NoiseRow("discrete Laplace", None, Fraction(m * len(workload.cliques)),
                      "marginals"),)
    return charge(session, PureDP(eps), description, compute, noise,
                  unit_bounded=True)


def _datacube_query(query: Any, spec: Mapping[str, Any], codec: Codec,
                    cliques: tuple[tuple[str, ...], ...], eps: Fraction, m: int,
                    consistent: bool | str, max_cells: int, objective: str
                    ) -> MarginalsRelease:
    """``marginals_query(allocation="datacube")``: the plan (data-free) before the debit."""
    domain = codec.domain
    plan = plan_datacube(domain, cliques, eps / m, objective=objective, max_cells=max_cells)

    def compute() -> MarginalsRelease:
        codes = _bounded_codes(query, spec, codec)
        noisy = measure_datacube(codes, domain, plan, cliques, consistent=consistent)
        return MarginalsRelease(tuple(noisy), _labels(spec), eps, consistent)

    names = "; ".join(",".join(c) for c in plan.measured)
    description = _describe(query, f"publish.marginals(datacube, {objective}: measured "
                                   f"{names}; {_columns(domain)}; unit ≤ {m} rows, L1 "
                                   f"sensitivity {m} per cuboid)")
    # the rows drawn (scale M/εⱼ at ε/M), with a unit's sensitivity M
    noise = tuple(replace(row, sensitivity=Fraction(m)) for row in (
        noise_row(1, PureDP(e), "cuboid " + ",".join(c))
        for c, e in zip(plan.measured, plan.epsilons, strict=True)))
    return charge(query.session, PureDP(eps), description, compute, noise,
                  unit_bounded=True)


# -- range histograms (1-D to 4-D) -------------------------------------------------------

def check_histogram_options(method: str, shape: tuple[int, ...] | int,
                            options: Mapping[str, Any]) -> None:
    """Check, before the debit and without data or noise, that ``method`` handles a
    histogram of ``shape`` and takes every option given (``workload``, ``non_negative`` and
    ``integer`` are the release's own) with a value it accepts: the names are bound to the
    algorithm's signature and the values go through its plan-time check
    (:func:`~dpkit.release.ranges.registry.planned`). A rank (int) for ``shape`` is the
    deprecated form: it checks the names only.

    Raises
    ------
    DomainError
        An unknown method, a rank it does not handle, an option it does not take, a bad
        option value."""
    own = {k: v for k, v in options.items()
           if k not in ("workload", "non_negative", "integer")}
    if isinstance(shape, int):
        warnings.warn("check_histogram_options(method, ndim, …) is deprecated; pass the "
                      "histogram's shape (option values are checked too)",
                      DeprecationWarning, stacklevel=2)
        bind_options(method, shape, own)
        return
    planned(method, shape, own)


def histogram_nd_query(query: Any, spec: Mapping[str, Any], method: str = "auto", *,
                       epsilon: Number, max_cells: int = MAX_CELLS,
                       **options: Any) -> HistogramRelease:
    """A d-dimensional histogram (d = 1 … 4 declared columns) of a session query, released
    once by a :mod:`dpkit.release.ranges` algorithm (what :func:`~dpkit.release.
    release_histogram` dispatches for its rank: identity, privelet, quadtree, ug, ag,
    kdtree, dawa on the Hilbert curve, the matrix mechanism / HDMM, auto …), so that any
    range query is answered from it for free; charged once to the session at its unit.

    Privacy: the rows are bounded to at most M per unit (M the unit's row bound, 1 for
    row-level units), so one unit moves the count array by at most M in L1. Every algorithm
    is ε′-DP for arrays at L1 distance 1, hence Mε′-DP at distance M (group privacy, Dwork &
    Roth Thm 2.2): it runs at ε′ = ε/M and the session is debited ε (PureDP; ρ = ε²/2 in a
    zCDP session) once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations.
    spec : mapping column → categories or :class:`~dpkit.release.synthetic.domain.Bins`
        One to four declared columns, the histogram's axes in this order (bins [eᵢ, eᵢ₊₁),
        the last closed; categories in the order given).
    method : str
        A registered algorithm for the rank (:func:`dpkit.release.methods`); default
        "auto".
    epsilon : number
        ε > 0 (nats), per unit.
    max_cells : int
        Largest number of cells (default 2^22): memory and time bounded by declared sizes.
    **options
        ``workload`` (a :class:`~dpkit.release.workload.RangeWorkload` of the histogram's
        shape), ``non_negative``, ``integer`` and the algorithm's own options.

    Returns
    -------
    HistogramRelease
        ``counts`` of shape (sizes of the columns), ``epsilon`` the ε charged per unit. Its
        release record is ``query.session.last_release``. For ``method="auto"`` the
        algorithm it ran is ``options["chose"]`` (``options["chose_by"]`` the rule's path);
        the ledger's description, written at the debit before the choice, names "auto" and
        so its rule (:mod:`dpkit.release.ranges.auto`); the choice is post-processing.

    Raises
    ------
    DomainError, ColumnError
        A grouped query, aggregations, a bad spec, more than four columns or ``max_cells``
        cells, a method that does not handle the rank, an option it does not take or a
        value it refuses, a workload of another shape, ε ≤ 0 — before any budget is spent
        or noise drawn. BudgetExceededError if ε exceeds what remains. Rows outside the
        declared domain are dropped, never an error.
    """
    eps = positive(epsilon, "epsilon", up=False)
    codec = _declare(query, spec, "publish.histogram_nd")
    domain = codec.domain
    if len(domain.attributes) > 4:
        raise DomainError("publish.histogram_nd takes one to four columns")
    if domain.size() > max_cells:
        raise DomainError(f"{domain.size()} cells exceed max_cells = {max_cells}")
    m = unit_rows(query.session)
    check_histogram_options(method, domain.shape(), options)
    workload = options.get("workload")
    if workload is not None and tuple(workload.shape) != domain.shape():
        raise DomainError(f"workload shape {tuple(workload.shape)} != {domain.shape()}")

    def compute() -> HistogramRelease:
        codes = _bounded_codes(query, spec, codec)
        counts = marginal_counts(codes, domain, domain.attributes)
        return replace(release_histogram(counts, eps / m, method, **dict(options)),
                       epsilon=eps)

    description = _describe(query, f"publish.histogram_nd({method}; {_columns(domain)}; "
                                   f"unit ≤ {m} rows, run at ε/{m})")
    noise = (NoiseRow(method, None, Fraction(m), "histogram"),)
    return charge(query.session, PureDP(eps), description, compute, noise,
                  unit_bounded=True)


# -- the Gaussian matrix mechanism --------------------------------------------------------

@dataclass(frozen=True)
class GaussianRangesRelease:
    """A 1-D histogram released by the Gaussian matrix mechanism (:func:`gaussian_mm_query`).

    Attributes
    ----------
    counts : ndarray of float64, shape (n,)
        x̂ = A⁻¹(Ax + noise), in records.
    rho : Fraction
        ρ charged per unit (zCDP).
    labels : tuple
        The bins' (lo, hi) pairs or the categories, in code order.
    expected_rmse : float
        Per-query RMSE of the workload (all ranges by default), in records, on the bounded
        table (:func:`~dpkit.release.ranges.gaussian_mm.gaussian_expected_rmse` at ρ/M²).
    """

    counts: np.ndarray
    rho: Fraction
    labels: tuple[Any, ...]
    expected_rmse: float

    def answer(self, workload: RangeWorkload) -> np.ndarray:
        """Answers to ``workload`` from the released counts (post-processing, free)."""
        return workload.answer(self.counts)


def zcdp_budget(measure: type, what: str, epsilon: Fraction, delta: Number
                ) -> tuple[PrivacyLoss, Fraction]:
    """(what a ρ-zCDP release at (ε, δ) is charged in ``measure``, its ρ): ρ the largest
    whose (ε, δ) conversion is within (ε, δ) (Canonne, Kamath & Steinke 2020, Cor. 13);
    ZCDP(ρ) in a zCDP session, else ApproxDP(ε, δ).

    Raises
    ------
    DomainError
        A pure-ε session, or δ outside (0, 1)."""
    if measure is PureDP:
        raise DomainError(f"{what} is ρ-zCDP, not pure ε-DP: use an ApproxDP or ZCDP budget")
    dlt = to_fraction(delta)
    if not 0 < dlt < 1:
        raise DomainError(f"delta must be in (0, 1); got {delta!r}")
    rho = largest_rho(epsilon, dlt)
    return (ZCDP(rho) if measure is ZCDP else ApproxDP(epsilon, dlt)), rho


def gaussian_mm_query(query: Any, column: str, bins: Sequence[Number] | Bins, *,
                      epsilon: Number, delta: Number = Fraction(1, 10 ** 9),
                      workload: RangeWorkload | None = None,
                      reuse: bool = True) -> GaussianRangesRelease:
    """A 1-D histogram of a session query released by the matrix mechanism with Gaussian
    noise (:func:`~dpkit.release.ranges.gaussian_mm.gaussian_matrix_mechanism`: strategy A
    optimised for the workload's L2 error), charged once to the session at its unit.

    Privacy: the rows are bounded to at most M per unit, so one unit moves the counts by at
    most M in L1 and Ax by at most M·Δ₂ in L2 (Δ₂ = A's largest column norm). The mechanism
    runs at ρ/M² (σ = Δ₂/√(2ρ/M²)), which is ρ-zCDP per unit (Bun & Steinke 2016, Prop. 1.6;
    the map d ↦ d²ρ of :func:`~dpkit.release.ranges.gaussian_mm.
    make_gaussian_matrix_release`), with ρ the largest whose (ε, δ) conversion is within
    (ε, δ) (Canonne, Kamath & Steinke 2020, Cor. 13). The session is debited (ε, δ)
    (ApproxDP sessions) or ρ (ZCDP sessions) once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations.
    column : str
        A numeric column.
    bins : sequence of numbers or Bins
        Increasing edges e₀ < … < e_n (n ≤ 1,024 cells, bins [eᵢ, eᵢ₊₁), the last closed).
    epsilon, delta : number
        ε > 0 (nats) and δ in (0, 1) (default 10⁻⁹), per unit.
    workload : RangeWorkload, optional
        The ranges to optimise the strategy for (shape (n,); default all ranges).
    reuse : bool
        Use the cached strategy of the workload's declared family (default True).

    Returns
    -------
    GaussianRangesRelease
        Its release record is ``query.session.last_release``.

    Raises
    ------
    DomainError, ColumnError
        A grouped query, aggregations, bad bins, more than 1,024 cells, a workload of
        another shape, a PureDP session, ε ≤ 0 or δ outside (0, 1) — before any budget is
        spent. BudgetExceededError if the loss exceeds what remains. Rows outside the bins
        are dropped, never an error.
    """
    eps = positive(epsilon, "epsilon", up=False)
    if not isinstance(reuse, bool):
        raise DomainError(f"reuse must be True or False; got {reuse!r}")
    spec = {column: _bins(bins)}
    codec = _declare(query, spec, "publish.gaussian_mm")
    n = codec.domain.sizes[0]
    if n > GAUSSIAN_MAX_CELLS:
        raise DomainError(f"the Gaussian matrix mechanism is dense: {n} bins > "
                          f"{GAUSSIAN_MAX_CELLS}")
    if workload is not None and tuple(workload.shape) != (n,):
        raise DomainError(f"workload shape {tuple(workload.shape)} != ({n},) bins")
    session = query.session
    loss, rho = zcdp_budget(session.measure, "publish.gaussian_mm", eps, delta)
    m = unit_rows(session)
    row_rho = rho / (m * m)
    # the strategy is optimised (and cached) now: public, and its errors come before the debit
    rmse = gaussian_expected_rmse(workload, n, row_rho)

    def compute() -> GaussianRangesRelease:
        codes = _bounded_codes(query, spec, codec)
        counts = marginal_counts(codes, codec.domain, codec.domain.attributes)
        out = gaussian_matrix_mechanism(counts, row_rho, workload, reuse=reuse)
        return GaussianRangesRelease(out, rho, _labels(spec)[column], rmse)

    description = _describe(query, f"publish.gaussian_mm({_columns(codec.domain)}; unit ≤ "
                                   f"{m} rows, run at ρ/{m * m})")
    noise = (NoiseRow("gaussian matrix mechanism (discrete Gaussian on Ax)", None,
                      Fraction(m), "histogram"),)
    return charge(session, loss, description, compute, noise,
                  unit_bounded=True)


def _bins(bins: Sequence[Number] | Bins) -> Bins:
    """Declared edges as :class:`Bins` (numbers only)."""
    if isinstance(bins, Bins):
        return bins
    try:
        return Bins(tuple(float(e) for e in bins))
    except (TypeError, ValueError):
        raise DomainError("bins must be a sequence of increasing numbers") from None


# -- the iterative construction ----------------------------------------------------------

def iterative_query(query: Any, spec: Mapping[str, Any], cliques: Sequence[Sequence[str]],
                    *, epsilon: Number, distinguisher: str = "exponential",
                    updater: str = "mw", T: int = 10, total_share: Number = Fraction(1, 20),
                    beta: float = 0.05, max_cells: int = MAX_CELLS,
                    **updater_options: Any) -> ICResult:
    """Answer every cell of the marginals ``cliques`` of a session query's declared columns
    by the iterative construction (Gupta, Roth & Ullman 2012; Dwork & Roth §5.2, Alg. 9:
    :class:`~dpkit.release.synthetic.iterative.IterativeConstruction` — the distinguisher
    picks the worst-answered query, it is measured, the updater — multiplicative weights,
    additive, or the median mechanism's halving — learns it), charged once to the session
    at its unit.

    Privacy: the rows are bounded to at most M per unit, and the construction (pure ε′-DP
    for records added or removed: ε′·``total_share`` on the record count, T rounds of
    ε′(1 − share)/T, sequential composition, Dwork & Roth Thm 3.16) runs at ε′ = ε/M, which
    is ε-DP per unit (group privacy, Dwork & Roth Thm 2.2). The session is debited ε
    (PureDP; ρ = ε²/2 in a zCDP session) once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations.
    spec : mapping column → categories or :class:`~dpkit.release.synthetic.domain.Bins`
        The declared domain (dense: at most ``max_cells`` cells).
    cliques : sequence of sequences of str
        The marginals whose every cell is a query.
    epsilon : number
        ε > 0 (nats), per unit.
    distinguisher : {"exponential", "noisy_max", "permute_and_flip"}
    updater : {"mw", "additive", "halving"}
    T : int
        Rounds.
    total_share : number in (0, 1)
        Share of ε′ for the noisy record count.
    beta : float
        Failure probability of the reported bound.
    max_cells : int
        Largest domain (default 2^22).
    **updater_options
        For "halving": ``records``, ``max_candidates``, ``tolerance``.

    Returns
    -------
    ICResult
        ``answers`` (one per cell of each clique, in order), ``distribution`` (|X|,),
        ``epsilon`` the ε charged per unit; its release record is
        ``query.session.last_release``.

    Raises
    ------
    DomainError, ColumnError
        A grouped query, aggregations, a bad spec, clique, part or option, a domain above
        ``max_cells``, too many halving candidates, ε ≤ 0 — before any budget is spent.
        BudgetExceededError if ε exceeds what remains. Rows outside the declared domain are
        dropped, never an error.

    Warns
    -----
    BaselineWarning
        Before the debit, when the workload has more cells than rounds T: MWEM
        (``publish.synthetic(method="mwem")``) is then measured far more accurate
        (:mod:`dpkit.release.synthetic.iterative`, "Accuracy"); ``note`` on the result.
    """
    eps = positive(epsilon, "epsilon", up=False)
    codec = _declare(query, spec, "publish.iterative")
    domain = codec.domain
    if domain.size() > max_cells:
        raise DomainError(f"{domain.size()} cells exceed max_cells = {max_cells}")
    workload = MarginalWorkload(domain, tuple(tuple(c) for c in cliques)
                                if not isinstance(cliques, str) else ())
    unknown = sorted(set(updater_options) - {"records", "max_candidates", "tolerance"})
    if unknown:  # n (the record count) is not public in a session; δ > 0 is not offered
        raise DomainError(f"unknown option {unknown[0]!r}; the updater options are "
                          "records, max_candidates, tolerance (halving)")
    m = unit_rows(query.session)
    ic = IterativeConstruction(distinguisher, updater, T, eps / m, 0,
                               total_share=total_share, beta=beta, **updater_options)
    queries = LinearQueries.from_marginals(workload)
    ic.check(domain.size(), len(queries))  # the accuracy warning, before the debit

    def compute() -> ICResult:
        codes = _bounded_codes(query, spec, codec)
        counts = marginal_counts(codes, domain, domain.attributes).ravel()
        return replace(ic.run(counts, queries, advise=False), epsilon=eps)

    names = "; ".join(",".join(c) for c in workload.cliques)
    description = _describe(query, f"publish.iterative({distinguisher}/{updater}, T={ic.T}; "
                                   f"{names}; {_columns(domain)}; unit ≤ {m} rows, run at "
                                   f"ε/{m})")
    noise = (NoiseRow(f"iterative: record count, discrete Laplace, {ic.share}·ε", None,
                      Fraction(m), "record count"),
             NoiseRow(f"iterative: {ic.T} rounds, {distinguisher} + discrete Laplace, "
                      f"(1 − {ic.share})·ε/{2 * ic.T} each", None, Fraction(m),
                      "workload marginals"))
    return charge(query.session, PureDP(eps), description, compute, noise,
                  unit_bounded=True)


# -- the OnTheMap synthesizer ------------------------------------------------------------

def onthemap_query(query: Any, origin: str, destination: str, *,
                   origins: Sequence[Any], destinations: Sequence[Any],
                   m: int | Mapping[Any, int], epsilon: Number, delta: Number,
                   domains: Mapping[Any, Sequence[Any]] | None = None) -> OnTheMapRelease:
    """The OnTheMap synthesizer (:func:`~dpkit.release.synthetic.onthemap.onthemap`) on the
    rows of a session query, one row per worker.

    Privacy: the unit is one worker, one row — a row-level unit, or ``PrivacyUnit.by(column,
    1)`` (each person's rows bounded to one) — so a unit adds or removes one row, which is
    the synthesizer's neighbouring relation: ProbabilisticDP(ε, Σ_d δ_d) ⇒ ApproxDP(ε, δ)
    per unit (Machanavajjhala et al., ICDE 2008, Def. 4). A unit of M > 1 rows is refused
    (group privacy for probabilistic DP is not offered). The session (an ApproxDP budget) is
    debited (ε, δ) once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations (filters and transformations allowed).
    origin, destination : str
        The two columns.
    origins, destinations, m, epsilon, delta, domains
        As :func:`~dpkit.release.synthetic.onthemap.onthemap` (declared, never the data's).

    Returns
    -------
    OnTheMapRelease
        The release record is ``query.session.last_release``.

    Raises
    ------
    DomainError, ColumnError
        A grouped query, aggregations, a unit of more than one row, unknown columns or bad
        declarations (as :func:`~dpkit.release.synthetic.onthemap.plan_onthemap`) — before
        the debit. MeasureError in a PureDP or zCDP session; BudgetExceededError if (ε, δ)
        exceeds what remains (nothing debited). Rows outside the declared domains are
        dropped, never an error.

    Warns
    -----
    BaselineWarning
        As :func:`~dpkit.release.synthetic.onthemap.onthemap` (before the debit).
    """
    if query.aggs or query.group_columns:
        raise DomainError("publish.onthemap runs on an ungrouped query without agg()")
    session = query.session
    if unit_rows(session) != 1:
        raise DomainError("publish.onthemap's unit is one worker, one row: use "
                          "PrivacyUnit.rows() or PrivacyUnit.by(column, 1)")
    columns = [origin, destination]
    empty = query.lazy(empty=True)
    engine.check_columns(empty.collect_schema(), columns)
    engine.bound_contributions(empty, session.privacy_unit, columns, []).collect()
    plan = plan_onthemap(origins=origins, destinations=destinations, m=m, epsilon=epsilon,
                         delta=delta, domains=domains, stacklevel=4)

    def compute() -> OnTheMapRelease:
        bounded = engine.bound_contributions(query.lazy(), session.privacy_unit, columns, [])
        table = engine.to_polars(bounded.select(columns).collect())
        return plan.draw(table[origin].to_numpy(), table[destination].to_numpy())

    description = _describe(query, f"publish.{plan.description}")
    return charge(session, plan.loss, description, compute,
                  alternatives=(plan.loss.to_approx(),), unit_bounded=True)
