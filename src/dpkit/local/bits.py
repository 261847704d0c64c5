"""Bit-level helpers of the sketching protocols (RAPPOR, count-mean sketches, heavy hitters):
exact bit-sliced Bernoulli draws into packed bit arrays, per-group bit counts of packed
reports, and the fixed hash of arbitrary values to 32-bit identifiers.

Bit-sliced Bernoulli (used for the m-bit reports of RAPPOR and the count-mean sketch): a
Bernoulli(c / 2^b) bit is the event W < c for W uniform on {0, …, 2^b − 1}. Each of the 64
lanes of a uint64 word holds one W, drawn one binary digit at a time, most significant
first, as one random word per digit; the comparison W < c is evaluated lane-parallel with
two masks (``lt``: decided, W < c; ``eq``: undecided, all digits so far equal c's) and a word
stops drawing once none of its lanes is undecided. Every lane is an exact Bernoulli(c/2^b)
draw, independent of the others; a dyadic probability with few significant digits (1/2,
3/4, 1/4) costs one or two random bits per draw.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import rng
from dpkit.errors import DomainError

__all__ = ["bernoulli_packed", "bernoulli_bits", "group_bit_counts", "value_keys", "value_ids",
           "dyadic_probability"]

_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_MANY_GROUPS = 4096  # above this, per-group byte histograms would be too large
_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.int64)


def dyadic_probability(x: Fraction, bits: int = 32) -> tuple[int, int]:
    """(c, b) with x = c / 2^b, b ≤ ``bits`` minimal. Raises DomainError if x is not such a
    dyadic rational in [0, 1]."""
    if not 0 <= x <= 1:
        raise DomainError("a probability must lie in [0, 1]")
    d = x.denominator
    if d & (d - 1) or d.bit_length() - 1 > bits:
        raise DomainError(f"the probability {x} is not a multiple of 2^-{bits}")
    return x.numerator, d.bit_length() - 1


def _words(n: int) -> np.ndarray:
    """n uniform uint64 words, a read-only view of :func:`dpkit.core.rng.random_bytes`."""
    return np.frombuffer(rng.random_bytes(8 * n), dtype=np.uint64)


def bernoulli_packed(prob: Fraction, nwords: int) -> np.ndarray:
    """``nwords`` uint64 words whose 64·nwords bits are independent exact Bernoulli(prob)
    draws (prob a multiple of 2^-32; see the module docstring)."""
    c, b = dyadic_probability(Fraction(prob))
    if c == 0:
        return np.zeros(nwords, dtype=np.uint64)
    if c == 1 << b:
        return np.full(nwords, _ONES, dtype=np.uint64)
    digits = [(c >> (b - 1 - j)) & 1 for j in range(b)]
    last = max(j for j, d in enumerate(digits) if d)  # after c's last 1, W < c cannot happen
    lt = np.zeros(nwords, dtype=np.uint64)
    eq = np.full(nwords, _ONES, dtype=np.uint64)
    active: np.ndarray | None = None  # None: every word is still drawing (no indexing)
    for j in range(last + 1):
        r = _words(nwords if active is None else active.size)
        below = np.invert(r)  # lanes whose digit is 0
        if digits[j]:
            below &= eq  # undecided lanes with digit 0 < 1: W < c decided
            if active is None:
                lt |= below
            else:
                lt[active] |= below
            eq &= r
        else:
            eq &= below
        count = int(np.count_nonzero(eq))
        if count == eq.size or active is None and count > nwords // 2:
            continue  # dead words have eq = 0 and stay unchanged: keep the dense form
        alive = np.flatnonzero(eq)
        active = alive if active is None else active[alive]
        eq = eq[alive]
        if not active.size:
            break
    return lt


def bernoulli_bits(prob: Fraction, shape: tuple[int, int]) -> np.ndarray:
    """Packed bits, uint8 array (n, m/8) (m a multiple of 8; bit t of byte s is bit 8s + t of
    the row), each an independent exact Bernoulli(prob) draw."""
    n, m = shape
    nbytes = n * (m // 8)
    words = bernoulli_packed(prob, (nbytes + 7) // 8)
    return words.view(np.uint8)[:nbytes].reshape(n, m // 8)


def group_bit_counts(groups: np.ndarray, bits: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group g and bit i, the number of rows of group g whose bit i is set: int64 array
    (n_groups, m) from packed rows ``bits`` (n, m/8) and ``groups`` (n,) in [0, n_groups)."""
    groups = np.asarray(groups, dtype=np.int64)
    bits = np.asarray(bits, dtype=np.uint8)
    if n_groups > _MANY_GROUPS:
        return _sorted_bit_counts(groups, bits, n_groups)
    out = np.empty((n_groups, bits.shape[1] * 8), dtype=np.int64)
    base = groups * 256
    for start in range(0, bits.shape[1], 16):  # transpose 16 byte columns at a time
        cols = np.ascontiguousarray(bits[:, start: start + 16].T)
        for i, col in enumerate(cols):
            s = start + i
            hist = np.bincount(base + col, minlength=n_groups * 256).reshape(n_groups, 256)
            out[:, 8 * s: 8 * s + 8] = hist @ _BYTE_BITS
    return out


def _sorted_bit_counts(groups: np.ndarray, bits: np.ndarray, n_groups: int) -> np.ndarray:
    """group_bit_counts for many groups (a byte histogram per group would not fit): rows
    sorted by group, unpacked a chunk at a time and summed per run of equal groups."""
    out = np.zeros((n_groups, bits.shape[1] * 8), dtype=np.int64)
    order = np.argsort(groups, kind="stable")
    for s in range(0, order.size, 1 << 16):
        rows = order[s: s + (1 << 16)]
        g = groups[rows]
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        unpacked = np.unpackbits(bits[rows], axis=1, bitorder="little")
        out[g[starts]] += np.add.reduceat(unpacked, starts, axis=0, dtype=np.int64)
    return out


def value_keys(values: Any) -> tuple[list[str], np.ndarray]:
    """The distinct values' keys (``str(value)``) and each value's index among them: values
    are identified by their text, so 1 and "1" are the same value."""
    arr = values.reshape(-1) if isinstance(values, np.ndarray) else np.asarray(
        list(values), dtype=object).reshape(-1)
    try:
        uniq, inverse = np.unique(arr, return_inverse=True)
    except TypeError:  # mixed types: compare by text
        uniq, inverse = np.unique(np.array([str(v) for v in arr.tolist()], dtype=object),
                                  return_inverse=True)
    keys = [str(v) for v in uniq.tolist()]
    if len(set(keys)) != len(keys):  # e.g. 1 and "1": merge by text
        texts, inverse2 = np.unique(np.array(keys, dtype=object), return_inverse=True)
        return [str(t) for t in texts.tolist()], inverse2[inverse.reshape(-1)]
    return keys, inverse.reshape(-1).astype(np.int64)


def digest(key: str, salt: bytes = b"", size: int = 64) -> bytes:
    """A fixed (public, not random) hash of a value's key: BLAKE2b."""
    return hashlib.blake2b(key.encode("utf-8"), digest_size=size, person=salt[:16]).digest()


def value_ids(keys: list[str], salt: bytes = b"") -> np.ndarray:
    """32-bit identifiers (uint64 array) of value keys, by BLAKE2b (two distinct keys share
    an identifier with probability about 2^-32)."""
    return np.array([int.from_bytes(digest(k, salt, 4), "little") for k in keys],
                    dtype=np.uint64)
