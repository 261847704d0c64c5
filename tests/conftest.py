import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_shared_dry_runs():
    """Each test starts without the process-wide memo of passed dry runs
    (dpkit.frame.session.SHARED_DRY_RUNS), so a test that breaks the engine on purpose
    meets its own dry run, not one remembered from an earlier test."""
    from dpkit.frame.session import SHARED_DRY_RUNS

    SHARED_DRY_RUNS.clear()
    yield


@pytest.fixture(scope="module")
def postgres_server():
    """A throwaway PostgreSQL server for the module (``tests/pg.py``); its SQLAlchemy URL.
    Skips when none can be started here (CI installs PostgreSQL)."""
    import pg

    reason = pg.unavailable()
    if reason:
        pytest.skip(f"no PostgreSQL server can be started here: {reason}")
    with pg.server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path, monkeypatch):
    """A fresh ledger location: a SQLite file, or a new database on the module's throwaway
    PostgreSQL server (its key file under ``$DPKIT_HOME``, here the test's folder)."""
    monkeypatch.setenv("DPKIT_HOME", str(tmp_path))
    monkeypatch.delenv("DPKIT_LEDGER_MAC_KEY", raising=False)
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    import pg

    return pg.fresh_database(request.getfixturevalue("postgres_server"),
                             f"l{abs(hash(request.node.name)) % 10**9}")
