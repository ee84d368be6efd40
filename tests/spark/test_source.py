"""The Python Kafka source ``statekit_kafka``: real broker, real Spark."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from confluent_kafka import Producer
from helpers.murmur2 import murmur2_partition
from pyspark.errors import StreamingQueryException

from statekit.kafka.topics import create_topic, delete_topic
from statekit.spark.kafka_source import cap_offsets, register

PARTITIONS = 3
RECORDS = 3000
BASE_TS = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC, in ms
KAFKA_SCHEMA = [("key", "binary"), ("value", "binary"), ("topic", "string"),
                ("partition", "int"), ("offset", "bigint"), ("timestamp", "timestamp"),
                ("timestampType", "int")]


# --- helpers ----------------------------------------------------------------------------
def produce(bootstrap_servers: str, topic: str, values: list[str], *, partition: int | None = None,
            first_ts: int = BASE_TS) -> pd.DataFrame:
    """Produce ``values`` (key ``k<i % 97>``, timestamp ``first_ts + i s``); what was delivered."""
    delivered, errors = [], []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.key(), msg.value(), msg.partition(), msg.offset(),
                              msg.timestamp()[1]))

    producer = Producer({"bootstrap.servers": bootstrap_servers, "partitioner": "murmur2_random",
                         "linger.ms": 5})
    for i, value in enumerate(values):
        extra = {} if partition is None else {"partition": partition}
        producer.produce(topic, key=f"k{i % 97}".encode(), value=value.encode(),
                         timestamp=first_ts + i * 1000, on_delivery=report, **extra)
    assert producer.flush(60) == 0
    del producer
    assert not errors
    return pd.DataFrame(delivered, columns=["key", "value", "partition", "offset", "ts_ms"])


def stream(spark, broker, topic: str, **options):
    register(spark)
    reader = (spark.readStream.format("statekit_kafka")
              .option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def as_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Sink rows with bytes decoded, sorted by (partition, offset)."""
    out = frame.copy()
    for col in ("key", "value"):
        out[col] = out[col].map(lambda b: None if b is None else bytes(b).decode())
    return out.sort_values(["partition", "offset"]).reset_index(drop=True)


def drain_to_memory(spark, df, name: str, produce_while_running=()):
    """Run ``df`` into a memory table until drained (calling each producer step in between)."""
    query = df.writeStream.format("memory").queryName(name).start()
    try:
        query.processAllAvailable()
        for step in produce_while_running:
            step()
            query.processAllAvailable()
        inputs = [p["numInputRows"] for p in query.recentProgress]
    finally:
        query.stop()
    return as_rows(spark.table(name).toPandas()), inputs


def wait_for_first_rows(query, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(p["numInputRows"] for p in query.recentProgress):
        if query.exception() is not None:
            raise query.exception()
        if time.monotonic() > deadline:
            pytest.fail(f"no micro-batch with input within {timeout} s")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def main_topic(broker):
    """3 partitions, 3000 keyed records with distinct timestamps; what the broker acknowledged."""
    topic = "source-main"
    create_topic(broker.bootstrap_servers, topic, partitions=PARTITIONS)
    sent = produce(broker.bootstrap_servers, topic, [f"v{i}" for i in range(RECORDS)])
    sent["key"] = sent["key"].map(bytes.decode)
    sent["value"] = sent["value"].map(bytes.decode)
    return topic, sent.sort_values(["partition", "offset"]).reset_index(drop=True)


# --- reading ----------------------------------------------------------------------------
def test_schema_is_the_kafka_formats(spark, broker, main_topic):
    df = stream(spark, broker, main_topic[0])
    assert df.isStreaming
    assert [(f.name, f.dataType.simpleString()) for f in df.schema] == KAFKA_SCHEMA


def test_every_record_is_read_exactly_once_with_its_columns(spark, broker, main_topic):
    topic, sent = main_topic
    rows, inputs = drain_to_memory(spark, stream(spark, broker, topic), "src_all")
    assert len(rows) == RECORDS == sum(inputs)
    assert not rows.duplicated(["partition", "offset"]).any()
    assert (rows["topic"] == topic).all()
    pd.testing.assert_frame_equal(rows[["key", "value", "partition", "offset"]],
                                  sent[["key", "value", "partition", "offset"]],
                                  check_dtype=False)
    # offsets of each partition are 0..n-1, partitions follow Java's murmur2 partitioner
    for _, group in rows.groupby("partition"):
        assert group["offset"].tolist() == list(range(len(group)))
    assert set(rows["partition"]) == set(range(PARTITIONS))
    assert (rows["partition"] == rows["key"].map(lambda k: murmur2_partition(k, 3))).all()
    # the record's own (create) time, to the millisecond
    expected_ts = pd.to_datetime(sent["ts_ms"], unit="ms")
    assert (rows["timestamp"].reset_index(drop=True) == expected_ts).all()
    assert rows["timestamp"].min() == pd.Timestamp("2026-01-01 00:00:00")
    assert (rows["timestampType"] == 0).all()  # CreateTime


def test_max_offsets_per_trigger_bounds_every_batch_and_reads_everything(spark, broker,
                                                                         main_topic):
    topic, sent = main_topic
    rows, inputs = drain_to_memory(
        spark, stream(spark, broker, topic, maxOffsetsPerTrigger=700), "srccap_offsetsped")
    batches = [n for n in inputs if n]
    assert max(batches) <= 700
    assert batches == [700, 700, 700, 700, 200]  # full batches while more waits
    assert len(rows) == RECORDS and not rows.duplicated(["partition", "offset"]).any()


def test_restart_from_checkpoint_into_file_sink_is_exactly_once(spark, broker, main_topic,
                                                                 tmp_path):
    topic, sent = main_topic
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start():
        return (stream(spark, broker, topic, maxOffsetsPerTrigger=1000).writeStream
                .format("parquet").option("path", out).option("checkpointLocation", checkpoint)
                .start())

    first = start()
    try:
        wait_for_first_rows(first)
    finally:
        first.stop()
    read_first = spark.read.parquet(out).count()
    assert 1000 <= read_first < RECORDS

    second = start()
    try:
        second.processAllAvailable()
        assert second.recentProgress[0]["batchId"] > 0  # went on from the checkpoint
    finally:
        second.stop()
    rows = as_rows(spark.read.parquet(out).toPandas())
    assert len(rows) == RECORDS
    assert not rows.duplicated(["partition", "offset"]).any()
    pd.testing.assert_frame_equal(rows[["partition", "offset", "value"]],
                                  sent[["partition", "offset", "value"]], check_dtype=False)


def test_starting_offsets_latest_reads_only_what_comes_after_start(spark, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=PARTITIONS)
    produce(broker.bootstrap_servers, topic_name, [f"before{i}" for i in range(50)])
    after = [f"after{i}" for i in range(40)]
    rows, _ = drain_to_memory(
        spark, stream(spark, broker, topic_name, startingOffsets="latest"), "src_latest",
        produce_while_running=[lambda: produce(broker.bootstrap_servers, topic_name, after)])
    assert sorted(rows["value"]) == sorted(after)


def test_starting_offsets_json_starts_each_partition_where_asked(spark, broker, main_topic):
    topic, sent = main_topic
    starting = json.dumps({topic: {"0": 5, "1": -1, "2": -2}})
    rows, _ = drain_to_memory(spark, stream(spark, broker, topic, startingOffsets=starting),
                              "src_json")
    per_partition = sent.groupby("partition")["offset"].count()
    counts = rows.groupby("partition")["offset"].agg(["min", "count"])
    assert counts.loc[0, "min"] == 5 and counts.loc[0, "count"] == per_partition[0] - 5
    assert 1 not in counts.index  # latest: nothing produced since
    assert counts.loc[2, "min"] == 0 and counts.loc[2, "count"] == per_partition[2]


def test_ending_offsets_stop_each_listed_partition_there(spark, broker, main_topic):
    topic, sent = main_topic
    ending = json.dumps({topic: {"0": 7, "2": 0}})  # partition 1 not listed: read to its end
    rows, _ = drain_to_memory(spark, stream(spark, broker, topic, endingOffsets=ending,
                                            maxOffsetsPerTrigger="100"), "src_ending")
    counts = rows.groupby("partition")["offset"].agg(["min", "max", "count"])
    assert counts.loc[0].tolist() == [0, 6, 7]
    assert counts.loc[1, "count"] == (sent["partition"] == 1).sum()
    assert 2 not in counts.index


def test_records_produced_while_the_query_runs_are_picked_up(spark, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=PARTITIONS)
    first = [f"a{i}" for i in range(100)]
    later = [[f"b{i}" for i in range(60)], [f"c{i}" for i in range(30)]]
    produce(broker.bootstrap_servers, topic_name, first)
    rows, inputs = drain_to_memory(
        spark, stream(spark, broker, topic_name), "src_live",
        produce_while_running=[lambda v=v: produce(broker.bootstrap_servers, topic_name, v,
                                                   first_ts=BASE_TS + 10**6)
                               for v in later])
    assert sorted(rows["value"]) == sorted(first + later[0] + later[1])
    assert not rows.duplicated(["partition", "offset"]).any()
    assert sum(inputs) == 190 and len([n for n in inputs if n]) >= 3


def test_two_topics_by_comma(spark, broker, main_topic, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=2)
    produce(broker.bootstrap_servers, topic_name, [f"x{i}" for i in range(20)])
    rows, _ = drain_to_memory(spark, stream(spark, broker, f"{main_topic[0]}, {topic_name}"),
                              "src_two")
    assert rows["topic"].value_counts().to_dict() == {main_topic[0]: RECORDS, topic_name: 20}


# --- a topic recreated under a checkpoint -----------------------------------------------
@pytest.fixture(scope="module")
def recreated(spark, broker, tmp_path_factory):
    """Read 100 records per partition, recreate the topic with 10 per partition, restart twice.

    Returns what each restart on the old checkpoint did: with failOnDataLoss (default) the
    error, with failOnDataLoss=false the rows it added, then rows produced after that.
    """
    servers, topic = broker.bootstrap_servers, "source-recreated"
    base = tmp_path_factory.mktemp("recreated")
    out, checkpoint = str(base / "out"), str(base / "checkpoint")
    create_topic(servers, topic, partitions=PARTITIONS)
    for p in range(PARTITIONS):
        produce(servers, topic, [f"old-{p}-{i}" for i in range(100)], partition=p)

    def run(**options):
        query = (stream(spark, broker, topic, **options).writeStream.format("parquet")
                 .option("path", out).option("checkpointLocation", checkpoint).start())
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    def values() -> set[str]:
        return {bytes(v).decode() for v in spark.read.parquet(out).toPandas()["value"]}

    run()
    result = {"old": values()}
    delete_topic(servers, topic)
    create_topic(servers, topic, partitions=PARTITIONS)
    for p in range(PARTITIONS):
        produce(servers, topic, [f"new-{p}-{i}" for i in range(10)], partition=p)
    try:
        run()
        result["error"] = None
    except StreamingQueryException as exc:
        result["error"] = str(exc)
    before = values()
    run(failOnDataLoss="false")
    result["after_recreate"] = values() - before
    for p in range(PARTITIONS):
        produce(servers, topic, [f"later-{p}-{i}" for i in range(5)], partition=p)
    before = values()
    run(failOnDataLoss="false")
    result["later"] = values() - before
    return result


def test_recreated_topic_fails_naming_the_partition_and_the_option(recreated):
    assert len(recreated["old"]) == 300
    message = recreated["error"]
    assert message is not None, "restart on a recreated topic did not fail"
    assert "DataLoss" in message
    assert "source-recreated-" in message  # topic-partition
    assert "failOnDataLoss" in message
    assert "checkpoint has read up to 100" in message


def test_recreated_topic_without_fail_on_data_loss_keeps_going(recreated):
    later = {f"later-{p}-{i}" for p in range(PARTITIONS) for i in range(5)}
    assert recreated["later"] == later


def test_recreated_topic_without_fail_on_data_loss_reads_the_new_records(recreated):
    new = {f"new-{p}-{i}" for p in range(PARTITIONS) for i in range(10)}
    assert recreated["after_recreate"] == new


# --- bad options ------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "named"), [
    ({"maxOffsetsPerTrigger": "-5"}, r"maxOffsetsPerTrigger: '-5'; accepted: a positive whole"),
    ({"failOnDataLoss": "maybe"}, r"(?i)failOnDataLoss: 'maybe'; accepted: true, false"),
    ({"startingOffsets": "sometimes"}, r"startingOffsets: 'sometimes'; accepted: earliest, latest"),
    ({"subscribe": None}, r"subscribe: None; accepted: one or more topic names"),
    ({"endingOffsets": '{"t": {"0": -1}}'}, r"endingOffsets: '\{\"t\": \{\"0\": -1\}\}'; "
                                          r"accepted: JSON like"),
], ids=["maxOffsetsPerTrigger", "failOnDataLoss", "startingOffsets", "subscribe",
        "endingOffsets"])
def test_bad_option_is_named(spark, broker, main_topic, options, named):
    register(spark)
    reader = spark.readStream.format("statekit_kafka").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers)
    if "subscribe" in options:
        options = {}
    else:
        reader = reader.option("subscribe", main_topic[0])
    for name, value in options.items():
        reader = reader.option(name, value)
    query = reader.load().writeStream.format("memory").queryName("src_bad").start()
    try:
        with pytest.raises(StreamingQueryException, match=named) as info:
            query.processAllAvailable()
        assert "BadArgument" in str(info.value)
    finally:
        query.stop()


# --- cap_offsets: a record budget shared across partitions -------------------------------------
def offsets(**parts) -> dict:
    return {"t": {p.lstrip("p"): n for p, n in parts.items()}}


def testcap_offsets_hands_out_exactly_the_budget_when_more_waits():
    start = offsets(p0=0, p1=100, p2=5)
    end = offsets(p0=300, p1=200, p2=605)
    for budget in (1, 2, 7, 100, 333, 999):
        capped = cap_offsets(start, end, budget)
        read = {p: capped["t"][p] - start["t"][p] for p in start["t"]}
        assert sum(read.values()) == budget
        assert all(start["t"][p] <= capped["t"][p] <= end["t"][p] for p in start["t"])


def testcap_offsets_shares_in_proportion_to_what_waits():
    start = offsets(p0=0, p1=0, p2=0, p3=10)
    end = offsets(p0=600, p1=300, p2=100, p3=10)
    capped = cap_offsets(start, end, 500)
    read = {p: capped["t"][p] - start["t"][p] for p in start["t"]}
    assert read == {"0": 300, "1": 150, "2": 50, "3": 0}
    capped = cap_offsets(start, end, 101)  # 60.6, 30.3, 10.1: each share within one of its part
    read = {p: capped["t"][p] - start["t"][p] for p in start["t"]}
    assert sum(read.values()) == 101
    assert all(abs(read[p] - 101 * w / 1000) < 1 for p, w in (("0", 600), ("1", 300), ("2", 100)))


def testcap_offsets_spans_topics_and_never_goes_past_the_end():
    start = {"a": {"0": 0, "1": 0}, "b": {"0": 7}}
    end = {"a": {"0": 1, "1": 2}, "b": {"0": 10}}
    capped = cap_offsets(start, end, 5)
    assert sum(capped[t][p] - start[t][p] for t in end for p in end[t]) == 5
    assert all(capped[t][p] <= end[t][p] for t in end for p in end[t])


def testcap_offsets_leaves_the_end_alone_when_the_budget_covers_everything():
    start = offsets(p0=0, p1=50)
    end = offsets(p0=40, p1=60)
    assert cap_offsets(start, end, 50) == end
    assert cap_offsets(start, end, 10_000) == end


# --- exactly once: every batch reads its logged offsets, a replayed batch the same -------
def _logged_ranges(checkpoint: str, topic: str) -> dict[int, set[tuple[int, int]]]:
    """Batch → the (partition, offset) pairs Spark's offset log gives it (from the previous
    batch's end, or offset 0, to its own end)."""
    from statekit.spark_state.checkpoint import Checkpoint

    ck = Checkpoint(checkpoint)
    batches = sorted(int(p.name) for p in ck.offsets_dir.iterdir() if p.name.isdigit())
    ranges, before = {}, {}
    for batch in batches:
        end = {int(p): o for p, o in json.loads(ck.offset_log(batch)[2][0])[topic].items()}
        ranges[batch] = {(p, o) for p, stop in end.items() for o in range(before.get(p, 0), stop)}
        before = end
    return ranges


@pytest.mark.timeout(600)
def test_every_batch_reads_its_logged_offsets_once_across_restarts(spark, broker, topic_name,
                                                                    tmp_path):
    """Offsets exactly once with consumers kept between tasks: each micro-batch's rows are
    exactly the offsets its offset-log entry gives it (no record twice, none missed, none of
    another batch), on every partition, across a stop and a restart, and a batch that Spark
    runs again (its commit removed) reads exactly what it read the first time. Part of the
    input is written in transactions, so ranges hold offsets without records (markers)."""
    from statekit.kafka.transactions import transactional_producer

    create_topic(broker.bootstrap_servers, topic_name, partitions=PARTITIONS)
    produce(broker.bootstrap_servers, topic_name, [f"a{i}" for i in range(900)])
    checkpoint = str(tmp_path / "checkpoint")
    seen: list[tuple[int, int, list[tuple[int, int]]]] = []  # (run, batch, rows)

    def run(number: int, until_batches: int | None = None):
        def keep(frame, batch_id):
            rows = [(r["partition"], r["offset"]) for r in frame.select("partition",
                                                                        "offset").collect()]
            seen.append((number, batch_id, rows))

        query = (stream(spark, broker, topic_name, maxOffsetsPerTrigger=250).writeStream
                 .foreachBatch(keep).option("checkpointLocation", checkpoint)
                 .trigger(processingTime="50 milliseconds").start())
        try:
            if until_batches is None:
                query.processAllAvailable()
            else:
                deadline = time.monotonic() + 300
                while sum(1 for r, _, rows in seen if r == number and rows) < until_batches:
                    assert query.exception() is None and time.monotonic() < deadline
                    time.sleep(0.05)
        finally:
            query.stop()

    run(1, until_batches=2)
    producer = transactional_producer(broker, f"{topic_name}-tx")
    for txn in range(4):
        producer.begin_transaction()
        for i in range(100):
            producer.produce(topic_name, key=f"k{i % 97}".encode(), value=f"t{txn}-{i}".encode())
        producer.commit_transaction(30)
    replayed = max(int(p.name) for p in (Path(checkpoint) / "offsets").glob("[0-9]*"))
    # Spark runs the last planned batch again on restart, from its offset log entry
    for name in (str(replayed), f".{replayed}.crc"):  # with its checksum: Spark writes it anew
        (Path(checkpoint) / "commits" / name).unlink(missing_ok=True)
    run(2)

    logged = _logged_ranges(checkpoint, topic_name)
    by_batch: dict[int, list[set]] = {}
    for _, batch, rows in seen:
        assert len(rows) == len(set(rows))  # no record twice within a batch
        by_batch.setdefault(batch, []).append(set(rows))
    assert (2, replayed) in {(r, b) for r, b, _ in seen}  # run again (often read in run 1 too)
    for batch, reads in by_batch.items():
        assert all(rows <= logged[batch] for rows in reads), f"batch {batch} read elsewhere"
        assert all(rows == reads[0] for rows in reads), f"batch {batch} read differently"
    assert sorted(by_batch) == sorted(logged)
    every = [row for reads in by_batch.values() for row in reads[0]]
    assert len(every) == len(set(every)) == 900 + 400  # each record once over all batches
    markers = set().union(*logged.values()) - set(every)  # offsets that hold no record
    assert len(markers) <= 4 * PARTITIONS  # one commit marker per transaction and partition
