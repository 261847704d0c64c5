"""The second process of ``verify`` on a long chain: recompute the keyed hash of every link
in a ``seq`` range (:func:`dpkit.ledger.chain.hash_problems`) while the first process replays
the same links into the state they imply (:func:`dpkit.ledger.integrity.replay`).

It also checks each release's request hash. Run as ``python -m dpkit.ledger.hashcheck``
with one JSON object on standard input (``url``, ``key`` in hex, ``after``, ``upto``: the
links ``after < seq ≤ upto``); prints the problems as a JSON list. A process of its own
(not ``multiprocessing``), so that nothing of the caller's ``__main__`` is run again in it.
It reads over a connection of its own without taking the ledger's write lock (SQLite in WAL
mode lets a reader in while a writer holds it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["start", "finish", "check", "upto_seq"]


def upto_seq(found: Iterator[tuple[dict[str, Any], str, str]], upto: int
             ) -> Iterator[tuple[dict[str, Any], str, str]]:
    """The links of ``found`` (in ``seq`` order) up to ``seq`` ``upto``."""
    for link in found:
        seq = link[0]["seq"]
        if isinstance(seq, int) and seq > upto:
            return
        yield link


def check(url: str, key: bytes, after: int, upto: int) -> list[str]:
    """The hash problems of the links ``after < seq ≤ upto`` of the ledger at ``url``."""
    from sqlalchemy import create_engine

    from dpkit.ledger import chain
    from dpkit.ledger.integrity import links

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return chain.hash_problems(upto_seq(links(conn, after), upto), key, requests=True)
    finally:
        engine.dispose()


def start(url: str, key: bytes, after: int, upto: int) -> subprocess.Popen[str]:
    """Start the second process on the links ``after < seq ≤ upto``."""
    proc = subprocess.Popen([sys.executable, "-m", "dpkit.ledger.hashcheck"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"url": url, "key": key.hex(), "after": after, "upto": upto}))
    proc.stdin.close()
    return proc


def finish(proc: subprocess.Popen[str]) -> list[str] | None:
    """The second process's problems, or None if it failed (the caller then checks the
    hashes itself)."""
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    proc.stderr.read()
    if proc.wait() != 0:
        return None
    try:
        found = json.loads(out)
    except ValueError:
        return None
    return [str(p) for p in found] if isinstance(found, list) else None


def main() -> None:
    job = json.loads(sys.stdin.read())
    print(json.dumps(check(job["url"], bytes.fromhex(job["key"]), int(job["after"]),
                           int(job["upto"]))))


if __name__ == "__main__":
    main()
