"""Names use the field's terms (issue 31, item 6): in dpkit ``delta`` is δ, the probability of
approximate DP, never a sensitivity Δ. A public parameter or attribute called ``delta`` that
its docstring describes as a sensitivity, or an attribute ``self.delta`` / dataclass field
``delta`` assigned from a sensitivity, reads as δ to every user (``make_noise(delta, …)``).
Local variables are not checked (their scope is a few lines); the deprecated ``delta``
properties that forward to ``sensitivity`` carry a DeprecationWarning."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "dpkit"
SENSITIVITY = re.compile(r"sensitiv|Δ", re.IGNORECASE)
DELTA_ENTRY = re.compile(r"^(\s*)delta(?:, \w+)* : .*$")


def doc_violations(text: str, where: str) -> list[str]:
    """numpydoc entries ``delta : …`` whose description says sensitivity or Δ."""
    out = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        found = DELTA_ENTRY.match(line)
        if not found:
            continue
        indent, body = len(found[1]), [line]
        for nxt in lines[i + 1:]:
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt)
        text_of = " ".join(body)
        if SENSITIVITY.search(text_of) and "δ" not in text_of:
            out.append(f"{where}:{i + 1}: delta documented as a sensitivity")
    return out


def code_violations(tree: ast.AST, where: str) -> list[str]:
    """``self.delta = <a sensitivity>`` and dataclass fields ``delta: …`` next to a
    sensitivity in the class's docstring."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Attribute) and target.attr == "delta"
                        and SENSITIVITY.search(ast.unparse(node.value))):
                    out.append(f"{where}:{node.lineno}: self.delta set from a sensitivity")
        if isinstance(node, ast.ClassDef):
            doc = ast.get_docstring(node) or ""
            for stmt in node.body:
                if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                        and stmt.target.id == "delta" and doc_violations(doc, where)):
                    out.append(f"{where}:{stmt.lineno}: field delta is a sensitivity")
    return out


def violations(root: Path = SRC) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        where = str(path.relative_to(root))
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out += doc_violations(ast.get_docstring(node) or "", where)
        out += code_violations(tree, where)
    return sorted(set(out))


def test_delta_is_never_a_sensitivity():
    found = violations()
    assert not found, "delta means δ; call a sensitivity `sensitivity`:\n" + "\n".join(found)


def test_the_check_catches_the_old_names(tmp_path):
    """The broken variant: the names this issue renamed (Grid.delta, PMW's self.delta)."""
    (tmp_path / "old.py").write_text('''
from dataclasses import dataclass


@dataclass
class Grid:
    """A grid.

    Attributes
    ----------
    delta : int
        The counter's sensitivity, in grid steps.
    """

    delta: int


class PMW:
    def __init__(self, sensitivity):
        self.delta = int(sensitivity)
''')
    found = violations(tmp_path)
    assert len(found) == 3, found


def test_the_old_names_still_work_with_a_warning():
    from dpkit.stream.grid import Grid

    grid = Grid.plan(4, 3, 0, 3)
    with pytest.warns(DeprecationWarning, match="sensitivity"):
        assert grid.delta == grid.sensitivity
