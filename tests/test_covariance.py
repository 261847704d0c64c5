"""Analyze Gauss (dpkit.mechanisms.covariance): output form, privacy map, noise law, input
checks, clipping, and the exact triangle sum behind the privacy map."""

from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from stats import FALSE_POSITIVE_RATE

from dpkit.core.measures import ZCDP
from dpkit.core.numbers import fraction_down
from dpkit.errors import DomainError
from dpkit.mechanisms import make_gaussian
from dpkit.mechanisms.covariance import (
    _row_sensitivity,
    _triangle,
    make_analyze_gauss,
)


def _data(n: int, d: int, norm: float) -> np.ndarray:
    """Deterministic awkward floats, rows rescaled to norms in (0, norm]."""
    x = np.sin(np.arange(n * d, dtype=float) * 0.7 + 0.3).reshape(n, d) / 3
    x[0] *= norm / np.linalg.norm(x[0])  # one row close to the bound
    return x


def test_shape_symmetry_grid_and_centre():
    x = _data(40, 4, 1.0)
    m = make_analyze_gauss(4, 1.0, scale=0.25, k=-20)
    out = m(x)
    assert out.shape == (4, 4) and out.dtype == np.float64
    assert np.array_equal(out, out.T)
    steps = np.ldexp(out, 20)
    assert np.array_equal(steps, np.round(steps))  # every entry on the 2^-20 grid
    # ‖out − XᵀX‖₂ ≤ accuracy(β) fails with probability ≤ β = 1e-7 < FALSE_POSITIVE_RATE
    assert np.linalg.norm(out - x.T @ x, 2) <= m.accuracy(1e-7)
    empty = m(np.zeros((0, 4)))  # no rows: pure noise, same form
    assert empty.shape == (4, 4) and np.array_equal(empty, empty.T)


def test_privacy_map_closed_form_and_make_gaussian():
    m = make_analyze_gauss(3, 2.0, scale=4.0)
    closed = Fraction(2**4, 2 * 4**2)  # B⁴/(2σ²) = 1/2
    for d_in in (1, 3):
        rho = m.privacy_map(d_in).rho
        assert closed * d_in**2 <= rho < closed * d_in**2 * (1 + Fraction(1, 10**6))
    assert m.privacy_map(0).rho > 0  # the rounding to the grid is charged
    delta = _row_sensitivity(Fraction(4), 3, -38)  # f = ⌊log₂ 4⌋ − 40
    assert m.privacy_map(2) == make_gaussian(4.0, max_size=6).privacy_map(2 * delta)
    assert m.check(1, ZCDP(m.privacy_map(1).rho)) and not m.check(1, ZCDP(closed))


@pytest.mark.parametrize("rho", [0.05, 1.0, 12.5])
def test_rho_calibration_meets_target_tightly(rho):
    m = make_analyze_gauss(5, 1.5, rho=rho)
    target = fraction_down(rho)
    spent = m.privacy_map(1).rho
    assert spent <= target and spent >= target * (1 - Fraction(1, 10**6))
    assert m.check(1, ZCDP(rho))


def test_bad_inputs_raise():
    m = make_analyze_gauss(2, 5.0, scale=1.0)
    m(np.array([[3.0, 4.0], [5.0, 0.0]]))  # norms exactly at the bound are accepted
    bad = [
        np.array([[3.0, 4.0001]]),  # row norm above the bound
        np.array([[np.nan, 0.0]]),
        np.array([[np.inf, 0.0]]),
        np.array([1.0, 2.0]),  # 1-D
        np.zeros((3, 3)),  # wrong d
        np.array([["a", "b"]]),
    ]
    for x in bad:
        with pytest.raises(DomainError):
            m(x)
    for kwargs in ({"rho": 0}, {"rho": -1.0}, {"rho": float("nan")}, {"scale": 0},
                   {"scale": 1.0, "rho": 1.0}, {}):
        with pytest.raises(DomainError):
            make_analyze_gauss(2, 5.0, **kwargs)
    for dim, norm in ((0, 1.0), (2, 0.0), (2, -1.0), (True, 1.0)):
        with pytest.raises(DomainError):
            make_analyze_gauss(dim, norm, scale=1.0)
    with pytest.raises(DomainError):
        m.accuracy(0.0)


def test_clip_scales_rows_to_the_bound():
    x = np.array([[30.0, 40.0], [1.0, 2.0], [1e200, -1e200]])  # norms 50, √5, ≈1.4e200
    with pytest.raises(DomainError):
        make_analyze_gauss(2, 5.0, scale=0.01)(x)
    m = make_analyze_gauss(2, 5.0, scale=0.01, clip=True)
    clipped = np.array([[3.0, 4.0], [1.0, 2.0], [5 / np.sqrt(2), -5 / np.sqrt(2)]])
    # fails with probability ≤ 1e-7 < FALSE_POSITIVE_RATE; the unclipped XᵀX is far away
    assert np.linalg.norm(m(x) - clipped.T @ clipped, 2) <= m.accuracy(1e-7) + 1e-6
    assert m.privacy_map(1) == make_analyze_gauss(2, 5.0, scale=0.01).privacy_map(1)


def _variance_pvalues(out: np.ndarray, sigma: float) -> tuple[float, float]:
    """Two-sided χ² p-values of Σe²/σ² for the diagonal and the strict upper triangle."""
    d = out.shape[0]
    ps = []
    for e in (np.diag(out), out[np.triu_indices(d, 1)]):
        s = float((e.astype(float) ** 2).sum()) / sigma**2
        ps.append(2 * min(stats.chi2.cdf(s, e.size), stats.chi2.sf(s, e.size)))
    return ps[0], ps[1]


def test_noise_variance_matches_sigma():
    """Each noise entry (diagonal and off-diagonal, checked apart) has variance σ².

    Releasing a zero dataset gives pure noise. The discrete Gaussian with ≈2^30 grid steps
    per σ has variance σ² to within 1e-300, so Σe²/σ² ~ χ²_N; each of the two two-sided tests
    rejects a correct sampler with probability FALSE_POSITIVE_RATE / 2, ≤ 1e-6 together.
    """
    d, sigma = 450, 2.0  # 450 diagonal and 101 025 off-diagonal entries
    zeros = np.zeros((3, d))
    p_diag, p_off = _variance_pvalues(make_analyze_gauss(d, 1.0, scale=sigma)(zeros), sigma)
    assert min(p_diag, p_off) > FALSE_POSITIVE_RATE / 2
    # broken variants the same check must catch: σ halved, and a GOE-style diagonal
    # (variance 2σ² on the diagonal only)
    halved = _variance_pvalues(make_analyze_gauss(d, 1.0, scale=sigma / 2)(zeros), sigma)
    assert max(halved) < FALSE_POSITIVE_RATE / 2
    goe = make_analyze_gauss(d, 1.0, scale=sigma)(zeros)
    goe[np.diag_indices(d)] *= np.sqrt(2)
    assert _variance_pvalues(goe, sigma)[0] < FALSE_POSITIVE_RATE / 2


def test_accuracy_covers_spectral_norm():
    d, sigma = 60, 1.5
    m = make_analyze_gauss(d, 1.0, scale=sigma)
    e = m(np.zeros((0, d)))
    assert np.linalg.norm(e, 2) <= m.accuracy(1e-7)  # fails w.p. ≤ 1e-7
    assert m.accuracy(1e-7) >= 2 * sigma * np.sqrt(d)  # the typical norm is ≈ 2σ√d
    assert m.accuracy(0.5) < m.accuracy(1e-6)


def test_triangle_is_exact_and_order_free():
    x = _data(300, 5, 1.0)
    rows, cols = np.triu_indices(5)
    f = -40
    total = _triangle(x, rows, cols, f)
    assert np.array_equal(total, _triangle(x[::-1].copy(), rows, cols, f))
    assert all(type(t) is int for t in total)
    exact = [sum(Fraction(a) * Fraction(b) for a, b in zip(x[:, i], x[:, j], strict=True))
             for i, j in zip(rows, cols, strict=True)]
    for t, e in zip(total, exact, strict=True):  # ≤ half a fine step per row, plus float
        assert abs(Fraction(t) * Fraction(2) ** f - e) <= 300 * Fraction(2) ** f


def test_row_sensitivity_bounds_rounded_rows_at_the_boundary():
    """Rows that just pass the float check: the exact norm of their rounded contribution
    stays below Δ."""
    d, b2 = 7, Fraction(1)
    f = -40
    delta = _row_sensitivity(b2, d, f)
    rows, cols = np.triu_indices(d)
    x = _data(50, d, 1.0)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    for _ in range(4):  # nudge rows up until the float check is on its edge
        x = np.where((np.einsum("ij,ij->i", x, x) <= 1.0)[:, None], x * (1 + 2.0**-53), x)
    x = x[np.einsum("ij,ij->i", x, x) <= 1.0]
    # axis-aligned rows make ‖triu(x xᵀ)‖ ≈ ‖x‖²; these have exact ‖x‖² = 1 + 2^-60 (or
    # 1 − 2^-52 + 2^-60) yet pass the float check, and their diagonal rounds up to 1
    edge = np.zeros((2, d))
    edge[:, 0], edge[:, 1] = [1.0, np.nextafter(1.0, 0.0)], 2.0**-30
    assert (np.einsum("ij,ij->i", edge, edge) <= 1.0).all()
    x = np.vstack([edge, x])
    for row in x:
        v = _triangle(row[None, :], rows, cols, f)
        norm_sq = sum(Fraction(int(t)) ** 2 for t in v) * Fraction(2) ** (2 * f)
        assert norm_sq <= delta * delta
    assert delta < b2 * (1 + Fraction(1, 10**9))
