"""Read a windowed aggregation's state with Spark's State Data Source, flattened for pandas.

Spark keeps a streaming aggregation's state as (key struct, aggregation buffer
struct) rows per partition. ``StateReader`` reads them at any retained batch
(``statestore``), reads the change feed between batches (``readChangeFeed``)
and the store metadata (``state-metadata``) and flattens everything inside
Spark into plain columns: ``window_start``, ``window_end``, the group keys,
one column per aggregate (final values: an avg is sum / count), ``partition``.

Example:
    >>> reader = StateReader(spark, "/tmp/ck", spec)                     # doctest: +SKIP
    >>> reader.snapshot(batch=3).head()                                  # doctest: +SKIP
         window_start          window_end player  count  sum_score  max_score  partition
"""

from __future__ import annotations

import os
from functools import reduce

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from statekit.errors import BatchNotRetained, StatekitError
from statekit.model.query_spec import BUFFER_WIDTH, QuerySpec
from statekit.spark.object_store import is_object_store
from statekit.spark.s3a_settings import ready_for
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.integrity import require_readable, restore_problems
from statekit.spark_state.read_errors import reading
from statekit.spark_state.spark_files import require_state_files_visible
from statekit.spark_state.times import table_for_pandas
from statekit.validate import batch_id, batch_span

CHANGE_NAMES = {"update": "put", "delete": "delete"}


def committed_batches(checkpoint: str | os.PathLike) -> list[int]:
    """Ids of the batches in a checkpoint's commit log (``Checkpoint.committed_batches``)."""
    return Checkpoint(checkpoint).committed_batches()


class StateReader:
    """Snapshots, change feed and metadata of one statekit query's state store.

    Args:
        spark: the session to read with.
        checkpoint: the query's checkpoint location (a path or a ``Checkpoint``).
        spec: what the query computes (tells how to flatten keys and buffers).
        operator_id: the stateful operator to read (statekit queries have one: 0).
    """

    def __init__(self, spark: SparkSession, checkpoint: str | os.PathLike | Checkpoint,
                 spec: QuerySpec, operator_id: int = 0):
        self.spark, self.spec = spark, spec
        self.checkpoint = Checkpoint(checkpoint)
        self.operator_id = batch_id(operator_id, "operator_id")
        if is_object_store(self.checkpoint.path):
            ready_for(spark, self.checkpoint.path)

    @property
    def path(self) -> str:
        """The checkpoint location as Spark's readers take it."""
        return str(self.checkpoint)

    # --- metadata -------------------------------------------------------------------
    def metadata(self) -> pd.DataFrame:
        """One row per stateful operator and store: partitions and the retained batch range."""
        self.checkpoint.require_state()
        with reading(f"the state metadata of checkpoint {self.path!r}"):
            meta = self.spark.read.format("state-metadata").load(self.path).toPandas()
        return meta.rename(columns={
            "operatorId": "operator_id", "operatorName": "operator", "stateStoreName": "store",
            "numPartitions": "partitions", "minBatchId": "min_batch", "maxBatchId": "max_batch",
            "operatorProperties": "properties"})

    def batch_range(self) -> tuple[int, int] | None:
        """(first, last) committed batch still retained, or None before any commit.

        Read from the checkpoint's commit log listing (cheap; Spark keeps the log
        and the state versions for the same ``minBatchesToRetain`` batches).
        """
        self.checkpoint.require_state()
        return self.checkpoint.batch_range()

    # --- reading --------------------------------------------------------------------
    def _load(self, **options) -> DataFrame:
        # not one state file but the driver's commits: a checkpoint on unshared disks, named
        # as such before the file check reports every partition folder as missing
        require_state_files_visible(self.checkpoint, self.operator_id)
        require_readable(self.checkpoint, self.operator_id,
                         f"the state of operator {self.operator_id} in {self.path!r}")
        reader = self.spark.read.format("statestore").option("operatorId", self.operator_id)
        if self.spec.ttl is not None:  # transformWithState: the aggregate's value state
            from statekit.spark_state.running_aggregate import STATE_NAME

            reader = reader.option("stateVarName", STATE_NAME)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load(self.path)

    def snapshot_frame(self, batch: int | None = None) -> DataFrame:
        """The flattened state at ``batch`` (latest when None) as a Spark DataFrame."""
        self.checkpoint.require_state()
        batch = self.checkpoint.check_batch(batch)
        raw = self._load(batchId=batch)
        return raw.select(*self._flat_columns(raw), F.col("partition_id").alias("partition"))

    def snapshot(self, batch: int | None = None, sort: bool = False) -> pd.DataFrame:
        """The state at ``batch`` (latest when None) as pandas, one row per key and window.

        Rows come in the store's own order (partition by partition, RocksDB key
        order within each); ``sort=True`` sorts them by window and keys.
        """
        self.checkpoint.require_state()
        batch = self.checkpoint.check_batch(batch)
        with reading(f"the state of batch {batch} of checkpoint {self.path!r}",
                     self._bad_files(batch + 1, batch + 1)):
            frame = to_pandas(self.snapshot_frame(batch))
        if sort:
            frame = frame.sort_values(self.spec.key_columns, kind="stable", ignore_index=True)
        frame.attrs = {"checkpoint": self.path, "operator_id": self.operator_id, "batch": batch,
                       "key_columns": list(self.spec.key_columns),
                       "value_columns": list(self.spec.value_columns)}
        return frame

    def schema(self, batch: int | None = None) -> pd.DataFrame:
        """One row per snapshot column: ``column``, ``field`` (where Spark keeps it: a key
        field's path, or ``value`` for an aggregate statekit computes from Spark's buffer),
        ``role`` (``key`` or ``value``), ``type`` (as text); the same columns as an inspect
        view's ``schema()``.

        Example:
            >>> query.state().schema()[["column", "role"]]               # doctest: +SKIP
        """
        spec = self.spec
        fields = {"window_start": "key.window.start", "window_end": "key.window.end",
                  **{k: f"key.{k}" for k in spec.keys}}
        if spec.kind == "session":
            fields.update(window_start="key.sessionStartTime", window_end="value.end")
        rows = [(f.name, fields.get(f.name, "value"),
                 "key" if f.name in spec.key_columns else "value", f.dataType.simpleString())
                for f in self.snapshot_frame(batch).schema.fields if f.name != "partition"]
        return pd.DataFrame(rows, columns=["column", "field", "role", "type"])

    def changes_frame(self, from_batch: int, to_batch: int | None = None) -> DataFrame:
        """The change feed between two batches (inclusive) as a Spark DataFrame."""
        from_batch, to_batch = batch_span(from_batch, to_batch)
        self.checkpoint.require_state()
        to_batch = self.checkpoint.check_batch(to_batch, "to_batch")
        span = self.checkpoint.batch_range()
        if not span[0] <= from_batch <= to_batch:
            raise BatchNotRetained(from_batch, span, self.path)
        raw = self._load(readChangeFeed=True, changeStartBatchId=from_batch,
                         changeEndBatchId=to_batch)
        change = F.col("change_type")
        for spark_name, ours in CHANGE_NAMES.items():
            change = F.when(F.col("change_type") == spark_name, F.lit(ours)).otherwise(change)
        return raw.select(F.col("batch_id").alias("batch"), change.alias("change"),
                          *self._flat_columns(raw), F.col("partition_id").alias("partition"))

    def changes(self, from_batch: int, to_batch: int | None = None) -> pd.DataFrame:
        """Every put and delete committed by batches ``from_batch..to_batch``, in order."""
        # deletes have no value: nullable integers keep integer columns integer
        first, last = batch_span(from_batch, to_batch)
        self.checkpoint.require_state()
        last = self.checkpoint.check_batch(last, "to_batch")
        with reading(f"the change feed of batches {first}..{last} of checkpoint {self.path!r}",
                     self._bad_files(first + 1, last + 1, deltas_only=True)):
            frame = to_pandas(self.changes_frame(first, last), nullable_ints=True)
        return frame.sort_values(["batch", "partition"], kind="stable").reset_index(drop=True)

    def batch_counts(self, batches: list[int]) -> pd.DataFrame:
        """What Spark's progress reports say of the state, read back from the state itself for
        the retained ``batches`` (two Spark jobs): ``batch``, ``state_rows_total`` (rows after
        the batch), ``state_rows_updated`` and ``state_rows_removed`` (its puts and deletes in
        the change feed). Batches the checkpoint no longer holds are left out.

        Example:
            >>> reader.batch_counts([3, 4])                              # doctest: +SKIP
               batch  state_rows_total  state_rows_updated  state_rows_removed
            0      3               118                  79                  40
        """
        span = self.batch_range()
        kept = set(self.checkpoint.committed_batches())
        chosen = sorted(b for b in set(batches) if span and span[0] <= b <= span[1] and b in kept)
        columns = ["batch", "state_rows_total", "state_rows_updated", "state_rows_removed"]
        if not chosen:
            return pd.DataFrame(columns=columns, dtype="int64")
        what = f"the state of batches {chosen[0]}..{chosen[-1]} of checkpoint {self.path!r}"
        with reading(what, self._bad_files(chosen[0] + 1, chosen[-1] + 1, deltas_only=True)):
            frames = [self._load(batchId=b).select(F.lit(b).alias("batch")) for b in chosen]
            union = reduce(lambda a, b: a.unionByName(b), frames)
            totals = union.groupBy("batch").count().toPandas()
            feed = self._load(readChangeFeed=True, changeStartBatchId=chosen[0],
                              changeEndBatchId=chosen[-1])
            changes = feed.groupBy("batch_id", "change_type").count().toPandas()
        out = pd.DataFrame({"batch": chosen})
        out = out.merge(totals.rename(columns={"count": "state_rows_total"}), "left", "batch")
        for kind, column in (("update", "state_rows_updated"), ("delete", "state_rows_removed")):
            part = changes[changes["change_type"] == kind].rename(
                columns={"batch_id": "batch", "count": column})[["batch", column]]
            out = out.merge(part, "left", "batch")
        return out.fillna(0).astype("int64")[columns]

    def _bad_files(self, first_version: int, last_version: int, deltas_only: bool = False):
        store = "default"
        return lambda: restore_problems(self.checkpoint, self.operator_id, store, first_version,
                                        last_version, deltas_only)

    # --- flattening -----------------------------------------------------------------
    def _flat_columns(self, raw: DataFrame) -> list[Column]:
        """Spark columns: window_start, window_end, keys, aggregates (final values)."""
        spec = self.spec
        key_type: StructType = raw.schema["key"].dataType
        if spec.ttl is not None:
            return self._ttl_columns(raw, key_type)
        value_type: StructType = raw.schema["value"].dataType
        session = spec.kind == "session"
        lead = 1 + len(spec.keys) if session else 0  # session state repeats window + keys
        expected = lead + sum(BUFFER_WIDTH[a.function] for a in spec.aggregates)
        if len(value_type.fields) != expected:
            raise StatekitError(
                f"the state in {self.path!r} has value fields "
                f"{[f.name for f in value_type.fields]}, which do not fit the aggregates "
                f"{[a.name for a in spec.aggregates]}: was it written by another query?")
        missing = [k for k in spec.keys if k not in key_type.fieldNames()]
        if missing:
            raise StatekitError(
                f"the state in {self.path!r} has key fields {key_type.fieldNames()}, "
                f"not the group keys {missing}: was it written by another query?")
        # Buffer fields repeat names (two 'sum's, two 'count's): cast to positional names.
        positional = StructType([StructField(f"v{i}", f.dataType, True)
                                 for i, f in enumerate(value_type.fields)])
        value = F.col("value").cast(positional)
        if session:
            window = [F.col("key.sessionStartTime").alias("window_start"),
                      value["v0"]["end"].alias("window_end")]
        elif spec.kind == "running":
            window = []
        else:
            window = [F.col("key.window.start").alias("window_start"),
                      F.col("key.window.end").alias("window_end")]
        keys = [F.col("key").getField(k).alias(k) for k in spec.keys]
        aggs, i = [], lead
        for agg in spec.aggregates:
            if agg.function == "avg":
                total, count = value[f"v{i}"], value[f"v{i + 1}"]
                aggs.append(F.when(count > 0, total / count).alias(agg.name))
            else:
                aggs.append(value[f"v{i}"].alias(agg.name))
            i += BUFFER_WIDTH[agg.function]
        return [*window, *keys, *aggs]

    def _ttl_columns(self, raw: DataFrame, key_type: StructType) -> list[Column]:
        """A TTL'd running aggregate: keys, then the final values of its ``agg`` value state."""
        spec = self.spec
        missing = [k for k in spec.keys if k not in key_type.fieldNames()]
        if missing:
            raise StatekitError(
                f"the state in {self.path!r} has key fields {key_type.fieldNames()}, "
                f"not the group keys {missing}: was it written by another query?")
        buffer = F.col("value.value")
        aggs = []
        for agg in spec.aggregates:
            if agg.function == "avg":
                total, count = buffer[f"{agg.name}_sum"], buffer[f"{agg.name}_count"]
                aggs.append(F.when(count > 0, total / count).alias(agg.name))
            else:
                aggs.append(buffer[agg.name].alias(agg.name))
        return [*[F.col("key").getField(k).alias(k) for k in spec.keys], *aggs]


def to_pandas(frame: DataFrame, nullable_ints: bool = False) -> pd.DataFrame:
    """Collect through Arrow (a little faster than ``toPandas()``), timestamps as naive UTC.

    statekit sessions run in UTC, so the naive wall-clock values equal what
    ``toPandas()`` gives; ``nullable_ints`` maps integer columns to ``Int64``.
    """
    return arrow_to_pandas(frame.toArrow(), nullable_ints)


def arrow_to_pandas(table: pa.Table, nullable_ints: bool = False) -> pd.DataFrame:
    """An Arrow table of Spark's as pandas: timestamps as naive UTC (``datetime64[ns]``, or
    ``[us]`` for a column with a time beyond 2262: ``statekit.spark_state.times``), integer
    columns as ``Int64`` when ``nullable_ints``."""
    table = table_for_pandas(table)
    mapper = None
    if nullable_ints:
        ints = {pa.int8(), pa.int16(), pa.int32(), pa.int64()}
        mapper = {t: pd.Int64Dtype() for t in ints}.get
    # no self_destruct: a caller may still hold the table (the inspector reads its schema after)
    return table.to_pandas(types_mapper=mapper, split_blocks=True)

