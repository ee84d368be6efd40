"""Start a stateful windowed aggregation over a Kafka topic and look inside its state.

``start_query`` reads JSON events from a topic (or takes any streaming
DataFrame), keeps malformed events aside (the null rule: ``parse_events``),
applies an event-time watermark, groups by window and keys, and runs the
aggregation with Spark's RocksDB state store. The returned ``StatefulQuery``
waits, reports progress, and reads the state: ``snapshot()``, ``changes()``,
``metadata()``.

Example:
    >>> q = start_query("games", keys=["player"], window=tumbling("10 minutes"),  # doctest: +SKIP
    ...                 aggregates=["count", "sum(score)"], kafka=broker)
    >>> q.wait_until_drained()                                                # doctest: +SKIP
    >>> q.snapshot().nlargest(5, "sum_score")                                 # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import contextlib
import tempfile
import threading
import time
from collections.abc import Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener
from pyspark.sql.types import StringType, StructField, StructType

from statekit.changelog.format import changelog_topic
from statekit.changelog.writer import ChangelogWriter
from statekit.durations import spark_interval
from statekit.errors import BadArgument, StatekitError
from statekit.kafka.connection import Kafka, KafkaConnection, connect
from statekit.query.progress import progress_frame
from statekit.query.spec import Aggregate, QuerySpec, WindowSpec
from statekit.spark.connect import default_parallelism
from statekit.spark.stopping import stop_between_batches
from statekit.state.checkpoint import Checkpoint
from statekit.state.reader import StateReader
from statekit.validate import batch_id, optional_whole_number

CORRUPT = "_corrupt_record"
OBSERVED = "statekit_input"  # observed metrics of the main query: rows in, malformed rows
SINKS = ("noop", "memory", "console")
MALFORMED_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "reason"]


def kafka_format(spark: SparkSession) -> str:
    """``kafka`` when Spark's own connector is on the classpath, else statekit's Python source."""
    try:
        spark._jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider")
        return "kafka"
    except Exception:
        from statekit.spark.source import register

        return register(spark)


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
    (see ``statekit.spark.source``), which ``parse_events`` then uses.
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
        struct = StructType.fromDDL(value_schema) if isinstance(value_schema, str) else value_schema
        reader = (reader.option("valueSchema", struct.json())
                  .option("maxReadTasks", default_parallelism(spark)))
    for key, value in conn.config.items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load()


def _json_path(name: str) -> str:
    """A JSONPath to a top-level field, whatever its name holds."""
    return "$['" + name.replace("\\", "\\\\").replace("'", "\\'") + "']"


def parse_events(raw: DataFrame, schema: str | StructType,
                 required: Sequence[str] = ()) -> tuple[DataFrame, DataFrame]:
    """Split raw Kafka rows into (events, malformed), by the null rule below.

    An event is **malformed** when its value is not a JSON object, when a field
    holds a value that cannot be read as its declared type (``"abc"`` for a
    number), or when a ``required`` field is missing or null. Every other
    declared field may be null, and a field absent from the JSON object is
    read as null: a cancelled flight's ``"dep_delay": null`` is an event, which
    ``count`` counts and ``avg(dep_delay)`` skips, as SQL and pandas do.

    ``malformed`` keeps the raw record (value as text, topic, partition,
    offset, timestamp) and a ``reason`` that names the field. ``events`` also
    counts rows in and malformed rows per batch as observed metrics
    (``observedMetrics`` in progress).
    """
    struct = StructType.fromDDL(schema) if isinstance(schema, str) else schema
    fields = struct.fieldNames()
    unknown = [name for name in required if name not in fields]
    if unknown:
        raise BadArgument("required field", unknown[0], f"a field of the event schema: {fields}")
    with_corrupt = StructType([*struct.fields, StructField(CORRUPT, StringType(), True)])
    text = F.col("value").cast("string")
    event_expr = F.from_json(text, with_corrupt,
                             {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    if "parsed" in raw.columns:  # statekit's source parsed the values from_json would agree on
        fast = F.struct(*[F.col("parsed")[n].alias(n) for n in fields],
                        F.lit(None).cast("string").alias(CORRUPT))
        event_expr = F.when(F.col("parsed").isNotNull(), fast).otherwise(event_expr)
    parsed = raw.withColumn("event", event_expr)
    event = F.col("event")
    missing: Column = F.lit(None).cast("string")
    for name in reversed(list(required)):
        missing = F.when(event[name].isNull(), F.lit(f"{name} is missing or null")
                         ).otherwise(missing)
    wrong_type: Column = F.lit("a field has the wrong type")
    for field in reversed(struct.fields):  # evaluated only for corrupt records
        found = F.get_json_object(text, _json_path(field.name))
        wrong_type = F.when(event[field.name].isNull() & found.isNotNull(), F.concat(
            F.lit(f"{field.name} is not a {field.dataType.simpleString()}: "), found)
        ).otherwise(wrong_type)
    all_null = F.lit(True)
    for name in fields:
        all_null = all_null & event[name].isNull()
    reason = (F.when(event.isNull() | (event[CORRUPT].isNotNull() & all_null),
                     F.lit("not a JSON object"))
              .when(event[CORRUPT].isNotNull(), wrong_type)
              .otherwise(missing))
    parsed = parsed.withColumn("reason", reason)
    counted = parsed.observe(OBSERVED, F.count(F.lit(1)).alias("rows"),
                             F.sum(F.col("reason").isNotNull().cast("long")).alias("malformed"))
    events = counted.where(F.col("reason").isNull()).select(*[event[n].alias(n) for n in fields])
    malformed = parsed.where(F.col("reason").isNotNull()).select(
        F.col("key").cast("string").alias("key"), text.alias("value"), "topic", "partition",
        "offset", "timestamp", "reason")
    return events, malformed


def aggregate(events: DataFrame, spec: QuerySpec) -> DataFrame:
    """The aggregation of ``spec`` over parsed events (still streaming).

    Time and session windows: a watermarked ``groupBy(window, keys)``. A running
    aggregate (no window): ``groupBy(keys)`` — its state only grows — or, with a TTL,
    ``transformWithStateInPandas`` with ``statekit.query.running.RunningAggregate``.
    """
    missing = [c for c in spec.input_columns if c not in events.columns]
    if missing:
        raise BadArgument("column", missing[0], events.columns)
    aggs = [a.column_expr() for a in spec.aggregates]
    if spec.kind == "running" and spec.ttl is None:
        return events.groupBy(*spec.keys).agg(*aggs)
    if spec.kind == "running":
        from statekit.query.running import RunningAggregate, buffer_fields, output_schema

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


class StatefulQuery:
    """A running statekit aggregation: wait on it, read its progress and its state."""

    def __init__(self, spark: SparkSession, spec: QuerySpec, checkpoint: Checkpoint,
                 query: StreamingQuery, malformed_stream: DataFrame | None,
                 reports_before: int = 0, changelog: ChangelogWriter | None = None):
        self.spark, self.spec = spark, spec
        #: the checkpoint folder (``Checkpoint``: Spark's logs and statekit's files beside them)
        self.checkpoint = Checkpoint(checkpoint)
        self.query, self._malformed_stream = query, malformed_stream
        self.state = StateReader(spark, self.checkpoint, spec)
        self._started_batches = reports_before
        #: ships each committed batch's state changes to the changelog topic (None: logging off)
        self.changelog = changelog

    # --- lifecycle ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.query.name

    @property
    def is_active(self) -> bool:
        return self.query.isActive

    def stop(self) -> None:
        """Stop the query between two batches (and ship its last committed batches); the
        checkpoint stays."""
        stop_between_batches(self.query)
        if self.changelog is not None:
            self.changelog.stop()

    def __enter__(self) -> StatefulQuery:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _raise_if_failed(self) -> None:
        q = self.query
        if not q.isActive and q.exception() is not None:
            raise StatekitError(f"query {q.name!r} failed: {failure_text(q.exception())}")

    def wait_for_batches(self, n: int, timeout: float = 120.0) -> int:
        """Block until this run has completed ``n`` batches; returns the last batch id."""
        n = batch_id(n, "number of batches")
        deadline = time.monotonic() + timeout
        while len(self.checkpoint.progress_files()) - self._started_batches < n:
            self._raise_if_failed()
            if not self.query.isActive:
                raise StatekitError(f"query {self.name!r} stopped before {n} batches")
            if time.monotonic() > deadline:
                status = self.query.status  # e.g. "Waiting for data to arrive": no new input
                raise TimeoutError(f"query {self.name!r} did not complete {n} batches "
                                   f"in {timeout:.0f} s (Spark's status: "
                                   f"{status.get('message')!r})")
            time.sleep(0.1)
        return self.last_batch

    def wait_until_drained(self, timeout: float = 300.0) -> int:
        """Block until everything in the input so far is processed; returns the last batch id.

        A TTL'd running aggregate runs a batch on every trigger even without new input
        (to expire state), so Spark's ``processAllAvailable`` would never return for it:
        there, drained means a committed batch whose sources had read all they saw.
        """
        q, errors = self.query, []

        def drain():
            try:
                if self.spec.ttl is not None:
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
            raise StatekitError(f"query {q.name!r} failed: {errors[0]}") from errors[0]
        self._await_report(self.last_batch)
        if self.changelog is not None:
            self.changelog.wait_shipped(self.last_batch, timeout)
        return self.last_batch

    def _poll_caught_up(self, timeout: float) -> None:
        """Wait for a batch that read nothing new after its sources caught up."""
        deadline = time.monotonic() + timeout
        seen = -1
        while time.monotonic() < deadline:
            self._raise_if_failed()
            progress = self.query.lastProgress
            if progress and progress["batchId"] > seen:
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

        Reports come from statekit's listener, kept beside the checkpoint. A report the
        listener has not delivered yet (listener events reach a Spark Connect client
        late, or not before the query stops) is taken from the query's
        ``recentProgress`` and kept the same way.
        """
        self._keep_recent_progress()
        return progress_frame(self.checkpoint.progress_reports())

    def _keep_recent_progress(self) -> None:
        try:
            recent = self.query.recentProgress
        except Exception:  # a stopped Connect query may no longer answer
            return
        last = self.checkpoint.last_batch  # only batches whose commit is in the log
        for report in recent:
            batch = report.batchId
            if 0 <= batch <= last and not self.checkpoint.progress_path(batch).exists():
                self.checkpoint.write_progress(batch, report.json)

    @property
    def last_batch(self) -> int:
        """Id of the last committed batch (-1 before the first)."""
        return self.checkpoint.last_batch

    def late_events(self) -> int:
        """Rows dropped because they arrived behind the watermark (all batches)."""
        frame = self.progress()
        return int(frame["dropped_by_watermark"].sum()) if len(frame) else 0

    # --- malformed events -----------------------------------------------------------
    def malformed(self, timeout: float = 300.0) -> pd.DataFrame:
        """Malformed input records kept aside: key, value (text), topic, partition, offset, …

        The main query only counts them (so the input is read once); this call
        brings the parquet side table under the checkpoint up to date with an
        incremental, exactly-once ``availableNow`` run over the same input, then
        reads it. ``reason`` says what is wrong (see ``parse_events``).
        """
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
        frame = self.spark.read.parquet(data).toPandas()
        return frame[MALFORMED_COLUMNS].sort_values(["partition", "offset"]).reset_index(
            drop=True)

    def malformed_count(self) -> int:
        """Malformed input rows counted by the query so far (all runs of this checkpoint)."""
        frame = self.progress()
        return int(frame["malformed_rows"].sum()) if "malformed_rows" in frame else 0

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


_SPEC_ARGUMENTS = ("keys", "window", "aggregates", "event_time", "watermark", "ttl")


def _spec_of(spec: QuerySpec | None, given: dict) -> QuerySpec:
    """``spec``, or one built from the keyword arguments given (not both)."""
    named = {k: v for k, v in given.items() if v is not None}
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


def start_query(
    source: str | DataFrame,
    spec: QuerySpec | None = None,
    *,
    keys: Sequence[str] | str | None = None,
    window: WindowSpec | None = None,
    aggregates: Sequence[str | Aggregate] | None = None,
    event_time: str | None = None,
    watermark: str | None = None,
    ttl: str | None = None,
    kafka: Kafka | None = None,
    spark: SparkSession | None = None,
    event_schema: str | StructType | None = None,
    required_fields: Sequence[str] = (),
    checkpoint: str | None = None,
    name: str = "statekit",
    output_mode: str | None = None,
    sink: str = "noop",
    trigger: str = "500 milliseconds",
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = None,
    fail_on_data_loss: bool = True,
    ending_offsets: str | None = None,
    changelog: bool | None = None,
    store_name: str = "aggregate",
) -> StatefulQuery:
    """Start the windowed aggregation; returns a handle to wait on and to read state from.

    Args:
        source: a Kafka topic name (JSON values, parsed with ``event_schema``), or a
            streaming DataFrame: with a ``value`` column it is parsed the same way,
            otherwise its columns are used as they are.
        spec: what to compute (a ``QuerySpec``); or leave it out and give ``keys``,
            ``window``, ``aggregates``, ``event_time``, ``watermark``, ``ttl`` (QuerySpec's
            defaults for those left out), not both. ``window=None`` is a running aggregate per
            key: its state grows with every key unless a ``ttl`` forgets idle keys.
        kafka: the Kafka cluster (a ``KafkaConnection``, ``"host:port"`` or an
            ``EmbeddedBroker``); required when ``source`` is a topic or a changelog is kept.
        spark: the session (``statekit.spark_session()`` when None).
        event_schema: the JSON events' schema (Spark DDL or StructType); default
            ``spec.default_event_schema()`` (keys strings, event time a timestamp,
            aggregated columns doubles).
        required_fields: fields besides the group keys and the event time that an event
            cannot do without. The null rule: an event is malformed (counted, kept aside
            in ``malformed()``) when it is not a JSON object, when a field holds a value of
            the wrong type, or when a group key, the event time or a required field is
            missing or null; any other field may be null or absent (read as null), and
            ``count`` counts the event while ``sum/min/max/avg(col)`` skip the null.
        checkpoint: the query's checkpoint directory (a new temp dir when None). Starting
            again with the same checkpoint resumes exactly where the query stopped.
        output_mode: ``update`` (default) or ``append`` (sessions need append).
        sink: where result rows go: noop (default), memory (a table named ``name``), console.
        trigger: a micro-batch interval such as "1 second", or "available-now".
        ending_offsets: JSON like ``{"topic": {"0": 500}}``: the query reads those
            partitions up to there and then waits (a drill leaves input for a restart so).
        changelog: ship every committed state change to the topic ``<name>-<store_name>-
            changelog`` (see ``statekit.changelog``). On by default when ``kafka`` is given;
            ``False`` switches logging off, like Kafka Streams' ``withLoggingDisabled``.
        store_name: the store's name in its changelog topic.

    Example:
        >>> from statekit.datasets import game_events                        # doctest: +SKIP
        >>> games = game_events()                                            # doctest: +SKIP
        >>> q = start_query("games", games.spec, kafka=broker,               # doctest: +SKIP
        ...                 event_schema=games.schema)
    """
    from statekit.spark.session import spark_session

    spec = _spec_of(spec, {"keys": keys, "window": window, "aggregates": aggregates,
                           "event_time": event_time, "watermark": watermark, "ttl": ttl})
    if sink not in SINKS:
        raise BadArgument("sink", sink, SINKS)
    if output_mode is None:
        output_mode = "append" if spec.kind == "session" else "update"
    if output_mode not in ("update", "append"):
        raise BadArgument("output mode", output_mode, ["update", "append"])
    if spec.kind == "session" and output_mode != "append":
        raise BadArgument("output mode for session windows", output_mode, ["append"])
    if spec.kind == "running" and output_mode != "update":
        raise BadArgument("output mode for a running aggregate", output_mode, ["update"])
    if isinstance(required_fields, str):
        required_fields = [required_fields]
    trigger_kwargs = _trigger(trigger)
    conn: KafkaConnection | None = None if kafka is None else connect(kafka)
    if changelog is None:
        changelog = conn is not None
    if changelog and conn is None:
        raise BadArgument("kafka", None, "the Kafka cluster to write the changelog to "
                                         "(a KafkaConnection, 'host:port' or an EmbeddedBroker)")
    topic = changelog_topic(name, store_name) if changelog else None
    spark = spark or spark_session()
    checkpoint = Checkpoint(checkpoint or tempfile.mkdtemp(prefix=f"statekit-{name}-"))

    if isinstance(source, str):
        if conn is None:
            raise BadArgument("kafka", None, "the Kafka cluster of topic "
                                             f"{source!r} (a KafkaConnection, 'host:port' or an "
                                             "EmbeddedBroker)")
        raw = kafka_stream(spark, source, conn, starting_offsets, max_offsets_per_trigger,
                           fail_on_data_loss,
                           value_schema=event_schema or spec.default_event_schema(),
                           ending_offsets=ending_offsets)
    elif isinstance(source, DataFrame):
        if not source.isStreaming:
            raise BadArgument("source", "a batch DataFrame",
                              "a topic name or a streaming DataFrame")
        raw = source
    else:
        raise BadArgument("source", source, "a topic name or a streaming DataFrame")

    if "value" in raw.columns:
        required = list(dict.fromkeys([*spec.required_columns, *required_fields]))
        events, malformed = parse_events(raw, event_schema or spec.default_event_schema(),
                                         required)
    else:
        events, malformed = raw, None

    reports_before = len(checkpoint.progress_files())
    recorder = _recorder(spark)
    writer = (aggregate(events, spec).writeStream.queryName(name).outputMode(output_mode)
              .format(sink).option("checkpointLocation", str(checkpoint))
              .trigger(**trigger_kwargs))
    query = writer.start()
    recorder.checkpoints[str(query.id)] = checkpoint
    handle = StatefulQuery(spark, spec, checkpoint, query, malformed, reports_before)
    if topic:
        handle.changelog = ChangelogWriter(handle.state, conn, topic).start()
    return handle


def _trigger(trigger: str) -> dict:
    if trigger == "available-now":
        return {"availableNow": True}
    return {"processingTime": spark_interval(trigger, "trigger interval")}


def failure_text(exc: BaseException, depth: int = 6) -> str:
    """A query's exception with the chain of causes Spark wrapped it in, innermost last.

    Spark often wraps the real failure (a Python traceback, a refused connection) in a
    generic one ("driver worker exited unexpectedly"); the causes say what happened.
    """
    text, seen = str(exc), {str(exc)}
    cause = getattr(exc, "_cause", None) or exc.__cause__
    while cause is not None and depth > 0:
        message = str(cause).split("\n\nJVM stacktrace:")[0].strip()
        if message and message not in seen:
            text += f"\ncaused by: {message}"
            seen.add(message)
        cause, depth = getattr(cause, "_cause", None) or cause.__cause__, depth - 1
    return text

