"""dpkit.apps.network: McSherry & Mahajan's analyses as Session queries (accounting and
plan-time refusals; the mechanisms are the session's, audited elsewhere)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import dpkit as dp
from dpkit.apps.network import (
    connections_per_host,
    frequent_payloads,
    packet_size_distribution,
    port_distribution,
)
from dpkit.errors import ColumnError, DomainError
from dpkit.mechanisms.partition_selection import truncated_geometric_probabilities


def _session(budget: dp.ApproxDP | None = None, dst=lambda src: src % 7) -> dp.Session:
    n = 3000
    src = np.arange(n) % 500
    table = pl.DataFrame({"src": src, "dst": dst(src), "dport": np.where(src % 2, 443, 80),
                          "packets": np.full(n, 4), "bytes": np.full(n, 4 * 600),
                          "payload": np.where(src % 3 == 0, "WORM", None)})
    unit = dp.PrivacyUnit.by("src", 8, max_groups=4, max_rows_per_group=4)
    return dp.Session(table, unit, budget or dp.ApproxDP(10, 1e-5))


def test_each_analysis_spends_its_declared_budget() -> None:
    s = _session()
    sizes = packet_size_distribution(s, [0, 500, 1000, 1500], epsilon=1)
    assert s.spent.epsilon == 1 and sizes.height == 3
    ports = port_distribution(s, [80, 443, 22], epsilon=1)
    assert s.spent.epsilon == 2 and set(ports["dport"].to_list()) == {80, 443, 22}
    hosts = connections_per_host(s, selection=dp.PartitionSelection(1, 1e-6), epsilon=1)
    # each of the 7 destinations has ~71 units: released with probability π(71) ≈ 0.994
    # each, so only "a subset of them" is guaranteed (asserting all 7 failed ~4% of runs)
    assert s.spent.epsilon == 4 and set(hosts["dst"].to_list()) <= set(range(7))
    worms = frequent_payloads(s, selection=dp.PartitionSelection(1, 1e-6), epsilon=1)
    assert s.spent.epsilon == 6 and worms["payload"].to_list() == ["WORM"]  # π(167) = 1
    assert {"sources", "destinations", "destinations_ci_low"} <= set(worms.columns)


def test_the_released_keys_asserted_above_are_the_guaranteed_ones() -> None:
    """The probabilities behind the assertions above, exactly (truncated geometric at ε/G,
    δ/G, G = 4): WORM's 167 units are past the point where π reaches 1, so it is always
    released; a destination's ~71 units are not, so its release is only likely."""
    probs = truncated_geometric_probabilities(Fraction(1, 4), Fraction(1, 4 * 10**6))
    assert len(probs) - 1 <= 167 and probs[min(167, len(probs) - 1)] == 1
    assert probs[72] < 1 and (1 - probs[72]) * 7 > Fraction(1, 10**6)


def test_frequent_payloads_count_distinct_sources_and_destinations() -> None:
    """ε = 10^6 for the counts (noise 0 but with probability < 10^-100000): the released
    counts are the exact ones on the bounded rows — 167 infected hosts, 7 destinations —
    planned with the row count's sensitivity for destinations (Δ₁ = min(M, G·R) = 8) and
    the unit count's for sources (min(G, M) = 4)."""
    s = _session(budget=dp.ApproxDP(10**7, 1e-5))
    selection = dp.PartitionSelection(1, 1e-6)
    worms = frequent_payloads(s, selection=selection, epsilon=10**6)
    assert worms.select("payload", "sources", "destinations").rows() == [("WORM", 167, 7)]
    q = s.query().group_by("payload", selection=selection).agg(
        dp.count_distinct(name="sources"), dp.count_distinct("dst", name="destinations"))
    assert [p.sensitivity for p in q.plan(epsilon=1)[1]] == [4, 8]


def test_a_float_destination_column_is_refused_before_any_debit() -> None:
    s = _session(dst=lambda src: src / 7)
    with pytest.raises(ColumnError, match="dst"):
        frequent_payloads(s, selection=dp.PartitionSelection(1, 1e-6), epsilon=1)
    assert s.spent.epsilon == 0


def test_bad_input_is_refused_before_any_debit() -> None:
    s = _session()
    with pytest.raises(DomainError):
        port_distribution(s, [70_000], epsilon=1)
    with pytest.raises(DomainError):
        port_distribution(s, [], epsilon=1)
    with pytest.raises(DomainError):
        packet_size_distribution("not a session", [0, 1], epsilon=1)  # type: ignore[arg-type]
    rows = dp.Session(pl.DataFrame({"src": [1]}), dp.PrivacyUnit.rows(), dp.ApproxDP(1, 1e-6))
    with pytest.raises(DomainError):
        port_distribution(rows, [80], epsilon=1)
    assert s.spent.epsilon == 0
