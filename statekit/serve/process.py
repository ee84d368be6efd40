"""One serving instance as a process: ``python -m statekit.serve instance -``.

The process builds a ``ServingInstance`` (its partitions restore in the
background), a ``ServingClient`` that answers its own partitions locally and
routes the rest, and serves both over REST with uvicorn until it is stopped or
its parent dies (``statekit.processes``). It prints ``serving on <url>`` once
the server listens. Its config, the JSON of an ``InstanceJob``, comes on
standard input, not the command line: it carries the serving token (and the
Kafka client's settings, which may hold a password), and a command line is
visible to every user in ``ps``.

Example:
    >>> config = instance_config("i0", TopicRef(broker, topic), "/tmp/s",  # doctest: +SKIP
    ...                          plan, {"i0": "http://127.0.0.1:8123"}, port=8123)
    >>> proc = start_instance(config)                                    # doctest: +SKIP
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from statekit.model.connection import TopicRef
from statekit.options.base import Options, codec
from statekit.options.security import ServingSecurity
from statekit.options.serve import ServeOptions
from statekit.processes import spawn
from statekit.serve.routing.assignment import Assignment


@dataclass(frozen=True, repr=False)
class InstanceJob(Options):
    """What one instance process serves: instance ``name`` of ``assignment``, over the
    ``changelog`` topic, its stores under ``directory``, REST on ``port`` (and its control
    listener on ``control_port``: ``rest.create_control_app``; None: none), the other
    instances at ``urls``, listening and secured as ``options`` says. An internal job spec
    (the JSON the process reads on standard input), not a user option (those are all in
    ``statekit.options``; its ``options`` is one)."""

    name: str
    changelog: TopicRef = field(metadata=codec(TopicRef.to_dict, TopicRef.from_dict))
    directory: str
    assignment: Assignment = field(metadata=codec(Assignment.to_dict, Assignment.from_dict))
    urls: Mapping[str, str]
    port: int
    control_port: int | None = None
    options: ServeOptions = field(default_factory=ServeOptions,
                                  metadata=codec(ServeOptions.to_dict, ServeOptions.from_dict))

    def __post_init__(self):
        object.__setattr__(self, "directory", os.fspath(self.directory))
        object.__setattr__(self, "urls", dict(self.urls))

    def __repr__(self) -> str:  # ``options`` hides the token
        return (f"InstanceJob({self.name!r}, {self.changelog.topic!r}, port={self.port}, "
                f"{self.options!r})")


def instance_config(name: str, changelog: TopicRef, directory: str | os.PathLike,
                    assignment: Assignment, urls: Mapping[str, str], *, port: int,
                    control_port: int | None = None, options: ServeOptions | None = None
                    ) -> dict:
    """The JSON config of one instance process, an ``InstanceJob``'s (secrets included:
    see ``start_instance``)."""
    return InstanceJob(name, changelog, directory, assignment, urls, port, control_port,
                       options or ServeOptions()).to_dict()


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

    job = InstanceJob.from_dict(config)
    options = job.options
    host = check_host(options.host, options.allow_remote)
    security = options.security or ServingSecurity()
    instance = ServingInstance(job.name, job.changelog.kafka, job.changelog.topic, job.directory,
                               job.assignment, global_tables=options.global_tables).start()
    # forwarded calls carry the token and check the other instances' certificates
    client = ServingClient(job.urls, local=instance, token=security.token,
                           verify=security.cafile)
    remote = options.allow_remote
    control = None
    if job.control_port:  # its own thread and event loop, started first
        control = Server(create_control_app(instance, client), host, job.control_port,
                         allow_remote=remote, security=security).start()
        print(f"control on {control.url}", flush=True)
    server = Server(create_app(instance, client, control_url=control and control.url), host,
                    job.port, allow_remote=remote, security=security)
    print(f"serving on {server.url}", flush=True)
    gc.freeze()
    try:
        server.run()
    finally:
        if control is not None:
            control.stop()
        instance.close()
