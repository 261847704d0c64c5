"""A real ``python -m dpkit serve`` process for the tests that need one, ready when its
workers say so: every worker logs ``"message": "started"`` (with its pid) once its app is
built, so a test waits for that line instead of a fixed start-up time (issue 30, 8: a 15 s
deadline failed under load)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

HANG = 600.0  # seconds: only a guard against a server that never starts nor exits


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m dpkit serve --config CONFIG --port P [ARGS]``; ``stderr`` collects its log
    lines and ``started`` the pids of the workers that logged "started"."""

    def __init__(self, config: Path, *args: str, cwd: Path | None = None) -> None:
        self.port, self.started, self.stderr = free_port(), set(), []
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dpkit", "serve", "--config", str(config), "--port",
             str(self.port), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, cwd=cwd, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.stderr.append(line)
                if '"message": "started"' in line:
                    self.started.add(json.loads(line)["pid"])
                self._changed.notify_all()
        with self._changed:  # the process closed its log: it has exited
            self._changed.notify_all()

    def wait_ready(self, workers: int = 1) -> None:
        """Return once ``workers`` workers have started; fail if the server exits first."""
        with self._changed:
            ready = self._changed.wait_for(
                lambda: len(self.started) >= workers or self.proc.poll() is not None, HANG)
        assert ready and self.proc.poll() is None, "".join(self.stderr[-20:])

    def stop(self) -> int:
        """SIGTERM, then the exit code (SIGKILL if it does not exit in 30 s); ``stderr`` is
        complete once this returns."""
        self.proc.terminate()
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self._reader.join()
        return code
