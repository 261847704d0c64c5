"""Fourier-basis consistency (dpkit.release.synthetic.fourier): exact on exact marginals,
consistent,
and equal to the least-squares projection computed densely."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpkit.errors import DomainError
from dpkit.release.synthetic.domain import Domain, marginal_counts
from dpkit.release.synthetic.fourier import basis, fourier_consistent
from dpkit.release.synthetic.marginals import NoisyMarginal, project

DOM = Domain.from_dict({"a": 2, "b": 3, "c": 4, "d": 2})
CLIQUES = [("a", "b"), ("c", "b"), ("a", "c", "d"), ("d",)]


def _codes():
    rng = np.random.default_rng(1)  # test input
    a = rng.integers(0, 2, 500)
    return np.column_stack([a, (a + rng.integers(0, 2, 500)) % 3, rng.integers(0, 4, 500),
                            a]).astype(np.int64)


def _noisy(codes, variances=None):
    rng = np.random.default_rng(2)  # test noise (post-processing under test, not a release)
    out = []
    for i, c in enumerate(CLIQUES):
        v = 4.0 if variances is None else variances[i]
        true = marginal_counts(codes, DOM, c).astype(float)
        out.append(NoisyMarginal(c, true + rng.normal(0, np.sqrt(v), true.shape), v))
    return out


def test_basis_is_orthonormal_with_a_constant_first_row():
    for k in (1, 2, 5):
        h = basis(k)
        assert np.allclose(h @ h.T, np.eye(k)) and np.allclose(h[0], 1 / np.sqrt(k))


def test_exact_marginals_are_kept():
    codes = _codes()
    exact = [NoisyMarginal(c, marginal_counts(codes, DOM, c).astype(float), 1.0)
             for c in CLIQUES]
    for m, e in zip(fourier_consistent(exact, DOM), exact, strict=True):
        assert np.allclose(m.values, e.values)


def test_noisy_marginals_become_consistent():
    out = fourier_consistent(_noisy(_codes()), DOM)
    for x, y in itertools.combinations(out, 2):
        shared = [a for a in DOM.attributes if a in x.clique and a in y.clique]
        assert np.allclose(project(x, shared), project(y, shared))
    noisy = _noisy(_codes())
    raw = [project(m, ("b",)) for m in noisy if "b" in m.clique]
    assert not np.allclose(raw[0], raw[1])  # the input was not consistent


def test_equals_the_dense_weighted_least_squares_projection():
    codes = _codes()
    variances = [1.0, 4.0, 2.0, 9.0]
    noisy = _noisy(codes, variances)
    rows, ys, ws = [], [], []
    cells = DOM.size()
    grid = np.array(list(itertools.product(*[range(k) for k in DOM.sizes])))
    for m in noisy:
        axes = DOM.axes(m.clique)
        flat = np.ravel_multi_index(tuple(grid[:, j] for j in axes), DOM.shape(m.clique))
        q = np.zeros((DOM.size(m.clique), cells))
        q[flat, np.arange(cells)] = 1
        rows.append(q)
        ys.append(m.values.ravel())
        ws.append(np.full(q.shape[0], 1 / np.sqrt(m.variance)))
    a, y, w = np.vstack(rows), np.concatenate(ys), np.concatenate(ws)
    x, *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
    fitted = a @ x
    got = np.concatenate([m.values.ravel() for m in fourier_consistent(noisy, DOM)])
    assert np.allclose(got, fitted, atol=1e-8)
    # a broken variant — ignoring the variances — is not the weighted projection
    plain = fourier_consistent([NoisyMarginal(m.clique, m.values, 1.0) for m in noisy], DOM)
    assert not np.allclose(np.concatenate([m.values.ravel() for m in plain]), fitted)


def test_non_negative_and_errors():
    out = fourier_consistent(_noisy(_codes(), [400.0] * 4), DOM, non_negative=True)
    assert all((m.values >= 0).all() for m in out)
    with pytest.raises(DomainError):
        fourier_consistent([NoisyMarginal(("a",), np.zeros(3), 1.0)], DOM)
    with pytest.raises(DomainError):
        fourier_consistent([NoisyMarginal(("a",), np.zeros(2), 0.0)], DOM)
    assert fourier_consistent([], DOM) == []
