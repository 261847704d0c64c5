"""Every script in examples/ runs to the end (issue 24), in a fresh working directory; a
script whose docstring names an extra (``dpkit[learn]``) is skipped when it is missing."""

import re
import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))
EXTRAS = {"learn": "sklearn", "synth": "mbi", "plot": "matplotlib", "server": "fastapi"}


def test_there_are_examples():
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, tmp_path, monkeypatch, capsys):
    for extra in re.findall(r"dpkit\[(\w+)\]", path.read_text()):
        pytest.importorskip(EXTRAS[extra])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", [str(path)])  # a script's own options, not pytest's
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()  # it printed its results
