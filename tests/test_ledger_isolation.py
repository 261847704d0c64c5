"""Issue 30, finding A: ``verify`` of a long chain handed the MAC key to a hijackable child.

The attack: above a threshold of links, ``verify`` started ``python -m
dpkit.ledger.hashcheck`` and wrote the ledger's MAC key (and the database URL with its
password) to its standard input; ``python -m`` imports from the current directory first, so
a ``dpkit/`` package planted there received the key and reported a tampered chain as clean,
and ``checkpoint`` then signed the tampered state. The defence is structural: ``verify``
starts no process (the keyed work stays in the process that holds the key), and no module
of the package starts one (checked on the source below).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

import dpkit as dp
from dpkit.ledger import Ledger, integrity

PLANTED = '''import json, pathlib, sys
job = sys.stdin.read()
pathlib.Path({record!r}).write_text(job)  # what the hijacked child was given
print(json.dumps([]))  # "no problems"
'''


def _plant(folder: Path, record: Path) -> None:
    """A ``dpkit`` package in ``folder`` whose ``dpkit.ledger.hashcheck`` records its
    standard input and reports a clean chain."""
    pkg = folder / "dpkit" / "ledger"
    pkg.mkdir(parents=True)
    (folder / "dpkit" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "hashcheck.py").write_text(PLANTED.format(record=str(record)))


def _tampered_ledger(path: Path) -> Ledger:
    """A ledger whose one release's query was edited outside it (only the keyed hash and
    the request hash of its link can tell)."""
    reg = Ledger(path, mac_key="k" * 32)
    reg.register("d", dp.PureDP(10))
    rid = reg.debit("d", dp.PureDP(Fraction(1, 2)), "count()")
    reg.mark(rid, "released", "ab" * 32)
    assert reg.verify() == []
    with reg.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE releases SET query = 'other()' WHERE id = 1")
    return reg


def test_a_planted_package_in_the_cwd_never_sees_the_key(tmp_path, monkeypatch):
    evil, record = tmp_path / "evil", tmp_path / "record.json"
    evil.mkdir()
    _plant(evil, record)
    reg = _tampered_ledger(tmp_path / "l.sqlite")
    monkeypatch.chdir(evil)
    monkeypatch.setattr(integrity, "PARALLEL_LINKS", 0, raising=False)  # the old threshold
    started: list[object] = []
    popen = subprocess.Popen

    def spy(*args: object, **kwargs: object) -> object:
        started.append(args)
        return popen(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "Popen", spy)
    problems = reg.verify()
    assert any("release 1" in p and "hash" in p for p in problems), problems
    assert reg.checkpoint() != []  # nothing signed over the edit
    assert not record.exists()  # the planted package never ran, never saw the key
    assert started == []  # verify and checkpoint start no process at all
    assert reg.verify(since_checkpoint=True) == problems


# the calls that start a process; none of them may appear in the package's source
_STARTERS = {("subprocess", name) for name in ("Popen", "run", "call", "check_call",
                                                "check_output", "getoutput",
                                                "getstatusoutput")} | {
    ("os", name) for name in ("system", "popen", "execv", "execve", "execl", "execle",
                              "execlp", "execvp", "execvpe", "spawnv", "spawnve", "spawnl",
                              "spawnle", "fork", "forkpty", "posix_spawn", "posix_spawnp")}
_MODULES = {"subprocess", "multiprocessing", "concurrent.futures", "pty"}


def _starts_a_process(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name in _MODULES
                      or a.name.split(".")[0] == "multiprocessing"]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module in _MODULES or node.module.split(".")[0] == "multiprocessing":
                found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names
                      if (node.module, a.name) in _STARTERS]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and (node.value.id, node.attr) in _STARTERS):
            found.append(f"{node.value.id}.{node.attr}")
        elif (isinstance(node, ast.Attribute) and node.attr == "executable"
              and isinstance(node.value, ast.Name) and node.value.id == "sys"):
            found.append("sys.executable")
    return found


def test_no_module_of_the_package_starts_a_process():
    """A helper process is a second place for the key and a second import path to hijack;
    the package starts none (uvicorn's workers, started by uvicorn for ``dpkit serve``, are
    the server itself and import only what it imports)."""
    root = Path(dp.__file__).parent
    offenders = {str(path.relative_to(root)): found for path in sorted(root.rglob("*.py"))
                 if (found := _starts_a_process(ast.parse(path.read_text())))}
    assert offenders == {}


def test_the_scan_catches_the_old_helper():
    """The broken variant: the old ``hashcheck.start`` is caught by the scan above."""
    old = ("import subprocess, sys\n"
           "def start():\n"
           "    return subprocess.Popen([sys.executable, '-m', 'dpkit.ledger.hashcheck'])\n")
    assert set(_starts_a_process(ast.parse(old))) == {"subprocess", "subprocess.Popen",
                                                        "sys.executable"}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_verify_from_a_hostile_cwd_on_the_command_line(tmp_path, monkeypatch):
    """The same attack through ``dpkit ledger verify`` (the typer app, in this process)."""
    from typer.testing import CliRunner

    from dpkit.cli.main import app as cli

    evil, record = tmp_path / "evil", tmp_path / "record.json"
    evil.mkdir()
    _plant(evil, record)
    reg = _tampered_ledger(tmp_path / "l.sqlite")
    reg.dispose()
    monkeypatch.setenv("DPKIT_LEDGER_MAC_KEY", "k" * 32)
    monkeypatch.chdir(evil)
    monkeypatch.setattr(integrity, "PARALLEL_LINKS", 0, raising=False)
    res = CliRunner().invoke(cli, ["ledger", "verify", "--ledger", str(tmp_path / "l.sqlite")])
    assert res.exit_code == 1 and "release 1" in res.output
    assert not record.exists()
