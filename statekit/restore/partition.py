"""One partition's restore: its local store, where the rebuild reads from, what it writes.

A store rebuild reads one changelog partition from a start offset to its end: from the
offset the store's checkpoint records (a restore again replays only the tail, as Kafka
Streams' ``.checkpoint`` file does), or from the log start the first time; a checkpoint
outside the log (the topic deleted, recreated or cut by retention) is refused
(``rebuild_start``: the one rule ``restore_stores`` and ``restore_preflight`` both
follow). This is not Spark's restore plan (``statekit.spark_state.spark_files.restore_plan``:
the snapshot and delta files a restarted query reads); it is which changelog offsets a
store rebuild reads. ``PartitionRestore`` writes the records in RocksDB write batches
(tombstones delete), checkpoints the next offset as it goes and tells the listeners.

Example:
    >>> rebuild_start(None, 0, 500)       # no checkpoint: from the log start
    0
    >>> rebuild_start(320, 0, 500)        # from the store's checkpoint
    320
    >>> rebuild_start(320, 400, 500) is None   # records in between are gone: refused
    True
"""

from __future__ import annotations

import os
import time

from statekit._lazy import pd
from statekit.errors import ChangelogError
from statekit.model import changelog_record as codec
from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import PartShape
from statekit.restore.listener import RestoreListener
from statekit.stores import StateStore, open_store

_CHECKPOINT_EVERY = 200_000  # records between checkpoint writes during a long restore


def store_kind(spec: QuerySpec | PartShape) -> str:
    """The local store kind that holds ``spec``'s state: ``window``, ``session`` or
    ``key-value`` (``QuerySpec.store_kind``; a part of an attached query: ``key-value``)."""
    return spec.store_kind


def open_partition_store(spec: QuerySpec | PartShape, store_name: str, partition: int,
                         directory: str | os.PathLike | None, topic: str | None = None
                         ) -> StateStore:
    """The local store of one state partition (``<directory>/<store>/<partition>``)."""
    kind = store_kind(spec)
    path = None if directory is None else os.path.join(directory, store_name, str(partition))
    return open_store(kind, store_name, partition, path, key_columns=list(spec.key_columns),
                      value_columns=list(spec.value_columns),
                      window_size_ms=spec.window.size_ms if kind == "window" else None,
                      changelog_topic=topic)


def rebuild_start(stored: int | None, low: int, end: int) -> int | None:
    """Where a store rebuild reads a changelog partition from: the store's checkpointed
    next offset ``stored`` when the partition still spans it (``low`` its log start,
    ``end`` its end), the log start when the store has none; None when the rebuild is
    refused (the checkpoint lies past the end: the topic was deleted or recreated; or
    before the start: records in between are gone).

    Which changelog offsets a rebuild reads, not Spark's restore plan
    (``statekit.spark_state.spark_files.restore_plan``: which state files a restart reads).
    """
    if stored is None:
        return low
    return stored if low <= stored <= end else None


def start_offset(store: StateStore, topic: str, partition: int, span: tuple[int, int],
                 directory) -> int:
    """Where to read from (``rebuild_start``): the store's checkpoint, else the log start;
    a ChangelogError naming the store and what to do when the rebuild is refused."""
    low, end = span
    checkpoint = store.read_checkpoint().get(partition)
    start = rebuild_start(checkpoint, low, end)
    if start is not None:
        return start
    where = (f"store directory {os.path.join(str(directory), store.name, str(partition))!r}"
             if directory is not None else "the in-memory store")
    if checkpoint > end:
        raise ChangelogError(
            f"{where} was restored up to offset {checkpoint} of {topic!r} partition "
            f"{partition}, but the topic now ends at offset {end}: the topic was deleted or "
            f"recreated. Delete the store directory to restore it from scratch")
    raise ChangelogError(
        f"{where} was restored up to offset {checkpoint} of {topic!r} partition "
        f"{partition}, but the topic now starts at offset {low}: records in between are "
        f"gone (retention). Delete the store directory to restore it from scratch")


class PartitionRestore:
    """The restore of one partition's store: its offsets, counts, checkpoints and events.
    Restored by a worker process, it counts and hears what the worker reports
    (``restored``, ``ended``) and has no store meanwhile."""

    def __init__(self, topic: str, partition: int, store: StateStore | None, start: int,
                 end: int, hear: RestoreListener, to_batch: int | None):
        self.topic, self.partition, self.store, self.hear = topic, partition, store, hear
        self.start, self.end, self.to_batch = start, end, to_batch
        self.next_offset, self.total, self.since_checkpoint = start, 0, 0
        self.started = self.finished = None
        self.done = False

    def begin(self) -> None:
        self.started = time.time()
        self.hear.on_restore_start(self.partition, self.start, self.end)
        if self.end <= self.start:
            self.finish()

    def write(self, messages: list) -> int:
        """Write this partition's share of a chunk; finish when its end (or batch) is reached."""
        p = self.partition
        if self.total == 0 and codec.RecordHeaders.parse(
                messages[0].headers(), f"partition {p} offset {messages[0].offset()}") is None:
            raise ChangelogError(
                f"topic {self.topic!r} is not a statekit changelog: the record at partition "
                f"{p} offset {messages[0].offset()} has no {codec.H_FORMAT!r} header")
        stop = False
        if self.to_batch is not None:
            kept = _upto_batch(messages, self.to_batch)
            stop = len(kept) < len(messages)
            messages = kept
        if messages:
            self.store.write_raw([(m.key(), m.value()) for m in messages])
            self.since_checkpoint += len(messages)
            self.restored(messages[-1].offset(), len(messages))
            if self.since_checkpoint >= _CHECKPOINT_EVERY:
                self.store.write_checkpoint({p: self.next_offset})
                self.since_checkpoint = 0
        if stop or self.next_offset >= self.end:
            self.finish()
        return len(messages)

    def restored(self, last: int, n: int) -> None:
        """``n`` more records written, the last at offset ``last``: counted and heard."""
        self.next_offset, self.total = last + 1, self.total + n
        self.hear.on_batch_restored(self.partition, last, n)

    def finish(self) -> None:
        if self.done:
            return
        if self.to_batch is None:
            self.next_offset = self.end  # also past records compaction removed from the end
        self.store.write_checkpoint({self.partition: self.next_offset})
        self.ended()

    def ended(self) -> None:
        """Restored (its checkpoint written): heard, and the clock stopped."""
        if self.to_batch is None:
            self.next_offset = self.end
        self.hear.on_restore_end(self.partition, self.total)
        self.finished, self.done = time.time(), True

    def row(self) -> list:
        seconds = self.finished - self.started
        return [self.partition, self.start, self.next_offset, self.total, seconds,
                self.total / seconds if seconds > 0 else 0.0,
                pd.Timestamp(self.started, unit="s"), pd.Timestamp(self.finished, unit="s")]


def _upto_batch(messages: list, to_batch: int) -> list:
    """The leading messages whose batch header is at most ``to_batch``."""
    for i, msg in enumerate(messages):
        head = codec.RecordHeaders.parse(msg.headers())
        if head is not None and head.batch > to_batch:
            return messages[:i]
    return messages

