"""The bytes a store keeps: a sorted map of key bytes to value bytes, one per backend.

``memory.MemoryBackend`` and ``rocksdb.RocksDBBackend`` implement it; the typed
stores (``keyvalue``, ``window``, ``session``) are written once, over it.

Example:
    >>> from statekit.stores.memory import MemoryBackend
    >>> backend = MemoryBackend()
    >>> backend.write([(b"b", b"2"), (b"a", b"1"), (b"c", None)])
    3
    >>> list(backend.scan(b"a", b"b"))
    [(b'a', b'1')]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping

from statekit.errors import BadArgument

RAW_ACCEPTED = "a (key, value) pair of bytes, the value None for a tombstone"


class Backend(ABC):
    """A sorted map of bytes; ``scan`` ranges are [lower, upper), None is unbounded."""

    @abstractmethod
    def get(self, key: bytes) -> bytes | None: ...

    @abstractmethod
    def put(self, key: bytes, value: bytes) -> None: ...

    @abstractmethod
    def delete(self, key: bytes) -> None: ...

    @abstractmethod
    def write(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Apply puts (and deletes, value None) in order; return how many.

        A bad record raises BadArgument after the records before it are written.
        """

    @abstractmethod
    def scan(self, lower: bytes | None, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """Entries with ``lower <= key < upper``, as of this call; ``close()`` releases them."""

    @abstractmethod
    def count(self) -> int:
        """About how many entries there are."""

    @abstractmethod
    def read_checkpoint(self) -> dict[int, int]: ...

    @abstractmethod
    def write_checkpoint(self, offsets: Mapping[int, int]) -> None: ...

    @abstractmethod
    def flush(self) -> None: ...

    @abstractmethod
    def compact(self) -> None:
        """Rewrite what is stored for the fastest reads (a bulk load done)."""

    @abstractmethod
    def close(self) -> None: ...


def bad_record(index: int, record: object) -> BadArgument:
    """The error for the ``index``-th raw record (0-based) that is not a bytes pair."""
    return BadArgument(f"raw record #{index}", record, RAW_ACCEPTED)
