"""Spark's Python processes for statekit's Kafka source, started before the first query needs them.

A Python data source makes a fresh driver JVM start several Python processes one after
another, each when it first needs it: one that looks up installed data sources (on the
first registration), a daemon per kind of Python worker (the one that plans a read, the
read tasks' own) and their forked workers. The first query of a fresh session waited for
all of them in turn, ~0.3 s each (``bench/README.md``, "cold start").

``start_early(spark)`` does the part that does not depend on any query in a background
thread: it registers the Kafka source (``statekit.spark.kafka_source.register``) and reads
one row from each of two partitions of ``statekit_ready``, a one-row batch source below,
whose read imports what the Kafka source's read tasks import. Spark keeps those processes
and gives them to the first query (its daemons stay; its idle workers for a minute), which
then starts only what is its own (its source runner). Measured in fresh processes, 4
alternating rounds: the first window result 0.8 s sooner (6.5–6.7 s against 7.2–7.6 s),
its first batch 2.5–2.7 s instead of 3.3–3.6 s. Unlike a warm-up query (tried before and
removed: it competed with the person's query for the two cores), it runs no stream, no
state store and no aggregation: 2 rows, ~0.5 CPU-seconds.

It is best effort: a failure is written to ``spark_log()``, never raised; the first query
then starts what it needs itself, as it would have.

Example:
    >>> thread = start_early(spark)                      # doctest: +SKIP
    >>> thread.join(); spark.read.format(READY_FORMAT).load().count()   # doctest: +SKIP
    2
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

READY_FORMAT = "statekit_ready"
#: read tasks of the one-row read: one per slot of statekit's default ``local[2]``
READ_TASKS = 2


class ReadySource(DataSource):
    """``statekit_ready``: one row (``task``) per partition, ``READ_TASKS`` partitions."""

    @classmethod
    def name(cls) -> str:
        return READY_FORMAT

    def schema(self) -> str:
        return "task int"

    def reader(self, schema) -> DataSourceReader:
        return _ReadyReader()


class _ReadyReader(DataSourceReader):
    def partitions(self) -> list[InputPartition]:
        return [InputPartition(task) for task in range(READ_TASKS)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        # what a read task of statekit_kafka imports, so that the reused worker has it
        import confluent_kafka  # noqa: F401
        import pyarrow  # noqa: F401

        import statekit.spark.kafka_source.reading  # noqa: F401

        yield (partition.value,)


def start_early(spark) -> threading.Thread:
    """Register the Kafka source and start Spark's Python planner and read workers, in a
    daemon thread (returned, already started); failures go to ``spark_log()``."""
    thread = threading.Thread(target=_start, args=(spark,), name="statekit-early-workers",
                              daemon=True)
    thread.start()
    return thread


def _start(spark) -> None:
    from statekit.spark.kafka_source import register
    from statekit.spark.session import log_failure

    try:
        register(spark)
        spark.dataSource.register(ReadySource)
        spark.read.format(READY_FORMAT).load().collect()
    except Exception as exc:  # the session may be stopping; the first query starts them
        log_failure("starting Spark's Python workers early (the first query starts them)", exc)
