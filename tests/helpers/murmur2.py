"""Kafka's murmur2 partitioner (Java's ``Utils.murmur2``), to check where records land.

statekit itself produces with librdkafka's ``murmur2_random`` partitioner; the tests
compute the same placement independently, here.

Example:
    >>> murmur2_partition(b"p07", 4)
    0
"""

from __future__ import annotations

from statekit.errors import BadArgument
from statekit.validate import whole_number

_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (Java): the 32-bit hash as a signed int."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    end = length - length % 4
    for i in range(0, end, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & _MASK
        k ^= k >> r
        k = (k * m) & _MASK
        h = ((h * m) & _MASK) ^ k
    rest = length % 4
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * m) & _MASK
    h ^= h >> 13
    h = (h * m) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition Java's default partitioner picks for ``key``: toPositive(murmur2) % n."""
    partitions = whole_number(partitions, "number of partitions", minimum=1)
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes | bytearray):
        raise BadArgument("partition key", key, "bytes or str (a None key has no fixed partition)")
    return (murmur2(bytes(key)) & 0x7FFFFFFF) % partitions


