"""Several hosts, one PostgreSQL ledger (issue 35, item 3): two ``dpkit serve`` processes on
different ports stand in for two hosts. Each gets the ledger's MAC key only through
``DPKIT_LEDGER_MAC_KEY`` (its ``DPKIT_HOME`` is empty), as a separate machine would. The
ledger is the only state they share: a release through one host is listed by the other, a
rotated token is refused by both on their next request (their caches are keyed by the chain
head), and analysts racing through both hosts get exactly the dataset's cap accepted, with
``verify`` clean afterwards."""

from __future__ import annotations

import secrets
import threading
from fractions import Fraction

import pytest

import dpkit as dp
from dpkit.ledger import Ledger

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from processes import ServerProcess  # noqa: E402

STEP = Fraction(1, 25)  # ε per release; the cap is ε = 1: exactly 25 releases fit
CLIENTS = 8  # racing threads, half on each host
BODY = {"group_by": {"columns": ["sex"], "keys": {"sex": ["Female", "Male"]}},
        "aggs": [{"agg": "count"}], "budget": {"epsilon": str(STEP)}}


@pytest.fixture
def hosts(postgres_server, tmp_path, monkeypatch):
    """Two servers (one worker each) on one fresh PostgreSQL ledger with dataset ``adult``
    (pure ε = 1) and analysts alice and bob (granted the whole cap); yields the ledger,
    the tokens and the two servers."""
    import pg

    url = pg.fresh_database(postgres_server, "multihost")
    monkeypatch.setenv("DPKIT_LEDGER_MAC_KEY", secrets.token_hex(32))
    monkeypatch.setenv("DPKIT_HOME", str(tmp_path / "empty-home"))  # no key file to fall on
    csv = tmp_path / "adult.csv"  # the shared data store
    dp.datasets.load_adult("train").head(2000).write_csv(csv)
    ledger = Ledger(url)
    ledger.register("adult", dp.PureDP(1))
    tokens = {name: ledger.add_analyst(name) for name in ("alice", "bob")}
    for name in tokens:
        ledger.grant(name, "adult")
    servers = []
    for host in ("a", "b"):
        (tmp_path / host).mkdir()
        config = tmp_path / host / "server.yaml"
        config.write_text(f"ledger: {url}\ndatasets:\n  - name: adult\n"
                          f"    source: {{kind: csv, path: {csv}}}\n"
                          "    budget: {measure: pure, epsilon: 1}\n")
        servers.append(ServerProcess(config, cwd=tmp_path / host))
    try:
        for server in servers:
            server.wait_ready()
        yield {"ledger": ledger, "tokens": tokens, "servers": servers}
    finally:
        for server in servers:
            server.stop()
        ledger.dispose()


def _client(server: ServerProcess, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=120,
                        headers={"Authorization": f"Bearer {token}"})


def _race(servers: list[ServerProcess], tokens: list[str]) -> list[int]:
    """CLIENTS threads, alternating hosts and analysts, each releasing until refused; the
    statuses of every request."""
    statuses: list[int] = []
    lock = threading.Lock()

    def fire(server: ServerProcess, token: str) -> None:
        with _client(server, token) as http:
            while True:
                status = http.post("/v1/datasets/adult/release", json=BODY).status_code
                with lock:
                    statuses.append(status)
                if status != 200:
                    return

    threads = [threading.Thread(target=fire, args=(servers[i % 2], tokens[i // 2 % 2]))
               for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


@pytest.mark.slow
def test_two_hosts_share_one_ledger(hosts):
    ledger, tokens = hosts["ledger"], hosts["tokens"]
    a, b = hosts["servers"]
    with _client(a, tokens["alice"]) as on_a, _client(b, tokens["alice"]) as on_b:
        # a release through host a is listed by host b
        r = on_a.post("/v1/datasets/adult/release", json=BODY)
        assert r.status_code == 200, r.text
        rid = r.json()["release_id"]
        assert rid in [row["id"] for row in on_b.get("/v1/releases").json()]
        assert on_b.get(f"/v1/releases/{rid}").status_code == 200
        # both hosts' caches hold alice's token; rotating it moves the chain head
        assert on_b.post("/v1/datasets/adult/release", json=BODY).status_code == 200
        new = Ledger(ledger.url).rotate_token("alice")
        for old in (on_b, on_a):
            refused = old.post("/v1/datasets/adult/release", json=BODY)
            assert refused.status_code == 401, refused.text
    with _client(b, new) as on_b:
        assert on_b.post("/v1/datasets/adult/release", json=BODY).status_code == 200
    assert ledger.count() == 3
    # the race: both hosts, both analysts, until the cap refuses everyone
    statuses = _race([a, b], [new, tokens["bob"]])
    assert set(statuses) <= {200, 409}, statuses
    assert statuses.count(200) == 25 - 3 and statuses.count(409) == CLIENTS
    assert ledger.count() == 25
    assert ledger.spent("adult") == dp.PureDP(1) == ledger.cap("adult")
    assert all(r["status"] == "released" for r in ledger.releases("adult"))
    assert ledger.verify() == []
    for server in (a, b):
        assert not any('"level": "ERROR"' in line for line in server.stderr)



def test_a_debit_holds_the_chain_head_for_two_round_trips(postgres_server, monkeypatch):
    """Issue 35, 3: the lock and every read a debit needs (the burn-rate buckets of this
    minute and the next among them) go in one round trip (a pipeline, the advisory lock
    first), then the writes and the commit in one more: 2 round trips hold the head (9
    before). Counted at psycopg: a statement outside a
    pipeline, a pipeline, a commit. Issue 35, 2: the commit does not wait for the disk; the
    barrier that does comes after the head is free."""
    import pg
    import psycopg
    from sqlalchemy import event

    ledger = Ledger(pg.fresh_database(postgres_server, "roundtrips"))
    ledger.register("d", dp.PureDP(1))
    ledger.add_analyst("ann")
    ledger.grant("ann", "d")
    ledger.debit("d", dp.PureDP(Fraction(1, 100)), "q", analyst="ann", idempotency_key="k0")
    trips: list[str] = []  # a round trip each, but "queued:" statements (in a pipeline)
    execute, pipeline = psycopg.Cursor.execute, psycopg.Connection.pipeline

    def counted_execute(self, query, *args, **kwargs):
        queued = self.connection._pipeline is not None
        trips.append(("queued: " if queued else "") + str(query))
        return execute(self, query, *args, **kwargs)

    def counted_pipeline(self):
        trips.append("pipeline")
        return pipeline(self)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Connection, "pipeline", counted_pipeline)
    def counted_commit(conn) -> None:  # a COMMIT inside a pipeline goes with its sync
        queued = conn.connection.dbapi_connection._pipeline is not None
        trips.append(("queued: " if queued else "") + "COMMIT")

    event.listen(ledger.engine, "commit", counted_commit)
    ledger.debit("d", dp.PureDP(Fraction(1, 100)), "q", analyst="ann", idempotency_key="k1")
    monkeypatch.undo()
    lock = next(i for i, t in enumerate(trips) if "pg_advisory_xact_lock" in t)
    if trips[lock].startswith("queued: "):  # the lock's round trip is its pipeline's
        lock = max(i for i in range(lock) if trips[i] == "pipeline")
    commit = next(i for i in range(lock, len(trips)) if trips[i].endswith("COMMIT"))
    held = [t for t in trips[lock:commit + 1] if not t.startswith("queued: ")]
    assert len(held) <= 2, held
    # then the durability barrier (group commit), outside the lock: one pipeline, a commit
    after = [t for t in trips[commit + 1:] if not t.startswith("queued: ")]
    assert after == ["pipeline", "COMMIT"], after
    assert ledger.spent("d") == dp.PureDP(Fraction(2, 100)) and ledger.verify() == []
    ledger.dispose()
