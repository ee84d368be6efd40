"""Processes to kill in drills: a statekit query, or a store's owner, each in its own process.

``python -m statekit.drills query CONFIG`` runs a query (``run``: until
killed; ``drain``: process what is there, ship the changelog, stop);
``python -m statekit.drills store CONFIG`` restores a store from its
changelog and keeps it up to date (the "active instance" of a failover drill).
CONFIG is JSON (see ``query_config`` / ``store_config``). Each prints one line
(``serving`` / ``drained through batch N``) when it gets there.

Example:
    >>> config = query_config("games", broker, "/tmp/ck", "drill",         # doctest: +SKIP
    ...                       spec=GAME_SPEC, event_schema=GAME_EVENT_SCHEMA)
    >>> proc = start_worker("query", config)                               # doctest: +SKIP
    >>> proc.send_signal(signal.SIGKILL)                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from statekit.model.connection import Kafka, KafkaConnection, connect
from statekit.model.query_spec import QuerySpec
from statekit.processes import spawn


def _kafka_dict(kafka: Kafka) -> dict:
    conn = connect(kafka)
    return {"bootstrap_servers": conn.bootstrap_servers, "config": dict(conn.config)}


def _kafka_of(config: Mapping) -> KafkaConnection:
    return KafkaConnection(config["kafka"]["bootstrap_servers"], config["kafka"]["config"])


def query_config(topic: str, kafka: Kafka, checkpoint: str, name: str, *, spec: QuerySpec,
                 mode: str = "run", event_schema: str | None = None,
                 required_fields: Sequence[str] = (), max_offsets_per_trigger: int = 250,
                 trigger: str = "200 milliseconds", shuffle_partitions: int = 3,
                 conf: Mapping[str, str] | None = None,
                 ending_offsets: str | None = None) -> dict:
    """The config of a query worker (``mode``: run until killed, or drain and stop)."""
    return {"topic": topic, "kafka": _kafka_dict(kafka), "checkpoint": str(checkpoint),
            "name": name, "mode": mode, "spec": spec.to_dict(), "event_schema": event_schema,
            "required_fields": list(required_fields),
            "max_offsets_per_trigger": max_offsets_per_trigger, "trigger": trigger,
            "shuffle_partitions": shuffle_partitions, "conf": dict(conf or {}),
            "ending_offsets": ending_offsets}


def store_config(topic: str, kafka: Kafka, directory: str, spec: QuerySpec) -> dict:
    """The config of a store owner: restore ``topic`` into ``directory``, then keep tailing."""
    return {"topic": topic, "kafka": _kafka_dict(kafka), "directory": str(directory),
            "spec": spec.to_dict()}


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
    from statekit.query.stateful import start_query
    from statekit.spark.session import spark_session

    spark = spark_session("local[2]", app_name=f"worker-{config['name']}",
                          shuffle_partitions=config["shuffle_partitions"],
                          conf=config.get("conf") or None)
    query = start_query(config["topic"], QuerySpec.from_dict(config["spec"]), spark=spark,
                        kafka=_kafka_of(config), checkpoint=config["checkpoint"],
                        name=config["name"], event_schema=config["event_schema"],
                        required_fields=config["required_fields"],
                        max_offsets_per_trigger=config["max_offsets_per_trigger"],
                        trigger=config["trigger"],
                        ending_offsets=config.get("ending_offsets"))
    if config["mode"] == "drain":
        query.wait_until_drained()
        query.stop()
        print(f"drained through batch {query.last_batch}", flush=True)
        return
    print("running", flush=True)
    while True:
        time.sleep(1)


def _own_store(config: Mapping) -> None:
    from statekit.standby.replica import StandbyReplica

    replica = StandbyReplica(_kafka_of(config), config["topic"],
                             QuerySpec.from_dict(config["spec"]), config["directory"],
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
