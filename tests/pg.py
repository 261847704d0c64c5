"""A throwaway PostgreSQL server on loopback for the ledger tests (Debian's postgresql
package; started as the ``postgres`` user, since the server refuses to run as root)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unavailable() -> str | None:
    """Why no server can be started here, or None."""
    if _bin("initdb") is None or _bin("pg_ctl") is None:
        return "PostgreSQL server binaries not installed (apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg not installed"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a 'postgres' user to start the server"
    return None


@contextmanager
def server(parent: str | None = None) -> Iterator[str]:
    """Start a server; yield its SQLAlchemy URL; stop it and remove its files. Its data
    directory is made under ``parent`` (default: the temporary directory), so that a
    benchmark can put it on a real disk, where fsync costs what it costs."""
    root = tempfile.mkdtemp(prefix="dpkit-pg-", dir=parent)
    data, port = os.path.join(root, "data"), _free_port()
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        os.chmod(root, 0o700)
        prefix = ["runuser", "-u", "postgres", "--"]
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    assert initdb and pg_ctl
    subprocess.run([*prefix, initdb, "-D", data, "-A", "trust", "-U", "postgres"],
                   check=True, capture_output=True)
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=60"
    subprocess.run([*prefix, pg_ctl, "-D", data, "-o", opts, "-w", "-l",
                    os.path.join(root, "log"), "start"], check=True, capture_output=True)
    try:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        deadline = time.time() + 20
        while True:
            try:
                import psycopg

                psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
                                ).close()
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", data, "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(server_url: str, name: str) -> str:
    """Drop and create database ``name`` on ``server_url``'s server; its SQLAlchemy URL."""
    import sqlalchemy as sa

    admin = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return server_url.rsplit("/", 1)[0] + f"/{name}"
