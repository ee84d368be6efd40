"""Local state stores with the Kafka Streams API shape: key-value, window and session
stores, in memory or in RocksDB, filled straight from a statekit changelog topic.

Interfaces (``base``) are apart from implementations (``memory``, ``rocksdb``);
stores keep bytes in key order, and the bytes of window and session stores are
the changelog's key and value bytes, so ``write_raw`` restores from a changelog.
A session store's entries are keyed by ``Session(key, start, end)``, the same type and
the same method names and signatures as a processor's session store (``statekit.processor``),
as Kafka Streams has one ``SessionStore``.

Example:
    >>> from statekit.stores import open_store
    >>> store = open_store("session", "sessions", 0, key_columns=["player"],
    ...                    value_columns=["window_end", "count"])
    >>> store.write_raw([(b'{"player":"p07","window_start":"2026-01-05T10:00:00.000Z"}',
    ...                   b'{"window_end":"2026-01-05T10:04:00.000Z","count":4}')])
    1
    >>> store.to_pandas()
      player        window_start          window_end  count
    0    p07 2026-01-05 10:00:00 2026-01-05 10:04:00      4
"""

from statekit.deprecation import renamed
from statekit.errors import StoreClosed, StoreCorrupt, StoreLocked, StoreMismatch
from statekit.stores.base import (
    KINDS,
    RENAMED,
    KeyValueStore,
    Session,
    SessionStore,
    StateStore,
    WindowedKey,
    WindowStore,
)
from statekit.stores.factory import StoreColumns, open_store
from statekit.stores.iterators import StoreIterator
from statekit.stores.memory import InMemoryKeyValueStore, InMemorySessionStore, InMemoryWindowStore
from statekit.stores.metadata import STORE_FORMAT_VERSION, StoreMetadata
from statekit.stores.rocksdb import RocksDBKeyValueStore, RocksDBSessionStore, RocksDBWindowStore
from statekit.stores.serde import ChangelogJsonSerde, Serde

__all__ = [
    "KINDS",
    "STORE_FORMAT_VERSION",
    "ChangelogJsonSerde",
    "InMemoryKeyValueStore",
    "InMemorySessionStore",
    "InMemoryWindowStore",
    "KeyValueStore",
    "RocksDBKeyValueStore",
    "RocksDBSessionStore",
    "RocksDBWindowStore",
    "Serde",
    "Session",
    "SessionStore",
    "StateStore",
    "StoreClosed",
    "StoreColumns",
    "StoreCorrupt",
    "StoreIterator",
    "StoreLocked",
    "StoreMetadata",
    "StoreMismatch",
    "WindowStore",
    "WindowedKey",
    "open_store",
]
__getattr__ = renamed(__name__, RENAMED)  # SessionKey: now Session
