"""Nested state rows as plain columns: the naming rule, and the trip to pandas.

Spark's State Data Source gives each state row as nested structs (``key``, ``value``,
and for transformWithState ``list_element``, ``user_map_key``, ``user_map_value``...).
``flat_columns`` turns every leaf field into one plain column:

- **the name is the path below its top-level column, dots become underscores**:
  ``key.window.start`` → ``window_start``, ``key.player`` → ``player``,
  ``value.count`` → ``count``; a top-level column that is not a struct keeps its name
  (``expiration_timestamp_ms``);
- **collisions, in column order, first come first named**: a later column whose name is
  taken gets its top-level column as a prefix (``value.k`` after ``key.k`` → ``value_k``),
  and if that is taken too, a number (``value_count_2``); ``partition``, ``batch`` and
  ``change`` are statekit's own columns, so a field with one of those names is prefixed too.
  Snapshots and change feeds of one store so have the same names;
- fields of type ``void`` (Spark's placeholder value of a deduplication) carry nothing and
  are left out; arrays and maps are not flattened: they arrive as Python lists and dicts
  (a struct map key becomes a tuple of its fields).

With ``names`` (a ``statekit.inspect.plan_names.PartNames``: what the query's plan calls a
field of the key or value struct) a field is named as the person wrote it instead
(``key.field0`` of a join → ``origin``, ``value.count`` of ``count(*) AS n`` → ``n``); those
names are given first, the others follow the rule above, so a value field named like a
renamed key field gets the prefix (``value_origin``). A ``Derived`` column (an average:
``avg_delay``) is not a field of Spark's state: statekit computes it from the two buffer
fields before them, ``sum / count`` (null when ``count`` is 0, as Spark's ``Average``
does), and only where they are a double and a long.

``to_pandas`` collects through Arrow with timestamps as naive UTC.

Example:
    >>> from pyspark.sql.types import IntegerType, LongType, StringType, TimestampType
    >>> def struct(**fields): return StructType([StructField(n, t) for n, t in fields.items()])
    >>> window = struct(start=TimestampType(), end=TimestampType())
    >>> value = StructType([StructField("k", StringType()), StructField("count", LongType()),
    ...                     StructField("count", LongType())])
    >>> schema = struct(key=struct(window=window, k=StringType()), value=value,
    ...                 partition_id=IntegerType())
    >>> [(c.name, c.field) for c in flat_columns(schema)]       # doctest: +NORMALIZE_WHITESPACE
    [('window_start', 'key.window.start'), ('window_end', 'key.window.end'), ('k', 'key.k'),
     ('value_k', 'value.k'), ('count', 'value.count'), ('value_count', 'value.count')]
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    NullType,
    StructField,
    StructType,
)

from statekit.inspect.plan_names import PartNames
from statekit.spark_state.state_reader import arrow_to_pandas

#: Columns of Spark's reader that statekit renames rather than flattens.
SPARK_COLUMNS = {"partition_id": "partition", "batch_id": "batch", "change_type": "change"}
#: statekit's own column names: a state field with one of these names gets a prefix.
RESERVED = frozenset(SPARK_COLUMNS.values())
#: Top-level columns that hold (part of) the key of a state row; the others hold its value.
KEY_SOURCES = ("key", "user_map_key")


@dataclass(frozen=True)
class FlatColumn:
    """One plain column: where its values come from in Spark's nested row."""

    #: the plain column's name
    name: str
    #: the top-level column of Spark's reader it comes from (``key``, ``value``, ...)
    source: str
    #: the field names below ``source`` (empty for a top-level column that is not a struct)
    path: tuple[str, ...]
    #: the same path with duplicate field names made unique (how statekit reaches the field)
    access: tuple[str, ...]
    data_type: DataType
    #: for a column statekit derives (not a field of Spark's state): the two columns it
    #: divides, an average's ``sum`` and ``count`` buffer fields
    inputs: tuple[FlatColumn, ...] = ()

    @property
    def field(self) -> str:
        """Spark's dotted path of the field (``key.window.start``); for a derived column,
        what statekit computes (``value.sum / value.count``)."""
        if self.inputs:
            return " / ".join(c.field for c in self.inputs)
        return ".".join((self.source, *self.path))

    @property
    def role(self) -> str:
        """``"key"`` when the column is part of the state's key, else ``"value"``."""
        return "key" if self.source in KEY_SOURCES else "value"


def unique_fields(data_type: DataType) -> DataType:
    """``data_type`` with repeated struct field names made unique (``sum``, ``sum`` →
    ``sum``, ``sum_2``), at every depth. Arrow refuses repeated names; Spark's aggregation
    buffers repeat them (``count, sum`` of an avg beside a count and a sum).

    Example:
        >>> from pyspark.sql.types import DoubleType, LongType
        >>> buffer = StructType([StructField("count", LongType()), StructField("sum", LongType()),
        ...                      StructField("sum", DoubleType())])
        >>> unique_fields(buffer).fieldNames()
        ['count', 'sum', 'sum_2']
    """
    if isinstance(data_type, StructType):
        seen: set[str] = set()
        fields = []
        for field in data_type.fields:
            name, n = field.name, 2
            while name in seen:
                name, n = f"{field.name}_{n}", n + 1
            seen.add(name)
            fields.append(StructField(name, unique_fields(field.dataType), field.nullable,
                                      field.metadata))
        return StructType(fields)
    if isinstance(data_type, ArrayType):
        return ArrayType(unique_fields(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, MapType):
        return MapType(unique_fields(data_type.keyType), unique_fields(data_type.valueType),
                       data_type.valueContainsNull)
    return data_type


def _leaves(source: str, data_type: DataType, access_type: DataType,
            path: tuple[str, ...] = (), access: tuple[str, ...] = ()
            ) -> Iterable[tuple[str, tuple[str, ...], tuple[str, ...], DataType]]:
    if isinstance(data_type, NullType):
        return
    if isinstance(data_type, StructType):
        for field, unique in zip(data_type.fields, access_type.fields, strict=True):
            yield from _leaves(source, field.dataType, unique.dataType, (*path, field.name),
                               (*access, unique.name))
        return
    yield source, path, access, data_type


@dataclass(frozen=True)
class _Leaf:
    source: str
    path: tuple[str, ...]
    access: tuple[str, ...]
    data_type: DataType
    #: its position among the fields of its top-level struct (-1: not in a struct)
    at: int
    #: the person's name of that field, or None
    own: str | None


def _leaves_of(schema: StructType, names: PartNames | None) -> list[_Leaf]:
    out = []
    for top in schema.fields:
        if top.name in SPARK_COLUMNS:
            continue
        given = {"key": names.key, "value": names.value}.get(top.name, ()) if names else ()
        unique = unique_fields(top.dataType)
        fields = unique.fieldNames() if isinstance(unique, StructType) else []
        for source, path, access, data_type in _leaves(top.name, top.dataType, unique):
            at = fields.index(access[0]) if access else -1
            own = given[at] if 0 <= at < len(given) else None
            out.append(_Leaf(source, path, access, data_type, at, own))
    return out


def _derived(leaves: list[_Leaf], names: PartNames | None) -> dict[int, tuple[str, int]]:
    """Leaf index of each average's ``sum`` → (derived column's name, its ``count``'s leaf
    index), where they are a double and a long field of the value."""
    out = {}
    for spec in names.derived if names else ():
        found = [next((i for i, leaf in enumerate(leaves) if leaf.source == "value"
                       and len(leaf.path) == 1 and leaf.at == at), None)
                 for at in (spec.sum, spec.count)]
        if None in found:
            continue
        dividend, divisor = found
        if isinstance(leaves[dividend].data_type, DoubleType) and \
                isinstance(leaves[divisor].data_type, LongType):
            out[dividend] = (spec.name, divisor)
    return out


def _claim(base: str, source: str, prefixed: bool, taken: set[str]) -> str:
    """``base``, or where it is taken, ``<source>_<base>`` (if ``prefixed``), then a number."""
    name = base if base not in taken else (f"{source}_{base}" if prefixed else base)
    candidate, n = name, 2
    while name in taken:
        name, n = f"{candidate}_{n}", n + 1
    taken.add(name)
    return name


def flat_columns(schema: StructType, names: PartNames | None = None) -> list[FlatColumn]:
    """Every leaf of the state columns of ``schema`` (Spark's reader's), named by the rule
    of this module; Spark's ``partition_id``, ``batch_id`` and ``change_type`` are left out.
    ``names``: the person's names of the key's and value's fields and the columns derived
    from them (None: Spark's names only); a derived column comes before its buffer fields.
    """
    leaves = _leaves_of(schema, names)
    derived = _derived(leaves, names)
    taken = set(RESERVED)
    # the person's names are given first: the derived columns', then the fields'
    derived_names = {i: _claim(name, "value", False, taken) for i, (name, _) in derived.items()}
    chosen = {i: _claim("_".join((leaf.own, *leaf.path[1:])), leaf.source, True, taken)
              for i, leaf in enumerate(leaves) if leaf.own is not None}
    for i, leaf in enumerate(leaves):
        if i not in chosen:
            chosen[i] = _claim("_".join(leaf.path) if leaf.path else leaf.source,
                               leaf.source, bool(leaf.path), taken)
    made = [FlatColumn(chosen[i], leaf.source, leaf.path, leaf.access, leaf.data_type)
            for i, leaf in enumerate(leaves)]
    columns = []
    for i, column in enumerate(made):
        if i in derived:
            columns.append(FlatColumn(derived_names[i], "value", (), (), DoubleType(),
                                      (column, made[derived[i][1]])))
        columns.append(column)
    return columns


def spark_columns(frame: DataFrame, columns: Sequence[FlatColumn]) -> list[Column]:
    """Spark columns selecting ``columns`` from ``frame`` (Spark's reader's), aliased."""
    schema = frame.schema
    casts: dict[str, Column] = {}

    def field(column: FlatColumn) -> Column:
        if column.source not in casts:
            data_type = schema[column.source].dataType
            unique = unique_fields(data_type)
            casts[column.source] = (F.col(column.source) if unique == data_type
                                    else F.col(column.source).cast(unique))
        expr = casts[column.source]
        for name in column.access:
            expr = expr.getField(name)
        return expr

    out = []
    for column in columns:
        if column.inputs:  # an average: sum / count, null when count is 0 (as Spark's)
            dividend, divisor = (field(c) for c in column.inputs)
            expr = F.when(divisor != 0, dividend / divisor)
        else:
            expr = field(column)
        out.append(expr.alias(column.name))
    return out


def flatten(frame: DataFrame, names: PartNames | None = None
            ) -> tuple[DataFrame, list[FlatColumn]]:
    """``frame`` (Spark's reader's rows) with every state field a plain column: Spark's
    ``batch_id`` and ``change_type`` first (as ``batch``, ``change``), then the flattened
    columns (named with ``names`` where given), then ``partition``; and the flattened
    columns' descriptions."""
    columns = flat_columns(frame.schema, names)
    lead = [F.col(spark).alias(ours) for spark, ours in SPARK_COLUMNS.items()
            if spark in frame.columns and spark != "partition_id"]
    tail = [F.col("partition_id").alias("partition")] if "partition_id" in frame.columns else []
    return frame.select(*lead, *spark_columns(frame, columns), *tail), columns


# --- to pandas --------------------------------------------------------------------------
def _plain(value: object, arrow_type: pa.DataType) -> object:
    """A value from ``to_pylist`` with maps as dicts and timestamps as naive UTC, at any
    depth."""
    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return {_hashable(_plain(k, arrow_type.key_type)): _plain(v, arrow_type.item_type)
                for k, v in value}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_plain(v, arrow_type.value_type) for v in value]
    if pa.types.is_struct(arrow_type):
        return {arrow_type.field(i).name: _plain(value[arrow_type.field(i).name],
                                                 arrow_type.field(i).type)
                for i in range(arrow_type.num_fields)}
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _hashable(value: object) -> object:
    """A map key as a dict key: a struct (dict) becomes the tuple of its field values."""
    if isinstance(value, dict):
        return tuple(_hashable(v) for v in value.values())
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def to_pandas(frame: DataFrame, nullable_ints: bool = False) -> pd.DataFrame:
    """Collect ``frame`` through Arrow: timestamps as naive UTC, arrays as lists, maps as
    dicts; ``nullable_ints`` maps integer columns to ``Int64`` (a change feed's deletes
    have no value)."""
    table = frame.toArrow()
    names = table.schema.names  # arrow_to_pandas may free ``table`` (self_destruct)
    nested = [f.name for f in table.schema
              if pa.types.is_map(f.type) or pa.types.is_list(f.type)
              or pa.types.is_large_list(f.type) or pa.types.is_struct(f.type)]
    plain = {name: [_plain(v, table.schema.field(name).type)
                    for v in table.column(name).to_pylist()] for name in nested}
    flat = table.drop_columns(nested) if nested else table
    out = arrow_to_pandas(flat, nullable_ints)
    for name in nested:
        out[name] = pd.Series(plain[name], index=out.index, dtype=object)
    return out[names]
