"""Exercises of notebook 00 (setup and the map of the workshop)."""

from __future__ import annotations

from statekit.workshop.choices import Choices
from statekit.workshop.registry import exercise

WHERE_STATE_LIVES = Choices(
    {"a": "in a Kafka changelog topic that Spark writes after each batch",
     "b": "in state files of its checkpoint directory, per operator, partition and version",
     "c": "in the executors' memory only: a restart starts from empty state"},
    right="b",
    why={"a": "Spark writes no changelog topic: statekit ships one from Spark's change feed "
              "after each commit, for the Kafka Streams ideas (restore, standbys, serving)",
         "b": "right: Spark's durability is its checkpoint (RocksDB or HDFS-backed state "
              "files, snapshots and deltas per partition and version)",
         "c": "executors keep state in RocksDB (or memory) between batches, but every "
              "commit also reaches the checkpoint, and a restart reloads it from there"})


@exercise("00.1", "Where does Spark keep its state?", "00_index", "review")
def where_state_lives(answer: object):
    return WHERE_STATE_LIVES.judge(answer)
