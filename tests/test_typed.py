"""dpkit ships its types (PEP 561, issue 31 item 7): ``py.typed`` is in the package and in
the built wheel, so users' type checkers read dpkit's annotations instead of skipping it."""

from __future__ import annotations

import tomllib
from pathlib import Path

import dpkit

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_is_marked_typed():
    assert (Path(dpkit.__file__).parent / "py.typed").is_file()


def test_the_marker_is_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = config["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data.get("dpkit", [])
