"""The :mod:`dpkit.release` families on a :class:`~dpkit.frame.Session` query (interface
mode in, a non-interactive release out), offered as the query namespace ``query.publish``
(:class:`ReleaseNamespace`, registered when :mod:`dpkit.release` is imported; ``frame`` never
imports ``release``): histograms (:func:`release_query_histogram`), private multiplicative
weights (:func:`pmw_query`), the median mechanism (:func:`median_query`) and SmallDB
(:func:`smalldb_query`); synthetic
tables, marginals, 1-D to 4-D range histograms, the Gaussian matrix mechanism and the
iterative construction (:mod:`dpkit.release.session_tables`).

The session is where a curator's data is charged: each entry bounds the rows to the
session's privacy unit in one pass, maps the unit's row bound M into the algorithm's budget
or sensitivity (its docstring gives the formula), and debits the session's accountant once,
before any row is read. The functions of :mod:`dpkit.release` themselves are primitives on
already-bounded data (docs/design.md, "Where a release is charged")."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from dpkit.core.measures import PureDP
from dpkit.core.numbers import Number, positive
from dpkit.core.record import NoiseRow, Release
from dpkit.errors import BaselineWarning, DomainError
from dpkit.frame import aggregates, engine, register_query_namespace
from dpkit.frame.compiler import Noise, resolve_target
from dpkit.mechanisms.frontend import charge, charge_record
from dpkit.release.ranges.histogram import HistogramRelease, release_histogram
from dpkit.release.session_tables import (
    GaussianRangesRelease,
    MarginalsRelease,
    _bounded_codes,
    _columns,
    _declare,
    _describe,
    check_histogram_options,
    declared_codec,
    gaussian_mm_query,
    histogram_nd_query,
    in_domain,
    iterative_query,
    marginals_query,
    onthemap_query,
    synthetic_query,
    unit_rows,
)
from dpkit.release.synthetic.domain import marginal_counts
from dpkit.release.synthetic.iterative import ICResult, LinearQueries
from dpkit.release.synthetic.marginals import MarginalWorkload
from dpkit.release.synthetic.onthemap import OnTheMapRelease
from dpkit.release.synthetic.smalldb import (
    MAX_CANDIDATES,
    SmallDBResult,
    plan_smalldb,
    smalldb,
)
from dpkit.release.synthetic.synthesize import decode_records
from dpkit.release.workload import RangeWorkload

__all__ = ["ReleaseNamespace", "release_query_histogram", "pmw_query", "median_query",
           "SessionPMW", "synthetic_query", "marginals_query", "histogram_nd_query",
           "gaussian_mm_query", "iterative_query", "onthemap_query", "in_domain",
           "smalldb_query"]


def release_query_histogram(query: Any, column: str, bins: Sequence[Number],
                            method: str = "auto", *, epsilon: Number, **options: Any
                            ) -> HistogramRelease:
    """Release the histogram of ``column`` (bins [eᵢ, eᵢ₊₁), the last closed) of a session
    query with a :mod:`dpkit.release` algorithm.

    Privacy: the query's rows are bounded to the session's privacy unit first, so one unit
    changes the count vector by at most Δ = its L1 contribution bound (``max_rows``; 1 for
    row-level units) — the sensitivity the compiler derives for ``dp.histogram``. Every
    algorithm is ε′-DP for count vectors at L1 distance 1, hence Δ·ε′-DP at distance Δ
    (group privacy, Dwork & Roth Thm 2.2): it runs at ε′ = ε/Δ and the session is charged
    exactly what a Laplace histogram at ``epsilon`` would be (ε; ρ = ε²/2 in zCDP sessions).

    Parameters
    ----------
    query : dpkit.frame.Query
        An ungrouped query without aggregations (filters and transformations allowed).
    column : str
        A numeric column.
    bins : sequence of numbers
        Increasing bin edges e₀ < … < e_m (m cells); values outside, nulls and NaN are dropped.
    method : str
        A registered algorithm (:func:`dpkit.release.methods`); default "auto"
        (:mod:`dpkit.release.ranges.auto`).
    epsilon : number
        ε > 0 (nats) to spend.
    **options
        ``workload``, ``non_negative``, ``integer`` and the algorithm's own options, as in
        :func:`dpkit.release.release_histogram`, except that ``non_negative`` defaults to
        True here (counts are never negative; ``non_negative=False`` keeps the unbiased
        estimate).

    Returns
    -------
    HistogramRelease
        ``counts`` (m,), ``labels`` the bins, ``edges`` and ``column`` (for range counts by
        value: ``out.count(column=(lo, hi))``), ``epsilon`` the ε charged to the session. Its
        release record (:class:`~dpkit.core.record.Release`: loss, noise row, release id,
        digest) is ``query.session.last_release``. For ``method="auto"`` the
        algorithm it ran is ``options["chose"]`` (``options["chose_by"]`` the rule's path):
        the ledger's description, written at the debit before the choice, names "auto" and
        so its rule (:mod:`dpkit.release.ranges.auto`); the choice is post-processing.

    Raises
    ------
    DomainError, BoundsError, ColumnError
        For a grouped query, existing aggregations, bad bins, an unknown method, an
        option it does not take or a value it refuses (the algorithm's plan-time check) —
        before any data is read, noise drawn or budget spent. BudgetExceededError if ε
        exceeds what remains.
    """
    if query.aggs or query.group_columns:
        raise DomainError("release_histogram runs on an ungrouped query without agg()")
    eps = positive(epsilon, "epsilon", up=False)
    hist = aggregates.histogram(column, bins=bins)
    q = query.agg(hist)
    lf, planned = q.plan(eps)
    stat = planned[0]
    if resolve_target(query.session.measure, eps, None, None).noise is not Noise.LAPLACE:
        raise DomainError("histogram release needs Laplace-calibrated (pure ε) budgets")
    delta_l1 = Fraction(stat.sensitivity)
    session = query.session
    workload = options.get("workload")
    m = len(hist.edges()) - 1
    if workload is not None and tuple(workload.shape) != (m,):
        raise DomainError(f"workload shape {workload.shape} != ({m},) bins")
    check_histogram_options(method, (m,), options)  # the method, its options' names and values
    # counts are never negative: clipped by default (post-processing; non_negative=False
    # keeps the algorithm's unbiased estimate)
    shown_options = {"non_negative": True, **options}
    engine.dry_run(q.lazy(empty=True), None, [stat.stat], session.privacy_unit.column)

    def compute() -> HistogramRelease:
        bounded = session.bounded(q, lf, [])
        raw = engine.compute(bounded, None, [stat.stat], session.privacy_unit.column)
        counts = raw[stat.stat.key][0]
        out = release_histogram(counts, eps / delta_l1, method, **shown_options)
        return replace(out, epsilon=eps, labels=tuple(hist.labels()),
                       edges=tuple(hist.edges()), column=column)

    description = f"{q.describe()} released by {method}"
    # the algorithm splits ε′ = ε/Δ over its own measurements (its docstring gives them):
    # one row, the algorithm at sensitivity Δ, with no single scale
    noise = (NoiseRow(method, None, delta_l1, stat.stat.key),)
    return charge(session, session.total_loss(planned, None), description, compute, noise,
                  unit_bounded=True)


class SessionPMW:
    """Online private multiplicative weights over a session query's rows
    (:func:`pmw_query`): ask counting queries one at a time; most are answered from the
    public hypothesis for free, at most ``max_updates`` spend the budget already debited.

    Attributes
    ----------
    pmw : PrivateMultiplicativeWeights
    codec : Codec
        The declared encoding of the columns (their categories or bins).
    epsilon : Fraction
        ε charged to the session for the whole interaction.
    release : Release or None
        The record of the debit that started the interaction (set when it returns).
    """

    def __init__(self, pmw: Any, codec: Any, epsilon: Fraction) -> None:
        self.pmw, self.codec, self.epsilon = pmw, codec, epsilon
        self.release: Release[Any] | None = None

    def __repr__(self) -> str:
        columns = ", ".join(self.codec.spec)
        return f"SessionPMW(columns=[{columns}], ε = {self.epsilon})"

    def to_record(self) -> dict[str, Any]:
        """What the debit released, for its digest (:func:`~dpkit.core.record.digest_of`):
        nothing of the data yet — ε and the declared domain (answers come later, each from
        the public hypothesis or a budgeted update)."""
        return {"epsilon": self.epsilon, "domain": self.codec.domain}

    def answer(self, weights: Any) -> Any:
        """Answer a counting query given as a 0/1 weight per cell (shape of the domain);
        returns a :class:`~dpkit.release.synthetic.pmw.PMWAnswer`."""
        return self.pmw.answer(weights)

    def count(self, **conditions: Any) -> Any:
        """Answer "how many rows have column ∈ values for every condition": a categorical
        column takes a list of its declared categories; a binned column a (lo, hi) pair
        selecting the bins [eᵢ, eᵢ₊₁) inside [lo, hi]. Columns not named are unrestricted.

        Raises
        ------
        DomainError
            An undeclared column or category, or a range that holds no whole bin.
        """
        from dpkit.release.synthetic.domain import Bins

        masks = []
        for column, how in self.codec.spec.items():
            size = len(how.edges) - 1 if isinstance(how, Bins) else len(how)
            if column not in conditions:
                masks.append(np.ones(size))
                continue
            want = conditions[column]
            if isinstance(how, Bins):
                lo, hi = (float(v) for v in want)
                e = np.asarray(how.edges, dtype=np.float64)
                mask = (e[:-1] >= lo) & (e[1:] <= hi)
                if not mask.any():
                    raise DomainError(f"[{lo:g}, {hi:g}] holds no whole bin of {column!r}")
            else:
                cats = list(how)
                bad = [v for v in want if v not in cats]
                if bad:
                    raise DomainError(f"{bad[0]!r} is not a declared category of {column!r}")
                mask = np.isin(np.arange(size), [cats.index(v) for v in want])
            masks.append(mask.astype(np.float64))
        unknown = set(conditions) - set(self.codec.spec)
        if unknown:
            raise DomainError(f"unknown column {sorted(unknown)[0]!r}; declared: "
                              f"{', '.join(self.codec.spec)}")
        weights = masks[0]
        for m in masks[1:]:
            weights = np.multiply.outer(weights, m)
        return self.pmw.answer(weights)


def pmw_query(query: Any, spec: Mapping[str, Any], *, epsilon: Number, alpha: Number,
              **options: Any) -> SessionPMW:
    """Private multiplicative weights (Hardt & Rothblum 2010) on the rows of a session
    query, for interactive counting queries (:mod:`dpkit.release.synthetic.pmw`).

    Privacy: the rows are bounded to the privacy unit first, so one unit changes at most
    Δ = its row bound (1 for row-level units) records; PMW runs with sensitivity Δ and is
    ε-DP for the whole interaction, however the queries are chosen. The session is debited
    ε (pure budgets) before any row is read; answers after that spend nothing more.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations.
    spec : mapping column → categories or :class:`~dpkit.release.synthetic.domain.Bins`
        The declared domain (never inferred from the data).
    epsilon : number
        ε > 0 (nats).
    alpha : number
        Target error in records (the sparse vector's threshold is α/2).
    **options
        ``max_updates``, ``total_share``, ``beta``, ``max_cells`` of
        :class:`~dpkit.release.synthetic.pmw.PrivateMultiplicativeWeights`.

    Raises
    ------
    DomainError, ColumnError
        A grouped query, aggregations, a bad spec, an option PMW does not take or refuses,
        a domain above ``max_cells`` (before any budget is spent). Rows whose declared
        columns lie outside the declared domain are dropped (like rows outside public group
        keys). BudgetExceededError if ε exceeds what remains.
    """
    from dpkit.release.synthetic.pmw import PrivateMultiplicativeWeights

    return _multiplicative(query, spec, epsilon, alpha, PrivateMultiplicativeWeights,
                           "private multiplicative weights", options)


def median_query(query: Any, spec: Mapping[str, Any], *, epsilon: Number, alpha: Number,
                 size: int = 8, **options: Any) -> SessionPMW:
    """The median mechanism (Roth & Roughgarden, STOC 2010, Alg. 1;
    :class:`~dpkit.release.synthetic.median.MedianMechanism`) on the rows of a session query,
    for interactive counting queries: PMW's sparse-vector skeleton with a set of candidate
    databases of ``size`` records as the hypothesis (exponential in the domain: small
    domains only).

    Privacy: exactly PMW's (:func:`pmw_query`): the rows are bounded to the unit, the
    mechanism runs with sensitivity Δ = the unit's row bound and is ε-DP per unit for the
    whole interaction. The session is debited ε once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations.
    spec : mapping column → categories or :class:`~dpkit.release.synthetic.domain.Bins`
        The declared domain.
    epsilon : number
        ε > 0 (nats).
    alpha : number
        Target error in records.
    size : int
        m, the records of each candidate database (default 8).
    **options
        ``max_candidates`` (default 2·10^6 of the C(|X| + m − 1, m) candidates), and PMW's
        ``max_updates``, ``total_share``, ``beta``, ``max_cells``.

    Returns
    -------
    SessionPMW
        ``result.count(column=[values], …)`` answers; ``result.release`` the debit's record.

    Raises
    ------
    DomainError, ColumnError
        As :func:`pmw_query`, and m < 1 or more than ``max_candidates`` candidates — before
        any budget is spent.
    """
    from dpkit.release.synthetic.median import MedianMechanism

    return _multiplicative(query, spec, epsilon, alpha, MedianMechanism,
                           f"the median mechanism (m={size})", {"size": size, **options})


def smalldb_query(query: Any, spec: Mapping[str, Any], cliques: Sequence[Sequence[str]], *,
                  epsilon: Number, alpha: Number | None = None, size: int | None = None,
                  beta: float = 0.05, max_candidates: int = MAX_CANDIDATES) -> SmallDBResult:
    """SmallDB, the net mechanism (Blum, Ligett & Roth 2008; Dwork & Roth §4.1;
    :func:`~dpkit.release.synthetic.smalldb.smalldb`) on the rows of a session query: a
    database of m records chosen by the exponential mechanism for how well it answers every
    cell of the marginals ``cliques``, released as m rows with its answers (exponential in
    the domain: small domains only).

    Privacy: the rows are bounded to at most M per unit (M the unit's row bound, 1 for
    row-level units), so one unit moves the integer score −max_q |m·q(x) − n·q(y)| by at
    most Δ = M·m (m per record added, removed or substituted); the selection at ε with that
    Δ is ε-DP per unit (McSherry & Talwar 2007; D&R Thm 3.10). The session is debited ε
    (PureDP; ρ = ε²/2 in a zCDP session) once, before any row is read.

    Parameters
    ----------
    query : dpkit.frame.Query
        Ungrouped, without aggregations.
    spec : mapping column → categories or :class:`~dpkit.release.synthetic.domain.Bins`
        The declared domain.
    cliques : sequence of sequences of str
        The marginals whose every cell is a query of Q.
    epsilon : number
        ε > 0 (nats), per unit.
    alpha : number in (0, 1], optional
        Normalised error target: m = ⌈ln|Q|/α²⌉ (D&R Thm 4.2), capped to fit
        ``max_candidates``.
    size : int, optional
        m, declared instead of ``alpha``.
    beta : float
        Failure probability of the reported bounds.
    max_candidates : int
        Largest C(|X| + m − 1, m) enumerated (default 10^6).

    Returns
    -------
    SmallDBResult
        ``table`` (m rows of the declared columns), ``synthetic`` (|X|,) counts, ``answers``
        (q(y)/m per cell of each clique, in order), ``bound(n)``; its release record is
        ``query.session.last_release``.

    Raises
    ------
    DomainError, ColumnError
        A grouped query, aggregations, a bad spec or clique, neither α nor m, a declared m
        or a domain whose enumeration exceeds ``max_candidates`` (the message names the
        fix: fewer cells or a smaller m) — before any budget is spent.
        BudgetExceededError if ε exceeds what remains. Rows outside the declared domain
        are dropped, never an error.

    Warns
    -----
    BaselineWarning
        Before the debit, always: Identity can be more accurate
        (:mod:`dpkit.release.synthetic.smalldb`, "Accuracy against the trivial answer").
    """
    eps = positive(epsilon, "epsilon", up=False)
    codec = _declare(query, spec, "publish.smalldb")
    domain = codec.domain
    workload = MarginalWorkload(domain, tuple(tuple(c) for c in cliques)
                                if not isinstance(cliques, str) else ())
    queries = LinearQueries.from_marginals(workload)
    unit = unit_rows(query.session)
    plan = plan_smalldb(domain.size(), len(queries), eps, alpha=alpha, size=size, beta=beta,
                        sensitivity=unit, max_candidates=max_candidates, advise=False)
    warnings.warn(plan.note, BaselineWarning, stacklevel=3)  # before the debit

    def compute() -> SmallDBResult:
        codes = _bounded_codes(query, spec, codec)
        counts = marginal_counts(codes, domain, domain.attributes).ravel()
        out = smalldb(counts, queries, eps, plan=plan)
        return replace(out, table=decode_records(codec, out.records(domain)))

    names = "; ".join(",".join(c) for c in workload.cliques)
    description = _describe(query, f"publish.smalldb(m={plan.size}, {plan.candidates} "
                                   f"candidates; {names}; {_columns(domain)}; unit ≤ {unit} "
                                   f"rows, Δ = {plan.score_sensitivity})")
    return charge(query.session, PureDP(eps), description, compute, (plan.noise_row(),),
                  unit_bounded=True)


def _multiplicative(query: Any, spec: Mapping[str, Any], epsilon: Number, alpha: Number,
                    mechanism: Any, name: str, options: Mapping[str, Any]) -> SessionPMW:
    """PMW or the median mechanism on the bounded rows, every check before the debit."""
    from dpkit.release.synthetic.domain import Domain, records

    if query.aggs or query.group_columns:
        raise DomainError("pmw runs on an ungrouped query without agg()")
    if not spec:
        raise DomainError("declare at least one column in spec")
    eps = positive(epsilon, "epsilon", up=False)
    positive(alpha, "alpha")
    sizes = {c: len(v.edges) - 1 if hasattr(v, "edges") else len(v) for c, v in spec.items()}
    cells = int(np.prod([max(s, 1) for s in sizes.values()], dtype=object))
    if any(s < 1 for s in sizes.values()):
        raise DomainError("every declared column needs at least one category or bin")
    if cells > int(options.get("max_cells", 1 << 22)):
        raise DomainError(f"PMW keeps a dense hypothesis: {cells} cells exceed max_cells")
    domain = Domain(tuple(sizes), tuple(sizes.values()))  # validates names
    q = query.agg(aggregates.count())
    lf, planned = q.plan(eps)
    if resolve_target(query.session.measure, eps, None, None).noise is not Noise.LAPLACE:
        raise DomainError("pmw needs Laplace-calibrated (pure ε) budgets")
    session = query.session
    unit = session.privacy_unit
    delta_rows = unit.bounds.single_group().max_rows if unit.column is not None else 1

    # everything that can be checked is checked now, before the debit, on zero rows
    try:  # the options by the mechanism's own allow-list and checks
        mechanism.check(domain, eps, alpha, sensitivity=delta_rows, **options)
    except TypeError as exc:
        raise DomainError(f"{name}: {exc}") from None
    engine.check_columns(lf.collect_schema(), list(spec))
    codec = declared_codec(engine.to_polars(lf.select(list(spec)).head(0).collect()), spec)

    def compute() -> SessionPMW:
        bounded = engine.bound_contributions(lf, unit, list(spec), [])
        table = engine.to_polars(bounded.collect())
        # rows outside the declared domain are dropped (a filter: 1-stable), never an error
        codes = records(codec.encode(table.filter(in_domain(spec))), codec.domain)
        pmw = mechanism(codes, codec.domain, eps, alpha, sensitivity=delta_rows, **options)
        return SessionPMW(pmw, codec, eps)

    description = f"{q.describe()} via {name} (α={alpha})"
    # nothing is released at the debit (answers come later, each from the hypothesis)
    noise = (NoiseRow(name, None, Fraction(delta_rows), "counting queries"),)
    result, record = charge_record(session, session.total_loss(planned, None), description,
                                   compute, noise, unit_bounded=True)
    result.release = record
    return result


@register_query_namespace("publish")
class ReleaseNamespace:
    """``query.publish``: the :mod:`dpkit.release` algorithms on a session query.

    ``session.query().filter(…).publish.histogram("age", bins, "hb", epsilon=1)``,
    ``….publish.histogram_nd(spec, "quadtree", epsilon=1)``, ``….publish.gaussian_mm("age",
    bins, epsilon=1)``, ``….publish.pmw(spec, epsilon=1, alpha=50)``,
    ``….publish.median(spec, epsilon=1, alpha=50)``, ``….publish.smalldb(spec, cliques,
    epsilon=1, alpha=0.1)``, ``….publish.iterative(spec, cliques,
    epsilon=1)``, ``….publish.synthetic(spec, method="mst", epsilon=1)``,
    ``….publish.onthemap("home", "work", origins=…, destinations=…, m=100, epsilon=1,
    delta=1e-6)``, ``….publish.marginals(spec, [("a", "b")], epsilon=1)`` or
    ``….publish.diffgen(taxonomies, "income", classes, epsilon=1)``; each bounds the rows to the
    session's privacy unit and debits the session once, before any row is read (see
    :func:`release_query_histogram`, :func:`pmw_query`, :func:`median_query` and the
    functions of :mod:`~dpkit.release.session_tables`).

    Attributes
    ----------
    query : dpkit.frame.Query
        The query the namespace was read from.
    """

    def __init__(self, query: Any) -> None:
        self.query = query

    def histogram(self, column: str, bins: Sequence[Number], method: str = "auto", *,
                  epsilon: Number, **options: Any) -> HistogramRelease:
        """Release the histogram of ``column`` over the bin edges ``bins`` once, with a
        non-interactive algorithm (``method``: "identity", "hb", "privelet", …; see
        :func:`dpkit.release.methods`), so that any range query is answered from it for
        free. Spends ``epsilon`` (nats); parameters, privacy argument and errors as
        :func:`release_query_histogram`."""
        return release_query_histogram(self.query, column, bins, method, epsilon=epsilon,
                                       **options)

    def pmw(self, spec: Mapping[str, Any], *, epsilon: Number, alpha: Number,
            **options: Any) -> SessionPMW:
        """Private multiplicative weights over the query's rows for interactive counting
        queries (``result.count(column=[values], …)``), debiting ``epsilon`` (nats) once, now;
        parameters, privacy argument and errors as :func:`pmw_query`."""
        return pmw_query(self.query, spec, epsilon=epsilon, alpha=alpha, **options)

    def synthetic(self, spec: Mapping[str, Any], *, method: str = "auto", epsilon: Number,
                  delta: Number = Fraction(1, 10 ** 9), rows: int | None = None,
                  **options: Any) -> pl.DataFrame:
        """A private synthetic table of the query's declared columns (``method``: "auto",
        "mst", "aim", "mwem", "independent"), debiting ``epsilon`` (nats; with ``delta`` for
        MST and AIM) per privacy unit once, now; parameters, privacy argument (the unit's
        row bound M: ε/M for the pure methods, ρ/M² for the zCDP ones) and errors as
        :func:`~dpkit.release.session_tables.synthetic_query`."""
        return synthetic_query(self.query, spec, method=method, epsilon=epsilon, delta=delta,
                               rows=rows, **options)

    def marginals(self, spec: Mapping[str, Any], cliques: Sequence[Sequence[str]], *,
                  epsilon: Number, consistent: bool | str = True,
                  allocation: str = "uniform", objective: str = "max") -> MarginalsRelease:
        """Noisy marginals of the query's declared columns (one per clique), debiting
        ``epsilon`` (nats) per privacy unit once, now (discrete Laplace at L1 sensitivity
        M·m for m marginals and a unit of at most M rows; ``allocation="datacube"``: Ding
        et al. 2011's cuboid selection and budget split); parameters, privacy argument and
        errors as :func:`~dpkit.release.session_tables.marginals_query`."""
        return marginals_query(self.query, spec, cliques, epsilon=epsilon,
                               consistent=consistent, allocation=allocation,
                               objective=objective)

    def histogram_nd(self, spec: Mapping[str, Any], method: str = "auto", *,
                     epsilon: Number, **options: Any) -> HistogramRelease:
        """A histogram over one to four declared columns (``spec``: column → categories or
        ``Bins``) released once by a range-query algorithm for its rank (``method``:
        "identity", "quadtree", "ug", "ag", "kdtree", "dawa", "privelet", "mm", "hdmm",
        "auto", …), debiting ``epsilon`` (nats) per unit once, now (the algorithm at ε/M for
        a unit of at most M rows); parameters, privacy argument and errors as
        :func:`~dpkit.release.session_tables.histogram_nd_query`."""
        return histogram_nd_query(self.query, spec, method, epsilon=epsilon, **options)

    def gaussian_mm(self, column: str, bins: Sequence[Number], *, epsilon: Number,
                    delta: Number = Fraction(1, 10 ** 9),
                    workload: RangeWorkload | None = None,
                    reuse: bool = True) -> GaussianRangesRelease:
        """The histogram of ``column`` over the edges ``bins`` released by the Gaussian
        matrix mechanism (strategy optimised for the workload's L2 error), debiting
        (``epsilon``, ``delta``) or ρ per unit once, now (ρ/M² for a unit of at most M
        rows); parameters, privacy argument and errors as
        :func:`~dpkit.release.session_tables.gaussian_mm_query`."""
        return gaussian_mm_query(self.query, column, bins, epsilon=epsilon, delta=delta,
                                 workload=workload, reuse=reuse)

    def median(self, spec: Mapping[str, Any], *, epsilon: Number, alpha: Number,
               size: int = 8, **options: Any) -> SessionPMW:
        """The median mechanism over the query's rows for interactive counting queries
        (``result.count(column=[values], …)``), debiting ``epsilon`` (nats) once, now;
        parameters, privacy argument and errors as :func:`median_query`."""
        return median_query(self.query, spec, epsilon=epsilon, alpha=alpha, size=size,
                            **options)

    def smalldb(self, spec: Mapping[str, Any], cliques: Sequence[Sequence[str]], *,
                epsilon: Number, alpha: Number | None = None, size: int | None = None,
                **options: Any) -> SmallDBResult:
        """SmallDB (the net mechanism): m synthetic rows chosen by the exponential mechanism
        for every cell of the marginals ``cliques``, debiting ``epsilon`` (nats) per unit
        once, now (Δ = M·m for a unit of at most M rows); parameters, privacy argument and
        errors as :func:`smalldb_query`."""
        return smalldb_query(self.query, spec, cliques, epsilon=epsilon, alpha=alpha,
                             size=size, **options)

    def diffgen(self, taxonomies: Mapping[str, Any], target: str, classes: Sequence[str], *,
                epsilon: Number, steps: int = 10, score: str = "max",
                variant: str = "diffgen", **options: Any) -> Any:
        """DiffGen's noisy generalised contingency table of the query's declared attributes
        and class (top-down specialisation over declared taxonomies; Mohammed et al., KDD
        2011, Alg. 1), debiting ``epsilon`` (nats) per unit once, now (ε/M for a unit of at
        most M rows); parameters, privacy argument and errors as
        :func:`~dpkit.release.generalization.diffgen.diffgen_query`."""
        from dpkit.release.generalization.diffgen import diffgen_query

        return diffgen_query(self.query, taxonomies, target, classes, epsilon=epsilon,
                             steps=steps, score=score, variant=variant, **options)

    def iterative(self, spec: Mapping[str, Any], cliques: Sequence[Sequence[str]], *,
                  epsilon: Number, distinguisher: str = "exponential", updater: str = "mw",
                  T: int = 10, **options: Any) -> ICResult:
        """Every cell of the marginals ``cliques`` answered by the iterative construction
        (distinguisher, updater, T rounds), debiting ``epsilon`` (nats) per unit once, now
        (ε/M for a unit of at most M rows); parameters, privacy argument and errors as
        :func:`~dpkit.release.session_tables.iterative_query`."""
        return iterative_query(self.query, spec, cliques, epsilon=epsilon,
                               distinguisher=distinguisher, updater=updater, T=T, **options)

    def onthemap(self, origin: str, destination: str, *, origins: Sequence[Any],
                 destinations: Sequence[Any], m: int | Mapping[Any, int], epsilon: Number,
                 delta: Number, domains: Mapping[Any, Sequence[Any]] | None = None
                 ) -> OnTheMapRelease:
        """A synthetic origin → destination table by the OnTheMap synthesizer (one worker =
        one row), debiting (``epsilon``, ``delta``) once, now; parameters, privacy argument
        ((ε, δ)-probabilistic DP ⇒ (ε, δ)-DP per worker) and errors as
        :func:`~dpkit.release.session_tables.onthemap_query`."""
        return onthemap_query(self.query, origin, destination, origins=origins,
                              destinations=destinations, m=m, epsilon=epsilon, delta=delta,
                              domains=domains)
