"""A list-valued part's changelog records, assembled in Arrow from rows Spark reads plainly.

A part whose key holds a list of rows (a join side, a list state: ``statekit.inspect.lists``)
ships one record per key a batch touched, the key's whole list after the batch (value
``{"rows": [...]}``; a key left empty is a delete). ``inspect.lists.list_changes_frame``
builds those records in Spark with joins and a grouping: several shuffles, seconds each
however few keys a batch touched. Here Spark only reads, with no shuffle, so that the read
can be a branch of a shipping round's one Spark job (``statekit.changelog.shared_rounds``):

* ``elements_frame``: the rows of the change feeds that name the keys each batch touched
  (``ELEMENT`` false: batch, partition, the key's JSON) and every row of the part's snapshot
  after each batch (``ELEMENT`` true: also the element's JSON), in the store's order;
* the batches scanned: which batches of a round touched a key at all, read first (one small
  Spark job) when the round covers more than ``SCAN_EVERY_BATCH_UP_TO`` batches, so that a
  query running empty batches (a processing-time trigger, timers, TTL) is not scanned once
  per empty batch (``inspect.lists.scanned_batches``, as ``list_changes_frame`` scans);
* ``assemble``: per batch, each touched key's elements joined into its list, in the order
  the snapshot holds them; the records are those of ``list_changes_frame``, record for
  record (a test compares them).

Example:
    >>> import pyarrow as pa
    >>> read = pa.table({"batch": [3, 3, 3, 3, 3], "partition": [0, 1, 0, 0, 0],
    ...                  "key": [b'{"k":1}', b'{"k":3}', b'{"k":1}', b'{"k":2}', b'{"k":1}'],
    ...                  "value": [None, None, b'{"x":5}', b'{"x":6}', b'{"x":7}'],
    ...                  ELEMENT: [False, False, True, True, True]})
    >>> assemble(read).to_pydict()["value"]    # key 2 not touched; key 3 holds none now
    [b'{"rows":[{"x":5},{"x":7}]}', None]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from statekit.inspect.lists import ROWS, scanned_batches
from statekit.inspect.part_views import StateView

#: The column telling an element row (true) from a touched key's row (false)
ELEMENT = "__statekit_element"
_OPEN, _CLOSE = b'{"' + ROWS.encode() + b'":[', b"]}"


def elements_frame(entries: StateView, changed: Sequence[StateView], first: int, last: int,
                   json_of: Callable[[Sequence[str]], Column]) -> DataFrame:
    """``batch``, ``partition``, ``key`` (JSON bytes), ``value`` (an element's JSON bytes;
    null on a touched key's row) and ``ELEMENT`` for batches ``first..last``: the keys the
    change feeds of ``changed`` name, and the part's rows after each batch that touched one
    (``inspect.lists.scanned_batches``; after each batch when they are few). ``json_of``
    encodes columns as JSON bytes (the writer's encoding of keys and values)."""
    keys, values = entries.key_columns, entries.value_columns
    key = json_of(keys).alias("key")
    scanned = scanned_batches(changed, first, last)
    touched = [view.changes_frame(first, last).select(
        F.col("batch").cast("long").alias("batch"), F.col("partition").cast("int")
        .alias("partition"), key, F.lit(None).cast("binary").alias("value"),
        F.lit(False).alias(ELEMENT)) for view in changed]
    held = [entries.snapshot_frame(batch).select(
        F.lit(batch).cast("long").alias("batch"), F.col("partition").cast("int")
        .alias("partition"), key, json_of(values).alias("value"), F.lit(True).alias(ELEMENT))
        for batch in scanned]
    return reduce(lambda a, b: a.unionByName(b), [*touched, *held])


def assemble(read: pa.Table) -> pa.Table:
    """``elements_frame``'s rows, as read, into records: ``batch``, ``partition``, ``key``,
    ``value`` (``{"rows": [...]}``, the key's elements in the order read; null when the key
    holds none after the batch): one per key each batch touched, at the partition its
    change feed names, in batch order."""
    cols = read.select(["batch", "partition", "key", "value", ELEMENT]).to_pydict()
    touched: dict[int, dict[bytes, int]] = {}
    for batch, partition, key, element in zip(cols["batch"], cols["partition"], cols["key"],
                                              cols[ELEMENT], strict=True):
        if not element:
            touched.setdefault(batch, {}).setdefault(key, partition)
    lists: dict[tuple[int, bytes], list[bytes]] = {}
    for batch, key, value, element in zip(cols["batch"], cols["key"], cols["value"],
                                          cols[ELEMENT], strict=True):
        if element and key in touched.get(batch, ()):
            lists.setdefault((batch, key), []).append(value)
    out: dict[str, list] = {"batch": [], "partition": [], "key": [], "value": []}
    for batch in sorted(touched):
        for key, partition in touched[batch].items():
            rows = lists.get((batch, key))
            out["batch"].append(batch)
            out["partition"].append(partition)
            out["key"].append(key)
            out["value"].append(None if not rows else _OPEN + b",".join(rows) + _CLOSE)
    schema = pa.schema([("batch", pa.int64()), ("partition", pa.int32()),
                        ("key", pa.binary()), ("value", pa.binary())])
    return pa.table(out, schema=schema)
