"""Where a Kafka cluster is and how to talk to it: one small object instead of repeated arguments.

Everything in statekit that talks to Kafka takes ``kafka``: a ``KafkaConnection``,
a plain ``"host:port[,host:port]"`` string, or anything with a ``connection``
(an ``EmbeddedBroker``). Extra librdkafka settings (security, timeouts) travel
with the connection, so ``restore_stores``, ``StandbyReplica``, ``failover_drill``
and friends all reach a secured cluster the same way.

Example:
    >>> kafka = KafkaConnection("kafka-1:9092", {"security.protocol": "SASL_SSL"})
    >>> kafka.client_config()["security.protocol"]
    'SASL_SSL'
    >>> connect("127.0.0.1:9092").bootstrap_servers
    '127.0.0.1:9092'
    >>> connect(42)
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad Kafka connection: 42; accepted: a KafkaConnection, \
'host:port[,host:port]', or an EmbeddedBroker
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from statekit.errors import BadArgument

# librdkafka's own log lines (reconnect attempts, "coordinator load in progress: retrying" and
# the like) go to this logger, not to stderr, and not up to the root logger either: a notebook
# or PySpark that configured the root logger would show each retry as a red warning, while the
# errors that matter reach the caller as exceptions. To see them, give this logger a handler.
CLIENT_LOG = logging.getLogger("statekit.kafka.client")
CLIENT_LOG.addHandler(logging.NullHandler())
CLIENT_LOG.propagate = False
ACCEPTED = "a KafkaConnection, 'host:port[,host:port]', or an EmbeddedBroker"


@runtime_checkable
class HasConnection(Protocol):
    """Anything that knows its cluster (``EmbeddedBroker``)."""

    @property
    def connection(self) -> KafkaConnection: ...


@dataclass(frozen=True)
class KafkaConnection:
    """A Kafka cluster: ``bootstrap_servers`` plus librdkafka ``config`` for every client.

    Args:
        bootstrap_servers: ``"host:port[,host:port]"``.
        config: extra librdkafka settings (``security.protocol``, ``sasl.*``, ...) used by
            every producer, consumer and admin client statekit makes for this cluster.
    """

    bootstrap_servers: str
    config: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.bootstrap_servers, str) or not self.bootstrap_servers.strip():
            raise BadArgument("bootstrap_servers", self.bootstrap_servers,
                              "the Kafka cluster's 'host:port[,host:port]'")
        if not isinstance(self.config, Mapping) or not all(
                isinstance(k, str) for k in self.config):
            raise BadArgument("Kafka client config", self.config,
                              "a dict of librdkafka setting names to values")
        object.__setattr__(self, "config", {k: str(v) for k, v in self.config.items()})

    def client_config(self, **extra: Any) -> dict:
        """Settings for a confluent-kafka client: address, logger, ``config``, then ``extra``."""
        return {"bootstrap.servers": self.bootstrap_servers, "logger": CLIENT_LOG,
                **self.config, **extra}

    def with_config(self, config: Mapping[str, str] | None) -> KafkaConnection:
        """The same cluster with ``config`` added (None: this connection)."""
        if not config:
            return self
        return KafkaConnection(self.bootstrap_servers, {**self.config, **config})

    def to_dict(self) -> dict:
        """``{"bootstrap_servers": ..., "config": {...}}`` (``from_dict`` reads it back; the
        settings may hold a password: pass it to a worker on standard input, not a command
        line)."""
        return {"bootstrap_servers": self.bootstrap_servers, "config": dict(self.config)}

    @classmethod
    def from_dict(cls, data: Mapping) -> KafkaConnection:
        """The connection ``to_dict`` described; a missing or unknown field is named."""
        if not isinstance(data, Mapping) or "bootstrap_servers" not in data:
            raise BadArgument("Kafka connection description", data,
                              "a dict with bootstrap_servers (and config)")
        unknown = [k for k in data if k not in ("bootstrap_servers", "config")]
        if unknown:
            raise BadArgument("Kafka connection field", unknown[0], "bootstrap_servers, config")
        return cls(data["bootstrap_servers"], data.get("config") or {})

    @property
    def key(self) -> tuple:
        """A hashable identity (address and settings), for caching clients."""
        return (self.bootstrap_servers, tuple(sorted(self.config.items())))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KafkaConnection) and other.key == self.key

    def __repr__(self) -> str:
        shown = f", config={sorted(self.config)}" if self.config else ""
        return f"KafkaConnection({self.bootstrap_servers!r}{shown})"


Kafka = KafkaConnection | str | HasConnection


def connect(kafka: Kafka, config: Mapping[str, str] | None = None) -> KafkaConnection:
    """``kafka`` as a KafkaConnection (``config`` added to its settings).

    Accepts a KafkaConnection, a bootstrap-servers string, or an object with a
    ``connection`` attribute (an ``EmbeddedBroker``).
    """
    if isinstance(kafka, KafkaConnection):
        conn = kafka
    elif isinstance(kafka, str):
        conn = KafkaConnection(kafka)
    elif isinstance(kafka, HasConnection) and isinstance(kafka.connection, KafkaConnection):
        conn = kafka.connection
    else:
        raise BadArgument("Kafka connection", kafka, ACCEPTED)
    return conn.with_config(config)


@dataclass(frozen=True)
class TopicRef:
    """A topic and its cluster, the pair most Kafka work takes together.

    Example:
        >>> ref = TopicRef("127.0.0.1:9092", "games")
        >>> ref.kafka.bootstrap_servers, ref.topic
        ('127.0.0.1:9092', 'games')
        >>> TopicRef.from_dict(ref.to_dict()) == ref
        True
    """

    kafka: KafkaConnection
    topic: str

    def __post_init__(self):
        object.__setattr__(self, "kafka", connect(self.kafka))
        if not isinstance(self.topic, str) or not self.topic:
            raise BadArgument("topic", self.topic, "a topic name")

    def to_dict(self) -> dict:
        """``{"kafka": {...}, "topic": ...}`` (``from_dict`` reads it back)."""
        return {"kafka": self.kafka.to_dict(), "topic": self.topic}

    @classmethod
    def from_dict(cls, data: Mapping) -> TopicRef:
        """The reference ``to_dict`` described; a missing or unknown field is named."""
        if not isinstance(data, Mapping) or not {"kafka", "topic"} <= set(data):
            raise BadArgument("topic reference", data, "a dict with kafka and topic")
        unknown = [k for k in data if k not in ("kafka", "topic")]
        if unknown:
            raise BadArgument("topic reference field", unknown[0], "kafka, topic")
        return cls(KafkaConnection.from_dict(data["kafka"]), data["topic"])
