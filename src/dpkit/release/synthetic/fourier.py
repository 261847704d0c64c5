"""Consistent marginals through the Fourier basis (Barak, Chaudhuri, Dwork, Kale, McSherry &
Talwar, "Privacy, accuracy, and consistency too: a holistic solution to contingency table
release", PODS 2007, §4), generalised from binary to categorical attributes. Post-processing.

Barak et al. observe that a marginal on C depends on the data only through the Fourier
coefficients f_S, S ⊆ C, and that marginals sharing attributes share those coefficients:
answer the coefficients once and every marginal computed from them agrees with every other.
For a categorical attribute a with k_a values take an orthonormal basis of R^{k_a} whose
first vector is constant, 1/√k_a (here: the QR factor of [1 | I]); the tensor products of
these vectors are an orthonormal basis of the full contingency table (the Fourier basis
for binary attributes, up to sign). Let θ_S be the block of the data's coefficients that
are non-constant exactly on S. The marginal on C has, in its own basis, the blocks
c_C·θ_S for every S ⊆ C, with c_C = √(∏_{a ∉ C} k_a).

Given noisy marginals y_C with i.i.d. cell noise of variance v_C (an orthonormal change of
basis keeps it i.i.d.), the generalised least-squares estimate of each block is

    θ̂_S = Σ_{C ⊇ S} (c_C / v_C) Y_{C,S} / Σ_{C ⊇ S} (c_C² / v_C),

and the marginals rebuilt from θ̂ are the least-squares consistent marginals: the
projection of the measurements onto the marginals of *some* (signed) table, in closed form
— no iterations, unlike :func:`dpkit.release.synthetic.marginals.make_consistent`. Non-negativity
(Barak et al. solve a linear program) is optional here as a clamp after consistency, which
trades exact consistency for non-negative cells.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from functools import cache

import numpy as np

from dpkit.errors import DomainError
from dpkit.release.synthetic.domain import Domain
from dpkit.release.synthetic.marginals import NoisyMarginal

__all__ = ["fourier_consistent", "basis"]


@cache
def basis(k: int) -> np.ndarray:
    """An orthonormal k×k matrix whose first row is constant 1/√k (rows are the basis)."""
    q, _ = np.linalg.qr(np.column_stack([np.ones(k), np.eye(k)[:, : k - 1]]))
    q = q.T
    return q * np.sign(q[0, 0])


def _transform(values: np.ndarray, sizes: Sequence[int], inverse: bool = False) -> np.ndarray:
    out = values
    for axis, k in enumerate(sizes):
        h = basis(k).T if inverse else basis(k)
        out = np.moveaxis(np.tensordot(h, out, axes=([1], [axis])), 0, axis)
    return out


def _block(clique: tuple[str, ...], subset: tuple[str, ...]) -> tuple[slice, ...]:
    """The cells of a transformed marginal on ``clique`` whose non-constant axes are
    exactly ``subset``."""
    return tuple(slice(1, None) if a in subset else slice(0, 1) for a in clique)


def fourier_consistent(marginals: Sequence[NoisyMarginal], domain: Domain, *,
                       non_negative: bool = False) -> list[NoisyMarginal]:
    """The least-squares consistent marginals (module docstring), same order and shapes.

    Parameters
    ----------
    marginals : sequence of NoisyMarginal
        Cliques over ``domain``'s attributes, values of shape sizes(clique), positive
        variances.
    domain : Domain
    non_negative : bool
        Clamp cells at 0 after consistency (default False: exactly consistent).

    Returns
    -------
    list of NoisyMarginal
        ``variance`` is left as measured (an upper bound: averaging only lowers it).

    Raises
    ------
    DomainError
        Shapes that do not match the domain, unknown attributes, a non-positive variance.
    """
    ms = list(marginals)
    if not ms:
        return []
    for m in ms:
        domain.axes(m.clique)
        if m.values.shape != domain.shape(m.clique):
            raise DomainError(f"marginal on {m.clique} has shape {m.values.shape}, expected "
                              f"{domain.shape(m.clique)}")
        if not m.variance > 0:
            raise DomainError("variances must be positive")
    total_cells = domain.size()
    scale = {m.clique: math.sqrt(total_cells / domain.size(m.clique)) for m in ms}
    coeffs = [_transform(m.values, domain.shape(m.clique)) for m in ms]
    num: dict[frozenset[str], np.ndarray] = {}
    den: dict[frozenset[str], float] = {}
    order: dict[frozenset[str], tuple[str, ...]] = {}
    for m, y in zip(ms, coeffs, strict=True):
        c = scale[m.clique]
        for r in range(len(m.clique) + 1):
            for subset in itertools.combinations(m.clique, r):
                key = frozenset(subset)
                canon = order.setdefault(key, tuple(a for a in domain.attributes if a in key))
                block = y[_block(m.clique, subset)].reshape(
                    tuple(k - 1 for k in domain.shape(subset)))
                block = np.transpose(block, [subset.index(a) for a in canon])
                num[key] = num.get(key, 0) + (c / m.variance) * block
                den[key] = den.get(key, 0.0) + c * c / m.variance
    out = []
    for m in ms:
        c = scale[m.clique]
        y = np.zeros(domain.shape(m.clique))
        for r in range(len(m.clique) + 1):
            for subset in itertools.combinations(m.clique, r):
                key = frozenset(subset)
                theta = num[key] / den[key]
                block = np.transpose(theta, [order[key].index(a) for a in subset])
                y[_block(m.clique, subset)] = c * block.reshape(
                    y[_block(m.clique, subset)].shape)
        values = _transform(y, domain.shape(m.clique), inverse=True)
        out.append(replace(m, values=np.maximum(values, 0) if non_negative else values))
    return out
