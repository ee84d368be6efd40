"""Where a topic's partitions start and end: watermarks, stable offsets, the end a reader can
reach, and reading offset ranges.

Example:
    >>> watermarks("127.0.0.1:9092", "games")                            # doctest: +SKIP
       partition  low  high
    0          0    0   812
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from statekit.kafka.clients import plain_consumer
from statekit.model.connection import Kafka


def offset_bounds(kafka: Kafka, topic: str, partitions: list[int], committed: bool,
                  timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """Partition → (log start, end) as the broker reports them, no record read: with
    ``committed`` the last stable offset (a ``read_committed`` reader's end: before any
    transaction still open, and before a commit whose markers are not written yet), else the
    high watermark (one past the last offset written, commit markers included). Apache Kafka
    acknowledges a commit before it writes the commit markers into the partitions, so for a
    moment the first lags the second."""
    isolation = "read_committed" if committed else "read_uncommitted"
    consumer = plain_consumer(kafka, **{"isolation.level": isolation})
    try:
        return {p: watermarks_of(consumer, topic, p, timeout) for p in partitions}
    finally:
        consumer.close()


def log_starts(kafka: Kafka, parts: Iterable[tuple[str, int]],
               timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """(topic, partition) → its log start offset, one consumer per topic (``offset_bounds``)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in parts:
        by_topic.setdefault(topic, []).append(partition)
    return {(topic, p): low for topic, partitions in by_topic.items()
            for p, (low, _) in offset_bounds(kafka, topic, sorted(set(partitions)),
                                             committed=False, timeout=timeout).items()}


#: what Apache Kafka answers for a moment after a topic is created (or recreated under the same
#: name) or a partition's leader moves: worth asking again
SETTLING = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                       KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.OFFSET_NOT_AVAILABLE,
                       KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH})

#: what the client itself answers for a moment after a topic is created on a cluster of several
#: nodes: each node learns the new topic from the controller on its own, so the node a fresh
#: client asks for metadata may not list the topic (or its partitions) yet
JUST_CREATED = SETTLING | {KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}


def watermarks_of(consumer: Consumer, topic: str, partition: int, timeout: float = 10.0,
                  settling: frozenset[int] = SETTLING) -> tuple[int, int]:
    """``consumer.get_watermark_offsets`` of one partition, asked again while the answer is a
    retriable error or one of ``settling`` (Apache Kafka answers "not leader" for a moment after
    a topic is created or a leader moves) until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    where = TopicPartition(topic, partition)
    while True:
        try:
            return consumer.get_watermark_offsets(
                where, timeout=max(0.5, deadline - time.monotonic()), cached=False)
        except KafkaException as exc:
            error = exc.args[0]
            if not (error.retriable() or error.code() in settling) \
                    or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)

def end_offsets(
    consumer: Consumer, topic: str, partitions: list[int], timeout: float = 10.0
) -> dict[int, tuple[int, int]]:
    """Partition → (low, end) where ``end`` is one past the last record ``consumer`` can read.

    A reported watermark is only where the search starts, for three reasons:

    * some Kafka-protocol brokers (Tansu among them) report the high watermark as the
      *first* offset of the last record batch + 1;
    * a transaction ends with a control record (its commit or abort marker) in each
      partition it wrote: an offset that no consumer reads;
    * a ``read_committed`` consumer (``plain_consumer``) reads up to the last stable offset:
      records of an open transaction are not readable yet. (Tansu answers a
      ``read_committed`` ListOffsets with 0 while a transaction is open.)

    So the consumer reads from two below the reported watermark to its end of partition and
    takes the last record it sees: one small fetch on a correct broker. Where it sees none
    (markers only, or an aborted transaction a real broker hides) it searches further back;
    from ``low`` when the reported watermark is not above it. ``end`` is ``low`` when there
    is no record to read. TimeoutError (naming the partitions) when the broker sends
    nothing for ``timeout`` seconds.
    """
    marks = {p: watermarks_of(consumer, topic, p, timeout) for p in partitions}
    ends = {p: lo for p, (lo, _) in marks.items()}
    start = {p: max(lo, hi - 2) for p, (lo, hi) in marks.items()}
    step = dict.fromkeys(partitions, 8)
    todo = set(partitions)
    while todo:
        last = _last_records(consumer, topic, {p: start[p] for p in todo}, timeout)
        for p in list(todo):
            low = marks[p][0]
            if last[p] is not None:
                ends[p] = last[p] + 1
            elif start[p] > low:  # markers or hidden records only: look further back
                start[p], step[p] = max(low, start[p] - step[p]), step[p] * 8
                continue
            todo.discard(p)
    return {p: (marks[p][0], ends[p]) for p in partitions}


def _last_records(consumer: Consumer, topic: str, starts: Mapping[int, int],
                  timeout: float) -> dict[int, int | None]:
    """Partition → offset of the last record readable from ``starts`` on (None: none)."""
    last: dict[int, int | None] = dict.fromkeys(starts)
    open_parts = set(starts)
    consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    try:
        heard = time.monotonic()
        while open_parts:
            messages = consumer.consume(10_000, timeout=0.05)
            if messages:
                heard = time.monotonic()
            elif time.monotonic() - heard > timeout:
                raise TimeoutError(f"no end of partition from {topic!r} partitions "
                                   f"{sorted(open_parts)} in {timeout:.0f} s")
            for msg in messages:
                err, part = msg.error(), msg.partition()
                if err is None:
                    last[part] = max(last[part] if last[part] is not None else -1, msg.offset())
                elif err.code() == KafkaError._PARTITION_EOF:
                    open_parts.discard(part)
                else:
                    raise KafkaException(err)
    finally:
        consumer.unassign()
    return last


def consume_ranges(
    consumer: Consumer, topic: str, ranges: Mapping[int, tuple[int, int]],
    timeout: float = 30.0, chunk: int = 10_000,
) -> Iterator[list]:
    """Messages of ``topic`` in ``ranges`` (partition → [start, end)), in chunks.

    Offsets missing from the log (compacted away) are simply not there; the
    read of a partition ends at ``end`` or at its end of log. Raises
    TimeoutError naming the partitions still open when nothing arrives in time.
    """
    todo = {p: (lo, hi) for p, (lo, hi) in ranges.items() if hi > lo}
    if not todo:
        return
    consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _) in todo.items()])
    last_seen = time.monotonic()
    try:
        while todo:
            messages = consumer.consume(chunk, timeout=0.1)
            kept = []
            for msg in messages:
                err, part = msg.error(), msg.partition()
                if part not in todo:
                    continue
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(err)
                    del todo[part]
                elif msg.offset() >= todo[part][1]:
                    del todo[part]
                else:
                    kept.append(msg)
                    if msg.offset() == todo[part][1] - 1:
                        del todo[part]
            if messages:
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen > timeout:
                raise TimeoutError(f"no records from {topic!r} partitions {sorted(todo)} "
                                   f"in {timeout:.0f} s")
            if kept:
                yield kept
    finally:
        consumer.unassign()


