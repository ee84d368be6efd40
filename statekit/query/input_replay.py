"""A query's Kafka input read again, batch by batch: what ``late_events`` counts and
``explain`` shows.

Spark's offset log keeps, per batch, the offsets each Kafka partition was read up to;
``KafkaInput`` keeps which topic, which cluster and how values are parsed. ``read_batches``
reads the records of chosen batches back from the broker, each tagged with its batch, and
names the batches whose records are no longer all there (deleted by retention). Spark logs no
start for the first batch: ``record_start`` keeps it beside a fresh checkpoint.

Example:
    >>> rows, gone = read_batches(query_input, {3: (ranges, late_ms)})   # doctest: +SKIP
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass

import pandas as pd
from pyspark.sql.types import StructType

from statekit.atomic import write_atomic
from statekit.kafka.topics import (
    consume_ranges,
    offset_bounds,
    partition_count,
    plain_consumer,
    watermarks_of,
)
from statekit.model.connection import KafkaConnection
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.progress import kafka_offsets


@dataclass(frozen=True)
class KafkaInput:
    """What a query reads, kept so statekit can read it again: the topic, the cluster, and how
    its values are parsed (``parse_events``'s schema and required fields)."""

    topic: str
    kafka: KafkaConnection
    schema: str | StructType
    required: tuple[str, ...]


#: the rows ``read_batches`` gives, as a Spark schema: a Kafka record, its batch and the
#: watermark its late events are judged by (ms)
RAW_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, _sk_batch long, _sk_late_ms long")


def read_batches(source: KafkaInput, batches: dict[int, tuple[dict, int]]
                  ) -> tuple[pd.DataFrame, set[int]]:
    """The Kafka records of ``batches`` (batch → (input ranges, late watermark ms)), tagged
    with their batch, and the batches whose records are not all on the broker any more."""
    spans: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
    for batch, (ranges, late_ms) in batches.items():
        for part, (start, end) in ranges.items():
            if end > start:
                spans.setdefault(part, []).append((start, end, batch, late_ms))
    columns: dict[str, list] = {c: [] for c in ("key", "value", "topic", "partition", "offset",
                                                 "timestamp", "_sk_batch", "_sk_late_ms")}
    seen: dict[int, int] = {}
    consumer = plain_consumer(source.kafka)
    try:
        for (topic, partition), parts in sorted(spans.items()):
            parts.sort()
            starts = [p[0] for p in parts]
            low, _ = watermarks_of(consumer, topic, partition)  # retention may have moved it
            wanted = {partition: (max(parts[0][0], low), parts[-1][1])}
            for chunk in consume_ranges(consumer, topic, wanted):
                for msg in chunk:
                    offset = msg.offset()
                    i = bisect.bisect_right(starts, offset) - 1
                    if i < 0 or offset >= parts[i][1]:
                        continue
                    _, _, batch, late_ms = parts[i]
                    seen[batch] = seen.get(batch, 0) + 1
                    for name, value in (("key", msg.key()), ("value", msg.value()),
                                        ("topic", topic), ("partition", partition),
                                        ("offset", offset),
                                        ("timestamp", pd.Timestamp(msg.timestamp()[1], unit="ms")),
                                        ("_sk_batch", batch), ("_sk_late_ms", late_ms)):
                        columns[name].append(value)
    finally:
        consumer.close()
    expected = {b: sum(max(end - start, 0) for start, end in r.values())
                for b, (r, _) in batches.items()}
    gone = {b for b, n in expected.items() if seen.get(b, 0) != n}
    return pd.DataFrame(columns), gone


#: where ``record_start`` keeps the offsets a checkpoint's first batch started at
START_FILE = "input_start.json"


def record_start(checkpoint: Checkpoint, source: KafkaInput, starting_offsets: str) -> None:
    """Keep, beside a fresh checkpoint, the offsets its first batch starts at: Spark's offset
    log has only each batch's end, so batch 0's start would otherwise be unknown once
    retention moves the log start. ``earliest``: each partition's log start now; ``latest``:
    its end; a JSON of offsets: those (``-2`` earliest, ``-1`` latest)."""
    kafka, topic = source.kafka, source.topic
    partitions = list(range(partition_count(kafka, topic)))
    bounds = offset_bounds(kafka, topic, partitions, committed=False)
    given = json.loads(starting_offsets).get(topic, {}) if starting_offsets.startswith("{") \
        else {}
    starts = {}
    for p, (low, high) in bounds.items():
        chosen = given.get(str(p), -1 if starting_offsets == "latest" else -2)
        starts[str(p)] = low if chosen == -2 else high if chosen == -1 else int(chosen)
    write_atomic(checkpoint.statekit_dir / START_FILE, json.dumps({topic: starts}))


def recorded_start(checkpoint: Checkpoint) -> dict[tuple[str, int], int] | None:
    """What ``record_start`` kept: (topic, partition) → offset; None when nothing was kept
    (a checkpoint started before statekit kept it, or by another program)."""
    path = checkpoint.statekit_dir / START_FILE
    try:
        return kafka_offsets(path.read_text())
    except OSError:
        return None
