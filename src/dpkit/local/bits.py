"""Bit-level helpers of the sketching protocols (RAPPOR, count-mean sketches, heavy hitters):
per-group bit counts of packed reports, and the fixed hash of arbitrary values to 32-bit
identifiers. No noise is drawn here: the protocols' packed coins come from
:func:`dpkit.mechanisms.randomized_response.response_bits`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

__all__ = ["group_bit_counts", "value_keys", "value_ids"]

_MANY_GROUPS = 4096  # above this, per-group byte histograms would be too large
_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.int64)


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


def value_keys(values: Iterable[object]) -> tuple[list[str], np.ndarray]:
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
