"""dpkit — differential privacy, exact by construction.

Contents
--------
core         the mathematics: exact numbers, CSPRNG, exact samplers, measures, components
mechanisms   make_laplace, make_discrete_laplace, make_gaussian, make_exponential, ...
frame        Session, Query, PrivacyUnit and the aggregations (interface mode)
ledger       Ledger, the persistent epsilon registry
release      histograms, range queries, query release, synthetic data (imported on first use
             of the query namespace ``query.publish`` or by ``import dpkit.release``)
audit        empirical privacy tests (imported on demand: ``import dpkit.audit``)
report       HTML reports of a release or of a ledger's dataset (``Release.to_html()``,
             ``dpkit.report.ledger_report``; imported on first use)
datasets     load_adult
errors       DPError and its subclasses

Top-level names: ``Session``, ``KeySet``, ``PrivacyUnit``, ``PureDP``, ``ApproxDP``, ``ZCDP``,
``ProbabilisticDP``, ``count``, ``count_distinct``, ``sum``, ``mean``, ``variance``, ``std``,
``histogram``, ``quantile``, ``median``, ``min``, ``max``, ``PartitionSelection``,
``TopKSelection``, ``Ledger``, ``Release``, ``tune`` (private contribution-bound tuning)
(the record of a release: ``session.last_release``).
"""

from typing import TYPE_CHECKING

from dpkit import core, datasets, errors, mechanisms
from dpkit.core import record as _record
from dpkit.core.measures import ZCDP, ApproxDP, ProbabilisticDP, PureDP
from dpkit.core.record import Release
from dpkit.core.renyi import RenyiDP
from dpkit.frame import (
    Categorical,
    KeySet,
    Numeric,
    PrivacyUnit,
    Query,
    Schema,
    Session,
    Text,
    count,
    count_distinct,
    histogram,
    max,
    mean,
    median,
    min,
    quantile,
    std,
    sum,
    tune,
    variance,
)
from dpkit.frame import namespace as _namespace
from dpkit.mechanisms.limited_domain import TopKSelection
from dpkit.mechanisms.partition_selection import PartitionSelection

if TYPE_CHECKING:  # imported on first use (module __getattr__ below)
    from dpkit.client import Client
    from dpkit.ledger import Ledger

# query.publish.histogram(…) / .pmw(…): dpkit.release registers the namespace when imported,
# which happens on first use (frame, above release on the layer map, never imports it)
_namespace.provide_query_namespace("publish", "dpkit.release")
_namespace.provide_query_namespace("continual", "dpkit.stream")
# Release.to_html(): dpkit.report registers its renderer when imported, on first use
_record.provide_html("dpkit.report")

__version__ = "0.1.0"

__all__ = [
    "core",
    "datasets",
    "errors",
    "mechanisms",
    "PureDP",
    "ApproxDP",
    "ZCDP",
    "ProbabilisticDP",
    "RenyiDP",
    "Session",
    "Query",
    "tune",
    "KeySet",
    "PrivacyUnit",
    "Schema",
    "Numeric",
    "Categorical",
    "Text",
    "count",
    "sum",
    "mean",
    "histogram",
    "quantile",
    "count_distinct",
    "variance",
    "std",
    "median",
    "min",
    "max",
    "PartitionSelection",
    "TopKSelection",
    "Ledger",
    "Client",
    "Release",
]


def __getattr__(name: str) -> object:
    """``dpkit.Ledger`` (it loads SQLAlchemy) and ``dpkit.Client`` (the HTTP client) are
    imported on first use, so ``import dpkit`` stays light."""
    if name == "Ledger":
        from dpkit.ledger import Ledger

        return Ledger
    if name == "Client":
        from dpkit.client import Client

        return Client
    raise AttributeError(f"module 'dpkit' has no attribute {name!r}")
