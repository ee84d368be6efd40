"""One serving instance as a process: ``python -m statekit.serve instance -``.

The process builds a ``ServingInstance`` (its partitions restore in the
background), a ``ServingClient`` that answers its own partitions locally and
routes the rest, and serves both over REST with uvicorn until it is stopped or
its parent dies (``statekit.processes``). It prints ``serving on <url>`` once
the server listens. Its config, the JSON of ``instance_config``, comes on
standard input, not the command line: it carries the serving token (and the
Kafka client's settings, which may hold a password), and a command line is
visible to every user in ``ps``.

Example:
    >>> config = instance_config("i0", broker, topic, "/tmp/s", plan,   # doctest: +SKIP
    ...                          {"i0": "http://127.0.0.1:8123"}, port=8123)
    >>> proc = start_instance(config)                                    # doctest: +SKIP
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from statekit.model.connection import Kafka, KafkaConnection, connect
from statekit.processes import spawn
from statekit.serve.auth import ServingSecurity
from statekit.serve.global_store import GlobalTable
from statekit.serve.routing.assignment import Assignment


def instance_config(name: str, kafka: Kafka, topic: str, directory: str | os.PathLike,
                    assignment: Assignment, urls: Mapping[str, str], *,
                    host: str = "127.0.0.1", port: int, allow_remote: bool = False,
                    global_tables: Sequence[GlobalTable] = (),
                    security: ServingSecurity | None = None,
                    control_port: int | None = None) -> dict:
    """The JSON config of one instance process (secrets included: see ``start_instance``);
    ``control_port``: where its control listener answers (``rest.create_control_app``;
    None: no control listener)."""
    conn = connect(kafka)
    return {"name": name, "kafka": {"bootstrap_servers": conn.bootstrap_servers,
                                    "config": dict(conn.config)},
            "topic": topic, "directory": str(directory), "assignment": assignment.to_dict(),
            "urls": dict(urls), "host": host, "port": port, "allow_remote": allow_remote,
            "globals": [table.to_dict() for table in global_tables],
            "security": (security or ServingSecurity()).to_dict(), "control_port": control_port}


def start_instance(config: Mapping, log_path: str | os.PathLike | None = None
                   ) -> subprocess.Popen:
    """Start an instance process (dies with this process); output to ``log_path``. The
    config goes to its standard input (never its command line, which ``ps`` shows)."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = spawn([sys.executable, "-m", "statekit.serve", "instance", "-"],
                     stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.PIPE)
    finally:
        if log_path:
            out.close()
    try:
        proc.stdin.write(json.dumps(config).encode())
        proc.stdin.close()
    except BrokenPipeError:  # it died at once: its exit code and log say why
        pass
    return proc


def run_instance(config: Mapping) -> None:
    """Build the instance and serve it over REST until the process ends."""
    from statekit.serve.client import ServingClient
    from statekit.serve.instance import ServingInstance
    from statekit.serve.rest import Server, check_host, create_app, create_control_app

    kafka = KafkaConnection(config["kafka"]["bootstrap_servers"], config["kafka"]["config"])
    host = check_host(config["host"], config.get("allow_remote", False))
    security = ServingSecurity.from_dict(config.get("security"))
    tables = [GlobalTable.from_dict(t) for t in config.get("globals", [])]
    instance = ServingInstance(config["name"], kafka, config["topic"], config["directory"],
                               Assignment.from_dict(config["assignment"]),
                               global_tables=tables).start()
    # forwarded calls carry the token and check the other instances' certificates
    client = ServingClient(config["urls"], local=instance, token=security.token,
                           verify=security.cafile)
    remote = config.get("allow_remote", False)
    control = None
    if config.get("control_port"):  # its own thread and event loop, started first
        control = Server(create_control_app(instance, client), host, config["control_port"],
                         allow_remote=remote, security=security).start()
        print(f"control on {control.url}", flush=True)
    server = Server(create_app(instance, client, control_url=control and control.url), host,
                    config["port"], allow_remote=remote, security=security)
    print(f"serving on {server.url}", flush=True)
    gc.freeze()
    try:
        server.run()
    finally:
        if control is not None:
            control.stop()
        instance.close()
