"""Why a cluster does not serve a topic now: the errors of an unserved request, and a check of
brokers, leaders and in-sync replicas that says which.

Example:
    >>> why_unavailable("127.0.0.1:9092", "games")                       # doctest: +SKIP
    'broker 127.0.0.1:9092 does not answer'
    >>> KafkaError._ALL_BROKERS_DOWN in UNAVAILABLE
    True
"""

from __future__ import annotations

import concurrent.futures
import socket

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource

from statekit.kafka.clients import admin_client
from statekit.model.connection import Kafka, KafkaConnection, connect

#: librdkafka's errors of a request a cluster did not serve: no leader, too few replicas in
#: sync, a broker or coordinator gone, or no answer in time (``why_unavailable`` says why)
UNAVAILABLE = frozenset({
    KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.OFFSET_NOT_AVAILABLE, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR})


def _answers(address: str, timeout: float) -> bool:
    """Whether something accepts a TCP connection at ``host:port`` (a stalled broker does)."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError):
        return False
    return True


def _min_insync(conn: KafkaConnection, topic: str, timeout: float) -> int | None:
    """The topic's ``min.insync.replicas`` (None when the cluster does not say in time)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin_client(conn).describe_configs(
            [resource], request_timeout=timeout)[resource].result(timeout)
        return int(entries["min.insync.replicas"].value)
    except (KafkaException, concurrent.futures.TimeoutError, KeyError, TypeError, ValueError):
        return None


def _listed(items: list) -> str:
    return items[0] if len(items) == 1 else ", ".join(map(str, items[:-1])) + f" and {items[-1]}"


def why_unavailable(kafka: Kafka, topic: str, timeout: float = 2.0) -> str:
    """Why writes with ``acks=all`` to ``topic`` cannot complete now, as far as the cluster
    tells within about ``timeout`` s: its brokers that do not answer (every bootstrap address
    and every broker its metadata lists, tried with a TCP connection), the partitions whose
    leader is not on a broker that answers, and those with fewer in-sync replicas on brokers
    that answer than the topic's ``min.insync.replicas``. "" when none of that is found (a
    stalled broker still accepts connections).

    The metadata of a cluster that lost the majority of its KRaft controllers no longer
    changes: it may list a dead broker as a partition's leader or in-sync replica; a broker
    that does not answer counts for neither here.

    Example:
        >>> why_unavailable("127.0.0.1:1", "games", timeout=0.5)       # doctest: +SKIP
        '127.0.0.1:1 does not answer (0 of 1 brokers do)'
    """
    conn = connect(kafka)
    try:
        meta = admin_client(conn).list_topics(topic=topic, timeout=timeout)
    except KafkaException:
        meta = None
    brokers = {b.id: f"{b.host}:{b.port}" for b in meta.brokers.values()} if meta else {}
    addresses = list(dict.fromkeys(
        [a.strip() for a in conn.bootstrap_servers.split(",") if a.strip()]
        + sorted(brokers.values())))
    up = {address: _answers(address, timeout) for address in addresses}
    down = [address for address, ok in up.items() if not ok]
    found = []
    if down:
        from statekit.kafka.broker_process import why_stopped

        found.append(f"{_listed(down)} {'does' if len(down) == 1 else 'do'} not answer "
                     f"({len(addresses) - len(down)} of {len(addresses)} brokers do)")
        found += [reason for reason in map(why_stopped, down) if reason]
    listed = meta.topics.get(topic) if meta is not None else None
    if listed is None or listed.error is not None:
        return "; ".join(found)
    alive = {b for b, address in brokers.items() if up[address]}
    min_isr = _min_insync(conn, topic, timeout)
    leaderless, short = [], []
    for part in sorted(listed.partitions.values(), key=lambda p: p.id):
        if part.leader not in alive:
            leaderless.append(part.id)
        elif min_isr is not None and len(set(part.isrs) & alive) < min_isr:
            short.append(part.id)
    if leaderless:
        found.append(f"partition{'s' if len(leaderless) > 1 else ''} {_listed(leaderless)} "
                     f"of {topic!r} {'have' if len(leaderless) > 1 else 'has'} no leader on a "
                     f"broker that answers")
    if short:
        found.append(f"partition{'s' if len(short) > 1 else ''} {_listed(short)} of {topic!r} "
                     f"{'have' if len(short) > 1 else 'has'} fewer in-sync replicas on brokers "
                     f"that answer than its min.insync.replicas={min_isr}")
    return "; ".join(found)
