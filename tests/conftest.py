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
