"""The columns the Kafka source yields: those of Spark's ``kafka`` format, and ``parsed``.

Example:
    >>> kafka_struct().fieldNames() == [c.split()[0] for c in SCHEMA.split(", ")]
    True
"""

from __future__ import annotations

from pyspark.sql.types import StructType

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
PARSED = "parsed"  # the column of values parsed in the source (option valueSchema)


def kafka_struct() -> StructType:
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
