"""Halfspace counting (dpkit.release.ranges.halfspaces): the query family against brute force,
the error's exact law for the Laplace and Identity routes, plan-time refusals.

False-positive rates: each law test runs 2 thresholds × a two-sided exact binomial test at
level 2.5e-7 each, so a correct route fails with probability ≤ 1e-6 per test; the broken
variants (noise calibrated as if Δ = 1; one noise per query instead of one per grid point)
move the tail probabilities by more than 0.1 at 30,000+ samples, far outside those bands."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import dpkit as dp
from dpkit.core.accountant import FilterAccountant
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend
from dpkit.release.ranges.halfspaces import (
    METHODS,
    HalfspaceFamily,
    answer_halfspaces,
    auto_method,
    discrepancy_rate,
    grid_counts,
)

LEVEL = 2.5e-7  # per binomial test; 4 tests per law check: FPR ≤ 1e-6


def _grid_points(shape):
    """Every grid point as a tuple of Fractions i_j/(m_j − 1), row-major."""
    axes = [[Fraction(i, m - 1) for i in range(m)] for m in shape]
    return list(itertools.product(*axes))


def _brute(family):
    """The query matrix from the definition, in Fractions."""
    points = _grid_points(family.shape)
    return np.array([[int(sum(w * x for w, x in zip(normal, p, strict=True)) <= b)
                      for p in points]
                     for normal, b in zip(family.normals, family.offsets, strict=True)])


# -- the family ----------------------------------------------------------------------------
def test_matrix_matches_brute_force_on_random_rational_halfspaces():
    gen = np.random.default_rng(7)  # the test's public inputs, not noise
    for shape in [(5,), (2,), (4, 3), (3, 7)]:
        d = len(shape)
        normals = [tuple(Fraction(int(gen.integers(-9, 10)), int(gen.integers(1, 7)))
                         for _ in range(d)) for _ in range(40)]
        offsets = [Fraction(int(gen.integers(-12, 13)), int(gen.integers(1, 9)))
                   for _ in range(40)]
        family = HalfspaceFamily(shape, normals, offsets)
        assert np.array_equal(family.matrix(), _brute(family))
        assert family.sensitivity() == max(1, int(_brute(family).sum(axis=0).max()))


def test_boundary_points_count_exactly():
    """x ≤ 1/3 on 4 grid points {0, 1/3, 2/3, 1} contains exactly the first two (a float
    evaluation of 1·(1/3) ≤ 0.333… would be fragile); decimal strings are read exactly."""
    family = HalfspaceFamily(4, [(1,), ("0.5",), (3,)], [Fraction(1, 3), "0.5", 1])
    assert family.matrix().tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0]]


@pytest.mark.parametrize("shape", [(4,), (3, 3), (4, 3)])
def test_through_grid_points_is_every_line_through_two_grid_points(shape):
    """The family's sets are exactly the distinct sets cut by lines (1-D: points) through
    grid points, both closed sides — checked against all pairs of grid points."""
    family = HalfspaceFamily.through_grid_points(shape)
    got = {row.tobytes() for row in family.matrix()}
    assert len(got) == family.k  # no duplicates
    points = _grid_points(shape)
    want = set()
    if len(shape) == 1:
        for (g,) in points:
            want.add(np.array([x <= g for (x,) in points], dtype=np.uint8).tobytes())
            want.add(np.array([x >= g for (x,) in points], dtype=np.uint8).tobytes())
    else:
        for p, q in itertools.combinations(points, 2):
            normal = (q[1] - p[1], p[0] - q[0])  # perpendicular to q − p
            c = normal[0] * p[0] + normal[1] * p[1]
            side = [normal[0] * x + normal[1] * y - c for x, y in points]
            want.add(np.array([s <= 0 for s in side], dtype=np.uint8).tobytes())
            want.add(np.array([s >= 0 for s in side], dtype=np.uint8).tobytes())
    assert got == want


def test_answers_match_a_count_over_raw_points():
    gen = np.random.default_rng(3)
    raw = np.column_stack([gen.uniform(17, 90, 200), gen.uniform(1, 99, 200)])
    raw[:3] = [[10, 50], [95, 120], [17, 1]]  # outside the bounds: clamped to the ends
    shape = (6, 5)
    counts = grid_counts(raw, ((17, 90), (1, 99)), shape)
    assert counts.sum() == 200
    family = HalfspaceFamily.through_grid_points(shape)
    unit = np.clip((raw - [17, 1]) / [73, 98], 0, 1)
    snapped = [(Fraction(int(math.floor(u * 5 + 0.5)), 5),
                Fraction(int(math.floor(v * 4 + 0.5)), 4)) for u, v in unit]
    brute = [sum(int(w[0] * x + w[1] * y <= b) for x, y in snapped)
             for w, b in zip(family.normals, family.offsets, strict=True)]
    assert family.answer(counts).tolist() == brute


def test_grid_counts_rounds_halves_up_and_refuses_nan():
    assert grid_counts([0.0, 0.125, 0.124, 1.0, 2.0, -1.0], ((0, 1),), 5).tolist() == [
        3, 1, 0, 0, 2]  # 0.125·4 = 0.5 rounds up to point 1; −1 and 2 clamp to the ends
    with pytest.raises(DomainError):
        grid_counts([0.5, float("nan")], ((0, 1),), 5)
    with pytest.raises(DomainError):
        grid_counts([0.5], ((1, 1),), 5)


def test_bad_families_are_refused():
    for shape, normals, offsets in [((1,), [(1,)], [0]), ((3, 3, 3), [(1, 1, 1)], [0]),
                                     ((3,), [(1, 2)], [0]), ((3,), [], []),
                                     ((3,), [(float("nan"),)], [0]), ((3,), [(True,)], [0])]:
        with pytest.raises(DomainError):
            HalfspaceFamily(shape, normals, offsets)


# -- the error's exact law ------------------------------------------------------------------
def _dlap_pmf(p, support):
    """P(Z = z) = (1 − p)/(1 + p)·p^|z|: discrete Laplace with ratio p."""
    return (1 - p) / (1 + p) * p ** np.abs(support)


def _sum_pmf(p, r, half=400):
    """The pmf of a sum of r independent discrete Laplace(p), on −half … half."""
    support = np.arange(-half, half + 1)
    one = _dlap_pmf(p, support)
    out = one
    for _ in range(r - 1):
        out = np.convolve(out, one)[half: 3 * half + 1]
    return support, out


def test_variance_formulas_are_the_pmfs_second_moments():
    for p in (math.exp(-1), math.exp(-1 / 3), math.exp(-0.1)):
        var = 2 * p / (1 - p) ** 2
        support = np.arange(-4000, 4001)
        assert math.isclose(float(np.sum(support ** 2 * _dlap_pmf(p, support))), var,
                            rel_tol=1e-9)
        support, pmf = _sum_pmf(p, 4, half=3000)
        assert math.isclose(float(np.sum(support ** 2 * pmf)), 4 * var, rel_tol=1e-6)


def _law_holds(errors, support, pmf, thresholds):
    """Two-sided exact binomial tests of P(|E| ≥ t) at each threshold."""
    errors = np.abs(np.asarray(errors))
    for t in thresholds:
        prob = float(pmf[np.abs(support) >= t].sum())
        hits = int((errors >= t).sum())
        if stats.binomtest(hits, errors.size, prob).pvalue < LEVEL:
            return False
    return True


FAMILY = HalfspaceFamily(4, [(1,), (1,), (1,)], [Fraction(1, 3), Fraction(2, 3), 1])
COUNTS = np.array([3, 0, 2, 5])
RUNS = 12_000


def test_laplace_route_errors_have_the_discrete_laplace_law_and_a_broken_one_is_caught():
    """Each answer's error is discrete Laplace of scale Δ/ε, Δ = 3 here (grid point 0 is in
    all three halfspaces), ε = 1: ratio p = e^{−1/3}. Broken: Δ taken as 1."""
    exact = FAMILY.answer(COUNTS)
    assert FAMILY.sensitivity() == 3
    errors = np.concatenate([answer_halfspaces(COUNTS, FAMILY, 1, "laplace").answers - exact
                             for _ in range(RUNS)])
    support = np.arange(-400, 401)
    pmf = _dlap_pmf(math.exp(-1 / 3), support)
    assert _law_holds(errors, support, pmf, (3, 9))
    broken = np.concatenate([frontend.noisy(exact, 1, 1).value - exact for _ in range(RUNS)])
    assert not _law_holds(broken, support, pmf, (3, 9))


def test_identity_route_errors_are_sums_of_cell_noises_and_a_broken_one_is_caught():
    """Through the Identity histogram, the query x ≤ 1 (all r = 4 grid points) has the error
    of a sum of 4 independent discrete Laplace(1/ε), ε = 1. Broken: one noise per query."""
    exact = FAMILY.answer(COUNTS)
    errors = [answer_halfspaces(COUNTS, FAMILY, 1, "identity").answers[2] - exact[2]
              for _ in range(3 * RUNS)]
    support, pmf = _sum_pmf(math.exp(-1), 4)
    assert _law_holds(errors, support, pmf, (2, 5))
    broken = [frontend.noisy(int(exact[2]), 1, 1).value - exact[2] for _ in range(3 * RUNS)]
    assert not _law_holds(broken, support, pmf, (2, 5))


# -- accounting and refusals -----------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_every_route_is_charged_once(method):
    acc = FilterAccountant(dp.PureDP(2))
    options = {"alpha": 4, "max_updates": 3} if method == "pmw" else {}
    family = HalfspaceFamily.through_grid_points((4, 4))
    out = answer_halfspaces(np.ones((4, 4), dtype=np.int64), family, 1, method,
                            accountant=acc, **options)
    assert out.answers.shape == (family.k,)
    assert acc.spent == dp.PureDP(1)
    assert acc.last is not None and acc.last.loss == dp.PureDP(1)


@pytest.mark.parametrize("counts, method, options", [
    (np.ones(5, dtype=np.int64), "laplace", {}),  # wrong shape
    (-np.ones(4, dtype=np.int64), "laplace", {}),
    (np.full(4, 0.5), "identity", {}),
    (np.ones(4, dtype=np.int64), "mwem", {}),
    (np.ones(4, dtype=np.int64), "pmw", {}),  # PMW needs alpha
    (np.ones(4, dtype=np.int64), "pmw", {"alpha": -1}),
    (np.ones(4, dtype=np.int64), "identity", {"alpha": 3}),
])
def test_bad_requests_are_refused_before_the_debit(counts, method, options, monkeypatch):
    def no_noise(*args, **kwargs):
        raise AssertionError("noise drawn before the refusal")

    monkeypatch.setattr(frontend, "noisy", no_noise)
    acc = FilterAccountant(dp.PureDP(10))
    with pytest.raises(DomainError):
        answer_halfspaces(counts, FAMILY, 1, method, accountant=acc, **options)
    assert acc.spent == dp.PureDP(0) and acc.last is None


def test_discrepancy_rate():
    assert discrepancy_rate(1000, 1) == 1.0
    assert math.isclose(discrepancy_rate(10_000, 2), 10.0)
    with pytest.raises(DomainError):
        discrepancy_rate(0, 2)


def test_auto_picks_the_route_with_the_smaller_worst_query_variance():
    """A single halfspace holding a whole 64-point line (Δ = 1, r = 64): per-query Laplace;
    every grid-point halfspace of a 16x16 grid (Δ in the thousands): Identity. The choice
    reads the family and ε only, and the default is "auto"."""
    line = HalfspaceFamily((64,), [(Fraction(1),)], [Fraction(1)])
    assert auto_method(line, 1) == "laplace"
    grid = HalfspaceFamily.through_grid_points((16, 16))
    assert auto_method(grid, 1) == "identity"
    out = answer_halfspaces(np.zeros((16, 16), dtype=np.int64), grid, 1)
    assert out.method == "identity"
