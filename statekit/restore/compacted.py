"""A compacted copy of a changelog topic: what log compaction would keep, as a topic.

Restore from the copy (``restore_stores``) and from the raw log to see that compaction
loses nothing a store needs, and how much less it reads.

Example:
    >>> compacted_copy(broker, "board-counts-changelog")                 # doctest: +SKIP
    'board-counts-changelog-compacted'
"""

from __future__ import annotations

from confluent_kafka import Producer

from statekit.kafka.topics import create_topic, delete_topic, partition_count
from statekit.model import changelog_record as codec
from statekit.model.connection import Kafka, connect


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
