"""Events from raw records: the event schema, the null rule, malformed records kept aside.

``parse_events`` splits raw Kafka rows (or text lines) into events and malformed records
(what is wrong named in ``reason``); ``require_types`` refuses an aggregate Spark would fail
on at the first batch.

Example:
    >>> events, malformed = parse_events(raw, "player string, ts timestamp",  # doctest: +SKIP
    ...                                  ["player", "ts"], event_time="ts")
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from statekit.durations import to_millis
from statekit.errors import BadArgument
from statekit.model.query_spec import QuerySpec
from statekit.query.failures import spark_message

CORRUPT = "_corrupt_record"
#: ``from_json``'s options for event values: Spark's defaults otherwise (``timestampFormat``
#: included: ISO 8601, with Spark's lenient fallback; a JSON number is seconds since the epoch)
JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
OBSERVED = "statekit_input"  # observed metrics of the main query: rows in, malformed rows
NOT_UTF8, NOT_JSON = "not UTF-8", "not a JSON object"
#: ``malformed()``: key and value as text (bytes that are not UTF-8 escaped, ``\\xff``), the
#: value's exact bytes last
MALFORMED_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "reason",
                     "value_bytes"]
#: the side output's parquet columns (raw key and value bytes: any bytes are kept)
MALFORMED_SCHEMA = ("key binary, value binary, topic string, partition int, offset bigint, "
                     "timestamp timestamp, reason string")


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
