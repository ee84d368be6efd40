"""Processes to kill in drills: a statekit query, or a store's owner, each in its own process.

``python -m statekit.drills query CONFIG`` runs a query (``run``: until
killed; ``drain``: process what is there, ship the changelog, stop);
``python -m statekit.drills store CONFIG`` restores a store from its
changelog and keeps it up to date (the "active instance" of a failover drill).
CONFIG is JSON (see ``query_config`` / ``store_config``: a ``QueryJob`` / ``StoreJob``).
Each prints one line (``serving`` / ``drained through batch N``) when it gets there.

Example:
    >>> config = query_config("games", GAME_SPEC,                          # doctest: +SKIP
    ...                       SourceOptions(kafka=broker, event_schema=GAME_EVENT_SCHEMA),
    ...                       RunOptions(name="drill", checkpoint="/tmp/ck"))
    >>> proc = start_worker("query", config)                               # doctest: +SKIP
    >>> proc.send_signal(signal.SIGKILL)                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from statekit.errors import BadArgument
from statekit.model.connection import Kafka, TopicRef
from statekit.model.query_spec import QuerySpec
from statekit.options.base import Options, codec
from statekit.options.query import RunOptions, SourceOptions
from statekit.processes import spawn
from statekit.validate import whole_number

MODES = ("run", "drain")


@dataclass(frozen=True)
class QueryJob(Options):
    """What a query worker runs: ``start_query(topic, spec, source_options=source,
    run=run)`` in a session of ``shuffle_partitions`` (Spark ``conf`` added), until killed
    (``mode="run"``) or until drained (``"drain"``). An internal job spec (the JSON the
    worker process receives), not a user option (those are all in ``statekit.options``)."""

    topic: str
    spec: QuerySpec = field(metadata=codec(QuerySpec.to_dict, QuerySpec.from_dict))
    source: SourceOptions = field(
        default_factory=SourceOptions,
        metadata=codec(SourceOptions.to_dict, SourceOptions.from_dict))
    run: RunOptions = field(default_factory=RunOptions,
                            metadata=codec(RunOptions.to_dict, RunOptions.from_dict))
    mode: str = "run"
    shuffle_partitions: int = 3
    conf: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if self.mode not in MODES:
            raise BadArgument("worker mode", self.mode, MODES)
        if self.source.kafka is None:
            raise BadArgument("kafka of the worker's source", None,
                              "the cluster of its topic (SourceOptions(kafka=...))")
        if self.run.name is None:
            raise BadArgument("name of the worker's query", None, "a name (RunOptions(name=))")
        whole_number(self.shuffle_partitions, "shuffle_partitions", minimum=1)
        object.__setattr__(self, "conf", {str(k): str(v) for k, v in (self.conf or {}).items()})


@dataclass(frozen=True)
class StoreJob(Options):
    """What a store owner runs: restore the ``changelog`` into ``directory``, keep tailing.
    An internal job spec (the JSON the worker process receives), not a user option (those
    are all in ``statekit.options``)."""

    changelog: TopicRef = field(metadata=codec(TopicRef.to_dict, TopicRef.from_dict))
    directory: str
    spec: QuerySpec = field(metadata=codec(QuerySpec.to_dict, QuerySpec.from_dict))


def query_config(topic: str, spec: QuerySpec, source: SourceOptions, run: RunOptions, *,
                 mode: str = "run", shuffle_partitions: int = 3,
                 conf: Mapping[str, str] | None = None) -> dict:
    """The config of a query worker (``mode``: run until killed, or drain and stop): the
    JSON of a ``QueryJob``, checked here, before any process starts."""
    return QueryJob(topic, spec, source, run, mode, shuffle_partitions, conf or {}).to_dict()


def store_config(topic: str, kafka: Kafka, directory: str, spec: QuerySpec) -> dict:
    """The config of a store owner: restore ``topic`` into ``directory``, then keep tailing
    (the JSON of a ``StoreJob``)."""
    return StoreJob(TopicRef(kafka, topic), str(directory), spec).to_dict()


def start_worker(command: str, config: Mapping) -> subprocess.Popen:
    """Start a worker process (stdout and stderr in ``proc.stdout``, text).

    The worker dies with this process (``statekit.processes.spawn``), so a killed test
    run or notebook kernel leaves no query running.
    """
    return spawn([sys.executable, "-m", "statekit.drills", command, json.dumps(config)],
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for_line(proc: subprocess.Popen, text: str, timeout: float = 240.0) -> str:
    """Read the worker's output until a line containing ``text``; raise if it dies first."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError(f"worker exited with {proc.returncode} before {text!r}:\n"
                               + "".join(seen[-20:]))
        seen.append(line)
        if text in line:
            return line
    raise TimeoutError(f"worker did not say {text!r} in {timeout:.0f} s")


def _run_query(config: Mapping) -> None:
    from statekit.query.start import start_query
    from statekit.spark.session import spark_session

    job = QueryJob.from_dict(config)
    spark = spark_session("local[2]", app_name=f"worker-{job.run.name}",
                          shuffle_partitions=job.shuffle_partitions, conf=dict(job.conf) or None)
    query = start_query(job.topic, job.spec, source_options=job.source, run=job.run,
                        spark=spark)
    if job.mode == "drain":
        query.wait_until_drained()
        query.close()
        print(f"drained through batch {query.last_batch}", flush=True)
        return
    print("running", flush=True)
    while True:
        time.sleep(1)


def _own_store(config: Mapping) -> None:
    from statekit.standby.replica import StandbyReplica

    job = StoreJob.from_dict(config)
    replica = StandbyReplica(job.changelog.kafka, job.changelog.topic, job.spec, job.directory,
                             name="active")
    replica.start()
    print("serving", flush=True)
    while True:
        time.sleep(1)


def main(argv: list[str]) -> None:
    commands = {"query": _run_query, "store": _own_store}
    if len(argv) != 2 or argv[0] not in commands:
        raise SystemExit("usage: python -m statekit.drills (query|store) CONFIG_JSON")
    commands[argv[0]](json.loads(argv[1]))
