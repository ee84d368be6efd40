"""Late events counted as events: a batch's input read again from Kafka, parsed as the query
parses it, and the events whose window had ended at the watermark counted.

Spark counts the groups it drops (``numRowsDroppedByWatermark``), not events.
"""

from __future__ import annotations

import warnings

from confluent_kafka import KafkaException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    StructType,
)

from statekit.model.query_spec import QuerySpec
from statekit.query.input_replay import (
    RAW_SCHEMA,
    KafkaInput,
    read_batches,
)
from statekit.query.parsing import parse_events
from statekit.spark_state.spark_files import _ranges


def count_late_events(spark: SparkSession, source: KafkaInput, spec: QuerySpec,
                      batches: dict[int, tuple[dict, int]]) -> dict[int, int | None]:
    """Late events of each of ``batches`` (batch → (its input ranges, the watermark its late
    events are judged by, ms)): its records read again from Kafka, the malformed ones left out
    by ``parse_events``, and the valid ones whose (first) window ended at or before that
    watermark counted — what Spark's aggregation dropped, as events. None for a batch whose
    records are no longer all on the broker."""
    try:
        rows, gone = read_batches(source, batches)
    except (KafkaException, TimeoutError) as exc:
        warnings.warn(f"late_events(): the input of batches {_ranges(batches)} cannot be read "
                      f"again from {source.kafka.bootstrap_servers!r}: {exc}", stacklevel=3)
        return dict.fromkeys(batches)
    counts: dict[int, int | None] = {b: (None if b in gone else 0) for b in batches}
    if not len(rows):
        return counts
    raw = spark.createDataFrame(rows, RAW_SCHEMA)
    _, malformed = parse_events(raw, source.schema, source.required, event_time=spec.event_time,
                                max_event_time_ahead=spec.max_event_time_ahead)
    position = ["topic", "partition", "offset"]
    valid = raw.join(malformed.select(*position), position, "left_anti")
    struct = (StructType.fromDDL(source.schema) if isinstance(source.schema, str)
              else source.schema)
    event_time = F.from_json(F.col("value").cast("string"), struct)[spec.event_time]
    timed = valid.select("_sk_batch", "_sk_late_ms", *position, event_time.alias(spec.event_time))
    windows = timed.select("_sk_batch", "_sk_late_ms", *position,
                           spec.window.column(spec.event_time))
    late = (F.col("window.end") <= F.timestamp_millis(F.col("_sk_late_ms"))).cast("int")
    per_event = windows.groupBy("_sk_batch", *position).agg(F.max(late).alias("late"))
    for row in per_event.groupBy("_sk_batch").agg(F.sum("late").alias("late")).collect():
        if row["_sk_batch"] not in gone:
            counts[int(row["_sk_batch"])] = int(row["late"] or 0)
    return counts
