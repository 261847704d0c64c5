"""Names use the field's terms (issue 31, item 6): in dpkit ``delta`` is δ, the probability of
approximate DP, never a sensitivity Δ. A public parameter or attribute called ``delta`` that
its docstring describes as a sensitivity, or an attribute ``self.delta`` / dataclass field
``delta`` assigned from a sensitivity, reads as δ to every user (``make_noise(delta, …)``).
A local variable or parameter ``delta`` is judged by its use: assigned from a sensitivity
(``delta = l1_sensitivity(a)``), passed where the callee's parameter is a sensitivity
(``make_noise(delta, …)``, ``laplace_integer(x, delta, ε)``, ``sensitivity=delta``),
returned by a function named ``…sensitivity``, or next to a comment that says Δ or
sensitivity. A difference of values is ``diff``/``step``/``shift``. The
deprecated ``delta`` properties that forward to ``sensitivity`` carry a DeprecationWarning."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "dpkit"
SENSITIVITY = re.compile(r"sensitiv|Δ", re.IGNORECASE)
SAYS_SENSITIVITY = re.compile(r"[Ss]ensitiv|Δ")  # case-sensitive: δ is Δ's lower case
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


Functions = ast.FunctionDef | ast.AsyncFunctionDef


def sensitivity_slots(trees: list[ast.AST]) -> dict[str, set[int]]:
    """For each function or method name in the source: the positions (as called, without
    ``self``/``cls``) of its parameters named ``sensitivity``/``sens``/``…_sensitivity``."""
    slots: dict[str, set[int]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, Functions):
                names = [a.arg for a in node.args.posonlyargs + node.args.args]
                names = names[1:] if names[:1] in (["self"], ["cls"]) else names
                slots.setdefault(node.name, set()).update(
                    i for i, n in enumerate(names) if n in ("sens", "sensitivity")
                    or n.endswith("_sensitivity"))
    return slots


def comments(text: str) -> dict[int, str]:
    """The comment on each line that has one."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _is_delta(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "delta"


def local_violations(tree: ast.AST, text: str, where: str,
                     slots: dict[str, set[int]]) -> list[str]:
    """A parameter or local ``delta`` used as a sensitivity (see the module docstring); the
    entry names the function, so a known exception survives edits above it."""
    notes = comments(text)
    out = []
    for fn in (n for n in ast.walk(tree) if isinstance(n, Functions)):
        why = set()
        for node in ast.walk(fn):
            targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                       if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
            value = getattr(node, "value", None)
            if (value is not None and any(_is_delta(t) for t in targets)
                    and SAYS_SENSITIVITY.search(ast.unparse(value))):
                why.add("assigned from a sensitivity")
            if isinstance(node, ast.Call):
                if any(_is_delta(a) and i in slots.get(_callee(node), ())
                       for i, a in enumerate(node.args)):
                    why.add(f"passed as {_callee(node)}'s sensitivity")
                if any(k.arg and "sensitiv" in k.arg and _is_delta(k.value)
                       for k in node.keywords):
                    why.add("passed as sensitivity=")
            if (isinstance(node, ast.Return) and "sensitivity" in fn.name and node.value
                    and any(_is_delta(n) for n in ast.walk(node.value))):
                why.add(f"returned by {fn.name}")
            if _is_delta(node) and SAYS_SENSITIVITY.search(notes.get(node.lineno, "")):
                why.add("a comment calls it Δ")
        out += [f"{where}:{fn.name}: delta {w}" for w in sorted(why)]
    return out


def violations(root: Path = SRC) -> list[str]:
    out = []
    sources = {p: p.read_text() for p in sorted(root.rglob("*.py"))}
    trees = {p: ast.parse(text) for p, text in sources.items()}
    slots = sensitivity_slots(list(trees.values()))
    for path, tree in trees.items():
        where = str(path.relative_to(root))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out += doc_violations(ast.get_docstring(node) or "", where)
        out += code_violations(tree, where)
        out += local_violations(tree, sources[path], where, slots)
    return sorted(set(out))


# Locals in files that parallel branches of issue 31 rewrite (noise: release/measure.py and
# ranges/gaussian_mm.py; learn; publish: synthetic/). The lead empties this list when merging
# them; an entry that no longer occurs fails the test below, so the list only shrinks.
ELSEWHERE: set[str] = set()  # every sensitivity once named delta is renamed


def test_delta_is_never_a_sensitivity():
    found = violations()
    new = [v for v in found if v.split(": delta ")[0] not in ELSEWHERE]
    assert not new, "delta means δ; call a sensitivity `sensitivity`:\n" + "\n".join(new)
    stale = ELSEWHERE - {v.split(": delta ")[0] for v in found}
    assert not stale, f"renamed since: drop from ELSEWHERE {sorted(stale)}"


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


def test_the_check_catches_a_local_sensitivity(tmp_path):
    """The broken variant: the locals this issue renamed (staircase, the Kronecker matrix
    mechanism, the covariance's privacy map, the sparse vector); today's δ passes."""
    (tmp_path / "old.py").write_text('''
def make_noise(sensitivity, *, epsilon=None, delta=None):
    return sensitivity


def laplace_integer(x, sensitivity, epsilon):
    return x


def staircase(sensitivity, epsilon):
    delta = positive(sensitivity, "sensitivity")
    return make_noise(delta, epsilon=epsilon)


def kron(x, b1, b2, epsilon):
    delta = norm(b1) * norm(b2)
    return laplace_integer(x, delta, epsilon)


def kron_rmse(factors, epsilon):
    delta = 1.0
    for a in factors:
        delta *= l1_sensitivity(a)
    return delta / epsilon


def steps(grid, delta):
    return ceil(delta / grid) + 1  # Δ in grid steps, plus the rounding


def gaussian(sensitivity, epsilon, delta):
    return make_noise(sensitivity, epsilon=epsilon, delta=delta)  # δ the probability


def approx(epsilon, delta):
    return classic_epsilon(sensitivity=1, delta=delta)
''')
    found = violations(tmp_path)
    assert [v.split(": delta ")[0] for v in found] == [
        "old.py:kron", "old.py:kron_rmse", "old.py:staircase", "old.py:staircase",
        "old.py:steps"], found


def test_the_old_names_still_work_with_a_warning():
    from dpkit.stream.grid import Grid

    grid = Grid.plan(4, 3, 0, 3)
    with pytest.warns(DeprecationWarning, match="sensitivity"):
        assert grid.delta == grid.sensitivity


# --- alpha is an accuracy target (issue 31, item 6): an interval's level is `confidence`, a
# test's level `significance` (the old keyword still works, with a DeprecationWarning).
LEVEL_WORDS = re.compile(r"1 − alpha|1 - alpha|significance|level|family-wise")


def _uses_as_level(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    why = []
    for node in ast.walk(fn):
        if (isinstance(node, ast.Call) and "stats." in ast.unparse(node.func)
                and any(isinstance(n, ast.Name) and n.id == "alpha"
                        for a in node.args for n in ast.walk(a))):
            why.append("a quantile's level")
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)
                and isinstance(node.right, ast.Name) and node.right.id == "alpha"):
            why.append("1 − alpha")
    lines = (ast.get_docstring(fn) or "").splitlines()
    entry = next((i for i, line in enumerate(lines) if line.strip().startswith("alpha :")), -1)
    said = [line for line in lines if "alpha" in line]
    if entry >= 0:  # the entry's description, on the lines below it
        said += lines[entry + 1:entry + 3]
    if any(LEVEL_WORDS.search(line) for line in said):
        why.append("documented as a level")
    return why


def alpha_violations(root: Path = SRC) -> list[str]:
    """Public functions with a parameter ``alpha`` used or documented as a level."""
    out = []
    for path in sorted(root.rglob("*.py")):
        where = str(path.relative_to(root))
        for fn in ast.walk(ast.parse(path.read_text())):
            if (isinstance(fn, Functions) and not fn.name.startswith("_")
                    and "alpha" in [a.arg for a in fn.args.args + fn.args.kwonlyargs]):
                out += [f"{where}:{fn.name}: alpha is {w}" for w in _uses_as_level(fn)]
    return sorted(set(out))


def test_alpha_is_only_an_accuracy_target():
    found = alpha_violations()
    assert not found, "alpha is an accuracy target; a level is confidence/significance:\n" + \
        "\n".join(found)


def test_the_alpha_check_catches_the_old_names(tmp_path):
    """The broken variant: the local oracles' estimate and Base-Cut as they were."""
    (tmp_path / "old.py").write_text('''
def estimate(self, reports, *, alpha=0.05):
    """Server side: estimates with a normal (1 − alpha) CI."""
    return stats.norm.isf(alpha / 2)


def consistent(estimates, *, alpha=0.05):
    """Post-processing.

    Parameters
    ----------
    alpha : float
        Base-Cut's family-wise level, in (0, 1).
    """
    return estimates


def release(self, epsilon=None, *, alpha=None, confidence=0.95):
    """alpha : the half-width of every statistic's interval (an accuracy target)."""
    return self.calibrate(alpha, confidence=confidence)
''')
    assert [v.split(": alpha is")[0] for v in alpha_violations(tmp_path)] == [
        "old.py:consistent", "old.py:estimate", "old.py:estimate"]


def test_the_old_level_keywords_still_work_with_a_warning():
    import numpy as np

    import dpkit.local as ldp

    grr = ldp.GRR(3, 1)
    support = np.array([30, 40, 30])
    new = grr.estimate_from_support(support, 100, confidence=0.9)
    with pytest.warns(DeprecationWarning, match="confidence"):
        old = grr.estimate_from_support(support, 100, alpha=0.1)
    assert np.allclose(old["ci_low"].to_numpy(), new["ci_low"].to_numpy(), rtol=1e-12)
    with pytest.warns(DeprecationWarning, match="significance"):
        cut = ldp.consistent([0.5, 0.01], "base-cut", std_error=0.01, alpha=0.05)
    assert np.array_equal(cut, ldp.consistent([0.5, 0.01], "base-cut", std_error=0.01,
                                              significance=0.05))
    with pytest.raises(TypeError, match="confidence"):
        grr.estimate_from_support(support, 100, alpha=0.1, confidence=0.9)


# --- σ has one name at the public boundary: `scale`, the noise distribution's scale parameter
# (σ for a Gaussian, b for a Laplace: docstrings say which), as in every make_* constructor,
# NoiseRow.scale and the samplers. MST/AIM's measurement records (publish's branch) still say
# sigma; the lead empties this list when merging it.
SIGMA_ELSEWHERE: set[str] = set()


def test_sigma_is_called_scale():
    import public_api

    found = {where for where, p in public_api.parameters() if p.name == "sigma"}
    assert found <= SIGMA_ELSEWHERE, f"call σ `scale`: {sorted(found - SIGMA_ELSEWHERE)}"
    assert found == SIGMA_ELSEWHERE, f"renamed since: {sorted(SIGMA_ELSEWHERE - found)}"


def test_the_old_sigma_keyword_still_works_with_a_warning():
    from fractions import Fraction

    from dpkit.core import samplers
    from dpkit.core.accuracy import gaussian_tail
    from dpkit.local import DistributedDiscreteGaussian

    with pytest.warns(DeprecationWarning, match="scale"):
        assert gaussian_tail(sigma=2.0, beta=0.05) == gaussian_tail(scale=2.0, beta=0.05)
    with pytest.warns(DeprecationWarning, match="scale"):
        assert samplers.discrete_gaussian(sigma=3, size=5).shape == (5,)
    with pytest.warns(DeprecationWarning, match="scale"):
        mech = DistributedDiscreteGaussian(2, clip=1, sigma=Fraction(1, 2), gamma=Fraction(1, 8),
                                           modulus=1 << 20)
    with pytest.warns(DeprecationWarning, match="scale"):
        assert mech.sigma == mech.scale == Fraction(1, 2)
