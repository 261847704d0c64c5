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

How a query reaches the holdout (issue 30)
------------------------------------------
The argument above needs φ to be a function of one row, with values in [lo, hi], and the
mechanism's output to depend on the holdout only through the sparse vector and the noisy
means. An analyst's function run on the whole holdout broke both: ``f(D) = D[0]`` in every
row has sensitivity hi − lo, not Δ, and a function whose *shape* (or exception) depended on
one holdout value made the old ``query`` raise for that value only — a free bit per query,
spending nothing (1,000 of 1,000 labels recovered at a claimed ε = 1). So no analyst code
sees the whole holdout, and nothing the holdout side does reaches the analyst except
through the mechanism:

- :meth:`ReusableHoldout.query` takes **expressions** (Polars or narwhals expressions, or
  :mod:`dpkit.frame.language`'s grammar), evaluated by the library on Polars frames. Each is
  checked at plan time on the schema alone — before the holdout is read — by the row-wise
  allow-list (:func:`dpkit.frame.rowwise.check_step`: element-wise operations only, casts
  that cannot fail, no Python functions), and the number m and the types of the outputs
  (numbers or booleans, one value per row) are fixed there. This is the defended path: the
  analyst's code never runs on the holdout.
- :meth:`ReusableHoldout.query_rows` takes a Python function of **one row**. The training
  set decides the output's shape (a number or a vector of m numbers; a failure there is a
  :class:`DomainError`, the training set being the analyst's). On the holdout the function
  gets a copy of one row at a time, and a row on which it raises (anything, even
  ``SystemExit``), returns another shape or a non-numeric type counts as m values lo.
- The whole-set callable of earlier versions is refused (:class:`DomainError`, before
  anything is read): no totality rule can restore its sensitivity.

On every path the per-row values are clamped into [lo, hi] (NaN and null count as lo, ±∞
as the nearest bound) and cut to an exact grid, so the data side after the debit is total:
no holdout value changes whether a query raises, how many answers it returns or what it
prints.

What library mode cannot defend: a Python function run in-process can do anything with the
rows it is given — copy them to a global, a file or the network, keep state across rows
(so ``query_rows`` with a stateful function is not row-wise), print them, or take time that
depends on them. The defence is not to hand it the data: use :meth:`~ReusableHoldout.query`
(expressions) whenever the analyst may not be trusted with the holdout's rows, and run an
untrusted analyst's code outside the curator's process. As everywhere in library mode
(``docs/security.md``), reaching into private attributes (``holdout._holdout``), ``gc`` and
timing are out of scope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, TypeAlias

import narwhals as nw
import numpy as np
import numpy.typing as npt
import polars as pl

from dpkit.core import numbers, rng
from dpkit.core.component import Measurement
from dpkit.core.domains import AtomDomain, Kind, VectorDomain
from dpkit.core.measures import PureDP
from dpkit.core.metrics import HammingDistance
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.frame.language import Expr, compile_expr
from dpkit.frame.rowwise import check_step
from dpkit.mechanisms import SparseVector, frontend, make_noise
from dpkit.mechanisms.frontend import AccountantLike, charge, check_accountant
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["ReusableHoldout", "HoldoutAnswer", "Query", "RowFunction", "audit_cases"]

VALUE_STEPS = 1 << 20  # per-row values are cut to (hi − lo)/2^20 steps: exact sums
MAX_ROWS = 1 << 40  # n·2^20 stays below 2^63
MAX_QUERIES = 100_000  # values per row in one call (m)

Query: TypeAlias = "pl.Expr | nw.Expr | Expr | Sequence[pl.Expr | nw.Expr | Expr]"
RowFunction: TypeAlias = Callable[[Any], Any]
Table: TypeAlias = "pl.DataFrame | np.ndarray"


class HoldoutAnswer(float):
    """A query's answer (a float) that also says where it came from: ``over`` is True when
    the holdout was used (training and holdout disagreed by more than the threshold)."""

    over: bool

    def __new__(cls, value: float, over: bool) -> HoldoutAnswer:
        obj = super().__new__(cls, value)
        obj.over = over
        return obj


def _table(data: Any, name: str) -> Table:
    """The allow-list of data sets: a Polars DataFrame, or what NumPy turns into a numeric
    array of rows (one or two dimensions); copied (read-only) so that no caller shares it."""
    if isinstance(data, pl.DataFrame):
        rows = data.height
        table: Table = data
    else:
        try:
            array = np.array(data)
        except (TypeError, ValueError):
            raise DomainError(f"{name} must be a Polars DataFrame or a numeric array of "
                              "rows") from None
        if array.dtype.kind not in "biuf" or array.ndim not in (1, 2):
            raise DomainError(f"{name} must be a Polars DataFrame or a numeric array of rows "
                              f"(1 or 2 dimensions); got {array.dtype}, {array.ndim} dimensions")
        array.setflags(write=False)
        rows, table = len(array), array
    if rows < 1:
        raise DomainError(f"{name} is empty")
    if rows > MAX_ROWS:
        raise DomainError(f"at most {MAX_ROWS} rows per set")
    return table


def _layout(table: Table) -> tuple[Any, ...]:
    """What a row looks like (public: no value is read): the schema or the row's shape."""
    if isinstance(table, pl.DataFrame):
        return ("frame", *table.schema.items())
    return ("array", table.shape[1:])


def _row(table: Table, i: int) -> Any:
    """Row i as the analyst's function receives it: a dict of Python values (a frame) or a
    fresh copy (an array), never a view of the holdout."""
    if isinstance(table, pl.DataFrame):
        return table.row(i, named=True)
    return table[i].copy()


def _as_values(result: Any) -> np.ndarray:
    """A function's result as float64 values; numbers and booleans only (a complex, an
    object or a string is refused rather than converted with a warning)."""
    values = np.asarray(result)
    if values.dtype.kind not in "biuf":
        raise DomainError(f"a query's values must be numbers or booleans, not {values.dtype}")
    return values.astype(np.float64)


def _train_rows(f: RowFunction, table: Table) -> tuple[np.ndarray, tuple[int, ...]]:
    """The training side of :meth:`ReusableHoldout.query_rows`: (rows, m) values and the
    shape of one row's result, fixed by the first row (the analyst's data: failures raise
    :class:`DomainError`)."""
    values: list[np.ndarray] = []
    for i in range(len(table)):
        try:
            value = _as_values(f(_row(table, i)))
        except DomainError:
            raise
        except Exception as exc:  # the analyst's own data: say what failed
            raise DomainError(f"the row function fails on training row {i}: "
                              f"{type(exc).__name__}: {exc}") from None
        if i == 0 and (value.ndim > 1 or value.size > MAX_QUERIES):
            raise DomainError(f"a row function returns a number or a vector of at most "
                              f"{MAX_QUERIES} numbers; got shape {value.shape}")
        if values and value.shape != values[0].shape:
            raise DomainError(f"the row function returned shape {value.shape} on training "
                              f"row {i} and {values[0].shape} on row 0")
        values.append(value)
    shape = values[0].shape
    return np.stack(values).reshape(len(table), -1), shape


def _holdout_rows(f: RowFunction, table: Table, shape: tuple[int, ...], lo: float
                  ) -> np.ndarray:
    """The holdout side of :meth:`ReusableHoldout.query_rows`, total: a row on which ``f``
    raises anything, or returns another shape or type, counts as lo in every column."""
    m = int(np.prod(shape))
    out = np.full((len(table), m), lo)
    for i in range(len(table)):
        try:
            value = _as_values(f(_row(table, i)))
            if value.shape == shape:
                out[i] = value.reshape(-1)
        except BaseException:  # anything, even SystemExit: the fixed answer (module docs)
            out[i] = lo
    return out


def _compile(query: Query, schema: pl.Schema) -> tuple[list[Any], bool]:
    """The query's expressions, checked at plan time on the schema alone, and whether they
    are Polars' own (else narwhals, which the grammar compiles to)."""
    items = list(query) if isinstance(query, list | tuple) else [query]
    if not 1 <= len(items) <= MAX_QUERIES:
        raise DomainError(f"a query holds 1 to {MAX_QUERIES} expressions")
    if all(isinstance(e, pl.Expr) for e in items):
        native = True
    elif all(isinstance(e, nw.Expr | Expr) for e in items):
        nw_schema = nw.from_native(pl.LazyFrame(schema=schema)).collect_schema()
        items = [compile_expr(e, nw_schema) if isinstance(e, Expr) else e for e in items]
        native = False
    else:
        raise DomainError("ReusableHoldout.query takes Polars expressions, or narwhals / "
                          "dpkit.frame.language expressions (not mixed); a Python function "
                          "goes through query_rows, one row at a time")
    check_step("select", tuple(items), {}, schema)  # row-wise and total, or DomainError
    return items, native


def _select(frame: pl.DataFrame, exprs: list[Any], native: bool) -> pl.DataFrame:
    if native:
        return frame.select(exprs)
    return nw.to_native(nw.from_native(frame, eager_only=True).select(*exprs))


def _width(exprs: list[Any], native: bool, schema: pl.Schema) -> int:
    """m, from two rows of nulls (no data): one number or boolean per row per output."""
    try:
        out = _select(pl.DataFrame(schema=schema).clear(2), exprs, native)
    except Exception as exc:  # no data was read: the expression itself fails
        raise DomainError(f"the query fails on rows of nulls: {type(exc).__name__}") from None
    if out.height != 2:
        raise DomainError("every expression must give one value per row (a constant alone "
                          "does not)")
    for name, dtype in out.schema.items():
        if not (dtype.is_numeric() or dtype == pl.Boolean):
            raise DomainError(f"the query's output {name!r} is {dtype}; its values must be "
                              "numbers or booleans")
    return out.width


def _frame_values(frame: pl.DataFrame, exprs: list[Any], native: bool) -> np.ndarray:
    out = _select(frame, exprs, native)
    return out.select(pl.all().cast(pl.Float64)).to_numpy()  # null → NaN → lo


def _exact_means(values: np.ndarray, lo: Fraction, width: Fraction) -> list[Fraction]:
    """Exact means of (rows, m) per-row values: each is clamped to [lo, lo + width]
    (NaN → lo, ±∞ → the nearest bound) and cut down to the grid lo + width·j/2^20, so the
    sums are exact integer sums and every mean an exact Fraction (a substituted row moves
    it by ≤ width/rows)."""
    n = values.shape[0]
    with np.errstate(all="ignore"):  # overflow or NaN here follows the rule, silently
        unit = (values - float(lo)) / float(width)
        unit = np.nan_to_num(unit, nan=0.0, posinf=1.0, neginf=0.0)
        steps = np.floor(np.clip(unit, 0.0, 1.0) * VALUE_STEPS).astype(np.int64)
    sums = steps.sum(axis=0)  # ≤ n·2^20 < 2^63: exact
    return [lo + width * int(t) / (n * VALUE_STEPS) for t in sums.tolist()]


@register(audit=lambda: audit_cases())  # the audit battery's cases
class ReusableHoldout:
    """Thresholdout: adaptive statistical queries answered from a training set, checked
    against a holdout through the sparse vector.

    Parameters
    ----------
    train, holdout : polars.DataFrame or numeric array of rows
        The training set (the analyst's) and the holdout (protected; its size n is public,
        substitute-one neighbours). A Polars DataFrame (needed for :meth:`query`'s
        expressions), or anything NumPy turns into a numeric array of shape (rows,) or
        (rows, columns) (copied, read-only). Queries read them through :meth:`query`
        (expressions) or :meth:`query_rows` (a function of one row).
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
        NaN and null count as lo, and each value is cut down to a multiple of
        (hi − lo)/2^20 above lo, so that means are exact (the data side never raises).
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
        ε ≤ 0, T < 0, c < 1, lo ≥ hi, an empty set or one outside the allow-list, a bad
        accountant — all before anything is debited.
    BudgetExceededError
        From the accountant if it cannot pay (nothing is read), or from a query once c
        over-threshold answers were given.

    Notes
    -----
    Privacy map: ε-DP for the holdout (module docstring: Lyu et al. 2017 Thm 2 for the
    comparisons, the Laplace mechanism for the c answers, sequential composition), for
    queries whose per-row value depends on its own row only: always for :meth:`query`'s
    allow-listed expressions; for :meth:`query_rows`, as long as the analyst's function
    keeps no state across rows and has no side effects (what library mode cannot check:
    module docstring).
    """

    def __init__(self, train: npt.ArrayLike, holdout: npt.ArrayLike, *, epsilon: numbers.Number,
                 threshold: numbers.Number, max_over: int = 100,
                 bounds: tuple[numbers.Number, numbers.Number] = (0, 1),
                 accountant: AccountantLike = None) -> None:
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
        self._train, self._holdout = _table(train, "train"), _table(holdout, "holdout")
        if _layout(self._train) != _layout(self._holdout):
            raise DomainError("train and holdout must have one layout: Polars DataFrames "
                              "with one schema, or arrays with the same columns")
        check_accountant(accountant)
        n = len(self._holdout)
        self.n, self.c = n, c
        self.bounds = (float(lo), float(hi))
        self._exact_bounds = (lo, hi - lo)
        self.sensitivity = (hi - lo) / n
        self.loss = PureDP(eps)
        self._answer = make_noise(self.sensitivity, epsilon=eps / (2 * c), output="grid")
        self.over_answers = 0
        rows = (frontend.row_of(self._answer, "over-threshold holdout mean"),)
        self._svt: SparseVector = charge(
            accountant, self.loss,
            f"reusable holdout: n={n}, T={float(t)}, c={c}, bounds={self.bounds}",
            lambda: SparseVector(t, eps / 2, self.sensitivity, max_positives=c), rows)

    @property
    def exhausted(self) -> bool:
        return self._svt.halted

    def _check_open(self) -> None:
        if self.exhausted:
            raise BudgetExceededError("the reusable holdout has given its c over-threshold "
                                      "answers")

    def query(self, query: Query) -> list[HoldoutAnswer]:
        """Answer m statistical queries given as row-wise expressions, in order.

        Parameters
        ----------
        query : expression or sequence of m expressions
            Polars expressions, or narwhals / :mod:`dpkit.frame.language` expressions (not
            mixed), each giving one number or boolean per row (a multi-column expression
            such as ``pl.col("a", "b")`` counts as one query per column). Evaluated by the
            library on ``train`` and ``holdout``, which must be Polars DataFrames with one
            schema.

        Returns
        -------
        list of HoldoutAnswer
            Up to m answers, in order: E_t[φ] when the comparison is below threshold, else
            E_h[φ] + Laplace noise clamped to the bounds (``over`` True). Shorter than m
            only when the c-th over-threshold answer was given inside the batch.

        Raises
        ------
        DomainError
            Before the holdout is read: a callable (use :meth:`query_rows`), sets that are
            not Polars DataFrames, an expression off the row-wise allow-list
            (:func:`dpkit.frame.rowwise.check_step`), an output that is not a number or a
            boolean per row, or a failure on the training set.
        BudgetExceededError
            When the c over-threshold answers were spent before this call.

        Notes
        -----
        ε-DP for the holdout over all queries (class Notes). The holdout side is total: if
        the library's evaluation failed or returned another shape anyway, every value is lo.
        """
        self._check_open()
        train, holdout = self._train, self._holdout
        if not (isinstance(train, pl.DataFrame) and isinstance(holdout, pl.DataFrame)):
            raise DomainError("expressions need train and holdout as Polars DataFrames")
        exprs, native = _compile(query, holdout.schema)
        m = _width(exprs, native, holdout.schema)
        try:
            train_values = _frame_values(train, exprs, native)
        except Exception as exc:  # the training set is the analyst's: say what failed
            raise DomainError(f"the query fails on the training set: {exc}") from None
        lo = self.bounds[0]
        try:
            holdout_values = _frame_values(holdout, exprs, native)
        except BaseException:  # allow-listed expressions cannot fail; if one did anyway
            holdout_values = np.full((self.n, m), lo)
        if holdout_values.shape != (self.n, m):
            holdout_values = np.full((self.n, m), lo)
        return self._answer_all(train_values, holdout_values)

    def query_rows(self, f: RowFunction) -> list[HoldoutAnswer]:
        """Answer m statistical queries given as a Python function of one row, in order.

        Parameters
        ----------
        f : callable
            ``f(row)`` → a number or a vector of m numbers (booleans count as 0/1). A row
            is a dict of column → value (a Polars DataFrame) or a copy of the array's row
            (a NumPy array). The training set fixes the shape: m = 1 for a number.

        Returns
        -------
        list of HoldoutAnswer
            As :meth:`query`.

        Raises
        ------
        DomainError
            ``f`` is not callable, or fails, returns a non-numeric value or changes shape on
            the training set (before the holdout is read).
        BudgetExceededError
            When the c over-threshold answers were spent before this call.

        Notes
        -----
        On the holdout nothing ``f`` does escapes: a row where it raises (anything, even
        ``KeyboardInterrupt``, so Ctrl-C during the holdout pass only fails the row it
        lands in), returns another shape or a non-numeric value counts as lo in all m
        values. ε-DP for the
        holdout if ``f`` is a function of its row alone — no state kept across rows, no
        side effects — which library mode cannot enforce: ``f`` sees the holdout's rows
        (module docstring). Use :meth:`query` when that matters. Time: n calls of ``f``
        per set.
        """
        self._check_open()
        if not callable(f):
            raise DomainError("query_rows takes a function of one row")
        train_values, shape = _train_rows(f, self._train)
        holdout_values = _holdout_rows(f, self._holdout, shape, self.bounds[0])
        return self._answer_all(train_values, holdout_values)

    def _answer_all(self, train_values: np.ndarray, holdout_values: np.ndarray
                    ) -> list[HoldoutAnswer]:
        """The sparse vector over the m queries; (rows, m) values on each side."""
        lo, width = self._exact_bounds
        train_means = _exact_means(train_values, lo, width)
        holdout_means = _exact_means(holdout_values, lo, width)
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


# -- audit -----------------------------------------------------------------------------------
def _first_answers(h_mean: Fraction, train_mean: Fraction, epsilon: Fraction,
                   threshold: Fraction, sensitivity: Fraction, n: int) -> np.ndarray:
    """n independent runs of a fresh holdout's first answer (c = 1, bounds (0, 1)) on a
    holdout of mean ``h_mean``, vectorised: −1 for "below threshold" (the training mean is
    public), else the noisy holdout mean clamped to [0, 1], as :class:`ReusableHoldout`
    computes them."""
    rng.require_secure()
    over = SparseVector(threshold, epsilon / 2, sensitivity).sample_first_answers(
        abs(h_mean - train_mean), n)
    noise = make_noise(sensitivity, epsilon=epsilon / 2, output="grid", size=n)
    noisy = np.asarray(noise(np.full(n, float(h_mean))), dtype=np.float64)
    return np.where(over, np.clip(noisy, 0.0, 1.0), -1.0)


def _probe(row: np.ndarray) -> Any:
    """The attack of issue 30 as a row function: one value per row, except on the row that
    holds 1/2, where it returns two (the old ``query`` raised for that holdout only)."""
    value = float(row)
    return [value, value] if value == 0.5 else value


def _old_values(data: np.ndarray) -> np.ndarray:
    """The old holdout side (broken on purpose): the analyst's function over all rows at
    once, its ragged result an exception that reaches the analyst."""
    return np.asarray([_probe(row) for row in data], dtype=np.float64)


def audit_cases() -> list[AuditCase]:
    """The reusable holdout's audit cases, ε = 2, c = 1, training mean 1/2, T = 1/8, so
    that both branches occur; substitute-one neighbours on 8 holdout rows in [0, 1].

    ``reusable_holdout``: rows in {0, 1} (means 3/4 and 5/8, Δ = 1/8); broken: Δ taken as
    1/32 (a quarter of the noise) while the claim stays ε = 2.

    ``reusable_holdout_failures``: the exception oracle of issue 30 — :func:`_probe`, whose
    shape depends on one holdout value (1/2 in x, 0 in x'), through the holdout side of
    :meth:`ReusableHoldout.query_rows` (the row becomes lo); broken: the old whole-set
    evaluation, whose exception (sample −2) tells x from x' every time.
    """
    eps, n = Fraction(2), 8
    t_mean, threshold = Fraction(1, 2), Fraction(1, 8)
    lo, width = Fraction(0), Fraction(1)

    def mean(values: np.ndarray) -> Fraction:
        return _exact_means(np.asarray(values, dtype=np.float64).reshape(-1, 1), lo,
                            width)[0]

    def sampler(sensitivity: Fraction) -> Sampler:
        return lambda data, size: _first_answers(mean(data), t_mean, eps, threshold,
                                                 sensitivity, size)

    def rows(data: np.ndarray) -> np.ndarray:  # the library's holdout side, total
        return _holdout_rows(_probe, np.asarray(data, dtype=np.float64), (), 0.0)

    def failures(data: np.ndarray, size: int) -> np.ndarray:
        return sampler(Fraction(1, n))(rows(data), size)

    def old(data: np.ndarray, size: int) -> np.ndarray:
        try:
            _old_values(np.asarray(data, dtype=np.float64))
        except ValueError:
            return np.full(size, -2.0)
        return failures(data, size)

    def claim(name: str, sample: Sampler) -> Measurement:
        return Measurement(lambda data: sample(data, 1), HammingDistance(),
                           PureDP, lambda d: PureDP(eps * d), name,
                           input_domain=VectorDomain(AtomDomain(Kind.FLOAT)))

    x = np.array([1, 1, 1, 1, 1, 1, 0, 0], dtype=np.float64)  # mean 3/4
    x_prime = np.array([1, 1, 1, 1, 1, 0, 0, 0], dtype=np.float64)  # mean 5/8
    probe_x = np.array([1, 1, 1, 1, 1, 1, 0, 0.5])  # the probed row: 1/2 → lo
    probe_x_prime = np.array([1, 1, 1, 1, 1, 1, 0, 0.0])
    return [AuditCase("reusable_holdout", claim("reusable_holdout", sampler(Fraction(1, n))),
                      sampler(Fraction(1, n)), sampler(Fraction(1, 4 * n)), x, x_prime),
            AuditCase("reusable_holdout_failures", claim("reusable_holdout_failures", failures),
                      failures, old, probe_x, probe_x_prime)]
