"""The vector mechanism and its exact lattice sampler (χ² tests with FPR ≤ 1e-6 each, paired
with a broken sampler — the proposal without its rejection step — that they must reject)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from stats import FALSE_POSITIVE_RATE, chi2_pvalue

from dpkit.core import samplers
from dpkit.core.lattice import _below_exp, lattice_laplace
from dpkit.errors import DomainError
from dpkit.mechanisms import make_vector_laplace

N = 100_000
SCALE = Fraction(2)


def _exact_laws(dim: int, scale: float, width: int) -> tuple[np.ndarray, np.ndarray]:
    """pmf of ⌊‖Z‖₂⌋ and of Z₁ on a box wide enough that the outside mass is < e^-40."""
    axis = np.arange(-width, width + 1)
    grids = np.meshgrid(*([axis] * dim), indexing="ij")
    norm = np.sqrt(sum(g.astype(float) ** 2 for g in grids))
    weight = np.exp(-norm / scale)
    radius = np.bincount(np.floor(norm).astype(int).ravel(), weights=weight.ravel())
    first = weight.sum(axis=tuple(range(1, dim)))
    return radius / weight.sum(), first / weight.sum()


def _pvalues(z: np.ndarray, dim: int) -> tuple[float, float]:
    width = int(45 * float(SCALE)) + 2
    radius_pmf, first_pmf = _exact_laws(dim, float(SCALE), width)
    radius = np.floor(np.sqrt((z.astype(float) ** 2).sum(axis=1))).astype(int)
    return (chi2_pvalue(radius, np.arange(radius_pmf.size), radius_pmf),
            chi2_pvalue(z[:, 0], np.arange(-width, width + 1), first_pmf))


def _proposal(dim: int) -> Fraction:
    return SCALE * Fraction(math.isqrt(dim * 10**12) + 1, 10**6)


@pytest.mark.slow
@pytest.mark.parametrize("dim", [2, 3])
def test_lattice_laplace_matches_pmf(dim):
    z = lattice_laplace(SCALE, _proposal(dim), dim, N)
    assert z.shape == (N, dim) and z.dtype == np.int64
    radius_p, first_p = _pvalues(z, dim)
    assert radius_p > FALSE_POSITIVE_RATE and first_p > FALSE_POSITIVE_RATE


@pytest.mark.slow
@pytest.mark.parametrize("dim", [2, 3])
def test_lattice_test_rejects_the_unrejected_proposal(dim):
    z = samplers.discrete_laplace(_proposal(dim) / Fraction(math.isqrt(dim * 4) / 2),
                                  N * dim).reshape(N, dim)  # same mean norm, wrong shape
    radius_p, first_p = _pvalues(z, dim)
    assert min(radius_p, first_p) < FALSE_POSITIVE_RATE


def test_exact_comparison_decides_both_ways():
    # γ = √2/s − 1/b with s = 1, b = 2: compare U's first 64 bits against exp(−γ)
    mpmath.mp.prec = 200
    p = mpmath.exp(-(mpmath.sqrt(2) - mpmath.mpf(1) / 2))
    word = int(mpmath.floor(p * 2**64))
    assert _below_exp(word - 1, 2, 1, Fraction(1), Fraction(2)) is True
    assert _below_exp(word + 1, 2, 1, Fraction(1), Fraction(2)) is False
    # the straddling word: True with probability p·2^64 − word (about 0.2–0.8 here or not)
    frac = float(p * 2**64 - word)
    hits = sum(_below_exp(word, 2, 1, Fraction(1), Fraction(2)) for _ in range(400))
    # binomial(400, frac): a 6-sd band has false-positive rate < 1e-8
    assert abs(hits - 400 * frac) <= 6 * math.sqrt(400 * frac * (1 - frac)) + 1


def test_vector_mechanism_map_grid_and_errors():
    m = make_vector_laplace(1.0, 4)
    out = m(np.zeros(4))
    assert out.shape == (4,)
    k = -30
    assert np.all(out / 2.0**k == np.round(out / 2.0**k))  # on the grid
    eps = m.privacy_map(1).epsilon
    assert 1 < eps < 1 + 1e-8
    assert m.accuracy(0.05) > 4  # the Gamma(4, 1) 95% quantile is ≈ 7.75
    with pytest.raises(DomainError):
        m(np.zeros(3))
    with pytest.raises(DomainError):
        m(np.array([np.nan, 0, 0, 0]))
    with pytest.raises(DomainError):
        make_vector_laplace(1.0, 200)  # the rejection sampler would crawl
    with pytest.raises(DomainError):
        make_vector_laplace(0, 3)
