"""Query release and synthetic data over declared finite domains.

- :mod:`~dpkit.release.synthetic.domain` — declared domains and codecs.
- :mod:`~dpkit.release.synthetic.marginals` — marginal workloads, measurement, consistency;
  :mod:`~dpkit.release.synthetic.fourier` (Barak et al.'s consistent marginals).
- :mod:`~dpkit.release.synthetic.mwem`, :mod:`~dpkit.release.synthetic.iterative` (MWEM and
  the iterative construction), :mod:`~dpkit.release.synthetic.pmw` and
  :mod:`~dpkit.release.synthetic.median` (online query release);
  :mod:`~dpkit.release.synthetic.smalldb` (SmallDB, the net mechanism: one m-record
  database for a declared query class, by the exponential mechanism);
  :mod:`~dpkit.release.synthetic.boosting` — boosting for queries, refused, with the numbers.
- :mod:`~dpkit.release.synthetic.mst`, :mod:`~dpkit.release.synthetic.aim` with
  :mod:`~dpkit.release.synthetic.pgm_sample` and :func:`~dpkit.release.synthetic.synthesize.
  synthesize` — synthetic tables.

All are primitives on already-bounded records (one row, one individual); a curator's
per-person table is bounded and charged by ``query.publish.synthetic`` /
``query.publish.marginals`` (:mod:`dpkit.release.session_tables`).
"""
