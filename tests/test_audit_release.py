"""Empirical audits of whole releases (issue 16): a Session release and a server release on
neighbouring tables, each paired with a deliberately broken variant that the audit catches.

:func:`dpkit.audit.audit_release` draws one pool of full releases per table (plan, debit,
data side, noise) and runs on it the histogram test (one vote at β = 2.5e-7) and the
threshold-attack ε lower bound (Clopper–Pearson at confidence 1 − 5e-7), or the lower bound
alone at confidence 1 − 1e-6. A correct release fails the audit with probability at most 1e-6;
each test that asserts a pass says so. A broken release must fail it: its certified lower
bound exceeds the claimed ε. The breaks are gross enough that this holds in effect always
(the outputs on the two tables are almost disjoint), so those tests are not flaky either.

The broken variants are built in the test only, by monkeypatching one seam:

- noise at a quarter of the calibrated scale while every privacy map still claims the full
  one (``samplers.discrete_laplace``);
- declared bounds not enforced (``aggregates._grid_ints`` clamps to ±1e6 instead);
- the pre-fix colliding group keys (finding 1): ``canonical_keys`` passing float keys
  through, so K keys that are one value on an Int64 column release K noised copies of one
  count; the analyst averages them.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import polars as pl
import pytest

import dpkit as dp
from dpkit.audit import audit_release
from dpkit.core import samplers
from dpkit.frame import aggregates
from dpkit.frame import query as query_module

EPSILON = 1
X = pl.DataFrame({"g": [1, 1, 2], "v": [0.25, 0.5, 0.75]})
X_PRIME = pl.concat([X, pl.DataFrame({"g": [1], "v": [50.0]})])  # one more row (v outside)
# releases per table: a Session release takes ~5 ms, a server request ~35 ms
SESSION = {"correct": 800, "quartered": 500, "unenforced": 200}
SERVER = {"correct": 200, "colliding": 200}  # 200: the least the lower bound takes
KEYS = 50  # colliding keys in the broken server variant


def session_release(kind: str):
    """``release(table)``: one full Session release on ``table`` (one session per table,
    with a budget that never runs out), reduced to its noisy value."""
    sessions: dict[int, dp.Session] = {}

    def release(table: pl.DataFrame) -> float:
        session = sessions.setdefault(id(table), dp.Session(
            table, dp.PrivacyUnit.rows(), dp.PureDP(10**9)))
        if kind == "count":
            return float(session.query().count().release(epsilon=EPSILON)["count"][0])
        out = session.query().sum("v", (0, 1)).release(epsilon=EPSILON)
        return float(out["v_sum"][0])

    return release


def quartered_noise(monkeypatch) -> None:
    """Broken: the discrete Laplace sampler draws at a quarter of the scale it is asked for
    (every privacy map still claims the full scale)."""
    real = samplers.discrete_laplace
    monkeypatch.setattr(samplers, "discrete_laplace",
                        lambda scale, size: real(Fraction(scale) / 4, size))


def unenforced_bounds(monkeypatch) -> None:
    """Broken: sums clamp to ±1e6 while their sensitivity comes from the declared bounds."""
    real = aggregates._grid_ints

    def broken(expr, k, lo, hi, **kwargs):  # both forms (narwhals', Polars') are broken
        declared = real(expr, k, lo, hi, **kwargs)
        wide = real(expr, k, -1e6, 1e6, **kwargs)
        return (wide[0], *declared[1:])

    monkeypatch.setattr(aggregates, "_grid_ints", broken)


def test_session_release_passes_audit():
    """A count at ε = 1 on tables one row apart (histogram test on a quarter of the pools,
    the lower bound on the rest). False-positive rate ≤ 1e-6."""
    result = audit_release(session_release("count"), X, X_PRIME, EPSILON,
                           samples=SESSION["correct"])
    assert result.passed, result


@pytest.mark.parametrize(("kind", "break_it", "samples"), [
    ("count", quartered_noise, SESSION["quartered"]),
    ("sum", unenforced_bounds, SESSION["unenforced"])])
def test_broken_session_release_is_caught(kind, break_it, samples, monkeypatch):
    """A quarter of the noise (true ε = 4), or bounds (0, 1) not enforced (the added row
    moves the sum by 50, against noise of scale 1): the audit rejects the ε = 1 claim."""
    break_it(monkeypatch)
    result = audit_release(session_release(kind), X, X_PRIME, EPSILON, samples=samples,
                           histogram_share=0)
    assert not result.passed, result
    assert result.lower_bound.epsilon > EPSILON


# -- the server ------------------------------------------------------------------------------
@pytest.fixture
def server(tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with")
        from fastapi.testclient import TestClient
    from dpkit.server.app import create_app
    from dpkit.server.config import parse_config

    datasets = []
    for name, table in (("x", X), ("x_prime", X_PRIME)):
        table.write_parquet(tmp_path / f"{name}.parquet")
        datasets.append({"name": name, "source": {"kind": "parquet", "path": f"{name}.parquet"},
                         "privacy_unit": "rows", "budget": {"measure": "pure",
                                                            "epsilon": 10**9}})
    app = create_app(parse_config({"ledger": "ledger.sqlite", "datasets": datasets},
                                  base=tmp_path))
    ledger = app.state.dpkit.ledger
    token = ledger.add_analyst("auditor")
    for name in ("x", "x_prime"):
        ledger.grant("auditor", name)
    with TestClient(app) as http:
        yield http, {"Authorization": f"Bearer {token}"}


def server_release(server, keys):
    """``release(name)``: one POST /release of a grouped count on dataset ``name``, reduced to
    the mean of the noisy counts (of group 1's one key, or of its K colliding keys)."""
    http, headers = server
    body = {"group_by": {"columns": ["g"], "keys": keys}, "aggs": [{"agg": "count"}],
            "budget": {"epsilon": EPSILON}}

    def release(name: str) -> float:
        r = http.post(f"/v1/datasets/{name}/release", json=body, headers=headers)
        assert r.status_code == 200, r.text
        counts = [row["count"] for row in r.json()["records"] if int(row["g"]) == 1]
        return sum(counts) / len(counts)

    return release


def test_server_release_passes_audit(server):
    """A grouped count at ε = 1 over HTTP on datasets one row apart (the lower bound only:
    requests are slow, and the histogram test needs large pools to have any power).
    False-positive rate ≤ 1e-6."""
    result = audit_release(server_release(server, [1, 2]), "x", "x_prime", EPSILON,
                           samples=SERVER["correct"], histogram_share=0)
    assert result.passed, result


def test_server_with_colliding_keys_is_caught(server, monkeypatch):
    """Finding 1 as it was before the fix: K = 50 float keys that are all 1 on the Int64
    column; averaging the K copies removes most of the noise (true ε ≈ 50)."""
    monkeypatch.setattr(query_module, "canonical_keys", lambda keys, schema, what="keys": keys)
    keys = [1 + i / 10_000 for i in range(KEYS)]
    result = audit_release(server_release(server, keys), "x", "x_prime", EPSILON,
                           samples=SERVER["colliding"], histogram_share=0)
    assert not result.passed, result
    assert result.lower_bound.epsilon > EPSILON
