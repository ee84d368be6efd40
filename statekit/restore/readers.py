"""The three ways a restore reads a changelog's partitions into their stores.

One consumer assigned every partition, each fetched chunk split by partition
(``restore_together``: as a Kafka Streams thread restores its tasks); a consumer per
partition, each in a thread of its own (``restore_each``); or the partitions split
among worker processes (``restore_in_processes``), each of which runs
``restore_group`` (``statekit.restore.worker``). Each way writes every store from one
thread, and shows one progress bar for the topic (``BarSettings``: from 100,000
records unless told). ``restore_stores`` (``statekit.restore.rebuild``) picks one.

Example:
    >>> restore_together(consumer, "board-counts-changelog", restores,    # doctest: +SKIP
    ...                  chunk=50_000, progress=BarSettings(None, RestoreProgress()))
    >>> [r.done for r in restores.values()]                              # doctest: +SKIP
    [True, True, True]
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from tqdm.auto import tqdm

from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import consume_ranges
from statekit.processes import available_cpus
from statekit.restore.listener import RestoreListener, RestoreProgress
from statekit.restore.partition import PartitionRestore, open_partition_store
from statekit.restore.worker import RestoreWorkers, WorkerJob, partition_groups, worker_count
from statekit.stores import StateStore

#: at most this many partitions are read at once by ``consumers="per_partition"``
MAX_RESTORE_THREADS = 8


@dataclass(frozen=True)
class BarSettings:
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


def _progress_bar(topic: str, todo: int, progress: BarSettings) -> tqdm:
    """The restore's one bar (shown from 100,000 records to read unless ``progress`` says)."""
    show = todo >= 100_000 if progress.show is None else progress.show
    return _RestoreBar(total=todo, desc=topic, unit="rec", disable=not show,
                       tracker=progress.tracker)


def restore_together(consumer, topic: str, restores: dict[int, PartitionRestore],
                     chunk: int, progress: BarSettings) -> None:
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


def restore_each(conn, topic: str, restores: dict[int, PartitionRestore], chunk: int,
                 progress: BarSettings) -> None:
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


def _read_each(conn, topic: str, restores: dict[int, PartitionRestore], chunk: int,
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


def restore_in_processes(job: WorkerJob, restores: dict[int, PartitionRestore],
                         stores: dict[int, StateStore], progress: BarSettings) -> None:
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
            restores[p] = PartitionRestore(job.topic, p, store, start, end, hear, job.to_batch)
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
