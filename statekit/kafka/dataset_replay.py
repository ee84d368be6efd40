"""Replay a Dataset into a Kafka topic, keyed the way the Java clients and Kafka Streams key.

Records go out with confluent-kafka's ``murmur2_random`` partitioner, so a key
lands on the partition Java's default partitioner (and Kafka Streams) would
pick: ``toPositive(murmur2(key)) % partitions`` (the tests check it against a
murmur2 of their own); a record without a key goes to a random partition. Each
record's Kafka timestamp is the dataset's event time.

Example:
    >>> from statekit.datasets import game_events
    >>> report = replay(game_events(), "127.0.0.1:9092", "games", partitions=4)  # doctest: +SKIP
    >>> report.partition_counts                                   # doctest: +SKIP
    {0: 1204, 1: 1371, 2: 1190, 3: 1235}
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Producer

from statekit.errors import BadArgument, StatekitError
from statekit.kafka.clients import check_reachable
from statekit.kafka.topics import create_topic, partition_count
from statekit.model.connection import Kafka, connect
from statekit.options.base import route, settle
from statekit.options.replay import ReplayOptions
from statekit.validate import kafka_name

#: A replayed topic keeps its records whatever their timestamps: Apache Kafka deletes a
#: segment once its newest record's timestamp is ``retention.ms`` (7 days by default) old,
#: and a historical dataset's events are months old the moment they are written.
KEEP_HISTORY = {"retention.ms": "-1"}

if TYPE_CHECKING:  # pandas is imported where used: Spark workers import this module
    import pandas as pd

@dataclass
class ReplayReport:
    """What a replay wrote: ``partition_counts`` maps partition → records delivered there."""

    topic: str
    records: int
    seconds: float
    records_per_second: float
    partition_counts: dict[int, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return (f"replayed {self.records:,} records into {self.topic!r} in {self.seconds:.2f} s "
                f"({self.records_per_second:,.0f}/s); per partition {self.partition_counts}")


def _records_of(dataset) -> tuple[str, pd.DataFrame]:
    import pandas as pd

    records = getattr(dataset, "records", dataset)
    if not isinstance(records, pd.DataFrame):
        raise BadArgument("dataset", type(dataset).__name__,
                          "a statekit Dataset or a DataFrame with key, value, timestamp columns")
    missing = [c for c in ("key", "value", "timestamp") if c not in records.columns]
    if missing:
        raise BadArgument("dataset columns", list(records.columns),
                          f"key, value, timestamp (missing: {', '.join(missing)})")
    return getattr(dataset, "name", "records"), records


_PRODUCER_ONLY = frozenset({
    "acks", "request.required.acks", "batch.num.messages", "batch.size", "compression.codec",
    "compression.type", "compression.level", "delivery.timeout.ms", "enable.idempotence",
    "linger.ms", "message.send.max.retries", "message.timeout.ms", "partitioner",
    "queue.buffering.max.kbytes", "queue.buffering.max.messages", "queue.buffering.max.ms",
    "retries", "retry.backoff.ms", "sticky.partitioning.linger.ms", "transactional.id",
    "request.timeout.ms",
})


def _encode(x) -> bytes | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return x if isinstance(x, bytes) else str(x).encode("utf-8")


def _send(producer: Producer, topic: str, records: tuple[list, list, list], delivered,
          options: ReplayOptions, bar) -> tuple[int, str | None]:
    """Produce ``records`` (keys, values, timestamps) at ``options.rate``; (records still
    undelivered after flush, problem or None)."""
    keys, values, stamps = records
    rate, flush_timeout = options.rate, options.flush_timeout
    start = time.perf_counter()
    shown = 0
    for i in range(len(keys)):
        if rate is not None:
            due = start + i / rate
            while (wait := due - time.perf_counter()) > 0:
                producer.poll(wait)
        while True:
            try:
                producer.produce(topic, value=values[i], key=keys[i], timestamp=stamps[i],
                                 on_delivery=delivered)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.05)
            except KafkaException as exc:  # e.g. a record bigger than message.max.bytes
                producer.flush(flush_timeout)
                return 0, (f"record {i} (key {keys[i]!r}, {len(values[i] or b'')} value bytes) "
                           f"could not be produced to topic {topic!r}: {exc.args[0].str()}")
        if i % 1000 == 999 or rate is not None:
            producer.poll(0)
            if i + 1 - shown >= (1 if rate is not None and rate < 1000 else 1000):
                bar.update(i + 1 - shown)
                shown = i + 1
    bar.update(len(keys) - shown)
    return producer.flush(flush_timeout), None


#: ``replay``'s keyword shortcuts: each a field of its ``ReplayOptions``
SHORTCUTS = dict.fromkeys(ReplayOptions.field_names(), "options")


def replay(dataset, kafka: Kafka, topic: str, *, options: ReplayOptions | None = None,
           **shortcuts: Any) -> ReplayReport:
    """Produce every record of ``dataset`` into ``topic`` and wait until all are delivered.

    Args:
        dataset: a :class:`statekit.datasets.Dataset` (or a DataFrame with ``key``,
            ``value`` and ``timestamp`` columns); a None key stays None, a None
            value is a tombstone.
        kafka: the cluster (a ``KafkaConnection``, ``"host:port"`` or an ``EmbeddedBroker``).
        topic: the topic to write; created with ``partitions`` when missing and
            ``create`` is true (an existing topic keeps its partition count).
        options: how to produce (a ``ReplayOptions``: ``partitions``, ``rate``, ``create``,
            ``progress``, ``config``, ``topic_config``, ``flush_timeout``, each documented
            there); or its fields as keyword arguments, not both.

    Raises:
        BadArgument: for a bad dataset, topic or option (each named, with what it accepts).
        BrokerUnreachable: nobody answers at the cluster's address.
        StatekitError: some records were not delivered (how many, and the first error).
    """
    name, records = _records_of(dataset)
    kafka_name(topic, "topic name")
    options = settle(options, ReplayOptions,
                     route(shortcuts, SHORTCUTS, "replay").get("options", {}), "options")
    partitions, create, config = options.partitions, options.create, options.config
    flush_timeout = options.flush_timeout
    # connection settings (SASL, SSL, ...) go to the admin client too; producer tuning does not
    admin = connect(kafka, {k: v for k, v in (config or {}).items() if k not in _PRODUCER_ONLY})
    bootstrap_servers = admin.bootstrap_servers
    check_reachable(admin, timeout=5.0)  # BrokerUnreachable
    if create:
        create_topic(admin, topic, partitions, {**KEEP_HISTORY, **(options.topic_config or {})})
    else:
        partition_count(admin, topic)  # TopicNotFound

    counts: dict[int, int] = {}
    failures: list[KafkaError] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failures.append(err)
        else:
            counts[msg.partition()] = counts.get(msg.partition(), 0) + 1

    settings = connect(kafka).client_config(**{
        # in order, once: a retried request (Apache Kafka refuses one now and then while a new
        # topic's leaders settle) would otherwise land behind the ones sent after it
        "enable.idempotence": True,
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "batch.num.messages": 10_000,
        "queue.buffering.max.messages": 500_000,
        "compression.type": "none",
    })
    try:
        producer = Producer({**settings, **(config or {})})
    except KafkaException as exc:
        raise BadArgument("producer config", dict(config or {}),
                          f"librdkafka producer settings ({exc.args[0].str()})") from None
    keys = [_encode(k) for k in records["key"].tolist()]
    values = [_encode(v) for v in records["value"].tolist()]
    stamps = [int(t) for t in records["timestamp"].tolist()]
    total = len(keys)

    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="rec", desc=f"{name} → {topic}", disable=not options.progress)
    start = time.perf_counter()
    try:
        left, problem = _send(producer, topic, (keys, values, stamps), delivered, options, bar)
    finally:
        bar.close()
        # Drop the producer now, not when a traceback lets go of this frame: a broker (Tansu)
        # that is asked to stop waits for open client connections.
        del producer
    if problem is not None:
        raise StatekitError(f"{problem} (dataset {name!r})")
    seconds = time.perf_counter() - start
    if left:
        raise StatekitError(
            f"{left} of {total} records to topic {topic!r} on {bootstrap_servers!r} were not "
            f"delivered within {flush_timeout} s"
        )
    if failures:
        raise StatekitError(
            f"{len(failures)} of {total} records to topic {topic!r} on {bootstrap_servers!r} "
            f"failed delivery; first error: {failures[0]}"
        )
    return ReplayReport(topic, total, seconds, total / seconds if seconds > 0 else float("inf"),
                        dict(sorted(counts.items())))
