"""Issue 33: the notebooks of ``docs/notebooks`` run from top to bottom without a cell error
(executed by nbclient in a kernel of this interpreter; kept output-free in git), and show what
their text promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="needs the test extra (nbformat)")
nbclient = pytest.importorskip("nbclient", reason="needs the test extra (nbclient)")
pytest.importorskip("ipykernel", reason="needs the test extra (ipykernel)")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.ipynb"))
NEEDS = {"synthetic-data.ipynb": "mbi", "ledger-and-server.ipynb": "fastapi"}


def _outputs(nb: object) -> str:
    return json.dumps([c.get("outputs", []) for c in nb.cells])  # type: ignore[attr-defined]


def test_there_are_three_output_free_notebooks():
    assert [p.name for p in NOTEBOOKS] == ["first-session.ipynb", "ledger-and-server.ipynb",
                                           "synthetic-data.ipynb"]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert all(not c.get("outputs") and c.get("execution_count") is None
                   for c in nb.cells if c.cell_type == "code"), f"{path.name} has outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    if path.name in NEEDS:
        pytest.importorskip(NEEDS[path.name])
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    shown = _outputs(nb)
    assert "Traceback" not in shown
    if path.name == "first-session.ipynb":
        assert "dpkit Session" in shown and "dpkit Query" in shown  # the HTML displays
        assert "count_ci_low" in shown and "use group_by" in shown
    elif path.name == "synthetic-data.ipynb":
        assert "tv_2way" in shown and "uniform baseline" in shown
    else:
        assert "refused:" in shown and "every link checks out" in shown
        assert "its plan is on the server" in shown  # a served query displays
