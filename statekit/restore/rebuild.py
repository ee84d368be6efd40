"""Rebuild local stores from a changelog topic: batched writes, listeners, checkpointed offsets.

``restore_stores`` reads all partitions of a statekit changelog at once (a consumer
per partition, each in a worker process or a thread of its own, or one consumer for
all: ``consumers``; each from its store's checkpointed offset, from the start the
first time) to the end, writes each partition's records with RocksDB write batches
into its own store (tombstones delete), and records the next
offset to read in the store's checkpoint file — so a second restore replays
only the tail, as Kafka Streams' ``.checkpoint`` file does.

Its parts, a module each: the options and the choice of consumers
(``statekit.options.restore``), one partition's restore and where it starts
(``statekit.restore.partition``), the three ways of reading (``statekit.restore.readers``),
the result (``statekit.restore.result``). ``compacted_copy``
(``statekit.restore.compacted``) writes what log compaction would keep into a topic of
its own, to restore from the compacted view and see the difference.

Example:
    >>> result = restore_stores(broker, "board-counts-changelog",         # doctest: +SKIP
    ...                         query.spec, "/tmp/stores")
    >>> result.report      # partition, start/end offsets, records, seconds  # doctest: +SKIP
    >>> result.table()     # equals query.snapshot()                       # doctest: +SKIP
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any

from statekit._lazy import pd
from statekit.changelog.reader import topic_partitions
from statekit.errors import BadArgument
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import end_offsets
from statekit.model.connection import Kafka, connect
from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import PartShape
from statekit.options.base import route, settle
from statekit.options.restore import RestoreOptions, auto_consumers
from statekit.processes import processes_supported
from statekit.restore.listener import (
    Listeners,
    RecordingListener,
    RestoreListener,
    RestoreProgress,
)
from statekit.restore.partition import PartitionRestore, open_partition_store, start_offset
from statekit.restore.readers import (
    BarSettings,
    restore_each,
    restore_in_processes,
    restore_together,
)
from statekit.restore.result import REPORT_COLUMNS, RestoreResult
from statekit.restore.worker import WorkerJob
from statekit.stores import StateStore
from statekit.validate import writable_directory

#: ``restore_stores``' keyword shortcuts: each a field of its ``RestoreOptions``
SHORTCUTS = dict.fromkeys(RestoreOptions.field_names(), "options")


def restore_stores(
    kafka: Kafka,
    topic: str,
    spec: QuerySpec | PartShape,
    directory: str | os.PathLike | None = None,
    *,
    store_name: str | None = None,
    listeners: Iterable[RestoreListener] = (),
    options: RestoreOptions | None = None,
    **shortcuts: Any,
) -> RestoreResult:
    """Restore the stores of ``partitions`` (all by default) from changelog ``topic``.

    All partitions are restored at once; the report's bars overlap in time. With
    ``consumers="processes"`` the partitions are split into groups, one per partition
    up to two per available CPU (``worker_count``), and each group is restored by a
    worker process of its own (``statekit.restore.worker``): each of its partitions read
    by a consumer of its own and written into its store there, so consuming, decoding and
    writing run beside this interpreter instead of on it; the stores are opened here again
    once the workers closed them. Workers are spawned (never forked), so a script
    keeps its top level under ``if __name__ == "__main__":``; the stores must be on
    disk (a ``directory``). With ``consumers="per_partition"`` each partition is read
    by a consumer of its own in a thread of its own (at most ``MAX_RESTORE_THREADS``
    at a time) and written into its own store: on a quiet 2-core machine at
    10,000,000 records this restored 1.6x faster than one consumer
    (``bench.restore``), since one partition's write batch overlaps another's fetch
    and decode; but consuming and writing share this one interpreter. With
    ``consumers="one"`` one consumer is assigned every partition and each fetched
    chunk is split by partition on the calling thread, as a Kafka Streams thread
    restores all its tasks with one restore consumer: faster for small restores,
    where starting a consumer per partition costs more than it saves. ``"auto"``
    (the default) counts the records to read (from the stores' checkpoints to the
    log's end): from ``PROCESSES_FROM`` on, with at least 2 partitions to read, 2
    CPUs and stores on disk, it restores in processes; else from
    ``PER_PARTITION_FROM`` on with a consumer per partition; else with one. Every
    way each store is written by one thread only, and listener events reach the
    listeners here, in the calling process, one at a time (under a lock), each
    partition's in offset order, so listeners need not be thread-safe; the events of
    different partitions interleave. A failure (in a worker process too) is raised
    here with its type and message; the others stop, and each store keeps at least
    what its checkpoint says, so a restore again goes on from there.

    Args:
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an ``EmbeddedBroker``).
        spec: what the state holds (its key and value columns, window kind): a query's
            ``QuerySpec``, or the ``PartShape`` of an attached query's part
            (``AttachedQuery.part_shape``).
        directory: where the RocksDB stores live (``<directory>/<store>/<partition>``);
            None builds in-memory stores.
        store_name: the store's name (default: ``topic`` without ``-changelog``).
        listeners: restore listeners (on_restore_start, on_batch_restored, on_restore_end);
            the events of different partitions interleave.
        options: which partitions up to which batch, and how (``RestoreOptions``); or its
            fields as keyword arguments, not both: ``partitions``, ``to_batch``, ``chunk``,
            ``consumers``, ``progress``, ``label``.

    Raises:
        BadArgument: a bad option (``consumers="processes"`` for in-memory stores too), or a
            ``directory`` that is not a writable directory (nothing is written then).
        ChangelogError: a topic that is not a statekit changelog, or that no longer holds
            what a store's checkpoint says.
        RestoreWorkerLost: a worker process ended without finishing (e.g. ``kill -9``).

    Example:
        >>> result = restore_stores("127.0.0.1:9092", "board-counts-changelog", spec,
        ...                         options=RestoreOptions(partitions=[0, 1]))  # doctest: +SKIP
        >>> result.report[["partition", "started", "finished"]]          # doctest: +SKIP
    """
    options = settle(options, RestoreOptions,
                     route(shortcuts, SHORTCUTS, "restore_stores").get("options", {}), "options")
    partitions, to_batch, chunk = options.partitions, options.to_batch, options.chunk
    consumers, progress = options.consumers, options.progress
    if directory is not None:
        directory = writable_directory(directory)
    if consumers == "processes" and directory is None:
        raise BadArgument("consumers", consumers,
                          "'auto', 'per_partition' or 'one' for in-memory stores (directory "
                          "None): worker processes write stores on disk")
    if consumers == "processes" and not processes_supported():
        raise BadArgument("consumers", consumers, "'auto', 'per_partition' or 'one' here: "
                          "restore worker processes run on Linux and macOS")
    conn = connect(kafka)
    wanted = topic_partitions(conn, topic, partitions)
    if len(set(wanted)) < len(wanted):
        raise BadArgument("partitions", list(partitions or ()),
                          f"distinct partitions of {topic!r} (each restored once)")
    listeners = _listeners(listeners)
    name = store_name or topic.removesuffix("-changelog")
    recorder, tracker = RecordingListener(options.label), RestoreProgress()
    hear = Listeners([recorder, tracker, *listeners], lock=threading.Lock())
    progress = BarSettings(progress, tracker)
    consumer = plain_consumer(conn)
    stores: dict[int, StateStore] = {}
    try:
        ends = end_offsets(consumer, topic, wanted)
        restores = {}
        for p in wanted:
            store = stores[p] = open_partition_store(spec, name, p, directory, topic)
            start = start_offset(store, topic, p, ends[p], directory)
            restores[p] = PartitionRestore(topic, p, store, start, ends[p][1], hear, to_batch)
        consumers = _how_to_read(consumers, restores, directory)
        if consumers == "processes":
            job = WorkerJob(conn, topic, spec, name, str(directory), {}, to_batch, chunk)
            restore_in_processes(job, restores, stores, progress)
        elif consumers == "one" or len(restores) < 2:
            restore_together(consumer, topic, restores, chunk, progress)
        else:
            restore_each(conn, topic, restores, chunk, progress)
    except BaseException:
        for store in stores.values():
            store.close()
        raise
    finally:
        consumer.close()
    rows = [restores[p].row() for p in wanted]
    return RestoreResult(stores, pd.DataFrame(rows, columns=REPORT_COLUMNS), recorder.frame(),
                         tracker.frame())


def _how_to_read(consumers: str, restores: dict[int, PartitionRestore], directory) -> str:
    """``consumers``, or for ``auto`` the way that restores these partitions fastest."""
    if consumers != "auto":
        return consumers
    todo = [r.end - r.start for r in restores.values() if r.end > r.start]
    return auto_consumers(sum(todo), len(todo), on_disk=directory is not None)


def _listeners(listeners: Iterable[RestoreListener]) -> list[RestoreListener]:
    """``listeners`` as a list, each checked to hear the three restore events."""
    events = ("on_restore_start", "on_batch_restored", "on_restore_end")
    if isinstance(listeners, (str, bytes, RestoreListener)) or not isinstance(listeners,
                                                                              Iterable):
        raise BadArgument("listeners", listeners, "a list of RestoreListener objects")
    listeners = list(listeners)
    for listener in listeners:
        if not all(callable(getattr(listener, e, None)) for e in events):
            raise BadArgument("restore listener", listener,
                              f"a RestoreListener (an object with {', '.join(events)})")
    return listeners
