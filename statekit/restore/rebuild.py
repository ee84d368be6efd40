"""Rebuild local stores from a changelog topic: batched writes, listeners, checkpointed offsets.

``restore_stores`` reads all partitions of a statekit changelog at once (a consumer
per partition, each in a worker process or a thread of its own, or one consumer for
all: ``consumers``; each from its store's checkpointed offset, from the start the
first time) to the end, writes each partition's records with RocksDB write batches
into its own store (tombstones delete), and records the next
offset to read in the store's checkpoint file — so a second restore replays
only the tail, as Kafka Streams' ``.checkpoint`` file does. ``compacted_copy``
writes what log compaction would keep into a topic of its own, to restore
from the compacted view and see the difference.

Example:
    >>> result = restore_stores(broker, "board-counts-changelog",         # doctest: +SKIP
    ...                         query.spec, "/tmp/stores")
    >>> result.report      # partition, start/end offsets, records, seconds  # doctest: +SKIP
    >>> result.table()     # equals query.snapshot()                       # doctest: +SKIP
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import Producer
from tqdm.auto import tqdm

from statekit._lazy import pd
from statekit.changelog.reader import topic_partitions
from statekit.errors import BadArgument, ChangelogError
from statekit.kafka.topics import (
    consume_ranges,
    create_topic,
    delete_topic,
    end_offsets,
    partition_count,
    plain_consumer,
)
from statekit.model import changelog_record as codec
from statekit.model.connection import Kafka, connect
from statekit.model.query_spec import QuerySpec
from statekit.model.store_schema import PartShape
from statekit.options import Options, route, settle
from statekit.restore.listener import (
    Listeners,
    RecordingListener,
    RestoreListener,
    RestoreProgress,
)
from statekit.restore.worker import (
    RestoreWorkers,
    WorkerJob,
    available_cpus,
    partition_groups,
    processes_supported,
    worker_count,
)
from statekit.stores import StateStore, open_store
from statekit.validate import optional_batch_id, whole_number, writable_directory

REPORT_COLUMNS = ["partition", "start_offset", "end_offset", "records", "seconds",
                  "records_per_s", "started", "finished"]
_CHECKPOINT_EVERY = 200_000  # records between checkpoint writes during a long restore
#: how restore_stores reads the topic: partitions split among worker processes (one per
#: CPU, each partition with a consumer of its own, written by the worker), a consumer per
#: partition (each in a thread of the caller), one consumer assigned every partition
#: (Kafka Streams' restore consumer), or ``auto``: processes from ``PROCESSES_FROM``
#: records to read (2 partitions and 2 CPUs at least, stores on disk), else a consumer
#: per partition from ``PER_PARTITION_FROM``, else one
CONSUMERS = ("auto", "processes", "per_partition", "one")
_CONSUMERS_ACCEPTED = "'auto', 'processes', 'per_partition' or 'one'"
#: below this many records to read, one consumer restores faster than one per partition
#: (the threads' consumers cost more to start than they save: ``bench.restore``)
PER_PARTITION_FROM = 250_000
#: from this many records to read, worker processes restore faster than threads. A worker
#: costs ~0.5 s to start (a fresh interpreter importing pandas, pyarrow, confluent-kafka
#: and rocksdict), which the interpreter of its own gains back only on a large restore.
#: Measured with ``nice -n 10`` on the shared 2-core machine (3 partitions, 2 workers,
#: medians, 2026-11-29): 100,000 records: processes 1.12 s, threads 0.61 s; 300,000:
#: 1.69 / 1.45 s; 450,000: 2.41 / 2.45 s; 600,000: 2.81 / 2.95 s (processes ahead in 4
#: rounds of 4). Between the last two, then.
PROCESSES_FROM = 500_000
#: at most this many partitions are read at once by ``consumers="per_partition"``
MAX_RESTORE_THREADS = 8


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


def wall_seconds(report: pd.DataFrame) -> float:
    """How long a restore took on the clock: from the first partition's start to the last
    one's end. Partitions restore together (one consumer, all assigned), so the sum of their
    ``seconds`` overstates it.

    Example:
        >>> t = pd.Timestamp("2026-01-05 10:00:00")
        >>> report = pd.DataFrame({"seconds": [0.3, 0.25], "started": [t, t],
        ...                        "finished": [t + pd.Timedelta("300ms"),
        ...                                     t + pd.Timedelta("250ms")]})
        >>> wall_seconds(report)   # not 0.55
        0.3
    """
    if report.empty:
        return 0.0
    return float((report["finished"].max() - report["started"].min()).total_seconds())


@dataclass
class RestoreResult:
    """What a restore built: the stores by partition, a report, the listener events and each
    partition's last progress (``RestoreProgress.frame``: rates, offsets)."""

    stores: dict[int, StateStore]
    report: pd.DataFrame
    events: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())
    progress: pd.DataFrame = field(default_factory=lambda: pd.DataFrame())

    @property
    def wall_seconds(self) -> float:
        """Seconds from the first partition's start to the last one's end (``wall_seconds``)."""
        return wall_seconds(self.report)

    def table(self) -> pd.DataFrame:
        """All partitions' contents in one frame (with ``partition``), like ``snapshot()``."""
        frames = [store.to_pandas().assign(partition=p) for p, store in self.stores.items()]
        frames = [f for f in frames if len(f)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def close(self) -> None:
        for store in self.stores.values():
            store.close()

    def __enter__(self) -> RestoreResult:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class RestoreOptions(Options):
    """Which part of a changelog a restore reads, and how: ``partitions`` (all when None),
    ``to_batch`` (stop before the first record of a later batch: the store at that batch),
    ``chunk`` (records consumed per fetch; each partition's share is one write batch),
    ``consumers`` (``"auto"``, ``"processes"``, ``"per_partition"`` or ``"one"``: see
    ``restore_stores``),
    ``progress`` (one tqdm bar for the topic; None: for restores over 100,000 records),
    ``label`` (a ``source`` column in the events, e.g. "raw log" or "compacted")."""

    partitions: tuple[int, ...] | None = None
    to_batch: int | None = None
    chunk: int = 50_000
    consumers: str = "auto"
    progress: bool | None = None
    label: str | None = None

    def __post_init__(self):
        if self.partitions is not None:  # each checked against the topic's by the restore
            if isinstance(self.partitions, (str, bytes)) or not isinstance(self.partitions,
                                                                           Iterable):
                raise BadArgument("partitions", self.partitions,
                                  "a list of partition numbers, or None for all")
            object.__setattr__(self, "partitions", tuple(self.partitions))
        object.__setattr__(self, "to_batch", optional_batch_id(self.to_batch, "to_batch"))
        object.__setattr__(self, "chunk", whole_number(self.chunk, "chunk", minimum=1))
        if self.consumers not in CONSUMERS:
            raise BadArgument("consumers", self.consumers, _CONSUMERS_ACCEPTED)


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
    progress = _Progress(progress, tracker)
    consumer = plain_consumer(conn)
    stores: dict[int, StateStore] = {}
    try:
        ends = end_offsets(consumer, topic, wanted)
        restores = {}
        for p in wanted:
            store = stores[p] = open_partition_store(spec, name, p, directory, topic)
            start = _start_offset(store, topic, p, ends[p], directory)
            restores[p] = _PartitionRestore(topic, p, store, start, ends[p][1], hear, to_batch)
        consumers = _how_to_read(consumers, restores, directory)
        if consumers == "processes":
            job = WorkerJob(conn, topic, spec, name, str(directory), {}, to_batch, chunk)
            _restore_in_processes(job, restores, stores, progress)
        elif consumers == "one" or len(restores) < 2:
            _restore_together(consumer, topic, restores, chunk, progress)
        else:
            _restore_each(conn, topic, restores, chunk, progress)
    except BaseException:
        for store in stores.values():
            store.close()
        raise
    finally:
        consumer.close()
    rows = [restores[p].row() for p in wanted]
    return RestoreResult(stores, pd.DataFrame(rows, columns=REPORT_COLUMNS), recorder.frame(),
                         tracker.frame())


def _how_to_read(consumers: str, restores: dict[int, _PartitionRestore], directory) -> str:
    """``consumers``, or for ``auto`` the way that restores these partitions fastest."""
    if consumers != "auto":
        return consumers
    todo = [r.end - r.start for r in restores.values() if r.end > r.start]
    return auto_consumers(sum(todo), len(todo), on_disk=directory is not None)


def auto_consumers(records: int, partitions: int, on_disk: bool = True,
                   cpus: int | None = None) -> str:
    """What ``consumers="auto"`` reads ``records`` of ``partitions`` partitions with:
    ``processes`` from ``PROCESSES_FROM`` records (with 2 partitions, 2 CPUs and stores on
    disk at least, on Linux or macOS), else ``per_partition`` from ``PER_PARTITION_FROM``,
    else ``one``.

    Example:
        >>> auto_consumers(50_000, 3), auto_consumers(300_000, 3, cpus=2)
        ('one', 'per_partition')
        >>> auto_consumers(5_000_000, 3, cpus=2), auto_consumers(5_000_000, 1, cpus=2)
        ('processes', 'per_partition')
        >>> auto_consumers(5_000_000, 3, on_disk=False, cpus=2)   # in-memory stores
        'per_partition'
        >>> auto_consumers(5_000_000, 3, cpus=1)
        'per_partition'
    """
    cpus = available_cpus() if cpus is None else cpus
    if records >= PROCESSES_FROM and partitions >= 2 and cpus >= 2 and on_disk \
            and processes_supported():
        return "processes"
    return "per_partition" if records >= PER_PARTITION_FROM else "one"


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


class _PartitionRestore:
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


@dataclass(frozen=True)
class _Progress:
    """Whether to show the restore's bar (None: from 100,000 records), and whose times
    left it shows beside it."""

    show: bool | None
    tracker: RestoreProgress


class _RestoreBar(tqdm):
    """tqdm's bar, each partition's time left beside it (``RestoreProgress.eta_text``)."""

    def __init__(self, *args, tracker: RestoreProgress, **kwargs):
        self.tracker = tracker
        super().__init__(*args, **kwargs)

    def update(self, n: float | None = 1) -> bool | None:
        if not self.disable:
            self.set_postfix_str(self.tracker.eta_text(), refresh=False)
        return super().update(n)


def _progress_bar(topic: str, todo: int, progress: _Progress) -> tqdm:
    """The restore's one bar (shown from 100,000 records to read unless ``progress`` says)."""
    show = todo >= 100_000 if progress.show is None else progress.show
    return _RestoreBar(total=todo, desc=topic, unit="rec", disable=not show,
                       tracker=progress.tracker)


def _restore_together(consumer, topic: str, restores: dict[int, _PartitionRestore],
                      chunk: int, progress: _Progress) -> None:
    """Consume every partition's range with one consumer; route each chunk by partition."""
    for restore in restores.values():
        restore.begin()
    ranges = {p: (r.start, r.end) for p, r in restores.items() if not r.done}
    todo = sum(hi - lo for lo, hi in ranges.values())
    with _progress_bar(topic, todo, progress) as bar:
        chunks = consume_ranges(consumer, topic, ranges, chunk=chunk)
        try:
            for messages in chunks:
                for p, share in _by_partition(messages).items():
                    restore = restores[p]
                    if not restore.done:
                        bar.update(restore.write(share))
                if all(r.done for r in restores.values()):
                    break
        finally:
            chunks.close()
    for restore in restores.values():
        restore.finish()


def _restore_each(conn, topic: str, restores: dict[int, _PartitionRestore], chunk: int,
                  progress: _Progress) -> None:
    """Each partition's range read by a consumer of its own, in a thread of its own, into
    that partition's store (``_read_each``)."""
    for restore in restores.values():
        restore.begin()
    reading = {p: r for p, r in restores.items() if not r.done}
    todo = sum(r.end - r.start for r in reading.values())
    if reading:
        with _progress_bar(topic, todo, progress) as bar:
            _read_each(conn, topic, reading, chunk, bar.update)
    for restore in restores.values():
        restore.finish()


def _read_each(conn, topic: str, restores: dict[int, _PartitionRestore], chunk: int,
               counted: Callable[[int], object],
               stopped: Callable[[], bool] = lambda: False) -> None:
    """Read each of ``restores`` (begun) by a consumer of its own, in a thread of its own,
    into its store; ``counted`` hears how many records each write took (one call at a
    time). The first failure stops the others (at their next chunk) and is raised here,
    noting its partition; ``stopped()`` true stops them all (unfinished) too."""
    failed = threading.Event()
    counting = threading.Lock()

    def one(p: int) -> None:
        consumer = plain_consumer(conn)
        try:
            restore = restores[p]
            chunks = consume_ranges(consumer, topic, {p: (restore.start, restore.end)},
                                    chunk=chunk)
            try:
                for messages in chunks:
                    if failed.is_set() or stopped():
                        return
                    written = restore.write(messages)
                    with counting:
                        counted(written)
                    if restore.done:
                        return
            finally:
                chunks.close()
        except BaseException as exc:
            exc.add_note(f"(while restoring partition {p} of {topic!r})")
            raise
        finally:
            consumer.close()

    with ThreadPoolExecutor(min(len(restores), MAX_RESTORE_THREADS),
                            thread_name_prefix=f"restore-{topic}") as pool:
        futures = [pool.submit(one, p) for p in restores]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                future.result()
        except BaseException:
            failed.set()   # the others stop at their next chunk; the pool waits for them
            for future in futures:
                future.cancel()
            raise
        for future in futures:
            future.result()


def _restore_in_processes(job: WorkerJob, restores: dict[int, _PartitionRestore],
                          stores: dict[int, StateStore], progress: _Progress) -> None:
    """The partitions to read split among worker processes (``partition_groups``), each
    group restored there (``restore_group``) with ``job``'s settings; their events heard
    here one at a time, in order per partition. Their stores are closed here meanwhile
    and opened again (into ``stores``) once every worker is done."""
    for restore in restores.values():
        restore.begin()
    reading = {p: r for p, r in restores.items() if not r.done}
    if reading:
        for p, restore in reading.items():
            restore.store = None
            stores[p].close()   # the worker opens it
        groups = partition_groups({p: r.end - r.start for p, r in reading.items()},
                                  worker_count(len(reading), available_cpus()))
        jobs = [replace(job, ranges={p: (reading[p].start, reading[p].end) for p in group})
                for group in groups]
        todo = sum(r.end - r.start for r in reading.values())
        with _progress_bar(job.topic, todo, progress) as bar, RestoreWorkers(jobs) as workers:
            for event in workers.events():
                restore = reading[event[1]]
                if event[0] == "batch":
                    restore.restored(event[2], event[3])
                    bar.update(event[3])
                else:
                    restore.ended()
        for p, restore in reading.items():
            stores[p] = restore.store = open_partition_store(job.spec, job.store_name, p,
                                                             job.directory, job.topic)
    for restore in restores.values():
        restore.finish()


def restore_group(job: WorkerJob, hear: RestoreListener,
                  stopped: Callable[[], bool] = lambda: False) -> None:
    """A worker process's restore: ``job``'s partitions (begun by the parent, which heard
    their start) each read by a consumer of its own into its store, which is closed at
    the end; ``hear`` gets each batch and end. Returns unfinished once ``stopped()``."""
    stores: dict[int, StateStore] = {}
    try:
        restores = {}
        for p, (start, end) in job.ranges.items():
            store = stores[p] = open_partition_store(job.spec, job.store_name, p,
                                                     job.directory, job.topic)
            restores[p] = _PartitionRestore(job.topic, p, store, start, end, hear, job.to_batch)
            restores[p].started = time.time()
        _read_each(job.kafka, job.topic, restores, job.chunk, lambda n: None, stopped)
        if not stopped():
            for restore in restores.values():
                restore.finish()
    finally:
        for store in stores.values():
            store.close()


def _by_partition(messages: list) -> dict[int, list]:
    """A chunk's messages split by partition, each in offset order (runs kept whole)."""
    groups: dict[int, list] = {}
    run_start, current = 0, None
    for i, msg in enumerate(messages):
        p = msg.partition()
        if p != current:
            if current is not None:
                groups.setdefault(current, []).extend(messages[run_start:i])
            run_start, current = i, p
    if current is not None:
        groups.setdefault(current, []).extend(messages[run_start:])
    return groups


def _start_offset(store: StateStore, topic: str, partition: int, span: tuple[int, int],
                  directory) -> int:
    """Where to read from: the store's checkpoint, else the log start; refuse what cannot be."""
    low, end = span
    checkpoint = store.read_checkpoint().get(partition)
    if checkpoint is None:
        return low
    where = (f"store directory {os.path.join(str(directory), store.name, str(partition))!r}"
             if directory is not None else "the in-memory store")
    if checkpoint > end:
        raise ChangelogError(
            f"{where} was restored up to offset {checkpoint} of {topic!r} partition "
            f"{partition}, but the topic now ends at offset {end}: the topic was deleted or "
            f"recreated. Delete the store directory to restore it from scratch")
    if checkpoint < low:
        raise ChangelogError(
            f"{where} was restored up to offset {checkpoint} of {topic!r} partition "
            f"{partition}, but the topic now starts at offset {low}: records in between are "
            f"gone (retention). Delete the store directory to restore it from scratch")
    return checkpoint


def _upto_batch(messages: list, to_batch: int) -> list:
    """The leading messages whose batch header is at most ``to_batch``."""
    for i, msg in enumerate(messages):
        head = codec.RecordHeaders.parse(msg.headers())
        if head is not None and head.batch > to_batch:
            return messages[:i]
    return messages


def compacted_copy(kafka: Kafka, topic: str, target: str | None = None, *,
                   progress: bool | None = None, **compact_options) -> str:
    """Write what compaction keeps of ``topic`` to ``target`` (default ``<topic>-compacted``).

    The records keep their keys, values (re-encoded from the decoded columns),
    batch and timestamps; offsets are renumbered, as a copy's are, and the
    headers' ``count`` is 0 (unknown: compaction removed part of each batch), so
    read it with ``read_changelog(..., check=False)``. The target is recreated.
    Returns its name.
    """
    from statekit.changelog.compaction import compact
    from statekit.changelog.reader import read_changelog

    conn = connect(kafka)
    target = target or f"{topic}-compacted"
    log = read_changelog(conn, topic, progress=progress)
    kept = compact(log, **compact_options).records
    n = partition_count(conn, topic)
    delete_topic(conn, target)
    create_topic(conn, target, n, {"cleanup.policy": "compact"})
    producer = Producer(conn.client_config(**{
        "linger.ms": 20, "queue.buffering.max.messages": 2_000_000, **conn.config}))
    values = log.value_columns
    stamps = kept["timestamp"].astype("int64") // 1_000_000
    for row, stamp in zip(kept.itertuples(index=False), stamps, strict=True):
        record = row._asdict()
        value = None if record["tombstone"] else codec.encode_json(record, values)
        producer.produce(target, key=record["key"].encode(), value=value,
                         partition=int(record["partition"]), timestamp=int(stamp),
                         headers=codec.RecordHeaders(record["batch"], record["seq"],
                                                     count=0, prev=-1).encode())
        producer.poll(0)
    producer.flush(120)
    return target
