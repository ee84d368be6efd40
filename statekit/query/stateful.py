"""Start a stateful windowed aggregation over a Kafka topic and look inside its state.

``start_query`` reads JSON events from a topic (or takes any streaming
DataFrame), keeps malformed events aside (the null rule: ``parse_events``),
applies an event-time watermark, groups by window and keys, and runs the
aggregation with Spark's RocksDB state store. The returned ``StatefulQuery``
waits, reports progress, and reads the state: ``snapshot()``, ``changes()``,
``metadata()``.

Example:
    >>> q = start_query("games", QuerySpec(keys=["player"], window=tumbling("10 minutes"),
    ...                                    aggregates=["count", "sum(score)"]),  # doctest: +SKIP
    ...                 source_options=SourceOptions(kafka=broker))
    >>> q.wait_until_drained()                                                # doctest: +SKIP
    >>> q.snapshot().nlargest(5, "sum_score")                                 # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pandas as pd
from confluent_kafka import KafkaException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener
from pyspark.sql.types import (
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from statekit.changelog.naming import changelog_topic
from statekit.changelog.writer import ChangelogWriter
from statekit.durations import spark_interval, to_millis
from statekit.errors import BadArgument, BrokerUnreachable, DiskFull, StatekitError
from statekit.model.connection import Kafka, connect
from statekit.model.query_options import RunOptions, SourceOptions
from statekit.model.query_spec import Aggregate, QuerySpec
from statekit.options import route, settle
from statekit.query.input_replay import (
    RAW_SCHEMA,
    FileInput,
    KafkaInput,
    read_batches,
    record_start,
)
from statekit.query.restart_check import record_query, require_restartable, session_settings
from statekit.spark.connect import default_parallelism
from statekit.spark.stopping import stop_between_batches
from statekit.spark.workers import require_statekit_in_workers
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.progress import (
    input_ranges,
    kafka_offsets,
    late_watermark_ms,
    progress_frame,
    recovered_progress,
)
from statekit.spark_state.spark_files import _ranges
from statekit.spark_state.state_reader import StateReader, to_pandas
from statekit.validate import (
    batch_id,
    optional_whole_number,
    timeout_seconds,
    writable_directory,
)

if TYPE_CHECKING:
    from statekit.query.explain import KeyExplanation

CORRUPT = "_corrupt_record"
#: ``from_json``'s options for event values: Spark's defaults otherwise (``timestampFormat``
#: included: ISO 8601, with Spark's lenient fallback; a JSON number is seconds since the epoch)
JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
OBSERVED = "statekit_input"  # observed metrics of the main query: rows in, malformed rows
#: statekit's Kafka source's message when the broker stops answering mid-batch
_BROKER_STALL = re.compile(r"timed out reading .* from '(?P<servers>[^']+)'")
NOT_UTF8, NOT_JSON = "not UTF-8", "not a JSON object"
#: ``malformed()``: key and value as text (bytes that are not UTF-8 escaped, ``\\xff``), the
#: value's exact bytes last
MALFORMED_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "reason",
                     "value_bytes"]
#: the side output's parquet columns (raw key and value bytes: any bytes are kept)
_MALFORMED_SCHEMA = ("key binary, value binary, topic string, partition int, offset bigint, "
                     "timestamp timestamp, reason string")


#: Spark's own Kafka connector's provider class (``spark-sql-kafka``), when on the classpath
KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def kafka_format(spark: SparkSession) -> str:
    """``kafka`` when Spark's own connector is on the classpath, else statekit's Python source."""
    if _jvm_has_class(spark, KAFKA_PROVIDER):
        return "kafka"
    from statekit.spark.kafka_source import register

    return register(spark)


def _jvm_has_class(spark: SparkSession, name: str) -> bool:
    """Whether the session's driver JVM can load class ``name`` (False on Spark Connect,
    which has no JVM here).

    Py4J looks each dotted part up (a class, else a package: no exception either way), a
    call each. ``Class.forName`` did it in one call, but its ``ClassNotFoundException``, the
    usual answer, took PySpark's error conversion ~80 more JVM calls: 1.2 s in a fresh JVM
    against 3 ms this way.
    """
    from py4j.java_gateway import JavaClass

    try:
        node = spark._jvm
        for part in name.split("."):
            node = getattr(node, part)
    except Exception:  # Spark Connect: no JVM view
        return False
    return isinstance(node, JavaClass)


def kafka_stream(
    spark: SparkSession,
    topic: str,
    kafka: Kafka,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    value_schema: str | StructType | None = None,
    ending_offsets: str | None = None,
) -> DataFrame:
    """A streaming DataFrame over ``topic`` with Spark's ``kafka`` columns.

    Checks first that the broker answers and the topic exists, so a typo fails
    here with the address or topic named, not deep inside a Spark task. With
    ``value_schema`` and statekit's own source, the source also parses the JSON
    values it can parse exactly as ``from_json`` would, into a column ``parsed``
    (see ``statekit.spark.kafka_source``), which ``parse_events`` then uses.
    ``ending_offsets`` (JSON like ``{"topic": {"0": 500}}``): read up to there, then wait;
    statekit's source only (Spark's ``kafka`` format takes it in batch queries alone).
    """
    from statekit.kafka.topics import partition_count

    conn = connect(kafka)
    limit = optional_whole_number(max_offsets_per_trigger, "max_offsets_per_trigger", minimum=1,
                                  accepted="a positive whole number of records, or None for "
                                           "no limit")
    if not isinstance(starting_offsets, str) or not (
            starting_offsets in ("earliest", "latest") or starting_offsets.startswith("{")):
        raise BadArgument("starting_offsets", starting_offsets,
                          'earliest, latest, or JSON like {"topic": {"0": 42}}')
    partition_count(conn, topic)
    fmt = kafka_format(spark)
    if ending_offsets is not None and fmt == "kafka":
        raise BadArgument("ending_offsets", ending_offsets,
                          "None: Spark's kafka connector (on this classpath) ends streams "
                          "nowhere; it takes endingOffsets in batch queries only")
    reader = (spark.readStream.format(fmt)
              .option("kafka.bootstrap.servers", conn.bootstrap_servers)
              .option("subscribe", topic)
              .option("startingOffsets", starting_offsets)
              .option("failOnDataLoss", str(bool(fail_on_data_loss)).lower()))
    if limit is not None:
        reader = reader.option("maxOffsetsPerTrigger", limit)
    if ending_offsets is not None:
        reader = reader.option("endingOffsets", ending_offsets)
    if value_schema is not None and fmt != "kafka":
        struct = event_struct(value_schema)
        reader = (reader.option("valueSchema", struct.json())
                  .option("maxReadTasks", default_parallelism(spark)))
    for key, value in conn.config.items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load()


#: What an event schema may be.
SCHEMA_ACCEPTED = ("Spark DDL text (e.g. 'player STRING, score INT, ts TIMESTAMP') or a "
                   "pyspark StructType")


def event_struct(schema: str | StructType, what: str = "event_schema") -> StructType:
    """``schema`` as a StructType: DDL text parsed by Spark (its JVM must be running), a
    StructType as it is; BadArgument naming the text and Spark's reason when it is not DDL.

    Example:
        >>> event_struct("player STRNG")                                    # doctest: +SKIP
        Traceback (most recent call last):
        ...
        statekit.errors.BadArgument: bad event_schema: 'player STRNG'; accepted: Spark DDL \
text (e.g. 'player STRING, score INT, ts TIMESTAMP') or a pyspark StructType (Spark: \
[UNSUPPORTED_DATATYPE] Unsupported data type "STRNG". (line 1, pos 7))
    """
    if isinstance(schema, StructType):
        return schema
    if not isinstance(schema, str) or not schema.strip():
        raise BadArgument(what, schema, SCHEMA_ACCEPTED)
    try:
        return StructType.fromDDL(schema)
    except Exception as exc:  # Spark's ParseException: its first line says what and where
        reason = next((line for line in spark_message(str(exc)).splitlines() if line.strip()),
                      type(exc).__name__)
        raise BadArgument(what, schema, f"{SCHEMA_ACCEPTED} (Spark: {reason.strip()})") from None


def parse_events(raw: DataFrame, schema: str | StructType, required: Sequence[str] = (), *,
                 event_time: str | None = None, max_event_time_ahead: str | None = None,
                 ) -> tuple[DataFrame, DataFrame]:
    """Split raw Kafka rows into (events, malformed), by the null rule below.

    An event is **malformed** when its value is not UTF-8, when it is not a JSON
    object, when a field holds a value that cannot be read as its declared type
    (``"abc"`` for a number), when a ``required`` field is missing or null, or when
    ``event_time`` lies more than ``max_event_time_ahead`` after the record's Kafka
    ``timestamp``. Every other declared field may be null, and a field absent from the
    JSON object is read as null: a cancelled flight's ``"dep_delay": null`` is an event,
    which ``count`` counts and ``avg(dep_delay)`` skips, as SQL and pandas do. A JSON
    object followed by other text is that object, as ``from_json`` reads it.

    ``malformed`` keeps the raw record (key and value bytes, topic, partition,
    offset, timestamp) and a ``reason`` that names the field. Rows that are not Kafka's (a
    streaming DataFrame of text lines: a ``value`` column only) are read the same way; the
    columns they lack are null in ``malformed``, and without a ``timestamp`` no event is
    judged too far ahead. ``events`` also
    counts rows in and malformed rows per batch as observed metrics
    (``observedMetrics`` in progress).

    Example:
        >>> events, malformed = parse_events(raw, "player string, ts timestamp",  # doctest: +SKIP
        ...                                  ["player", "ts"], event_time="ts",
        ...                                  max_event_time_ahead="1 day")
    """
    struct = event_struct(schema)
    fields = struct.fieldNames()
    unknown = [name for name in [*required, *([event_time] if event_time else [])]
               if name not in fields]
    if unknown:
        raise BadArgument("required field", unknown[0], f"a field of the event schema: {fields}")
    stamp = (TimestampType, TimestampNTZType)
    if event_time and not isinstance(struct[event_time].dataType, stamp):
        stamps = [f.name for f in struct.fields if isinstance(f.dataType, stamp)]
        raise BadArgument("event_time", event_time,
                          f"a TIMESTAMP column ({event_time!r} is "
                          f"{struct[event_time].dataType.simpleString()}; timestamps: "
                          f"{', '.join(stamps) or 'none'}): declare it TIMESTAMP in the event "
                          f"schema")
    with_corrupt = StructType([*struct.fields, StructField(CORRUPT, StringType(), True)])
    text = F.col("value").cast("string")
    event_expr = F.from_json(text, with_corrupt, JSON_OPTIONS)
    not_utf8 = ~F.is_valid_utf8(text)
    if "parsed" in raw.columns:  # statekit's source parsed the values from_json would agree on
        fast = F.struct(*[F.col("parsed")[n].alias(n) for n in fields],
                        F.lit(None).cast("string").alias(CORRUPT))
        event_expr = F.when(F.col("parsed").isNotNull(), fast).otherwise(event_expr)
        not_utf8 = F.col("parsed").isNull() & not_utf8  # it parses UTF-8 values only
    parsed = raw.withColumn("event", event_expr)
    event = F.col("event")
    # every field as its JSON text (any JSON value reads into a string): names wrong values
    as_text = F.from_json(text, StructType([StructField(n, StringType()) for n in fields]))
    # no record timestamp (a DataFrame of text lines, not Kafka's rows): no bound to judge by
    missing: Column = _too_far_ahead(event, as_text, event_time, max_event_time_ahead
                                     if "timestamp" in raw.columns else None)
    for name in reversed(list(required)):
        missing = F.when(event[name].isNull(), F.lit(f"{name} is missing or null")
                         ).otherwise(missing)
    wrong_type: Column = F.lit("a field has the wrong type")
    for field in reversed(struct.fields):  # evaluated only for corrupt records
        found = as_text[field.name]
        wrong_type = F.when(event[field.name].isNull() & found.isNotNull(), F.concat(
            F.lit(f"{field.name} is not a {field.dataType.simpleString()}: "), found)
        ).otherwise(wrong_type)
    all_null = F.lit(True)
    for name in fields:
        all_null = all_null & event[name].isNull()
    reason = (F.when(not_utf8, F.lit(NOT_UTF8))
              .when(event.isNull() | (event[CORRUPT].isNotNull() & all_null), F.lit(NOT_JSON))
              .when(event[CORRUPT].isNotNull(), wrong_type)
              .otherwise(missing))
    parsed = parsed.withColumn("reason", reason)
    counted = parsed.observe(OBSERVED, F.count(F.lit(1)).alias("rows"),
                             F.sum(F.col("reason").isNotNull().cast("long")).alias("malformed"))
    events = counted.where(F.col("reason").isNull()).select(*[event[n].alias(n) for n in fields])
    malformed = parsed.where(F.col("reason").isNotNull()).select(
        (F.col("key").cast("binary") if "key" in raw.columns
         else F.lit(None).cast("binary")).alias("key"),
        F.col("value").cast("binary").alias("value"),
        *[F.col(name) if name in raw.columns else F.lit(None).cast(kind).alias(name)
          for name, kind in _RECORD_COLUMNS], "reason")
    return events, malformed


#: the malformed side output's columns besides key, value and ``reason``: a Kafka record's
#: (null where the source has no such column)
_RECORD_COLUMNS = (("topic", "string"), ("partition", "int"), ("offset", "bigint"),
                   ("timestamp", "timestamp"))


def _too_far_ahead(event: Column, as_text: Column, event_time: str | None,
                   max_ahead: str | None) -> Column:
    """The reason for an event time more than ``max_ahead`` after the record's Kafka
    timestamp (null within it, or with no bound); the millisecond trap named."""
    if event_time is None or max_ahead is None:
        return F.lit(None).cast("string")
    event_at, record = event[event_time], F.col("timestamp")
    # in double microseconds: no overflow, whatever the two times (exact up to year 2255)
    gap = F.unix_micros(event_at).cast("double") - F.unix_micros(record).cast("double")
    number = as_text[event_time].rlike(r"^-?[0-9]+$")
    hint = F.when(number, F.lit(" (a JSON number is read as seconds since the epoch: "
                                "milliseconds?)")).otherwise(F.lit(""))
    text = F.concat(F.lit(f"{event_time} is more than {max_ahead} after its Kafka record's "
                          "timestamp "), record.cast("string"), F.lit(": "),
                    event_at.cast("string"), hint)
    return F.when(gap > F.lit(to_millis(max_ahead) * 1000.0), text)


def require_types(schema: StructType, spec: QuerySpec) -> None:
    """BadArgument, before the query starts, for a ``sum``/``avg`` of a column that is not a
    number: Spark would cast each value and fail the batch at the first that is not one.
    (An event time that is not a timestamp is ``parse_events``' to refuse.)"""
    types = {f.name: f.dataType for f in schema.fields}
    numbers = [n for n, t in types.items() if isinstance(t, NumericType)]
    for agg in spec.aggregates:
        if agg.function in ("sum", "avg") and not isinstance(types[agg.column], NumericType):
            raise BadArgument(
                "aggregate", agg.text,
                f"{agg.function} of a numeric column ({agg.column!r} is "
                f"{types[agg.column].simpleString()}; numeric: {', '.join(numbers) or 'none'}); "
                f"count({agg.column}), min({agg.column}) or max({agg.column}) for any type")


def aggregate(events: DataFrame, spec: QuerySpec) -> DataFrame:
    """The aggregation of ``spec`` over parsed events (still streaming).

    Time and session windows: a watermarked ``groupBy(window, keys)``. A running
    aggregate (no window): ``groupBy(keys)`` — its state only grows — or, with a TTL,
    ``transformWithStateInPandas`` with ``statekit.spark_state.running_aggregate.RunningAggregate``.
    """
    missing = [c for c in spec.input_columns if c not in events.columns]
    if missing:
        raise BadArgument("column", missing[0], events.columns)
    require_types(events.schema, spec)
    aggs = [a.column_expr() for a in spec.aggregates]
    if spec.kind == "running" and spec.ttl is None:
        return events.groupBy(*spec.keys).agg(*aggs)
    if spec.kind == "running":
        from statekit.spark_state.running_aggregate import (
            RunningAggregate,
            buffer_fields,
            output_schema,
        )

        types = {f.name: f.dataType.simpleString() for f in events.schema.fields}
        processor = RunningAggregate(spec, buffer_fields(spec, types))
        return events.groupBy(*spec.keys).transformWithStateInPandas(
            processor, output_schema(spec, types, types), "Update", "ProcessingTime")
    return (events.withWatermark(spec.event_time, spark_interval(spec.watermark))
            .groupBy(spec.window.column(spec.event_time), *spec.keys)
            .agg(*aggs))


class _ProgressRecorder(StreamingQueryListener):
    """Keeps every progress report of statekit queries beside their checkpoint."""

    def __init__(self):
        self.checkpoints: dict[str, Checkpoint] = {}

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        checkpoint = self.checkpoints.get(str(event.progress.id))
        if checkpoint is not None:
            # a full or read-only disk loses the report; progress() recovers the batch
            with contextlib.suppress(OSError):
                checkpoint.write_progress(event.progress.batchId, event.progress.json)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


_RECORDERS: dict[int, _ProgressRecorder] = {}


def _recorder(spark: SparkSession) -> _ProgressRecorder:
    key = id(spark)
    if key not in _RECORDERS:
        _RECORDERS[key] = _ProgressRecorder()
        spark.streams.addListener(_RECORDERS[key])
        # The JVM would go on calling a Python listener after Python has gone: unhook it.
        atexit.register(_remove_listener, spark, _RECORDERS[key])
    return _RECORDERS[key]


def _remove_listener(spark: SparkSession, listener: StreamingQueryListener) -> None:
    with contextlib.suppress(Exception):
        for query in spark.streams.active:
            query.stop()
        spark.streams.removeListener(listener)


@dataclass(frozen=True)
class Started:
    """What starting a query in Spark gave: the ``StreamingQuery``, its side stream of
    malformed events (None: not parsed here), the first batch this run commits, and whether
    it ends by itself once drained (the ``available-now`` trigger)."""

    query: StreamingQuery
    malformed_stream: DataFrame | None = None
    first_batch: int = 0
    available_now: bool = False


class StatefulQuery:
    """A running statekit aggregation: wait on it, read its progress and its state."""

    def __init__(self, spark: SparkSession, spec: QuerySpec, checkpoint: Checkpoint,
                 started: Started, changelog: ChangelogWriter | None = None,
                 kafka_input: KafkaInput | None = None, file_input: FileInput | None = None):
        self.spark, self.spec = spark, spec
        #: the checkpoint folder (``Checkpoint``: Spark's logs and statekit's files beside them)
        self.checkpoint = Checkpoint(checkpoint)
        self.query, self._malformed_stream = started.query, started.malformed_stream
        self.state = StateReader(spark, self.checkpoint, spec)
        self._first_batch = started.first_batch  # the first batch this run commits
        self._input = kafka_input  # what it reads, to read again (late events); None: not Kafka
        self._file_input = file_input  # text lines it parses from a streaming DataFrame
        self._counted: dict[int, dict] = {}  # Spark's state counts of recovered batches
        #: ships each committed batch's state changes to the changelog topic (None: logging off)
        self.changelog = changelog
        self._available_now = started.available_now  # such a query ends by itself when drained
        self._stopped_here = False

    # --- lifecycle ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.query.name

    @property
    def is_active(self) -> bool:
        return self.query.isActive

    def stop(self) -> None:
        """Stop the query between two batches (and ship its last committed batches); the
        checkpoint stays.

        Raises:
            DiskFull: after stopping, when the changelog's ledger could not be written (the
                folder is named; the query and its checkpoint are fine).
        """
        self._stopped_here = True
        if self.changelog is not None:
            # no changelog round (a Spark job reading the change feed) may be in flight while
            # Spark stops the query: one such read was seen to hang for good in Spark's
            # collect (its serving thread ended without an answer). The rounds left are
            # shipped below, once the query has stopped.
            self._stop_shipping()
        stop_between_batches(self.query)
        with contextlib.suppress(OSError, StatekitError):  # kept only for Connect's late events
            self.keep_reports()
        if self.changelog is not None:
            try:
                self.changelog.stop()
            except DiskFull:
                raise
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EROFS, errno.EDQUOT):
                    raise
                folder = str(self.checkpoint.ledger_path(self.changelog.topic).parent)
                raise self._disk_full(f"the changelog's ledger could not be written ({exc})",
                                      folder) from None

    def _stop_shipping(self) -> None:
        """Stop the changelog's background thread; its error waits for ``stop()``'s ship."""
        with contextlib.suppress(Exception):
            self.changelog.stop_background()

    def __enter__(self) -> StatefulQuery:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _raise_if_failed(self) -> None:
        q = self.query
        if not q.isActive and q.exception() is not None:
            raise self._failure(q.exception()) from None

    def _failure(self, exc: BaseException) -> StatekitError:
        """The error to raise for the query's failure ``exc``: what happened and what to do, in
        a few lines; Spark's full text (plan, traces) goes to ``spark_log()`` and stays on the
        error as ``spark_error``."""
        from statekit.spark.session import log_failure, spark_log

        log_failure(f"query {self.name!r} failed", exc)
        text = failure_text(exc)
        if "No space left on device" in text:
            err: StatekitError = self._disk_full(text)
        elif (stall := _BROKER_STALL.search(text)) is not None:
            err = BrokerUnreachable(stall["servers"], f"query {self.name!r} stopped after batch "
                                                      f"{self.last_batch}: {text}")
        else:
            err = StatekitError(f"query {self.name!r} failed: {text} (Spark's full error: "
                                f"{str(spark_log())!r})")
        err.spark_error = exc
        return err

    def _disk_full(self, detail: str, folder: str | None = None) -> DiskFull:
        """DiskFull naming the fuller of the checkpoint's and Spark's local folder (or
        ``folder``), with what the last batch wrote to the checkpoint as the space needed."""
        if folder is None:
            places = [str(self.checkpoint), tempfile.gettempdir()]
            folder = min(places, key=_free_bytes)
        ck, last = self.checkpoint, self.last_batch
        paths = [ck.offsets_dir / str(last + 1), ck.commits_dir / str(last),
                 ck.progress_path(last)]
        for operator_id in ck.operator_ids():
            paths += ck.operator_dir(operator_id).glob(f"*/{last + 1}[._]*")
        needed = sum(p.stat().st_size for p in paths if p.is_file())
        return DiskFull(folder, needed or None, f"query {self.name!r} stopped after batch "
                        f"{last}: {detail}. Free some space there, then start the query again "
                        f"with the same checkpoint: it resumes from its last commit",
                        free=_free_bytes(folder))

    def _raise_if_stopped(self, doing: str) -> None:
        """Raise when the query is no longer running and nobody here asked it to stop: its
        failure, or why Spark stopped it without one."""
        self._raise_if_failed()
        if self.query.isActive or self._stopped_here or self._available_now:
            return
        raise StatekitError(f"query {self.name!r} stopped without an error {doing}: "
                            f"{self._stop_reason()}")

    def _stop_reason(self) -> str:
        q = self.query
        for other in self.spark.streams.active:
            if other.id == q.id and other.runId != q.runId:
                return (f"another run of it (query {other.name!r}, run id {other.runId}) was "
                        f"started on the same checkpoint {str(self.checkpoint)!r} in this Spark "
                        f"session, and Spark stops the older run when a new one starts "
                        f"(spark.sql.streaming.stopActiveRunOnRestart). Use the new run's "
                        f"handle, or give each query a checkpoint of its own")
        return (f"it was stopped outside this handle (StreamingQuery.stop(), "
                f"spark.streams, another run on checkpoint {str(self.checkpoint)!r} that has "
                f"ended since, or the Spark session stopping); start it again with the same "
                f"checkpoint to resume")

    def wait_for_batches(self, n: int, timeout: float = 120.0) -> int:
        """Block until this run has committed ``n`` batches; returns the last batch id."""
        n = batch_id(n, "number of batches")
        timeout = timeout_seconds(timeout)
        deadline = time.monotonic() + timeout
        while self.last_batch - self._first_batch + 1 < n:
            self._raise_if_stopped(f"before {n} batches")
            if not self.query.isActive:
                raise StatekitError(f"query {self.name!r} stopped before {n} batches")
            if time.monotonic() > deadline:
                status = self.query.status  # e.g. "Waiting for data to arrive": no new input
                raise TimeoutError(f"query {self.name!r} did not complete {n} batches "
                                   f"in {timeout:.0f} s (Spark's status: "
                                   f"{status.get('message')!r})")
            time.sleep(0.1)
        self._await_report(self.last_batch)
        return self.last_batch

    @property
    def _runs_batches_without_input(self) -> bool:
        """True when Spark runs a batch on every trigger, new input or not (a TTL'd running
        aggregate expires state so), which ``processAllAvailable`` would wait on forever."""
        return self.spec.ttl is not None

    def wait_until_drained(self, timeout: float = 300.0) -> int:
        """Block until everything in the input so far is processed; returns the last batch id.

        A TTL'd running aggregate runs a batch on every trigger even without new input
        (to expire state), so Spark's ``processAllAvailable`` would never return for it:
        there, drained means a committed batch whose sources had read all they saw.
        """
        timeout = timeout_seconds(timeout)
        q, errors = self.query, []

        def drain():
            try:
                if self._runs_batches_without_input:
                    self._poll_caught_up(timeout)
                else:
                    q.processAllAvailable()
            except BaseException as exc:  # surfaced in the caller's thread
                errors.append(exc)

        worker = threading.Thread(target=drain, daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            raise TimeoutError(f"query {q.name!r} did not drain its input in {timeout:.0f} s")
        if errors:
            if isinstance(errors[0], TimeoutError):
                raise errors[0]
            raise self._failure(errors[0]) from None
        self._raise_if_stopped("before it drained its input")
        self._await_report(self.last_batch)
        if self.changelog is not None:
            self.changelog.wait_shipped(self.last_batch, timeout)
        return self.last_batch

    def _poll_caught_up(self, timeout: float) -> None:
        """Wait for a batch that read nothing new after its sources caught up; a batch
        triggered before this call does not count (it may predate input written since)."""
        deadline = time.monotonic() + timeout
        called = pd.Timestamp.now(tz="UTC")
        seen = -1
        while time.monotonic() < deadline:
            self._raise_if_failed()
            progress = self.query.lastProgress
            if progress and progress["batchId"] > seen and \
                    pd.Timestamp(progress["timestamp"]) >= called:
                seen = progress["batchId"]
                sources = progress.get("sources") or []
                caught_up = all(src.get("latestOffset") is not None and
                                src.get("endOffset") == src.get("latestOffset")
                                for src in sources)
                if caught_up and progress.get("numInputRows", 0) == 0:
                    return
            time.sleep(0.1)
        raise TimeoutError(f"query {self.name!r} did not drain its input in {timeout:.0f} s")

    def _await_report(self, batch: int, timeout: float = 10.0) -> None:
        """Progress reports arrive asynchronously; give the last one a moment to land."""
        path = self.checkpoint.progress_path(batch) if batch >= 0 else None
        deadline = time.monotonic() + timeout
        while path is not None and not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    # --- progress -------------------------------------------------------------------
    def progress(self) -> pd.DataFrame:
        """One row per batch (all runs of this checkpoint): rows in, state rows, timings.

        Reports come from statekit's listener, kept beside the checkpoint, and from the
        query's ``recentProgress`` (a report the listener has not delivered yet: listener
        events reach a Spark Connect client late). A committed batch with neither (its
        report was lost: the process was killed before it was kept, or the disk was full)
        is recovered from the checkpoint (``statekit.spark_state.progress.recovered_progress``)
        and from Spark's state (rows, puts and deletes: ``StateReader.batch_counts``);
        ``recovered`` is True there and what cannot be recovered is NA. Reads only: works on
        a full or read-only disk.
        """
        last = self.checkpoint.last_batch  # only batches whose commit is in the log
        reports = {r.get("batchId"): r for r in self.progress_reports(last=last)}
        frame = progress_frame(reports.values())
        pending = self.query.isActive and last >= self._first_batch  # its report is on its way
        missing = [b for b in range(last + 1) if b not in reports and not
                   (pending and b == last)]
        if not missing:
            return frame
        recovered = recovered_progress(self.checkpoint, missing).set_index("batch")
        counts = self._state_counts(missing)
        if len(counts):
            recovered.update(counts.set_index("batch").astype("Int64"))
        out = frame.set_index("batch").reindex(sorted({*frame["batch"], *recovered.index}))
        whole = [c for c in out.columns if c in frame and pd.api.types.is_integer_dtype(frame[c])]
        out = out.astype({**dict.fromkeys(whole, "Int64"), "recovered": bool})
        for column in recovered.columns:
            if recovered[column].notna().any():
                out.loc[recovered.index, column] = recovered[column]
        return out.reset_index()

    def progress_reports(self, kept: Iterable[dict] | None = None, last: int | None = None
                         ) -> list[dict]:
        """The progress reports of committed batches, as Spark's JSON objects: those
        statekit's listener kept beside the checkpoint, then, for a batch of this run whose
        report the listener has not delivered yet (its events are asynchronous, and late under
        load or on Spark Connect), the query's ``recentProgress``. Nothing is recovered here
        (``progress()`` does that).

        ``kept``: the listener's reports when the caller has read them already (a
        ``statekit.monitor.ProgressTail`` reads each file once); default: read them now.
        ``last``: the last committed batch, when the caller has read it already.
        """
        reports = {r.get("batchId"): r for r in
                   (self.checkpoint.progress_reports() if kept is None else kept)}
        last = self.checkpoint.last_batch if last is None else last
        if any(b not in reports for b in range(max(self._first_batch, 0), last + 1)):
            for report in self._recent_reports():   # only then: a JVM call per report
                if 0 <= report["batchId"] <= last:
                    reports.setdefault(report["batchId"], report)
        return list(reports.values())

    def _recent_reports(self) -> list[dict]:
        try:
            return [json.loads(report.json) for report in self.query.recentProgress]
        except Exception:  # a stopped Connect query may no longer answer
            return []

    def _state_counts(self, batches: list[int]) -> pd.DataFrame:
        """``StateReader.batch_counts`` of ``batches``, each batch read once per handle (a
        committed batch's state does not change); empty, with a warning, when the state
        cannot be read."""
        todo = [b for b in batches if b not in self._counted]
        if todo:
            try:
                counts = self.state.batch_counts(todo)
            except StatekitError as exc:
                warnings.warn(f"progress(): the state rows of recovered batches are NA: {exc}",
                              stacklevel=3)
                counts = pd.DataFrame(columns=["batch"])
            for row in counts.to_dict("records"):
                self._counted[int(row["batch"])] = row
        rows = [self._counted[b] for b in batches if b in self._counted]
        return pd.DataFrame(rows)

    def keep_reports(self) -> int:
        """Keep beside the checkpoint the reports of ``recentProgress`` the listener has not
        kept (listener events reach a Spark Connect client late); returns how many.

        Raises:
            DiskFull: the progress folder's disk has no space left (named, with the size).
        """
        kept, last = 0, self.checkpoint.last_batch
        for report in self._recent_reports():
            batch = report["batchId"]
            if 0 <= batch <= last and not self.checkpoint.progress_path(batch).exists():
                self.checkpoint.write_progress(batch, json.dumps(report))
                kept += 1
        return kept

    @property
    def last_batch(self) -> int:
        """Id of the last committed batch (-1 before the first)."""
        return self.checkpoint.last_batch

    def late_events(self) -> int:
        """Events dropped because they arrived behind the watermark, over all committed batches
        (events, not the groups Spark's ``numRowsDroppedByWatermark`` counts: 299 late events
        of 12 windows and keys are 299 here, 12 there).

        Spark drops an event of batch ``B`` when its window ended at or before the watermark
        of batch ``B - 1`` (a hopping window's event counts once, when any of its windows
        had). Spark does not count events, so statekit counts them: a batch whose report
        says no group was dropped (or that ran before any watermark) has none; any other
        batch is read again from Kafka (the offset ranges of its offset log entry), parsed
        as the query parses, and its late events counted. Each batch's count is kept under
        ``_statekit/late/`` and never counted again, so the total is exact across restarts
        and lost reports. A batch that cannot be counted any more (its offset log entry is
        gone, or its records are no longer on the broker) is left out, with a warning.

        Raises:
            StatekitError: the query does not read a Kafka topic (statekit cannot read its
                input again): use ``progress()["dropped_by_watermark"]`` (groups).
        """
        if self.spec.kind == "running":
            return 0  # no watermark: nothing is ever late
        counts = self._late_counts()
        unknown = [b for b, n in counts.items() if n is None]
        if unknown:
            warnings.warn(f"late_events(): batches {_ranges(unknown)} of query {self.name!r} "
                          f"could not be counted (their offset log entries or records are gone); "
                          f"the total leaves them out", stacklevel=2)
        return int(sum(n for n in counts.values() if n))

    def _late_counts(self) -> dict[int, int | None]:
        """Late events per committed batch (None: cannot be counted)."""
        reports = {int(r["batch"]): r for r in self.progress().to_dict("records")}
        counts: dict[int, int | None] = {}
        todo: dict[int, int] = {}
        for batch in self.checkpoint.committed_batches():
            kept = self.checkpoint.late_count(batch)
            dropped = reports.get(batch, {}).get("dropped_by_watermark")
            late_ms = late_watermark_ms(self.checkpoint, batch)
            if kept is not None:
                counts[batch] = kept
            elif late_ms == 0 or (not pd.isna(dropped) and dropped == 0
                                  and not reports[batch]["recovered"]):
                counts[batch] = 0
            elif late_ms is None:
                counts[batch] = None
            else:
                todo[batch] = late_ms
        if todo:
            counts.update(self._count_late(todo))
        return counts

    def _count_late(self, batches: dict[int, int]) -> dict[int, int | None]:
        """Read ``batches`` (batch → late watermark, ms) again from Kafka and count their late
        events (one Spark job); keep each count beside the checkpoint (best effort)."""
        if self._input is None:
            raise StatekitError(
                f"query {self.name!r} does not read a Kafka topic, so statekit cannot read its "
                f"input again to count late events; Spark counts dropped groups (window and "
                f"key), not events: progress()['dropped_by_watermark']")
        ranges = {b: input_ranges(self.checkpoint, b) for b in batches}
        counted = count_late_events(self.spark, self._input, self.spec,
                                    {b: (r, batches[b]) for b, r in ranges.items() if r})
        out: dict[int, int | None] = {b: counted.get(b) for b in batches}
        for batch, n in out.items():
            if n is not None:
                with contextlib.suppress(OSError):  # a cache: a full disk just counts again
                    self.checkpoint.write_late_count(batch, n, batches[batch])
        return out

    # --- provenance ------------------------------------------------------------------
    def explain(self, key: object, window: object = None) -> KeyExplanation:
        """Why ``key`` holds its value: every input record of the key batch by batch (read
        back from Kafka, or from the files a text-line source read), those that did not count
        and why (malformed, late), the value
        after each batch, and the value recomputed from the records that counted
        (``statekit.query.explain``).

        ``key``: the group key's value, or a dict of every group key's; ``window``: one
        window's start (all the key's windows when None).

        Example:
            >>> why = query.explain("p7", window="2026-01-05 10:00")     # doctest: +SKIP
            >>> why.agrees, why.not_counted()                            # doctest: +SKIP
        """
        from statekit.query.explain import explain_key

        return explain_key(self, key, window)

    # --- malformed events -----------------------------------------------------------
    def malformed(self, timeout: float = 300.0) -> pd.DataFrame:
        """Malformed input records kept aside: key, value (text), topic, partition, offset, …

        The main query only counts them (so the input is read once); this call
        brings the parquet side table under the checkpoint up to date with an
        incremental, exactly-once ``availableNow`` run over the same input, then
        reads it. ``reason`` says what is wrong (see ``parse_events``). The side table
        keeps the raw bytes, so any value survives: ``key`` and ``value`` are text with
        bytes that are not UTF-8 escaped (``b"\\xff"`` → ``"\\xff"``), ``value_bytes`` the
        value exactly as it was in Kafka.
        """
        timeout = timeout_seconds(timeout)
        if self._malformed_stream is None:
            return pd.DataFrame(columns=MALFORMED_COLUMNS)
        data = str(self.checkpoint.malformed_data_dir)
        run = (self._malformed_stream.writeStream.queryName(f"{self.name}-malformed")
               .format("parquet").option("path", data)
               .option("checkpointLocation", str(self.checkpoint.malformed_checkpoint_dir))
               .trigger(availableNow=True).start())
        if not run.awaitTermination(timeout):
            run.stop()
            raise TimeoutError(f"keeping malformed records aside took over {timeout:.0f} s")
        if run.exception() is not None:
            raise StatekitError(f"keeping malformed records aside failed: "
                                  f"{failure_text(run.exception())}")
        if not any(self.checkpoint.malformed_data_dir.glob("*.parquet")):
            return pd.DataFrame(columns=MALFORMED_COLUMNS)
        frame = to_pandas(self.spark.read.schema(_MALFORMED_SCHEMA).parquet(data))
        frame["value_bytes"] = frame["value"]
        for column in ("key", "value"):
            frame[column] = [None if raw is None else raw.decode("utf-8", "backslashreplace")
                             for raw in frame[column]]
        return frame[MALFORMED_COLUMNS].sort_values(["partition", "offset"]).reset_index(
            drop=True)

    def malformed_count(self) -> int:
        """Malformed input rows counted by the query so far (all runs of this checkpoint).

        The sum of the reports' observed counts when every batch that read input has one;
        otherwise (a report was lost) counted exactly from the ``malformed()`` side output,
        which it brings up to date: its records within the input the committed batches read.
        """
        frame = self.progress()
        if self._malformed_stream is None or not len(frame):
            return 0
        observed = frame["malformed_rows"] if "malformed_rows" in frame else \
            pd.Series(pd.NA, index=frame.index)
        read_input = frame["input_rows"].isna() | (frame["input_rows"] > 0)
        if not (observed.isna() & read_input).any():
            return int(observed.fillna(0).sum())
        ends = kafka_offsets(self.checkpoint.offset_log(self.last_batch)[2][0])
        kept = self.malformed()
        if ends is None or not len(kept):
            return len(kept)
        end = [ends.get((t, int(p)), -1) for t, p in zip(kept["topic"], kept["partition"],
                                                          strict=True)]
        return int((kept["offset"] < pd.Series(end, index=kept.index)).sum())

    # --- state ----------------------------------------------------------------------
    def snapshot(self, batch: int | None = None, sort: bool = False) -> pd.DataFrame:
        """The state store at ``batch`` (latest when None), flattened: see StateReader."""
        return self.state.snapshot(batch, sort=sort)

    def changes(self, from_batch: int, to_batch: int | None = None) -> pd.DataFrame:
        """The change feed (puts and deletes) of batches ``from_batch..to_batch``."""
        return self.state.changes(from_batch, to_batch)

    def metadata(self) -> pd.DataFrame:
        """Stateful operators and stores: partitions, first and last retained batch."""
        return self.state.metadata()

    # --- changelog ------------------------------------------------------------------
    @property
    def changelog_topic(self) -> str | None:
        """The store's changelog topic (None when logging is off)."""
        return self.changelog.topic if self.changelog is not None else None

    def read_changelog(self, from_batch: int | None = None, to_batch: int | None = None,
                       progress: bool | None = None):
        """The changelog records shipped so far: a ``Changelog`` (see ``read_changelog``)."""
        from statekit.changelog.reader import read_changelog

        if self.changelog is None:
            raise StatekitError(f"query {self.name!r} runs with its changelog switched off "
                                f"(start_query(..., changelog=False))")
        self.changelog.raise_if_failed()
        return read_changelog(self.changelog.kafka, self.changelog.topic,
                              from_batch=from_batch, to_batch=to_batch, progress=progress)

    def __repr__(self) -> str:
        state = "active" if self.is_active else "stopped"
        return f"StatefulQuery({self.name!r}, {state}, last_batch={self.last_batch})"


_SPEC_ARGUMENTS = ("keys", "window", "aggregates", "event_time", "watermark", "ttl",
                   "max_event_time_ahead")
#: a keyword argument left out (for ``max_event_time_ahead``, None is a value: no bound)
_UNSET: Any = object()


def _spec_of(spec: QuerySpec | None, given: dict) -> QuerySpec:
    """``spec``, or one built from the keyword arguments given (not both)."""
    named = {k: v for k, v in given.items()
             if v is not _UNSET and (v is not None or k == "max_event_time_ahead")}
    if spec is not None:
        if not isinstance(spec, QuerySpec):
            raise BadArgument("spec", spec, "a QuerySpec (or leave it out and pass keys=, "
                                            "window=, aggregates=, ...)")
        if named:
            raise BadArgument(f"{', '.join(named)} with spec", named,
                              "a QuerySpec or its keyword arguments, not both")
        return spec
    if "aggregates" in named and isinstance(named["aggregates"], (str, Aggregate)):
        named["aggregates"] = [named["aggregates"]]
    return QuerySpec(**{"keys": None, "window": None, **named})


#: ``start_query``'s keyword shortcuts, each to where it goes (the field of that name there):
#: ``spec`` (``QuerySpec``), ``source`` (``SourceOptions``) or ``run`` (``RunOptions``)
SHORTCUTS: dict[str, str] = {**dict.fromkeys(_SPEC_ARGUMENTS, "spec"),
                             **dict.fromkeys(SourceOptions.field_names(), "source"),
                             **dict.fromkeys(RunOptions.field_names(), "run")}


def start_query(
    source: str | DataFrame,
    spec: QuerySpec | None = None,
    *,
    source_options: SourceOptions | None = None,
    run: RunOptions | None = None,
    spark: SparkSession | None = None,
    **shortcuts: Any,
) -> StatefulQuery:
    """Start the windowed aggregation; returns a handle to wait on and to read state from.

    Args:
        source: a Kafka topic name (JSON values, parsed with ``event_schema``), or a
            streaming DataFrame: with a ``value`` column it is parsed the same way,
            otherwise its columns are used as they are.
        spec: what to compute (a ``QuerySpec``). ``window=None`` is a running aggregate
            per key: its state grows with every key unless a ``ttl`` forgets idle keys.
        source_options: where to read and how much (``SourceOptions``: ``kafka``,
            ``event_schema``, ``required_fields``, offsets); default ``SourceOptions()``.
        run: how the query runs (``RunOptions``: ``name``, ``checkpoint``, ``trigger``,
            ``sink``, ``output_mode``, ``changelog``, ``store_name``); default
            ``RunOptions()``, named ``statekit``.
        spark: the session (``statekit.spark_session()`` when None).
        shortcuts: any field of those three as a keyword argument, routed by ``SHORTCUTS``:
            ``keys``, ``window``, ``aggregates``, ``event_time``, ``watermark``, ``ttl``,
            ``max_event_time_ahead`` build the ``QuerySpec`` (its defaults for those left
            out; not with ``spec``); ``kafka``, ``event_schema``, ``required_fields``,
            ``starting_offsets``, ``ending_offsets``, ``max_offsets_per_trigger``,
            ``fail_on_data_loss`` the ``SourceOptions`` (not with ``source_options``);
            ``name``, ``checkpoint``, ``trigger``, ``sink``, ``output_mode``,
            ``changelog``, ``store_name``, ``changelog_topic_config`` the ``RunOptions`` (not with
            ``run``).

    The null rule: an event is malformed (counted, kept aside in ``malformed()``) when its
    value is not UTF-8 or not a JSON object, when a field holds a value of the wrong type,
    when a group key, the event time or a required field is missing or null, or when the
    event time lies more than ``max_event_time_ahead`` (default "1 day", None for no bound)
    after its Kafka record's timestamp; any other field may be null or absent (read as
    null), and ``count`` counts the event while ``sum/min/max/avg(col)`` skip the null.
    Starting again with the same checkpoint resumes exactly where the query stopped. The
    changelog (``statekit.changelog``) is on by default when ``kafka`` is given;
    ``changelog=False`` switches logging off, like Kafka Streams' ``withLoggingDisabled``.

    Raises:
        BadArgument: an unknown keyword (named, with the accepted ones), a setting given
            both ways (``trigger=`` with ``run=``), a bad value.
        IncompatibleRestart: ``checkpoint`` holds state this query cannot restart on (another
            key, other aggregates, another kind of window: ``statekit.check_restart`` names
            what changed, what Spark would say and what to do); nothing has started.

    Example:
        >>> from statekit.datasets import game_events                        # doctest: +SKIP
        >>> games = game_events()                                            # doctest: +SKIP
        >>> q = start_query("games", games.spec,                             # doctest: +SKIP
        ...                 source_options=SourceOptions(kafka=broker,
        ...                                              event_schema=games.schema),
        ...                 run=RunOptions(name="board", trigger="1 second"))
        >>> q = start_query("games", games.spec, kafka=broker,               # doctest: +SKIP
        ...                 event_schema=games.schema, name="board")         # the same
    """
    from statekit.spark.session import spark_session

    routed = route(shortcuts, SHORTCUTS, "start_query")
    source_options = settle(source_options, SourceOptions, routed.get("source", {}),
                            "source_options")
    run = settle(run, RunOptions, routed.get("run", {}), "run")
    spec = _spec_of(spec, routed.get("spec", {}))
    name = run.name or "statekit"
    output_mode = run.output_mode
    if output_mode is None:
        output_mode = "append" if spec.kind == "session" else "update"
    if spec.kind == "session" and output_mode != "append":
        raise BadArgument("output mode for session windows", output_mode, ["append"])
    if spec.kind == "running" and output_mode != "update":
        raise BadArgument("output mode for a running aggregate", output_mode, ["update"])
    trigger_kwargs = run.trigger_kwargs()
    conn = source_options.kafka
    changelog = conn is not None if run.changelog is None else run.changelog
    if changelog and conn is None:
        raise BadArgument("kafka", None, "the Kafka cluster to write the changelog to "
                                         "(a KafkaConnection, 'host:port' or an EmbeddedBroker)")
    topic = changelog_topic(name, run.store_name) if changelog else None
    spark = spark or spark_session()
    checkpoint = new_run(spark, name, run.checkpoint)

    required = list(dict.fromkeys([*spec.required_columns, *source_options.required_fields]))
    event_schema = source_options.event_schema
    if event_schema is None:
        event_schema = spec.default_event_schema()
    events, malformed = source_events(
        source, spark, replace(source_options, event_schema=event_schema), required,
        event_time=spec.event_time, max_event_time_ahead=spec.max_event_time_ahead)

    first_batch = checkpoint.last_batch + 1
    plan = aggregate(events, spec)
    columns = events.schema
    require_restartable(spec, columns, checkpoint, session_settings(spark))
    with contextlib.suppress(OSError):  # a read-only checkpoint: the next check has less
        record_query(checkpoint, spec, columns)
    kafka_input = None
    if isinstance(source, str) and malformed is not None:
        kafka_input = KafkaInput(source, conn, event_schema, tuple(required))
        if not checkpoint.offset_batches():  # a fresh checkpoint: keep batch 0's start
            # best effort: without it, explain() takes batch 0 to start at the log start
            with contextlib.suppress(OSError, KafkaException, TimeoutError, StatekitError):
                record_start(checkpoint, kafka_input, source_options.starting_offsets)
    file_input = (FileInput(event_schema, tuple(required))
                  if not isinstance(source, str) and malformed is not None else None)
    query = start_recorded(plan, spark, checkpoint,
                           replace(run, name=name, output_mode=output_mode))
    handle = StatefulQuery(spark, spec, checkpoint,
                           Started(query, malformed, first_batch,
                                   available_now="availableNow" in trigger_kwargs),
                           kafka_input=kafka_input, file_input=file_input)
    if topic:
        handle.changelog = ChangelogWriter(handle.state, conn, topic,
                                           topic_config=run.changelog_topic_config).start()
    return handle


def source_events(source: str | DataFrame, spark: SparkSession, options: SourceOptions,
                  required: Sequence[str], *, event_time: str | None = None,
                  max_event_time_ahead: str | None = None
                  ) -> tuple[DataFrame, DataFrame | None]:
    """(events, malformed) of a query's ``source``: a topic on ``options.kafka`` (JSON
    values parsed with ``options.event_schema``, which must be set; ``required`` fields,
    ``event_time`` and ``max_event_time_ahead`` checked by ``parse_events``) or a streaming
    DataFrame (parsed the same way when it has a ``value`` column; else used as it is, and
    ``malformed`` is None)."""
    # parsed once (by the JVM: ~0.35 s on a cold one)
    event_schema = None if options.event_schema is None else event_struct(options.event_schema)
    if isinstance(source, str):
        if options.kafka is None:
            raise BadArgument("kafka", None, "the Kafka cluster of topic "
                                             f"{source!r} (a KafkaConnection, 'host:port' or an "
                                             "EmbeddedBroker)")
        raw = kafka_stream(spark, source, options.kafka, options.starting_offsets,
                           options.max_offsets_per_trigger, options.fail_on_data_loss,
                           value_schema=event_schema, ending_offsets=options.ending_offsets)
    elif isinstance(source, DataFrame):
        if not source.isStreaming:
            raise BadArgument("source", "a batch DataFrame",
                              "a topic name or a streaming DataFrame")
        raw = source
    else:
        raise BadArgument("source", source, "a topic name or a streaming DataFrame")
    if "value" in raw.columns:
        return parse_events(raw, event_schema, required, event_time=event_time,
                            max_event_time_ahead=max_event_time_ahead)
    return raw, None


def new_run(spark: SparkSession, name: str,
            checkpoint: str | os.PathLike | Checkpoint | None) -> Checkpoint:
    """The checkpoint of a new run named ``name``, ready to write (a temporary folder when
    None), once the session's Python workers import statekit (``WorkersLackStatekit``) and
    no active query of ``spark`` holds that name: BadArgument naming it (Spark
    refuses a second active query of one name), or naming the checkpoint when it is not a
    folder Spark can make or write (``validate.writable_directory``)."""
    require_statekit_in_workers(spark)
    active = sorted(q.name for q in spark.streams.active if q.name)
    if name in active:
        raise BadArgument("query name", name,
                          f"a name no active query of this Spark session has (active: "
                          f"{', '.join(active)}); stop the running one first, or name this one "
                          f"differently (name=)")
    if checkpoint is None:
        return Checkpoint(tempfile.mkdtemp(prefix=f"statekit-{name}-"))
    checkpoint = Checkpoint(checkpoint)
    writable_directory(str(checkpoint), "checkpoint")
    return checkpoint


def start_recorded(frame: DataFrame, spark: SparkSession, checkpoint: Checkpoint,
                   run: RunOptions) -> StreamingQuery:
    """Start ``frame`` into ``run.sink`` (named ``run.name``, in ``run.output_mode``, on
    ``run.trigger``) with its progress reports kept beside ``checkpoint``."""
    recorder = _recorder(spark)
    query = (frame.writeStream.queryName(run.name).outputMode(run.output_mode)
             .format(run.sink).option("checkpointLocation", str(checkpoint))
             .trigger(**run.trigger_kwargs()).start())
    recorder.checkpoints[str(query.id)] = checkpoint
    return query


_PLAN_DUMP = re.compile(r"\n=== Streaming Query ===.*", re.DOTALL)
_STREAM_FAILED = re.compile(r"^\[STREAM_FAILED\] Query \[id = [^\]]*\] terminated with "
                            r"exception: ")
_PYTHON_ERROR = re.compile(r"^\s*(?:[\w.]+\.)?(\w*(?:Error|Exception|Loss|Unreachable|Found))"
                           r": (.+)$", re.MULTILINE)
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+")


def spark_message(text: str) -> str:
    """One of Spark's failure messages without its wrapping: the plan and offsets Spark appends
    to a failed streaming query's message, the ``[STREAM_FAILED]`` preamble, a Python worker's
    traceback (its last error line is kept), ``SQLSTATE`` codes, Java stack traces.

    Example:
        >>> spark_message("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with "
        ...               "exception: [PYTHON_EXCEPTION] An exception was thrown from the Python "
        ...               "worker: Traceback (most recent call last):\\n  File 'x.py', line 1"
        ...               "\\nstatekit.errors.StatekitError: timed out SQLSTATE: 38000\\n"
        ...               "=== Streaming Query ===\\nLogical Plan: ...")
        'timed out'
    """
    text = _PLAN_DUMP.sub("", text)
    text = text.split("\n\nJVM stacktrace:")[0]
    text = _STREAM_FAILED.sub("", text.strip())
    if "Traceback (most recent call last)" in text:
        errors = _PYTHON_ERROR.findall(text.split("Traceback (most recent call last)", 1)[1])
        if errors:
            text = errors[-1][1]
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("at ")]
    return _SQLSTATE.sub("", "\n".join(lines)).strip()


def failure_text(exc: BaseException, depth: int = 6) -> str:
    """A query's exception with the chain of causes Spark wrapped it in, innermost last, each
    without Spark's wrapping (``spark_message``: no plan dump, no traceback).

    Spark often wraps the real failure (a Python traceback, a refused connection) in a
    generic one ("driver worker exited unexpectedly"); the causes say what happened.
    """
    text = spark_message(str(exc))
    seen = {text}
    cause = getattr(exc, "_cause", None) or exc.__cause__
    while cause is not None and depth > 0:
        message = spark_message(str(cause))
        if message and not any(message in known or known in message for known in seen):
            text += f"\ncaused by: {message}"
            seen.add(message)
        cause, depth = getattr(cause, "_cause", None) or cause.__cause__, depth - 1
    return text



# --- reading a query's input again: late events -------------------------------------------
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


def _free_bytes(folder: str) -> int:
    """Bytes free on the device of ``folder`` (its nearest existing parent)."""
    path = os.path.abspath(folder)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0
