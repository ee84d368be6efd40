"""How many brokers a topic can lose: its replication factor, ``min.insync.replicas`` and the
producer's ``acks``, as Apache Kafka applies them.

Each partition has ``replication_factor`` copies on as many brokers. With ``acks=all`` the
leader acknowledges a write once every in-sync replica has it, and refuses it
(``NOT_ENOUGH_REPLICAS``) while fewer than ``min.insync.replicas`` are in sync: an
acknowledged record is on at least ``min.insync.replicas`` brokers, so it survives losing
``min.insync.replicas - 1`` of them (unclean leader election off, Kafka's default). With
``acks=1`` the leader alone acknowledges: writes go on while any replica lives, and a record
acknowledged just before the leader dies can be lost. statekit's changelog producer is
transactional, hence idempotent, hence ``acks=all``; Kafka Streams forces the same under
exactly-once. With every replica down the partition is offline.

Example:
    >>> outcome(3, 2, brokers_down=1)
    'writes go on'
    >>> outcome(3, 2, brokers_down=2)
    'writes refused (NOT_ENOUGH_REPLICAS), reads go on'
    >>> outcome(3, 2, brokers_down=1, acks="1"), survives_losing(3, 2), survives_losing(3, 2, "1")
    ('writes go on', 1, 0)
"""

from __future__ import annotations

from statekit._lazy import pd
from statekit.errors import BadArgument, TopicNotFound
from statekit.kafka.clients import Config, admin_client
from statekit.kafka.topics import describe_topic_config
from statekit.model.connection import Kafka, connect

ACKS = ("all", "1")
WRITES, REFUSED, OFFLINE = ("writes go on", "writes refused (NOT_ENOUGH_REPLICAS), reads go on",
                            "partition offline")


def _check(replication_factor: int, min_insync: int, acks: str, brokers_down: int = 0) -> str:
    if not isinstance(replication_factor, int) or replication_factor < 1:
        raise BadArgument("replication factor", replication_factor, "a whole number ≥ 1")
    if not isinstance(min_insync, int) or not min_insync >= 1:
        raise BadArgument("min.insync.replicas", min_insync, "a whole number ≥ 1")
    if not isinstance(brokers_down, int) or brokers_down < 0:
        raise BadArgument("brokers down", brokers_down, "a whole number ≥ 0")
    acks = str(acks).strip().lower()
    if acks == "-1":
        acks = "all"
    if acks not in ACKS:
        raise BadArgument("acks", acks, "all (or -1), 1")
    return acks


def outcome(replication_factor: int, min_insync: int, brokers_down: int,
            acks: str = "all") -> str:
    """What a partition does with ``brokers_down`` of its replicas' brokers down."""
    acks = _check(replication_factor, min_insync, acks, brokers_down)
    alive = replication_factor - brokers_down
    if alive <= 0:
        return OFFLINE
    if acks == "all" and alive < min_insync:
        return REFUSED
    return WRITES


def survives_losing(replication_factor: int, min_insync: int, acks: str = "all") -> int:
    """How many brokers can be lost (disks and all) without losing an acknowledged record."""
    acks = _check(replication_factor, min_insync, acks)
    if acks == "1":
        return 0
    return min(min_insync, replication_factor) - 1


def outcomes(settings: dict[str, tuple[int, int, str]], max_down: int = 3) -> pd.DataFrame:
    """One row per named setting (name → (replication factor, min.insync.replicas, acks)) and
    number of brokers down: ``setting``, ``brokers_down``, ``outcome``, ``survives_losing``."""
    rows = [{"setting": name, "brokers_down": down, "outcome": outcome(rf, isr, down, acks),
             "survives_losing": survives_losing(rf, isr, acks)}
            for name, (rf, isr, acks) in settings.items() for down in range(max_down + 1)]
    return pd.DataFrame(rows)


def topic_replication(kafka: Kafka, topic: str, config: Config = None) -> dict[str, int]:
    """``replication_factor`` (copies of each partition), ``min_insync_replicas`` and
    ``in_sync`` (the fewest in-sync replicas of any partition now), as the broker reports."""
    conn = connect(kafka, config)
    settings = describe_topic_config(conn, topic)
    meta = admin_client(conn).list_topics(topic, timeout=10)
    found = meta.topics.get(topic)
    if found is None or found.error is not None:
        raise TopicNotFound(topic, conn.bootstrap_servers, sorted(meta.topics))
    parts = found.partitions.values()
    return {"replication_factor": min(len(p.replicas) for p in parts),
            "min_insync_replicas": int(settings["min.insync.replicas"]),
            "in_sync": min(len(p.isrs) for p in parts)}
