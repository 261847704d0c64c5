"""Every histogram option value is checked before the debit (docs/design.md §3.6).

The attack these tests are written from: ``query.publish.histogram(...)``,
``.histogram_nd(...)`` and ``release_histogram(..., accountant=...)`` checked before the debit
that the method handles the rank and that every option *name* binds to the algorithm, but
the option *values* (``switch=-1``, ``ratio=1``, ``branching=1``, ``rule=…``) were checked
inside the algorithm, after the debit: the loss was spent and the release failed
(ReleaseFailedError). Now every row of ``ALGORITHMS`` carries a plan-time ``check(shape,
**options)``, and a bad value is a DomainError with the ledger / accountant unchanged and no
noise drawn (``frontend.noisy`` / ``select`` patched to fail). Good values still release.

The parametrisation reads each registered algorithm's option names from its signature, so a
new option without a bad value below fails :func:`test_every_option_has_a_bad_and_a_good_value`.
"""

from __future__ import annotations

import inspect
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.core.accountant import FilterAccountant
from dpkit.errors import DomainError
from dpkit.ledger import Ledger
from dpkit.mechanisms import frontend
from dpkit.release import register, release_histogram
from dpkit.release.ranges import registry
from dpkit.release.session_tables import check_histogram_options
from dpkit.release.synthetic.domain import Bins

SHAPES = {1: (16,), 2: (8, 8), 3: (2, 2, 2), 4: (2, 2, 2, 2)}
RULE = {"1/Range1D": {0: "identity"}, "2/Range2D": {0: "identity"}}
# option -> (a value its algorithm refuses, a value it takes)
VALUES: dict[str, tuple[object, object]] = {
    "switch": (-1, None), "scale": (-3, 1000), "scale_fraction": (2, Fraction(1, 10)),
    "branching": (1, 4), "nominal": ({7: None}, {0: None}), "transform": ("bogus", "haar"),
    "height": (-3, 1), "budget": ("x", "uniform"), "c": (0, 5), "alpha": (1, Fraction(1, 4)),
    "rho": (0, Fraction(1, 4)), "max_depth": (-1, 2), "ratio": (1, Fraction(1, 3)),
    "strategy": ("bogus", "identity"), "buckets": (0, 4), "bound": (0, 50), "grid": (1, 16),
    "depth": (0, 2), "max_cuts": (0, 8), "p": (0, 1), "restarts": (-1, 1), "seed": ("x", 3),
    "rounds": (0, 1), "reuse": ("yes", False), "rule": ({"1/Range1D": {0: "bogus"}}, RULE),
}
_RELEASE_OWN = {"x", "epsilon", "workload", "lookup", "chose"}  # set by the release


def _option_names(fn) -> set[str]:
    """The options an algorithm takes: its parameters after (x, epsilon, workload), with the
    scale switch's (the wrapper's keyword-only ones) for a scale-switched algorithm."""
    names: set[str] = set()
    for f in (fn, inspect.unwrap(fn)):
        names |= {p.name for p in inspect.signature(f, follow_wrapped=False).parameters.values()
                  if p.kind is not p.VAR_KEYWORD}
    return names - _RELEASE_OWN


CASES = [(name, d, opt) for name, m in registry.ALGORITHMS for d in m.dims
         for opt in sorted(_option_names(m.function))]


def _spec(d: int) -> dict[str, Bins]:
    return {f"c{k}": Bins(tuple(float(e) for e in range(n + 1)))
            for k, n in enumerate(SHAPES[d])}


def _session(tmp_path, budget=None) -> dp.Session:
    n = 400  # deterministic test data, not noise: column k cycles through 0 … 15
    table = pl.DataFrame({"id": list(range(n)),
                          **{f"c{k}": [(i * (k + 3)) % 16 + 0.5 for i in range(n)]
                             for k in range(4)}})
    return dp.Session(table, dp.PrivacyUnit.rows(), budget or dp.PureDP(100),
                      ledger=Ledger(tmp_path / "l.sqlite"), dataset="t")


@pytest.fixture
def no_noise(monkeypatch):
    """Any draw through the kit fails the test (the check must not draw)."""
    def fail(*_a, **_k):
        raise AssertionError("noise drawn")

    monkeypatch.setattr(frontend, "noisy", fail)
    monkeypatch.setattr(frontend, "select", fail)


def test_every_option_has_a_bad_and_a_good_value():
    names = {opt for _, _, opt in CASES}
    assert names and names <= set(VALUES), sorted(names - set(VALUES))
    assert {name for name, _ in registry.ALGORITHMS} <= {name for name, _, _ in CASES} | {
        "identity", "uniform", "hb"}  # the three without options


@pytest.mark.parametrize("name, d, opt", CASES)
def test_a_bad_option_value_is_refused_before_the_debit(tmp_path, no_noise, name, d, opt):
    bad = {opt: VALUES[opt][0]}
    s = _session(tmp_path)
    with pytest.raises(DomainError):
        s.query().publish.histogram_nd(_spec(d), name, epsilon=1, **bad)
    if d == 1:
        with pytest.raises(DomainError):
            s.query().publish.histogram("c0", list(range(17)), name, epsilon=1, **bad)
    assert s.spent == dp.PureDP(0) and s.ledger.releases("t") == []
    acc = FilterAccountant(dp.PureDP(10))
    with pytest.raises(DomainError):
        release_histogram(np.ones(SHAPES[d], dtype=np.int64), 1, name, accountant=acc, **bad)
    assert acc.spent == dp.PureDP(0) and acc.last is None


@pytest.mark.parametrize("name, d, opt", CASES)
def test_a_good_option_value_still_releases(tmp_path, name, d, opt):
    s = _session(tmp_path)
    out = s.query().publish.histogram_nd(_spec(d), name, epsilon=1, **{opt: VALUES[opt][1]})
    assert out.counts.shape == SHAPES[d]
    assert [r["status"] for r in s.ledger.releases("t")] == ["released"]


def test_the_checks_draw_no_noise_and_read_no_data(no_noise):
    """Every row's check runs on the shape alone, with good values, drawing nothing."""
    for name, d, opt in CASES:
        registry.planned(name, SHAPES[d], {opt: VALUES[opt][1]})


def test_a_non_square_hilbert_shape_is_refused_before_the_debit(tmp_path, no_noise):
    """DAWA in 2-D runs on the Hilbert curve: a shape it cannot cover (not square, or a side
    that is no power of two) was refused inside the algorithm, after the debit."""
    s = _session(tmp_path)
    spec = {"c0": Bins((0.0, 4.0, 8.0, 12.0, 16.0)), "c1": Bins((0.0, 8.0, 16.0))}
    for shape_spec in (spec, {"c0": spec["c0"], "c1": Bins((0.0, 4.0, 8.0, 16.0))},
                       {"c0": Bins((0.0, 6.0, 11.0, 16.0)), "c1": Bins((0.0, 6.0, 11.0, 16.0))}):
        with pytest.raises(DomainError, match="Hilbert"):
            s.query().publish.histogram_nd(shape_spec, "dawa", epsilon=1)
    assert s.spent == dp.PureDP(0) and s.ledger.releases("t") == []


def test_a_users_algorithm_check_is_optional(tmp_path, no_noise):
    """``register(..., check=…)`` runs the user's check before the debit; without one only
    the names are checked (the value reaches the algorithm)."""
    def mine(x, epsilon, workload=None, k=1):
        raise AssertionError("the algorithm ran")

    def positive_k(shape, k=1):
        if k < 1:
            raise DomainError("k must be ≥ 1")

    try:
        register("test_checked", dims=(3,), check=positive_k)(mine)
        register("test_unchecked", dims=(3,))(mine)
        x = np.ones(SHAPES[3], dtype=np.int64)
        acc = FilterAccountant(dp.PureDP(10))
        with pytest.raises(DomainError, match="k must"):
            release_histogram(x, 1, "test_checked", accountant=acc, k=0)
        with pytest.raises(DomainError, match="bogus"):
            release_histogram(x, 1, "test_unchecked", accountant=acc, bogus=0)
        assert acc.spent == dp.PureDP(0)
        registry.planned("test_unchecked", SHAPES[3], {"k": 0})  # names only
    finally:
        for n in ("test_checked", "test_unchecked"):
            registry._METHODS.pop(n, None)


def test_check_histogram_options_old_form_checks_names_only():
    with pytest.warns(DeprecationWarning, match="shape"):
        check_histogram_options("hierarchical", 1, {"branching": 1})  # value not checked
    with pytest.warns(DeprecationWarning), pytest.raises(DomainError):
        check_histogram_options("hierarchical", 1, {"bogus": 1})
    with pytest.raises(DomainError, match="branching"):
        check_histogram_options("hierarchical", (16,), {"branching": 1})
