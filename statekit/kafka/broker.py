"""The embedded broker: Apache Kafka itself, one KRaft node (broker and controller in one JVM),
started as a child process on 127.0.0.1.

Its log lives on disk in a folder it owns (a temporary one, removed when the broker is closed,
unless ``log_dir=`` names one to keep); its log cleaner really compacts, its transaction
coordinator and group coordinator are the real ones. It dies with its parent: on ``stop()``,
on leaving a ``with`` block, at interpreter exit, and (on Linux) when the parent is killed
outright. ``stop()`` then ``start()`` (or ``kill()`` then ``start()``) brings the same broker
back on the same ports from its own log directory, with every topic and record it had.

The jars come from Maven Central, once per machine (``statekit.kafka.jars``). Without Java or
the jars, ``statekit.kafka.TansuBroker`` is the explicit alternative (memory only, no
compaction).

Example:
    >>> with EmbeddedBroker() as broker:                      # doctest: +SKIP
    ...     create_topic(broker.bootstrap_servers, "games", partitions=4)
"""

from __future__ import annotations

import base64
import errno
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

from statekit.errors import StatekitError
from statekit.java import JAVA_FIX, java_executable
from statekit.kafka.broker_process import BrokerProcess
from statekit.ports import free_port

#: the broker's own settings statekit sets (anything else is Kafka's default); ``overrides=``
#: adds to or replaces these. Chosen for one laptop: internal topics of one replica and few
#: partitions, no time retention by default, a group's first join not delayed 3 s, a
#: restarted node back without waiting out a 9 s session, and a log cleaner that looks for work
#: every half second instead of every 15 s (topics' own settings say how soon to compact:
#: ``statekit.changelog.naming`` chooses them per store kind).
BROKER_SETTINGS: dict[str, str] = {
    "num.partitions": "1",
    # time retention off unless a topic sets its own (windowed changelogs do): Kafka counts it
    # from each record's timestamp, and the datasets' events are months old (Kafka: 7 days)
    "log.retention.ms": "-1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    "log.cleaner.backoff.ms": "500",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
    "log.segment.delete.delay.ms": "1000",
    "log.retention.check.interval.ms": "5000",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "2",
    "background.threads": "4",
}

#: Kafka's log4j 2 settings for the embedded broker: warnings and errors only, to its log file
LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def cluster_id() -> str:
    """A new KRaft cluster id, as Kafka writes one (``Uuid``: 16 random bytes, base64url).

    Example:
        >>> len(cluster_id()), cluster_id() != cluster_id()
        (22, True)
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka's own rule: an id never starts with a dash
            return text



class EmbeddedBroker(BrokerProcess):
    """Apache Kafka as a single KRaft node on 127.0.0.1 (one JVM, broker and controller).

    Args:
        port: the client port; a free one when None.
        log_dir: the folder of its log (kept when given; a temporary folder removed at
            ``close()`` otherwise). A folder that already holds this broker's log is reused,
            so a broker started again on it has every topic it had.
        heap: the JVM's heap (``-Xmx``), bounded so that Spark and the broker share a laptop.
        overrides: broker settings added to or replacing ``BROKER_SETTINGS``.
        startup_timeout: seconds to wait until the broker answers metadata requests.
        log_path: where the broker's output goes (a temp file by default).
    """

    kind = "Apache Kafka broker"

    def __init__(self, port: int | None = None, *, log_dir: str | os.PathLike | None = None,
                 heap: str = "512m", overrides: Mapping[str, object] | None = None,
                 startup_timeout: float = 60.0, log_path: str | None = None):
        super().__init__(port, startup_timeout, log_path)
        self.controller_port = free_port(self.host)
        self.node_id = 1
        self.heap = heap
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self._voters: str | None = None
        self._owns_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.cluster_id: str | None = None

    def _join(self, node_id: int, voters: str, cluster: str) -> None:
        """Make this node ``node_id`` of a KRaft cluster of ``voters`` (``id@host:port,…``)
        with the id ``cluster`` (``statekit.kafka.cluster`` does this before starting it)."""
        self.node_id, self._voters, self.cluster_id = node_id, voters, cluster

    @property
    def data_dir(self) -> Path | None:
        """The folder Kafka keeps its partitions in (``log.dirs``): one folder per partition."""
        return self.log_dir / "data" if self.log_dir else None

    def _ports(self) -> dict[str, int]:
        return {"client": self.port, "controller": self.controller_port}

    def cleaned_offsets(self, topic: str) -> dict[int, int]:
        """Partition → the offset this broker's log cleaner has compacted ``topic`` up to
        (read from its ``cleaner-offset-checkpoint``); partitions not cleaned yet left out.

        Example:
            >>> broker.cleaned_offsets("board-counts-changelog")      # doctest: +SKIP
            {0: 1180, 1: 1422, 2: 977}
        """
        from statekit.kafka.cleaner_checkpoint import cleaned_offsets

        return cleaned_offsets(self.data_dir, topic) if self.data_dir else {}

    def settings(self) -> dict[str, str]:
        """The broker's ``server.properties``, as this broker writes them."""
        voters = self._voters or f"{self.node_id}@{self.host}:{self.controller_port}"
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},"
                         f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            **BROKER_SETTINGS,
            **self.overrides,
        }

    def _prepare_dir(self) -> None:
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix="statekit-kafka-"))
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            probe = self.log_dir / ".statekit-write-probe"
            probe.write_bytes(b"x" * 4096)
            probe.unlink()
        except OSError as exc:
            what = "is full" if exc.errno == errno.ENOSPC else f"cannot be written ({exc.strerror})"
            raise StatekitError(
                f"the embedded Apache Kafka broker's log folder {self.log_dir} {what}; pass "
                "log_dir= a writable folder with room, or free space there") from None
        text = "".join(f"{k}={v}\n" for k, v in self.settings().items())
        (self.log_dir / "server.properties").write_text(text)
        (self.log_dir / "log4j2.properties").write_text(LOG4J2)

    def _java(self) -> list[str]:
        from statekit.kafka.jars import kafka_classpath

        java = java_executable()
        if java is None:
            raise StatekitError(f"the embedded Apache Kafka broker needs Java 17+: no java on "
                                f"PATH and no JAVA_HOME; {JAVA_FIX} (or use "
                                "statekit.kafka.TansuBroker, memory only, no compaction)")
        return [java, f"-Xmx{self.heap}", "-Xss1m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.log_dir / 'log4j2.properties'}",
                "-cp", kafka_classpath()]

    def _format(self, java: list[str]) -> None:
        """Format the log folder as a new KRaft node, once: Kafka's ``kafka-storage format``,
        done by copying a template it made once per machine (``statekit.kafka.log_format``)."""
        from statekit.kafka.log_format import format_log_dir

        meta = self.data_dir / "meta.properties"
        if meta.exists():
            for line in meta.read_text().splitlines():
                if line.startswith("cluster.id="):
                    self.cluster_id = line.split("=", 1)[1]
            return
        self.cluster_id = self.cluster_id or cluster_id()
        try:
            format_log_dir(self.data_dir, java, self.settings(), node_id=self.node_id,
                           cluster=self.cluster_id)
        except OSError as exc:
            raise StatekitError(f"could not format the Apache Kafka log folder "
                                f"{self.data_dir}: {exc}") from None

    def _prepare(self) -> list[str]:
        """Write its settings, format its log folder (once); the ``java`` command to run it."""
        self._prepare_dir()
        java = self._java()
        self._format(java)
        return java

    def _command(self) -> tuple[list[str], Mapping[str, str]]:
        java = self._prepare()
        return [*java, "kafka.Kafka", str(self.log_dir / "server.properties")], {}

    def close(self) -> None:
        """Stop the broker, and remove its log folder when it made that folder itself."""
        self.stop()
        if self._owns_dir and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None
