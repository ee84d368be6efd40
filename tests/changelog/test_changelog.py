"""Changelog topics end to end: real broker, real Spark, real state; kill -9 drills."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import statekit as sk
from statekit.changelog import naming
from statekit.changelog.compaction import compact
from statekit.changelog.log import Changelog, materialize
from statekit.changelog.naming import HOLD_COMPACTION
from statekit.changelog.reader import read_changelog
from statekit.changelog.writer import ChangelogWriter
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC
from statekit.drills.worker import query_config, start_worker
from statekit.kafka.clients import plain_consumer
from statekit.kafka.topics import (
    create_topic,
    delete_topic,
    describe_topic_config,
    partition_count,
)
from statekit.model import changelog_record as codec
from statekit.options.query import RunOptions, SourceOptions
from statekit.spark_state.state_reader import StateReader


def aligned(table: pd.DataFrame, snapshot: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    keys = list(table.columns[:3])
    left = table.sort_values(keys, ignore_index=True)
    right = snapshot[table.columns].sort_values(keys, ignore_index=True)
    return left, right


def test_topic_is_named_and_configured_like_kafka_streams(logged, broker):
    query, log = logged
    assert query.changelog_topic == "board-counts-changelog"
    config = describe_topic_config(broker.bootstrap_servers, "board-counts-changelog")
    assert config["cleanup.policy"] == "compact,delete"
    # window 10 min + watermark 10 min + Kafka Streams' extra day
    assert int(config["retention.ms"]) == (20 * 60 + 24 * 3600) * 1000
    assert sk.kafka.partition_count(broker.bootstrap_servers, "board-counts-changelog") == 3


def test_replaying_the_changelog_gives_every_snapshot(logged):
    query, log = logged
    last = query.last_batch
    assert isinstance(log, Changelog) and log.topic == "board-counts-changelog"
    assert log.key_columns == ("player", "window_start", "window_end")
    assert log.value_columns == ("count", "sum_score", "max_score")
    assert log.last_batch == last >= 8
    for batch in sorted({0, 2, last // 2, last}):
        table, snapshot = aligned(materialize(log, to_batch=batch), query.snapshot(batch=batch))
        assert len(table) > 0
        pd.testing.assert_frame_equal(table, snapshot, check_dtype=False)


def test_the_compacted_view_replays_to_the_same_snapshots(logged):
    query, log = logged
    for batch in sorted({1, query.last_batch // 2, query.last_batch}):
        upto = log.upto_batch(batch)
        compacted = compact(upto)
        assert len(compacted) < len(upto)
        table, snapshot = aligned(materialize(compacted), query.snapshot(batch=batch))
        pd.testing.assert_frame_equal(table, snapshot, check_dtype=False)


def test_each_change_of_each_batch_is_in_the_log_once(logged):
    query, log = logged
    changes = query.changes(from_batch=0)
    records = log.records
    per_batch = records.groupby(["batch", "partition"]).size()
    expected = changes.groupby(["batch", "partition"]).size()
    expected.index = expected.index.set_levels(expected.index.levels[1].astype("int32"), level=1)
    assert per_batch.to_dict() == {(int(b), int(p)): n for (b, p), n in expected.items()}
    assert records["tombstone"].sum() == (changes["change"] == "delete").sum() > 0
    assert not records.duplicated(["partition", "batch", "seq"]).any()


def test_records_sit_in_the_partition_of_their_state_partition(logged):
    query, log = logged
    changes = query.changes(from_batch=0)
    keys = zip(changes["player"], changes["window_start"], strict=True)
    owner = dict(zip(keys, changes["partition"], strict=True))
    for row in log.records.itertuples():
        assert owner[(row.player, row.window_start)] == row.partition


def test_a_plain_kafka_consumer_reads_keys_values_and_tombstones(logged, broker):
    query, log = logged
    records = log.records
    consumer = plain_consumer(broker.bootstrap_servers)
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition("board-counts-changelog", 0, 0)])
    seen, tombstones = [], 0
    deadline = time.monotonic() + 30
    while len(seen) < (records["partition"] == 0).sum() and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=0.5):
            if msg.error():
                continue
            key = json.loads(msg.key())
            assert list(key) == ["player", "window_start", "window_end"]
            assert key["window_start"].endswith(".000Z")
            headers = dict(msg.headers())
            assert headers["statekit.format"] == b"1"
            assert int(headers["statekit.seq"]) < int(headers["statekit.count"])
            if msg.value() is None:
                tombstones += 1
            else:
                value = json.loads(msg.value())
                assert list(value) == ["count", "sum_score", "max_score"]
                assert value["count"] >= 1
            seen.append(msg)
    consumer.close()
    assert len(seen) == (records["partition"] == 0).sum()
    assert tombstones == records[records["partition"] == 0]["tombstone"].sum() > 0


def test_keys_written_by_spark_equal_keys_encoded_in_python(logged):
    _, log = logged
    row = log.records.iloc[0]
    assert codec.encode_key(row, ["window_start", "window_end", "player"]).decode() == row["key"]


def test_a_range_of_batches_and_one_partition(logged, broker):
    query, log = logged
    part = read_changelog(broker.bootstrap_servers, query.changelog_topic, from_batch=2,
                          to_batch=4, partitions=[1])
    records = log.records
    expected = records[(records["partition"] == 1) & records["batch"].between(2, 4)]
    pd.testing.assert_frame_equal(part.records, expected.reset_index(drop=True))
    assert part.last_batch == log.last_batch  # the last batch of the whole log


def test_logging_can_be_switched_off(spark, broker, games, tmp_path):
    query = sk.start_query(games, GAME_SPEC, spark=spark, kafka=broker,
                           event_schema=GAME_EVENT_SCHEMA,
                           checkpoint=str(tmp_path / "ck"), name="quiet", changelog=False,
                           trigger="available-now")
    query.query.awaitTermination(120)
    query.close()
    assert query.changelog_topic is None
    assert "quiet-aggregate-changelog" not in sk.kafka.list_topics(broker.bootstrap_servers)
    with pytest.raises(sk.StatekitError, match="changelog switched off"):
        query.read_changelog()


def test_reshipping_after_a_lost_ledger_round_skips_what_is_there(spark, broker, games, tmp_path):
    """A crash after producing a round but before recording it: the round is not repeated."""
    query = sk.start_query(games, GAME_SPEC, spark=spark, kafka=broker,
                           event_schema=GAME_EVENT_SCHEMA,
                           checkpoint=str(tmp_path / "ck"), name="reship", changelog=False,
                           trigger="available-now", max_offsets_per_trigger=1000)
    query.query.awaitTermination(180)
    query.close()
    writer = ChangelogWriter(query.reader, broker.bootstrap_servers, "reship-agg-changelog")
    assert writer.ship(through=1) == 1
    saved = Path(writer.ledger_path).read_text()
    last = writer.ship()
    full = read_changelog(broker.bootstrap_servers, "reship-agg-changelog")
    Path(writer.ledger_path).write_text(saved)  # as if the process died before the ledger write
    again = ChangelogWriter(query.reader, broker.bootstrap_servers, "reship-agg-changelog")
    assert again.shipped_batch == 1
    assert again.ship() == last
    assert again.skipped == (full.records["batch"] > 1).sum() > 0
    pd.testing.assert_frame_equal(
        read_changelog(broker.bootstrap_servers, "reship-agg-changelog").records, full.records)
    # the topic gone (or another broker) while the ledger remains: named, nothing shipped
    delete_topic(broker.bootstrap_servers, "reship-agg-changelog")
    gone = ChangelogWriter(query.reader, broker.bootstrap_servers, "reship-agg-changelog")
    with pytest.raises(sk.ChangelogError, match=r"batches up to \d+ were shipped to topic "
                                                r"'reship-agg-changelog', but the broker has no "
                                                r"topic.*delete the ledger "
                                                r"'.*reship-agg-changelog"):
        gone.ship()


def _worker(broker, topic, checkpoint, name, mode) -> subprocess.Popen:
    source = SourceOptions(kafka=broker, event_schema=GAME_EVENT_SCHEMA,
                           max_offsets_per_trigger=250)
    run = RunOptions(name=name, checkpoint=str(checkpoint), trigger="200 milliseconds",
                     changelog_topic_config=HOLD_COMPACTION)
    return start_worker("query", query_config(topic, GAME_SPEC, source, run, mode=mode))


@pytest.mark.slow   # a query in a worker process, killed with kill -9, restarted here
def test_kill_9_between_batches_then_restart_keeps_each_batch_once(spark, broker, games,
                                                                    tmp_path):
    checkpoint, name = tmp_path / "ck", "crashy"
    ledger = checkpoint / "_statekit" / "changelog" / "crashy-aggregate-changelog.json"
    worker = _worker(broker, games, checkpoint, name, "run")
    try:
        deadline = time.monotonic() + 240
        while not (ledger.exists() and json.loads(ledger.read_text())["last_batch"] >= 3):
            assert worker.poll() is None, worker.stdout.read()
            assert time.monotonic() < deadline, "the worker shipped no batch in 240 s"
            time.sleep(0.1)
        time.sleep(random.uniform(0, 1.5))
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(30)
    killed_at = json.loads(ledger.read_text())["last_batch"]
    restart = _worker(broker, games, checkpoint, name, "drain")
    out, _ = restart.communicate(timeout=300)
    assert restart.returncode == 0, out

    log = read_changelog(broker.bootstrap_servers, "crashy-aggregate-changelog")  # checks whole
    state = StateReader(spark, str(checkpoint), GAME_SPEC)
    last = state.batch_range()[1]
    assert killed_at < last == json.loads(ledger.read_text())["last_batch"]
    changes = state.changes(0, last)
    assert log.last_batch == changes["batch"].max()  # later batches changed nothing
    assert len(log) == len(changes)
    assert not log.records.duplicated(["partition", "batch", "seq"]).any()
    table, snapshot = aligned(materialize(log), state.snapshot(last))
    pd.testing.assert_frame_equal(table, snapshot, check_dtype=False)


def _copy_unshipped(spark, query, tmp_path, name: str) -> StateReader:
    """The drained query's checkpoint copied without its ledger: a state with nothing shipped."""
    copy = tmp_path / name
    shutil.copytree(query.checkpoint, copy)
    shutil.rmtree(copy / "_statekit" / "changelog")
    return StateReader(spark, str(copy), query.spec)


def test_writers_sharing_a_lock_ship_one_round_at_a_time(spark, broker, logged, tmp_path):
    query, log = logged
    lock = threading.Lock()
    first, second = (ChangelogWriter(_copy_unshipped(spark, query, tmp_path, f"ck{i}"),
                                     broker.bootstrap_servers, f"lockstep{i}-changelog", lock=lock)
                     for i in (1, 2))
    assert first.ship(through=1) == 1  # the lock is free: a round runs at once
    shipped: list[int] = []
    with lock:  # held, as by another part's round
        waiting = threading.Thread(target=lambda: shipped.append(second.ship()))
        waiting.start()
        waiting.join(3)
        assert waiting.is_alive() and not shipped and second.shipped_batch == -1
    waiting.join(120)
    assert shipped == [log.last_batch] and second.shipped_batch == log.last_batch
    assert len(read_changelog(broker.bootstrap_servers, "lockstep2-changelog")) == len(log)


def test_a_writer_takes_the_topic_over_before_the_first_commit_then_ships_it_once(
        spark, broker, logged, tmp_path):
    """prepare(): nothing before the query plans a batch; once it has (an offset log, no
    commit), the topic is created, the producer opened and the ledger started, so the first
    round has only its batches to ship, each change once."""
    query, log = logged
    state = _copy_unshipped(spark, query, tmp_path, "early")
    commits, hidden = Path(state.path) / "commits", tmp_path / "commits"
    offsets, hidden_offsets = Path(state.path) / "offsets", tmp_path / "offsets"
    shutil.move(commits, hidden)
    shutil.move(offsets, hidden_offsets)
    writer = ChangelogWriter(state, broker.bootstrap_servers, "early-changelog")
    assert writer.prepare() is False  # no batch planned: the state partitions are not known
    assert "early-changelog" not in sk.kafka.list_topics(broker.bootstrap_servers)
    shutil.move(hidden_offsets, offsets)
    assert writer.prepare() is True and writer.shipped_batch == -1
    assert partition_count(broker.bootstrap_servers, "early-changelog") == 3
    assert writer.prepare() is True  # once open, nothing more
    shutil.move(hidden, commits)
    assert writer.ship() == log.last_batch
    shipped = read_changelog(broker.bootstrap_servers, "early-changelog")
    assert len(shipped) == len(log)
    assert not shipped.records.duplicated(["partition", "batch", "seq"]).any()


def test_a_started_writer_ships_a_commit_when_woken(spark, broker, logged, tmp_path):
    """wake(): the background thread looks at the commit log now, not at its next look (an
    hour away here)."""
    query, log = logged
    state = _copy_unshipped(spark, query, tmp_path, "woken")
    commits, hidden = Path(state.path) / "commits", tmp_path / "commits"
    shutil.move(commits, hidden)
    with ChangelogWriter(state, broker.bootstrap_servers, "woken-changelog",
                         poll_interval=3600) as writer:
        deadline = time.monotonic() + 120
        while writer._producer is None:  # taken over beside the "first batch"
            writer.raise_if_failed()
            assert time.monotonic() < deadline, "the writer did not take the topic over"
            time.sleep(0.05)
        shutil.move(hidden, commits)
        writer.wake()
        while writer.shipped_batch < log.last_batch:
            writer.raise_if_failed()
            assert time.monotonic() < deadline, "the woken writer shipped nothing"
            time.sleep(0.05)
    assert len(read_changelog(broker.bootstrap_servers, "woken-changelog")) == len(log)


def test_a_topic_recreated_after_the_writers_own_round_is_named_not_written_past(
        spark, broker, logged, tmp_path):
    """After its own committed round a writer skips reading the topic past its ledger, but only
    while every partition still spans the ledger's offsets."""
    query, log = logged
    topic = "recreated-changelog"
    writer = ChangelogWriter(_copy_unshipped(spark, query, tmp_path, "ck"),
                             broker.bootstrap_servers, topic)
    assert writer.ship(through=2) == 2
    assert writer.ship(through=4) == 4  # its own round before: rounds follow on, each batch once
    shipped = read_changelog(broker.bootstrap_servers, topic)
    assert shipped.last_batch <= 4 and not shipped.records.duplicated(
        ["partition", "batch", "seq"]).any()
    partitions = partition_count(broker.bootstrap_servers, topic)
    delete_topic(broker.bootstrap_servers, topic)
    create_topic(broker.bootstrap_servers, topic, partitions=partitions)
    with pytest.raises(sk.ChangelogError, match=rf"changelog topic '{topic}' partition \d+ now "
                                                r"spans offsets 0\.\.0.*deleted or recreated"):
        writer.ship()
    assert len(read_changelog(broker.bootstrap_servers, topic)) == 0  # nothing written past


# --- bad input ------------------------------------------------------------------------
def test_a_topic_that_is_not_a_changelog_is_named(broker, games):
    with pytest.raises(sk.ChangelogError, match="'games-changelog' is not a statekit changelog"):
        read_changelog(broker.bootstrap_servers, games)


def test_a_batch_beyond_the_end_is_named(logged, broker):
    query, _ = logged
    with pytest.raises(sk.ChangelogError, match=f"batch 999 is beyond.*last batch is "
                                                f"{query.last_batch}"):
        read_changelog(broker.bootstrap_servers, query.changelog_topic, to_batch=999)
    with pytest.raises(sk.ChangelogError, match="beyond"):
        materialize(query.read_changelog(), to_batch=999)


def _produce(broker, topic, records) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for key, value, head in records:
        producer.produce(topic, key=key, value=value, partition=0, headers=head)
    producer.flush(10)


def test_a_gap_in_batches_is_named(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 1, {"cleanup.policy": "compact"})
    key, value = b'{"player":"a"}', b'{"count":1}'
    _produce(broker, topic_name, [(key, value, codec.RecordHeaders(0, 0, 1, -1).encode()),
                                  # batch 2 cut short
                                  (key, value, codec.RecordHeaders(2, 0, 2, 0).encode())])
    with pytest.raises(sk.ChangelogError, match=r"partition 0 .* offset 1 .* batch 2 record 1 of "
                                                r"2.*previous batch here 0"):
        read_changelog(broker.bootstrap_servers, topic_name)


def test_a_repeated_batch_is_named(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 1, {"cleanup.policy": "compact"})
    key, value = b'{"player":"a"}', b'{"count":1}'
    _produce(broker, topic_name, [(key, value, codec.RecordHeaders(0, 0, 1, -1).encode()),
                                  (key, value, codec.RecordHeaders(0, 0, 1, -1).encode())])
    with pytest.raises(sk.ChangelogError, match="offset 1 it holds batch 0 record 1 of 1"):
        read_changelog(broker.bootstrap_servers, topic_name)


@pytest.mark.parametrize(("head", "named"), [
    ([("statekit.format", b"2"), ("statekit.batch", b"0")], "statekit.format 2; this statekit "
                                                            "reads format 1"),
    ([("statekit.format", b"1"), ("statekit.batch", b"\xff0"), ("statekit.seq", b"0"),
      ("statekit.count", b"1"), ("statekit.prev", b"-1")], "header statekit.batch is"),
    ([("statekit.format", b"1"), ("statekit.batch", b"3"), ("statekit.seq", b"1"),
      ("statekit.count", b"1"), ("statekit.prev", b"-1")], "inconsistent"),
])
def test_a_record_with_bad_statekit_headers_is_refused_where_it_lies(broker, topic_name, head,
                                                                     named):
    create_topic(broker.bootstrap_servers, topic_name, 1, {"cleanup.policy": "compact"})
    key, value = b'{"player":"a"}', b'{"count":1}'
    _produce(broker, topic_name, [(key, value, codec.RecordHeaders(0, 0, 1, -1).encode()),
                                  (key, value, head)])
    with pytest.raises(sk.ChangelogError, match=f"partition 0 offset 1: .*{named}"):
        read_changelog(broker.bootstrap_servers, topic_name)


def test_a_topic_with_foreign_records_is_not_shipped_to(spark, broker, games, logged, tmp_path):
    query, _ = logged
    copy = tmp_path / "copy"
    shutil.copytree(query.checkpoint, copy)
    os.remove(copy / "_statekit" / "changelog" / "board-counts-changelog.json")
    writer = ChangelogWriter(StateReader(spark, str(copy), query.spec),
                             broker.bootstrap_servers, "board-counts-changelog")
    with pytest.raises(sk.ChangelogError, match="already holds records.*did not write"):
        writer.ship()


def test_bad_names_and_batches_are_named(broker, logged):
    with pytest.raises(sk.BadArgument, match="store name: 'my store'"):
        naming.changelog_topic("app", "my store")
    with pytest.raises(sk.BadArgument, match="to_batch: -1"):
        read_changelog(broker.bootstrap_servers, logged[0].changelog_topic, to_batch=-1)
    with pytest.raises(sk.BadArgument, match="partition: 7; accepted: a partition of"):
        read_changelog(broker.bootstrap_servers, logged[0].changelog_topic, partitions=[7])
