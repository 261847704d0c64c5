"""Transformations and measurements (the framework of OpenDP's programming model, in the
terms of Dwork & Roth §2–3 and Gaboardi et al. 2020, *A Programming Framework for OpenDP*).

- A :class:`Transformation` is a function with a *stability map*: if inputs are ``d_in``
  apart in its input metric, outputs are at most ``stability_map(d_in)`` apart in its output
  metric (the sensitivity, for a query).
- A :class:`Measurement` is a randomised function with a *privacy map*: neighbours ``d_in``
  apart give outputs whose privacy loss is at most ``privacy_map(d_in)`` in its measure.

``t >> m`` chains them (the map of the chain is the composition of the maps); ``m >> f``
post-processes a measurement's output with any function ``f`` (no privacy cost:
Dwork & Roth Prop. 2.1). ``check(d_in, d_out)`` is derived from the map, never hand-written.

Each component has an *input domain* (:mod:`dpkit.core.domains`), the set of inputs its map
is about. Construction checks that the input metric is defined on it
(:func:`~dpkit.core.domains.check_space`, as OpenDP checks its metric spaces); calling a
measurement checks that the data is in it, vectorised, before any noise is drawn (and a
chain checks the intermediate value against the inner measurement's domain). A component
that declares no domain has :class:`~dpkit.core.domains.AnyDomain` (no claim, no check).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dpkit.core import rng
from dpkit.core.domains import AnyDomain, Domain, check_space
from dpkit.core.measures import PrivacyLoss
from dpkit.core.metrics import Metric
from dpkit.core.numbers import Number
from dpkit.errors import DomainError

__all__ = ["Transformation", "Measurement", "make_postprocess"]

StabilityMap = Callable[[Any], Any]
PrivacyMap = Callable[[Any], PrivacyLoss]


def _compatible(left: Metric, right: Metric, what: str) -> None:
    if left != right:
        raise DomainError(f"cannot chain: {what} {left.name} does not match {right.name}")


def _then(first: Callable[[Any], Any], domain: Domain, second: Callable[[Any], Any]
          ) -> Callable[[Any], Any]:
    """``second(first(x))``, checking the intermediate value against ``domain`` first."""
    if isinstance(domain, AnyDomain):
        return lambda x: second(first(x))

    def run(x: Any) -> Any:
        y = first(x)
        domain.check(y)
        return second(y)

    return run


@dataclass(frozen=True)
class Transformation:
    """A deterministic function with a stability map.

    Attributes
    ----------
    function : callable
        The data transformation.
    input_metric, output_metric : Metric
        Distances on the input and output.
    stability_map : callable
        ``d_in ↦ d_out``: an upper bound on the output distance (exact numbers).
    name : str
        Short description, shown in plans.
    input_domain : Domain
        The inputs the stability map is about (default :class:`AnyDomain`).

    Raises
    ------
    DomainError
        At construction, if ``input_metric`` is not defined on ``input_domain``.
    """

    function: Callable[[Any], Any]
    input_metric: Metric
    output_metric: Metric
    stability_map: StabilityMap
    name: str = "transformation"
    input_domain: Domain = field(default_factory=AnyDomain)

    def __post_init__(self) -> None:
        check_space(self.input_domain, self.input_metric)

    def __repr__(self) -> str:  # no raw function objects
        return (f"Transformation({self.name!r}, {type(self.input_metric).__name__} → "
                f"{type(self.output_metric).__name__})")

    def __call__(self, data: Any) -> Any:
        """``function(data)`` after checking that ``data`` is in the input domain."""
        self.input_domain.check(data)
        return self.function(data)

    def map(self, d_in: Number) -> Any:
        """The stability map: ``d_out`` for inputs ``d_in`` apart."""
        return self.stability_map(d_in)

    def check(self, d_in: Number, d_out: Number) -> bool:
        """True iff inputs ``d_in`` apart always map to outputs at most ``d_out`` apart."""
        return bool(self.map(d_in) <= d_out)

    def __rshift__(self, other: Any) -> Any:
        if isinstance(other, Transformation):
            _compatible(self.output_metric, other.input_metric, "output metric")
            return Transformation(
                function=_then(self.function, other.input_domain, other.function),
                input_metric=self.input_metric,
                output_metric=other.output_metric,
                stability_map=lambda d: other.stability_map(self.stability_map(d)),
                name=f"{self.name} >> {other.name}",
                input_domain=self.input_domain,
            )
        if isinstance(other, Measurement):
            _compatible(self.output_metric, other.input_metric, "output metric")
            return Measurement(
                function=_then(self.function, other.input_domain, other.function),
                input_metric=self.input_metric,
                output_measure=other.output_measure,
                privacy_map=lambda d: other.privacy_map(self.stability_map(d)),
                name=f"{self.name} >> {other.name}",
                accuracy=other.accuracy,
                input_domain=self.input_domain,
            )
        return NotImplemented


@dataclass(frozen=True)
class Measurement:
    """A randomised function with a privacy map.

    Calling a measurement draws noise from :mod:`dpkit.core.rng` and therefore refuses to run
    while the test-only deterministic stream is active
    (:class:`~dpkit.errors.InsecureRandomnessError`).

    Attributes
    ----------
    function : callable
        Input ↦ noisy output.
    input_metric : Metric
        Distance on the input (``d_in`` of the privacy map).
    output_measure : type
        The privacy definition of the loss: ``PureDP``, ``ApproxDP`` or ``ZCDP``.
    privacy_map : callable
        ``d_in ↦`` privacy loss (an instance of ``output_measure``, exact).
    accuracy : callable or None
        ``beta ↦ a``: with probability ≥ 1 − β, each output coordinate is within ``a`` of
        the exact value (before any post-processing). ``None`` when not applicable.
    input_domain : Domain
        The inputs the privacy map is about (default :class:`AnyDomain`); every ``make_*``
        of :mod:`dpkit.mechanisms` declares its own.

    Raises
    ------
    DomainError
        At construction, if ``input_metric`` is not defined on ``input_domain``; when
        called, if the data is not in ``input_domain`` (before any noise is drawn).
    """

    function: Callable[[Any], Any]
    input_metric: Metric
    output_measure: type
    privacy_map: PrivacyMap
    name: str = "measurement"
    accuracy: Callable[[float], float] | None = field(default=None)
    input_domain: Domain = field(default_factory=AnyDomain)

    def __post_init__(self) -> None:
        check_space(self.input_domain, self.input_metric)

    def __repr__(self) -> str:  # no raw function objects
        return (f"Measurement({self.name!r}, {type(self.input_metric).__name__} → "
                f"{self.output_measure.__name__})")

    def __call__(self, data: Any) -> Any:
        rng.require_secure()
        self.input_domain.check(data)
        return self.function(data)

    def map(self, d_in: Number) -> PrivacyLoss:
        """Alias of :meth:`privacy_map`."""
        return self.privacy_map(d_in)

    def check(self, d_in: Number, d_out: PrivacyLoss) -> bool:
        """True iff neighbours ``d_in`` apart incur a privacy loss of at most ``d_out``."""
        return bool(self.privacy_map(d_in) <= d_out)

    def __rshift__(self, post: Callable[[Any], Any]) -> Measurement:
        if isinstance(post, Transformation | Measurement):
            raise DomainError("only a plain function can follow a measurement (post-processing)")
        return Measurement(
            function=lambda x: post(self.function(x)),
            input_metric=self.input_metric,
            output_measure=self.output_measure,
            privacy_map=self.privacy_map,
            name=f"{self.name} >> {getattr(post, '__name__', 'postprocess')}",
            accuracy=None,
            input_domain=self.input_domain,
        )


def make_postprocess(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Mark a function as post-processing (documentation only; any callable works)."""
    return function
