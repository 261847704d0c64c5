"""Continual release beyond one counter (issue 20): continual histograms (a counter per public
key), continual sums of bounded values, sliding windows, steps given as Polars frames with a
time column, the privacy unit enforced from a unit column, and persistence of an open stream.

Privacy (a :class:`ContinualRelease` is charged its budget once, at creation)
-----------------------------------------------------------------------------
One event adds at most Δ to one step of one key's increments: Δ = 1 for a count, Δ =
max(|lower|, |upper|) for a sum of values clamped to [lower, upper] (integer bounds: each value
rounded half to even to an integer). Real-valued sums (a float bound, even 2.0, or a bound
that is not an integer, or ``grid_bits`` given): each value is clamped to [lower, upper] and
floored to the grid of width 2^k, k = ⌊log₂ max(|lower|, |upper|)⌋ − ``grid_bits`` (default
16, as :mod:`dpkit.frame.aggregates` floors to its grid), so the counters sum exact integers (grid
steps); the rounding is charged to the sensitivity: Δ = ⌈max(|lower|, |upper|)·2^−k⌉ grid
steps — at least |⌊v·2^−k⌋| for every v in the bounds (a row's floored value), and at least
the change of a floored step total fed as a number when one value moves it by at most
max(|lower|, |upper|) (⌊a⌋ − ⌊b⌋ ≤ ⌈a − b⌉) — and every release (value, interval) is
multiplied back by 2^k. Flooring moves each value down by less than 2^k
(≤ 2^−grid_bits of the largest bound). The grid is refused at plan time when k < −960
(:data:`MIN_GRID`: a largest bound below about 2^−936), where 2^−k would overflow a float
after the debit. A step's total per key is clamped to ±(2^31 − 1) grid
steps, like integer increments (:mod:`dpkit.stream.stream`): with the default 16 bits that is
at least 2^14 rows at the largest bound per key and step. A privacy unit
contributes at most w events over the whole stream (``contributions``; enforced when a
``unit`` column is given, below). Stack every key's node vector into one vector: a unit's
difference v over all keys and steps has ‖v‖₁ ≤ w·Δ, and each key's node matrix has column
norms c₁, c₂, so the stacked node difference has L1 norm ≤ w·Δ·c₁ and L2 norm ≤ w·Δ·c₂
(triangle inequality, as in :mod:`dpkit.stream.base`). Hence every key's counter is the
single counter calibrated at unit (Δ, w) and the full budget: for event level (w = 1) this is
parallel composition over keys (an event touches one key); for user level the bound w·Δ is
the sum of the per-key sensitivities w_k·Δ over any split Σ w_k ≤ w of a unit's events.

Sliding windows (post-processing): the count over the last W steps is S_t − S_{t−W} of the
released prefix sums (S_0 = 0). Its error is e_t − e_{t−W}, with the exact coefficient vector
a_t − a_{t−W} of each counter (:meth:`~dpkit.stream.base.Counter.window_terms`):
"increments" min(t, W) noises, "running_totals" two, "tree" and "smooth" the symmetric
difference of the two covers (shared nodes cancel), "honaker" Σa_t² + Σa_u² − 2Σa_t·a_u over
the nested cover nodes (:func:`~dpkit.stream.tree.honaker_cross`), "hybrid" the checkpoints
between the two blocks plus the segment trees' covers, "factorization" the difference of two
rows of A·R⁻¹ (O(t) per step). :func:`window_variance` is the exact variance; the half-width
uses Σ(a − b)²·scale² and max|a − b|·scale (for "honaker" the bound max ≤ 1·scale).

Frames and the time column. Step t covers the times [origin + (t − 1)·every, origin + t·every)
(integers: ``origin`` default 1, ``every`` default 1; dates/datetimes: ``origin`` required,
``every`` a ``timedelta``, default one day). The grid must hold the horizon's steps (an
unbounded stream: :data:`UNBOUNDED_STEPS`) before the largest representable time (int64,
year 9999), checked at plan time; an unbounded stream that reaches the end of the grid stops
there like a horizon (``HorizonExceededError``). :meth:`ContinualRelease.feed` takes the next
step's rows: rows whose time is null or outside the step's interval are dropped (late rows
are never counted), rows whose key is not a declared key are dropped, values follow the
clamp rule of :mod:`dpkit.stream.stream` (a null or non-finite value becomes ``lower``). The
frame's *schema* (column names and kinds, and for a datetime column its time zone: set if and
only if ``origin`` is aware) is public and checked before the step advances (``DomainError``,
nothing drawn); after that the step is total. A stream planned over a query
(``query.continual``) runs a step on zero rows of the query's schema at plan time, before the
debit, so what would fail on the rows (a comparison the types refuse) fails there.

Enforcing w. With ``unit=`` (a column naming the privacy unit), the stream keeps a count per
unit in its state and keeps only a unit's first w events over the whole stream (in feed
order, rows in frame order), dropping the rest: the declared w then holds whatever the data.
Units are told apart by their canonical value (:func:`dpkit.frame.keys.canonical_values`, as
the batch side groups them: 0.0 and −0.0 are one unit; NaN one unit; null one unit).
Without it, w is declared (each row is its own unit when w = 1).

Persistence and threat model. :meth:`ContinualRelease.save` writes the whole state — the
open node sums (raw data sums and secret noise: with the released values they reveal the
raw counts), the per-unit counts (unit identifiers), the last released step (O(keys); the
earlier steps are the host's to keep, e.g. :mod:`dpkit.server.streams`' log) and the
configuration — as one Fernet
token (AES-128-CBC + HMAC-SHA256; ``cryptography``), with the ledger release id and
description of the debit that paid for the stream inside it; nothing is written in plain
text. :meth:`ContinualRelease.restore` decrypts and authenticates the token (a changed or
truncated file, or a wrong key, is refused), rebuilds the plan, and checks against the ledger
that release id's dataset, description (which names the stream's exact loss in its own
measure; the ledger's loss text, in the dataset's measure, must equal the one recorded when
the stream was paid) and "released" status: no second debit,
and a stream cannot be restored against a ledger that did not pay for it. The spend persists
through the ledger's debit. Protected: reading or changing the file without the key.

Rollback protection. A stream paid through a ledger keeps a step high-water mark there
(:meth:`~dpkit.ledger.Ledger.advance_stream`: a chained ``stream`` event per step): every
:meth:`~ContinualRelease.feed` computes the step on a copy of the state and releases it only
if the ledger's mark moves from t − 1 to t in one transaction under its write lock
(compare-and-set); otherwise it raises :class:`~dpkit.errors.StreamRollbackError`, keeps its
old state and releases nothing. :meth:`~ContinualRelease.restore` refuses a token whose step
is not the mark (a stale token: an older copy, or one saved before later steps were fed), and,
when the mark names the state it was released from (``feed(…, save=(path, key))`` records
HMAC-SHA256 under the key of the state's canonical JSON — no hash of the secret state is
stored in clear), a token of another state at the same step. So a rollback or two restores of
one token can never draw new noise for a step already released: the releases of a step cannot
be averaged. The cost is availability: a process that dies after a step is recorded but
before its state is saved leaves no restorable state (the stream must be reopened with a new
budget); ``feed(…, save=…)`` writes the state *before* recording the step, which closes that
window (a state saved but not recorded is simply one step ahead and is refused). Each step
also checks the ledger's dataset status (:meth:`~dpkit.ledger.Ledger.retired`): a stream
of a retired dataset raises :class:`DatasetRetiredError` and releases nothing more.

Cost. Every key's counter is one plan (built once), the keys' node noise is drawn in
vectorised blocks (:func:`~dpkit.stream.base.pooled`), and the state is O(keys) (with a
window O(keys·W); "factorization" keeps its O(t) history; with a unit column, plus a count
per unit seen), so a step costs O(keys), not O(t·keys).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import marshal
import math
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from dpkit.core.measures import PrivacyLoss
from dpkit.core.numbers import Number, integer, to_fraction
from dpkit.errors import DomainError, DPError, LedgerError, StreamRollbackError
from dpkit.frame.keys import canonical_values
from dpkit.mechanisms.frontend import AccountantLike, accountant_of, charge_record, unit_column
from dpkit.stream.base import Counter, half_width, noise_variance, pooled, scale_of
from dpkit.stream.factorization import MAX_VALUE
from dpkit.stream.stream import HorizonExceededError, StepRelease, _bounds, clamp, make_counter

__all__ = ["ContinualRelease", "ContinualStep", "DatasetRetiredError", "window_weights",
           "window_variance", "state_mac", "MIN_GRID", "UNBOUNDED_STEPS"]

VERSION = 1
MIN_GRID = -960  # the finest grid 2^k: 2^−k and every release·2^k stay finite floats
UNBOUNDED_STEPS = 100_000  # steps an unbounded stream's time grid must hold (plan time)


class DatasetRetiredError(LedgerError):
    """The dataset that paid for a stream was retired (``dpkit ledger retire``): the stream
    releases no further step; its released steps stand."""


def window_weights(counter: Counter, t: int, width: int) -> tuple[float, float]:
    """Σ(aᵢ − bᵢ)²·scaleᵢ² and max|aᵢ − bᵢ|·scaleᵢ of the window error e_t − e_{t−W}, from
    the counter's exact coefficients (:meth:`~dpkit.stream.base.Counter.window_terms`)."""
    terms = counter.window_terms(int(t), max(int(t) - int(width), 0))
    s2 = sum(c * scale_of(noise) ** 2 for c, noise, _ in terms)
    return s2, max(a * scale_of(noise) for _, noise, a in terms)


def window_variance(counter: Counter, t: int, width: int) -> float:
    """The exact variance of the window release S_t − S_{t−W} (the noises' exact
    variances, :func:`~dpkit.stream.base.noise_variance`)."""
    terms = counter.window_terms(int(t), max(int(t) - int(width), 0))
    return sum(c * noise_variance(noise) for c, noise, _ in terms)


def _paid_row(accountant: AccountantLike, release_id: int | None) -> dict[str, Any] | None:
    """The ledger row that paid for a stream (id, dataset, description, loss, status and its
    chained hash), or None without a ledger (or a row of another dataset)."""
    ledger, dataset = getattr(accountant, "ledger", None), getattr(accountant, "dataset", None)
    if ledger is None or release_id is None:
        return None
    row = ledger.release(release_id)
    if row is None or row["dataset"] != dataset:
        return None
    return {"id": row["id"], "dataset": row["dataset"], "query": row["query"],
            "loss": str(row["loss"]), "status": row["status"], "hash": row["hash"]}


def state_mac(key: bytes, state: Mapping[str, Any] | str) -> str:
    """HMAC-SHA256 under ``key`` of a stream state's JSON text as saved (a mapping: its
    canonical JSON, the form of tokens saved before the text was kept) — what the ledger's
    step record names; the secret state itself is never hashed in clear."""
    text = state if isinstance(state, str) else json.dumps(state, sort_keys=True,
                                                           separators=(",", ":"))
    return hmac.new(key, b"dpkit stream state:" + text.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class ContinualStep:
    """One step's releases.

    Attributes
    ----------
    t : int
        The step (1-based).
    releases : dict
        Key → :class:`~dpkit.stream.StepRelease` of the running total (key None without
        ``keys``).
    windows : dict
        Key → the release of the count over the last W steps (empty without ``window``).
    confidence : float, optional
        The intervals' coverage 1 − β (None when unknown, e.g. read back from JSON).
    name : str
        What is released ("count", or "sum(<column>)"), for printing.
    window : int, optional
        W, the window's length in steps (for printing).

    ``str`` and ``repr`` are one line: ``step 12: count = 1,234 ± 56 (95%)``, one
    ``key: value`` per key, the window releases after "last W steps"; a release whose interval
    is not value ± half-width (cut at 0, or post-processed) shows ``value in [low, high]``.
    """

    t: int
    releases: dict[Any, StepRelease]
    windows: dict[Any, StepRelease]
    confidence: float | None = None
    name: str = "count"
    window: int | None = None

    def __getitem__(self, key: Any) -> StepRelease:
        return self.releases[key]

    def __str__(self) -> str:
        level = "" if self.confidence is None else f" ({self.confidence:.0%})"
        text = f"step {self.t}: {self.name}{_shown(self.releases)}"
        if self.windows:
            text += f"; last {self.window or 'W'} steps{_shown(self.windows)}"
        return text + level

    __repr__ = __str__

    @property
    def value(self) -> float | int:
        """The running total of the only key (None)."""
        return self.releases[None].value

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"t", "releases": [{"key", "value", "raw", "half_width", "low",
        "high"}, …], "windows": [...]}`` (:meth:`from_dict` reads it back)."""
        def rows(found: dict[Any, StepRelease]) -> list[dict[str, Any]]:
            return [{"key": k, "value": r.value, "raw": r.raw, "half_width": r.half_width,
                     "low": r.low, "high": r.high} for k, r in found.items()]

        return {"t": self.t, "releases": rows(self.releases), "windows": rows(self.windows)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ContinualStep:
        """The step of :meth:`as_dict`'s form."""
        t = int(doc["t"])

        def read(items: Sequence[Mapping[str, Any]]) -> dict[Any, StepRelease]:
            return {r["key"]: StepRelease(t, r["value"], r["raw"], r["half_width"], r["low"],
                                          r["high"]) for r in items}

        return cls(t, read(doc["releases"]), read(doc.get("windows") or []))


def _number_text(x: float) -> str:
    x = float(x)
    if x.is_integer() or abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _one(r: StepRelease) -> str:
    if r.value == r.raw and r.low == r.raw - r.half_width and r.high == r.raw + r.half_width:
        return f"{_number_text(r.value)} ± {_number_text(r.half_width)}"
    return f"{_number_text(r.value)} in [{_number_text(r.low)}, {_number_text(r.high)}]"


def _shown(found: Mapping[Any, StepRelease]) -> str:
    """" = v ± h" for the only key (None), else " k₁: v ± h, k₂: …"."""
    if list(found) == [None]:
        return f" = {_one(found[None])}"
    return " (" + ", ".join(f"{k}: {_one(r)}" for k, r in found.items()) + ")"


def _exact(bound: Any) -> Fraction:
    """A bound as an exact rational: a number, or a rational written as a string ("1/3")."""
    if isinstance(bound, str):
        try:
            return Fraction(bound.strip())
        except (ValueError, ZeroDivisionError):
            raise DomainError(f"bound {bound!r} is not a number") from None
    return to_fraction(bound)


def _integral(bound: Any) -> bool:
    """An integer bound (int, integral Fraction or string): the sum stays on the integers;
    a float bound (even 2.0) makes a real-valued sum."""
    if isinstance(bound, float | np.floating):
        return False
    return _exact(bound).denominator == 1


def _time_kind(origin: Any) -> str:
    if isinstance(origin, datetime):
        return "datetime"
    if isinstance(origin, date):
        return "date"
    return "int"


def _bounds_unit(accountant: AccountantLike, unit: str | None) -> bool:
    """Whether the stream bounds the Session's privacy unit itself: its ``unit`` column is
    the Session's (w events per unit, enforced), so the charge is one person's."""
    return unit is not None and unit == unit_column(accountant)


class ContinualRelease:
    """A continual count or sum, one counter per public key, charged once when created and
    fed one step at a time (an int, a mapping key → int, or a Polars frame of new rows).

    Parameters
    ----------
    horizon : int or None
        T steps (None for "increments" and "hybrid").
    accountant : Accountant, PrivacyFilter or Session
        Charged once, here, with the budget (whatever the number of keys or steps).
    mechanism, epsilon, rho, beta, nonnegative, monotone, integer
        As :class:`~dpkit.stream.Stream`.
    value : str, optional
        A column to sum (frames); None counts rows.
    bounds : (number, number), optional
        [lower, upper] of one value (sums; required with ``value``): Δ = max(|lower|, |upper|);
        bounds that are not both integers make a real-valued sum on a grid (module docstring).
    grid_bits : int, optional
        0 … 24: the grid of a real-valued sum, 2^−grid_bits of the largest bound (default 16
        when the bounds are not integers; given, it puts integer bounds on the grid too).
    keys : sequence, optional
        The public keys of a continual histogram; ``by`` is then their column.
    by : str, optional
        The key column of a frame.
    unit : str, optional
        The privacy-unit column of a frame: w is then enforced (module docstring).
    contributions : int
        w ≥ 1: events per unit over the whole stream.
    time, origin, every
        The time column and the step grid (module docstring).
    window : int, optional
        W ≥ 1: also release the count over the last W steps.
    label : str, optional
        What the rows are (e.g. a query's steps as JSON), appended to the ledger's
        description of the debit.

    Raises
    ------
    DomainError
        At plan time, before the debit.
    BudgetExceededError
        If the accountant cannot pay (nothing debited).
    """

    def __init__(self, horizon: int | None, *, accountant: AccountantLike,
                 mechanism: str = "smooth",
                 epsilon: Number | None = None, rho: Number | None = None,
                 value: str | None = None, bounds: tuple[Number, Number] | None = None,
                 keys: Sequence[Any] | None = None, by: str | None = None,
                 unit: str | None = None, contributions: int = 1, time: str | None = None,
                 origin: object = None, every: object = None, window: int | None = None,
                 beta: float = 0.05, nonnegative: bool | None = None, monotone: bool = False,
                 integer: bool = False, label: str | None = None,
                 grid_bits: int | None = None,
                 _restore: Mapping[str, Any] | None = None,
                 _schema: pl.DataFrame | None = None) -> None:
        self.config = self._plan(horizon, mechanism, epsilon, rho, value, bounds, keys, by, unit,
                                 contributions, time, origin, every, window, beta, nonnegative,
                                 monotone, integer)
        self._plan_grid(value, bounds, grid_bits)
        if label is not None:
            if not isinstance(label, str) or len(label) > 4096:
                raise DomainError("label must be a string of at most 4096 characters")
            self.config["label"] = label
        self._build()
        if _schema is not None:
            self._dry_run(_schema)  # the rows' schema, at plan time (before the debit)
        self.extra: dict[str, Any] = {}  # saved with the state (the server's binding)
        self._ledger: Any = None  # the ledger keeping the step high-water mark
        if _restore is not None:
            self.state = _restore["state"]  # freshly decoded: the stream's own
            self.release_id, self.description = _restore["release_id"], _restore["description"]
            self.paid = _restore.get("paid")
            self.extra = dict(_restore.get("extra") or {})
            self.record = None
            return
        self.description = self._describe()
        counters = self.counters

        def opened() -> dict[str, Any]:
            return {"t": 0, "counters": [c.start() for c in counters],
                    "last": [None] * len(counters), "recent": [[] for _ in counters],
                    "units": {}}

        bounded = _bounds_unit(accountant, self.config["unit"])
        target = accountant_of(accountant, unit_bounded=bounded)
        state, self.record = charge_record(target, self.loss, self.description, opened,
                                           counters[0].noise_rows())
        self.state = json.loads(json.dumps(state))  # the record keeps the opening
        self.release_id = None if self.record is None else self.record.release_id
        self.paid = _paid_row(target, self.release_id)
        if self.paid is not None:
            self._ledger = getattr(target, "ledger", None)

    # -- plan ------------------------------------------------------------------------------
    @staticmethod
    def _plan(horizon: Any, mechanism: str, epsilon: Any, rho: Any, value: Any, bounds: Any,
              keys: Any, by: Any, unit: Any, contributions: Any, time: Any, origin: Any,
              every: Any, window: Any, beta: Any, nonnegative: Any, monotone: Any,
              as_int: Any) -> dict[str, Any]:
        if value is not None:
            if bounds is None or not isinstance(bounds, Sequence) or len(bounds) != 2:
                raise DomainError("a continual sum needs bounds=(lower, upper)")
            lo_b, hi_b = (_exact(b) for b in bounds)
            if not (-MAX_VALUE <= lo_b <= hi_b <= MAX_VALUE):
                raise DomainError(f"bounds must satisfy −(2^31 − 1) ≤ lower ≤ upper ≤ "
                                  f"2^31 − 1; got {bounds}")
            lo, hi = (_bounds(int(lo_b), int(hi_b)) if all(_integral(b) for b in bounds)
                      else (0, 0))  # a real-valued sum's bounds: set by _plan_grid
        else:
            lo, hi = 0, 1
        if (keys is None) != (by is None):
            raise DomainError("keys= and by= go together (a continual histogram)")
        key_list = None if keys is None else list(keys)
        if key_list is not None:
            if not key_list or len(set(map(repr, key_list))) != len(key_list):
                raise DomainError("keys must be a non-empty list of distinct public keys")
            if not all(isinstance(k, (str, int, bool)) for k in key_list):  # noqa: UP038
                raise DomainError("keys must be str or int")
        for name, col in (("value", value), ("by", by), ("unit", unit), ("time", time)):
            if col is not None and not isinstance(col, str):
                raise DomainError(f"{name} must be a column name")
        kind = _time_kind(origin)
        if time is not None:
            if kind == "int":
                origin = 1 if origin is None else integer(origin, "origin")
                every = 1 if every is None else integer(every, "every", minimum=1)
            else:
                every = timedelta(days=1) if every is None else every
                if not isinstance(every, timedelta) or every <= timedelta(0):
                    raise DomainError("every must be a positive timedelta for a date origin")
        if time is not None:  # the grid's last time exists (unbounded: UNBOUNDED_STEPS')
            steps = (UNBOUNDED_STEPS if horizon is None
                     else integer(horizon, "horizon", minimum=1))
            try:
                end = origin + steps * every
            except OverflowError:
                end = None
            if end is None or (kind == "int" and not -(1 << 63) <= end < 1 << 63):
                raise DomainError(
                    "the time grid's last step ends past the largest representable time"
                    if horizon is not None else f"an unbounded stream's time grid must "
                    f"hold {UNBOUNDED_STEPS} steps before the largest representable time")
        if window is not None:
            window = integer(window, "window", minimum=1)
        if not 0 < float(beta) < 1:
            raise DomainError("beta must be in (0, 1)")
        if nonnegative is None:  # default: clip when no total can be negative (counts)
            nonnegative = value is None or _exact(bounds[0]) >= 0
        return {"version": VERSION, "horizon": horizon, "mechanism": mechanism,
                "epsilon": None if epsilon is None else str(Fraction(epsilon)),
                "rho": None if rho is None else str(Fraction(rho)),
                "value": value, "bounds": [lo, hi], "keys": key_list, "by": by, "unit": unit,
                "contributions": integer(contributions, "contributions", minimum=1),
                "time": time, "time_kind": kind,
                "origin": origin.isoformat() if kind != "int" else origin,
                "every": every.total_seconds() if isinstance(every, timedelta) else every,
                "window": window, "beta": float(beta),
                "options": [bool(nonnegative), bool(monotone), bool(as_int)]}

    def _plan_grid(self, value: Any, bounds: Any, grid_bits: Any) -> None:
        """The grid of a real-valued sum (module docstring), in the configuration."""
        self.config["grid_bits"] = None
        if value is None:
            if grid_bits is not None:
                raise DomainError("grid_bits applies to a continual sum")
            return
        lo_b, hi_b = (_exact(b) for b in bounds)
        if grid_bits is None and all(_integral(b) for b in bounds):
            return  # the integer path of _plan
        bits = 16 if grid_bits is None else integer(grid_bits, "grid_bits", minimum=0,
                                                      maximum=24)
        top = max(abs(lo_b), abs(hi_b))
        if top == 0:
            raise DomainError("a real-valued sum needs a non-zero bound")
        self.config.update(bounds=[str(lo_b), str(hi_b)], grid_bits=bits)

    def _build(self) -> None:
        c = self.config
        self.grid = 0  # k: releases are multiples of 2^k (0: integers)
        if c.get("grid_bits") is not None:
            lo_b, hi_b = (Fraction(b) for b in c["bounds"])
            top = max(abs(lo_b), abs(hi_b))
            log2 = top.numerator.bit_length() - top.denominator.bit_length()
            log2 -= Fraction(2) ** log2 > top  # ⌊log₂ top⌋
            self.grid = log2 - c["grid_bits"]
            if self.grid < MIN_GRID:  # 2^−k would overflow a float after the debit
                raise DomainError(f"a real-valued sum's largest bound must be at least "
                                  f"2^{MIN_GRID + c['grid_bits']} (its grid 2^{self.grid} is "
                                  f"finer than 2^{MIN_GRID})")
            unit = Fraction(2) ** -self.grid
            self.grid_range = (math.floor(lo_b * unit), math.floor(hi_b * unit))
            sens = math.ceil(top * unit)  # ≥ |⌊v·2^−k⌋| for v in the bounds, and ≥ the
            # change of a floored step total when one value moves it by ≤ max(|lo|, |hi|)
        else:
            lo, hi = c["bounds"]
            self.grid_range = (lo, hi)
            sens = max(abs(lo), abs(hi)) if c["value"] is not None else 1
        self.sensitivity = max(sens, 1)
        n = 1 if c["keys"] is None else len(c["keys"])
        eps, rho = (None if v is None else Fraction(v) for v in (c["epsilon"], c["rho"]))
        # every key's counter is the same plan (module docstring): one object, built once
        # (a plan holds no data; each key's state is its own)
        counter = make_counter(c["mechanism"], c["horizon"], epsilon=eps, rho=rho,
                               sensitivity=self.sensitivity, contributions=c["contributions"])
        self.counters: list[Counter] = [counter] * n
        self.keys: list[Any] = [None] if c["keys"] is None else list(c["keys"])
        self._index = {repr(k): i for i, k in enumerate(self.keys)}

    def _describe(self) -> str:
        c, counter = self.config, self.counters[0]
        what = f"sum of {c['value']} in {c['bounds']}" if c["value"] else "count"
        if c.get("grid_bits") is not None:
            what += f" on the grid 2^{self.grid}"
        keys = "" if c["keys"] is None else f" by {c['by']} over {len(c['keys'])} keys"
        return (f"continual {what}{keys}: {counter.name}, horizon {c['horizon']}, "
                f"{counter.unit.level} level (Δ = {self.sensitivity}"
                f"{' grid steps' if self.grid else ''}, w = {c['contributions']}"
                f"{', enforced on ' + c['unit'] if c['unit'] else ''}), window {c['window']}, "
                f"{counter.budget.loss}{', rows ' + c['label'] if c.get('label') else ''}")

    @property
    def loss(self) -> PrivacyLoss:
        """The whole stream's loss (the budget, charged once)."""
        return self.counters[0].loss

    @property
    def delta(self) -> int:
        """Deprecated name of :attr:`sensitivity`, the counters' Δ (``delta`` is δ)."""
        warnings.warn("ContinualRelease.delta is deprecated: use .sensitivity (delta is δ)",
                      DeprecationWarning, stacklevel=2)
        return int(self.sensitivity)

    @property
    def t(self) -> int:
        return int(self.state["t"])

    @property
    def horizon(self) -> int | None:
        return self.counters[0].horizon

    # -- data side -------------------------------------------------------------------------
    def interval(self, t: int) -> tuple[Any, Any]:
        """Step t's times [lo, hi) (module docstring).

        Raises
        ------
        HorizonExceededError
            If the grid's end passes the largest representable time (an int64, year 9999):
            the stream cannot go on (nothing is released).
        """
        c = self.config
        if c["time_kind"] == "int":
            lo = c["origin"] + (t - 1) * c["every"]
            if not -(1 << 63) <= lo < lo + c["every"] <= (1 << 63) - 1:
                raise HorizonExceededError(f"step {t} ends past the largest int64 time")
            return lo, lo + c["every"]
        origin: Any = (datetime.fromisoformat(c["origin"]) if c["time_kind"] == "datetime"
                       else date.fromisoformat(c["origin"]))
        every = timedelta(seconds=c["every"])
        try:
            return origin + (t - 1) * every, origin + t * every
        except OverflowError:
            raise HorizonExceededError(f"step {t} ends past the year 9999") from None

    def check_schema(self, frame: object) -> pl.DataFrame:
        """The frame's public schema checked (plan-like: raises before the step advances)."""
        if isinstance(frame, pl.LazyFrame):
            frame = frame.collect()
        if not isinstance(frame, pl.DataFrame):
            raise DomainError("a step is an int, a mapping key → int, or a Polars frame")
        c = self.config
        needed = [col for col in (c["value"], c["by"], c["unit"], c["time"]) if col]
        missing = [col for col in needed if col not in frame.columns]
        if missing:
            raise DomainError(f"the step's frame lacks the columns {missing}")
        if c["value"] and not frame.schema[c["value"]].is_numeric():
            raise DomainError(f"column {c['value']} must be numeric")
        if c["time"]:
            dtype = frame.schema[c["time"]]
            ok = (dtype.is_integer() if c["time_kind"] == "int" else
                  dtype == pl.Date if c["time_kind"] == "date" else isinstance(dtype, pl.Datetime))
            if not ok:
                raise DomainError(f"time column {c['time']} is {dtype}, not {c['time_kind']}")
            if c["time_kind"] == "datetime":
                aware = datetime.fromisoformat(c["origin"]).tzinfo is not None
                if aware != (getattr(dtype, "time_zone", None) is not None):
                    raise DomainError(f"time column {c['time']} is {dtype} but origin is "
                                      f"{'aware' if aware else 'naive'}: give an origin with "
                                      "the column's time zone (or none for a naive column)")
        return frame

    def _dry_run(self, frame: Any) -> pl.DataFrame:
        """The frame's schema checked and a step computed on zero rows of it (at plan time
        with the query's schema, before the debit, and before every frame step): what would
        fail on the rows (a time zone Polars refuses to compare, …) fails here, naming no
        value. Returns the frame."""
        frame = self.check_schema(frame)
        opened = getattr(self, "state", None)
        if opened is None:  # at plan time: an opening state's shape
            self.state = {"t": 0, "units": {}}
        try:
            self._increments(frame.clear())  # zero rows: reads and changes nothing
        except DPError:
            raise
        except Exception as exc:  # noqa: BLE001 - a type error of the schema, no rows read
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise DomainError(f"a step does not run on this schema: {type(exc).__name__}: "
                              f"{first}") from None
        finally:
            if opened is None:
                del self.state
        return frame

    def _increments(self, frame: pl.DataFrame) -> list[int]:
        """Per key, the step's increment from the frame's rows (total; module docstring)."""
        c = self.config
        n = len(frame)
        keep = np.ones(n, dtype=bool)
        if c["time"]:
            lo, hi = self.interval(self.t + 1)
            times = frame.get_column(c["time"])
            keep &= ((times >= lo) & (times < hi)).fill_null(False).to_numpy()
        idx = np.zeros(n, dtype=np.int64)
        if c["by"]:
            ks = frame.get_column(c["by"]).to_list()
            idx = np.array([self._index.get(repr(k), -1) for k in ks], dtype=np.int64)
            keep &= idx >= 0
        lo_v, hi_v = self.grid_range
        if c["value"] and c.get("grid_bits") is not None:  # floored to the grid, vectorised
            col = frame.get_column(c["value"]).cast(pl.Float64).to_numpy()
            finite = np.isfinite(col)  # null/NaN/±inf: ``lower`` (the clamp rule)
            lo_f, hi_f = (float(Fraction(b)) for b in c["bounds"])
            scaled = np.floor(np.clip(np.where(finite, col, lo_f), lo_f, hi_f)
                              * 2.0 ** -self.grid)  # exact: a power of two
            vals = np.clip(scaled, lo_v, hi_v).astype(np.int64).tolist()
        elif c["value"]:
            vals = [clamp(v, lo_v, hi_v) for v in frame.get_column(c["value"]).to_list()]
        else:
            vals = [1] * n
        units = (canonical_values(frame.get_column(c["unit"])).to_list() if c["unit"]
                 else None)  # -0.0 is 0.0: one unit, as the batch side groups it
        seen: dict[str, int] = self.state["units"]
        w = c["contributions"]
        out = [0] * len(self.keys)
        for r in np.flatnonzero(keep).tolist():
            if units is not None:
                u = repr(units[r])
                if seen.get(u, 0) >= w:
                    continue  # the unit's w events are spent: dropped
                seen[u] = seen.get(u, 0) + 1
            out[int(idx[r])] += vals[r]
        return [min(max(v, -MAX_VALUE), MAX_VALUE) for v in out]

    def feed(self, step: object, *, save: tuple[str | Path, bytes] | None = None
             ) -> ContinualStep:
        """Feed the next step; its releases.

        Parameters
        ----------
        step : int, mapping or polars frame
            An int (one key), a mapping key → int (absent keys are 0; others ignored), or
            the step's new rows. An int is the step's total (clamp rule of
            :mod:`dpkit.stream.stream`, to [0, 2^31 − 1] for a count, to the signs the
            bounds allow for a sum); its privacy unit is declared, as in
            :class:`~dpkit.stream.Stream` — frames enforce it.
        save : (path, key), optional
            Also :meth:`save` the new state there, *before* the step is recorded in the
            ledger (with the state's MAC): a crash then never loses a released step's state
            (module docstring, rollback protection).

        Raises
        ------
        HorizonExceededError
            If the horizon has been reached.
        DomainError
            For a frame whose schema does not fit, or an int fed to a histogram (before
            anything advances).
        StreamRollbackError
            A stream paid through a ledger whose mark is past this state's step (a stale or
            second copy): nothing is released and the state is unchanged.
        """
        if self.horizon is not None and self.t >= self.horizon:
            raise HorizonExceededError(f"the stream's horizon of {self.horizon} steps is "
                                       "reached; open a new stream (with its own budget)")
        c = self.config
        if self._ledger is not None and self.paid is not None and self._ledger.retired(
                self.paid["dataset"]):  # checked at each step (``dpkit ledger retire``)
            raise DatasetRetiredError(f"the dataset of stream {self.release_id} is retired: "
                                      "no further step is released")
        # the state holds only JSON types: marshal copies it ~10× faster than deepcopy (an
        # in-memory copy of our own values, never read from outside)
        before = None if self._ledger is None else marshal.loads(marshal.dumps(
            (self.state, self.extra)))
        # an int is the step's total: a count in [0, 2^31 − 1]; a sum with the sign its
        # bounds allow (the neighbouring relation stays the declared one, as in Stream)
        lo = -MAX_VALUE if c["value"] and self.grid_range[0] < 0 else 0
        hi = MAX_VALUE if not c["value"] or self.grid_range[1] > 0 else 0
        if not isinstance(step, pl.DataFrame | pl.LazyFrame | Mapping) and c["keys"]:
            raise DomainError("a continual histogram takes a mapping key → int or a frame")
        if isinstance(step, pl.DataFrame | pl.LazyFrame):
            step = self._dry_run(step)
        try:  # computed on the state, released only once the ledger's mark moves (docstring)
            if isinstance(step, pl.DataFrame):
                incs = self._increments(step)
            elif isinstance(step, Mapping):
                incs = [clamp(self._scaled(step.get(k, 0)), lo, hi) for k in self.keys]
            else:
                incs = [clamp(self._scaled(step), lo, hi)]
            out = self._step(incs)
            # the last released step only (O(keys)): a host appends it to its public log,
            # and recovers it from here if it stopped between the ledger's mark and the log
            self.state["released"] = out.as_dict()
            mac = None if save is None else self.save(*save)
            if self._ledger is not None:
                self._ledger.advance_stream(self.release_id, out.t, mac)
        except BaseException:
            if before is not None:
                self.state, self.extra = before
            raise
        return out

    def _scaled(self, total: Any) -> Any:
        """A step's total in grid steps (a real-valued sum; floored), else as given; never
        raises (anything unreadable goes on to the clamp rule)."""
        if not self.grid or isinstance(total, bool) or not isinstance(
                total, int | float | np.integer | np.floating):
            return total
        scaled = float(total) * 2.0 ** -self.grid  # may overflow to ±inf: the clamp rule
        return float(math.floor(scaled)) if math.isfinite(scaled) else scaled

    def _step(self, incs: list[int]) -> ContinualStep:
        c = self.config
        self.state["t"] = t = self.t + 1
        releases, windows = {}, {}
        counter = self.counters[0]  # every key's plan: the half-widths are the same
        h = float(counter.half_widths(np.array([t]), c["beta"])[0])
        hw = self._window_half_width(t) if c["window"] else 0.0
        with pooled(len(self.keys)):  # the keys' node noise drawn in vectorised blocks
            for i, key in enumerate(self.keys):
                raw = counter.step(self.state["counters"][i], incs[i])
                releases[key] = self._post(i, t, raw, h)
                if c["window"]:
                    windows[key] = self._window(i, t, raw, hw)
        what = "count" if c["value"] is None else f"sum({c['value']})"
        return ContinualStep(t, releases, windows, 1 - c["beta"], what, c["window"])

    def _post(self, i: int, t: int, raw: float, h: float) -> StepRelease:
        g = 2.0 ** self.grid  # grid steps → values (1 for counts and integer sums)
        value, low, high = raw, raw - h, raw + h
        nonnegative, monotone, as_int = self.config["options"]
        if nonnegative:
            value = max(value, 0.0)
        if nonnegative or self._never_negative():  # cutting at 0 loses no coverage
            low, high = max(low, 0.0), max(high, 0.0)
        last = self.state["last"][i]
        if monotone and last is not None:
            value = max(value, last)
        self.state["last"][i] = value
        value *= g
        return StepRelease(t, int(round(value)) if as_int else value, raw * g, h * g,
                           low * g, high * g)

    def _window_half_width(self, t: int) -> float:
        """The window release's half-width at step t, in grid steps (the same for every key)."""
        counter = self.counters[0]
        sq, am = window_weights(counter, t, self.config["window"])
        return float(half_width(counter.gaussian, np.array([sq]), np.array([am]),
                                self.config["beta"])[0])

    def _window(self, i: int, t: int, raw: float, h: float) -> StepRelease:
        width = self.config["window"]
        recent: list[float] = self.state["recent"][i]
        recent.append(raw)
        before = recent[-width - 1] if len(recent) > width else 0.0
        del recent[:-width - 1]
        g = 2.0 ** self.grid
        est = (raw - before) * g
        h *= g
        value = max(est, 0.0) if self.config["options"][0] else est
        if self.config["options"][2]:
            value = int(round(value))
        low, high = est - h, est + h
        if self.config["options"][0] or self._never_negative():
            low, high = max(low, 0.0), max(high, 0.0)
        return StepRelease(t, value, est, h, low, high)

    def _never_negative(self) -> bool:
        """No running or window total can be negative: a count, or a sum whose lower bound
        is ≥ 0 (public configuration)."""
        c = self.config
        return c["value"] is None or Fraction(c["bounds"][0]) >= 0

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path, key: bytes) -> str:
        """Write the stream (configuration, state, the paying release, :attr:`extra`)
        encrypted and authenticated with the Fernet ``key`` (module docstring), atomically,
        mode 0600; returns the state's MAC (:func:`state_mac`)."""
        from cryptography.fernet import Fernet

        # the state's text is kept as saved, so its MAC is computed once, on that text,
        # here and at restore (no second, sorted encoding of an O(keys) state)
        text = json.dumps(self.state, separators=(",", ":"))
        payload = json.dumps({"config": self.config, "state_text": text,
                              "release_id": self.release_id,
                              "description": self.description, "paid": self.paid,
                              "extra": self.extra}, separators=(",", ":"))
        token = Fernet(key).encrypt(payload.encode())
        target = Path(path)
        # mkstemp: a fresh name, created with O_EXCL and mode 0600
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(token)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        return state_mac(key, text)

    @classmethod
    def restore(cls, path: str | Path, key: bytes, accountant: AccountantLike
                ) -> ContinualRelease:
        """Reopen a saved stream after a restart, without a new debit.

        Parameters
        ----------
        path : str or Path
            Written by :meth:`save`.
        key : bytes
            Its Fernet key.
        accountant : LedgerAccountant or Session
            Over the ledger and dataset that paid for the stream.

        Raises
        ------
        DomainError
            For a wrong key or a changed file, an accountant without a ledger, or a ledger
            without that paid release (dataset, description, loss, status "released").
        StreamRollbackError
            For a stale token: the ledger's step mark is not this state's step, or names
            another state (module docstring, rollback protection).
        """
        from cryptography.fernet import Fernet, InvalidToken

        try:
            doc = json.loads(Fernet(key).decrypt(Path(path).read_bytes()))
        except (InvalidToken, ValueError):
            raise DomainError("the stream's state does not decrypt with this key (a wrong "
                              "key, or the file was changed)") from None
        text = doc.get("state_text")  # None: a token saved with the state as an object
        if isinstance(text, str):
            doc["state"] = json.loads(text)
        c = doc["config"]
        if c.get("version") != VERSION:
            raise DomainError(f"unknown stream state version {c.get('version')}")
        kind = c["time_kind"]
        origin = (c["origin"] if kind == "int" else datetime.fromisoformat(c["origin"])
                  if kind == "datetime" else date.fromisoformat(c["origin"]))
        every = c["every"] if kind == "int" else timedelta(seconds=c["every"])
        nonneg, mono, as_int = c["options"]
        stream = cls(c["horizon"], accountant=None, mechanism=c["mechanism"],
                     epsilon=c["epsilon"], rho=c["rho"], value=c["value"],
                     bounds=tuple(c["bounds"]) if c["value"] else None, keys=c["keys"],
                     grid_bits=c.get("grid_bits"),
                     by=c["by"], unit=c["unit"], contributions=c["contributions"],
                     time=c["time"], origin=origin if c["time"] else None,
                     every=every if c["time"] else None, window=c["window"], beta=c["beta"],
                     nonnegative=nonneg, monotone=mono, integer=as_int,
                     label=c.get("label"), _restore=doc)
        target = accountant_of(accountant, unit_bounded=_bounds_unit(accountant, c["unit"]))
        if getattr(target, "ledger", None) is None or doc["release_id"] is None:
            raise DomainError("a stream is restored against the ledger that paid for it")
        paid = _paid_row(target, doc["release_id"])
        # the description names the stream's own loss (in its measure); the ledger's loss
        # text is in the dataset's measure, so it is compared with what was paid, not with
        # the stream's text (a pure-ε stream on a zCDP dataset restores)
        if not (paid is not None and paid == doc["paid"] and paid["query"] == doc["description"]
                and paid["status"] == "released" and stream._describe() == doc["description"]):
            raise DomainError("the ledger has no paid release for this stream state")
        ledger: Any = getattr(target, "ledger", None)
        step, mac = ledger.stream_step(doc["release_id"])
        if step != stream.t or (mac is not None and not hmac.compare_digest(
                mac, state_mac(key, text if isinstance(text, str) else stream.state))):
            raise StreamRollbackError(
                f"stream {doc['release_id']}: the ledger records step {step} as the last "
                f"released{'' if mac is None else ' (from another state)'}; this saved state "
                f"is at step {stream.t}. A stale copy is never fed (its steps' noise would be "
                "drawn again).")
        stream._ledger = ledger
        return stream
