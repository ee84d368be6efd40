"""Topic helpers over confluent-kafka's AdminClient and Consumer.

Every function takes ``kafka`` (a ``KafkaConnection``, a bootstrap-servers
string, or an ``EmbeddedBroker``; see ``statekit.model.connection``) and an
optional ``config`` of extra librdkafka settings merged into the connection's.

Example:
    >>> create_topic("127.0.0.1:9092", "games", partitions=4,            # doctest: +SKIP
    ...              config={"cleanup.policy": "compact"})
    >>> watermarks("127.0.0.1:9092", "games")                            # doctest: +SKIP
       partition  low  high
    0          0    0   812
"""

from __future__ import annotations

import concurrent.futures
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from statekit.errors import BrokerUnreachable, TopicNotFound
from statekit.model.connection import CLIENT_LOG, Kafka, KafkaConnection, connect

if TYPE_CHECKING:  # pandas is imported where used: Spark workers import this module
    import pandas as pd

__all__ = ["CLIENT_LOG", "UNAVAILABLE", "admin_client", "check_reachable", "consume_ranges",
           "create_topic", "delete_topic", "describe_topic_config", "end_offsets",
           "forget_clients", "list_topics", "partition_count", "plain_consumer", "watermarks",
           "why_unavailable"]

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


def offset_bounds(kafka: Kafka, topic: str, partitions: list[int], committed: bool,
                  timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """Partition → (log start, end) as the broker reports them, no record read: with
    ``committed`` the last stable offset (a ``read_committed`` reader's end: before any
    transaction still open, and before a commit whose markers are not written yet), else the
    high watermark (one past the last offset written, commit markers included). Apache Kafka
    acknowledges a commit before it writes the commit markers into the partitions, so for a
    moment the first lags the second."""
    isolation = "read_committed" if committed else "read_uncommitted"
    consumer = plain_consumer(kafka, **{"isolation.level": isolation})
    try:
        return {p: watermarks_of(consumer, topic, p, timeout) for p in partitions}
    finally:
        consumer.close()


def log_starts(kafka: Kafka, parts: Iterable[tuple[str, int]],
               timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """(topic, partition) → its log start offset, one consumer per topic (``offset_bounds``)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in parts:
        by_topic.setdefault(topic, []).append(partition)
    return {(topic, p): low for topic, partitions in by_topic.items()
            for p, (low, _) in offset_bounds(kafka, topic, sorted(set(partitions)),
                                             committed=False, timeout=timeout).items()}


#: what Apache Kafka answers for a moment after a topic is created (or recreated under the same
#: name) or a partition's leader moves: worth asking again
_SETTLING = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                       KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.OFFSET_NOT_AVAILABLE,
                       KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH})

#: what the client itself answers for a moment after a topic is created on a cluster of several
#: nodes: each node learns the new topic from the controller on its own, so the node a fresh
#: client asks for metadata may not list the topic (or its partitions) yet
_JUST_CREATED = _SETTLING | {KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC}


def watermarks_of(consumer: Consumer, topic: str, partition: int, timeout: float = 10.0,
                  settling: frozenset[int] = _SETTLING) -> tuple[int, int]:
    """``consumer.get_watermark_offsets`` of one partition, asked again while the answer is a
    retriable error or one of ``settling`` (Apache Kafka answers "not leader" for a moment after
    a topic is created or a leader moves) until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    where = TopicPartition(topic, partition)
    while True:
        try:
            return consumer.get_watermark_offsets(
                where, timeout=max(0.5, deadline - time.monotonic()), cached=False)
        except KafkaException as exc:
            error = exc.args[0]
            if not (error.retriable() or error.code() in settling) \
                    or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def unreachable(conn: KafkaConnection, detail: str) -> BrokerUnreachable:
    """BrokerUnreachable naming ``conn``'s address, with why an embedded broker there stopped
    when this process ran it (its exit and the cause its log gives: a full disk, say)."""
    from statekit.kafka.broker import why_stopped

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
            watermarks_of(consumer, topic, p, timeout, settling=_JUST_CREATED)
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


def end_offsets(
    consumer: Consumer, topic: str, partitions: list[int], timeout: float = 10.0
) -> dict[int, tuple[int, int]]:
    """Partition → (low, end) where ``end`` is one past the last record ``consumer`` can read.

    A reported watermark is only where the search starts, for three reasons:

    * some Kafka-protocol brokers (Tansu among them) report the high watermark as the
      *first* offset of the last record batch + 1;
    * a transaction ends with a control record (its commit or abort marker) in each
      partition it wrote: an offset that no consumer reads;
    * a ``read_committed`` consumer (``plain_consumer``) reads up to the last stable offset:
      records of an open transaction are not readable yet. (Tansu answers a
      ``read_committed`` ListOffsets with 0 while a transaction is open.)

    So the consumer reads from two below the reported watermark to its end of partition and
    takes the last record it sees: one small fetch on a correct broker. Where it sees none
    (markers only, or an aborted transaction a real broker hides) it searches further back;
    from ``low`` when the reported watermark is not above it. ``end`` is ``low`` when there
    is no record to read. TimeoutError (naming the partitions) when the broker sends
    nothing for ``timeout`` seconds.
    """
    marks = {p: watermarks_of(consumer, topic, p, timeout) for p in partitions}
    ends = {p: lo for p, (lo, _) in marks.items()}
    start = {p: max(lo, hi - 2) for p, (lo, hi) in marks.items()}
    step = dict.fromkeys(partitions, 8)
    todo = set(partitions)
    while todo:
        last = _last_records(consumer, topic, {p: start[p] for p in todo}, timeout)
        for p in list(todo):
            low = marks[p][0]
            if last[p] is not None:
                ends[p] = last[p] + 1
            elif start[p] > low:  # markers or hidden records only: look further back
                start[p], step[p] = max(low, start[p] - step[p]), step[p] * 8
                continue
            todo.discard(p)
    return {p: (marks[p][0], ends[p]) for p in partitions}


def _last_records(consumer: Consumer, topic: str, starts: Mapping[int, int],
                  timeout: float) -> dict[int, int | None]:
    """Partition → offset of the last record readable from ``starts`` on (None: none)."""
    last: dict[int, int | None] = dict.fromkeys(starts)
    open_parts = set(starts)
    consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
    try:
        heard = time.monotonic()
        while open_parts:
            messages = consumer.consume(10_000, timeout=0.05)
            if messages:
                heard = time.monotonic()
            elif time.monotonic() - heard > timeout:
                raise TimeoutError(f"no end of partition from {topic!r} partitions "
                                   f"{sorted(open_parts)} in {timeout:.0f} s")
            for msg in messages:
                err, part = msg.error(), msg.partition()
                if err is None:
                    last[part] = max(last[part] if last[part] is not None else -1, msg.offset())
                elif err.code() == KafkaError._PARTITION_EOF:
                    open_parts.discard(part)
                else:
                    raise KafkaException(err)
    finally:
        consumer.unassign()
    return last


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
        from statekit.kafka.broker import why_stopped

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
