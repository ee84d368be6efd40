"""A Kafka source for Spark Structured Streaming, written in Python on confluent-kafka.

No JVM Kafka connector can be fetched here, so statekit ships this one, built on
Spark's Python Data Source API. It reads the way Spark's own ``kafka`` format
does: consumer ``assign()`` (no consumer group), offsets per partition kept in
Spark's checkpoint (so a restart replays exactly the same offset ranges), the
same output columns, and the same main options.

Unlike Spark's connector it does not give every topic-partition its own Spark
task: each Python read task costs Spark a round of hand-offs between the JVM and
a Python worker (measured here: about 60 ms a task on a busy 2-core machine, for
a task that reads nothing), so the ranges of a micro-batch are packed into at
most ``maxReadTasks`` tasks of similar size, each reading its ranges one after
another. A Python worker keeps one consumer per topic-partition between tasks
(Spark reuses Python workers): a range that starts where that consumer's last one
ended reads on from what it already fetched, with no new ``assign()`` and no wait;
any other range is assigned anew. Spark does not send a partition to the same
worker every batch (Kafka Streams' sticky assignment has no counterpart here), so a
kept consumer is a speed-up, never relied upon for correctness.

Options (``spark.readStream.format("statekit_kafka").option(...)``)::

    kafka.bootstrap.servers  the cluster address (required)
    subscribe                topic name(s), comma separated (required)
    startingOffsets          ``earliest`` (default), ``latest`` or JSON like
                             ``{"games": {"0": 42, "1": -2}}`` (-2 earliest, -1 latest)
    endingOffsets            JSON like ``{"games": {"0": 500}}``: read each listed partition
                             up to (not including) that offset, then wait; partitions not
                             listed are read to their end. Spark's ``kafka`` format takes this
                             option in batch queries only; here a stream takes it too (a
                             crash drill uses it to leave input for the restarted query)
    maxOffsetsPerTrigger     at most this many records per micro-batch
    maxReadTasks             at most this many Spark tasks read a micro-batch (default: the
                             driver host's CPU count); topic-partitions are packed into them
    failOnDataLoss           ``true`` (default): offsets gone from the broker raise
    valueSchema              the fields of JSON object values (Spark DDL, or a StructType as
                             JSON): adds a column ``parsed`` (see "Parsing in the source")
    kafka.<setting>          any other librdkafka client setting

Parsing in the source:
    With ``valueSchema``, each read task also parses the values with Arrow's JSON reader
    and hands Spark typed columns in the struct ``parsed``, so Spark need not run
    ``from_json`` over every record (about half of the JVM's work per record in the
    windowed aggregation). ``parsed`` is set only where the result is certainly what
    ``from_json(value, schema)`` gives: the value is one JSON object on one line, every
    declared field present holds a value of exactly its type (string, bigint, int,
    double, boolean, or a timestamp written as ISO 8601 with a zone, e.g.
    ``2024-01-01T00:00:00.001Z``, its offset within Java's ±18:00 — Arrow alone would
    read up to ±23:59, which Spark makes null), the whole value valid UTF-8. Anything
    else (not JSON, a wrong type, a number for a timestamp, NaN, duplicate keys, a
    pretty-printed value, blanks before the object or text after it, a tombstone, bytes
    that are not UTF-8) is left with ``parsed`` null, for ``from_json`` to parse and
    explain as before. Every row keeps its raw ``value``. ``tests/test_bad_input.py``
    feeds both parsers the same edge cases and compares them row by row.
    Other field types (dates, decimals, nested types) are not parsed here: ``parsed``
    is then always null.

Planning: while the broker's last answer (under 10 s old) already shows at least
``maxOffsetsPerTrigger`` records waiting, a micro-batch is planned from it without
asking the broker again (a query catching up on a backlog saves a round trip of
watermark requests a batch); a caught-up query asks every trigger.

Example:
    >>> register(spark)                                                  # doctest: +SKIP
    >>> df = (spark.readStream.format("statekit_kafka")                  # doctest: +SKIP
    ...       .option("kafka.bootstrap.servers", broker.bootstrap_servers)
    ...       .option("subscribe", "games").load())
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
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

from statekit.errors import BadArgument, BrokerUnreachable, DataLoss, StatekitError

FORMAT = "statekit_kafka"
SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
PARSED = "parsed"  # the column of values parsed in the source (option valueSchema)
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


def _value_schema_option(options) -> str | StructType | None:
    """Option valueSchema: None, a DDL string, or a StructType given as JSON."""
    raw = {k.lower(): v for k, v in options.items()}.get("valueschema")
    if raw is None or not str(raw).strip():
        return None
    raw = str(raw).strip()
    if not raw.startswith("{"):
        return raw
    try:
        struct = StructType.fromJson(json.loads(raw))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise BadArgument("option valueSchema", raw,
                          "Spark DDL like 'player string, ts timestamp', or "
                          "StructType.json()") from None
    return struct


def _kafka_struct() -> StructType:
    """SCHEMA as a StructType (built in Python: no JVM in Spark's Python workers)."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        TimestampType,
    )

    return StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("offset", LongType()), StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType())])


def _bool_option(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    if str(raw).lower() not in ("true", "false"):
        raise BadArgument(f"option {name}", raw, "true, false")
    return str(raw).lower() == "true"


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """Records ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int
    bootstrap_servers: str
    client_config: tuple[tuple[str, str], ...]
    fail_on_data_loss: bool


@dataclass(frozen=True)
class KafkaReadTask(InputPartition):
    """One Spark task: offset ranges read one after another with one consumer."""

    ranges: tuple[KafkaInputPartition, ...]

    @property
    def records(self) -> int:
        return sum(r.end - r.start for r in self.ranges)


def pack_ranges(ranges: list[KafkaInputPartition], tasks: int) -> list[KafkaReadTask]:
    """At most ``tasks`` read tasks of similar size (largest range first into the lightest).

    Example:
        >>> rs = [KafkaInputPartition("t", p, 0, n, "b:9092", (), True)
        ...       for p, n in enumerate([50, 40, 30, 20])]
        >>> [t.records for t in pack_ranges(rs, 2)]
        [70, 70]
    """
    tasks = max(1, min(tasks, len(ranges)))
    bins: list[list[KafkaInputPartition]] = [[] for _ in range(tasks)]
    sizes = [0] * tasks
    for r in sorted(ranges, key=lambda r: (-(r.end - r.start), r.topic, r.partition)):
        i = sizes.index(min(sizes))
        bins[i].append(r)
        sizes[i] += r.end - r.start
    return [KafkaReadTask(tuple(sorted(b, key=lambda r: (r.topic, r.partition))))
            for b in bins if b]


class KafkaSource(DataSource):
    """Spark data source ``statekit_kafka``: Kafka topics as a stream (and as a batch)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str | StructType:
        value_schema = _value_schema_option(self.options)
        if value_schema is None:
            return SCHEMA
        if isinstance(value_schema, str):  # DDL: Spark parses the whole schema string
            return f"{SCHEMA}, {PARSED} struct<{value_schema}>"
        from pyspark.sql.types import StructField

        fields = [StructField(f.name, f.dataType, True) for f in value_schema.fields]
        return StructType([*_kafka_struct().fields, StructField(PARSED, StructType(fields))])

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options, schema)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges on the driver; tasks read them with ``assign()``."""

    def __init__(self, options, schema: StructType | None = None):
        # Spark hands options over case-insensitively (keys lower-cased).
        options = {k.lower(): v for k, v in options.items()}
        #: the struct type of column ``parsed`` (None: option valueSchema not given)
        self.value_type: StructType | None = None
        if schema is not None and PARSED in schema.fieldNames():
            self.value_type = schema[PARSED].dataType
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
        self.ending = _ending_offsets(options.get("endingoffsets"))
        tasks = options.get("maxreadtasks")
        if tasks is not None and (not str(tasks).isdigit() or int(tasks) <= 0):
            raise BadArgument("option maxReadTasks", tasks, "a positive whole number of tasks")
        self.max_read_tasks = int(tasks) if tasks is not None else (os.cpu_count() or 1)
        self._consumer = None
        self._marks: dict | None = None  # the broker's last answer, and when it came
        self._marks_at = 0.0
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

        try:
            marks = {topic: end_offsets(self._client(), topic, list(range(n)))
                     for topic, n in self._partition_counts().items()}
        except BrokerUnreachable as exc:  # stalled between batches: named as a stalled read
            raise _stalled(f"the offsets of {', '.join(self.topics)}", self.bootstrap_servers,
                           str(exc)) from None
        self._last_ends = self._ends(marks)
        self._marks, self._marks_at = marks, time.monotonic()
        return marks

    def _marks_for(self, start: dict, limit: ReadLimit) -> dict[str, dict[int, tuple[int, int]]]:
        """The broker's offsets for planning a trigger after ``start``.

        While the last answer (less than PARTITION_REFRESH_S old) already shows at least
        ``limit`` records waiting, the broker is not asked again: the batch reads
        ``limit`` records whatever arrived since. A query catching up on a backlog thus
        plans its batches without a round trip each (about 55 ms a batch here); a caught-up
        query asks every trigger, as before.
        """
        marks = self._marks
        if (isinstance(limit, ReadMaxRows) and marks is not None
                and time.monotonic() - self._marks_at < PARTITION_REFRESH_S):
            waiting = 0
            for topic, parts in marks.items():
                for p, (low, end) in parts.items():
                    pos = start.get(topic, {}).get(str(p), low)
                    if pos < low or pos > end:  # data loss or a reset: let the broker decide
                        return self._broker_offsets()
                    waiting += end - pos
            if waiting >= limit.max_rows:
                return marks
        return self._broker_offsets()

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
        marks = self._marks_for(start, limit)
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
        if self.ending:
            latest = {t: {p: max(begin[t][p], min(end, self.ending.get(t, {}).get(p, end)))
                          for p, end in parts.items()} for t, parts in latest.items()}
        if isinstance(limit, ReadMaxRows):
            return cap_offsets(begin, latest, limit.max_rows)
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

    def partitions(self, start: dict, end: dict) -> list[KafkaReadTask]:
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
        return pack_ranges(planned, self.max_read_tasks)

    def read(self, partition: KafkaReadTask | KafkaInputPartition) -> Iterator:
        ranges = partition.ranges if isinstance(partition, KafkaReadTask) else (partition,)
        return read_ranges(ranges, self.value_type)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _ending_offsets(option: str | None) -> dict[str, dict[str, int]]:
    """Option endingOffsets as topic → partition (a string) → offset; {} when not given."""
    if option is None:
        return {}
    with contextlib.suppress(ValueError):
        given = json.loads(option)
        if isinstance(given, dict) and all(
                isinstance(parts, dict) and all(
                    p.isdigit() and type(off) is int and off >= 0 for p, off in parts.items())
                for parts in given.values()):
            return {t: {str(int(p)): off for p, off in parts.items()}
                    for t, parts in given.items()}
    raise BadArgument("option endingOffsets", option,
                      'JSON like {"topic": {"0": 500}} (partition → offset, a whole number >= 0)')


def cap_offsets(start: dict, end: dict, budget: int) -> dict:
    """End offsets that read at most ``budget`` records, shared in proportion to what waits.

    ``start`` and ``end``: topic → partition (a string) → offset."""
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


def read_range(part: KafkaInputPartition, value_type: StructType | None = None) -> Iterator:
    """Yield Arrow record batches of one topic-partition's offsets ``[start, end)``."""
    return read_ranges((part,), value_type)


# --- reading: a consumer per topic-partition, kept with its position between tasks ----------
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
_STALL_S = 30.0          # no record for this long, where the broker said records exist: an error
_POLL_S = 0.1            # one consume() call's longest wait


class _PartitionReader:
    """One consumer assigned to one topic-partition, and the offset it delivers next.

    A Python worker keeps its readers between tasks (Spark reuses Python workers): when a
    task's range starts where the reader's last one ended, it reads on without a new
    assignment, from what the consumer already prefetched; otherwise it is assigned the range's
    start (librdkafka drops the prefetched records). Records fetched past a range's end wait in
    ``stash`` for the next range.
    """

    def __init__(self, key: tuple, consumer):
        self.key, self.consumer = key, consumer
        self.next_offset: int | None = None  # None: not positioned (a new consumer)
        self.stash: list = []
        self.paused = False
        self.used = time.monotonic()

    def position_at(self, part: KafkaInputPartition) -> bool:
        """Make the next record read the first of ``part``'s range; True if it read on."""
        from confluent_kafka import TopicPartition

        where = TopicPartition(part.topic, part.partition, part.start)
        if self.next_offset == part.start:
            if self.paused:
                self.consumer.resume([where])
                self.paused = False
            return True
        self.stash = []
        self.consumer.assign([where])
        if self.paused:  # a partition paused at the log end stays paused through assign()
            self.consumer.resume([where])
        self.paused, self.next_offset = False, part.start
        return False

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
_READERS: dict[tuple, _PartitionReader] = {}
_READERS_LOCK = threading.Lock()


def _reader_key(part: KafkaInputPartition) -> tuple:
    reset = "error" if part.fail_on_data_loss else "earliest"
    return part.bootstrap_servers, part.client_config, reset, part.topic, part.partition


def _take_reader(part: KafkaInputPartition) -> _PartitionReader:
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
    from statekit.kafka.topics import plain_consumer

    return _PartitionReader(key, plain_consumer(
        part.bootstrap_servers, dict(part.client_config),
        **{**READ_SETTINGS, "auto.offset.reset": key[2]}))


def _give_back(reader: _PartitionReader, part: KafkaInputPartition, reusable: bool) -> None:
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


def read_ranges(ranges, value_type: StructType | None = None) -> Iterator:
    """Yield Arrow record batches of the offset ranges ``ranges``, one after another.

    Each topic-partition is read by this process's consumer of it (see ``_PartitionReader``),
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
        reader = _take_reader(part)
        done = False
        try:
            yield from _read_one(reader, part, schema, parser)
            done = True
        finally:
            _give_back(reader, part, reusable=done)


def _stalled(what: str, servers: str, why: str) -> StatekitError:
    """The error of a broker that stopped answering while the source read ``what``
    (``query._failure`` recognises "timed out reading … from '<servers>'")."""
    return StatekitError(
        f"timed out reading {what} from {servers!r}: the Kafka broker at that address is not "
        f"answering ({why}); check that it is up and reachable, then start the query again "
        f"with the same checkpoint: it resumes from its last commit")


def _read_one(reader: _PartitionReader, part: KafkaInputPartition, schema, parser
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
    while position < part.end:
        if pending:
            messages, pending = pending, []
        else:
            # at most what the range still holds: consume() returns once it has that many
            messages = consumer.consume(min(_ARROW_CHUNK, part.end - position), timeout=_POLL_S)
        if not messages:
            if time.monotonic() - heard > _STALL_S:
                raise _stalled(f"{part.topic}-{part.partition} offsets {position}..{part.end - 1}",
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


# --- JSON values parsed in the source (option valueSchema) --------------------------------
# An ISO 8601 instant with an explicit zone: parsed by Spark's from_json and by Arrow alike.
# The offset stays within Java's ZoneOffset range, ±18:00 (Arrow reads up to ±23:59).
_ISO_INSTANT = (r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?"
                r"(Z|[+-](0\d|1[0-7]):[0-5]\d|[+-]18:00)$")
_MAX_READS = 200  # Arrow reads per chunk spent isolating bad values; the rest go to from_json


class JsonValues:
    """Parses Kafka values (JSON objects) into typed columns exactly as ``from_json`` would.

    ``parse`` returns a struct array with one row per value: the typed fields where the
    value is certainly parsed the same way by Arrow's JSON reader and by Spark's
    ``from_json`` (see the module docstring, "Parsing in the source"), null elsewhere.
    A chunk that Arrow cannot read whole is halved until the values it cannot read are
    isolated; those stay null. Isolating is bounded (200 Arrow reads a chunk, enough for
    a dozen bad values among 20,000): past that, the segments still failing stay null
    whole, so a topic full of bad values costs little more than Spark's parsing.

    Example:
        >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
        >>> jv = JsonValues(StructType([StructField("player", StringType()),
        ...                             StructField("score", LongType())]))
        >>> jv.parse([b'{"player": "p1", "score": 3}', b'{"score": "x"}', None]).to_pylist()
        [{'player': 'p1', 'score': 3}, None, None]
    """

    def __init__(self, struct: StructType):
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        self.struct = struct
        #: the Arrow type of column ``parsed``, as Spark expects it
        self.arrow_type = to_arrow_type(struct, timezone="UTC")
        read_fields, self.timestamps, self.doubles, self.texts = [], [], [], []
        self.enabled = True
        for field in struct.fields:
            name = field.dataType.simpleString()
            if name == "timestamp":
                read_fields.append(pa.field(field.name, pa.string()))
                self.timestamps.append(field.name)
                self.texts.append(field.name)
            elif name in ("string", "bigint", "int", "double", "boolean"):
                read_fields.append(pa.field(field.name, to_arrow_type(field.dataType)))
                if name == "double":
                    self.doubles.append(field.name)
                if name == "string":
                    self.texts.append(field.name)
            else:
                self.enabled = False
            if not field.nullable:  # a missing field is null: leave such schemas to Spark
                self.enabled = False
        self.read_schema = pa.schema(read_fields)

    def parse(self, values: list, value_array=None):
        """A struct array (type ``arrow_type``) of ``values`` parsed, null where left to Spark."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(values)
        if not self.enabled or n == 0:
            return pa.nulls(n, self.arrow_type)
        if value_array is None:
            value_array = pa.array(values, pa.binary())
        # one JSON object on one line: starts with '{', ends with '}', no line break inside
        eligible = pc.and_kleene(
            pc.and_kleene(pc.starts_with(value_array, "{"), pc.ends_with(value_array, "}")),
            pc.invert(pc.match_substring_regex(value_array, "[\n\r]")))
        candidates = np.flatnonzero(eligible.fill_null(False).to_numpy(zero_copy_only=False))
        pieces: list = []
        self._parse_segment(values, candidates, pieces, [_MAX_READS])
        if not pieces:
            return pa.nulls(n, self.arrow_type)
        positions = np.concatenate([idx for idx, _ in pieces])
        table = pa.concat_tables([t for _, t in pieces])
        columns, bad = self._finish(table)
        source_row = np.full(n, -1, np.int64)
        source_row[positions] = np.arange(len(positions))
        if bad is not None and bad.any():
            source_row[positions[bad]] = -1
        missing = source_row < 0
        take = pa.array(source_row, pa.int64(), mask=missing)
        children = [pc.take(columns[f.name], take) for f in self.struct.fields]
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type),
                                          mask=pa.array(missing))

    def _read(self, values: list):
        """Arrow's reading of ``values`` (one per line), or None when it fails or misaligns."""
        import pyarrow as pa
        import pyarrow.json as pj

        buffer = b"\n".join(values)
        try:  # Spark would read bytes that are not UTF-8 as U+FFFD; statekit keeps them aside
            buffer.decode("utf-8")
        except UnicodeDecodeError:
            return None
        try:
            table = pj.read_json(
                pa.BufferReader(buffer),
                read_options=pj.ReadOptions(use_threads=False, block_size=len(buffer) + 64),
                parse_options=pj.ParseOptions(explicit_schema=self.read_schema,
                                              unexpected_field_behavior="ignore"))
        except (pa.ArrowException, ValueError):
            return None
        if table.num_rows != len(values):
            return None
        try:  # an escaped lone surrogate (\ud800) unescapes to bytes that are not UTF-8
            for name in self.texts:
                table.column(name).validate(full=True)
        except pa.ArrowInvalid:
            return None
        return table

    def _parse_segment(self, values: list, idx, pieces: list, budget: list[int]) -> None:
        """Read ``values[idx]``; on failure, halve and retry while ``budget[0]`` lasts."""
        if len(idx) == 0 or budget[0] <= 0:
            return
        budget[0] -= 1
        table = self._read([values[i] for i in idx])
        if table is not None:
            pieces.append((idx, table))
        elif len(idx) > 1:
            half = len(idx) // 2
            self._parse_segment(values, idx[:half], pieces, budget)
            self._parse_segment(values, idx[half:], pieces, budget)

    def _finish(self, table):
        """Columns by name with timestamps converted; rows to leave to Spark (bool array)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        columns = {name: pa.concat_arrays(table.column(name).chunks)
                   for name in table.column_names}
        bad = np.zeros(table.num_rows, bool)
        for name in self.doubles:  # NaN and infinities: Spark's reading differs by spelling
            finite = pc.is_finite(columns[name]).fill_null(True)
            bad |= ~finite.to_numpy(zero_copy_only=False)
        for name in self.timestamps:
            text = columns[name]
            iso = pc.match_substring_regex(text, _ISO_INSTANT).fill_null(True)
            bad |= ~iso.to_numpy(zero_copy_only=False)
            text = pc.if_else(iso, text, pa.scalar(None, pa.string()))
            target = pa.timestamp("us", tz="UTC")
            try:
                columns[name] = pc.cast(text, target)
            except pa.ArrowInvalid:  # a well-formed but impossible date (2024-02-30): one by one
                cast = []
                for i, item in enumerate(text.to_pylist()):
                    try:
                        cast.append(pc.cast(pa.array([item], pa.string()), target)[0].value)
                    except pa.ArrowInvalid:
                        bad[i] = True
                        cast.append(None)
                columns[name] = pa.array(cast, target)
        return columns, bad


# --- a broker-free stream shaped like this source, for warming a session up ------------
WARM_UP_FORMAT = "statekit_warmup"


@dataclass(frozen=True)
class _WarmUpTask(InputPartition):
    batch: int
    task: int
    rows: int


class WarmUpSource(DataSource):
    """``statekit_warmup``: a few batches of game events with this source's columns, no broker.

    Used by ``statekit.spark.session.start_warm_up`` to run Spark's Python data source
    machinery (the driver-side runner, Python read workers, Arrow hand-off, ``parsed``) once
    before a real query. Options: ``rows`` per batch (default 2000), ``batches`` (default
    2), ``valueSchema`` as for ``statekit_kafka``, and ``stopFile``: once that file exists,
    no further batch is offered, so an ``availableNow`` query ends after its current batch.
    """

    @classmethod
    def name(cls) -> str:
        return WARM_UP_FORMAT

    def schema(self) -> str | StructType:
        return KafkaSource(self.options).schema()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _WarmUpReader(self.options, schema)


class _WarmUpReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema: StructType):
        options = {k.lower(): v for k, v in options.items()}
        self.rows = int(options.get("rows", 2000))
        self.batches = int(options.get("batches", 2))
        self.stop_file = options.get("stopfile")
        self.value_type = schema[PARSED].dataType if PARSED in schema.fieldNames() else None

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        done = (start or {"batch": 0})["batch"]
        if self.stop_file and os.path.exists(self.stop_file):
            return {"batch": done}
        return {"batch": min(self.batches, done + 1)}

    def partitions(self, start: dict, end: dict) -> list[_WarmUpTask]:
        return [_WarmUpTask(b, t, self.rows // 2)
                for b in range(start["batch"], end["batch"]) for t in range(2)]

    def read(self, partition: _WarmUpTask) -> Iterator:
        # what a read task of statekit_kafka loads too, so that the first real task finds it
        import confluent_kafka  # noqa: F401
        import numpy as np
        import pyarrow as pa

        import statekit.kafka.topics  # noqa: F401

        n, first = partition.rows, (partition.batch * 2 + partition.task) * partition.rows
        base_ms = 1_704_067_200_000  # 2024-01-01T00:00:00Z
        values = [json.dumps({"player": f"p{(first + i) % 100:02d}", "game": "g1",
                              "score": i % 100, "ts": _iso_ms(base_ms + first + i)}).encode()
                  for i in range(n)]
        value_array = pa.array(values, pa.binary())
        stamps = pa.array((base_ms + first + np.arange(n)) * 1000, pa.timestamp("us", tz="UTC"))
        columns = [pa.array([b"k"] * n, pa.binary()), value_array,
                   pa.array([WARM_UP_FORMAT] * n, pa.string()),
                   pa.array([partition.task] * n, pa.int32()),
                   pa.array(first + np.arange(n), pa.int64()), stamps,
                   pa.array([0] * n, pa.int32())]
        names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        if self.value_type is not None:
            columns.append(JsonValues(self.value_type).parse(values, value_array))
            names.append(PARSED)
        yield pa.RecordBatch.from_arrays(columns, names=names)

    def commit(self, end: dict) -> None:
        pass


def _iso_ms(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"
