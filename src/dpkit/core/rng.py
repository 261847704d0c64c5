"""The one source of randomness in dpkit (DESIGN.md §3.1).

Every random bit dpkit uses comes from this module. Bits come from a cryptographically secure
generator: AES-256 in counter mode under a fresh key and nonce read from the operating
system's CSPRNG (``os.urandom``, i.e. ``getrandom(2)``) for every large request and for every
64 KiB block that serves small requests (the CTR_DRBG construction of NIST SP 800-90A). A
forked child discards its parent's unused block, so no two processes share random bytes.

Seeded streams (tests only). :func:`random_bytes` is the one entry to the bits: every draw
of this module, every sampler of :mod:`dpkit.core.samplers` and through them every
mechanism, release, learner and session reads its bits there, and it is there that a seeded
stream is refused:

- :func:`deterministic_for_tests` makes a block *deterministic*: any draw inside it raises
  :class:`~dpkit.errors.InsecureRandomnessError`, and so does :func:`require_secure`. A
  release, a fit or a mechanism call refuses to run in it (tests of deterministic code paths
  and of that refusal use it).
- :func:`seeded_draws_for_tests` is the test-only door: a seeded, reproducible stream that
  the draws and samplers may read (tests of the samplers and of contribution bounding).
  :func:`require_secure` still raises inside it, so measurements and sessions refuse it too.
  No module of ``src/dpkit`` other than this one names it (``tests/test_test_stream.py``
  checks the source tree).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from dpkit.errors import InsecureRandomnessError

__all__ = [
    "random_bytes",
    "words",
    "uniform_below",
    "uniform_below_int",
    "bernoulli_rational",
    "coins",
    "uniforms",
    "deterministic_for_tests",
    "seeded_draws_for_tests",
    "is_secure",
    "require_secure",
]

_SMALL = 4096  # requests up to this size are served from a per-thread block
_BLOCK = 1 << 16
_local = threading.local()


def _ctr_bytes(n: int, key: bytes, nonce: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()
    return enc.update(bytes(n))


class _TestStream:
    """AES-CTR keyed by a hash of a seed: reproducible, for tests only. ``readable`` is True
    only for the stream of :func:`seeded_draws_for_tests`."""

    def __init__(self, seed: int | str | bytes, readable: bool) -> None:
        key = hashlib.sha256(repr(seed).encode()).digest()
        self._enc = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
        self.readable = readable

    def read(self, n: int) -> bytes:
        if not self.readable:
            raise InsecureRandomnessError(
                "random bits requested inside dpkit.core.rng.deterministic_for_tests: no "
                "mechanism, release or fit runs under the test stream (seeded draws for "
                "tests of the samplers: dpkit.core.rng.seeded_draws_for_tests)")
        return self._enc.update(bytes(n))


def _test_stream() -> _TestStream | None:
    return getattr(_local, "stream", None)


def is_secure() -> bool:
    """Return ``True`` unless a test-only seeded stream is active in this thread."""
    return _test_stream() is None


def require_secure() -> None:
    """Raise :class:`InsecureRandomnessError` if a test-only seeded stream is active.

    Measurements and sessions call it before they debit or draw anything, so they refuse
    both :func:`deterministic_for_tests` and :func:`seeded_draws_for_tests`.
    """
    if not is_secure():
        raise InsecureRandomnessError(
            "a test-only seeded stream is active; no measurement or release runs under it "
            "(leave dpkit.core.rng.deterministic_for_tests / seeded_draws_for_tests first)"
        )


@contextlib.contextmanager
def _stream(stream: _TestStream) -> Iterator[None]:
    previous = _test_stream()
    _local.stream = stream
    try:
        yield
    finally:
        _local.stream = previous


def deterministic_for_tests(seed: int | str | bytes) -> contextlib.AbstractContextManager[None]:
    """A block in which nothing random may run, for tests of deterministic code paths.

    Any draw inside the block raises :class:`~dpkit.errors.InsecureRandomnessError` (the
    check sits in :func:`random_bytes`, the one entry to the bits), so no mechanism, release,
    fit or session result can come out of it, seeded or not. :func:`is_secure` is False and
    :func:`require_secure` raises inside it. ``seed`` names the (unread) stream; tests that
    need reproducible draws use :func:`seeded_draws_for_tests`.
    """
    return _stream(_TestStream(seed, readable=False))


def seeded_draws_for_tests(seed: int | str | bytes) -> contextlib.AbstractContextManager[None]:
    """Test-only door: draws and samplers read a reproducible stream seeded by ``seed``.

    For tests of the samplers and of contribution bounding that need the same bits twice.
    :func:`require_secure` still raises inside it (measurements and sessions refuse it).
    Production code never calls it: ``tests/test_test_stream.py`` fails if any module of
    ``src/dpkit`` other than this one names it.
    """
    return _stream(_TestStream(seed, readable=True))


def _refuse_unreadable() -> None:
    stream = _test_stream()
    if stream is not None:
        stream.read(0)


def _fresh_block(n: int) -> bytes:
    return _ctr_bytes(n, os.urandom(32), os.urandom(16))


def _drop_buffer() -> None:
    _local.buffer, _local.offset = b"", 0


def random_bytes(n: int) -> bytes:
    """Return ``n`` random bytes from the CSPRNG: the one entry to dpkit's random bits.

    Raises :class:`~dpkit.errors.InsecureRandomnessError` inside
    :func:`deterministic_for_tests`; reads the seeded stream inside
    :func:`seeded_draws_for_tests` (tests only).

    Small requests are served from a per-thread block of AES-CTR output under a fresh key;
    each byte is handed out once, and a forked child drops its parent's block.
    """
    stream = _test_stream()
    if stream is not None:
        return stream.read(n)
    if n > _SMALL:
        return _fresh_block(n)
    buffer: bytes = getattr(_local, "buffer", b"")
    offset: int = getattr(_local, "offset", 0)
    if offset + n > len(buffer):
        buffer, offset = _fresh_block(_BLOCK), 0
        _local.buffer = buffer
    _local.offset = offset + n
    return buffer[offset : offset + n]


os.register_at_fork(after_in_child=_drop_buffer)


_WORD_TYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _word_view(n: int, bits: int) -> np.ndarray:
    """Read-only view of ``n`` random words (callers derive new arrays from it)."""
    return np.frombuffer(random_bytes(n * (bits // 8)), dtype=_WORD_TYPES[bits])


def words(n: int, bits: int = 64) -> np.ndarray:
    """Return ``n`` independent uniform random words of ``bits`` ∈ {8, 16, 32, 64} bits."""
    return _word_view(n, bits).copy()


def coins(n: int) -> np.ndarray:
    """Return ``n`` fair random bits as a boolean array."""
    packed = np.frombuffer(random_bytes((n + 7) // 8), dtype=np.uint8)
    return np.unpackbits(packed, count=n).astype(bool)


def uniforms(n: int) -> np.ndarray:
    """``n`` floats uniform on [0, 1), multiples of 2^-53 (the top 53 bits of a random word
    each): for post-processing draws (sampling records from a model, random starts), never
    for noise. Reads :func:`random_bytes`, so the test stream is refused like every draw."""
    return (_word_view(n, 64) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


def _word_bits(mask: int) -> int:
    for bits in (8, 16, 32):
        if mask < (1 << bits):
            return bits
    return 64


def _masks(bounds: np.ndarray) -> np.ndarray:
    """Per element, a mask 2^e − 1 ≥ bound − 1 (possibly one bit wider; still exact)."""
    top = (bounds - np.uint64(1)).astype(np.float64)
    _, exps = np.frexp(top)  # float rounding can only raise e, never lower it below bit_length
    exps = exps.astype(np.uint64)
    full = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
    small = np.minimum(exps, np.uint64(63))
    masks = (np.uint64(1) << small) - np.uint64(1)
    return np.where(exps >= 64, full, masks)


def uniform_below(bound: int | np.ndarray, size: int | None = None) -> np.ndarray:
    """Draw integers uniformly from ``{0, …, bound − 1}``, exactly.

    Returns unsigned integers: ``uint64`` for an array bound; for a scalar bound, the
    narrowest unsigned type that holds ``bound − 1``.

    Parameters
    ----------
    bound : int or ndarray of uint64
        Exclusive upper bound(s), each in ``[1, 2**64]``. An array gives one draw per element.
    size : int, optional
        Number of draws when ``bound`` is a scalar.

    Notes
    -----
    Rejection sampling from masked words: a word is masked to the smallest power-of-two range
    covering the bound and kept if it falls below it, so every value has probability exactly
    ``1/bound``. Acceptance is at least 1/4 per round.
    """
    if isinstance(bound, np.ndarray):
        return _uniform_below_array(bound.astype(np.uint64, copy=False))
    if size is None:
        raise TypeError("size is required for a scalar bound")
    bound = int(bound)
    if bound < 1 or bound > 1 << 64:
        raise ValueError(f"bound must be in [1, 2**64], got {bound}")
    if bound == 1:
        _refuse_unreadable()  # no bit is read, but a test stream is refused all the same
        return np.zeros(size, dtype=np.uint8)
    mask = (1 << (bound - 1).bit_length()) - 1
    bits = _word_bits(mask)
    typed_mask = _WORD_TYPES[bits](mask)
    if bound == mask + 1:  # a power of two: every masked word is already uniform
        return _word_view(size, bits) & typed_mask
    out = _word_view(size, bits) & typed_mask
    bad = np.flatnonzero(out >= bound)  # rejected words are redrawn in place
    while bad.size:
        redraw = _word_view(bad.size, bits) & typed_mask
        out[bad] = redraw
        bad = bad[redraw >= bound]
    return out


def _uniform_below_array(bounds: np.ndarray) -> np.ndarray:
    out = np.zeros(bounds.shape, dtype=np.uint64)
    todo = np.flatnonzero(bounds > 1)
    if todo.size == 0:
        _refuse_unreadable()
        return out
    masks = _masks(bounds[todo])
    bits = _word_bits(int(masks.max()))
    while todo.size:
        draw = _word_view(todo.size, bits).astype(np.uint64) & masks
        ok = draw < bounds[todo]
        out[np.compress(ok, todo)] = np.compress(ok, draw)
        todo, masks = np.compress(~ok, todo), np.compress(~ok, masks)
    return out


def uniform_below_int(bound: int) -> int:
    """Draw one arbitrary-size integer uniformly from ``{0, …, bound − 1}``, exactly."""
    if bound < 1:
        raise ValueError("bound must be positive")
    nbits = (bound - 1).bit_length()
    nbytes = (nbits + 7) // 8
    while True:
        value = int.from_bytes(random_bytes(nbytes), "little") & ((1 << nbits) - 1)
        if value < bound:
            return value


def bernoulli_rational(numer: int | np.ndarray, denom: int | np.ndarray, size: int | None = None
                       ) -> np.ndarray:
    """Bernoulli(numer/denom) draws, exactly: ``uniform_below(denom) < numer``."""
    if isinstance(denom, np.ndarray):
        return uniform_below(denom) < np.asarray(numer, dtype=np.uint64)
    if isinstance(numer, np.ndarray):
        return uniform_below(int(denom), numer.size) < numer.astype(np.uint64)
    return uniform_below(int(denom), size) < np.uint64(int(numer))
