"""A read-only view of any Spark 4 Structured Streaming checkpoint, in pandas.

``open_checkpoint(path)`` needs nothing but the checkpoint: no statekit query, no spec.
At a glance it gives the query id, each batch (trigger time, watermark, committed or
not), each source's offsets per batch, the commits, the stateful operators and their
stores (Spark's ``state-metadata``), the state schema of each part, the retained batches
and the Spark state files; then each operator's state, part by part, as snapshots and
change feeds (``statekit.inspect.part_views``).

Opening and reading change no file of the checkpoint: the logs are read as files, the
state through Spark's ``state-metadata`` and ``statestore`` readers, which load state into
temporary local stores outside the checkpoint (the tests hash the whole tree before and
after every read).

Example:
    >>> view = open_checkpoint("/path/to/checkpoint")                    # doctest: +SKIP
    >>> view.query_id, view.retained_batches()                           # doctest: +SKIP
    >>> view.operators()                                                 # doctest: +SKIP
       operator_id           operator         kind                store  partitions ...
    0            0  symmetricHashJoin         join  left-keyToNumValues           4 ...
    >>> view.states()[["operator_id", "what", "name", "change_feed"]]    # doctest: +SKIP
    >>> view.state("left").snapshot()                                    # doctest: +SKIP
    >>> view.operator(1).changes(0, 3)                                   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os

import pandas as pd
from pyspark.sql import SparkSession

from statekit.errors import BadArgument, CheckpointError, CorruptFile
from statekit.inspect import logs
from statekit.inspect.describe import Description, describe
from statekit.inspect.failures import reading
from statekit.inspect.operators import Part, kind_of, operator_parts
from statekit.inspect.part_views import OperatorView, StateView
from statekit.spark.connect import is_connect
from statekit.spark.object_store import is_object_store
from statekit.spark.s3a_settings import ready_for
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.integrity import is_stateful
from statekit.spark_state.spark_files import COLUMNS as FILE_COLUMNS
from statekit.spark_state.spark_files import state_files
from statekit.validate import whole_number

OPERATOR_COLUMNS = ["operator_id", "operator", "kind", "store", "partitions", "min_batch",
                    "max_batch", "properties"]
STATE_COLUMNS = ["operator_id", "operator", "kind", "what", "name", "store", "variable_type",
                 "ttl", "change_feed"]
SCHEMA_COLUMNS = ["operator_id", "what", "name", "key_type", "value_type", "key_columns",
                  "value_columns"]


class CheckpointView:
    """Everything a Spark streaming checkpoint holds, read-only, as pandas frames.

    Args:
        checkpoint: the query's ``checkpointLocation`` (a path or a ``Checkpoint``).
        spark: the session to read state with; None uses the active session, or starts
            statekit's (``statekit.spark_session()``) when state is first read. The logs
            (batches, sources, commits) are read without Spark.

    Spark's state metadata is read once, on first use; open a new view to see a running
    query's later batches in it (the logs are read anew on every call).
    """

    def __init__(self, checkpoint: str | os.PathLike | Checkpoint,
                 spark: SparkSession | None = None):
        self.checkpoint = Checkpoint(checkpoint)
        if spark is not None and not (isinstance(spark, SparkSession) or is_connect(spark)):
            raise BadArgument("spark", type(spark).__name__,
                              "a SparkSession (classic or Spark Connect), or None")
        self._spark = spark
        self._operators: pd.DataFrame | None = None

    @property
    def path(self) -> str:
        return str(self.checkpoint)

    def __repr__(self) -> str:
        return f"CheckpointView({self.path!r}, last_batch={self.checkpoint.last_batch})"

    @property
    def spark(self) -> SparkSession:
        """The session state is read with (resolved on first use)."""
        if self._spark is None:
            remote = is_object_store(self.checkpoint.path)
            active = SparkSession.getActiveSession()
            if active is None:
                from statekit.spark.session import spark_session

                active = spark_session(s3a=remote)
            if remote:
                ready_for(active, self.checkpoint.path)
            self._spark = active
        return self._spark

    # --- the logs --------------------------------------------------------------------------
    @property
    def query_id(self) -> str:
        """The query's id (its ``metadata`` file; the same across restarts)."""
        return self.checkpoint.query_id()

    def batches(self) -> pd.DataFrame:
        """One row per batch of the offset log: trigger time, watermark, committed or not
        (``statekit.inspect.logs.batches``)."""
        return logs.batches(self.checkpoint)

    def sources(self) -> pd.DataFrame:
        """Each source's offset per batch (``statekit.inspect.logs.sources``)."""
        return logs.sources(self.checkpoint)

    def commits(self) -> pd.DataFrame:
        """One row per committed batch (``statekit.inspect.logs.commits``)."""
        return logs.commits(self.checkpoint)

    def retained_batches(self) -> list[int]:
        """The committed batches the checkpoint still holds (Spark keeps the commit log and
        the state versions for the same ``minBatchesToRetain`` batches)."""
        return self.checkpoint.committed_batches()

    # --- operators ---------------------------------------------------------------------
    def _check_operator_metadata(self) -> list[int]:
        ids = self.checkpoint.operator_ids()
        for operator_id in ids:
            files = self.checkpoint.operator_metadata_files(operator_id)
            if not files:
                raise CheckpointError(
                    f"operator {operator_id} of checkpoint {self.path!r} has state but no "
                    f"operator metadata (no {str(self.checkpoint.operator_dir(operator_id))!r}"
                    f"/_metadata/metadata): the checkpoint was written by Spark 3.x or older, "
                    f"which does not write it. Run the query once on Spark 4 (it adds the "
                    f"metadata), or read the state with spark.read.format('statestore') and "
                    f"the option operatorId")
            for path in files:
                self.checkpoint.operator_metadata(path)  # names a damaged or newer one
        return ids

    def operators(self) -> pd.DataFrame:
        """One row per stateful operator and store (Spark's ``state-metadata``).

        Columns: ``operator_id``, ``operator`` (Spark's name), ``kind`` (statekit's:
        ``aggregation``, ``session_window``, ``deduplication``, ``join``, ``group_state``,
        ``transform_with_state``, ``other``), ``store``, ``partitions``, ``min_batch`` and
        ``max_batch`` (the batches whose state Spark says it holds), ``properties`` (the
        operator's properties as a dict: transformWithState's time mode and state
        variables; None for the others). Empty for a stateless query.
        """
        if self._operators is None:
            self.checkpoint.require_checkpoint()
            ids = self._check_operator_metadata()
            if not ids:
                frame = pd.DataFrame(columns=OPERATOR_COLUMNS)
            else:
                with reading(f"the state metadata of checkpoint {self.path!r}"):
                    raw = self.spark.read.format("state-metadata").load(self.path).toPandas()
                frame = raw.rename(columns={
                    "operatorId": "operator_id", "operatorName": "operator",
                    "stateStoreName": "store", "numPartitions": "partitions",
                    "minBatchId": "min_batch", "maxBatchId": "max_batch",
                    "operatorProperties": "properties"})
                frame["kind"] = [kind_of(name) for name in frame["operator"]]
                frame["properties"] = [json.loads(p) if isinstance(p, str) and p else None
                                       for p in frame["properties"]]
                frame = frame.astype({"operator_id": "int64", "partitions": "int64",
                                      "min_batch": "Int64", "max_batch": "Int64"})
                frame = frame.sort_values(["operator_id", "store"], ignore_index=True)
            self._operators = frame[OPERATOR_COLUMNS]
        return self._operators.copy()

    def _parts(self, metadata: pd.DataFrame) -> list[Part]:
        first = metadata.iloc[0]
        return operator_parts(int(first["operator_id"]), str(first["operator"]),
                              list(metadata["store"]), first["properties"])

    def operator(self, operator_id: int = 0) -> OperatorView:
        """One stateful operator (its id as ``operators()`` lists it)."""
        operators = self.operators()
        if operators.empty:
            if is_stateful(self.checkpoint) and not self.checkpoint.has_state():
                self.checkpoint.require_state()  # names the state folder that is gone
            raise CheckpointError(
                f"checkpoint {self.path!r} has no stateful operator (no state folder "
                f"{str(self.checkpoint.state_dir)!r}): the query keeps no state, so there is "
                f"nothing to read but its logs (batches(), sources(), commits()); if it did "
                f"keep state, its state folder was deleted")
        ids = sorted(set(operators["operator_id"]))
        number = whole_number(operator_id, "operator_id",
                              accepted=f"one of the checkpoint's operator ids: {ids}")
        if number not in ids:
            raise BadArgument("operator_id", operator_id,
                              f"one of the checkpoint's operator ids: {ids}")
        metadata = operators[operators["operator_id"] == number].reset_index(drop=True)
        return OperatorView(self.checkpoint, metadata, self._parts(metadata), self._session)

    def _session(self) -> SparkSession:
        return self.spark

    def state(self, name: str | None = None, operator_id: int = 0) -> StateView:
        """One part of one operator's state: ``operator(operator_id).state(name)``."""
        return self.operator(operator_id).state(name)

    def parts(self) -> list[Part]:
        """Every readable part of every operator, in operator order (what ``states()``
        lists, as ``statekit.inspect.operators.Part``)."""
        operators = self.operators()
        return [part for _, metadata in operators.groupby("operator_id", sort=True)
                for part in self._parts(metadata.reset_index(drop=True))]

    def states(self) -> pd.DataFrame:
        """Every readable part of every operator: ``operator_id``, ``operator``, ``kind``,
        ``what`` (``store``, ``join side``, ``state variable``, ``timers``), ``name`` (what
        ``state(name, operator_id)`` takes), ``store`` (the Spark store holding it),
        ``variable_type`` and ``ttl`` (transformWithState), ``change_feed`` (False where
        Spark's reader cannot give one for this kind of part)."""
        rows = [(part.operator_id, part.operator, part.kind, part.what, part.name, part.store,
                 part.variable_type, part.ttl, part.changes_limit() is None)
                for part in self.parts()]
        return pd.DataFrame(rows, columns=STATE_COLUMNS).astype(
            {"operator_id": "int64", "change_feed": bool})

    def schema(self) -> pd.DataFrame:
        """The state schema of every part, as Spark's ``statestore`` reader gives it:
        ``key_type`` and ``value_type`` (Spark's types as text; the value of a part with
        several value columns, such as a map state, is shown as one struct of them),
        and the flattened ``key_columns`` and ``value_columns`` that snapshots have."""
        rows = []
        for _, part in self.states().iterrows():
            view = self.state(part["name"], part["operator_id"])
            schema = view.spark_schema
            values = [f for f in schema.fields if f.name not in ("key", "partition_id")]
            if len(values) == 1 and values[0].name == "value":
                value_type = values[0].dataType.simpleString()
            else:
                value_type = "struct<" + ",".join(
                    f"{f.name}:{f.dataType.simpleString()}" for f in values) + ">"
            rows.append((int(part["operator_id"]), part["what"], part["name"],
                         schema["key"].dataType.simpleString(), value_type,
                         view.key_columns, view.value_columns))
        return pd.DataFrame(rows, columns=SCHEMA_COLUMNS)

    def state_files(self) -> pd.DataFrame:
        """Spark's state files of every operator and store, one row per file:
        ``operator_id``, ``store``, then ``statekit.spark_state.spark_files.state_files``'s
        columns (``partition``, ``version``, ``batch``, ``kind`` snapshot/delta, ``file``,
        ``bytes``, ``modified``, ``unique_id``), for the RocksDB and HDFS-backed providers
        alike."""
        frames = []
        operators = self.operators()
        for operator_id, store in operators[["operator_id", "store"]].itertuples(index=False):
            files = state_files(self.checkpoint.path, int(operator_id), str(store))
            files.insert(0, "store", str(store))
            files.insert(0, "operator_id", int(operator_id))
            frames.append(files)
        if not frames:
            return pd.DataFrame(columns=["operator_id", "store", *FILE_COLUMNS])
        return pd.concat(frames, ignore_index=True)

    # --- a summary for a person -----------------------------------------------------------
    def describe(self, batches: int = 10, stall_batches: int = 3, growth_batches: int = 3,
                 skew_share: float = 0.5, skew_min_rows: int = 20, commit_share: float = 0.5,
                 progress: object = None) -> Description:
        """One table, the data of the charts, and flags for what looks wrong: a stalled
        watermark, state that only grows, one partition holding most of the state, state
        commits that dominate their batches (that one needs ``progress``). Each flag, and
        what it is computed from, is described in ``statekit.inspect.describe``; draw the
        charts with ``statekit.charts.inspect.describe_chart(description)``.

        Example:
            >>> d = open_checkpoint("/tmp/ck").describe()               # doctest: +SKIP
            >>> d.flag_names, d.table[["operator_id", "rows", "largest_share"]]  # doctest: +SKIP
        """
        return describe(self, batches=batches, stall_batches=stall_batches,
                        growth_batches=growth_batches, skew_share=skew_share,
                        skew_min_rows=skew_min_rows, commit_share=commit_share,
                        progress=progress)


def open_checkpoint(path: str | os.PathLike | Checkpoint,
                    spark: SparkSession | None = None) -> CheckpointView:
    """A read-only view of the Spark 4 streaming checkpoint at ``path`` (any query's).

    A damaged log file does not stop it (``describe()`` then names every damaged file; a read
    that needs one names it).

    Raises:
        CheckpointError: ``path`` is not a Spark streaming checkpoint (named), or its offset
            log was written by a newer Spark than Spark 4.

    Example:
        >>> open_checkpoint("/nowhere")
        Traceback (most recent call last):
        ...
        statekit.errors.CheckpointError: checkpoint '/nowhere' does not exist or is not a \
directory
    """
    view = CheckpointView(path, spark)
    view.checkpoint.require_checkpoint()
    batches = view.checkpoint.offset_batches()
    if batches:
        with contextlib.suppress(CorruptFile):
            view.checkpoint.offset_log(batches[-1])
    return view
