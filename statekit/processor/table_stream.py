"""A keyed topic read as a table: a tombstone (a null value) deletes its key's state.

Kafka Streams reads a KTable's source topic this way: a record with a null value deletes
its key from the table's store, so a producer bounds the store by saying when a key is
gone. Spark has no table source: a streaming aggregation reads events, and a tombstone,
whose value is no JSON object, is a malformed event there (counted, kept aside, and the
key's row stays). A ``transformWithState`` processor can delete, if it sees the tombstone:

- ``table_stream`` reads one or more topics with the Kafka key as a column (``key``),
  the JSON value's fields, ``deleted`` (the value is null) and ``record_time`` (the
  record's Kafka timestamp, to order a key's rows within a batch);
- ``KeyedTotals`` keeps events and total score per key and day in the key-value store
  ``totals``, and deletes every entry of the key on a tombstone;
- ``keyed_totals_reference`` is the same in pandas, from the records.

Example:
    >>> frame = table_stream(spark, ["users"], broker, key="user",            # doctest: +SKIP
    ...                      event_schema="user string, score long, ts timestamp")
    >>> q = start_processor(frame, KeyedTotals(), keys="user", spark=spark)   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from statekit.errors import BadArgument
from statekit.processor.layout import key_value_store
from statekit.processor.processor import Processor

#: the columns ``table_stream`` adds beside the key and the value's fields
DELETED, RECORD_TIME = "deleted", "record_time"


def table_stream(spark, topics: Sequence[str] | str, kafka, *, key: str, event_schema: str,
                 max_offsets_per_trigger: int | None = None):
    """A streaming DataFrame over ``topics`` (unioned): ``key`` (the Kafka key as text), the
    fields of ``event_schema`` but ``key`` (from the JSON value; null in a tombstone),
    ``deleted`` and ``record_time`` (see the module doc). Pass it to ``start_processor``.

    Raises:
        BadArgument: no topic; ``key`` not a field of ``event_schema``.
    """
    from pyspark.sql import functions as F

    from statekit.query.parsing import event_struct
    from statekit.query.source import kafka_stream

    names = [topics] if isinstance(topics, str) else list(topics)
    if not names or not all(isinstance(t, str) and t for t in names):
        raise BadArgument("topics", topics, "one or more topic names")
    struct = event_struct(event_schema)
    if key not in struct.fieldNames():
        raise BadArgument("key", key, f"a field of the event schema: {struct.fieldNames()}")
    frame = None
    for topic in names:
        raw = kafka_stream(spark, topic, kafka, max_offsets_per_trigger=max_offsets_per_trigger)
        event = F.from_json(F.col("value").cast("string"), struct)
        rows = raw.select(F.col("key").cast("string").alias(key),
                          *[event[n].alias(n) for n in struct.fieldNames() if n != key],
                          F.col("value").isNull().alias(DELETED),
                          F.col("timestamp").alias(RECORD_TIME))
        frame = rows if frame is None else frame.unionByName(rows)
    return frame


class KeyedTotals(Processor):
    """Events and total score per grouping key and day (store ``totals``); a tombstone row
    (``deleted``) deletes every entry of the key. A key's rows apply in ``record_time``
    order, so a tombstone removes what came before it and a later event starts afresh.
    Output: the keys a batch deleted (``key``, ``entries`` removed)."""

    output = "key string, entries bigint"

    def __init__(self, time_column: str = "ts", score_column: str = "score"):
        self.time_column, self.score_column = time_column, score_column

    def stores(self):
        return [key_value_store("totals", key="day date",
                                value="events bigint, score bigint, last_seen timestamp")]

    def init(self, stores):
        self.totals = stores["totals"]

    def process(self, key, rows):
        removed = []
        for row in rows.sort_values(RECORD_TIME, kind="stable").itertuples(index=False):
            if getattr(row, DELETED):
                gone = [day for day, _ in self.totals.all()]
                for day in gone:
                    self.totals.delete(day)
                removed.append((key, len(gone)))
                continue
            at = pd.Timestamp(getattr(row, self.time_column))
            old = self.totals.get(at.date()) or {"events": 0, "score": 0, "last_seen": at}
            score = getattr(row, self.score_column)
            self.totals.put(at.date(), (old["events"] + 1,
                                        old["score"] + (0 if pd.isna(score) else int(score)),
                                        max(old["last_seen"], at)))
        return pd.DataFrame(removed, columns=["key", "entries"])


def keyed_totals_reference(records: pd.DataFrame, events: pd.DataFrame, key: str = "user",
                           time_column: str = "ts") -> pd.DataFrame:
    """``KeyedTotals``' store after all of ``records`` (Kafka ``key``, ``value``), in pandas:
    ``events`` are the parsed values of the non-null records, in the same order. A key's
    entries count only the events after its last tombstone. Columns: ``key``, ``day``,
    ``events``, ``score``, ``last_seen``."""
    gone = records["value"].isna().to_numpy()
    last_tombstone = (pd.Series(range(len(records)))[gone].groupby(
        records["key"][gone].to_numpy()).max())
    positions = pd.Series(range(len(records)))[~gone].to_numpy()
    frame = events.reset_index(drop=True).assign(position=positions)
    cut = frame[key].map(last_tombstone).fillna(-1).to_numpy()
    alive = frame[frame["position"] > cut]
    stamps = pd.to_datetime(alive[time_column])
    out = (alive.assign(day=stamps.dt.date, ts_=stamps)
           .groupby([key, "day"], as_index=False)
           .agg(events=("score", "size"), score=("score", "sum"), last_seen=("ts_", "max")))
    return out.sort_values([key, "day"], ignore_index=True)
