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
    explain as before. Every row keeps its raw ``value``. ``tests/project/test_bad_input.py``
    feeds both parsers the same edge cases and compares them row by row.
    Other field types (dates, decimals, nested types) are not parsed here: ``parsed``
    is then always null.

Planning: while the broker's last answer (under 10 s old) already shows at least
``maxOffsetsPerTrigger`` records waiting, a micro-batch is planned from it without
asking the broker again (a query catching up on a backlog saves a round trip of
watermark requests a batch); a caught-up query asks every trigger.

Modules, one concern each: ``data_source`` (the ``DataSource`` and its stream reader, on
the driver), ``options`` (the options read), ``offsets`` (offset options and range
planning), ``consumers`` (the read consumers a Python worker keeps), ``reading`` (a read
task: records to Arrow batches), ``columns`` and ``json_values`` (the output columns, the
values parsed), ``warm_up`` (a broker-free stream of the same shape). Spark pickles the
``DataSource`` class by reference (``statekit.spark.kafka_source.data_source.KafkaSource``):
its Python workers import that module and what it imports, none of which loads pandas or
Altair (``tests/project/test_layers.py``). Names resolve on first use.

Example:
    >>> from statekit.spark.kafka_source import register
    >>> register(spark)                                                  # doctest: +SKIP
    >>> df = (spark.readStream.format("statekit_kafka")                  # doctest: +SKIP
    ...       .option("kafka.bootstrap.servers", broker.bootstrap_servers)
    ...       .option("subscribe", "games").load())
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "FORMAT": "statekit.spark.kafka_source.data_source",
    "KafkaSource": "statekit.spark.kafka_source.data_source",
    "KafkaStreamReader": "statekit.spark.kafka_source.data_source",
    "register": "statekit.spark.kafka_source.data_source",
    "PARSED": "statekit.spark.kafka_source.columns",
    "SCHEMA": "statekit.spark.kafka_source.columns",
    "EARLIEST": "statekit.spark.kafka_source.offsets",
    "LATEST": "statekit.spark.kafka_source.offsets",
    "KafkaInputPartition": "statekit.spark.kafka_source.offsets",
    "KafkaReadTask": "statekit.spark.kafka_source.offsets",
    "cap_offsets": "statekit.spark.kafka_source.offsets",
    "pack_ranges": "statekit.spark.kafka_source.offsets",
    "READ_SETTINGS": "statekit.spark.kafka_source.consumers",
    "close_pooled_consumers": "statekit.spark.kafka_source.consumers",
    "read_range": "statekit.spark.kafka_source.reading",
    "read_ranges": "statekit.spark.kafka_source.reading",
    "JsonValues": "statekit.spark.kafka_source.json_values",
    "WARM_UP_FORMAT": "statekit.spark.kafka_source.warm_up",
    "WarmUpSource": "statekit.spark.kafka_source.warm_up",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
