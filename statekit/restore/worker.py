"""Processes to kill in drills: a statekit query, or a store's owner, each in its own process.

``python -m statekit.restore query CONFIG`` runs a query (``run``: until
killed; ``drain``: process what is there, ship the changelog, stop);
``python -m statekit.restore store CONFIG`` restores a store from its
changelog and keeps it up to date (the "active instance" of a failover drill).
CONFIG is JSON (see ``query_config`` / ``store_config``). Each prints one line
(``serving`` / ``drained through batch N``) when it gets there.

Example:
    >>> config = query_config("games", broker.bootstrap_servers,         # doctest: +SKIP
    ...                       "/tmp/ck", "drill")
    >>> proc = start_worker("query", config)                               # doctest: +SKIP
    >>> proc.send_signal(signal.SIGKILL)                                   # doctest: +SKIP
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping

from statekit.query.spec import QuerySpec, WindowSpec


def spec_to_dict(spec: QuerySpec) -> dict:
    """A QuerySpec as plain JSON-ready data."""
    return {"keys": list(spec.keys), "window": [spec.window.kind, spec.window.size,
                                                spec.window.slide],
            "aggregates": [f"{a.function}({a.column or '*'})" for a in spec.aggregates],
            "event_time": spec.event_time, "watermark": spec.watermark}


def spec_from_dict(data: Mapping) -> QuerySpec:
    kind, size, slide = data["window"]
    return QuerySpec(keys=data["keys"], window=WindowSpec(kind, size, slide),
                     aggregates=data["aggregates"], event_time=data["event_time"],
                     watermark=data["watermark"])


def query_config(topic: str, bootstrap_servers: str, checkpoint: str, name: str, *,
                 mode: str = "run", spec: QuerySpec | None = None,
                 max_offsets_per_trigger: int = 250, trigger: str = "200 milliseconds",
                 shuffle_partitions: int = 3, conf: Mapping[str, str] | None = None) -> dict:
    """The config of a query worker (``mode``: run until killed, or drain and stop)."""
    return {"topic": topic, "bootstrap_servers": bootstrap_servers, "checkpoint": str(checkpoint),
            "name": name, "mode": mode, "spec": spec_to_dict(spec or QuerySpec()),
            "max_offsets_per_trigger": max_offsets_per_trigger, "trigger": trigger,
            "shuffle_partitions": shuffle_partitions, "conf": dict(conf or {})}


def store_config(topic: str, bootstrap_servers: str, directory: str, spec: QuerySpec) -> dict:
    """The config of a store owner: restore ``topic`` into ``directory``, then keep tailing."""
    return {"topic": topic, "bootstrap_servers": bootstrap_servers, "directory": str(directory),
            "spec": spec_to_dict(spec)}


def start_worker(command: str, config: Mapping) -> subprocess.Popen:
    """Start a worker process (stdout and stderr in ``proc.stdout``, text)."""
    return subprocess.Popen([sys.executable, "-m", "statekit.restore", command,
                             json.dumps(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


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
    import statekit as sk

    spark = sk.spark_session("local[2]", app_name=f"worker-{config['name']}",
                             shuffle_partitions=config["shuffle_partitions"],
                             conf=config.get("conf") or None)
    spec = spec_from_dict(config["spec"])
    query = sk.start_query(config["topic"], spark=spark,
                           bootstrap_servers=config["bootstrap_servers"],
                           checkpoint=config["checkpoint"], name=config["name"], keys=spec.keys,
                           window=spec.window, aggregates=spec.aggregates,
                           event_time=spec.event_time, watermark=spec.watermark,
                           max_offsets_per_trigger=config["max_offsets_per_trigger"],
                           trigger=config["trigger"])
    if config["mode"] == "drain":
        query.wait_until_drained()
        query.stop()
        print(f"drained through batch {query.last_batch}", flush=True)
        return
    print("running", flush=True)
    while True:
        time.sleep(1)


def _own_store(config: Mapping) -> None:
    from statekit.restore.standby import StandbyReplica

    replica = StandbyReplica(config["bootstrap_servers"], config["topic"],
                             spec_from_dict(config["spec"]), config["directory"], name="active")
    replica.start()
    print("serving", flush=True)
    while True:
        time.sleep(1)


def main(argv: list[str]) -> None:
    commands = {"query": _run_query, "store": _own_store}
    if len(argv) != 2 or argv[0] not in commands:
        raise SystemExit("usage: python -m statekit.restore (query|store) CONFIG_JSON")
    commands[argv[0]](json.loads(argv[1]))
