"""dpkit.mechanisms — constructors ``make_*`` returning :class:`~dpkit.core.Measurement`.

Contents
--------
make_noise                the one calibrated-noise entry: sensitivity (L1/L2) + budget (ε, ρ,
                          (ε, δ)) + output (integer/grid) → a cached, map-checked measurement
make_selection            the same for the exponential mechanism's family (temperature)
frontend                  the front-end kit: AccountantLike, charge (the one debit door
                          outside the accountants), noisy / select (draw through the
                          entry, get the NoiseRow), noise_row / selection_row (plan rows)
CalibratedNoise           the measurement they return, with its scale, grid and loss
grid_exponent             the one grid rule: k with 2^k ≤ scale · 2^-GRID_BITS (also the
                          per-record grid of exact sums in dpkit.frame)
make_laplace              Laplace on floats, released on a 2^k grid (pure DP)
make_discrete_laplace     discrete Laplace / geometric mechanism on integers (pure DP)
make_gaussian             Gaussian on floats, released on a 2^k grid (zCDP)
make_discrete_gaussian    discrete Gaussian on integers (zCDP)
make_approx_gaussian      Gaussian on floats with the analytic or classic (ε, δ) map
make_geometric            geometric mechanism (discrete Laplace at scale Δ/ε)
make_exponential          exponential mechanism / Report Noisy Max, exact (pure DP)
make_exponential_many     one exponential-mechanism draw per score vector (disjoint parts)
make_permute_and_flip     permute-and-flip selection, exact (pure DP)
make_report_noisy_max     Report Noisy Max with discrete Laplace noise (pure DP)
make_top_k                top-k by peeling the exponential mechanism (pure DP)
TopKSelection             top-k keys over an unknown domain (limited domain, Durfee &
                          Rogers 2019), for group_by(selection=...) ((ε, δ))
make_randomized_response  k-ary randomized response, exact (pure DP, local)
make_binary_randomized_response   Warner's randomized response on bits
SparseVector              interactive AboveThreshold / NumericSparse (Lyu, Su & Li 2017)
make_vector_laplace       vector mechanism (CMS 2011), exact on a lattice (pure DP, L2)
make_gaussian_mahalanobis Gaussian N(0, c²Σ) for a Mahalanobis sensitivity (Dwork & Roth
                          App. A.1), exact on the lattice 2^k·Lℤ^d (zCDP)
make_knorm                the K-norm mechanism for d ≤ 4 linear queries over a histogram
                          (Hardt & Talwar 2010), exact on a lattice (pure DP)
make_analyze_gauss        Analyze Gauss: XᵀX + symmetric grid Gaussian noise (zCDP); no
                          Wishart mechanism — the published one is not DP (see covariance)
make_staircase            staircase mechanism (Geng & Viswanath 2014), exact on a grid
make_ptr_median           propose-test-release for the median (Dwork & Lei 2009)
make_sample_and_aggregate sample-and-aggregate any function (NRS07), DP mean of blocks
make_smooth_median        median with β-smooth sensitivity noise (NRS07), (ε, δ)
make_smooth_trimmed_mean  trimmed mean with β-smooth sensitivity noise, (ε, δ)
representable_scale       round a scale up to what the exact samplers take
registry                  every public make_* registered with its audit cases (the audit
                          battery reads it: dpkit.audit.CASES)
"""

# every module with a registered constructor is imported here, so the registry is complete
# whenever dpkit.mechanisms is (the audit battery reads it)
from dpkit.mechanisms import limited_domain as limited_domain
from dpkit.mechanisms import partition_selection as partition_selection
from dpkit.mechanisms import registry as registry
from dpkit.mechanisms import tree_quantile as tree_quantile
from dpkit.mechanisms._common import representable_scale

# the one calibrated-noise entry: public names, kept out of __all__ until the numpy-type
# sweep of tests/test_numbers_types.py (every make_* in __all__) covers them
from dpkit.mechanisms.calibrated import CalibratedNoise as CalibratedNoise
from dpkit.mechanisms.calibrated import grid_exponent as grid_exponent
from dpkit.mechanisms.calibrated import make_noise as make_noise
from dpkit.mechanisms.calibrated import make_selection as make_selection
from dpkit.mechanisms.covariance import make_analyze_gauss
from dpkit.mechanisms.exponential import (
    make_exponential,
    sample_exponential,
    sample_exponential_many,
)
from dpkit.mechanisms.exponential import make_exponential_many as make_exponential_many
from dpkit.mechanisms.frontend import AccountantLike as AccountantLike
from dpkit.mechanisms.frontend import charge as charge
from dpkit.mechanisms.frontend import noisy as noisy
from dpkit.mechanisms.frontend import select as select
from dpkit.mechanisms.gaussian import (
    make_approx_gaussian,
    make_discrete_gaussian,
    make_gaussian,
)
from dpkit.mechanisms.knorm import make_knorm
from dpkit.mechanisms.laplace import make_discrete_laplace, make_geometric, make_laplace
from dpkit.mechanisms.mahalanobis import make_gaussian_mahalanobis
from dpkit.mechanisms.randomized_response import (
    make_binary_randomized_response,
    make_randomized_response,
)
from dpkit.mechanisms.robust import make_ptr_median, make_sample_and_aggregate
from dpkit.mechanisms.selection import make_permute_and_flip, make_report_noisy_max, make_top_k
from dpkit.mechanisms.smooth_sensitivity import make_smooth_median, make_smooth_trimmed_mean
from dpkit.mechanisms.sparse_vector import SparseVector
from dpkit.mechanisms.staircase import make_staircase
from dpkit.mechanisms.vector import make_vector_laplace

__all__ = [
    "make_laplace",
    "make_discrete_laplace",
    "make_gaussian",
    "make_discrete_gaussian",
    "make_approx_gaussian",
    "make_exponential",
    "sample_exponential",
    "sample_exponential_many",
    "make_randomized_response",
    "make_binary_randomized_response",
    "make_geometric",
    "make_permute_and_flip",
    "make_top_k",
    "make_report_noisy_max",
    "SparseVector",
    "make_staircase",
    "make_analyze_gauss",
    "make_vector_laplace",
    "make_gaussian_mahalanobis",
    "make_knorm",
    "make_ptr_median",
    "make_sample_and_aggregate",
    "make_smooth_median",
    "make_smooth_trimmed_mean",
    "representable_scale",
]
