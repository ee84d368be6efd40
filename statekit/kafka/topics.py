"""Topics over confluent-kafka's AdminClient: list, count partitions, create, delete, configure.

Every function takes ``kafka`` (a ``KafkaConnection``, a bootstrap-servers
string, or an ``EmbeddedBroker``; see ``statekit.model.connection``) and an
optional ``config`` of extra librdkafka settings merged into the connection's. Clients are
``statekit.kafka.clients``'s, offsets ``statekit.kafka.offsets``'s.

Example:
    >>> create_topic("127.0.0.1:9092", "games", partitions=4,            # doctest: +SKIP
    ...              config={"cleanup.policy": "compact"})
    >>> list_topics("127.0.0.1:9092")                                    # doctest: +SKIP
    {'games': 4}
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic

from statekit.errors import BrokerUnreachable, TopicNotFound
from statekit.kafka.clients import Config, admin_client, plain_consumer, unreachable
from statekit.kafka.offsets import JUST_CREATED, end_offsets, watermarks_of
from statekit.model.connection import Kafka, KafkaConnection, connect

if TYPE_CHECKING:  # pandas is imported where used: Spark workers import this module
    import pandas as pd


def list_topics(kafka: Kafka, config: Config = None, timeout: float = 10.0) -> dict[str, int]:
    """Topic name → number of partitions (internal ``__`` topics left out)."""
    conn = connect(kafka, config)
    try:
        meta = admin_client(conn).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise unreachable(conn, str(exc.args[0])) from None
    return {name: len(t.partitions) for name, t in sorted(meta.topics.items())
            if not name.startswith("__") and t.error is None}


def partition_count(kafka: Kafka, topic: str, config: Config = None) -> int:
    """How many partitions ``topic`` has; TopicNotFound naming it (and what exists) otherwise."""
    conn = connect(kafka, config)
    topics = list_topics(conn)
    if topic not in topics:
        raise TopicNotFound(topic, conn.bootstrap_servers, topics)
    return topics[topic]


def create_topic(
    kafka: Kafka,
    topic: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    replication_factor: int = -1,
    exist_ok: bool = True,
    client_config: Config = None,
    timeout: float = 30.0,
) -> bool:
    """Create ``topic`` with topic-level ``config``; True if created, False if it existed.

    ``replication_factor``: copies of each partition; -1 (the default) takes the cluster's
    ``default.replication.factor`` (1 on an ``EmbeddedBroker``, 3 on a ``KafkaCluster`` of
    three nodes), as Kafka Streams creates its changelogs.
    ``client_config``: extra librdkafka settings for the admin client.
    """
    conn = connect(kafka, client_config)
    admin = admin_client(conn)
    new = NewTopic(topic, partitions, replication_factor,
                   config={k: str(v) for k, v in (config or {}).items()})
    future = admin.create_topics([new], operation_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except concurrent.futures.TimeoutError:
        raise BrokerUnreachable(conn.bootstrap_servers,
                                f"no answer to CreateTopics in {timeout} s") from None
    except KafkaException as exc:
        err = exc.args[0]
        if exist_ok and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        if err.code() == KafkaError._TRANSPORT or err.code() == KafkaError._TIMED_OUT:
            raise unreachable(conn, str(err)) from None
        raise
    _wait_for_metadata(conn, topic, present=True)
    # and every partition's leader answers for it (for a moment it may still say "not leader")
    consumer = plain_consumer(conn)
    try:
        for p in range(partitions):
            watermarks_of(consumer, topic, p, timeout, settling=JUST_CREATED)
    finally:
        consumer.close()
    return True


def _wait_for_metadata(conn: KafkaConnection, topic: str, present: bool,
                       timeout: float = 30.0) -> None:
    """Wait until the cluster's metadata lists ``topic`` with a leader for every partition
    (Apache Kafka answers CreateTopics before its partitions have leaders), or no longer lists
    it; BrokerUnreachable naming the topic when that takes over ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            meta = admin_client(conn).list_topics(topic=topic if present else None, timeout=5)
        except KafkaException:
            meta = None
        if meta is not None:
            found = meta.topics.get(topic)
            listed = found is not None and found.error is None and bool(found.partitions)
            if not present and not listed:
                return
            if present and listed and all(p.leader >= 0 and p.error is None
                                          for p in found.partitions.values()):
                return
        time.sleep(0.05)
    what = "a leader for every partition of" if present else "the deletion of"
    raise unreachable(conn, f"the cluster's metadata did not show {what} topic {topic!r} "
                            f"within {timeout:g} s")


def delete_topic(kafka: Kafka, topic: str, config: Config = None,
                 missing_ok: bool = True, timeout: float = 30.0, wait: bool = True) -> None:
    """Delete ``topic``; a missing topic is fine unless ``missing_ok`` is False.

    With ``wait`` (default), returns once the cluster's metadata no longer lists it.
    """
    conn = connect(kafka, config)
    future = admin_client(conn).delete_topics(
        [topic], operation_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as exc:
        if missing_ok and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return
        raise
    if wait:
        _wait_for_metadata(conn, topic, present=False)


def alter_topic_config(kafka: Kafka, topic: str, settings: Mapping[str, object],
                       config: Config = None) -> None:
    """Set topic-level ``settings`` on ``topic`` (the others stay as they are), as
    ``kafka-configs --alter --add-config`` does; TopicNotFound naming it when it is missing,
    BadArgument naming the setting the broker refused."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    from statekit.errors import BadArgument

    conn = connect(kafka, config)
    partition_count(conn, topic)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(str(name), str(value), incremental_operation=AlterConfigOpType.SET)
        for name, value in settings.items()])
    try:
        admin_client(conn).incremental_alter_configs([resource])[resource].result(30)
    except KafkaException as exc:
        raise BadArgument(f"settings of topic {topic!r}", dict(settings),
                          f"topic settings the broker takes ({exc.args[0].str()})") from None


def describe_topic_config(kafka: Kafka, topic: str, config: Config = None) -> dict[str, str]:
    """The topic's configuration as the broker reports it (name → value)."""
    conn = connect(kafka, config)
    partition_count(conn, topic)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    result = admin_client(conn).describe_configs([resource])[resource]
    return {name: entry.value for name, entry in result.result(30).items()}


def watermarks(kafka: Kafka, topic: str, config: Config = None) -> pd.DataFrame:
    """One row per partition: ``partition``, ``low`` (first offset), ``high`` (one past the
    last readable record, as ``end_offsets`` finds it)."""
    import pandas as pd

    conn = connect(kafka, config)
    n = partition_count(conn, topic)
    consumer = plain_consumer(conn)
    try:
        offsets = end_offsets(consumer, topic, list(range(n)))
    finally:
        consumer.close()
    return pd.DataFrame(
        [(p, lo, hi) for p, (lo, hi) in sorted(offsets.items())],
        columns=["partition", "low", "high"],
    )
