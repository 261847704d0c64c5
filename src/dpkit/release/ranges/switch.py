"""The scale switch: run Identity instead of a data-dependent histogram algorithm when the
data's signal makes partitioning pointless.

DPBench (Hay et al., SIGMOD 2016, §6, findings on scale) found that data-dependent
algorithms with a fixed structure budget — a fixed number of buckets, a fixed tree depth, a
grid sized by a rule of thumb — win at small scale·ε and lose to Identity, often by orders of
magnitude, at large scale·ε: their bias does not shrink with the noise. What matters is the
signal N·ε/cells, records per cell in units of the noise scale (the "scale-epsilon
exchangeability" of DPBench's §4). Pythia (Kotsogiannis, Machanavajjhala, Hay & Miklau,
SIGMOD 2017) selects an algorithm from such noisy features; the switch is its simplest
instance, one feature and one threshold: spend ε₀ = ``scale_fraction``·ε on a noisy total
N̂ (unless the record count is declared public with ``scale``), then run Identity at ε − ε₀
if N̂·(ε − ε₀)/cells ≥ ``switch``, else the algorithm at ε − ε₀.

Privacy: the noisy total has sensitivity 1 (ε₀-DP); the choice depends on N̂ only; either
branch is (ε − ε₀)-DP; sequential composition gives ε. ``switch=None`` runs the paper's
algorithm on all of ε.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpkit.core.measures import PureDP
from dpkit.core.numbers import Number, to_fraction
from dpkit.errors import DomainError
from dpkit.mechanisms import frontend, make_noise
from dpkit.release.measure import check_counts
from dpkit.release.workload import RangeWorkload

__all__ = ["noisy_scale", "noisy_total", "exact_total", "TOTAL_CAP", "per_cell_cap", "clamp_cells",
           "use_identity", "scale_switched", "exact_budget",
           "Algorithm", "check_scale", "check_switch", "switch_options", "option_check",
           "OptionCheck"]

# a histogram algorithm: (x, epsilon, workload, **options) -> estimate of x's shape
# (dpkit.release.ranges.registry lists them)
Algorithm = Callable[..., np.ndarray]
# a plan-time option check: (shape, **options), raising DomainError (what it returns is
# ignored); no data, no noise
OptionCheck = Callable[..., object]


def exact_budget(epsilon: Fraction) -> Fraction:
    """The ε' ≤ ε that the calibrated discrete Laplace at sensitivity 1 and ε actually spends
    (1/s for its scale s ≥ 1/ε, :func:`dpkit.mechanisms.make_noise`): splitting a budget into
    such shares keeps every share's scale exact."""
    loss = make_noise(1, epsilon=epsilon).loss
    assert isinstance(loss, PureDP)
    return loss.epsilon


def check_scale(scale: object, scale_fraction: object = Fraction(1, 20)) -> Fraction:
    """``scale_fraction`` as a Fraction, after checking both options (no data, no noise).

    Raises
    ------
    DomainError
        ``scale`` neither None nor a non-negative integer, or ``scale_fraction`` outside
        (0, 1)."""
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, int | np.integer)
                              or scale < 0):
        raise DomainError(f"scale must be a non-negative integer; got {scale!r}")
    try:
        frac = to_fraction(scale_fraction)
    except DomainError as exc:
        raise DomainError(f"scale_fraction must be a number in (0, 1); got "
                          f"{scale_fraction!r}") from exc
    if not 0 < frac < 1:
        raise DomainError(f"scale_fraction must be a number in (0, 1); got {scale_fraction!r}")
    return frac


def noisy_scale(x: np.ndarray, epsilon: Fraction, scale: object = None,
                scale_fraction: Number = Fraction(1, 20)) -> tuple[float, Fraction]:
    """(N̂, ε left). A declared public ``scale`` spends nothing (N̂ = scale, ε left = ε);
    otherwise N̂ = max(0, N + discrete Laplace(1/ε₀)) with ε₀ = ``scale_fraction``·ε
    (sensitivity 1: ε₀-DP) and ε − ε₀ is left.

    Raises
    ------
    DomainError
        As :func:`check_scale`."""
    frac = check_scale(scale, scale_fraction)
    if scale is not None:
        return float(scale), epsilon  # type: ignore[arg-type]
    eps0 = exact_budget(epsilon * frac)
    return noisy_total(x, eps0), exact_budget(epsilon - eps0)


TOTAL_CAP = 1 << 62  # the record count is clamped here before its noise (int64 headroom)


def exact_total(x: np.ndarray) -> int:
    """Σ x exactly for non-negative int64 counts of any magnitude (an int64 sum wraps at
    2^63): the high and low 32-bit halves are summed apart (each sum below 2^63 for fewer
    than 2^31 cells) and recombined as Python ints; no branch on the data."""
    flat = np.asarray(x, dtype=np.int64).ravel()
    return (int((flat >> 32).sum()) << 32) + int((flat & 0xFFFFFFFF).sum())


def per_cell_cap(cells: int, limit: int = TOTAL_CAP) -> int:
    """⌊(limit − 1)/cells⌋ (at least 1): ``cells`` counts clamped to it sum below ``limit``.
    A declared bound, from the shape alone."""
    return max(1, (limit - 1) // cells)


def clamp_cells(x: np.ndarray, limit: int = TOTAL_CAP) -> np.ndarray:
    """``x`` with every cell clamped to :func:`per_cell_cap` (cells, ``limit``), so that any
    sum of its cells stays below ``limit`` (int64 sums and tree / wavelet nodes cannot wrap;
    float64 sums stay exact for ``limit`` = 2^53). A declared bound from the shape alone,
    applied on the data side as contribution bounding is: a record still moves one clamped
    cell by at most 1, so the neighbours and every guarantee are unchanged (2^50 per cell at
    4,096 cells for the default 2^62)."""
    return np.minimum(x, per_cell_cap(x.size, limit))


def noisy_total(x: np.ndarray, eps0: Fraction) -> float:
    """max(0, min(N, :data:`TOTAL_CAP`) + discrete Laplace(1/ε₀)) for N = the histogram's
    total: min(·, C) is 1-Lipschitz, so the sensitivity stays 1 and this is ε₀-DP for every
    histogram (no total can overflow the sampler's int64 after the debit)."""
    return float(max(frontend.noisy(min(exact_total(x), TOTAL_CAP), 1, eps0).value, 0))


def check_switch(switch: object) -> None:
    """Refuse a ``switch`` that is neither None nor a positive finite number.

    Raises
    ------
    DomainError
        ``switch`` not None or a positive finite number."""
    try:
        good = switch is None or to_fraction(switch) > 0  # finite, not a bool
    except DomainError:
        good = False
    if not good:
        raise DomainError(f"switch must be a positive number or None; got {switch!r}")


def switch_options(switch: object = None, scale: object = None,
                   scale_fraction: object = Fraction(1, 20)) -> None:
    """Check the switch's three options (:func:`check_switch`, :func:`check_scale`) before
    any noise is drawn: the grids (ug, ag) and :func:`scale_switched` share this check."""
    check_switch(switch)
    check_scale(scale, scale_fraction)


def use_identity(n_hat: float, epsilon: Fraction, cells: int, switch: Number | None) -> bool:
    """Whether the signal N̂·ε/cells reaches the ``switch`` threshold (never for None).

    Raises
    ------
    DomainError
        ``switch`` not a positive finite number."""
    check_switch(switch)
    return switch is not None and n_hat * float(epsilon) / cells >= float(switch)


def scale_switched(threshold: float, check: Callable[..., object], dims: tuple[int, ...] = (1,),
                   check_data: Callable[..., object] | None = None,
                   check_shape: Callable[..., object] | None = None
                   ) -> Callable[[Algorithm], Algorithm]:
    """Decorate a histogram algorithm ``(x, epsilon, workload, **options)`` with the switch
    (module docstring): it gains the options ``switch`` (default ``threshold``; None turns
    it off), ``scale`` and ``scale_fraction``. ``check(**options)`` validates the
    algorithm's own options and ``check_shape(shape, **options)`` the shape (with them);
    the counts are checked for rank ``dims`` and by ``check_data(x, **options)`` (e.g.
    magnitude limits, which may depend on the options), first: bad input raises on either
    branch and before any noise is drawn. The decorated function's
    ``check_options(shape, **options)`` runs the checks that need no data (the registry's
    plan-time check, before a debit)."""
    def deco(fn: Algorithm) -> Algorithm:
        def check_options(shape: tuple[int, ...], *, switch: object = None,
                          scale: object = None, scale_fraction: object = Fraction(1, 20),
                          **options: object) -> None:
            switch_options(switch, scale, scale_fraction)
            check(**options)
            if check_shape is not None:
                check_shape(tuple(shape), **options)

        @functools.wraps(fn)
        def run(x: np.ndarray, epsilon: Fraction, workload: RangeWorkload | None = None, *,
                switch: Number | None = threshold, scale: int | None = None,
                scale_fraction: Number = Fraction(1, 20), **options: object) -> np.ndarray:
            x = check_counts(x, dims)
            check_options(x.shape, switch=switch, scale=scale, scale_fraction=scale_fraction,
                          **options)
            if check_data is not None:
                check_data(x, **options)
            if switch is None:
                return fn(x, epsilon, workload, **options)
            n_hat, eps = noisy_scale(x, epsilon, scale, scale_fraction)
            if use_identity(n_hat, eps, x.size, switch):
                return frontend.noisy(x, 1, eps).value.astype(np.float64)
            return fn(x, eps, workload, **options)
        run.check_options = check_options  # type: ignore[attr-defined]
        return run
    return deco


def option_check(fn: Algorithm) -> OptionCheck | None:
    """The plan-time option check of an algorithm decorated by :func:`scale_switched`
    (``check_options(shape, **options)``), or None for another function."""
    return getattr(fn, "check_options", None)
