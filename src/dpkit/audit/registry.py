"""The audit battery: every mechanism registered in :mod:`dpkit.mechanisms.registry` with
its neighbouring pair, its claim and a deliberately broken variant (less noise than claimed)
that the audit must flag. The cases are read from that registry — each ``make_*``
registers its own next to its code — never kept by hand here."""

from __future__ import annotations

import importlib.util
from fractions import Fraction

import dpkit.apps.auction  # noqa: F401  (registers the applications' own mechanisms' cases)
import dpkit.apps.correlated  # noqa: F401  (the Markov quilt mechanism's case)
import dpkit.apps.equilibrium  # noqa: F401
import dpkit.apps.holdout  # noqa: F401
import dpkit.apps.mobility  # noqa: F401  (the mobility report's case)
import dpkit.apps.posterior  # noqa: F401
import dpkit.audit.attacks  # noqa: F401  (the differencing attack's case)
import dpkit.frame.backend  # noqa: F401  (Poisson sampling's case: Query.sample)
import dpkit.local  # noqa: F401  (registers the local randomizers' cases)
import dpkit.release.generalization.diffgen  # noqa: F401  (DiffGen's case)
import dpkit.release.generalization.kanon  # noqa: F401  (safe k-anonymisation's case)
import dpkit.release.ranges.halfspaces  # noqa: F401  (halfspace counting's case)
import dpkit.release.synthetic.datacube  # noqa: F401  (the data cube's case)
import dpkit.release.synthetic.onthemap  # noqa: F401  (the OnTheMap synthesizer's case)
import dpkit.release.synthetic.smalldb  # noqa: F401  (SmallDB's case)
import dpkit.stream  # noqa: F401  (registers the continual counters' cases)
from dpkit.core.measures import ZCDP, ApproxDP, PureDP
from dpkit.mechanisms.registry import AuditCase, audit_cases

if importlib.util.find_spec("sklearn") is not None:  # dpkit.learn is the [learn] extra
    import dpkit.learn.cluster  # noqa: F401  (KMeans: centre of attention and coreset)
    import dpkit.learn.forest  # noqa: F401  (registers the smooth forest's leaf case)
    import dpkit.learn.hypothesis  # noqa: F401  (the generic private learner's case)
    import dpkit.learn.svm  # noqa: F401  (approximate minima perturbation's case)

__all__ = ["AuditCase", "CASES", "claimed_epsilon_delta", "GAUSSIAN_DELTA"]

GAUSSIAN_DELTA = Fraction(1, 10**3)  # the δ at which zCDP claims are audited


def claimed_epsilon_delta(case: AuditCase) -> tuple[float, float]:
    """The case's claim as (ε, δ): pure ε as is; zCDP converted at δ = 1e-3."""
    loss = case.measurement.privacy_map(case.d_in)
    if isinstance(loss, PureDP):
        return float(loss.epsilon), 0.0
    if isinstance(loss, ZCDP):
        approx = loss.to_approx(GAUSSIAN_DELTA)
        return float(approx.epsilon), float(approx.delta)
    assert isinstance(loss, ApproxDP)
    return float(loss.epsilon), float(loss.delta)


CASES: dict[str, AuditCase] = {case.name: case for case in audit_cases()}
