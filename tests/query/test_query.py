"""The stateful query end to end: real broker, real Spark, real RocksDB state."""

from __future__ import annotations

import pandas as pd
import pytest

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA, GAME_SPEC, game_events, parse_game_events
from statekit.kafka.dataset_replay import replay
from statekit.reference.aggregates import windowed_reference
from statekit.spark.progress_listener import followed

AGGREGATES = ["count", "sum(score)", "max(score)", "avg(score)"]
BATCH = 500  # records per micro-batch: ~12 minutes of game time


@pytest.fixture(scope="module")
def games_topic(broker):
    replay(game_events(), broker.bootstrap_servers, "games-query", partitions=4, progress=False)
    return "games-query"


def run(spark, broker, topic, checkpoint, window, name, **kwargs):
    return sk.start_query(
        topic, keys=["player"], window=window, aggregates=AGGREGATES, spark=spark, kafka=broker,
        event_schema=GAME_EVENT_SCHEMA, checkpoint=str(checkpoint), name=name,
        max_offsets_per_trigger=BATCH, trigger="100 milliseconds", **kwargs)


@pytest.fixture(scope="module")
def drained(spark, broker, games_topic, tmp_path_factory):
    query = run(spark, broker, games_topic, tmp_path_factory.mktemp("ck") / "tumbling",
                sk.tumbling("10 minutes"), "tumbling")
    query.wait_until_drained()
    yield query
    query.close()


def reference_events() -> pd.DataFrame:
    lines = game_events().records["value"].tolist()
    good, _ = parse_game_events(lines)
    events = good.rename(columns={"event_time": "ts"})
    events["ts"] = events["ts"].dt.tz_convert("UTC").dt.tz_localize(None)
    return events


def without_partition(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="partition").reset_index(drop=True)


def test_final_snapshot_equals_pandas_over_the_input(drained):
    last = drained.last_batch
    progress = drained.progress().set_index("batch")
    watermark = progress.loc[last, "watermark"]
    expected = windowed_reference(reference_events(), drained.spec, watermark=watermark)
    snapshot = drained.snapshot(sort=True)
    assert len(snapshot) > 0 and snapshot["window_end"].min() > watermark
    pd.testing.assert_frame_equal(without_partition(snapshot), expected, check_dtype=False)


def test_snapshot_is_flat_with_one_column_per_key_and_aggregate(drained):
    snapshot = drained.snapshot()
    assert list(snapshot.columns) == ["window_start", "window_end", "player", "count",
                                      "sum_score", "max_score", "avg_score", "partition"]
    assert (snapshot["window_end"] - snapshot["window_start"] == pd.Timedelta("10min")).all()
    assert set(snapshot["partition"]) <= {0, 1, 2}
    assert (snapshot["avg_score"] == snapshot["sum_score"] / snapshot["count"]).all()


def test_change_feed_replays_to_every_snapshot(drained):
    spec = drained.spec
    values = [*spec.value_columns, "partition"]
    last = drained.last_batch
    assert last >= 8
    for batch in sorted({1, 3, last // 2, last}):
        changes = drained.changes(from_batch=0, to_batch=batch)
        assert set(changes["change"]) <= {"put", "delete"}
        assert changes["batch"].between(0, batch).all()
        rebuilt = sk.apply_changes(changes, spec.key_columns, values)
        expected = drained.snapshot(batch=batch, sort=True)[rebuilt.columns]
        pd.testing.assert_frame_equal(rebuilt, expected, check_dtype=False)
    evicted = drained.changes(from_batch=0, to_batch=last)["change"] == "delete"
    assert evicted.any()  # evicted windows


def test_earlier_batches_are_snapshotted_too(drained):
    first, last = drained.state().batch_range()
    assert first == 0
    sizes = [len(drained.snapshot(batch=b)) for b in range(1, last + 1)]
    assert sizes == drained.progress().set_index("batch").loc[1:last, "state_rows_total"].tolist()


def test_progress_has_one_row_per_batch(drained):
    progress = drained.progress()
    assert progress["batch"].tolist() == list(range(drained.last_batch + 1))
    assert progress["input_rows"].sum() == 5000
    assert progress["input_rows"].max() <= BATCH
    assert {"state_rows_total", "state_rows_removed", "dropped_by_watermark",
            "state_memory_bytes", "state_commit_ms"} <= set(progress.columns)
    assert any(c.startswith("rocksdb") for c in progress.columns)


def test_malformed_events_are_counted_and_kept(drained):
    _, bad = parse_game_events(game_events().records["value"].tolist())
    kept = drained.malformed()
    assert drained.malformed_count() == len(bad) == 6
    # the same lines, for the same reasons, as the pandas reference of the null rule
    assert sorted(zip(kept["value"], kept["reason"], strict=True)) == sorted(
        zip(bad["value"], bad["reason"], strict=True))
    assert kept["offset"].ge(0).all() and kept["topic"].eq("games-query").all()


def test_late_events_are_counted(drained):
    assert drained.late_events() == 8


def test_the_handle_verbs_need_no_part_and_the_old_spellings_still_read(drained):
    """QueryHandle on start_query's handle: its one part is its store; a batch where the
    part goes (the spelling before the protocol) reads the same batch, with a warning."""
    last = drained.last_batch
    assert drained.parts() == ["aggregate"]
    pd.testing.assert_frame_equal(drained.snapshot(batch=last),
                                  drained.snapshot("aggregate", batch=last))
    pd.testing.assert_frame_equal(drained.snapshot(), drained.state().snapshot(last))
    with pytest.warns(DeprecationWarning, match=r"snapshot\(batch=1\)"):
        old = drained.snapshot(1)
    pd.testing.assert_frame_equal(old, drained.snapshot(batch=1))
    with pytest.warns(DeprecationWarning, match="from_batch=1"):
        old = drained.changes(1, 2)
    pd.testing.assert_frame_equal(old, drained.changes(from_batch=1, to_batch=2))
    # no batches: what the last batch changed
    pd.testing.assert_frame_equal(drained.changes(), drained.changes(from_batch=last,
                                                                      to_batch=last))
    assert list(drained.state().schema()["column"]) == [
        c for c in drained.snapshot().columns if c != "partition"]
    assert drained.describe().table["rows"].sum() == len(drained.snapshot())
    for wrong in ("counts", "1/default"):
        with pytest.raises(sk.BadArgument, match="'aggregate'") as err:
            drained.snapshot(wrong)
        assert repr(wrong) in str(err.value)
    with pytest.raises(sk.BadArgument, match="part"):
        drained.snapshot(3, batch=2)  # a batch in both places


def test_stop_is_close_with_a_warning_and_both_end_the_query(spark, broker, games_topic,
                                                              tmp_path):
    query = run(spark, broker, games_topic, tmp_path / "ck", sk.tumbling("10 minutes"),
                "closing")
    query.wait_for_batches(1)
    with pytest.warns(DeprecationWarning, match=r"use close\(\)"):
        query.stop()
    assert not query.is_active
    query.close()  # once more: nothing to do
    with run(spark, broker, games_topic, tmp_path / "ck", sk.tumbling("10 minutes"),
             "closing") as again:
        again.wait_for_batches(1)
    assert not again.is_active and again.last_batch >= query.last_batch


def test_metadata_names_the_store(drained):
    meta = drained.metadata()
    assert meta.loc[0, "operator"] == "stateStoreSave"
    assert meta.loc[0, "partitions"] == 3
    assert meta.loc[0, "max_batch"] == drained.last_batch


@pytest.mark.slow   # ~25 s: a stream stopped halfway, restarted and drained
def test_restart_mid_stream_gives_the_same_state(spark, broker, games_topic, drained, tmp_path):
    checkpoint = tmp_path / "restarted"
    first = run(spark, broker, games_topic, checkpoint, sk.tumbling("10 minutes"), "first-half")
    first.wait_for_batches(3)
    first.close()
    assert str(first.query.id) not in followed(spark)  # its reports are kept no more
    stopped_at = first.last_batch
    assert 0 <= stopped_at < drained.last_batch
    second = run(spark, broker, games_topic, checkpoint, sk.tumbling("10 minutes"), "second-half")
    try:
        second.wait_until_drained()
        pd.testing.assert_frame_equal(second.snapshot(sort=True), drained.snapshot(sort=True))
        assert second.progress()["input_rows"].sum() == 5000  # no batch read twice
        assert second.malformed_count() == 6
        assert len(second.malformed()) == 6  # kept aside exactly once across both runs
    finally:
        second.close()


def test_hopping_windows_match_pandas(spark, broker, games_topic, tmp_path):
    query = run(spark, broker, games_topic, tmp_path / "hop", sk.hopping("10 minutes", "5 minutes"),
                "hopping")
    try:
        query.wait_until_drained()
        watermark = query.progress().set_index("batch").loc[query.last_batch, "watermark"]
        expected = windowed_reference(reference_events(), query.spec, watermark=watermark)
        pd.testing.assert_frame_equal(without_partition(query.snapshot(sort=True)), expected,
                                      check_dtype=False)
    finally:
        query.close()


def test_session_windows_replay_from_the_change_feed(spark, broker, games_topic, tmp_path):
    query = run(spark, broker, games_topic, tmp_path / "session", sk.session("3 minutes"),
                "sessions")
    try:
        query.wait_until_drained()
        snapshot = query.snapshot(sort=True)
        assert (snapshot["window_end"] > snapshot["window_start"]).all()
        spec = query.spec
        rebuilt = sk.apply_changes(query.changes(from_batch=0), spec.key_columns,
                                   [*spec.value_columns, "partition"])
        pd.testing.assert_frame_equal(rebuilt, snapshot[rebuilt.columns], check_dtype=False)
    finally:
        query.close()


# --- bad input ------------------------------------------------------------------------
def test_unknown_window_kind_is_named():
    with pytest.raises(sk.BadArgument, match="'weekly'.*tumbling, hopping, session"):
        sk.WindowSpec("weekly", "1 minute")


def test_bad_duration_is_named():
    with pytest.raises(sk.BadArgument, match="'10 minuets'"):
        sk.tumbling("10 minuets")
    with pytest.raises(sk.BadArgument, match="watermark.*'soon'"):
        sk.QuerySpec(keys=["player"], window=sk.tumbling("1 minute"), watermark="soon")


def test_unknown_aggregate_is_named():
    with pytest.raises(sk.BadArgument, match="'median'.*count, sum, min, max, avg"):
        sk.QuerySpec(keys=["player"], window=sk.tumbling("1 minute"),
                     aggregates=["median(score)"])


def test_missing_topic_is_named(spark, broker, games_topic):
    first = sorted(sk.kafka.list_topics(broker))[0]  # the error lists the first 20 there are
    with pytest.raises(sk.TopicNotFound, match=f"'no-such-topic' does not exist on "
                                               f"'{broker.bootstrap_servers}'; existing topics: "
                                               f"{first}"):
        sk.start_query("no-such-topic", keys=["player"], window=sk.tumbling("1 minute"),
                       spark=spark, kafka=broker)


def test_unreachable_broker_is_named(spark):
    with pytest.raises(sk.BrokerUnreachable, match="127.0.0.1:9"):
        sk.start_query("games", keys=["player"], window=sk.tumbling("1 minute"), spark=spark,
                       kafka="127.0.0.1:9")


def test_batch_not_retained_names_the_batch_and_the_range(drained):
    with pytest.raises(sk.BatchNotRetained, match=r"batch 9999 .*0\.\.\d+"):
        drained.snapshot(batch=9999)
    with pytest.raises(sk.BadArgument, match="from_batch: -3; accepted: a batch id"):
        drained.changes(from_batch=-3, to_batch=2)


def test_missing_checkpoint_is_named(spark, tmp_path):
    reader = sk.StateReader(spark, str(tmp_path / "nothing-here"), GAME_SPEC)
    with pytest.raises(sk.CheckpointError, match="nothing-here"):
        reader.metadata()


def test_session_windows_need_append_mode(spark, broker, games_topic):
    with pytest.raises(sk.BadArgument, match="'update'.*append"):
        sk.start_query(games_topic, keys=["player"], window=sk.session("1 minute"),
                       spark=spark, kafka=broker, output_mode="update")


def test_spec_and_its_keyword_arguments_are_not_both_taken(spark, broker, games_topic):
    with pytest.raises(sk.BadArgument, match="window with spec.*not both"):
        sk.start_query(games_topic, GAME_SPEC, window=sk.tumbling("1 hour"), spark=spark,
                       kafka=broker)
    with pytest.raises(sk.BadArgument, match="group keys: None"):
        sk.start_query(games_topic, window=sk.tumbling("1 hour"), spark=spark, kafka=broker)
    with pytest.raises(sk.BadArgument, match="kafka: None"):
        sk.start_query(games_topic, GAME_SPEC, spark=spark)


# --- lifecycle --------------------------------------------------------------------------
def test_a_query_stopped_by_a_second_run_on_its_checkpoint_says_why(spark, broker, games_topic,
                                                                     tmp_path):
    first = run(spark, broker, games_topic, tmp_path / "shared", sk.tumbling("10 minutes"),
                "first-run", changelog=False)
    second = None
    try:
        first.wait_for_batches(1)
        second = run(spark, broker, games_topic, tmp_path / "shared", sk.tumbling("10 minutes"),
                     "second-run", changelog=False)
        for wait in (first.wait_until_drained, lambda: first.wait_for_batches(1000)):
            with pytest.raises(sk.StatekitError, match=r"stopped without an error .*another run "
                                                       r"of it \(query 'second-run'.*same "
                                                       r"checkpoint"):
                wait()
        assert second.wait_until_drained() >= first.last_batch  # the new run goes on
    finally:
        first.close()
        if second is not None:
            second.close()


# --- lost progress reports, late events ---------------------------------------------------
STATE_COLUMNS = ["input_rows", "state_rows_total", "state_rows_updated", "state_rows_removed",
                 "watermark"]


@pytest.mark.slow   # ~60 s: a query drained, its reports partly lost, started again
def test_lost_progress_reports_are_recovered_and_counts_stay_exact(spark, broker, games_topic,
                                                                   tmp_path):
    checkpoint = tmp_path / "lost"
    first = run(spark, broker, games_topic, checkpoint, sk.tumbling("10 minutes"), "lost-1",
                changelog=False)
    first.wait_until_drained()
    first.close()
    kept = first.progress().set_index("batch")
    assert kept["malformed_rows"].sum() == 6 and kept["dropped_by_watermark"].sum() == 8
    # what kill -9 between Spark's commit and the report being kept leaves: no report
    lost = [b for b in kept.index if b > 0 and (kept.loc[b, "malformed_rows"] > 0 or
                                                kept.loc[b, "dropped_by_watermark"] > 0)]
    assert len(lost) >= 3
    for batch in lost:
        first.checkpoint.progress_path(batch).unlink()
    second = run(spark, broker, games_topic, checkpoint, sk.tumbling("10 minutes"), "lost-2",
                 changelog=False)
    try:
        second.wait_until_drained()
        progress = second.progress()
        assert progress["batch"].tolist() == list(range(second.last_batch + 1))
        assert progress.loc[progress["recovered"], "batch"].tolist() == lost
        again = progress.set_index("batch").loc[kept.index]
        pd.testing.assert_frame_equal(again[STATE_COLUMNS], kept[STATE_COLUMNS],
                                      check_dtype=False)
        assert progress["input_rows"].sum() == 5000
        assert second.malformed_count() == 6   # from the side output, exactly
        assert second.late_events() == 8
    finally:
        second.close()


def late_burst(n_late: int) -> pd.DataFrame:
    """Events 30 s apart for 100 minutes, then ``n_late`` events of two players in the first
    10-minute window (closed by then), then more on-time events: one partition, in order."""
    start = pd.Timestamp("2026-01-05 10:00:00")
    times = [start + pd.Timedelta(seconds=30 * i) for i in range(200)]
    times += [start + pd.Timedelta(seconds=60 + i % 30) for i in range(n_late)]
    times += [start + pd.Timedelta(minutes=100, seconds=30 * i) for i in range(20)]
    players = [f"p{i % 4}" for i in range(200)] + [f"p{i % 2}" for i in range(n_late)] + \
        [f"p{i % 4}" for i in range(20)]
    values = [f'{{"player": "{p}", "score": 1, "ts": "{t.isoformat()}Z"}}'
              for p, t in zip(players, times, strict=True)]
    return pd.DataFrame({"key": players, "value": values,
                         "timestamp": 1767571200000})


def test_late_events_are_events_not_the_groups_spark_drops(spark, broker, topic_name, tmp_path):
    replay(late_burst(60), broker, topic_name, partitions=1, progress=False)
    query = sk.start_query(topic_name, keys=["player"], window=sk.tumbling("10 minutes"),
                           aggregates=["count"], watermark="5 minutes", spark=spark,
                           kafka=broker, event_schema="player string, score long, ts timestamp",
                           checkpoint=str(tmp_path / "ck"), name="late-burst",
                           max_offsets_per_trigger=100, trigger="100 milliseconds",
                           changelog=False)
    try:
        query.wait_until_drained()
        assert query.progress()["dropped_by_watermark"].sum() == 2  # (window, player) groups
        assert query.late_events() == 60
        assert len(list(query.checkpoint.late_dir.iterdir())) == 1  # counted once, kept
        assert query.late_events() == 60
    finally:
        query.close()


def test_kafka_format_is_statekits_source_without_sparks_connector(spark):
    from statekit.query.source import KAFKA_PROVIDER, _jvm_has_class, kafka_format

    assert _jvm_has_class(spark, "org.apache.spark.sql.SparkSession")
    assert not _jvm_has_class(spark, KAFKA_PROVIDER)          # no spark-sql-kafka jar here
    assert not _jvm_has_class(spark, "org.apache.spark.sql.NoSuchClass")
    assert not _jvm_has_class(object(), "java.lang.String")   # no JVM view (as on Connect)
    assert kafka_format(spark) == kafka_format(spark) == "statekit_kafka"
