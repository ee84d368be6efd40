"""confluent-kafka's clients as statekit makes them: one cached AdminClient per cluster and
config, assign-only consumers, and the error that names an unreachable broker.

Every function takes ``kafka`` (a ``KafkaConnection``, a bootstrap-servers string, or an
``EmbeddedBroker``; see ``statekit.model.connection``) and an optional ``config`` of extra
librdkafka settings merged into the connection's.

Example:
    >>> consumer = plain_consumer("127.0.0.1:9092")                      # doctest: +SKIP
    >>> check_reachable("127.0.0.1:9092", timeout=2)                     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from statekit.errors import BrokerUnreachable
from statekit.model.connection import Kafka, KafkaConnection, connect

Config = Mapping[str, str] | None

_ADMINS: dict[tuple, AdminClient] = {}


def admin_client(kafka: Kafka, config: Config = None) -> AdminClient:
    """One AdminClient per (address, config), kept alive so pending futures resolve."""
    conn = connect(kafka, config)
    if conn.key not in _ADMINS:
        _ADMINS[conn.key] = AdminClient(conn.client_config())
    return _ADMINS[conn.key]


def forget_clients(bootstrap_servers: str) -> None:
    """Drop cached admin clients of a cluster that is going away."""
    for key in [k for k in _ADMINS if k[0] == bootstrap_servers]:
        del _ADMINS[key]


def plain_consumer(kafka: Kafka, config: Config = None, **extra) -> Consumer:
    """A consumer meant for assign() only: no group coordination, no commits.

    It reads committed records only (``isolation.level=read_committed``, librdkafka's
    default, said here because the changelog writer uses transactions): the records of a
    transaction still open come later, and offsets of control records are skipped.
    """
    settings = {
        "group.id": "statekit-reader",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "fetch.wait.max.ms": 20,
        "isolation.level": "read_committed",
        **connect(kafka, config).client_config(),
        **extra,
    }
    return Consumer(settings)


def unreachable(conn: KafkaConnection, detail: str) -> BrokerUnreachable:
    """BrokerUnreachable naming ``conn``'s address, with why an embedded broker there stopped
    when this process ran it (its exit and the cause its log gives: a full disk, say)."""
    from statekit.kafka.broker_process import why_stopped

    addresses = [a.strip() for a in conn.bootstrap_servers.split(",") if a.strip()]
    reasons = [reason for reason in map(why_stopped, addresses) if reason]
    return BrokerUnreachable(conn.bootstrap_servers, "; ".join([detail, *reasons]))


def check_reachable(kafka: Kafka, timeout: float = 5.0, config: Config = None) -> None:
    """Raise BrokerUnreachable (naming the address) unless a broker answers within timeout."""
    conn = connect(kafka, config)
    try:
        admin_client(conn).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise unreachable(conn, str(exc.args[0])) from None

