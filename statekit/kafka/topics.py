"""Topic helpers over confluent-kafka's AdminClient and Consumer.

Every function takes ``bootstrap_servers`` (the embedded broker's or any
cluster's) and optional ``config`` (extra librdkafka settings such as SASL).

Example:
    >>> create_topic("127.0.0.1:9092", "games", partitions=4,            # doctest: +SKIP
    ...              config={"cleanup.policy": "compact"})
    >>> watermarks("127.0.0.1:9092", "games")                            # doctest: +SKIP
       partition  low  high
    0          0    0   812
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from statekit.errors import BrokerUnreachable, TopicNotFound

if TYPE_CHECKING:  # pandas is imported where used: Spark workers import this module
    import pandas as pd

Config = Mapping[str, str] | None

# librdkafka's own log lines (reconnect attempts and the like) go to this logger,
# not to stderr; errors that matter reach the caller as exceptions.
CLIENT_LOG = logging.getLogger("statekit.kafka.client")
CLIENT_LOG.addHandler(logging.NullHandler())


def _client_config(bootstrap_servers: str, config: Config) -> dict:
    return {"bootstrap.servers": bootstrap_servers, "logger": CLIENT_LOG, **(config or {})}


_ADMINS: dict[tuple, AdminClient] = {}


def admin_client(bootstrap_servers: str, config: Config = None) -> AdminClient:
    """One AdminClient per (address, config), kept alive so pending futures resolve."""
    key = (bootstrap_servers, tuple(sorted((config or {}).items(), key=str)))
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(_client_config(bootstrap_servers, config))
    return _ADMINS[key]


def forget_clients(bootstrap_servers: str) -> None:
    """Drop cached admin clients of a cluster that is going away."""
    for key in [k for k in _ADMINS if k[0] == bootstrap_servers]:
        del _ADMINS[key]


def plain_consumer(bootstrap_servers: str, config: Config = None, **extra) -> Consumer:
    """A consumer meant for assign() only: no group coordination, no commits."""
    settings = {
        "group.id": "statekit-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 20,
        **_client_config(bootstrap_servers, config),
        **extra,
    }
    return Consumer(settings)


def check_reachable(bootstrap_servers: str, timeout: float = 5.0, config: Config = None) -> None:
    """Raise BrokerUnreachable (naming the address) unless a broker answers within timeout."""
    try:
        admin_client(bootstrap_servers, config).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise BrokerUnreachable(bootstrap_servers, str(exc.args[0])) from None


def list_topics(bootstrap_servers: str, config: Config = None, timeout: float = 10.0
                ) -> dict[str, int]:
    """Topic name → number of partitions (internal ``__`` topics left out)."""
    try:
        meta = admin_client(bootstrap_servers, config).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise BrokerUnreachable(bootstrap_servers, str(exc.args[0])) from None
    return {name: len(t.partitions) for name, t in sorted(meta.topics.items())
            if not name.startswith("__") and t.error is None}


def partition_count(bootstrap_servers: str, topic: str, config: Config = None) -> int:
    """How many partitions ``topic`` has; TopicNotFound naming it (and what exists) otherwise."""
    topics = list_topics(bootstrap_servers, config)
    if topic not in topics:
        raise TopicNotFound(topic, bootstrap_servers, topics)
    return topics[topic]


def create_topic(
    bootstrap_servers: str,
    topic: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    replication_factor: int = 1,
    exist_ok: bool = True,
    client_config: Config = None,
    timeout: float = 30.0,
) -> bool:
    """Create ``topic`` with topic-level ``config``; True if created, False if it existed."""
    admin = admin_client(bootstrap_servers, client_config)
    new = NewTopic(topic, partitions, replication_factor,
                   config={k: str(v) for k, v in (config or {}).items()})
    future = admin.create_topics([new], operation_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except concurrent.futures.TimeoutError:
        raise BrokerUnreachable(bootstrap_servers, f"no answer to CreateTopics in {timeout} s"
                                ) from None
    except KafkaException as exc:
        err = exc.args[0]
        if exist_ok and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        if err.code() == KafkaError._TRANSPORT or err.code() == KafkaError._TIMED_OUT:
            raise BrokerUnreachable(bootstrap_servers, str(err)) from None
        raise
    _wait_for_metadata(bootstrap_servers, topic, client_config)
    return True


def _wait_for_metadata(bootstrap_servers: str, topic: str, config: Config,
                       timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while topic not in list_topics(bootstrap_servers, config) and time.monotonic() < deadline:
        time.sleep(0.05)


def delete_topic(bootstrap_servers: str, topic: str, config: Config = None,
                 missing_ok: bool = True, timeout: float = 30.0) -> None:
    """Delete ``topic``; a missing topic is fine unless ``missing_ok`` is False."""
    future = admin_client(bootstrap_servers, config).delete_topics(
        [topic], operation_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as exc:
        if missing_ok and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return
        raise


def describe_topic_config(bootstrap_servers: str, topic: str, config: Config = None
                          ) -> dict[str, str]:
    """The topic's configuration as the broker reports it (name → value)."""
    partition_count(bootstrap_servers, topic, config)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    result = admin_client(bootstrap_servers, config).describe_configs([resource])[resource]
    return {name: entry.value for name, entry in result.result(30).items()}


def end_offsets(
    consumer: Consumer, topic: str, partitions: list[int], timeout: float = 10.0
) -> dict[int, tuple[int, int]]:
    """Partition → (low, end) where ``end`` is one past the last record actually stored.

    A broker's reported high watermark is trusted only after reading the last
    record batch it points into: some Kafka-protocol brokers (Tansu among them)
    answer with the *first* offset of the last batch + 1. Reading from
    ``high - 1`` to end-of-partition costs one small fetch on a correct broker.
    """
    marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout,
                                               cached=False) for p in partitions}
    ends = {p: hi for p, (_, hi) in marks.items()}
    probe = [TopicPartition(topic, p, hi - 1) for p, (lo, hi) in marks.items() if hi > lo]
    if probe:
        open_parts = {tp.partition for tp in probe}
        consumer.assign(probe)
        deadline = time.monotonic() + timeout
        while open_parts and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.05):
                err = msg.error()
                if err is None:
                    ends[msg.partition()] = max(ends[msg.partition()], msg.offset() + 1)
                elif err.code() == KafkaError._PARTITION_EOF:
                    ends[msg.partition()] = max(ends[msg.partition()], msg.offset())
                    open_parts.discard(msg.partition())
                else:
                    raise KafkaException(err)
        consumer.unassign()
    return {p: (marks[p][0], ends[p]) for p in partitions}


def watermarks(bootstrap_servers: str, topic: str, config: Config = None) -> pd.DataFrame:
    """One row per partition: ``partition``, ``low`` (first offset), ``high`` (one past last)."""
    import pandas as pd

    n = partition_count(bootstrap_servers, topic, config)
    consumer = plain_consumer(bootstrap_servers, config)
    try:
        offsets = end_offsets(consumer, topic, list(range(n)))
    finally:
        consumer.close()
    return pd.DataFrame(
        [(p, lo, hi) for p, (lo, hi) in sorted(offsets.items())],
        columns=["partition", "low", "high"],
    )


def consume_ranges(
    consumer: Consumer, topic: str, ranges: Mapping[int, tuple[int, int]],
    timeout: float = 30.0, chunk: int = 10_000,
) -> Iterator[list]:
    """Messages of ``topic`` in ``ranges`` (partition → [start, end)), in chunks.

    Offsets missing from the log (compacted away) are simply not there; the
    read of a partition ends at ``end`` or at its end of log. Raises
    TimeoutError naming the partitions still open when nothing arrives in time.
    """
    todo = {p: (lo, hi) for p, (lo, hi) in ranges.items() if hi > lo}
    if not todo:
        return
    consumer.assign([TopicPartition(topic, p, lo) for p, (lo, _) in todo.items()])
    last_seen = time.monotonic()
    try:
        while todo:
            messages = consumer.consume(chunk, timeout=0.1)
            kept = []
            for msg in messages:
                err, part = msg.error(), msg.partition()
                if part not in todo:
                    continue
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(err)
                    del todo[part]
                elif msg.offset() >= todo[part][1]:
                    del todo[part]
                else:
                    kept.append(msg)
                    if msg.offset() == todo[part][1] - 1:
                        del todo[part]
            if messages:
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen > timeout:
                raise TimeoutError(f"no records from {topic!r} partitions {sorted(todo)} "
                                   f"in {timeout:.0f} s")
            if kept:
                yield kept
    finally:
        consumer.unassign()
