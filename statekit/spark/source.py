"""A Kafka source for Spark Structured Streaming, written in Python on confluent-kafka.

No JVM Kafka connector can be fetched here, so statekit ships this one, built on
Spark's Python Data Source API. It reads the way Spark's own ``kafka`` format
does: one Spark input partition per topic-partition, consumer ``assign()`` (no
consumer group), offsets per partition kept in Spark's checkpoint (so a restart
replays exactly the same offset ranges), the same output columns, and the same
main options.

Options (``spark.readStream.format("statekit_kafka").option(...)``):
    kafka.bootstrap.servers  the cluster address (required)
    subscribe                topic name(s), comma separated (required)
    startingOffsets          ``earliest`` (default), ``latest`` or JSON like
                             ``{"games": {"0": 42, "1": -2}}`` (-2 earliest, -1 latest)
    maxOffsetsPerTrigger     at most this many records per micro-batch
    failOnDataLoss           ``true`` (default): offsets gone from the broker raise
    kafka.<setting>          any other librdkafka client setting

Example:
    >>> register(spark)                                                  # doctest: +SKIP
    >>> df = (spark.readStream.format("statekit_kafka")                  # doctest: +SKIP
    ...       .option("kafka.bootstrap.servers", broker.bootstrap_servers)
    ...       .option("subscribe", "games").load())
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from statekit.errors import BadArgument, DataLoss, StatekitError

FORMAT = "statekit_kafka"
SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
EARLIEST, LATEST = -2, -1
_ARROW_CHUNK = 20_000
PARTITION_REFRESH_S = 10.0


def register(spark) -> str:
    """Register the source with ``spark``; returns its format name."""
    spark.dataSource.register(KafkaSource)
    return FORMAT


def _client_settings(options: dict[str, str]) -> tuple[str, dict[str, str]]:
    servers = options.get("kafka.bootstrap.servers")
    if not servers:
        raise BadArgument("option kafka.bootstrap.servers", servers, "a 'host:port[,host:port]'")
    extra = {k[len("kafka."):]: v for k, v in options.items()
             if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}
    return servers, extra


def _topics(options: dict[str, str]) -> list[str]:
    topics = [t.strip() for t in options.get("subscribe", "").split(",") if t.strip()]
    if not topics:
        raise BadArgument("option subscribe", options.get("subscribe"),
                          "one or more topic names, comma separated")
    return topics


def _bool_option(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    if str(raw).lower() not in ("true", "false"):
        raise BadArgument(f"option {name}", raw, "true, false")
    return str(raw).lower() == "true"


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task: records ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int
    bootstrap_servers: str
    client_config: tuple[tuple[str, str], ...]
    fail_on_data_loss: bool


class KafkaSource(DataSource):
    """Spark data source ``statekit_kafka``: Kafka topics as a stream (and as a batch)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges on the driver; tasks read them with ``assign()``."""

    def __init__(self, options):
        # Spark hands options over case-insensitively (keys lower-cased).
        options = {k.lower(): v for k, v in options.items()}
        self.bootstrap_servers, self.client_config = _client_settings(options)
        self.topics = _topics(options)
        self.fail_on_data_loss = _bool_option(options, "failOnDataLoss", True)
        self.starting = options.get("startingoffsets", "earliest")
        max_per_trigger = options.get("maxoffsetspertrigger")
        self.max_per_trigger: int | None = None
        if max_per_trigger is not None:
            if not str(max_per_trigger).isdigit() or int(max_per_trigger) <= 0:
                raise BadArgument("option maxOffsetsPerTrigger", max_per_trigger,
                                  "a positive whole number of records")
            self.max_per_trigger = int(max_per_trigger)
        self._consumer = None
        self._available_now_target: dict | None = None
        self._resets: dict[tuple[str, str], int] = {}  # partition → where to read after a reset
        self._counts: dict[str, int] | None = None
        self._counts_at = 0.0
        self._last_ends: dict | None = None

    # --- broker access on the driver -------------------------------------------------
    def _client(self):
        if self._consumer is None:
            from statekit.kafka.topics import plain_consumer

            self._consumer = plain_consumer(self.bootstrap_servers, self.client_config)
        return self._consumer

    def _partition_counts(self) -> dict[str, int]:
        """Partitions per topic, asked again every few seconds to notice new partitions."""
        from statekit.kafka.topics import partition_count

        now = time.monotonic()
        if self._counts is None or now - self._counts_at > PARTITION_REFRESH_S:
            self._counts = {t: partition_count(self.bootstrap_servers, t, self.client_config)
                            for t in self.topics}
            self._counts_at = now
        return self._counts

    def _broker_offsets(self) -> dict[str, dict[int, tuple[int, int]]]:
        """topic → partition → (low, end), asking the broker now."""
        from statekit.kafka.topics import end_offsets

        marks = {topic: end_offsets(self._client(), topic, list(range(n)))
                 for topic, n in self._partition_counts().items()}
        self._last_ends = self._ends(marks)
        return marks

    # --- offsets ---------------------------------------------------------------------
    def initialOffset(self) -> dict:
        marks = self._broker_offsets()
        if self.starting in ("earliest", "latest"):
            pick = 0 if self.starting == "earliest" else 1
            return {t: {str(p): lh[pick] for p, lh in parts.items()} for t, parts in marks.items()}
        try:
            wanted = json.loads(self.starting)
            assert isinstance(wanted, dict)
        except (ValueError, AssertionError):
            raise BadArgument(
                "option startingOffsets", self.starting,
                'earliest, latest, or JSON like {"topic": {"0": 42, "1": -2}}') from None
        result = {}
        for topic, parts in marks.items():
            given = wanted.get(topic, {})
            result[topic] = {}
            for p, (low, end) in parts.items():
                off = int(given.get(str(p), EARLIEST))
                result[topic][str(p)] = low if off == EARLIEST else end if off == LATEST else off
        return result

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self._ends(self._broker_offsets())

    @staticmethod
    def _ends(marks) -> dict:
        return {t: {str(p): end for p, (_, end) in parts.items()} for t, parts in marks.items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        marks = self._broker_offsets()
        latest = self._available_now_target or self._ends(marks)
        begin = {}
        for topic, parts in latest.items():
            begin[topic] = {}
            for p, end in parts.items():
                low = marks[topic][int(p)][0]
                pos = start.get(topic, {}).get(p, low)  # a new partition starts at its beginning
                if pos < low:
                    pos = self._on_data_loss(topic, int(p), pos, low)
                elif pos > end:  # the topic was recreated or truncated under us
                    pos = self._on_offsets_reset(topic, int(p), pos, end, low)
                    self._resets[(topic, p)] = pos
                begin[topic][p] = min(pos, end)
        if isinstance(limit, ReadMaxRows):
            return _cap(begin, latest, limit.max_rows)
        return latest

    def _on_data_loss(self, topic: str, partition: int, wanted: int, low: int) -> int:
        if self.fail_on_data_loss:
            raise DataLoss(
                f"offsets {wanted}..{low - 1} of {topic}-{partition} are no longer on the broker "
                f"{self.bootstrap_servers!r} (deleted by retention or the topic was recreated); "
                "set option failOnDataLoss=false to continue from offset "
                f"{low}, or start over with a new checkpoint")
        return low

    def _on_offsets_reset(self, topic: str, partition: int, wanted: int, end: int,
                          low: int) -> int:
        if self.fail_on_data_loss:
            raise DataLoss(
                f"{topic}-{partition} ends at offset {end} on {self.bootstrap_servers!r} but the "
                f"checkpoint has read up to {wanted}: the topic was recreated or truncated; set "
                f"option failOnDataLoss=false to read it again from offset {low}, or start over "
                "with a new checkpoint")
        return low

    def reportLatestOffset(self) -> dict | None:
        """The ends seen by the last ``latestOffset`` call (no extra broker round trip)."""
        return self._last_ends

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        config = tuple(sorted(self.client_config.items()))
        planned = []
        for topic, parts in end.items():
            for p, stop in parts.items():
                begin = start.get(topic, {}).get(p, 0)
                if begin > stop:  # offsets reset under us (failOnDataLoss=false): read it anew
                    begin = self._resets.get((topic, p), 0)
                if stop > begin:
                    planned.append(KafkaInputPartition(
                        topic, int(p), begin, stop, self.bootstrap_servers, config,
                        self.fail_on_data_loss))
        return planned

    def read(self, partition: KafkaInputPartition) -> Iterator:
        return read_range(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _cap(start: dict, end: dict, budget: int) -> dict:
    """End offsets that read at most ``budget`` records, shared in proportion to what waits."""
    pending = {(t, p): end[t][p] - start[t][p] for t in end for p in end[t]}
    total = sum(pending.values())
    if total <= budget:
        return end
    capped = {t: dict(parts) for t, parts in start.items()}
    given = 0
    for (t, p), n in sorted(pending.items()):
        share = budget * n // total
        capped[t][p] = start[t][p] + share
        given += share
    for (t, p), _ in sorted(pending.items(), key=lambda kv: -kv[1]):  # hand out the remainder
        if given >= budget:
            break
        if capped[t][p] < end[t][p]:
            capped[t][p] += 1
            given += 1
    return capped


def read_range(part: KafkaInputPartition) -> Iterator:
    """Yield Arrow record batches of one topic-partition's offsets ``[start, end)``."""
    import numpy as np
    import pyarrow as pa
    from confluent_kafka import KafkaError, TopicPartition

    from statekit.kafka.topics import plain_consumer

    reset = "error" if part.fail_on_data_loss else "earliest"
    consumer = plain_consumer(part.bootstrap_servers, dict(part.client_config),
                              **{"fetch.wait.max.ms": 100, "auto.offset.reset": reset})
    schema = pa.schema([
        ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
        ("partition", pa.int32()), ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
    ])
    try:
        consumer.assign([TopicPartition(part.topic, part.partition, part.start)])
        keys, values, offsets, stamps, kinds = [], [], [], [], []
        add_key, add_value, add_offset = keys.append, values.append, offsets.append
        add_stamp, add_kind = stamps.append, kinds.append
        position, idle = part.start, 0
        while position < part.end:
            # ask for no more than the range holds: consume() waits for its count or timeout
            messages = consumer.consume(min(_ARROW_CHUNK, part.end - position), timeout=0.5)
            if not messages:
                idle += 1
                if idle > 60:  # 30 s without a record for a range the broker said exists
                    raise StatekitError(
                        f"timed out reading {part.topic}-{part.partition} offsets "
                        f"{position}..{part.end - 1} from {part.bootstrap_servers!r}")
                continue
            idle = 0
            for msg in messages:
                err = msg.error()
                if err is None:
                    offset = msg.offset()
                    if offset >= part.end:
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
                    position = max(position, msg.offset())  # gaps at the end (compaction)
                    continue
                if err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                    raise DataLoss(
                        f"offset {position} of {part.topic}-{part.partition} is no longer on "
                        f"the broker {part.bootstrap_servers!r}; set failOnDataLoss=false to "
                        "skip what is gone")
                raise StatekitError(f"reading {part.topic}-{part.partition}: {err}")
            if len(offsets) >= _ARROW_CHUNK or (position >= part.end and offsets):
                n = len(offsets)
                yield pa.RecordBatch.from_arrays([
                    pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                    pa.array([part.topic] * n, pa.string()),
                    pa.array([part.partition] * n, pa.int32()),
                    pa.array(offsets, pa.int64()),
                    pa.array(np.asarray(stamps, np.int64) * 1000, pa.timestamp("us", tz="UTC")),
                    # librdkafka's timestamp types 1/2 are Kafka's 0 (create) / 1 (log append)
                    pa.array(np.asarray(kinds, np.int32) - 1, pa.int32()),
                ], schema=schema)
                keys.clear(), values.clear(), offsets.clear(), stamps.clear(), kinds.clear()
    finally:
        consumer.close()
