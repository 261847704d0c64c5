"""ruff and mypy are clean on src/ (configured in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff"
                                                          ).exists(), reason="ruff missing")
def test_ruff_clean():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "src"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_clean():
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
