"""Range queries and histograms: publish a histogram once, answer any range query from it.

- :mod:`~dpkit.release.ranges.histogram` — :func:`release_histogram`;
  :mod:`~dpkit.release.ranges.by_value` — range counts by value on a released 1-D
  histogram (``out.count(hours=(1750, 2500))``, partial cells apportioned uniformly);
  :mod:`~dpkit.release.ranges.registry` — every algorithm in one table (``ALGORITHMS``);
  :mod:`~dpkit.release.ranges.auto` — ``method="auto"`` (the default): a small share of ε on
  a noisy count, then the algorithm a rule learned leave-one-dataset-out picks.
- algorithms: :mod:`~dpkit.release.ranges.basic` (identity, uniform),
  :mod:`~dpkit.release.ranges.hierarchical` (H_b, HB), :mod:`~dpkit.release.ranges.wavelet`
  (Privelet), :mod:`~dpkit.release.ranges.partition` (DAWA, NoiseFirst, StructureFirst,
  P-HPartition; on 2-D data along the Hilbert curve, :mod:`~dpkit.release.ranges.hilbert`),
  :mod:`~dpkit.release.ranges.grid2d` (quadtree, UG, AG, k-d tree),
  :mod:`~dpkit.release.ranges.matrix` (the matrix mechanism, HDMM's strategies) and
  :mod:`~dpkit.release.ranges.gaussian_mm` (its Gaussian/zCDP form);
  :mod:`~dpkit.release.ranges.switch`, the scale switch to Identity;
  :mod:`~dpkit.release.ranges.strategy_cache`, strategies reused by workload structure.
- :mod:`~dpkit.release.ranges.halfspaces` — halfspace counting queries on a 1-D or 2-D grid,
  answered by the routes above (Laplace, Identity, HB / quadtree, Privelet, PMW).
- :mod:`~dpkit.release.ranges.dpbench` — DPBench's evaluation protocol
  (``dpkit bench histograms``); an evaluation harness, not a release.
"""
