"""What a careless or hostile caller of start_query and a query handle gets: statekit's own
errors, each naming the bad value and what is accepted, raised before Spark runs anything
(issue 40: every error speaks statekit). Each case raised Spark's, Python's or Java's error
(or nothing) before."""

from __future__ import annotations

import pytest

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA
from statekit.errors import BadArgument, BatchNotRetained, ChangelogError
from statekit.spark_state.checkpoint import Checkpoint


def _start(spark, broker, games, **given):
    args = dict(spark=spark, kafka=broker, event_schema=GAME_EVENT_SCHEMA, changelog=False,
                keys=["player"], window=sk.tumbling("10 minutes"),
                aggregates=["count", "sum(score)"])
    return sk.start_query(games, **{**args, **given})


def _no_query_named(spark, name):
    return name not in [q.name for q in spark.streams.active]


@pytest.mark.parametrize("where", ["/proc/statekit-nowhere/ck", "/sys/statekit-ck"])
def test_a_checkpoint_that_cannot_be_made_is_named_before_spark_starts(spark, broker, games,
                                                                        where):
    with pytest.raises(BadArgument, match=r"bad checkpoint: '" + where + r"'; accepted: a "
                                          r"writable directory"):
        _start(spark, broker, games, name="unwritable", checkpoint=where)
    assert _no_query_named(spark, "unwritable")


def test_a_checkpoint_that_is_a_file_is_named_as_a_file(spark, broker, games, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    with pytest.raises(BadArgument, match=r"bad checkpoint: '.*notes.txt'; accepted: a "
                                          r"writable directory.*notes.txt' is not a directory"):
        _start(spark, broker, games, name="on-a-file", checkpoint=str(path))
    assert path.read_text() == "mine"            # nothing of the person's is touched


def test_a_checkpoint_folder_given_as_a_path_object_still_starts(spark, broker, games,
                                                                  tmp_path):
    query = _start(spark, broker, games, name="as-a-path", checkpoint=tmp_path / "new" / "ck",
                   trigger="available-now")
    try:
        query.wait_until_drained()
        frame = query.snapshot()
        assert len(frame) and {"player", "count", "sum_score"} <= set(frame.columns)
    finally:
        query.close()


@pytest.mark.parametrize("path", [42, b"/tmp/ck", None, 3.5])
def test_a_checkpoint_that_is_not_a_path_is_named(path):
    with pytest.raises(BadArgument, match=r"bad checkpoint: .*accepted: a folder's path"):
        sk.open_checkpoint(path)
    with pytest.raises(BadArgument, match="bad checkpoint"):
        Checkpoint(path)


@pytest.mark.parametrize("schema, spark_says", [
    ("player STRNG, score INT, ts TIMESTAMP", 'Unsupported data type "STRNG"'),
    ("player STRING score INT", "PARSE_SYNTAX_ERROR"),
])
def test_a_misspelt_event_schema_is_named_with_sparks_reason(spark, broker, games, schema,
                                                            spark_says):
    with pytest.raises(BadArgument) as raised:
        _start(spark, broker, games, name="misspelt", event_schema=schema)
    message = str(raised.value)
    assert message.startswith(f"bad event_schema: {schema!r}; accepted: Spark DDL text")
    assert spark_says in message
    assert "== SQL ==" not in message and "\n" not in message


@pytest.mark.parametrize("schema", ["", "   ", 17])
def test_an_empty_or_odd_event_schema_is_named(spark, broker, games, schema):
    with pytest.raises(BadArgument, match=r"bad event_schema: .*accepted: Spark DDL text"):
        _start(spark, broker, games, name="odd-schema", event_schema=schema)


def test_an_event_time_that_is_not_a_timestamp_is_named(spark, broker, games):
    schema = GAME_EVENT_SCHEMA.replace("ts timestamp", "ts string")
    assert schema != GAME_EVENT_SCHEMA
    with pytest.raises(BadArgument, match=r"bad event_time: 'ts'; accepted: a TIMESTAMP "
                                          r"column \('ts' is string; timestamps: none"):
        _start(spark, broker, games, name="string-time", event_schema=schema)
    assert _no_query_named(spark, "string-time")


@pytest.mark.parametrize("text, function", [("sum(player)", "sum"), ("AVG(player)", "avg")])
def test_a_sum_of_a_text_column_is_refused_before_the_first_batch(spark, broker, games, text,
                                                                  function):
    with pytest.raises(BadArgument) as raised:
        _start(spark, broker, games, name="sum-text", aggregates=["count", text])
    message = str(raised.value)
    assert f"{function} of a numeric column ('player' is string; numeric: score)" in message
    assert "max(player)" in message
    assert _no_query_named(spark, "sum-text")


def test_min_and_max_of_a_text_column_are_still_accepted(spark, broker, games, tmp_path):
    query = _start(spark, broker, games, name="max-text", aggregates=["max(player)"],
                   checkpoint=str(tmp_path / "ck"),
                   trigger="available-now")
    try:
        query.wait_until_drained()
        frame = query.snapshot()
        assert (frame["max_player"] == frame["player"]).all()
    finally:
        query.close()


def test_a_second_active_query_of_one_name_is_refused_naming_it(spark, broker, games):
    first = _start(spark, broker, games, name="twice", trigger="5 seconds")
    try:
        with pytest.raises(BadArgument, match=r"bad query name: 'twice'; accepted: a name no "
                                              r"active query of this Spark session has "
                                              r"\(active: .*twice"):
            _start(spark, broker, games, name="twice")
        assert [q.name for q in spark.streams.active].count("twice") == 1
        assert first.is_active
    finally:
        first.close()


def test_swapped_change_feed_batches_are_named_as_a_swap(logged):
    query, _ = logged
    with pytest.raises(BadArgument, match=r"bad from_batch: 5; accepted: a batch id <= "
                                          r"to_batch \(2\)"):
        query.changes(from_batch=5, to_batch=2)
    with pytest.raises(BadArgument, match="bad from_batch: 3"):
        query.read_changelog(from_batch=3, to_batch=1)
    assert len(query.changes(from_batch=2, to_batch=2)) > 0  # the same batches in order still read


def test_a_changelog_read_from_beyond_its_end_names_the_last_batch(logged):
    query, log = logged
    with pytest.raises(ChangelogError, match=rf"batch 999 is beyond the end of changelog "
                                             rf"'{log.topic}': its last batch is "
                                             rf"{log.last_batch}"):
        query.read_changelog(from_batch=999)
    last = query.read_changelog(from_batch=log.last_batch)
    assert set(last.records["batch"]) == {log.last_batch}


@pytest.mark.parametrize("timeout", ["soon", -1, 0, float("nan"), float("inf"), True, None])
def test_a_wait_without_a_usable_bound_is_named(logged, timeout):
    query, _ = logged
    for wait in (query.wait_until_drained, lambda timeout: query.wait_for_batches(1, timeout),
                 query.malformed):
        with pytest.raises(BadArgument, match=r"bad timeout: .*accepted: a number of "
                                              r"seconds > 0"):
            wait(timeout=timeout)


@pytest.mark.parametrize("partitions", [0, -2, "3", 2.0, True])
def test_shuffle_partitions_must_be_a_whole_number_of_one_or_more(partitions):
    with pytest.raises(BadArgument, match=r"bad shuffle_partitions: .*accepted: a whole "
                                          r"number >= 1"):
        sk.spark_session(shuffle_partitions=partitions)


def test_the_latest_snapshot_before_any_batch_says_none_is_committed(tmp_path):
    empty = Checkpoint(tmp_path)
    with pytest.raises(BatchNotRetained, match=r"no batch is committed yet in checkpoint "
                                               r".*wait_for_batches\(1\)"):
        empty.check_batch(None)
