"""dpkit.stream — continual release: private running counts over time.

Contents
--------
Stream               the incremental counter: charged once, ``feed(x)`` one step at a time
release_prefix_sums  the batch form over a whole series
make_counter         a counter plan by mechanism name (``MECHANISMS``)
base                 privacy unit, budget, calibration, exact variances, intervals
counters             the baselines: noise per increment, noise per running total
tree                 the binary mechanism (p-sums) and Honaker's estimator
smooth               the smooth binary mechanism (Andersson & Pagh 2023)
factorization        the square-root factorisation counter (exact discrete Gaussian)
hybrid               the hybrid mechanism for an unknown horizon (Chan, Shi & Song 2011)
grid                 real-valued step totals on a grid of 2^k (``grid_bits=``)
frames               ContinualRelease: histograms, integer and real-valued sums, exact sliding
                     windows, frames, w enforced, save/restore with rollback protection
session              ``query.continual(…)`` on a Session (a query namespace)
audit                the audit cases of the tree and the factorisation (registry)
"""

from dpkit.stream import audit as audit  # registers the counters' audit cases
from dpkit.stream.base import Budget, Counter, Unit
from dpkit.stream.counters import Increments, RunningTotals
from dpkit.stream.factorization import SqrtFactorization
from dpkit.stream.frames import ContinualRelease, ContinualStep, DatasetRetiredError
from dpkit.stream.hybrid import Hybrid
from dpkit.stream.session import ContinualNamespace, ContinualQuery
from dpkit.stream.smooth import SmoothBinary
from dpkit.stream.stream import (
    MECHANISMS,
    HorizonExceededError,
    PrefixSums,
    StepRelease,
    Stream,
    clamp,
    isotonic,
    make_counter,
    release_prefix_sums,
)
from dpkit.stream.tree import BinaryTree, HonakerTree, psums

__all__ = ["Stream", "StepRelease", "PrefixSums", "release_prefix_sums", "make_counter",
           "MECHANISMS", "HorizonExceededError", "clamp", "isotonic", "Budget", "Counter",
           "Unit", "Increments", "RunningTotals", "BinaryTree", "HonakerTree", "SmoothBinary",
           "SqrtFactorization", "Hybrid", "psums", "ContinualRelease", "ContinualStep",
           "ContinualQuery", "ContinualNamespace", "DatasetRetiredError"]
