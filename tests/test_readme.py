"""Every code example of README.md and of the documentation's pages (docs/getting-started.md,
docs/guide/, docs/topics/) runs as written (issue 24): each Python block in a fresh
namespace and a fresh working directory, and the query server's walk-through end to end
(its YAML, its set-up commands, the curl request body and the Python client against a real
``dpkit serve``). A comment ``<!-- readme-test: needs MODULE -->`` before a block skips it
when that optional extra is missing; the server's blocks are tagged ``server-…``."""

import importlib.util
import json
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [ROOT / "docs" / "getting-started.md", ROOT / "docs" / "sql.md",
         *sorted((ROOT / "docs" / "guide").glob("*.md")),
         *sorted((ROOT / "docs" / "topics").glob("*.md"))]
FENCE = re.compile(
    r"(?:<!-- readme-test: (?P<tag>[^>]+?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)


def blocks(path: Path = README) -> list[tuple[str, str, str, str]]:
    """(section heading, language, tag, code) of every fenced block, in order."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        heading = re.findall(r"^##? (.+)$", text[:m.start()], re.M)
        out.append((heading[-1] if heading else "", m["lang"], m["tag"] or "", m["code"]))
    return out


PYTHON = [(h, tag, code) for h, lang, tag, code in blocks()
          if lang == "python" and not tag.startswith("server")]


def test_two_setup_commands():
    setup = [code for h, lang, _, code in blocks() if h == "Set up"]
    assert setup == ['python -m pip install . && dpkit demo\n',
                     'python -m pip install -e ".[test]" && python -m pytest\n']


@pytest.mark.parametrize("heading,tag,code", PYTHON,
                         ids=[f"{i}-{h.split()[0]}" for i, (h, _, _) in enumerate(PYTHON)])
def test_python_block_runs(heading, tag, code, tmp_path, monkeypatch):
    if tag.startswith("needs "):
        pytest.importorskip(tag.split()[1])
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md ({heading})", "exec"), {"__name__": "__readme__"})


DOCS = [(f"{p.stem}: {h}", tag, code) for p in PAGES for h, lang, tag, code in blocks(p)
        if lang == "python"]


@pytest.mark.parametrize("heading,tag,code", DOCS,
                         ids=[f"{i}-{h.split(':')[0]}" for i, (h, _, _) in enumerate(DOCS)])
def test_docs_block_runs(heading, tag, code, tmp_path, monkeypatch):
    if tag.startswith("needs "):
        pytest.importorskip(tag.split()[1])
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"docs ({heading})", "exec"), {"__name__": "__docs__"})


def test_docs_pages_are_covered():
    assert len(PAGES) >= 10 and len(DOCS) >= 15


def _tagged(tag: str) -> str:
    found = [code for _, _, t, code in blocks() if t == tag]
    assert len(found) == 1, tag
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _command(line: str) -> list[str]:
    words = shlex.split(line, comments=True)
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    assert words[0] == "dpkit", line
    return [sys.executable, "-m", "dpkit", *words[1:]]


def test_server_walkthrough(tmp_path, monkeypatch):
    for module in ("fastapi", "uvicorn", "yaml", "httpx"):
        pytest.importorskip(module)
    import httpx
    from typer.testing import CliRunner

    from dpkit.cli import app

    (tmp_path / "server.yaml").write_text(_tagged("server.yaml"))
    monkeypatch.chdir(tmp_path)
    port = _free_port()
    server = None
    token = None
    try:
        for line in _tagged("server-setup").splitlines():
            command = _command(line)
            if command[3:4] == ["serve"]:  # the one long-running command: a real process
                server = subprocess.Popen([*command, "--port", str(port)], cwd=tmp_path,
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
            elif command[1] == "-c":  # python -c CODE, in this process
                exec(compile(command[2], "README.md (set-up)", "exec"), {})
            else:  # dpkit …, in this process (the same command-line code)
                done = CliRunner().invoke(app, command[3:], env={"COLUMNS": "200"})
                assert done.exit_code == 0, (line, done.output)
                found = re.search(r"token (\S+)", done.output)
                token = found[1] if found else token
        assert server is not None and token is not None
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "server did not start"
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        curl = _tagged("server-curl")
        body = json.loads(re.search(r"-d '(.*?)'", curl, re.S)[1])
        url = re.search(r"curl -s (\S+)", curl)[1].replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        r = httpx.post(url, json=body, headers={"Authorization": f"Bearer {token}"},
                       timeout=60)
        assert r.status_code == 200, r.text
        assert "count" in r.text
        monkeypatch.setenv("TOKEN", token)
        code = _tagged("server-client").replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        exec(compile(code, "README.md (client)", "exec"), {"__name__": "__readme__"})
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()


def test_every_block_is_run_or_tagged():
    """No Python block escapes the tests: each is plain, needs a known extra, or is part of
    the server walk-through; the extras named are importable under the test extras."""
    tags = {tag for _, lang, tag, _ in blocks() if lang == "python"}
    assert tags <= {"", "needs mbi", "needs sklearn", "server-client"}
    for tag in tags - {"", "server-client"}:
        assert importlib.util.find_spec(tag.split()[1]) is not None, tag
