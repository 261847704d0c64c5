"""Exact sampler for the L2 ("vector") Laplace distribution on the integer lattice ℤ^d.

P(Z = z) ∝ exp(−‖z‖₂/s) for z ∈ ℤ^d: the lattice version of the density the vector
mechanism of Chaudhuri, Monteleoni & Sarwate 2011 (§4, Alg. 1 output perturbation) adds.

Rejection sampling (exact). Proposals have i.i.d. discrete Laplace coordinates of scale
b ≥ s·√d, so q(z) ∝ exp(−‖z‖₁/b); since ‖z‖₁ ≤ √d·‖z‖₂ ≤ (b/s)·‖z‖₂, the ratio
exp(−‖z‖₂/s)/exp(−‖z‖₁/b) = exp(−γ), γ = ‖z‖₂/s − ‖z‖₁/b ≥ 0, is at most 1 and a
proposal is accepted with probability exactly exp(−γ). γ is irrational (a square root), so
the comparison "U < exp(−γ)" of a uniform U with it is decided by a float with a certified
margin, and the rare undecided cases by rational interval bounds on exp(−γ) at growing
precision, revealing further bits of U as needed (the decision terminates with probability
1 and never errs). The acceptance rate is about 2π^{d/2}Γ(d)/(Γ(d/2)(2√d)^d): 0.79 at
d = 2, 0.09 at d = 10, 4e-4 at d = 30 — the sampler is for moderate dimensions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpkit.core import rng, samplers
from dpkit.core.numbers import exp_down, exp_up
from dpkit.errors import DomainError

__all__ = ["lattice_laplace", "acceptance_rate", "check_dimension", "MAX_EXPECTED_PROPOSALS"]

MAX_EXPECTED_PROPOSALS = 1 << 17  # refuse dimensions whose rejection loop would crawl
_TOL = 1e-9  # float decisions this close to exp(−γ) go to the exact path


def acceptance_rate(dim: int) -> float:
    """Expected acceptance of the rejection step for dimension d (continuous limit)."""
    log_rate = (math.log(2) + dim / 2 * math.log(math.pi) + math.lgamma(dim)
                - math.lgamma(dim / 2) - dim * math.log(2 * math.sqrt(dim)))
    return math.exp(log_rate)


def check_dimension(dim: int) -> float:
    """The acceptance rate for d, or DomainError if the sampler would need more than
    ``MAX_EXPECTED_PROPOSALS`` proposals per draw."""
    rate = acceptance_rate(dim)
    if 1 / rate > MAX_EXPECTED_PROPOSALS:
        raise DomainError(
            f"dimension {dim} needs ~{1 / rate:.3g} proposals per draw; use the Laplace "
            "mechanism with L1 sensitivity √d·Δ₂ (within a factor √2 in expected norm) or "
            "the Gaussian mechanism")
    return rate


def lattice_laplace(scale: Fraction, proposal_scale: Fraction, dim: int, size: int
                    ) -> np.ndarray:
    """Draw ``size`` points Z ∈ ℤ^d with P(Z = z) ∝ exp(−‖z‖₂/scale), exactly.

    Parameters
    ----------
    scale : Fraction
        s > 0 in lattice units.
    proposal_scale : Fraction
        b ≥ s·√d, representable by :func:`dpkit.core.samplers.discrete_laplace` (the caller
        rounds s·√d up).
    dim : int
        d ≥ 1.
    size : int
        Number of points.

    Returns
    -------
    ndarray of int64, shape (size, dim)

    Raises
    ------
    DomainError
        If b² < s²·d, d < 1, or the expected number of proposals per point exceeds
        ``MAX_EXPECTED_PROPOSALS``.
    """
    if dim < 1 or scale <= 0 or proposal_scale * proposal_scale < scale * scale * dim:
        raise DomainError("lattice_laplace needs d ≥ 1, s > 0 and b ≥ s·√d")
    rate = check_dimension(dim)
    out = np.empty((size, dim), dtype=np.int64)
    filled = 0
    while filled < size:
        rows = min(int((size - filled) / rate * 1.2) + 8, max(1, (1 << 22) // dim))
        z = samplers.discrete_laplace(proposal_scale, rows * dim).reshape(rows, dim)
        accepted = z[_accept(z, scale, proposal_scale)]
        take = min(accepted.shape[0], size - filled)
        out[filled:filled + take] = accepted[:take]
        filled += take
    return out


def _accept(z: np.ndarray, scale: Fraction, proposal_scale: Fraction) -> np.ndarray:
    """Bernoulli(exp(−γᵢ)) per row, γᵢ = ‖zᵢ‖₂/s − ‖zᵢ‖₁/b, exactly."""
    zf = z.astype(np.float64)  # |z| < 2^53: exact
    l1 = np.abs(z).sum(axis=1)
    gamma = np.sqrt((zf * zf).sum(axis=1)) / float(scale) - l1 / float(proposal_scale)
    p = np.exp(-np.maximum(gamma, 0.0))  # float guide, error ≪ _TOL
    words = rng.words(z.shape[0])
    u = words.astype(np.float64) * 2.0**-64  # U ∈ [w, w + 1)·2^-64
    accept = u + 2.0**-63 < p - _TOL
    unsure = np.flatnonzero(~accept & (u < p + _TOL))
    for i in unsure:
        row = [int(v) for v in z[i]]
        accept[i] = _below_exp(int(words[i]), sum(v * v for v in row), sum(map(abs, row)),
                               scale, proposal_scale)
    return accept


def _below_exp(word: int, squared: int, l1: int, scale: Fraction, proposal_scale: Fraction
               ) -> bool:
    """Exactly whether U < exp(−(√squared/s − l1/b)) for U uniform with its first 64 bits
    equal to ``word``: rational bounds on exp(−γ) and further bits of U, until they part."""
    u_num, u_bits, bits = word, 64, 128
    while True:
        root = math.isqrt(squared << (2 * bits))  # √squared ∈ [root, root + 1]·2^-bits
        unit = Fraction(1, 1 << bits)
        low_gamma = root * unit / scale - l1 / proposal_scale
        high_gamma = (root + 1) * unit / scale - l1 / proposal_scale
        digits = bits * 3 // 10 + 10
        p_low, p_high = exp_down(-high_gamma, digits), exp_up(-low_gamma, digits)
        while u_bits < bits:
            u_num = (u_num << 64) | int(rng.words(1)[0])
            u_bits += 64
        u_low = Fraction(u_num, 1 << u_bits)
        u_high = u_low + Fraction(1, 1 << u_bits)
        if u_high <= p_low:
            return True
        if u_low >= p_high:
            return False
        bits *= 2
