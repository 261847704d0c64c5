"""dpkit.audit — empirical privacy testing of any Measurement.

Contents
--------
histogram_test        neighbouring-pair histogram test of an (ε, δ) claim (majority of votes)
epsilon_lower_bound   DP-Sniper-style threshold attack with Clopper–Pearson certification
record_sensitivity    grey-box check of a transformation's declared stability
neighbouring_tables   stress pairs of tables one unit apart
CASES                 every case of dpkit.mechanisms.registry (each make_* registers its
                      neighbours, claim and broken variant; no list is kept here)
run_audit             histogram test + lower bound for one registered case
audit_release         both tests on a whole release pipeline (a Session query, a server request)
attacks               the attacks DP answers (differencing, tracker, Dinur–Nissim reconstruction,
                      linkage), against exact answers and a Session (dpkit.audit.attacks)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dpkit.audit.registry import CASES, AuditCase, claimed_epsilon_delta
from dpkit.audit.release import ReleaseAudit, audit_release
from dpkit.audit.sensitivity import (
    SensitivityReport,
    neighbouring_tables,
    record_sensitivity,
)
from dpkit.audit.statistics import (
    HistogramVerdict,
    LowerBound,
    epsilon_lower_bound,
    histogram_test,
)

__all__ = [
    "histogram_test",
    "epsilon_lower_bound",
    "record_sensitivity",
    "neighbouring_tables",
    "HistogramVerdict",
    "LowerBound",
    "SensitivityReport",
    "CASES",
    "AuditCase",
    "AuditResult",
    "claimed_epsilon_delta",
    "run_audit",
    "audit_release",
    "ReleaseAudit",
]


@dataclass(frozen=True)
class AuditResult:
    """One row of the audit table."""

    name: str
    claimed_epsilon: float
    claimed_delta: float
    lower_bound: float
    histogram_passed: bool
    samples: int
    seconds: float


def run_audit(case: AuditCase, samples: int = 100_000, *, broken: bool = False,
              confidence: float = 0.95) -> AuditResult:
    """Audit a registered case (or its broken variant) with both tests."""
    eps, delta = claimed_epsilon_delta(case)
    sample = case.broken if broken else case.sample
    start = time.perf_counter()
    verdict = histogram_test(sample, case.x, case.x_prime, eps, delta, samples=samples)
    bound = epsilon_lower_bound(sample, case.x, case.x_prime, delta=delta,
                                samples=2 * samples, confidence=confidence)
    return AuditResult(case.name + (" (broken)" if broken else ""), eps, delta,
                       bound.epsilon, verdict.passed, verdict.samples + bound.samples,
                       time.perf_counter() - start)
