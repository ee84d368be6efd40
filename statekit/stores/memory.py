"""In-memory stores: a dict of bytes plus its keys kept sorted (``bisect``) for scans.

New and deleted keys are merged into the sorted keys lazily, at the next scan
(one by one when few, by a re-sort when many), so bulk writes stay O(1) each.
A scan sees the keys present when it starts (it copies their range).

Example:
    >>> store = InMemoryKeyValueStore("totals", key_columns=["player"])
    >>> store.put_all([({"player": "b"}, {"total": 2}), ({"player": "a"}, {"total": 1})])
    2
    >>> with store.all() as it:
    ...     list(it)
    [({'player': 'a'}, {'total': 1}), ({'player': 'b'}, {'total': 2})]
    >>> store.write_checkpoint({0: 2}); store.read_checkpoint()
    {0: 2}
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Mapping, Sequence

from statekit.stores.backend import Backend, bad_record
from statekit.stores.key_layout import store_columns
from statekit.stores.keyvalue import BackedKeyValueStore
from statekit.stores.metadata import StoreMetadata
from statekit.stores.offset_checkpoint import OffsetCheckpointFile
from statekit.stores.serde import ChangelogJsonSerde, Serde
from statekit.stores.session_store import BackedSessionStore
from statekit.stores.window import BackedWindowStore

#: Above this many pending key changes a scan re-sorts all keys instead of inserting each.
_RESORT_AFTER = 1000


class MemoryBackend(Backend):
    """A sorted bytes map in memory; the checkpoint is kept in memory too."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._sorted: list[bytes] = []
        self._added: set[bytes] = set()  # in _data, not yet in _sorted
        self._removed: set[bytes] = set()  # in _sorted, no longer in _data
        self._checkpoint: dict[int, int] = {}

    def _keys(self) -> list[bytes]:
        added, removed = self._added, self._removed
        if added or removed:
            if len(added) + len(removed) > _RESORT_AFTER:
                self._sorted = sorted(self._data)
            else:
                keys = self._sorted
                for key in removed:
                    i = bisect_left(keys, key)
                    if i < len(keys) and keys[i] == key:
                        del keys[i]
                for key in added:
                    insort(keys, key)
            added.clear()
            removed.clear()
        return self._sorted

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        if type(key) is not bytes or type(value) is not bytes:
            raise bad_record(0, (key, value))
        if key not in self._data:
            self._added.add(key)
        self._data[key] = value

    def delete(self, key: bytes) -> None:
        if self._data.pop(key, None) is not None:
            if key in self._added:
                self._added.discard(key)
            else:
                self._removed.add(key)

    def write(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        data, added, removed = self._data, self._added, self._removed
        count = 0
        for record in records:
            try:
                key, value = record
            except (TypeError, ValueError):
                raise bad_record(count, record) from None
            if type(key) is not bytes:
                raise bad_record(count, record)
            if value is None:
                if data.pop(key, None) is not None:
                    if key in added:
                        added.discard(key)
                    else:
                        removed.add(key)
            elif type(value) is bytes:
                if key not in data:
                    added.add(key)
                data[key] = value
            else:
                raise bad_record(count, record)
            count += 1
        return count

    def scan(self, lower: bytes | None, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        keys = self._keys()
        lo = 0 if lower is None else bisect_left(keys, lower)
        hi = len(keys) if upper is None else bisect_left(keys, upper)
        return self._entries(keys[lo:hi])

    def _entries(self, keys: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
        data = self._data
        for key in keys:
            value = data.get(key)
            if value is not None:
                yield key, value

    def count(self) -> int:
        return len(self._data)

    def read_checkpoint(self) -> dict[int, int]:
        return dict(self._checkpoint)

    def write_checkpoint(self, offsets: Mapping[int, int]) -> None:
        self._checkpoint = OffsetCheckpointFile.validate(offsets)

    def compact(self) -> None:
        pass  # a dict: nothing to rewrite

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._data, self._sorted = {}, []
        self._added.clear()
        self._removed.clear()


def _metadata(kind: str, name: str, partition: int, key_columns: Sequence[str],
              value_columns: Sequence[str] | None, window_size_ms: int | None,
              changelog_topic: str | None) -> StoreMetadata:
    keys, values = store_columns(kind, key_columns, value_columns, window_size_ms)
    return StoreMetadata(name, kind, partition, keys, values, changelog_topic, window_size_ms)


class InMemoryKeyValueStore(BackedKeyValueStore):
    """A key-value store in memory (see ``keyvalue.BackedKeyValueStore``)."""

    def __init__(self, name: str, partition: int = 0, *, key_columns: Sequence[str],
                 value_columns: Sequence[str] | None = None, serde: Serde | None = None,
                 changelog_topic: str | None = None):
        meta = _metadata("key-value", name, partition, key_columns, value_columns, None,
                         changelog_topic)
        super().__init__(MemoryBackend(), meta, serde)


class InMemoryWindowStore(BackedWindowStore):
    """A window store in memory (see ``window.BackedWindowStore``)."""

    def __init__(self, name: str, partition: int = 0, *, key_columns: Sequence[str],
                 value_columns: Sequence[str] | None = None, window_size_ms: int | None = None,
                 serde: ChangelogJsonSerde | None = None, changelog_topic: str | None = None):
        meta = _metadata("window", name, partition, key_columns, value_columns, window_size_ms,
                         changelog_topic)
        super().__init__(MemoryBackend(), meta, serde)


class InMemorySessionStore(BackedSessionStore):
    """A session store in memory (see ``session.BackedSessionStore``)."""

    def __init__(self, name: str, partition: int = 0, *, key_columns: Sequence[str],
                 value_columns: Sequence[str] | None = None,
                 serde: ChangelogJsonSerde | None = None, changelog_topic: str | None = None):
        meta = _metadata("session", name, partition, key_columns, value_columns, None,
                         changelog_topic)
        super().__init__(MemoryBackend(), meta, serde)
