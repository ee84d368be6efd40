"""Bad input, found with a real broker and Spark: values that are not UTF-8, absurd event times,
and the source's fast parser agreeing with Spark's ``from_json`` row by row."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

import statekit as sk
from statekit.datasets import GAME_EVENT_SCHEMA, parse_game_events
from statekit.kafka.topics import create_topic
from statekit.model.query_spec import QuerySpec, tumbling
from statekit.query.parsing import CORRUPT, JSON_OPTIONS, parse_events
from statekit.reference.aggregates import windowed_reference
from statekit.restore import restore_stores
from statekit.spark.kafka_source import JsonValues

SCHEMA = StructType([StructField("player", StringType()), StructField("game", StringType()),
                     StructField("score", LongType()), StructField("ts", TimestampType())])
REQUIRED = ["player", "ts"]
RECORD_MS = 1_767_607_200_000  # 2026-01-05T10:00:00Z: every record's Kafka timestamp here
FAR_9999 = pd.Timestamp(np.datetime64("9999-12-31T23:50:00", "us"))
FAR_57983 = pd.Timestamp(np.datetime64("57983-03-30T16:00:00", "us"))

#: ``ts`` values (JSON text: strings quoted, numbers bare) fed to both parsers
TIMES = [
    # offsets: Java's ZoneOffset allows ±18:00, Arrow alone reads up to ±23:59
    '"2026-01-05T10:00:00Z"', '"2026-01-05T10:00:00+18:00"', '"2026-01-05T10:00:00-18:00"',
    '"2026-01-05T10:00:00+18:01"', '"2026-01-05T10:00:00-18:01"', '"2026-01-05T10:00:00+19:00"',
    '"2026-01-05T10:00:00+23:59"', '"2026-01-05T10:00:00+17:59"', '"2026-01-05T10:00:00-00:00"',
    '"2026-01-05T10:00:00+05:60"', '"2026-01-05T10:00:00+0530"', '"2026-01-05T10:00:00+05"',
    '"2026-01-05T10:00:00"', '"2026-01-05T10:00:00z"', '"2026-01-05t10:00:00Z"',
    '"2026-01-05T10:00:00UTC"',
    # fractions of 0..9 digits
    '"2026-01-05T10:00:00.Z"', *[f'"2026-01-05T10:00:00.{"123456789"[:n]}Z"' for n in range(1, 10)],
    # days and hours that exist or not
    '"2024-02-29T00:00:00Z"', '"2023-02-29T00:00:00Z"', '"2026-02-30T00:00:00Z"',
    '"2026-01-05T24:00:00Z"', '"2026-01-05T25:00:00Z"', '"2026-01-05T10:60:00Z"',
    '"2026-01-05T10:00:60Z"', '"2026-13-05T10:00:00Z"', '"2026-00-05T10:00:00Z"',
    # years at the edges
    '"0000-01-01T00:00:00Z"', '"0001-01-01T00:00:00Z"', '"1500-01-01T00:00:00Z"',
    '"1582-10-10T00:00:00Z"', '"9999-12-31T23:59:59.999999Z"', '"10000-01-01T00:00:00Z"',
    '"+10000-01-01T00:00:00Z"', '"-0001-01-01T00:00:00Z"',
    # blanks and text around
    '" 2026-01-05T10:00:00Z"', '"2026-01-05T10:00:00Z "', '"2026-01-05T10:00:00Zx"',
    '"2026-01-05 10:00:00Z"', '"2026-1-5T10:00:00Z"', '"2026-01-05"', '""',
    # numbers (Spark: whole seconds since the epoch) and strings that are numbers
    "1767607200", "1767607200000", "-1", "0", "-0", "1.5", "1e3", "1767607200.5", "1e20",
    "9223372036854775807", "99999999999999999999", "true", "null",
    '"1767607200"', '"1767607200000"',
]
#: other values: not UTF-8, NaN, shapes around one object
OTHERS = [
    b'{"player": "p\xff", "ts": "2026-01-05T10:00:00Z"}',                # a bad byte in a key field
    b'{"player": "%d", "note": "caf\xe9", "ts": "2026-01-05T10:00:00Z"}',  # ... in an extra field
    b"\xff\xfe not json",
    b'{"player": "%d", "score": NaN, "ts": "2026-01-05T10:00:00Z"}',
    b'{"player": "%d", "score": "NaN", "ts": "2026-01-05T10:00:00Z"}',
    b'{"player": "%d", "score": 1.0, "ts": "2026-01-05T10:00:00Z"}',
    b'{"player": "%d", "ts": "2026-01-05T10:00:00Z"} trailing',
    b'{"player": "%d", "ts": "2026-01-05T10:00:00Z"}{"player": "x"}',
    b' {"player": "%d", "ts": "2026-01-05T10:00:00Z"}',
    b'{"player": "%d", "player": "again", "ts": "2026-01-05T10:00:00Z"}',
    b'{"player": "%d",\n "ts": "2026-01-05T10:00:00Z"}',
    b'{"player": "%d", "ts": "2026-01-05T10:00:00Z", "x": "\\ud800"}',
]


def edge_values() -> list[bytes]:
    """Every edge case as one event value, each with its own player (so rows can be matched)."""
    values = [b'{"player": "%d", "game": "g", "score": 3, "ts": %s}' % (i, t.encode())
              for i, t in enumerate(TIMES)]
    return values + [v % (len(values) + i) if b"%d" in v else v for i, v in enumerate(OTHERS)]


def raw_records(spark, values: list[bytes], record_ms: int = RECORD_MS, parsed: bool = True):
    """A batch DataFrame shaped like statekit's source: Kafka columns (+ ``parsed``)."""
    n = len(values)
    columns = {
        "key": pa.array([b"k"] * n, pa.binary()), "value": pa.array(values, pa.binary()),
        "topic": pa.array(["t"] * n), "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([record_ms * 1000] * n, pa.timestamp("us", "UTC")),
        "timestampType": pa.array([0] * n, pa.int32())}
    if parsed:
        columns["parsed"] = JsonValues(SCHEMA).parse(values)
    return spark.createDataFrame(pa.table(columns))


def event_rows(events) -> list[tuple]:
    """Events with the time as epoch microseconds (Python's datetime stops at year 9999)."""
    return sorted(tuple(r) for r in events.select(
        "player", "game", "score", F.unix_micros("ts").alias("ts")).collect())


def malformed_rows(malformed) -> list[tuple]:
    return sorted(tuple(r) for r in malformed.select("offset", "reason").collect())


# --- the source's parser and Spark's from_json ---------------------------------------------
def test_the_source_parser_agrees_with_from_json_row_by_row(spark):
    """Where the source parses a value, its row is exactly ``from_json``'s (with the query's
    options); a value it cannot vouch for is left to Spark (``parsed`` null)."""
    values = edge_values()
    raw = raw_records(spark, values)
    with_corrupt = StructType([*SCHEMA.fields, StructField(CORRUPT, StringType())])
    spark_event = F.from_json(F.col("value").cast("string"), with_corrupt, JSON_OPTIONS)
    rows = raw.select("offset", spark_event.alias("e"), "parsed").select(
        "offset", *[F.col(f"{side}.{n}").alias(f"{side}_{n}") for side in ("e", "parsed")
                    for n in ("player", "game", "score")],
        F.unix_micros("e.ts").alias("e_ts"), F.unix_micros("parsed.ts").alias("parsed_ts"),
        F.col(f"e.{CORRUPT}").isNotNull().alias("corrupt"),
        F.col("parsed").isNotNull().alias("fast")).orderBy("offset").collect()
    assert len(rows) == len(values)
    disagree = [values[r.offset] for r in rows if r.fast and (r.corrupt or any(
        r[f"e_{n}"] != r[f"parsed_{n}"] for n in ("player", "game", "score", "ts")))]
    assert disagree == []
    fast = [TIMES[r.offset] for r in rows if r.fast and r.offset < len(TIMES)]
    assert fast == [  # what the source parses itself: the strict ISO instants Spark reads alike
        '"2026-01-05T10:00:00Z"', '"2026-01-05T10:00:00+18:00"', '"2026-01-05T10:00:00-18:00"',
        '"2026-01-05T10:00:00+17:59"', '"2026-01-05T10:00:00-00:00"',
        *[f'"2026-01-05T10:00:00.{"123456789"[:n]}Z"' for n in range(1, 7)],
        '"2024-02-29T00:00:00Z"', '"0000-01-01T00:00:00Z"', '"0001-01-01T00:00:00Z"',
        '"1500-01-01T00:00:00Z"', '"1582-10-10T00:00:00Z"', '"9999-12-31T23:59:59.999999Z"',
        "null"]
    assert not any(r.fast for r in rows[len(TIMES):][:3])  # no bytes that are not UTF-8


@pytest.mark.parametrize("bound", ["1 day", None])
def test_events_and_malformed_are_the_same_with_or_without_the_source_parser(spark, bound):
    """The query's whole rule (``parse_events``) over the same records, once with the
    source's ``parsed`` column and once with Spark's ``from_json`` alone: row for row."""
    values = edge_values()
    outcomes = []
    for parsed in (True, False):
        events, malformed = parse_events(raw_records(spark, values, parsed=parsed), SCHEMA,
                                         REQUIRED, event_time="ts", max_event_time_ahead=bound)
        outcomes.append((event_rows(events), malformed_rows(malformed)))
    (events, malformed), (spark_events, spark_malformed) = outcomes
    assert events == spark_events and malformed == spark_malformed
    assert len(events) + len(malformed) == len(values)
    reasons = dict(malformed)
    assert [reasons[len(TIMES) + i] for i in range(3)] == ["not UTF-8"] * 3
    assert reasons[TIMES.index('"2026-01-05T10:00:00+19:00"')] == \
        "ts is not a timestamp: 2026-01-05T10:00:00+19:00"
    assert TIMES.index('"2026-01-05T10:00:00+18:00"') not in reasons


# --- the shapes of a value, by Spark, the source and the pandas reference ------------------
GOOD = '{"player": "p1", "game": "g1", "score": 5, "ts": "2026-01-05T10:00:00Z"}'
SHAPES = {  # value → what Spark's from_json makes of it (None: an event)
    GOOD: None,
    GOOD + " trailing": None,                       # Jackson stops after the first value
    GOOD + "trailing": None,
    GOOD + '{"player": "p2"}': None,
    GOOD + " {": None,
    GOOD + " ]": None,
    GOOD + "}": None,
    GOOD + ",": None,
    GOOD + " 7": None,
    GOOD + ' "x"': None,
    GOOD + " // a comment": None,
    " " + GOOD: None,
    "\t" + GOOD + "\r\n": None,
    "[" + GOOD + "]": "not a JSON object",
    '"text"': "not a JSON object",
    "7": "not a JSON object",
    "": "not a JSON object",
    "   ": "not a JSON object",
    "x" + GOOD: "not a JSON object",
    '{"player": "p1", "ts": "2026-01-05T10:00:00Z"': "not a JSON object",
}


def test_a_json_object_followed_by_text_is_an_event_for_spark_the_source_and_the_reference(
        spark):
    lines = list(SHAPES)
    expected_bad = [(i, reason) for i, reason in enumerate(SHAPES.values()) if reason]
    for parsed in (True, False):
        events, malformed = parse_events(
            raw_records(spark, [v.encode() for v in lines], parsed=parsed), SCHEMA, REQUIRED,
            event_time="ts", max_event_time_ahead="1 day")
        assert malformed_rows(malformed) == expected_bad
        assert set(event_rows(events)) == {("p1", "g1", 5, RECORD_MS * 1000)}
    good, bad = parse_game_events(lines)
    assert list(zip(bad["line_no"] - 1, bad["reason"], strict=True)) == expected_bad
    assert len(good) == len(lines) - len(expected_bad)
    assert set(good["player"]) == {"p1"} and set(good["score"]) == {5}


def test_a_nan_for_a_whole_number_names_the_field(spark):
    values = [b'{"player": "p1", "score": NaN, "ts": "2026-01-05T10:00:00Z"}',
              b'{"player": "p1", "score": Infinity, "ts": "2026-01-05T10:00:00Z"}',
              b'{"player": "p1", "score": "NaN", "ts": "2026-01-05T10:00:00Z"}']
    _, malformed = parse_events(raw_records(spark, values), SCHEMA, REQUIRED)
    assert [r for _, r in malformed_rows(malformed)] == [
        'score is not a bigint: "NaN"', 'score is not a bigint: "Infinity"',
        "score is not a bigint: NaN"]


# --- a bound on plausible event times --------------------------------------------------------
def test_event_times_far_ahead_of_their_record_are_malformed_with_the_reason(spark):
    day_ms = 86_400_000
    times = {
        f'"{pd.Timestamp(RECORD_MS + day_ms, unit="ms").isoformat()}Z"': None,  # exactly 1 day
        f'"{pd.Timestamp(RECORD_MS + day_ms + 1, unit="ms").isoformat()}Z"':
            "ts is more than 1 day after its Kafka record's timestamp 2026-01-05 10:00:00: "
            "2026-01-06 10:00:00.001",
        '"9999-12-31T23:59:59Z"': "ts is more than 1 day after its Kafka record's timestamp "
                                  "2026-01-05 10:00:00: 9999-12-31 23:59:59",
        str(RECORD_MS): "ts is more than 1 day after its Kafka record's timestamp "
                        "2026-01-05 10:00:00: +57983-03-30 16:00:00 (a JSON number is read as "
                        "seconds since the epoch: milliseconds?)",
        str(RECORD_MS // 1000): None,                       # epoch seconds: what Spark expects
        '"1970-01-01T00:00:00Z"': None,                     # long before its record: fine
    }
    values = [b'{"player": "p%d", "ts": %s}' % (i, t.encode()) for i, t in enumerate(times)]
    events, malformed = parse_events(raw_records(spark, values), SCHEMA, REQUIRED,
                                     event_time="ts", max_event_time_ahead="1 day")
    expected = [(i, reason) for i, reason in enumerate(times.values()) if reason]
    assert malformed_rows(malformed) == expected
    assert len(event_rows(events)) == len(times) - len(expected)
    off, _ = parse_events(raw_records(spark, values), SCHEMA, REQUIRED, event_time="ts")
    assert len(event_rows(off)) == len(times)  # no bound: Spark's own behaviour


def test_the_bound_is_a_spec_option_with_a_default_and_none_for_no_bound():
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"))
    assert spec.max_event_time_ahead == "1 day" and "max_event_time_ahead" not in spec.to_dict()
    for bound in (None, "6 hours"):
        changed = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                            max_event_time_ahead=bound)
        assert changed.to_dict()["max_event_time_ahead"] == bound
        assert QuerySpec.from_dict(json.loads(json.dumps(changed.to_dict()))) == changed
    for bad in ("soon", 86_400_000, "0 days", "-1 day"):
        with pytest.raises(sk.BadArgument, match="max_event_time_ahead: .*or None for no bound"):
            QuerySpec(keys=["player"], window=None, max_event_time_ahead=bad)


def test_the_bound_is_not_given_twice():
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"))
    with pytest.raises(sk.BadArgument, match="max_event_time_ahead with spec"):
        sk.start_query("anything", spec, max_event_time_ahead=None)


# --- end to end: a real topic, the query and every reader ----------------------------------
def produce(broker, topic: str, records: list[tuple[bytes, bytes, int]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for key, value, ms in records:
        producer.produce(topic, key=key, value=value, timestamp=ms, partition=0)
    assert producer.flush(60) == 0


def game_event(player: str, score: int, minute: int) -> tuple[bytes, bytes, int]:
    ms = RECORD_MS + minute * 60_000
    ts = pd.Timestamp(ms, unit="ms").strftime("%Y-%m-%dT%H:%M:%SZ")
    return player.encode(), json.dumps({"player": player, "score": score, "ts": ts}).encode(), ms


BAD_RECORDS = [  # (key, value, Kafka timestamp ms), then the reason
    ((b"k\xe9", b'{"player": "a", "score": 5, "ts": "2026-01-05T10:03:00Z", "note": "caf\xe9"}',
      RECORD_MS), "not UTF-8"),
    ((None, b"\xff\xfe\x00", RECORD_MS), "not UTF-8"),
    ((b"b", b'{"player": "b", "score": 1, "ts": "9999-12-31T23:59:59Z"}', RECORD_MS),
     "ts is more than 1 day after its Kafka record's timestamp 2026-01-05 10:00:00: "
     "9999-12-31 23:59:59"),
    ((b"b", b'{"player": "b", "score": 1, "ts": %d}' % RECORD_MS, RECORD_MS),
     "ts is more than 1 day after its Kafka record's timestamp 2026-01-05 10:00:00: "
     "+57983-03-30 16:00:00 (a JSON number is read as seconds since the epoch: milliseconds?)"),
]
GOOD_BEFORE = [game_event("a", 1, 0), game_event("b", 2, 1), game_event("a", 3, 2)]
GOOD_AFTER = [game_event("a", 4, 12), game_event("b", 5, 13), game_event("a", 6, 14),
              game_event("b", 7, 15)]


@pytest.fixture(scope="module")
def bad_topic(broker) -> str:
    create_topic(broker.bootstrap_servers, "bad-input", 1)
    produce(broker, "bad-input", [*GOOD_BEFORE, *[r for r, _ in BAD_RECORDS], *GOOD_AFTER])
    return "bad-input"


def start(spark, broker, topic, tmp_path, name, **options):
    return sk.start_query(topic, keys=["player"], window=tumbling("10 minutes"),
                          aggregates=["count", "sum(score)"], event_schema=GAME_EVENT_SCHEMA,
                          spark=spark, kafka=broker, checkpoint=str(tmp_path / name),
                          name=name, max_offsets_per_trigger=3, trigger="100 milliseconds",
                          **options)


def expected_state(records, watermark: pd.Timestamp) -> pd.DataFrame:
    events = pd.DataFrame([json.loads(value) for _, value, _ in records])
    events["ts"] = pd.to_datetime(events["ts"], utc=True).dt.tz_convert(None)
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                     aggregates=["count", "sum(score)"])
    return windowed_reference(events, spec, watermark=watermark)


@pytest.mark.timeout(600)
def test_bad_records_are_kept_aside_and_the_state_is_what_pandas_gives(spark, broker, bad_topic,
                                                                        tmp_path):
    query = start(spark, broker, bad_topic, tmp_path, "bad-input-bounded")
    try:
        query.wait_until_drained()
        kept = query.malformed()
        assert kept["offset"].tolist() == [3, 4, 5, 6]  # after GOOD_BEFORE
        assert kept["reason"].tolist() == [reason for _, reason in BAD_RECORDS]
        assert kept["value_bytes"].tolist() == [value for (_, value, _), _ in BAD_RECORDS]
        assert kept["value"].iloc[0].endswith('"note": "caf\\xe9"}')  # the bad byte, escaped
        assert kept["value"].iloc[1] == "\\xff\\xfe\x00" and kept["key"].iloc[0] == "k\\xe9"
        assert kept["key"].iloc[1] is None
        assert query.malformed_count() == 4
        assert query.late_events() == 0  # the absurd times did not move the watermark
        watermark = query.progress()["watermark"].iloc[-1]
        assert watermark == pd.Timestamp("2026-01-05 10:05")
        snapshot = query.snapshot(sort=True).drop(columns="partition")
        expected = expected_state([*GOOD_BEFORE, *GOOD_AFTER], watermark)
        pd.testing.assert_frame_equal(snapshot, expected, check_dtype=False)
    finally:
        query.close()


@pytest.mark.slow  # ~1 min: a query, its changelog and a restore
@pytest.mark.timeout(900)
def test_without_the_bound_every_reader_keeps_the_far_times_spark_accepted(spark, broker,
                                                                          bad_topic, tmp_path):
    """Spark's own behaviour: the times are events. Batches of 3 records: the year-9999 event
    comes in batch 1, which moves the watermark to year 9999. Batch 2 still takes its events
    (Spark drops late rows by the watermark of the batch before) but evicts every 2026 window;
    from batch 3 on, every 2026 event is dropped as late."""
    query = start(spark, broker, bad_topic, tmp_path, "bad-input-unbounded",
                  max_event_time_ahead=None)
    try:
        query.wait_until_drained()
        assert query.malformed()["reason"].tolist() == ["not UTF-8", "not UTF-8"]
        assert query.late_events() == 2  # GOOD_AFTER in batch 3: what the bound prevents
        progress = query.progress()
        assert progress["watermark"].max() == FAR_57983 - pd.Timedelta(minutes=10).as_unit("us")
        far = {FAR_9999, FAR_57983}
        changes = query.changes(from_batch=0)
        assert far <= set(changes.loc[changes["change"] == "put", "window_start"])
        snapshots = [query.snapshot(batch=b) for b in range(query.last_batch + 1)]
        assert far <= {t for s in snapshots for t in s["window_start"]}
        snapshot = query.snapshot(sort=True)
        assert snapshot["window_start"].tolist() == [FAR_57983]
        assert snapshot["window_start"].dtype == "datetime64[us]"
        assert far <= set(query.read_changelog().records["window_start"])
        with restore_stores(broker, query.changelog_topic, query.spec, tmp_path / "stores") as r:
            restored = r.table()
        pd.testing.assert_frame_equal(restored[snapshot.columns], snapshot, check_dtype=False)
    finally:
        query.close()


def test_the_pandas_reference_applies_the_same_bound():
    from statekit.reference.aggregates import too_far_ahead

    record = pd.Series([pd.Timestamp(RECORD_MS, unit="ms")] * 4)
    day = pd.Timedelta(days=1)
    times = pd.Series([record[0] + day, record[0] + day + pd.Timedelta(milliseconds=1),
                       pd.Timestamp(0), None]).astype("datetime64[ns]")
    spec = QuerySpec(keys=["player"], window=tumbling("10 minutes"))
    assert too_far_ahead(times, record, spec).tolist() == [False, True, False, False]
    far = pd.Series(np.array(["57983-03-30T16:00:00"], dtype="datetime64[us]"))
    assert too_far_ahead(far, record[:1], spec).tolist() == [True]
    unbounded = QuerySpec(keys=["player"], window=tumbling("10 minutes"),
                          max_event_time_ahead=None)
    assert not too_far_ahead(far, record[:1], unbounded).any()
