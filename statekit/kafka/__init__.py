"""Kafka side of statekit: connections, the embedded broker (and a cluster of them), topic
helpers and dataset replay.

Names resolve on first use, so ``statekit.model.connection`` alone does not load
confluent-kafka's clients.
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "EmbeddedBroker": "statekit.kafka.broker",
    "KafkaCluster": "statekit.kafka.cluster",
    "TansuBroker": "statekit.kafka.tansu",
    "KafkaJarsMissing": "statekit.errors",
    "KafkaConnection": "statekit.model.connection",
    "TopicRef": "statekit.model.connection",
    "connect": "statekit.model.connection",
    "ReplayReport": "statekit.kafka.dataset_replay",
    "replay": "statekit.kafka.dataset_replay",
    **{name: "statekit.kafka.topics" for name in (
        "alter_topic_config", "create_topic", "delete_topic", "describe_topic_config",
        "list_topics", "partition_count", "watermarks")},
    "end_offsets": "statekit.kafka.offsets",
}
__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
