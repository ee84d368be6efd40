"""The Kafka source's faster paths: values parsed in the source, read tasks packed, consumers
kept between tasks, broker offsets reused while a backlog lasts. Values, never timings."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from statekit.kafka.topics import create_topic
from statekit.spark.kafka_source import (
    JsonValues,
    KafkaInputPartition,
    KafkaStreamReader,
    close_pooled_consumers,
    consumers,
    pack_ranges,
    read_ranges,
    reading,
    register,
)

EVENT = StructType([StructField("player", StringType()), StructField("game", StringType()),
                    StructField("score", LongType()), StructField("ts", TimestampType())])
ALL_TYPES = StructType([
    StructField("s", StringType()), StructField("n", LongType()), StructField("i", IntegerType()),
    StructField("d", DoubleType()), StructField("b", BooleanType()),
    StructField("t", TimestampType())])

GOOD = [
    b'{"player": "p1", "game": "g1", "score": 3, "ts": "2024-01-01T00:00:00.001Z"}',
    b'{"ts": "2024-01-01T02:00:00.5+02:00", "score": -7, "player": "p\\u00e9", "x": [1, {"y": 2}]}',
    b'{}',
    b'{"player": null, "score": 9223372036854775807}',
    b'{"player": "p3", "ts": "2024-06-30T12:00:00Z", "game": "\\ud83d\\ude00"}',
    b'{"player": "p2", "game": "g2", "score": 0, "ts": "2024-12-31T23:59:59.123456Z"}',
]
BAD = [
    None,                                          # tombstone
    b'null',                                       # JSON null (crashes Arrow's reader if first)
    b'[{"player": "p"}]',                          # an array
    b'"text"',                                     # a string
    b'',                                           # empty
    b'not json',
    b'{"player": "p", "score": "5"}',              # a number as text
    b'{"player": "p", "score": 1.0}',              # a float for a long
    b'{"player": 5}',                              # a number for a string (from_json: "5")
    b'{"player": "p", "player": "q"}',             # duplicate key
    b'{"player": "p",\n "score": 1}',              # pretty-printed
    b'{"player": "p"}{"player": "q"}',             # two objects
    b'{"player": "p"} x',                          # trailing text
    b' {"player": "p"}',                           # leading blank
    b'{"ts": 1704067200}',                         # a number for a timestamp
    b'{"ts": "2024-01-01T00:00:00"}',              # no zone
    b'{"ts": "2024-01-01 00:00:00Z"}',             # a blank for the T
    b'{"ts": "2024-02-30T00:00:00Z"}',             # no such day
    b'{"ts": "2024-01-01T00:00:00.1234567Z"}',     # nanoseconds
    b'{"player": "\xff"}',                         # not UTF-8
    b'{"player": "\\ud800"}',                       # a lone surrogate
]


# --- JsonValues, without Spark -------------------------------------------------------------
def test_clean_values_are_parsed_with_their_types():
    rows = JsonValues(EVENT).parse(GOOD).to_pylist()
    assert rows[0] == {"player": "p1", "game": "g1", "score": 3,
                       "ts": pa.scalar(1_704_067_200_001_000, pa.timestamp("us", tz="UTC")).as_py()}
    assert rows[1]["player"] == "pé" and rows[1]["score"] == -7
    assert rows[1]["ts"] == pa.scalar(1_704_067_200_500_000, pa.timestamp("us", tz="UTC")).as_py()
    assert rows[2] == {"player": None, "game": None, "score": None, "ts": None}
    assert rows[3]["score"] == 9223372036854775807
    assert rows[4]["game"] == "\U0001F600" and rows[4]["ts"].hour == 12
    assert rows[5]["ts"].microsecond == 123456
    assert all(r is not None for r in rows)


@pytest.mark.parametrize("value", BAD, ids=[repr(v)[:30] for v in BAD])
def test_anything_doubtful_is_left_to_spark(value):
    good = GOOD[0]
    rows = JsonValues(EVENT).parse([good, value, good]).to_pylist()
    assert rows[1] is None
    assert rows[0] == rows[2] is not None  # its neighbours are still parsed


def test_a_doubtful_first_value_does_not_crash_arrow():
    assert JsonValues(EVENT).parse([b"null", b"null", GOOD[0]]).to_pylist()[:2] == [None, None]


def test_each_type_takes_only_its_own_json():
    jv = JsonValues(ALL_TYPES)
    ok = jv.parse([b'{"s": "a", "n": 1, "i": 2, "d": 1, "b": true, "t": "2024-01-01T00:00:00Z"}'])
    assert ok.to_pylist()[0]["d"] == 1.0 and ok.to_pylist()[0]["b"] is True
    for bad in (b'{"i": 3000000000}', b'{"d": NaN}', b'{"d": "1.5"}', b'{"b": 1}',
                b'{"b": "true"}', b'{"n": 99999999999999999999}'):
        assert jv.parse([bad]).to_pylist() == [None], bad


def test_one_bad_value_among_many_is_isolated():
    values = [GOOD[0]] * 5000
    values[1234] = b'{"score": "x"}'
    values[4321] = b"null"
    parsed = JsonValues(EVENT).parse(values)
    assert parsed.null_count == 2
    assert not parsed.is_valid()[1234].as_py() and not parsed.is_valid()[4321].as_py()


def test_a_chunk_of_bad_values_stays_with_spark_whole():
    parsed = JsonValues(EVENT).parse([b'{"score": "x"}'] * 3000)
    assert parsed.null_count == 3000


@pytest.mark.parametrize("field", [
    StructField("day", DateType()), StructField("tags", ArrayType(StringType())),
    StructField("player", StringType(), nullable=False)], ids=["date", "array", "not-null"])
def test_schemas_it_cannot_match_exactly_are_not_parsed(field):
    jv = JsonValues(StructType([field]))
    assert not jv.enabled
    assert jv.parse([b'{"player": "p"}']).to_pylist() == [None]


# --- read tasks ----------------------------------------------------------------------------
def _ranges(sizes):
    return [KafkaInputPartition("t", p, 10, 10 + n, "host:9092", (), True)
            for p, n in enumerate(sizes)]


@pytest.mark.parametrize(("sizes", "tasks", "expected"), [
    ([12_500] * 4, 2, [25_000, 25_000]),
    ([50, 40, 30, 20], 2, [70, 70]),
    ([5, 5], 8, [5, 5]),
    ([100, 1, 1, 1], 2, [100, 3]),
    ([7, 7, 7], 1, [21]),
])
def test_ranges_are_packed_into_few_tasks_of_similar_size(sizes, tasks, expected):
    packed = pack_ranges(_ranges(sizes), tasks)
    assert sorted(t.records for t in packed) == sorted(expected)
    flat = sorted((r.topic, r.partition) for t in packed for r in t.ranges)
    assert flat == [("t", p) for p in range(len(sizes))]  # every range exactly once


def test_the_reader_plans_at_most_max_read_tasks():
    reader = KafkaStreamReader({"kafka.bootstrap.servers": "host:9092", "subscribe": "a,b",
                                "maxReadTasks": "2"})
    start = {"a": {"0": 0, "1": 0}, "b": {"0": 5, "1": 9}}
    end = {"a": {"0": 100, "1": 90}, "b": {"0": 60, "1": 9}}
    tasks = reader.partitions(start, end)
    assert len(tasks) == 2
    got = sorted((r.topic, r.partition, r.start, r.end) for t in tasks for r in t.ranges)
    assert got == [("a", 0, 0, 100), ("a", 1, 0, 90), ("b", 0, 5, 60)]


def test_max_read_tasks_must_be_positive():
    with pytest.raises(Exception, match="maxReadTasks: '0'"):
        KafkaStreamReader({"kafka.bootstrap.servers": "h:1", "subscribe": "a",
                           "maxReadTasks": "0"})


# --- against the real broker ---------------------------------------------------------------
def _produce(broker, topic, values, partitions=2):
    create_topic(broker.bootstrap_servers, topic, partitions=partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, key=f"k{i}".encode(), value=value, partition=i % partitions)
    assert producer.flush(30) == 0


def _offsets(batches) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of Arrow batches read by the source, in the order read."""
    table = pa.Table.from_batches(list(batches))
    return list(zip(*(table.column(c).to_pylist() for c in ("partition", "offset", "value")),
                    strict=True))


def _range(broker, topic, partition, start, end):
    return KafkaInputPartition(topic, partition, start, end, broker.bootstrap_servers, (), True)


def _kept_readers():
    return {key[-1]: reader for key, reader in consumers._READERS.items()}


def test_readers_are_kept_per_partition_and_read_on_where_they_stopped(broker, topic_name):
    values = [json.dumps({"player": f"p{i}", "score": i}).encode() for i in range(300)]
    _produce(broker, topic_name, values)  # 150 records in each of 2 partitions
    close_pooled_consumers()
    assigned = []
    real = consumers.PartitionReader.position_at

    def counting(self, part):
        went_on = real(self, part)
        assigned.append((part.partition, part.start, not went_on))
        return went_on

    consumers.PartitionReader.position_at = counting
    try:
        first = _offsets(read_ranges([_range(broker, topic_name, 0, 0, 50),
                                      _range(broker, topic_name, 1, 0, 60)], EVENT))
        readers = _kept_readers()
        second = _offsets(read_ranges([_range(broker, topic_name, 1, 60, 150),
                                       _range(broker, topic_name, 0, 50, 100)], EVENT))
        assert _kept_readers() == readers and len(readers) == 2  # the same consumers
        replay = _offsets(read_ranges([_range(broker, topic_name, 0, 50, 100)]))  # a batch again
        after = _offsets(read_ranges([_range(broker, topic_name, 0, 100, 150)]))
    finally:
        consumers.PartitionReader.position_at = real
    # a new consumer is assigned, a reader that goes on is not, a replay is assigned anew
    assert assigned == [(0, 0, True), (1, 0, True), (1, 60, False), (0, 50, False),
                        (0, 50, True), (0, 100, False)]
    assert [(p, o) for p, o, _ in first] == [(0, o) for o in range(50)] + [(1, o) for o in
                                                                            range(60)]
    assert [(p, o) for p, o, _ in second] == [(1, o) for o in range(60, 150)] + [
        (0, o) for o in range(50, 100)]
    assert replay == second[90:]  # the replayed batch reads exactly the same records
    assert [(p, o) for p, o, _ in after] == [(0, o) for o in range(100, 150)]
    assert sorted(v for *_, v in first + second + after) == sorted(values)
    assert close_pooled_consumers() == 2 and not consumers._READERS


def test_a_reader_at_the_log_end_rests_and_reads_what_comes_later(broker, topic_name):
    _produce(broker, topic_name, [b'{"n": 1}'] * 20, partitions=1)
    close_pooled_consumers()
    assert len(_offsets(read_ranges([_range(broker, topic_name, 0, 0, 20)]))) == 20
    reader = _kept_readers()[0]
    assert reader.paused and reader.next_offset == 20  # no fetching at the end of the log
    _produce(broker, topic_name, [b'{"n": 2}'] * 10, partitions=1)
    later = _offsets(read_ranges([_range(broker, topic_name, 0, 20, 30)]))
    assert [(o, v) for _, o, v in later] == [(o, b'{"n": 2}') for o in range(20, 30)]
    assert _kept_readers()[0] is reader
    close_pooled_consumers()


def test_a_reader_resting_at_the_log_end_reads_a_range_elsewhere(broker, topic_name,
                                                                  monkeypatch):
    """A consumer paused at the log end, then given a range that starts elsewhere (a restart
    from an older checkpoint, another query on the same topic): assign() leaves librdkafka's
    pause in place, so the reader must resume, not wait for records that never come."""
    monkeypatch.setattr(reading, "_STALL_S", 5.0)  # the old code failed here after the stall
    monkeypatch.setattr(reading, "_REASSIGN_S", 60.0)  # no fresh assignment to hide behind
    _produce(broker, topic_name, [f"{i}".encode() for i in range(20)], partitions=1)
    close_pooled_consumers()
    assert len(_offsets(read_ranges([_range(broker, topic_name, 0, 0, 20)]))) == 20
    assert _kept_readers()[0].paused
    again = _offsets(read_ranges([_range(broker, topic_name, 0, 5, 12)]))
    assert [(o, v) for _, o, v in again] == [(o, f"{o}".encode()) for o in range(5, 12)]
    close_pooled_consumers()


class _Recording:
    """A real consumer whose pause, resume and assign calls are written down, in order."""

    def __init__(self, consumer, calls: list):
        self._consumer, self._calls = consumer, calls

    def __getattr__(self, name):
        method = getattr(self._consumer, name)
        if name not in ("pause", "resume", "assign"):
            return method

        def recorded(partitions):
            self._calls.append((name, [(tp.partition, tp.offset) for tp in partitions]))
            return method(partitions)
        return recorded


def test_a_live_tail_reads_every_record_once_resuming_before_assigning(broker, topic_name):
    """A live query's ranges start at the log end where its readers rest, paused. librdkafka
    wakes a partition's fetcher for assign() but not for resume(): resumed alone, or after
    the assign(), its first records came 0.5-1 s late (every such batch, measured). So a
    resting reader is resumed, then assigned its range's start; every record arrives once."""
    _produce(broker, topic_name, [f"0-{i}".encode() for i in range(20)])  # 10 per partition
    close_pooled_consumers()
    first = _offsets(read_ranges([_range(broker, topic_name, 0, 0, 10),
                                  _range(broker, topic_name, 1, 0, 10)]))
    readers = _kept_readers()
    assert all(r.paused for r in readers.values()) and len(first) == 20
    calls: list = []
    for reader in readers.values():
        reader.consumer = _Recording(reader.consumer, calls)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    later = []
    for rnd in range(1, 4):
        for i in range(20):
            producer.produce(topic_name, value=f"{rnd}-{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        start, end = 10 * rnd, 10 * (rnd + 1)
        later += _offsets(read_ranges([_range(broker, topic_name, 0, start, end),
                                       _range(broker, topic_name, 1, start, end)]))
    assert _kept_readers() == readers  # the same consumers, round after round
    # per round and partition: resume (before) assign at the range's start, pause at its end
    assert calls == [call for rnd in range(1, 4) for p in (0, 1) for call in (
        ("resume", [(p, -1001)]), ("assign", [(p, 10 * rnd)]), ("pause", [(p, -1001)]))]
    assert [(p, o) for p, o, _ in later] == [(p, o) for rnd in range(1, 4) for p in (0, 1)
                                             for o in range(10 * rnd, 10 * (rnd + 1))]
    assert sorted(v for *_, v in later) == sorted(f"{rnd}-{i}".encode() for rnd in range(1, 4)
                                                  for i in range(20))
    close_pooled_consumers()


def test_ranges_over_transaction_markers_read_every_record_once(broker, topic_name):
    """Commit markers take offsets no record has: a range's records are fewer than its
    offsets, so a read asks for more and gets records past the range's end, which the next
    range must still get."""
    from statekit.kafka.clients import plain_consumer
    from statekit.kafka.offsets import end_offsets
    from statekit.kafka.transactions import transactional_producer

    create_topic(broker.bootstrap_servers, topic_name, partitions=1)
    producer = transactional_producer(broker, f"{topic_name}-tx")
    for txn in range(6):
        producer.begin_transaction()
        for i in range(7):
            producer.produce(topic_name, value=f"{txn}-{i}".encode(), partition=0)
        producer.commit_transaction(30)
    consumer = plain_consumer(broker)
    end = end_offsets(consumer, topic_name, [0])[0][1]
    consumer.close()
    assert end > 42  # markers between the records
    close_pooled_consumers()
    read = []
    for start in range(0, end, 5):  # ranges that start and end anywhere, markers included
        read += _offsets(read_ranges([_range(broker, topic_name, 0, start, min(end, start + 5))]))
        assert all(start <= o < start + 5 for _, o, _ in read[-5:] if o >= start)
    offsets = [o for _, o, _ in read]
    assert offsets == sorted(set(offsets))  # each once, in order
    assert [v.decode() for *_, v in read] == [f"{t}-{i}" for t in range(6) for i in range(7)]
    close_pooled_consumers()


def test_one_partition_read_by_two_tasks_at_once_keeps_one_consumer(broker, topic_name,
                                                                    monkeypatch):
    """Two tasks of this worker read ranges of one partition at the same time: each reads
    exactly its own records, and when both are done one consumer is kept, the other closed
    (not left open behind the kept one)."""
    _produce(broker, topic_name, [f"{i}".encode() for i in range(100)], partitions=1)
    close_pooled_consumers()
    made = []
    take = consumers.take_reader
    monkeypatch.setattr(reading, "take_reader", lambda part: made.append(take(part)) or made[-1])
    first = read_ranges([_range(broker, topic_name, 0, 0, 50)])
    second = read_ranges([_range(broker, topic_name, 0, 50, 100)])
    a, b = next(first), next(second)  # both tasks hold a consumer of partition 0
    assert len({id(r) for r in made}) == 2 and not consumers._READERS  # two, both taken
    rows = _offsets([a, *first]), _offsets([b, *second])
    assert [o for _, o, _ in rows[0]] == list(range(50))
    assert [o for _, o, _ in rows[1]] == list(range(50, 100))
    kept = _kept_readers()
    assert list(kept) == [0] and kept[0].next_offset == 100  # the one given back last
    assert close_pooled_consumers() == 1
    with pytest.raises(RuntimeError, match="closed"):
        made[0].consumer.assignment()  # the other consumer was closed, not leaked


def test_a_task_that_fails_does_not_keep_its_consumer(broker, topic_name):
    _produce(broker, topic_name, [b"{}"] * 10, partitions=1)
    close_pooled_consumers()
    gone = KafkaInputPartition(topic_name, 0, 0, 50, broker.bootstrap_servers, (), True)
    reading._STALL_S, saved = 2.0, reading._STALL_S
    try:
        with pytest.raises(Exception, match="timed out|no longer on the broker"):
            list(read_ranges([gone]))
    finally:
        reading._STALL_S = saved
    assert not consumers._READERS


@pytest.mark.timeout(120)
def test_a_broker_lost_while_planning_a_batch_is_named_like_a_stalled_read():
    """Reads are fast now, so a broker that stops answering is often found by the driver
    asking for end offsets, not by a read task: the error is the same one, naming the
    address and that a restart resumes from the checkpoint (and query._failure knows it)."""
    from statekit.errors import StatekitError
    from statekit.query.failures import BROKER_STALL as _BROKER_STALL

    reader = KafkaStreamReader({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "events"})
    with pytest.raises(StatekitError) as err:
        reader.latestOffset({}, ReadAllAvailable())
    message = str(err.value)
    assert "offsets of events" in message and "not answering" in message
    assert "resumes from its last commit" in message
    assert _BROKER_STALL.search(message)["servers"] == "127.0.0.1:9"


def test_a_backlog_is_planned_without_asking_the_broker_each_batch(broker, topic_name):
    _produce(broker, topic_name, [b"{}"] * 1000)
    options = {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic_name,
               "maxOffsetsPerTrigger": "300"}
    reader, fresh = KafkaStreamReader(options), KafkaStreamReader(options)
    asked = []
    original = reader._broker_offsets
    reader._broker_offsets = lambda: asked.append(1) or original()
    start = reader.initialOffset()
    assert start == fresh.initialOffset() and len(asked) == 1
    planned = []
    while True:
        end = reader.latestOffset(start, ReadMaxRows(300))
        assert end == fresh.latestOffset(start, ReadMaxRows(300))  # the same plan
        if end == start:
            break
        planned.append(sum(end[topic_name].values()) - sum(start[topic_name].values()))
        start = end
    assert planned == [300, 300, 300, 100]
    # asked once at the start, then only when fewer than 300 records were known to wait
    assert len(asked) == 3
    assert reader.latestOffset(start, ReadAllAvailable()) == start and len(asked) == 4
    reader.stop(), fresh.stop()


def test_values_parsed_in_the_source_equal_from_json(spark, broker, topic_name):
    """Every row the source parsed is what Spark's from_json gives; every clean row is parsed."""
    values = [v for v in GOOD + BAD if v is not None] + [GOOD[0]] * 50
    _produce(broker, topic_name, values)
    register(spark)
    raw = (spark.readStream.format("statekit_kafka")
           .option("kafka.bootstrap.servers", broker.bootstrap_servers)
           .option("subscribe", topic_name).option("valueSchema", EVENT.json())
           .option("maxReadTasks", "1").load())
    spark_parse = F.from_json(F.col("value").cast("string"), EVENT, {"mode": "PERMISSIVE"})
    out = raw.select("offset", "partition", "value", "parsed", spark_parse.alias("spark"))
    query = out.writeStream.format("memory").queryName("parsed_vs_from_json").start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.table("parsed_vs_from_json").collect()
    assert len(rows) == len(values)
    parsed = [r for r in rows if r["parsed"] is not None]
    assert all(r["parsed"] == r["spark"] for r in parsed)
    clean = {v for v in GOOD}
    assert {bytes(r["value"]) for r in parsed} == clean
    assert sum(1 for r in rows if bytes(r["value"]) in clean) == len(parsed)


def test_a_kept_reader_that_goes_silent_is_assigned_afresh_once(broker, topic_name,
                                                                 monkeypatch):
    """A kept consumer that delivers nothing where the broker holds records (here: paused
    behind the reader's back) is assigned its position afresh once, and the range is read
    whole, before the stall error could come."""
    monkeypatch.setattr(reading, "_REASSIGN_S", 0.5)
    monkeypatch.setattr(reading, "_STALL_S", 20.0)
    _produce(broker, topic_name, [f"{i}".encode() for i in range(40)], partitions=1)
    close_pooled_consumers()
    assert len(_offsets(read_ranges([_range(broker, topic_name, 0, 0, 20)]))) == 20
    reader = _kept_readers()[0]
    from confluent_kafka import TopicPartition

    reader.consumer.pause([TopicPartition(topic_name, 0)])  # silent, unknown to the reader
    reader.stash = []
    went_on = _offsets(read_ranges([_range(broker, topic_name, 0, 20, 40)]))
    assert [(o, v) for _, o, v in went_on] == [(o, f"{o}".encode()) for o in range(20, 40)]
    close_pooled_consumers()
