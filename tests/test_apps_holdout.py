"""dpkit.apps.holdout: the reusable holdout (Thresholdout on the sparse vector).

False-positive rates: the audit of the correct holdout fails only if the histogram test's
majority of 9 votes fails (< 1e-11) or the ε lower bound, certified at confidence 1 − 1e-6,
exceeds the claim (≤ 1e-6); the broken variants (a quarter of the noise; the old exception
oracle) must be flagged. ``test_audit_release_of_the_exception_oracle`` runs the whole
pipeline through :func:`dpkit.audit.audit_release` at a false-positive rate of 1e-6. The
other tests are deterministic."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest

from dpkit.apps.holdout import ReusableHoldout, _exact_means, _holdout_rows, audit_cases
from dpkit.audit import CASES, audit_release
from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import BudgetExceededError, DomainError
from dpkit.frame.language import col

DATA = np.arange(40).reshape(20, 2) % 2


def test_debit_is_the_declared_epsilon_once() -> None:
    f = PrivacyFilter(PureDP(3))
    h = ReusableHoldout(DATA, DATA, epsilon=Fraction(3, 2), threshold=0.1, accountant=f)
    h.query_rows(lambda r: r)
    h.query_rows(lambda r: r[0])
    assert f.spent == PureDP(Fraction(3, 2))
    assert h.loss == PureDP(Fraction(3, 2))


@pytest.mark.parametrize("kwargs", [
    {"epsilon": 0}, {"epsilon": -1}, {"threshold": -0.1}, {"max_over": 0},
    {"bounds": (1, 1)}, {"bounds": (2, 1)}, {"bounds": ("a", 1)}, {"accountant": "x"},
])
def test_bad_input_raises_before_any_debit(kwargs: dict) -> None:
    f = PrivacyFilter(PureDP(3))
    args = {"epsilon": 1, "threshold": 0.1, "accountant": f} | kwargs
    with pytest.raises(DomainError):
        ReusableHoldout(DATA, DATA, **args)
    for bad in ([], np.array(["a", "b"]), [object()], np.zeros((2, 2, 2)), [[1], [1, 2]],
                np.zeros(20), np.zeros((20, 3)), pl.DataFrame({"a": [0, 1]})):  # + layouts
        with pytest.raises(DomainError):
            ReusableHoldout(DATA, bad, epsilon=1, threshold=0.1, accountant=f)
    with pytest.raises(DomainError):
        ReusableHoldout(pl.DataFrame({"a": [0]}), pl.DataFrame({"a": [0.5]}), epsilon=1,
                        threshold=0.1, accountant=f)
    assert f.spent == PureDP(0)


def test_over_budget_is_refused_and_nothing_read() -> None:
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(BudgetExceededError):
        ReusableHoldout(DATA, DATA, epsilon=2, threshold=0.1, accountant=f)
    assert f.spent == PureDP(0)


def test_sensitivity_on_neighbouring_holdouts() -> None:
    """Substituting one holdout row moves every query's |E_h − E_t| by at most Δ."""
    gen = np.random.default_rng(1)  # test data only
    train = gen.uniform(-3, 5, size=50)
    holdout = gen.uniform(-3, 5, size=30)
    h = ReusableHoldout(train, holdout, epsilon=1, threshold=0, bounds=(-1, 2))
    assert h.sensitivity == Fraction(3, 30)
    clamp = lambda v: np.clip(v, -1, 2).mean()  # noqa: E731
    for i in range(30):
        neighbour = holdout.copy()
        neighbour[i] = gen.uniform(-10, 10)
        move = abs(abs(clamp(neighbour) - clamp(train)) - abs(clamp(holdout) - clamp(train)))
        assert move <= float(h.sensitivity) + 1e-12


def test_answers_are_training_when_close_and_budget_halts() -> None:
    train = np.zeros(100)
    holdout = np.ones(100)
    h = ReusableHoldout(train, holdout, epsilon=50, threshold=0.5, max_over=2)
    same = h.query_rows(lambda r: 0.0)  # identical means: below threshold
    assert same == [0.0] and not same[0].over
    out = h.query_rows(lambda r: [r, r, r])  # far apart: over, twice, then halt
    assert len(out) == 2 and all(a.over for a in out)
    assert h.exhausted
    with pytest.raises(BudgetExceededError):
        h.query_rows(lambda r: r)
    with pytest.raises(BudgetExceededError):
        h.query(pl.col("x"))


def test_data_side_is_total() -> None:
    """NaN and out-of-range values are clamped by rule; on the training set (the analyst's)
    a failure or a change of shape is a DomainError, raised before the holdout is read."""
    h = ReusableHoldout(DATA, DATA, epsilon=1, threshold=0.1)
    out = h.query_rows(lambda r: np.full(2, np.nan))
    assert len(out) == 2 and all(0 <= a <= 1 for a in out)
    rows = ReusableHoldout(np.arange(6), np.zeros(4), epsilon=1, threshold=0.1)
    for bad in (lambda r: 1 / 0, lambda r: "x", lambda r: np.zeros((2, 2)),
                lambda r: np.zeros(1 + int(r) % 2)):
        with pytest.raises(DomainError):
            rows.query_rows(bad)
    with pytest.raises(DomainError):
        h.query_rows("not a function")  # type: ignore[arg-type]


# -- issue 30: the holdout as an exception oracle ---------------------------------------------
# The attack: an analyst function whose output shape depends on one holdout label. The old
# query ran it on the whole holdout and raised DomainError for label 1 only: a free bit per
# query, spending nothing (below-threshold answers are free), so 1,000 of 1,000 labels were
# recovered at a claimed ε = 1. Training ids start at 10^6, so the attack knows which set
# it reads.
N = 200
LABELS = np.random.default_rng(30).integers(0, 2, N)  # test data only
HOLDOUT = np.column_stack([np.arange(N), LABELS])
TRAIN = np.column_stack([10**6 + np.arange(N), LABELS[::-1]])


def outcome(call: Any) -> tuple[str, Any]:
    """What the analyst sees besides the noisy values: an exception, or how many answers."""
    try:
        return ("answers", len(call()))
    except Exception as exc:
        return ("raised", type(exc).__name__)


def whole_set_probe(i: int) -> Any:
    def f(d: Any) -> np.ndarray:
        d = np.asarray(d)
        if d[0, 0] >= 10**6:  # the training set: one value per row
            return np.zeros(len(d))
        return np.zeros(len(d) - int(d[i, 1]))  # one value short when label i is 1
    return f


def row_probe(i: int) -> Any:
    return lambda r: [0.0, 0.0] if r[0] == i and r[1] == 1 else 0.0


def flipped(i: int) -> np.ndarray:
    neighbour = HOLDOUT.copy()
    neighbour[i, 1] = 1 - neighbour[i, 1]
    return neighbour


def test_attack_shape_oracle_recovers_nothing() -> None:
    """Regression (issue 30, written from the attack; fails on the old query): on every
    pair of neighbouring holdouts that differ in label i, the probe of label i sees the
    same outcome — through ``query`` (the whole-set callable is refused before anything is
    read) and through ``query_rows`` (the probed row becomes lo, no exception escapes)."""
    def run(holdout: np.ndarray, i: int) -> list[tuple[str, Any]]:
        h = ReusableHoldout(TRAIN, holdout, epsilon=1, threshold=0.5, max_over=10)
        return [outcome(lambda: h.query(whole_set_probe(i))),
                outcome(lambda: h.query_rows(row_probe(i)))]

    for i in range(N):
        assert run(HOLDOUT, i) == run(flipped(i), i), f"label {i} leaks"


@pytest.mark.parametrize("probe", [
    lambda r: 1 / 0,                       # an exception
    lambda r: (_ for _ in ()).throw(SystemExit(1)),  # a BaseException
    lambda r: [0.0, 0.0],                  # another shape
    lambda r: np.zeros((1, 1)),            # another shape, same size
    lambda r: "1",                         # a string
    lambda r: 1j,                          # a complex number
    lambda r: Fraction(1),                 # an object
    lambda r: float("nan"),                # NaN
    lambda r: -float("inf"),               # −∞
], ids=["raise", "system-exit", "shape", "shape-2d", "str", "complex", "object", "nan",
        "-inf"])
def test_row_failures_on_the_holdout_are_a_fixed_value(probe: Any) -> None:
    """Whatever the function does differently on the probed holdout row, the per-row values
    give identical exact means on the neighbouring holdouts (that row counts as lo = 0,
    NaN and −∞ by the clamping rule), and the query
    answers (no exception, as many answers)."""
    i = int(np.flatnonzero(LABELS == 1)[0])

    def f(r: np.ndarray) -> Any:
        return probe(r) if r[0] == i and r[1] == 1 else 0.0

    def means(holdout: np.ndarray) -> list[Fraction]:  # what the sparse vector reads
        return _exact_means(_holdout_rows(f, holdout, (), 0.0), Fraction(0), Fraction(1))

    assert means(HOLDOUT) == means(flipped(i))
    h = ReusableHoldout(TRAIN, HOLDOUT, epsilon=1, threshold=0.5)
    assert len(h.query_rows(f)) == 1


def frames(holdout: np.ndarray = HOLDOUT) -> tuple[pl.DataFrame, pl.DataFrame]:
    return (pl.DataFrame({"id": TRAIN[:, 0], "y": TRAIN[:, 1]}),
            pl.DataFrame({"id": holdout[:, 0], "y": holdout[:, 1]}))


def test_query_takes_allow_listed_expressions() -> None:
    train, holdout = frames()
    h = ReusableHoldout(train, holdout, epsilon=1, threshold=0.5, max_over=10)
    assert len(h.query(pl.col("y"))) == 1
    several = [pl.col("y"), (pl.col("y") == 0).alias("y0"),
               (pl.col("id", "y") * 0).name.suffix("_zero")]  # distinct names, as in select
    assert len(h.query(several)) == 4
    assert len(h.query(col("y") * 2 - 1)) == 1  # dpkit's grammar, compiled to narwhals
    for refused in (lambda d: d,  # a whole-set callable
                    pl.col("y").map_elements(lambda v: v, return_dtype=pl.Int64),
                    pl.col("y") - pl.col("y").mean(),  # not row-wise
                    pl.col("y").cast(pl.Int8),  # a strict cast that can fail on a value
                    pl.col("y").cast(pl.String),  # not a number
                    pl.lit(1),  # not one value per row
                    [pl.col("y"), col("y")]):  # mixed kinds
        with pytest.raises(DomainError):
            h.query(refused)
    numpy_holdout = ReusableHoldout(TRAIN, HOLDOUT, epsilon=1, threshold=0.5)
    with pytest.raises(DomainError):
        numpy_holdout.query(pl.col("y"))


def test_expression_attacks_see_the_same_outcome_on_neighbours() -> None:
    """Expressions whose value, type or failure would depend on one label: refused at plan
    time or answered, identically on both neighbours."""
    i = int(np.flatnonzero(LABELS == 1)[0])
    probes = [pl.when((pl.col("id") == i) & (pl.col("y") == 1)).then(pl.lit(float("inf")))
              .otherwise(0.0),
              pl.when(pl.col("id") == i).then(pl.col("y").cast(pl.Int8)).otherwise(0),
              pl.when(pl.col("id") == i).then(pl.col("y") / 0).otherwise(0.0),
              pl.when(pl.col("id") == i).then(pl.col("y").cast(pl.String)).otherwise("0")]
    for probe in probes:
        seen = []
        for holdout in (HOLDOUT, flipped(i)):
            h = ReusableHoldout(*frames(holdout), epsilon=1, threshold=0.5)
            seen.append(outcome(lambda h=h, probe=probe: h.query(probe)))
        assert seen[0] == seen[1]


def test_audit_cases_run_in_the_battery() -> None:
    """The correct and broken variants run in tests/test_audit.py (dpkit.audit.CASES)."""
    names = {case.name for case in audit_cases()}
    assert names == {"reusable_holdout", "reusable_holdout_failures"} and names <= set(CASES)


def oracle_release(old: bool) -> Any:
    """One whole release: a fresh holdout (ε = 1, c = 1) asked the shape probe of the
    holdout's row 0; the sample is −1 (below threshold), the noisy answer, or −2 when an
    exception reached the analyst. ``old``: the old query's holdout side, run first."""
    def release(holdout: np.ndarray) -> float:
        if old and len(whole_set_probe(0)(holdout)) != len(holdout):
            return -2.0  # the old query raised DomainError (wrong shape) to the analyst
        h = ReusableHoldout(TRAIN[:8], holdout, epsilon=1, threshold=Fraction(1, 8),
                            max_over=1)
        answer = h.query_rows(row_probe(0))[0]
        return float(answer) if answer.over else -1.0
    return release


@pytest.mark.slow
def test_audit_release_of_the_exception_oracle() -> None:
    """dpkit.audit.audit_release on neighbouring 8-row holdouts differing in label 0: the
    correct holdout passes its ε = 1 claim; the old one (the exception reaches the
    analyst) is flagged."""
    x = np.column_stack([np.arange(8), [1, 1, 1, 1, 1, 1, 0, 0]])
    x_prime = x.copy()
    x_prime[0, 1] = 0
    ok = audit_release(oracle_release(False), x, x_prime, 1.0, samples=1000,
                       histogram_share=0)
    assert ok.passed, ok.lower_bound
    broken = audit_release(oracle_release(True), x, x_prime, 1.0, samples=1000,
                           histogram_share=0)
    assert not broken.passed, broken.lower_bound
