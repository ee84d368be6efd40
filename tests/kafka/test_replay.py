"""Replaying datasets into the embedded broker: murmur2 placement, timestamps, pacing, errors."""

from __future__ import annotations

import pandas as pd
import pytest
from confluent_kafka import KafkaError, TopicPartition
from helpers.murmur2 import murmur2, murmur2_partition

from statekit.datasets import Dataset, flights, game_events
from statekit.errors import BadArgument, BrokerUnreachable, StatekitError, TopicNotFound
from statekit.kafka import ReplayReport, create_topic, replay, watermarks
from statekit.kafka.clients import plain_consumer
from statekit.ports import free_port


def consume_all(bootstrap_servers: str, topic: str, partitions: int) -> pd.DataFrame:
    """Every record of ``topic`` (assign, from offset 0 to end of each partition)."""
    consumer = plain_consumer(bootstrap_servers)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    rows, done = [], set()
    try:
        while len(done) < partitions:
            for msg in consumer.consume(10_000, timeout=1.0):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    done.add(msg.partition())
                    continue
                key = msg.key().decode() if msg.key() is not None else None
                value = msg.value().decode() if msg.value() is not None else None
                rows.append((msg.partition(), msg.offset(), key, value, msg.timestamp()[1]))
    finally:
        consumer.close()
    return pd.DataFrame(rows, columns=["partition", "offset", "key", "value", "timestamp"])


def test_murmur2_matches_kafkas_java_test_vectors():
    # from Kafka's UtilsTest.testMurmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107
    assert murmur2_partition(b"21", 1) == 0
    assert murmur2_partition("foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7


@pytest.mark.parametrize("key, partitions", [(None, 4), (b"k", 0), (b"k", -1), (b"k", 2.0)])
def test_murmur2_partition_bad_arguments(key, partitions):
    with pytest.raises(BadArgument):
        murmur2_partition(key, partitions)


def test_replay_game_events_lands_where_murmur2_says(broker, topic_name):
    ds = game_events()
    report = replay(ds, broker.bootstrap_servers, topic_name, partitions=4, progress=False)
    assert isinstance(report, ReplayReport)
    assert report.topic == topic_name and report.records == 5000
    assert report.seconds > 0 and report.records_per_second > 0
    assert sum(report.partition_counts.values()) == 5000

    got = consume_all(broker.bootstrap_servers, topic_name, 4)
    assert len(got) == 5000
    keyed = got[got.key.notna()]
    expected = [murmur2_partition(k.encode(), 4) for k in keyed.key]
    assert keyed.partition.tolist() == expected  # the broker put each key where Java would
    # totals per partition: the murmur2 expectation plus the 3 key-less records
    want = pd.Series([murmur2_partition(k.encode(), 4) for k in ds.records.key.dropna()])
    want = want.value_counts().reindex(range(4), fill_value=0)
    have = got.partition.value_counts().reindex(range(4), fill_value=0)
    unkeyed = got[got.key.isna()].partition.value_counts().reindex(range(4), fill_value=0)
    assert (have - unkeyed).tolist() == want.tolist()
    assert report.partition_counts == have.to_dict()
    marks = watermarks(broker.bootstrap_servers, topic_name)
    assert (marks.high - marks.low).tolist() == have.tolist()

    # values, keys and event-time timestamps survive the trip; each partition keeps input order
    got = got.sort_values(["partition", "offset"])
    by_value = ds.records.reset_index().rename(columns={"index": "position"})
    joined = got.merge(by_value, on="value", suffixes=("", "_sent"))
    assert len(joined) == 5000
    assert (joined.timestamp == joined.timestamp_sent).all()
    assert joined.key.fillna("-").tolist() == joined.key_sent.fillna("-").tolist()
    for _, part in joined.groupby("partition"):
        assert part.sort_values("offset").position.is_monotonic_increasing


def test_replay_into_an_existing_topic_keeps_its_partitions(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=2)
    ds = flights(limit=2000, key="origin")
    report = replay(ds, broker.bootstrap_servers, topic_name, partitions=8, progress=False)
    assert set(report.partition_counts) <= {0, 1}
    got = consume_all(broker.bootstrap_servers, topic_name, 2)
    assert len(got) == 2000
    assert got.partition.tolist() == [murmur2_partition(k.encode(), 2) for k in got.key]


def test_paced_replay_delivers_everything_in_order(broker, topic_name):
    records = pd.DataFrame({"key": ["one"] * 40,
                            "value": [f"v{i}" for i in range(40)],
                            "timestamp": list(range(1_000, 41_000, 1_000))})
    report = replay(Dataset("paced", records), broker.bootstrap_servers, topic_name,
                    partitions=3, rate=400, progress=False)
    assert report.records == 40
    assert report.partition_counts == {murmur2_partition(b"one", 3): 40}
    got = consume_all(broker.bootstrap_servers, topic_name, 3)
    assert got.value.tolist() == records.value.tolist()
    assert got.offset.tolist() == list(range(40))
    assert got.timestamp.tolist() == records.timestamp.tolist()


def test_replay_accepts_a_dataframe_and_tombstones(broker, topic_name):
    records = pd.DataFrame({"key": ["a", "b", "a"], "value": ["1", "2", None],
                            "timestamp": [1, 2, 3]})
    report = replay(records, broker.bootstrap_servers, topic_name, partitions=1, progress=True)
    assert report.records == 3
    got = consume_all(broker.bootstrap_servers, topic_name, 1)
    assert got.value.tolist() == ["1", "2", None]


def test_replay_without_create_needs_the_topic(broker, topic_name):
    with pytest.raises(TopicNotFound, match=topic_name):
        replay(flights(limit=5), broker.bootstrap_servers, topic_name, create=False,
               progress=False)


def test_replay_to_nobody_names_the_address():
    address = f"127.0.0.1:{free_port()}"
    with pytest.raises(BrokerUnreachable, match=address.replace(".", r"\.")):
        replay(flights(limit=5), address, "t", progress=False)


@pytest.mark.parametrize("kwargs, named", [
    ({"rate": -5}, "-5"),
    ({"rate": 0}, "0"),
    ({"rate": float("nan")}, "nan"),
    ({"rate": "fast"}, "'fast'"),
    ({"partitions": 0}, "0"),
    ({"partitions": "4"}, "'4'"),
    ({"topic": ""}, "''"),
    ({"topic": "bad name!"}, "'bad name!'"),
])
def test_replay_bad_arguments_are_named(broker, topic_name, kwargs, named):
    args = {"topic": topic_name, **kwargs}
    with pytest.raises(BadArgument, match=named) as info:
        replay(flights(limit=5), broker.bootstrap_servers, args.pop("topic"), progress=False,
               **args)
    assert "accepted:" in str(info.value)


def test_replay_bad_dataset_is_named(broker, topic_name):
    with pytest.raises(BadArgument, match="missing: timestamp"):
        replay(pd.DataFrame({"key": ["a"], "value": ["b"]}), broker.bootstrap_servers,
               topic_name, progress=False)
    with pytest.raises(BadArgument, match="'list'"):
        replay([1, 2], broker.bootstrap_servers, topic_name, progress=False)


def test_failed_deliveries_raise_naming_the_first_error(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=1)
    n = 20_000
    records = pd.DataFrame({"key": ["k"] * n, "value": ["v"] * n, "timestamp": [1] * n})
    # a real librdkafka failure: records expire in the local queue before they can be sent
    with pytest.raises(StatekitError, match=rf"\d+ of {n} records .* first error: .*") as info:
        replay(records, broker.bootstrap_servers, topic_name, progress=False,
               config={"message.timeout.ms": "1", "linger.ms": "0", "batch.num.messages": "1",
                       "max.in.flight": "1"})
    assert topic_name in str(info.value)


def test_bad_producer_config_is_named(broker, topic_name):
    with pytest.raises(BadArgument, match="linger.ms"):
        replay(flights(limit=5), broker.bootstrap_servers, topic_name, progress=False,
               config={"message.timeout.ms": "1", "linger.ms": "200"})


def test_a_record_too_big_to_send_is_named(broker, topic_name):
    records = pd.DataFrame({"key": ["small", "big"], "value": ["v", "x" * 2_000_000],
                            "timestamp": [1, 2]})
    with pytest.raises(StatekitError, match=r"record 1 .*b'big'.*2000000 value bytes") as info:
        replay(records, broker.bootstrap_servers, topic_name, progress=False)
    assert topic_name in str(info.value)
