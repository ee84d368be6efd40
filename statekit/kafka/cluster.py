"""A Kafka cluster of several Apache Kafka KRaft nodes on 127.0.0.1, for fault drills.

``KafkaCluster(brokers=3)`` runs three ``EmbeddedBroker`` JVMs, each a broker and a controller
(``process.roles=broker,controller``), all three voters of one KRaft quorum
(``controller.quorum.voters``) with one cluster id, each with its own log folder under a
folder the cluster owns (removed at ``close()``). Every topic is replicated to three nodes
and takes a write with ``acks=all`` while two replicas are in sync (``replication_settings``:
``default.replication.factor=3``, ``min.insync.replicas=2``, the consumer offsets and
transaction state topics the same), and a node that is killed is noticed within seconds
(``CLUSTER_SETTINGS``: ``broker.session.timeout.ms`` and friends), so its partitions get new
leaders: about 2 s after a ``kill -9`` here, against 8 to 11 s with Kafka's own defaults.

``kill(node)`` is ``kill -9`` of one node; ``start(node)`` brings it back on its ports from
its own log folder, and it catches up. The nodes die with the process that started them, as
an ``EmbeddedBroker`` does: start the cluster on a thread that outlives it (Linux signals a
child when the *thread* that started it ends).

Two of three nodes down is a majority of the controllers down as well. Stopped one after
the other (``stop(node)``, a controlled shutdown), their replicas leave the in-sync sets
first, which shrink to the node left: below ``min.insync.replicas``, and its broker refuses
``acks=all`` writes (``NOT_ENOUGH_REPLICAS``). Killed, nothing changes any more: the node left
keeps serving what it leads, no leader is elected and no replica leaves the in-sync set, so
an ``acks=all`` write waits for a replica that does not come. librdkafka retries both until
``message.timeout.ms``: a client sees a timeout either way
(``statekit.kafka.availability.why_unavailable`` says which).

Kept whole: one concept, the cluster, as one class whose start, kill and stop wait on what its
own metadata says (brokers listed, leaders, in-sync replicas); split, those waits would leave
the class for a mixin that only it uses.

Example:
    >>> with KafkaCluster(brokers=3) as cluster:                      # doctest: +SKIP
    ...     create_topic(cluster, "games", partitions=3)    # replicated 3 times
    ...     leader = cluster.leader_of("games", 0)
    ...     cluster.kill(leader)                            # a new leader within seconds
    ...     cluster.leader_of("games", 0, other_than=leader)
    ...     cluster.start(leader)                           # back, from its own log
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ClusterMetadata

from statekit.errors import StatekitError, TopicNotFound
from statekit.kafka.broker import EmbeddedBroker, cluster_id
from statekit.kafka.broker_process import ClosedOnExit
from statekit.kafka.clients import admin_client, forget_clients
from statekit.kafka.topics import list_topics
from statekit.model.connection import KafkaConnection
from statekit.validate import whole_number

_LIVE: weakref.WeakSet[KafkaCluster] = weakref.WeakSet()

#: the most nodes a cluster on one machine runs (each a JVM)
MAX_BROKERS = 9

#: broker settings every node of a cluster adds to ``statekit.kafka.broker.BROKER_SETTINGS``
#: (``overrides=`` adds to or replaces these). Replication: see ``replication_settings``.
#: Failure detection: a node that misses heartbeats for ``broker.session.timeout.ms`` is
#: fenced by the controller, which moves its partitions' leadership to another in-sync replica
#: at once; when it was also the active controller, the other voters notice within
#: ``controller.quorum.fetch.timeout.ms`` and elect one first. A follower that stops fetching
#: leaves the in-sync set after ``replica.lag.time.max.ms`` (Kafka's default, 30 s, would hold
#: ``acks=all`` writes that long). Measured on a busy 2-core machine (kill -9 of a partition's
#: leader, until the metadata names another; then until an ``acks=all`` write is delivered):
#: 1.9-2.1 s (2.3-3.1 s), or 3.6-3.7 s (5.5 s) when the node was the active controller too;
#: with Kafka's defaults (heartbeat 2 s, session 9 s) 8.3-9.5 s, or 11.1-11.2 s.
CLUSTER_SETTINGS: dict[str, str] = {
    "broker.heartbeat.interval.ms": "250",
    "broker.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "3000",
    "controller.quorum.fetch.timeout.ms": "1500",
    "controller.quorum.election.timeout.ms": "750",
    "controller.quorum.election.backoff.max.ms": "500",
    "unclean.leader.election.enable": "false",
}


def replication_settings(brokers: int) -> dict[str, str]:
    """How many copies of each partition a cluster of ``brokers`` nodes keeps, and how many
    must be in sync for a write with ``acks=all``: 3 and 2 from three nodes on (one node may
    fail without stopping a write), all of them and 1 below.

    Example:
        >>> replication_settings(3)["default.replication.factor"]
        '3'
        >>> replication_settings(2)["min.insync.replicas"]
        '1'
    """
    copies = min(3, brokers)
    in_sync = 2 if copies == 3 else 1
    return {
        "default.replication.factor": str(copies),
        "min.insync.replicas": str(in_sync),
        "offsets.topic.replication.factor": str(copies),
        "transaction.state.log.replication.factor": str(copies),
        "transaction.state.log.min.isr": str(in_sync),
        "share.coordinator.state.topic.replication.factor": str(copies),
        "share.coordinator.state.topic.min.isr": str(in_sync),
    }


Node = int | EmbeddedBroker


class KafkaCluster(ClosedOnExit):
    """``brokers`` Apache Kafka KRaft nodes on 127.0.0.1, each a broker and a controller.

    Args:
        brokers: how many nodes (ids 1..brokers), each a JVM.
        folder: where the nodes' log folders go (``node-1``, ...) and their output
            (``node-1.log``, ...); kept when given, a temporary folder removed at ``close()``
            otherwise.
        heap: each node's JVM heap (``-Xmx``).
        overrides: broker settings added to or replacing ``CLUSTER_SETTINGS`` and
            ``replication_settings(brokers)`` on every node.
        startup_timeout: seconds each node may take to answer.

    Anything statekit takes as ``kafka`` takes the cluster (its ``connection`` lists every
    node).
    """

    def __init__(self, brokers: int = 3, *, folder: str | Path | None = None,
                 heap: str = "256m", overrides: Mapping[str, object] | None = None,
                 startup_timeout: float = 90.0):
        count = whole_number(brokers, "brokers", minimum=1, maximum=MAX_BROKERS,
                             accepted=f"a number of nodes from 1 to {MAX_BROKERS}")
        self._owns_folder = folder is None
        self.folder = Path(folder) if folder is not None else Path(
            tempfile.mkdtemp(prefix="statekit-kafka-cluster-"))
        self.cluster_id = cluster_id()
        settings = {**replication_settings(count), **CLUSTER_SETTINGS,
                    **{k: str(v) for k, v in (overrides or {}).items()}}
        #: the nodes, node id ``i + 1`` at index ``i``
        self.nodes: list[EmbeddedBroker] = [
            EmbeddedBroker(log_dir=self.folder / f"node-{i}", heap=heap, overrides=settings,
                           startup_timeout=startup_timeout,
                           log_path=str(self.folder / f"node-{i}.log"))
            for i in range(1, count + 1)]
        voters = ",".join(f"{i}@{node.host}:{node.controller_port}"
                          for i, node in enumerate(self.nodes, 1))
        for i, node in enumerate(self.nodes, 1):
            node._join(i, voters, self.cluster_id)
        self.startup_timeout = startup_timeout

    # --- addresses ----------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """Every node's ``host:port``, comma-separated, for any Kafka client."""
        return ",".join(node.bootstrap_servers for node in self.nodes)

    @property
    def connection(self) -> KafkaConnection:
        """The cluster as a ``KafkaConnection`` (what every statekit Kafka call accepts)."""
        return KafkaConnection(self.bootstrap_servers)

    @property
    def running(self) -> bool:
        """Whether every node's process runs."""
        return all(node.running for node in self.nodes)

    def node(self, node: Node) -> EmbeddedBroker:
        """The node with id ``node`` (1..brokers), or ``node`` itself when it is one of this
        cluster's."""
        if isinstance(node, EmbeddedBroker):
            if not any(node is mine for mine in self.nodes):
                raise StatekitError(f"{node!r} is not a node of the Kafka cluster in "
                                    f"{self.folder} ({self.bootstrap_servers})")
            return node
        number = whole_number(node, "node", minimum=1, maximum=len(self.nodes),
                              accepted=f"a node id from 1 to {len(self.nodes)}, or a node")
        return self.nodes[number - 1]

    def describe(self, node: Node) -> str:
        """``node 2 (127.0.0.1:12345, folder /tmp/…/node-2)``: a node as errors name it."""
        found = self.node(node)
        return f"node {found.node_id} ({found.bootstrap_servers}, folder {found.log_dir})"

    # --- starting and stopping ------------------------------------------------------------
    def start(self, node: Node | None = None) -> KafkaCluster:
        """Start every node that is not running (``node``: that one only), and wait until the
        cluster's metadata lists them all; returns self.

        The nodes are prepared (their folders formatted, a JVM each) and then wait for each
        other concurrently: a KRaft node answers once a majority of the voters elected a
        controller. A node that does not start is named with its ports and folder; the nodes
        started here are stopped again.
        """
        chosen = [self.node(node)] if node is not None else self.nodes
        todo = [n for n in chosen if not n.running]
        if not todo:
            return self
        self.folder.mkdir(parents=True, exist_ok=True)
        _LIVE.add(self)
        try:
            # the slow part of a start (a JVM formatting each folder) on threads of their own;
            # the nodes themselves on this thread (their parent-death signal follows it)
            self._each(todo, lambda n: n._prepare(), "could not prepare")
            for n in todo:
                try:
                    n._launch()
                except StatekitError as exc:
                    raise self._node_error(n, "did not start", exc) from None
            self._each(todo, lambda n: n.wait_ready(), "did not answer")
            self.wait_for_brokers(timeout=self.startup_timeout)
        except BaseException:
            for n in todo:
                n.stop()
            raise
        return self

    def _each(self, nodes: list[EmbeddedBroker], work: Callable[[EmbeddedBroker], None],
              what: str) -> None:
        """``work(node)`` for each node on a thread of its own; the first failure raised,
        naming its node."""
        errors: dict[int, BaseException] = {}

        def run(n: EmbeddedBroker) -> None:
            try:
                work(n)
            except BaseException as exc:  # noqa: BLE001 - raised below, on the caller's thread
                errors[n.node_id] = exc

        threads = [threading.Thread(target=run, args=(n,), name=f"kafka-node-{n.node_id}",
                                    daemon=True) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            first = min(errors)
            raise self._node_error(self.node(first), what, errors[first]) from None

    def _node_error(self, node: EmbeddedBroker, what: str, exc: BaseException
                    ) -> BaseException:
        """``exc`` with the node named: a plain StatekitError (its own message kept), or
        ``exc`` itself (a missing Java or jars is no one node's matter)."""
        if type(exc) is not StatekitError:
            return exc
        return StatekitError(
            f"{self.describe(node)} of the {len(self.nodes)}-node Kafka cluster "
            f"{self.cluster_id} {what} (client port {node.port}, controller port "
            f"{node.controller_port}, output in {node.log_path}): {exc}")

    def kill(self, node: Node) -> EmbeddedBroker:
        """``kill -9`` one node (a crash: nothing flushed, no controlled shutdown); returns it.
        ``start(node)`` brings it back."""
        found = self.node(node)
        found.kill()
        return found

    def stop(self, node: Node | None = None, timeout: float = 10.0) -> None:
        """Stop every node (``node``: that one only) politely: SIGTERM, a controlled shutdown
        that hands its partitions' leadership to another node, SIGKILL after ``timeout`` s.
        The nodes stop together (a node that waits for a quorum the others took away would
        wait ``timeout``). Idempotent."""
        nodes = [self.node(node)] if node is not None else list(self.nodes)
        threads = [threading.Thread(target=n.stop, args=(timeout,), daemon=True)
                   for n in nodes if n.pid is not None]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if node is None:
            forget_clients(self.bootstrap_servers)

    def close(self) -> None:
        """Stop every node, and remove the cluster's folder when it made that folder."""
        self.stop()
        _LIVE.discard(self)
        if self._owns_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __repr__(self) -> str:
        up = sum(node.running for node in self.nodes)
        return (f"KafkaCluster({self.bootstrap_servers!r}, {up} of {len(self.nodes)} nodes "
                f"running)")

    # --- what the cluster says of itself -------------------------------------------------
    def _metadata(self, topic: str | None = None, timeout: float = 5.0) -> ClusterMetadata:
        return admin_client(self).list_topics(topic=topic, timeout=timeout)

    def wait_for_brokers(self, nodes: Iterable[Node] | None = None,
                         timeout: float = 30.0) -> None:
        """Wait until the cluster's metadata lists ``nodes`` (every running node by default)
        as brokers; StatekitError naming the ones missing after ``timeout`` s."""
        wanted = {self.node(n).node_id for n in nodes} if nodes is not None else {
            n.node_id for n in self.nodes if n.running}
        deadline = time.monotonic() + timeout
        listed: set[int] = set()
        while True:
            with contextlib.suppress(KafkaException):
                listed = set(self._metadata(timeout=2.0).brokers)
            if wanted <= listed:
                return
            if time.monotonic() > deadline:
                missing = ", ".join(self.describe(n) for n in sorted(wanted - listed))
                raise StatekitError(f"the Kafka cluster {self.bootstrap_servers} does not list "
                                    f"{missing} as a broker after {timeout:g} s; see its "
                                    f"output in {self.folder}")
            time.sleep(0.05)

    def leader_of(self, topic: str, partition: int = 0, *, other_than: Node | None = None,
                  timeout: float = 30.0) -> EmbeddedBroker:
        """The node that leads ``partition`` of ``topic``, as the cluster's metadata says.

        ``other_than``: wait until another node leads it (after that node was killed, say).
        Waits up to ``timeout`` s for a partition with no leader (none elected yet);
        StatekitError naming the partition, its replicas and the nodes running after that.
        """
        avoid = self.node(other_than).node_id if other_than is not None else None
        deadline = time.monotonic() + timeout
        seen = "no answer"
        while True:
            try:
                meta = self._metadata(topic, timeout=2.0)
            except KafkaException as exc:
                meta, seen = None, f"no metadata ({exc.args[0].str()})"
            found = meta.topics.get(topic) if meta is not None else None
            if found is not None and found.error is not None and \
                    found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TopicNotFound(topic, self.bootstrap_servers, list_topics(self))
            if found is not None and found.error is None:
                if partition not in found.partitions:
                    raise StatekitError(f"topic {topic!r} has no partition {partition} (it has "
                                        f"{len(found.partitions)})")
                part = found.partitions[partition]
                seen = f"leader {part.leader}, replicas {part.replicas}, in sync {part.isrs}"
                if part.leader > 0 and part.leader != avoid:
                    return self.node(part.leader)
            if time.monotonic() > deadline:
                running = [n.node_id for n in self.nodes if n.running]
                raise StatekitError(
                    f"partition {partition} of {topic!r} on the Kafka cluster "
                    f"{self.bootstrap_servers} has no leader"
                    f"{f' other than node {avoid}' if avoid else ''} after {timeout:g} s "
                    f"({seen}; nodes running: {running}): a new leader needs a replica in "
                    f"sync on a running node and a majority of the controllers running")
            time.sleep(0.05)

    def controller(self) -> EmbeddedBroker | None:
        """The node the KRaft quorum elected its active controller, as the running nodes last
        wrote it (``__cluster_metadata-0/quorum-state``, the newest epoch's); None while no
        running node knows one."""
        best: tuple[int, int] | None = None
        for node in self.nodes:
            if not node.running or node.data_dir is None:
                continue
            with contextlib.suppress(OSError, ValueError):
                state = json.loads((node.data_dir / "__cluster_metadata-0" / "quorum-state")
                                   .read_text())
                epoch, leader = int(state.get("leaderEpoch", -1)), int(state.get("leaderId", -1))
                if leader > 0 and (best is None or epoch > best[0]):
                    best = (epoch, leader)
        return self.node(best[1]) if best else None

    def in_sync(self, topic: str, partition: int = 0) -> list[int]:
        """The node ids of the replicas of ``partition`` of ``topic`` now in sync with its
        leader (its ISR), as the cluster's metadata says."""
        meta = self._metadata(topic)
        found = meta.topics.get(topic)
        if found is None or found.error is not None:
            raise TopicNotFound(topic, self.bootstrap_servers, list_topics(self))
        return sorted(found.partitions[partition].isrs)

    def wait_in_sync(self, timeout: float = 60.0) -> None:
        """Wait until every node runs and every partition of every topic (the internal ones
        too) has a leader and all its replicas in sync; StatekitError naming the partitions
        still behind after ``timeout`` s. A cluster in this state takes any single failure.
        """
        deadline = time.monotonic() + timeout
        behind: list[str] = ["no metadata yet"]
        while True:
            down = [n for n in self.nodes if not n.running]
            if down:
                verb = "is" if len(down) == 1 else "are"
                raise StatekitError(f"{', '.join(self.describe(n) for n in down)} of the Kafka "
                                    f"cluster {verb} not running: start() first")
            with contextlib.suppress(KafkaException):
                meta = self._metadata(timeout=2.0)
                behind = [f"{name}-{p.id} (replicas {p.replicas}, in sync {p.isrs})"
                          for name, t in sorted(meta.topics.items())
                          for p in t.partitions.values()
                          if p.leader <= 0 or sorted(p.isrs) != sorted(p.replicas)]
                if len(meta.brokers) < len(self.nodes):
                    behind.append(f"brokers listed: {sorted(meta.brokers)}")
            if not behind:
                return
            if time.monotonic() > deadline:
                raise StatekitError(f"the Kafka cluster {self.bootstrap_servers} is not in "
                                    f"sync after {timeout:g} s: {', '.join(behind[:10])}")
            time.sleep(0.1)


@atexit.register
def _close_all() -> None:
    for cluster in list(_LIVE):
        with contextlib.suppress(Exception):
            cluster.close()
