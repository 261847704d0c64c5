"""The main job runs end to end, twice, from a fresh process (as in CI)."""

import os
import subprocess
import sys
from pathlib import Path


def run(args, home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DPKIT_HOME=str(home), COLUMNS="120")
    return subprocess.run([sys.executable, "-m", "dpkit", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_demo_runs_twice_and_ledger_shows_both(tmp_path):
    for _ in range(2):
        out = run(["demo"], tmp_path)
        assert out.returncode == 0, out.stderr
        assert "Spent: ε = 1 (exact)" in out.stdout
        assert "Remaining: ε = 0" in out.stdout
        assert "HS-grad" in out.stdout and "Median hours per week" in out.stdout
    assert (tmp_path / "demo-ledger.sqlite").exists()
    shown = run(["ledger", "show"], tmp_path)
    assert shown.returncode == 0 and shown.stdout.count("adult-demo-") == 2
    reset = run(["demo", "--reset-ledger"], tmp_path)
    assert reset.returncode == 0 and "1 demo run(s) recorded" in reset.stdout
