"""A serving instance in process: real broker, real Spark query, real rocksdict stores.

Every answer must equal Spark's own state (``snapshot()``) at the batch it reports.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest

import statekit as sk
from statekit.changelog.reader import read_meta
from statekit.errors import PartitionNotHeld, PartitionUnavailable, PositionNotReached
from statekit.serve.instance import ServingInstance
from statekit.serve.routing.assignment import assign
from statekit.stores.offset_checkpoint import CHECKPOINT_FILE, OffsetCheckpointFile

KEYS = ["window_start", "window_end", "player"]


@pytest.fixture(scope="module")
def served(logged, broker, tmp_path_factory):
    """One instance holding every partition of the logged query's changelog, caught up."""
    query, _ = logged
    instance = ServingInstance("i0", broker, query.changelog_topic,
                               tmp_path_factory.mktemp("serving")).start()
    instance.wait_ready(timeout=120)
    deadline_batch = query.last_batch
    for p in range(3):
        instance.tail.wait_for_batch(p, deadline_batch, timeout=60)
    yield query, instance
    instance.close()


def test_the_metadata_topic_says_what_the_store_holds(logged, broker):
    query, _ = logged
    schema, positions = read_meta(broker, query.changelog_topic)
    assert schema.spec == query.spec
    assert schema.key_types == {"player": "string"} and schema.partitions == 3
    assert sorted(positions) == [0, 1, 2]
    assert {p.batch for p in positions.values()} == {query.last_batch}


def test_every_snapshot_row_is_served_by_key_from_its_own_partition(served):
    query, instance = served
    snapshot = query.snapshot()
    assert len(snapshot) > 0
    for row in snapshot.itertuples(index=False):
        key = {"player": row.player, "window_start": row.window_start}
        assert instance.codec.partition(instance.codec.key(key)) == row.partition
        answer = instance.get(key)
        assert answer.partitions[0].partition == row.partition
        assert answer.batch == query.last_batch
        value = answer.value
        assert (value["count"], value["sum_score"], value["max_score"]) == (
            row.count, row.sum_score, row.max_score)
        by_ms = instance.get({"player": row.player,   # the one-pass path: str keys, int ms
                              "window_start": row.window_start.value // 1_000_000})
        assert by_ms.rows == answer.rows and by_ms.partitions[0].partition == row.partition


def test_all_equals_the_snapshot_and_reports_each_partition(served):
    query, instance = served
    answer = instance.all(partitions=[0, 1, 2])
    frame = answer.to_pandas()
    snapshot = query.snapshot()
    pd.testing.assert_frame_equal(
        frame[snapshot.columns[:-1]].sort_values(KEYS, ignore_index=True),
        snapshot.drop(columns="partition").sort_values(KEYS, ignore_index=True),
        check_dtype=False)
    report = answer.report()
    assert report["partition"].tolist() == [0, 1, 2]
    assert (report["batch"] == query.last_batch).all() and (report["role"] == "active").all()


def test_table_is_the_whole_state_columnar_and_equals_the_snapshot(served):
    query, instance = served
    answer = instance.table(partitions=[0, 1, 2])
    snapshot = query.snapshot()
    schema = answer.table.schema
    assert str(schema.field("window_start").type) == "timestamp[ms]"
    assert str(schema.field("count").type) == "int64"
    frame = answer.to_pandas()
    assert frame.columns[0] == "partition"
    pd.testing.assert_frame_equal(
        frame[snapshot.columns].sort_values(KEYS, ignore_index=True),
        snapshot.sort_values(KEYS, ignore_index=True), check_dtype=False)
    assert answer.report()["partition"].tolist() == [0, 1, 2]
    assert answer.batch == query.last_batch


def test_top_k_equals_pandas_nlargest_per_window(served):
    query, instance = served
    snapshot = query.snapshot()
    for start in sorted(snapshot["window_start"].unique()):
        window = snapshot[snapshot["window_start"] == start]
        expected = window.sort_values(["sum_score", "player"], ascending=[False, True]).head(5)
        answer = instance.top_k(start, 5, "sum_score", partitions=[0, 1, 2])
        assert [r["player"] for r in answer.rows] == expected["player"].tolist()
        assert [r["sum_score"] for r in answer.rows] == expected["sum_score"].tolist()


def test_fetch_reads_a_players_windows_from_the_partitions_that_hold_them(served):
    query, instance = served
    snapshot = query.snapshot()
    player = snapshot["player"].value_counts().index[0]
    mine = snapshot[snapshot["player"] == player].sort_values("window_start")
    answer = instance.fetch({"player": player}, mine["window_start"].min(),
                            mine["window_start"].max())
    got = answer.to_pandas()
    assert got["window_start"].tolist() == mine["window_start"].tolist()
    assert got["sum_score"].tolist() == mine["sum_score"].tolist()
    assert {p.partition for p in answer.partitions} <= set(mine["partition"])


def test_numpy_and_text_keys_and_times_are_accepted(served):
    query, instance = served
    row = query.snapshot().iloc[0]
    ms = np.int64(row["window_start"].value // 1_000_000)
    iso = row["window_start"].strftime("%Y-%m-%dT%H:%M:%SZ")
    a = instance.get({"player": row["player"], "window_start": ms}).value
    b = instance.get(f'{{"player": "{row["player"]}", "window_start": "{iso}"}}').value
    assert a == b and a["count"] == row["count"]


def test_a_position_not_reached_says_the_batch_it_has(served):
    query, instance = served
    row = query.snapshot().iloc[0]
    key = {"player": row["player"], "window_start": row["window_start"]}
    with pytest.raises(PositionNotReached, match=rf"reflects batch {query.last_batch}, the "
                                                 rf"query asked for at least batch "
                                                 rf"{query.last_batch + 50}"):
        instance.get(key, min_batch=query.last_batch + 50, timeout=0.2)
    assert instance.get(key, min_batch=query.last_batch).batch == query.last_batch


def test_a_lookup_does_not_wait_while_the_changelog_loop_holds_its_lock(served):
    """The loop checkpoints (flush + fsync) under its lock every second: a point query
    reads the store and its status without that lock, so it never waits behind it."""
    query, instance = served
    row = query.snapshot().iloc[0]
    key = {"player": row["player"], "window_start": row["window_start"]}
    expected = instance.get(key).value
    answers = []
    with instance.tail._lock:  # as the loop holds it while it checkpoints
        reader = threading.Thread(target=lambda: answers.append(instance.get(key).value))
        reader.start()
        reader.join(timeout=5)
        assert not reader.is_alive(), "the lookup waited for the changelog loop's lock"
    assert answers == [expected] and expected["count"] == row["count"]


def test_an_idle_tail_does_not_rewrite_its_checkpoints(served):
    """Nothing read since the last checkpoint: the loop writes (and fsyncs) nothing."""
    _, instance = served
    tail = instance.tail
    folder = tail.directory / tail.store_name

    def checkpointed() -> dict[int, int]:
        return {p: OffsetCheckpointFile(folder / str(p)).read().get(p, -1) for p in tail.partitions}

    deadline = time.monotonic() + 10  # every record read is checkpointed within a second
    while checkpointed() != {p: s.next_offset for p, s in tail.status().items()}:
        assert time.monotonic() < deadline, (checkpointed(), tail.status())
        time.sleep(0.1)
    before = tail.status()
    stamps = {p: (folder / str(p) / CHECKPOINT_FILE).stat().st_mtime_ns for p in before}
    time.sleep(2.5)  # two rounds of the loop's checkpoints
    after = tail.status()
    idle = [p for p in before if after[p].next_offset == before[p].next_offset]
    assert idle, "every partition read new records: nothing to check"
    assert {p: (folder / str(p) / CHECKPOINT_FILE).stat().st_mtime_ns for p in idle} == {
        p: stamps[p] for p in idle}


def test_bad_keys_are_named(served):
    _, instance = served
    with pytest.raises(sk.BadArgument, match="missing \\['player'\\]"):
        instance.get({"window_start": 0})
    with pytest.raises(sk.BadArgument, match="window_start: 'yesterday'"):
        instance.get({"player": "p01", "window_start": "yesterday"})
    with pytest.raises(sk.BadArgument, match="the start of a 10 minutes window"):
        instance.get({"player": "p01", "window_start": 1})
    with pytest.raises(sk.BadArgument, match="top_k by: 'score'"):
        instance.top_k(0, 3, "score")
    with pytest.raises(sk.BadArgument, match="find_sessions"):
        instance.find_sessions({"player": "p01"}, 0, 1)


def test_partitions_not_held_or_restoring_are_named(logged, broker, tmp_path):
    query, _ = logged
    plan = assign(3, ["i0", "i1", "i2"], standbys=0)
    instance = ServingInstance("i1", broker, query.changelog_topic, tmp_path, plan)
    try:
        assert instance.roles == {1: "active"}
        row = query.snapshot().query("partition == 0").iloc[0]
        with pytest.raises(PartitionNotHeld, match="does not hold partition 0; its owners: i0"):
            instance.get({"player": row["player"], "window_start": row["window_start"]})
        # not started: partition 1 is still restoring
        with pytest.raises(PartitionUnavailable, match=r"partition 1 is unavailable: instance "
                                                       r"'i1' holds it but is restoring, 0 of "
                                                       r"[\d,]+ records"):
            instance.all()
    finally:
        instance.close()


def test_a_query_asking_for_a_batch_waits_through_the_restore(logged, broker, tmp_path):
    """Asked with ``min_batch`` and a timeout, a restoring partition is waited for (the
    restore is on the way to that batch); a timeout that ends first says how far along.
    (Asked without ``min_batch`` it is refused at once: the test above.)"""
    query, _ = logged
    instance = ServingInstance("i0", broker, query.changelog_topic, tmp_path,
                               assign(3, ["i0"], standbys=0))
    try:
        with pytest.raises(PartitionUnavailable, match="holds it but is restoring, 0 of"):
            instance.all(min_batch=query.last_batch, timeout=0.2)  # not started: no progress
        answers = []
        waiting = threading.Thread(target=lambda: answers.append(
            instance.all(min_batch=query.last_batch, timeout=120)))
        waiting.start()
        instance.start()  # the restore begins only now: the query above waits for it
        waiting.join(150)
        assert not waiting.is_alive()
        (answer,) = answers
        assert answer.batch == query.last_batch
        assert len(answer.rows) == len(query.snapshot())
        assert set(answer.report()["state"]) == {"running"}
    finally:
        instance.close()
