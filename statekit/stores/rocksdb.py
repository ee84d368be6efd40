"""RocksDB stores (``rocksdict``, raw bytes mode), one directory per store partition.

Directory layout: ``statekit-store.json`` (who the store is, ``metadata_file``),
``statekit-store.checkpoint`` (restored changelog offsets, ``offset_checkpoint``)
and ``rocksdb/``.
Writes go through write batches with RocksDB's write-ahead log off: the
changelog is the durable copy, and ``write_checkpoint`` and ``close`` flush the
memtables before they record anything, so after a crash the store restores
from its last checkpoint (replaying a changelog is idempotent).

Reads go through one LRU block cache that every store of the process shares
(``shared_block_cache``, ``BLOCK_CACHE_BYTES``), as Kafka Streams' bounded-memory
config shares one across its stores: many stores stay within one budget, and a
store that fits is read from memory once ``compact()`` has warmed it.

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with RocksDBWindowStore(folder, "counts", 0, key_columns=["player"],
    ...                         value_columns=["count"], window_size_ms=600_000) as store:
    ...     store.write_raw([(b'{"player":"p07","window_start":"1970-01-01T00:10:00.000Z",'
    ...                       b'"window_end":"1970-01-01T00:20:00.000Z"}', b'{"count":3}')])
    1
    >>> with RocksDBWindowStore(folder, "counts", 0) as store:   # columns from the directory
    ...     with store.fetch({"player": "p07"}, 0, 600_000) as it:
    ...         list(it)
    [(600000, {'count': 3})]
    >>> import shutil; shutil.rmtree(folder)
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path

from rocksdict import (
    BlockBasedOptions,
    Cache,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from statekit.errors import BadArgument, StoreLocked, StoreMismatch
from statekit.stores.backend import Backend, bad_record
from statekit.stores.key_layout import store_columns
from statekit.stores.keyvalue import BackedKeyValueStore
from statekit.stores.metadata import StoreMetadata
from statekit.stores.metadata_file import METADATA_FILE, StoreMetadataFile
from statekit.stores.offset_checkpoint import OffsetCheckpointFile
from statekit.stores.pinning import SstBytes
from statekit.stores.serde import ChangelogJsonSerde, Serde
from statekit.stores.session_store import BackedSessionStore
from statekit.stores.window import BackedWindowStore

DB_DIRECTORY = "rocksdb"
#: Records per RocksDB write batch in ``write``.
BATCH_SIZE = 50_000
#: ``count()`` (``approximate_num_entries``) counts a store of fewer keys exactly (one scan
#: that stops here, a few ms); a larger one answers RocksDB's estimate, at least this.
COUNTED_UP_TO = 10_000
#: The capacity of the block cache all RocksDB stores of this process share (an LRU cache
#: takes memory as it fills, up to this). Set it before the first store opens.
BLOCK_CACHE_BYTES = 256 * 2**20
_cache: Cache | None = None
_cache_lock = threading.Lock()


def shared_block_cache() -> Cache:
    """The one block cache of this process's RocksDB stores (made on first use).

    Example:
        >>> shared_block_cache() is shared_block_cache()
        True
    """
    global _cache
    with _cache_lock:
        if _cache is None:
            _cache = Cache(BLOCK_CACHE_BYTES)
        return _cache


class RocksDBBackend(Backend):
    """A sorted bytes map in a RocksDB database (``rocksdict.Rdict`` in raw mode).

    Args:
        directory: the store directory (the database is its ``rocksdb/``).
        disable_wal: skip RocksDB's write-ahead log (the changelog is the durable copy).
        batch_size: records per write batch in ``write``.
    """

    def __init__(self, directory: str | os.PathLike, *, disable_wal: bool = True,
                 batch_size: int = BATCH_SIZE):
        self.directory = Path(directory)
        self._checkpoint = OffsetCheckpointFile(self.directory)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        table = BlockBasedOptions()
        table.set_block_cache(shared_block_cache())
        options.set_block_based_table_factory(table)
        path = str(self.directory / DB_DIRECTORY)
        try:
            self._db = Rdict(path, options)
        except Exception as exc:  # rocksdict raises a bare Exception for RocksDB errors
            if "lock" in str(exc).lower():
                raise StoreLocked(self.directory, str(exc)) from exc
            raise
        self._write_options = WriteOptions()
        self._write_options.disable_wal = disable_wal
        self.batch_size = batch_size

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._db.put(key, value, self._write_options)

    def delete(self, key: bytes) -> None:
        self._db.delete(key, self._write_options)

    def write(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        db, options, size = self._db, self._write_options, self.batch_size
        written = pending = 0
        batch = WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete
        record = None
        try:
            for record in records:
                key, value = record
                if value is None:
                    delete(key)
                else:
                    put(key, value)
                pending += 1
                if pending == size:
                    db.write(batch, options)
                    written, pending = written + pending, 0
                    batch = WriteBatch(raw_mode=True)
                    put, delete = batch.put, batch.delete
        except (TypeError, ValueError, KeyError) as exc:  # rocksdict: KeyError for a bad key
            if pending:  # the records before the bad one
                db.write(batch, options)
            if exc.__traceback__ is not None and exc.__traceback__.tb_next is not None:
                raise  # raised inside `records` (e.g. by a serde), not by a record here
            raise bad_record(written + pending, record) from exc
        if pending:
            db.write(batch, options)
        return written + pending

    def scan(self, lower: bytes | None, upper: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        read_options = ReadOptions()
        if upper is not None:
            read_options.set_iterate_upper_bound(upper)
        return self._entries(self._db.items(from_key=lower, read_opt=read_options), read_options)

    @staticmethod
    def _entries(items: Iterator[tuple[bytes, bytes]],
                 read_options: ReadOptions) -> Iterator[tuple[bytes, bytes]]:
        # A generator: close() drops the RocksDB iterator, which pins the database open.
        # It holds read_options too: RocksDB reads the upper bound as long as it iterates.
        try:
            yield from items
        finally:
            del items, read_options

    def count(self) -> int:
        """About how many entries: RocksDB's ``estimate-num-keys`` checked against a scan of
        at most ``COUNTED_UP_TO`` keys. The estimate (entries minus deletes, file by file) is
        exact after a compaction and can be anything after many writes: each put of a key
        counts again, each delete subtracts even when its key was already gone — a store
        holding 170 rows after a changelog full of tombstones estimates 0. So a store of
        fewer keys than the scan's bound is counted exactly, and a larger one answers the
        estimate, never less than the keys the scan saw."""
        counted = sum(1 for _ in islice(self._db.keys(), COUNTED_UP_TO))
        if counted < COUNTED_UP_TO:
            return counted
        return max(counted, self._db.property_int_value("rocksdb.estimate-num-keys") or 0)

    def read_checkpoint(self) -> dict[int, int]:
        return self._checkpoint.read()

    def write_checkpoint(self, offsets: Mapping[int, int]) -> None:
        self._checkpoint.write(offsets)

    def flush(self) -> None:
        self._db.flush(True)

    def compact(self) -> None:
        self._db.flush(True)
        self._db.compact_range(None, None)
        self._warm()

    def _warm(self) -> None:
        """Read the store through once, so that its blocks are in the block cache (compaction
        wrote new files, none of them cached): the first point reads then cost what later
        ones do. Skipped when the store would take more than half the cache's capacity."""
        size = self._db.property_int_value("rocksdb.estimate-live-data-size") or 0
        if 2 * size > BLOCK_CACHE_BYTES:
            return
        deque(self._db.keys(), maxlen=0)  # fill_cache is on: every data block read is kept

    def sst_bytes(self) -> SstBytes:
        """The store's SST files: live, kept on disk (old versions too), versions alive."""
        prop = self._db.property_int_value
        return SstBytes(prop("rocksdb.live-sst-files-size") or 0,
                        prop("rocksdb.total-sst-files-size") or 0,
                        prop("rocksdb.num-live-versions") or 0)

    def close(self) -> None:
        self._db.close()


class _OnDisk:
    """What a RocksDB store adds to its kind: the size of its files (``pinning``)."""

    def sst_bytes(self) -> SstBytes:
        """The store's SST files: bytes live, bytes pinned by open iterators, versions."""
        return self._open().sst_bytes()  # type: ignore[attr-defined]


def open_directory(path: str | os.PathLike, kind: str, name: str, partition: int,
                   key_columns: Sequence[str] | None, value_columns: Sequence[str] | None,
                   window_size_ms: int | None = None, changelog_topic: str | None = None,
                   ) -> tuple[StoreMetadata, RocksDBBackend]:
    """Check (or create) the store directory ``path`` and open its database.

    Columns, window size and changelog topic left None are taken from the
    directory; given ones must match it. Raises StoreMismatch for a directory of
    another store, of a newer format, or with other files and no metadata.
    """
    directory = Path(path)
    identity = StoreMetadata(name, kind, partition, ())  # checks the arguments first
    meta_file = StoreMetadataFile(directory)
    found = meta_file.read()
    if found is None:
        others = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
        if directory.exists() and not directory.is_dir():
            others = [directory.name]
        if others:
            shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
            raise StoreMismatch(
                directory, METADATA_FILE, None, METADATA_FILE,
                "open an empty or new directory, or delete this one",
                message=(f"{str(directory)!r} is not a statekit store directory: it has no "
                         f"{METADATA_FILE} but holds {shown}"))
        if key_columns is None:
            raise BadArgument("key_columns", None,
                              "the key columns of a new store, e.g. ['player'] (only an "
                              "existing store directory knows its own)")
        keys, values = store_columns(kind, key_columns, value_columns, window_size_ms)
        meta = StoreMetadata(name, kind, partition, keys, values, changelog_topic,
                             window_size_ms)
        directory.mkdir(parents=True, exist_ok=True)
        meta_file.write(meta)
    else:
        meta_file.check(found, identity, layout=False)
        size = found.window_size_ms if window_size_ms is None else window_size_ms
        keys, values = store_columns(
            kind, found.key_columns if key_columns is None else key_columns, value_columns, size)
        meta_file.check(found, StoreMetadata(
            name, kind, partition, keys, None if value_columns is None else values,
            changelog_topic, window_size_ms))
        meta = found
    return meta, RocksDBBackend(directory)


class RocksDBKeyValueStore(_OnDisk, BackedKeyValueStore):
    """A key-value store in RocksDB at ``path`` (see ``keyvalue.BackedKeyValueStore``)."""

    def __init__(self, path: str | os.PathLike, name: str, partition: int = 0, *,
                 key_columns: Sequence[str] | None = None,
                 value_columns: Sequence[str] | None = None, serde: Serde | None = None,
                 changelog_topic: str | None = None):
        meta, backend = open_directory(path, "key-value", name, partition, key_columns,
                                       value_columns, None, changelog_topic)
        super().__init__(backend, meta, serde)


class RocksDBWindowStore(_OnDisk, BackedWindowStore):
    """A window store in RocksDB at ``path`` (see ``window.BackedWindowStore``)."""

    def __init__(self, path: str | os.PathLike, name: str, partition: int = 0, *,
                 key_columns: Sequence[str] | None = None,
                 value_columns: Sequence[str] | None = None, window_size_ms: int | None = None,
                 serde: ChangelogJsonSerde | None = None, changelog_topic: str | None = None):
        meta, backend = open_directory(path, "window", name, partition, key_columns,
                                       value_columns, window_size_ms, changelog_topic)
        super().__init__(backend, meta, serde)


class RocksDBSessionStore(_OnDisk, BackedSessionStore):
    """A session store in RocksDB at ``path`` (see ``session.BackedSessionStore``)."""

    def __init__(self, path: str | os.PathLike, name: str, partition: int = 0, *,
                 key_columns: Sequence[str] | None = None,
                 value_columns: Sequence[str] | None = None,
                 serde: ChangelogJsonSerde | None = None, changelog_topic: str | None = None):
        meta, backend = open_directory(path, "session", name, partition, key_columns,
                                       value_columns, None, changelog_topic)
        super().__init__(backend, meta, serde)
