"""Topic helpers against the embedded broker: create, configs, list, delete, watermarks."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from statekit.errors import TopicNotFound
from statekit.kafka import (
    create_topic,
    delete_topic,
    describe_topic_config,
    list_topics,
    partition_count,
    watermarks,
)


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
