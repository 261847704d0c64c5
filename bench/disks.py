"""Where the durable-state benchmarks put their ledgers (issue 35, item 5): a directory on
a real disk (ext4: every durable commit pays an fsync) and one on tmpfs (memory: fsync is
free). The ratio of a workload's rate on the two, measured in one run, is the measure of
group commit; the file-system type is checked with ``df -T`` rather than assumed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

EXT4 = Path("/tmp/ledger_scale_disk")
TMPFS = Path("/dev/shm/ledger_scale")


def fstype(path: Path) -> str:
    """The file-system type of ``path`` (created if missing) as ``df -T`` names it."""
    path.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    return out[-1].split()[1]  # Filesystem Type 1K-blocks ...


def require(path: Path, kind: str) -> Path:
    """``path`` after checking it lies on a ``kind`` file system; exits with a clear line
    if it does not (a tmpfs "disk" would hide the fsyncs the benchmark measures)."""
    found = fstype(path)
    if found != kind:
        raise SystemExit(f"{path} is on {found}, not {kind}: pass another directory")
    return path
