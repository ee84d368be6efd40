"""Exercises of notebook 01 (what a state store is: versions, placement, the change feed,
what an open iterator holds)."""

from __future__ import annotations

import pandas as pd

from statekit.errors import BadArgument
from statekit.workshop._frames import compare_rows
from statekit.workshop.answers import count
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "01_state_store_basics"
_YES = {"yes", "y", "true", "same"}
_NO = {"no", "n", "false", "different", "spread"}


def yes_or_no(answer: object) -> bool | None:
    """True/False for an answer such as True, "yes", "no"; None when it is neither."""
    if isinstance(answer, bool):
        return answer
    text = str(answer).strip().lower()
    return True if text in _YES else False if text in _NO else None


@exercise("01.1", "One player's windows: one partition?", NOTEBOOK, "predict")
def same_partition(answer: object, *, snapshot: pd.DataFrame | None = None,
                   keys: tuple[str, ...] = ("player",)):
    said = yes_or_no(answer)
    if said is None:
        return [Point(False, f"{answer!r}: answer True (all on one partition) or False")]
    if not isinstance(snapshot, pd.DataFrame) or "partition" not in snapshot.columns:
        raise BadArgument("snapshot", type(snapshot).__name__,
                          "the store's snapshot (query.snapshot()), with its partition column")
    spread = snapshot.groupby(list(keys))["partition"].nunique()
    n_spread, n_keys = int((spread > 1).sum()), len(spread)
    truth = n_spread == 0
    if n_spread:
        key = spread[spread > 1].index[0]
        rows = snapshot[snapshot[keys[0]] == (key if len(keys) == 1 else key[0])]
        where = sorted(int(p) for p in rows["partition"].unique())
        fact = (f"{n_spread} of {n_keys} {keys[0]}s have windows on more than one partition "
                f"(e.g. {key!r} on partitions {where}): Spark places windowed state by "
                "hashing the window and the key together, not by the key alone, nor by "
                "the input topic's partition")
    else:
        fact = (f"all {n_keys} {keys[0]}s have their windows on one partition in this run "
                "(with few windows this can happen by chance: Spark hashes window and key "
                "together)")
    if said == truth:
        return [Point(True, fact)]
    return [Point(False, ("not so: " if said else "in this run they are: ") + fact)]


@exercise("01.2", "Rebuild an old version from the change feed", NOTEBOOK, "build")
def rebuild_version(answer: object, *, expected: pd.DataFrame | None = None,
                    key_columns=None, value_columns=None, batch: int | None = None):
    if not isinstance(expected, pd.DataFrame) or key_columns is None or value_columns is None:
        raise BadArgument("measured", "expected/key_columns/value_columns",
                          "expected=query.snapshot(batch=b), key_columns=spec.key_columns, "
                          "value_columns=spec.value_columns")
    what = "the store" if batch is None else f"the store at batch {batch}"
    points = compare_rows(answer, expected, key_columns, value_columns, what)
    if not all(p.ok for p in points) and isinstance(answer, pd.DataFrame):
        points.append(Point(False, "replay the changes of batches 0 up to and including "
                                   f"{'b' if batch is None else batch} "
                                   "(query.changes(from_batch=0, to_batch=b)) "
                                   "with sk.apply_changes(changes, spec.key_columns, "
                                   "spec.value_columns)"))
    return points


OLD_VERSIONS = Choices(
    {"a": "Kafka Streams can: store.get(key) on the count's key-value store returns any "
          "earlier value",
     "b": "statekit can: snapshot(batch) reads the version Spark committed at that batch, "
          "as long as the checkpoint still retains it",
     "c": "neither: a state store only ever holds its latest version"},
    right="b",
    why={"a": "a Kafka Streams key-value store (what count() or aggregate() materializes) "
              "keeps only the latest value per key; an old value must be rebuilt by "
              "replaying the changelog up to that point (versioned stores, KIP-889, keep "
              "history by timestamp, not by batch, and are a different store type)",
         "b": "right: Spark writes each committed version of the state to its checkpoint "
              "(snapshot and delta files per partition) and keeps the last "
              "spark.sql.streaming.minBatchesToRetain of them (100 by default); the State "
              "Data Source reads any of those, and statekit's snapshot(batch) uses it",
         "c": "Spark keeps committed versions in its checkpoint; statekit's snapshot(b) "
              "reads them"})


review("01.3", "The leaderboard three batches ago", NOTEBOOK, OLD_VERSIONS)


IN_MEMORY = Choices(
    {"a": "yes: a state store is an in-memory hash map, so the state must fit in RAM",
     "b": "no: RocksDB keeps it on local disk, with memory for caches and write buffers",
     "c": "no: it lives in the Kafka topic and the processor reads it from there"},
    right="b",
    why={"a": "in-memory stores exist, but the default (in Kafka Streams) and the provider "
              "used here (in Spark) is RocksDB, which spills to local disk",
         "b": "right: Kafka Streams' default store is RocksDB; here Spark's RocksDB state "
              "store provider keeps one RocksDB instance per state partition on the "
              "executor's disk, and uploads each committed version to the checkpoint",
         "c": "the state is local to the processor; a topic (Kafka Streams' changelog, or "
              "the one statekit ships) is a backup to rebuild from, not where reads go"})


review("01.4", "Does a state store keep everything in memory?", NOTEBOOK, IN_MEMORY)


@exercise("01.5", "Predict, then run: what an open iterator still reads", NOTEBOOK, "predict")
def open_iterator_reads(answer: object, *, steps: pd.DataFrame | None = None):
    """``steps``: ``statekit.stores.pinning.iterator_pinning``'s frame; the answer: how many
    entries the iterator, opened before every key was deleted, reads in all."""
    if not isinstance(steps, pd.DataFrame) or "iterator_reads" not in steps.columns:
        raise BadArgument("steps", type(steps).__name__,
                          "the frame iterator_pinning(store, entries) gave")
    value = count(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a count of entries")]
    deleted = steps.iloc[2]
    reads, now = int(deleted["iterator_reads"]), int(deleted["store_entries"])
    pinned = int(deleted["pinned_bytes"])
    if value == reads:
        return [Point(True, f"{reads:,}: every entry of the version it opened on, though a new "
                            f"read finds {now}. RocksDB keeps that version's files "
                            f"({pinned:,} bytes here) on disk until the iterator is closed")]
    if value == now:
        return [Point(False, f"{now} is what a new read sees; an iterator reads the store as "
                             f"it was when it was opened, deletes and compactions after that "
                             f"do not reach it")]
    if value == 1:
        return [Point(False, "1 is the entry read before the deletes; the iterator goes on "
                             "reading the version it was opened on")]
    return [Point(False, f"{value:,}: the iterator was opened on a store of {reads:,} "
                         f"entries, and reads that version")]
