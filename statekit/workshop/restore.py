"""Exercises of notebook 04 (restore: Spark's checkpoint first, then statekit's changelog;
restoration time; moving a store without downtime)."""

from __future__ import annotations

from statekit.errors import BadArgument
from statekit.workshop.answers import count, number
from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise, review
from statekit.workshop.verdict import Point

NOTEBOOK = "04_restore"


@exercise("04.1", "Predict, then run: how many records does a compacted restore read?",
          NOTEBOOK, "predict")
def compacted_restore(answer: object, *, raw_records: int, compacted_records: int,
                      rows: int, raw_seconds: float = float("nan"),
                      compacted_seconds: float = float("nan")):
    """``raw_records``/``compacted_records``: what the two restores read; ``rows``: the
    restored store's rows; the seconds, if given, are quoted in the verdict."""
    value = count(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a number of records")]
    timing = ""
    if raw_seconds == raw_seconds and compacted_seconds == compacted_seconds:
        timing = (f"; it took {compacted_seconds:.2f} s instead of {raw_seconds:.2f} s: "
                  f"a restore's time follows the records it reads")
    if value == compacted_records:
        return [Point(True, f"{compacted_records:,} records: Kafka log compaction keeps the "
                            f"latest record per key, so a full restore reads about one "
                            f"record per row of the store ({rows:,} rows) instead of every "
                            f"change ({raw_records:,}){timing}")]
    if value == raw_records:
        return [Point(False, f"{raw_records:,} is every change the raw log holds; the "
                             f"compacted topic keeps only the latest record per key")]
    if value == 0:
        return [Point(False, "0 would leave the store empty: compaction removes old values "
                             "of a key, never its latest one")]
    if value < compacted_records:
        return [Point(False, f"{value:,} is too few: the compacted log still holds the "
                             f"latest record of every key the store holds ({rows:,} rows)")]
    if value < raw_records:
        return [Point(False, f"{value:,} is between the two: compaction keeps exactly one "
                             f"record per key (a running aggregate deletes nothing, so no "
                             f"tombstones either) — count the store's rows")]
    return [Point(False, f"{value:,} is more than the raw log holds ({raw_records:,}); "
                         f"compaction only removes records")]


@exercise("04.2", "Predict, then run: a restart replays only the tail", NOTEBOOK, "predict")
def tail_replay(answer: object, *, tail_records: int, total_records: int, stopped_batch: int):
    """``tail_records``: what the second restore replayed; ``total_records``: the whole log;
    ``stopped_batch``: the batch the first restore stopped at."""
    value = count(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a number of records")]
    if value == tail_records:
        return [Point(True, f"{tail_records:,} records: the store's checkpoint file holds "
                            f"the next offset per partition, so the second restore starts "
                            f"after batch {stopped_batch} and reads only the records of the "
                            f"later batches, not all {total_records:,}")]
    if value == total_records:
        return [Point(False, f"{total_records:,} is the whole changelog: that is a restore "
                             f"into an empty directory. This store has a checkpoint (the "
                             f"next offset to read per partition), written at its last "
                             f"restore")]
    if value == 0:
        return [Point(False, f"0 would be right if the store were at the end of the log; it "
                             f"stopped at batch {stopped_batch}, and later batches wrote "
                             f"more records")]
    return [Point(False, f"{value:,} is not it: count the changelog records of the batches "
                         f"after {stopped_batch}")]


SPARK_RESTART = Choices(
    {"a": "it consumes the store's changelog topic from Kafka, from the beginning, as "
          "Kafka Streams does",
     "b": "each state partition loads the newest snapshot file in the checkpoint at or "
          "before the last committed version and replays the delta files after it; then "
          "the query resumes from the source offsets the checkpoint recorded",
     "c": "it recomputes the state by re-reading the whole input topic from offset 0",
     "d": "a standby replica on another executor is promoted, so nothing is loaded"},
    right="b",
    why={"a": "Spark writes no changelog topic and reads none: the topic in this notebook "
              "is statekit's, shipped from Spark's change feed after each commit, for "
              "statekit's own local stores",
         "b": "right: Spark's durability is its checkpoint folder — offsets and commits "
              "logs, and per operator and partition a delta file per version plus a "
              "snapshot every minDeltasForSnapshot versions (restore_plan shows which "
              "files a restore reads)",
         "c": "the checkpoint's offsets log says where the source stopped; Spark replays "
              "at most the batch that was planned but not committed, never the whole topic",
         "d": "Spark has no standby replicas: a lost task is rescheduled and its state "
              "store is loaded from the checkpoint. statekit's standbys (notebook 5) tail "
              "statekit's changelog topic, for statekit's stores, not Spark's"})


review("04.3", "What does Spark do when a stateful query restarts?", NOTEBOOK, SPARK_RESTART)


#: Exercise 04.4: how many times longer the changelog of the estimate is.
LONGER = 100


@exercise("04.4", "Estimate: the restoration time of a changelog 100 times longer", NOTEBOOK,
          "predict")
def restore_time_estimate(answer: object, *, records: int, seconds: float):
    """``records``/``seconds``: what the cold restore read and how long it took (wall)."""
    value = number(answer)
    if value is None:
        return [Point(False, f"{answer!r} is not a number of seconds")]
    if records <= 0 or seconds <= 0:
        raise BadArgument("measured", (records, seconds),
                          "the cold restore's records and seconds, both > 0")
    rate = records / seconds
    want = LONGER * records / rate
    if abs(value - want) <= 0.1 * want:
        return [Point(True, f"about {want:,.1f} s: {LONGER * records:,} records at the "
                            f"measured {rate:,.0f} records/s. Restoration time follows the "
                            f"records read: watch it (Kafka Streams' restore listener, "
                            f"restore-rate metrics), and keep it short with compaction, "
                            f"checkpointed offsets and standbys")]
    if abs(value - seconds) <= 0.1 * seconds:
        return [Point(False, f"{seconds:.2f} s is this changelog's restore; {LONGER} times "
                             f"the records take about {LONGER} times as long at the same "
                             f"rate")]
    if abs(value - LONGER * rate) <= 0.1 * LONGER * rate:
        return [Point(False, "that is records per second times 100: divide the records by "
                             "the rate")]
    return [Point(False, f"{value:g} s: restoration time ≈ records ÷ restore rate; "
                         f"measure the rate from the cold restore ({records:,} records in "
                         f"{seconds:.2f} s)")]


CUTOVER = Choices(
    {"a": "stop the old store, restore the new one from the changelog, then switch the "
          "queries to it",
     "b": "restore the new store from the changelog while the old one still answers; when "
          "it has caught up, stop the old one, let the new one read the tail, and switch",
     "c": "copy the old store's RocksDB files while it keeps writing, and open the copy",
     "d": "switch first, and let the new store answer from an empty store while it restores"},
    right="b",
    why={"a": "that is the cold move: nothing answers for the whole restore",
         "b": "right: only the tail is read while nothing answers (Kafka Streams' warm-up "
              "replicas; a standby promoted before the old owner stops)",
         "c": "files copied while RocksDB writes are not a consistent store; a checkpoint "
              "(RocksDB's or Spark's) is, but it still needs the changes after it",
         "d": "no downtime on paper, but wrong answers: an empty or half-restored store "
              "answers as if it were the state"})


review("04.5", "Review: which order moves a store without downtime?", NOTEBOOK, CUTOVER)
