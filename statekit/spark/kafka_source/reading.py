"""A read task of the Kafka source: its offset ranges read, one after another, as Arrow
record batches of the source's columns.

Each topic-partition is read by this worker's consumer of it (``consumers``); records arrive
in chunks of up to ``_ARROW_CHUNK``, each written as one Arrow batch (with ``parsed`` when
the task has a value schema: ``json_values``). A range the broker said holds records but
sends none for ``_STALL_S`` is an error naming the broker (``stalled_read``).

Example:
    >>> list(read_ranges([]))  # nothing to read: no consumer is made
    []
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from pyspark.sql.types import StructType

from statekit.errors import DataLoss, StatekitError
from statekit.spark.kafka_source.columns import PARSED
from statekit.spark.kafka_source.consumers import PartitionReader, give_back, take_reader
from statekit.spark.kafka_source.json_values import JsonValues
from statekit.spark.kafka_source.offsets import KafkaInputPartition

_ARROW_CHUNK = 20_000
_STALL_S = 30.0          # no record for this long, where the broker said records exist: an error
_POLL_S = 0.1            # one consume() call's longest wait
_REASSIGN_S = 5.0        # a kept consumer silent this long is assigned its position afresh


def read_range(part: KafkaInputPartition, value_type: StructType | None = None) -> Iterator:
    """Yield Arrow record batches of one topic-partition's offsets ``[start, end)``."""
    return read_ranges((part,), value_type)


def read_ranges(ranges, value_type: StructType | None = None) -> Iterator:
    """Yield Arrow record batches of the offset ranges ``ranges``, one after another.

    Each topic-partition is read by this process's consumer of it (see ``PartitionReader``),
    kept for the next task once its range was read whole. With ``value_type`` (the struct of
    option valueSchema) every batch also carries the column ``parsed``: see ``JsonValues``.
    """
    if not ranges:
        return
    import pyarrow as pa

    fields = [
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ]
    parser = None
    if value_type is not None:
        parser = JsonValues(value_type)
        fields.append(pa.field(PARSED, parser.arrow_type))
    schema = pa.schema(fields)
    for part in ranges:
        reader = take_reader(part)
        done = False
        try:
            yield from _read_one(reader, part, schema, parser)
            done = True
        finally:
            give_back(reader, part, reusable=done)


def stalled_read(what: str, servers: str, why: str) -> StatekitError:
    """The error of a broker that stopped answering while the source read ``what``
    (``query._failure`` recognises "timed out reading … from '<servers>'")."""
    return StatekitError(
        f"timed out reading {what} from {servers!r}: the Kafka broker at that address is not "
        f"answering ({why}); check that it is up and reachable, then start the query again "
        f"with the same checkpoint: it resumes from its last commit")


def _read_one(reader: PartitionReader, part: KafkaInputPartition, schema, parser
              ) -> Iterator:
    import numpy as np
    import pyarrow as pa
    from confluent_kafka import KafkaError

    consumer = reader.consumer
    pending = reader.stash if reader.position_at(part) else []
    reader.stash = []
    keys, values, offsets, stamps, kinds = [], [], [], [], []
    add_key, add_value, add_offset = keys.append, values.append, offsets.append
    add_stamp, add_kind = stamps.append, kinds.append
    position, heard = part.start, time.monotonic()
    reassigned = False
    while position < part.end:
        if pending:
            messages, pending = pending, []
        else:
            # at most what the range still holds: consume() returns once it has that many
            messages = consumer.consume(min(_ARROW_CHUNK, part.end - position), timeout=_POLL_S)
        if not messages:
            silent = time.monotonic() - heard
            if silent > _REASSIGN_S and not reassigned:
                # A consumer kept from an earlier task (or query) that delivers nothing while
                # the broker said records exist is assigned its position afresh, once: seen
                # once in a full test run (a restarted query's first range, 30 s of nothing),
                # not reproduced alone. A broker that is really gone still ends in the error.
                reader.reassign(part.topic, part.partition, position)
                reassigned = True
                continue
            if silent > _STALL_S:
                raise stalled_read(
                    f"{part.topic}-{part.partition} offsets {position}..{part.end - 1}",
                    part.bootstrap_servers,
                    f"no record for {_STALL_S:.0f} s where it said records exist")
            continue
        heard = time.monotonic()
        for i, msg in enumerate(messages):
            err = msg.error()
            if err is None:
                offset = msg.offset()
                if offset < position:
                    continue
                if offset >= part.end:  # gaps in the range (transaction markers): read ahead
                    reader.stash = [m for m in messages[i:] if m.error() is None]
                    position = part.end
                    break
                kind, ts = msg.timestamp()
                add_key(msg.key())
                add_value(msg.value())
                add_offset(offset)
                add_stamp(ts)
                add_kind(kind)
                position = offset + 1
                continue
            if err.code() == KafkaError._PARTITION_EOF:
                position = max(position, msg.offset())  # gaps at the end (compaction, markers)
                continue
            if err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                raise DataLoss(
                    f"offset {position} of {part.topic}-{part.partition} is no longer on "
                    f"the broker {part.bootstrap_servers!r}; set failOnDataLoss=false to "
                    "skip what is gone")
            raise StatekitError(f"reading {part.topic}-{part.partition}: {err}")
        if len(offsets) >= _ARROW_CHUNK or (position >= part.end and offsets):
            n = len(offsets)
            value_array = pa.array(values, pa.binary())
            columns = [
                pa.array(keys, pa.binary()), value_array,
                pa.array([part.topic] * n, pa.string()),
                pa.array([part.partition] * n, pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array(np.asarray(stamps, np.int64) * 1000, pa.timestamp("us", tz="UTC")),
                # librdkafka's timestamp types 1/2 are Kafka's 0 (create) / 1 (log append)
                pa.array(np.asarray(kinds, np.int32) - 1, pa.int32()),
            ]
            if parser is not None:
                columns.append(parser.parse(values, value_array))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)
            keys.clear(), values.clear(), offsets.clear(), stamps.clear(), kinds.clear()
