"""The bytes of the reference Kafka Streams application's changelog, decoded.

Kafka Streams writes the store's own bytes to ``<application.id>-aggregate-changelog``:

* key: the group key (UTF-8) for a key-value store; for a window store the key, then the
  window start (8 bytes) and a sequence number (4 bytes); for a session store the key, then
  the session's end and start (8 bytes each);
* value: the app's aggregation state (``AccumulatorSerde.java``: rows, then per aggregate
  count, sum, min, max); none for a tombstone. The timestamped stores the DSL makes keep an
  8-byte timestamp before the value locally, but log it as the record's timestamp.

Example:
    >>> import struct
    >>> from statekit.model.query_spec import QuerySpec, tumbling
    >>> spec = QuerySpec(keys=["p"], window=tumbling("1 minute"), aggregates=["count", "sum(x)"])
    >>> key = b"p1" + struct.pack(">qi", 60000, 0)       # key, window start, sequence number
    >>> value = (struct.pack(">q", 2)                      # rows
    ...          + struct.pack(">q3d", 0, 0.0, 0.0, 0.0)   # count: uses rows alone
    ...          + struct.pack(">q3d", 2, 5.0, 2.0, 3.0))  # sum(x): count, sum, min, max
    >>> decode_key(key, spec)
    ('p1', 60000, 120000)
    >>> decode_value(value, spec)
    {'count': 2, 'sum_x': 5.0}
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import consume_ranges, offset_bounds
from statekit.kafka.topics import partition_count
from statekit.kafka_streams.store_formats import split_session_key, split_window_key
from statekit.model.connection import Kafka
from statekit.model.query_spec import QuerySpec

if TYPE_CHECKING:
    import pandas as pd

_AGGREGATE = struct.Struct(">q3d")  # count, sum, min, max


def decode_key(raw: bytes, spec: QuerySpec) -> tuple[str, int | None, int | None]:
    """(group key text, window start ms, window end ms) of a changelog key (no window for a
    key-value store; a session's end is its last event's time, as Kafka Streams keeps it).
    The key schemas are the stores' own (``store_formats``)."""
    if spec.kind == "running":
        return raw.decode(), None, None
    if spec.kind == "session":
        key, start, end = split_session_key(raw)
        return key.decode(), start, end
    key, start = split_window_key(raw)
    return key.decode(), start, start + spec.window.size_ms


def decode_value(raw: bytes | None, spec: QuerySpec) -> dict | None:
    """The aggregates' values of a changelog value (None for a tombstone), nulls as in SQL."""
    if raw is None:
        return None
    (rows,) = struct.unpack_from(">q", raw)
    values = {}
    for i, agg in enumerate(spec.aggregates):
        count, total, low, high = _AGGREGATE.unpack_from(raw, 8 + i * _AGGREGATE.size)
        if agg.function == "count":
            values[agg.name] = rows if agg.column is None else count
        elif count == 0:
            values[agg.name] = None
        else:
            values[agg.name] = {"sum": total, "min": low, "max": high,
                                "avg": total / count}[agg.function]
    return values


def read_app_changelog(kafka: Kafka, topic: str, spec: QuerySpec) -> pd.DataFrame:
    """Every record of ``topic`` (the app's changelog) decoded, in offset order per
    partition: ``partition``, ``offset``, ``timestamp``, ``key``, ``window_start``,
    ``window_end`` (epoch ms; windowed stores), then the values (NaN for a tombstone)."""

    def decode(raw_key: bytes, raw_value: bytes | None) -> dict:
        key, start, end = decode_key(raw_key, spec)
        row = {"key": key}
        if start is not None:
            row.update(window_start=start, window_end=end)
        row.update(decode_value(raw_value, spec) or {})
        return row

    return read_changelog_records(kafka, topic, decode)


def read_changelog_records(kafka: Kafka, topic: str,
                           decode: Callable[[bytes, bytes | None], dict]) -> pd.DataFrame:
    """Every record of the changelog ``topic`` the broker keeps, in offset order per
    partition: ``partition``, ``offset``, ``timestamp``, then ``decode(key, value)``'s
    columns (value None: a tombstone)."""
    import pandas as pd

    partitions = list(range(partition_count(kafka, topic)))
    bounds = offset_bounds(kafka, topic, partitions, committed=True)
    consumer = plain_consumer(kafka)
    rows = []
    try:
        for chunk in consume_ranges(consumer, topic, bounds):
            for msg in chunk:
                rows.append({"partition": msg.partition(), "offset": msg.offset(),
                             "timestamp": msg.timestamp()[1],
                             **decode(msg.key(), msg.value())})
    finally:
        consumer.close()
    return pd.DataFrame(rows)
