"""N serving instances on this machine from one call: start, watch, fail over, stop.

``serve(kafka, topic, instances=3, standbys=1)`` reads what the store holds from
the changelog's metadata topic, assigns its partitions round-robin (each with
``standbys`` standbys on other instances), starts one process per instance
(``statekit.serve.process``, REST on a free 127.0.0.1 port) and returns a
``ServingCluster``. Bound beyond loopback (``host="0.0.0.0", allow_remote=True``)
every instance needs one token — ``security.token``, or one generated and
printed once with a URL to use — and serves HTTPS given ``security.certfile`` /
``keyfile`` (``statekit.serve.auth``); the cluster, the instances forwarding to
each other and ``client()`` send the token, which reaches the instance
processes on their standard input, never their command lines.

A monitor thread watches the processes: when one dies, its
active partitions go to their standbys and lost standbys are re-created on the
least loaded live instances (``Assignment.without``, the seeds' rebalance); the
new assignment is sent to every live instance and to the clients handed out,
and each step is kept as a timeline (``timeline()``).

Nothing outlives the cluster: ``stop()``, a ``with`` block, interpreter exit,
and — each process dies with its parent — a kernel restart or ``kill -9`` of
the parent all end the instances.

Example:
    >>> with serve(broker, topic, instances=3, standbys=1) as cluster:   # doctest: +SKIP
    ...     client = cluster.client()
    ...     client.top_k("2026-01-05T11:00Z", 5, "sum_score").rows
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from statekit.errors import InstanceDown, StatekitError
from statekit.model.connection import Kafka, TopicRef, connect
from statekit.options.base import route
from statekit.options.base import settle as settle_options
from statekit.options.serve import ServeOptions
from statekit.ports import free_port
from statekit.processes import stop as stop_process
from statekit.serve.auth import announce, settle
from statekit.serve.client import ServingClient
from statekit.serve.partition_host import wait_for_schema
from statekit.serve.process import instance_config, start_instance
from statekit.serve.rest import check_host
from statekit.serve.routing.assignment import Assignment, assign, check_standbys
from statekit.serve.transport import HttpError, HttpPool
from statekit.validate import whole_number

#: ``serve``'s and ``ServingCluster``'s keyword shortcuts: each a field of ``ServeOptions``
SHORTCUTS = dict.fromkeys(ServeOptions.field_names(), "options")


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


TIMELINE_COLUMNS = ["time", "instance", "event", "partitions", "detail"]
_LIVE: weakref.WeakSet[ServingCluster] = weakref.WeakSet()


class ServingCluster:
    """Serving instances of one changelog, as processes; see ``serve``."""

    def __init__(self, kafka: Kafka, topic: str, *, instances: int = 3,
                 standbys: int | None = None, workdir: str | os.PathLike | None = None,
                 monitor_every: float = 0.2, options: ServeOptions | None = None, **shortcuts: Any):
        options = settle_options(options, ServeOptions,
                                 route(shortcuts, SHORTCUTS, "ServingCluster").get("options", {}),
                                 "options")
        self.kafka, self.topic = connect(kafka), topic
        count = whole_number(instances, "instances", minimum=1, maximum=64)
        self.standby_count = check_standbys(standbys, count)
        self.names = [f"i{n}" for n in range(count)]
        self.host = check_host(options.host, options.allow_remote)
        self.allow_remote = options.allow_remote
        self.security, self._generated = settle(self.host, options.security)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="statekit-serving-"))
        self.urls = {name: self.security.url(self.host, free_port(self.host))
                     for name in self.names}
        #: each instance's control listener (/health, /metadata, POST /assignment on a port
        #: and event loop of their own): where the cluster checks and reassigns, so failover
        #: is not queued behind the lookups in flight on ``urls``
        self.control_urls = {name: self.security.url(self.host, free_port(self.host))
                             for name in self.names}
        self.monitor_every = monitor_every
        self.global_tables = list(options.global_tables)
        #: what every instance is given: ``options`` with the settled security
        self.options = replace(options, security=self.security)
        self.assignment: Assignment | None = None
        self.procs: dict[str, subprocess.Popen] = {}
        self._events: list[tuple] = []
        self._clients: weakref.WeakSet[ServingClient] = weakref.WeakSet()
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._killed: set[str] = set()
        self._http = HttpPool(timeout=10.0, token=self.security.token,
                              verify=self.security.cafile)

    # --- lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> ServingCluster:
        """Start every instance and wait until each answers (partitions may still restore)."""
        schema = wait_for_schema(self.kafka, self.topic, timeout)
        self.assignment = assign(schema.partitions, self.names, self.standby_count)
        self.workdir.mkdir(parents=True, exist_ok=True)
        _LIVE.add(self)
        for name in self.names:
            config = instance_config(name, TopicRef(self.kafka, self.topic), self.workdir,
                                     self.assignment, self.urls,
                                     port=_port(self.urls[name]),
                                     control_port=_port(self.control_urls[name]),
                                     options=self.options)
            self.procs[name] = start_instance(config, self.workdir / f"{name}.log")
            self._event(name, "started", sorted(self.assignment.held_by(name)),
                        f"pid {self.procs[name].pid}, {self.urls[name]} "
                        f"(control {self.control_urls[name]})")
        try:
            for name in self.names:
                self._wait_health(name, timeout)
        except BaseException:
            self.stop()
            raise
        self._monitor = threading.Thread(target=self._watch, name="serving-monitor",
                                         daemon=True)
        self._monitor.start()
        if self._generated:
            announce(self.urls[self.names[0]], self.security,
                     f"serving ({len(self.names)} instances: {', '.join(self.urls.values())})")
        return self

    def _wait_health(self, name: str, timeout: float) -> None:
        """Until ``name`` answers on both its listeners (the control one starts first)."""
        deadline = time.monotonic() + timeout
        for url in (self.control_urls[name], self.urls[name]):
            while True:
                proc = self.procs[name]
                if proc.poll() is not None:
                    raise StatekitError(f"serving instance {name} exited with "
                                        f"{proc.returncode} before answering; its log: "
                                        f"{self.log(name)[-2000:]}")
                try:
                    if self._http.get(f"{url}/health", timeout=1.0).status == 200:
                        break
                except HttpError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"serving instance {name} did not answer on {url} in "
                                       f"{timeout:.0f} s")
                time.sleep(0.1)

    def wait_ready(self, timeout: float = 120.0) -> ServingCluster:
        """Block until every live instance has restored every partition it holds."""
        deadline = time.monotonic() + timeout
        while True:
            waiting = {}
            for name in self.live:
                try:
                    meta = self._http.get(f"{self.control_urls[name]}/metadata").json()
                    held = meta["held"]
                except (HttpError, ValueError, KeyError):
                    waiting[name] = "not answering"
                    continue
                restoring = [p for p, s in held.items() if s["state"] != "running"]
                restoring += [g for g, s in meta.get("globals", {}).items()
                              if s["state"] != "running"]
                if restoring:
                    waiting[name] = f"restoring {restoring}"
            if not waiting:
                return self
            if time.monotonic() > deadline:
                raise TimeoutError(f"serving instances not ready after {timeout:.0f} s: "
                                   f"{waiting}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the monitor and every instance; remove the work folder if it was a temp one."""
        self._stop.set()
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(5)
        for proc in self.procs.values():
            stop_process(proc)
        self._http.close()
        _LIVE.discard(self)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ServingCluster:
        return self.start() if self.assignment is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- using it ---------------------------------------------------------------------------
    def client(self, *, timeout: float = 5.0, partial: bool = False) -> ServingClient:
        """A client routing to these instances; it follows reassignments."""
        live = self.live
        if not live:
            raise InstanceDown(f"no serving instance of {self.topic!r} is live (all of "
                               f"{', '.join(self.names)} ended): cluster.log(name) says why")
        client = ServingClient({n: self.urls[n] for n in live}, timeout=timeout,
                               partial=partial, token=self.security.token,
                               verify=self.security.cafile)
        client.set_assignment(self.assignment, self.urls)
        self._clients.add(client)
        return client

    @property
    def live(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.poll() is None]

    def kill(self, name: str) -> None:
        """SIGKILL instance ``name`` (a drill); the monitor fails its partitions over."""
        if name not in self.procs:
            raise StatekitError(f"no instance {name!r}; instances: {', '.join(self.procs)}")
        self._killed.add(name)
        self.procs[name].send_signal(signal.SIGKILL)
        self._event(name, "killed", sorted(self.assignment.held_by(name)), "SIGKILL")

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def timeline(self) -> pd.DataFrame:
        """One row per event: time, instance, event, partitions, detail."""
        frame = pd.DataFrame(self._events, columns=TIMELINE_COLUMNS)
        frame["time"] = pd.to_datetime(frame["time"], unit="s")
        return frame

    def _event(self, instance: str, event: str, partitions: list[int], detail: str = "") -> None:
        self._events.append((time.time(), instance, event, list(partitions), detail))

    # --- failover -----------------------------------------------------------------------------
    def _watch(self) -> None:
        handled: set[str] = set()
        while not self._stop.wait(self.monitor_every):
            for name, proc in list(self.procs.items()):
                if name in handled or proc.poll() is None:
                    continue
                handled.add(name)
                with contextlib.suppress(Exception):
                    self._fail_over(name, proc.returncode)

    def _fail_over(self, dead: str, code: int) -> None:
        held = self.assignment.held_by(dead)
        self._event(dead, "died", sorted(held), f"exit code {code}")
        before = self.assignment
        after = before.without(dead)
        promoted = sorted(p for p, role in held.items() if role == "active")
        for p in promoted:
            if p in after.active:
                self._event(after.active[p], "promoted", [p], f"standby of partition {p} "
                                                              f"answers for it now")
            else:
                self._event(dead, "lost", [p], "no standby: the partition has no live holder")
        self.assignment = after
        body = {"assignment": after.to_dict(), "urls": self.urls}
        for name in self.live:
            try:
                self._http.post_json(f"{self.control_urls[name]}/assignment", body)
            except HttpError as exc:
                self._event(name, "not told", [], str(exc))
        for client in list(self._clients):
            client.set_assignment(after, self.urls)
        new_standbys = sorted((p, i) for p, replicas in after.standbys.items() for i in replicas
                              if i not in before.standbys.get(p, ()) and before.active.get(p) != i)
        for p, instance in new_standbys:
            self._event(instance, "standby assigned", [p], "restoring from the changelog")
        self._event(dead, "reassigned", sorted(held), f"assignment version {after.version}")
        threading.Thread(target=self._await_restores, args=(new_standbys,), daemon=True).start()

    def _await_restores(self, pending: list[tuple[int, str]], timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        todo = list(pending)
        while todo and time.monotonic() < deadline and not self._stop.is_set():
            for p, instance in list(todo):
                try:
                    held = self._http.get(
                        f"{self.control_urls[instance]}/metadata").json()["held"]
                except (HttpError, ValueError, KeyError):
                    continue
                state = held.get(str(p), {})
                if state.get("state") == "running":
                    self._event(instance, "standby ready", [p],
                                f"restored {state.get('restored', 0):,} records")
                    todo.remove((p, instance))
            time.sleep(0.1)

    def __repr__(self) -> str:
        return (f"ServingCluster({self.topic!r}, live={self.live}, "
                f"version={self.assignment.version if self.assignment else None})")


def serve(kafka: Kafka, topic: str, *, instances: int = 3, standbys: int | None = None,
          workdir: str | os.PathLike | None = None, timeout: float = 120.0,
          options: ServeOptions | None = None, **shortcuts: Any) -> ServingCluster:
    """Start ``instances`` serving instances of changelog ``topic`` (``standbys`` each: 0 to
    ``instances - 1``; None: one, none with a single instance).

    ``options`` (``ServeOptions``), or its fields as keyword arguments (not both):
    ``host`` and ``allow_remote`` (where the instances listen: loopback unless remote
    serving is allowed), ``global_tables`` (held whole by every instance:
    ``GlobalTable(name, topic, key_columns, plain_keys)``), ``security``
    (``ServingSecurity(token, certfile, keyfile, cafile)``: the token every instance needs,
    generated beyond loopback when not given, and the TLS files). Returns the started
    cluster; use it in a ``with`` block or call ``stop()``.
    """
    return ServingCluster(kafka, topic, instances=instances, standbys=standbys,
                          workdir=workdir, options=options, **shortcuts).start(timeout)


@atexit.register
def _stop_all() -> None:
    for cluster in list(_LIVE):
        cluster.stop()
