"""Pure logic, no Spark and no broker: durations, query specs, change feeds, progress,
the pandas reference, error messages. (Docstring examples run through --doctest-modules.)"""

from __future__ import annotations

import datetime as dt
import json

import pandas as pd
import pytest

from statekit.datasets import FLIGHT_SPEC, GAME_SPEC
from statekit.durations import spark_interval, to_millis
from statekit.errors import (
    BadArgument,
    BatchNotRetained,
    BrokerUnreachable,
    StatekitError,
    TopicNotFound,
)
from statekit.model.query_spec import Aggregate, QuerySpec, WindowSpec, hopping, session, tumbling
from statekit.reference.aggregates import windowed_reference
from statekit.spark_state.changes import apply_changes
from statekit.spark_state.progress import COLUMNS, progress_frame

T = pd.Timestamp


# --- durations --------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "ms"), [
    ("500 ms", 500), ("1 second", 1000), ("10 seconds", 10_000), ("2 minutes", 120_000),
    ("1 min", 60_000), ("3 hours", 10_800_000), ("1 day", 86_400_000), (" 5 s ", 5000),
    ("10 MINUTES", 600_000), ("10minutes", 600_000),
])
def test_to_millis(text, ms):
    assert to_millis(text) == ms


@pytest.mark.parametrize("text", ["10 minuets", "soon", "0 seconds", "-5 seconds",
                                  "1.5 minutes", "", "minutes", 10, None])
def test_bad_duration_is_named_with_what_is_accepted(text):
    with pytest.raises(BadArgument) as info:
        to_millis(text, "watermark delay")
    message = str(info.value)
    assert message.startswith(f"bad watermark delay: {text!r}")
    assert "ms, seconds, minutes, hours, days" in message


def test_spark_interval_is_in_milliseconds():
    assert spark_interval("2 minutes") == "120000 milliseconds"


# --- aggregates -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "function", "column", "name"), [
    ("count", "count", None, "count"),
    ("count(*)", "count", None, "count"),
    ("count()", "count", None, "count"),
    ("COUNT", "count", None, "count"),
    ("count(score)", "count", "score", "count_score"),
    ("sum(score)", "sum", "score", "sum_score"),
    ("  avg( score ) ", "avg", "score", "avg_score"),
    ("Max(score)", "max", "score", "max_score"),
    ("min(level)", "min", "level", "min_level"),
])
def test_aggregate_parse(text, function, column, name):
    agg = Aggregate.parse(text)
    assert (agg.function, agg.column, agg.name) == (function, column, name)


@pytest.mark.parametrize(("text", "named"), [
    ("median(score)", "'median'; accepted: count, sum, min, max, avg"),
    ("sum", "'sum'; accepted: sum(<column name>)"),
    ("avg(*)", "'avg(*)'; accepted: avg(<column name>)"),
    ("sum(a b)", "'sum(a b)'; accepted: count, count(*)"),
    ("", "''; accepted: count"),
    (42, "42; accepted: count"),
])
def test_bad_aggregate_is_named(text, named):
    with pytest.raises(BadArgument, match=named.replace("(", r"\(").replace(")", r"\)")
                       .replace("*", r"\*")):
        Aggregate.parse(text)


# --- windows ----------------------------------------------------------------------------
def test_window_kinds():
    assert tumbling("10 minutes") == WindowSpec("tumbling", "10 minutes")
    assert hopping("10 minutes", "5 minutes").slide == "5 minutes"
    assert session("3 minutes").kind == "session"
    assert tumbling("10 minutes").size_ms == 600_000
    assert hopping("10 minutes", "10 minutes").size_ms == 600_000  # slide = size is allowed


@pytest.mark.parametrize(("build", "named"), [
    (lambda: WindowSpec("weekly", "1 minute"), "window kind: 'weekly'; accepted: tumbling, "
                                               "hopping, session"),
    (lambda: tumbling("ten minutes"), "window size: 'ten minutes'"),
    (lambda: tumbling("0 minutes"), "window size: '0 minutes'"),
    (lambda: session("forever"), "session gap: 'forever'"),
    (lambda: hopping("10 minutes", "later"), "window slide: 'later'"),
    (lambda: hopping("10 minutes", "11 minutes"), "window slide: '11 minutes'; accepted: a "
                                                  "duration no longer than the window size "
                                                  "'10 minutes'"),
    (lambda: WindowSpec("hopping", "10 minutes"), "hopping window slide: None"),
    (lambda: WindowSpec("tumbling", "10 minutes", "5 minutes"),
     "slide for a tumbling window: '5 minutes'; accepted: no slide"),
    (lambda: WindowSpec("session", "10 minutes", "5 minutes"),
     "slide for a session window: '5 minutes'"),
])
def test_bad_window_is_named(build, named):
    with pytest.raises(BadArgument) as info:
        build()
    assert named in str(info.value)


# --- query specs ------------------------------------------------------------------------
def test_query_spec_defaults_and_columns_for_tumbling():
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"))
    assert [a.name for a in spec.aggregates] == ["count"]
    assert (spec.event_time, spec.watermark) == ("ts", "10 minutes")
    assert spec.key_columns == ["window_start", "window_end", "player"]
    assert spec.value_columns == ["count"]
    assert spec.input_columns == spec.required_columns == ["player", "ts"]


def test_query_spec_input_columns_lists_each_column_once():
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                     aggregates=["count", "sum(score)", "max(score)"])
    assert spec.input_columns == ["player", "ts", "score"]


def test_query_spec_round_trips_through_json():
    import json

    for spec in (GAME_SPEC, FLIGHT_SPEC,
                 QuerySpec(keys=["team", "player"], window=hopping("10 minutes", "5 minutes"),
                           aggregates=["count(level)", "avg(level)"], event_time="at",
                           watermark="1 hour"),
                 QuerySpec(keys="player", window=session("3 minutes"))):
        assert QuerySpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert GAME_SPEC.to_dict() == {
        "keys": ["player"], "window": {"kind": "tumbling", "size": "10 minutes"},
        "aggregates": ["count", "sum(score)", "max(score)"], "event_time": "ts",
        "watermark": "10 minutes"}
    with pytest.raises(BadArgument, match="query spec field: 'colour'"):
        QuerySpec.from_dict({**GAME_SPEC.to_dict(), "colour": "red"})
    with pytest.raises(BadArgument, match="at least keys and window"):
        QuerySpec.from_dict({"keys": ["player"]})
    with pytest.raises(BadArgument, match="window description"):
        QuerySpec.from_dict({"keys": ["player"], "window": "10 minutes"})


def test_default_event_schema_reads_what_the_query_needs():
    spec = QuerySpec(keys=["origin"], window=tumbling("1 hour"),
                     aggregates=["count(dest)", "avg(dep_delay)", "max(dep_delay)"])
    assert spec.default_event_schema() == (
        "`origin` string, `ts` timestamp, `dest` string, `dep_delay` double")


def test_query_spec_columns_for_session_windows():
    spec = QuerySpec(keys="player", window=session("3 minutes"), aggregates=["count", "avg(score)"])
    assert spec.keys == ("player",)  # a single name becomes a tuple
    assert spec.key_columns == ["window_start", "player"]
    assert spec.value_columns == ["window_end", "count", "avg_score"]


def test_query_spec_columns_for_hopping_windows_with_two_keys():
    spec = QuerySpec(keys=["team", "player"], window=hopping("10 minutes", "5 minutes"),
                     aggregates=[Aggregate("min", "level"), "count"])
    assert spec.key_columns == ["window_start", "window_end", "team", "player"]
    assert spec.value_columns == ["min_level", "count"]
    assert spec.input_columns == ["team", "player", "ts", "level"]


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"keys": None}, "bad group keys: None"),
    ({"keys": ["player", "player"]}, "bad group keys: ['player', 'player']; accepted: distinct"),
    ({"window": "none"}, "bad window: 'none'; accepted: tumbling(..), hopping(..)"),
    ({"event_time": "player"}, "bad event_time column: 'player'"),
    ({"aggregates": ["count", "count(*)"]}, "each aggregate at most once"),
    ({"aggregates": ["sum(score)", "SUM(score)"]}, "each aggregate at most once"),
    ({"aggregates": []}, "bad aggregates: []; accepted: at least one aggregate"),
    ({"keys": []}, "bad group keys: []; accepted: one or more column names"),
    ({"keys": ["player", ""]}, "bad group keys: ['player', '']"),
    ({"keys": ""}, "bad group keys: ''"),
    ({"window": "10 minutes"}, "bad window: '10 minutes'; accepted: tumbling(..)"),
    ({"watermark": "soon"}, "bad watermark delay: 'soon'"),
])
def test_bad_query_spec_is_named(kwargs, named):
    with pytest.raises(BadArgument) as info:
        QuerySpec(**{"keys": ["player"], "window": tumbling("1 minute"), **kwargs})
    assert named in str(info.value)


# --- change feeds -----------------------------------------------------------------------
def feed(*rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["batch", "change", "k", "v"])


def test_apply_changes_last_change_per_key_wins_in_row_order():
    changes = feed((1, "put", "a", 1), (2, "put", "a", 2), (2, "put", "b", 5))
    table = apply_changes(changes, ["k"], ["v"])
    assert table.to_dict("records") == [{"k": "a", "v": 2}, {"k": "b", "v": 5}]
    reversed_ = apply_changes(changes.iloc[[1, 0, 2]], ["k"], ["v"])
    assert reversed_.set_index("k")["v"].to_dict() == {"a": 1, "b": 5}


def test_apply_changes_delete_removes_and_a_later_put_restores():
    changes = feed((1, "put", "a", 1), (1, "put", "b", 2), (2, "delete", "a", None),
                   (3, "delete", "b", None), (4, "put", "b", 7), (4, "delete", "zzz", None))
    table = apply_changes(changes, ["k"], ["v"])
    assert table["k"].tolist() == ["b"] and table["v"].tolist() == [7]
    assert list(table.columns) == ["k", "v"]


def test_apply_changes_on_a_start_table():
    start = pd.DataFrame({"k": ["a", "b", "c"], "v": [1, 2, 3]})
    changes = feed((5, "delete", "a", None), (5, "put", "b", 20), (6, "put", "d", 4))
    table = apply_changes(changes, ["k"], ["v"], start=start)
    assert table.set_index("k")["v"].to_dict() == {"b": 20, "c": 3, "d": 4}
    assert apply_changes(feed(), ["k"], ["v"], start=start)["k"].tolist() == ["a", "b", "c"]


def test_apply_changes_with_compound_keys():
    changes = pd.DataFrame({"change": ["put", "put", "delete"], "w": [1, 2, 1],
                            "k": ["a", "a", "a"], "v": [1, 2, None]})
    table = apply_changes(changes, ["w", "k"], ["v"])
    assert table[["w", "k"]].values.tolist() == [[2, "a"]]


def test_apply_changes_names_unknown_change_types():
    with pytest.raises(ValueError, match=r"\['upsert'\]; accepted: put, delete"):
        apply_changes(feed((1, "upsert", "a", 1), (1, "put", "b", 1)), ["k"], ["v"])


# --- progress ---------------------------------------------------------------------------
def progress(batch: int, rows: int, ops=(), watermark="2026-01-01T00:00:00.000Z") -> dict:
    return {"batchId": batch, "numInputRows": rows, "timestamp": f"2026-01-01T10:00:0{batch}.000Z",
            "inputRowsPerSecond": 1.0, "processedRowsPerSecond": 2.0,
            "durationMs": {"triggerExecution": 100 + batch},
            "eventTime": {"watermark": watermark}, "stateOperators": list(ops)}


def test_progress_frame_sums_operators_and_custom_metrics():
    ops = [{"numRowsTotal": 4, "numRowsUpdated": 3, "numRowsRemoved": 1,
            "numRowsDroppedByWatermark": 2, "memoryUsedBytes": 100, "commitTimeMs": 5,
            "customMetrics": {"rocksdbBytesCopied": 10, "rocksdbCommitFlushLatency": 1}},
           {"numRowsTotal": 6, "numRowsUpdated": 1, "memoryUsedBytes": 50,
            "customMetrics": {"rocksdbBytesCopied": 5}}]
    frame = progress_frame([progress(0, 10, ops)])
    row = frame.iloc[0]
    assert row["state_rows_total"] == 10 and row["state_rows_updated"] == 4
    assert row["state_rows_removed"] == 1 and row["dropped_by_watermark"] == 2
    assert row["state_memory_bytes"] == 150 and row["state_commit_ms"] == 5
    assert row["rocksdbBytesCopied"] == 15 and row["rocksdbCommitFlushLatency"] == 1
    assert row["duration_ms"] == 100 and row["input_rows"] == 10
    assert set(COLUMNS) <= set(frame.columns)


def test_progress_frame_keeps_the_last_report_per_batch_sorted_by_batch():
    frame = progress_frame([progress(1, 7), progress(0, 3), progress(1, 9)])
    assert frame["batch"].tolist() == [0, 1]
    assert frame["input_rows"].tolist() == [3, 9]
    assert frame.index.tolist() == [0, 1]


def test_progress_frame_times_are_naive_utc():
    frame = progress_frame([progress(2, 1, watermark="2026-01-01T09:50:00.000Z")])
    assert frame.loc[0, "timestamp"] == T("2026-01-01 10:00:02")
    assert frame.loc[0, "watermark"] == T("2026-01-01 09:50:00")
    assert frame["timestamp"].dt.tz is None


def test_progress_frame_without_state_operators_has_zeros():
    frame = progress_frame([{"batchId": 0, "timestamp": "2026-01-01T00:00:00.000Z"}])
    assert frame.loc[0, "input_rows"] == 0 and frame.loc[0, "state_rows_total"] == 0
    assert pd.isna(frame.loc[0, "watermark"])


def test_progress_frame_of_nothing_has_the_documented_columns():
    frame = progress_frame([])
    assert list(frame.columns) == COLUMNS
    assert len(frame) == 0


# --- the pandas reference ---------------------------------------------------------------
@pytest.fixture()
def events() -> pd.DataFrame:
    return pd.DataFrame({
        "player": ["a", "a", "b", "a", "b"],
        "score": [1, 4, 10, 7, 2],
        "ts": pd.to_datetime(["2026-01-05 10:01:00", "2026-01-05 10:07:00",
                              "2026-01-05 10:09:59", "2026-01-05 10:10:00",
                              "2026-01-05 10:24:00"]),
    })


AGGS = ["count", "sum(score)", "avg(score)", "max(score)", "min(score)"]


def test_tumbling_reference_counts_sums_averages(events):
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=AGGS)
    got = windowed_reference(events, spec)
    assert list(got.columns) == ["window_start", "window_end", "player", "count", "sum_score",
                                 "avg_score", "max_score", "min_score"]
    expected = [  # (start, player, count, sum, avg, max, min); 10:10 opens the next window
        ("10:00", "a", 2, 5, 2.5, 4, 1), ("10:00", "b", 1, 10, 10.0, 10, 10),
        ("10:10", "a", 1, 7, 7.0, 7, 7), ("10:20", "b", 1, 2, 2.0, 2, 2)]
    assert [(r.window_start.strftime("%H:%M"), r.player, r.count, r.sum_score, r.avg_score,
             r.max_score, r.min_score) for r in got.itertuples()] == expected
    assert (got["window_end"] - got["window_start"] == pd.Timedelta("10min")).all()


def test_hopping_reference_puts_each_event_in_size_over_slide_windows(events):
    spec = QuerySpec(keys=["player"], window=hopping("10 minutes", "5 minutes"),
                     aggregates=["count", "sum(score)"])
    got = windowed_reference(events, spec)
    assert got["count"].sum() == 2 * len(events)
    a = got[got["player"] == "a"].set_index("window_start")
    assert a["count"].to_dict() == {T("2026-01-05 09:55"): 1, T("2026-01-05 10:00"): 2,
                                    T("2026-01-05 10:05"): 2, T("2026-01-05 10:10"): 1}
    assert a.loc[T("2026-01-05 10:05"), "sum_score"] == 11


def test_hopping_reference_with_a_slide_that_does_not_divide_the_size():
    events = pd.DataFrame({"player": ["a"], "ts": pd.to_datetime(["2026-01-05 00:09"])})
    spec = QuerySpec(keys=["player"], window=hopping("10 minutes", "3 minutes"),
                     aggregates=["count"])
    got = windowed_reference(events, spec)
    assert got["window_start"].dt.strftime("%H:%M").tolist() == ["00:00", "00:03", "00:06",
                                                                  "00:09"]


def test_reference_watermark_keeps_windows_ending_after_it(events):
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=["count"])
    kept = windowed_reference(events, spec, watermark=T("2026-01-05 10:10"))
    assert kept["window_end"].min() > T("2026-01-05 10:10")
    assert kept["window_start"].dt.strftime("%H:%M").tolist() == ["10:10", "10:20"]
    assert len(windowed_reference(events, spec, watermark=T("2026-01-05 11:00"))) == 0


def test_reference_accepts_timezone_aware_times(events):
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"), aggregates=["count"])
    aware = events.assign(ts=events["ts"].dt.tz_localize("UTC").dt.tz_convert("Europe/Paris"))
    pd.testing.assert_frame_equal(windowed_reference(aware, spec), windowed_reference(events, spec))


def test_reference_count_of_a_column_skips_missing_values():
    events = pd.DataFrame({"player": ["a", "a"], "score": [1.0, None],
                           "ts": pd.to_datetime(["2026-01-05 10:01", "2026-01-05 10:02"])})
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                     aggregates=["count", "count(score)"])
    got = windowed_reference(events, spec)
    assert got[["count", "count_score"]].values.tolist() == [[2, 1]]


def test_reference_refuses_session_windows(events):
    spec = QuerySpec(keys=["player"], window=session("3 minutes"), aggregates=["count"])
    with pytest.raises(BadArgument, match="'session'; accepted: tumbling, hopping"):
        windowed_reference(events, spec)


# --- error messages ---------------------------------------------------------------------
def test_bad_argument_names_value_and_accepted():
    err = BadArgument("window kind", "weekly", ["tumbling", "hopping"])
    assert str(err) == "bad window kind: 'weekly'; accepted: tumbling, hopping"
    assert (err.what, err.value, err.accepted) == ("window kind", "weekly", "tumbling, hopping")
    assert isinstance(err, ValueError) and isinstance(err, StatekitError)
    assert str(BadArgument("rate", -1, "a positive number")) == \
        "bad rate: -1; accepted: a positive number"


def test_batch_not_retained_shows_the_range_or_none_committed():
    err = BatchNotRetained(9, (2, 7), "/tmp/ck")
    assert str(err) == ("batch 9 is not retained in checkpoint '/tmp/ck'; "
                        "committed batches: 2..7")
    assert isinstance(err, LookupError) and err.batch == 9 and err.available == (2, 7)
    assert str(BatchNotRetained(0, None, "/tmp/ck")).endswith(
        "committed batches: none committed yet")


def test_broker_unreachable_and_topic_not_found_name_the_address_and_topic():
    assert str(BrokerUnreachable("127.0.0.1:9")) == "no Kafka broker answered at '127.0.0.1:9'"
    assert str(BrokerUnreachable("h:1", "timed out")).endswith("'h:1': timed out")
    err = TopicNotFound("gamez", "h:1", ["games", "__consumer_offsets", "alpha"])
    assert str(err) == "topic 'gamez' does not exist on 'h:1'; existing topics: alpha, games"
    assert str(TopicNotFound("x", "h:1")).endswith("existing topics: (none)")


# --- atomic files -------------------------------------------------------------------------
def test_threads_writing_the_same_file_at_once_each_leave_a_whole_file(tmp_path):
    import threading

    from statekit.atomic import write_atomic

    target, errors = tmp_path / "progress" / "0000000001.json", []
    contents = [f'{{"writer": {n}, "pad": "{"x" * 20_000}"}}' for n in range(8)]
    start = threading.Barrier(len(contents))

    def write(text: str) -> None:
        start.wait()
        try:
            for _ in range(20):
                write_atomic(target, text)
        except Exception as exc:  # the race CI hit: a shared temporary name
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(text,)) for text in contents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_text() in contents  # one writer's whole file, never a mix
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary left


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    from statekit.atomic import write_atomic

    target = tmp_path / "ledger.json"
    write_atomic(target, "old")
    with pytest.raises(TypeError):
        write_atomic(target, 42)  # neither bytes nor text
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]


def test_decode_json_reads_compact_and_any_other_json_as_json_loads_does():
    import json

    from statekit.model.changelog_record import decode_json, encode_json

    row = {"player": 'p"07\\é', "count": 3, "score": 1.5, "none": None, "ok": True}
    data = encode_json(row, list(row))
    assert decode_json(data) == row == json.loads(data)
    for other in (b' {"a": 1} ', b'{"a":\n[1, 2]}', b"7", b'"text"', '{"a":1}'):
        assert decode_json(other) == json.loads(other)
    assert decode_json(None) is None
    for bad in (b'{"a":', b'{"a":1} trailing', b"\xff{}", b""):
        with pytest.raises(ValueError) as raised:
            decode_json(bad)
        with pytest.raises(ValueError) as expected:
            json.loads(bad)
        assert str(raised.value) == str(expected.value)


def test_json_table_parses_named_window_times_directly_to_the_same_table():
    from statekit.changelog.arrow import json_table
    from statekit.stores.key_layout import MAX_TIME_MS, ms_to_iso

    starts = [0, 1, 999, 1_767_607_200_000, MAX_TIME_MS - 60_000, 86_399_999]
    keys = [json.dumps({"player": f"p{i}", "team": None if i % 2 else i,
                        "window_start": ms_to_iso(ms), "window_end": ms_to_iso(ms + 60_000)},
                       separators=(",", ":")).encode() for i, ms in enumerate(starts)]
    inferred = json_table(keys)
    direct = json_table(keys, ["window_start", "window_end"])
    assert direct.equals(inferred)  # same columns, order, types and values
    assert direct.column_names == ["player", "team", "window_start", "window_end"]
    assert direct["window_start"].to_pylist()[3] == dt.datetime(2026, 1, 5, 10, 0)
