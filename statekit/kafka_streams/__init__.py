"""Kafka Streams itself beside Spark: statekit's reference Kafka Streams application (Java,
``jvm/``), started from Python as child processes, its stores queried over HTTP; and any
Kafka Streams state directory opened read-only (``open_kafka_streams``, ``compare_copies``);
the same query on both engines compared row by row (``side_by_side``); the same state restored
by each engine, timed (``compare_restores``).

Names resolve on first use.

Example:
    >>> import statekit as sk
    >>> app = sk.kafka_streams.start("games", sk.datasets.GAME_SPEC,      # doctest: +SKIP
    ...                              kafka=broker, instances=2, standbys=1)
    >>> app.client.get("p07")                                          # doctest: +SKIP
"""

from statekit._lazy import lazy_exports

_NAMES = {
    "start": "statekit.kafka_streams.app",
    "KafkaStreamsApp": "statekit.kafka_streams.app",
    "AppOptions": "statekit.kafka_streams.options",
    "KafkaStreamsClient": "statekit.kafka_streams.client",
    "app_spec": "statekit.kafka_streams.spec",
    "KafkaStreamsAppError": "statekit.errors",
    "KafkaStreamsStateError": "statekit.errors",
    **dict.fromkeys(("open_kafka_streams", "KafkaStreamsStateDir", "compare_copies"),
                    "statekit.kafka_streams.state_dir"),
    **dict.fromkeys(("side_by_side", "SideBySide"), "statekit.kafka_streams.comparison"),
    **dict.fromkeys(("compare_restores", "RestoreComparison"), "statekit.kafka_streams.restores"),
}

__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
