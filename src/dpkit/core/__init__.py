"""dpkit.core — the mathematics of privacy. Imports no dataframe engine, database or web
framework.

Contents
--------
numbers    exact Fraction arithmetic with directed rounding
rng        the one source of randomness (a CSPRNG)
samplers   exact, vectorised samplers (Canonne, Kamath & Steinke 2020)
measures   PureDP, ApproxDP, ZCDP, ProbabilisticDP and their conversions
metrics    neighbouring relations and vector distances
domains    input domains (AtomDomain, CategoricalDomain, VectorDomain) and their
           metric-space check
component  Transformation (stability map), Measurement (privacy map), chaining with >>
compose    sequential composition, privacy filters and odometers, scale calibration
composition  advanced (DRV10) and optimal (KOV15) composition, group privacy, parallel
renyi      Rényi DP curves and their conversions
subsampling  amplification by Poisson sampling (Balle et al. 2018), the sampled Gaussian's
             RDP (Mironov et al. 2019) and DP-SGD's ε at δ and its inverse
stability  sensitivities of the aggregations interface mode compiles to
accuracy   tail bounds that size confidence intervals
accountant the one accountant: check and debit, run, record, never refund
record     the one release record (Release, NoiseRow, Accuracy, digest_of)
renamed    deprecated keyword names: @renamed(old="new") warns and forwards
"""

from dpkit.core import accuracy, numbers, rng, samplers, stability
from dpkit.core.component import Measurement, Transformation
from dpkit.core.compose import (
    PrivacyFilter,
    PrivacyOdometer,
    calibrate_scale,
    compose_losses,
    make_sequential_composition,
)
from dpkit.core.composition import (
    advanced_composition,
    group_privacy,
    optimal_composition,
    parallel_composition,
)
from dpkit.core.domains import (
    AnyDomain,
    AtomDomain,
    CategoricalDomain,
    Domain,
    Kind,
    VectorDomain,
)
from dpkit.core.measures import (
    ZCDP,
    ApproxDP,
    PrivacyLoss,
    ProbabilisticDP,
    PureDP,
    convert,
    zcdp_to_epsilon,
)
from dpkit.core.metrics import (
    AddRemoveDistance,
    HammingDistance,
    L1Distance,
    L2Distance,
    LInfDistance,
    Metric,
)
from dpkit.core.record import Accuracy, NoiseRow, Release, digest_of
from dpkit.core.renyi import RenyiDP

__all__ = [
    "accuracy",
    "numbers",
    "rng",
    "samplers",
    "stability",
    "Measurement",
    "Transformation",
    "PrivacyFilter",
    "PrivacyOdometer",
    "calibrate_scale",
    "advanced_composition",
    "optimal_composition",
    "group_privacy",
    "parallel_composition",
    "RenyiDP",
    "convert",
    "compose_losses",
    "make_sequential_composition",
    "PrivacyLoss",
    "PureDP",
    "ApproxDP",
    "ZCDP",
    "ProbabilisticDP",
    "zcdp_to_epsilon",
    "Metric",
    "AddRemoveDistance",
    "L1Distance",
    "L2Distance",
    "LInfDistance",
    "HammingDistance",
    "Domain",
    "AnyDomain",
    "AtomDomain",
    "CategoricalDomain",
    "VectorDomain",
    "Kind",
    "Release",
    "NoiseRow",
    "Accuracy",
    "digest_of",
]
