"""The mechanism registry (dpkit.mechanisms.registry) and the audit battery built from it.

Attack: the audit's cases were a hand-kept list in dpkit.audit, so a mechanism could be
added without an audit case (six public constructors had none: make_geometric, make_top_k,
make_analyze_gauss, make_ptr_median, make_sample_and_aggregate, make_smooth_trimmed_mean,
and neither had the calibrated entry's make_noise / make_selection). Now every public
``make_*`` registers itself with its cases, and this test fails for one that does not."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import dpkit.mechanisms as mechanisms
from dpkit.audit import CASES
from dpkit.core.component import Measurement
from dpkit.core.domains import AnyDomain
from dpkit.errors import DomainError
from dpkit.mechanisms import registry
from dpkit.mechanisms.registry import AuditCase, audit_cases, register, registered


def public_constructors() -> dict[str, object]:
    """Every public make_* of dpkit.mechanisms: the package's names and those defined in its
    public modules."""
    found = {name: getattr(mechanisms, name) for name in dir(mechanisms)
             if name.startswith("make_")}
    for info in pkgutil.iter_modules(mechanisms.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"dpkit.mechanisms.{info.name}")
        for name, obj in vars(module).items():
            if (name.startswith("make_") and inspect.isfunction(obj)
                    and obj.__module__ == module.__name__):
                found[name] = obj
    return found


def test_every_public_constructor_is_registered():
    constructors = public_constructors()
    assert len(constructors) >= 24
    known = registered()
    missing = sorted(set(constructors) - set(known))
    assert not missing, f"register these with their audit cases: {missing}"
    for name, constructor in constructors.items():
        assert known[name].constructor is constructor


def test_the_audit_battery_is_read_from_the_registry():
    cases = audit_cases()
    assert [c.name for c in cases] == list(CASES)
    assert all(CASES[c.name].measurement.name == c.measurement.name for c in cases)
    for entry in registered().values():
        assert entry.audit(), entry.name
    assert {"geometric", "top_k", "analyze_gauss", "ptr_median", "sample_and_aggregate",
            "smooth_trimmed_mean", "noise", "selection", "exponential_many"} <= set(CASES)


def test_every_case_claims_through_a_measurement_with_a_domain():
    for case in CASES.values():
        assert isinstance(case.measurement, Measurement)
        assert not isinstance(case.measurement.input_domain, AnyDomain), case.name
        # the claim at d_in is defined, and the samplers draw n outputs
        assert case.measurement.privacy_map(case.d_in) is not None
        assert np.asarray(case.sample(case.x, 3)).shape[0] == 3, case.name


def test_a_new_constructor_reaches_the_audit_only_through_the_registry(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    base = CASES["discrete_laplace"]

    @register(audit=lambda: [AuditCase("new_mechanism", base.measurement, base.sample,
                                       base.broken, base.x, base.x_prime)])
    def make_new_mechanism() -> Measurement:
        return base.measurement

    assert "make_new_mechanism" in registered()
    assert "new_mechanism" in [c.name for c in audit_cases()]

    @register(audit=lambda: [])
    def make_without_a_case() -> Measurement:
        return base.measurement

    with pytest.raises(DomainError, match="without an audit case"):
        audit_cases()


def test_a_name_registers_once(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    def make_laplace() -> None:  # another function under a registered name
        return None

    with pytest.raises(DomainError, match="already registered"):
        register(audit=lambda: [])(make_laplace)
