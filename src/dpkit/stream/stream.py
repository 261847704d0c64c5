"""The public face of :mod:`dpkit.stream`: the incremental :class:`Stream` and the batch
:func:`release_prefix_sums`, both charged once through the one accountant.

Mechanisms (``mechanism=``; each module's docstring states its privacy map and source):

=================  ============================================  =========  ==============
name               counter                                       horizon    memory/stream
=================  ============================================  =========  ==============
"increments"       noise on each increment (Chan et al. §3.1)    optional   O(1)
"running_totals"   noise on each running total (budget ÷ T)      required   O(1)
"tree"             binary mechanism (Chan et al. Thm 3.5)        required   O(log T)
"honaker"          binary tree + Honaker's estimator             required   O(log T)
"smooth"           smooth binary mechanism (Andersson & Pagh)    required   O(log T)
"factorization"    square-root factorisation (FHU23, HUU23), ρ   ≤ 2^21     O(T)
"hybrid"           hybrid mechanism (Chan et al. Thm 4.3)        optional   O(log t)
=================  ============================================  =========  ==============

Budget: ``epsilon=`` (pure ε-DP, discrete Laplace node noise) or ``rho=`` (ρ-zCDP, discrete
Gaussian). Privacy unit: ``sensitivity`` Δ (one event moves one step's value by at most Δ)
and ``contributions`` w (events per user over the stream; 1 = event level). The sensitivity
maps are in :mod:`dpkit.stream.base`.

Clamp rule (the data side is total: nothing raises after the debit). Each increment becomes
an integer: an int (or NumPy integer, or bool) is taken as is; a finite float is rounded half
to even; anything else (NaN, ±inf, None, a string, any other object) becomes ``lower``. The
integer is then clamped to [``lower``, ``upper``] (defaults 0 and 2^31 − 1; the bounds are
public, checked at plan time, within ±(2^31 − 1)). The privacy unit (Δ, w) is declared: the
neighbouring relation is on the clamped stream. Real-valued series: with ``grid_bits`` the
totals are real, clamped to [``lower``, ``upper``] and floored to a grid of width 2^k,
k = ⌊log₂ Δ⌋ − ``grid_bits``, the rounding charged to the sensitivity (⌈Δ·2^−k⌉ grid steps)
and the releases scaled back (:mod:`dpkit.stream.grid`).

Post-processing (free: it reads only released values): ``nonnegative`` (max(0, ·)),
``monotone`` (the running maximum of the releases in a stream; in batch, "isotonic" is the
least-squares non-decreasing fit by pool-adjacent-violators), ``integer`` (rounded half to
even). The interval is the raw release ± its half-width (:mod:`dpkit.stream.base`), cut at 0
when ``nonnegative`` or when no total can be negative (``lower`` ≥ 0): the cut interval
covers whenever the uncut one does. ``nonnegative`` is on by default when ``lower`` ≥ 0 (a
count), off otherwise; ``nonnegative=False`` keeps the unbiased raw release.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.core.measures import PrivacyLoss
from dpkit.core.numbers import Number, integer
from dpkit.errors import DomainError
from dpkit.mechanisms.frontend import AccountantLike, accountant_of, charge, charge_record
from dpkit.stream.base import Budget, Counter, Unit
from dpkit.stream.counters import Increments, RunningTotals
from dpkit.stream.factorization import MAX_VALUE, SqrtFactorization
from dpkit.stream.grid import Grid
from dpkit.stream.hybrid import Hybrid
from dpkit.stream.smooth import SmoothBinary
from dpkit.stream.tree import BinaryTree, HonakerTree

__all__ = ["MECHANISMS", "make_counter", "clamp", "Stream", "StepRelease", "PrefixSums",
           "release_prefix_sums", "HorizonExceededError", "isotonic"]

MECHANISMS: dict[str, type[Counter]] = {
    "increments": Increments, "running_totals": RunningTotals, "tree": BinaryTree,
    "honaker": HonakerTree, "smooth": SmoothBinary, "factorization": SqrtFactorization,
    "hybrid": Hybrid}


class HorizonExceededError(DomainError):
    """A step was fed after the stream's horizon (nothing is released, nothing debited)."""


def make_counter(mechanism: str, horizon: int | None, *, epsilon: Number | None = None,
                 rho: Number | None = None, sensitivity: Number = 1,
                 contributions: int = 1) -> Counter:
    """The counter plan for a mechanism (no data, no debit).

    Parameters
    ----------
    mechanism : str
        One of :data:`MECHANISMS` (module docstring).
    horizon : int or None
        T, the number of steps (None: unknown, for "increments" and "hybrid" only).
    epsilon, rho : number
        The budget for the whole stream: exactly one (rounded down).
    sensitivity, contributions : number, int
        The privacy unit: Δ > 0 per event and w ≥ 1 events per user.

    Returns
    -------
    Counter

    Raises
    ------
    DomainError
        An unknown mechanism, a bad budget or unit, a horizon the mechanism cannot take.
    """
    if mechanism not in MECHANISMS:
        raise DomainError(f"mechanism must be one of {sorted(MECHANISMS)}; got {mechanism!r}")
    return MECHANISMS[mechanism](horizon, Unit(sensitivity, contributions),
                                 Budget(epsilon, rho))


def _bounds(lower: Any, upper: Any) -> tuple[int, int]:
    lo = integer(lower, "lower", minimum=-MAX_VALUE, maximum=MAX_VALUE)
    hi = integer(upper, "upper", minimum=-MAX_VALUE, maximum=MAX_VALUE)
    if lo > hi:
        raise DomainError(f"lower ({lo}) must be at most upper ({hi})")
    return lo, hi


def clamp(value: object, lower: int, upper: int) -> int:
    """One increment under the clamp rule (module docstring); never raises."""
    try:
        if isinstance(value, bool | np.bool_ | int | np.integer):
            v = int(value)
        elif isinstance(value, float | np.floating) and math.isfinite(float(value)):
            v = round(float(value))
        else:
            v = lower
    except Exception:  # noqa: BLE001 - the rule: anything unreadable is ``lower``
        v = lower
    return min(max(v, lower), upper)


def _clamp_all(values: Any, lower: int, upper: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        return np.clip(arr.astype(np.int64, copy=False) if arr.dtype.kind != "u" else
                       np.minimum(arr, upper).astype(np.int64), lower, upper)
    if arr.dtype.kind == "f":
        good = np.isfinite(arr)
        out = np.where(good, np.rint(np.clip(np.where(good, arr, lower), lower, upper)), lower)
        return out.astype(np.int64)
    return np.array([clamp(v, lower, upper) for v in arr.tolist()], dtype=np.int64)


def _as_array(values: Any) -> np.ndarray:
    """A series as an array at plan time: numeric when NumPy reads it so, else objects
    (each then follows the clamp rule in the release)."""
    try:
        arr = np.asarray(values)
        if arr.dtype.kind in "iubf":
            return arr
    except (ValueError, TypeError, OverflowError):
        pass
    try:
        items = list(values)
    except TypeError:
        raise DomainError("values must be a 1-D series of increments") from None
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def isotonic(y: np.ndarray) -> np.ndarray:
    """The least-squares non-decreasing fit of ``y`` (pool adjacent violators), float64."""
    from scipy.optimize import isotonic_regression  # scipy loads on use, not at import

    return isotonic_regression(np.asarray(y, dtype=np.float64)).x


def _describe(counter: Counter, kind: str, grid: Grid | None = None) -> str:
    unit, budget = counter.unit, counter.budget
    on = "" if grid is None else f" grid steps of 2^{grid.k}"
    return (f"stream {kind}: {counter.name}, horizon {counter.horizon}, {unit.level} level "
            f"(Δ = {unit.sensitivity}{on}, w = {unit.contributions}), {budget.loss}")


@dataclass(frozen=True)
class StepRelease:
    """One step's release.

    Attributes
    ----------
    t : int
        The step (1-based).
    value : float or int
        The released running total after post-processing.
    raw : float
        The mechanism's estimate before post-processing.
    half_width : float
        The raw estimate's error is within ± this with probability ≥ 1 − β.
    low, high : float
        The interval (raw ± half_width, cut at 0 when ``nonnegative`` or when no total
        can be negative: increments clamped to a lower bound ≥ 0).
    """

    t: int
    value: float | int
    raw: float
    half_width: float
    low: float
    high: float


class Stream:
    """A continual count, charged once when created, fed one step at a time.

    Parameters
    ----------
    horizon : int or None
        T: the number of steps (None for "increments" and "hybrid": an unbounded stream).
    accountant : Accountant, PrivacyFilter or Session
        Charged once, here, with the whole stream's loss, before any noise is drawn.
    mechanism : str
        A name of :data:`MECHANISMS` (default "smooth").
    epsilon, rho : number
        The budget of the whole stream (exactly one).
    sensitivity, contributions : number, int
        The privacy unit (Δ per event, w events per user).
    lower, upper : int
        The clamp bounds of an increment (module docstring; real numbers with ``grid_bits``).
    beta : float
        Failure probability of the intervals.
    nonnegative, monotone, integer : bool
        Post-processing of the releases (module docstring). ``nonnegative`` defaults to
        True when ``lower`` ≥ 0 (a count: no total is negative), else False.
    grid_bits : int, optional
        0 … 24: real-valued increments on a grid of 2^−grid_bits·Δ (module docstring).

    Raises
    ------
    DomainError
        At plan time, before the debit (bad mechanism, budget, unit, bounds, horizon).
    BudgetExceededError
        If the accountant cannot pay (nothing is debited).

    Notes
    -----
    After creation the data side is total: :meth:`feed` clamps what it is given and never
    raises because of the data; the only error is :class:`HorizonExceededError` for a step
    after the horizon. :attr:`state` is a small JSON-ready dict (the counter's open nodes,
    the step, the post-processing state): O(log T) numbers for the tree mechanisms.
    """

    def __init__(self, horizon: int | None, *, accountant: AccountantLike,
                 mechanism: str = "smooth",
                 epsilon: Number | None = None, rho: Number | None = None,
                 sensitivity: Number = 1, contributions: int = 1, lower: int = 0,
                 upper: Number = MAX_VALUE, beta: float = 0.05,
                 nonnegative: bool | None = None,
                 monotone: bool = False, integer: bool = False,
                 grid_bits: int | None = None) -> None:
        self.grid = None if grid_bits is None else Grid.plan(grid_bits, sensitivity, lower,
                                                             upper)
        self.counter = make_counter(mechanism, horizon, epsilon=epsilon, rho=rho,
                                    sensitivity=sensitivity if self.grid is None
                                    else self.grid.sensitivity, contributions=contributions)
        self.lower, self.upper = ((self.grid.low, self.grid.high) if self.grid is not None
                                  else _bounds(lower, upper))
        if not 0 < float(beta) < 1:
            raise DomainError("beta must be in (0, 1)")
        self.beta = float(beta)
        if nonnegative is None:  # default: clip when no total can be negative (counts)
            nonnegative = self.lower >= 0
        self.options = (bool(nonnegative), bool(monotone), bool(integer))
        counter = self.counter
        opened, self.record = charge_record(
            accountant_of(accountant), counter.loss, _describe(counter, "opened", self.grid),
            lambda: {"counter": counter.start(), "last": None}, counter.noise_rows())
        self.state: dict[str, Any] = copy.deepcopy(opened)  # the record keeps the opening

    @property
    def horizon(self) -> int | None:
        return self.counter.horizon

    @property
    def loss(self) -> PrivacyLoss:
        """What the stream was charged (its whole loss, whatever the number of steps)."""
        return self.counter.loss

    @property
    def t(self) -> int:
        return int(self.state["counter"]["t"])

    def feed(self, x: Number) -> StepRelease:
        """Feed the next step's increment; its release.

        Raises
        ------
        HorizonExceededError
            If the horizon has been reached (the stream is closed).
        """
        if self.horizon is not None and self.t >= self.horizon:
            raise HorizonExceededError(f"the stream's horizon of {self.horizon} steps is "
                                       "reached; open a new stream (with its own budget)")
        n = clamp(x, self.lower, self.upper) if self.grid is None else self.grid.one(x)
        raw = self.counter.step(self.state["counter"], n)
        t = self.t
        h = float(self.counter.half_widths(np.array([t]), self.beta)[0])
        if self.grid is not None:  # grid steps → values
            raw, h = raw * self.grid.step, h * self.grid.step
        value, low, high = raw, raw - h, raw + h
        nonnegative, monotone, as_int = self.options
        if nonnegative:
            value = max(value, 0.0)
        if nonnegative or self.lower >= 0:  # no total is negative: the cut loses nothing
            low, high = max(low, 0.0), max(high, 0.0)
        if monotone and self.state["last"] is not None:
            value = max(value, self.state["last"])
        self.state["last"] = value
        out: float | int = int(round(value)) if as_int else value
        return StepRelease(t, out, raw, h, low, high)

    def to_json(self) -> str:
        """The stream's state as JSON (for persistence; holds no raw increment except for
        "factorization", whose state is its history)."""
        return json.dumps(self.state, separators=(",", ":"))


@dataclass(frozen=True)
class PrefixSums:
    """The batch release of :func:`release_prefix_sums`.

    Attributes
    ----------
    values : ndarray
        The released running totals (post-processed; int64 if ``integer``).
    raw : ndarray
        The estimates before post-processing (float64).
    half_widths : ndarray
        Per step, at ``beta``.
    variance : ndarray
        Per step, the exact variance of ``raw`` (closed form).
    mechanism : str
    loss : PrivacyLoss
    beta : float
    """

    values: np.ndarray
    raw: np.ndarray
    half_widths: np.ndarray
    variance: np.ndarray
    mechanism: str
    loss: PrivacyLoss
    beta: float


def release_prefix_sums(values: npt.ArrayLike, *, accountant: AccountantLike,
                        mechanism: str = "smooth",
                        epsilon: Number | None = None, rho: Number | None = None,
                        sensitivity: Number = 1, contributions: int = 1,
                        horizon: int | None = None, lower: Number = 0,
                        upper: Number = MAX_VALUE, beta: float = 0.05,
                        nonnegative: bool = False, monotone: str | None = None,
                        integer: bool = False, grid_bits: int | None = None) -> PrefixSums:
    """The private running totals of a whole series of increments, charged once.

    Parameters
    ----------
    values : array-like, 1-D
        The increments x_1 … x_n (clamped by the module's rule inside the release).
    accountant, mechanism, epsilon, rho, sensitivity, contributions, lower, upper, beta
        As :class:`Stream`.
    horizon : int, optional
        T ≥ n (default n); the noise is calibrated to T.
    monotone : {None, "running_max", "isotonic"}
        Monotone post-processing.
    nonnegative, integer : bool
        Post-processing (module docstring).
    grid_bits : int, optional
        Real-valued increments on a grid (module docstring; ``lower``, ``upper`` real).

    Returns
    -------
    PrefixSums

    Raises
    ------
    DomainError
        At plan time: not 1-D, empty, longer than the horizon, or a bad argument.
    BudgetExceededError
        If the accountant cannot pay.
    """
    arr = values if isinstance(values, np.ndarray) else _as_array(values)
    if arr.ndim != 1 or arr.size == 0:
        raise DomainError("values must be a non-empty 1-D series of increments")
    n = int(arr.size)
    horizon = n if horizon is None else integer_arg(horizon)
    if n > horizon:
        raise DomainError(f"{n} values exceed the horizon {horizon}")
    if monotone not in (None, "running_max", "isotonic"):
        raise DomainError("monotone must be None, 'running_max' or 'isotonic'")
    if not 0 < float(beta) < 1:
        raise DomainError("beta must be in (0, 1)")
    grid = None if grid_bits is None else Grid.plan(grid_bits, sensitivity, lower, upper)
    lo, hi = _bounds(lower, upper) if grid is None else (grid.low, grid.high)
    counter = make_counter(mechanism, horizon, epsilon=epsilon, rho=rho,
                           sensitivity=sensitivity if grid is None else grid.sensitivity,
                           contributions=contributions)
    t = np.arange(1, n + 1)
    step = 1.0 if grid is None else grid.step  # grid steps → values

    def compute() -> PrefixSums:
        ints = _clamp_all(arr, lo, hi) if grid is None else grid.ints(arr)
        raw = counter.release(ints) * step
        out = np.maximum(raw, 0.0) if nonnegative else raw
        if monotone == "running_max":
            out = np.maximum.accumulate(out)
        elif monotone == "isotonic":
            out = isotonic(out)
        final = np.rint(out).astype(np.int64) if integer else out
        return PrefixSums(final, raw, counter.half_widths(t, float(beta)) * step,
                          counter.variance(t) * step * step, counter.name, counter.loss,
                          float(beta))

    return charge(accountant_of(accountant), counter.loss, _describe(counter, "batch", grid),
                  compute, counter.noise_rows())


def integer_arg(value: object) -> int:
    return integer(value, "horizon", minimum=1)


