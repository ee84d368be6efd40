"""Exercises of notebook 12 (your own job, live: attach, parts, changelogs, growth)."""

from __future__ import annotations

import pandas as pd

from statekit.errors import BadArgument
from statekit.workshop._frames import compare_rows
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "12_your_own_job_live"
#: the batch whose evictions exercise 12.3 asks for
EVICTION_BATCH = 4

WRITER = Choices(
    {"a": "Spark: each stateful operator writes its changes to a Kafka topic as the batch "
          "commits, as Kafka Streams does",
     "b": "statekit: after Spark commits a batch, it reads the batch's changes from the "
          "checkpoint with Spark's state reader and ships them in one Kafka transaction",
     "c": "statekit: it adds a sink to your query that writes each change as Spark computes it"},
    right="b",
    why={"a": "Spark writes no Kafka changelog: its state lives in the checkpoint (snapshot "
              "and delta files, or RocksDB's changelog files). In Kafka Streams the store "
              "itself sends each write to its changelog topic",
         "b": "right: the topic trails the query by the time it takes to ship a committed "
              "batch, and a batch is in it exactly once (the ledger and the transaction), "
              "even when the shipping process is killed mid-batch",
         "c": "attaching changes nothing in your plan and writes nothing into your "
              "checkpoint: the query's output equals the unattached run's, row for row"})

review("12.1", "Who writes an attached part's changelog, and when?", NOTEBOOK, WRITER)

GROWTH = Choices(
    {"a": "the deduplication: its key is a hash of the event, with no event time in it",
     "b": "the join: it keeps every top score for the plays that may still follow it",
     "c": "the windowed count: each new 10 minutes of event time brings new keys"},
    right="a",
    why={"a": "right: dropDuplicates keeps a key until the watermark passes the event time "
              "in it, and this key has none, so no id is ever let go: the state grows with "
              "every event, the classic state store that fills a disk (a key with the event "
              "time in it, or dropDuplicatesWithinWatermark, bounds it)",
         "b": "the join's condition bounds a play to 2 minutes after its top score: once the "
              "watermark passes that, no row can match any more and Spark drops it from both "
              "sides: the join's rows removed per batch are above zero",
         "c": "in append mode Spark emits a window's count once the watermark passes the "
              "window's end, and then removes it: new windows come, old ones go"})

review("12.2", "Which operator's state only grows?", NOTEBOOK, GROWTH)


def _buffered_side(live) -> str:
    """The join side that holds the top scores: the right side of notebook 12's join."""
    states = live.states()
    found = states[(states["kind"] == "join") & states["part"].str.endswith("/right")]
    if found.empty:
        raise BadArgument("live", repr(live), "the attached job of notebook 12 (it has a "
                                              "stream-stream join)")
    return str(found["part"].iloc[0])


@exercise("12.3", "The join keys the watermark emptied", NOTEBOOK, "build")
def emptied_keys(answer: object, *, live=None):
    """``answer``: the key columns of every join key whose record in batch
    ``EVICTION_BATCH`` of the buffered side's changelog is a tombstone; ``live``: the
    ``AttachedQuery`` of the notebook's job."""
    if live is None or not hasattr(live, "read_changelog"):
        raise BadArgument("live", type(live).__name__, "the AttachedQuery of the notebook "
                                                        "(live=live)")
    part = _buffered_side(live)
    log = live.read_changelog(part, EVICTION_BATCH, EVICTION_BATCH)
    keys = list(log.key_columns)
    records = log.records
    expected = records.loc[records["tombstone"].astype(bool), keys].reset_index(drop=True)
    if isinstance(answer, pd.DataFrame) and "tombstone" in answer.columns and \
            not answer["tombstone"].fillna(False).astype(bool).all():
        return [Point(False, "your table holds records that are not tombstones: keep those "
                             "whose tombstone is True (a record with rows is a key that still "
                             "holds top scores)")]
    if isinstance(answer, pd.DataFrame) and "batch" in answer.columns and \
            set(answer["batch"].dropna().astype(int)) - {EVICTION_BATCH}:
        return [Point(False, f"your table has records of batches "
                             f"{sorted(set(answer['batch'].dropna().astype(int)))}: "
                             f"read_changelog({part!r}, {EVICTION_BATCH}, {EVICTION_BATCH}) "
                             f"gives batch {EVICTION_BATCH} alone")]
    points = compare_rows(answer, expected, keys, [],
                          f"join keys emptied in batch {EVICTION_BATCH} of {part}")
    if all(p.ok for p in points):
        points.append(Point(True, f"{len(expected):,} join keys lost their last top score in "
                                  f"batch {EVICTION_BATCH}: the watermark passed 2 minutes "
                                  f"after it, so no play to come can match it; the tombstone "
                                  f"lets compaction drop the key from the topic too"))
    return points
