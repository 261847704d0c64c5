"""The layer map of docs/architecture.md, checked on the source.

Each package of ``src/dpkit`` imports only packages above it in :data:`LAYERS` (imports inside
functions and under ``TYPE_CHECKING`` count too); ``dpkit.errors`` is shared by all and imports
nothing of dpkit; the top-level ``dpkit/__init__.py`` (and ``__main__``) may import any layer.
No module reaches into another package's private names.

What the check sees (AST, no import is executed):

- ``import dpkit.x…``, ``from dpkit.x… import n``, relative imports and
  ``importlib.import_module("dpkit.x…")`` with a constant name, at any depth;
- names used through a module object: ``engine._to_polars`` after ``from dpkit.frame import
  engine``, ``dp.Session`` after ``import dpkit as dp`` (resolved through ``dpkit/__init__``);
- private names: a private module (``dpkit.x._mod``), an imported ``_name``, an attribute
  ``m._name`` of a module of another package, and, by name, ``obj._name`` or
  ``getattr(obj, "_name")`` where ``_name`` is defined in another package and nowhere in the
  module's own package (``session._total_loss(…)``).

What it cannot see: the type of an object, so a private name that the module's own package
also defines (an override, e.g. a subclass redefining ``_debit``) passes; attribute names
computed at run time (``getattr(obj, name)``); imports by computed strings; monkeypatching.

``python tests/test_layers.py`` prints the package import graph, its cycles and every
violation.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
import warnings
from collections import defaultdict
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "dpkit"
DOC = ROOT / "docs" / "architecture.md"

# The layer map, top to bottom; docs/architecture.md mirrors it (test_docs_mirror_the_map).
LAYERS = ("core", "ledger", "mechanisms", "frame", "release", "learn", "stream", "local", "apps",
          "audit", "server", "client", "datasets", "report", "cli")
SHARED = ("errors",)  # imported by every layer; imports nothing of dpkit
FACADES = ("__init__", "__main__")  # the package's front door and entry point: import anything

# Known violations outside this change's files: (path relative to src/dpkit, message start).
# Each one must still occur (test_known_violations_are_current), so the list only shrinks.
KNOWN: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"src/dpkit/{self.path}:{self.line}: {self.message}"


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _private(name: str) -> bool:
    return name.startswith("_") and not _dunder(name)


class Tree:
    """The modules of a dpkit source tree and what each of its packages defines privately."""

    def __init__(self, src: Path) -> None:
        self.src = src
        self.files: dict[str, Path] = {}  # module name → file
        for f in sorted(src.rglob("*.py")):
            parts = list(f.relative_to(src).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            self.files[".".join(["dpkit", *parts])] = f
        self.trees = {m: ast.parse(f.read_text(encoding="utf-8"), str(f))
                      for m, f in self.files.items()}
        self.private_defs: dict[str, set[str]] = defaultdict(set)  # unit → private members
        for m, tree in self.trees.items():
            self.private_defs[self.unit_of(m)] |= {n for n in _member_names(tree) if _private(n)}
        self.facade: dict[str, str] = {}  # names of dpkit/__init__ → the module they come from
        for node in ast.walk(self.trees.get("dpkit", ast.Module(body=[], type_ignores=[]))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    self.facade[alias.asname or alias.name] = (
                        sub if sub in self.files else node.module)

    def unit_of(self, module: str) -> str:
        """``dpkit.frame.engine`` → ``frame``; ``dpkit`` → ``__init__``."""
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else "__init__"

    def is_package(self, module: str) -> bool:
        return self.files[module].name == "__init__.py"


def _member_names(tree: ast.AST) -> set[str]:
    """Names a module gives its objects: methods and fields of its classes, attributes it
    assigns (``self._x = …``). Module-level names are reached through the module, which
    :meth:`_Checker.resolve` follows exactly."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    out.add(item.name)
                targets = (item.targets if isinstance(item, ast.Assign) else
                           [item.target] if isinstance(item, ast.AnnAssign) else [])
                out |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
    return out


class _Checker:
    """Walks one module; collects layer and private-name violations."""

    def __init__(self, tree: Tree, module: str) -> None:
        self.t, self.module = tree, module
        self.unit = tree.unit_of(module)
        self.path = tree.files[module].relative_to(tree.src).as_posix()
        self.bindings: dict[str, str] = {}  # local name → dpkit module it refers to
        self.edges: set[str] = set()  # units this module uses
        self.layer: list[Violation] = []
        self.private: list[Violation] = []

    # -- the two rules ------------------------------------------------------------------
    def use(self, target: str, line: int, how: str) -> None:
        """This module uses module ``target`` (a dpkit module name)."""
        t = self.t.unit_of(target)
        if t == self.unit:
            return
        self.edges.add(t)
        if any(_private(p) for p in target.split(".")[2:]):
            self._private(line, f"private module {target} of {t} ({how})")
        if self.unit in SHARED:
            self._layer(line, f"{self.unit} is shared and imports nothing of dpkit ({how})")
        elif self.unit in FACADES or t in SHARED or t == "__init__":
            return
        elif self.unit not in LAYERS or t not in LAYERS:
            odd = self.unit if self.unit not in LAYERS else t
            self._layer(line, f"{odd} is not on the layer map ({how}); add it to LAYERS "
                              f"and docs/architecture.md")
        elif LAYERS.index(t) > LAYERS.index(self.unit):
            self._layer(line, f"{self.unit} imports {t}, which is below it ({how})")

    def _layer(self, line: int, message: str) -> None:
        self.layer.append(Violation(self.path, line, message))

    def _private(self, line: int, message: str) -> None:
        self.private.append(Violation(self.path, line, message))

    # -- imports ------------------------------------------------------------------------
    def absolute(self, node: ast.ImportFrom) -> str | None:
        if node.level == 0:
            return node.module
        base = self.module.split(".")
        if not self.t.is_package(self.module):
            base.pop()
        base = base[: len(base) - node.level + 1]
        return ".".join([*base, node.module] if node.module else base)

    def imports(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "dpkit":
                    continue
                self.use(alias.name, node.lineno, f"import {alias.name}")
                if alias.asname:
                    self.bindings[alias.asname] = alias.name
                else:
                    self.bindings["dpkit"] = "dpkit"
        elif isinstance(node, ast.ImportFrom):
            base = self.absolute(node)
            if base is None or base.split(".")[0] != "dpkit":
                return
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                how = f"from {base} import {alias.name}"
                if sub in self.t.files:
                    target = sub
                    self.bindings[alias.asname or alias.name] = sub
                elif base == "dpkit":
                    target = self.t.facade.get(alias.name, "dpkit")
                else:
                    target = base
                self.use(target, node.lineno, how)
                if _private(alias.name) and self.t.unit_of(target) != self.unit:
                    self._private(node.lineno, f"private name {alias.name} of {target} ({how})")
        elif (isinstance(node, ast.Call) and _callee(node.func) in ("import_module", "__import__")
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and node.args[0].value.split(".")[0] == "dpkit"):
            self.use(node.args[0].value, node.lineno, f"import_module({node.args[0].value!r})")

    # -- names used through modules and objects ------------------------------------------
    def resolve(self, expr: ast.expr) -> str | None:
        """The dpkit module an expression names (``engine``, ``dpkit.frame.engine``)."""
        if isinstance(expr, ast.Name):
            return self.bindings.get(expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.resolve(expr.value)
            if base is not None and f"{base}.{expr.attr}" in self.t.files:
                return f"{base}.{expr.attr}"
        return None

    def attribute(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call) and _callee(node.func) in ("getattr", "setattr", "hasattr"):
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(
                    node.args[1].value, str):
                self.by_name(node.args[1].value, node.lineno, f'getattr(…, "{node.args[1].value}")')
            return
        if not isinstance(node, ast.Attribute):
            return
        base = self.resolve(node.value)
        if base is not None:
            target = self.resolve(node) or (
                self.t.facade.get(node.attr, "dpkit") if base == "dpkit" else base)
            how = f"{ast.unparse(node)}"
            if target != base or base == "dpkit":
                self.use(target, node.lineno, how)
            if _private(node.attr) and self.t.unit_of(base) != self.unit:
                self._private(node.lineno, f"private name {node.attr} of {base} ({how})")
            return
        self.by_name(node.attr, node.lineno, ast.unparse(node))

    def by_name(self, name: str, line: int, how: str) -> None:
        """``obj._name`` where ``_name`` is defined in another package, not in this one."""
        if not _private(name) or name in self.t.private_defs[self.unit]:
            return
        owners = sorted(u for u, names in self.t.private_defs.items()
                        if name in names and u != self.unit)
        if owners:
            self._private(line, f"private name {name} defined in {', '.join(owners)} ({how})")

    def run(self) -> _Checker:
        tree = self.t.trees[self.module]
        for node in ast.walk(tree):  # bindings first: a use may precede a lazy import
            self.imports(node)
        for node in ast.walk(tree):
            self.attribute(node)
        return self


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


@dataclass
class Report:
    layer: list[Violation]
    private: list[Violation]
    graph: dict[str, set[str]]  # unit → units it uses (facades left out)
    units: set[str]


def check(src: Path = SRC) -> Report:
    """Check every module under ``src`` (a ``dpkit`` package directory)."""
    tree = Tree(src)
    layer: list[Violation] = []
    private: list[Violation] = []
    graph: dict[str, set[str]] = defaultdict(set)
    for module in tree.files:
        c = _Checker(tree, module).run()
        layer += c.layer
        private += c.private
        if c.unit not in FACADES:
            graph[c.unit] |= {u for u in c.edges if u not in FACADES}
    key = attrgetter("path", "line", "message")
    return Report(sorted(set(layer), key=key), sorted(set(private), key=key), dict(graph),
                  {tree.unit_of(m) for m in tree.files})


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# -- one road to the edges (issue 31): outside dpkit.mechanisms, a front end draws through the
# kit (dpkit.mechanisms.frontend) and charges through it; it never reads a scale off the
# calibrated-noise entry to draw elsewhere, never calls the sampler itself, never debits.
ROAD_UNITS = tuple(u for u in LAYERS if LAYERS.index(u) > LAYERS.index("mechanisms"))
ENTRY = ("make_noise", "make_selection", "calibrate")  # calls that return the entry's measurement
# Known departures in files other changes own: (path relative to src/dpkit, message start).
# Each must still occur (test_known_road_departures_are_current), so the list only shrinks.
ROAD_KNOWN: tuple[tuple[str, str], ...] = (
)


def _entry_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _callee(node.func) in ENTRY


def _bound_to_entry(tree: ast.AST) -> set[str]:
    """Names and ``self.`` attributes a module assigns from an entry call (``noise =
    make_noise(…)``), anywhere in the module."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _entry_call(node.value):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.add(t.id)
                elif isinstance(t, ast.Attribute):
                    out.add(f".{t.attr}")
    return out


def road_departures(src: Path = SRC) -> list[Violation]:
    """Scale reads off the entry, sampler calls and debits outside the kit, in every module
    of a package below ``mechanisms``."""
    tree = Tree(src)
    out: list[Violation] = []
    for module, t in tree.trees.items():
        if tree.unit_of(module) not in ROAD_UNITS:
            continue
        path = tree.files[module].relative_to(tree.src).as_posix()
        bound = _bound_to_entry(t)
        for node in ast.walk(t):
            if isinstance(node, ast.Attribute) and node.attr == "scale" and (
                    _entry_call(node.value)
                    or isinstance(node.value, ast.Name) and node.value.id in bound
                    or isinstance(node.value, ast.Attribute) and f".{node.value.attr}" in bound):
                out.append(Violation(path, node.lineno, f"scale read off the calibrated-noise "
                                                        f"entry ({ast.unparse(node)})"))
            if not isinstance(node, ast.Call):
                continue
            name = _callee(node.func)
            if name in ("sample_exponential", "sample_top_k"):
                out.append(Violation(path, node.lineno, f"sampler called outside the kit "
                                                        f"({name})"))
            elif name == "as_accountant" or name in ("run", "run_record") and isinstance(
                    node.func, ast.Attribute) and "accountant" in ast.unparse(node.func.value):
                out.append(Violation(path, node.lineno, f"debit outside the kit "
                                                        f"({ast.unparse(node.func)})"))
    return sorted(set(out), key=attrgetter("path", "line", "message"))


def _road_known(v: Violation) -> bool:
    return any(v.path == p and v.message.startswith(m) for p, m in ROAD_KNOWN)


def test_front_ends_take_the_one_road():
    found = [v for v in road_departures() if not _road_known(v)]
    assert not found, _listing("departures from the one road (use dpkit.mechanisms.frontend: "
                               "charge, noisy, select, noise_row, row_of)", found)


def test_known_road_departures_are_current():
    found = road_departures()
    stale = [(p, m) for p, m in ROAD_KNOWN
             if not any(v.path == p and v.message.startswith(m) for v in found)]
    assert not stale, f"fixed, remove from ROAD_KNOWN: {stale}"


def test_the_road_check_finds_each_kind_of_departure(tmp_path):
    src = tmp_path / "dpkit"
    files = {
        "__init__.py": "", "mechanisms/__init__.py": "",
        "mechanisms/calibrated.py": "def f(m):\n    return m.scale\n",  # inside: allowed
        "learn/__init__.py": "",
        "learn/model.py": textwrap.dedent("""\
            from dpkit.mechanisms import make_noise, make_selection, sample_exponential
            from dpkit.core.accountant import as_accountant

            def fit(x, acct, session):
                s = make_selection(1, 1).scale
                noise = make_noise(1, epsilon=1)
                b = noise.scale
                i = sample_exponential(x, s)
                as_accountant(acct).run(None, "", lambda: 1)
                return session.accountant.run(None, "", lambda: 1), row.scale, b, i
            """),
    }
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    text = "\n".join(str(v) for v in road_departures(src))
    expected = ["learn/model.py:5: scale read off", "learn/model.py:7: scale read off",
                "learn/model.py:8: sampler called", "learn/model.py:9: debit outside the kit "
                "(as_accountant)", "learn/model.py:9: debit outside the kit (as_accountant(acct)"
                ".run)", "learn/model.py:10: debit outside the kit (session.accountant.run)"]
    missing = [e for e in expected if e not in text]
    assert not missing, f"missed {missing} in:\n{text}"
    assert "row.scale" not in text and "mechanisms/" not in text  # a NoiseRow's scale is fine


def _is_known(v: Violation) -> bool:
    return any(v.path == p and v.message.startswith(m) for p, m in KNOWN)


def _listing(title: str, found: list[Violation]) -> str:
    return f"{len(found)} {title}:\n" + "\n".join(f"  {v}" for v in found)


@pytest.fixture(scope="module")
def report() -> Report:
    return check()


# -- the map ------------------------------------------------------------------------------
def test_docs_mirror_the_map():
    rows = re.findall(r"^\| `dpkit\.(\w+)` \|", DOC.read_text(encoding="utf-8"), re.M)
    assert tuple(rows) == LAYERS, f"docs/architecture.md lists {rows}, LAYERS is {LAYERS}"


def test_every_package_is_on_the_map(report):
    unknown = report.units - set(LAYERS) - set(SHARED) - set(FACADES)
    assert not unknown, f"packages missing from LAYERS and docs/architecture.md: {unknown}"


def test_imports_follow_the_layers(report):
    found = [v for v in report.layer if not _is_known(v)]
    assert not found, _listing("imports against the layer map", found)


def test_no_private_reach_ins(report):
    found = [v for v in report.private if not _is_known(v)]
    assert not found, _listing("reach-ins into another package's private names", found)


def test_known_violations_are_current(report):
    stale = [(p, m) for p, m in KNOWN
             if not any(v.path == p and v.message.startswith(m)
                        for v in report.layer + report.private)]
    assert not stale, f"fixed, remove from KNOWN: {stale}"


def test_no_package_cycles(report):
    assert cycles(report.graph) == []


# -- the checker can fail -----------------------------------------------------------------
_BAD_TREE = {
    "__init__.py": ("from dpkit.frame.session import Session\n"
                    "from dpkit.mechanisms._common import scale\n"),
    "errors.py": "import dpkit.core\n",
    "core/__init__.py": "",
    "core/numbers.py": "def f():\n    import dpkit as dp\n    return dp.Session\n",
    "mechanisms/__init__.py": "",
    "mechanisms/_common.py": "def scale():\n    return 1\n",
    "ledger/__init__.py": "from ..frame import session\n",
    "frame/__init__.py": "",
    "frame/engine.py": "def _to_polars(x):\n    return x\n",
    "frame/session.py": textwrap.dedent("""\
        class Session:
            def _total_loss(self):
                return 0
        """),
    "frame/query.py": textwrap.dedent("""\
        import importlib

        def histogram(q):
            from dpkit.release.session import release  # lazy
            return release(q)

        def pmw(q):
            return importlib.import_module("dpkit.release.pmw")
        """),
    "release/__init__.py": "",
    "release/pmw.py": "",
    "release/session.py": textwrap.dedent("""\
        from dpkit.frame import engine
        from dpkit.mechanisms._common import scale
        from dpkit.frame.engine import _to_polars as tp
        import dpkit.frame.engine

        def release(q):
            s = q.session
            return (engine._to_polars(q), s._total_loss(), getattr(s, "_total_loss"),
                    dpkit.frame.engine._to_polars(q), scale(), tp)
        """),
    "stats/__init__.py": "",
}


def test_the_checker_finds_each_kind_of_violation(tmp_path):
    src = tmp_path / "dpkit"
    for name, text in _BAD_TREE.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    r = check(src)
    text = "\n".join(str(v) for v in r.layer + r.private)
    expected = [
        "__init__.py:2: private module dpkit.mechanisms._common",
        "errors.py:1: errors is shared",
        "core/numbers.py:3: core imports frame",  # dp.Session through the facade
        "ledger/__init__.py:1: ledger imports frame",  # relative import
        "frame/query.py:4: frame imports release",  # lazy import
        "frame/query.py:8: frame imports release",  # import_module
        "release/session.py:2: private module dpkit.mechanisms._common",
        "release/session.py:3: private name _to_polars of dpkit.frame.engine",
        "release/session.py:8: private name _to_polars of dpkit.frame.engine",
        "release/session.py:8: private name _total_loss defined in frame",
        'release/session.py:8: private name _total_loss defined in frame (getattr(…, "_to',
        "release/session.py:9: private name _to_polars of dpkit.frame.engine",
    ]
    missing = [e for e in expected if e not in text]
    assert not missing, f"missed {missing} in:\n{text}"
    assert r.units - set(LAYERS) - set(SHARED) - set(FACADES) == {"stats"}
    assert cycles(r.graph) == [["frame", "release"]]
    assert not [v for v in r.layer if v.path == "__init__.py"]  # the facade imports anything


# -- the extension point that replaced frame → release ---------------------------------------
def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_dpkit_stays_lazy_and_the_namespace_is_there():
    out = _run("""
        import sys
        import dpkit as dp
        before = "dpkit.release" in sys.modules
        q = dp.Session(__import__("polars").DataFrame({"x": [1.0]}), budget=dp.PureDP(1)).query()
        ns = q.publish
        print(before, "dpkit.release" in sys.modules, type(ns).__module__, ns.query is q)
        """)
    assert out == "False True dpkit.release.session True"


def test_a_registered_namespace_gets_the_query():
    import polars as pl

    import dpkit as dp
    from dpkit.frame import register_query_namespace

    @register_query_namespace("test_ns")
    class Ns:
        def __init__(self, query):
            self.query = query

    try:
        q = dp.Session(pl.DataFrame({"x": [1.0]}), budget=dp.PureDP(1)).query()
        assert q.test_ns.query is q and dp.Query.test_ns is Ns
    finally:
        del dp.Query.test_ns


@pytest.mark.parametrize("name", ["release", "filter", "agg", "session", "2x", "publish ",
                                  "_private"])
def test_a_namespace_never_shadows_the_query(name):
    from dpkit.errors import DomainError
    from dpkit.frame import register_query_namespace

    with pytest.raises(DomainError):
        register_query_namespace(name)


def test_the_old_methods_warn_and_go_through_the_namespace(monkeypatch):
    import polars as pl

    import dpkit as dp
    from dpkit.release.session import ReleaseNamespace

    calls = []
    monkeypatch.setattr(ReleaseNamespace, "histogram",
                        lambda self, *a, **k: calls.append(("histogram", self.query, a, k)))
    monkeypatch.setattr(ReleaseNamespace, "pmw",
                        lambda self, *a, **k: calls.append(("pmw", self.query, a, k)))
    q = dp.Session(pl.DataFrame({"x": [1.0]}), budget=dp.PureDP(1)).query()
    with pytest.warns(DeprecationWarning, match="publish.histogram"):
        q.release_histogram("x", [0, 1], "identity", epsilon=1, integer=True)
    with pytest.warns(DeprecationWarning, match="publish.pmw"):
        q.pmw({"x": [1.0]}, epsilon=1, alpha=2)
    assert calls == [("histogram", q, ("x", [0, 1], "identity"), {"epsilon": 1, "integer": True}),
                     ("pmw", q, ({"x": [1.0]},), {"epsilon": 1, "alpha": 2})]


def test_the_old_method_still_releases():
    import polars as pl

    import dpkit as dp

    s = dp.Session(pl.DataFrame({"x": [0.5, 1.5, 3.0]}), budget=dp.PureDP(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old = s.query().release_histogram("x", [0, 1, 2, 4], "identity", epsilon=1)
    new = s.query().publish.histogram("x", [0, 1, 2, 4], "identity", epsilon=1)
    assert type(old) is type(new) and old.labels == new.labels and old.epsilon == new.epsilon
    assert s.spent == dp.PureDP(2)


if __name__ == "__main__":
    r = check()
    for unit in sorted(r.graph):
        print(f"{unit} -> {', '.join(sorted(r.graph[unit])) or '-'}")
    print(f"package cycles: {cycles(r.graph) or 'none'}")
    print(_listing("layer violations", r.layer))
    print(_listing("private reach-ins", r.private))
    print(_listing("departures from the one road", road_departures()))
