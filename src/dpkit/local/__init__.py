"""dpkit.local — local differential privacy: no trusted curator.

Each user randomises their own value on their device (``.randomize``, exact randomness
from :mod:`dpkit.core.rng`); the collector estimates frequencies from the reports
(``.estimate``: a Polars frame of value, estimate, standard error and confidence interval).

Contents
--------
GRR               generalised randomized response (k-RR; Warner 1965 for k = 2)
SUE, OUE          symmetric / optimised unary encoding (SUE = basic RAPPOR's encoding)
OLH, BLH          optimised / binary local hashing with an exact, vectorised aggregator
HadamardResponse  Hadamard response (Acharya, Sun & Zhang 2019)
SubsetSelection   k-subset selection (Wang et al. 2016; Ye & Barg 2018)
auto              GRR if k < 3e^ε + 2, else OLH (Wang et al. 2017)
norm_sub          non-negativity with consistency (Wang et al. NDSS 2020)

Telemetry, numeric estimation, consistency, shuffling and distributed DP (issue 21, part B):

OneBitMean, DBitFlip  Microsoft's telemetry (Ding, Kulkarni & Yekhanin 2017), with α-point
                      rounding and memoisation for repeated collection (``.memoized``)
Duchi, Piecewise,     mean of bounded numbers: Duchi et al. 2018 (1-D and [−1, 1]^d), the
Hybrid, SampledMean   piecewise and hybrid mechanisms and k-of-d attribute sampling
                      (Wang et al. ICDE 2019)
consistent        every post-processing of Wang et al. NDSS 2020 (base-pos, post-pos,
                  base-cut, norm, norm-mul, norm-cut, norm-sub, power, power-ns)
shuffled          central (ε, δ) of n shuffled ε0-LDP reports (Feldman, McMillan &
                  Talwar 2021: closed form and numerical bound)
DistributedDiscreteGaussian  the distributed discrete Gaussian over secure aggregation
                  and its zCDP accounting (Kairouz, Liu & Steinke 2021)

Secure aggregation (issue 37):

secure_sum        one round of Bonawitz et al. (CCS 2017, §4): X25519 + HKDF pairwise
                  masks, sums mod m, dropouts recovered by Shamir shares (module
                  :mod:`dpkit.local.secagg`: clients, server, messages)

Out-of-domain values are replaced by the oracle's ``fallback`` (default 0) before
randomising (see :func:`dpkit.local.base.to_index`); numbers outside their declared bounds
are clamped and non-numbers replaced by a ``fallback`` (see :mod:`dpkit.local.values`);
ε ≤ 0 and k < 2 raise :class:`~dpkit.errors.DomainError`.
"""

from dpkit.local.base import FrequencyOracle, norm_sub
from dpkit.local.choose import auto
from dpkit.local.grr import GRR
from dpkit.local.hadamard import HadamardResponse
from dpkit.local.hashing import BLH, OLH
from dpkit.local.subset import SubsetSelection
from dpkit.local.unary import OUE, SUE

__all__ = ["FrequencyOracle", "GRR", "SUE", "OUE", "OLH", "BLH", "HadamardResponse",
           "SubsetSelection", "auto", "norm_sub", "ORACLES"]

ORACLES = {"grr": GRR, "sue": SUE, "oue": OUE, "olh": OLH, "blh": BLH,
           "hadamard": HadamardResponse, "subset": SubsetSelection}

# --- issue 21 part A: RAPPOR, count-mean sketches, heavy hitters (kept apart for merges) ---
# RAPPOR                   Erlingsson, Pihur & Korolova 2014: Bloom filter, cohorts, memoised
#                          permanent + instantaneous randomized response, regression decoding
# CountMeanSketch          Apple 2017: count-mean sketch (m-bit report)
# HadamardCountMeanSketch  Apple 2017: Hadamard count-mean sketch (one-bit report)
# PEM, HashedOLH           prefix-extending heavy hitters over strings (Wang et al. TDSC 2021)
#                          on OLH over 32-bit identifiers
# These have no fixed domain: values are identified by their text (str), any value is
# encoded, and the server estimates the frequencies of a candidate list (RAPPOR, sketches)
# or discovers the top-k strings (PEM; symbols outside the alphabet end the string).
from dpkit.local.heavy_hitters import PEM, HashedOLH, PEMReports  # noqa: E402
from dpkit.local.rappor import RAPPOR, RAPPORReports  # noqa: E402
from dpkit.local.sketch import (  # noqa: E402
    CMSReports,
    CountMeanSketch,
    HadamardCountMeanSketch,
)

__all__ += ["RAPPOR", "RAPPORReports", "CountMeanSketch", "HadamardCountMeanSketch",
            "CMSReports", "PEM", "PEMReports", "HashedOLH"]

# --- issue 21, part B: telemetry, numeric estimation, consistency, shuffle, distributed ---
from dpkit.local.consistency import consistent, subset_sum  # noqa: E402
from dpkit.local.distributed import DistributedDiscreteGaussian  # noqa: E402
from dpkit.local.numeric import (  # noqa: E402
    Duchi,
    Hybrid,
    NumericMechanism,
    Piecewise,
    SampledMean,
)
from dpkit.local.shuffle import shuffle_closed_form, shuffle_numerical, shuffled  # noqa: E402
from dpkit.local.telemetry import DBitFlip, OneBitMean  # noqa: E402

__all__ += ["OneBitMean", "DBitFlip", "NumericMechanism", "Duchi", "Piecewise", "Hybrid",
            "SampledMean", "consistent", "subset_sum", "shuffled", "shuffle_closed_form",
            "shuffle_numerical", "DistributedDiscreteGaussian"]

# --- issue 37: secure aggregation ---
from dpkit.local.secagg import ProtocolAbortError, secure_sum  # noqa: E402

__all__ += ["secure_sum", "ProtocolAbortError"]
