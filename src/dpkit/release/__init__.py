"""Non-interactive release: publish once, answer many queries from what was published.

Two families, one sub-package each, on a shared linear-query foundation:

- :mod:`~dpkit.release.workload` (range-count workloads, DPBench's error measures) and
  :mod:`~dpkit.release.measure` (exact measurement of linear queries, strategy sensitivity,
  least squares, the matrix mechanism's expected error): used by both families.
- :mod:`~dpkit.release.linear` — :func:`release_linear_queries`: d ≤ 4 linear queries over a
  histogram by the K-norm mechanism (Hardt & Talwar 2010).
- :mod:`dpkit.release.ranges` — range queries and histograms (:func:`release_histogram` and
  its algorithm registry: Identity, H_b, HB, Privelet, DAWA, the grid and tree methods, the
  matrix mechanism), with DPBench's evaluation protocol in
  :mod:`~dpkit.release.ranges.dpbench`.
- :mod:`dpkit.release.synthetic` — query release and synthetic data over declared domains
  (marginals, MWEM, PMW, the iterative construction, MST, AIM, :func:`synthesize`).
- :mod:`~dpkit.release.session` — the query namespace ``query.publish``
  (``….publish.histogram(column, bins, method, epsilon=…)``, ``….publish.pmw(spec, …)``,
  ``….publish.median(spec, …)``, ``….publish.smalldb(spec, cliques, …)``,
  ``….publish.synthetic(spec, method=…, epsilon=…)``,
  ``….publish.marginals(spec, cliques, epsilon=…)``, ``….publish.histogram_nd(spec, method,
  epsilon=…)`` (1-D to 4-D range histograms), ``….publish.gaussian_mm(column, bins,
  epsilon=…, delta=…)``, ``….publish.iterative(spec, cliques, epsilon=…)``; the last five in
  :mod:`~dpkit.release.session_tables`), registered when this package is imported.

The functions of the two families are primitives on already-bounded data (one row, one
individual) that charge nobody unless given ``accountant=`` (``synthesize``); the session is
where a curator's data is charged: ``query.publish`` bounds each privacy unit's rows in one
pass, maps the unit's row bound into the algorithm's budget or sensitivity and debits the
session once (docs/design.md, "Where a release is charged").
"""

# importing session registers query.publish; the histogram algorithms are the rows of
# dpkit.release.ranges.registry.ALGORITHMS (imported by histogram)
from dpkit.release import session  # noqa: F401
from dpkit.release.linear import release_linear_queries
from dpkit.release.ranges.histogram import (
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

__all__ = ["HistogramRelease", "release_histogram", "release_linear_queries",
           "make_histogram_release", "methods", "register", "RangeWorkload", "prefix",
           "all_range", "identity", "random_ranges", "random_rectangles", "rmse",
           "scaled_error"]
