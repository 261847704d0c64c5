"""The mechanism registry: every public constructor of :mod:`dpkit.mechanisms` registers
itself here with what the audit battery needs to test it (DESIGN.md §3.8 and §5: "a shared
battery runs over every registered mechanism").

A constructor is registered by decorating it::

    @register(audit=_audit)
    def make_discrete_laplace(scale): ...

where ``_audit()`` returns the constructor's :class:`AuditCase` objects: a measurement whose
privacy map at ``d_in`` is the claim, a sampler of its outputs on a neighbouring pair
``x``, ``x_prime`` and a broken variant (less noise than claimed) that the audit must
flag. ``_audit`` is called only when the audit reads the registry, so registering costs
nothing at import. :mod:`dpkit.audit` builds its cases from :func:`audit_cases`; a test
checks that every public ``make_*`` of the package is registered, so a new mechanism
without an audit case fails the suite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from dpkit.core.component import Measurement
from dpkit.core.numbers import Number
from dpkit.errors import DomainError

__all__ = ["AuditCase", "Entry", "register", "registered", "audit_cases", "Sampler",
           "vector_sampler"]

Sampler = Callable[[Any, int], np.ndarray]
C = TypeVar("C", bound=Callable[..., Any])


@dataclass(frozen=True)
class AuditCase:
    """A mechanism under audit.

    Attributes
    ----------
    name : str
        The case's name (unique across the registry; the audit's table and CLI use it).
    measurement : Measurement
        Its privacy map at ``d_in`` is the claim that is tested.
    sample : callable
        ``sample(data, n)``: n independent outputs of the mechanism on ``data`` (any
        post-processing of them, e.g. one coordinate or a code per output).
    broken : callable
        The same with less noise than claimed: the audit must flag it.
    x, x_prime : any
        Neighbouring inputs, ``d_in`` apart in the measurement's input metric.
    d_in : any
        Their distance (default 1).
    """

    name: str
    measurement: Measurement
    sample: Sampler
    broken: Sampler
    x: object
    x_prime: object
    d_in: Number = 1


@dataclass(frozen=True)
class Entry:
    """A registered constructor: its name, module and audit cases (built on demand)."""

    name: str
    module: str
    constructor: Callable[..., Any]
    audit: Callable[[], Sequence[AuditCase]]


_REGISTRY: dict[str, Entry] = {}


def register(*, audit: Callable[[], Sequence[AuditCase]]) -> Callable[[C], C]:
    """Class or function decorator: register a constructor with its audit cases.

    Parameters
    ----------
    audit : callable
        ``() -> sequence of AuditCase``, called when the audit reads the registry.

    Raises
    ------
    DomainError
        If another constructor is already registered under the same name.
    """
    def decorate(constructor: C) -> C:
        name = constructor.__name__
        known = _REGISTRY.get(name)
        if known is not None and (known.module, known.constructor.__qualname__) != (
                constructor.__module__, constructor.__qualname__):
            raise DomainError(f"a mechanism named {name!r} is already registered")
        _REGISTRY[name] = Entry(name, constructor.__module__, constructor, audit)
        return constructor

    return decorate


def registered() -> dict[str, Entry]:
    """The registered constructors by name (a copy)."""
    return dict(_REGISTRY)


def audit_cases() -> list[AuditCase]:
    """Every registered constructor's audit cases, in registration order.

    Raises
    ------
    DomainError
        If a constructor registers no case, or two cases share a name.
    """
    cases: list[AuditCase] = []
    for entry in _REGISTRY.values():
        own = list(entry.audit())
        if not own:
            raise DomainError(f"{entry.name} is registered without an audit case")
        cases.extend(own)
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise DomainError("two audit cases share a name")
    return cases


def vector_sampler(make: Callable[..., Measurement], *args: Any, **kwargs: Any) -> Sampler:
    """``sample(data, n)``: ``make(*args, **kwargs)`` applied to a vector of n copies of
    ``data`` (its coordinates get independent noise: n independent outputs)."""
    m = make(*args, **kwargs)
    return lambda data, n: np.asarray(m(np.full(n, data)))
