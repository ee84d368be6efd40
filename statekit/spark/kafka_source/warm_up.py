"""``statekit_warmup``: a broker-free stream shaped like the Kafka source.

``statekit.spark.class_archive`` runs it (``training_query``) in the JVM that writes the
class-data archive, so that the archive holds the classes of Spark's Python data source
machinery (the driver-side runner, Python read workers, the Arrow hand-off, ``parsed``)
that a real query loads. Example: as ``statekit_kafka``,
``spark.readStream.format(WARM_UP_FORMAT)`` once registered.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from statekit.spark.kafka_source.columns import PARSED
from statekit.spark.kafka_source.data_source import KafkaSource
from statekit.spark.kafka_source.json_values import JsonValues

WARM_UP_FORMAT = "statekit_warmup"


@dataclass(frozen=True)
class _WarmUpTask(InputPartition):
    batch: int
    task: int
    rows: int


class WarmUpSource(DataSource):
    """``statekit_warmup``: a few batches of game events with this source's columns, no broker.

    Used by ``statekit.spark.class_archive.training_query`` to run Spark's Python data
    source machinery (the driver-side runner, Python read workers, Arrow hand-off,
    ``parsed``) in the JVM that writes the class-data archive. Options: ``rows`` per batch
    (default 2000), ``batches`` (default 2), ``valueSchema`` as for ``statekit_kafka``, and
    ``stopFile``: once that file exists, no further batch is offered, so an ``availableNow``
    query ends after its current batch.
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

        import statekit.kafka.clients  # noqa: F401

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
