"""The store interfaces, apart from their implementations (as Kafka Streams'
``org.apache.kafka.streams.state``): ``KeyValueStore``, ``WindowStore``, ``SessionStore``.

Every store keeps bytes, in key byte order; its typed methods take and give
Python keys and values through a serde (the changelog JSON format by default),
and ``write_raw`` takes changelog key and value bytes as they are, so a store
fills straight from a changelog topic. Range methods return ``StoreIterator``s:
use them in ``with`` blocks.

Example:
    >>> from statekit.stores import open_store
    >>> store = open_store("window", "counts", 0, key_columns=["player"],
    ...                    value_columns=["count"], window_size_ms=600_000)
    >>> isinstance(store, WindowStore), store.kind
    (True, 'window')
    >>> store.close()
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from statekit._lazy import pa, pd
from statekit.deprecation import renamed
from statekit.model.session_key import Session
from statekit.stores.iterators import StoreIterator
from statekit.stores.key_layout import KINDS

__all__ = ["KINDS", "KeyValueStore", "Session", "SessionStore", "StateStore", "WindowStore",
           "WindowedKey"]
#: Old names kept one release (a DeprecationWarning names the new one): old → (new, object).
RENAMED = {"SessionKey": ("Session", Session)}
__getattr__ = renamed(__name__, RENAMED)

#: A raw changelog record: key bytes and value bytes, or None (a tombstone: delete).
RawRecord = tuple[bytes, bytes | None]


class WindowedKey(NamedTuple):
    """A window store entry's key: the group keys and the window start (ms)."""

    key: dict
    start: int


class StateStore(ABC):
    """What every store has: identity, raw writes, checkpoint, iterators, lifecycle."""

    kind: str

    @property
    @abstractmethod
    def name(self) -> str:
        """The store name (the changelog topic is ``<app>-<name>-changelog``)."""

    @property
    @abstractmethod
    def partition(self) -> int:
        """The state partition this store holds (= its changelog partition)."""

    @property
    @abstractmethod
    def is_open(self) -> bool:
        """False once ``close()`` ran."""

    @property
    @abstractmethod
    def open_iterators(self) -> int:
        """How many iterators handed out are still open."""

    @abstractmethod
    def write_raw(self, records: Iterable[RawRecord]) -> int:
        """Write changelog records as they are (value None deletes); return how many.

        In order, in write batches: on a bad record the records before it are
        written and BadArgument names it.
        """

    @abstractmethod
    def get_raw(self, key: bytes) -> bytes | None:
        """The value bytes stored under the changelog key bytes ``key`` (None: no entry).

        The fastest point read: no iterator, no decoding (serving instances use it).
        """

    @abstractmethod
    def approximate_num_entries(self) -> int:
        """About how many entries the store holds (exact in memory, RocksDB's estimate)."""

    @abstractmethod
    def read_checkpoint(self) -> dict[int, int]:
        """Changelog partition → next offset to restore from (empty: from the start)."""

    @abstractmethod
    def write_checkpoint(self, offsets: Mapping[int, int]) -> None:
        """Flush the store, then record ``offsets`` as restored (atomically)."""

    @abstractmethod
    def to_arrow(self) -> pa.Table:
        """One row per entry, in key byte order: key columns, then value columns (window
        times as ``timestamp[ms]``), parsed in bulk (no Python object per row)."""

    @abstractmethod
    def to_pandas(self) -> pd.DataFrame:
        """One row per entry: decoded key columns, then value columns (times as datetime64)."""

    @abstractmethod
    def flush(self) -> None:
        """Make the writes so far durable (RocksDB: memtables to files)."""

    @abstractmethod
    def compact(self) -> None:
        """After a bulk load (a restore caught up): flush and rewrite the files into one
        sorted run (RocksDB's manual compaction), so that point reads touch one file."""

    @abstractmethod
    def close(self) -> None:
        """Flush, close open iterators (warning with ResourceWarning), release the store."""

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class KeyValueStore(StateStore):
    """Keys to values, in key byte order (Kafka Streams' ``KeyValueStore``)."""

    kind = "key-value"

    @abstractmethod
    def get(self, key: object) -> object | None:
        """The value of ``key``, or None."""

    @abstractmethod
    def put(self, key: object, value: object | None) -> None:
        """Set ``key`` to ``value`` (None deletes it)."""

    @abstractmethod
    def delete(self, key: object) -> object | None:
        """Remove ``key``; return the value it had (None if none)."""

    @abstractmethod
    def put_all(self, entries: Iterable[tuple[object, object | None]]) -> int:
        """Put many (key, value) pairs in write batches (value None deletes); return how many."""

    @abstractmethod
    def range(self, from_key: object | None = None,
              to_key: object | None = None) -> StoreIterator[tuple[object, object]]:
        """(key, value) pairs with ``from_key <= key <= to_key`` (None: unbounded)."""

    @abstractmethod
    def all(self) -> StoreIterator[tuple[object, object]]:
        """Every (key, value) pair, in key order."""

    @abstractmethod
    def prefix_scan(self, prefix: object) -> StoreIterator[tuple[object, object]]:
        """(key, value) pairs whose key starts with ``prefix`` (leading key columns or bytes)."""


class WindowStore(StateStore):
    """Values per key and window start, key-then-time ordered (Kafka Streams' ``WindowStore``)."""

    kind = "window"

    @abstractmethod
    def put(self, key: object, value: object | None, window_start_ms: int) -> None:
        """Set the value of ``key``'s window starting at ``window_start_ms`` (None deletes it)."""

    @abstractmethod
    def fetch(self, key: object, time_from: int, time_to: int,
              ) -> StoreIterator[tuple[int, object]]:
        """(window_start_ms, value) of ``key``'s windows starting in [time_from, time_to]."""

    @abstractmethod
    def fetch_all(self, time_from: int, time_to: int,
                  ) -> StoreIterator[tuple[WindowedKey, object]]:
        """((key, window_start_ms), value) of every window starting in [time_from, time_to]."""

    @abstractmethod
    def fetch_range(self, key_from: object | None, key_to: object | None, time_from: int,
                    time_to: int) -> StoreIterator[tuple[WindowedKey, object]]:
        """((key, window_start_ms), value) of the keys from ``key_from`` to ``key_to``
        (inclusive, in the store's key byte order; None: unbounded) whose windows start
        in [time_from, time_to] (Kafka Streams' ``fetch(keyFrom, keyTo, timeFrom, timeTo)``)."""

    @abstractmethod
    def all(self) -> StoreIterator[tuple[WindowedKey, object]]:
        """((key, window_start_ms), value) of every window, key then time order."""


class SessionStore(StateStore):
    """Aggregates per key and session, each under its ``Session(key, start, end)`` (the
    group keys as a dict, times in epoch ms): Kafka Streams' ``SessionStore``, with the
    same names and signatures as a processor's session store (``statekit.processor``)."""

    kind = "session"

    @abstractmethod
    def put(self, session: Session, value: object | None) -> None:
        """Set ``session``'s aggregate (None removes it), as Kafka Streams' ``put(Windowed<K>,
        AGG)``."""

    @abstractmethod
    def remove(self, session: Session) -> None:
        """Remove ``session`` (nothing if the store has no such session)."""

    @abstractmethod
    def fetch_session(self, key: object, start: int, end: int) -> object | None:
        """The aggregate of ``key``'s session [start, end] (None: no such session)."""

    @abstractmethod
    def find_sessions(self, key: object, earliest_session_end: int, latest_session_start: int,
                      ) -> StoreIterator[tuple[Session, object]]:
        """Sessions of ``key`` overlapping the range, as in Kafka Streams:

        end >= earliest_session_end and start <= latest_session_start, by start time.
        """

    @abstractmethod
    def fetch(self, key: object) -> StoreIterator[tuple[Session, object]]:
        """Every session of ``key``, by start time."""

    @abstractmethod
    def all(self) -> StoreIterator[tuple[Session, object]]:
        """Every session, key then start order."""
