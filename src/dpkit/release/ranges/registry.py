"""The histogram algorithms, listed in one place (:data:`ALGORITHMS`).

Every algorithm :func:`~dpkit.release.ranges.histogram.release_histogram` can run is a row of
:data:`ALGORITHMS`: its name, its function, the ranks it handles, whether it reads the data
to choose its strategy, and whether it is robust. The algorithm modules define functions and
import nothing of this registry; the one algorithm that runs others (``auto``) is handed the
lookup (:func:`method`) by the release. :func:`register` adds a user's algorithm at run time.

An algorithm is a function ``(x, epsilon, workload, **options) -> estimate``: ``x`` an int64
array (checked by :func:`~dpkit.release.measure.check_counts`), ``epsilon`` a positive
Fraction that it spends in total (its docstring gives the split and the proof sketch),
``workload`` an optional :class:`~dpkit.release.workload.RangeWorkload`, and the estimate a
float64 array of ``x``'s shape.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from dpkit.errors import DomainError
from dpkit.release.ranges import (
    auto,
    basic,
    grid2d,
    hierarchical,
    hilbert,
    matrix,
    partition,
    wavelet,
)
from dpkit.release.ranges.switch import Algorithm, OptionCheck, option_check

__all__ = ["HistogramMethod", "Algorithm", "OptionCheck", "ALGORITHMS", "register", "methods",
           "method", "bind_options", "planned"]


def _summary(fn: Algorithm, name: str) -> str:
    """The first paragraph of the function's docstring, on one line (whole sentences)."""
    return " ".join(inspect.cleandoc(fn.__doc__ or name).split("\n\n")[0].split())


@dataclass(frozen=True)
class HistogramMethod:
    """A registered histogram algorithm: its function, the ranks it handles, whether it
    reads the data to choose its strategy, a one-line summary, whether it is robust (never
    more than 1.2× Identity's error on DPBench's shapes at any scale, its docstring says;
    ``method="auto"`` never picks a non-robust one where it loses), whether it runs
    other registered algorithms (then the release passes it ``lookup=`` :func:`method`), and
    its plan-time option check ``check(shape, **options)`` (the algorithm's own validation of
    the option values, from the shape alone: no data, no noise; None checks names only)."""

    function: Algorithm
    dims: tuple[int, ...]
    data_dependent: bool
    summary: str
    robust: bool = True
    chooses: bool = False
    check: OptionCheck | None = None


def _row(name: str, fn: Algorithm, dims: tuple[int, ...] = (1,), *,
         data_dependent: bool = False, robust: bool = True, chooses: bool = False,
         check: OptionCheck | None = None) -> tuple[str, HistogramMethod]:
    return name, HistogramMethod(fn, dims, data_dependent, _summary(fn, name), robust, chooses,
                                 check or option_check(fn))


ALL = (1, 2, 3, 4)
# name, function, ranks, flags, option check — one row per (name, ranks); a name may have a
# function per rank (DAWA on the Hilbert curve in 2-D); the scale-switched algorithms bring
# their check with them (switch.option_check)
ALGORITHMS: tuple[tuple[str, HistogramMethod], ...] = (
    _row("identity", basic.identity, ALL),
    _row("uniform", basic.uniform, ALL, data_dependent=True, robust=False),
    _row("hierarchical", hierarchical.hierarchical, check=hierarchical.hierarchical_options),
    _row("hb", hierarchical.hb),
    _row("privelet", wavelet.privelet, (1,), check=wavelet.privelet_options),
    _row("privelet", wavelet.privelet, (2, 3, 4), robust=False, check=wavelet.privelet_options),
    _row("dawa", partition.dawa, (1,), data_dependent=True),
    _row("dawa", hilbert.dawa_2d, (2,), data_dependent=True),
    _row("noise_first", partition.noise_first, (1,), data_dependent=True, robust=False),
    _row("structure_first", partition.structure_first, (1,), data_dependent=True),
    _row("phpartition", partition.phpartition, (1,), data_dependent=True, robust=False),
    _row("quadtree", grid2d.quadtree, (2,), check=grid2d.quadtree_options),
    _row("ug", grid2d.ug, (2,), data_dependent=True, check=grid2d.grid_options),
    _row("ag", grid2d.ag, (2,), data_dependent=True, check=grid2d.grid_options),
    _row("kdtree", grid2d.kdtree, (2,), data_dependent=True),
    _row("mm", matrix.matrix_mechanism, (1, 2), check=matrix.mm_options),
    _row("hdmm", matrix.hdmm, (1, 2), check=matrix.mm_options),
    _row("auto", auto.auto, ALL, data_dependent=True, chooses=True, check=auto.auto_options),
)

_METHODS: dict[str, list[HistogramMethod]] = {}


def _add(name: str, entry: HistogramMethod) -> None:
    """Add ``entry`` under ``name``, replacing the entries for the ranks it handles."""
    kept = [m for m in _METHODS.get(name, []) if not set(m.dims) & set(entry.dims)]
    _METHODS[name] = [*kept, entry]


for _name, _entry in ALGORITHMS:
    _add(_name, _entry)


def register(name: str, *, dims: tuple[int, ...] = (1,), data_dependent: bool = False,
             robust: bool = True, check: OptionCheck | None = None
             ) -> Callable[[Algorithm], Algorithm]:
    """Register a user's histogram algorithm under ``name`` for histograms of rank ``dims``
    (replacing the entry for those ranks); ``robust=False`` flags one that can lose to
    Identity by more than 1.2×; ``check(shape, **options)``, optional, refuses bad option
    values (DomainError) before any debit, without data or noise (default: option names
    only). The shipped algorithms are the rows of :data:`ALGORITHMS`.

    Returns
    -------
    callable
        A decorator that registers the function and returns it unchanged.
    """
    def deco(fn: Algorithm) -> Algorithm:
        _add(*_row(name, fn, dims, data_dependent=data_dependent, robust=robust, check=check))
        return fn
    return deco


def methods(dims: int | None = None) -> dict[str, str]:
    """Registered algorithm names (for histograms of rank ``dims``) with their summaries (the
    first paragraph of each docstring: whole sentences)."""
    return {k: m.summary for k, ms in sorted(_METHODS.items()) for m in ms
            if dims is None or dims in m.dims}


def method(name: str, ndim: int) -> HistogramMethod:
    """The algorithm registered under ``name`` for histograms of rank ``ndim``.

    Raises
    ------
    DomainError
        For an unknown name, or a known one that does not handle rank ``ndim``.
    """
    if name not in _METHODS:
        raise DomainError(f"unknown histogram method {name!r}; choose from "
                          f"{', '.join(sorted(_METHODS))}")
    for m in _METHODS[name]:
        if ndim in m.dims:
            return m
    ranks = sorted(d for m in _METHODS[name] for d in m.dims)
    raise DomainError(f"method {name!r} handles {ranks}-dimensional histograms; this one "
                      f"has {ndim} dimensions")


def bind_options(name: str, ndim: int, options: Mapping[str, object]
                 ) -> tuple[HistogramMethod, dict[str, object]]:
    """(the algorithm, its options) for ``name`` at rank ``ndim``, after binding the options'
    names to its signature (a chooser gets ``lookup=`` :func:`method`).

    Raises
    ------
    DomainError
        An unknown method, a rank it does not handle, an option it does not take, or
        ``chose`` for a chooser (the release passes its own, to record the choice)."""
    m = method(name, ndim)
    if m.chooses and "chose" in options:  # the release records the choice through it
        raise DomainError(f"{name}: 'chose' is set by release_histogram, not an option")
    own = {"lookup": method, **options} if m.chooses else dict(options)
    try:
        inspect.signature(m.function, follow_wrapped=False).bind(None, Fraction(1), None, **own)
    except TypeError as exc:
        raise DomainError(f"{name}: {exc}") from None
    return m, own


def planned(name: str, shape: tuple[int, ...], options: Mapping[str, object]
            ) -> tuple[HistogramMethod, dict[str, object]]:
    """:func:`bind_options` for a histogram of ``shape``, then the algorithm's option check
    on the values: everything about a request that can be refused is refused here, from
    declared quantities only (no data, no noise), before any debit.

    Raises
    ------
    DomainError
        As :func:`bind_options`, or a bad option value."""
    m, own = bind_options(name, len(shape), options)
    if m.check is not None:
        m.check(tuple(shape), **own)
    return m, own
