"""Non-interactive release: publish a histogram once, answer any range query from it.

- :mod:`~dpkit.release.workload` — range-count workloads (prefix, all ranges, random 1-D
  ranges and 2-D rectangles) and DPBench's error measures.
- :mod:`~dpkit.release.measure` — exact Laplace measurement of linear queries, strategy
  sensitivity, least squares, the matrix mechanism's expected-error formula.
- :mod:`~dpkit.release.histogram` — :func:`release_histogram`, :func:`make_histogram_release`,
  the algorithm registry.
- :mod:`~dpkit.release.session` — the query namespace ``query.publish``:
  ``Session.query().publish.histogram(column, bins, method, epsilon=…)`` and
  ``….publish.pmw(spec, epsilon=…, alpha=…)`` (registered when this package is imported).
- algorithms: :mod:`~dpkit.release.basic` (identity, uniform),
  :mod:`~dpkit.release.hierarchical` (H_b, HB), :mod:`~dpkit.release.wavelet` (Privelet),
  :mod:`~dpkit.release.partition` (DAWA, NoiseFirst, StructureFirst, P-HPartition; on 2-D
  data along the Hilbert curve, :mod:`~dpkit.release.hilbert`), :mod:`~dpkit.release.grid2d`
  (quadtree, UG, AG, k-d tree), :mod:`~dpkit.release.matrix` (the matrix mechanism with
  HDMM's OPT_0 / OPT_⊗ strategies; with Gaussian noise under ρ-zCDP and an L2-optimised
  strategy, :mod:`~dpkit.release.gaussian_mm`). :mod:`~dpkit.release.switch`: the scale
  switch to Identity for data-dependent algorithms at large N·ε.
- query release and synthetic data: :mod:`~dpkit.release.domain` (declared finite
  domains, codecs), :mod:`~dpkit.release.marginals` (marginal workloads, measurement,
  consistency), :mod:`~dpkit.release.mwem` (MWEM with a factored hypothesis),
  :mod:`~dpkit.release.pmw` (private multiplicative weights, online).
"""

# importing the algorithm modules registers them; importing session registers query.publish
from dpkit.release import (  # noqa: F401
    basic,
    grid2d,
    hierarchical,
    hilbert,
    matrix,
    partition,
    session,
    wavelet,
)
from dpkit.release.histogram import (
    HistogramRelease,
    make_histogram_release,
    methods,
    register,
    release_histogram,
)
from dpkit.release.workload import (
    RangeWorkload,
    all_range,
    identity,
    prefix,
    random_ranges,
    random_rectangles,
    rmse,
    scaled_error,
)

__all__ = ["HistogramRelease", "release_histogram", "make_histogram_release", "methods",
           "register", "RangeWorkload", "prefix", "all_range", "identity", "random_ranges",
           "random_rectangles", "rmse", "scaled_error"]
