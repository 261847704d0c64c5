"""The front-end kit: how every front end outside the core charges a budget and draws noise
(DESIGN.md §2, "One road"; docs/architecture.md).

Three doors, each the only one of its kind outside :mod:`dpkit.mechanisms` and the
accountants:

- :func:`charge` — debit a loss through the one accountant
  (:meth:`~dpkit.core.accountant.Accountant.run`), then compute; a
  :class:`~dpkit.core.record.Release` is built for an unaccounted run too;
- :func:`noisy` — values released through the :class:`~dpkit.core.Measurement` that
  :func:`~dpkit.mechanisms.make_noise` returns, with its :class:`~dpkit.core.record.NoiseRow`;
- :func:`select` — an exponential-mechanism pick, or k picks by peeling, through
  :func:`~dpkit.mechanisms.make_selection`, with its noise row.

:func:`noise_row` and :func:`selection_row` give the row of a calibration without drawing
(the noise plan written with the debit, or a scale to *report* accuracy with). A front end
reads a scale off those rows only; it never draws with it.

``AccountantLike`` types every public ``accountant=`` parameter: an
:class:`~dpkit.core.accountant.Accountant`, a :class:`~dpkit.core.compose.PrivacyFilter`, an
object with an ``accountant`` attribute (a :class:`~dpkit.frame.Session`, typed structurally:
``frame`` is below this package) or None (unaccounted: the caller composes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from fractions import Fraction
from typing import Any, NamedTuple, Protocol, TypeAlias, TypeVar, cast

import numpy as np

from dpkit.core import rng
from dpkit.core.accountant import Accountant, as_accountant
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, convert
from dpkit.core.numbers import Number, Numbers, integer, positive, to_fraction
from dpkit.core.record import NoiseRow, Release, digest_of, read_only
from dpkit.errors import DomainError, MeasureError
from dpkit.mechanisms.calibrated import CalibratedNoise, make_noise, make_selection
from dpkit.mechanisms.exponential import sample_exponential
from dpkit.mechanisms.selection import sample_top_k

__all__ = ["AccountantLike", "HasAccountant", "Drawn", "accountant_of", "check_accountant",
           "unit_column",
           "charge", "charge_record", "calibrate", "noise_row", "row_of", "exact_scale", "noisy",
           "selection_row", "select", "draw"]

T = TypeVar("T")


class HasAccountant(Protocol):
    """Anything with an ``accountant`` attribute (a :class:`~dpkit.frame.Session`)."""

    @property
    def accountant(self) -> Accountant: ...


AccountantLike: TypeAlias = "Accountant | PrivacyFilter | HasAccountant | None"


class Drawn(NamedTuple):
    """What :func:`noisy` and :func:`select` return: the released value(s) and the noise
    row of the measurement that drew them (its exact scale and sensitivity)."""

    value: Any
    row: NoiseRow


# -- accounting -----------------------------------------------------------------------------
def accountant_of(accountant: AccountantLike, *, unit_bounded: bool = False) -> Accountant:
    """The :class:`~dpkit.core.accountant.Accountant` behind ``accountant`` (a filter is
    wrapped, a Session gives its own).

    A Session whose privacy unit is not a row (``PrivacyUnit.by(column, …)``) is accepted
    only from a front end that bounds each unit's contribution itself (``unit_bounded``):
    a release over rows would otherwise be charged as if one row were one person, and a
    person with k rows would lose up to k times the loss debited (group privacy, Dwork &
    Roth 2014, Theorem 2.2).

    Raises
    ------
    DomainError
        ``accountant`` is not an Accountant, a PrivacyFilter or a Session (None too), or a
        Session with a multi-row privacy unit reaches a front end that works on rows.
    """
    if not unit_bounded:
        _refuse_unit(accountant)
    return as_accountant(accountant)


def unit_column(accountant: AccountantLike) -> str | None:
    """The column of a Session's privacy unit (None for a row-level Session, an Accountant,
    a filter or None): what a front end that bounds units itself compares its own unit
    column with before passing ``unit_bounded=True``."""
    column = getattr(getattr(accountant, "privacy_unit", None), "column", None)
    return column if isinstance(column, str) else None


def _refuse_unit(accountant: AccountantLike) -> None:
    if unit_column(accountant) is None:
        return
    unit = getattr(accountant, "privacy_unit", None)
    raise DomainError(
        f"this release works on rows, but the Session's privacy unit is {unit}: it cannot "
        "bound how many rows one person contributes here, so the loss charged would not be "
        "one person's. Release through the Session's own queries (which bound each unit), "
        "or reduce the data to one row per person and open a Session with "
        "PrivacyUnit.rows() (nothing was spent)")


def check_accountant(accountant: AccountantLike, *, unit_bounded: bool = False) -> None:
    """Refuse, at plan time, an accountant of the wrong type or a Session whose privacy
    unit this front end does not bound (DomainError, see :func:`accountant_of`); nothing
    is debited."""
    if accountant is not None:
        accountant_of(accountant, unit_bounded=unit_bounded)


# the rows drawn by noisy/select inside a charged compute (one list per charge in progress)
_DRAWN: ContextVar[list[NoiseRow] | None] = ContextVar("dpkit_drawn_rows", default=None)


def _recorded(compute: Callable[[], T], drawn: list[NoiseRow]) -> Callable[[], T]:
    def run() -> T:
        token = _DRAWN.set(drawn)
        try:
            return compute()
        finally:
            _DRAWN.reset(token)
    return run


def _note(row: NoiseRow) -> None:
    drawn = _DRAWN.get()
    if drawn is not None and row not in drawn:
        drawn.append(row)


def charge_record(accountant: AccountantLike, loss: PrivacyLoss, description: str,
                  compute: Callable[[], T], noise: Sequence[NoiseRow] = (), *,
                  alternatives: Sequence[PrivacyLoss] = (), unit_bounded: bool = False,
                  **options: Any) -> tuple[T, Release[Any]]:
    """:func:`charge`, returning the release record beside the result (a stream keeps it)."""
    rng.require_secure()
    drawn: list[NoiseRow] = []
    if accountant is None:
        result = _recorded(compute, drawn)()
        return result, Release(read_only(result), loss, _rows(noise, drawn), None, None, False,
                               digest_of(result), description,
                               loss_note=options.get("loss_note"))
    target = accountant_of(accountant, unit_bounded=unit_bounded)
    debit = _debitable(target, (loss, *alternatives))
    computed: list[T] = []  # compute's own object (the record holds a read-only view)

    def kept() -> T:
        computed.append(_recorded(compute, drawn)())
        return computed[-1]

    # without a plan, the record keeps the rows drawn during the run (noise calibrated to
    # values it released): the accountant builds it so, and keeps it as its last
    release = target.run_record(debit, description, kept, noise=noise, drawn=drawn, **options)
    result = computed[-1] if computed else release.values  # a replay runs no compute
    return result, release


def _rows(planned: Sequence[NoiseRow], drawn: list[NoiseRow]) -> tuple[NoiseRow, ...]:
    return tuple(planned) or tuple(drawn)


def charge(accountant: AccountantLike, loss: PrivacyLoss, description: str,
           compute: Callable[[], T], noise: Sequence[NoiseRow] = (), *,
           alternatives: Sequence[PrivacyLoss] = (), unit_bounded: bool = False,
           **options: Any) -> T:
    """Debit ``loss`` through the one accountant, atomically, then run ``compute``.

    Parameters
    ----------
    accountant : AccountantLike
        None (unaccounted: nothing is debited, the caller composes), an Accountant, a
        PrivacyFilter or a Session.
    loss : PrivacyLoss
        What the release costs; converted to the accountant's measure.
    description : str
        The canonical text of the release (the ledger stores it).
    compute : callable
        The data side and the noise; runs only after the debit.
    alternatives : sequence of PrivacyLoss
        The same guarantee in other measures (ρ-zCDP beside the (ε, δ) it implies): the
        first of ``(loss, *alternatives)`` the accountant's measure can take is debited.
    noise : sequence of NoiseRow
        The noise plan, written with the debit and kept in the record. Without one (a fit
        calibrating its noise to values it released), the record keeps the distinct rows
        of every :func:`noisy` and :func:`select` draw made during ``compute`` (the
        ledger's row, written at the debit, has none).
    unit_bounded : bool
        True only where the front end bounds each privacy unit's contribution as a
        Session declares it (the Session's queries, continual release, the apps that read
        ``session.privacy_unit``). Otherwise a Session whose privacy unit is not a row is
        refused before the debit: the loss would be one row's, not one person's.
    **options
        Passed to :meth:`~dpkit.core.accountant.Accountant.run` (``accuracy``, ``store``,
        ``replay``, ``idempotency_key``).

    Returns
    -------
    object
        ``compute()``. Its :class:`~dpkit.core.record.Release` is the accountant's ``last``
        and, when the result is a fitted estimator (``get_params``), its ``release_`` — for
        an unaccounted run too (release id None, the loss it would cost).

    Raises
    ------
    DomainError
        ``accountant`` is none of the above, or a Session with a multi-row privacy unit
        without ``unit_bounded`` (before the debit).
    MeasureError
        No candidate loss converts to the accountant's measure (before the debit).
    BudgetExceededError
        Before anything runs (nothing debited).
    ReleaseFailedError
        ``compute`` failed after the debit (the loss stands).
    InsecureRandomnessError
        Under the seeded test stream (before the debit).
    """
    result, release = charge_record(accountant, loss, description, compute, noise,
                                    alternatives=alternatives, unit_bounded=unit_bounded,
                                    **options)
    if callable(getattr(result, "get_params", None)) and not isinstance(result, type):
        result.release_ = release  # type: ignore[attr-defined]
    return result


def _debitable(target: Accountant, losses: Sequence[PrivacyLoss]) -> PrivacyLoss:
    for candidate in losses:
        try:
            return convert(candidate, target.measure)
        except MeasureError:
            continue
    raise MeasureError(f"a {type(losses[0]).__name__} loss cannot be debited from a "
                       f"{target.measure.__name__} budget")


# -- noise ----------------------------------------------------------------------------------
def _budget(budget: PrivacyLoss | Number) -> dict[str, Any]:
    """``make_noise``'s budget keywords for a loss (a bare number is ε)."""
    if isinstance(budget, PureDP):
        return {"epsilon": budget.epsilon}
    if isinstance(budget, ZCDP):
        return {"rho": budget.rho}
    if isinstance(budget, ApproxDP):
        return {"epsilon": budget.epsilon, "delta": budget.delta}
    if isinstance(budget, PrivacyLoss):
        raise DomainError(f"noise takes a PureDP, ZCDP or ApproxDP budget; got {budget}")
    return {"epsilon": budget}


def _epsilon(budget: PrivacyLoss | Number) -> Number:
    if isinstance(budget, PrivacyLoss):
        if not isinstance(budget, PureDP):
            raise DomainError(f"a selection takes a pure ε budget; got {budget}")
        return budget.epsilon
    return budget


def calibrate(sensitivity: Number, budget: PrivacyLoss | Number, *, norm: str | None = None,
              output: str = "integer", size: int = 1, cache: bool = True) -> CalibratedNoise:
    """The measurement :func:`~dpkit.mechanisms.make_noise` returns for Δ and ``budget``
    (a PureDP, ZCDP or ApproxDP loss; a bare number is ε); arguments as there."""
    kw = _budget(budget)
    if norm is None:  # Laplace takes L1, the Gaussian L2
        norm = "l2" if "rho" in kw or "delta" in kw else "l1"
    return make_noise(sensitivity, norm=norm, output=output, size=size, cache=cache, **kw)


def row_of(noise: CalibratedNoise, statistic: str | None = None, *, unit: Number = 1
           ) -> NoiseRow:
    """The :class:`~dpkit.core.record.NoiseRow` of a measurement the entry returned (its
    mechanism, exact scale and sensitivity, times ``unit``): the plan written with the
    debit, and the one place a front end reads a scale from (to report accuracy)."""
    return _row(noise, statistic, unit)


def exact_scale(row: NoiseRow) -> Fraction:
    """The exact scale of a row the kit built (every kit row has one; DomainError for a row
    without, such as a histogram algorithm's)."""
    if row.scale is None:
        raise DomainError(f"the noise row {row.name!r} states no scale")
    return row.scale


def draw(selection: CalibratedNoise, scores: Numbers, *, unit: Number = 1,
         size: int | None = None) -> Any:
    """Index i with probability ∝ exp(scoresᵢ·unit / s), s the exponential selection's
    calibrated temperature: ``scores`` in units of ``unit`` (integers, for an exact draw
    on scores that are multiples of a small rational). One int, or ``size`` draws.

    Raises
    ------
    DomainError
        ``selection`` is not an exponential mechanism of :func:`make_selection` (plan time).
    """
    if selection.mechanism != "exponential":
        raise DomainError("draw takes the exponential mechanism of make_selection")
    return sample_exponential(scores, selection.scale / to_fraction(unit), size=size)


def _row(m: CalibratedNoise, statistic: str | None, unit: Number) -> NoiseRow:
    u = to_fraction(unit)
    return NoiseRow(m.mechanism, m.scale * u, m.sensitivity * u, statistic)


def noise_row(sensitivity: Number, budget: PrivacyLoss | Number, statistic: str | None = None,
              *, norm: str | None = None, output: str = "integer", size: int = 1,
              unit: Number = 1, count: int | None = None) -> NoiseRow:
    """The noise row of :func:`calibrate`'s measurement, without drawing: the plan written
    with the debit, or the exact scale to report accuracy with. ``unit`` multiplies scale
    and sensitivity (a statistic released in units of ``unit``). ``count``: the number of
    values a later :func:`noisy` call will draw (without ``size``), so that the planned row
    is the row that call records (``size`` is then ignored)."""
    if count is not None:
        size = 1 if output == "integer" else _grid_size(int(count))
    return _row(calibrate(sensitivity, budget, norm=norm, output=output, size=size), statistic,
                unit)


def _grid_size(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()  # a power of two: few distinct calibrations


def noisy(values: Number | Numbers, sensitivity: Number, budget: PrivacyLoss | Number, *,
          norm: str | None = None, output: str = "integer", size: int | None = None,
          statistic: str | None = None, cache: bool = True,
          weights: np.ndarray | None = None,
          covariance: Sequence[Sequence[Number]] | None = None,
          workload: Sequence[Sequence[Number]] | None = None) -> Drawn:
    """``values`` released through the calibrated measurement, with its noise row.

    Parameters
    ----------
    values : int, float or array of shape (n,) or any shape
        Integer values (``output="integer"``) or floats (``output="grid"``); a vector of
        sensitivity Δ in ``norm`` as a whole.
    sensitivity : number
        Δ > 0 (L1 or L2, ``norm``), in the values' units.
    budget : PrivacyLoss or number
        PureDP(ε) (Laplace; the vector mechanism for L2 on a grid), ZCDP(ρ) or ApproxDP(ε, δ)
        (Gaussian); a bare number is ε.
    norm : {"l1", "l2"}, optional
        The sensitivity's norm (default: L1 for a PureDP budget, L2 otherwise).
    output : {"integer", "grid"}
        As :func:`~dpkit.mechanisms.make_noise`.
    size : int, optional
        Grid outputs: the coordinates the rounding allowance is charged for (default: the
        number of values rounded up to a power of two; the vector mechanism needs the exact
        dimension).
    statistic : str, optional
        The noise row's label.
    cache : bool
        False for a data-dependent sensitivity (nothing of it is remembered).
    weights : array of positive rationals, the shape of ``values``, optional
        Integer values, pure ε: value i is drawn at sensitivity wᵢ·Δ (scale wᵢ·Δ/ε), one
        batch per distinct weight; Δ then bounds the *weighted* L1 sensitivity
        max Σᵢ |vᵢ − v′ᵢ|/wᵢ (Privelet's generalized sensitivity).
    covariance : d × d matrix of rationals, optional
        Σ: ``values`` is a float vector of length d, Δ its Mahalanobis sensitivity
        (vᵀΣ⁻¹v ≤ Δ² for neighbours' differences), the noise N(0, c²Σ) on a grid
        (``make_noise(…, covariance=Σ)``); the budget a ZCDP or ApproxDP loss.
    workload : d × n matrix of rationals, optional
        A (d ≤ 4): ``values`` is an integer histogram x of length n, Δ the L1 distance
        between neighbouring histograms, and the release is Ax plus K-norm noise, a float
        array of shape (d,) (``make_noise(…, workload=A)``, Hardt & Talwar 2010); the
        budget a PureDP loss or a number.

    Returns
    -------
    Drawn
        ``value``: the noisy values, the shape of ``values`` (a float64 array for a grid, an
        int64 array or Python int for integers); ``row``: the measurement's
        :class:`~dpkit.core.record.NoiseRow` (with ``weights``: the unit weight's).

    Raises
    ------
    DomainError, MeasureError
        As :func:`~dpkit.mechanisms.make_noise`; ``weights`` not positive, one per value
        (plan time: the calibration is data-free).

    Notes
    -----
    Guarantee: the map of the returned measurement at Δ is ≤ ``budget`` (checked exactly by
    ``make_noise``; Dwork & Roth Thm 3.6, Canonne, Kamath & Steinke 2020 Thm 4, Chaudhuri,
    Monteleoni & Sarwate 2011 Thm 6). With ``weights``: the loss is
    Σᵢ |vᵢ − v′ᵢ|/(wᵢΔ/ε) ≤ ε (Xiao, Wang & Gehrke 2010, Lemma 2).
    """
    if weights is not None:
        return _weighted(np.asarray(values), sensitivity, budget, weights, statistic)
    if workload is not None:
        m = make_noise(sensitivity, cache=cache, workload=workload, **_budget(budget))
        return _drawn(np.asarray(m(np.asarray(values).reshape(-1)), dtype=np.float64),
                      _row(m, statistic, 1))
    if covariance is not None:
        m = make_noise(sensitivity, output="grid", cache=cache, covariance=covariance,
                       **_budget(budget))
        flat = np.asarray(values, dtype=np.float64).reshape(-1)
        return _drawn(np.asarray(m(flat), dtype=np.float64), _row(m, statistic, 1))
    arr = np.asarray(values)
    n = 1 if size is None and output == "integer" else (
        _grid_size(arr.size) if size is None else size)
    m = calibrate(sensitivity, budget, norm=norm, output=output, size=n, cache=cache)
    if output == "grid":
        flat = np.atleast_1d(arr.astype(np.float64))
        out: Any = np.asarray(m(flat), dtype=np.float64).reshape(arr.shape)
    elif arr.ndim == 0:
        out = int(m(int(arr)))
    else:
        out = np.asarray(m(arr.astype(np.int64)), dtype=np.int64).reshape(arr.shape)
    return _drawn(out, _row(m, statistic, 1))


def _weighted(arr: np.ndarray, sensitivity: Number, budget: PrivacyLoss | Number,
              weights: np.ndarray, statistic: str | None) -> Drawn:
    w = np.asarray(weights, dtype=object).reshape(-1)
    distinct = set(w.tolist())  # the weights are the plan's, not the data's
    if w.size != arr.size or any(to_fraction(v) <= 0 for v in distinct):
        raise DomainError("weights must be positive, one per value")
    out = arr.astype(np.int64).reshape(-1)
    for weight in distinct:  # one batch per distinct scale w·Δ/ε
        m = calibrate(to_fraction(sensitivity) * to_fraction(weight), budget, norm="l1")
        idx = np.flatnonzero(w == weight)
        out[idx] = m(out[idx])
        _note(_row(m, statistic, 1))
    return Drawn(out.reshape(arr.shape), _row(calibrate(sensitivity, budget, norm="l1"),
                                              statistic, 1))


def _drawn(value: Any, row: NoiseRow) -> Drawn:
    _note(row)
    return Drawn(value, row)


def selection_row(sensitivity: Number, budget: PrivacyLoss | Number,
                  statistic: str | None = None, *, k: int = 1, monotonic: bool = False,
                  mechanism: str = "exponential") -> NoiseRow:
    """The noise row of :func:`select`'s calibration (each of the k picks at ε/k)."""
    return _row(_selection(sensitivity, budget, k, monotonic, mechanism), statistic, 1)


def _selection(sensitivity: Number, budget: PrivacyLoss | Number, k: int, monotonic: bool,
               mechanism: str) -> CalibratedNoise:
    k = integer(k, "k", minimum=1)
    per_pick = positive(_epsilon(budget), "epsilon", up=False) / k
    return make_selection(sensitivity, per_pick, mechanism=mechanism, monotonic=monotonic)


def select(scores: Numbers | Sequence[Numbers], sensitivity: Number,
           budget: PrivacyLoss | Number, *, k: int | None = None, monotonic: bool = False,
           size: int | None = None, statistic: str | None = None,
           mechanism: str = "exponential") -> Drawn:
    """An index picked by the exponential mechanism, or k distinct indices by peeling it.

    Parameters
    ----------
    scores : array of shape (N,)
        Finite scores (ints, floats or Fractions, used exactly), each moving by at most Δ
        between neighbours; N ≥ k.
    sensitivity : number
        Δ > 0 of every score (L∞).
    budget : PureDP or number
        ε for all k picks together (ε/k each, basic composition).
    k : int, optional
        Distinct picks, best first (peeling); None for one pick returned as an int.
    monotonic : bool
        Neighbours move all scores the same way (temperature Δ/ε instead of 2Δ/ε).
    size : int, optional
        Independent draws (rows); each row costs ``budget``, so the caller charges ``size``
        times it.
    statistic : str, optional
        The noise row's label.
    mechanism : str
        One draw by another selection of :func:`~dpkit.mechanisms.make_selection`
        ("permute_and_flip", "report_noisy_max"; same map), or "exponential_many":
        ``scores`` a list of integer score vectors computed on disjoint parts of the data,
        one pick per vector (a list of ints; ε for all of them, parallel composition);
        peeling and ``size`` are the exponential mechanism's.

    Returns
    -------
    Drawn
        ``value``: an int (k None, one draw), a list of k ints (of one per vector for
        "exponential_many"), or an int64 array of shape (size,) (k None) or (size, k);
        ``row``: the calibration's noise row (its scale is the per-pick temperature).

    Raises
    ------
    DomainError
        k < 1, N < k, a non-pure budget, Δ, ε ≤ 0, or k > 1 or ``size`` with another
        mechanism (plan time).

    Notes
    -----
    Guarantee: PureDP(ε) per draw: each pick is ε/k-DP at temperature s = 2Δ/(ε/k)
    (Δ/(ε/k) if monotonic), checked by :func:`~dpkit.mechanisms.make_selection`
    (McSherry & Talwar 2007; Dwork & Roth Thm 3.10); k picks compose to ε (Durfee &
    Rogers 2019 for peeling). Exact sampling (:func:`~dpkit.mechanisms.selection.sample_top_k`).
    """
    if mechanism != "exponential" and (k is not None or size is not None):
        raise DomainError("peeling and repeated draws are the exponential mechanism's")
    m = _selection(sensitivity, budget, 1 if k is None else k, monotonic, mechanism)
    row = _row(m, statistic, 1)
    if mechanism == "exponential_many":  # integer score vectors (the measurement checks)
        return _drawn([int(i) for i in m(scores)], row)
    if k is None and size is None:  # the measurement's own draw; scores are checked by the
        return _drawn(int(m.function(scores)), row)  # caller at plan time: nothing raises here
    vector = cast(Numbers, scores)  # one score vector from here on
    if k is None:
        return _drawn(sample_exponential(vector, m.scale, size=size), row)
    return _drawn(sample_top_k(vector, k, m.scale, size=size), row)
