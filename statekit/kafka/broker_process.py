"""A broker as a child process: started on 127.0.0.1, waited for, stopped, and dying with us.

``BrokerProcess`` is what every embedded broker shares (``EmbeddedBroker``, ``TansuBroker``):
free or given ports checked before the start, a readiness wait that names the log on
failure, ``stop()``/``kill()``/``start()`` on the same ports, and a stop at interpreter exit.
``why_stopped`` says why one of this process's brokers at an address has stopped.

Example:
    >>> why_stopped("127.0.0.1:1")
    ''
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path

from statekit.errors import StatekitError
from statekit.ports import free_port
from statekit.processes import spawn
from statekit.processes import stop as stop_process

_LIVE: weakref.WeakSet[BrokerProcess] = weakref.WeakSet()


def why_stopped(address: str) -> str:
    """Why an embedded broker of this process listening on ``address`` has stopped (or is
    stopping after a fatal fault), from its exit code and its own log: "" when none there has
    (or none is this process's).

    Example:
        >>> why_stopped("127.0.0.1:1")
        ''
    """
    for broker in list(_LIVE):
        proc = broker._proc
        if broker.bootstrap_servers != address or proc is None:
            continue
        tail = broker.log_tail(20_000)
        if proc.poll() is None and "fatal" not in tail.lower():
            continue
        with contextlib.suppress(subprocess.TimeoutExpired):  # a fatal fault: it is exiting
            proc.wait(5)
        lines = [line.strip() for line in tail.splitlines()]
        # the root cause (Java's "Caused by:", an OS error such as a full disk), then what the
        # broker made of it (the log folder it took offline, the fault that stopped it)
        roots = [line for line in lines if line.startswith("Caused by:")
                 or "No space left on device" in line or "Read-only file system" in line]
        effects = [line for line in lines if line.startswith("org.apache") or " in dir " in line
                   or "log dirs" in line]
        said = "; ".join(dict.fromkeys(roots[-1:] + effects[-2:])) or "its log says nothing more"
        ended = (f"exited with code {proc.returncode}" if proc.poll() is not None
                 else "met a fatal fault")
        return f"the embedded {broker.kind} on {address} {ended} ({said}; its log: " \
               f"{broker.log_path})"
    return ""


def _bind_check(host: str, port: int, what: str, who: str) -> None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # as a listener binds: connections of a broker stopped a moment ago, left in
            # TIME_WAIT for a minute, do not make the port busy
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise StatekitError(
            f"cannot start {who} on {host}:{port}: its {what} port {port} is in use "
            f"({exc.strerror}); pass another port, or port=None for a free one") from None


class ClosedOnExit:
    """``with`` starts it and closes it; so does garbage collection, quietly (the
    broker, the cluster)."""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


class BrokerProcess(ClosedOnExit):
    """What every embedded broker shares: a child process on 127.0.0.1 that answers Kafka's
    protocol on ``bootstrap_servers`` and dies with its parent. Subclasses say how to start it
    (``_command``) and what it is called (``kind``)."""

    kind = "broker"

    def __init__(self, port: int | None, startup_timeout: float, log_path: str | None):
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path else None
        self._proc: subprocess.Popen | None = None
        self._ready = False

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` to hand to any Kafka client."""
        return f"{self.host}:{self.port}"

    @property
    def connection(self):
        """The broker as a ``KafkaConnection`` (what every statekit Kafka call accepts); a
        broker started with ``start(wait=False)`` is waited for here, so a statekit call given
        the broker itself never finds it still booting."""
        from statekit.model.connection import KafkaConnection

        if self._proc is not None and not self._ready:
            self.wait_ready()
        return KafkaConnection(self.bootstrap_servers)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _ports(self) -> dict[str, int]:
        return {"client": self.port}

    def _command(self) -> tuple[list[str], Mapping[str, str]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self, wait: bool = True) -> BrokerProcess:
        """Start the broker and wait until it answers; returns self.

        ``wait=False`` returns once the process is started, so that the broker boots while
        something else does (a Spark session: ``sk.spark_session`` takes seconds too); the
        first statekit call given the broker, or ``wait_ready()``, then waits for it.

        Example:
            >>> broker = EmbeddedBroker().start(wait=False)           # doctest: +SKIP
            >>> spark = sk.spark_session()    # both boot at once     # doctest: +SKIP
            >>> replay(game_events(), broker, "games")  # waits for it  # doctest: +SKIP
        """
        if self.running:
            return self.wait_ready() if wait else self
        self._ready = False
        self._launch()
        return self.wait_ready() if wait else self

    def wait_ready(self) -> BrokerProcess:
        """Wait until a broker started with ``start(wait=False)`` answers; returns self. A
        broker that exits or does not answer in ``startup_timeout`` is stopped and named."""
        if self._ready:
            return self
        if self._proc is None:
            raise StatekitError(f"the embedded {self.kind} on {self.bootstrap_servers} is not "
                                "started: call start()")
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self._ready = True
        return self

    def _launch(self) -> None:
        """Start the child process without waiting for it to answer (``start`` waits).

        Call it on a thread that outlives the broker (the main thread, say): Linux sends the
        child its parent-death signal when the *thread* that started it ends, not the process.
        """
        for what, port in self._ports().items():
            _bind_check(self.host, port, what, f"the embedded {self.kind}")
        cmd, env = self._command()  # may raise, naming what is missing, before any child
        if self.log_path is None:
            self.log_path = Path(tempfile.mkstemp(prefix="statekit-broker-", suffix=".log")[1])
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self._proc = spawn(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           env={**os.environ, **env})
        log.close()
        _LIVE.add(self)

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the broker's own output (where it says why it stopped)."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:] if self.log_path else ""
        except OSError:
            return ""

    def _wait_ready(self) -> None:
        from statekit.errors import BrokerUnreachable
        from statekit.kafka.clients import check_reachable

        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                raise StatekitError(
                    f"the embedded {self.kind} exited with code {self._proc.returncode} before "
                    f"answering on {self.bootstrap_servers}; its log ({self.log_path}):\n"
                    f"{self.log_tail()}")
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                check_reachable(self.bootstrap_servers, timeout=2.0)
                return
            except (ConnectionError, OSError, BrokerUnreachable):
                if time.monotonic() > deadline:
                    raise StatekitError(
                        f"the embedded {self.kind} did not answer on {self.bootstrap_servers} "
                        f"within {self.startup_timeout:g} s; its log ({self.log_path}):\n"
                        f"{self.log_tail()}") from None
                time.sleep(0.1)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout`` seconds). Idempotent."""
        from statekit.kafka.clients import forget_clients

        proc, self._proc, self._ready = self._proc, None, False
        forget_clients(self.bootstrap_servers)
        if proc is not None:
            stop_process(proc, timeout)

    def kill(self) -> None:
        """``kill -9`` the broker (a crash drill): nothing flushed, nothing shut down."""
        from statekit.kafka.clients import forget_clients

        proc, self._proc, self._ready = self._proc, None, False
        forget_clients(self.bootstrap_servers)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def close(self) -> None:
        """Stop the broker for good (what ``with`` and interpreter exit do)."""
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"{type(self).__name__}({self.bootstrap_servers!r}, {state})"



@atexit.register
def _stop_all() -> None:
    for broker in list(_LIVE):
        with contextlib.suppress(Exception):
            broker.close()
