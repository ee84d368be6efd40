"""The key-value store, written once over any bytes ``Backend``.

Example:
    >>> from statekit.stores import InMemoryKeyValueStore
    >>> store = InMemoryKeyValueStore("totals", key_columns=["region", "player"],
    ...                               value_columns=["total"])
    >>> store.put({"region": "eu", "player": "p07"}, {"total": 5})
    >>> store.put({"region": "eu", "player": "p09"}, {"total": 2})
    >>> store.get({"region": "eu", "player": "p07"})
    {'total': 5}
    >>> with store.prefix_scan({"region": "eu"}) as it:
    ...     [key["player"] for key, value in it]
    ['p07', 'p09']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from statekit._lazy import pa, pd
from statekit.changelog.arrow import parse_times
from statekit.errors import BadArgument
from statekit.stores.backend import Backend
from statekit.stores.base import KeyValueStore
from statekit.stores.iterators import StoreIterator
from statekit.stores.key_layout import successor
from statekit.stores.metadata import StoreMetadata
from statekit.stores.serde import ChangelogJsonSerde, Serde
from statekit.stores.store import BackedStore


class BackedKeyValueStore(BackedStore, KeyValueStore):
    """A ``KeyValueStore`` over ``backend``; keys and values through ``serde``.

    Args:
        backend: the bytes.
        metadata: the store's identity and columns (kind ``key-value``).
        serde: default: the changelog JSON of the metadata's key and value columns.
    """

    def __init__(self, backend: Backend, metadata: StoreMetadata, serde: Serde | None = None):
        super().__init__(backend, metadata)
        if serde is not None and not isinstance(serde, Serde):
            raise BadArgument("serde", serde, "a statekit.stores.serde.Serde, or None")
        self.serde = serde or ChangelogJsonSerde(metadata.key_columns, metadata.value_columns)

    def _decode(self, key: bytes, value: bytes) -> tuple[object, object]:
        return self.serde.decode_key(key), self.serde.decode_value(value)

    def _row(self, key: bytes, value: bytes) -> dict:
        decoded_key, decoded_value = self._decode(key, value)
        if isinstance(decoded_key, Mapping) and isinstance(decoded_value, Mapping):
            return {**decoded_key, **decoded_value}
        return {"key": decoded_key, "value": decoded_value}

    @property
    def _json_bytes(self) -> bool:
        """True when the bytes are the changelog JSON (bulk reads parse them in C++)."""
        return type(self.serde) is ChangelogJsonSerde

    def to_arrow(self) -> pa.Table:
        if self._json_bytes:
            return super().to_arrow()
        return pa.Table.from_pandas(self.to_pandas(), preserve_index=False)

    def to_pandas(self) -> pd.DataFrame:
        if self._json_bytes:
            return super().to_pandas()
        with self._iterate(None, None, self._row) as rows:  # another serde: row by row
            return parse_times(pd.DataFrame.from_records(list(rows)))

    def get(self, key: object) -> object | None:
        data = self._open().get(self.serde.encode_key(key))
        return None if data is None else self.serde.decode_value(data)

    def put(self, key: object, value: object | None) -> None:
        backend, data = self._open(), self.serde.encode_key(key)
        if value is None:
            backend.delete(data)
        else:
            backend.put(data, self.serde.encode_value(value))

    def delete(self, key: object) -> object | None:
        backend, data = self._open(), self.serde.encode_key(key)
        old = backend.get(data)
        if old is None:
            return None
        backend.delete(data)
        return self.serde.decode_value(old)

    def put_all(self, entries: Iterable[tuple[object, object | None]]) -> int:
        serde, backend = self.serde, self._open()
        return backend.write(
            (serde.encode_key(k), None if v is None else serde.encode_value(v))
            for k, v in entries)

    def range(self, from_key: object | None = None,
              to_key: object | None = None) -> StoreIterator[tuple[object, object]]:
        self._open()
        lower = None if from_key is None else self.serde.encode_key(from_key)
        last = None if to_key is None else self.serde.encode_key(to_key)
        if lower is not None and last is not None and lower > last:
            raise BadArgument("range from_key", from_key,
                              f"a key not after to_key={to_key!r} in the store's byte order")
        return self._iterate(lower, None if last is None else last + b"\x00", self._decode)

    def all(self) -> StoreIterator[tuple[object, object]]:
        return self.range(None, None)

    def prefix_scan(self, prefix: object) -> StoreIterator[tuple[object, object]]:
        self._open()
        data = prefix if isinstance(prefix, bytes) else self.serde.encode_key_prefix(prefix)
        return self._iterate(data or None, successor(data), self._decode)


def frame_entries(frame: pd.DataFrame, key_columns, value_columns) -> list[tuple[dict, dict]]:
    """The rows of ``frame`` as ``(key, value)`` dicts for ``put_all``: the key columns, then
    the value columns the frame has (others, such as ``partition``, left out).

    Example:
        >>> frame_entries(pd.DataFrame({"player": ["p07"], "total": [5], "partition": [1]}),
        ...               ["player"], ["total"])
        [({'player': 'p07'}, {'total': 5})]
    """
    values = [c for c in (value_columns or ()) if c in frame.columns]
    missing = [c for c in key_columns if c not in frame.columns]
    if missing:
        raise BadArgument("entries", f"a frame without {missing}",
                          f"a frame with the store's key columns {list(key_columns)}")
    rows = frame[list(key_columns) + values].to_dict("records")
    return [({c: row[c] for c in key_columns}, {c: row[c] for c in values}) for row in rows]
