"""Network trace analysis in interface mode (McSherry & Mahajan, SIGCOMM 2010, on PINQ).

Each analysis is an ordinary :class:`~dpkit.frame.Session` query over a flow table, so it is
charged through the session's accountant and computed by the session's engine; nothing
here depends on where the flows come from (a pcap turned into flows by a maintained
library such as ``dpkt`` or ``scapy``, a NetFlow/IPFIX CSV, or ``bench/network.py``'s
generator). The table has one row per flow with (at least) the columns

    src, dst      host identifiers (integers or strings, e.g. an IPv4 address as either)
    dport         destination port (integer)
    packets       packets in the flow (integer ≥ 1)
    bytes         bytes in the flow (integer ≥ 0)
    payload       a payload signature (string; e.g. a hash of the first bytes), may be null

and the session's privacy unit is the source host: ``PrivacyUnit.by("src", max_rows,
max_groups=..., max_rows_per_group=...)`` — a host's flows are bounded and protected
together (McSherry & Mahajan protect packets or hosts; host level is the stronger).

Analyses (their §4–§5), each one release:

- :func:`packet_size_distribution` — histogram of mean packet size per flow (bytes/packets)
  over public bins;
- :func:`port_distribution` — flows per destination port over a public port list;
- :func:`connections_per_host` — distinct sources per destination, over destinations found
  by partition selection (the domain of hosts is not public);
- :func:`frequent_payloads` — worm fingerprinting: payload signatures found by partition
  selection, with their noisy numbers of distinct sources and of distinct destinations
  (a worm's signature is sent by many sources to many destinations).

What the query language cannot express (the findings of this example):

- **stepping-stone detection** needs a join of the private flow table with itself
  (flows into a host matched with flows out of it within a time window); dpkit's ``join``
  takes public tables, or private ones on the privacy unit column only (a unit's rows with
  its own), while flows *into* h are other units' rows: a join across units with its
  stability (PINQ's Join, which groups both sides by key first) is not in the language;
- per-flow **time series** (packet inter-arrival CDFs over a flow's packets) need
  per-unit windowed aggregation before the release (a flow-level transformation that the
  row-wise language has no window functions for).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from dpkit.core import numbers
from dpkit.core.numbers import Number
from dpkit.errors import DomainError
from dpkit.frame import Session, count, count_distinct, histogram
from dpkit.mechanisms.partition_selection import PartitionSelection

__all__ = ["packet_size_distribution", "port_distribution", "connections_per_host",
           "frequent_payloads", "FLOW_COLUMNS"]

FLOW_COLUMNS = ("src", "dst", "dport", "packets", "bytes", "payload")
MAX_PORT = 65_535


def _session(session: Any) -> Session:
    if not isinstance(session, Session) or session.privacy_unit.column is None:
        raise DomainError("pass a dpkit Session over a flow table with "
                          "PrivacyUnit.by('src', ...)")
    return session


def packet_size_distribution(session: Session, bins: Sequence[Any], *, epsilon: Number
                             ) -> pl.DataFrame:
    """Histogram of flows by mean packet size (bytes / packets) over the public bin edges.

    Privacy: the session's histogram (one count per bin; a host changes at most its
    ``max_rows`` flows), charged ``epsilon``. Flows with packets ≤ 0 fall in no bin.
    """
    query = _session(session).query().with_columns(
        size=pl.when(pl.col("packets") > 0).then(pl.col("bytes") / pl.col("packets"))
        .otherwise(None))
    return query.agg(histogram("size", list(bins))).release(epsilon=epsilon)


def port_distribution(session: Session, ports: Sequence[int], *, epsilon: Number
                      ) -> pl.DataFrame:
    """Flows per destination port, for the public list ``ports`` (every listed port appears,
    with noise; flows to other ports are dropped). Charged ``epsilon``."""
    keys = [numbers.integer(p, "port", minimum=0) for p in ports]
    if not keys or max(keys) > MAX_PORT:
        raise DomainError("ports must be a non-empty list of integers in [0, 65535]")
    query = _session(session).query().group_by("dport", keys=keys).agg(count())
    return query.release(epsilon=epsilon).sort("count", descending=True)


def connections_per_host(session: Session, *, selection: PartitionSelection, epsilon: Number
                         ) -> pl.DataFrame:
    """Distinct source hosts per destination, over the destinations that pass partition
    selection (``selection``'s (ε, δ)) — plus ``epsilon`` for the counts. Needs an (ε, δ)
    session."""
    query = _session(session).query().group_by("dst", selection=selection).agg(
        count_distinct(name="sources"))
    return query.release(epsilon=epsilon).sort("sources", descending=True)


def frequent_payloads(session: Session, *, selection: PartitionSelection, epsilon: Number
                      ) -> pl.DataFrame:
    """Worm fingerprinting (McSherry & Mahajan §5.3, after Singh et al. 2004): payload
    signatures found by partition selection over the unknown set of signatures, each with
    its noisy number of distinct sources and of distinct destinations.

    Parameters
    ----------
    session : Session
        Over a flow table, privacy unit ``PrivacyUnit.by("src", M, max_groups=G,
        max_rows_per_group=R)``; an (ε, δ) budget (partition selection spends δ).
    selection : PartitionSelection
        Its (ε, δ) choose which signatures are released (the domain is not public).
    epsilon : number
        ε (nats) for the two counts, split evenly between them.

    Returns
    -------
    polars.DataFrame
        One row per released signature: ``payload``, ``sources`` and ``destinations`` with
        their ``_ci_low``/``_ci_high`` noise intervals, by decreasing ``sources``. Null
        payloads are dropped; null destinations are not counted.

    Raises
    ------
    DomainError, MeasureError, ColumnError
        Before any debit: not a host-level session, a pure-DP session, ``dst`` not an
        integer or string column.

    Notes
    -----
    Privacy: selection's (ε_s, δ_s) plus ``epsilon``, by sequential composition. A host
    adds 1 to the distinct-source count of at most min(G, M) signatures (Δ₁ = min(G, M));
    its ≤ R flows with a signature add at most R destinations to that signature's count,
    ≤ M flows in all (Δ₁ = min(M, G·R); :func:`dpkit.frame.count_distinct`). So the
    destination counts carry more noise than the source counts unless R is small: a worm
    sends each flow to a new host, so R = 1–2 flows per host and signature keep its
    destination count while bounding the noise.
    """
    query = (_session(session).query().filter(pl.col("payload").is_not_null())
             .group_by("payload", selection=selection)
             .agg(count_distinct(name="sources"), count_distinct("dst", name="destinations")))
    return query.release(epsilon=epsilon).sort("sources", descending=True)
