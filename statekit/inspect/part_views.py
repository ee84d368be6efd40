"""One operator's state, read part by part: snapshots and change feeds as plain pandas frames.

A ``StateView`` is one readable part of an operator's state (a store, a join side, a
transformWithState state variable, its timers: see ``statekit.inspect.operators``). Its
``snapshot(batch)`` is the state after that batch, one row per state entry; its
``changes(from_batch, to_batch)`` is every put and delete those batches made, in order.
Columns are Spark's nested fields flattened (``statekit.inspect.flatten``), then
``partition``; change feeds start with ``batch`` and ``change`` (``put``, ``delete``, or
Spark's own word for other changes, such as ``append`` for a list state). An
``OperatorView`` groups one operator's parts.

Both only read: Spark's ``statestore`` reader loads the state into temporary local stores,
never into the checkpoint.

Example:
    >>> view = open_checkpoint("/tmp/ck")                                # doctest: +SKIP
    >>> counts = view.operator(0)                                        # doctest: +SKIP
    >>> counts.snapshot(batch=3)                                         # doctest: +SKIP
      player  count  partition
    0     p1      4          0
    >>> view.state("left", operator_id=1).snapshot()                     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property, reduce

import pandas as pd
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from statekit.errors import BadArgument, BatchNotRetained, CheckpointError
from statekit.inspect import limits
from statekit.inspect.flatten import FlatColumn, flat_columns, flatten, to_pandas
from statekit.inspect.operators import Part
from statekit.inspect.plan_names import PartNames
from statekit.spark.connect import is_connect
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.integrity import require_readable, restore_problems
from statekit.spark_state.problems import Problem
from statekit.spark_state.read_errors import reading
from statekit.spark_state.spark_files import _ranges, require_state_files_visible, state_files
from statekit.validate import batch_span

#: Spark's change types → statekit's words (others, like a list state's ``append``, stay).
CHANGE_NAMES = {"update": "put", "delete": "delete"}
SCHEMA_COLUMNS = ["column", "field", "role", "type"]


class StateView:
    """Snapshots and change feed of one part of one operator's state.

    Args:
        checkpoint: the checkpoint (a ``Checkpoint``).
        part: what to read (``statekit.inspect.operators.Part``).
        spark: a SparkSession, or a function that gives one when first needed.
        batch_span: (first, last) batch Spark's state metadata says the operator's state
            holds, or None.
        names: the person's names of the part's fields, from the query's plan
            (``statekit.inspect.plan_names``); None keeps Spark's names (``field0`` for a
            join key, an aggregate's buffer fields such as ``sum`` and ``count``), which is
            all a checkpoint alone tells.
    """

    def __init__(self, checkpoint: Checkpoint, part: Part,
                 spark: SparkSession | Callable[[], SparkSession],
                 batch_span: tuple[int, int] | None = None, names: PartNames | None = None):
        self.checkpoint, self.part, self.batch_span = checkpoint, part, batch_span
        self.names = names or None
        self._spark = spark

    @property
    def spark(self) -> SparkSession:
        given = self._spark
        return given if isinstance(given, SparkSession) or is_connect(given) else given()

    @property
    def operator_id(self) -> int:
        return self.part.operator_id

    @property
    def name(self) -> str:
        return self.part.name

    def __repr__(self) -> str:
        return (f"StateView(operator {self.operator_id} {self.part.operator}, {self.part.what} "
                f"{self.name!r}, {str(self.checkpoint)!r})")

    @property
    def label(self) -> str:
        """What this part is, for a person: part, operator and checkpoint."""
        return self._what()

    def _what(self) -> str:
        return (f"{self.part.what} {self.name!r} of operator {self.operator_id} "
                f"({self.part.operator}) in {str(self.checkpoint)!r}")

    # --- Spark's reader --------------------------------------------------------------------
    def _reader(self, **options: object) -> DataFrameReader:
        require_readable(self.checkpoint, self.operator_id, self._what())
        require_state_files_visible(self.checkpoint, self.operator_id)
        reader = self.spark.read.format("statestore").option("operatorId", self.operator_id)
        for key, value in (*self.part.options, *options.items()):
            reader = reader.option(key, value)
        return reader

    @cached_property
    def spark_schema(self) -> StructType:
        """The reader's schema for a snapshot: ``key``, the value column(s), ``partition_id``
        (Spark reads it from the store's schema file; no job runs)."""
        with reading(f"the state schema of {self._what()}"):
            return self._reader().load(str(self.checkpoint)).schema

    @property
    def columns(self) -> list[FlatColumn]:
        """The flattened columns (key columns first), as ``flat_columns`` names them (with
        this view's ``names``)."""
        return flat_columns(self.spark_schema, self.names)

    @property
    def key_columns(self) -> list[str]:
        """The columns that make up a state entry's key (with a map state's user key)."""
        return [c.name for c in self.columns if c.role == "key"]

    @property
    def value_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.role == "value"]

    def schema(self) -> pd.DataFrame:
        """One row per flattened column: ``column``, ``field`` (Spark's dotted path; for a
        column statekit derives, what it computes: ``value.sum / value.count``), ``role``
        (``key`` or ``value``), ``type`` (Spark's type, as text)."""
        return pd.DataFrame([(c.name, c.field, c.role, c.data_type.simpleString())
                             for c in self.columns], columns=SCHEMA_COLUMNS)

    # --- batches ---------------------------------------------------------------------------
    def _check_batch(self, batch: object, what: str) -> int:
        number = self.checkpoint.check_batch(batch, what)
        span = self.batch_span
        if span is not None and not span[0] <= number <= span[1]:
            raise BatchNotRetained(number, span, str(self.checkpoint))
        return number

    def _attrs(self, frame: pd.DataFrame, **extra: object) -> pd.DataFrame:
        frame.attrs = {"checkpoint": str(self.checkpoint), "operator_id": self.operator_id,
                       "operator": self.part.operator, "kind": self.part.kind,
                       "name": self.name, "key_columns": self.key_columns,
                       "value_columns": self.value_columns, **extra}
        return frame

    def _bad_files(self, first_version: int, last_version: int,
                   deltas_only: bool = False) -> Callable[[], list[Problem]]:
        def bad() -> list[Problem]:
            return restore_problems(self.checkpoint, self.operator_id, self.part.store,
                                    first_version, last_version, deltas_only)
        return bad

    # --- snapshots ---------------------------------------------------------------------------
    def snapshot_frame(self, batch: int | None = None) -> DataFrame:
        """The flattened state after ``batch`` (the last committed when None), as a Spark
        DataFrame."""
        batch = self._check_batch(batch, "batch")
        with reading(f"the state of batch {batch} of {self._what()}",
                     self._bad_files(0, batch + 1)):
            raw = self._reader(batchId=batch).load(str(self.checkpoint))
            return flatten(raw, self.names)[0]

    def snapshot(self, batch: int | None = None, sort: bool = False) -> pd.DataFrame:
        """The state after ``batch`` (the last committed when None), one row per entry
        (one per element of a list state), with ``partition``.

        Rows come in the store's own order (partition by partition); ``sort=True`` sorts
        them by partition and key columns (a list state keeps its elements' order).
        ``attrs``: ``batch``, ``key_columns``, ``value_columns`` and where it comes from.
        """
        batch = self._check_batch(batch, "batch")
        with reading(f"the state of batch {batch} of {self._what()}",
                     self._bad_files(0, batch + 1)):
            frame = to_pandas(self.snapshot_frame(batch))
        if sort and len(frame):
            frame = frame.sort_values(["partition", *self.key_columns], kind="stable",
                                      ignore_index=True)
        return self._attrs(frame, batch=batch)

    # --- counts, in one Spark job --------------------------------------------------------
    def partition_rows(self, batches: list[int]) -> pd.DataFrame:
        """State rows per partition after each of ``batches``, read in one Spark job:
        ``batch``, ``partition``, ``rows`` (partitions holding no row are absent)."""
        chosen = [self._check_batch(b, "batch") for b in batches]
        if not chosen:
            return pd.DataFrame({"batch": [], "partition": [], "rows": []}, dtype="int64")
        with reading(f"the state of batches {_ranges(chosen)} of {self._what()}",
                     self._bad_files(0, max(chosen) + 1)):
            frames = [self._reader(batchId=b).load(str(self.checkpoint))
                      .select(F.lit(b).alias("batch"), F.col("partition_id").alias("partition"))
                      for b in chosen]
            union = reduce(lambda a, b: a.unionByName(b), frames)
            counted = union.groupBy("batch", "partition").count().toPandas()
        counted = counted.rename(columns={"count": "rows"})
        return counted.astype("int64").sort_values(["batch", "partition"], ignore_index=True)

    def change_counts(self, from_batch: int, to_batch: int) -> pd.DataFrame:
        """How many changes of each kind batches ``from_batch..to_batch`` made, in one Spark
        job: ``batch``, ``change`` (``put``, ``delete``, ...), ``records``.

        Raises:
            UnsupportedRead: where ``changes`` would (join sides, timers, a RocksDB store
                written without changelog checkpointing).
        """
        frame = self.changes_frame(from_batch, to_batch)
        with reading(f"the change feed of batches {from_batch}..{to_batch} of {self._what()}",
                     self._bad_files(from_batch + 1, to_batch + 1, deltas_only=True)):
            counted = frame.groupBy("batch", "change").count().toPandas()
        counted = counted.rename(columns={"count": "records"}).astype(
            {"batch": "int64", "records": "int64"})
        return counted.sort_values(["batch", "change"], ignore_index=True)

    # --- change feed ---------------------------------------------------------------------
    def _check_range(self, from_batch: object, to_batch: object) -> tuple[int, int]:
        first, last = batch_span(from_batch, to_batch)
        last = self._check_batch(last, "to_batch")
        if first > last:
            raise BadArgument("from_batch", from_batch, f"a batch id <= to_batch ({last})")
        self._check_batch(first, "from_batch")
        return first, last

    def _require_deltas(self, first: int, last: int) -> None:
        """Every partition has the delta files of versions first + 1 .. last + 1 (a batch's
        changes are in the delta of the version it wrote); else say why not."""
        files = state_files(self.checkpoint.path, self.operator_id, self.part.store)
        versions = range(first + 1, last + 2)
        deltas = set(zip(files.loc[files["kind"] == "delta", "partition"],
                         files.loc[files["kind"] == "delta", "version"], strict=True))
        partitions = sorted(set(files["partition"]))
        missing = [(p, v) for p in partitions for v in versions if (p, v) not in deltas]
        if not missing:
            return
        gone = sorted({v for _, v in missing})
        snapshots = set(files.loc[files["kind"] == "snapshot", "version"])
        if files.attrs.get("providers") == ["rocksdb"] and (
                not deltas or set(gone) <= snapshots):
            raise limits.no_delta_files(self.part.store, self.operator_id, _ranges(gone),
                                        str(self.checkpoint))
        partition, version = missing[0]
        folder = self.checkpoint.store_dir(self.operator_id, partition, self.part.store)
        raise CheckpointError(
            f"cannot read the change feed of batches {first}..{last} of {self._what()}: the "
            f"delta file of version {version} (batch {version - 1}) of partition {partition} is "
            f"missing from {str(folder)!r}; versions missing: {_ranges(gone)}")

    def changes_frame(self, from_batch: int, to_batch: int | None = None) -> DataFrame:
        """The change feed of batches ``from_batch..to_batch`` (inclusive; to the last
        committed when None), flattened, as a Spark DataFrame."""
        self._refuse_changes()
        return self._changes_frame(*self._check_range(from_batch, to_batch))

    def _refuse_changes(self) -> None:
        limit = self.part.changes_limit()
        if limit is not None:
            raise limit

    def _changes_frame(self, first: int, last: int) -> DataFrame:
        self._require_deltas(first, last)
        with reading(f"the change feed of batches {first}..{last} of {self._what()}",
                     self._bad_files(first + 1, last + 1, deltas_only=True)):
            raw = self._reader(readChangeFeed=True, changeStartBatchId=first,
                               changeEndBatchId=last).load(str(self.checkpoint))
            flat = flatten(raw, self.names)[0]
        change = F.col("change")
        for spark_name, ours in CHANGE_NAMES.items():
            change = F.when(F.col("change") == spark_name, F.lit(ours)).otherwise(change)
        return flat.withColumn("change", change)

    def changes(self, from_batch: int, to_batch: int | None = None) -> pd.DataFrame:
        """Every change batches ``from_batch..to_batch`` made (inclusive; to the last
        committed when None), in order: ``batch``, ``change``, the flattened columns (a
        delete has no value: NA), ``partition``. Integer columns are nullable (``Int64``).

        Raises:
            UnsupportedRead: for a join side, for timers, and for a RocksDB store written
                without changelog checkpointing (each names what works instead).
        """
        self._refuse_changes()
        first, last = self._check_range(from_batch, to_batch)
        frame = self._changes_frame(first, last)
        with reading(f"the change feed of batches {first}..{last} of {self._what()}",
                     self._bad_files(first + 1, last + 1, deltas_only=True)):
            out = to_pandas(frame, nullable_ints=True)
        out = out.sort_values(["batch", "partition"], kind="stable", ignore_index=True)
        return self._attrs(out, from_batch=first, to_batch=last)


class OperatorView:
    """One stateful operator: what Spark's state metadata says of it, and its parts.

    ``snapshot`` and ``changes`` read its only part (or ask which, when it has several:
    a join's sides and stores, transformWithState's variables and timers).
    """

    def __init__(self, checkpoint: Checkpoint, metadata: pd.DataFrame, parts: list[Part],
                 spark: SparkSession | Callable[[], SparkSession]):
        first = metadata.iloc[0]
        self.checkpoint = checkpoint
        self.operator_id = int(first["operator_id"])
        #: Spark's operator name
        self.name = str(first["operator"])
        self.kind = str(first["kind"])
        self.stores = [str(s) for s in metadata["store"]]
        self.partitions = int(first["partitions"])
        self.properties = first["properties"]
        spans = metadata[["min_batch", "max_batch"]].dropna()
        self.batch_span = (int(spans["min_batch"].max()), int(spans["max_batch"].min())) \
            if len(spans) else None
        self.parts = parts
        self._spark = spark

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self.parts)
        return f"OperatorView({self.operator_id}, {self.name}, kind={self.kind}, parts: {names})"

    def state(self, name: str | None = None) -> StateView:
        """The part called ``name`` (a store, join side, state variable or ``timers``); None
        for the operator's only part."""
        names = [p.name for p in self.parts]
        if name is None:
            if len(self.parts) == 1:
                return StateView(self.checkpoint, self.parts[0], self._spark, self.batch_span)
            if self.kind == "transform_with_state" and not self.parts:
                raise limits.store_of_transform_with_state(self.operator_id, [])
            raise BadArgument(
                f"state name (operator {self.operator_id}, {self.name}, has {len(names)} parts)",
                name, names)
        for part in self.parts:
            if name in part.names:
                return StateView(self.checkpoint, part, self._spark, self.batch_span)
        if self.kind == "transform_with_state" and name in self.stores:
            raise limits.store_of_transform_with_state(
                self.operator_id, [p.name for p in self.parts if p.what == "state variable"])
        raise BadArgument(f"state name (operator {self.operator_id}, {self.name})", name, names)

    def snapshot(self, batch: int | None = None, sort: bool = False) -> pd.DataFrame:
        """``state().snapshot(batch, sort)``: the operator's only part."""
        return self.state().snapshot(batch, sort=sort)

    def changes(self, from_batch: int, to_batch: int | None = None) -> pd.DataFrame:
        """``state().changes(from_batch, to_batch)``: the operator's only part."""
        return self.state().changes(from_batch, to_batch)
