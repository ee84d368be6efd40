"""What changed between two snapshots of state: keys added, removed and changed, both
values side by side.

``diff(old, new)`` takes two snapshots of the same shape: two batches of one query
(``diff((q, 3), (q, 5))``), the same operator in two checkpoints (before and after a code
change, a repartition, a rewrite: ``diff("/ck/before", "/ck/after")``), or two pandas
frames a ``snapshot()`` gave. A snapshot is named by

- a handle or reader (``start_query``'s and ``attach``'s queries, a processor query,
  ``open_checkpoint``'s ``CheckpointView``, a ``StateView``, a ``StateReader``) or a
  checkpoint path: its last committed batch;
- a pair ``(any of those, batch)``: that batch;
- a pandas frame a ``snapshot()`` returned (its ``attrs`` name the key columns; pass
  ``keys=`` for a frame of your own).

Two state sources are compared inside Spark, in one job: both snapshots are read, joined
by key (a null key meets a null key), and only the keys that differ come back to pandas,
with the count of every kind measured on the way (``Observation``). A key is compared by
its whole value; where a key holds a list (a join side, a list state, the timers), by its
whole list in the store's order. The store partition a key sits in is not compared.

Example:
    >>> d = diff((q, 3), (q, 5))                                         # doctest: +SKIP
    >>> d.counts                                                         # doctest: +SKIP
    added          2
    removed        1
    changed       14
    unchanged    183
    >>> d.frame.head(2)                                                  # doctest: +SKIP
        change player  count_old  count_new
    0    added     p9       <NA>          1
    1  changed     p1          4          6
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, Observation, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from statekit.errors import BadArgument, StatekitError
from statekit.inspect.failures import reading
from statekit.inspect.flatten import to_pandas
from statekit.inspect.lists import ROWS, holds_lists, lists_at
from statekit.inspect.part_names import find_part
from statekit.inspect.part_views import StateView
from statekit.spark_state.checkpoint import Checkpoint
from statekit.spark_state.state_reader import StateReader

#: The kinds of change, in the order ``counts`` and ``frame`` give them.
KINDS = ("added", "removed", "changed", "unchanged")
CHANGE = "change"
#: Suffixes of a value column's two sides in ``StateDiff.frame``.
OLD, NEW = "_old", "_new"
_IN_OLD, _IN_NEW = "__statekit_in_old", "__statekit_in_new"
_ORDER = "__statekit_order"
_NOT_VALUES = ("partition", "batch", "change")


@dataclass(frozen=True)
class StateDiff:
    """What changed between two snapshots.

    Attributes:
        frame: one row per key that differs: ``change`` (``added``, ``removed``,
            ``changed``), the key columns, then each value column twice, ``<name>_old`` and
            ``<name>_new`` (missing on the side that has no such key: null).
        counts: keys of each kind, ``unchanged`` included (a Series indexed by ``KINDS``).
        key_columns, value_columns: the shape both snapshots share (``rows`` is the value
            of a key that holds a list).
        old, new: what each snapshot was (a checkpoint, a part, a batch).
        how: how it was computed: ``"change feed"`` (two batches of one store: the old
            snapshot and Spark's change feed of the batches between), ``"snapshots"`` (two
            snapshots joined by key in Spark) or ``"pandas frames"``.
        batches: the two batches (None for a frame that does not say).
    """

    frame: pd.DataFrame
    counts: pd.Series
    key_columns: list[str]
    value_columns: list[str]
    old: str
    new: str
    how: str
    batches: tuple[int | None, int | None] = field(default=(None, None))

    def __repr__(self) -> str:
        counts = ", ".join(f"{int(self.counts[k]):,} {k}" for k in KINDS)
        return (f"StateDiff({counts} (from the {self.how})\n  old: {self.old}\n"
                f"  new: {self.new})")

    def _repr_html_(self) -> str:
        counts = ", ".join(f"{int(self.counts[k]):,} {k}" for k in KINDS)
        head = self.frame.head(20).to_html(index=False, na_rep="&lt;NA&gt;", escape=True)
        return (f"<p><b>StateDiff</b>: {counts} (from the {self.how})<br>"
                f"old: {_escape(self.old)}<br>new: {_escape(self.new)}</p>{head}")

    def of(self, change: str) -> pd.DataFrame:
        """The rows of one kind (``added``, ``removed`` or ``changed``)."""
        if change not in KINDS[:3]:
            raise BadArgument("change", change, KINDS[:3])
        return self.frame[self.frame[CHANGE] == change].reset_index(drop=True)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --- naming a snapshot -------------------------------------------------------------------
@dataclass(frozen=True)
class _Side:
    """One snapshot read in Spark: its key columns, value columns and how to read it."""

    frame: DataFrame
    key_columns: list[str]
    value_columns: list[str]
    label: str
    batch: int
    reader: StateView | StateReader
    lists: bool = False


def _reader_of(source: object, part: str | None, which: str) -> StateView | StateReader:
    """The reader of one part of ``source`` (a handle, view, reader or checkpoint path)."""
    if isinstance(source, StateView | StateReader):
        if part is not None:
            raise BadArgument("part", part, f"None: {which} is already one part "
                                             f"({type(source).__name__})")
        return source
    state = getattr(source, "state", None)
    if isinstance(state, StateReader):  # start_query's query: its own flattened columns
        if part is not None:
            raise BadArgument("part", part, f"None: {which} (a statekit query) has one store")
        return state
    from statekit.inspect.view import CheckpointView, open_checkpoint

    if isinstance(source, str | os.PathLike | Checkpoint):
        view = open_checkpoint(source)
    elif isinstance(source, CheckpointView):
        view = source
    elif getattr(source, "checkpoint", None) is not None:  # attach's and processor queries
        view = open_checkpoint(source.checkpoint, getattr(source, "spark", None))
    else:
        raise BadArgument(which, type(source).__name__, ACCEPTED)
    parts = view.parts()
    found = parts[0] if part is None and len(parts) == 1 else find_part(parts, part)
    return view.operator(found.operator_id).state(found.name)


ACCEPTED = ("a query handle (start_query, attach, start_processor), a CheckpointView, a "
            "StateView or StateReader, a checkpoint path, a pair (one of those, batch), or a "
            "pandas frame from snapshot()")


def _split(source: object, which: str) -> tuple[object, int | None]:
    if isinstance(source, tuple):
        if len(source) != 2:
            raise BadArgument(which, source, "a pair (source, batch)")
        return source[0], source[1]
    return source, None


def _side(reader: StateView | StateReader, batch: object, which: str) -> _Side:
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
    values = [c for c in frame.columns if c not in keys and c not in _NOT_VALUES]
    return _Side(frame, keys, values, label, number, reader, lists)


# --- the diff -------------------------------------------------------------------------------
def diff(old: object, new: object, *, part: str | None = None,
         keys: Sequence[str] | None = None) -> StateDiff:
    """Keys added, removed and changed from snapshot ``old`` to snapshot ``new``.

    Args:
        old, new: each a query handle, ``CheckpointView``, ``StateView``, ``StateReader``
            or checkpoint path (its last committed batch), a pair ``(one of those, batch)``,
            or a pandas frame from ``snapshot()``.
        part: which part of a query with several (``"<operator_id>/<name>"``, or a name
            only one operator has), the same on both sides.
        keys: the key columns of pandas frames whose ``attrs`` do not name them.

    Raises:
        BadArgument: the snapshots differ in shape (both shapes named), or a source
            statekit cannot read; BatchNotRetained: a batch the checkpoint no longer holds.

    Example:
        >>> old = pd.DataFrame({"player": ["p1", "p2"], "count": [3, 5]})
        >>> new = pd.DataFrame({"player": ["p2", "p3"], "count": [6, 1]})
        >>> d = diff(old, new, keys=["player"])
        >>> d.frame
            change player  count_old  count_new
        0    added     p3       <NA>          1
        1  removed     p1          3       <NA>
        2  changed     p2          5          6
        >>> d.counts.to_dict()
        {'added': 1, 'removed': 1, 'changed': 1, 'unchanged': 0}
    """
    if isinstance(old, pd.DataFrame) or isinstance(new, pd.DataFrame):
        return _pandas_diff(_as_frame(old, part, "old"), _as_frame(new, part, "new"), keys)
    if keys is not None:
        raise BadArgument("keys", keys, "None: a state source names its own key columns "
                                        "(keys= is for pandas frames)")
    (old_source, old_batch), (new_source, new_batch) = _split(old, "old"), _split(new, "new")
    readers = [_reader_of(old_source, part, "old"), _reader_of(new_source, part, "new")]
    for i, (reader, other) in enumerate((readers, readers[::-1])):
        if isinstance(other, StateReader) and isinstance(reader, StateView):
            readers[i] = _as_query_state(reader, other)
    return _spark_diff(_side(readers[0], old_batch, "old"), _side(readers[1], new_batch, "new"))


def _as_query_state(view: StateView, query_state: StateReader) -> StateView | StateReader:
    """``view`` read as a statekit query's state (its aggregates by name, as the query's
    side has them) where its state fits the query's spec; else ``view`` as it is."""
    reader = StateReader(view.spark, view.checkpoint, query_state.spec, view.operator_id)
    try:
        reader.snapshot_frame(view.checkpoint.check_batch(None)).schema  # noqa: B018
    except StatekitError:
        return view
    return reader


def _shape(keys: Sequence[str], values: Sequence[str], types: dict[str, str]) -> str:
    return (f"key ({', '.join(f'{k} {types[k]}' for k in keys)}), value "
            f"({', '.join(f'{v} {types[v]}' for v in values)})")


def _require_same_shape(old: _Side, new: _Side) -> None:
    def types(side: _Side) -> dict[str, str]:
        return {f.name: f.dataType.simpleString() for f in side.frame.schema.fields}

    a, b = types(old), types(new)
    same = (old.key_columns == new.key_columns and old.value_columns == new.value_columns
            and all(a[c] == b[c] for c in (*old.key_columns, *old.value_columns)))
    if not same:
        raise BadArgument(
            "new", new.label,
            f"a snapshot of the same shape as old: old has "
            f"{_shape(old.key_columns, old.value_columns, a)}; new has "
            f"{_shape(new.key_columns, new.value_columns, b)} (to compare anyway, rename or "
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


def _spark_diff(old: _Side, new: _Side) -> StateDiff:
    _require_same_shape(old, new)
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


def _one_store(old: _Side, new: _Side) -> bool:
    """Both sides read the same part of the same checkpoint (two of its batches)."""
    a, b = old.reader, new.reader
    if type(a) is not type(b) or str(a.checkpoint) != str(b.checkpoint):
        return False
    if isinstance(a, StateView):
        return (a.operator_id, a.part.name) == (b.operator_id, b.part.name)
    return a.operator_id == b.operator_id


def _tagged(side: _Side, suffix: str, types: dict[str, DataType],
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


def _feed_diff(old: _Side, new: _Side) -> StateDiff:
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


def _collect(joined: DataFrame, change: Column, old: _Side, new: _Side,
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
    return StateDiff(_ordered(frame, keys), counts, keys, values, old.label, new.label, how,
                     (old.batch, new.batch))


# --- two pandas frames ------------------------------------------------------------------------
def _as_frame(source: object, part: str | None, which: str) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    given, batch = _split(source, which)
    return _reader_of(given, part, which).snapshot(batch)


def _frame_keys(frame: pd.DataFrame, keys: Sequence[str] | None, which: str) -> list[str]:
    if keys is not None:
        chosen = [keys] if isinstance(keys, str) else list(keys)
    elif "key_columns" in frame.attrs:
        chosen = list(frame.attrs["key_columns"])
    else:
        raise BadArgument("keys", None, f"the key columns of the {which} frame (its attrs do "
                                        f"not name them: it did not come from snapshot()); "
                                        f"its columns: {list(frame.columns)}")
    missing = [k for k in chosen if k not in frame.columns]
    if missing or not chosen:
        raise BadArgument("keys", keys if keys is not None else chosen,
                          f"columns of the {which} frame: {list(frame.columns)}")
    return chosen


def _label(frame: pd.DataFrame, which: str) -> str:
    attrs = frame.attrs
    if "checkpoint" in attrs:
        name = f" {attrs['name']!r}" if "name" in attrs else ""
        batch = f" batch {attrs['batch']}" if "batch" in attrs else ""
        return f"{which} frame: {attrs['checkpoint']!r}{name}{batch}"
    return f"{which} frame ({len(frame):,} rows)"


def _pandas_diff(old: pd.DataFrame, new: pd.DataFrame,
                 keys: Sequence[str] | None) -> StateDiff:
    key_old, key_new = _frame_keys(old, keys, "old"), _frame_keys(new, keys, "new")
    values_old = [c for c in old.columns if c not in key_old and c not in _NOT_VALUES]
    values_new = [c for c in new.columns if c not in key_new and c not in _NOT_VALUES]
    if key_old != key_new or values_old != values_new:
        def shape(frame: pd.DataFrame, k: list[str], v: list[str]) -> str:
            return _shape(k, v, {c: str(frame[c].dtype) for c in (*k, *v)})

        raise BadArgument("new", _label(new, "new"),
                          f"a snapshot of the same shape as old: old has "
                          f"{shape(old, key_old, values_old)}; new has "
                          f"{shape(new, key_new, values_new)}")
    keys_, values = key_old, values_old
    if old.duplicated(keys_).any() or new.duplicated(keys_).any():  # keys holding lists
        a, b, values = _lists(old, keys_, values), _lists(new, keys_, values), [ROWS]
    else:
        a, b = old[[*keys_, *values]], new[[*keys_, *values]]
    merged = a.merge(b, on=keys_, how="outer", suffixes=(OLD, NEW), indicator=True)
    same = np.ones(len(merged), dtype=bool)
    for v in values:
        same &= _equal(merged[v + OLD], merged[v + NEW])
    kind = np.select([merged["_merge"] == "right_only", merged["_merge"] == "left_only", ~same],
                     ["added", "removed", "changed"], "unchanged")
    merged.insert(0, CHANGE, kind)
    counts = pd.Series({k: int((kind == k).sum()) for k in KINDS}, dtype="int64")
    frame = merged[merged[CHANGE] != "unchanged"]
    frame = frame[[CHANGE, *keys_, *[v + s for v in values for s in (OLD, NEW)]]].copy()
    for v in values:  # an outer merge turns integers with a missing side into floats
        if v in old and v in new and all(pd.api.types.is_integer_dtype(f[v]) for f in (old, new)):
            for suffix in (OLD, NEW):
                frame[v + suffix] = frame[v + suffix].astype("Int64")
    return StateDiff(_ordered(frame, keys_), counts, keys_, values, _label(old, "old"),
                     _label(new, "new"), "pandas frames",
                     (old.attrs.get("batch"), new.attrs.get("batch")))


def _lists(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    """One row per key of ``frame``: the key columns and ``rows``, the list of the key's
    values (dicts), in the frame's order (a join side's or list state's snapshot)."""
    grouped = frame[[*keys, *values]].groupby(keys, dropna=False, sort=False)[values]
    return grouped.apply(lambda g: g.to_dict("records")).rename(ROWS).reset_index()


def _equal(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Element-wise equality where two missing values are equal too."""
    missing_a, missing_b = _missing(a), _missing(b)
    if a.dtype != object and b.dtype != object:
        try:
            equal = (a == b).fillna(False).to_numpy(dtype=bool)
            return equal | (missing_a & missing_b)
        except TypeError:
            pass
    return np.array([(ma and mb) or (not ma and not mb and _same(x, y))
                     for x, y, ma, mb in zip(a, b, missing_a, missing_b, strict=True)],
                    dtype=bool)


def _missing(series: pd.Series) -> np.ndarray:
    if series.dtype != object:
        return series.isna().to_numpy(dtype=bool)
    return np.array([v is None or v is pd.NA or v is pd.NaT
                     or (isinstance(v, float) and np.isnan(v)) for v in series], dtype=bool)


def _same(x: object, y: object) -> bool:
    """Deep equality where missing values (None, NaN, NA, NaT) equal each other."""
    try:
        return bool(_normal(x) == _normal(y))
    except (TypeError, ValueError):
        return repr(x) == repr(y)


def _normal(value: object) -> object:
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_normal(v) for v in value]
    if value is None or value is pd.NA or value is pd.NaT or (
            isinstance(value, float) and np.isnan(value)):
        return None
    return value


def _ordered(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Added, then removed, then changed; by key within each (where keys sort)."""
    order = pd.Categorical(frame[CHANGE], categories=list(KINDS[:3]), ordered=True)
    frame = frame.assign(**{CHANGE: order})
    try:
        frame = frame.sort_values([CHANGE, *keys], kind="stable", na_position="last")
    except TypeError:  # keys of mixed types: by kind only
        frame = frame.sort_values(CHANGE, kind="stable")
    frame[CHANGE] = frame[CHANGE].astype(str)
    return frame.reset_index(drop=True)
