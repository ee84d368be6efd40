"""The window store, written once over any bytes ``Backend``.

A key is the changelog key: ``{<group keys>,"window_start":"<ISO>"[,"window_end":"<ISO>"]}``.
So ``fetch(key, from, to)`` seeks to ``{"player":"p07","window_start":"<from>"``
and reads up to ``<to>``; ``fetch_all`` reads every key and keeps those in time.

Example:
    >>> from statekit.stores import InMemoryWindowStore
    >>> store = InMemoryWindowStore("counts", key_columns=["player"], value_columns=["count"],
    ...                             window_size_ms=600_000)
    >>> for start in (0, 600_000, 1_200_000):
    ...     store.put({"player": "p07"}, {"count": start // 600_000}, start)
    >>> with store.fetch({"player": "p07"}, 600_000, 1_200_000) as it:
    ...     list(it)
    [(600000, {'count': 1}), (1200000, {'count': 2})]
"""

from __future__ import annotations

from statekit.errors import BadArgument
from statekit.model.changelog_record import TIME_COLUMNS, decode_json
from statekit.stores.backend import Backend
from statekit.stores.base import WindowedKey, WindowStore
from statekit.stores.iterators import SKIP, StoreIterator
from statekit.stores.key_layout import (
    END_FIELD,
    ISO_WIDTH,
    START_FIELD,
    check_time,
    check_time_range,
    iso_to_ms,
    ms_to_iso,
    object_prefix,
    successor,
    time_field,
)
from statekit.stores.metadata import StoreMetadata
from statekit.stores.serde import ChangelogJsonSerde
from statekit.stores.store import BackedStore


def group_serde(metadata: StoreMetadata, serde: ChangelogJsonSerde | None,
                value_columns: tuple[str, ...] | None) -> ChangelogJsonSerde:
    """The serde of a windowed store's group keys and values (must be the changelog JSON)."""
    if serde is None:
        group = [c for c in metadata.key_columns if c not in TIME_COLUMNS]
        return ChangelogJsonSerde(group, value_columns)
    if not isinstance(serde, ChangelogJsonSerde):
        raise BadArgument(f"serde of a {metadata.kind} store", serde,
                          "a ChangelogJsonSerde (window and session keys are changelog keys), "
                          "or None")
    return serde


class BackedWindowStore(BackedStore, WindowStore):
    """A ``WindowStore`` over ``backend``, keyed by changelog key bytes.

    Args:
        backend: the bytes.
        metadata: the store's identity and columns (kind ``window``); when its key
            columns end with ``window_end``, typed ``put`` needs ``window_size_ms``.
        serde: default: the changelog JSON of the group keys and the value columns.
    """

    def __init__(self, backend: Backend, metadata: StoreMetadata,
                 serde: ChangelogJsonSerde | None = None):
        super().__init__(backend, metadata)
        self.serde = group_serde(metadata, serde, metadata.value_columns)
        self._has_end = "window_end" in metadata.key_columns
        self.window_size_ms = metadata.window_size_ms

    def _prefix(self, key: object) -> bytes:
        return object_prefix(self.serde.encode_key(key))

    def _windowed(self, key: bytes, value: bytes) -> tuple[WindowedKey, object]:
        decoded = decode_json(key)
        start = decoded.pop("window_start")
        decoded.pop("window_end", None)
        return WindowedKey(decoded, iso_to_ms(start)), decode_json(value)

    def put(self, key: object, value: object | None, window_start_ms: int) -> None:
        start = check_time("window_start_ms", window_start_ms)
        data = self._prefix(key) + time_field(START_FIELD, start)
        if self._has_end:
            if self.window_size_ms is None:
                raise BadArgument("window_size_ms", None,
                                  "a window size: this store's keys hold window_end, so open it "
                                  "with window_size_ms=... to put typed windows")
            data += b"," + time_field(END_FIELD, start + self.window_size_ms)
        data += b"}"
        backend = self._open()
        if value is None:
            backend.delete(data)
        else:
            backend.put(data, self.serde.encode_value(value))

    def fetch(self, key: object, time_from: int, time_to: int,
              ) -> StoreIterator[tuple[int, object]]:
        start, end = check_time_range("time_from", time_from, "time_to", time_to)
        self._open()
        prefix = self._prefix(key)
        at = len(prefix) + len(START_FIELD)
        decode = self.serde.decode_value

        def convert(k: bytes, v: bytes) -> tuple[int, object]:
            return iso_to_ms(k[at:at + ISO_WIDTH]), decode(v)

        return self._iterate(prefix + time_field(START_FIELD, start),
                             prefix + time_field(START_FIELD, end) + b"\xff", convert)

    def fetch_all(self, time_from: int, time_to: int,
                  ) -> StoreIterator[tuple[WindowedKey, object]]:
        start, end = check_time_range("time_from", time_from, "time_to", time_to)
        self._open()
        low, high = ms_to_iso(start).encode(), ms_to_iso(end).encode()
        windowed = self._windowed

        def convert(k: bytes, v: bytes) -> object:
            at = k.find(START_FIELD) + len(START_FIELD)
            if low <= k[at:at + ISO_WIDTH] <= high:
                return windowed(k, v)
            return SKIP

        return self._iterate(None, None, convert)

    def fetch_range(self, key_from: object | None, key_to: object | None, time_from: int,
                    time_to: int) -> StoreIterator[tuple[WindowedKey, object]]:
        start, end = check_time_range("time_from", time_from, "time_to", time_to)
        self._open()
        lower = None if key_from is None else self._prefix(key_from)
        upper = None if key_to is None else successor(self._prefix(key_to))
        low, high = ms_to_iso(start).encode(), ms_to_iso(end).encode()
        windowed = self._windowed

        def convert(k: bytes, v: bytes) -> object:
            at = k.find(START_FIELD) + len(START_FIELD)
            if low <= k[at:at + ISO_WIDTH] <= high:
                return windowed(k, v)
            return SKIP

        return self._iterate(lower, upper, convert)

    def all(self) -> StoreIterator[tuple[WindowedKey, object]]:
        self._open()
        return self._iterate(None, None, self._windowed)
