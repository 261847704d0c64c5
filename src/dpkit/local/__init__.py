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

Out-of-domain values are replaced by the oracle's ``fallback`` (default 0) before
randomising (see :func:`dpkit.local.base.to_index`); ε ≤ 0 and k < 2 raise
:class:`~dpkit.errors.DomainError`.
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
