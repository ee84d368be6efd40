"""A Spark Connect server on this machine, and statekit's sessions through it.

Spark Connect splits PySpark in two: the driver (the JVM that plans and runs queries)
runs in a server, and Python talks to it over gRPC (``sc://host:port``) with no JVM of
its own. PySpark's pip package ships the server (``jars/spark-connect_*.jar``) and its
launcher ``sbin/start-connect-server.sh``; ``connect_server()`` starts the class that
script starts (``org.apache.spark.sql.connect.service.SparkConnectServer``) through
``spark-submit``, in the foreground and through ``statekit.processes.spawn``, so the server
dies with the Python process that started it (the script daemonises it, which would
outlive a crashed notebook). The server runs with statekit's session settings (RocksDB
state store with changelog checkpointing, ``DEFAULT_CONF``) on ``local[2]`` or any master.

What works through Connect (tested in ``tests/spark/test_spark_connect.py``): statekit's Kafka
source (a Python data source: registered from the client, run by the server's Python
workers), ``start_query`` with its changelog writer, ``snapshot()``, ``changes()`` and
``metadata()`` (the State Data Source readers ``statestore`` and ``state-metadata`` are
plain DataFrame reads), and the progress listener (``progress_listener``, run on the
client since Spark 4). What does not, and why, is in ``NOT_ON_CONNECT``; statekit raises
``NotOnConnect`` naming the call there (see ``require_classic``).

The client and the server must see the same files: statekit reads a checkpoint's files
(progress reports, commit logs) from the client's file system, and Spark writes them from
the server's. On one machine that holds; across machines the checkpoint must be on a
shared file system mounted at the same path on both.

Example:
    >>> with connect_server() as server:                 # doctest: +SKIP
    ...     spark = server.session()                     # a Connect session, sc://localhost:PORT
    ...     q = start_query("games", GAME_SPEC, spark=spark,
    ...                     source_options=SourceOptions(kafka=broker))
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from subprocess import DEVNULL, STDOUT, Popen

from statekit.errors import NotOnConnect, StatekitError
from statekit.ports import free_port
from statekit.processes import spawn, stop

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

#: Calls statekit cannot make through Spark Connect, and why (the text of ``NotOnConnect``).
NOT_ON_CONNECT: dict[str, str] = {
    "SparkSession.sparkContext": (
        "a Connect client has no SparkContext (the driver runs in the server); statekit "
        "reads what it needs from Spark's settings instead (see default_parallelism)"),
    "kafka_format (spark._jvm)": (
        "a Connect client has no JVM to look up Spark's Kafka connector in; statekit uses "
        "its own Python Kafka source, which runs in the server's Python workers"),
    "a classic and a Connect session in one process": (
        "pyspark.sql.functions builds Connect columns or classic ones for the whole process "
        "(SPARK_CONNECT_MODE_ENABLED), so a process that runs a classic SparkContext cannot "
        "also use a Connect session; use a child process"),
}


def is_connect(spark: object) -> bool:
    """True for a Spark Connect session (``sc://``), False for a classic one.

    Example:
        >>> is_connect(object())
        False
    """
    return type(spark).__module__.startswith("pyspark.sql.connect")


def require_classic(spark: object, call: str) -> None:
    """Raise ``NotOnConnect(call)`` when ``spark`` is a Connect session.

    Example:
        >>> require_classic(object(), "SparkSession.sparkContext")   # a classic one: no error
    """
    if is_connect(spark):
        raise NotOnConnect(call, NOT_ON_CONNECT.get(call))


def default_parallelism(spark: object) -> int:
    """How many tasks ``spark`` runs at once by default: ``sparkContext.defaultParallelism``
    on a classic session; on Spark Connect (no SparkContext) the setting
    ``spark.default.parallelism``, else this machine's CPU count.

    Example:
        >>> default_parallelism(spark)          # doctest: +SKIP
        2
    """
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism  # type: ignore[attr-defined]
    value = spark.conf.get("spark.default.parallelism", None)  # type: ignore[attr-defined]
    return int(value) if value else (os.cpu_count() or 2)


class ConnectServer:
    """A Spark Connect server process: see ``connect_server``."""

    def __init__(self, master: str = "local[2]", port: int | None = None,
                 conf: dict[str, str] | None = None, timeout: float = 240.0):
        from statekit.validate import whole_number

        self.master = master
        self.port = free_port() if port is None else whole_number(port, "port", minimum=1,
                                                                    maximum=65535)
        self.conf, self.timeout = dict(conf or {}), timeout
        self.directory: Path | None = None
        self._proc: Popen | None = None
        self._log = None

    @property
    def url(self) -> str:
        """``sc://localhost:PORT``: what ``SparkSession.builder.remote`` takes."""
        return f"sc://localhost:{self.port}"

    def start(self) -> ConnectServer:
        """Start the server; return once it accepts connections."""
        if self._proc is not None:
            return self
        import pyspark

        from statekit.spark.session import DEFAULT_CONF, java_options
        from statekit.spark.worker_home import worker_spark_home

        settings = {**DEFAULT_CONF, "spark.driver.extraJavaOptions": java_options(),
                    "spark.connect.grpc.binding.port": str(self.port),
                    "spark.connect.grpc.binding.address": "127.0.0.1",
                    "spark.driver.memory": "1g", **self.conf}
        home = Path(pyspark.__file__).resolve().parent
        self.directory = Path(tempfile.mkdtemp(prefix="statekit-connect-"))
        args = ["bash", str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                "--name", "Spark Connect server", "--master", self.master]
        for key, value in settings.items():
            args += ["--conf", f"{key}={value}"]
        env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
               "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(self.directory)}
        spark_home = os.environ.get("SPARK_HOME") or worker_spark_home()
        if spark_home:
            env["SPARK_HOME"] = spark_home
        self._log = open(self.directory / "server.log", "wb")  # noqa: SIM115 - closed in stop
        self._proc = spawn(args, env=env, stdout=self._log, stderr=STDOUT, stdin=DEVNULL,
                           cwd=self.directory)
        try:
            self._wait_until_listening()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the server (its running queries end with it); delete its log directory."""
        if self._proc is not None:
            stop(self._proc, timeout)
        if self._log is not None:
            self._log.close()
        self._proc, self._log = None, None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """The server JVM's process id (None when stopped)."""
        return None if self._proc is None else self._proc.pid

    def log_text(self) -> str:
        """The server's log so far (stdout and stderr)."""
        path = None if self.directory is None else self.directory / "server.log"
        return path.read_text(errors="replace") if path is not None and path.exists() else ""

    def session(self):
        """A Spark Connect session on this server (see ``connect_session``)."""
        return connect_session(self.url)

    def _wait_until_listening(self) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            assert self._proc is not None
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=1):
                return
            exited = self._proc.poll() is not None
            if exited or time.monotonic() > deadline:
                tail = "\n".join(self.log_text().splitlines()[-20:])
                why = (f"exited with code {self._proc.returncode}" if exited
                       else f"did not listen on port {self.port} within {self.timeout:.0f} s")
                raise StatekitError(f"the Spark Connect server {why}; last lines of its log:\n"
                                    f"{tail}")
            time.sleep(0.2)

    def __repr__(self) -> str:
        state = "running" if self._proc is not None else "stopped"
        return f"ConnectServer({self.url!r}, master={self.master!r}, {state})"


def connect_server(master: str = "local[2]", port: int | None = None,
                   conf: dict[str, str] | None = None, timeout: float = 240.0) -> ConnectServer:
    """Start a Spark Connect server for ``master`` on ``port`` (a free one when None);
    returns it running (use it in a ``with`` block, or call ``stop()``).

    Example:
        >>> server = connect_server()       # doctest: +SKIP
        >>> server.url                      # doctest: +SKIP
        'sc://localhost:41877'
        >>> server.stop()                   # doctest: +SKIP
    """
    return ConnectServer(master, port, conf, timeout).start()


def connect_session(url: str):
    """A Spark Connect session on ``url`` (``sc://host:port``), with statekit's settings.

    Raises ``NotOnConnect`` when this process already runs a classic SparkContext:
    PySpark picks Connect or classic columns for the whole process.

    Example:
        >>> connect_session("sc://localhost:15002")      # doctest: +SKIP
    """
    from statekit.errors import BadArgument

    if not isinstance(url, str) or not url.startswith("sc://"):
        raise BadArgument("Spark Connect URL", url, "sc://host:port, e.g. sc://localhost:15002")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        raise NotOnConnect("a classic and a Connect session in one process")
    return SparkSession.builder.remote(url).getOrCreate()
