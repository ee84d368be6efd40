"""The Kafka source's ``DataSource`` (``statekit_kafka``) and its stream reader.

``KafkaSource`` is what Spark registers (``register``) and pickles, by reference, into its
Python workers. ``KafkaStreamReader`` plans each micro-batch on the driver from the
broker's offsets (``offsets``) and reads a planned task in a worker (``reading``).

Example:
    >>> KafkaSource.name()
    'statekit_kafka'
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from statekit.errors import BadArgument, BrokerUnreachable, DataLoss
from statekit.spark.kafka_source.columns import PARSED, SCHEMA, kafka_struct
from statekit.spark.kafka_source.offsets import (
    KafkaInputPartition,
    KafkaReadTask,
    cap_offsets,
    ending_offsets,
    log_ends,
    pack_ranges,
    starting_offsets,
)
from statekit.spark.kafka_source.options import (
    bool_option,
    client_settings,
    subscribed_topics,
    value_schema_option,
)
from statekit.spark.kafka_source.reading import read_ranges, stalled_read

FORMAT = "statekit_kafka"
PARTITION_REFRESH_S = 10.0


_REGISTERED: weakref.WeakSet = weakref.WeakSet()  # the sessions it is registered with
_REGISTERING = threading.Lock()


def register(spark) -> str:
    """Register the source with ``spark`` (once per session: a call while another thread
    registers it waits for that one); returns its format name."""
    with _REGISTERING:
        if spark not in _REGISTERED:
            spark.dataSource.register(KafkaSource)
            _REGISTERED.add(spark)
    return FORMAT


class KafkaSource(DataSource):
    """Spark data source ``statekit_kafka``: Kafka topics as a stream (and as a batch)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str | StructType:
        value_schema = value_schema_option(self.options)
        if value_schema is None:
            return SCHEMA
        if isinstance(value_schema, str):  # DDL: Spark parses the whole schema string
            return f"{SCHEMA}, {PARSED} struct<{value_schema}>"
        from pyspark.sql.types import StructField

        fields = [StructField(f.name, f.dataType, True) for f in value_schema.fields]
        return StructType([*kafka_struct().fields, StructField(PARSED, StructType(fields))])

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
        self.bootstrap_servers, self.client_config = client_settings(options)
        self.topics = subscribed_topics(options)
        self.fail_on_data_loss = bool_option(options, "failOnDataLoss", True)
        self.starting = options.get("startingoffsets", "earliest")
        max_per_trigger = options.get("maxoffsetspertrigger")
        self.max_per_trigger: int | None = None
        if max_per_trigger is not None:
            if not str(max_per_trigger).isdigit() or int(max_per_trigger) <= 0:
                raise BadArgument("option maxOffsetsPerTrigger", max_per_trigger,
                                  "a positive whole number of records")
            self.max_per_trigger = int(max_per_trigger)
        self.ending = ending_offsets(options.get("endingoffsets"))
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
            from statekit.kafka.clients import plain_consumer

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
        from statekit.kafka.offsets import end_offsets

        try:
            marks = {topic: end_offsets(self._client(), topic, list(range(n)))
                     for topic, n in self._partition_counts().items()}
        except BrokerUnreachable as exc:  # stalled between batches: named as a stalled read
            raise stalled_read(f"the offsets of {', '.join(self.topics)}",
                               self.bootstrap_servers, str(exc)) from None
        self._last_ends = log_ends(marks)
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
        return starting_offsets(self.starting, self._broker_offsets())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.max_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.max_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = log_ends(self._broker_offsets())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        marks = self._marks_for(start, limit)
        latest = self._available_now_target or log_ends(marks)
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
