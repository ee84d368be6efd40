"""A finished query's checkpoint that a test ships with changelog writers of its own, a fresh
copy of it per test, the "each batch once" check of a shipped topic, and waiting on a
condition. Shared by the changelog's fault tests, the broker-compaction test and the
three-broker cluster's tests."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pandas as pd

import statekit as sk
from statekit.changelog.log import materialize
from statekit.changelog.reader import read_changelog
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
from statekit.kafka.topics import list_topics
from statekit.spark_state.state_reader import StateReader

KEYS = ["player", "window_start", "window_end"]


def finished_checkpoint(spark, kafka, topic: str, folder: Path, name: str) -> Path:
    """The checkpoint of the leaderboard run over ``topic`` in 500-record batches, its
    changelog off (the tests ship it themselves)."""
    checkpoint = folder / "ck"
    query = sk.start_query(topic, GAME_SPEC, spark=spark, kafka=kafka,
                           event_schema=GAME_EVENT_SCHEMA, checkpoint=str(checkpoint),
                           name=name, changelog=False, trigger="available-now",
                           max_offsets_per_trigger=500)
    query.query.awaitTermination(300)
    query.close()
    return checkpoint


def state_copy(spark, finished: Path, folder: Path) -> StateReader:
    """A reader of a copy of ``finished`` in ``folder`` (each test ships a copy of its own)."""
    copy = folder / "ck"
    shutil.copytree(finished, copy)
    return StateReader(spark, str(copy), GAME_SPEC)


def assert_each_batch_once(kafka, state: StateReader, topic: str) -> None:
    """The topic holds each change of each batch exactly once and replays to the state."""
    log = read_changelog(kafka, topic)  # refuses a gap or a repeat
    last = state.batch_range()[1]
    assert len(log) == len(state.changes(0, last)) > 0
    assert not log.records.duplicated(["partition", "batch", "seq"]).any()
    table = materialize(log).sort_values(KEYS, ignore_index=True)
    snapshot = state.snapshot(last)[table.columns].sort_values(KEYS, ignore_index=True)
    pd.testing.assert_frame_equal(table, snapshot, check_dtype=False)
    assert list_topics(kafka)[topic] == state.checkpoint.shuffle_partitions()


def wait_for(condition, seconds: float, what: str, every: float = 0.05):
    """``condition()``'s first true value, asked every ``every`` seconds; fails naming
    ``what`` when it is not true within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(every)
