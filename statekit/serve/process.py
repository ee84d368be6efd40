"""One serving instance as a process: ``python -m statekit.serve instance CONFIG_JSON``.

The process builds a ``ServingInstance`` (its partitions restore in the
background), a ``ServingClient`` that answers its own partitions locally and
routes the rest, and serves both over REST with uvicorn until it is stopped or
its parent dies (``statekit.processes``). It prints ``serving on <url>`` once
the server listens. CONFIG is the JSON of ``instance_config``.

Example:
    >>> config = instance_config("i0", broker, topic, "/tmp/s", plan,   # doctest: +SKIP
    ...                          {"i0": "http://127.0.0.1:8123"}, port=8123)
    >>> proc = start_instance(config)                                    # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from statekit.kafka.connection import Kafka, KafkaConnection, connect
from statekit.processes import spawn
from statekit.serve.assignment import Assignment
from statekit.serve.global_store import GlobalTable


def instance_config(name: str, kafka: Kafka, topic: str, directory: str | os.PathLike,
                    assignment: Assignment, urls: Mapping[str, str], *,
                    host: str = "127.0.0.1", port: int, allow_remote: bool = False,
                    global_tables: Sequence[GlobalTable] = ()) -> dict:
    """The JSON config of one instance process."""
    conn = connect(kafka)
    return {"name": name, "kafka": {"bootstrap_servers": conn.bootstrap_servers,
                                    "config": dict(conn.config)},
            "topic": topic, "directory": str(directory), "assignment": assignment.to_dict(),
            "urls": dict(urls), "host": host, "port": port, "allow_remote": allow_remote,
            "globals": [table.to_dict() for table in global_tables]}


def start_instance(config: Mapping, log_path: str | os.PathLike | None = None
                   ) -> subprocess.Popen:
    """Start an instance process (dies with this process); output to ``log_path``."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        return spawn([sys.executable, "-m", "statekit.serve", "instance", json.dumps(config)],
                     stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    finally:
        if log_path:
            out.close()


def run_instance(config: Mapping) -> None:
    """Build the instance and serve it over REST until the process ends."""
    import uvicorn

    from statekit.serve.client import ServingClient
    from statekit.serve.instance import ServingInstance
    from statekit.serve.rest import SERVER_OPTIONS, check_host, create_app

    kafka = KafkaConnection(config["kafka"]["bootstrap_servers"], config["kafka"]["config"])
    host = check_host(config["host"], config.get("allow_remote", False))
    tables = [GlobalTable.from_dict(t) for t in config.get("globals", [])]
    instance = ServingInstance(config["name"], kafka, config["topic"], config["directory"],
                               Assignment.from_dict(config["assignment"]),
                               global_tables=tables).start()
    client = ServingClient(config["urls"], local=instance)
    app = create_app(instance, client)
    print(f"serving on http://{host}:{config['port']}", flush=True)
    try:
        uvicorn.run(app, host=host, port=config["port"], **SERVER_OPTIONS)
    finally:
        instance.close()
