"""Kafka side of statekit: the embedded broker, topic helpers and dataset replay."""

from statekit.kafka.broker import EmbeddedBroker
from statekit.kafka.replay import ReplayReport, murmur2_partition, replay
from statekit.kafka.topics import (
    create_topic,
    delete_topic,
    describe_topic_config,
    end_offsets,
    list_topics,
    partition_count,
    watermarks,
)

__all__ = [
    "EmbeddedBroker",
    "create_topic",
    "delete_topic",
    "describe_topic_config",
    "end_offsets",
    "list_topics",
    "partition_count",
    "watermarks",
    "ReplayReport",
    "murmur2_partition",
    "replay",
]
