"""Where a query's events come from: a Kafka topic (Spark's connector or statekit's own
source) or a streaming DataFrame, parsed into events and malformed records.

Example:
    >>> events, malformed = source_events("games", spark, SourceOptions(  # doctest: +SKIP
    ...     kafka=broker, event_schema="player STRING, ts TIMESTAMP"), ["player"])
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    StructType,
)

from statekit.errors import BadArgument
from statekit.model.connection import Kafka, connect
from statekit.options.query import SourceOptions
from statekit.query.parsing import event_struct, parse_events
from statekit.spark.connect import default_parallelism
from statekit.validate import (
    optional_whole_number,
)

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
