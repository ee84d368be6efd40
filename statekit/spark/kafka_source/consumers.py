"""The read consumers a Python worker keeps: one per topic-partition, with its position.

Spark reuses Python workers, so a worker keeps each consumer it read a range with, for the
next task: a range that starts where the consumer's last one ended reads on from what it
already fetched (no new ``assign()``, no wait). At most ``_MAX_KEPT`` are kept, none unused
for ``_CONSUMER_IDLE_S``; ``close_pooled_consumers`` closes them all (at exit too).

Example:
    >>> close_pooled_consumers()  # none kept in this process yet
    0
"""

from __future__ import annotations

import contextlib
import threading
import time

from statekit.spark.kafka_source.offsets import KafkaInputPartition

#: librdkafka settings of the read consumers. ``fetch.queue.backoff.ms``: librdkafka's default
#: (1 s) postpones a partition's next fetch whenever its prefetch queue was full, and the
#: postponement outlives a re-assignment: a consumer assigned to a new offset of a partition it
#: had prefetched waited up to 1 s for its first record (measured at 1M records mid-topic: two
#: empty 0.5 s polls, then the whole range at once). ``queued.min.messages`` bounds what a
#: consumer prefetches beyond the range it was asked for (librdkafka's default, 100,000 records
#: a partition, was thrown away whenever the next range went elsewhere: the broker worked ~7×
#: harder than for a plain consumer). ``fetch.wait.max.ms`` bounds a fetch's wait at the log end.
READ_SETTINGS = {"fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10,
                 "queued.min.messages": 10_000}
_CONSUMER_IDLE_S = 60.0  # a read consumer unused this long is closed, not reused
_MAX_KEPT = 32           # read consumers one Python worker keeps between tasks


class PartitionReader:
    """One consumer assigned to one topic-partition, and the offset it delivers next.

    A Python worker keeps its readers between tasks (Spark reuses Python workers): when a
    task's range starts where the reader's last one ended, it reads on without a new
    assignment, from what the consumer already prefetched; otherwise, or when it rests at the
    log end (paused, nothing prefetched), it is assigned the range's start (librdkafka drops
    the prefetched records). Records fetched past a range's end wait in ``stash`` for the next
    range.
    """

    def __init__(self, key: tuple, consumer):
        self.key, self.consumer = key, consumer
        self.next_offset: int | None = None  # None: not positioned (a new consumer)
        self.stash: list = []
        self.paused = False
        self.used = time.monotonic()

    def position_at(self, part: KafkaInputPartition) -> bool:
        """Make the next record read the first of ``part``'s range; True if it read on."""
        if self.next_offset == part.start and not self.paused:
            return True
        # a reader resting at the log end has fetched nothing ahead (pause() drops the
        # prefetched records), so assigning it afresh loses nothing, and wakes its fetcher
        self.reassign(part.topic, part.partition, part.start)
        return False

    def reassign(self, topic: str, partition: int, offset: int) -> None:
        """Assign the partition afresh at ``offset`` (what it fetched is dropped)."""
        from confluent_kafka import TopicPartition

        where = TopicPartition(topic, partition, offset)
        self.stash = []
        # Resumed first, then assigned: a pause outlives assign(), and librdkafka's fetcher
        # wakes for an assign() but not for a resume(), so a partition resumed after it was
        # assigned (or resumed alone) waited 0.5-1 s for its first fetch (measured on the
        # embedded broker: every live batch that read on from the log end, and a second query
        # of the same topic). Resuming one that is not paused does nothing.
        self.consumer.resume([TopicPartition(topic, partition)])
        self.consumer.assign([where])
        self.paused, self.next_offset = False, offset

    def rest(self, part: KafkaInputPartition) -> None:
        """After reading ``part``: stop fetching when the range reached the log's end (a
        consumer kept at the end would ask the broker for more every ``fetch.wait.max.ms``)."""
        from confluent_kafka import TopicPartition

        where = TopicPartition(part.topic, part.partition)
        _, high = self.consumer.get_watermark_offsets(where, cached=True)
        if high < 0 or part.end >= high:
            self.consumer.pause([where])
            self.paused = True
        self.next_offset, self.used = part.end, time.monotonic()


# Read consumers kept by this Python worker: (servers, config, reset, topic, partition) → reader.
_READERS: dict[tuple, PartitionReader] = {}
_READERS_LOCK = threading.Lock()


def _reader_key(part: KafkaInputPartition) -> tuple:
    reset = "error" if part.fail_on_data_loss else "earliest"
    return part.bootstrap_servers, part.client_config, reset, part.topic, part.partition


def take_reader(part: KafkaInputPartition) -> PartitionReader:
    """This worker's reader of ``part``'s topic-partition, or a new one."""
    key = _reader_key(part)
    now = time.monotonic()
    with _READERS_LOCK:
        reader = _READERS.pop(key, None)
        stale = [k for k, r in _READERS.items() if now - r.used >= _CONSUMER_IDLE_S]
        closing = [_READERS.pop(k) for k in stale]
    for old in closing:
        _close_quietly(old.consumer)
    if reader is not None and now - reader.used < _CONSUMER_IDLE_S:
        return reader
    if reader is not None:
        _close_quietly(reader.consumer)
    from statekit.kafka.clients import plain_consumer

    return PartitionReader(key, plain_consumer(
        part.bootstrap_servers, dict(part.client_config),
        **{**READ_SETTINGS, "auto.offset.reset": key[2]}))


def give_back(reader: PartitionReader, part: KafkaInputPartition, reusable: bool) -> None:
    """Keep ``reader`` for the next task (``reusable``: it read ``part`` whole), else close it."""
    if reusable:
        try:
            reader.rest(part)
        except Exception:  # noqa: BLE001 - a consumer in trouble is closed, not kept
            reusable = False
    if not reusable:
        _close_quietly(reader.consumer)
        return
    with _READERS_LOCK:
        if not _READERS:
            import atexit

            atexit.register(close_pooled_consumers)
        # two tasks read the same partition at once (a retry, a range split): the later stays
        replaced = _READERS.pop(reader.key, None)
        evicted = [replaced] if replaced is not None else []
        _READERS[reader.key] = reader
        while len(_READERS) > _MAX_KEPT:  # the longest unused goes
            oldest = min(_READERS, key=lambda k: _READERS[k].used)
            evicted.append(_READERS.pop(oldest))
    for old in evicted:
        _close_quietly(old.consumer)


def _close_quietly(consumer) -> None:
    with contextlib.suppress(Exception):  # closing is best effort
        consumer.close()


def close_pooled_consumers() -> int:
    """Close the read consumers this process keeps between tasks; how many were closed."""
    with _READERS_LOCK:
        idle = list(_READERS.values())
        _READERS.clear()
    for reader in idle:
        _close_quietly(reader.consumer)
    return len(idle)
