"""dpkit.core — the mathematics of privacy. Imports no dataframe engine, database or web
framework.

Contents
--------
numbers    exact Fraction arithmetic with directed rounding
rng        the one source of randomness (a CSPRNG)
samplers   exact, vectorised samplers (Canonne, Kamath & Steinke 2020)
measures   PureDP, ApproxDP, ZCDP and their conversions
metrics    neighbouring relations and vector distances
component  Transformation (stability map), Measurement (privacy map), chaining with >>
compose    sequential composition, privacy filters, scale calibration
stability  sensitivities of the aggregations interface mode compiles to
accuracy   tail bounds that size confidence intervals
"""

from dpkit.core import accuracy, numbers, rng, samplers, stability
from dpkit.core.component import Measurement, Transformation
from dpkit.core.compose import (
    PrivacyFilter,
    calibrate_scale,
    compose_losses,
    make_sequential_composition,
)
from dpkit.core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, zcdp_to_epsilon
from dpkit.core.metrics import (
    AddRemoveDistance,
    HammingDistance,
    L1Distance,
    L2Distance,
    LInfDistance,
    Metric,
)

__all__ = [
    "accuracy",
    "numbers",
    "rng",
    "samplers",
    "stability",
    "Measurement",
    "Transformation",
    "PrivacyFilter",
    "calibrate_scale",
    "compose_losses",
    "make_sequential_composition",
    "PrivacyLoss",
    "PureDP",
    "ApproxDP",
    "ZCDP",
    "zcdp_to_epsilon",
    "Metric",
    "AddRemoveDistance",
    "L1Distance",
    "L2Distance",
    "LInfDistance",
    "HammingDistance",
]
