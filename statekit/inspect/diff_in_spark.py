"""``statekit.diff`` inside Spark: two snapshots compared in one Spark job.

Two batches of one store: the old snapshot joined with each key's last change in Spark's
change feed of the batches between (one store read, not two). Anything else: both snapshots
read and joined by key (a null key meets a null key). Either way only the keys that differ
come back to pandas, every kind counted on the way (``Observation``). A key holding a list (a
join side, a list state, the timers) is compared by its whole list, in the store's order;
a value holding a map, as JSON (Spark cannot compare maps).

Example:
    >>> d = spark_diff(side(view, 3, "old"), side(view, 5, "new"))       # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import reduce

import pandas as pd
from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from statekit.errors import BadArgument, StatekitError
from statekit.inspect.diff_result import (
    CHANGE,
    KINDS,
    NEW,
    NOT_VALUES,
    OLD,
    StateDiff,
    ordered,
    shape_text,
)
from statekit.inspect.failures import reading
from statekit.inspect.flatten import to_pandas
from statekit.inspect.lists import holds_lists, lists_at
from statekit.inspect.part_views import StateView
from statekit.spark_state.state_reader import StateReader

_IN_OLD, _IN_NEW = "__statekit_in_old", "__statekit_in_new"
_ORDER = "__statekit_order"


@dataclass(frozen=True)
class Side:
    """One snapshot read in Spark: its key columns, value columns and how to read it."""

    frame: DataFrame
    key_columns: list[str]
    value_columns: list[str]
    label: str
    batch: int
    reader: StateView | StateReader
    lists: bool = False


def side(reader: StateView | StateReader, batch: object, which: str) -> Side:
    number = reader.checkpoint.check_batch(batch, f"{which} batch")
    lists = isinstance(reader, StateView) and holds_lists(reader.part)
    if isinstance(reader, StateReader):
        frame = reader.snapshot_frame(number)
        keys = list(reader.spec.key_columns)
        label = f"{str(reader.checkpoint)!r} batch {number}"
    else:
        frame = (lists_at(reader, number).drop("__statekit_key") if lists
                 else reader.snapshot_frame(number))
        keys = reader.key_columns
        label = f"{reader.label} batch {number}"
    values = [c for c in frame.columns if c not in keys and c not in NOT_VALUES]
    return Side(frame, keys, values, label, number, reader, lists)


def _require_sameshape_text(old: Side, new: Side) -> None:
    def types(side: Side) -> dict[str, str]:
        return {f.name: f.dataType.simpleString() for f in side.frame.schema.fields}

    a, b = types(old), types(new)
    same = (old.key_columns == new.key_columns and old.value_columns == new.value_columns
            and all(a[c] == b[c] for c in (*old.key_columns, *old.value_columns)))
    if not same:
        raise BadArgument(
            "new", new.label,
            f"a snapshot of the same shape as old: old has "
            f"{shape_text(old.key_columns, old.value_columns, a)}; new has "
            f"{shape_text(new.key_columns, new.value_columns, b)} (to compare anyway, rename or "
            f"drop columns in the two snapshot() frames and diff those)")


def _has_map(data_type: DataType) -> bool:
    if isinstance(data_type, MapType):
        return True
    if isinstance(data_type, ArrayType):
        return _has_map(data_type.elementType)
    if isinstance(data_type, StructType):
        return any(_has_map(f.dataType) for f in data_type.fields)
    return False


def _comparable(name: str, data_type: DataType) -> Column:
    """A column Spark can test for equality (maps are not: compared as JSON)."""
    column = F.col(f"`{name}`")
    return F.to_json(F.struct(column)) if _has_map(data_type) else column


def spark_diff(old: Side, new: Side) -> StateDiff:
    _require_sameshape_text(old, new)
    if _one_store(old, new) and old.batch < new.batch and not old.lists:
        with contextlib.suppress(StatekitError):  # no change feed here: compare snapshots
            return _feed_diff(old, new)
    keys, values = old.key_columns, old.value_columns
    types = {f.name: f.dataType for f in old.frame.schema.fields}
    a, b = _tagged(old, OLD, types), _tagged(new, NEW, types)
    joined = a.join(b, _same_key(len(keys)), "full_outer")
    change = (F.when(F.col(_IN_OLD).isNull(), F.lit("added"))
              .when(F.col(_IN_NEW).isNull(), F.lit("removed"))
              .when(_differs(len(values)), F.lit("changed")).otherwise(F.lit("unchanged")))
    return _collect(joined, change, old, new, "snapshots")


def _one_store(old: Side, new: Side) -> bool:
    """Both sides read the same part of the same checkpoint (two of its batches)."""
    a, b = old.reader, new.reader
    if type(a) is not type(b) or str(a.checkpoint) != str(b.checkpoint):
        return False
    if isinstance(a, StateView):
        return (a.operator_id, a.part.name) == (b.operator_id, b.part.name)
    return a.operator_id == b.operator_id


def _tagged(side: Side, suffix: str, types: dict[str, DataType],
            frame: DataFrame | None = None) -> DataFrame:
    """``side``'s keys as ``o0..``/``n0..``, values as ``<name><suffix>`` and, to compare,
    ``oc0..``/``nc0..``; a column saying the key is present on this side."""
    tag = "o" if suffix == OLD else "n"
    frame = side.frame if frame is None else frame
    return frame.select(
        *[F.col(f"`{k}`").alias(f"{tag}{i}") for i, k in enumerate(side.key_columns)],
        *[F.col(f"`{v}`").alias(v + suffix) for v in side.value_columns],
        *[_comparable(v, types[v]).alias(f"{tag}c{i}")
          for i, v in enumerate(side.value_columns)],
        *([F.col(CHANGE)] if CHANGE in frame.columns else []),
        F.lit(True).alias(_IN_OLD if suffix == OLD else _IN_NEW))


def _same_key(width: int) -> Column:
    """Old key equals new key, column by column (a null meets a null)."""
    return reduce(Column.__and__, [F.col(f"o{i}").eqNullSafe(F.col(f"n{i}"))
                                   for i in range(width)])


def _differs(width: int) -> Column:
    return reduce(Column.__or__, [~F.col(f"oc{i}").eqNullSafe(F.col(f"nc{i}"))
                                  for i in range(width)], F.lit(False))


def _feed_diff(old: Side, new: Side) -> StateDiff:
    """Two batches of one store: the old snapshot against each key's last change in Spark's
    change feed of the batches between (one store read, not two)."""
    keys, values = old.key_columns, old.value_columns
    types = {f.name: f.dataType for f in old.frame.schema.fields}
    feed = old.reader.changes_frame(old.batch + 1, new.batch).withColumn(
        _ORDER, F.monotonically_increasing_id())  # the feed's order within a partition
    latest = Window.partitionBy(*[F.col(f"`{k}`") for k in keys]).orderBy(
        F.col("batch").desc(), F.col(_ORDER).desc())
    last = (feed.withColumn(_ORDER, F.row_number().over(latest))
            .where(F.col(_ORDER) == 1))
    a, b = _tagged(old, OLD, types), _tagged(new, NEW, types, frame=last)
    joined = a.join(b, _same_key(len(keys)), "full_outer")
    deleted = F.col(CHANGE) == "delete"
    change = (F.when(F.col(_IN_NEW).isNull(), F.lit("unchanged"))  # untouched since old
              .when(F.col(_IN_OLD).isNull() & deleted, F.lit(None))  # came and went
              .when(F.col(_IN_OLD).isNull(), F.lit("added"))
              .when(deleted, F.lit("removed"))
              .when(_differs(len(values)), F.lit("changed")).otherwise(F.lit("unchanged")))
    new_values = {v + NEW: F.when(F.col(_IN_NEW).isNull(), F.col(v + OLD))
                  .otherwise(F.col(v + NEW)) for v in values}
    return _collect(joined.withColumns(new_values), change, old, new, "change feed")


def _collect(joined: DataFrame, change: Column, old: Side, new: Side,
             how: str) -> StateDiff:
    """The rows of ``joined`` whose ``change`` is not ``unchanged``, into pandas; every kind
    counted on the way (one Spark job)."""
    keys, values = old.key_columns, old.value_columns
    observation = Observation("statekit_diff")
    labelled = joined.select(
        change.alias(CHANGE),
        *[F.when(F.col(_IN_OLD).isNull(), F.col(f"n{i}")).otherwise(F.col(f"o{i}")).alias(k)
          for i, k in enumerate(keys)],
        *[F.col(v + suffix) for v in values for suffix in (OLD, NEW)])
    counted = labelled.observe(observation, *[
        F.sum((F.col(CHANGE) == kind).cast("long")).alias(kind) for kind in KINDS])
    with reading(f"the state of {old.label} and {new.label}"):
        frame = to_pandas(counted.where(F.col(CHANGE) != "unchanged"), nullable_ints=True)
        metrics = observation.get
    counts = pd.Series({k: int(metrics.get(k) or 0) for k in KINDS}, dtype="int64")
    return StateDiff(ordered(frame, keys), counts, keys, values, old.label, new.label, how,
                     (old.batch, new.batch))
