"""bench/floor.py (issue 34's floor harness) runs end to end on a few cheap methods and
writes a well-formed table: one row per method, a cell per (held-out dataset, ε), a worst
cell that is the largest ratio, and a status from the allowed set. The numbers themselves are
not asserted (they are noisy and move with the defaults); the harness's own run is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STATUSES = {"ok", "fixed", "guarded", "documented", "open"}
# cheap cases of three packages: a local mean, a Gaussian counter, a graph count
ONLY = "local.Duchi,stream.make_counter: factorization,apps.edge_count"


def _shared() -> Path | None:
    for base in (ROOT.parent, ROOT.parent.parent):
        if (base / "shared" / "data_new" / "movielens_100k" / "u.data").exists():
            return base / "shared" / "data_new"
    return None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    if _shared() is None:
        pytest.skip("shared/data_new not found beside the checkout (bench/README.md)")
    out = tmp_path_factory.mktemp("floor")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "floor.py"), "--quick",
                          "--only", ONLY, "--out", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return ((out / "floor.md").read_text(encoding="utf-8"),
            json.loads((out / "floor.json").read_text(encoding="utf-8")))


def test_json_rows_have_a_cell_per_dataset_and_epsilon(run):
    _, doc = run
    assert doc["quick"] is True and doc["failed"] == []
    rows = doc["rows"]
    assert sorted(r["method"] for r in rows) == sorted(
        ["local.Duchi", "stream.make_counter: factorization", "apps.edge_count"])
    for r in rows:
        eps_seen = {k.split("ε=")[1] for k in r["cells"]}
        assert eps_seen == {"0.1", "1.0"}
        assert len(r["cells"]) % 2 == 0 and r["trials"] >= 1
        assert all(v >= 0 for v in r["cells"].values())
        assert r["worst"] == max(r["cells"].values())
        assert r["cells"][r["worst_cell"]] == r["worst"]
        assert r["status"] in STATUSES
        # the status follows the worst cell: ok/fixed exactly when it is within 10%
        assert (r["status"] in ("ok", "fixed")) == (r["worst"] <= 1.10)


def test_markdown_table_shape(run):
    md, doc = run
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| method |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    header, body = lines[start], lines[start + 2: end]  # the floor table, not the datasets'
    assert set(lines[start + 1]) <= {"|", "-"}
    assert header.count("|") == 9  # 8 columns
    assert len(body) == len(doc["rows"])
    for line in body:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 8, line
        assert cells[-1].split(" ")[0] in STATUSES
        float(cells[-2])  # the worst ratio is a number
