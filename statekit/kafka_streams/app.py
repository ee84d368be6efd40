"""statekit's reference Kafka Streams application, started from Python: ``start`` and the
handle it gives.

Each instance is a JVM child process (``statekit.processes.spawn``: it dies with this
process) running ``dev.statekit.streams.Main`` from the build in statekit's cache
(``statekit.kafka_streams.build``), with its own state directory and HTTP port on 127.0.0.1.
All share one ``application.id``: Kafka Streams spreads the tasks over them, keeps
``standbys`` standby replicas of each store, writes the store's changelog
``<application.id>-aggregate-changelog`` and tells each instance where every key lives.

The handle has every verb of statekit's query handles (``QueryHandle``): those that apply to an
engine without batches answer (``parts``, ``snapshot``, ``changelog_topics``,
``read_changelog``, ``progress``, ``close``), the others (``state``, ``changes``,
``describe``, ``wait_for_batches``, a batch argument) refuse with an ``UnsupportedRead``
saying what works instead; ``client`` asks the instances' interactive queries.

Example:
    >>> import statekit as sk
    >>> with sk.kafka_streams.start("games", sk.datasets.GAME_SPEC, kafka=broker,
    ...                             instances=2, standbys=1) as app:  # doctest: +SKIP
    ...     app.wait_until_consumed()
    ...     app.client.get("p07")["rows"]
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from statekit.errors import BadArgument, InstanceDown, KafkaStreamsAppError, UnsupportedRead
from statekit.java import java_executable
from statekit.kafka.topics import partition_count
from statekit.kafka_streams.build import MAIN_CLASS, app_classpath
from statekit.kafka_streams.client import KafkaStreamsClient
from statekit.kafka_streams.frames import rows_frame
from statekit.kafka_streams.options import AppOptions
from statekit.kafka_streams.spec import app_spec, as_query_spec
from statekit.model.connection import Kafka, connect
from statekit.model.query_handle import choose_part
from statekit.ports import free_port
from statekit.processes import spawn, stop
from statekit.validate import kafka_name, whole_number

if TYPE_CHECKING:
    import pandas as pd

    from statekit.model.query_handle import PartReader
    from statekit.model.query_spec import QuerySpec

NO_BATCHES = "Kafka Streams processes record by record and commits on a timer, with no batches"
#: the store's name in the app (``TopologyFactory.STORE``): the handle's one part
STORE = "aggregate"
#: a problem an instance explains itself (``Main.fail``): one line on stderr
_OWN_REASON = re.compile(r"^statekit-streams: (.*)$", re.MULTILINE)
#: small, quick-starting JVMs: the app holds little, and the machine may have 2 cores; C1
#: alone, as statekit starts Spark's driver JVM by default (``statekit.spark``'s DriverStart),
#: so a side-by-side run gives both engines the same compiler; TCP_NODELAY on the query
#: server's sockets (the JDK's HttpServer writes an answer's headers and body apart: without it
#: a keep-alive client waits out the delayed ACK, about 40 ms, on every query)
JVM_OPTIONS = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dsun.net.httpserver.nodelay=true")


@dataclass
class Instance:
    """One running instance: its number, port, state directory, process and log."""

    index: int
    port: int
    state_dir: Path
    config: Path
    log: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def reason(self) -> str:
        """Why it stopped, in its own words (never a stack trace): its ``statekit-streams:``
        line, else its log's last line that is not part of a stack trace."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        own = _OWN_REASON.findall(text)
        if own:
            return own[-1]
        lines = [line for line in text.splitlines()
                 if line.strip() and not line.startswith(("\tat ", "\t...", "Caused by"))]
        return lines[-1] if lines else "it wrote nothing"


class KafkaStreamsApp:
    """Running instances of the reference application (``start`` makes one)."""

    def __init__(self, topic: str, spec: QuerySpec, kafka: Kafka, instances: int,
                 standbys: int, cache_max_bytes: int, options: AppOptions):
        self.topic = topic
        self.spec = spec
        self.kafka = connect(kafka)
        self.application_id = options.application_id or \
            f"statekit-streams-{uuid.uuid4().hex[:8]}"
        self._owns_state_dir = options.state_dir is None
        self.state_dir = Path(tempfile.mkdtemp(prefix="statekit-streams-")
                              if options.state_dir is None else options.state_dir)
        self.cache_max_bytes = cache_max_bytes
        self.standbys = standbys
        self.options = options
        self._settings = {
            "application_id": self.application_id, "topic": topic, "spec": app_spec(spec),
            "bootstrap_servers": self.kafka.bootstrap_servers,
            "cache_max_bytes": cache_max_bytes, "standbys": standbys,
            "commit_interval_ms": options.commit_interval_ms,
            "session_timeout_ms": options.session_timeout_ms,
            "streams_config": options.settings()}
        self.instances = [self._instance(i) for i in range(instances)]
        self.client = KafkaStreamsClient([i.url for i in self.instances])

    # --- instances ----------------------------------------------------------------------
    def _instance(self, index: int) -> Instance:
        folder = self.state_dir / f"instance-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        port = free_port()
        config = folder / "config.json"
        config.write_text(json.dumps({**self._settings, "port": port,
                                      "state_dir": str(folder / "state")}, indent=1))
        return Instance(index, port, folder, config, folder / "instance.log")

    def start_instance(self, index: int) -> None:
        """Start instance ``index`` (again, after ``kill``): same port, same state directory."""
        instance = self._pick(index)
        if instance.alive():
            return
        java = java_executable()
        if java is None:
            raise KafkaStreamsAppError("no Java to run the Kafka Streams app: install Java 17 "
                                       "(apt-get install openjdk-17-jre-headless) or set "
                                       "JAVA_HOME")
        log = open(instance.log, "ab")  # noqa: SIM115 - handed to the child
        try:
            instance.process = spawn(
                [java, *JVM_OPTIONS, "-cp", app_classpath(), MAIN_CLASS, str(instance.config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def kill(self, index: int) -> None:
        """End instance ``index`` at once (SIGKILL: no clean shutdown, as a crash)."""
        instance = self._pick(index)
        if instance.alive():
            instance.process.send_signal(signal.SIGKILL)
            instance.process.wait(10)

    def _pick(self, index: int) -> Instance:
        whole_number(index, "instance", minimum=0, maximum=len(self.instances) - 1)
        return self.instances[index]

    def wait_until_running(self, timeout: float = 120.0, indexes: list[int] | None = None,
                           ) -> None:
        """Block until every instance (or those of ``indexes``) is RUNNING; an instance that
        stops meanwhile is named with its reason."""
        todo = set(range(len(self.instances)) if indexes is None else indexes)
        deadline = time.monotonic() + timeout
        while todo:
            for index in sorted(todo):
                instance = self.instances[index]
                if not instance.alive():
                    raise KafkaStreamsAppError(
                        f"Kafka Streams instance {index} of {self.application_id!r} stopped: "
                        f"{instance.reason()} (its log: {instance.log})")
                try:
                    if self.client.call("/health", via=index)["state"] == "RUNNING":
                        todo.discard(index)
                except (InstanceDown, KafkaStreamsAppError):
                    pass
            if todo and time.monotonic() > deadline:
                raise KafkaStreamsAppError(
                    f"Kafka Streams instances {sorted(todo)} of {self.application_id!r} were "
                    f"not RUNNING after {timeout:.0f} s (their logs: "
                    f"{', '.join(str(self.instances[i].log) for i in sorted(todo))})")
            time.sleep(0.1)

    def wait_until_consumed(self, timeout: float = 120.0) -> None:
        """Block until the application has committed every record of its input topic and of
        its repartition topic: the store then holds everything written so far."""
        from statekit.kafka_streams.progress import consumed_everything

        deadline = time.monotonic() + timeout
        while not consumed_everything(self.kafka, self.application_id, self.topics()):
            for instance in self.instances:
                if instance.process is not None and not instance.alive() \
                        and instance.process.returncode not in (-signal.SIGKILL,):
                    raise KafkaStreamsAppError(f"Kafka Streams instance {instance.index} "
                                               f"stopped: {instance.reason()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.application_id!r} had not consumed {self.topics()} "
                                   f"after {timeout:.0f} s")
            time.sleep(0.2)

    def topics(self) -> list[str]:
        """The topics the application reads: its input and its repartition topic."""
        return [self.topic, f"{self.application_id}-{STORE}-repartition"]

    # --- the handle's verbs -----------------------------------------------------------
    @property
    def name(self) -> str:
        """The application id."""
        return self.application_id

    @property
    def is_active(self) -> bool:
        """Whether any instance runs."""
        return any(i.alive() for i in self.instances)

    def parts(self) -> list[str]:
        """The app's one store: ``["aggregate"]``."""
        return [STORE]

    @property
    def last_batch(self) -> int:
        """Always -1: Kafka Streams has no batches (it commits every ``commit_interval``;
        ``progress()`` counts the commits)."""
        return -1

    def state(self, part: str | None = None) -> PartReader:
        """Refused: Kafka Streams keeps no version of its store per batch."""
        self._part(part)
        raise UnsupportedRead("a batch-by-batch reader of a Kafka Streams store", NO_BATCHES,
                              "snapshot() for what the store holds now, read_changelog() for "
                              "every update it logged")

    def snapshot(self, part: str | None = None, batch: int | None = None,
                 sort: bool = False) -> pd.DataFrame:
        """The store's entries now, from every instance's active partitions (interactive
        queries), in statekit's columns (``spec.key_columns``, ``value_columns``,
        ``partition``); ``batch`` must be None (Kafka Streams has no batches)."""
        self._part(part)
        if batch is not None:
            raise UnsupportedRead(f"batch {batch!r} of a Kafka Streams store", NO_BATCHES,
                                  "snapshot() for what the store holds now")
        rows = self.client.range(via=self._live_instance())
        return rows_frame(rows, self.spec, sort=sort)

    def changes(self, part: str | None = None, from_batch: int | None = None,
                to_batch: int | None = None) -> pd.DataFrame:
        """Refused: Kafka Streams keeps no change feed per batch; its changelog is one."""
        self._part(part)
        raise UnsupportedRead("the change feed of a Kafka Streams store", NO_BATCHES,
                              "read_changelog(): every update the store logged")

    def changelog_topics(self) -> dict[str, str]:
        """Part → its changelog topic (Kafka Streams names it ``<application.id>-<store>-
        changelog`` and writes it itself)."""
        return {STORE: f"{self.application_id}-{STORE}-changelog"}

    def read_changelog(self, part: str | None = None, from_batch: int | None = None,
                       to_batch: int | None = None, *, progress: bool | None = None,
                       ) -> pd.DataFrame:
        """Every record the broker keeps of the store's changelog, decoded: ``partition``,
        ``offset``, ``timestamp``, ``key``, the window, then the values (NaN for a tombstone).

        A window or session store's changelog is ``compact,delete`` with ``retention.ms`` the
        store's retention plus ``windowstore.changelog.additional.retention.ms`` (a day), by
        record timestamp: records of events timestamped longer ago than that (a replay of old
        data) are deleted by the broker as soon as it looks; ``AppOptions.streams_config`` can
        set it. ``from_batch`` and ``to_batch`` must be None (no batches); ``progress`` is
        accepted for the handles' protocol and shows nothing.
        """
        from statekit.kafka_streams.changelog_format import read_app_changelog

        if from_batch is not None or to_batch is not None:
            raise UnsupportedRead("a Kafka Streams changelog by batch", NO_BATCHES,
                                  "read_changelog() and its offsets")

        return read_app_changelog(self.kafka, self.changelog_topics()[self._part(part)],
                                  self.spec)

    def progress(self) -> pd.DataFrame:
        """One row per instance: its state and metrics (records processed, dropped,
        commits, lag), from Kafka Streams' own metrics."""
        import pandas as pd

        rows = []
        for instance in self.instances:
            row = {"instance": instance.index, "state": "DEAD", "alive": instance.alive()}
            if instance.alive():
                try:
                    answer = self.client.progress(via=instance.index)
                    row.update(state=answer["state"], **answer["metrics"])
                except (InstanceDown, KafkaStreamsAppError):
                    row["state"] = "NOT ANSWERING"
            rows.append(row)
        return pd.DataFrame(rows)

    def restores(self) -> pd.DataFrame:
        """Every restore of the store from its changelog the running instances ran (Kafka
        Streams' ``StateRestoreListener``): one row per (instance, store, changelog
        partition) with ``start_offset``, ``end_offset``, ``records`` restored, ``seconds``
        from onRestoreStart to onRestoreEnd and ``state`` (``done``, ``suspended`` or, still
        running, ``restoring``: seconds until now), ``started`` and ``finished`` (UTC, the
        instance's clock; ``statekit.restore.result.wall_seconds`` of them is the restore's
        time on the clock). Empty when nothing was restored."""
        import pandas as pd

        columns = ["instance", "store", "partition", "start_offset", "end_offset", "records",
                   "seconds", "state", "started", "finished"]
        rows = [{"instance": instance.index, **row, "seconds": row["ms"] / 1000}
                for instance in self.instances if instance.alive()
                for row in self.client.restores(via=instance.index)]
        frame = pd.DataFrame(rows, columns=[*columns[:-2], "started_ms"])
        started = pd.to_datetime(frame["started_ms"].astype("int64"), unit="ms")
        return frame.drop(columns="started_ms").assign(
            started=started, finished=started + pd.to_timedelta(frame["seconds"], unit="s"))

    def wait_until_restored(self, timeout: float = 120.0, poll: float = 0.2) -> pd.DataFrame:
        """Block until the running instances have restored every partition of the store's
        changelog (one per input partition, an empty one too); returns ``restores()``."""
        partitions = partition_count(self.kafka, self.topic)
        deadline = time.monotonic() + timeout
        while True:
            restores = self.restores()
            if len(restores) >= partitions and set(restores["state"]) == {"done"}:
                return restores
            if time.monotonic() > deadline:
                raise KafkaStreamsAppError(
                    f"{self.application_id!r} did not finish restoring its {partitions} "
                    f"changelog partitions in {timeout:.0f} s: {restores.to_dict('records')}")
            time.sleep(poll)

    def describe(self, **options: object) -> Any:
        """Refused: a description reads a Spark checkpoint, which Kafka Streams has none of."""
        raise UnsupportedRead("a description of a Kafka Streams application",
                              "it keeps no Spark checkpoint",
                              "progress(), client.metadata() and snapshot()")

    def wait_for_batches(self, n: int, timeout: float = 120.0) -> int:
        """Refused: Kafka Streams has no batches."""
        raise UnsupportedRead("batches of a Kafka Streams application", NO_BATCHES,
                              "wait_until_consumed()")

    def close(self) -> None:
        """Stop every instance (politely, then firmly); a state directory statekit made goes."""
        for instance in self.instances:
            if instance.process is not None:
                stop(instance.process, timeout=15)
        if self._owns_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self) -> KafkaStreamsApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        alive = sum(i.alive() for i in self.instances)
        return (f"KafkaStreamsApp({self.application_id!r}, topic={self.topic!r}, "
                f"{alive}/{len(self.instances)} instances running)")

    def _part(self, part: str | None) -> str:
        chosen = choose_part(part, self.parts(), f"Kafka Streams app {self.application_id!r}")
        if chosen != STORE:
            raise BadArgument("part", part, self.parts())
        return chosen

    def _live_instance(self) -> int:
        for instance in self.instances:
            if instance.alive():
                return instance.index
        raise KafkaStreamsAppError(f"no instance of {self.application_id!r} runs")


def start(topic: str, spec: QuerySpec | Mapping, *, kafka: Kafka, instances: int = 2,
          standbys: int = 1, cache_max_bytes: int = 10 * 1024 * 1024,
          options: AppOptions | None = None, timeout: float = 120.0) -> KafkaStreamsApp:
    """Start the reference Kafka Streams application on ``topic`` computing ``spec``.

    Args:
        topic: the input topic (JSON events, as ``start_query`` reads them).
        spec: a QuerySpec (or its ``to_dict`` form); a part the app cannot express is named
            in a BadArgument before anything starts.
        kafka: the cluster (a KafkaConnection, ``"host:port"``, an EmbeddedBroker).
        instances: how many instances (JVMs) share the work.
        standbys: ``num.standby.replicas``: copies of each store kept warm elsewhere.
        cache_max_bytes: ``statestore.cache.max.bytes`` (0: every update reaches the store
            and its changelog; Kafka Streams' default is 10 MB).
        options: the rest (``AppOptions``: application id, state directory, commit
            interval, session timeout, other Kafka Streams settings).
        timeout: seconds to wait until every instance is RUNNING.
    """
    spec = as_query_spec(spec)
    app_spec(spec)  # what the app cannot express, named before anything starts
    kafka_name(topic, "topic")
    count = whole_number(instances, "instances", minimum=1, maximum=16)
    replicas = whole_number(standbys, "standbys", minimum=0, maximum=count - 1)
    cache = whole_number(cache_max_bytes, "cache_max_bytes", minimum=0)
    if options is not None and not isinstance(options, AppOptions):
        raise BadArgument("options", options, "statekit.kafka_streams.AppOptions(...) or None")
    app_classpath()  # not built: say how to build it, before anything starts
    partition_count(kafka, topic)  # TopicNotFound or BrokerUnreachable, naming them
    app = KafkaStreamsApp(topic, spec, kafka, count, replicas, cache, options or AppOptions())
    try:
        for index in range(count):
            app.start_instance(index)
        app.wait_until_running(timeout)
    except BaseException:
        app.close()
        raise
    return app
