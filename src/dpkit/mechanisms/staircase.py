"""The staircase mechanism (Geng & Viswanath 2014, *The optimal noise-adding mechanism in
differential privacy*), released on a grid and sampled exactly.

The staircase density with parameters (ε, Δ, γ) is a·e^{−kε} on [kΔ, (k+γ)Δ) and
a·e^{−(k+1)ε} on [(k+γ)Δ, (k+1)Δ), mirrored for negative values; γ* = 1/(1 + e^{ε/2})
minimises the expected |noise| (their Thm 4). Geng & Viswanath's sampler: sign S, geometric
G with ratio e^{−ε}, Bernoulli B with P(B = 0) = γ/(γ + (1 − γ)e^{−ε}) and a uniform offset
within the chosen step.

Grid and threat model. With Δ_s = N·g (g = 2^k, N grid steps) and γ = j/N, every breakpoint
is a grid point, so the mass of each grid cell is the density times g, and a shift by whole
cells changes any cell's mass by at most e^ε per Δ_s: the discretised mechanism keeps the
staircase's ε-DP exactly. Inputs are rounded to the grid, which adds one cell to the
sensitivity (Δ_s ≥ Δ + g). Outputs are cell centres, so the set of outputs never depends on
the input. Everything is drawn by exact samplers; B uses rejection (propose B = 0 w.p. γ,
accept B = 1 proposals w.p. e^{−ε}).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import rng, samplers
from dpkit.core.accuracy import staircase_tail
from dpkit.core.component import Measurement
from dpkit.core.measures import PureDP
from dpkit.core.metrics import L1Distance
from dpkit.core.numbers import Number, exp_down, fraction_down, non_negative, positive
from dpkit.errors import DomainError
from dpkit.mechanisms._common import as_vector, floats, unwrap
from dpkit.mechanisms.registry import AuditCase, Sampler, register

__all__ = ["make_staircase"]


def _audit() -> list[AuditCase]:
    """ε = 1, Δ = 1 on the pair 0.0, 1.0; broken: ε = 4 for the same claim."""
    def sampler(epsilon: int) -> Sampler:
        m = make_staircase(epsilon, 1)
        return lambda v, n: np.asarray(m(np.full(n, v)))

    return [AuditCase("staircase", make_staircase(1, 1), sampler(1), sampler(4), 0.0, 1.0)]

_STEPS_BITS = 20  # grid cells per sensitivity ≈ 2^20


@register(audit=_audit)
def make_staircase(epsilon: Number, sensitivity: Number, gamma: Number | None = None
                   ) -> Measurement:
    """Add staircase noise to a float scalar or vector.

    Parameters
    ----------
    epsilon : number
        ε > 0 (nats).
    sensitivity : number
        Δ > 0 of the query (L1 for vectors; each coordinate gets independent noise).
    gamma : number, optional
        Fraction γ ∈ (0, 1) of each step at the higher level; default γ* = 1/(1 + e^{ε/2}),
        rounded to the grid.

    Returns
    -------
    Measurement
        Input: floats under :class:`L1Distance` (input domain: a vector of numbers, NaN
        excluded). Privacy map:
        d_in ↦ PureDP(ε·⌈(d_in + g)/Δ_s⌉), i.e. ε for d_in ≤ Δ (Geng & Viswanath 2014,
        Thm 3 on the grid). ``accuracy(beta)``: half-width Δ_s·(⌈ln(1/β)/ε⌉ + 1).

    Raises
    ------
    DomainError
        For ε ≤ 0, Δ ≤ 0, γ ∉ (0, 1) or NaN input.

    Notes
    -----
    Every finite input is released without clamping (as :func:`make_laplace`:
    :func:`dpkit.core.samplers.add_on_grid`); ±inf is read as ±the largest float.
    """
    eps = positive(epsilon, "epsilon", up=False)
    sens = positive(sensitivity, "sensitivity")
    k = samplers.grid_exponent(sens) + samplers.GRID_BITS - _STEPS_BITS
    grid = Fraction(2) ** k
    steps = math.ceil(sens / grid) + 1  # N: Δ_s = N·g ≥ Δ + g
    if gamma is None:
        gam = 1 / (1 + float(exp_down(eps / 2)))
    else:
        gam = float(fraction_down(gamma))
        if not 0 < gam < 1:
            raise DomainError("gamma must be in (0, 1)")
    j = min(max(round(gam * steps), 1), steps - 1)  # γ = j/N on the grid
    geo_scale = 1 / eps  # P(G = k) ∝ e^{−kε}

    def noise_cells(n: int) -> np.ndarray:
        g_count = samplers.geometric(geo_scale, n)
        upper = _upper_level(n, Fraction(j, steps), eps)  # B = 1: the lower-density part
        offset = np.where(upper, j + rng.uniform_below(steps - j, n).astype(np.int64),
                          rng.uniform_below(j, n).astype(np.int64))
        return g_count * steps + offset  # cell index c ≥ 0 of |noise|

    def function(x: Any) -> Any:
        arr, scalar = as_vector(x, integer=False)
        cells = noise_cells(arr.size)
        sign = np.where(rng.coins(arr.size), 1, -1).astype(np.int64)
        half_steps = sign * (2 * cells + 1)  # the cell centre, in units of 2^(k−1)
        return unwrap(samplers.add_on_grid(arr, k, half_steps, shift=1), scalar)

    delta_s = steps * grid
    return Measurement(
        function=function,
        input_metric=L1Distance(),
        output_measure=PureDP,
        privacy_map=lambda d_in: PureDP(
            eps * math.ceil((non_negative(d_in, "d_in") + grid) / delta_s)),
        name=f"staircase(ε={float(eps):g}, Δ={float(sens):g}, γ={j / steps:.4g})",
        accuracy=lambda beta: staircase_tail(float(delta_s), float(eps), beta),
        input_domain=floats(),
    )


def _upper_level(n: int, gamma: Fraction, eps: Fraction) -> np.ndarray:
    """B with P(B = 0) = γ/(γ + (1 − γ)e^{−ε}), exactly, by rejection."""
    out = np.empty(n, dtype=bool)
    todo = np.arange(n)
    while todo.size:
        propose_upper = ~samplers.bernoulli(gamma, todo.size)  # B = 1 proposed w.p. 1 − γ
        keep = ~propose_upper
        upper_idx = np.flatnonzero(propose_upper)
        if upper_idx.size:
            keep[upper_idx] = samplers.bernoulli_exp(eps.numerator, eps.denominator,
                                                     size=upper_idx.size)
        out[todo[keep]] = propose_upper[keep]
        todo = todo[~keep]
    return out
