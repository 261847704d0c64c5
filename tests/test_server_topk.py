"""Top-k over an unknown domain through the query server: a search log served with a
user-level privacy unit (each user counts once per query, in at most d queries), released
with ``group_by(selection=...)`` — partition selection or Durfee & Rogers' limited-domain
top-k — with user counts and click totals, over HTTP and through ``dp.Client``. Each
release debits exactly its loss; a malformed selection is 422 and debits nothing.

False-positive rate: the only random assertion (the one-user query "secret" is never
released) fails with probability ≤ δ = 1e-7 per release."""

import warnings
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import dpkit as dp

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("yaml")

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient  # noqa: E402

from served import serve_one  # noqa: E402

DELTA = "1/10000000"
POPULAR = ["weather", "news", "maps"]


def search_log() -> pl.DataFrame:
    """3,000 users: each searched one of three popular queries (several times, clicking
    0–2 times each), the first 300 also "jobs", and one user alone "secret"."""
    users = np.arange(3000)
    rows = pl.DataFrame({"user": np.repeat(users, 2),
                         "query": np.repeat(np.array(POPULAR)[users % 3], 2),
                         "clicks": np.tile([0, 1], 3000) + np.repeat(users % 2, 2)})
    jobs = pl.DataFrame({"user": users[:300], "query": ["jobs"] * 300,
                         "clicks": np.ones(300, dtype=np.int64)})
    secret = pl.DataFrame({"user": [0], "query": ["secret"], "clicks": [5]})
    return pl.concat([rows, jobs, secret], how="vertical_relaxed")


@pytest.fixture
def server(tmp_path):
    app, ledger, token = serve_one(
        tmp_path, search_log(), {"column": "user", "max_groups": 3, "max_rows_per_group": 2},
        {"measure": "approx", "epsilon": 10, "delta": "1/100000"}, name="log")
    http = TestClient(app)
    yield {"app": app, "ledger": ledger, "token": token, "http": http}
    http.close()


def body(selection, aggs=None):
    return {"steps": [], "group_by": {"columns": ["query"], "selection": selection},
            "aggs": aggs or [{"agg": "count_distinct_units"}],
            "budget": {"epsilon": 1, "delta": DELTA}}


def post(server, path, payload):
    return server["http"].post(path, json=payload,
                               headers={"Authorization": f"Bearer {server['token']}"})


def spent(server):
    return server["ledger"].spent("log")


@pytest.mark.parametrize("selection", [
    {"epsilon": 1, "delta": DELTA},
    {"epsilon": 2, "delta": DELTA, "method": "limited_domain", "k": 2, "k_bar": 4},
])
def test_http_release_of_an_unknown_domain_debits_its_loss(server, selection):
    aggs = [{"agg": "sum", "column": "clicks", "bounds": [0, 2]}]
    r = post(server, "/v1/datasets/log/release", body(selection, [{"agg": "count"}] + aggs))
    assert r.status_code == 200, r.text
    loss = r.json()["loss"]["exact"]  # the decimals beside it are for people (issue 33)
    assert spent(server) == dp.ApproxDP(Fraction(loss["epsilon"]), Fraction(loss["delta"]))
    assert Fraction(loss["epsilon"]) >= Fraction(selection["epsilon"])
    released = [row["query"] for row in r.json()["records"]]
    assert "secret" not in released and set(released) <= set(POPULAR) | {"jobs"}
    if selection.get("method") == "limited_domain":
        assert len(released) <= 2 and set(released) <= set(POPULAR)


@pytest.mark.parametrize("selection", [
    {"epsilon": 1, "delta": DELTA, "method": "limited_domain"},  # no k
    {"epsilon": 1, "delta": DELTA, "method": "limited_domain", "k": "2"},
    {"epsilon": 1, "delta": DELTA, "method": "limited_domain", "k": 2, "k_bar": 1},
    {"epsilon": 1, "delta": DELTA, "method": "limited_domain", "k": 2, "depth": 3},
    {"epsilon": 1, "delta": DELTA, "k": 2},  # k with a threshold method
    {"epsilon": 1, "delta": DELTA, "method": "limited_domain", "k": 100_000},
    # issue 30, attack 6: k·k̄ over the per-request limit (the cost was set by the data)
    {"epsilon": 1, "delta": DELTA, "method": "limited_domain", "k": 1000, "k_bar": 100_000},
])
def test_malformed_selections_are_422_and_debit_nothing(server, selection):
    before = spent(server)
    r = post(server, "/v1/datasets/log/release", body(selection, [{"agg": "count"}]))
    assert r.status_code == 422, r.text
    assert spent(server) == before


def test_client_top_k_matches_the_session_plan(server):
    client = dp.Client(app=server["app"], token=server["token"])
    query = (client.query("log")
             .group_by("query", selection=dp.TopKSelection(2, 2, Fraction(1, 10**7)))
             .agg(dp.count(), dp.sum("clicks", (0, 2))))
    session = dp.Session(search_log(), dp.PrivacyUnit.by("user", max_groups=3,
                                                         max_rows_per_group=2),
                         dp.ApproxDP(10, 1e-5))
    local = (session.query()
             .group_by("query", selection=dp.TopKSelection(2, 2, Fraction(1, 10**7)))
             .agg(dp.count(), dp.sum("clicks", (0, 2))))
    assert query.explain(epsilon=1).splitlines()[1:] == local.explain(epsilon=1).splitlines()[1:]
    out = query.release(epsilon=1)
    # k̄ = 8 (default 4k): the sentinel sits near 1 + ln(3·10^7) ≈ 18 users, the
    # popular queries have 1,000 each: two of them come out (else w.p. < 1e-300)
    assert out.height == 2 and set(out["query"].to_list()) <= set(POPULAR)
    assert spent(server) == dp.ApproxDP(3, Fraction(1, 10**7))
    client.close()
