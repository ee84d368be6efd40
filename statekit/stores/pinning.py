"""What an open iterator holds: the store version it reads, and that version's files.

A RocksDB iterator reads the store as it was when the iterator was made. Writes, deletes
and compactions after that do not change what it reads, so RocksDB keeps every SST file
of that version on disk (and its blocks and memtables in memory) until the iterator is
closed, even files compaction has already replaced. Kafka Streams warns that an unclosed
``KeyValueIterator`` leaks those resources; ``iterator_pinning`` shows it happen.

``SstBytes`` is what RocksDB reports: ``live`` bytes of the files the current version
uses, ``total`` bytes of every SST file still kept, ``versions`` alive. ``pinned`` is the
difference: files kept only for an open iterator (or snapshot).

Example:
    >>> import tempfile
    >>> from statekit.stores import RocksDBKeyValueStore
    >>> store = RocksDBKeyValueStore(tempfile.mkdtemp(), "totals", key_columns=["player"],
    ...                              value_columns=["total"])
    >>> steps = iterator_pinning(store, [({"player": f"p{i:03d}"}, {"total": i})
    ...                                  for i in range(500)])
    >>> list(steps["store_entries"]), steps["iterator_reads"].fillna(0).tolist()
    ([500, 500, 0, 0], [0, 1, 500, 0])
    >>> bool(steps["pinned_bytes"].iloc[2] > 0), int(steps["pinned_bytes"].iloc[-1])
    (True, 0)
    >>> store.close()
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from statekit._lazy import pd
from statekit.errors import BadArgument
from statekit.stores.keyvalue import frame_entries


@dataclass(frozen=True)
class SstBytes:
    """The SST files of a RocksDB store: bytes the current version uses (``live``), bytes
    still on disk (``total``, old versions included) and RocksDB versions alive."""

    live: int
    total: int
    versions: int

    @property
    def pinned(self) -> int:
        """Bytes on disk only because an open iterator (or snapshot) still reads them."""
        return max(0, self.total - self.live)


#: The steps of ``iterator_pinning``, in order.
STEPS = ("filled and flushed", "iterator opened", "every key deleted, compacted",
         "iterator closed")


def iterator_pinning(store, entries: Iterable[tuple[object, object]] | pd.DataFrame
                     ) -> pd.DataFrame:
    """Fill ``store`` (an empty RocksDB key-value store) with ``entries`` (pairs, or a frame
    with the store's key and value columns), open an iterator, delete every key and compact
    while it is open, then close it; one row per step.

    Columns: ``step``, ``live_bytes``, ``pinned_bytes``, ``versions``, ``store_entries``
    (what a new read sees) and ``iterator_reads`` (what the open iterator still reads).
    """
    measure = getattr(store, "sst_bytes", None)
    if not callable(measure) or not hasattr(store, "all"):
        raise BadArgument("store", type(store).__name__,
                          "a RocksDB key-value store (statekit.stores.RocksDBKeyValueStore)")
    if store.approximate_num_entries():
        raise BadArgument("store", f"{store.name} with {store.approximate_num_entries()} "
                          "entries", "an empty store: the demonstration deletes every key")
    if isinstance(entries, pd.DataFrame):
        entries = frame_entries(entries, store.key_columns, store.value_columns)
    keys = []

    def remember():
        for key, value in entries:
            keys.append(key)
            yield key, value

    store.put_all(remember())
    if not keys:
        raise BadArgument("entries", "nothing", "at least one (key, value) pair")
    store.flush()
    rows = [_row(STEPS[0], store.sst_bytes(), len(keys), None)]
    iterator = store.all()
    first = next(iterator)
    rows.append(_row(STEPS[1], store.sst_bytes(), len(keys), 1))
    store.put_all((key, None) for key in keys)
    store.compact()
    sizes = store.sst_bytes()  # before reading on: an iterator read to its end closes
    with store.all() as fresh:
        now = sum(1 for _ in fresh)
    still = 1 + sum(1 for _ in iterator)  # the deleted entries, all of them
    del first
    rows.append(_row(STEPS[2], sizes, now, still))
    iterator.close()
    rows.append(_row(STEPS[3], store.sst_bytes(), now, None))
    return pd.DataFrame(rows).astype({"iterator_reads": "Int64"})


def _row(step: str, sizes: SstBytes, entries: int, reads: int | None) -> dict:
    return {"step": step, "live_bytes": sizes.live, "pinned_bytes": sizes.pinned,
            "versions": sizes.versions, "store_entries": entries,
            "iterator_reads": reads}
