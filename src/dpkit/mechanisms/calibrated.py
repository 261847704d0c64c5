"""The one calibrated-noise entry: the only place dpkit turns a sensitivity and a budget into a
noise scale (DESIGN.md §2, "One road").

:func:`make_noise` takes an exact sensitivity Δ (L1 or L2), a budget (ε, ρ or (ε, δ)) and an
output kind ("integer" or "grid") and returns a :class:`CalibratedNoise`: a
:class:`~dpkit.core.Measurement` whose privacy map at Δ has been checked, exactly, to be within
the budget, cached by its arguments. :func:`make_selection` does the same for the exponential
mechanism's family (its temperature). Releases draw noise by *calling* the measurement, so
the secure-generator check (:func:`dpkit.core.rng.require_secure`) is in one place.

Closed forms — each mechanism's own privacy map solved for the scale (n = ``size``):

======  =======  =======  =========================  ===============================
norm    budget   output   mechanism                  scale
======  =======  =======  =========================  ===============================
l1      ε        integer  discrete Laplace           s = Δ/ε
l1      ε        grid     Laplace on the 2^k grid    s = (Δ + 2^k·n)/ε
l2      ε        grid     vector Laplace (d = n)     s = (Δ + 2^k·√n)/ε
l2      ρ        integer  discrete Gaussian          σ = Δ/√(2ρ)
l2      ρ        grid     Gaussian on the 2^k grid   σ = (Δ + 2^k·√n)/√(2ρ)
l2      (ε, δ)   either   the Gaussian at ρ = ``largest_rho(ε, δ)``, as for ρ
Σ       ρ        grid     Gaussian N(0, c²Σ)         c = (Δ_M + 2^k·√(Σᵢ 1/dᵢ))/√(2ρ)
Σ       (ε, δ)   grid     the same at ρ = ``largest_rho(ε, δ)``
======  =======  =======  =========================  ===============================

The Σ rows (``covariance=``: a Mahalanobis sensitivity Δ_M, vᵀΣ⁻¹v ≤ Δ_M² for neighbours'
differences v; Σ = L·D·Lᵀ, D = diag(dᵢ)) are :func:`~dpkit.mechanisms.make_gaussian_mahalanobis`
(Dwork & Roth App. A.1). The ``workload=`` row (A, d × n, d ≤ 4: ``sensitivity`` is the L1
distance Δ between histograms, the budget a pure ε) is the K-norm mechanism
:func:`~dpkit.mechanisms.make_knorm` at ε/Δ, whose map at Δ is exactly ε (Hardt & Talwar 2010).

Sources: Dwork & Roth Thm 3.6 (Laplace); Chaudhuri, Monteleoni & Sarwate 2011 Thm 6 (vector
mechanism); Bun & Steinke 2016 Prop. 1.6 and Canonne, Kamath & Steinke 2020 Thm 4
(Gaussian); ρ ⇒ (ε, δ) by :func:`~dpkit.core.measures.zcdp_to_epsilon` (Bun & Steinke
Prop. 1.3, CKS20 Cor. 13), as the rest of dpkit; the exponential mechanism ε = 2Δ/s
(McSherry & Talwar 2007; Dwork & Roth Thm 3.10). No privacy arithmetic is new here: the
check is the mechanisms' own exact maps.

Rounding is always up (more noise, never less): a scale is rounded to what the exact samplers
take (:func:`~dpkit.mechanisms.representable_scale`, at most a relative 2^-40) and, on a
grid, to whole grid steps; √ is taken upwards.

Grid exponent — one rule: k = ⌊log₂ s⌋ − ``GRID_BITS`` of the released scale s
(:func:`dpkit.core.samplers.grid_exponent`), the grid mechanisms' own default. s depends on
k through the rounding allowance, so the allowance is charged for the fixed point reached
from the closed form without it (one or two steps), which also covers a mechanism rebuilt
from the effective ``scale`` alone (``make_laplace(noise.scale, max_size=n)`` has the same
map bound). The allowance adds 2^k·n (L1) or 2^k·√n (L2) to Δ, with 2^k at most 2^-30 of
the scale (2^-29 when the rounding crosses a power of two).

Check and fallback: the built measurement's privacy map at Δ is compared with the budget
exactly. If the closed form failed (it cannot, up to the rounding above, but the map is the
authority), the scale is found by bisection on the map
(:func:`~dpkit.core.compose.calibrate_scale`); a scale that still fails raises
:class:`~dpkit.errors.MeasureError` and is never cached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from dpkit.core import samplers
from dpkit.core.component import Measurement
from dpkit.core.compose import calibrate_scale
from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, largest_rho, zcdp_to_epsilon
from dpkit.core.numbers import Number, as_typed, integer, positive, sqrt_up
from dpkit.errors import DomainError, MeasureError
from dpkit.mechanisms._common import grid_relaxation, grid_steps, representable_scale
from dpkit.mechanisms.exponential import (
    make_exponential,
    make_exponential_many,
    sample_exponential,
    selection_audit,
)
from dpkit.mechanisms.gaussian import make_discrete_gaussian, make_gaussian
from dpkit.mechanisms.knorm import Workload, declared_workload, make_knorm
from dpkit.mechanisms.laplace import make_discrete_laplace, make_laplace
from dpkit.mechanisms.mahalanobis import (
    Matrix,
    declared_covariance,
    mahalanobis_plan,
    make_gaussian_mahalanobis,
)
from dpkit.mechanisms.registry import AuditCase, register, vector_sampler
from dpkit.mechanisms.selection import make_permute_and_flip, make_report_noisy_max
from dpkit.mechanisms.vector import make_vector_laplace

__all__ = ["CalibratedNoise", "make_noise", "make_selection", "clear_cache", "GRID_BITS",
           "CACHE_SIZE", "grid_exponent"]

GRID_BITS = samplers.GRID_BITS  # the one grid rule: 2^k ≤ scale · 2^-GRID_BITS < 2^(k+1)
grid_exponent = samplers.grid_exponent  # that rule's k, for every caller outside the core
CACHE_SIZE = 1024  # calibrations are pure functions of public numbers; bounded LRU

_NORMS = ("l1", "l2")
_OUTPUTS = ("integer", "grid")
_MECHANISMS: dict[str, tuple[str, Callable[[Fraction, int], Measurement]]] = {
    "discrete_laplace": ("discrete Laplace", lambda s, n: make_discrete_laplace(s)),
    "laplace": ("Laplace (grid)", lambda s, n: make_laplace(s, max_size=n)),
    "vector_laplace": ("vector Laplace (grid)", lambda s, n: make_vector_laplace(s, n)),
    "discrete_gaussian": ("discrete Gaussian", lambda s, n: make_discrete_gaussian(s)),
    "gaussian": ("Gaussian (grid)", lambda s, n: make_gaussian(s, max_size=n)),
}
_SELECTIONS: dict[str, Callable[..., Measurement]] = {
    "exponential": make_exponential,
    "exponential_many": make_exponential_many,
    "permute_and_flip": make_permute_and_flip,
    "report_noisy_max": make_report_noisy_max,
}


@dataclass(frozen=True)
class CalibratedNoise(Measurement):
    """A :class:`~dpkit.core.Measurement` returned by :func:`make_noise` or
    :func:`make_selection`, with what it was calibrated to (all exact, all public).

    Attributes
    ----------
    scale : Fraction
        The effective scale after every rounding: the Laplace b, the Gaussian σ, or the
        selection temperature s.
    sensitivity : Fraction
        Δ, in the measurement's input metric.
    budget : PrivacyLoss
        The loss asked for (``ApproxDP`` for an (ε, δ) budget).
    loss : PrivacyLoss
        ``privacy_map(sensitivity)``, checked ≤ ``budget`` (ρ-zCDP for the Gaussian).
    grid : int or None
        The grid exponent k of a grid output (None for integers and selections).
    mechanism : str
        The mechanism's name ("discrete Laplace", "Gaussian (grid)", "exponential", ...).
    """

    scale: Fraction = Fraction(0)
    sensitivity: Fraction = Fraction(0)
    budget: PrivacyLoss | None = None
    loss: PrivacyLoss | None = None
    grid: int | None = None
    mechanism: str = ""


def _audit_noise() -> list[AuditCase]:
    """The calibrated entry at Δ = 1, ε = 1/2, integer output (discrete Laplace, scale 2) on
    the pair 0, 1; broken: the entry at ε = 1 (half the noise) for the same claim."""
    return [AuditCase("noise", make_noise(1, epsilon=Fraction(1, 2)),
                      vector_sampler(make_noise, 1, epsilon=Fraction(1, 2)),
                      vector_sampler(make_noise, 1, epsilon=1), 0, 1)]


def _audit_selection() -> list[AuditCase]:
    """The calibrated exponential mechanism at Δ = 1, ε = 1 (temperature 2) on the
    worst-case scores, drawn at its scale; broken: half that temperature."""
    m = make_selection(1, 1)
    return [selection_audit("selection", m, sample_exponential, m.scale, m.scale / 2)]


def _optional(x: Number | None, name: str) -> Fraction | None:
    # a budget is the decimal the user typed (0.1 → 1/10), as PureDP(0.1) reads it
    return None if x is None else positive(as_typed(x), name)


@register(audit=_audit_noise)
def make_noise(sensitivity: Number, *, epsilon: Number | None = None,
               rho: Number | None = None, delta: Number | None = None, norm: str = "l1",
               output: str = "integer", size: int = 1, scale: Number | None = None,
               cache: bool = True,
               covariance: Sequence[Sequence[Number]] | None = None,
               workload: Sequence[Sequence[Number]] | None = None) -> CalibratedNoise:
    """The calibrated, map-checked noise measurement for a sensitivity and a budget.

    Parameters
    ----------
    sensitivity : number
        Δ > 0 in the ``norm`` (rounded up to an exact Fraction).
    epsilon, rho, delta : number, optional
        The budget: ``epsilon`` alone (pure ε-DP: Laplace for L1, the vector mechanism for
        L2), ``rho`` (ρ-zCDP: Gaussian) or ``epsilon`` with ``delta`` (the Gaussian at the
        largest ρ whose (ε, δ) conversion meets them). Rounded down.
    norm : {"l1", "l2"}
        The norm of the sensitivity (and the mechanism's input metric).
    output : {"integer", "grid"}
        Integer queries (discrete noise, exact) or floats released on the 2^k grid.
    size : int
        Grid outputs: the largest number of coordinates (the rounding allowance is charged
        for them; for the vector mechanism, its exact dimension). Ignored for integers.
    scale : number, optional
        Use this scale instead of the closed form (still checked against the map).
    cache : bool
        False for a data-dependent sensitivity (smooth sensitivity): the measurement is built
        afresh and nothing of it is remembered, so the process keeps no trace of the value
        and a later call's speed does not depend on it.
    covariance : d × d matrix of rationals, optional
        Σ (symmetric positive definite): ``sensitivity`` is then the Mahalanobis sensitivity
        Δ_M (vᵀΣ⁻¹v ≤ Δ_M² for neighbours' differences v), the noise N(0, c²Σ) on a grid
        (:func:`~dpkit.mechanisms.make_gaussian_mahalanobis`, d = len(Σ); ``norm`` and
        ``size`` are ignored); the budget is ``rho`` or ``epsilon`` with ``delta``.
    workload : d × n matrix of rationals, optional
        A (1 ≤ d ≤ 4, rank d): the K-norm mechanism for the answers Ax over a histogram x
        (:func:`~dpkit.mechanisms.make_knorm` at ε/Δ, on its lattice); ``sensitivity`` is
        then the L1 distance Δ between neighbouring histograms (1 for add/remove one
        record) and the budget a pure ``epsilon``; ``norm``, ``output`` and ``size`` are
        ignored. Its ``scale`` is Δ/ε (noise ∝ exp(−‖z‖_K/scale)).

    Returns
    -------
    CalibratedNoise
        A measurement (input metric L1 or L2 distance) whose privacy map at Δ is within
        the budget; the same object for the same arguments (bounded LRU cache, unless
        ``cache=False``). Closed
        forms, the grid rule and the sources are in the module docstring.

    Raises
    ------
    DomainError
        A non-positive number, an unknown norm or output, or a budget the norm cannot take
        (L1 takes ε only; pure ε under L2 needs ``output="grid"``).
    MeasureError
        If the measurement's map exceeds the budget (a ``scale`` that is too small).
    """
    if workload is not None:
        return _knorm_arguments(sensitivity, epsilon, rho, delta, workload, cache)
    if covariance is not None:
        return _mahalanobis_arguments(sensitivity, epsilon, rho, delta, output, scale,
                                      covariance, cache)
    args = (sensitivity, epsilon, rho, delta, norm, output, size, scale)
    if not cache:
        return _from_arguments(*args, cached=False)
    try:
        hash(args)
    except TypeError:  # unhashable arguments: converted (or refused) without the fast cache
        return _from_arguments(*args)
    return _by_arguments(*args)


def _from_arguments(sensitivity: Number, epsilon: Number | None, rho: Number | None,
                    delta: Number | None, norm: str, output: str, size: int,
                    scale: Number | None, cached: bool = True) -> CalibratedNoise:
    """The arguments converted to exact Fractions (:func:`_make_noise` is cached by those,
    unless ``cached`` is False)."""
    if norm not in _NORMS:
        raise DomainError(f"norm must be one of {_NORMS}; got {norm!r}")
    if output not in _OUTPUTS:
        raise DomainError(f"output must be one of {_OUTPUTS}; got {output!r}")
    n = 1 if output == "integer" else integer(size, "size", minimum=1)
    make = _make_noise if cached else _make_noise.__wrapped__
    return make(positive(sensitivity, "sensitivity"), _optional(epsilon, "epsilon"),
                       _optional(rho, "rho"), _optional(delta, "delta"), norm, output, n,
                       None if scale is None else positive(scale, "scale"))


# the caller's own arguments first (equal numbers hash equally: 1, 1.0 and Fraction(1) share
# an entry), then their exact conversion: a repeated call costs one dictionary look-up
_by_arguments = lru_cache(maxsize=CACHE_SIZE)(_from_arguments)


def clear_cache() -> None:
    """Forget every cached calibration (tests; the cached values hold no data: a
    data-dependent sensitivity is never cached, ``make_noise(..., cache=False)``)."""
    for cached in (_by_arguments, _make_noise, _make_selection, _make_mahalanobis,
                   _make_knorm):
        cached.cache_clear()


def _kind(norm: str, output: str, eps: Fraction | None, rho: Fraction | None,
          delta: Fraction | None) -> str:
    if (eps is None) == (rho is None):
        raise DomainError("pass epsilon= (with delta= for (ε, δ)) or rho=, exactly one")
    if delta is not None and (rho is not None or delta >= 1):
        raise DomainError("delta= goes with epsilon= and must be below 1")
    if norm == "l1":
        if eps is None or delta is not None:
            raise DomainError("an L1 sensitivity takes a pure ε budget (Laplace); for ρ or "
                              "(ε, δ), bound the L2 sensitivity (Gaussian)")
        return "discrete_laplace" if output == "integer" else "laplace"
    if eps is not None and delta is None:
        if output == "integer":
            raise DomainError("pure ε for an L2 sensitivity is the vector mechanism, which "
                              "releases on a grid: output='grid'")
        return "vector_laplace"
    return "discrete_gaussian" if output == "integer" else "gaussian"


def _closed_form(kind: str, sens: Fraction, eps: Fraction | None, rho: Fraction | None,
                 norm: str, n: int) -> Fraction:
    """The scale to build ``kind`` with (module docstring's table and grid rule)."""
    def base(d: Fraction) -> Fraction:
        if eps is not None:
            return d / eps
        assert rho is not None
        return sqrt_up(d * d / (2 * rho))

    if kind.startswith("discrete"):
        return representable_scale(base(sens))
    k = grid_exponent(base(sens))
    raw = base(sens)
    for _ in range(8):  # k only grows; a second step is rare, a third never seen
        raw = base(sens + grid_relaxation(k, n, norm))
        k_raw, steps = grid_steps(raw)
        # the grid of a mechanism built from raw, or rebuilt from its effective scale alone
        k_used = max(k_raw, grid_steps(steps * Fraction(2) ** k_raw)[0])
        if k_used <= k:
            break
        k = k_used
    return raw


def _effective(kind: str, raw: Fraction) -> tuple[Fraction, int | None]:
    """The scale the mechanism built from ``raw`` uses (every rounding) and its grid."""
    if kind == "discrete_laplace":
        return representable_scale(raw), None
    if kind == "discrete_gaussian":
        return raw, None
    k, steps = grid_steps(raw)
    return steps * Fraction(2) ** k, k


def _within(loss: PrivacyLoss, target: PrivacyLoss, budget: PrivacyLoss) -> bool:
    if not isinstance(loss, type(target)) or not loss <= target:
        return False
    if isinstance(budget, ApproxDP) and isinstance(loss, ZCDP):
        return zcdp_to_epsilon(loss.rho, budget.delta) <= budget.epsilon
    return True


@lru_cache(maxsize=CACHE_SIZE)
def _make_noise(sens: Fraction, eps: Fraction | None, rho: Fraction | None,
                delta: Fraction | None, norm: str, output: str, n: int,
                fixed: Fraction | None) -> CalibratedNoise:
    kind = _kind(norm, output, eps, rho, delta)
    budget: PrivacyLoss
    target: PrivacyLoss
    if kind.endswith("laplace"):
        assert eps is not None  # _kind's rules
        budget = target = PureDP(eps)
    elif delta is not None:
        assert eps is not None
        rho = largest_rho(eps, delta)
        budget, target, eps = ApproxDP(eps, delta), ZCDP(rho), None
    else:
        assert rho is not None
        budget = target = ZCDP(rho)
    name, build = _MECHANISMS[kind]
    raw = _closed_form(kind, sens, eps, rho, norm, n) if fixed is None else fixed
    m = build(raw, n)
    if not _within(m.privacy_map(sens), target, budget):
        if fixed is not None:
            raise MeasureError(f"{name} at scale {float(fixed):.6g} exceeds {budget} at "
                               f"Δ = {sens}")
        raw = calibrate_scale(lambda s: build(s, n), sens, target, start=raw)
        m = build(raw, n)
    loss = m.privacy_map(sens)
    if not _within(loss, target, budget):
        raise MeasureError(f"{name} calibration failed: {loss} exceeds {budget} at Δ = {sens}")
    scale, k = _effective(kind, raw)
    return _calibrated(m, scale=scale, sensitivity=sens, budget=budget, loss=loss, grid=k,
                       mechanism=name)


def _mahalanobis_arguments(sensitivity: Number, epsilon: Number | None, rho: Number | None,
                           delta: Number | None, output: str, scale: Number | None,
                           covariance: Sequence[Sequence[Number]], cache: bool
                           ) -> CalibratedNoise:
    """Plan-time checks of a ``covariance=`` call, then the (cached) calibration."""
    if output != "grid":
        raise DomainError("a Mahalanobis sensitivity releases floats on a grid: "
                          "output='grid'")
    eps, r, dlt = (_optional(epsilon, "epsilon"), _optional(rho, "rho"),
                   _optional(delta, "delta"))
    if (eps is None) == (r is None) or (eps is not None and dlt is None) or (
            r is not None and dlt is not None):
        raise DomainError("a Mahalanobis sensitivity takes rho= or epsilon= with delta= "
                          "(the Gaussian); for pure ε, bound an L1 sensitivity (Laplace)")
    if dlt is not None and dlt >= 1:
        raise DomainError("delta= must be below 1")
    make = _make_mahalanobis if cache else _make_mahalanobis.__wrapped__
    return make(positive(sensitivity, "sensitivity"), eps, r, dlt,
                declared_covariance(covariance),
                None if scale is None else positive(scale, "scale"))


@lru_cache(maxsize=CACHE_SIZE)
def _make_mahalanobis(sens: Fraction, eps: Fraction | None, rho: Fraction | None,
                      delta: Fraction | None, cov: Matrix, fixed: Fraction | None
                      ) -> CalibratedNoise:
    budget: PrivacyLoss
    if delta is not None:
        assert eps is not None
        budget, rho = ApproxDP(eps, delta), largest_rho(eps, delta)
    else:
        assert rho is not None
        budget = ZCDP(rho)
    target = ZCDP(rho)
    name = "Mahalanobis Gaussian (grid)"
    raw = fixed
    if raw is None:  # c from the map solved for c; k grows with c, so iterate to the fixed point
        raw = sqrt_up(sens * sens / (2 * rho))
        for _ in range(8):
            relax = mahalanobis_plan(raw, cov).relaxation
            new = representable_scale(sqrt_up((sens + relax) ** 2 / (2 * rho)))
            if new <= raw:
                break
            raw = new
    m = make_gaussian_mahalanobis(raw, cov)
    if not _within(m.privacy_map(sens), target, budget):
        if fixed is not None:
            raise MeasureError(f"{name} at scale {float(fixed):.6g} exceeds {budget} at "
                               f"Δ = {sens}")
        raw = calibrate_scale(lambda c: make_gaussian_mahalanobis(c, cov), sens, target,
                              start=raw)
        m = make_gaussian_mahalanobis(raw, cov)
    loss = m.privacy_map(sens)
    if not _within(loss, target, budget):
        raise MeasureError(f"{name} calibration failed: {loss} exceeds {budget} at Δ = {sens}")
    return _calibrated(m, scale=mahalanobis_plan(raw, cov).scale, sensitivity=sens,
                       budget=budget, loss=loss, grid=mahalanobis_plan(raw, cov).k,
                       mechanism=name)


def _knorm_arguments(sensitivity: Number, epsilon: Number | None, rho: Number | None,
                     delta: Number | None, workload: Sequence[Sequence[Number]], cache: bool
                     ) -> CalibratedNoise:
    """Plan-time checks of a ``workload=`` call, then the (cached) K-norm mechanism."""
    if epsilon is None or rho is not None or delta is not None:
        raise DomainError("the K-norm mechanism (workload=) takes a pure epsilon= budget; "
                          "for ρ or (ε, δ), bound the L2 sensitivity (Gaussian)")
    eps = positive(as_typed(epsilon), "epsilon")
    make = _make_knorm if cache else _make_knorm.__wrapped__
    return make(positive(sensitivity, "sensitivity"), eps, declared_workload(workload))


@lru_cache(maxsize=CACHE_SIZE)
def _make_knorm(sens: Fraction, eps: Fraction, workload: Workload) -> CalibratedNoise:
    m = make_knorm(workload, eps / sens)
    loss = m.privacy_map(sens)
    if not loss <= PureDP(eps):  # exact: (ε/Δ)·Δ = ε
        raise MeasureError(f"K-norm calibration failed: {loss} exceeds ε = {eps}")
    return _calibrated(m, scale=sens / eps, sensitivity=sens, budget=PureDP(eps), loss=loss,
                       grid=None, mechanism="K-norm")


@register(audit=_audit_selection)
def make_selection(sensitivity: Number, epsilon: Number, *, mechanism: str = "exponential",
                   monotonic: bool = False) -> CalibratedNoise:
    """The calibrated, map-checked private selection for scores of sensitivity Δ at ε.

    Parameters
    ----------
    sensitivity : number
        Δ > 0: each score moves by at most Δ between neighbours (L∞).
    epsilon : number
        ε > 0 (rounded down).
    mechanism : {"exponential", "exponential_many", "permute_and_flip", "report_noisy_max"}
        :func:`~dpkit.mechanisms.make_exponential` (one draw),
        :func:`~dpkit.mechanisms.exponential.make_exponential_many` (one draw per score
        vector, vectors on disjoint parts of the data), permute-and-flip or Report Noisy Max;
        all have the map ε = 2Δ/s (Δ/s if ``monotonic``).
    monotonic : bool
        Whether neighbours move all scores the same way.

    Returns
    -------
    CalibratedNoise
        The measurement at s = 2Δ/ε (Δ/ε if monotonic) rounded up to a representable
        rational, its map at Δ checked ≤ PureDP(ε); cached by the arguments.

    Raises
    ------
    DomainError
        Δ ≤ 0, ε ≤ 0 or an unknown mechanism.
    """
    if mechanism not in _SELECTIONS:
        raise DomainError(f"mechanism must be one of {sorted(_SELECTIONS)}; got {mechanism!r}")
    return _make_selection(positive(sensitivity, "sensitivity"),
                           positive(epsilon, "epsilon", up=False), mechanism, bool(monotonic))


@lru_cache(maxsize=CACHE_SIZE)
def _make_selection(sens: Fraction, eps: Fraction, mechanism: str, monotonic: bool
                    ) -> CalibratedNoise:
    build = _SELECTIONS[mechanism]
    target = PureDP(eps)
    scale = representable_scale((1 if monotonic else 2) * sens / eps)
    m = build(scale, monotonic=monotonic)
    if not m.check(sens, target):
        scale = calibrate_scale(lambda s: build(s, monotonic=monotonic), sens, target,
                                start=scale)
        m = build(scale, monotonic=monotonic)
    loss = m.privacy_map(sens)
    if not loss <= target:
        raise MeasureError(f"{mechanism} calibration failed: {loss} exceeds {target}")
    return _calibrated(m, scale=scale, sensitivity=sens, budget=target, loss=loss, grid=None,
                       mechanism=mechanism)


def _calibrated(m: Measurement, **extra: object) -> CalibratedNoise:
    return CalibratedNoise(function=m.function, input_metric=m.input_metric,
                           output_measure=m.output_measure, privacy_map=m.privacy_map,
                           name=m.name, accuracy=m.accuracy, input_domain=m.input_domain,
                           **extra)  # type: ignore[arg-type]
