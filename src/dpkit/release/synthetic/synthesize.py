"""Synthetic tables: :func:`synthesize` turns a Polars table with declared column domains
into a private synthetic table of the same columns and types; :func:`evaluate` scores a
synthetic table against the real one (k-way marginal total variation, workload error).

Columns are declared, never inferred (DESIGN §3): ``spec`` maps each column to its list of
categories or to :class:`~dpkit.release.synthetic.domain.Bins` (numeric columns; a synthetic value
is its bin's midpoint). Methods:

- ``"auto"`` (default): one of the others, by :func:`choose_method` (declared domain and ε
  only; fitted and checked leave-one-dataset-out in bench/aim_scale.py).
- ``"mst"``: :mod:`dpkit.release.synthetic.mst`, ρ-zCDP with ρ the largest whose (ε, δ)
  conversion (Canonne, Kamath & Steinke 2020, Cor. 13) is within (ε, δ); needs ``mbi``.
- ``"aim"``: :mod:`dpkit.release.synthetic.aim`, same accounting; needs ``mbi``.
- ``"mwem"``: :func:`dpkit.release.synthetic.mwem.mwem` on :func:`mwem_workload` (all 3-way
  marginals when the declared domain keeps them small, else all 2-way), pure ε-DP (δ unused).
- ``"independent"``: the 1-way-only baseline — every column's noisy marginal (discrete
  Laplace, ε/d each: ε-DP), columns sampled independently.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, largest_rho
from dpkit.core.numbers import Number, positive, to_fraction
from dpkit.core.record import NoiseRow
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.mechanisms.frontend import AccountantLike, accountant_of, charge
from dpkit.release.synthetic.domain import Codec, Domain, marginal_counts
from dpkit.release.synthetic.marginals import MarginalWorkload, total_variation
from dpkit.release.synthetic.mwem import default_rounds

__all__ = ["synthesize", "synthesize_records", "decode_records", "evaluate", "METHODS",
           "OPTIONS", "check_options", "synthetic_loss", "synthetic_noise",
           "independent_sample", "mwem_workload", "choose_method", "MWEM_3WAY_CELLS",
           "DEFAULT_RULE", "PURE_RULE"]

METHODS = ("auto", "mst", "aim", "mwem", "independent")
MWEM_3WAY_CELLS = 64


def mwem_workload(domain: Domain, max_cells: int = MWEM_3WAY_CELLS) -> MarginalWorkload:
    """The workload of ``synthesize(method="mwem")``, a function of the declared domain
    only: all 3-way marginals when the largest of them (the three largest attribute sizes
    multiplied) has at most ``max_cells`` cells (default 64, e.g. 4 × 4 × 4 or binary
    attributes), else all 2-way marginals (all d-way with fewer than three attributes).

    Why (bench/results/aim_scale.md, mean of the 2-way and 3-way TV, 2 runs a cell): on
    NLTCS (16 binary attributes, 3-way marginals of 8 cells) the 3-way workload beats the
    2-way one 0.053 to 0.178 at ε = 0.1 and 0.010 to 0.023 at ε = 1 (issue 18: the 2-way
    workload barely beat the independent baseline on 3-way marginals); on PUMS, bike
    sharing and MovieLens (largest 3-way marginals 1,280, 768 and 735 cells) the all-3-way
    workload is worse in all six cells (1.02–1.36× the 2-way workload's error). The cap 64
    is a cut in that gap (8 to 735 cells), not fitted.

    Raises
    ------
    DomainError
        ``max_cells`` < 1.
    """
    if max_cells < 1:
        raise DomainError("max_cells must be positive")
    d = len(domain.attributes)
    if d < 3:
        return MarginalWorkload.all_kway(domain, d)
    largest = math.prod(sorted(domain.sizes)[-3:])
    return MarginalWorkload.all_kway(domain, 3 if largest <= max_cells else 2)


# synthesize()'s default: (feature, threshold, method at or below, method above), fitted by
# bench/aim_scale.py on 7 data sets × ε ∈ {0.1, 1} (results/aim_scale.md, with the
# leave-one-dataset-out table; `report` prints these tuples and
# tests/test_release_synthesize.py checks that they are its fit); the second applies
# without Private-PGM (``mbi``)
DEFAULT_RULE = ("log2_cells", 43.8, "aim", "mst")
PURE_RULE = ("log2_max_pair", 7.26, "mwem", "independent")


def choose_method(domain: Domain, epsilon: Number, *, have_mbi: bool | None = None) -> str:
    """The method ``synthesize(method="auto")`` runs, from public facts only: the declared
    domain and ε (so the choice spends no budget and is made before any).

    Rule (:data:`DEFAULT_RULE`): AIM when the declared domain has at most 2^43.8 ≈ 1.5·10^13
    cells, else MST; without Private-PGM (:data:`PURE_RULE`): MWEM when the largest 2-way
    marginal has at most 2^7.26 ≈ 153 cells, else the independent baseline; with fewer than
    two attributes, the independent baseline. The rules are data, refitted by
    ``python bench/aim_scale.py report``.

    Evidence (bench/results/aim_scale.md): of the constant rules and the one-threshold rules
    on a public feature (d, log2 of the domain's cells, log2 of the largest 2-way marginal's
    cells, ε), the one with the smallest mean log ratio to the best method over 14 cells
    (NLTCS, Adult, salary, NIST taxi, PUMS, bike sharing, MovieLens; ε = 0.1 and 1; error
    the mean of the 2-way and 3-way TV; a run over 300 s counts as a failure). AIM is the
    most accurate in 11 of them; the threshold sits between salary (2^43.6 cells) and NIST
    taxi (2^44.1), where AIM at ε = 1 ran over the time limit (on a loaded machine), so it
    is a limit on AIM's run time more than on its accuracy: on Adult (2^59 cells) it sends
    AIM's better tables to MST (1.12× and 1.27× AIM's error). Held out one data set at a
    time, the rule fitted on the others was the best in 7 of 14 cells and within 1.25× of
    it in 9. The other losses: the two data sets of ≤ 1,000 records at ε = 0.1, where the
    independent baseline is best (AIM 1.6× and 2.0×; the record count is private, so no
    rule on public facts sees it); salary at ε = 1, where the rule fitted without salary
    (on d) chose MST (2.2×); NIST taxi at ε = 1, where the rule fitted without it chose
    AIM, which ran over the limit.

    Parameters
    ----------
    domain : Domain
    epsilon : number
        ε > 0 (a feature the rule may use; the shipped rules do not).
    have_mbi : bool, optional
        Whether Private-PGM is importable (default: try the import).

    Returns
    -------
    str
        One of "aim", "mst", "mwem", "independent".
    """
    positive(epsilon, "epsilon", up=False)
    d = len(domain.attributes)
    if d < 2:
        return "independent"
    if have_mbi is None:
        try:
            import mbi  # noqa: F401
        except ImportError:  # pragma: no cover - depends on the environment
            have_mbi = False
        else:
            have_mbi = True
    features = {"d": float(d), "log2_cells": math.log2(domain.size()),
                "log2_max_pair": math.log2(math.prod(sorted(domain.sizes)[-2:])),
                "epsilon": float(epsilon)}
    feature, threshold, low, high = DEFAULT_RULE if have_mbi else PURE_RULE
    return low if features[feature] <= threshold else high


def _sample_cells(weights: np.ndarray, n: int) -> np.ndarray:
    """``n`` draws from the distribution ∝ max(weights, 0) with the CSPRNG
    (post-processing); uniform if no mass is left."""
    from dpkit.core import rng

    w = np.maximum(np.asarray(weights, dtype=np.float64), 0)
    if w.sum() <= 0:
        w = np.ones_like(w)
    cdf = np.cumsum(w)
    u = rng.uniforms(n) * cdf[-1]
    return np.minimum(np.searchsorted(cdf, u, side="right"), cdf.size - 1)


def independent_sample(codes: np.ndarray, domain: Domain, epsilon: Number | None = None,
                       rows: int | None = None, *, rho: Number | None = None) -> np.ndarray:
    """The 1-way baseline: every 1-way marginal measured, then independent columns.

    With ``epsilon``: each of the d marginals gets discrete Laplace noise of scale d/ε (one
    record changes one cell of each: L1 sensitivity d, so ε-DP). With ``rho`` (the
    accounting of MST and AIM, for a like-for-like baseline): each gets discrete Gaussian
    noise at ρ/d (L2 sensitivity 1 each; zCDP composes to ρ; CKS20). ``rows`` defaults to
    the mean of the noisy marginals' totals.

    Raises
    ------
    DomainError
        Neither or both of ``epsilon`` and ``rho``, or either ≤ 0.
    """
    if (epsilon is None) == (rho is None):
        raise DomainError("give exactly one of epsilon (pure DP) and rho (zCDP)")
    d = len(domain.attributes)
    truth = [marginal_counts(codes, domain, [a]) for a in domain.attributes]
    if rho is not None:
        share = positive(rho, "rho", up=False) / d
        noisy = [frontend.noisy(t, 1, ZCDP(share)).value for t in truth]
    elif epsilon is not None:
        eps = positive(epsilon, "epsilon", up=False)
        noisy = [frontend.noisy(t, Fraction(d), eps).value for t in truth]
    n = int(round(np.mean([v.sum() for v in noisy]))) if rows is None else int(rows)
    n = max(n, 0)
    return np.column_stack([_sample_cells(v, n) for v in noisy]) if n else np.zeros(
        (0, d), dtype=np.int64)


def _rho(epsilon: Fraction, delta: Number) -> Fraction:
    dlt = to_fraction(delta)
    if not 0 < dlt < 1:
        raise DomainError(f"delta must be in (0, 1) for MST/AIM; got {delta!r}")
    return largest_rho(epsilon, dlt)


# the options each method accepts (an allow-list, checked before any budget is spent)
OPTIONS: dict[str, frozenset[str]] = {
    "mst": frozenset({"iters"}),
    "aim": frozenset({"workload", "max_size", "rounds", "iters", "final_iters"}),
    "mwem": frozenset({"workload", "rounds", "total_share", "passes", "max_cells"}),
    "independent": frozenset(),
}


def check_options(method: str, domain: Domain, options: Mapping[str, Any]) -> None:
    """Check a resolved method's options by allow-list (:data:`OPTIONS`), and the values
    that would otherwise raise once the budget is spent.

    Raises
    ------
    DomainError, ColumnError
        An option the method does not take, a count that is not a positive integer, a
        share outside (0, 1), a workload naming undeclared columns, AIM's rounds too few
        for its one-way measurements.
    """
    unknown = set(options) - OPTIONS[method]
    if unknown:
        allowed = ", ".join(sorted(OPTIONS[method])) or "none"
        raise DomainError(f"unknown option {sorted(unknown)[0]!r} for {method}; "
                          f"allowed: {allowed}")
    for name in ("iters", "rounds", "passes", "final_iters", "max_cells"):
        value = options.get(name)
        if value is not None and (isinstance(value, bool | np.bool_) or not isinstance(
                value, int | np.integer) or value < 1):  # NumPy integers are integers
            raise DomainError(f"{name} must be a positive integer")
    if "total_share" in options and not 0 < to_fraction(options["total_share"]) < 1:
        raise DomainError("total_share must be in (0, 1)")
    if "max_size" in options and not float(options["max_size"]) > 0:
        raise DomainError("max_size must be positive")
    if options.get("workload") is not None:
        MarginalWorkload(domain, tuple(tuple(c) for c in options["workload"]))
    if method == "aim" and options.get("rounds") is not None:
        # AIM measures its k one-way marginals at 0.9ρ/T each first: that needs T ≥ 0.9k
        cliques = options.get("workload") or itertools.combinations(domain.attributes, 2)
        k = len({a for c in cliques for a in c})
        if 9 * k > 10 * options["rounds"]:
            raise DomainError(f"aim: rounds must be at least 0.9 × the {k} measured columns")


def synthetic_loss(measure: type, method: str, epsilon: Fraction, delta: Number
                   ) -> tuple[PrivacyLoss, Fraction]:
    """What a synthetic release at (ε, δ) is charged in an accountant's ``measure``, and the
    method's own budget: (PureDP(ε), ε) for the pure methods; for MST and AIM, ρ = the
    largest ρ whose (ε, δ) conversion is within (ε, δ) (Canonne, Kamath & Steinke 2020,
    Cor. 13) and (ZCDP(ρ) in a zCDP measure, else ApproxDP(ε, δ); ρ).

    Raises
    ------
    DomainError
        MST/AIM for a pure-ε measure, or δ outside (0, 1).
    """
    if method not in ("mst", "aim"):
        return PureDP(epsilon), epsilon
    if measure is PureDP:
        raise DomainError(f"{method} is ρ-zCDP, not pure ε-DP: use an ApproxDP or ZCDP "
                          "budget, or method='mwem'")
    rho = _rho(epsilon, delta)
    return (ZCDP(rho) if measure is ZCDP else ApproxDP(epsilon, to_fraction(delta))), rho


def synthetic_noise(method: str, d: int, unit_rows: int, own: Fraction,
                    options: Mapping[str, Any]) -> tuple[NoiseRow, ...]:
    """The method's internal budget split as release-record noise rows (no single scale: the
    split is in the name), each at sensitivity ``unit_rows`` (M, the rows one privacy unit
    can change; the method then runs at ε/M or ρ/M²). ``own`` is the method's budget per
    unit (ε, or ρ for MST and AIM); d the number of declared columns."""
    sens = Fraction(unit_rows)
    if method == "mst":
        return (NoiseRow(f"mst: {d} 1-way marginals, discrete Gaussian, ρ/3 (ρ/{3 * d} each)",
                         None, sens, "1-way marginals"),
                NoiseRow(f"mst: spanning tree, {d - 1} exponential draws, ρ/3", None, sens,
                         "2-way selection"),
                NoiseRow(f"mst: {d - 1} 2-way marginals, discrete Gaussian, ρ/3", None, sens,
                         "2-way marginals"))
    if method == "aim":
        rounds = options.get("rounds") or 16 * d
        return (NoiseRow(f"aim: {d} 1-way marginals, discrete Gaussian, 0.9ρ/{rounds} each",
                         None, sens, "1-way marginals"),
                NoiseRow(f"aim: adaptive rounds, exponential 0.1ρ/{rounds} + discrete "
                         f"Gaussian 0.9ρ/{rounds} (annealed) until ρ is spent", None, sens,
                         "workload marginals"))
    if method == "mwem":
        share = to_fraction(options.get("total_share", Fraction(1, 20)))
        rounds = options.get("rounds") or default_rounds(own / unit_rows)
        return (NoiseRow(f"mwem: record count, discrete Laplace, {share}·ε", None, sens,
                         "record count"),
                NoiseRow(f"mwem: {rounds} rounds, exponential + discrete Laplace, "
                         f"(1 − {share})·ε/{2 * rounds} each", None, sens,
                         "workload marginals"))
    return (NoiseRow(f"independent: {d} 1-way marginals, discrete Laplace, ε/{d} each",
                     None, sens, "1-way marginals"),)


def synthesize_records(codes: np.ndarray, domain: Domain, method: str, *,
                       epsilon: Number | None = None, rho: Number | None = None,
                       rows: int | None = None, progress: bool = False, **options: Any
                       ) -> np.ndarray:
    """Synthetic records from encoded records: the primitive under :func:`synthesize` and
    ``query.publish.synthetic`` (:mod:`dpkit.release.session_tables`).

    A primitive on already-bounded data: it is (ε-DP or ρ-zCDP) for records that differ in
    one row and charges nobody; a curator's per-person data is bounded and charged by the
    session (``query.publish.synthetic``).

    Parameters
    ----------
    codes : ndarray of int, shape (n, d)
        Records as codes of ``domain`` (:func:`dpkit.release.synthetic.domain.records`).
    domain : Domain
    method : {"mst", "aim", "mwem", "independent"}
        Already resolved ("auto" is :func:`choose_method`'s, before any budget is spent).
    epsilon : number, optional
        ε > 0 (nats) for the pure methods ("mwem", "independent"): ε-DP.
    rho : number, optional
        ρ > 0 for "mst" and "aim": ρ-zCDP.
    rows : int, optional
        Records to draw (default: the method's noisy record count).
    progress : bool
        A progress bar (Rich, on standard error).
    **options
        Passed to the method (``workload``, ``rounds``, ``iters``, …).

    Returns
    -------
    ndarray of int, shape (rows, d)
        Synthetic records as codes of ``domain``.

    Raises
    ------
    DomainError
        Unknown method, or the budget the method does not take (ε for "mst"/"aim", ρ for
        the others). ImportError for "mst"/"aim" without ``mbi``.
    """
    if method in ("mst", "aim"):
        from dpkit.release.synthetic.mst import mst, require_mbi

        if rho is None:
            raise DomainError(f"{method} spends ρ (zCDP): give rho")
        require_mbi()
        if method == "mst":
            return mst(codes, domain, rho, iters=options.pop("iters", 1000),
                       progress=progress).sample(rows)
        from dpkit.release.synthetic.aim import aim

        return aim(codes, domain, rho, progress=progress, **options).sample(rows)
    if method not in METHODS or method == "auto" or epsilon is None:
        raise DomainError(f"method {method!r} needs a resolved method and epsilon")
    eps = positive(epsilon, "epsilon", up=False)
    if method == "mwem":
        from dpkit.release.synthetic.mwem import mwem

        workload = options.pop("workload", None)
        workload = mwem_workload(domain) if workload is None else MarginalWorkload(
            domain, tuple(tuple(c) for c in workload))
        result_mw = mwem(codes, workload, eps, progress=progress, **options)
        n = max(result_mw.noisy_total, 0) if rows is None else int(rows)
        return result_mw.hypothesis.sample(n)
    return independent_sample(codes, domain, eps, rows)


def synthesize(table: pl.DataFrame, spec: Mapping[str, Any], *, method: str = "auto",
               epsilon: Number = 1, delta: Number = Fraction(1, 10 ** 9),
               rows: int | None = None, progress: bool = False,
               accountant: AccountantLike = None,
               **options: Any) -> pl.DataFrame:
    """A private synthetic version of ``table`` (the declared columns).

    A primitive on already-bounded data: every row is one individual. With ``accountant``
    the release is charged to it once, before the data is read by the method (row-level
    unit); without, nothing is charged (the caller composes). For per-person data (several
    rows a person), use ``session.query().publish.synthetic(spec, …)``
    (:func:`dpkit.release.session_tables.synthetic_query`), which bounds each person's rows
    first.

    Parameters
    ----------
    table : polars.DataFrame
        One record per row (the privacy unit: one row).
    spec : mapping column → categories (sequence) or :class:`~dpkit.release.synthetic.domain.Bins`
        The declared domain of every synthesised column (an undeclared value raises).
    method : {"auto", "mst", "aim", "mwem", "independent"}
        "auto" (default): :func:`choose_method` of the declared domain and ε.
    epsilon : number
        ε > 0 in nats.
    delta : number
        δ for MST/AIM ((ε, δ)-DP via zCDP); ignored by the pure methods.
    rows : int, optional
        Rows to synthesise (default: the method's noisy record count).
    progress : bool
        Show a progress bar (Rich, on standard error) for MST (measurement, then the
        inference's iterations), AIM (the budget spent) and MWEM (the rounds).
    accountant : Accountant, PrivacyFilter or Session, optional
        Charged once (:func:`synthetic_loss`: ε, or (ε, δ) / ρ for MST and AIM) through
        its ``run``; the release record (the method's split as noise rows) is its ``last``.
    **options
        Passed to the method (allow-list :data:`OPTIONS`: e.g. ``rounds`` or ``workload``
        for MWEM — default :func:`mwem_workload` —, ``iters`` for MST/AIM inference).

    Returns
    -------
    polars.DataFrame
        The declared columns in their original dtypes (bins → midpoints).

    Raises
    ------
    DomainError
        Unknown method or option, bad ε/δ, undeclared values (all before any budget is
        spent); ImportError for MST/AIM without mbi; BudgetExceededError from the
        accountant.

    Notes
    -----
    Privacy: ε-DP (MWEM, "independent") or ρ-zCDP with (ε, δ) as above (MST, AIM) for
    tables that differ in one row (the methods' modules give the arguments).
    """
    if method not in METHODS:
        raise DomainError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    eps = positive(epsilon, "epsilon", up=False)
    codec = Codec.declare(table, spec)
    domain = codec.domain
    codes = codec.encode(table).select(domain.attributes).to_numpy().astype(np.int64)
    target = None if accountant is None else accountant_of(accountant)
    if method == "auto":  # a pure-ε accountant takes the pure rule
        pure = target is not None and target.measure is PureDP
        method = choose_method(domain, eps, have_mbi=False) if pure else choose_method(
            domain, eps)
    check_options(method, domain, options)
    rho = _rho(eps, delta) if method in ("mst", "aim") else None

    def run() -> pl.DataFrame:
        synthetic = synthesize_records(codes, domain, method, epsilon=eps, rho=rho,
                                       rows=rows, progress=progress, **options)
        return decode_records(codec, synthetic)

    if target is None:
        return run()
    loss, own = synthetic_loss(target.measure, method, eps, delta)
    noise = synthetic_noise(method, len(domain.attributes), 1, own, options)
    columns = ", ".join(domain.attributes)
    return charge(target, loss, f"synthesize({method}; {columns})", run, noise)


def decode_records(codec: Codec, synthetic: np.ndarray) -> pl.DataFrame:
    """Codes (n, d) back to the declared columns in their dtypes (bins → midpoints)."""
    domain = codec.domain
    frame = pl.DataFrame({a: synthetic[:, j] for j, a in enumerate(domain.attributes)},
                         schema={a: pl.Int64 for a in domain.attributes})
    return codec.decode(frame)


def evaluate(real: pl.DataFrame, synthetic: pl.DataFrame, spec: Mapping[str, Any], *,
             ways: Sequence[int] = (1, 2, 3), max_marginals: int = 400,
             workload: Sequence[Sequence[str]] | None = None) -> dict[str, float]:
    """Mean total variation distance between the real and synthetic k-way marginals.

    Returns ``{"tv_1way": …, "tv_2way": …, "tv_3way": …}`` (each the mean over all k-subsets
    of the declared columns, or ``max_marginals`` of them at a fixed stride) and, with a
    ``workload`` of cliques, ``"workload_tv"`` (mean) and ``"workload_max_tv"``. Both
    tables are encoded with the same declared ``spec``; this compares against the real data
    and is not private — it is for evaluation."""
    codec = Codec.declare(real, spec)
    domain = codec.domain
    a = codec.encode(real).select(domain.attributes).to_numpy().astype(np.int64)
    b = Codec.declare(synthetic, spec).encode(synthetic).select(domain.attributes).to_numpy(
    ).astype(np.int64)
    if b.shape[0] == 0:
        raise DomainError("the synthetic table is empty")
    out: dict[str, float] = {}
    for k in ways:
        subsets = list(itertools.combinations(domain.attributes, int(k)))
        if not subsets:
            continue
        stride = max(1, math.ceil(len(subsets) / max_marginals))
        tvs = [total_variation(marginal_counts(a, domain, c), marginal_counts(b, domain, c))
               for c in subsets[::stride]]
        out[f"tv_{k}way"] = float(np.mean(tvs))
    if workload:
        tvs = [total_variation(marginal_counts(a, domain, c), marginal_counts(b, domain, c))
               for c in workload]
        out["workload_tv"] = float(np.mean(tvs))
        out["workload_max_tv"] = float(np.max(tvs))
    return out
