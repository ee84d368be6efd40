"""Topic helpers against the embedded broker: create, configs, list, delete, watermarks."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from statekit.errors import TopicNotFound
from statekit.kafka import (
    create_topic,
    delete_topic,
    describe_topic_config,
    end_offsets,
    list_topics,
    partition_count,
    watermarks,
)
from statekit.kafka.clients import plain_consumer
from statekit.kafka.offsets import JUST_CREATED, consume_ranges, watermarks_of
from statekit.kafka.transactions import transactional_producer


def _produce(bootstrap_servers: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap_servers,
                         "partitioner": "murmur2_random", "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, key=f"k{i % 17}".encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def test_create_with_configs_and_describe_them_back(broker, topic_name):
    configs = {"cleanup.policy": "compact", "delete.retention.ms": "1000",
               "segment.ms": "60000"}
    assert create_topic(broker.bootstrap_servers, topic_name, partitions=3, config=configs)
    described = describe_topic_config(broker.bootstrap_servers, topic_name)
    assert described["cleanup.policy"] == "compact"
    assert described["delete.retention.ms"] == "1000"
    assert partition_count(broker.bootstrap_servers, topic_name) == 3


def test_compact_delete_policy_for_windowed_stores(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, config={"cleanup.policy": "compact,delete"})
    assert describe_topic_config(broker.bootstrap_servers, topic_name)["cleanup.policy"] == (
        "compact,delete")


def test_create_twice_is_fine_and_says_so(broker, topic_name):
    assert create_topic(broker.bootstrap_servers, topic_name, partitions=2) is True
    assert create_topic(broker.bootstrap_servers, topic_name, partitions=2) is False
    with pytest.raises(Exception, match="(?i)exist"):
        create_topic(broker.bootstrap_servers, topic_name, partitions=2, exist_ok=False)


def test_list_shows_new_topics_with_partition_counts(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name + "-a", partitions=1)
    create_topic(broker.bootstrap_servers, topic_name + "-b", partitions=5)
    topics = list_topics(broker.bootstrap_servers)
    assert topics[topic_name + "-a"] == 1
    assert topics[topic_name + "-b"] == 5
    assert not any(name.startswith("__") for name in topics)


def test_delete_removes_the_topic(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=2)
    delete_topic(broker.bootstrap_servers, topic_name)
    assert topic_name not in list_topics(broker.bootstrap_servers)
    delete_topic(broker.bootstrap_servers, topic_name)  # missing is fine by default


def test_watermarks_count_every_produced_record(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=4)
    _produce(broker.bootstrap_servers, topic_name, 1234)
    marks = watermarks(broker.bootstrap_servers, topic_name)
    assert list(marks.columns) == ["partition", "low", "high"]
    assert marks.partition.tolist() == [0, 1, 2, 3]
    assert (marks.low == 0).all()
    assert int((marks.high - marks.low).sum()) == 1234


def test_watermarks_of_an_empty_topic_are_zero(broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, partitions=2)
    marks = watermarks(broker.bootstrap_servers, topic_name)
    assert marks.high.tolist() == [0, 0]


@pytest.mark.parametrize("call", [partition_count, watermarks, describe_topic_config])
def test_missing_topic_is_named(broker, topic_name, call):
    create_topic(broker.bootstrap_servers, topic_name + "-other")
    with pytest.raises(TopicNotFound, match=f"'{topic_name}-missing'") as info:
        call(broker.bootstrap_servers, topic_name + "-missing")
    assert info.value.topic == topic_name + "-missing"
    assert "existing topics:" in str(info.value)  # and says what does exist
    assert broker.bootstrap_servers in str(info.value)


def _read_offsets(broker, topic: str, ranges) -> dict[int, list[int]]:
    consumer = plain_consumer(broker)
    try:
        got: dict[int, list[int]] = {p: [] for p in ranges}
        for chunk in consume_ranges(consumer, topic, ranges, timeout=20):
            for msg in chunk:
                got[msg.partition()].append(msg.offset())
        return got
    finally:
        consumer.close()


def _ends(broker, topic: str) -> dict[int, tuple[int, int]]:
    consumer = plain_consumer(broker)
    try:
        return end_offsets(consumer, topic, [0, 1])
    finally:
        consumer.close()


@pytest.mark.timeout(120)
def test_end_offsets_under_transactions_are_one_past_the_last_committed_record(broker,
                                                                               topic_name):
    """Markers take offsets no consumer reads; an open transaction's records are not readable
    yet (and the embedded broker answers a read_committed ListOffsets with 0 meanwhile)."""
    create_topic(broker, topic_name, partitions=2)
    producer = transactional_producer(broker, f"{topic_name}-writer")
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic_name, value=b"%d" % i, partition=0)
    producer.commit_transaction(30)  # records 0..4, the commit marker at 5
    assert _ends(broker, topic_name) == {0: (0, 5), 1: (0, 0)}
    producer.begin_transaction()
    for part, n in ((0, 3), (1, 2)):
        for _ in range(n):
            producer.produce(topic_name, value=b"open", partition=part)
    assert producer.flush(30) == 0
    ends = _ends(broker, topic_name)  # the open transaction's records are not counted
    assert ends == {0: (0, 5), 1: (0, 0)}
    assert _read_offsets(broker, topic_name, ends) == {0: [0, 1, 2, 3, 4], 1: []}
    producer.commit_transaction(30)
    ends = _ends(broker, topic_name)
    assert ends == {0: (0, 9), 1: (0, 2)}  # the records at 6..8 and 0..1, not their markers
    assert _read_offsets(broker, topic_name, ends) == {0: [0, 1, 2, 3, 4, 6, 7, 8], 1: [0, 1]}
    assert watermarks(broker, topic_name).high.tolist() == [9, 2]
    producer.begin_transaction()
    producer.produce(topic_name, value=b"aborted", partition=1)
    assert producer.flush(30) == 0
    producer.abort_transaction(30)
    ends = _ends(broker, topic_name)  # whatever the broker shows of it, ends agree with reads
    read = _read_offsets(broker, topic_name, {p: (0, ends[p][1] + 5) for p in ends})
    assert {p: (0, offsets[-1] + 1) for p, offsets in read.items()} == ends


class _MetadataNotYetPropagated:
    """A consumer whose metadata does not list the partition for its first ``misses`` asks, as
    a node of a three-node cluster answers before the controller has told it of a new topic."""

    def __init__(self, misses: int):
        self.misses, self.asks = misses, 0

    def get_watermark_offsets(self, where, timeout, cached):
        self.asks += 1
        if self.asks <= self.misses:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        return (0, 7)


def test_a_just_created_topic_unknown_to_the_node_asked_is_asked_again():
    consumer = _MetadataNotYetPropagated(misses=2)
    assert watermarks_of(consumer, "t", 0, timeout=5, settling=JUST_CREATED) == (0, 7)
    assert consumer.asks == 3


def test_an_unknown_partition_of_a_topic_not_just_created_is_not_waited_on():
    consumer = _MetadataNotYetPropagated(misses=1)
    with pytest.raises(KafkaException, match="Unknown partition|_UNKNOWN_PARTITION"):
        watermarks_of(consumer, "t", 0, timeout=5)
    assert consumer.asks == 1
