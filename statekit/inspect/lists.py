"""Parts whose key holds a list of rows, as one entry per key: a join side, a list state,
transformWithState's timers.

A stream-stream join buffers, per join key, every input row of a side it may still
match; a transformWithState ``ListState`` keeps, per grouping key, a list of elements, and
its timers are, per grouping key, the times registered. Spark's ``statestore`` reader
gives each one row per element. Kafka Streams would keep
either as one store entry per key whose value is the list, and that is the shape a
changelog and a served answer need: one record per key, the key's **whole list** after
the batch, so that compaction keeps the latest list and a ``get`` answers with all of it.

``list_changes_frame`` builds those records for batches ``first..last`` in Spark:

1. **which keys each batch touched.** Spark's reader has no change feed for a join side,
   but it has one for the side's two stores (``<side>-keyToNumValues``: how many rows a
   join key holds; ``<side>-keyWithIndexToValue``: each row, by key and index); a list
   state's own change feed says which keys it ``put``, ``append``\\ ed or deleted.
2. **their lists after that batch**: the part's snapshot at the batch, only the keys
   touched, each key's rows gathered in the order the store holds them.
3. a touched key with no rows left is a ``delete`` (a tombstone in the changelog).

Each batch that touched a key costs one read of the part's snapshot (only the touched keys
kept); a span of more than ``SCAN_EVERY_BATCH_UP_TO`` batches first reads which batches
touched one (``scanned_batches``: one small Spark job), so that a query running empty
batches (a processing-time trigger, timers, a TTL) is not scanned once per empty batch;
the rest is one Spark plan, run when the frame is read. A changelog writer builds
the same records, record for record, from plain reads without Spark's joins and groupings
(``statekit.changelog.list_records``); this frame is their reference in Spark.

Timers have no change feed at all (``inspect.limits.timer_changes``), nor stores that have
one: ``snapshot_diff_frame`` compares each key's list after the last batch of a round with
its list before the round's first (two snapshot reads a round, however many batches: a
writer that keeps up ships each batch; one that is behind, the round's net change).

Example:
    >>> frame = list_changes_frame(side_view, [counts_view, rows_view], 3, 5)  # doctest: +SKIP
    >>> frame.columns                                                          # doctest: +SKIP
    ['batch', 'partition', 'change', 'player', 'rows']
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statekit.inspect.operators import Part
from statekit.inspect.part_names import part_id
from statekit.inspect.part_views import StateView
from statekit.spark_state.read_errors import reading
from statekit.spark_state.times import iso_times

#: The value column of a list-valued part's entry: the key's rows, in the store's order.
ROWS = "rows"
#: A span of up to this many batches scans the snapshot after each of them; a longer one
#: reads first which batches touched a key (``touched_batches``) and scans after those only
SCAN_EVERY_BATCH_UP_TO = 2
_KEY, _POS = "__statekit_key", "__statekit_pos"


def join_side_stores(side: str) -> tuple[str, str]:
    """The two Spark stores that hold a join side: its counts per key and its rows."""
    return f"{side}-keyToNumValues", f"{side}-keyWithIndexToValue"


def holds_lists(part: Part) -> bool:
    """True where a key of ``part`` holds a list of rows (a join side, a list state, the
    timers)."""
    return part.what in ("join side", "timers") or part.variable_type == "ListState"


def diffs_snapshots(part: Part) -> bool:
    """True where the changes of ``part`` come from comparing snapshots: Spark's reader
    gives its store no change feed and it has no stores that have one (the timers)."""
    return part.what == "timers"


def _quoted(name: str) -> Column:
    return F.col(f"`{name}`")


def _key_text(keys: Sequence[str]) -> Column:
    """One text per key (nulls included, so a null key still meets itself in a join)."""
    return F.to_json(F.struct(*[_quoted(k) for k in keys]))


def touched_keys(changed: Sequence[StateView], keys: Sequence[str], first: int,
                 last: int) -> DataFrame:
    """``batch``, ``partition`` and the key columns of every key the change feeds of
    ``changed`` name in batches ``first..last``, once each."""
    frames = [view.changes_frame(first, last).select("batch", "partition",
                                                     *[_quoted(k) for k in keys])
              for view in changed]
    union = reduce(lambda a, b: a.unionByName(b), frames)
    return union.distinct()


def touched_batches(changed: Sequence[StateView], first: int, last: int) -> list[int]:
    """The batches of ``first..last`` whose change feeds (of ``changed``) name a key: the
    only ones after which a list part's snapshot needs scanning (one Spark job)."""
    batches = touched_keys(changed, (), first, last).select("batch").distinct()
    with reading(f"which of batches {first}..{last} touched a key of "
                 f"{part_id(changed[0].part)!r}"):
        rows = batches.collect()
    return sorted(int(row["batch"]) for row in rows)


def scanned_batches(changed: Sequence[StateView], first: int, last: int) -> Sequence[int]:
    """The batches of ``first..last`` after which a list part's snapshot is scanned: each of
    them in a span of up to ``SCAN_EVERY_BATCH_UP_TO`` batches, else those that touched a key
    (``touched_batches``)."""
    if last - first < SCAN_EVERY_BATCH_UP_TO:
        return range(first, last + 1)
    return touched_batches(changed, first, last)


def list_changes_frame(entries: StateView, changed: Sequence[StateView], first: int,
                       last: int) -> DataFrame:
    """One record per key each of batches ``first..last`` touched: ``batch``,
    ``partition``, ``change`` (``put``, or ``delete`` when the key holds no row after the
    batch), the key columns, and ``rows`` (the key's rows after the batch: an array of
    structs of the value columns; null on a delete).

    ``entries`` reads the part's rows (one per element); ``changed`` are the views whose
    change feeds say which keys a batch touched (the part itself for a list state).
    """
    keys = entries.key_columns
    touched = touched_keys(changed, keys, first, last).withColumn(_KEY, _key_text(keys))
    lists = []
    # a batch that touched no key adds no record: no scan after it (none at all: one, empty)
    for batch in scanned_batches(changed, first, last) or [first]:
        keys_then = touched.where(F.col("batch") == batch)
        rows = lists_at(entries, batch, only=keys_then.select(_KEY)).select(_KEY, ROWS)
        lists.append(keys_then.join(rows, _KEY, "left"))
    return _records(reduce(lambda a, b: a.unionByName(b), lists), keys)


def _records(union: DataFrame, keys: Sequence[str]) -> DataFrame:
    change = F.when(F.col(ROWS).isNull(), F.lit("delete")).otherwise(F.lit("put"))
    return union.select("batch", "partition", change.alias("change"),
                        *[_quoted(k) for k in keys], ROWS)


def lists_at(entries: StateView, batch: int, only: DataFrame | None = None) -> DataFrame:
    """``_KEY``, ``partition``, the key columns and ``rows`` (in the store's order) of every
    key the part holds after ``batch`` (none before batch 0); only the keys of ``only``'s
    ``_KEY`` when given."""
    keys, values = entries.key_columns, entries.value_columns
    frame = entries.snapshot_frame(max(batch, 0))
    if batch < 0:
        frame = frame.where(F.lit(False))
    frame = (frame.withColumn(_POS, F.monotonically_increasing_id())  # the store's order
             .withColumn(_KEY, _key_text(keys)))
    if only is not None:
        frame = frame.join(only, _KEY, "left_semi")
    held = frame.groupBy(_KEY).agg(
        F.first("partition").alias("partition"), *[F.first(_quoted(k)).alias(k) for k in keys],
        F.sort_array(F.collect_list(F.struct(_POS, *[_quoted(v) for v in values]))).alias(ROWS))
    return held.withColumn(ROWS, F.transform(ROWS, lambda row: row.dropFields(_POS)))


def snapshot_diff_frame(entries: StateView, first: int, last: int) -> DataFrame:
    """``list_changes_frame``'s records for a part without change feeds, over batches
    ``first..last`` taken together: every key whose list after ``last`` differs from its
    list after ``first - 1`` (a key gone is a ``delete``), stamped batch ``last``.

    Two snapshot reads, however many batches: a writer that keeps up ships each batch
    exactly; one that is behind ships the round's net change, as a Kafka Streams store
    with a record cache sends only a key's latest value at a commit.
    """
    keys = entries.key_columns
    old = lists_at(entries, first - 1).alias("old")
    new = lists_at(entries, last).alias("new")
    both = old.join(new, F.col(f"old.{_KEY}") == F.col(f"new.{_KEY}"), "full_outer")
    differ = both.where(~F.col(f"old.{ROWS}").eqNullSafe(F.col(f"new.{ROWS}")))
    return _records(differ.select(
        F.lit(last).cast("long").alias("batch"),
        F.coalesce(F.col("new.partition"), F.col("old.partition")).alias("partition"),
        *[F.coalesce(F.col(f"new.`{k}`"), F.col(f"old.`{k}`")).alias(k) for k in keys],
        F.col(f"new.{ROWS}").alias(ROWS)), keys)


def list_rows(entries: pd.DataFrame, key_columns: Sequence[str],
              list_columns: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """List-valued entries (the key columns, ``rows``, maybe ``partition``) as one row per
    element, as the part's snapshot has them: the key columns, each row's columns (times
    from ISO text to timestamps, as JSON carried them), then ``partition`` if given.

    Example:
        >>> entries = pd.DataFrame({"player": ["p1", "p2"], "partition": [0, 2],
        ...                         "rows": [[{"item": "a"}, {"item": "b"}], [{"item": "c"}]]})
        >>> list_rows(entries, ["player"], [("item", "string")])
          player item  partition
        0     p1    a          0
        1     p1    b          0
        2     p2    c          2
    """
    keys, names = list(key_columns), [name for name, _ in list_columns]
    tail = ["partition"] if "partition" in entries.columns else []
    held = entries[entries[ROWS].map(lambda rows: isinstance(rows, list | np.ndarray))]
    exploded = held[[*keys, *tail, ROWS]].explode(ROWS, ignore_index=True)
    exploded = exploded[exploded[ROWS].notna()].reset_index(drop=True)
    fields = pd.DataFrame.from_records(list(exploded[ROWS]), columns=names)
    for name, spark_type in list_columns:
        if spark_type.startswith("timestamp") and fields[name].dtype == object:
            fields[name] = iso_times(fields[name])
    out = pd.concat([exploded[keys].reset_index(drop=True), fields,
                     exploded[tail].reset_index(drop=True)], axis=1)
    return out
