"""Spark's ``Murmur3_x86_32``, bit for bit: one int, long or byte string, or whole NumPy arrays.

The hash Spark's ``HashPartitioning`` (and SQL's ``hash()``) applies to each value:
``hashInt`` for 32-bit words, ``hashLong`` for 64-bit ones (the low word, then the high
word), and ``hashUnsafeBytes`` for strings and binary, which, unlike reference Murmur3,
mixes each trailing byte on its own, as a signed int. Each takes the running hash as its
seed and gives a signed 32-bit int; the ``np_`` forms hash a column at once (uint32
arrays of running hashes in and out). Which Spark value hashes how is
``statekit.serve.routing.value_hash``.

Example:
    >>> hash_int(1, 42), hash_long(1, 42), hash_bytes(b"a", 42)
    (-559580957, -1712319331, 1485273170)
    >>> import numpy as np
    >>> np_hash_bytes([b"a"], np.full(1, 42, dtype=np.uint32)).view(np.int32).tolist()
    [1485273170]
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

MASK = 0xFFFFFFFF  # a 32-bit word
_C1, _C2 = 0xCC9E2D51, 0x1B873593


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & MASK
    k1 = _rotl(k1, 15)
    return (k1 * _C2) & MASK


def _mix_h1(h1: int, k1: int) -> int:
    h1 ^= k1
    h1 = _rotl(h1, 13)
    return (h1 * 5 + 0xE6546B64) & MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & MASK
    return h1 ^ (h1 >> 16)


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def hash_int(value: int, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (signed 32-bit result)."""
    h1 = _mix_h1(seed & MASK, _mix_k1(value & MASK))
    return _signed(_fmix(h1, 4))


def hash_long(value: int, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashLong``: the low word, then the high word."""
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & MASK, _mix_k1(value & MASK))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    return _signed(_fmix(h1, 8))


def hash_bytes(data: bytes, seed: int) -> int:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes`` (each trailing byte mixed on its own).

    ``_mix_k1`` and ``_mix_h1`` are inlined, and a trailing byte's ``_mix_k1`` comes from a
    table: a point query hashes its key on every call.
    """
    n = len(data)
    aligned = n - n % 4
    h1 = seed & MASK
    if aligned:
        words = _WORDS.get(aligned)
        if words is None:
            words = _WORDS[aligned] = struct.Struct(f"<{aligned // 4}I")
        for k1 in words.unpack_from(data):
            k1 = (k1 * _C1) & MASK
            k1 = ((k1 << 15) | (k1 >> 17)) & MASK
            h1 ^= (k1 * _C2) & MASK
            h1 = ((h1 << 13) | (h1 >> 19)) & MASK
            h1 = (h1 * 5 + 0xE6546B64) & MASK
    for byte in data[aligned:]:
        h1 ^= _BYTE_K1[byte]
        h1 = ((h1 << 13) | (h1 >> 19)) & MASK
        h1 = (h1 * 5 + 0xE6546B64) & MASK
    return _signed(_fmix(h1, n))


#: ``_mix_k1`` of each trailing byte, as the signed int Spark mixes it
_BYTE_K1 = [_mix_k1((b - 256 if b > 127 else b) & MASK) for b in range(256)]
_WORDS: dict[int, struct.Struct] = {}  # "<nI" of each aligned length met


# --- whole arrays (NumPy uint32 running hashes) -----------------------------------------
def _np_mix_k1(k1: np.ndarray) -> np.ndarray:
    k1 = k1 * _C1
    k1 = (k1 << 15) | (k1 >> 17)
    return k1 * _C2


def _np_mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    h1 = h1 ^ k1
    h1 = (h1 << 13) | (h1 >> 19)
    return h1 * 5 + 0xE6546B64


def _np_fmix(h1: np.ndarray, length: int) -> np.ndarray:
    h1 = h1 ^ length
    h1 ^= h1 >> 16
    h1 *= 0x85EBCA6B
    h1 ^= h1 >> 13
    h1 *= 0xC2B2AE35
    return h1 ^ (h1 >> 16)


def np_hash_int(values: np.ndarray, h: np.ndarray) -> np.ndarray:
    import numpy as np

    words = values.astype(np.int64).astype(np.uint32)  # two's complement low word
    return _np_fmix(_np_mix_h1(h, _np_mix_k1(words)), 4)


def np_hash_long(values: np.ndarray, h: np.ndarray) -> np.ndarray:
    import numpy as np

    bits = values.astype(np.int64).view(np.uint64)
    h = _np_mix_h1(h, _np_mix_k1((bits & MASK).astype(np.uint32)))
    h = _np_mix_h1(h, _np_mix_k1((bits >> np.uint64(32)).astype(np.uint32)))
    return _np_fmix(h, 8)


def np_hash_bytes(data: list[bytes], h: np.ndarray) -> np.ndarray:
    """``hashUnsafeBytes`` of each item, seeded by ``h``: one NumPy pass per byte length."""
    import numpy as np

    lengths = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
    out = h.copy()
    for n in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == n)
        hh = out[rows]
        if n:
            block = np.frombuffer(b"".join([data[i] for i in rows]), dtype=np.uint8)
            block = block.reshape(len(rows), n)
            aligned = n - n % 4
            words = np.ascontiguousarray(block[:, :aligned]).view("<u4").astype(np.uint32)
            for j in range(aligned // 4):
                hh = _np_mix_h1(hh, _np_mix_k1(words[:, j]))
            for j in range(aligned, n):  # each trailing byte as a signed int
                hh = _np_mix_h1(hh, _np_mix_k1(block[:, j].view(np.int8).astype(np.uint32)))
        out[rows] = _np_fmix(hh, n)
    return out

