"""The architecture figures of issue 17, measured on any checkout of dpkit's source.

    python bench/architecture.py [SRC_ROOT]          (default: this checkout's src/)

Prints: the places outside ``dpkit.mechanisms`` (and ``dpkit.core``) that compute a noise
scale, the accounting paths (calls that debit a budget outside the accountants), the files that
state the query language, lines of ``src/``, the largest module, and the import cycles between
packages (the layer test's
graph, ``tests/test_layers.py``). For "before", run it on an older tree, e.g.
``git archive <commit> src | tar -x -C /tmp/old`` then ``python bench/architecture.py
/tmp/old/src``.

A noise-scale "place" is a call site of a calibration primitive (``calibrate_scale``,
``representable_scale``, ``gaussian_sigma``, ``_closed_form_scale``, ``grid_exponent``), a
float round trip ``fraction_up(float(…/…))``, a hand-written ``scale = …/ε`` (not through
``make_noise``/``make_selection``), or a noise constructor or sampler given a scale the
caller computed.

Issue 31's figures: noise helpers (functions outside ``dpkit.mechanisms``/``dpkit.core`` that
return the entry's measurement or calibrate and draw with it), scale reads off the entry and
sampler calls outside ``dpkit.mechanisms`` and debits outside the kit (the layer test's
``road_departures``), definitions of ``charge``, and ``accountant: Any`` parameters.

A file "states the query language" when it defines (a class, a function or a ``Literal`` tag)
at least four of the language's words: the steps (filter, with_columns, clamp, bin, map,
fill_null, drop_nulls, group_by) and the aggregations (count, count_distinct, sum, mean,
variance, histogram, quantile), after dropping suffixes such as ``Request`` or ``Spec``.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

PRIMITIVES = {"calibrate_scale", "representable_scale", "gaussian_sigma", "_closed_form_scale",
              "grid_exponent"}
NOISE = {"make_laplace", "make_discrete_laplace", "make_gaussian", "make_discrete_gaussian",
         "make_vector_laplace", "make_geometric", "discrete_laplace", "discrete_gaussian",
         "geometric"}
DEBITS = {"spend", "debit", "run_debited", "_debit", "_debit_part"}
ACCOUNTANTS = ("dpkit/core/accountant.py", "dpkit/core/compose.py", "dpkit/ledger/")
WORDS = {"filter", "with_columns", "clamp", "bin", "map", "fill_null", "drop_nulls", "group_by",
         "count", "count_distinct", "sum", "mean", "variance", "histogram", "quantile"}
SUFFIXES = ("_request", "_spec", "_step", "_agg", "_aggregation", "_model", "_body")


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def scale_sites(root: Path) -> list[tuple[str, int, str]]:
    sites = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith("dpkit/core/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and re.fullmatch(r"(\w*_)?(scale|sigma)", t.id)
                    for t in node.targets) and any(
                    isinstance(b, ast.BinOp) and isinstance(b.op, ast.Div)
                    for b in ast.walk(node.value)) and re.search(
                    r"eps|rho|sens|delta", ast.unparse(node.value)) and not re.search(
                    r"make_noise\(|make_selection\(", ast.unparse(node.value)):
                sites.append((rel, node.lineno, "scale = …/…"))
            if not isinstance(node, ast.Call):
                continue
            n = _name(node.func)
            text = ast.unparse(node.args[0]) if node.args else ""
            if n == "fraction_up" and "float(" in text and "/" in text:
                sites.append((rel, node.lineno, "fraction_up(float(…/…))"))
            elif n in PRIMITIVES or n in NOISE:
                sites.append((rel, node.lineno, n))
    return sites


def debit_sites(root: Path) -> list[tuple[str, int, str]]:
    """Calls that debit a budget, outside the accountants themselves."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith(ACCOUNTANTS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _name(node.func) in DEBITS:
                out.append((rel, node.lineno, _name(node.func)))
    return out


def _word(name: str) -> str:
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().lstrip("_")
    for suffix in SUFFIXES:
        snake = snake.removesuffix(suffix)
    return snake


def language_files(root: Path) -> dict[str, set[str]]:
    """The files that define at least four words of the query language (module docstring)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        words = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                words.add(_word(node.name))
            elif (isinstance(node, ast.Subscript) and _name(node.value) == "Literal"
                  and isinstance(node.slice, ast.Constant)):
                words.add(_word(str(node.slice.value)))
        if len(words & WORDS) >= 4:
            out[path.relative_to(root.parent).as_posix()] = words & WORDS
    return out


ENTRY = ("make_noise", "make_selection", "calibrate")  # what returns the entry's measurement


def _entry_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _name(node.func) in ENTRY


def _calls_outside_lambdas(node: ast.AST) -> list[ast.Call]:
    if isinstance(node, ast.Lambda):
        return []
    own = [node] if isinstance(node, ast.Call) else []
    return own + [c for child in ast.iter_child_nodes(node) for c in _calls_outside_lambdas(child)]


def _own_nodes(fn: ast.FunctionDef) -> list[ast.AST]:
    """The nodes of ``fn`` outside its nested functions (a front end's charged ``compute``
    that draws is not a helper)."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _wraps(fn: ast.FunctionDef, entry: set[str]) -> bool:
    """Whether a ``return`` of ``fn`` (outside its nested functions) calls ``entry``, calls
    what ``entry`` returned, or calls a name bound to it."""
    def called(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and _name(node.func) in entry

    bound = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and called(n.value)
             for t in n.targets if isinstance(t, ast.Name)}
    return any(called(c) or called(c.func) or isinstance(c.func, ast.Name)
               and c.func.id in bound
               for ret in _own_nodes(fn) if isinstance(ret, ast.Return) and ret.value
               for c in _calls_outside_lambdas(ret.value))


def noise_helpers(root: Path) -> list[tuple[str, int, str]]:
    """Functions outside ``dpkit.mechanisms`` and ``dpkit.core`` that wrap the calibrated-noise
    entry again: they return its measurement, or the values they drew with it, directly or
    through another helper of the same file (``laplace_integer`` drawing with ``_laplace``'s
    measurement); a front end that calibrates and draws inside its own charged computation
    is not a helper."""
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        if rel.startswith(("dpkit/mechanisms/", "dpkit/core/")):
            continue
        fns = [f for f in ast.walk(ast.parse(path.read_text())) if isinstance(f, ast.FunctionDef)]
        entry, found = set(ENTRY), {}
        while True:  # until no new helper wraps the entry or a helper found so far
            new = {f.name: f for f in fns if f.name not in found and _wraps(f, entry)}
            if not new:
                break
            found.update(new)
            entry |= set(new) - {"__init__"}
        out += sorted((rel, f.lineno, f.name) for f in found.values())
    return out


def charge_implementations(root: Path) -> list[tuple[str, int, str]]:
    """Definitions of a function named ``charge`` (the one debit door of the front ends)."""
    return [(p.relative_to(root.parent).as_posix(), n.lineno, n.name)
            for p in sorted(root.rglob("*.py")) for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, ast.FunctionDef) and n.name == "charge"]


def accountant_any(root: Path) -> tuple[int, int]:
    """Parameters named ``accountant`` annotated ``Any``: (in public functions, in all)."""
    public = total = 0
    for path in sorted(root.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs
            n = sum(a.arg == "accountant" and a.annotation is not None
                    and ast.unparse(a.annotation) == "Any" for a in args)
            total += n
            public += n if not fn.name.startswith("_") or fn.name == "__init__" else 0
    return public, total


def main() -> None:
    here = Path(__file__).resolve().parents[1]
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else here / "src"
    root = src / "dpkit"
    sites = scale_sites(root)
    outside = [s for s in sites if not s[0].startswith("dpkit/mechanisms/")]
    print("noise-scale places outside dpkit.mechanisms:")
    for s in outside:
        print(f"  {s[0]}:{s[1]}: {s[2]}")
    print(f"  total: {len(outside)} in {len({s[0] for s in outside})} files "
          f"(inside dpkit.mechanisms: {len(sites) - len(outside)})")
    debits = debit_sites(root)
    print("debits outside the accountants:")
    for s in debits:
        print(f"  {s[0]}:{s[1]}: {s[2]}")
    print(f"  total: {len(debits)}")
    language = language_files(root)
    print(f"files that state the query language: {len(language)} "
          f"({', '.join(sorted(language))})")
    lines = Counter({p.relative_to(src).as_posix(): len(p.read_text().splitlines())
                     for p in root.rglob("*.py")})
    name, most = lines.most_common(1)[0]
    print(f"lines of src: {sum(lines.values())}; largest module: {name} ({most} lines)")
    sys.path.insert(0, str(here / "tests"))
    import test_layers  # the layer test's own graph

    report = test_layers.check(root)
    cycles = test_layers.cycles(report.graph)
    print(f"package import cycles: {len(cycles)} {cycles if cycles else ''}")
    # issue 31: one road to the edges
    helpers = noise_helpers(root)
    print(f"noise helpers wrapping the entry outside dpkit.mechanisms: {len(helpers)} in "
          f"{len({h[0].split('/')[1] for h in helpers})} packages")
    for h in helpers:
        print(f"  {h[0]}:{h[1]}: {h[2]}")
    road = test_layers.road_departures(root)
    scale = [v for v in road if not v.message.startswith("debit")]
    print(f"scale reads off the entry and sampler calls outside dpkit.mechanisms: {len(scale)}")
    for v in scale:
        print(f"  {v}")
    debits = [v for v in road if v.message.startswith("debit")]
    print(f"debits outside the kit (as_accountant, accountant.run): {len(debits)}")
    for v in debits:
        print(f"  {v}")
    charges = charge_implementations(root)
    print(f"charge implementations: {len(charges)} "
          f"({', '.join(f'{c[0]}:{c[1]}' for c in charges)})")
    public, total = accountant_any(root)
    print(f"accountant: Any: {public} public signatures ({total} in all)")


if __name__ == "__main__":
    main()
