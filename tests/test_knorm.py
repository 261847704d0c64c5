"""The K-norm mechanism (Hardt & Talwar 2010) on a lattice: its norm against an independent
LP formula, its exact law on a tiny instance against a brute-force normalising constant, the
privacy ratio checked exactly on a window, the cost bound, the front doors and the plan-time
refusals. Statistical tests reject a correct sampler with probability ≤ FALSE_POSITIVE_RATE
= 1e-6 and are paired with broken variants (the wrong norm, no acceptance step) they catch."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.core.compose import PrivacyFilter
from dpkit.core.measures import PureDP
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend, make_knorm, make_noise
from dpkit.mechanisms.knorm import knorm_plan
from dpkit.release import release_linear_queries

HEXAGON = [[1, 1, 0], [0, 1, 1]]  # K = conv(±(1,0), ±(1,1), ±(0,1))
SKEWED = [[1, 1, 1, 1], [1, 2, 3, 4]]
CUBE_3D = [[1, 0, 0, 1], [0, 1, 0, 1], [0, 0, 1, 1]]


def _lp_norm(c: list[list[int]], u: tuple[int, ...]) -> Fraction:
    """min over bases S of ‖C_S⁻¹u‖₁: the basic solutions of min{‖λ‖₁ : Cλ = u}
    (independent of the facet enumeration), exactly."""
    d, n = len(c), len(c[0])
    best: Fraction | None = None
    for subset in itertools.combinations(range(n), d):
        m = [[Fraction(c[i][j]) for j in subset] + [Fraction(u[i])] for i in range(d)]
        for col in range(d):  # Gauss–Jordan on [C_S | u]
            piv = next((r for r in range(col, d) if m[r][col] != 0), None)
            if piv is None:
                break
            m[col], m[piv] = m[piv], m[col]
            m[col] = [v / m[col][col] for v in m[col]]
            for r in range(d):
                if r != col and m[r][col] != 0:
                    m[r] = [a - m[r][col] * b for a, b in zip(m[r], m[col], strict=True)]
        else:
            value = sum((abs(row[-1]) for row in m), Fraction(0))
            best = value if best is None else min(best, value)
    assert best is not None
    return best


@pytest.mark.parametrize("a", [HEXAGON, SKEWED, CUBE_3D, [[2, -1, 1], [1, 3, 0]]])
def test_facet_norm_equals_the_lp(a):
    plan = knorm_plan(a, 1)
    d = len(a)
    for u in itertools.product(range(-3, 4), repeat=d):
        assert plan.norm(u) == _lp_norm(plan.matrix, u), u


def test_columns_have_norm_at_most_one_and_the_bound_is_attained():
    plan = knorm_plan(SKEWED, 1)
    norms = [plan.norm(col) for col in zip(*plan.matrix, strict=True)]
    assert max(norms) == 1 and all(v <= 1 for v in norms)


def _weights(plan, radius: int) -> tuple[np.ndarray, np.ndarray]:
    """(lattice points of the box |uᵢ| ≤ radius, exp(−ε‖u‖_K) by the LP formula)."""
    pts = np.array(list(itertools.product(range(-radius, radius + 1), repeat=plan.dim)))
    eps = float(plan.epsilon)
    norms = np.array([float(_lp_norm(plan.matrix, tuple(p))) for p in pts])
    return pts, np.exp(-eps * norms)


def _law_pvalue(draws: np.ndarray, plan, inner: int = 8, outer: int = 40) -> float:
    """χ² of 2-D lattice draws against exp(−ε‖u‖_K)/Z, Z brute-forced over |uᵢ| ≤ ``outer``
    (the mass beyond is < e^{-39}); cells |uᵢ| ≤ ``inner``, the rest one cell of exact mass."""
    pts, w = _weights(plan, outer)
    z = w.sum()
    inside = (np.abs(pts) <= inner).all(axis=1)
    side = 2 * inner + 1
    pmf = np.append(w[inside] / z, w[~inside].sum() / z)
    codes = np.where((np.abs(draws) <= inner).all(axis=1),
                     (draws[:, 0] + inner) * side + (draws[:, 1] + inner), side * side)
    return chi2_pvalue(codes, np.arange(side * side + 1), pmf)


def test_exact_law_on_a_tiny_instance():
    plan = knorm_plan(HEXAGON, 1)
    assert _law_pvalue(plan.sample(20_000), plan) > FALSE_POSITIVE_RATE


def test_exact_law_catches_a_missing_acceptance_step():
    plan = knorm_plan(HEXAGON, 1)
    assert _law_pvalue(plan.sample(20_000, accept=False), plan) < FALSE_POSITIVE_RATE


def test_exact_law_catches_the_wrong_norm():
    """Noise ∝ exp(−ε‖u‖₁) (the identity workload's K) tested against the hexagon's law."""
    wrong = knorm_plan([[1, 0], [0, 1]], 1)
    assert _law_pvalue(wrong.sample(20_000), knorm_plan(HEXAGON, 1)) < FALSE_POSITIVE_RATE


def test_measurement_output_is_the_answer_plus_lattice_noise():
    """A with halves: h = 1/2, y − Ax ∈ ½ℤ², and the law of 2(y − Ax) is the plan's."""
    a = [[Fraction(1, 2), 1, 0], [0, "0.5", 1]]
    m = make_knorm(a, Fraction(1, 2))
    plan = knorm_plan(a, Fraction(1, 2))
    assert plan.step == Fraction(1, 2) and plan.matrix == ((1, 2, 0), (0, 1, 2))
    x = np.array([3, 5, 7])
    exact = np.array([6.5, 9.5])
    noise = np.array([m(x) for _ in range(200)]) - exact
    assert np.array_equal(noise * 2, np.round(noise * 2))
    assert m.privacy_map(1) == PureDP(Fraction(1, 2)) and m.privacy_map(2) == PureDP(1)


def test_privacy_ratio_is_exactly_bounded_on_a_window():
    """ε(‖u + cⱼ‖ − ‖u‖) ≤ ε for every column ±cⱼ and lattice point u of a window, with
    equality somewhere (the map is tight); the wrong norm (‖·‖₁) breaks it on the hexagon."""
    for a in (HEXAGON, SKEWED, CUBE_3D):
        plan = knorm_plan(a, Fraction(1, 3))
        worst = Fraction(0)
        for u in itertools.product(range(-4, 5), repeat=plan.dim):
            here = plan.norm(u)
            for col in zip(*plan.matrix, strict=True):
                for s in (1, -1):
                    moved = tuple(ui + s * ci for ui, ci in zip(u, col, strict=True))
                    worst = max(worst, plan.epsilon * (plan.norm(moved) - here))
        assert worst == plan.epsilon == make_knorm(a, Fraction(1, 3)).privacy_map(1).epsilon
    l1 = knorm_plan([[1, 0], [0, 1]], 1)
    assert l1.norm((1, 1)) - l1.norm((0, 0)) == 2  # the broken variant's loss is 2ε


def test_expected_proposals_bound_holds():
    """The plan's bound ≥ M = Z_q/Z, Z summed over |uᵢ| ≤ 300 (the mass beyond is below
    e^-70 for these A at ε = 1), and within 1% of it (its window term is nearly all of Z)."""
    for a in (HEXAGON, SKEWED):
        plan = knorm_plan(a, 1)
        pts = np.array(list(itertools.product(range(-300, 301), repeat=2)))
        z = np.exp(-plan.norm_numerators(pts).astype(float) / plan.denominator).sum()
        z_q = np.prod([1 / np.tanh(1 / (2 * float(t))) for t in plan.proposal])
        truth = z_q / z
        assert truth * (1 - 1e-9) <= plan.expected_proposals <= 1.01 * truth


def test_front_doors():
    m = make_noise(2, epsilon=1, workload=HEXAGON)
    assert m.loss == PureDP(1) and m.scale == 2 and m.mechanism == "K-norm"
    assert m is make_noise(2, epsilon=1, workload=HEXAGON)  # cached
    drawn = frontend.noisy(np.array([1, 2, 3]), 1, PureDP(1), workload=HEXAGON)
    assert drawn.value.shape == (2,) and drawn.row.name == "K-norm"
    f = PrivacyFilter(PureDP(1))
    out = release_linear_queries([10, 20, 30], HEXAGON, Fraction(1, 2), accountant=f)
    assert out.shape == (2,) and np.array_equal(out, np.round(out))
    with pytest.raises(DomainError, match="pure epsilon"):
        make_noise(1, rho=1, workload=HEXAGON)


def test_front_end_refuses_before_the_debit():
    f = PrivacyFilter(PureDP(1))
    with pytest.raises(DomainError, match="columns"):
        release_linear_queries([1, 2], HEXAGON, 1, accountant=f)
    with pytest.raises(DomainError, match="non-negative"):
        release_linear_queries([1, -2, 3], HEXAGON, 1, accountant=f)
    assert release_linear_queries([1, 2, 3], HEXAGON, 1, accountant=f).shape == (2,)


@pytest.mark.parametrize(("a", "kwargs", "message"), [
    ([[1, 1], [2, 2]], {}, "rank"),
    ([[1, 0], [0, 1], [1, 1], [1, 2], [2, 1]], {}, "1 to 4 queries"),
    ([[1, 0, 1, 2, 3, 5, 7, 9, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67],
      [0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20],
      [0, 0, 1, 3, 1, 2, 5, 2, 3, 9, 4, 7, 2, 8, 3, 5, 9, 1, 6, 2, 7, 3, 8],
      [1, 1, 0, 2, 2, 1, 1, 3, 5, 1, 6, 2, 9, 4, 7, 3, 1, 8, 2, 9, 3, 6, 4]], {},
     "facet candidates"),
    ([[1, 0], [0, 1]], {"step": Fraction(2, 3)}, "must divide"),
    ([[10_000, 0], [0, 1]], {}, "lattice steps"),
    ([[1000, 1], [999, 1]], {}, "proposals per draw"),
    ([[True, 0], [0, 1]], {}, "rational numbers"),
    ([[float("nan"), 0], [0, 1]], {}, "finite"),
    ([[1, 0], [0]], {}, "same number"),
])
def test_plan_time_refusals_name_the_fix(a, kwargs, message):
    with pytest.raises(DomainError, match=message):
        make_knorm(a, 1, **kwargs)


def test_release_refuses_a_wrong_histogram_and_is_exact_for_huge_counts():
    m = make_knorm(HEXAGON, 1)
    with pytest.raises(DomainError):
        m(np.array([1.5, 2.0, 3.0]))
    with pytest.raises(DomainError):
        m(np.array([1, 2]))
    big = np.array([2**62, 2**62, 0], dtype=np.int64)
    y = m(big)
    assert abs(y[0] - 2.0**63) <= 2**63 * 1e-9
