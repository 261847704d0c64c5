"""Where the ledger's MAC key lives.

The key that signs the chain and the rows (:mod:`dpkit.ledger.chain`) is, in order:

1. the ``mac_key`` given to :class:`~dpkit.ledger.Ledger`;
2. the environment variable ``DPKIT_LEDGER_MAC_KEY`` (its text is the key), the choice for a
   server: keep the key in a secret store, off the database host, out of reach of whoever
   can write the database;
3. a key file: ``<ledger file>.key`` next to a SQLite ledger, or, for a server URL
   (PostgreSQL), ``$DPKIT_HOME/ledger-keys/<digest of the URL>.key`` (default
   ``$XDG_DATA_HOME/dpkit`` or ``~/.local/share/dpkit``). The file is created (mode 0600,
   32 random bytes in hex) with a new ledger, or when an older ledger is migrated; a
   ledger that already has a key and whose key file is missing refuses to open.

``meta.mac_key_id`` stores a fingerprint of the key, so that a wrong key is named as such
rather than reported as tampering on every row.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from sqlalchemy import Connection, inspect, select
from sqlalchemy.engine import make_url

from dpkit.errors import LedgerError
from dpkit.ledger import chain
from dpkit.ledger.schema import meta

__all__ = ["ENV_VAR", "resolve_key", "key_file"]

ENV_VAR = "DPKIT_LEDGER_MAC_KEY"


def key_file(url: str) -> Path:
    """The default key file of the ledger at ``url`` (a SQLAlchemy URL)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        return Path(str(parsed.database) + ".key")
    home = os.environ.get("DPKIT_HOME")
    base = Path(home) if home else Path(
        os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "dpkit"
    name = hashlib.sha256(parsed.render_as_string(hide_password=True).encode()).hexdigest()
    return base / "ledger-keys" / f"{name[:32]}.key"


def _stored_id(conn: Connection) -> str | None:
    if not inspect(conn).has_table("meta"):
        return None
    row = conn.execute(select(meta.c.value).where(meta.c.key == "mac_key_id")).first()
    return None if row is None else str(row[0])


def _create(path: Path) -> bytes:
    """Write a new key file atomically (another process may race us: the first wins)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text().strip().encode()


def resolve_key(url: str, given: bytes | str | None, conn: Connection) -> tuple[bytes, str]:
    """The MAC key for the ledger at ``url`` and where it came from; checks it against the
    fingerprint stored in the ledger, if any.

    Raises
    ------
    LedgerError
        If the ledger has a key and none is found, or the key found is not that key.
    """
    stored = _stored_id(conn)
    env = os.environ.get(ENV_VAR)
    if given is not None:
        key, source = (given.encode() if isinstance(given, str) else given), "mac_key"
    elif env:
        key, source = env.encode(), f"${ENV_VAR}"
    else:
        path = key_file(url)
        source = str(path)
        if path.exists():
            key = path.read_text().strip().encode()
        elif stored is None:
            key = _create(path)
        else:
            raise LedgerError(f"this ledger's MAC key is missing: no key file {path} and no "
                              f"${ENV_VAR}; restore the key (a new one cannot verify it)")
    if not key:
        raise LedgerError(f"the ledger's MAC key from {source} is empty")
    if stored is not None and stored != chain.key_id(key):
        raise LedgerError(f"the MAC key from {source} (id {chain.key_id(key)}) is not the key "
                          f"this ledger was written with (id {stored})")
    return key, source
