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
    {"a": "the deduplication: it keeps a row for every event it has seen",
     "b": "the per-minute count: no watermark ever removes one of its rows, and each new "
          "minute of event time brings new keys",
     "c": "neither: Spark evicts every operator's state once the watermark passes"},
    right="b",
    why={"a": "dropDuplicatesWithinWatermark keeps a key until the watermark passes its "
              "event time: its rows removed per batch are above zero",
         "b": "right: a groupBy without a time window keeps each key forever, and a key "
              "with a minute in it never repeats: the state grows with event time, the "
              "classic state store that fills a disk (a window, or a TTL, bounds it)",
         "c": "the watermark evicts only what a time window or a within-watermark "
              "deduplication ties to event time; a plain groupBy's rows stay"})

review("12.2", "Which operator's state only grows?", NOTEBOOK, GROWTH)


def _dedup_part(live) -> str:
    states = live.states()
    found = states[states["kind"] == "deduplication"]
    if found.empty:
        raise BadArgument("live", repr(live), "the attached job of notebook 12 (it has a "
                                              "deduplication)")
    return str(found["part"].iloc[0])


@exercise("12.3", "The keys the watermark let go", NOTEBOOK, "build")
def evicted_keys(answer: object, *, live=None):
    """``answer``: the key columns of every row the deduplication part deleted in batch
    ``EVICTION_BATCH``; ``live``: the ``AttachedQuery`` of the notebook's job."""
    if live is None or not hasattr(live, "changes"):
        raise BadArgument("live", type(live).__name__, "the AttachedQuery of the notebook "
                                                        "(live=live)")
    part = _dedup_part(live)
    changes = live.changes(part, EVICTION_BATCH, EVICTION_BATCH)
    keys = list(live.state(part).key_columns)
    expected = changes.loc[changes["change"] == "delete", keys].reset_index(drop=True)
    if isinstance(answer, pd.DataFrame) and "change" in answer.columns and \
            set(answer["change"].dropna()) - {"delete"}:
        return [Point(False, f"your table holds {sorted(set(answer['change'].dropna()))} "
                             f"changes: keep the deletes only (a put is a key let in, not "
                             f"one let go)")]
    if isinstance(answer, pd.DataFrame) and "batch" in answer.columns and \
            set(answer["batch"].dropna().astype(int)) - {EVICTION_BATCH}:
        return [Point(False, f"your table has rows of batches "
                             f"{sorted(set(answer['batch'].dropna().astype(int)))}: "
                             f"changes({part!r}, {EVICTION_BATCH}, {EVICTION_BATCH}) gives "
                             f"batch {EVICTION_BATCH} alone")]
    points = compare_rows(answer, expected, keys, [],
                          f"keys deleted from part {part} in batch {EVICTION_BATCH}")
    if all(p.ok for p in points):
        points.append(Point(True, f"{len(expected):,} keys left the deduplication in batch "
                                  f"{EVICTION_BATCH}: the watermark passed their event time, "
                                  f"so a copy arriving now is late and dropped anyway"))
    return points
