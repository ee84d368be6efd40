"""How far a Kafka Streams application has come, from its consumer group's committed offsets:
its ``application.id`` is the group of its main consumers, and it commits only after its
stores (and their record caches) are flushed, so an offset committed at a topic's end means
the stores hold every record of it.

Example:
    >>> behind({0: 10, 1: 4}, {0: (0, 10), 1: (0, 7), 2: (0, 0)})
    {1: 3}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from confluent_kafka import TopicPartition

from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import offset_bounds
from statekit.kafka.topics import list_topics
from statekit.model.connection import Kafka


def behind(committed: Mapping[int, int], bounds: Mapping[int, tuple[int, int]]
           ) -> dict[int, int]:
    """Partition → records not yet committed, for the partitions that have some (a partition
    without a committed offset counts from its log start)."""
    lag = {p: end - max(committed.get(p, low), low) for p, (low, end) in bounds.items()}
    return {p: n for p, n in lag.items() if n > 0}


def committed_offsets(kafka: Kafka, group: str, topic: str, partitions: Sequence[int],
                      timeout: float = 10.0) -> dict[int, int]:
    """Partition → ``group``'s committed offset in ``topic`` (partitions without one left
    out)."""
    consumer = plain_consumer(kafka, **{"group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in partitions],
                                   timeout=timeout)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def lag(kafka: Kafka, group: str, topics: Sequence[str]) -> dict[str, dict[int, int]]:
    """Topic → partition → records ``group`` has not committed yet (a topic that does not
    exist yet is left out)."""
    existing = list_topics(kafka)
    out = {}
    for topic in topics:
        if topic in existing:
            partitions = list(range(existing[topic]))
            out[topic] = behind(committed_offsets(kafka, group, topic, partitions),
                                offset_bounds(kafka, topic, partitions, committed=False))
    return out


def consumed_everything(kafka: Kafka, group: str, topics: Sequence[str]) -> bool:
    """Whether ``group`` has committed every record of every one of ``topics`` (each must
    exist: a repartition topic Kafka Streams has not made yet is not consumed)."""
    found = lag(kafka, group, topics)
    return len(found) == len(topics) and not any(found.values())
